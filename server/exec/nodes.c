/* The nodes a coordinator knows: see nodes.h. */
#include "nodes.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

typedef struct {
    int id; /* 0: a free entry */
    char name[NODE_NAME_MAX], address[NODE_ADDR_MAX];
    int slots, n_gpus;
    char *gpus[NODE_MAX_DEVICES];
    int64_t owner[2][NODE_MAX_DEVICES]; /* per pool and device: the run holding it, or 0 */
    int64_t registered_at, heard_at;    /* wall ms */
    int64_t heard_mono;
    bool lost;
} node;

static struct {
    pthread_mutex_t mu;
    node nodes[NODES_MAX];
    int next_id;
    int64_t timeout_ms;
} N = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

void nodes_init(int64_t timeout_ms) { N.timeout_ms = timeout_ms; }

static node *find_locked(int id) {
    for (int i = 0; i < NODES_MAX; i++)
        if (id > 0 && N.nodes[i].id == id) return &N.nodes[i];
    return NULL;
}

static int capacity(const node *n, int pool) { return pool == NODE_POOL_GPU ? n->n_gpus : n->slots; }

static int held(const node *n, int pool, int from) {
    int k = 0;
    for (int i = from; i < NODE_MAX_DEVICES; i++) k += n->owner[pool][i] != 0;
    return k;
}

int nodes_register(const node_spec *s, char *err, size_t errlen) {
    pthread_mutex_lock(&N.mu);
    node *n = NULL, *empty = NULL;
    for (int i = 0; i < NODES_MAX; i++) {
        if (N.nodes[i].id && strcmp(N.nodes[i].name, s->name) == 0) n = &N.nodes[i];
        if (!N.nodes[i].id && !empty) empty = &N.nodes[i];
    }
    int id = -1;
    if (!n && !empty) {
        snprintf(err, errlen, "this coordinator already has %d nodes, its most", NODES_MAX);
    } else if (n && (held(n, NODE_POOL_CPU, s->slots) || held(n, NODE_POOL_GPU, s->n_gpus))) {
        snprintf(err, errlen, "node %s registers again with fewer devices than the runs on it hold", s->name);
    } else {
        if (!n) {
            n = empty;
            memset(n, 0, sizeof *n);
            n->id = N.next_id++;
            snprintf(n->name, sizeof n->name, "%s", s->name);
            n->registered_at = now_ms();
        }
        for (int i = 0; i < n->n_gpus; i++) free(n->gpus[i]);
        snprintf(n->address, sizeof n->address, "%s", s->address);
        n->slots = s->slots < NODE_MAX_DEVICES ? s->slots : NODE_MAX_DEVICES;
        n->n_gpus = s->n_gpus < NODE_MAX_DEVICES ? s->n_gpus : NODE_MAX_DEVICES;
        for (int i = 0; i < n->n_gpus; i++) n->gpus[i] = xstrdup(s->gpus[i]);
        n->heard_at = now_ms();
        n->heard_mono = mono_ms();
        n->lost = false;
        id = n->id;
    }
    pthread_mutex_unlock(&N.mu);
    return id;
}

bool nodes_heard(int id) {
    pthread_mutex_lock(&N.mu);
    node *n = find_locked(id);
    bool ok = n && !n->lost;
    if (ok) {
        n->heard_at = now_ms();
        n->heard_mono = mono_ms();
    }
    pthread_mutex_unlock(&N.mu);
    return ok;
}

bool nodes_describe(int id, char *name, size_t name_len, char *address, size_t address_len) {
    pthread_mutex_lock(&N.mu);
    node *n = find_locked(id);
    if (n) {
        snprintf(name, name_len, "%s", n->name);
        snprintf(address, address_len, "%s", n->address);
    }
    pthread_mutex_unlock(&N.mu);
    return n != NULL;
}

int nodes_free(int id, node_pool pool) {
    pthread_mutex_lock(&N.mu);
    node *n = find_locked(id);
    int free_n = -1;
    if (n && !n->lost) {
        free_n = 0;
        for (int i = 0; i < capacity(n, pool); i++) free_n += n->owner[pool][i] == 0;
    }
    pthread_mutex_unlock(&N.mu);
    return free_n;
}

bool nodes_device_free(int id, node_pool pool, int i) {
    pthread_mutex_lock(&N.mu);
    node *n = find_locked(id);
    bool yes = n && !n->lost && i >= 0 && i < capacity(n, pool) && n->owner[pool][i] == 0;
    pthread_mutex_unlock(&N.mu);
    return yes;
}

int nodes_capacity(int id, node_pool pool) {
    pthread_mutex_lock(&N.mu);
    node *n = find_locked(id);
    int cap = n && !n->lost ? capacity(n, pool) : -1;
    pthread_mutex_unlock(&N.mu);
    return cap;
}

int nodes_up(int *ids, int max) {
    pthread_mutex_lock(&N.mu);
    int k = 0;
    /* registration order is id order */
    for (int want = 1; want < N.next_id && k < max; want++) {
        node *n = find_locked(want);
        if (n && !n->lost) ids[k++] = n->id;
    }
    pthread_mutex_unlock(&N.mu);
    return k;
}

int nodes_take(int id, node_pool pool, int count, int64_t run_id, const bool *last, int *devices) {
    pthread_mutex_lock(&N.mu);
    node *n = find_locked(id);
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; n && !n->lost && i < capacity(n, pool) && k < count; i++)
            if (n->owner[pool][i] == 0 && (last && last[i]) == pass) devices[k++] = i;
    bool ok = k == count;
    for (int j = 0; ok && j < count; j++) n->owner[pool][devices[j]] = run_id;
    pthread_mutex_unlock(&N.mu);
    return ok ? 0 : -1;
}

void nodes_release(int id, int64_t run_id) {
    pthread_mutex_lock(&N.mu);
    node *n = find_locked(id);
    for (int p = 0; n && p < 2; p++)
        for (int i = 0; i < NODE_MAX_DEVICES; i++)
            if (n->owner[p][i] == run_id) n->owner[p][i] = 0;
    pthread_mutex_unlock(&N.mu);
}

const char *nodes_gpu_id(int id, int i) {
    pthread_mutex_lock(&N.mu);
    node *n = find_locked(id);
    const char *g = n && i >= 0 && i < n->n_gpus ? n->gpus[i] : ""; /* never freed while a run holds it */
    pthread_mutex_unlock(&N.mu);
    return g;
}

int nodes_take_lost(int64_t now, int *ids, int64_t *silent_ms, int max) {
    pthread_mutex_lock(&N.mu);
    int k = 0;
    for (int i = 0; i < NODES_MAX && k < max; i++) {
        node *n = &N.nodes[i];
        if (!n->id || n->lost || now - n->heard_mono <= N.timeout_ms) continue;
        n->lost = true;
        ids[k] = n->id;
        silent_ms[k++] = now - n->heard_mono;
    }
    pthread_mutex_unlock(&N.mu);
    return k;
}

json_t *nodes_to_json(void) {
    json_t *a = json_array();
    pthread_mutex_lock(&N.mu);
    for (int want = 1; want < N.next_id; want++) {
        node *n = find_locked(want);
        if (!n) continue;
        json_t *gpus = json_array();
        int free_slots = 0, free_gpus = 0;
        for (int i = 0; i < n->n_gpus; i++) {
            json_array_append_new(gpus, json_string(n->gpus[i]));
            free_gpus += n->owner[NODE_POOL_GPU][i] == 0;
        }
        for (int i = 0; i < n->slots; i++) free_slots += n->owner[NODE_POOL_CPU][i] == 0;
        json_array_append_new(a, json_pack("{s:i, s:s, s:s, s:b, s:s, s:i, s:i, s:o, s:i, s:o, s:o}", "id", n->id,
                                           "name", n->name, "address", n->address, "local", 0, "state",
                                           n->lost ? "lost" : "up", "slots", n->slots, "free_slots", free_slots,
                                           "gpus", gpus, "free_gpus", free_gpus, "registered_at",
                                           json_time(n->registered_at), "last_heartbeat", json_time(n->heard_at)));
    }
    pthread_mutex_unlock(&N.mu);
    return a;
}

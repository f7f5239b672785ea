/* The runs' rendezvous tables: see rendezvous.h. One lock over every table; a table
 * is a hash of its keys (open addressing, linear probing, at most half full), since a
 * run of many ranks writes and polls thousands of them. Keys are never removed one by
 * one: a table goes whole when its run finishes. */
#include "rendezvous.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "secret.h"

typedef struct {
    char *key;   /* NULL: a free slot */
    size_t key_len;
    char *value;
    size_t value_len;
} rdv_entry;

typedef struct rdv_table {
    int64_t run;
    char secret[80];
    size_t n_keys;
    size_t bytes;      /* of its keys and values */
    size_t cap;        /* slots: 0 (none yet) or a power of two */
    rdv_entry *slots;
    struct rdv_table *next;
} rdv_table;

static struct {
    pthread_mutex_t mu;
    rdv_table *tables; /* one per live run */
} R = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* FNV-1a */
static uint64_t hash_key(const char *key, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* The slot that holds `key`, or the free slot where it would go. t->cap > 0. */
static rdv_entry *slot_of(rdv_table *t, const char *key, size_t len) {
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)hash_key(key, len) & mask;; i = (i + 1) & mask) {
        rdv_entry *e = &t->slots[i];
        if (!e->key || (e->key_len == len && memcmp(e->key, key, len) == 0)) return e;
    }
}

/* Room for one more key, at most half the slots used. */
static void make_room(rdv_table *t) {
    if ((t->n_keys + 1) * 2 <= t->cap) return;
    rdv_table grown = *t;
    grown.cap = t->cap ? t->cap * 2 : 16;
    grown.slots = xcalloc(grown.cap, sizeof *grown.slots);
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].key) *slot_of(&grown, t->slots[i].key, t->slots[i].key_len) = t->slots[i];
    free(t->slots);
    t->slots = grown.slots;
    t->cap = grown.cap;
}

static void free_table(rdv_table *t) {
    for (size_t i = 0; i < t->cap; i++) {
        free(t->slots[i].key);
        free(t->slots[i].value);
    }
    free(t->slots);
    free(t);
}

static rdv_table *find_locked(int64_t run) {
    for (rdv_table *t = R.tables; t; t = t->next)
        if (t->run == run) return t;
    return NULL;
}

static void close_locked(int64_t run) {
    for (rdv_table **p = &R.tables; *p; p = &(*p)->next) {
        if ((*p)->run == run) {
            rdv_table *t = *p;
            *p = t->next;
            free_table(t);
            return;
        }
    }
}

void rendezvous_open(int64_t run, const char *secret) {
    rdv_table *t = xcalloc(1, sizeof *t);
    t->run = run;
    snprintf(t->secret, sizeof t->secret, "%s", secret ? secret : "");
    pthread_mutex_lock(&R.mu);
    close_locked(run);
    t->next = R.tables;
    R.tables = t;
    pthread_mutex_unlock(&R.mu);
}

void rendezvous_close(int64_t run) {
    pthread_mutex_lock(&R.mu);
    close_locked(run);
    pthread_mutex_unlock(&R.mu);
}

/* The run's table, when the secret is its: else NULL with why in *why. */
static rdv_table *checked_locked(int64_t run, const char *secret, rendezvous_result *why) {
    rdv_table *t = find_locked(run);
    if (!t) *why = RDV_NOT_ACTIVE;
    else if (!secret_equal(secret, t->secret)) *why = RDV_BAD_SECRET; /* (an empty held secret opens nothing) */
    else return t;
    return NULL;
}

rendezvous_result rendezvous_put(int64_t run, const char *secret, const char *key, size_t key_len, const char *value,
                                 size_t value_len) {
    rendezvous_result res;
    pthread_mutex_lock(&R.mu);
    rdv_table *t = checked_locked(run, secret, &res);
    if (t) {
        rdv_entry *e = t->cap ? slot_of(t, key, key_len) : NULL;
        if (e && e->key)
            res = e->value_len == value_len && memcmp(e->value, value, value_len) == 0 ? RDV_SAME : RDV_CONFLICT;
        else if (t->n_keys >= RENDEZVOUS_KEYS_MAX)
            res = RDV_FULL;
        else {
            make_room(t);
            e = slot_of(t, key, key_len);
            e->key = xmalloc(key_len + 1);
            memcpy(e->key, key, key_len);
            e->key[key_len] = '\0';
            e->key_len = key_len;
            e->value = xmalloc(value_len + 1);
            memcpy(e->value, value, value_len);
            e->value[value_len] = '\0';
            e->value_len = value_len;
            t->n_keys++;
            t->bytes += key_len + value_len;
            res = RDV_CREATED;
        }
    }
    pthread_mutex_unlock(&R.mu);
    return res;
}

rendezvous_result rendezvous_get(int64_t run, const char *secret, const char *key, size_t key_len, char **value,
                                 size_t *value_len) {
    *value = NULL;
    *value_len = 0;
    rendezvous_result res;
    pthread_mutex_lock(&R.mu);
    rdv_table *t = checked_locked(run, secret, &res);
    if (t) {
        rdv_entry *e = t->cap ? slot_of(t, key, key_len) : NULL;
        if (e && e->key) {
            *value = xmalloc(e->value_len + 1);
            memcpy(*value, e->value, e->value_len + 1);
            *value_len = e->value_len;
            res = RDV_FOUND;
        } else {
            res = RDV_NOT_SET;
        }
    }
    pthread_mutex_unlock(&R.mu);
    return res;
}

void rendezvous_take_stats(rendezvous_stats *out) {
    *out = (rendezvous_stats){0};
    pthread_mutex_lock(&R.mu);
    for (rdv_table *t = R.tables; t; t = t->next) {
        out->runs++;
        out->keys += t->n_keys;
        out->bytes += t->bytes;
    }
    pthread_mutex_unlock(&R.mu);
}

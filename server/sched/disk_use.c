/* Each user's disk use: see disk_use.h. */
#include "disk_use.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "byte_size.h"
#include "dir_usage.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"
#include "thread_start.h"
#include "users.h"

/* The live runs are walked again this often (their checkpoints and ends are walked
 * as they come). */
#define REFRESH_MS (5 * 60 * 1000)

typedef struct {
    int64_t id;
    char owner[72]; /* "": nobody in particular */
    int64_t bytes;  /* -1: never measured */
    bool finished;
    bool incomplete; /* its last walk stopped at a limit */
} run_use;

/* A walk asked for: of run `id`, after its checkpoint `checkpoint` ("" none). */
typedef struct walk_req {
    int64_t id;
    char checkpoint[96];
    struct walk_req *next;
} walk_req;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv, loaded_cv;
    pthread_t thread;
    bool started, stopping;
    bool loaded; /* the history read (by the thread, after start: a start does not wait for it) */
    run_use *runs;
    size_t n, cap;
    walk_req *head, *tail;
    int64_t next_refresh; /* mono ms */
    bool (*fail)(int64_t id, const char *reason); /* how a run past its owner's quota is failed */
} D = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .loaded_cv = PTHREAD_COND_INITIALIZER};

/* Under D.mu: until the thread has read the history, a sum would miss it: wait. */
static void wait_loaded_locked(void) {
    while (D.started && !D.loaded && !D.stopping) pthread_cond_wait(&D.loaded_cv, &D.mu);
}

/* Under D.mu. D.runs is kept in ascending id order (a start reads them so, a new run
 * has the highest id, a deletion closes its gap): a lookup is a binary search, and a
 * start with a long history costs no more than reading it. */
static size_t lower_bound_locked(int64_t id) {
    size_t lo = 0, hi = D.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (D.runs[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static run_use *find_locked(int64_t id) {
    size_t i = lower_bound_locked(id);
    return i < D.n && D.runs[i].id == id ? &D.runs[i] : NULL;
}

static run_use *add_locked(int64_t id, const char *owner) {
    size_t i = lower_bound_locked(id);
    if (i < D.n && D.runs[i].id == id) return &D.runs[i];
    if (D.n == D.cap) D.runs = xrealloc(D.runs, (D.cap = D.cap ? 2 * D.cap : 64) * sizeof *D.runs);
    memmove(&D.runs[i + 1], &D.runs[i], (D.n - i) * sizeof *D.runs);
    D.n++;
    run_use *r = &D.runs[i];
    *r = (run_use){.id = id, .bytes = -1};
    snprintf(r->owner, sizeof r->owner, "%s", owner ? owner : "");
    return r;
}

/* Queues a walk (a run already queued is not queued twice, unless for a checkpoint;
 * `fresh`: the caller knows it is not queued, as at start, where a history of runs
 * never measured would otherwise cost a look through the queue each). */
static void queue_locked(int64_t id, const char *checkpoint, bool fresh) {
    for (walk_req *w = D.head; w && !checkpoint && !fresh; w = w->next)
        if (w->id == id) return;
    walk_req *w = xcalloc(1, sizeof *w);
    w->id = id;
    if (checkpoint) {
        const char *base = strrchr(checkpoint, '/');
        snprintf(w->checkpoint, sizeof w->checkpoint, "%s", base ? base + 1 : checkpoint);
    }
    if (D.tail) D.tail->next = w;
    else D.head = w;
    D.tail = w;
    pthread_cond_signal(&D.cv);
}

static void ask_locked(int64_t id, const char *checkpoint) { queue_locked(id, checkpoint, false); }

/* Under D.mu: the sum of `owner`'s runs as measured (-1: none measured), and
 * whether a walk of one of them was cut short. */
static int64_t sum_locked(const char *owner, bool *incomplete) {
    int64_t sum = -1;
    *incomplete = false;
    for (size_t i = 0; i < D.n; i++) {
        const run_use *r = &D.runs[i];
        if (strcmp(r->owner, owner) != 0 || r->bytes < 0) continue;
        sum = (sum < 0 ? 0 : sum) + r->bytes;
        *incomplete |= r->incomplete;
    }
    return sum;
}

int64_t disk_use_of(const char *owner) {
    bool incomplete;
    pthread_mutex_lock(&D.mu);
    wait_loaded_locked();
    int64_t sum = sum_locked(owner ? owner : "", &incomplete);
    pthread_mutex_unlock(&D.mu);
    return sum;
}

/* Whether `owner` is past `quota` (>= 0), with the sentence; under D.mu. */
static bool over_locked(const char *owner, long long quota, char *why, size_t whylen) {
    bool incomplete;
    int64_t used = sum_locked(owner, &incomplete);
    if (quota < 0 || (used <= quota && !incomplete)) return false;
    char u[32], q[32];
    byte_size_format(used < 0 ? 0 : (uint64_t)used, u, sizeof u);
    byte_size_format((uint64_t)quota, q, sizeof q);
    if (incomplete)
        snprintf(why, whylen, "%s's runs hold at least %s on disk, and a run directory of theirs could not be "
                 "measured to its end (too deep, or too many files), which counts as past the quota of %s (ddpd user "
                 "set %s --max-disk-gb)", owner, u, q, owner);
    else
        snprintf(why, whylen, "%s's runs hold %s on disk, past the quota of %s (ddpd user set %s --max-disk-gb)",
                 owner, u, q, owner);
    return true;
}

bool disk_use_over(const char *owner, long long quota, char *why, size_t whylen) {
    pthread_mutex_lock(&D.mu);
    wait_loaded_locked();
    bool over = owner && over_locked(owner, quota, why, whylen);
    pthread_mutex_unlock(&D.mu);
    return over;
}

void disk_use_run_added(int64_t id, const char *owner) {
    pthread_mutex_lock(&D.mu);
    add_locked(id, owner)->bytes = 0; /* its directory is new: nothing in it yet */
    pthread_mutex_unlock(&D.mu);
}

void disk_use_checkpoint(int64_t id, const char *path) {
    pthread_mutex_lock(&D.mu);
    if (D.started && find_locked(id)) ask_locked(id, path ? path : "");
    pthread_mutex_unlock(&D.mu);
}

void disk_use_run_ended(int64_t id) {
    pthread_mutex_lock(&D.mu);
    run_use *r = find_locked(id);
    if (r) r->finished = true;
    if (r && D.started) ask_locked(id, NULL);
    pthread_mutex_unlock(&D.mu);
}

void disk_use_run_deleted(int64_t id) {
    pthread_mutex_lock(&D.mu);
    run_use *r = find_locked(id);
    if (r) { /* the order kept */
        size_t i = (size_t)(r - D.runs);
        memmove(&D.runs[i], &D.runs[i + 1], (D.n - i - 1) * sizeof *D.runs);
        D.n--;
    }
    pthread_mutex_unlock(&D.mu);
}

/* A run past its owner's quota at its checkpoint is failed, resumable from it. */
static void judge_checkpoint(int64_t id, const char *owner, const char *checkpoint) {
    user_info u;
    if (!owner[0] || !users_find(owner, &u) || u.removed || u.max_disk_gb < 0) return;
    char why[512];
    pthread_mutex_lock(&D.mu);
    bool over = over_locked(owner, users_gb_bytes(u.max_disk_gb), why, sizeof why);
    pthread_mutex_unlock(&D.mu);
    if (!over) return;
    char *reason = xasprintf("%s: the run was stopped at its checkpoint %s; delete runs %s no longer needs (DELETE "
                             "/runs/{id}, ddpctl delete) or ask an admin for a larger quota, then resume it from that "
                             "checkpoint (POST /runs/%lld/resume)", why, checkpoint, owner, (long long)id);
    if (D.fail(id, reason)) log_warn("run %lld: %s", (long long)id, reason);
    free(reason);
}

/* Walks run `id`'s directory and keeps what it holds. */
static void walk(const walk_req *w) {
    char *dir = layout_run_dir(w->id);
    dir_usage du;
    int rc = dir_usage_measure(dir, NULL, &du);
    free(dir);
    char owner[72] = "";
    pthread_mutex_lock(&D.mu);
    run_use *r = find_locked(w->id);
    if (r && rc == 0) {
        r->bytes = (int64_t)du.bytes;
        r->incomplete = du.incomplete;
        snprintf(owner, sizeof owner, "%s", r->owner);
    }
    pthread_mutex_unlock(&D.mu);
    if (rc != 0 || !r) return; /* gone meanwhile (deleted), or its directory with it */
    if (du.incomplete)
        log_warn("run %lld: its directory was measured only down to a limit: %s (%llu bytes counted)", (long long)w->id,
                 du.why, (unsigned long long)du.bytes);
    store_op op = {.kind = OP_RUN_DISK, .run_id = w->id, .t = now_ms()};
    op.u.disk.bytes = (int64_t)du.bytes;
    store_submit_now(&op);
    if (w->checkpoint[0]) judge_checkpoint(w->id, owner, w->checkpoint);
}

/* Every run's owner, bytes and end, from the database (an index of a few bytes a run,
 * runs_disk): what a start of a long history would otherwise wait for, read here, in
 * this thread, while the server already answers (a quota asked meanwhile waits). */
static void load_history(void) {
    run_disk *runs = NULL;
    int n = store_list_disk(&runs);
    if (n < 0) log_error("cannot read the runs' disk use from the database: quotas count only the runs from now on");
    pthread_mutex_lock(&D.mu);
    for (int i = 0; i < n; i++) {
        run_use *r = find_locked(runs[i].id);
        if (r) continue; /* added since (a new run): as it is */
        r = add_locked(runs[i].id, runs[i].owner);
        r->bytes = runs[i].bytes;
        r->finished = runs[i].finished;
        if (r->bytes < 0) queue_locked(r->id, NULL, true); /* never measured (a run from before); ids are unique */
    }
    D.loaded = true;
    pthread_cond_broadcast(&D.loaded_cv);
    pthread_mutex_unlock(&D.mu);
    free(runs);
}

static void *walker(void *arg) {
    (void)arg;
    load_history();
    pthread_mutex_lock(&D.mu);
    while (!D.stopping) {
        if (mono_ms() >= D.next_refresh) { /* the live runs, again */
            D.next_refresh = mono_ms() + REFRESH_MS;
            for (size_t i = 0; i < D.n; i++)
                if (!D.runs[i].finished) ask_locked(D.runs[i].id, NULL);
        }
        walk_req *w = D.head;
        if (!w) {
            struct timespec until = realtime_in_ms(REFRESH_MS);
            pthread_cond_timedwait(&D.cv, &D.mu, &until);
            continue;
        }
        D.head = w->next;
        if (!D.head) D.tail = NULL;
        pthread_mutex_unlock(&D.mu);
        walk(w);
        free(w);
        pthread_mutex_lock(&D.mu);
    }
    pthread_mutex_unlock(&D.mu);
    return NULL;
}

int disk_use_start(bool (*fail)(int64_t id, const char *reason), char *err, size_t errlen) {
    D.fail = fail;
    pthread_mutex_lock(&D.mu);
    D.next_refresh = 0; /* the live runs at once */
    D.stopping = false;
    D.loaded = false;
    pthread_mutex_unlock(&D.mu);
    return thread_start(&D.thread, walker, &D.started, "the disk use's thread", err, errlen);
}

void disk_use_stop(void) {
    thread_stop(D.thread, &D.mu, &D.cv, &D.stopping, &D.started);
    pthread_mutex_lock(&D.mu);
    pthread_cond_broadcast(&D.loaded_cv); /* nobody waits on a stopped thread's load */
    D.loaded = false;
    while (D.head) {
        walk_req *w = D.head;
        D.head = w->next;
        free(w);
    }
    D.tail = NULL;
    free(D.runs);
    D.runs = NULL;
    D.n = D.cap = 0;
    pthread_mutex_unlock(&D.mu);
}

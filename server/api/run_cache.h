/* The serialised answers of GET /runs/{id}, kept per run with the run's version
 * (run_versions.h) when they were built: while the version is unchanged, the route
 * serves the bytes kept here, with no query and no JSON built.
 *
 * Bounded: at most RUN_CACHE_RUNS runs and RUN_CACHE_BYTES of answers, the least
 * recently served going first. A queued run's answer also holds its place in the
 * queue and what it waits for (the scheduler's, which change as other runs start or
 * leave and nodes come and go), kept with it so that the route can tell when they moved. Safe from any thread: the HTTP threads
 * read and fill it; the store's writer drops a deleted run's answer (store.h). */
#ifndef DDPD_SERVER_API_RUN_CACHE_H
#define DDPD_SERVER_API_RUN_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUN_CACHE_RUNS 1024
#define RUN_CACHE_BYTES (64u << 20)

typedef struct {
    uint64_t version;
    bool queued;        /* the answer says "queued" ... */
    int queue_position; /* ... at this place */
    uint32_t waiting_hash; /* ... waiting for what hashes so (its waiting_for) */
    bool secrets;       /* it holds what only its owner and admins see (run_mask.h) */
    char owner[65];     /* the run's owner; "": none */
    char *body;         /* malloc'd copy (when asked for), with its length */
    size_t len;
} run_cache_entry;

/* The answer kept for run `id` under `version`: true and *out filled (out->body a
 * copy the caller frees, when `want_body`; NULL otherwise). False when there is none
 * for that version. */
bool run_cache_get(int64_t id, uint64_t version, bool want_body, run_cache_entry *out);
/* Keeps a copy of `body` as run `id`'s answer under e->version (unless a newer one is
 * kept already). */
void run_cache_put(int64_t id, const run_cache_entry *e, const char *body, size_t len);
/* Drops run `id`'s answer (a deleted run). */
void run_cache_forget(int64_t id);
/* Everything, at shutdown. */
void run_cache_clear(void);

/* For /metrics: answers served from here or built (the route tells), and what is
 * held now. */
typedef struct {
    uint64_t served, built;
    size_t runs, bytes;
} run_cache_stats;
void run_cache_note(bool from_cache);
void run_cache_take_stats(run_cache_stats *out);

#endif

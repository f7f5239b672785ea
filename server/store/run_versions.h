/* Versions of what the store holds about each run, so that an answer built from the
 * store (GET /runs/{id}, GET /runs) can be cached above it and tagged (ETag), and
 * known to be current without reading the database.
 *
 * The store's writer bumps them after each commit, for every run an op of the batch
 * touched, and the store's version with them; a reader takes the version *before* it
 * reads the database, so an answer is never filed under a version newer than what it
 * shows (at worst under an older one: one needless rebuild).
 *
 * Versions live in a fixed table of slots indexed by the run's id (lock-free reads,
 * bounded memory): runs whose ids are RUN_VERSION_SLOTS apart share a slot, so a
 * change to one makes the other's cached answer look old (a needless rebuild, never
 * a stale answer). Every bump takes a new number from one counter, so a run's
 * version never repeats while the server lives; the identity, drawn at random when
 * the store opens, tells versions of one server's life from another's. */
#ifndef DDPD_SERVER_STORE_RUN_VERSIONS_H
#define DDPD_SERVER_STORE_RUN_VERSIONS_H

#include <stddef.h>
#include <stdint.h>

#define RUN_VERSION_SLOTS 65536

/* A new identity; every version back to 0. At store_open, before the writer starts. */
void run_versions_reset(void);
/* This server life's identity (random, 64 bits). */
uint64_t run_versions_identity(void);
/* The version of what the store holds about run `id` (0: untouched since it opened). */
uint64_t run_version(int64_t id);
/* The version of the store as a whole: it changes whenever any run's does. */
uint64_t runs_version(void);
/* The writer, after a commit: these runs changed (ids <= 0 are skipped). */
void run_versions_bump(const int64_t *ids, size_t n);

#endif

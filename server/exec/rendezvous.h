/* Each live run's rendezvous: a small key-value store, in memory, through which the
 * trainer processes of a run across nodes hand each other what they need before they
 * can talk directly (gloo's TCP addresses, NCCL's unique id), over HTTP
 * (api/routes_rendezvous.c). A key is written once; a reader polls until it is there.
 *
 * The scheduler opens a run's table when the run gets its secret (its start, or its
 * adoption after a restart) and closes it when the run finishes: its keys are freed.
 * The table holds the run's secret, so that a request is checked and answered under
 * one lock: a run that finishes meanwhile cannot take a late write, and a resumed
 * run (a new secret) does not take one meant for its earlier start. Safe from any
 * thread; nothing here waits for anything but its own short lock. */
#ifndef DDPD_SERVER_EXEC_RENDEZVOUS_H
#define DDPD_SERVER_EXEC_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rendezvous_rules.h" /* what a key and a value may be */

#define RENDEZVOUS_KEYS_MAX 4096 /* keys of one run */

typedef enum {
    RDV_CREATED,    /* put: the key was new */
    RDV_SAME,       /* put: the key held this very value already (a client's retry) */
    RDV_FOUND,      /* get: the value is there */
    RDV_NOT_ACTIVE, /* no live run of that id (none, queued, or finished) */
    RDV_BAD_SECRET, /* the secret given is not the run's */
    RDV_CONFLICT,   /* put: the key holds another value */
    RDV_FULL,       /* put: the run holds RENDEZVOUS_KEYS_MAX keys already */
    RDV_NOT_SET,    /* get: the key is not set yet */
} rendezvous_result;

/* The run has its secret: its table opens, empty (one left open under that id is
 * emptied first). */
void rendezvous_open(int64_t run, const char *secret);
/* The run finished: its table and its keys go. Nothing when none is open. */
void rendezvous_close(int64_t run);

/* Writes `key` (checked by rendezvous_key_ok) = `value` (rendezvous_value_ok) in the
 * run's table, when `secret` is the run's: RDV_CREATED, RDV_SAME, RDV_NOT_ACTIVE,
 * RDV_BAD_SECRET, RDV_CONFLICT or RDV_FULL. */
rendezvous_result rendezvous_put(int64_t run, const char *secret, const char *key, size_t key_len, const char *value,
                                 size_t value_len);
/* Reads `key`: RDV_FOUND with *value (malloc'd, NUL-terminated) and *value_len,
 * RDV_NOT_SET, RDV_NOT_ACTIVE or RDV_BAD_SECRET. */
rendezvous_result rendezvous_get(int64_t run, const char *secret, const char *key, size_t key_len, char **value,
                                 size_t *value_len);

/* For /metrics: the tables open (live runs), and the keys and the bytes (keys and
 * values) they hold. */
typedef struct {
    uint64_t runs, keys, bytes;
} rendezvous_stats;
void rendezvous_take_stats(rendezvous_stats *out);

#endif

/* The rendezvous of a run across nodes: a small key-value store through which its
 * processes on different hosts find each other before they talk directly (gloo's
 * TCP addresses, NCCL's unique id). Each key is written once; a reader waits for a
 * key until it is there or its timeout passes. Two stores implement it: the
 * coordinator's (kv_http.c: `POST/GET /runs/{id}/rendezvous`, with the run's
 * secret), which runs use, and a directory (kv_dir.c), which tests and benchmarks
 * on one machine use. Callers go through kv_put and kv_get, which hold the key to
 * the rendezvous' rule (schema/rendezvous_rules.h) before the store sees it. */
#ifndef DDPD_TRAINER_NODES_KV_STORE_H
#define DDPD_TRAINER_NODES_KV_STORE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kv_store kv_store;

struct kv_store {
    /* Writes key = data[0..len). 0, or -1 and err. */
    int (*put)(kv_store *s, const char *key, const void *data, size_t len, char *err, size_t errlen);
    /* Waits up to timeout_ms for key: 0 with *data (malloc'd, the caller frees) and
     * *len, or -1 and err (timed out: err names the key and the wait). */
    int (*get)(kv_store *s, const char *key, int timeout_ms, void **data, size_t *len, char *err, size_t errlen);
    void (*close)(kv_store *s);
};

/* The coordinator's rendezvous of one run: `url` is what the launcher was given
 * (`http://HOST:PORT/runs/ID/rendezvous`), `secret` the run's. NULL and err on
 * failure (a bad URL, no memory). */
kv_store *kv_http_open(const char *url, const char *secret, char *err, size_t errlen);

/* A directory every process can reach (one machine, or a shared filesystem): a key
 * is a file, written whole by rename. Tests and benchmarks. */
kv_store *kv_dir_open(const char *dir, char *err, size_t errlen);

/* s->put and s->get, for a valid key only (else -1 and err naming it). */
int kv_put(kv_store *s, const char *key, const void *data, size_t len, char *err, size_t errlen);
int kv_get(kv_store *s, const char *key, int timeout_ms, void **data, size_t *len, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif

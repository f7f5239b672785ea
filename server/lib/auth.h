/* Who may change things. With a token configured (--token-file, DDPD_TOKEN, --token), every
 * request that changes something (any method but GET and HEAD: submitting,
 * canceling, deleting) must carry "Authorization: Bearer <token>"; reading stays
 * open, so that /healthz, /metrics, the dashboard's views and curl need nothing.
 * The comparison takes the same time whatever the token sent, so that timing
 * tells an attacker nothing about the token's bytes.
 *
 * Without a token, ddpd listens only on a loopback address (where only this host's
 * users reach it), unless told --insecure. */
#ifndef DDPD_SERVER_LIB_AUTH_H
#define DDPD_SERVER_LIB_AUTH_H

#include <stdbool.h>
#include <stddef.h>

/* Who a request is: the server's own token or nobody on a box without users
 * (CALLER_ADMIN_TOKEN, CALLER_ANONYMOUS: admins of no name), or a user (sched/include/users.h). */
typedef enum { CALLER_ANONYMOUS, CALLER_ADMIN_TOKEN, CALLER_USER } caller_kind;

typedef struct {
    caller_kind kind;
    char name[65];    /* the user's; "" for the others */
    bool admin;       /* may cancel, delete and resume anyone's run and give any priority */
    int max_priority; /* the highest priority it may give a run (an admin: 100) */
    int max_devices;  /* its quota; -1: none */
    long long max_memory_bytes; /* the largest memory limit its runs may ask for (resources.memory_gb); -1: none */
    long long max_disk_bytes;   /* its quota of disk: what its runs' directories may hold together; -1: none */
} caller;

/* Whether a request may go on as the caller it names. */
typedef enum {
    AUTH_OK,      /* it may: the caller is set */
    AUTH_MISSING, /* no credential, and one is needed */
    AUTH_UNKNOWN, /* a credential this server does not know */
} auth_verdict;

/* True for methods that change something: everything but GET, HEAD and OPTIONS. */
bool auth_method_mutates(const char *method);

/* True when `authorization` (the header's value, or NULL) is "Bearer <token>" (the
 * scheme in any case, spaces after it). Constant time in the token's bytes. */
bool auth_bearer_ok(const char *authorization, const char *token);

/* The credential of an Authorization header's value "Bearer <credential>" (the scheme
 * in any case, spaces after it): a pointer into `authorization`, or NULL when it is
 * NULL, of another scheme, or has no credential. */
const char *auth_bearer_value(const char *authorization);

/* Whether every address "HOST:PORT" ("[v6]:PORT", "localhost:8080") resolves to is a
 * loopback address: 1 yes, 0 no (an empty host means every interface: no), -1 when
 * it cannot be resolved (with a sentence in err). */
int auth_listen_is_loopback(const char *listen, char *err, size_t errlen);

#endif

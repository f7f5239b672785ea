/* Whom a run's processes run as (issue 37's wall between accounts), decided in one
 * place for the submission's check, the launch and the event socket:
 *   - a user mapped to an account of this host (ddpd user add|set NAME --unix-user A):
 *     that account;
 *   - anyone else (a user without an account, the server's own token, a server without
 *     users): the operator's --run-user ACCOUNT when given;
 *   - else the server's own user, as a single-user box always did, except for a
 *     command run (the user's own program) where that would hand it the server: on a
 *     server that has users, or that runs as root. Such a run is refused at submission
 *     with what the operator must do, unless --unsafe-commands-as-server.
 * An account other than the server's own needs root or CAP_SETUID and CAP_SETGID
 * (run_account.h): without them a run that must switch is refused at submission. */
#ifndef DDPD_SERVER_SCHED_INCLUDE_RUN_AS_H
#define DDPD_SERVER_SCHED_INCLUDE_RUN_AS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "run_account.h"

typedef struct {
    const char *run_user;  /* ddpd serve --run-user ACCOUNT; NULL: none */
    bool unsafe_as_server; /* --unsafe-commands-as-server: command runs may run as the server's own user */
} run_as_config;

/* At start-up: --run-user must name an account this host has and the server must be
 * able to switch to it. 0, or -1 and why (serve refuses to start). */
int run_as_init(const run_as_config *c, char *err, size_t errlen);

typedef enum {
    RUN_AS_SERVER,  /* the server's own user (nothing to switch) */
    RUN_AS_ACCOUNT, /* *out: another account */
    RUN_AS_REFUSED  /* why says what the operator must do */
} run_as_verdict;

/* Whom a run of `owner` (NULL: nobody in particular) runs as. */
run_as_verdict run_as_resolve(const char *owner, bool command, run_account *out, char *why, size_t whylen);

/* The uid a run's processes have: its account's, or the server's own (-1 when the
 * run would be refused). For the event socket's check of a peer. */
long run_as_uid(const char *owner, bool command);

/* Whether any run may run as another account (--run-user, or a mapped user): the
 * state directory and the event socket are then opened to be passed through. */
bool run_as_accounts_in_use(void);

#endif

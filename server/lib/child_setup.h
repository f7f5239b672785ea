/* What a server's child starts with, the same for the supervisor's launchers
 * (posix_spawn) and an agent's parts (fork, then exec):
 *   - its environment: the server's own, less the variables whose names start with a
 *     dropped prefix ("DDPD_") or that are set anew, plus those set;
 *   - its signals: none blocked, and those a server blocks or ignores (SIGPIPE,
 *     SIGTERM, SIGCHLD, ...) back to their default actions. */
#ifndef DDPD_LIB_CHILD_SETUP_H
#define DDPD_LIB_CHILD_SETUP_H

#include <signal.h>

/* A NULL-terminated array (free it alone: its strings are base's and set's). */
char **child_env(char *const *base, char *const *drop, char *const *set);

/* The signals a child gets back with their default actions. */
void child_default_signals(sigset_t *set);

/* In a forked child, before exec: nothing blocked, child_default_signals' actions
 * back to their defaults. Async-signal-safe. */
void child_reset_signals(void);

#endif

/* What a server's child starts with, the same for the supervisor's launchers
 * (posix_spawn) and an agent's parts (fork, then exec):
 *   - its environment: the server's own, less the variables whose names start with a
 *     dropped prefix ("DDPD_") or that are set anew, plus those set;
 *   - its signals: none blocked, and those a server blocks or ignores (SIGPIPE,
 *     SIGTERM, SIGCHLD, ...) back to their default actions: child_default_signals
 *     and child_reset_signals, from the library below every program that starts
 *     processes (spawn/child_start.h), which ddp-trainer and ddp-run share. */
#ifndef DDPD_SERVER_PROC_CHILD_SETUP_H
#define DDPD_SERVER_PROC_CHILD_SETUP_H

#include "child_start.h"

/* A NULL-terminated array (free it alone: its strings are base's and set's). */
char **child_env(char *const *base, char *const *drop, char *const *set);

#endif

/* Running a short command and taking its output and exit status (sbatch, squeue,
 * scancel, scontrol), from a thread of a process whose reaper takes every child it
 * has (the supervisor's waitpid(-1)): the command is a grandchild, waited for by a
 * child of ours that hands its wait status back through a pipe, so that whoever
 * reaps that child loses nothing. The command's environment is the one given, its
 * stdin /dev/null, its signals back to their defaults (child_setup.h); a command
 * still running at the deadline is killed. run_cmd_as runs it as another account
 * (run_account_become in the command's own process: its groups, gid, uid, umask 077,
 * no capability), as sbatch for a run of a mapped user is. */
#ifndef DDPD_SERVER_PROC_RUN_CMD_H
#define DDPD_SERVER_PROC_RUN_CMD_H

#include <stdbool.h>
#include <stddef.h>

#include "run_account.h"

#define RUN_CMD_OUTPUT_MAX (4 << 20) /* of its stdout, and of its stderr: the rest is read and dropped */

typedef struct {
    int wstatus;    /* its wait status (when ran) */
    bool ran;       /* it was started and waited for */
    bool timed_out; /* killed at the deadline */
    char *out;      /* its stdout, NUL-terminated (malloc'd) */
    char *err;      /* its stderr, NUL-terminated (malloc'd) */
} cmd_result;

/* Runs argv[0] (a path, or a name looked up in PATH) with `env` (NULL: this process's
 * environment) for at most timeout_ms. 0 when it ran: *r says how it ended (a
 * program that cannot be run exits 127, its stderr saying why). -1 with why in err
 * when no process could be made. Either way cmd_result_free frees *r. */
int run_cmd(char *const *argv, char *const *env, int timeout_ms, cmd_result *r, char *err, size_t errlen);
/* The same, run as the account `as` (NULL: as this process): a command that cannot
 * become it exits 126, its stderr saying why. */
int run_cmd_as(char *const *argv, char *const *env, const run_account *as, int timeout_ms, cmd_result *r, char *err,
               size_t errlen);
void cmd_result_free(cmd_result *r);

/* Its stderr's last line, or else its stdout's, trimmed, for a person ("" when both
 * are empty): into out. */
void cmd_result_last_line(const cmd_result *r, char *out, size_t n);

#endif

/* A warm start's ranks (docs/sweeps.md, "Trials that start fast"): when ddpd hands
 * ddp-run a trial zygote (reporter/python/ddpd_zygote.py: an interpreter of the run's
 * account, in the run's cgroup, that has imported the modules of the run config's
 * warm_start.imports) as the descriptor in DDPD_WARM_FD, each rank of a `python3
 * SCRIPT ARGS` command is forked from it instead of exec'd: the same environment,
 * working directory and sys.argv, its output on the rank's pipe. The ranks are then
 * the trial zygote's children, not ddp-run's: their ends come back on the link
 * (warm_read), and the link's end (the trial zygote gone) ends them all. */
#ifndef DDPD_RUNNER_WARM_RANKS_H
#define DDPD_RUNNER_WARM_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "rank_spawn.h"

#define WARM_PENDING_MAX 64

typedef struct {
    int fd;          /* the connection to the trial zygote; -1: no warm start */
    bool broken;     /* its end came: no rank can start there, and those started are gone */
    char buf[16384]; /* what was read and not yet a whole line */
    size_t len;
    int n_pending; /* rank ends read while waiting for a spawn's answer */
    pid_t pending_pid[WARM_PENDING_MAX];
    int pending_status[WARM_PENDING_MAX];
} warm_link;

/* The link from DDPD_WARM_FD (unset, or not a connected Unix socket: fd -1, and why in
 * `why`, "" when unset). The variable is removed from the environment. */
void warm_link_open(warm_link *w, char *why, size_t whylen);
void warm_link_close(warm_link *w);

/* Whether argv is `python3 SCRIPT ARGS` (a python3 program, its first argument a
 * script, not an option): the commands a trial zygote can start. */
bool warm_command_fits(char *const *argv, const char *program);

/* Starts the command's rank in the trial zygote: its pid (its own process group) and
 * the read end of its output in *out_fd; or -1 with why (the link then counts as broken
 * when the trial zygote is gone). */
pid_t warm_spawn(warm_link *w, const rank_command *c, int *out_fd, char *why, size_t whylen);

/* Reads what the link has without waiting and calls ended(ctx, pid, wait status) for
 * each rank that ended (also those read during a spawn). Returns 0, or -1 when the
 * link ended (every rank started there is gone). */
int warm_read(warm_link *w, void (*ended)(void *ctx, pid_t pid, int status), void *ctx);

#endif

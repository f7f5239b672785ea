/* Starting one rank: fork, its own process group, death with the launcher
 * (PR_SET_PDEATHSIG), stdout and stderr into one pipe, the working directory, then
 * execvp of the command. Whether the exec worked is known before rank_spawn
 * returns: a close-on-exec pipe carries the child's errno back when it did not. */
#ifndef DDPD_RUNNER_RANK_SPAWN_H
#define DDPD_RUNNER_RANK_SPAWN_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    char *const *argv;
    char *const *env;
    const char *working_dir;
    const sigset_t *child_mask; /* the signal mask the command starts with */
} rank_command;

/* Starts the command. Returns its pid (also its process group) and the read end of
 * its output pipe in *out_fd; or -1 with the reason in `why` (nothing left running). */
pid_t rank_spawn(const rank_command *c, int *out_fd, char *why, size_t whylen);

#endif

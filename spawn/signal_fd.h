/* A process that starts others and waits for signals among other events (ddp-run's
 * gang, an agent's and a Slurm part's loop) blocks those signals and reads them from a
 * signalfd it polls; the mask it had before is what its children start with. */
#ifndef DDPD_SPAWN_SIGNAL_FD_H
#define DDPD_SPAWN_SIGNAL_FD_H

#include <signal.h>

/* Blocks the n `signals` and opens a non-blocking, close-on-exec signalfd for them;
 * the mask before into `before` (NULL: not wanted). The fd, or -1 (errno) with the
 * mask as it was. */
int signal_fd_open(const int *signals, int n, sigset_t *before);

#endif

/* Signals read from a signalfd: see signal_fd.h. */
#include "signal_fd.h"

#include <errno.h>
#include <sys/signalfd.h>

int signal_fd_open(const int *signals, int n, sigset_t *before) {
    sigset_t mask, old;
    sigemptyset(&mask);
    for (int i = 0; i < n; i++) sigaddset(&mask, signals[i]);
    sigprocmask(SIG_BLOCK, &mask, &old);
    if (before) *before = old;
    int fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd >= 0) return fd;
    int err = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = err;
    return -1;
}

/* What a forked child does first: see child_start.h. */
#include "child_start.h"

#include <stddef.h>
#include <sys/prctl.h>
#include <unistd.h>

int child_tie_to_parent(pid_t parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) return -1;
    /* the parent may have ended before the prctl: its death would never come */
    return getppid() == parent ? 0 : -1;
}

static const int DEFAULT_SIGNALS[] = {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2};

void child_default_signals(sigset_t *set) {
    sigemptyset(set);
    for (size_t i = 0; i < sizeof DEFAULT_SIGNALS / sizeof *DEFAULT_SIGNALS; i++) sigaddset(set, DEFAULT_SIGNALS[i]);
}

void child_signals(const sigset_t *to_default, const sigset_t *mask) {
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(to_default, sig) == 1) signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, mask ? mask : &none, NULL);
}

void child_reset_signals(void) {
    sigset_t defaults;
    child_default_signals(&defaults);
    child_signals(&defaults, NULL);
}

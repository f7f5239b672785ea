/* The loop `ddpd agent` and `ddpd part` share: see agent_loop.h. */
#include "agent_loop.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "agent_parts.h"
#include "agent_streams.h"
#include "die.h"
#include "signal_fd.h"

#define MAX_FDS 1100 /* the signalfd, the event socket and the ranks' connections */

void agent_loop_open(agent_loop *l, const int *signals, int n) {
    l->sfd = signal_fd_open(signals, n, NULL);
    if (l->sfd < 0)
        die("cannot open a signalfd for the signals that stop it: %s (out of file descriptors or memory: see "
            "`ulimit -n`)", strerror(errno));
    l->next_report = 0;
    signal(SIGPIPE, SIG_IGN);
}

int agent_loop_turn(agent_loop *l) {
    struct pollfd fds[MAX_FDS];
    fds[0] = (struct pollfd){.fd = l->sfd, .events = POLLIN};
    int n = 1 + agent_streams_pollfds(fds + 1, MAX_FDS - 1);
    poll(fds, (nfds_t)n, 100);
    int signo = 0;
    struct signalfd_siginfo si;
    if (fds[0].revents && read(l->sfd, &si, sizeof si) == sizeof si) signo = (int)si.ssi_signo;
    agent_streams_serve(fds + 1, n - 1);
    agent_parts_tick();
    return signo;
}

bool agent_loop_report_due(agent_loop *l, int64_t now) {
    if (now < l->next_report) return false;
    l->next_report = now + (agent_streams_pending() ? 200 : 1000);
    return true;
}

/* The gang's supervision: see gang.h. One poll loop over a signalfd (SIGCHLD and the
 * cancel signals, blocked) and every rank's output pipe. */
#include "gang.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error_file.h"
#include "events.h"
#include "log.h"
#include "peer_loss.h"
#include "rank_output.h"
#include "rank_spawn.h"
#include "signal_fd.h"
#include "stop_reason.h"
#include "utf8_text.h"
#include "monotonic.h"

#define DRAIN_AFTER_EXIT_S 2.0 /* a rank's children may hold its pipe open after it exits */

typedef struct {
    pid_t pid; /* also its process group; 0: never started */
    int running;
    int warm; /* forked by the trial zygote: its end comes on the warm link, not from waitpid */
    int status;
    rank_output out;
} gang_rank;

typedef struct {
    const gang_params *p;
    gang_rank *ranks;
    int started, alive;
    int first_failed; /* -1: none (yet) */
    int first_status;
    int canceled_by;
    char stop_reason[1024]; /* why ddpd stopped it (stop_reason.h), with canceled_by SIGTERM or SIGUSR1; "" else */
    char spawn_failure[1024];
    double kill_at;  /* 0: no SIGKILL due */
    double drain_until;
    /* a rank exited 0: the others still running are stopped if silent until then (0: not due) */
    int first_done;    /* the first rank (index) that exited 0; -1: none */
    double exit_deadline;
    char stopped_at_exit[512]; /* once they were: why, for the attempt's reason */
    /* a preemption's notice (SIGUSR1 to the ranks that catch it): how many got it, and
     * how it ended (0: still out; NOTICE_ANSWERED: ddpd had their checkpoint) */
    int noticed;
    int notice_end;
} gang;

enum { NOTICE_ANSWERED = 1 };

/* The global rank of the r-th rank this launcher started (a node part starts
 * ranks first_rank .. first_rank + local_ranks - 1). */
#define RANK_OF(g, r) ((g)->p->env->first_rank + (r))

static int stopping(const gang *g) {
    return g->first_failed >= 0 || g->canceled_by || g->spawn_failure[0] || g->stopped_at_exit[0];
}

/* Signals every rank's process group that may still have members. */
static void signal_groups(gang *g, int sig) {
    for (int r = 0; r < g->started; r++)
        if (g->ranks[r].running || g->ranks[r].out.fd >= 0) kill(-g->ranks[r].pid, sig);
}

static void begin_stop(gang *g, double grace_s) {
    signal_groups(g, SIGTERM);
    g->kill_at = mono_s() + grace_s;
}

/* "SIGKILL at 14:03:27 UTC, in 30 s": when the ranks still running are killed. */
static void describe_deadline(double grace_s, char *out, size_t n) {
    time_t at = time(NULL) + (time_t)(grace_s + 0.5);
    struct tm tm;
    char clock[16] = "?";
    if (gmtime_r(&at, &tm)) strftime(clock, sizeof clock, "%H:%M:%S", &tm);
    snprintf(out, n, "SIGKILL at %s UTC, in %g s", clock, grace_s);
}

static void describe_end(int status, char *out, size_t n) {
    if (WIFSIGNALED(status)) {
        const char *abbrev = sigabbrev_np(WTERMSIG(status));
        snprintf(out, n, "was killed by signal %d (SIG%s: %s)", WTERMSIG(status), abbrev ? abbrev : "?",
                 strsignal(WTERMSIG(status)));
    } else {
        snprintf(out, n, "exited with status %d", WEXITSTATUS(status));
    }
}

/* The launcher's word on a rank's process (docs/events.md, `rank_state`): the server
 * keeps its pid and how it ended on the rank's row, whether the script reports or not. */
static void say_rank_state(gang *g, int r, const char *state, int status) {
    json_t *e = json_pack("{s:i, s:s, s:i}", "of", RANK_OF(g, r), "state", state, "pid", (int)g->ranks[r].pid);
    if (strcmp(state, "started") == 0) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        json_object_set_new(e, "host", json_string(host));
        json_object_set_new(e, "detail", json_string(""));
    } else {
        char how[128];
        describe_end(status, how, sizeof how);
        json_object_set_new(e, "exit_code", WIFEXITED(status) ? json_integer(WEXITSTATUS(status)) : json_null());
        json_object_set_new(e, "signal", WIFSIGNALED(status) ? json_integer(WTERMSIG(status)) : json_null());
        json_object_set_new(e, "detail", json_string(how));
    }
    event_emit(g->p->events, "rank_state", e);
}

/* Rank pid ended with wait status `status` (from waitpid, or the warm link). */
static void rank_ended(void *ctx, pid_t pid, int status) {
    gang *g = ctx;
    for (int r = 0; r < g->started; r++) {
        gang_rank *k = &g->ranks[r];
        if (k->pid != pid || !k->running) continue;
        k->running = 0;
        k->status = status;
        g->alive--;
        say_rank_state(g, r, WIFEXITED(status) ? "exited" : "killed", status);
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (ok && g->first_done < 0) g->first_done = r;
        if (ok && !stopping(g) && g->alive > 0 && g->p->exit_timeout_s > 0 && g->exit_deadline == 0)
            g->exit_deadline = mono_s() + g->p->exit_timeout_s;
        if (ok || stopping(g)) continue;
        g->first_failed = r;
        g->first_status = status;
        char how[128];
        describe_end(status, how, sizeof how);
        char deadline[64];
        describe_deadline(g->p->grace_s, deadline, sizeof deadline);
        log_msg(LOG_ERROR, "rank %d %s: stopping the other ranks (%s)", RANK_OF(g, r), how, deadline);
        begin_stop(g, g->p->grace_s);
    }
}

static void reap(gang *g) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) rank_ended(g, pid, status);
    warm_link *w = g->p->warm;
    if (!w || w->fd < 0 || w->broken) return;
    if (warm_read(w, rank_ended, g) == 0) return;
    /* the trial zygote is gone, and with it (PR_SET_PDEATHSIG) every rank it forked */
    for (int r = 0; r < g->started; r++)
        if (g->ranks[r].warm && g->ranks[r].running) {
            kill(-g->ranks[r].pid, SIGKILL);
            log_msg(LOG_ERROR, "rank %d: the trial zygote that started it is gone: counted as killed", RANK_OF(g, r));
            rank_ended(g, g->ranks[r].pid, SIGKILL); /* a wait status: killed by SIGKILL */
        }
}

/* Whether process pid catches `sig` (its SigCgt in /proc): a signal it does not catch
 * would kill it, or do nothing, instead of telling it anything. */
static bool catches(pid_t pid, int sig) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool yes = false;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "SigCgt:", 7) == 0) {
            unsigned long long mask = strtoull(line + 7, NULL, 16);
            yes = (mask >> (sig - 1)) & 1;
            break;
        }
    fclose(f);
    return yes;
}

/* The first SIGUSR1 (ddpd preempts the run): every rank whose process catches SIGUSR1
 * (a script that asked ddpd.preempt_requested() or ddpd.on_preempt) gets it as a
 * notice, to checkpoint at its next step and say so (ddpd.checkpoint_saved); ddpd then
 * sends SIGUSR1 again and every rank gets SIGTERM. A rank that cannot hear the notice
 * gets SIGTERM now, as without one; whatever is still running at the grace's end gets
 * SIGKILL. false: no rank catches it (the caller stops them all, as without a notice). */
static bool send_notice(gang *g) {
    int hears = 0;
    for (int r = 0; r < g->started; r++) hears += g->ranks[r].running && catches(g->ranks[r].pid, SIGUSR1);
    if (!hears) return false;
    for (int r = 0; r < g->started; r++) {
        gang_rank *k = &g->ranks[r];
        if (k->running && catches(k->pid, SIGUSR1)) kill(k->pid, SIGUSR1);
        else if (k->running || k->out.fd >= 0) kill(-k->pid, SIGTERM);
    }
    g->noticed = hears;
    g->kill_at = mono_s() + g->p->preempt_grace_s;
    char deadline[64];
    describe_deadline(g->p->preempt_grace_s, deadline, sizeof deadline);
    log_msg(LOG_WARN, "received SIGUSR1%s%s: the notice (SIGUSR1) to %d rank%s, to checkpoint at %s next "
            "step; SIGTERM once ddpd has the checkpoint, %s", g->stop_reason[0] ? ": " : " (preempted)", g->stop_reason,
            hears, hears > 1 ? "s" : "", hears > 1 ? "their" : "its", deadline);
    return true;
}

static void on_signal(gang *g, int sig) {
    if (sig == SIGCHLD) {
        reap(g);
        return;
    }
    if (sig == SIGUSR1 && g->canceled_by == SIGUSR1) { /* ddpd again, during its preemption */
        if (g->noticed && !g->notice_end) { /* it has the checkpoint the notice asked for: stop now */
            g->notice_end = NOTICE_ANSWERED;
            log_msg(LOG_INFO, "received SIGUSR1 again: ddpd has the checkpoint the notice asked for; SIGTERM to every "
                    "rank");
            signal_groups(g, SIGTERM);
        }
        return;
    }
    if (stopping(g)) {
        if (g->canceled_by && g->kill_at > 0) { /* asked again: no more grace */
            log_msg(LOG_WARN, "received SIG%s again: killing every rank now", sigabbrev_np(sig));
            g->kill_at = mono_s();
        } else if (!g->canceled_by) { /* while a failure stops the ranks: no restart follows */
            g->canceled_by = sig;
            log_msg(LOG_WARN, "received SIG%s while the ranks are being stopped: the run will not start again",
                    sigabbrev_np(sig));
        }
        return;
    }
    g->canceled_by = sig;
    /* SIGUSR1: ddpd preempts the run (--preempt-grace); the others cancel it or shut the server down;
     * a SIGTERM or SIGUSR1 with a stop reason beside it: ddpd stops it (a sweep's rule or pause), saying
     * why, with the notice first on SIGUSR1 */
    if ((sig != SIGTERM && sig != SIGUSR1) || !stop_reason_read(g->p->run_dir, g->stop_reason, sizeof g->stop_reason))
        g->stop_reason[0] = '\0';
    if (sig == SIGUSR1 && send_notice(g)) return;
    double grace = sig == SIGUSR1 ? g->p->preempt_grace_s : g->p->grace_s;
    char deadline[64];
    describe_deadline(grace, deadline, sizeof deadline);
    if (g->stop_reason[0])
        log_msg(LOG_WARN, "received SIG%s: %s: SIGTERM to every rank, %s", sigabbrev_np(sig), g->stop_reason, deadline);
    else
        log_msg(LOG_WARN, "received SIG%s%s: SIGTERM to every rank, %s", sigabbrev_np(sig),
                sig == SIGUSR1 ? " (preempted)" : "", deadline);
    begin_stop(g, grace);
}

static void start_ranks(gang *g, const sigset_t *child_mask) {
    const gang_params *p = g->p;
    for (int r = 0; r < p->env->local_ranks && !stopping(g); r++) {
        int rank = RANK_OF(g, r);
        char err_path[4096];
        error_file_path(err_path, sizeof err_path, p->run_dir, rank);
        unlink(err_path); /* left by an earlier attempt in this directory */
        char **env = rank_env_build(p->env, rank);
        if (!env) {
            snprintf(g->spawn_failure, sizeof g->spawn_failure, "cannot start rank %d: out of memory", rank);
            break;
        }
        rank_command cmd = {.argv = p->cfg->argv, .env = env, .working_dir = p->working_dir, .child_mask = child_mask};
        int fd = -1, warm = 0;
        char why[1024];
        pid_t pid = -1;
        if (p->warm && p->warm->fd >= 0 && !p->warm->broken) {
            pid = warm_spawn(p->warm, &cmd, &fd, why, sizeof why);
            warm = pid > 0;
            if (pid < 0) log_msg(LOG_WARN, "rank %d: a warm start failed (%s): it starts cold", rank, why);
        }
        if (pid < 0) pid = rank_spawn(&cmd, &fd, why, sizeof why);
        rank_env_free(env);
        if (pid < 0) {
            snprintf(g->spawn_failure, sizeof g->spawn_failure, "%s", why);
            log_msg(LOG_ERROR, "rank %d: %s", rank, why);
            break;
        }
        gang_rank *k = &g->ranks[r];
        k->pid = pid;
        k->running = 1;
        k->warm = warm;
        if (rank_output_open(&k->out, rank, fd, p->run_dir) != 0)
            log_msg(LOG_WARN, "cannot write ranks/rank-%d.log: %s", rank, strerror(errno));
        g->started++;
        g->alive++;
        say_rank_state(g, r, "started", 0);
    }
    if (g->spawn_failure[0] && g->started) begin_stop(g, g->p->grace_s);
}

static int open_outputs(const gang *g) {
    int n = 0;
    for (int r = 0; r < g->started; r++) n += g->ranks[r].out.fd >= 0;
    return n;
}

/* A rank exited 0 and the others still running have been silent for the exit timeout
 * since: they are stopped (a rank hung in its process group's teardown after the last
 * epoch), and the attempt succeeds saying so. */
static void stop_at_exit(gang *g) {
    char who[256] = "";
    size_t len = 0;
    int n = 0;
    for (int r = 0; r < g->started && len < sizeof who; r++)
        if (g->ranks[r].running) {
            len += (size_t)snprintf(who + len, sizeof who - len, "%s%d", n ? ", " : "", RANK_OF(g, r));
            n++;
        }
    snprintf(g->stopped_at_exit, sizeof g->stopped_at_exit,
             "rank%s %s stopped at exit: still running, silent, %g s after rank %d exited 0 "
             "(distributed.exit_timeout_s)",
             n > 1 ? "s" : "", who, g->p->exit_timeout_s, RANK_OF(g, g->first_done));
    utf8_repair(g->stopped_at_exit);
    char deadline[64];
    describe_deadline(g->p->grace_s, deadline, sizeof deadline);
    log_msg(LOG_WARN, "%s: SIGTERM to %s, %s; the attempt succeeds", g->stopped_at_exit, n > 1 ? "them" : "it",
            deadline);
    begin_stop(g, g->p->grace_s);
}

/* Deadlines: the exit timeout (stop_at_exit); SIGKILL after the grace; after every
 * rank exited, pipes still held by their children are given a little while, then
 * those children are killed. */
static void handle_deadlines(gang *g) {
    double now = mono_s();
    if (g->exit_deadline > 0 && now >= g->exit_deadline && !stopping(g) && g->alive > 0) stop_at_exit(g);
    if (g->kill_at > 0 && now >= g->kill_at) {
        log_msg(LOG_WARN, "sending SIGKILL to the ranks still running");
        signal_groups(g, SIGKILL);
        g->kill_at = 0;
    }
    if (g->alive > 0 || !open_outputs(g)) return;
    if (g->drain_until == 0) g->drain_until = now + DRAIN_AFTER_EXIT_S;
    if (now < g->drain_until) return;
    for (int r = 0; r < g->started; r++) {
        gang_rank *k = &g->ranks[r];
        if (k->out.fd < 0) continue;
        log_msg(LOG_WARN, "rank %d exited but processes it started still hold its output: killing them", RANK_OF(g, r));
        kill(-k->pid, SIGKILL);
        rank_output_close(&k->out);
    }
}

static int poll_timeout_ms(const gang *g) {
    double now = mono_s(), until = now + 1.0; /* wake now and then: the event sink reconnects */
    if (g->kill_at > 0 && g->kill_at < until) until = g->kill_at;
    if (g->exit_deadline > 0 && g->exit_deadline < until) until = g->exit_deadline;
    if (g->alive == 0 && g->drain_until > 0 && g->drain_until < until) until = g->drain_until;
    double ms = (until - now) * 1000.0;
    return ms < 0 ? 0 : (int)ms + 1;
}

static void supervise(gang *g, int sfd) {
    int n = g->started;
    struct pollfd *fds = calloc((size_t)n + 2, sizeof *fds);
    warm_link *w = g->p->warm;
    while (g->alive > 0 || open_outputs(g) > 0) {
        fds[0] = (struct pollfd){.fd = sfd, .events = POLLIN};
        for (int r = 0; r < n; r++) fds[r + 1] = (struct pollfd){.fd = g->ranks[r].out.fd, .events = POLLIN};
        /* the warm link: its ranks' ends (-1: polled for nothing) */
        fds[n + 1] = (struct pollfd){.fd = w && w->fd >= 0 && !w->broken ? w->fd : -1, .events = POLLIN};
        if (poll(fds, (nfds_t)n + 2, poll_timeout_ms(g)) < 0 && errno != EINTR) {
            log_msg(LOG_ERROR, "poll: %s", strerror(errno));
            break;
        }
        if (fds[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) on_signal(g, (int)si.ssi_signo);
        }
        for (int r = 0; r < n; r++) {
            if (fds[r + 1].fd < 0 || !(fds[r + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            rank_output_read(&g->ranks[r].out);
            /* a rank still writing after another finished is still at work */
            if (g->exit_deadline > 0 && g->ranks[r].running && (fds[r + 1].revents & POLLIN))
                g->exit_deadline = mono_s() + g->p->exit_timeout_s;
        }
        reap(g); /* signals coalesce; a pipe's end often comes first */
        handle_deadlines(g);
        event_flush(g->p->events); /* the sink's timed flush and its reconnects */
    }
    free(fds);
}

/* Nothing of the run outlives it: whatever is left in a rank's process group (a
 * process it started that let go of its output) is killed. */
static void sweep_groups(gang *g) {
    for (int r = 0; r < g->started; r++)
        if (kill(-g->ranks[r].pid, SIGKILL) == 0)
            log_msg(LOG_WARN, "rank %d left processes behind in its process group: killed them", RANK_OF(g, r));
}

/* Whether rank r ended on its own with a failure (not by the stop it was sent). */
static bool failed_on_its_own(const gang_rank *k) {
    if (WIFEXITED(k->status)) return WEXITSTATUS(k->status) != 0;
    return WIFSIGNALED(k->status) && WTERMSIG(k->status) != SIGTERM && WTERMSIG(k->status) != SIGKILL;
}

/* The rank to blame. Two ranks that die together may be reaped in either order: when
 * the first one reaped only says that it lost a peer, and another rank failed on its
 * own with other words, that other one is the cause. */
static void blame(gang *g) {
    int r = g->first_failed;
    if (!says_peer_lost(g->ranks[r].out.last_line)) return;
    for (int o = 0; o < g->started; o++) {
        const gang_rank *k = &g->ranks[o];
        if (o != r && !k->running && failed_on_its_own(k) && !says_peer_lost(k->out.last_line)) {
            g->first_failed = o;
            g->first_status = k->status;
            return;
        }
    }
}

static void compose_result(gang *g, gang_result *res) {
    res->reason[0] = res->last_words[0] = '\0';
    res->failing_rank = -1;
    res->canceled_by = g->canceled_by;
    res->noticed = g->noticed;
    res->notice_answered = g->notice_end == NOTICE_ANSWERED;
    if (g->spawn_failure[0]) {
        res->outcome = GANG_FAILED;
        snprintf(res->reason, sizeof res->reason, "%s", g->spawn_failure);
        utf8_repair(res->reason);
    } else if (g->first_failed >= 0) {
        blame(g);
        int r = g->first_failed;
        char how[128], words[1024] = "", path[4096];
        describe_end(g->first_status, how, sizeof how);
        error_file_path(path, sizeof path, g->p->run_dir, RANK_OF(g, r));
        if (!error_file_message(path, words, sizeof words))
            snprintf(words, sizeof words, "%s", g->ranks[r].out.last_line);
        res->outcome = GANG_FAILED;
        res->failing_rank = RANK_OF(g, r);
        res->rank_status = g->first_status;
        snprintf(res->last_words, sizeof res->last_words, "%s", words);
        utf8_repair(res->last_words);
        snprintf(res->reason, sizeof res->reason, "rank %d %s%s%s", RANK_OF(g, r), how, words[0] ? ": " : "", words);
        utf8_repair(res->reason); /* clipped to fit: no sequence cut in two */
    } else if (g->stopped_at_exit[0] && !g->canceled_by) {
        res->outcome = GANG_SUCCEEDED;
        snprintf(res->reason, sizeof res->reason, "%s", g->stopped_at_exit);
    } else if (g->canceled_by) {
        res->outcome = GANG_CANCELED;
        res->signal = g->canceled_by;
        res->stopped = g->stop_reason[0] && (g->canceled_by == SIGTERM || g->canceled_by == SIGUSR1);
        if (res->stopped) /* ddpd stopped it, saying why */
            snprintf(res->reason, sizeof res->reason, "%s (SIG%s)", g->stop_reason, sigabbrev_np(g->canceled_by));
        else
            snprintf(res->reason, sizeof res->reason, "canceled by SIG%s", sigabbrev_np(g->canceled_by));
    } else {
        res->outcome = GANG_SUCCEEDED;
    }
}

int gang_signals_open(gang_signals *s) {
    s->fd = signal_fd_open((const int[]){SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1}, 5, &s->child_mask);
    return s->fd >= 0 ? 0 : -1;
}

void gang_signals_close(gang_signals *s) {
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    sigprocmask(SIG_SETMASK, &s->child_mask, NULL);
}

int gang_signals_wait_cancel(gang_signals *s, double seconds) {
    double until = mono_s() + seconds;
    for (;;) {
        double left = until - mono_s();
        if (left <= 0) return 0;
        struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)(left * 1000.0) + 1) < 0 && errno != EINTR) return 0;
        struct signalfd_siginfo si;
        while (read(s->fd, &si, sizeof si) == (ssize_t)sizeof si)
            if (si.ssi_signo != SIGCHLD) return (int)si.ssi_signo;
    }
}

void gang_run(const gang_params *p, gang_result *res) {
    gang g = {.p = p, .first_failed = -1, .first_done = -1};
    g.ranks = calloc((size_t)p->env->local_ranks, sizeof *g.ranks);
    if (!g.ranks) {
        memset(res, 0, sizeof *res);
        res->outcome = GANG_FAILED;
        res->failing_rank = -1;
        snprintf(res->reason, sizeof res->reason, "cannot supervise the ranks: %s", strerror(errno));
        return;
    }
    start_ranks(&g, &p->signals->child_mask);
    if (g.started && !g.spawn_failure[0])
        log_msg(LOG_INFO, "started %d rank%s", g.started, g.started > 1 ? "s" : "");
    supervise(&g, p->signals->fd);
    sweep_groups(&g);
    compose_result(&g, res);
    free(g.ranks);
}

/* Supervising an attempt's ranks until every one has exited: a rank that dies (why,
 * and its last words), the hang watch (distributed.hang_timeout_s), a cancel, and a
 * preemption (SIGUSR1). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "launcher.h"
#include "launcher_state.h"
#include "log.h"
#include "progress.h"
#include "run_dir.h"

#define PEER_STOP_GRACE_S 1.0  /* a rank died: the others get this long after SIGTERM */
#define CANCEL_GRACE_S 3.0     /* canceled: the ranks get this long after SIGTERM */

static void describe_death(launcher *L, int r, int status, char *out, size_t n) {
    rank_slot *slot = &L->board->slot[r];
    int rank = L->first + r;
    char where[96] = "";
    int epoch = atomic_load(&slot->epoch);
    if (epoch >= 0) snprintf(where, sizeof where, " at epoch %d step %ld", epoch, atomic_load(&slot->step));
    char cause[1024];
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS &&
        (idx_cache_explain_bus_error(&L->train, cause, sizeof cause) ||
         idx_cache_explain_bus_error(&L->test, cause, sizeof cause)))
        snprintf(out, n, "rank %d exited with signal %d (%s)%s: %s", rank, SIGBUS, strsignal(SIGBUS), where, cause);
    else if (WIFSIGNALED(status))
        snprintf(out, n, "rank %d exited with signal %d (%s)%s", rank, WTERMSIG(status), strsignal(WTERMSIG(status)),
                 where);
    else if (slot->failure[0])
        snprintf(out, n, "rank %d failed: %s", rank, slot->failure);
    else
        snprintf(out, n, "rank %d exited with code %d%s", rank, WEXITSTATUS(status), where);
}

/* The last line rank `rank` wrote to trainer.log (its message part), or "". */
static void last_log_line(launcher *L, int rank, char *out, size_t n) {
    char path[2048], tag[32], buf[65536];
    out[0] = '\0';
    snprintf(path, sizeof path, "%s/" RUN_DIR_LOG, L->o->run_dir);
    snprintf(tag, sizeof tag, " rank %d: ", rank);
    FILE *f = fopen(path, "r");
    if (!f) return;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
    long from = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
    size_t got = fseek(f, from, SEEK_SET) == 0 ? fread(buf, 1, sizeof buf - 1, f) : 0;
    fclose(f);
    buf[got] = '\0';
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *at = strstr(line, tag);
        if (at) snprintf(out, n, "%s", at + strlen(tag));
    }
}

/* How telling a stalled process's state is: stopped (SIGSTOP, a debugger) 2, busy
 * on a CPU (an endless loop) 1, asleep (waiting, as peers in a collective do) 0. */
static int stall_evidence(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');
    char state = close_paren && close_paren[1] ? close_paren[2] : '?';
    return state == 'T' || state == 't' ? 2 : state == 'R' ? 1 : 0;
}

/* The hang watch (distributed.hang_timeout_s): when a rank has made no progress
 * (no step done, no collective entered) for that long, the run fails naming the
 * ranks furthest behind: those with the fewest steps, then the fewest collectives
 * entered; their peers are waiting for them inside a collective. Ranks stuck inside
 * the same collective tie on both counts: among them, a stopped process, else a
 * busy one, is the one holding the others up. Across nodes only a stopped one is
 * sure: a rank waiting for another node's can be on a CPU when looked at (its
 * transport's thread, a loaded host), so without one the reason says the cause may
 * be elsewhere (peer_loss.h), and the server blames a node that has one. 1 when it
 * fired. */
static int hang_detected(launcher *L, char *reason, size_t n, int *first_named) {
    double limit_s = L->cfg.distributed.hang_timeout_s;
    if (limit_s <= 0) return 0;
    long long now = run_board_now_ms(), stalest = 0;
    for (int r = 0; r < L->local; r++) {
        long long idle = now - atomic_load(&L->board->slot[r].progress_ms);
        if (L->ranks[r].running && idle > stalest) stalest = idle;
    }
    if (stalest < (long long)(limit_s * 1000)) return 0;
    long best_steps = -1, best_colls = -1;
    for (int r = 0; r < L->local; r++) {
        if (!L->ranks[r].running) continue;
        long steps = atomic_load(&L->board->slot[r].global_step), colls = atomic_load(&L->board->slot[r].collectives);
        if (best_steps < 0 || steps < best_steps || (steps == best_steps && colls < best_colls))
            best_steps = steps, best_colls = colls;
    }
    int behind[L->local], evidence[L->local], strongest = 0;
    for (int r = 0; r < L->local; r++) {
        rank_slot *slot = &L->board->slot[r];
        behind[r] = L->ranks[r].running && atomic_load(&slot->global_step) == best_steps &&
                    atomic_load(&slot->collectives) == best_colls;
        evidence[r] = behind[r] ? stall_evidence(L->ranks[r].pid) : 0;
        if (evidence[r] > strongest) strongest = evidence[r];
    }
    size_t len = 0;
    int named = 0;
    for (int r = 0; r < L->local && len < n; r++) {
        rank_slot *slot = &L->board->slot[r];
        if (!behind[r] || evidence[r] < strongest) continue;
        char where[96] = "before its first step", line[256];
        int epoch = atomic_load(&slot->epoch);
        if (epoch >= 0)
            snprintf(where, sizeof where, "last at epoch %d step %ld (global step %ld)", epoch,
                     atomic_load(&slot->step), atomic_load(&slot->global_step));
        last_log_line(L, L->first + r, line, sizeof line);
        if (!named) *first_named = L->first + r;
        double idle_s = (double)(now - atomic_load(&slot->progress_ms)) / 1000.0;
        len += (size_t)snprintf(reason + len, n - len, "%srank %d made no progress for %.0f s, %s, %s%s%s", named++ ? "; " : "",
                                L->first + r, idle_s, where, line[0] ? "its last log line: \"" : "no log line from it", line,
                                line[0] ? "\"" : "");
    }
    if (len < n)
        snprintf(reason + len, n - len, " (distributed.hang_timeout_s is %g)%s: stopping every rank", limit_s,
                 L->o->nodes > 1 && strongest < 2 ? "; no rank here was stopped (each waited in a collective or ran), "
                                                    "so the one holding the others up may be on another node"
                                                  : "");
    return 1;
}

/* A rank died: why, and its last words (the reason it gave on the board, else its
 * last log line). */
static void rank_died(launcher *L, int r, int status, attempt_outcome *out) {
    out->failed = 1;
    out->failing_rank = L->first + r;
    out->status = status;
    out->died = 1;
    describe_death(L, r, status, out->reason, sizeof out->reason);
    if (L->board->slot[r].failure[0]) snprintf(out->last_line, sizeof out->last_line, "%s", L->board->slot[r].failure);
    else last_log_line(L, L->first + r, out->last_line, sizeof out->last_line);
}

/* SIGUSR1: stop for a preemption, at a step every rank reaches (run_board.h). */
void launcher_preempt_signal(launcher *L) {
    if (L->o->nodes > 1) {
        log_msg(LOG_WARN, "received SIGUSR1 (preempt): a run across nodes is not preempted (its nodes could not agree "
                "on the step to stop at); it goes on");
        return;
    }
    if (!L->preempt_asked) log_msg(LOG_INFO, "received SIGUSR1: preempted; every rank stops after its next step, "
                                   "where rank 0 writes a checkpoint");
    L->preempt_asked = 1;
    if (L->board) run_board_request_preempt(L->board);
}

/* Whether every rank stopped for a preemption (and exited 0): the global step they stopped after, else 0. */
long launcher_stopped_preempted(const launcher *L) {
    for (int r = 0; r < L->local; r++)
        if (!atomic_load(&L->board->slot[r].preempted)) return 0;
    return atomic_load(&L->board->stop_at);
}

/* Whether every rank stopped at train.stop_after_epochs (and exited 0). */
bool launcher_stopped_paused(const launcher *L) {
    for (int r = 0; r < L->local; r++)
        if (!atomic_load(&L->board->slot[r].paused)) return false;
    return L->local > 0;
}

/* Supervises the ranks until all have exited. */
void launcher_supervise(launcher *L, const sigset_t *mask, attempt_outcome *out) {
    int alive = L->local;
    double kill_deadline = 0;
    *out = (attempt_outcome){.failing_rank = -1};
    while (alive > 0) {
        struct timespec tick = {0, 50 * 1000 * 1000};
        siginfo_t info;
        int sig = sigtimedwait(mask, &info, &tick);
        if (sig == SIGUSR1) launcher_preempt_signal(L);
        if ((sig == SIGTERM || sig == SIGINT || sig == SIGHUP) && !out->canceled_by) {
            out->canceled_by = sig;
            if (!out->failed) {
                snprintf(out->reason, sizeof out->reason, "canceled by %s", sigabbrev_np(sig) ? sigabbrev_np(sig) : "signal");
                log_msg(LOG_WARN, "received SIG%s: stopping every rank", sigabbrev_np(sig));
            }
            coll_cpu_group_abort(L->group);
            launcher_signal_ranks(L, SIGTERM);
            kill_deadline = now_seconds() + CANCEL_GRACE_S;
        }
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (int r = 0; r < L->local; r++) {
                if (L->ranks[r].pid != pid || !L->ranks[r].running) continue;
                L->ranks[r].running = 0;
                alive--;
                int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
                if (!ok && !out->failed && !out->canceled_by) {
                    rank_died(L, r, status, out);
                    log_msg(LOG_ERROR, "%s: stopping the other ranks", out->reason);
                    coll_cpu_group_abort(L->group);
                    launcher_signal_ranks(L, SIGTERM);
                    kill_deadline = now_seconds() + PEER_STOP_GRACE_S;
                }
            }
        }
        if (!out->failed && !out->canceled_by && hang_detected(L, out->reason, sizeof out->reason, &out->failing_rank)) {
            out->failed = 1;
            log_msg(LOG_ERROR, "%s", out->reason);
            coll_cpu_group_abort(L->group);
            launcher_signal_ranks(L, SIGTERM);
            kill_deadline = now_seconds() + PEER_STOP_GRACE_S;
        }
        if (kill_deadline > 0 && now_seconds() >= kill_deadline) {
            launcher_signal_ranks(L, SIGKILL);
            kill_deadline = 0;
        }
    }
}

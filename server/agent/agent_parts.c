/* The run parts an agent runs: see agent_parts.h. */
#include "agent_parts.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "journal_end.h"
#include "ports.h"
#include "child_setup.h"
#include "launcher_argv.h"
#include "run_files.h"
#include "part_wire.h"
#include "run_account.h"
#include "run_dir.h"

extern char **environ;

#define MAX_PARTS 64
#define MAX_FILES 65 /* trainer.log and one log per rank */

typedef struct {
    int64_t run;
    int restart_count; /* the attempt it starts at: a run started again is a part of its own */
    int node_rank, first_rank, local_ranks;
    pid_t pid;          /* 0: never started (refused here) */
    bool exited, reported, stopping;
    int64_t kill_at_ms;
    double grace_s;     /* SIGTERM, then SIGKILL this much later: the agent's, or the launcher's grace and a margin */
    int exit_code, signal; /* -1: none */
    char reason[2048];
    int64_t end_t;
    char *run_dir;
    bool as_account;    /* its processes run as `account` (the coordinator named one), not as the agent's user */
    run_account account;
    int n_files;
    char files[MAX_FILES][32];
    int64_t acked[MAX_FILES];
} part;

static struct {
    agent_parts_config c;
    part p[MAX_PARTS];
    int n;
    bool can_switch; /* root, or CAP_SETUID and CAP_SETGID: parts may run as other accounts */
    char switch_how[160], switch_missing[128];
} P;

void agent_parts_init(const agent_parts_config *c) {
    P.c = *c;
    P.can_switch = run_account_can_switch(P.switch_how, sizeof P.switch_how, P.switch_missing, sizeof P.switch_missing);
}

bool agent_parts_can_switch(const char **how, const char **missing) {
    *how = P.switch_how;
    *missing = P.switch_missing;
    return P.can_switch;
}

/* Whether the part's account is one this agent can run it as, here (its account
 * looked up on this node, by name): false and why, for the operator, when not. */
static bool account_usable(part *p, const char *name, char *why, size_t n) {
    char err[512];
    if (run_account_lookup(name, &p->account, err, sizeof err) != 0) {
        snprintf(why, n, "node %s cannot run run %lld's part as the account %s: %s; every node a user's runs reach "
                 "needs the account, by the same name", P.c.node_name, (long long)p->run, name, err);
        return false;
    }
    if (p->account.uid != geteuid() && !P.can_switch) {
        snprintf(why, n, "node %s: the agent cannot run parts as the account %s: %s; start `ddpd agent` there as root "
                 "or with CAP_SETUID and CAP_SETGID (docs/security.md, On agent nodes)", P.c.node_name, name,
                 P.switch_how);
        return false;
    }
    p->as_account = true;
    return true;
}

/* Where parts run as other accounts: the state directory and its runs/ become 0711
 * (an account passes through to its own part's directory by name, never lists), the
 * event socket 0666 (each connection's account is checked against its run's:
 * agent_parts_peer_ok). */
static void open_for_accounts(void) {
    char *runs = xasprintf("%s/runs", P.c.state_dir);
    if (chmod(P.c.state_dir, 0711) != 0) log_warn("state dir %s: cannot make it 0711: %s", P.c.state_dir, strerror(errno));
    if (chmod(runs, 0711) != 0) log_warn("%s: cannot make it 0711: %s", runs, strerror(errno));
    if (chmod(P.c.events_socket, 0666) != 0)
        log_warn("event socket %s: cannot open it to the parts' accounts: %s", P.c.events_socket, strerror(errno));
    free(runs);
}

bool agent_parts_peer_ok(int64_t run, long uid) {
    for (int k = 0; k < P.n; k++)
        if (P.p[k].run == run && !P.p[k].exited && P.p[k].as_account) return uid == (long)P.p[k].account.uid;
    return uid == (long)geteuid(); /* a part of the agent's own user */
}

/* A file of the part's directory, read by the agent (which may be root) where the
 * account may have put anything: as run_files.h reads a run's files (never through
 * a link, never a FIFO, the account's own). A descriptor, *st its fstat, or -1. */
static int open_in_part(const part *p, const char *file, struct stat *st) {
    char why[512];
    return run_file_open_in(p->run_dir, file, RUN_FILE_ANY_SIZE, st, why, sizeof why);
}

static int restart_count_of(const json_t *w) { return (int)json_integer_value(json_object_get(w, "restart_count")); }

/* The part the coordinator's entry `w` names: its run, at its attempt. */
static bool is_entry(const part *p, const json_t *w) {
    return json_integer_value(json_object_get(w, "run")) == p->run && restart_count_of(w) == p->restart_count;
}

static part *find_entry(const json_t *w) {
    for (int i = 0; i < P.n; i++)
        if (is_entry(&P.p[i], w)) return &P.p[i];
    return NULL;
}

static bool listed(const part *p, const json_t *wanted) {
    size_t i;
    json_t *w;
    json_array_foreach(wanted, i, w) if (is_entry(p, w)) return true;
    return false;
}

/* A part that could not start here: it has "exited" at once, with why. */
static void refuse(part *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(part *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->reason, sizeof p->reason, fmt, ap);
    va_end(ap);
    p->exited = true;
    p->exit_code = 2;
    p->end_t = now_ms();
    log_error("run %lld: %s", (long long)p->run, p->reason);
}

/* fork + exec in a process group of its own that dies with the agent: the agent's
 * main thread forks (PR_SET_PDEATHSIG follows the thread that forked), its output to
 * log_fd, as `as` when not NULL (as this host's supervisor starts a run of another
 * account: run_account_become; the tie to the agent comes after it, a change of
 * credentials clears PR_SET_PDEATHSIG). */
static pid_t spawn(char *const *argv, char *const *env, const char *cwd, int log_fd, const run_account *as) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid;
    setpgid(0, 0);
    child_reset_signals();
    if (log_fd >= 0) {
        dup2(log_fd, 1);
        dup2(log_fd, 2);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    if (as && run_account_become(as) != 0) {
        dprintf(2, "ddpd agent: cannot become the account %s (uid %d): %s\n", as->name, (int)as->uid, strerror(errno));
        _exit(127);
    }
    if (child_tie_to_parent(parent) < 0) _exit(127);
    if (chdir(cwd) != 0) _exit(127);
    execve(argv[0], argv, env);
    dprintf(2, "ddpd agent: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int64_t file_size(const part *p, int f);

static void start(const json_t *j) {
    if (P.n == MAX_PARTS) {
        log_error("this node already runs %d parts, its most: run %lld's part is not started", MAX_PARTS,
                  (long long)json_integer_value(json_object_get(j, "run")));
        return;
    }
    part *p = &P.p[P.n++];
    memset(p, 0, sizeof *p);
    part_wire w;
    char why[160];
    bool whole = part_wire_read(j, &w, why, sizeof why);
    p->run = whole ? w.run : json_integer_value(json_object_get(j, "run"));
    p->restart_count = restart_count_of(j); /* as the coordinator matches it, even in a description refused */
    p->node_rank = w.node_rank;
    p->local_ranks = w.nodes > 0 ? w.world_size / w.nodes : w.world_size; /* nodes 0: a run on one node, all its ranks */
    p->first_rank = p->node_rank * p->local_ranks;
    p->exit_code = p->signal = -1;
    /* a command run's grace for its ranks, from the coordinator (one that does not say: ddp-run's own) */
    bool graces = w.command && w.graces;
    p->grace_s = graces ? (double)w.stop_grace_s + LAUNCHER_GRACE_MARGIN_MS / 1000.0 : P.c.grace_s;
    snprintf(p->files[p->n_files++], sizeof p->files[0], RUN_DIR_LOG);
    for (int r = 0; r < p->local_ranks && p->n_files < MAX_FILES; r++)
        snprintf(p->files[p->n_files++], sizeof p->files[0], RUN_DIR_RANK_LOG, p->first_rank + r);

    if (P.c.run_dir) {
        p->run_dir = xstrdup(P.c.run_dir);
    } else {
        char *runs = xasprintf("%s/runs", P.c.state_dir);
        mkdir(runs, 0700);
        p->run_dir = xasprintf("%s/%lld", runs, (long long)p->run);
        free(runs);
    }
    char *config = xasprintf("%s/" RUN_DIR_CONFIG, p->run_dir);
    char unusable[1024] = "", taken[512] = "", files_why[768] = "";
    int log_fd = -1;
    run_dir d = {.fd = -1};
    if (!whole || p->local_ranks < 1) {
        refuse(p, "the coordinator's description of run %lld's part is incomplete (%s): run the same ddpd "
               "version on the coordinator and this node", (long long)p->run,
               whole ? "no ranks on this node" : why);
    } else if (w.account && !account_usable(p, w.account, unusable, sizeof unusable)) {
        refuse(p, "%s", unusable); /* never as the agent's own user instead */
    } else if (mkdir(p->run_dir, 0700) != 0 && errno != EEXIST) {
        refuse(p, "node %s cannot create %s: %s", P.c.node_name, p->run_dir, strerror(errno));
    } else if (run_dir_open(&d, p->run_dir, files_why, sizeof files_why) != 0) {
        refuse(p, "node %s cannot open its part's directory: %s", P.c.node_name, files_why);
        /* an earlier attempt's directory is the account's: written as run_files.h writes a
         * run's files, what it left there is never written through */
    } else if (run_file_write_json(&d, RUN_DIR_CONFIG, w.config, files_why, sizeof files_why) != 0) {
        refuse(p, "node %s: %s", P.c.node_name, files_why);
    } else if ((log_fd = run_file_open_append(&d, RUN_DIR_LOG, files_why, sizeof files_why)) < 0) {
        refuse(p, "node %s cannot open the part's log: %s", P.c.node_name, files_why);
    } else if (p->as_account && run_account_take_dir(&p->account, p->run_dir, taken, sizeof taken) != 0) {
        refuse(p, "node %s: %s", P.c.node_name, taken);
    } else if (w.command && !P.c.allow_commands) {
        refuse(p, "node %s does not run command runs: its agent was started without --allow-commands",
               P.c.node_name);
    } else if (w.command && p->node_rank == 0 && !port_is_listenable(w.master_port)) { /* a TIME_WAIT left there is no bar to rank 0 */
        refuse(p, "MASTER_PORT %d is in use on node %s (rank 0's node): free it, or give the coordinator another "
               "--port-range", w.master_port, P.c.node_name);
    } else {
        buf_t visible = {0};
        size_t i;
        json_t *d;
        json_array_foreach(w.devices, i, d) if (w.gpu && json_is_string(d) && !P.c.visible)
            buf_printf(&visible, "%s%s", visible.len ? "," : "", json_string_value(d));
        if (w.gpu && P.c.visible) buf_printf(&visible, "%s", P.c.visible);
        char *rdv = xasprintf("%s%s", P.c.coordinator, w.rendezvous);
        launcher_spec spec = {.program = w.command ? P.c.runner : P.c.trainer, .config = config, .run_dir = p->run_dir,
                              .events = P.c.events_socket, .command = w.command, .master_port = w.master_port,
                              .port_lo = w.port_lo, .port_hi = w.port_hi,
                              .graces = graces, .stop_grace_s = w.stop_grace_s,
                              .preempt_grace_s = w.preempt_grace_s,
                              .restart_count = p->restart_count, .restarts_from = w.restarts_from,
                              .nodes = w.nodes,
                              .node_rank = p->node_rank, .master_addr = w.master_addr, .node_addr = P.c.advertise,
                              .rendezvous = rdv, .resume = w.resume,
                              .data_roots = P.c.data_roots, .n_data_roots = P.c.n_data_roots, .run_id = p->run,
                              .secret = w.secret, .visible = visible.data};
        launcher_cmd cmd;
        launcher_cmd_build(&spec, &cmd);
        for (int k = 0; k < p->n_files; k++) p->acked[k] = file_size(p, k); /* an earlier start's lines are not ours */
        char attempt[96] = "";
        if (p->restart_count > 0)
            snprintf(attempt, sizeof attempt, ", attempt %d (TORCHELASTIC_RESTART_COUNT=%d)", p->restart_count,
                     p->restart_count);
        dprintf(log_fd, "starting %s for run %lld on node %s: node %d of %d, ranks %d to %d%s%s%s\n", spec.program,
                (long long)p->run, P.c.node_name, p->node_rank, w.nodes > 0 ? w.nodes : 1, p->first_rank,
                p->first_rank + p->local_ranks - 1, attempt, p->as_account ? ", as the account " : "",
                p->as_account ? p->account.name : "");
        if (p->as_account) open_for_accounts();
        char **set = p->as_account ? run_account_env(&p->account, cmd.env) : NULL;
        char **env = child_env(environ, LAUNCHER_ENV_DROP, set ? set : cmd.env);
        /* an agent that runs as the account itself and may not switch is that account already (it
         * could not set the account's groups): its own umask 077 and credentials are the part's */
        const run_account *become = p->as_account && P.can_switch ? &p->account : NULL;
        p->pid = spawn((char *const *)cmd.argv, env, p->run_dir, log_fd, become);
        if (p->pid < 0) {
            p->pid = 0;
            refuse(p, "node %s cannot start %s: fork: %s", P.c.node_name, spec.program, strerror(errno));
        } else {
            log_info("run %lld: node %d of %d started (pid %d): ranks %d to %d%s%s", (long long)p->run, p->node_rank,
                     w.nodes > 0 ? w.nodes : 1, (int)p->pid, p->first_rank, p->first_rank + p->local_ranks - 1,
                     p->as_account ? ", as the account " : "", p->as_account ? p->account.name : "");
        }
        free(env);
        run_account_env_free(set);
        launcher_cmd_free(&cmd);
        free(rdv);
        buf_free(&visible);
    }
    if (log_fd >= 0) close(log_fd);
    run_dir_close(&d);
    free(config);
}

/* signal_it: SIGTERM now (else someone else sent it); SIGKILL after the grace either way. */
static void stop(part *p, const char *why, bool signal_it) {
    if (p->exited || p->stopping || p->pid <= 0) return;
    p->stopping = true;
    p->kill_at_ms = mono_ms() + (int64_t)(p->grace_s * 1000);
    if (signal_it) kill(-p->pid, SIGTERM);
    log_info("run %lld: stopping its part here (%s process group %d, SIGKILL after %.0f s): %s", (long long)p->run,
             signal_it ? "SIGTERM to" : "SIGTERM sent elsewhere to", (int)p->pid, p->grace_s, why);
}

void agent_parts_reconcile(const json_t *wanted) {
    size_t i;
    json_t *w;
    for (int k = 0; k < P.n; k++) /* first: a run's earlier part goes before its next starts */
        if (!listed(&P.p[k], wanted)) stop(&P.p[k], "the coordinator no longer lists it", true);
    json_array_foreach(wanted, i, w) if (!find_entry(w)) start(w);
}

void agent_parts_stop_all(const char *why) {
    for (int k = 0; k < P.n; k++) stop(&P.p[k], why, true);
}

void agent_parts_stopped_elsewhere(const char *why) {
    for (int k = 0; k < P.n; k++) stop(&P.p[k], why, false);
}

void agent_parts_tick(void) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int k = 0; k < P.n; k++) {
            part *p = &P.p[k];
            if (p->pid != pid || p->exited) continue;
            kill(-pid, SIGKILL); /* nothing of it outlives its launcher */
            p->exited = true;
            p->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            p->signal = WIFSIGNALED(status) ? WTERMSIG(status) : -1;
            journal_end e;
            if (journal_end_read(p->run_dir, &e)) {
                snprintf(p->reason, sizeof p->reason, "%s", e.reason);
                p->end_t = e.t;
            } else {
                p->end_t = now_ms();
                if (p->exit_code != 0)
                    snprintf(p->reason, sizeof p->reason, "its launcher %s %d without an end event (see trainer.log)",
                             WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
                             WIFSIGNALED(status) ? p->signal : p->exit_code);
            }
            log_info("run %lld: its part here exited (%s %d)", (long long)p->run,
                     WIFSIGNALED(status) ? "signal" : "status", WIFSIGNALED(status) ? p->signal : p->exit_code);
        }
    }
    int64_t now = mono_ms();
    for (int k = 0; k < P.n; k++) {
        part *p = &P.p[k];
        if (p->stopping && !p->exited && p->kill_at_ms && now >= p->kill_at_ms) {
            kill(-p->pid, SIGKILL);
            p->kill_at_ms = 0;
        }
    }
}

static int64_t file_size(const part *p, int f) {
    struct stat st; /* a link the account put there is no log of its (open_in_part reads none) */
    int fd = open_in_part(p, p->files[f], &st);
    if (fd < 0) return 0;
    close(fd);
    return (int64_t)st.st_size;
}

static bool logs_delivered(const part *p) {
    for (int f = 0; f < p->n_files; f++)
        if (p->acked[f] < file_size(p, f)) return false;
    return true;
}

json_t *agent_parts_reports(bool streams_pending) {
    json_t *out = json_array();
    for (int k = 0; k < P.n; k++) {
        part *p = &P.p[k];
        if (!p->exited) {
            json_array_append_new(out, json_pack("{s:I, s:i, s:s}", "run", (json_int_t)p->run, "restart_count",
                                                 p->restart_count, "state", "running"));
        } else if (!streams_pending && logs_delivered(p)) {
            json_t *r = json_pack("{s:I, s:i, s:s, s:s, s:I}", "run", (json_int_t)p->run, "restart_count",
                                  p->restart_count, "state", "exited", "reason", p->reason, "end_t",
                                  (json_int_t)p->end_t);
            json_object_set_new(r, "exit_code", p->exit_code >= 0 ? json_integer(p->exit_code) : json_null());
            json_object_set_new(r, "signal", p->signal >= 0 ? json_integer(p->signal) : json_null());
            json_array_append_new(out, r);
            p->reported = true;
        }
    }
    return out;
}

/* Bytes that are not UTF-8 become '?', one for one (offsets stay the agent's). */
static void scrub_utf8(unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && i + len <= n && !(len == 2 && c < 0xc2);
        for (size_t j = 1; ok && j < len; j++) ok = (s[i + j] & 0xc0) == 0x80;
        if (!ok) {
            s[i++] = '?';
            continue;
        }
        i += len;
    }
}

json_t *agent_parts_log_batch(size_t budget) {
    json_t *out = json_array();
    size_t used = 0;
    for (int k = 0; k < P.n && used < budget; k++) {
        part *p = &P.p[k];
        for (int f = 0; f < p->n_files && used < budget; f++) {
            int64_t size = file_size(p, f);
            if (size <= p->acked[f]) continue;
            size_t want = (size_t)(size - p->acked[f]);
            if (want > budget - used) want = budget - used;
            struct stat st;
            int fd = open_in_part(p, p->files[f], &st);
            char *text = malloc(want + 1);
            ssize_t got = fd >= 0 && text ? pread(fd, text, want, p->acked[f]) : -1;
            if (fd >= 0) close(fd);
            if (got > 0 && !p->exited) { /* whole lines while it runs */
                while (got > 0 && text[got - 1] != '\n') got--;
            }
            if (got > 0) {
                scrub_utf8((unsigned char *)text, (size_t)got);
                json_array_append_new(out, json_pack("{s:I, s:s, s:I, s:s%}", "run", (json_int_t)p->run, "file",
                                                     p->files[f], "offset", (json_int_t)p->acked[f], "text", text,
                                                     (size_t)got));
                used += (size_t)got;
            }
            free(text);
        }
    }
    return out;
}

void agent_parts_logs_acked(const json_t *acks) {
    size_t i;
    json_t *a;
    json_array_foreach(acks, i, a) {
        int64_t run = json_integer_value(json_object_get(a, "run"));
        const char *file = json_string_value(json_object_get(a, "file"));
        json_t *next = json_object_get(a, "next_offset");
        if (!json_is_integer(next)) {
            log_warn("run %lld: the coordinator did not take %s: %s", (long long)run, file ? file : "?",
                     json_string_value(json_object_get(a, "error")));
            continue;
        }
        for (int k = 0; k < P.n; k++) /* every part of the run here: its logs are the run's */
            for (int f = 0; P.p[k].run == run && file && f < P.p[k].n_files; f++)
                if (strcmp(P.p[k].files[f], file) == 0) P.p[k].acked[f] = json_integer_value(next);
    }
}

void agent_parts_forget_reported(const json_t *wanted) {
    for (int k = 0; k < P.n;) {
        part *p = &P.p[k];
        if (p->reported && !listed(p, wanted)) {
            free(p->run_dir);
            P.p[k] = P.p[--P.n];
            continue;
        }
        k++;
    }
}

bool agent_parts_all_reported(void) {
    for (int k = 0; k < P.n; k++)
        if (!P.p[k].reported) return false;
    return P.n > 0;
}

int agent_parts_exit_status(void) {
    if (!P.n || !P.p[0].exited) return -1;
    return P.p[0].exit_code >= 0 ? P.p[0].exit_code : P.p[0].signal >= 0 ? 128 + P.p[0].signal : 1;
}

int agent_parts_running(void) {
    int n = 0;
    for (int k = 0; k < P.n; k++) n += !P.p[k].exited;
    return n;
}

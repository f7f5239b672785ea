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
#include "part_wire.h"
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
    int n_files;
    char files[MAX_FILES][32];
    int64_t acked[MAX_FILES];
} part;

static struct {
    agent_parts_config c;
    part p[MAX_PARTS];
    int n;
} P;

void agent_parts_init(const agent_parts_config *c) { P.c = *c; }

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
 * main thread forks (PR_SET_PDEATHSIG follows the thread that forked). */
static pid_t spawn(char *const *argv, char *const *env, const char *cwd, const char *log_path) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid;
    setpgid(0, 0);
    if (child_tie_to_parent(parent) < 0) _exit(127);
    child_reset_signals();
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
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
    char *config = xasprintf("%s/" RUN_DIR_CONFIG, p->run_dir), *log = xasprintf("%s/" RUN_DIR_LOG, p->run_dir);
    if (!whole || p->local_ranks < 1) {
        refuse(p, "the coordinator's description of run %lld's part is incomplete (%s): run the same ddpd "
               "version on the coordinator and this node", (long long)p->run,
               whole ? "no ranks on this node" : why);
    } else if (mkdir(p->run_dir, 0700) != 0 && errno != EEXIST) {
        refuse(p, "node %s cannot create %s: %s", P.c.node_name, p->run_dir, strerror(errno));
    } else if (json_dump_file(w.config, config, JSON_INDENT(2)) != 0) {
        refuse(p, "node %s cannot write %s: %s", P.c.node_name, config, strerror(errno));
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
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "starting %s for run %lld on node %s: node %d of %d, ranks %d to %d", spec.program,
                    (long long)p->run, P.c.node_name, p->node_rank, w.nodes > 0 ? w.nodes : 1, p->first_rank,
                    p->first_rank + p->local_ranks - 1);
            if (p->restart_count > 0)
                fprintf(f, ", attempt %d (TORCHELASTIC_RESTART_COUNT=%d)", p->restart_count, p->restart_count);
            fputc('\n', f);
            fclose(f);
        }
        char **env = child_env(environ, LAUNCHER_ENV_DROP, cmd.env);
        p->pid = spawn((char *const *)cmd.argv, env, p->run_dir, log);
        if (p->pid < 0) {
            p->pid = 0;
            refuse(p, "node %s cannot start %s: fork: %s", P.c.node_name, spec.program, strerror(errno));
        } else {
            log_info("run %lld: node %d of %d started (pid %d): ranks %d to %d", (long long)p->run, p->node_rank,
                     w.nodes > 0 ? w.nodes : 1, (int)p->pid, p->first_rank, p->first_rank + p->local_ranks - 1);
        }
        free(env);
        launcher_cmd_free(&cmd);
        free(rdv);
        buf_free(&visible);
    }
    free(config);
    free(log);
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
            char *journal = xasprintf("%s/" RUN_DIR_JOURNAL, p->run_dir);
            journal_end e;
            if (journal_end_read(journal, &e)) {
                snprintf(p->reason, sizeof p->reason, "%s", e.reason);
                p->end_t = e.t;
            } else {
                p->end_t = now_ms();
                if (p->exit_code != 0)
                    snprintf(p->reason, sizeof p->reason, "its launcher %s %d without an end event (see trainer.log)",
                             WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
                             WIFSIGNALED(status) ? p->signal : p->exit_code);
            }
            free(journal);
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
    char *path = xasprintf("%s/%s", p->run_dir, p->files[f]);
    struct stat st;
    int64_t n = stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
    free(path);
    return n;
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
            char *path = xasprintf("%s/%s", p->run_dir, p->files[f]);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            free(path);
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

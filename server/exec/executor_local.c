/* This host's executor: see executor_local.h. */
#include "executor_local.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "byte_size.h"
#include "journal_end.h"
#include "journal_writers.h"
#include "run_dir.h"
#include "run_files.h"
#include "launcher_argv.h"
#include "logtail.h"
#include "procstat.h"
#include "run_dir.h"
#include "run_cgroup.h"
#include "sha256.h"
#include "state_layout.h"
#include "zygotes.h"
#include "supervisor.h"

/* One part's launcher on this host. */
typedef struct local_part {
    int64_t run;
    int part;
    bool across;         /* a part of a run across nodes: its launcher's end is read from the journal */
    bool command;        /* ddp-run (for the words of a reason) */
    bool warm;           /* a sweep's trial with warm_start.imports: counted live by its zygote (zygotes.h) */
    int64_t sweep_id;
    pid_t pid;           /* 0 while its spawn is queued */
    uint64_t start_time;
    bool adopted;        /* started by a previous server: not our child, watched in /proc */
    bool stop_asked;     /* asked to stop before its pid was known */
    int grace_ms;
    int64_t kill_at;     /* mono ms: SIGKILL then; 0: not stopping */
    int64_t term_at;     /* mono ms: asked to checkpoint and stop (preempted); SIGTERM then if still there */
    bool killed;
    long uid;            /* the account its processes run as */
    int64_t memory_bytes; /* its cgroup's memory limit (0: none), and where it comes from, for a reason */
    char memory_from[256];
    struct local_part *next;
} local_part;

static struct {
    executor_local_config c;
    executor_hooks hooks;
    pthread_mutex_t mu;
    local_part *parts;
    char self_url[128];
    int64_t next_sweep; /* mono ms: the next look for orphans of ended runs */
} L = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The URL this server answers at for its own ranks, once it listens: the base of a
 * part's rendezvous URL (other machines' is not this host's business). */
static void local_set_server_url(const char *url, const char *reachable_url) {
    (void)reachable_url;
    pthread_mutex_lock(&L.mu);
    snprintf(L.self_url, sizeof L.self_url, "%s", url);
    pthread_mutex_unlock(&L.mu);
}

static local_part **slot_of(int64_t run, int part) {
    local_part **p = &L.parts;
    while (*p && !((*p)->run == run && (*p)->part == part)) p = &(*p)->next;
    return p;
}

/* Takes the part out of the list (the caller frees it). */
static local_part *unlink_part(local_part **slot) {
    local_part *p = *slot;
    if (p) *slot = p->next;
    return p;
}

static local_part *add_part(int64_t run, int part) {
    local_part *p = xcalloc(1, sizeof *p);
    p->run = run;
    p->part = part;
    p->next = L.parts;
    L.parts = p;
    return p;
}

/* SIGTERM to the part's group now, SIGKILL after the grace (tick). */
static void sigterm_locked(local_part *p, int grace_ms) {
    p->grace_ms = grace_ms;
    p->kill_at = mono_ms() + grace_ms;
    if (kill(-p->pid, SIGTERM) != 0 && errno != ESRCH)
        log_warn("run %lld: SIGTERM to process group %d: %s", (long long)p->run, (int)p->pid, strerror(errno));
    else log_info("run %lld: SIGTERM sent to process group %d", (long long)p->run, (int)p->pid);
}

/* The cgroup of a run's part on this host (run_cgroup.h): named by the state
 * directory too, so that two servers' runs never share one, and a server started
 * again finds those of the runs it adopts (malloc'd). */
static char *part_cgroup_name(int64_t run, int part) {
    char hex[SHA256_HEX_LEN + 1];
    sha256_hex(layout_state_dir(), hex);
    return xasprintf("%.12s-run-%lld-%d", hex, (long long)run, part);
}

/* The run a process belongs to, from its DDPD_RUN_ID (every process of a run has it);
 * -1 when its environment cannot be read (another account's, to a server without
 * CAP_SYS_PTRACE) or has none. */
static int64_t run_of_process(pid_t pid) {
    char buf[16384];
    long got = proc_read(pid, "environ", buf, sizeof buf);
    if (got < 0) return -1;
    size_t n = (size_t)got;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strncmp(buf + i, "DDPD_RUN_ID=", 12) == 0) return strtoll(buf + i + 12, NULL, 10);
    return -1;
}

/* Where a run has no cgroup: a process of it that left its session and whose parent
 * ended was handed to this server (a child subreaper: supervisor.c), not to init. Such
 * an orphan of a run that no longer runs here is killed: by the run its environment
 * names, else (an environment this server may not read) by its account, when no run
 * of that account runs here. Returns how many. */
static bool sweep_orphan(pid_t pid, const proc_stat *ps, void *ctx) {
    int *killed = ctx;
    if (ps->ppid != getpid() || ps->state == 'Z' || zygotes_has(pid)) return true;
    struct stat st;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    if (stat(path, &st) != 0) return true;
    int64_t run = run_of_process(pid);
    bool ours = false, live = false;
    pthread_mutex_lock(&L.mu);
    for (local_part *p = L.parts; p; p = p->next) {
        if (p->pid == pid) ours = true; /* a launcher */
        if (run >= 0 ? p->run == run : p->uid == (long)st.st_uid) live = true;
    }
    pthread_mutex_unlock(&L.mu);
    bool of_a_run = run >= 0 || st.st_uid != geteuid(); /* the server's own helpers are neither */
    if (!ours && !live && of_a_run && kill(pid, SIGKILL) == 0) {
        (*killed)++;
        log_info("killed process %d, left behind by %s%lld that has ended", (int)pid, run >= 0 ? "run " : "uid ",
                 run >= 0 ? (long long)run : (long long)st.st_uid);
    }
    return true;
}

static int sweep_orphans(void) {
    int killed = 0;
    proc_each_child(sweep_orphan, &killed); /* an orphan handed to this server is its child */
    return killed;
}

/* Kills whatever is left of the part's processes, wherever they went (its cgroup). */
static int kill_cgroup(int64_t run, int part) {
    char *name = part_cgroup_name(run, part);
    int killed = run_cgroup_kill(name);
    free(name);
    if (killed) log_info("run %lld: killed %d process%s left in its cgroup", (long long)run, killed,
                         killed == 1 ? "" : "es");
    return killed;
}

static start_result local_start(const part_launch *l, part_handle *h) {
    (void)h;
    journal_writers_started(l->run); /* before its processes may write its journal */
    const char *program = l->command ? L.c.runner : L.c.trainer;
    char *run_dir = layout_run_dir(l->run), *config = layout_run_path(l->run, RUN_FILE_CONFIG);
    pthread_mutex_lock(&L.mu);
    local_part *p = add_part(l->run, l->part);
    p->across = l->nodes > 0;
    p->command = l->command;
    p->memory_bytes = l->memory_bytes;
    snprintf(p->memory_from, sizeof p->memory_from, "%s", l->memory_from ? l->memory_from : "");
    char *rendezvous = xasprintf("%s%s", L.self_url, l->rendezvous);
    pthread_mutex_unlock(&L.mu);
    launcher_spec spec = {.program = program, .config = config, .run_dir = run_dir, .events = layout_socket_path(),
                          .command = l->command, .master_port = l->master_port, .port_lo = l->port_lo,
                          .port_hi = l->port_hi, .graces = true, .stop_grace_s = l->stop_grace_s,
                          .preempt_grace_s = l->preempt_grace_s, .restart_count = l->restart_count,
                          .restarts_from = l->restarts_from, .nodes = l->nodes,
                          .node_rank = l->part, .master_addr = l->master_addr, .node_addr = L.c.advertise,
                          .rendezvous = rendezvous, .resume = l->resume, .ranks = l->ranks, .data_roots = L.c.data_roots,
                          .n_data_roots = L.c.n_data_roots, .run_id = l->run, .secret = l->secret,
                          .visible = l->visible};
    launcher_cmd cmd;
    launcher_cmd_build(&spec, &cmd);
    char attempt[96] = "";
    if (l->restart_count > 0)
        snprintf(attempt, sizeof attempt, ", attempt %d (TORCHELASTIC_RESTART_COUNT=%d)", l->restart_count,
                 l->restart_count);
    char *banner = l->command ? xasprintf("starting %s for run %lld on %s, MASTER_PORT %d%s", program,
                                          (long long)l->run, l->where, l->master_port, attempt)
                              : xasprintf("starting %s for run %lld on %s%s", program, (long long)l->run, l->where,
                                          attempt);
    /* whom it runs as (the scheduler's run_as); a refusal comes back as a start that failed */
    if (l->account) layout_open_for_accounts();
    pthread_mutex_lock(&L.mu);
    local_part *me = *slot_of(l->run, l->part);
    if (me) me->uid = l->account ? (long)l->account->uid : (long)geteuid();
    pthread_mutex_unlock(&L.mu);
    /* every process it starts kept in one cgroup; a CPU run's on the CPUs of its slots */
    char *cgroup = part_cgroup_name(l->run, l->part);
    int *cpus = xmalloc((size_t)(l->n_devices > 0 ? l->n_devices : 1) * sizeof *cpus);
    int n_cpus = 0;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; !l->gpu && i < l->n_devices && online > 0; i++) cpus[n_cpus++] = l->devices[i] % (int)online;
    /* a sweep's Python trial that names warm_start.imports: its ranks forked from the sweep's zygote */
    warm_handle warm = {0};
    char **env_set = cmd.env;
    run_cgroup_limits limits = {.memory_bytes = l->memory_bytes, .pids_max = l->pids_max};
    if (l->command && l->sweep_id > 0 && !l->nodes) {
        char why[256], cold[512];
        json_t *config = run_file_load_json_in(run_dir, layout_run_file_name(RUN_FILE_CONFIG), 1 << 20, why, sizeof why);
        if (config && json_object_get(config, "warm_start")) {
            zygotes_trial_starts(l->sweep_id, l->account, config, &limits, &warm, cold, sizeof cold);
            if (cold[0]) { /* its log says why it starts cold */
                char *said = xasprintf("%s; warm start: this trial starts cold: the zygote of sweep %lld %s", banner,
                                       (long long)l->sweep_id, cold);
                free(banner);
                banner = said;
            }
            pthread_mutex_lock(&L.mu);
            if (me) me->warm = true, me->sweep_id = l->sweep_id;
            pthread_mutex_unlock(&L.mu);
        }
        json_decref(config);
    }
    if (warm.socket[0]) {
        size_t n = 0;
        while (cmd.env[n]) n++;
        env_set = xcalloc(n + 2, sizeof *env_set);
        for (size_t i = 0; i < n; i++) env_set[i] = cmd.env[i];
        env_set[n] = WARM_FD_SLOT;
    }
    spawn_request req = {.run_id = l->run, .group = l->part, .program = program, .argv = (char *const *)cmd.argv,
                         .env_set = env_set, .warm = warm, .env_drop = LAUNCHER_ENV_DROP, .cwd = run_dir, .log_name = RUN_DIR_LOG,
                         .log_banner = banner, .account = l->account, .refused = l->account_refused,
                         .cgroup = cgroup, .cpus = cpus, .n_cpus = n_cpus,
                         .limits = limits};
    supervisor_request_spawn(&req);
    if (env_set != cmd.env) free(env_set);
    free(cgroup);
    free(cpus);
    launcher_cmd_free(&cmd);
    free(banner);
    free(rendezvous);
    free(run_dir);
    free(config);
    return START_PENDING;
}

void executor_local_spawned(int64_t run, int group, pid_t pid, const char *err) {
    if (group == ZYGOTE_GROUP) {
        if (pid < 0) log_warn("warm start: the zygote could not start: %s: trials start cold", err);
        zygotes_spawned(run, pid, err);
        return;
    }
    pthread_mutex_lock(&L.mu);
    local_part **slot = slot_of(run, group);
    local_part *p = *slot;
    if (!p || pid < 0) { /* released meanwhile; or it could not start */
        bool wanted = p != NULL;
        free(unlink_part(slot));
        pthread_mutex_unlock(&L.mu);
        if (pid > 0) kill(-pid, SIGKILL);
        else if (wanted) L.hooks.started(run, group, NULL, err);
        return;
    }
    p->pid = pid;
    proc_stat ps; /* not reaped yet (this thread reaps after this): /proc has it */
    part_handle h = {.pid = pid, .start_time = proc_stat_read(pid, &ps) == 0 ? ps.start_time : 0};
    p->start_time = h.start_time;
    if (p->stop_asked) sigterm_locked(p, p->grace_ms);
    pthread_mutex_unlock(&L.mu);
    if (L.hooks.started(run, group, &h, NULL)) return;
    kill(-pid, SIGKILL); /* the run no longer wants it: reaped as any child, its end goes nowhere */
}

/* The reason a person reads when the launcher's end gave none. */
static char *describe_end(const local_part *p, int wstatus) {
    const char *who = p->command ? "ddp-run" : "ddp-trainer";
    char how[128];
    describe_wait_status(wstatus, how, sizeof how);
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 2) {
        /* 2: invalid config or usage, said in the log before any rank started */
        char *dir = layout_run_dir(p->run);
        char *last = logtail_last_line(dir, RUN_DIR_LOG, 400);
        free(dir);
        char *reason = last ? xasprintf("the trainer refused the run: %s", last)
                            : xasprintf("%s %s (invalid config or usage); see its log", who, how);
        free(last);
        return reason;
    }
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) > 128) {
        int sig = WEXITSTATUS(wstatus) - 128;
        return xasprintf("%s stopped on signal %d (%s) that the server did not send", who, sig, strsignal(sig));
    }
    char *dir = layout_run_dir(p->run);
    char *last = WIFEXITED(wstatus) ? logtail_last_line(dir, RUN_DIR_LOG, 400) : NULL;
    free(dir);
    char *reason = last ? xasprintf("%s %s; its last log line: %s", who, how, last) : xasprintf("%s %s", who, how);
    free(last);
    return reason;
}

/* "ran out of its memory limit of 2 GiB (resources.memory_gb): ..." when the part's
 * cgroup counted an OOM kill (malloc'd), else NULL. Before its cgroup is removed. */
static char *out_of_memory(const local_part *p) {
    char *name = part_cgroup_name(p->run, p->part);
    long kills = run_cgroup_oom_kills(name);
    free(name);
    if (kills <= 0) return NULL;
    char limit[32] = "";
    if (p->memory_bytes > 0) byte_size_format((uint64_t)p->memory_bytes, limit, sizeof limit);
    return xasprintf("out of memory: its processes on %s together passed their memory limit%s%s%s%s%s, and the kernel "
                     "killed %ld of them for it (raise resources.memory_gb, within your --max-memory-gb)",
                     "this host", limit[0] ? " of " : "", limit, p->memory_from[0] ? " (" : "", p->memory_from,
                     p->memory_from[0] ? ")" : "", kills);
}

/* "its log reached its cap ..." when the run's log is at its cap (the launchers stop
 * writing there, log_cap.h), malloc'd; else NULL. The file is looked at through the
 * run's directory's descriptor, not opened, and a link there is not followed
 * (run_files.h). */
static char *log_capped(const local_part *p) {
    if (!L.c.max_log_bytes) return NULL;
    char *dir = layout_run_dir(p->run), why[256];
    struct stat st;
    run_dir d;
    bool at_cap = run_dir_open(&d, dir, why, sizeof why) == 0 && run_dir_stat(&d, RUN_DIR_LOG, &st) == 0 &&
                  S_ISREG(st.st_mode) && (uint64_t)st.st_size + RUN_DIR_LOG_CAP_ROOM > L.c.max_log_bytes;
    if (d.fd >= 0) run_dir_close(&d);
    free(dir);
    if (!at_cap) return NULL;
    char cap[32];
    return xasprintf("its log reached its cap of %s (ddpd serve --max-log-bytes-per-run): the lines past it were "
                     "dropped", byte_size_format(L.c.max_log_bytes, cap, sizeof cap));
}

void executor_local_exited(pid_t pid, int wstatus) {
    if (zygotes_exited(pid)) return;
    pthread_mutex_lock(&L.mu);
    local_part **slot = &L.parts;
    while (*slot && !((*slot)->pid == pid && !(*slot)->adopted)) slot = &(*slot)->next;
    local_part *p = unlink_part(slot);
    pthread_mutex_unlock(&L.mu);
    if (!p) return;
    if (p->warm) zygotes_trial_ended(p->sweep_id, p->uid);
    /* No process of the run may outlive it: the ranks die with the launcher
     * (PR_SET_PDEATHSIG), and this catches any that have not yet. */
    if (kill(-pid, SIGKILL) == 0) log_info("run %lld: killed what was left of process group %d", (long long)p->run, (int)pid);
    char *oom = out_of_memory(p); /* its cgroup's count, before the cgroup goes */
    kill_cgroup(p->run, p->part); /* and any that left the group (setsid) */
    sweep_orphans();              /* where there was no cgroup */
    part_end e = {.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : NO_INT,
                  .exit_signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : NO_INT, .end_t = now_ms()};
    journal_end je;
    if (p->across) { /* the relayed parts' ends come through the same socket: only the journal here says ours */
        char *dir = layout_run_dir(p->run);
        if (journal_end_read(dir, &je)) {
            e.reason = je.reason[0] ? je.reason : NULL;
            e.end_t = je.t;
        }
        free(dir);
    }
    char *how = e.exit_code != 0 ? describe_end(p, wstatus) : NULL;
    char *capped = log_capped(p);
    e.how = how;
    e.out_of_memory = oom;
    e.log_capped = capped;
    if (oom) log_warn("run %lld: %s", (long long)p->run, oom);
    L.hooks.ended(p->run, p->part, &e);
    free(how);
    free(oom);
    free(capped);
    free(p);
}

static void local_stop(int64_t run, int part, int grace_ms) {
    pthread_mutex_lock(&L.mu);
    local_part *p = *slot_of(run, part);
    if (p && p->pid > 0) {
        sigterm_locked(p, grace_ms);
    } else if (p) { /* its spawn is queued: SIGTERM once it has a pid */
        p->stop_asked = true;
        p->grace_ms = grace_ms;
    }
    pthread_mutex_unlock(&L.mu);
}

/* SIGUSR1 to the launcher alone (ddp-trainer: checkpoint at the next step, then stop;
 * ddp-run: the notice to its ranks, and at a second SIGUSR1 their stop); a stop as
 * local_stop's if it is still there preempt_grace_ms after the first. */
static void local_preempt(int64_t run, int part, int preempt_grace_ms, int grace_ms) {
    pthread_mutex_lock(&L.mu);
    local_part *p = *slot_of(run, part);
    if (p && p->pid > 0 && !p->kill_at) {
        p->grace_ms = grace_ms;
        if (!p->term_at) p->term_at = mono_ms() + preempt_grace_ms; /* a second SIGUSR1 moves no deadline */
        if (kill(p->pid, SIGUSR1) != 0 && errno != ESRCH)
            log_warn("run %lld: SIGUSR1 to its launcher %d: %s", (long long)p->run, (int)p->pid, strerror(errno));
        else log_info("run %lld: SIGUSR1 sent to its launcher (pid %d): checkpoint and stop", (long long)p->run,
                      (int)p->pid);
    } else if (p && !p->pid) { /* its spawn is queued: nothing to checkpoint yet, it is stopped once it has a pid */
        p->stop_asked = true;
        p->grace_ms = grace_ms;
    }
    pthread_mutex_unlock(&L.mu);
}

static void local_release(int64_t run, int part) {
    pthread_mutex_lock(&L.mu);
    free(unlink_part(slot_of(run, part)));
    pthread_mutex_unlock(&L.mu);
}

typedef struct {
    pid_t pgid;
    const char *run_dir;
    int killed;
} leftovers;

static bool kill_leftover(pid_t pid, const proc_stat *ps, void *ctx) {
    leftovers *l = ctx;
    if (ps->pgrp == l->pgid && proc_cmdline_has(pid, l->run_dir) && kill(pid, SIGKILL) == 0) l->killed++;
    return true;
}

/* Kills the processes of process group `pgid` that belong to `run_dir` (a pid may
 * have been reused: only processes started for that run directory are touched).
 * Returns how many. */
static int kill_leftovers(pid_t pgid, const char *run_dir) {
    leftovers l = {.pgid = pgid, .run_dir = run_dir};
    proc_each(kill_leftover, &l);
    return l.killed;
}

static adopt_result local_adopt(const part_launch *l, const part_handle *h, char *gone, size_t gone_len) {
    int64_t run = l->run;
    int part = l->part;
    char *run_dir = layout_run_dir(run);
    bool recorded = h->start_time != 0;
    bool alive = h->pid > 0 && recorded && proc_is_alive(h->pid, h->start_time) && proc_cmdline_has(h->pid, run_dir);
    if (alive) {
        pthread_mutex_lock(&L.mu);
        local_part *p = add_part(run, part);
        p->pid = h->pid;
        p->start_time = h->start_time;
        p->adopted = true;
        pthread_mutex_unlock(&L.mu);
    } else {
        int killed = h->pid > 0 ? kill_leftovers(h->pid, run_dir) : 0;
        killed += kill_cgroup(run, part);
        snprintf(gone, gone_len, "%s",
                 !killed    ? "the server restarted and the run's processes were gone"
                 : recorded ? "the server restarted and the run's launcher was gone: what was left of its processes "
                              "was killed"
                            : "the server restarted and could not take the run's processes back (their start time "
                              "was not recorded): they were killed");
    }
    free(run_dir);
    return alive ? ADOPT_TAKEN : ADOPT_GONE;
}

static void local_abandon(int64_t run, const part_handle *h) {
    if (h->pid <= 0) return;
    char *run_dir = layout_run_dir(run);
    kill_leftovers(h->pid, run_dir);
    free(run_dir);
    kill_cgroup(run, 0);
}

/* SIGKILLs after the grace; adopted launchers that are gone (what is left of their
 * group is killed) end. */
static void local_tick(void) {
    int64_t now = mono_ms();
    zygotes_tick(false);
    if (now >= L.next_sweep) { /* an orphan whose run ended before it was handed to this server */
        L.next_sweep = now + 1000;
        sweep_orphans();
    }
    local_part *gone = NULL;
    pthread_mutex_lock(&L.mu);
    for (local_part **slot = &L.parts; *slot;) {
        local_part *p = *slot;
        if (p->term_at && !p->kill_at && p->pid > 0 && now >= p->term_at) {
            log_warn("run %lld: its launcher has not stopped in the preemption's grace after it was asked to "
                     "checkpoint and stop", (long long)p->run);
            sigterm_locked(p, p->grace_ms);
        }
        if (p->kill_at && p->pid > 0 && !p->killed && now >= p->kill_at) {
            p->killed = true;
            log_info("run %lld: still running %d ms after SIGTERM: SIGKILL to process group %d", (long long)p->run,
                     p->grace_ms, (int)p->pid);
            kill(-p->pid, SIGKILL);
        }
        if (p->adopted && !proc_is_alive(p->pid, p->start_time)) {
            *slot = p->next;
            p->next = gone;
            gone = p;
            continue;
        }
        slot = &p->next;
    }
    pthread_mutex_unlock(&L.mu);
    while (gone) {
        local_part *p = gone;
        gone = p->next;
        char *run_dir = layout_run_dir(p->run);
        if (kill_leftovers(p->pid, run_dir))
            log_info("run %lld: killed what was left of process group %d", (long long)p->run, (int)p->pid);
        free(run_dir);
        kill_cgroup(p->run, p->part);
        char *how = xasprintf("its launcher (pid %d) exited while the server was not its parent", (int)p->pid);
        part_end e = {.exit_code = NO_INT, .exit_signal = NO_INT, .how = how, .end_t = now_ms()};
        L.hooks.ended(p->run, p->part, &e);
        free(how);
        free(p);
    }
}

static const executor LOCAL = {.name = "local", .title = "this host", .start = local_start, .stop = local_stop,
                               .preempt = local_preempt, .release = local_release, .adopt = local_adopt,
                               .abandon = local_abandon, .tick = local_tick, .set_server_url = local_set_server_url};

const executor *executor_local_init(const executor_local_config *c, const executor_hooks *hooks) {
    L.c = *c;
    L.hooks = *hooks;
    zygotes_init(c->runner);
    /* the empty cgroups of runs that ended while no server of this state dir ran */
    if (layout_state_dir()) {
        char *name = part_cgroup_name(0, 0);
        name[strcspn(name, "-")] = '\0';
        run_cgroup_remove_empty(name);
        free(name);
    }
    return &LOCAL;
}

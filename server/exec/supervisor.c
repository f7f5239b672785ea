/* Starting, reaping and timing process groups: see supervisor.h. */
#include "supervisor.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "child_setup.h"
#include "run_cgroup.h"
#include "run_files.h"

extern char **environ;

void describe_wait_status(int wstatus, char *out, size_t outlen) {
    if (WIFEXITED(wstatus)) {
        snprintf(out, outlen, "exited with status %d", WEXITSTATUS(wstatus));
    } else if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        snprintf(out, outlen, "was killed by signal %d (%s)%s", sig, strsignal(sig),
                 WCOREDUMP(wstatus) ? ", core dumped" : "");
    } else {
        snprintf(out, outlen, "ended with wait status %#x", wstatus);
    }
}

/* ---- requests: deep copies, queued for the supervisor's thread ---- */

typedef struct queued_spawn {
    int64_t run_id;
    int group;
    char *program, *cwd, *log_name, *log_banner;
    char **argv, **env_set, **env_drop;
    run_account account;
    bool as_account;
    char *refused;
    char *cgroup;
    run_cgroup cgroups; /* made on the supervisor's thread before the fork */
    run_cgroup_limits limits;
    warm_handle warm;
    int cpus[CPU_SETSIZE];
    int n_cpus;
    struct queued_spawn *next;
} queued_spawn;

static char **copy_strv(char *const *v) {
    size_t n = 0;
    while (v && v[n]) n++;
    char **c = xmalloc((n + 1) * sizeof *c);
    for (size_t i = 0; i < n; i++) c[i] = xstrdup(v[i]);
    c[n] = NULL;
    return c;
}

static void free_strv(char **v) {
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

static void free_queued(queued_spawn *q) {
    free(q->program);
    free(q->cwd);
    free(q->log_name);
    free(q->log_banner);
    free(q->refused);
    free(q->cgroup);
    free_strv(q->argv);
    free_strv(q->env_set);
    free_strv(q->env_drop);
    free(q);
}

static struct {
    supervisor_hooks hooks;
    pthread_t thread;
    int sigfd, wake_fd, stop_pipe[2];
    bool started;
    pthread_mutex_t mu;
    queued_spawn *head, *tail;
} R = {.sigfd = -1, .wake_fd = -1, .stop_pipe = {-1, -1}, .mu = PTHREAD_MUTEX_INITIALIZER};

void supervisor_request_spawn(const spawn_request *r) {
    queued_spawn *q = xcalloc(1, sizeof *q);
    q->run_id = r->run_id;
    q->group = r->group;
    q->program = xstrdup(r->program);
    q->cwd = xstrdup(r->cwd);
    q->log_name = xstrdup(r->log_name);
    q->log_banner = xstrdup(r->log_banner);
    q->argv = copy_strv(r->argv);
    q->env_set = copy_strv(r->env_set);
    q->env_drop = copy_strv(r->env_drop);
    if (r->account) q->account = *r->account, q->as_account = true;
    q->refused = r->refused ? xstrdup(r->refused) : NULL;
    q->cgroup = r->cgroup ? xstrdup(r->cgroup) : NULL;
    q->limits = r->limits;
    q->warm = r->warm;
    if (q->as_account) q->limits.reader_gid = q->account.gid; /* its launcher reads its OOM kills (run_cgroup.h) */
    for (int i = 0; i < r->n_cpus && q->n_cpus < CPU_SETSIZE; i++) q->cpus[q->n_cpus++] = r->cpus[i];
    pthread_mutex_lock(&R.mu);
    if (R.tail) R.tail->next = q;
    else R.head = q;
    R.tail = q;
    pthread_mutex_unlock(&R.mu);
    (void)eventfd_write(R.wake_fd, 1);
}

/* ---- spawning ---- */

/* The child's side of fork_as: its own session, the log as its output, the account
 * become, its run directory as cwd, the server's signals and descriptors gone, exec.
 * Async-signal-safe calls only. On a failure: errno and the step, on `report`. */
static void child_as(const queued_spawn *q, int log_fd, int report, char **env) {
    const char *step = "setsid";
    if (setsid() < 0) goto fail;
    child_reset_signals();
    step = "open /dev/null";
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0) goto fail;
    /* none of the server's descriptors goes through exec (the report pipe closes there too) */
    step = "close the server's descriptors";
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) goto fail;
    step = "join the run's cgroup";
    if (run_cgroup_join(&q->cgroups) != 0) goto fail;
    step = "take the run's CPUs";
    if (q->n_cpus > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int i = 0; i < q->n_cpus; i++) CPU_SET(q->cpus[i], &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) goto fail;
    }
    /* a warm start's trial zygote, moved into the cgroup joined above (root still) */
    zygote_handoff(&q->warm, q->as_account ? q->account.uid : geteuid(), &q->cgroups, env);
    step = "become the account";
    if (q->as_account && run_account_become(&q->account) != 0) goto fail;
    step = "enter the run directory";
    if (q->cwd && chdir(q->cwd) != 0) goto fail;
    step = "exec";
    if (strchr(q->program, '/')) execve(q->program, q->argv, env);
    else execvpe(q->program, q->argv, env);
fail:;
    int e = errno;
    ssize_t w = write(report, &e, sizeof e);
    w = write(report, step, strlen(step));
    (void)w;
    _exit(127);
}

/* Starts the program: fork, and the child joins its cgroup, takes its CPUs and
 * becomes its account (q->account, when as_account) before exec, which a posix_spawn
 * cannot. A pipe closed on exec says whether the exec happened. */
static pid_t fork_as(queued_spawn *q, int log_fd, char **env, char *err, size_t errlen) {
    if (q->cgroup) {
        char why[512];
        static bool said, said_unlimited;
        if (run_cgroup_make(q->cgroup, q->cpus, q->n_cpus, &q->limits, &q->cgroups, why, sizeof why) != 0 && !said) {
            said = true; /* once: the host has none to give, each run says the same */
            log_warn("%s: runs are tracked by their process group and confined to their CPUs by affinity only, "
                     "without a memory or process limit (a process that leaves its session outlives its run)", why);
        } else if (q->cgroups.n && q->cgroups.unlimited[0] && !said_unlimited) {
            said_unlimited = true; /* once, as above */
            log_warn("runs go without %s (ddpd check says what this host's cgroups can limit)", q->cgroups.unlimited);
        }
    }
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot start %s: pipe: %s", q->program, strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(report[0]);
        child_as(q, log_fd, report[1], env);
    }
    close(report[1]);
    if (pid < 0) {
        snprintf(err, errlen, "cannot start %s: fork: %s", q->program, strerror(errno));
        close(report[0]);
        return -1;
    }
    int child_errno = 0;
    char step[64] = "";
    (void)env;
    ssize_t n = read(report[0], &child_errno, sizeof child_errno);
    if (n == (ssize_t)sizeof child_errno) {
        ssize_t m = read(report[0], step, sizeof step - 1);
        step[m > 0 ? m : 0] = '\0';
    }
    close(report[0]);
    if (n <= 0) return pid; /* the exec closed it: started */
    waitpid(pid, NULL, 0);
    if (q->as_account)
        snprintf(err, errlen, "cannot start %s as the account %s (uid %d): %s: %s", q->program, q->account.name,
                 (int)q->account.uid, step, strerror(child_errno));
    else snprintf(err, errlen, "cannot start %s: %s: %s", q->program, step, strerror(child_errno));
    if (q->cgroup && q->cgroups.n) run_cgroup_kill(q->cgroup);
    return -1;
}

static pid_t spawn_one(queued_spawn *q, char *err, size_t errlen) {
    if (q->refused) {
        snprintf(err, errlen, "%s", q->refused);
        return -1;
    }
    /* the run directory handed to its account first, so that the log it makes is the
     * account's; never through a link the run put there, never blocked by a FIFO */
    run_dir d;
    char why[384];
    if (run_dir_open(&d, q->cwd, why, sizeof why) != 0) {
        snprintf(err, errlen, "cannot open the run's directory: %s", why);
        return -1;
    }
    if (q->as_account && run_dir_hand_over(&d, q->account.uid, getegid(), 0770, why, sizeof why) != 0) {
        snprintf(err, errlen, "cannot hand the run directory to the account %s: %s", q->account.name, why);
        run_dir_close(&d);
        return -1;
    }
    int log_fd = run_file_open_append(&d, q->log_name, why, sizeof why);
    run_dir_close(&d);
    if (log_fd < 0) {
        snprintf(err, errlen, "cannot open the run's log: %s", why);
        return -1;
    }
    if (q->log_banner) {
        char when[32];
        format_iso8601(now_ms(), when);
        dprintf(log_fd, "%s ddpd: %s\n", when, q->log_banner);
    }
    if (q->warm.socket[0] && q->warm.zygote <= 0 && q->warm.resolve) /* its zygote's spawn came first */
        q->warm.zygote = q->warm.resolve(q->warm.key);
    char **set = q->as_account ? run_account_env(&q->account, q->env_set) : NULL;
    char **env = child_env(environ, q->env_drop, set ? set : q->env_set);
    pid_t pid = fork_as(q, log_fd, env, err, errlen);
    if (pid < 0) dprintf(log_fd, "ddpd: %s\n", err);
    close(log_fd);
    free(env);
    run_account_env_free(set);
    return pid;
}

static void spawn_queued(void) {
    for (;;) {
        pthread_mutex_lock(&R.mu);
        queued_spawn *q = R.head;
        if (q) {
            R.head = q->next;
            if (!R.head) R.tail = NULL;
        }
        pthread_mutex_unlock(&R.mu);
        if (!q) return;
        char err[512] = "";
        pid_t pid = spawn_one(q, err, sizeof err);
        if (R.hooks.spawned) R.hooks.spawned(q->run_id, q->group, pid, err);
        free_queued(q);
    }
}

/* ---- the supervisor's thread ---- */

static void reap_all(void) {
    int wstatus;
    pid_t pid;
    while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0)
        if (R.hooks.exited) R.hooks.exited(pid, wstatus);
}

static void *supervisor_main(void *arg) {
    (void)arg;
    struct pollfd p[3] = {{R.sigfd, POLLIN, 0}, {R.wake_fd, POLLIN, 0}, {R.stop_pipe[0], POLLIN, 0}};
    for (;;) {
        int n = poll(p, 3, 100);
        if (n > 0 && (p[2].revents & POLLIN)) break;
        if (n > 0 && (p[0].revents & POLLIN)) {
            struct signalfd_siginfo si[16];
            while (read(R.sigfd, si, sizeof si) > 0) {
            }
        }
        if (n > 0 && (p[1].revents & POLLIN)) {
            uint64_t v;
            ssize_t r = read(R.wake_fd, &v, sizeof v);
            (void)r;
        }
        spawn_queued();
        /* SIGCHLDs coalesce: reap on every wake-up, not per signal. */
        reap_all();
        if (R.hooks.tick) R.hooks.tick();
    }
    reap_all();
    return NULL;
}

int supervisor_start(const supervisor_hooks *hooks) {
    R.hooks = *hooks;
    /* a run's process whose parent ends comes to this server, not to init: reaped here,
     * and found by the executor's sweep where the run has no cgroup */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) log_warn("cannot become the runs' subreaper: %s", strerror(errno));
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    R.sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    R.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (R.sigfd < 0 || R.wake_fd < 0 || pipe2(R.stop_pipe, O_CLOEXEC) != 0) return -1;
    if (pthread_create(&R.thread, NULL, supervisor_main, NULL) != 0) return -1;
    R.started = true;
    return 0;
}

void supervisor_stop(void) {
    if (R.started) {
        ssize_t w = write(R.stop_pipe[1], "x", 1);
        (void)w;
        pthread_join(R.thread, NULL);
        R.started = false;
    }
    while (R.head) {
        queued_spawn *q = R.head;
        R.head = q->next;
        free_queued(q);
    }
    R.tail = NULL;
    if (R.sigfd >= 0) close(R.sigfd);
    if (R.wake_fd >= 0) close(R.wake_fd);
    if (R.stop_pipe[0] >= 0) close(R.stop_pipe[0]);
    if (R.stop_pipe[1] >= 0) close(R.stop_pipe[1]);
    R.sigfd = R.wake_fd = R.stop_pipe[0] = R.stop_pipe[1] = -1;
}

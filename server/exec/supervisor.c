/* Starting, reaping and timing process groups: see supervisor.h. */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "child_setup.h"

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
    char *program, *cwd, *log_path, *log_banner;
    char **argv, **env_set, **env_drop;
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
    free(q->log_path);
    free(q->log_banner);
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
    queued_spawn *q = calloc(1, sizeof *q);
    if (!q) abort();
    q->run_id = r->run_id;
    q->group = r->group;
    q->program = xstrdup(r->program);
    q->cwd = xstrdup(r->cwd);
    q->log_path = xstrdup(r->log_path);
    q->log_banner = xstrdup(r->log_banner);
    q->argv = copy_strv(r->argv);
    q->env_set = copy_strv(r->env_set);
    q->env_drop = copy_strv(r->env_drop);
    pthread_mutex_lock(&R.mu);
    if (R.tail) R.tail->next = q;
    else R.head = q;
    R.tail = q;
    pthread_mutex_unlock(&R.mu);
    (void)eventfd_write(R.wake_fd, 1);
}

/* ---- spawning ---- */

static pid_t spawn_one(const queued_spawn *q, char *err, size_t errlen) {
    int log_fd = open(q->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) {
        snprintf(err, errlen, "cannot open the run's log %s: %s", q->log_path, strerror(errno));
        return -1;
    }
    if (q->log_banner) {
        char when[32];
        format_iso8601(now_ms(), when);
        dprintf(log_fd, "%s ddpd: %s\n", when, q->log_banner);
    }
    char **env = child_env(environ, q->env_drop, q->env_set);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
    if (q->cwd) posix_spawn_file_actions_addchdir_np(&fa, q->cwd);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);

    /* Its own session (so its own process group: pgid = pid). The server blocks
     * SIGTERM/SIGINT/SIGCHLD and ignores SIGPIPE; the child gets none of that. */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none, defaults;
    sigemptyset(&none);
    child_default_signals(&defaults);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &defaults);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    pid_t pid = -1;
    int rc = strchr(q->program, '/') ? posix_spawn(&pid, q->program, &fa, &at, q->argv, env)
                                     : posix_spawnp(&pid, q->program, &fa, &at, q->argv, env);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start %s: %s", q->program, strerror(rc));
        dprintf(log_fd, "ddpd: %s\n", err);
        pid = -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(log_fd);
    free(env);
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

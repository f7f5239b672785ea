/* Starting, reaping and timing trainer process groups: see supervisor.h. */
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
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ingest.h"
#include "scheduler.h"
#include "util.h"

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

/* The server's environment, less its own DDPD_* settings (the token among them)
 * and CUDA_VISIBLE_DEVICES, plus the run's. */
static char **trainer_env(const spawn_request *r) {
    size_t n = 0;
    for (char **e = environ; *e; e++) n++;
    char **env = xmalloc((n + 4) * sizeof *env);
    size_t k = 0;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "DDPD_", 5) == 0 || strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) == 0) continue;
        env[k++] = xstrdup(*e);
    }
    env[k++] = xasprintf("DDPD_RUN_ID=%lld", (long long)r->run_id);
    env[k++] = xasprintf("DDPD_RUN_SECRET=%s", r->secret);
    env[k++] = xasprintf("CUDA_VISIBLE_DEVICES=%s", r->cuda_visible_devices);
    env[k] = NULL;
    return env;
}

pid_t supervisor_spawn(const spawn_request *r, char *err, size_t errlen) {
    char *log_path = xasprintf("%s/trainer.log", r->run_dir);
    char *config_path = xasprintf("%s/config.json", r->run_dir);
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        snprintf(err, errlen, "cannot open the run's log %s: %s", log_path, strerror(errno));
        free(log_path);
        free(config_path);
        return -1;
    }
    char when[32];
    format_iso8601(now_ms(), when);
    dprintf(log_fd, "%s ddpd: starting %s for run %lld on %s\n", when, r->trainer,
            (long long)r->run_id, r->devices_text);

    char *argv[] = {(char *)r->trainer, "--config", config_path, "--run-dir", (char *)r->run_dir,
                    "--events", (char *)r->events_path, NULL};
    char **env = trainer_env(r);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
    posix_spawn_file_actions_addchdir_np(&fa, r->run_dir);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);

    /* Its own session (so its own process group: pgid = pid). The server blocks
     * SIGTERM/SIGINT/SIGCHLD and ignores SIGPIPE; the trainer gets none of that. */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    int reset[] = {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof reset / sizeof *reset; i++) sigaddset(&defaults, reset[i]);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &defaults);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    pid_t pid = -1;
    int rc = posix_spawn(&pid, r->trainer, &fa, &at, argv, env);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start %s: %s", r->trainer, strerror(rc));
        dprintf(log_fd, "ddpd: %s\n", err);
        pid = -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(log_fd);
    for (char **e = env; *e; e++) free(*e);
    free(env);
    free(log_path);
    free(config_path);
    return pid;
}

/* ---- the reaper ---- */

static struct {
    pthread_t thread;
    int sigfd, stop_pipe[2];
    bool started;
} R = {.sigfd = -1, .stop_pipe = {-1, -1}};

static void reap_all(void) {
    int wstatus;
    pid_t pid;
    while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
        /* The process is gone, so everything it wrote to the event socket is there to
         * be read: let ingest read it (the `end` event has the reason) before the run
         * is finished. */
        ingest_sync();
        scheduler_child_exited(pid, wstatus);
    }
}

static void *reaper_main(void *arg) {
    (void)arg;
    struct pollfd p[2] = {{R.sigfd, POLLIN, 0}, {R.stop_pipe[0], POLLIN, 0}};
    for (;;) {
        int n = poll(p, 2, 100);
        if (n > 0 && (p[1].revents & POLLIN)) break;
        if (n > 0 && (p[0].revents & POLLIN)) {
            struct signalfd_siginfo si[16];
            while (read(R.sigfd, si, sizeof si) > 0) {
            }
        }
        /* SIGCHLDs coalesce, and one may come before its pid is recorded: reap on
         * every wake-up, not per signal. */
        reap_all();
        scheduler_tick();
    }
    reap_all();
    return NULL;
}

int supervisor_start(void) {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    R.sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    if (R.sigfd < 0 || pipe2(R.stop_pipe, O_CLOEXEC) != 0) return -1;
    if (pthread_create(&R.thread, NULL, reaper_main, NULL) != 0) return -1;
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
    if (R.sigfd >= 0) close(R.sigfd);
    if (R.stop_pipe[0] >= 0) close(R.stop_pipe[0]);
    if (R.stop_pipe[1] >= 0) close(R.stop_pipe[1]);
    R.sigfd = R.stop_pipe[0] = R.stop_pipe[1] = -1;
}

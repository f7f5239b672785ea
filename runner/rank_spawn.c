/* Starting a rank: see rank_spawn.h. Between fork and exec the child uses only
 * async-signal-safe calls; what every forked child of ddpd does first (its life tied
 * to the launcher's, its signals) is spawn/child_start.h's. */
#include "rank_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_start.h"
#include "program_path.h"

enum { STAGE_CHDIR = 1, STAGE_EXEC = 2, STAGE_SETUP = 3 };

typedef struct {
    int stage;
    int err;
} exec_report;

static void child_fail(int report_fd, int stage) {
    exec_report r = {stage, errno};
    if (write(report_fd, &r, sizeof r) < 0) { /* the launcher will see a bare exit */ }
    _exit(127);
}

static void child(const rank_command *c, pid_t launcher, int out_w, int report_w) {
    if (setpgid(0, 0) < 0) child_fail(report_w, STAGE_SETUP);
    /* no rank outlives the launcher, even a SIGKILLed one */
    if (child_tie_to_parent(launcher) < 0) child_fail(report_w, STAGE_SETUP);
    sigset_t defaults; /* the user's command starts as the server's children do, */
    child_default_signals(&defaults);
    child_signals(&defaults, c->child_mask); /* with the mask ddp-run started with */
    if (dup2(out_w, STDOUT_FILENO) < 0 || dup2(out_w, STDERR_FILENO) < 0) child_fail(report_w, STAGE_SETUP);
    if (out_w != STDOUT_FILENO && out_w != STDERR_FILENO) close(out_w);
    if (c->working_dir && chdir(c->working_dir) < 0) child_fail(report_w, STAGE_CHDIR);
    environ = (char **)c->env;
    execvp(c->argv[0], c->argv);
    child_fail(report_w, STAGE_EXEC);
}

pid_t rank_spawn(const rank_command *c, int *out_fd, char *why, size_t whylen) {
    int out[2], report[2];
    if (pipe2(out, O_CLOEXEC) < 0) {
        snprintf(why, whylen, "cannot create a pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(report, O_CLOEXEC) < 0) {
        snprintf(why, whylen, "cannot create a pipe: %s", strerror(errno));
        close(out[0]);
        close(out[1]);
        return -1;
    }
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close(out[0]);
        close(report[0]);
        child(c, launcher, out[1], report[1]);
    }
    int fork_errno = errno;
    close(out[1]);
    close(report[1]);
    if (pid < 0) {
        snprintf(why, whylen, "cannot start a process: fork: %s", strerror(fork_errno));
        close(out[0]);
        close(report[0]);
        return -1;
    }
    setpgid(pid, pid); /* also here, so that the group exists before anyone signals it */
    exec_report r;
    ssize_t got;
    do got = read(report[0], &r, sizeof r);
    while (got < 0 && errno == EINTR);
    close(report[0]);
    if (got == (ssize_t)sizeof r) {
        if (r.stage == STAGE_EXEC && r.err == EACCES) {
            snprintf(why, whylen, "cannot run %s: %s (make it executable, chmod +x, or run it through its interpreter: "
                     "python3 %s)", c->argv[0], strerror(r.err), c->argv[0]);
        } else if (r.stage == STAGE_EXEC && r.err == ENOENT) {
            char hint[1024];
            program_missing_hint(c->argv[0], program_search_path(c->env), hint, sizeof hint);
            snprintf(why, whylen, "cannot run %s: %s", c->argv[0], hint);
        } else if (r.stage == STAGE_EXEC)
            snprintf(why, whylen, "cannot run %s: %s", c->argv[0], strerror(r.err));
        else if (r.stage == STAGE_CHDIR)
            snprintf(why, whylen, "cannot enter the working directory %s: %s", c->working_dir, strerror(r.err));
        else
            snprintf(why, whylen, "cannot set up the rank's process: %s", strerror(r.err));
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        close(out[0]);
        return -1;
    }
    *out_fd = out[0];
    return pid;
}

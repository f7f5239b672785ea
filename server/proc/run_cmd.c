/* Running a short command: see run_cmd.h. */
#include "run_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "child_setup.h"
#include "run_account.h"

extern char **environ;

/* The command itself, in the grandchild: never returns. */
static void exec_command(char *const *argv, char *const *env, const run_account *as, int out_fd, int err_fd) {
    setpgid(0, 0); /* one kill reaches what it forks, at the deadline */
    child_reset_signals();
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    if (as && run_account_become(as) != 0) {
        dprintf(2, "cannot run %s as the account %s: %s\n", argv[0], as->name, strerror(errno));
        _exit(126);
    }
    execvpe(argv[0], argv, env ? env : environ);
    dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* The child between us and the command: it waits for the command (its own child, so
 * no other reaper takes it) and writes the command's pid, then its wait status. */
static void wait_for_command(char *const *argv, char *const *env, const run_account *as, int out_fd, int err_fd,
                             int status_fd) {
    pid_t cmd = fork();
    if (cmd == 0) exec_command(argv, env, as, out_fd, err_fd);
    if (write(status_fd, &cmd, sizeof cmd) != sizeof cmd || cmd < 0) _exit(1);
    int ws = 0;
    while (waitpid(cmd, &ws, 0) < 0)
        if (errno != EINTR) _exit(1);
    _exit(write(status_fd, &ws, sizeof ws) == sizeof ws ? 0 : 1);
}

typedef struct {
    int fd;
    buf_t text;
} output;

/* Reads what there is; false at the end (the fd is closed then). */
static bool read_some(output *o) {
    char chunk[8192];
    ssize_t n = read(o->fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) {
        close(o->fd);
        o->fd = -1;
        return false;
    }
    if (o->text.len < RUN_CMD_OUTPUT_MAX) buf_append(&o->text, chunk, (size_t)n);
    return true;
}

static char *take_text(output *o) {
    buf_append(&o->text, "", 1);
    char *s = o->text.data;
    o->text.data = NULL;
    return s;
}

int run_cmd(char *const *argv, char *const *env, int timeout_ms, cmd_result *r, char *err, size_t errlen) {
    return run_cmd_as(argv, env, NULL, timeout_ms, r, err, errlen);
}

int run_cmd_as(char *const *argv, char *const *env, const run_account *as, int timeout_ms, cmd_result *r, char *err,
               size_t errlen) {
    memset(r, 0, sizeof *r);
    int out[2], errp[2], st[2];
    if (pipe2(out, O_CLOEXEC) != 0) goto no_pipe;
    if (pipe2(errp, O_CLOEXEC) != 0) {
        close(out[0]), close(out[1]);
        goto no_pipe;
    }
    if (pipe2(st, O_CLOEXEC) != 0) {
        close(out[0]), close(out[1]), close(errp[0]), close(errp[1]);
        goto no_pipe;
    }
    pid_t mid = fork();
    if (mid == 0) wait_for_command(argv, env, as, out[1], errp[1], st[1]);
    close(out[1]);
    close(errp[1]);
    close(st[1]);
    if (mid < 0) {
        snprintf(err, errlen, "cannot run %s: fork: %s", argv[0], strerror(errno));
        close(out[0]), close(errp[0]), close(st[0]);
        return -1;
    }
    output o = {.fd = out[0]}, e = {.fd = errp[0]};
    pid_t cmd = -1;
    int ws = 0;
    size_t got = 0; /* bytes of the status pipe: the pid, then the wait status */
    char status[sizeof cmd + sizeof ws];
    int64_t deadline = mono_ms() + timeout_ms;
    bool killed = false;
    while (o.fd >= 0 || e.fd >= 0 || st[0] >= 0) {
        struct pollfd p[3] = {{o.fd, POLLIN, 0}, {e.fd, POLLIN, 0}, {st[0], POLLIN, 0}};
        int64_t left = deadline - mono_ms();
        if (left <= 0 && !killed) {
            if (got >= sizeof cmd && cmd > 0) kill(-cmd, SIGKILL);
            killed = true;
            r->timed_out = true;
        }
        if (poll(p, 3, killed ? 1000 : (int)(left < 1000 ? left : 1000)) < 0 && errno != EINTR) break;
        if (p[0].revents) read_some(&o);
        if (p[1].revents) read_some(&e);
        if (p[2].revents) {
            ssize_t n = read(st[0], status + got, sizeof status - got);
            if (n > 0) got += (size_t)n;
            if (got >= sizeof cmd) memcpy(&cmd, status, sizeof cmd);
            if (n <= 0 || got == sizeof status) {
                close(st[0]);
                st[0] = -1;
            }
        }
        if (killed && mono_ms() > deadline + 5000) break; /* its output held open by something it left */
    }
    if (o.fd >= 0) close(o.fd);
    if (e.fd >= 0) close(e.fd);
    if (st[0] >= 0) close(st[0]);
    while (waitpid(mid, NULL, 0) < 0 && errno == EINTR) {
    } /* ECHILD when the process's reaper took it first: its status came through the pipe */
    r->out = take_text(&o);
    r->err = take_text(&e);
    if (got == sizeof status) {
        memcpy(&ws, status + sizeof cmd, sizeof ws);
        r->wstatus = ws;
        r->ran = true;
        return 0;
    }
    snprintf(err, errlen, "%s %s", argv[0], r->timed_out ? "did not end in time and was killed" : "could not be run");
    if (!r->timed_out) return -1;
    r->ran = true; /* it ran: killed */
    r->wstatus = SIGKILL;
    return 0;
no_pipe:
    snprintf(err, errlen, "cannot run %s: pipe: %s", argv[0], strerror(errno));
    return -1;
}

void cmd_result_free(cmd_result *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

/* The last non-empty line of `text`, trimmed, into out. */
static bool last_line(const char *text, char *out, size_t n) {
    if (!text) return false;
    const char *end = text + strlen(text);
    while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ')) end--;
    const char *start = end;
    while (start > text && start[-1] != '\n') start--;
    while (start < end && (*start == ' ' || *start == '\t')) start++;
    if (start == end) return false;
    snprintf(out, n, "%.*s", (int)(end - start), start);
    return true;
}

void cmd_result_last_line(const cmd_result *r, char *out, size_t n) {
    if (n) out[0] = '\0';
    if (!last_line(r->err, out, n)) last_line(r->out, out, n);
}

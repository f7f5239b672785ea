/* Unit tests of how a run's launcher is started, for the coordinator and an agent
 * alike (server/host/launcher_argv.c, child_setup.c): the command line of a run of one
 * host, of a built-in part across nodes and of a command run's part (the options
 * ddp-trainer and ddp-run read); the variables it is given (the run's id and secret,
 * CUDA_VISIBLE_DEVICES, the DDPD_* settings passed on and no other); the server's
 * environment less what is dropped or set anew; and a forked child's signals (a real
 * fork: nothing blocked, SIGPIPE and SIGTERM back to their defaults). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "child_setup.h"
#include "launcher_argv.h"

/* The argv joined with spaces. */
static char *joined(const char *const *argv) {
    buf_t b = {0};
    for (int i = 0; argv[i]; i++) buf_printf(&b, "%s%s", i ? " " : "", argv[i]);
    return b.data;
}

static bool has(char *const *env, const char *var) {
    for (int i = 0; env[i]; i++)
        if (strcmp(env[i], var) == 0) return true;
    return false;
}

static void check_argv(const char *what, const launcher_spec *s, const char *want) {
    launcher_cmd cmd;
    launcher_cmd_build(s, &cmd);
    char *got = joined(cmd.argv);
    CHECK(strcmp(got, want) == 0, "%s:\n  %s\nwanted\n  %s", what, got, want);
    free(got);
    launcher_cmd_free(&cmd);
}

static void test_argv(void) {
    const char *roots[] = {"/data/a", "/data/b"};
    launcher_spec alone = {.program = "ddp-trainer", .config = "C", .run_dir = "D", .events = "S", .resume = true,
                           .data_roots = roots, .n_data_roots = 2, .run_id = 7, .secret = "abc"};
    check_argv("a built-in run of one host", &alone,
               "ddp-trainer --config C --run-dir D --events S --resume --data-root /data/a --data-root /data/b");
    launcher_spec part = alone;
    part.resume = false;
    part.nodes = 2;
    part.node_rank = 1;
    part.node_addr = "10.0.0.2";
    part.rendezvous = "http://10.0.0.1:8080/runs/7/rendezvous";
    check_argv("a built-in part across nodes", &part,
               "ddp-trainer --config C --run-dir D --events S --nodes 2 --node-rank 1 --node-addr 10.0.0.2 "
               "--rendezvous http://10.0.0.1:8080/runs/7/rendezvous --data-root /data/a --data-root /data/b");
    launcher_spec command = part;
    command.program = "ddp-run";
    command.command = true;
    command.master_port = 29601;
    command.master_addr = "10.0.0.1";
    check_argv("a command run's part across nodes: no data roots, its MASTER_ADDR and MASTER_PORT", &command,
               "ddp-run --config C --run-dir D --events S --master-port 29601 --nodes 2 --node-rank 1 "
               "--master-addr 10.0.0.1");
    command.nodes = 0;
    check_argv("a command run of one host", &command, "ddp-run --config C --run-dir D --events S --master-port 29601");
    command.restart_count = command.restarts_from = 2; /* a preemption uses none of its restarts */
    check_argv("a command run restarted after a preemption: its count goes on", &command,
               "ddp-run --config C --run-dir D --events S --master-port 29601 --restart-count 2");
    command.restarts_from = 1;
    check_argv("a command run resumed at attempt 1, then restarted: its restarts count from 1", &command,
               "ddp-run --config C --run-dir D --events S --master-port 29601 --restart-count 2 --restarts-from 1");
    command.restart_count = command.restarts_from = 0;
    command.graces = true;
    command.stop_grace_s = 30;
    command.preempt_grace_s = 60;
    check_argv("a command run: its ranks' graces after SIGTERM and SIGUSR1, the server's", &command,
               "ddp-run --config C --run-dir D --events S --master-port 29601 --stop-grace 30 --preempt-grace 60");
    alone.graces = true;
    check_argv("a built-in run: no graces (ddp-trainer keeps its own)", &alone,
               "ddp-trainer --config C --run-dir D --events S --resume --data-root /data/a --data-root /data/b");
    alone.ranks = 2;
    check_argv("an elastic run shrunk: its ranks", &alone,
               "ddp-trainer --config C --run-dir D --events S --resume --ranks 2 --data-root /data/a --data-root /data/b");
}

static void test_env(void) {
    setenv("DDPD_CACHE_DIR", "/cache", 1);
    unsetenv("DDPD_CPU_CONV");
    launcher_spec s = {.program = "ddp-trainer", .config = "C", .run_dir = "D", .events = "S", .run_id = 12,
                       .secret = "f00d", .visible = "GPU-1,GPU-2"};
    launcher_cmd cmd;
    launcher_cmd_build(&s, &cmd);
    CHECK(has(cmd.env, "DDPD_RUN_ID=12") && has(cmd.env, "DDPD_RUN_SECRET=f00d") &&
              has(cmd.env, "CUDA_VISIBLE_DEVICES=GPU-1,GPU-2") && has(cmd.env, "DDPD_CACHE_DIR=/cache"),
          "the run's id, secret, GPUs and the cache dir passed on");
    int n = 0;
    while (cmd.env[n]) n++;
    CHECK(n == 4, "nothing else is set: %d variables", n);

    char *base[] = {"PATH=/bin", "DDPD_TOKEN=secret", "CUDA_VISIBLE_DEVICES=0", "HOME=/root", NULL};
    char **env = child_env(base, LAUNCHER_ENV_DROP, cmd.env);
    CHECK(has(env, "PATH=/bin") && has(env, "HOME=/root"), "the server's own variables are kept");
    CHECK(!has(env, "DDPD_TOKEN=secret"), "the server's DDPD_* settings are not");
    CHECK(has(env, "CUDA_VISIBLE_DEVICES=GPU-1,GPU-2") && !has(env, "CUDA_VISIBLE_DEVICES=0"),
          "a variable set anew replaces the server's");
    CHECK(has(env, "DDPD_RUN_ID=12") && has(env, "DDPD_CACHE_DIR=/cache"), "what is set is there, DDPD_ or not");
    free(env);
    launcher_cmd_free(&cmd);

    s.visible = NULL;
    launcher_cmd_build(&s, &cmd);
    CHECK(has(cmd.env, "CUDA_VISIBLE_DEVICES="), "no GPUs: CUDA_VISIBLE_DEVICES is empty, not the server's");
    launcher_cmd_free(&cmd);
}

/* A forked child with the signals a server has (SIGPIPE ignored, SIGTERM blocked)
 * resets them as an agent's part does, and says what it has: 0 when all are back. */
static void test_signals(void) {
    signal(SIGPIPE, SIG_IGN);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        child_reset_signals();
        struct sigaction pipe_action;
        sigset_t mask;
        sigaction(SIGPIPE, NULL, &pipe_action);
        sigprocmask(SIG_SETMASK, NULL, &mask);
        _exit((pipe_action.sa_handler == SIG_DFL ? 0 : 1) | (sigismember(&mask, SIGTERM) ? 2 : 0));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child's SIGPIPE is back to its default and SIGTERM is not blocked (status %d: 1 SIGPIPE, 2 SIGTERM)",
          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    sigset_t defaults;
    child_default_signals(&defaults);
    CHECK(sigismember(&defaults, SIGPIPE) && sigismember(&defaults, SIGCHLD) && sigismember(&defaults, SIGTERM),
          "the supervisor's children get SIGPIPE, SIGCHLD and SIGTERM back to their defaults too");
    sigprocmask(SIG_UNBLOCK, &term, NULL);
}

int main(void) {
    test_argv();
    test_env();
    test_signals();
    return test_done("test_launcher_argv");
}

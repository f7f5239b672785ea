/* ddpd's settings table (cmd/settings.c on lib/opt_table.c): each kind read from its
 * flag and from its variable (the flag wins), the defaults, a value out of bounds
 * said naming the flag, what dies (an unknown flag, a missing value), and the usage
 * listing every row with its variable. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "opt_table.h"
#include "settings.h"

extern char **environ;

static void clear_ddpd_env(void) {
    for (;;) {
        char name[256] = "";
        for (char **e = environ; *e; e++)
            if (strncmp(*e, "DDPD_", 5) == 0) {
                snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
                break;
            }
        if (!name[0]) return;
        unsetenv(name);
    }
}

/* `ddpd serve ARGS...` into *s. */
#define READ(s, ...)                                                            \
    do {                                                                        \
        char *argv_[] = {"ddpd", "serve", __VA_ARGS__};                         \
        settings_read((int)(sizeof argv_ / sizeof *argv_), argv_, s);           \
    } while (0)

static void defaults(void) {
    settings s;
    READ(&s, "--state-dir", "/nonexistent/state");
    CHECK(!s.problem[0], "no problem: %s", s.problem);
    CHECK(strcmp(s.listen, "127.0.0.1:8080") == 0, "listen's default: %s", s.listen);
    CHECK(strcmp(s.port_range, "29600-29999") == 0, "port range's default: %s", s.port_range);
    CHECK(strcmp(s.executor, "local") == 0, "executor's default: %s", s.executor);
    CHECK(s.node_timeout == 10 && s.cancel_grace == 10 && s.backfill_window == 600 && s.fairshare_half_life == 3600 &&
              s.preempt_grace == 60,
          "the whole numbers' defaults: %d %d %d %d %d", s.node_timeout, s.cancel_grace, s.backfill_window,
          s.fairshare_half_life, s.preempt_grace);
    CHECK(s.max_connections_per_address == 64 && s.header_timeout == 10 && s.idle_timeout == 30,
          "the fixed connection defaults: %d %d %d", s.max_connections_per_address, s.header_timeout, s.idle_timeout);
    CHECK(s.max_connections == OPT_UNSET && s.reserved_connections == OPT_UNSET && s.max_streams == OPT_UNSET &&
              s.max_streams_per_address == OPT_UNSET,
          "the limits sized to the descriptors are left to conn_limits");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(s.slots == (int)cores && s.http_threads >= 2 && s.http_threads <= 16, "slots %d (cores %ld), threads %d",
          s.slots, cores, s.http_threads);
    CHECK(!s.insecure && !s.allow_commands && !s.show_paths && !s.slurm_gpus && !s.rebuild_from_runs,
          "the bools are off");
    CHECK(!s.data_roots_given && s.data_roots.n == 1 && strcmp(s.data_roots.v[0], "/usr/share/datasets") == 0,
          "data roots' default (no <state-dir>/datasets here): %d", s.data_roots.n);
    CHECK(strcmp(s.state_dir, "/nonexistent/state") == 0, "state dir as given: %s", s.state_dir);
    CHECK(strstr(s.trainer, "ddp-trainer") && strstr(s.runner, "ddp-run"), "trainer %s, runner %s", s.trainer,
          s.runner);
    char work[64];
    snprintf(work, sizeof work, "/tmp/ddpd-slurm-%d", (int)getuid());
    CHECK(strcmp(s.slurm_work_dir, work) == 0, "slurm work dir's default: %s", s.slurm_work_dir);
    CHECK(s.node_name && *s.node_name, "node name: the hostname");
    CHECK(!s.token && !s.token_file && !s.gpus && !s.slurm_preemptible_qos, "nothing else set");
    settings_free(&s);
}

static void flags_of_each_kind(void) {
    settings s;
    READ(&s, "--listen=0.0.0.0:9", "--slots", "3", "--insecure", "--data-root", "/a", "--data-root=/b",
         "--slurm-option", "--time=1:00", "--slurm-option", "--mem=1G", "--cancel-grace", "0", "--gpus", "none",
         "--slurm-user-account", "alice=acct", "--slurm-preemptible-qos", "low", "--executor", "slurm");
    CHECK(!s.problem[0], "no problem: %s", s.problem);
    CHECK(strcmp(s.listen, "0.0.0.0:9") == 0, "--listen=V: %s", s.listen);
    CHECK(s.slots == 3 && s.cancel_grace == 0, "ints: %d %d", s.slots, s.cancel_grace);
    CHECK(s.insecure, "a bool flag");
    CHECK(s.data_roots_given && s.data_roots.n == 2 && strcmp(s.data_roots.v[1], "/b") == 0, "repeated paths: %d",
          s.data_roots.n);
    CHECK(s.slurm_options.n == 2 && strcmp(s.slurm_options.v[0], "--time=1:00") == 0, "repeated words: %d",
          s.slurm_options.n);
    CHECK(strcmp(s.gpus, "none") == 0 && strcmp(s.executor, "slurm") == 0, "strings");
    CHECK(s.slurm_user_accounts.n == 1 && strcmp(s.slurm_preemptible_qos, "low") == 0, "slurm sharing");
    settings_free(&s);
}

static void environment(void) {
    setenv("DDPD_LISTEN", "127.0.0.1:7000", 1);
    setenv("DDPD_SLOTS", "5", 1);
    setenv("DDPD_INSECURE", "yes", 1);
    setenv("DDPD_DATA_ROOT", "/x:/y:/z", 1);
    setenv("DDPD_SLURM_OPTIONS", "--a=1  --b=2", 1);
    setenv("DDPD_IDLE_TIMEOUT", "", 1); /* empty: the default */
    setenv("DDPD_SLURM_PREEMPTIBLE_QOS", "", 1); /* empty: none */
    settings s;
    READ(&s, "--slots", "7");
    CHECK(!s.problem[0], "no problem: %s", s.problem);
    CHECK(strcmp(s.listen, "127.0.0.1:7000") == 0, "DDPD_LISTEN: %s", s.listen);
    CHECK(s.slots == 7, "the flag wins over DDPD_SLOTS: %d", s.slots);
    CHECK(s.insecure, "DDPD_INSECURE=yes");
    CHECK(s.data_roots_given && s.data_roots.n == 3 && strcmp(s.data_roots.v[2], "/z") == 0,
          "DDPD_DATA_ROOT, colon-separated: %d", s.data_roots.n);
    CHECK(s.slurm_options.n == 2 && strcmp(s.slurm_options.v[1], "--b=2") == 0,
          "DDPD_SLURM_OPTIONS, space-separated: %d", s.slurm_options.n);
    CHECK(s.idle_timeout == 30, "an empty variable is the default: %d", s.idle_timeout);
    CHECK(!s.slurm_preemptible_qos, "an empty DDPD_SLURM_PREEMPTIBLE_QOS is none");
    settings_free(&s);
    READ(&s, "--data-root", "/only");
    CHECK(s.data_roots.n == 1 && strcmp(s.data_roots.v[0], "/only") == 0, "the flag's list wins over the variable's");
    settings_free(&s);
    clear_ddpd_env();
}

static void bounds(void) {
    for (size_t i = 0; i < SETTINGS_TABLE.n; i++) {
        const opt_row *r = &SETTINGS_TABLE.rows[i];
        if (r->kind != OPT_INT) continue;
        char over[32], under[32];
        snprintf(over, sizeof over, "%d", r->max + 1);
        snprintf(under, sizeof under, "%d", r->min - 1);
        const char *bad[] = {over, under, "0x", "ten"};
        for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
            settings s;
            char *argv[] = {"ddpd", "serve", (char *)r->flag, (char *)bad[k]};
            settings_read(4, argv, &s);
            char quoted[48];
            snprintf(quoted, sizeof quoted, "(got \"%s\")", bad[k]);
            CHECK(strncmp(s.problem, r->flag, strlen(r->flag)) == 0 && strstr(s.problem, " must be an integer from ") &&
                      strstr(s.problem, quoted),
                  "%s %s: refused naming the flag and the value: %s", r->flag, bad[k], s.problem);
            settings_free(&s);
        }
        if (r->env) { /* from the variable too, still naming the flag */
            setenv(r->env, "x", 1);
            settings s;
            READ(&s, "--listen", "127.0.0.1:1");
            CHECK(strncmp(s.problem, r->flag, strlen(r->flag)) == 0, "%s=x: %s", r->env, s.problem);
            settings_free(&s);
            unsetenv(r->env);
        }
    }
    settings s;
    READ(&s, "--slots", "9999", "--cancel-grace", "-1");
    CHECK(strstr(s.problem, "--slots must be an integer from 0 to 4096 (got \"9999\")"), "the first is said: %s",
          s.problem);
    CHECK(s.slots == (int)sysconf(_SC_NPROCESSORS_ONLN) && s.cancel_grace == 10, "out of bounds: the default kept");
    settings_free(&s);
    READ(&s, "--executor", "k8s");
    CHECK(strstr(s.problem, "--executor k8s: local"), "an executor that is not one: %s", s.problem);
    settings_free(&s);
    READ(&s, "--slurm-preemptible-qos", "a b");
    CHECK(strstr(s.problem, "--slurm-preemptible-qos \"a b\": a QOS name is needed"), "qos: %s", s.problem);
    settings_free(&s);
    setenv("DDPD_SLURM_USER_ACCOUNTS", "bob=x bob=y", 1);
    READ(&s, "--listen", "127.0.0.1:1");
    CHECK(strstr(s.problem, "DDPD_SLURM_USER_ACCOUNTS: user bob is given twice"), "user accounts: %s", s.problem);
    settings_free(&s);
    unsetenv("DDPD_SLURM_USER_ACCOUNTS");
}

static void token(void) {
    char dir[] = "/tmp/test-settings-XXXXXX";
    REQUIRE(mkdtemp(dir), "mkdtemp");
    char path[128];
    snprintf(path, sizeof path, "%s/token", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f, "token file");
    fputs("sekrit-token-0123456789\n", f);
    fclose(f);
    chmod(path, 0600);
    settings s;
    READ(&s, "--token-file", path);
    CHECK(!s.problem[0] && s.token && strcmp(s.token, "sekrit-token-0123456789") == 0 && !s.token_on_command_line,
          "--token-file read: %s", s.problem);
    settings_free(&s);
    setenv("DDPD_TOKEN_FILE", path, 1);
    READ(&s, "--token", "abc");
    CHECK(!s.problem[0] && strcmp(s.token, "abc") == 0 && s.token_on_command_line && !s.token_file,
          "--token wins over DDPD_TOKEN_FILE: %s", s.problem);
    settings_free(&s);
    READ(&s, "--listen", "127.0.0.1:1");
    CHECK(s.token_file && strcmp(s.token, "sekrit-token-0123456789") == 0, "DDPD_TOKEN_FILE read");
    settings_free(&s);
    setenv("DDPD_TOKEN", "t", 1);
    READ(&s, "--listen", "127.0.0.1:1");
    CHECK(strstr(s.problem, "DDPD_TOKEN and DDPD_TOKEN_FILE are both set"), "both variables: %s", s.problem);
    settings_free(&s);
    clear_ddpd_env();
    READ(&s, "--token", "a", "--token-file", path);
    CHECK(strstr(s.problem, "give --token or --token-file, not both"), "both flags: %s", s.problem);
    settings_free(&s);
    chmod(path, 0644);
    READ(&s, "--token-file", path);
    CHECK(s.problem[0] && !s.token, "a token file others can read is refused: %s", s.problem);
    settings_free(&s);
    unlink(path);
    rmdir(dir);
}

/* `ddpd serve ARGS`'s exit status and stderr in a child. */
static int dies(char *const args[], int n, char *err, size_t errlen) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        dup2(fds[1], 1);
        char *argv[16] = {"ddpd", "serve"};
        for (int i = 0; i < n; i++) argv[2 + i] = args[i];
        settings s;
        settings_read(2 + n, argv, &s);
        _exit(0);
    }
    close(fds[1]);
    size_t at = 0;
    for (ssize_t got; at < errlen - 1 && (got = read(fds[0], err + at, errlen - 1 - at)) > 0;) at += (size_t)got;
    err[at] = '\0';
    close(fds[0]);
    int ws = 0;
    waitpid(pid, &ws, 0);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static void mistakes(void) {
    char err[512];
    CHECK(dies((char *[]){"--no-such-flag", "x"}, 2, err, sizeof err) == 2 &&
              strstr(err, "unknown option --no-such-flag (see ddpd --help)"),
          "an unknown flag: %s", err);
    CHECK(dies((char *[]){"--listen"}, 1, err, sizeof err) == 2 && strstr(err, "--listen needs a value"),
          "a missing value: %s", err);
    CHECK(dies((char *[]){"stray"}, 1, err, sizeof err) == 2 && strstr(err, "unexpected argument \"stray\""),
          "a stray argument: %s", err);
    CHECK(dies((char *[]){"--insecure=1"}, 1, err, sizeof err) == 2 && strstr(err, "unknown option --insecure"),
          "a bool takes no value: %s", err);
    CHECK(dies((char *[]){"--help"}, 1, err, sizeof err) == 0 && strstr(err, "usage: ddpd serve"), "--help: %.80s",
          err);
}

static void usage_lists_every_row(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    settings_usage(out);
    fclose(out);
    CHECK(strncmp(text, "usage: ddpd serve", 17) == 0, "the usage's head");
    char *flat = strdup(text), *w = flat; /* its words one space apart, as wrapped lines read */
    for (const char *p = text; *p; p++)
        if (!(*p == ' ' || *p == '\n') || (w > flat && w[-1] != ' ')) *w++ = *p == '\n' ? ' ' : *p;
    *w = '\0';
    for (size_t i = 0; i < SETTINGS_TABLE.n; i++) {
        const opt_row *r = &SETTINGS_TABLE.rows[i];
        char head[128];
        snprintf(head, sizeof head, "\n  %s%s%s ", r->flag, r->meta ? " " : "", r->meta ? r->meta : "");
        CHECK(strstr(text, head), "the usage lists %s", r->flag);
        CHECK(!r->env || strstr(text, r->env), "the usage names %s", r->env);
        if (r->dflt) {
            char says[128];
            snprintf(says, sizeof says, "default %s", r->dflt);
            CHECK(strstr(flat, says), "the usage says %s's %s", r->flag, says);
        }
        for (size_t k = 0; k < i; k++) CHECK(strcmp(SETTINGS_TABLE.rows[k].flag, r->flag) != 0, "%s is one row", r->flag);
    }
    for (char *line = text, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        if (!end) break;
        CHECK(end - line <= 104, "a usage line of %d characters: %.*s", (int)(end - line), (int)(end - line), line);
    }
    free(flat);
    free(text);
}

/* A table of its own: a list's single default, the terse refusal of ddpd agent and part. */
typedef struct {
    opt_list roots;
    int n;
} small;

static void a_small_table(void) {
    static const opt_row rows[] = {
        {.flag = "--root", .meta = "DIR", .kind = OPT_PATHS, .field = offsetof(small, roots), .dflt = "/d", .help = "r"},
        {.flag = "--n", .meta = "N", .env = "DDPD_TEST_N", .kind = OPT_INT, .field = offsetof(small, n), .min = 1,
         .max = 9, .help = "n"},
    };
    opt_table t = {rows, 2, "tester", "usage: tester\n", true};
    small s = {0};
    opt_origins o;
    opt_keep keep = {0};
    char problem[256], *argv[] = {"tester", "--n", "12"};
    opt_read(&t, 1, 3, argv, &s, &o, &keep, problem, sizeof problem);
    CHECK(s.roots.n == 1 && strcmp(s.roots.v[0], "/d") == 0, "a list's default");
    CHECK(strcmp(problem, "--n 12: a whole number from 1 to 9 is needed") == 0 && s.n == OPT_UNSET,
          "the terse refusal: %s", problem);
    CHECK(o.from[1] && strcmp(o.from[1], "--n") == 0 && !o.from[0], "origins");
    opt_keep_free(&keep);
    setenv("DDPD_TEST_N", "4", 1);
    memset(&s, 0, sizeof s);
    opt_read(&t, 1, 1, argv, &s, &o, &keep, problem, sizeof problem);
    CHECK(!problem[0] && s.n == 4 && strcmp(o.from[1], "DDPD_TEST_N") == 0, "from the variable: %d", s.n);
    unsetenv("DDPD_TEST_N");
    opt_keep_free(&keep);
}

int main(void) {
    clear_ddpd_env();
    unsetenv("XDG_STATE_HOME");
    defaults();
    flags_of_each_kind();
    environment();
    bounds();
    token();
    mistakes();
    usage_lists_every_row();
    a_small_table();
    return test_done("test_settings");
}

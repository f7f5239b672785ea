/* The Slurm executor: see executor_slurm.h. */
#include "executor_slurm.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "journal_writers.h"
#include "child_setup.h"
#include "launcher_argv.h"
#include "node_relay.h"
#include "part_desc.h"
#include "rendezvous.h"
#include "run_cmd.h"
#include "run_dir.h"
#include "run_files.h"
#include "secret.h"
#include "slurm_cli.h"
#include "state_layout.h"
#include "store_read.h"

extern char **environ;

#define CMD_TIMEOUT_MS 60000   /* sbatch, squeue, scancel, scontrol: a slurmctld that does not answer */
#define GONE_POLLS 3           /* a job Slurm no longer lists in this many polls in a row has ended */
#define EXITED_GRACE_MS 60000  /* every part said it ended, and Slurm still runs the job this long: it ended */

/* One node's part of the job: its `ddpd part`, as it reported. */
typedef struct {
    bool started_told; /* `started` was said for it (this server's life) */
    bool checked_in;   /* its ddpd part has reported since the job last started */
    bool exited;       /* and said how its launcher ended: told when the job ends */
    char node[64], address[64], boot[48];
    int relay;         /* the relay's source id of its lines and logs (node_relay.h) */
    int master_port;   /* node 0 of a command run: the MASTER_PORT it picked */
    int64_t exit_code, exit_signal, end_t, stop_t;
    char *reason;
} sl_part;

/* A run's job. */
typedef struct sl_job {
    int64_t run;
    int n_parts;
    sl_part *parts;
    part_launch launch; /* what it was started with (its strings below) */
    char secret[80], rendezvous[64];
    char *owner;        /* the run's owner (launch.owner points here); NULL: nobody in particular */
    run_account account; /* whom its job is submitted as (launch.account points here when as_account) */
    bool as_account;
    char *refused;      /* why its account cannot be used (launch.account_refused); NULL: it can */
    char **exclude, **exclude_why; /* the nodes its job must not get, and why each (launch.exclude) */
    int n_exclude;
    char job[64];       /* "" until sbatch gave it */
    bool submit;        /* its sbatch is still to run */
    bool submitting;    /* its sbatch is running (the thread holds the job) */
    /* as Slurm said last */
    char state[32], reason[128], nodelist[256];
    bool seen_running;
    int64_t running_since, all_exited_at; /* mono ms; 0: not */
    int missing;        /* polls in a row that Slurm did not list it */
    unsigned round;     /* the last poll that looked at it */
    bool cancel;        /* a scancel is wanted */
    bool cancel_sent;   /* ddpd canceled it: CANCELLED is its own doing */
    char *fail_words;   /* the server gave up on it (a part that never reported): its end's reason */
    bool ended;         /* its parts' ends were told */
    bool forgotten;     /* its run is over: freed once the thread is done with it */
    int released;
    struct sl_job *next;
} sl_job;

static struct {
    executor_slurm_config c;
    executor_hooks hooks;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    bool running, stopping;
    sl_job *jobs;
    char url[320];
    int next_relay;
    unsigned round;         /* polls so far */
    char squeue_error[600]; /* why squeue did not answer last; "": it did */
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

#define JOB_SCRIPT "job.sh" /* the batch script sbatch reads, beside config.json */

/* ---- the run's trainer.log: what Slurm did with it ---- */

static void run_log(int64_t run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_log(int64_t run, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char *dir = layout_run_dir(run), why[512];
    run_dir d;
    if (run_dir_open(&d, dir, why, sizeof why) == 0) { /* never through a link the run left (run_files.h) */
        int fd = run_file_open_append(&d, RUN_DIR_LOG, why, sizeof why);
        if (fd >= 0) {
            dprintf(fd, "slurm: %s\n", line);
            close(fd);
        }
        run_dir_close(&d);
    }
    free(dir);
}

/* ---- jobs ---- */

static sl_job *find_job(int64_t run) {
    for (sl_job *j = S.jobs; j; j = j->next)
        if (j->run == run && !j->forgotten) return j;
    return NULL;
}

static sl_job *new_job_locked(const part_launch *l) {
    sl_job *j = xcalloc(1, sizeof *j);
    j->run = l->run;
    j->n_parts = l->nodes > 0 ? l->nodes : 1;
    j->parts = xcalloc((size_t)j->n_parts, sizeof *j->parts);
    for (int i = 0; i < j->n_parts; i++) j->parts[i].exit_code = j->parts[i].exit_signal = NO_INT;
    j->launch = *l;
    snprintf(j->secret, sizeof j->secret, "%s", l->secret ? l->secret : "");
    snprintf(j->rendezvous, sizeof j->rendezvous, "%s", l->rendezvous ? l->rendezvous : "");
    j->launch.secret = j->secret;
    j->launch.rendezvous = j->rendezvous;
    j->owner = l->owner ? xstrdup(l->owner) : NULL;
    j->launch.owner = j->owner;
    if (l->account) j->account = *l->account, j->as_account = true;
    j->launch.account = j->as_account ? &j->account : NULL;
    j->refused = l->account_refused ? xstrdup(l->account_refused) : NULL;
    j->launch.account_refused = j->refused;
    j->n_exclude = l->n_exclude > 0 ? l->n_exclude : 0;
    j->exclude = xcalloc((size_t)j->n_exclude + 1, sizeof *j->exclude);
    j->exclude_why = xcalloc((size_t)j->n_exclude + 1, sizeof *j->exclude_why);
    for (int i = 0; i < j->n_exclude; i++) {
        j->exclude[i] = xstrdup(l->exclude[i]);
        j->exclude_why[i] = xstrdup(l->exclude_why && l->exclude_why[i] ? l->exclude_why[i] : "excluded");
    }
    j->launch.exclude = (const char *const *)j->exclude;
    j->launch.exclude_why = (const char *const *)j->exclude_why;
    j->launch.master_addr = j->launch.visible = j->launch.where = NULL;
    j->launch.devices = NULL;
    j->next = S.jobs;
    S.jobs = j;
    return j;
}

static void free_job(sl_job *j) {
    for (int i = 0; i < j->n_parts; i++) free(j->parts[i].reason);
    free(j->parts);
    free(j->fail_words);
    free(j->owner);
    free(j->refused);
    for (int i = 0; i < j->n_exclude; i++) {
        free(j->exclude[i]);
        free(j->exclude_why[i]);
    }
    free(j->exclude);
    free(j->exclude_why);
    free(j);
}

static start_result slurm_start(const part_launch *l, part_handle *h) {
    (void)h;
    journal_writers_started(l->run); /* before its processes may write its journal */
    pthread_mutex_lock(&S.mu);
    sl_job *j = find_job(l->run);
    if (!j) { /* the run's first part: the job, for all of them */
        j = new_job_locked(l);
        j->submit = true;
        pthread_cond_signal(&S.wake);
    }
    pthread_mutex_unlock(&S.mu);
    return START_PENDING;
}

static void slurm_stop(int64_t run, int part, int grace_ms) {
    (void)part;
    (void)grace_ms; /* Slurm's KillWait: SIGTERM to every task, SIGKILL that much later */
    pthread_mutex_lock(&S.mu);
    sl_job *j = find_job(run);
    if (j && !j->ended && !j->cancel_sent) {
        j->cancel = true;
        pthread_cond_signal(&S.wake);
    }
    pthread_mutex_unlock(&S.mu);
}

static void slurm_release(int64_t run, int part) {
    (void)part;
    pthread_mutex_lock(&S.mu);
    sl_job *j = find_job(run);
    bool over = j && ++j->released >= j->n_parts;
    if (over) {
        j->forgotten = true; /* the thread frees it, after a scancel if Slurm may still run it */
        if (!j->ended && (j->job[0] || j->submitting) && !j->cancel_sent) j->cancel = true;
        j->submit = false;
        pthread_cond_signal(&S.wake);
    }
    pthread_mutex_unlock(&S.mu);
    if (over) relay_run_ended(run); /* what was kept of its logs' offsets goes */
}

static adopt_result slurm_adopt(const part_launch *l, const part_handle *h, char *gone, size_t gone_len) {
    (void)gone;
    (void)gone_len;
    pthread_mutex_lock(&S.mu);
    sl_job *j = find_job(l->run);
    if (!j) j = new_job_locked(l);
    snprintf(j->job, sizeof j->job, "%s", h->job); /* followed from the next poll on: Slurm says how it is */
    pthread_mutex_unlock(&S.mu);
    return ADOPT_TAKEN;
}

static void slurm_tick(void) {} /* its own thread polls */

/* ---- what a queued run waits for ---- */

static char *slurm_waiting_for(int64_t run) {
    pthread_mutex_lock(&S.mu);
    sl_job *j = find_job(run);
    char *text = NULL;
    if (!j) {
        text = NULL;
    } else if (!j->job[0]) {
        text = xstrdup(S.url[0] ? "being submitted to Slurm (sbatch)"
                                : "being submitted to Slurm once the server listens");
    } else if (S.squeue_error[0]) {
        text = xasprintf("Slurm job %s; Slurm does not answer: %s", j->job, S.squeue_error);
    } else if (!j->state[0] || slurm_state_phase(j->state) == SLURM_WAITING) {
        char words[256];
        slurm_reason_words(j->reason, words, sizeof words);
        char *list = slurm_node_list((const char *const *)j->exclude, j->n_exclude);
        char *away = j->n_exclude ? xasprintf(" (it excludes %s: retry_elsewhere)", list) : xstrdup("");
        text = j->state[0] ? xasprintf("Slurm job %s is %s: %s%s", j->job, j->state, words, away)
                           : xasprintf("Slurm job %s (asking Slurm how it is)%s", j->job, away);
        free(away);
        free(list);
    } else {
        int in = 0;
        for (int i = 0; i < j->n_parts; i++) in += j->parts[i].checked_in;
        text = xasprintf("Slurm job %s is %s on %s: waiting for its ddpd parts to report (%d of %d have)", j->job,
                         j->state, j->nodelist[0] ? j->nodelist : "its nodes", in, j->n_parts);
    }
    pthread_mutex_unlock(&S.mu);
    return text;
}

/* ---- the thread's commands ---- */

/* The part's CPUs per rank: the config's distributed.threads_per_rank, as submitted
 * (the database's: its account may edit the config.json in its directory). */
static int cpus_per_rank(int64_t run) {
    json_t *cfg = NULL;
    (void)store_get_config(run, &cfg);
    json_int_t t = json_integer_value(json_object_get(json_object_get(cfg, "distributed"), "threads_per_rank"));
    json_decref(cfg);
    return t > 0 ? (int)t : 1;
}

/* A run of another account: its directory here (the batch script sbatch reads) handed
 * to the account, and its directory under --slurm-work-dir made the account's alone
 * (0700) where this host has the work directory (a shared filesystem, or one node's
 * own: made 0711 when missing, so that the account passes through it). Where this
 * host cannot reach it, the job's own mkdir makes it, as the account, umask 077.
 * 0, or -1 and why. */
static int hand_dirs_to(const run_account *a, int64_t run, char *why, size_t n) {
    layout_open_for_accounts();
    char *dir = layout_run_dir(run);
    int rc = run_account_take_dir(a, dir, why, n);
    free(dir);
    if (rc != 0) return -1;
    if (mkdir(S.c.work_dir, 0711) == 0) (void)chmod(S.c.work_dir, 0711); /* whatever the umask */
    else if (errno != EEXIST) return 0;                                      /* not on this host */
    /* by its descriptor, never following a link in its place (run_files.h) */
    char *work = xasprintf("%s/%lld", S.c.work_dir, (long long)run), err[768];
    run_dir w;
    if ((mkdir(work, 0700) != 0 && errno != EEXIST) || run_dir_open(&w, work, err, sizeof err) != 0 ||
        run_dir_hand_over(&w, a->uid, a->gid, 0700, err, sizeof err) != 0) {
        snprintf(why, n, "cannot hand the run's work directory %s to the account %s: %s", work, a->name,
                 w.fd >= 0 || errno != EEXIST ? err : strerror(errno));
        rc = -1;
    }
    run_dir_close(&w);
    free(work);
    return rc;
}

static int run_slurm_command(char *const *argv, const run_account *as, cmd_result *r, char *why, size_t n);

/* "n1 (its attempt failed there), n2 (suspect)" (malloc'd). */
static char *excluded_words(const sl_job *j) {
    buf_t b = {0};
    for (int i = 0; i < j->n_exclude; i++) buf_printf(&b, "%s%s (%s)", i ? ", " : "", j->exclude[i], j->exclude_why[i]);
    return b.data ? b.data : xstrdup("");
}

/* A job that excludes nodes (retry_elsewhere) and that no node outside them could
 * ever hold: not submitted (Slurm refuses it, or holds it forever where a site's
 * option names another partition). Why, into why; "" when it may go (or sinfo
 * cannot say: sbatch decides, and its refusal says the same). */
static void check_exclusions(const sl_job *j, int n_parts, char *why, size_t n) {
    why[0] = '\0';
    if (!j->n_exclude) return;
    char *argv[] = {"sinfo", "-h", "-N", "-o", "%N|%P", NULL}, err[600], part[128] = "";
    cmd_result r;
    int left = run_slurm_command(argv, NULL, &r, err, sizeof err) == 0
                   ? slurm_nodes_outside(r.out, S.c.partition, (const char *const *)j->exclude, j->n_exclude, part,
                                         sizeof part)
                   : -1;
    cmd_result_free(&r);
    if (left < 0 || left >= n_parts) return;
    char *words = excluded_words(j);
    snprintf(why, n, "retry_elsewhere (distributed.restart_policy) leaves its Slurm job too few nodes: it needs %d "
             "node%s of partition %s, and %d %s not excluded; it excludes %s. Not submitted: Slurm would refuse the "
             "job or hold it forever. An admin clears a suspect node: ddpd node clear NAME; ddpctl resume %lld starts "
             "the run again on any node", n_parts, n_parts > 1 ? "s" : "", part, left, left == 1 ? "is" : "are", words,
             (long long)j->run);
    free(words);
}

/* A job submitted by a run's account, raised by the server to the run's priority
 * (scontrol update ... Nice=, as only an operator may lower a nice below 0). */
static void raise_job(int64_t run, const char *job, int priority) {
    char id[80], nice[32], why[600];
    snprintf(id, sizeof id, "JobId=%s", job);
    snprintf(nice, sizeof nice, "Nice=%d", -priority * 100);
    char *argv[] = {"scontrol", "update", id, nice, NULL};
    cmd_result r;
    if (run_slurm_command(argv, NULL, &r, why, sizeof why) != 0)
        run_log(run, "priority %d could not be passed on (scontrol update %s %s): %s", priority, id, nice, why);
    else run_log(run, "priority %d passed on by the server: scontrol update %s %s", priority, id, nice);
    cmd_result_free(&r);
}

/* sbatch for `j` (the lock is let go meanwhile; the job stays: `submitting`). Its
 * id, or why not, is told through the hooks. */
static void submit_locked(sl_job *j) {
    j->submit = false;
    j->submitting = true;
    part_launch l = j->launch;
    char secret[80], url[320];
    snprintf(secret, sizeof secret, "%s", j->secret);
    snprintf(url, sizeof url, "%s", S.url);
    int n_parts = j->n_parts;
    pthread_mutex_unlock(&S.mu);

    int per_node = l.world_size / n_parts, cpus = cpus_per_rank(l.run);
    char *run_dir_path = layout_run_dir(l.run), *script_path = xasprintf("%s/" JOB_SCRIPT, run_dir_path);
    slurm_script_spec ss = {.run = l.run, .ddpd = S.c.ddpd, .server_url = url, .work_dir = S.c.work_dir,
                            .cpus_per_node = per_node * cpus, .data_roots = S.c.data_roots,
                            .n_data_roots = l.command ? 0 : S.c.n_data_roots,
                            .port_lo = l.command ? l.port_lo : 0, .port_hi = l.command ? l.port_hi : 0};
    char *script = slurm_batch_script(&ss);
    char job[64] = "", why[1024] = "";
    run_dir d; /* beside config.json, as run_files.h writes a run's files: never through a link it left */
    char werr[768];
    if (run_dir_open(&d, run_dir_path, werr, sizeof werr) != 0 ||
        run_file_write(&d, JOB_SCRIPT, script, strlen(script), 0600, werr, sizeof werr) != 0)
        snprintf(why, sizeof why, "cannot write the batch script: %s", werr);
    run_dir_close(&d);
    free(run_dir_path);
    if (!why[0] && l.account_refused) /* its owner's account is gone since it was submitted */
        snprintf(why, sizeof why, "%s", l.account_refused);
    else if (!why[0] && l.account)
        (void)hand_dirs_to(l.account, l.run, why, sizeof why); /* why says it when it could not */
    if (!why[0]) check_exclusions(j, n_parts, why, sizeof why); /* its exclusions are its own: the job stays */
    /* (l.owner is the job's own copy: the job stays while it is `submitting`) */
    slurm_job_spec js = {.run = l.run, .nodes = n_parts, .ranks_per_node = per_node, .cpus_per_rank = cpus,
                         .gpus = l.gpu, .partition = S.c.partition, .account = S.c.account,
                         .owner_account = slurm_user_account(S.c.user_accounts, S.c.n_user_accounts, l.owner),
                         .priority = l.priority, .site_allows_priority = S.c.allow_priority,
                         .preemptible_qos = l.preemptible ? S.c.preemptible_qos : NULL, .extra = S.c.options,
                         .n_extra = S.c.n_options, .exclude = l.exclude, .n_exclude = l.n_exclude,
                         .script = script_path};
    /* a negative nice is an operator's right in Slurm: the server's, not the account's
     * sbatch; the server raises the account's job after it is submitted */
    bool raise_after = l.account && l.priority > 0 && S.c.allow_priority;
    if (raise_after) js.site_allows_priority = false;
    if (l.priority > 0 && !S.c.allow_priority)
        run_log(l.run, "priority %d is not passed on: raising a job's priority in Slurm needs an operator, and this "
                       "server was not told the site allows it (ddpd serve --slurm-allow-priority)", l.priority);
    if (l.preemptible && !js.preemptible_qos)
        run_log(l.run, "preemptible, but the site names no QOS for preemptible runs (ddpd serve "
                       "--slurm-preemptible-qos): submitted as any other");
    char **argv = slurm_sbatch_argv(&js);
    if (!why[0]) {
        char *set[LAUNCHER_ENV_COMMON_MAX];
        launcher_env_common(l.run, secret, set);
        char **env = child_env(environ, LAUNCHER_ENV_DROP, set);
        cmd_result r;
        char err[512];
        int64_t t0 = mono_ms();
        if (run_cmd_as(argv, env, l.account, CMD_TIMEOUT_MS, &r, err, sizeof err) != 0) {
            snprintf(why, sizeof why, "Slurm's sbatch could not be run: %s", err);
        } else if (!WIFEXITED(r.wstatus) || WEXITSTATUS(r.wstatus) != 0 || !slurm_parse_sbatch(r.out, job, sizeof job)) {
            char last[600];
            cmd_result_last_line(&r, last, sizeof last);
            char *words = l.n_exclude ? excluded_words(j) : NULL;
            snprintf(why, sizeof why, "Slurm refused the job: %s%s%s%s", last[0] ? last : "sbatch failed saying nothing",
                     words ? " (retry_elsewhere: it excludes " : "", words ? words : "",
                     words ? "; an admin clears a suspect node: ddpd node clear NAME)" : "");
            free(words);
        } else {
            log_info("run %lld: submitted to Slurm as job %s%s%s (sbatch took %lld ms)", (long long)l.run, job,
                     l.account ? " by the account " : "", l.account ? l.account->name : "", (long long)(mono_ms() - t0));
        }
        cmd_result_free(&r);
        free(env);
        for (int i = 0; set[i]; i++) free(set[i]);
    }
    buf_t line = {0};
    for (int i = 0; argv[i]; i++) buf_printf(&line, "%s%s", i ? " " : "", argv[i]);
    if (job[0]) run_log(l.run, "submitted as job %s%s%s: %s", job, l.account ? " by the account " : "",
                        l.account ? l.account->name : "", line.data);
    else run_log(l.run, "%s (%s)", why, line.data);
    if (job[0] && raise_after) raise_job(l.run, job, l.priority);
    buf_free(&line);
    slurm_argv_free(argv);
    free(script);
    free(script_path);

    pthread_mutex_lock(&S.mu);
    j->submitting = false;
    if (j->forgotten) { /* its run ended meanwhile: a job it got is canceled, nothing told */
        snprintf(j->job, sizeof j->job, "%s", job);
        j->cancel = job[0] != '\0';
        return;
    }
    snprintf(j->job, sizeof j->job, "%s", job);
    if (!job[0]) j->ended = true;
    pthread_mutex_unlock(&S.mu);
    if (job[0]) {
        part_handle h = {0};
        snprintf(h.job, sizeof h.job, "%s", job);
        S.hooks.submitted(l.run, &h);
    } else {
        S.hooks.started(l.run, 0, NULL, why);
    }
    pthread_mutex_lock(&S.mu);
}

static int run_slurm_command(char *const *argv, const run_account *as, cmd_result *r, char *why, size_t n) {
    char err[512];
    if (run_cmd_as(argv, NULL, as, CMD_TIMEOUT_MS, r, err, sizeof err) != 0) {
        snprintf(why, n, "%s", err);
        return -1;
    }
    if (WIFEXITED(r->wstatus) && WEXITSTATUS(r->wstatus) == 0) return 0;
    char last[400];
    cmd_result_last_line(r, last, sizeof last);
    snprintf(why, n, "%s: %s", argv[0], last[0] ? last : "failed saying nothing");
    return 1;
}

/* scancel for `j` (the lock is let go meanwhile). */
static void cancel_locked(sl_job *j) {
    j->cancel = false;
    j->cancel_sent = true;
    char job[64];
    snprintf(job, sizeof job, "%s", j->job);
    int64_t run = j->run;
    run_account as = j->account; /* its owner's job is theirs to cancel (a server not root may not) */
    bool as_account = j->as_account;
    pthread_mutex_unlock(&S.mu);
    char *argv[] = {"scancel", job, NULL}, why[600];
    cmd_result r;
    if (run_slurm_command(argv, as_account ? &as : NULL, &r, why, sizeof why) != 0)
        log_warn("run %lld: scancel %s: %s", (long long)run, job, why);
    else
        log_info("run %lld: Slurm job %s canceled (scancel%s%s)", (long long)run, job, as_account ? " as " : "",
                 as_account ? as.name : "");
    run_log(run, "scancel %s", job);
    cmd_result_free(&r);
    pthread_mutex_lock(&S.mu);
}

/* ---- a job's end: its parts' ends, told ---- */

typedef struct {
    int64_t run;
    int part;
    part_end e;
    char *reason; /* what e.reason points to (owned) */
} end_told;

/* How part i ended, for its run: its own report, or why there is none. */
static void part_end_of(const sl_job *j, int i, const char *never, end_told *out) {
    const sl_part *p = &j->parts[i];
    out->run = j->run;
    out->part = i;
    if (p->exited) {
        out->reason = p->reason && p->reason[0] ? xstrdup(p->reason) : NULL;
        out->e = (part_end){.exit_code = p->exit_code, .exit_signal = p->exit_signal, .end_t = p->end_t,
                            .stop_t = p->stop_t};
    } else {
        out->reason = xstrdup(never);
        out->e = (part_end){.exit_code = NO_INT, .exit_signal = NO_INT, .end_t = now_ms(), .stop_t = p->stop_t};
        out->e.how = out->reason;
    }
    out->e.reason = out->reason;
}

static int by_end_time(const void *a, const void *b) {
    const end_told *x = a, *y = b;
    bool xr = x->e.exit_code != NO_INT, yr = y->e.exit_code != NO_INT; /* reported ones first */
    if (xr != yr) return xr ? -1 : 1;
    return x->e.end_t < y->e.end_t ? -1 : x->e.end_t > y->e.end_t;
}

/* The job has ended: each part's end is told, with Slurm's word where Slurm ended
 * it. `info`: Slurm's last word on the job; NULL: Slurm cannot say (`gone` says why,
 * and whether that ended the run: `gone_kind`). The lock is let go meanwhile (the
 * job stays: only this thread frees jobs). */
static void end_job_locked(sl_job *j, const slurm_job_info *info, const char *gone, slurm_end_kind gone_kind) {
    j->ended = true;
    char slurm[512] = "", never[1024];
    slurm_end_kind kind = gone_kind;
    if (info) kind = slurm_end_words(j->job, info->state, info->reason, slurm, sizeof slurm);
    else snprintf(slurm, sizeof slurm, "%s", gone);
    if (j->fail_words) {
        kind = SLURM_END_LOST;
        snprintf(slurm, sizeof slurm, "%s", j->fail_words);
        snprintf(never, sizeof never, "%s", j->fail_words);
    } else if (info && kind == SLURM_END_PLAIN) {
        snprintf(never, sizeof never, "its ddpd part never said how its launcher ended (Slurm job %s %s, exit code "
                 "%d:%d; the job's own output: %s/%lld/slurm-%s.out on node %s)", j->job, info->state, info->exit_code,
                 info->exit_signal, S.c.work_dir, (long long)j->run, j->job,
                 info->batch_host[0] ? info->batch_host : "its first node");
    } else {
        snprintf(never, sizeof never, "%s", slurm);
    }
    if (info)
        run_log(j->run, "job %s ended: %s, exit code %d:%d, reason %s", j->job, info->state, info->exit_code,
                info->exit_signal, info->reason);
    else run_log(j->run, "%s", slurm);
    log_info("run %lld: Slurm job %s ended (%s)", (long long)j->run, j->job, info ? info->state : slurm);
    int n = j->n_parts;
    end_told *ends = xcalloc((size_t)n, sizeof *ends);
    for (int i = 0; i < n; i++) part_end_of(j, i, never, &ends[i]);
    qsort(ends, (size_t)n, sizeof *ends, by_end_time);
    /* Slurm's own end of the job is the run's: on the first end told (not a scancel of ddpd's) */
    bool own_cancel = kind == SLURM_END_CANCELED && j->cancel_sent && !j->fail_words;
    if (kind != SLURM_END_PLAIN && !own_cancel) {
        free(ends[0].reason);
        ends[0].reason = xstrdup(slurm);
        ends[0].e.reason = ends[0].reason;
        ends[0].e.lost = kind == SLURM_END_LOST;
        ends[0].e.canceled = kind == SLURM_END_CANCELED;
    }
    pthread_mutex_unlock(&S.mu);
    for (int i = 0; i < n; i++) {
        S.hooks.ended(ends[i].run, ends[i].part, &ends[i].e);
        free(ends[i].reason);
    }
    free(ends);
    pthread_mutex_lock(&S.mu);
}

/* scontrol -o show job: how it ended. false when Slurm cannot say. */
static bool job_details(const char *job, slurm_job_info *info) {
    char *argv[] = {"scontrol", "-o", "show", "job", (char *)job, NULL}, why[600];
    cmd_result r;
    bool ok = run_slurm_command(argv, NULL, &r, why, sizeof why) == 0 && slurm_parse_show_job(r.out, info);
    cmd_result_free(&r);
    return ok;
}

/* Slurm requeued the job (scontrol requeue, a failed node, preemption with requeue):
 * its parts ended, and new ones will report when it runs again. The run is followed,
 * not failed; its rendezvous starts empty. */
static void requeued_locked(sl_job *j) {
    for (int i = 0; i < j->n_parts; i++) {
        sl_part *p = &j->parts[i];
        p->checked_in = p->exited = false;
        p->boot[0] = '\0';
        p->stop_t = 0;
        free(p->reason);
        p->reason = NULL;
    }
    j->seen_running = false;
    j->running_since = j->all_exited_at = 0;
    rendezvous_open(j->run, j->secret);
    log_warn("run %lld: Slurm requeued job %s (%s): the run waits for it to run again", (long long)j->run, j->job,
             j->reason);
    run_log(j->run, "Slurm requeued job %s (%s); the run goes on when it runs again", j->job, j->reason);
}

/* What the poll learnt of one job. `ln` NULL: Slurm did not list it. */
static void follow_locked(sl_job *j, const slurm_queue_line *ln, int64_t now) {
    if (!ln) {
        if (++j->missing < GONE_POLLS) return;
        char gone[300];
        snprintf(gone, sizeof gone, "Slurm no longer knows job %s: it ended while this server was not following it "
                 "(more than Slurm's MinJobAge ago)", j->job);
        end_job_locked(j, NULL, gone, SLURM_END_LOST);
        return;
    }
    j->missing = 0;
    snprintf(j->state, sizeof j->state, "%s", ln->state);
    snprintf(j->reason, sizeof j->reason, "%s", ln->reason);
    snprintf(j->nodelist, sizeof j->nodelist, "%s", ln->nodes);
    slurm_phase phase = slurm_state_phase(ln->state);
    if (phase == SLURM_WAITING && (j->seen_running || strncmp(ln->state, "REQUEUE", 7) == 0)) {
        requeued_locked(j);
        return;
    }
    if (phase == SLURM_ENDED) {
        char job[64];
        snprintf(job, sizeof job, "%s", j->job);
        slurm_job_info info;
        pthread_mutex_unlock(&S.mu);
        bool known = job_details(job, &info);
        pthread_mutex_lock(&S.mu);
        if (!known) { /* squeue's word alone */
            memset(&info, 0, sizeof info);
            snprintf(info.state, sizeof info.state, "%s", ln->state);
            snprintf(info.reason, sizeof info.reason, "%s", ln->reason);
            info.exit_code = info.exit_signal = -1;
        }
        if (!j->ended && !j->forgotten) end_job_locked(j, &info, NULL, SLURM_END_PLAIN);
        return;
    }
    if (phase != SLURM_RUNNING && phase != SLURM_UNKNOWN) return;
    if (!j->seen_running) {
        j->seen_running = true;
        j->running_since = now;
    }
    int in = 0, exited = 0;
    for (int i = 0; i < j->n_parts; i++) {
        in += j->parts[i].checked_in;
        exited += j->parts[i].exited;
    }
    int64_t limit = (int64_t)(S.c.checkin_s > 0 ? S.c.checkin_s : 120) * 1000;
    if (in < j->n_parts && now - j->running_since > limit && !j->fail_words && !j->cancel_sent) {
        int missing = 0;
        while (missing < j->n_parts && j->parts[missing].checked_in) missing++;
        j->fail_words = xasprintf("Slurm started job %s on %s, but the ddpd part of node rank %d did not report to "
                                  "the server at %s within %lld s: can the Slurm nodes reach it (serve --advertise)? "
                                  "The job's own output: %s/%lld/slurm-%s.out on its first node; the job was canceled",
                                  j->job, j->nodelist, missing, S.url, (long long)(limit / 1000), S.c.work_dir,
                                  (long long)j->run, j->job);
        log_warn("run %lld: %s", (long long)j->run, j->fail_words);
        j->cancel = true;
    }
    /* every part said it ended, and Slurm goes on running the job: it has ended for the run */
    if (exited == j->n_parts && !j->all_exited_at) j->all_exited_at = now;
    if (j->all_exited_at && now - j->all_exited_at > EXITED_GRACE_MS) {
        slurm_job_info info = {.exit_code = -1, .exit_signal = -1};
        snprintf(info.state, sizeof info.state, "COMPLETED");
        snprintf(info.reason, sizeof info.reason, "its parts all ended while Slurm still ran it");
        end_job_locked(j, &info, NULL, SLURM_END_PLAIN);
        if (!j->cancel_sent) j->cancel = true;
    }
}

/* squeue for every job followed; what changed is acted on. */
static void poll_locked(void) {
    buf_t ids = {0};
    int n = 0;
    for (sl_job *j = S.jobs; j; j = j->next)
        if (j->job[0] && !j->ended && !j->forgotten) buf_printf(&ids, "%s%s", n++ ? "," : "", j->job);
    if (!n) {
        buf_free(&ids);
        return;
    }
    pthread_mutex_unlock(&S.mu);
    char *argv[] = {"squeue", "-h", "-t", "all", "-j", ids.data, "-o", "%i|%T|%r|%N", NULL}, why[600];
    cmd_result r;
    int rc = run_slurm_command(argv, NULL, &r, why, sizeof why);
    /* every id unknown is an error to squeue: none of them listed */
    bool none_known = rc == 1 && r.err && strstr(r.err, "Invalid job id");
    int cap = n + 8;
    slurm_queue_line *lines = xmalloc((size_t)cap * sizeof *lines);
    int got = rc == 0 ? slurm_parse_squeue(r.out, lines, cap) : 0;
    cmd_result_free(&r);
    buf_free(&ids);
    pthread_mutex_lock(&S.mu);
    if (rc != 0 && !none_known) {
        if (strcmp(S.squeue_error, why) != 0) log_warn("Slurm does not answer: %s", why);
        snprintf(S.squeue_error, sizeof S.squeue_error, "%s", why);
        free(lines);
        return;
    }
    if (S.squeue_error[0]) log_info("Slurm answers again");
    S.squeue_error[0] = '\0';
    int64_t now = mono_ms();
    /* one job at a time: acting on one lets the lock go, and jobs may come meanwhile
     * (none goes: only this thread frees them) */
    S.round++;
    for (;;) {
        sl_job *j = S.jobs;
        while (j && !(j->job[0] && !j->ended && !j->forgotten && j->round != S.round)) j = j->next;
        if (!j) break;
        j->round = S.round;
        const slurm_queue_line *ln = NULL;
        for (int i = 0; i < got && !ln; i++)
            if (strcmp(lines[i].job, j->job) == 0) ln = &lines[i];
        follow_locked(j, ln, now);
    }
    free(lines);
}

/* Jobs whose runs are over and that the thread is done with. */
static void free_forgotten_locked(void) {
    for (sl_job **p = &S.jobs; *p;) {
        sl_job *j = *p;
        if (j->forgotten && !j->submitting && !j->cancel) {
            *p = j->next;
            free_job(j);
            continue;
        }
        p = &j->next;
    }
}

static void *slurm_main(void *arg) {
    (void)arg;
    int poll_ms = S.c.poll_ms > 0 ? S.c.poll_ms : 1000;
    int64_t next_poll = 0;
    pthread_mutex_lock(&S.mu);
    for (;;) {
        sl_job *todo = NULL;
        for (sl_job *j = S.jobs; j && !todo && S.url[0] && !S.stopping; j = j->next)
            if (j->submit) todo = j;
        if (todo) {
            submit_locked(todo);
            continue;
        }
        for (sl_job *j = S.jobs; j && !todo; j = j->next)
            if (j->cancel && !j->submitting) todo = j;
        if (todo && !todo->job[0]) { /* never submitted: there is nothing to cancel in Slurm */
            todo->cancel = false;
            todo->cancel_sent = true;
            todo->submit = false;
            if (!todo->forgotten && !todo->ended)
                end_job_locked(todo, NULL, "canceled before it was submitted to Slurm", SLURM_END_PLAIN);
            continue;
        }
        if (todo) {
            cancel_locked(todo);
            continue;
        }
        free_forgotten_locked();
        if (S.stopping) break;
        int64_t now = mono_ms();
        if (now >= next_poll) {
            poll_locked();
            next_poll = mono_ms() + poll_ms;
            continue;
        }
        struct timespec ts = realtime_in_ms(next_poll - now);
        pthread_cond_timedwait(&S.wake, &S.mu, &ts);
    }
    pthread_mutex_unlock(&S.mu);
    return NULL;
}

/* Where the parts reach this server (http://HOST:PORT), once it listens: no job is
 * submitted before. The URL of this host's own processes is not the parts'. */
static void slurm_set_server_url(const char *local_url, const char *url) {
    (void)local_url;
    pthread_mutex_lock(&S.mu);
    snprintf(S.url, sizeof S.url, "%s", url);
    pthread_cond_signal(&S.wake);
    pthread_mutex_unlock(&S.mu);
    log_info("Slurm: jobs' ddpd parts report to %s", url);
}

/* Shutting down: what its thread is doing is done (a job id sbatch gave is told), and
 * it stops. The jobs go on in Slurm. */
static void slurm_shut_down(void) {
    pthread_mutex_lock(&S.mu);
    S.stopping = true;
    pthread_cond_signal(&S.wake);
    pthread_mutex_unlock(&S.mu);
    if (S.running) pthread_join(S.thread, NULL);
    S.running = false;
    pthread_mutex_lock(&S.mu);
    while (S.jobs) {
        sl_job *j = S.jobs;
        S.jobs = j->next;
        free_job(j);
    }
    pthread_mutex_unlock(&S.mu);
}

/* ---- the parts' reports ---- */

/* A node name as Slurm writes one, or an address: letters, digits, '.', '_', '-', ':'. */
static bool word_ok(const char *s, size_t max) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n >= max) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._-:", s[i])) return false;
    return true;
}

int executor_slurm_checkin(int64_t run, const char *secret, const json_t *body, int *relay, char *node,
                           size_t node_len, char *err, size_t errlen) {
    json_t *rank_v = json_object_get(body, "node_rank");
    const char *name = json_string_value(json_object_get(body, "node"));
    const char *address = json_string_value(json_object_get(body, "address"));
    const char *boot = json_string_value(json_object_get(body, "boot"));
    json_int_t port = json_integer_value(json_object_get(body, "master_port"));
    json_int_t stop_t = json_integer_value(json_object_get(body, "stop_t"));
    const char *bad = !json_is_integer(rank_v) ? "node_rank: the part's node rank (SLURM_NODEID) is needed"
                      : !word_ok(name, 64) ? "node: the part's node name (1 to 63 letters, digits, '.', '_', '-') is needed"
                      : !word_ok(address, 64) ? "address: the address the other nodes reach the part at is needed"
                      : !word_ok(boot, 48) ? "boot: the part process's own id (1 to 47 characters) is needed"
                      : port < 0 || port > 65535 ? "master_port: a port number is needed"
                                                 : NULL;
    if (bad) {
        snprintf(err, errlen, "%s", bad);
        return 400;
    }
    int rank = (int)json_integer_value(rank_v);
    pthread_mutex_lock(&S.mu);
    sl_job *j = find_job(run);
    int status = 0;
    if (!j || j->ended) {
        snprintf(err, errlen, "run %lld has no live Slurm job on this server (it ended, or never ran on Slurm)",
                 (long long)run);
        status = 404;
    } else if (!secret || !secret_equal(secret, j->secret)) {
        snprintf(err, errlen, "the bearer sent is not run %lld's secret (DDPD_RUN_SECRET of its job)", (long long)run);
        status = 401;
    } else if (rank < 0 || rank >= j->n_parts) {
        snprintf(err, errlen, "node_rank %d: run %lld's job has nodes 0 to %d", rank, (long long)run, j->n_parts - 1);
        status = 400;
    }
    if (status) {
        pthread_mutex_unlock(&S.mu);
        return status;
    }
    sl_part *p = &j->parts[rank];
    if (strcmp(p->boot, boot) != 0) { /* a new ddpd part: its first report, or the job runs again */
        snprintf(p->boot, sizeof p->boot, "%s", boot);
        p->relay = --S.next_relay;
        p->checked_in = true;
        p->exited = false;
        free(p->reason);
        p->reason = NULL;
        p->stop_t = 0;
        log_info("run %lld: node %s (node rank %d of Slurm job %s) reports", (long long)run, name, rank, j->job);
    }
    snprintf(p->node, sizeof p->node, "%s", name);
    snprintf(p->address, sizeof p->address, "%s", address);
    if (port > 0) p->master_port = (int)port;
    if (stop_t > 0 && !p->stop_t) p->stop_t = stop_t;
    if (!j->seen_running) {
        j->seen_running = true;
        j->running_since = mono_ms();
    }
    bool tell = !p->started_told;
    p->started_told = true;
    part_handle h = {0};
    snprintf(h.job, sizeof h.job, "%s", j->job);
    snprintf(h.place, sizeof h.place, "%s", name);
    *relay = p->relay;
    snprintf(node, node_len, "%s", name);
    pthread_mutex_unlock(&S.mu);
    if (tell && !S.hooks.started(run, rank, &h, NULL)) {
        snprintf(err, errlen, "run %lld no longer wants its parts", (long long)run);
        return 404;
    }
    return 0;
}

json_t *executor_slurm_report(int64_t run, int node_rank, const json_t *reports, bool *stop) {
    pthread_mutex_lock(&S.mu);
    sl_job *j = find_job(run);
    *stop = !j || j->ended;
    if (!j || node_rank < 0 || node_rank >= j->n_parts) {
        pthread_mutex_unlock(&S.mu);
        return json_array();
    }
    sl_part *p = &j->parts[node_rank];
    size_t i;
    json_t *rep;
    json_array_foreach(reports, i, rep) {
        const char *state = json_string_value(json_object_get(rep, "state"));
        if (p->exited || !state || strcmp(state, "exited") != 0) continue;
        const json_t *code = json_object_get(rep, "exit_code"), *sig = json_object_get(rep, "signal");
        const json_t *t = json_object_get(rep, "end_t");
        const char *reason = json_string_value(json_object_get(rep, "reason"));
        p->exited = true;
        p->exit_code = json_is_integer(code) ? json_integer_value(code) : NO_INT;
        p->exit_signal = json_is_integer(sig) ? json_integer_value(sig) : NO_INT;
        p->end_t = json_is_integer(t) ? json_integer_value(t) : now_ms();
        p->reason = reason && reason[0] ? xstrdup(reason) : NULL;
        log_info("run %lld: node %s's part ended (exit %lld)%s%s", (long long)run, p->node, (long long)p->exit_code,
                 p->reason ? ": " : "", p->reason ? p->reason : "");
    }
    /* node 0 of a command run across nodes is MASTER_ADDR:MASTER_PORT: the others wait for it */
    const sl_part *zero = &j->parts[0];
    bool across_command = j->launch.command && j->n_parts > 1;
    bool ready = !across_command || (zero->checked_in && zero->master_port > 0);
    *stop = j->cancel || j->cancel_sent || j->ended;
    bool wanted = !p->exited && !*stop && ready;
    part_launch l = j->launch;
    l.part = node_rank;
    l.account = NULL; /* the job was submitted by the account: its `ddpd part` runs as it already, nothing to switch */
    char master[64];
    snprintf(master, sizeof master, "%s", zero->address);
    int master_port = zero->master_port;
    pthread_mutex_unlock(&S.mu);
    json_t *parts = json_array();
    if (wanted) {
        json_t *desc = part_description(&l, master[0] ? master : NULL, master_port, NULL);
        part_description_add_config(desc); /* none: the node refuses the part, saying so */
        json_array_append_new(parts, desc);
    }
    return parts;
}

/* Whether the nodes have GPUs (--slurm-gpus): what a backend "auto" asks for. */
static bool slurm_gives_gpus(void) { return S.c.gpus; }

static const executor SLURM = {.name = "slurm", .title = "Slurm", .batch = true, .start = slurm_start,
                               .stop = slurm_stop, .release = slurm_release, .adopt = slurm_adopt,
                               .tick = slurm_tick, .waiting_for = slurm_waiting_for,
                               .set_server_url = slurm_set_server_url, .gives_gpus = slurm_gives_gpus,
                               .shut_down = slurm_shut_down};

const executor *executor_slurm_init(const executor_slurm_config *c, const executor_hooks *hooks) {
    S.c = *c;
    S.hooks = *hooks;
    if (pthread_create(&S.thread, NULL, slurm_main, NULL) != 0) {
        log_error("cannot start the Slurm executor's thread");
        abort();
    }
    S.running = true;
    return &SLURM;
}

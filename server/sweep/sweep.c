/* The sweeps' searcher and what the API asks of it: see sweep.h. */
#include "sweep.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "base.h"
#include "command_run.h"
#include "feed.h"
#include "log_limit.h"
#include "run_dir.h"
#include "run_files.h"
#include "run_resume.h"
#include "run_status.h"
#include "runs.h"
#include "scheduler.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"
#include "sweep_rules.h"
#include "sweep_spec.h"
#include "sweep_store.h"
#include "thread_start.h"
#include "users.h"
#include "zygotes.h"

static struct {
    pthread_t thread;
    bool running, stopping;
    bool kicked;   /* the live feed had news since the last pass (feed_wake) */
    feed_sub sub;  /* the searcher's subscription to the live feed: a pass at each report */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* the specs of running sweeps, parsed once */
    int64_t *ids;
    sweep_spec **specs;
    int n;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

#define SHUTDOWN_REASON "the server shut down"

/* The spec of sweep `sw` (parsed on first use; NULL if it no longer parses). */
static sweep_spec *spec_of(const sweep_row *sw) {
    for (int i = 0; i < W.n; i++)
        if (W.ids[i] == sw->id) return W.specs[i];
    W.ids = xrealloc(W.ids, (size_t)(W.n + 1) * sizeof *W.ids);
    W.specs = xrealloc(W.specs, (size_t)(W.n + 1) * sizeof *W.specs);
    W.ids[W.n] = sw->id;
    W.specs[W.n] = sweep_spec_load(sw->spec);
    return W.specs[W.n++];
}

static void set_reason(trial_row *t, char *reason) {
    free(t->reason);
    t->reason = reason;
}

/* The live feed's `sweep` event of a decision (GET /events; a trial's in its run's
 * stream too). */
static void publish(int64_t sweep_id, const trial_row *t, const char *action, const char *detail, const char *status) {
    store_op op = {.kind = OP_SWEEP_EVENT, .run_id = t ? t->run_id : 0, .t = now_ms()};
    op.u.sweep.sweep_id = sweep_id;
    op.u.sweep.trial = t ? t->trial : -1;
    op.u.sweep.action = xstrdup(action);
    op.u.sweep.detail = xstrdup(detail);
    op.u.sweep.status = xstrdup(t ? t->state : status);
    store_submit_now(&op);
}

/* A decision and the trial's row it changes, in one transaction. */
static void decide(const sweep_row *sw, trial_row *t, const char *action, const char *detail) {
    int64_t now = now_ms();
    sweep_store_begin();
    sweep_store_trial_put(sw->id, t, now);
    sweep_store_decide(sw->id, t->trial, action, detail, now);
    sweep_store_commit();
    publish(sw->id, t, action, detail, NULL);
    log_info("sweep %lld trial %d (run %lld): %s%s%s", (long long)sw->id, t->trial, (long long)t->run_id, action,
             detail ? ": " : "", detail ? detail : "");
}

static const char *metric_words(const sweep_spec *s) { return s->metric; }

/* ---- the warm start's zygote (zygotes.h) ---- */

#define WARM_FAILED "warm start failed"

static json_t *point_config(const sweep_spec *s, const json_t *params);

static bool warm(const sweep_spec *s) { return s->command && json_object_get(s->base, "warm_start"); }

/* A warm sweep's zygote, started at its submission as its trials will run (its first
 * point's config, its owner's account and limits), so that its first trial finds it
 * loaded or loading; none where its trials would not start on this host as they are. */
static void warm_prestart(int64_t id, const caller *who, const sweep_spec *s) {
    if (!warm(s) || sweep_check_points(s) < 1) return;
    json_t *params = sweep_check_point(s, 0), *point = point_config(s, params);
    json_t *cfg = runs_resolve(point, who); /* its working_dir as its runs will have it */
    const char *owner = who->kind == CALLER_USER ? who->name : NULL;
    run_account account;
    bool as_account = false;
    run_cgroup_limits limits = {0};
    if (cfg && json_integer_value(json_object_get(json_object_get(cfg, "distributed"), "nodes")) <= 1 &&
        scheduler_local_start_as(owner, cfg, &account, &as_account, &limits))
        zygotes_sweep_submitted(id, as_account ? &account : NULL, cfg, &limits);
    json_decref(cfg);
    json_decref(point);
    json_decref(params);
}

/* A warm sweep whose zygote failed says so, once per failure: a decision of its own
 * (its log, the live feed, GET /sweeps/{id}'s warm_start). */
static void warm_failure(const sweep_row *sw, const sweep_spec *s) {
    char why[512];
    if (!warm(s) || zygotes_state_of(sw->id, why, sizeof why) != ZYGOTE_FAILED) return;
    char *said = sweep_store_sweep_detail(sw->id, WARM_FAILED);
    char *detail = xasprintf("its trials start cold: its zygote (warm_start.imports) %s", why);
    if (!said || strcmp(said, detail) != 0) {
        sweep_store_decide(sw->id, -1, WARM_FAILED, detail, now_ms());
        publish(sw->id, NULL, WARM_FAILED, detail, sw->status);
        log_info("sweep %lld: %s: %s", (long long)sw->id, WARM_FAILED, detail);
    }
    free(detail);
    free(said);
}

/* GET /sweeps/{id}'s warm_start (a sweep with warm_start.imports): where its zygote is,
 * and why it failed; "none" once it ended with its sweep, or where none was started. */
static json_t *warm_json(const sweep_row *sw, const json_t *spec) {
    if (!json_object_get(json_object_get(spec, "base"), "warm_start")) return json_null();
    char why[512];
    zygote_state st = zygotes_state_of(sw->id, why, sizeof why);
    char *stored = st == ZYGOTE_NONE || st == ZYGOTE_FAILED ? sweep_store_sweep_detail(sw->id, WARM_FAILED) : NULL;
    static const char *const names[] = {"none", "loading", "ready", "failed"};
    json_t *o = json_pack("{s:s}", "status", names[stored && st == ZYGOTE_NONE ? ZYGOTE_FAILED : st]);
    json_object_set_new(o, "reason", stored ? json_string(stored) : json_null());
    free(stored);
    return o;
}

/* ---- a trial's run ---- */

static void submit_trial(const sweep_row *sw, const sweep_spec *s, trial_row *t) {
    int64_t run = sweep_store_trial_run(sw->id, t->trial); /* stored before a restart? */
    if (run > 0) {
        t->run_id = run;
        snprintf(t->state, sizeof t->state, "running");
        decide(sw, t, "found", "its run was stored before the server restarted");
        return;
    }
    json_t *params = json_loads(t->params, 0, NULL);
    char *name = xasprintf("%s-t%d", sw->name, t->trial);
    json_t *cfg = sweep_trial_config(s, params, name);
    free(name);
    if (s->stop == STOP_ASHA && !s->command) { /* it pauses itself at the first rung */
        json_t *train = json_object_get(cfg, "train");
        if (!json_is_object(train)) json_object_set_new(cfg, "train", train = json_object());
        json_object_set_new(train, "stop_after_epochs", json_integer(sweep_rules_rung_epochs(&s->rules, 0)));
    }
    json_decref(params);
    /* every gate a run passes, as its owner may now (a limit lowered since counts) */
    caller who;
    submit_outcome out = {0};
    if (!users_caller(sw->owner, &who)) {
        out.result = SUBMIT_NOT_PERMITTED;
        snprintf(out.why, sizeof out.why, "the sweep's owner %s is no longer a user of this server (ddpd user list)",
                 sw->owner);
    } else {
        runs_submit(cfg, &who, sw->id, t->trial, &out);
    }
    json_decref(cfg);
    if (out.result == SUBMIT_OK) {
        t->run_id = out.id;
        snprintf(t->state, sizeof t->state, "running");
        decide(sw, t, "started", NULL);
    } else if (out.result == SUBMIT_UNAVAILABLE) {
        /* the database cannot be written now: the trial is made again at a later pass,
         * and the log says so at most every 10 s (a pass is every 250 ms) */
        static log_limit unstored = LOG_LIMIT_INIT;
        uint64_t skipped;
        if (log_limit_now(&unstored, 10000, &skipped))
            log_warn("sweep %lld trial %d: its run could not be stored now, tried again at the next pass (%llu such "
                     "retries not logged since the last line): %s", (long long)sw->id, t->trial,
                     (unsigned long long)skipped, out.why);
    } else { /* refused, or not set up: once, with the gate's reason */
        if (out.id > 0) t->run_id = out.id;
        snprintf(t->state, sizeof t->state, "failed");
        set_reason(t, xasprintf(out.result == SUBMIT_FAILED ? "its run could not be set up: %s" : "its run was refused: %s",
                                out.why));
        decide(sw, t, "failed", t->reason);
    }
    submit_outcome_free(&out);
}

/* A command run's launcher (ddp-run) is told why it is stopped before its SIGTERM
 * (RUN_DIR_STOP_REASON), so that its log says so, not "canceled by SIGTERM"; an empty
 * one says nothing (a resume clears it). Best effort: a failure is logged only. */
static void tell_launcher(int64_t run_id, const char *reason) {
    char *dir = layout_run_dir(run_id), err[1024];
    run_dir d;
    if (run_dir_open(&d, dir, err, sizeof err) != 0 ||
        run_file_write(&d, RUN_DIR_STOP_REASON, reason, strlen(reason), 0644, err, sizeof err) != 0)
        log_warn("run %lld: its launcher cannot be told why it is stopped: %s", (long long)run_id, err);
    if (d.fd >= 0) run_dir_close(&d);
    free(dir);
}

/* Stops a trial's run, ending it `stopped` with `reason` (again, harmlessly, when it
 * was asked before a restart). */
static void stop_run(const sweep_spec *s, const trial_row *t, const char *reason) {
    if (t->run_id <= 0) return;
    if (s->command) tell_launcher(t->run_id, reason);
    scheduler_stop(t->run_id, reason);
}

/* Pauses a command trial's run: stopped with the notice first (scheduler_pause), so
 * that its script, asking ddpd.should_pause(), saves a snapshot to go on from when the
 * trial is resumed; `reason` in its launcher's log and its run's. */
static void pause_command_run(int64_t run_id, const char *reason) {
    if (run_id <= 0) return;
    tell_launcher(run_id, reason);
    scheduler_pause(run_id, reason);
}

/* A paused built-in trial's next stop: the rung after the one it was promoted from (0:
 * none, it trains to the end), in the config its trainer reads again at the resume. */
static int set_next_pause(const sweep_spec *s, const trial_row *t, char *why, size_t whylen) {
    /* the trial's directory is its account's: read and written as run_files.h does,
     * never through a link it put there, the new file the account's */
    char *dir = layout_run_dir(t->run_id), err[1024];
    run_dir d;
    json_t *cfg = NULL;
    int rc = -1;
    if (run_dir_open(&d, dir, err, sizeof err) != 0) {
        snprintf(why, whylen, "its directory cannot be opened: %s", err);
    } else if (!(cfg = run_file_load_json(&d, RUN_DIR_CONFIG, RUN_FILE_SMALL_MAX, err, sizeof err))) {
        snprintf(why, whylen, "its config cannot be read: %s", err);
    } else {
        json_t *train = json_object_get(cfg, "train");
        if (!json_is_object(train)) json_object_set_new(cfg, "train", train = json_object());
        json_object_set_new(train, "stop_after_epochs", json_integer(sweep_rules_rung_epochs(&s->rules, t->promoted + 1)));
        rc = run_file_write_json(&d, RUN_DIR_CONFIG, cfg, err, sizeof err);
        if (rc) snprintf(why, whylen, "its config cannot be written: %s", err);
    }
    if (d.fd >= 0) run_dir_close(&d);
    json_decref(cfg);
    free(dir);
    return rc;
}

static void resume_trial(const sweep_row *sw, const sweep_spec *s, trial_row *t) {
    char why[2048] = "";
    if (s->stop == STOP_ASHA && !s->command && set_next_pause(s, t, why, sizeof why) != 0) {
        snprintf(t->state, sizeof t->state, "failed");
        set_reason(t, xasprintf("it could not be continued: %s", why));
        decide(sw, t, "failed", t->reason);
        /* its run says it too: it stays stopped, and will not go on */
        char *reason = xasprintf("stopped by sweep %lld, which could not continue it: %s", (long long)sw->id, why);
        runs_set_stopped_reason(t->run_id, reason);
        free(reason);
        return;
    }
    resume_result r = runs_resume(t->run_id, why, sizeof why);
    if (r == RESUME_QUEUED || r == RESUME_STORE_ERROR) return; /* a store error: asked again next pass */
    snprintf(t->state, sizeof t->state, "failed");
    set_reason(t, xasprintf("it could not be continued: %s", why));
    decide(sw, t, "failed", t->reason);
}

/* ---- what the rules say (sweep_rules.h), recorded and acted on ---- */

/* A trial as the rules see it. */
static sweep_trial_view view_of(const trial_row *t) {
    sweep_trial_view v = {.trial = t->trial, .rung = t->rung, .promoted = t->promoted, .metric = t->metric};
    if (!sweep_phase_parse(t->state, &v.phase)) v.phase = SWEEP_FAILED; /* the table's CHECK allows no other word */
    return v;
}

/* The rules' view of the trials (malloc'd, n of them). */
static sweep_trial_view *views_of(const trial_row *tr, int n) {
    sweep_trial_view *v = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int i = 0; i < n; i++) v[i] = view_of(&tr[i]);
    return v;
}

/* The values recorded at a rung (ASHA) or an epoch (median); n in *n (0 on a read error). */
static sweep_mark *marks_at(const sweep_row *sw, int rung, int *n) {
    sweep_mark *at;
    *n = sweep_store_rung(sw->id, rung, &at);
    if (*n < 0) *n = 0;
    return at;
}

/* A built-in trial under ASHA that reached its next rung (rung `k`, `r` epochs; v[0..n)
 * its metric per epoch): paused there, and it stops itself. */
static void asha_pause(const sweep_row *sw, const sweep_spec *s, trial_row *t, int k, int r, const double *v, int n) {
    sweep_store_rung_put(sw->id, k, t->trial, v[r - 1], now_ms());
    t->rung = k;
    snprintf(t->state, sizeof t->state, "paused");
    set_reason(t, xasprintf("stopped by sweep %lld's ASHA at rung %d (epoch %d, %s %.6g): it goes on from its "
                            "checkpoint if it ranks in the top 1/%d of its rung", (long long)sw->id, k, r,
                            metric_words(s), v[r - 1], s->rules.reduction_factor));
    decide(sw, t, "paused", t->reason);
    /* It stops itself there, after its checkpoint (train.stop_after_epochs): a stop now
     * could cut that checkpoint short. Only one that went past it is stopped; its run's
     * reason gets the rung once it has ended. */
    if (n > r) stop_run(s, t, t->reason);
}

/* A command trial under ASHA: judged at each rung it reached since the last look, as
 * they come. One in the top 1/eta of the rung so far goes on (promoted from it at
 * once); one below is paused there: stopped with the notice, to save a snapshot
 * (ddpd.should_pause()), and resumed from it if it ranks in the top once more trials
 * reached the rung (promote), else stopped for good once the rung closes. True when
 * it was paused. */
static bool asha_command(const sweep_row *sw, const sweep_spec *s, trial_row *t, const double *v, int n) {
    int r;
    for (int k = t->rung + 1; sweep_rules_rung_reached(&s->rules, k, v, n, &r); k++) {
        sweep_store_rung_put(sw->id, k, t->trial, v[r - 1], now_ms());
        t->rung = k;
        int nm;
        sweep_mark *at = marks_at(sw, k, &nm);
        sweep_asha_verdict verdict = sweep_asha_command_judge(&s->rules, v[r - 1], at, nm);
        free(at);
        if (!verdict.stop) {
            t->promoted = k; /* it goes on past the rung: the rung's closing waits for it no more */
            continue;
        }
        snprintf(t->state, sizeof t->state, "paused");
        set_reason(t, xasprintf("stopped by sweep %lld's ASHA at rung %d (epoch %d, %s %.6g, not in the top 1/%d of "
                                "the %d trials there yet): paused, it goes on from its snapshot if it ranks in the "
                                "top 1/%d of its rung", (long long)sw->id, k, r, metric_words(s), v[r - 1],
                                s->rules.reduction_factor, verdict.n, s->rules.reduction_factor));
        decide(sw, t, "paused", t->reason);
        pause_command_run(t->run_id, t->reason);
        return true;
    }
    return false;
}

/* Median stopping: each new epoch's value recorded once (a restart's again is ignored),
 * then the newest judged against the others'. True when it was stopped. */
static bool median_stop(const sweep_row *sw, const sweep_spec *s, trial_row *t, const double *v, int n, int seen,
                        int latest) {
    for (int e = seen + 1; e < n; e++)
        if (!isnan(v[e])) sweep_store_rung_put(sw->id, e, t->trial, v[e], now_ms());
    int nm;
    sweep_mark *at = marks_at(sw, latest, &nm);
    sweep_median_verdict verdict = sweep_median_judge(&s->rules, t->trial, latest, v[latest], at, nm);
    free(at);
    if (!verdict.stop) return false;
    snprintf(t->state, sizeof t->state, "stopped");
    t->rung = latest;
    set_reason(t, xasprintf("stopped by sweep %lld's median rule at epoch %d: %s %.6g is worse than the median %.6g "
                            "of %d other trials there", (long long)sw->id, latest, metric_words(s), v[latest],
                            verdict.median, verdict.others));
    decide(sw, t, "stopped", t->reason);
    stop_run(s, t, t->reason);
    return true;
}

/* A trial's newest value of the metric, read from its run (no rule applied): what a
 * trial that ends canceled or failed had last reported. */
static void refresh_metric(const sweep_spec *s, trial_row *t) {
    double *v;
    int n = t->run_id > 0 ? sweep_store_run_metric(t->run_id, s->metric, &v) : -1;
    if (n < 0) return;
    int latest = n > 0 ? sweep_rules_latest(v, n) : -1;
    if (latest >= 0) {
        t->metric = v[latest];
        t->metric_epoch = latest;
    }
    free(v);
}

/* A running trial's new epochs: its metric, the rungs it reached, what the rules say. */
static void judge_running(const sweep_row *sw, const sweep_spec *s, trial_row *t) {
    double *v;
    int n = sweep_store_run_metric(t->run_id, s->metric, &v);
    int latest = n > 0 ? sweep_rules_latest(v, n) : -1;
    if (latest < 0) {
        free(v);
        return;
    }
    int seen = t->metric_epoch; /* the newest epoch looked at before */
    bool changed = latest != t->metric_epoch || v[latest] != t->metric;
    t->metric = v[latest];
    t->metric_epoch = latest;
    bool decided = false;
    int k = t->promoted + 1, r;
    if (s->stop != STOP_NONE && sweep_store_trial_by_hand(sw->id, t->trial)) {
        /* resumed by hand: its metric counts, no rule stops it */
    } else if (s->stop == STOP_ASHA && !s->command) {
        if (sweep_rules_rung_reached(&s->rules, k, v, n, &r)) {
            asha_pause(sw, s, t, k, r, v, n);
            decided = true;
        }
    } else if (s->stop == STOP_ASHA) {
        int was = t->rung;
        decided = asha_command(sw, s, t, v, n);
        changed = changed || t->rung != was;
    } else if (s->stop == STOP_MEDIAN) {
        decided = median_stop(sw, s, t, v, n, seen, latest);
    }
    if (!decided && changed) sweep_store_trial_put(sw->id, t, now_ms());
    free(v);
}

/* A trial whose run has ended, or is still going. */
static void follow_trial(const sweep_row *sw, const sweep_spec *s, trial_row *t) {
    if (strcmp(t->state, "pending") == 0) return; /* submitted by the pass, `parallel` at a time */
    run_status live;
    if (t->run_id > 0 && t->resumed_since && run_status_parse(t->run_status, &live) && !run_status_is_final(live) &&
        (!strcmp(t->state, "stopped") || !strcmp(t->state, "canceled") || !strcmp(t->state, "failed") ||
         !strcmp(t->state, "succeeded"))) {
        /* its run was resumed by hand (POST /runs/{id}/resume) after the sweep had ended
         * it: followed to its end and counted, stopped no more */
        char *d = xasprintf("its run %lld was resumed by hand after it had ended %s: the sweep follows it to its end "
                            "and stops it no more", (long long)t->run_id, t->state);
        snprintf(t->state, sizeof t->state, "running");
        set_reason(t, NULL);
        decide(sw, t, "resumed by hand", d);
        free(d);
    }
    bool paused = strcmp(t->state, "paused") == 0;
    if (!paused && strcmp(t->state, "running") != 0) return;
    char status[16] = "";
    char *reason = NULL;
    if (sweep_store_run_state(t->run_id, status, &reason) != 1) {
        free(reason);
        return;
    }
    run_status st;
    if (!run_status_parse(status, &st)) st = RUN_FAILED;
    if (!run_status_is_final(st)) {
        if (!paused) judge_running(sw, s, t); /* a paused one is stopping itself */
    } else if (st == RUN_SUCCEEDED) {
        judge_running(sw, s, t); /* its last epochs */
        snprintf(t->state, sizeof t->state, "succeeded");
        decide(sw, t, "succeeded", NULL);
    } else if (st == RUN_STOPPED) {
        if (!paused) judge_running(sw, s, t); /* it paused itself at a rung (train.stop_after_epochs) */
        if (!strcmp(t->state, "paused") && t->reason && (!reason || strcmp(reason, t->reason) != 0))
            runs_set_stopped_reason(t->run_id, t->reason); /* the rung in its run's reason */
        /* else promoted, and the server went down before it was queued */
        if (!strcmp(t->state, "running")) resume_trial(sw, s, t);
    } else if (st == RUN_CANCELED && reason && strcmp(reason, SHUTDOWN_REASON) == 0) {
        if (!paused) resume_trial(sw, s, t); /* the server's shutdown stopped it: it carries on */
    } else if (st == RUN_TIMEOUT) {
        /* its time limit (max_duration_s) is no failure of the trial: it ended early, as a
         * trial the searcher stops does, and counts with the metric it last reported */
        refresh_metric(s, t);
        snprintf(t->state, sizeof t->state, "stopped");
        set_reason(t, xasprintf("its run timed out (%s): the sweep counts it as a trial stopped early, with the "
                                "metric it last reported", reason ? reason : "max_duration_s"));
        decide(sw, t, "stopped", t->reason);
    } else {
        refresh_metric(s, t); /* its last reported value counts for a canceled or failed sweep's best */
        snprintf(t->state, sizeof t->state, "%s", st == RUN_CANCELED ? "canceled" : "failed");
        set_reason(t, reason ? xstrdup(reason) : NULL);
        decide(sw, t, t->state, reason);
    }
    free(reason);
}

static trial_row *find_trial(trial_row *tr, int n, int trial) {
    for (int i = 0; i < n; i++)
        if (tr[i].trial == trial) return &tr[i];
    return NULL;
}

/* ASHA's promotions, rung by rung (sweep_asha_promotions): a paused trial the rules
 * promote goes on from its checkpoint, one they stop ends stopped, once its pause has
 * landed (its run ended stopped). The trials' view is taken again at each rung, as
 * what was done at the rung below changes it. */
static void promote(const sweep_row *sw, const sweep_spec *s, trial_row *tr, int n, bool all_made) {
    for (int k = 0; sweep_rules_rung_epochs(&s->rules, k) > 0; k++) {
        sweep_trial_view *views = views_of(tr, n);
        bool closed = sweep_asha_rung_closed(k, all_made, views, n);
        int nk, keep;
        sweep_mark *at = marks_at(sw, k, &nk);
        sweep_asha_pick *picks = xmalloc((size_t)(nk > 0 ? nk : 1) * sizeof *picks);
        int ranked = sweep_asha_promotions(&s->rules, k, closed, at, nk, views, n, picks, &keep);
        free(views);
        free(at);
        for (int i = 0; i < ranked; i++) {
            const sweep_asha_pick *p = &picks[i];
            trial_row *t = find_trial(tr, n, p->trial);
            if (!t || (p->action != ASHA_PROMOTE && p->action != ASHA_STOP)) continue;
            char status[16] = "";
            if (sweep_store_run_state(t->run_id, status, NULL) != 1 || strcmp(status, "stopped") != 0)
                continue; /* its pause has not landed yet (or it finished first): next pass */
            if (p->action == ASHA_PROMOTE) {
                t->promoted = k;
                snprintf(t->state, sizeof t->state, "running");
                char *d = xasprintf("rung %d: %s %.6g ranks %d of %d; it goes on from its %s", k, metric_words(s),
                                    p->metric, p->rank, ranked, s->command ? "snapshot" : "checkpoint");
                set_reason(t, NULL);
                decide(sw, t, "promoted", d);
                free(d);
                resume_trial(sw, s, t);
            } else {
                snprintf(t->state, sizeof t->state, "stopped");
                char *d = xasprintf("stopped by sweep %lld's ASHA at rung %d (epoch %d): %s %.6g ranks %d of %d, "
                                    "not in the top %d", (long long)sw->id, k, sweep_rules_rung_epochs(&s->rules, k),
                                    metric_words(s), p->metric, p->rank, ranked, keep);
                set_reason(t, d);
                decide(sw, t, "stopped", d);
                runs_set_stopped_reason(t->run_id, d);
            }
        }
        free(picks);
    }
}

/* A trial's parameters as anybody who may read the live feed sees them (the decision
 * `made`, also in the log): the values that reach a command run's environment or
 * arguments hidden, as GET /sweeps/{id} hides them from all but the owner. */
static char *params_shown(const json_t *params) {
    json_t *shown = json_deep_copy(params);
    const char *key;
    json_t *v;
    json_object_foreach(shown, key, v) if (sweep_param_secret(key)) json_object_set_new(shown, key, json_string(COMMAND_RUN_HIDDEN));
    char *text = json_dumps(shown, JSON_FLAGS);
    json_decref(shown);
    return text;
}

/* Why a sweep whose trials have all ended has no best: none reported its metric;
 * what the first trial with a run did report (malloc'd). */
static char *no_metric_reason(const sweep_spec *s, const trial_row *tr, int n) {
    char *names = NULL;
    for (int i = 0; i < n && !names; i++)
        if (tr[i].run_id > 0) names = sweep_store_run_metric_names(tr[i].run_id);
    char *why = xasprintf("no trial reported its metric \"%s\" (a script reports it per epoch with "
                          "ddpd.log_epoch(epoch, %s=...)); %s%s%s", s->metric, s->metric,
                          names ? "its trials reported: " : "no trial ran", names ? (*names ? names : "nothing") : "",
                          names ? "" : "");
    free(names);
    return why;
}

/* The next configuration of the method's sequence that no trial has yet (a raised
 * max_trials continues the sequence, an enqueued one is not made twice): new reference,
 * NULL when the sequence has none left. */
/* The trial among tr[0..n) whose params are p's (as stored: JSON_FLAGS' precision), or -1. */
static int params_trial(const json_t *p, const trial_row *tr, int n) {
    char *text = json_dumps(p, JSON_FLAGS);
    json_t *as_stored = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    int found = -1;
    for (int i = 0; i < n && found < 0 && as_stored; i++) {
        json_t *had = json_loads(tr[i].params, 0, NULL);
        if (had && json_equal(had, as_stored)) found = i;
        json_decref(had);
    }
    json_decref(as_stored);
    return found;
}

static bool params_taken(const json_t *p, const trial_row *tr, int n) { return params_trial(p, tr, n) >= 0; }

/* Method tpe's next configuration once tpe.n_startup_trials trials have ended with the
 * metric (succeeded, or stopped early with the newest they had), from those; NULL
 * before (the random sequence's then) or when 20 draws all repeat a trial's. */
static json_t *tpe_next(const sweep_spec *s, const trial_row *tr, int n) {
    const char **params = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *params);
    double *metric = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *metric);
    int ended = 0;
    for (int i = 0; i < n; i++) {
        params[i] = tr[i].params;
        bool done = !strcmp(tr[i].state, "succeeded") || !strcmp(tr[i].state, "stopped");
        metric[i] = done ? tr[i].metric : NAN;
        ended += done && !isnan(tr[i].metric);
    }
    json_t *p = NULL;
    for (int attempt = 0; ended >= s->tpe.n_startup && attempt < 20 && !p; attempt++) {
        p = sweep_tpe_params(s, n, attempt, params, metric, n);
        if (params_taken(p, tr, n)) {
            json_decref(p);
            p = NULL;
        }
    }
    free(params);
    free(metric);
    return p;
}

static json_t *next_params(const sweep_spec *s, const trial_row *tr, int n) {
    if (s->method == METHOD_TPE) {
        json_t *p = tpe_next(s, tr, n);
        if (p) return p;
    }
    long len = sweep_sequence_length(s), limit = len >= 0 ? len : (long)n + SWEEP_MAX_TRIALS;
    for (long g = 0; g < limit; g++) {
        json_t *p = sweep_trial_params(s, (int)g);
        if (!params_taken(p, tr, n)) return p;
        json_decref(p);
    }
    return NULL;
}

/* A paused sweep's running trials stop and stay `running`, in their place: the resume
 * continues each from where it stopped. A built-in one stops once it has a checkpoint
 * to go on from (at its first epoch's end, if it has none yet: asked again at each
 * pass while the sweep is paused); a command one at once, with the notice first
 * (pause_command_run): it goes on from the snapshot its script saved then, if any. */
static void pause_trials(int64_t id, bool command, const trial_row *tr, int n) {
    char *reason = NULL;
    for (int i = 0; i < n; i++) {
        run_status st;
        if (strcmp(tr[i].state, "running") != 0 || tr[i].run_id <= 0 || !run_status_parse(tr[i].run_status, &st) ||
            run_status_is_final(st) || st == RUN_CANCELING || !sweep_store_run_stoppable(tr[i].run_id))
            continue; /* a canceling one was asked already (this is asked again at each pass) */
        if (!reason)
            reason = xasprintf("paused by sweep %lld: POST /sweeps/%lld/resume continues it from where it stopped",
                               (long long)id, (long long)id);
        if (command) pause_command_run(tr[i].run_id, reason);
        else scheduler_stop(tr[i].run_id, reason);
    }
    free(reason);
}

/* One look at a running sweep. */
static void sweep_pass(const sweep_row *sw) {
    if (sw->paused) { /* POST /sweeps/{id}/resume carries it on */
        const sweep_spec *s = spec_of(sw);
        trial_row *tr;
        int n = sweep_store_trials(sw->id, &tr);
        pause_trials(sw->id, s && s->command, tr, n);
        if (n > 0) trial_rows_free(tr, n);
        return;
    }
    const sweep_spec *s = spec_of(sw);
    if (!s) {
        sweep_store_finish(sw->id, "failed", "its stored spec no longer parses", now_ms());
        return;
    }
    warm_failure(sw, s);
    trial_row *tr;
    int n = sweep_store_trials(sw->id, &tr);
    if (n < 0) return;
    for (int i = 0; i < n; i++) follow_trial(sw, s, &tr[i]);
    /* every trial made: as many as n_trials, or the method has no configuration left */
    json_t *next = n < sw->n_trials ? next_params(s, tr, n) : NULL;
    bool all_made = n >= sw->n_trials || !next;
    if (s->stop == STOP_ASHA) promote(sw, s, tr, n, all_made);
    int active = 0, pending = 0;
    for (int i = 0; i < n; i++) {
        active += !strcmp(tr[i].state, "running");
        pending += !strcmp(tr[i].state, "pending");
    }
    char unwritable[512];
    if (active < s->parallel && (pending || !all_made) && store_unwritable(unwritable, sizeof unwritable)) {
        /* no trial is made (nor its decision written, nor said) until it can be stored */
        static log_limit waiting = LOG_LIMIT_INIT;
        uint64_t skipped;
        if (log_limit_now(&waiting, 10000, &skipped))
            log_warn("sweep %lld: its next trial waits until the database can be written (%llu such passes not "
                     "logged since the last line): %s", (long long)sw->id, (unsigned long long)skipped, unwritable);
        active = s->parallel;
    }
    /* the trials made but not submitted (enqueued by hand, or made before a restart) first, in order */
    for (int i = 0; i < n && active < s->parallel; i++) {
        if (strcmp(tr[i].state, "pending") != 0) continue;
        submit_trial(sw, s, &tr[i]);
        active++;
    }
    while (active < s->parallel && n < sw->n_trials && next) {
        tr = xrealloc(tr, (size_t)(n + 1) * sizeof *tr);
        trial_row *t = &tr[n];
        *t = (trial_row){.trial = n, .params = json_dumps(next, JSON_FLAGS), .rung = -1, .promoted = -1,
                         .metric = NAN, .metric_epoch = -1};
        snprintf(t->state, sizeof t->state, "pending");
        char *shown = params_shown(next);
        decide(sw, t, "made", shown);
        free(shown);
        json_decref(next);
        n++;
        submit_trial(sw, s, t);
        active++;
        next = n < sw->n_trials ? next_params(s, tr, n) : NULL;
    }
    json_decref(next);
    all_made = all_made || (n < sw->n_trials && !next);
    sweep_trial_view *views = views_of(tr, n);
    sweep_end end = sweep_rules_end(all_made, views, n);
    /* a sweep that fails has its best among every trial's last reported metric */
    int best = end == SWEEP_ENDS_FAILED ? sweep_rules_best_last(&s->rules, views, n) : sweep_rules_best(&s->rules, views, n);
    free(views);
    if (best != sw->best_trial) sweep_store_set_best(sw->id, best);
    if (end != SWEEP_GOES_ON) {
        bool succeeded = end == SWEEP_ENDS_SUCCEEDED && best >= 0;
        char *why = succeeded ? NULL : best < 0 ? no_metric_reason(s, tr, n) : xstrdup("no trial succeeded");
        sweep_store_begin();
        if (n < sw->n_trials) sweep_store_grow(sw->id, n, sw->spec, false); /* the method had no more */
        sweep_store_finish(sw->id, succeeded ? "succeeded" : "failed", why, now_ms());
        sweep_store_decide(sw->id, -1, succeeded ? "succeeded" : "failed", why, now_ms());
        sweep_store_commit();
        publish(sw->id, NULL, succeeded ? "succeeded" : "failed", why, succeeded ? "succeeded" : "failed");
        zygotes_sweep_ended(sw->id); /* its warm start's zygotes, kept while it was paused or queued */
        log_info("sweep %lld %s: best trial %d%s%s", (long long)sw->id, succeeded ? "succeeded" : "failed", best,
                 why ? ": " : "", why ? why : "");
        free(why);
    }
    trial_rows_free(tr, n);
}

/* A finished sweep one of whose trials was resumed by hand runs again, to follow it
 * (sweep_store_revived): it makes no new trial unless it has room for more. */
static void revive(void) {
    int64_t *ids;
    int n = sweep_store_revived(&ids);
    for (int i = 0; i < n; i++) {
        sweep_row sw;
        if (sweep_store_get(ids[i], &sw) != 1) continue;
        sweep_store_begin();
        sweep_store_grow(sw.id, sw.n_trials, sw.spec, true);
        sweep_store_decide(sw.id, -1, "reopened", "a trial's run was resumed by hand: the sweep follows it", now_ms());
        sweep_store_commit();
        publish(sw.id, NULL, "reopened", "a trial's run was resumed by hand", "running");
        log_info("sweep %lld reopened: a trial's run was resumed by hand", (long long)sw.id);
        sweep_row_free(&sw);
    }
    free(ids);
}

/* The live feed's news (an epoch reported, a run's status): the searcher looks at once,
 * so a trial is judged at the report that decides it, not up to a pass later. Called
 * under the feed's lock, once per park; the searcher calls the feed without W.mu. */
static void feed_park(feed_sub *sub) { (void)sub; }
static void feed_wake(feed_sub *sub) {
    (void)sub;
    pthread_mutex_lock(&W.mu);
    W.kicked = true;
    pthread_cond_signal(&W.cv);
    pthread_mutex_unlock(&W.mu);
}

/* What the feed has for the searcher, read and dropped: only that there was news counts. */
static void feed_drain(void) {
    buf_t b = {0};
    while (feed_read(&W.sub, &b, 1 << 16) == FEED_DATA) b.len = 0;
    buf_free(&b);
}

static void *searcher(void *arg) {
    (void)arg;
    W.sub = (feed_sub){.run_id = 0, .park = feed_park, .wake = feed_wake};
    feed_subscribe(&W.sub, -1);
    pthread_mutex_lock(&W.mu);
    while (!W.stopping) {
        pthread_mutex_unlock(&W.mu);
        feed_drain();
        sweep_store_lock();
        revive();
        sweep_row *sw;
        int n = sweep_store_list(&sw, true);
        for (int i = 0; i < n; i++) {
            sweep_pass(&sw[i]);
            sweep_row_free(&sw[i]);
        }
        if (n > 0) free(sw);
        sweep_store_unlock();
        pthread_mutex_lock(&W.mu);
        if (!W.stopping && !W.kicked) {
            struct timespec until = realtime_in_ms(250);
            pthread_cond_timedwait(&W.cv, &W.mu, &until);
        }
        W.kicked = false;
    }
    pthread_mutex_unlock(&W.mu);
    feed_unsubscribe(&W.sub);
    return NULL;
}

int sweep_start(const char *db_path, char *err, size_t errlen) {
    if (sweep_store_open(db_path, err, errlen) != 0) return -1;
    W.stopping = false;
    return thread_start(&W.thread, searcher, &W.running, "the sweeps' thread", err, errlen);
}

void sweep_stop(void) {
    if (!W.running) return;
    thread_stop(W.thread, &W.mu, &W.cv, &W.stopping, &W.running);
    for (int i = 0; i < W.n; i++) sweep_spec_free(W.specs[i]);
    free(W.specs);
    free(W.ids);
    W.specs = NULL;
    W.ids = NULL;
    W.n = 0;
    sweep_store_close();
}

static void wake(void) {
    pthread_mutex_lock(&W.mu);
    W.kicked = true;
    pthread_cond_signal(&W.cv);
    pthread_mutex_unlock(&W.mu);
}

/* ---- what the API asks ---- */

/* A point's config, as its trial would submit it (the longest trial name). */
static json_t *point_config(const sweep_spec *s, const json_t *params) {
    char *name = xasprintf("%s-t%d", s->name, s->n_trials - 1);
    json_t *cfg = sweep_trial_config(s, params, name);
    free(name);
    return cfg;
}

/* Whether `params` (a point's, maybe fewer) pass the gate where `failed` did not: it
 * passes, or its first problem is elsewhere. */
static bool clears(const sweep_spec *s, const json_t *params, const caller *who, const submit_outcome *failed) {
    json_t *cfg = point_config(s, params);
    submit_outcome o = {0};
    bool cleared = runs_check(cfg, who, &o) == SUBMIT_OK || !o.errs.count || !failed->errs.count ||
                   strcmp(o.errs.items[0].pointer, failed->errs.items[0].pointer) != 0;
    submit_outcome_free(&o);
    json_decref(cfg);
    return cleared;
}

/* Names where a point's refusal comes from, into errs: the parameter whose value alone
 * makes it (/parameters/KEY, the value and the base's pointer), else the parameters
 * together (/parameters), else the base itself (/base/POINTER). */
static void blame_point(const sweep_spec *s, const json_t *params, const caller *who, const submit_outcome *failed,
                        schema_errors *errs) {
    const char *ptr = failed->errs.count ? failed->errs.items[0].pointer : "";
    const char *msg = failed->errs.count ? failed->errs.items[0].message : failed->why;
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)params, key, value) {
        json_t *without = json_deep_copy(params);
        json_object_del(without, key);
        bool culprit = clears(s, without, who, failed);
        json_decref(without);
        if (!culprit) continue;
        char *pointer = xasprintf("/parameters/%s", key), *v = json_dumps(value, JSON_FLAGS | JSON_ENCODE_ANY);
        schema_errors_add(errs, pointer, "value %s gives a trial /base%s: %s", v, ptr, msg);
        free(v);
        free(pointer);
        return;
    }
    json_t *none = json_object();
    bool together = json_object_size(params) > 0 && clears(s, none, who, failed);
    json_decref(none);
    if (together) {
        char *p = json_dumps(params, JSON_FLAGS);
        schema_errors_add(errs, "/parameters", "the parameters %s together give a trial /base%s: %s", p, ptr, msg);
        free(p);
    } else {
        char *pointer = xasprintf("/base%s", ptr);
        schema_errors_add(errs, pointer, "%s", msg);
        free(pointer);
    }
}

/* Every point a trial of the sweep can be (sweep_check_point: each grid point; a random
 * search's base and each parameter's values and ends) through the gates a run passes
 * (runs.h), as `who`'s run: the first one refused names where it comes from in errs.
 * SUBMIT_OK, or how it was refused. */
static submit_result gate_points(const sweep_spec *s, const caller *who, schema_errors *errs) {
    int n = sweep_check_points(s);
    for (int i = 0; i < n; i++) {
        json_t *params = sweep_check_point(s, i), *cfg = point_config(s, params);
        submit_outcome out = {0};
        submit_result r = runs_check(cfg, who, &out);
        json_decref(cfg);
        if (r != SUBMIT_OK) blame_point(s, params, who, &out, errs);
        submit_outcome_free(&out);
        json_decref(params);
        if (r != SUBMIT_OK) return r;
    }
    return SUBMIT_OK;
}

/* The audit log's entry of `action` on sweep `id` by `who`, committed before it acts
 * (audit.h): its id, or -1. */
static int64_t audit_sweep(const caller *who, const char *action, int64_t id, const char *owner, json_t *detail) {
    char actor[80], target[40];
    snprintf(target, sizeof target, "sweep/%lld", (long long)id);
    return audit_write(audit_actor(who, actor, sizeof actor), action, 0, target, owner, detail);
}

sweep_result sweep_submit(const json_t *body, const caller *who, schema_errors *errs, int64_t *id, char *err,
                          size_t errlen) {
    sweep_spec *s = sweep_spec_parse(body, errs);
    if (!s) return SWEEP_INVALID;
    submit_result gated = gate_points(s, who, errs);
    if (gated == SUBMIT_INVALID) {
        sweep_spec_free(s);
        return SWEEP_INVALID;
    }
    if (gated != SUBMIT_OK) {
        snprintf(err, errlen, "%s may not submit this sweep's trials: %s: %s",
                 who->kind == CALLER_USER ? who->name : "this caller", errs->items[0].pointer, errs->items[0].message);
        sweep_spec_free(s);
        return SWEEP_FORBIDDEN;
    }
    char *spec = json_dumps(s->spec, JSON_FLAGS);
    int n_trials = s->n_trials;
    const char *owner = who->kind == CALLER_USER ? who->name : NULL;
    sweep_store_lock();
    *id = sweep_store_insert(s->name, owner, spec, s->n_trials, now_ms());
    if (*id > 0) sweep_store_decide(*id, -1, "submitted", NULL, now_ms());
    /* before the searcher can see it (and cancel it: its zygote then ends with it) */
    if (*id > 0) warm_prestart(*id, who, s);
    sweep_store_unlock();
    if (*id > 0) publish(*id, NULL, "submitted", s->name, "running");
    free(spec);
    sweep_spec_free(s);
    if (*id <= 0) {
        snprintf(err, errlen, "the sweep could not be stored (a database error; see the server's log)");
        return SWEEP_ERROR;
    }
    /* before its searcher submits a trial (wake) */
    audit_sweep(who, "sweep.submit", *id, who->kind == CALLER_USER ? who->name : NULL,
                json_pack("{s:i,s:s?}", "trials", n_trials, "name", json_string_value(json_object_get(body, "name"))));
    log_info("sweep %lld submitted", (long long)*id);
    wake();
    return SWEEP_OK;
}

static json_t *time_or_null(int64_t t) { return t > 0 ? json_time(t) : json_null(); }

static json_t *trial_json(const trial_row *t) {
    json_t *o = json_object();
    json_object_set_new(o, "trial", json_integer(t->trial));
    json_object_set_new(o, "run_id", t->run_id > 0 ? json_integer(t->run_id) : json_null());
    json_t *p = json_loads(t->params, 0, NULL);
    json_object_set_new(o, "params", p ? p : json_object());
    json_object_set_new(o, "status", json_string(t->state));
    json_object_set_new(o, "metric", json_real_or_null(t->metric));
    json_object_set_new(o, "metric_epoch", t->metric_epoch >= 0 ? json_integer(t->metric_epoch) : json_null());
    json_object_set_new(o, "rung", t->rung >= 0 ? json_integer(t->rung) : json_null());
    json_object_set_new(o, "reason", json_string_or_null(t->reason));
    return o;
}

static json_t *sweep_row_json(const sweep_row *sw, bool with_trials) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(sw->id));
    json_object_set_new(o, "name", json_string(sw->name));
    json_object_set_new(o, "owner", json_string_or_null(sw->owner));
    json_object_set_new(o, "status", json_string(sw->paused ? "paused" : sw->status));
    json_object_set_new(o, "reason", sw->paused ? json_sprintf("paused: POST /sweeps/%lld/resume carries it on",
                                                               (long long)sw->id)
                                                : json_string_or_null(sw->reason));
    json_object_set_new(o, "n_trials", json_integer(sw->n_trials));
    json_object_set_new(o, "created_at", time_or_null(sw->created_at));
    json_object_set_new(o, "finished_at", time_or_null(sw->finished_at));
    json_t *spec = json_loads(sw->spec, 0, NULL);
    json_object_set_new(o, "metric", json_incref(json_object_get(spec, "metric")));
    json_object_set_new(o, "warm_start", warm_json(sw, spec));
    trial_row *tr;
    int n = sweep_store_trials(sw->id, &tr);
    json_t *trials = json_array(), *best = json_null();
    int counts[8] = {0};
    static const char *const states[] = {"pending", "running", "paused", "succeeded", "failed", "canceled", "stopped"};
    for (int i = 0; i < n; i++) {
        json_t *tj = trial_json(&tr[i]);
        if (tr[i].trial == sw->best_trial) {
            json_decref(best);
            best = json_deep_copy(tj); /* its config is the best's alone */
        }
        json_array_append_new(trials, tj);
        for (int k = 0; k < 7; k++)
            if (!strcmp(tr[i].state, states[k])) counts[k]++;
    }
    json_t *c = json_object();
    for (int k = 0; k < 7; k++) json_object_set_new(c, states[k], json_integer(counts[k]));
    json_object_set_new(o, "trial_counts", c);
    json_t *best_run = json_object_get(best, "run_id");
    json_t *cfg = NULL;
    if (with_trials && json_is_integer(best_run) && store_get_config(json_integer_value(best_run), &cfg) == 1 && cfg) {
        /* the best trial's full run config, ready to submit again (ddpctl sweep rerun):
         * its own, as a run of it, without the pause ASHA set it */
        json_object_del(json_object_get(cfg, "train"), "stop_after_epochs");
        json_object_set_new(best, "config", cfg);
    }
    if (json_is_object(best)) { /* a canceled or failed sweep's best may have ended early: its last reported value */
        const char *st = json_string_value(json_object_get(best, "status"));
        bool ended_early = st && (!strcmp(st, "canceled") || !strcmp(st, "failed") || !strcmp(st, "stopped"));
        json_object_set_new(best, "last_reported", json_boolean(ended_early));
    }
    json_object_set_new(o, "best", best);
    if (with_trials) {
        json_object_set_new(o, "trials", trials);
        json_object_set_new(o, "spec", spec);
    } else {
        json_decref(trials);
        json_decref(spec);
    }
    if (n > 0) trial_rows_free(tr, n);
    return o;
}

json_t *sweep_json(int64_t id) {
    sweep_row sw;
    sweep_store_lock();
    int found = sweep_store_get(id, &sw);
    json_t *o = found == 1 ? sweep_row_json(&sw, true) : NULL;
    if (found == 1) sweep_row_free(&sw);
    sweep_store_unlock();
    return o;
}

json_t *sweep_list_json(void) {
    sweep_row *sw;
    sweep_store_lock();
    int n = sweep_store_list(&sw, false);
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_array_append_new(a, sweep_row_json(&sw[i], false));
        sweep_row_free(&sw[i]);
    }
    if (n > 0) free(sw);
    sweep_store_unlock();
    return json_pack("{s:o}", "sweeps", a);
}

sweep_result sweep_cancel(int64_t id, const caller *who, char *why, size_t whylen) {
    sweep_row sw;
    sweep_store_lock();
    int found = sweep_store_get(id, &sw);
    sweep_result res = SWEEP_OK;
    if (found != 1) {
        sweep_store_unlock();
        return found == 0 ? SWEEP_NOT_FOUND : SWEEP_ERROR;
    }
    if (!who->admin && !(who->kind == CALLER_USER && sw.owner && strcmp(sw.owner, who->name) == 0)) {
        snprintf(why, whylen, "sweep %lld is %s: only %s or an admin may cancel it", (long long)id,
                 sw.owner ? sw.owner : "nobody's in particular (submitted with the server's token)",
                 sw.owner ? sw.owner : "the server's token");
        res = SWEEP_FORBIDDEN;
    } else if (strcmp(sw.status, "running") != 0) {
        snprintf(why, whylen, "sweep %lld has already finished (%s): there is nothing to cancel", (long long)id, sw.status);
        res = SWEEP_FINISHED;
    } else if (audit_sweep(who, "sweep.cancel", id, sw.owner, NULL) < 0) {
        snprintf(why, whylen, "sweep %lld was left as it was: its audit entry could not be written", (long long)id);
        res = SWEEP_ERROR;
    } else {
        sweep_store_begin();
        sweep_store_finish(id, "canceled", "canceled by request", now_ms());
        sweep_store_decide(id, -1, "canceled", NULL, now_ms());
        sweep_store_commit();
        publish(id, NULL, "canceled", "canceled by request", "canceled");
        zygotes_sweep_ended(id);
        trial_row *tr;
        int n = sweep_store_trials(id, &tr);
        sweep_spec *s = sweep_spec_load(sw.spec);
        for (int i = 0; i < n; i++) {
            trial_row *t = &tr[i];
            bool running = !strcmp(t->state, "running");
            if (!running && strcmp(t->state, "pending") != 0 && strcmp(t->state, "paused") != 0) continue;
            if (s) refresh_metric(s, t); /* the last it reported, for the best below */
            snprintf(t->state, sizeof t->state, "canceled");
            set_reason(t, xasprintf("sweep %lld was canceled", (long long)id));
            decide(&sw, t, "canceled", NULL);
            if (running && t->run_id > 0) scheduler_cancel(t->run_id, t->reason);
        }
        if (s) { /* its best: among every trial's last reported metric, a trial canceled mid-way too */
            sweep_trial_view *views = views_of(tr, n);
            int best = sweep_rules_best_last(&s->rules, views, n);
            free(views);
            if (best != sw.best_trial) sweep_store_set_best(id, best);
            sweep_spec_free(s);
        }
        if (n > 0) trial_rows_free(tr, n);
        log_info("sweep %lld canceled", (long long)id);
    }
    sweep_row_free(&sw);
    sweep_store_unlock();
    return res;
}

/* ---- a sweep changed while it runs: pause, resume, more trials, a trial by hand ---- */

/* Sweep `id` read for a change by `who` (its owner or an admin), under the store's
 * lock (held on SWEEP_OK; released otherwise, why said). */
static sweep_result changeable(int64_t id, const caller *who, const char *verb, sweep_row *sw, char *why, size_t whylen) {
    sweep_store_lock();
    int found = sweep_store_get(id, sw);
    if (found != 1) {
        sweep_store_unlock();
        if (found == 0) snprintf(why, whylen, "there is no sweep %lld (GET /sweeps lists them)", (long long)id);
        return found == 0 ? SWEEP_NOT_FOUND : SWEEP_ERROR;
    }
    if (!who->admin && !(who->kind == CALLER_USER && sw->owner && strcmp(sw->owner, who->name) == 0)) {
        snprintf(why, whylen, "sweep %lld is %s: only %s or an admin may %s it", (long long)id,
                 sw->owner ? sw->owner : "nobody's in particular (submitted with the server's token)",
                 sw->owner ? sw->owner : "the server's token", verb);
        sweep_row_free(sw);
        sweep_store_unlock();
        return SWEEP_FORBIDDEN;
    }
    return SWEEP_OK;
}

static sweep_result changed(sweep_row *sw, sweep_result r) {
    sweep_row_free(sw);
    sweep_store_unlock();
    if (r == SWEEP_OK) wake();
    return r;
}

sweep_result sweep_pause(int64_t id, const caller *who, char *why, size_t whylen) {
    sweep_row sw;
    sweep_result r = changeable(id, who, "pause", &sw, why, whylen);
    if (r != SWEEP_OK) return r;
    if (strcmp(sw.status, "running") != 0) {
        snprintf(why, whylen, "sweep %lld has finished (%s): there is nothing to pause", (long long)id, sw.status);
        return changed(&sw, SWEEP_FINISHED);
    }
    if (sw.paused) {
        snprintf(why, whylen, "sweep %lld is already paused: POST /sweeps/%lld/resume carries it on", (long long)id,
                 (long long)id);
        return changed(&sw, SWEEP_CONFLICT);
    }
    if (audit_sweep(who, "sweep.pause", id, sw.owner, NULL) < 0) {
        snprintf(why, whylen, "sweep %lld was left as it was: its audit entry could not be written", (long long)id);
        return changed(&sw, SWEEP_ERROR);
    }
    sweep_store_decide(id, -1, "paused", NULL, now_ms());
    publish(id, NULL, "paused", NULL, "paused");
    trial_row *tr;
    int n = sweep_store_trials(id, &tr);
    sweep_spec *s = sweep_spec_load(sw.spec);
    pause_trials(id, s && s->command, tr, n);
    sweep_spec_free(s);
    if (n > 0) trial_rows_free(tr, n);
    log_info("sweep %lld paused", (long long)id);
    return changed(&sw, SWEEP_OK);
}

sweep_result sweep_resume(int64_t id, const caller *who, char *why, size_t whylen) {
    sweep_row sw;
    sweep_result r = changeable(id, who, "resume", &sw, why, whylen);
    if (r != SWEEP_OK) return r;
    if (!sw.paused) {
        snprintf(why, whylen, "sweep %lld is not paused (it is %s)", (long long)id, sw.status);
        return changed(&sw, SWEEP_CONFLICT);
    }
    if (audit_sweep(who, "sweep.resume", id, sw.owner, NULL) < 0) {
        snprintf(why, whylen, "sweep %lld was left as it was: its audit entry could not be written", (long long)id);
        return changed(&sw, SWEEP_ERROR);
    }
    sweep_store_decide(id, -1, "resumed", NULL, now_ms());
    publish(id, NULL, "resumed", NULL, "running");
    log_info("sweep %lld resumed", (long long)id);
    return changed(&sw, SWEEP_OK);
}

sweep_result sweep_extend(int64_t id, int max_trials, const caller *who, char *why, size_t whylen) {
    sweep_row sw;
    sweep_result r = changeable(id, who, "extend", &sw, why, whylen);
    if (r != SWEEP_OK) return r;
    if (!strcmp(sw.status, "canceled")) {
        snprintf(why, whylen, "sweep %lld was canceled: it makes no more trials (submit it again)", (long long)id);
        return changed(&sw, SWEEP_FINISHED);
    }
    sweep_spec *s = sweep_spec_load(sw.spec);
    json_t *spec = json_loads(sw.spec, 0, NULL);
    if (!s || !spec) {
        snprintf(why, whylen, "sweep %lld's stored spec no longer parses", (long long)id);
        sweep_spec_free(s);
        json_decref(spec);
        return changed(&sw, SWEEP_ERROR);
    }
    int was = (int)json_integer_value(json_object_get(spec, "max_trials"));
    long len = sweep_sequence_length(s);
    long cap_was = len >= 0 && len < was ? len : was, cap_now = len >= 0 && len < max_trials ? len : max_trials;
    int added = (int)(cap_now - cap_was);
    if (max_trials <= was) {
        snprintf(why, whylen, "max_trials is %d already: give more to make more trials", was);
        r = SWEEP_CONFLICT;
    } else if (max_trials > SWEEP_MAX_TRIALS || sw.n_trials + added > SWEEP_MAX_TRIALS) {
        snprintf(why, whylen, "a sweep makes at most %d trials", SWEEP_MAX_TRIALS);
        r = SWEEP_INVALID;
    } else if (added <= 0) {
        snprintf(why, whylen, "the grid's %ld points are all made or to be made: a grid makes each once (enqueue "
                 "another configuration with POST /sweeps/%lld/trials, or submit a random or tpe sweep)", len,
                 (long long)id);
        r = SWEEP_CONFLICT;
    } else if (audit_sweep(who, "sweep.extend", id, sw.owner, json_pack("{s:i,s:i}", "max_trials", max_trials,
                                                                          "was", was)) < 0) {
        snprintf(why, whylen, "sweep %lld was left as it was: its audit entry could not be written", (long long)id);
        r = SWEEP_ERROR;
    } else {
        json_object_set_new(spec, "max_trials", json_integer(max_trials));
        char *text = json_dumps(spec, JSON_FLAGS), *d = xasprintf("max_trials %d, was %d: %d more trials", max_trials,
                                                                  was, added);
        bool reopen = strcmp(sw.status, "running") != 0;
        sweep_store_begin();
        sweep_store_grow(id, sw.n_trials + added, text, reopen);
        sweep_store_decide(id, -1, "extended", d, now_ms());
        sweep_store_commit();
        publish(id, NULL, "extended", d, "running");
        log_info("sweep %lld extended: %s", (long long)id, d);
        free(text);
        free(d);
    }
    sweep_spec_free(s);
    json_decref(spec);
    return changed(&sw, r);
}

sweep_result sweep_enqueue(int64_t id, const json_t *given, const caller *who, schema_errors *errs, int *trial,
                           char *why, size_t whylen) {
    sweep_row sw;
    sweep_result r = changeable(id, who, "add a trial to", &sw, why, whylen);
    if (r != SWEEP_OK) return r;
    if (!strcmp(sw.status, "canceled")) {
        snprintf(why, whylen, "sweep %lld was canceled: it makes no more trials (submit it again)", (long long)id);
        return changed(&sw, SWEEP_FINISHED);
    }
    sweep_spec *s = sweep_spec_load(sw.spec);
    if (!s) {
        snprintf(why, whylen, "sweep %lld's stored spec no longer parses", (long long)id);
        return changed(&sw, SWEEP_ERROR);
    }
    json_t *params = sweep_params_given(s, given, errs);
    trial_row *tr = NULL;
    int n = params ? sweep_store_trials(id, &tr) : 0;
    caller owner;
    if (!params) {
        r = SWEEP_INVALID;
    } else if (n < 0) {
        r = SWEEP_ERROR;
        snprintf(why, whylen, "the sweep's trials could not be read; see the server's log");
    } else if (sw.n_trials >= SWEEP_MAX_TRIALS) {
        snprintf(why, whylen, "sweep %lld makes %d trials already, the most a sweep may make", (long long)id, sw.n_trials);
        r = SWEEP_CONFLICT;
    } else if (!users_caller(sw.owner, &owner)) {
        snprintf(why, whylen, "the sweep's owner %s is no longer a user of this server", sw.owner);
        r = SWEEP_FORBIDDEN;
    } else {
        int i = params_trial(params, tr, n);
        if (i >= 0) {
            snprintf(why, whylen, "trial %d of sweep %lld has these parameters already (%s): a sweep makes a "
                     "configuration once", tr[i].trial, (long long)id, tr[i].state);
            r = SWEEP_CONFLICT;
        }
        if (r == SWEEP_OK) { /* the gates of POST /runs, as the owner's run (the trial is the owner's) */
            const caller *as = &owner;
            json_t *cfg = point_config(s, params);
            submit_outcome out = {0};
            submit_result g = runs_check(cfg, as, &out);
            json_decref(cfg);
            if (g != SUBMIT_OK) {
                blame_point(s, params, as, &out, errs);
                if (!errs->count) schema_errors_add(errs, "/params", "%s", out.why);
                r = g == SUBMIT_INVALID ? SWEEP_INVALID : SWEEP_FORBIDDEN;
                snprintf(why, whylen, "its trial would be refused: %s: %s", errs->items[0].pointer, errs->items[0].message);
            }
            submit_outcome_free(&out);
        }
    }
    if (r == SWEEP_OK && audit_sweep(who, "sweep.enqueue", id, sw.owner, json_incref(params)) < 0) {
        snprintf(why, whylen, "sweep %lld was left as it was: its audit entry could not be written", (long long)id);
        r = SWEEP_ERROR;
    }
    if (r == SWEEP_OK) {
        trial_row t = {.trial = n, .params = json_dumps(params, JSON_FLAGS), .rung = -1, .promoted = -1,
                       .metric = NAN, .metric_epoch = -1};
        snprintf(t.state, sizeof t.state, "pending");
        char *shown = params_shown(params);
        int64_t now = now_ms();
        sweep_store_begin();
        sweep_store_grow(id, sw.n_trials + 1, sw.spec, strcmp(sw.status, "running") != 0);
        sweep_store_trial_put(id, &t, now);
        sweep_store_decide(id, t.trial, "enqueued", shown, now);
        sweep_store_commit();
        publish(id, &t, "enqueued", shown, NULL);
        log_info("sweep %lld trial %d enqueued by hand: %s", (long long)id, t.trial, shown);
        *trial = t.trial;
        free(shown);
        free(t.params);
    }
    if (tr) trial_rows_free(tr, n);
    json_decref(params);
    sweep_spec_free(s);
    return changed(&sw, r);
}

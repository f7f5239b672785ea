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
#include "log_limit.h"
#include "run_dir.h"
#include "run_files.h"
#include "run_resume.h"
#include "run_status.h"
#include "runs.h"
#include "scheduler.h"
#include "state_layout.h"
#include "store.h"
#include "sweep_rules.h"
#include "sweep_spec.h"
#include "sweep_store.h"
#include "thread_start.h"
#include "users.h"

static struct {
    pthread_t thread;
    bool running, stopping;
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

/* Stops a trial's run, ending it `stopped` with `reason` (again, harmlessly, when it
 * was asked before a restart). */
static void stop_run(const trial_row *t, const char *reason) {
    if (t->run_id > 0) scheduler_stop(t->run_id, reason);
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
    if (n > r) stop_run(t, t->reason);
}

/* A command trial under ASHA: judged at each rung it reached since the last look, as
 * they come. True when it was stopped. */
static bool asha_command(const sweep_row *sw, const sweep_spec *s, trial_row *t, const double *v, int n) {
    int r;
    for (int k = t->rung + 1; sweep_rules_rung_reached(&s->rules, k, v, n, &r); k++) {
        sweep_store_rung_put(sw->id, k, t->trial, v[r - 1], now_ms());
        t->rung = k;
        int nm;
        sweep_mark *at = marks_at(sw, k, &nm);
        sweep_asha_verdict verdict = sweep_asha_command_judge(&s->rules, v[r - 1], at, nm);
        free(at);
        if (verdict.stop) {
            snprintf(t->state, sizeof t->state, "stopped");
            set_reason(t, xasprintf("stopped by sweep %lld's ASHA at rung %d (epoch %d): %s %.6g is not in the top "
                                    "1/%d of the %d trials there", (long long)sw->id, k, r, metric_words(s), v[r - 1],
                                    s->rules.reduction_factor, verdict.n));
            decide(sw, t, "stopped", t->reason);
            stop_run(t, t->reason);
            return true;
        }
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
    stop_run(t, t->reason);
    return true;
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
    if (s->stop == STOP_ASHA && !s->command) {
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
    if (strcmp(t->state, "pending") == 0) {
        submit_trial(sw, s, t);
        return;
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
    } else {
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
static void promote(const sweep_row *sw, const sweep_spec *s, trial_row *tr, int n) {
    bool all_made = n == s->n_trials;
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
                char *d = xasprintf("rung %d: %s %.6g ranks %d of %d; it goes on from its checkpoint", k,
                                    metric_words(s), p->metric, p->rank, ranked);
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

/* One look at a running sweep. */
static void sweep_pass(const sweep_row *sw) {
    const sweep_spec *s = spec_of(sw);
    if (!s) {
        sweep_store_finish(sw->id, "failed", "its stored spec no longer parses", now_ms());
        return;
    }
    trial_row *tr;
    int n = sweep_store_trials(sw->id, &tr);
    if (n < 0) return;
    for (int i = 0; i < n; i++) follow_trial(sw, s, &tr[i]);
    if (s->stop == STOP_ASHA && !s->command) promote(sw, s, tr, n);
    sweep_trial_view *views = views_of(tr, n);
    int active = sweep_rules_active(views, n);
    free(views);
    char unwritable[512];
    if (active < s->parallel && n < s->n_trials && store_unwritable(unwritable, sizeof unwritable)) {
        /* no trial is made (nor its decision written, nor said) until it can be stored */
        static log_limit waiting = LOG_LIMIT_INIT;
        uint64_t skipped;
        if (log_limit_now(&waiting, 10000, &skipped))
            log_warn("sweep %lld: its next trial waits until the database can be written (%llu such passes not "
                     "logged since the last line): %s", (long long)sw->id, (unsigned long long)skipped, unwritable);
        active = s->parallel;
    }
    while (active < s->parallel && n < s->n_trials) {
        tr = xrealloc(tr, (size_t)(n + 1) * sizeof *tr);
        trial_row *t = &tr[n];
        json_t *p = sweep_trial_params(s, n);
        *t = (trial_row){.trial = n, .params = json_dumps(p, JSON_FLAGS), .rung = -1, .promoted = -1,
                         .metric = NAN, .metric_epoch = -1};
        snprintf(t->state, sizeof t->state, "pending");
        char *shown = params_shown(p);
        decide(sw, t, "made", shown);
        free(shown);
        json_decref(p);
        n++;
        submit_trial(sw, s, t);
        active++;
    }
    views = views_of(tr, n);
    int best = sweep_rules_best(&s->rules, views, n);
    sweep_end end = sweep_rules_end(n == s->n_trials, views, n);
    free(views);
    if (best != sw->best_trial) sweep_store_set_best(sw->id, best);
    if (end != SWEEP_GOES_ON) {
        bool succeeded = end == SWEEP_ENDS_SUCCEEDED;
        sweep_store_begin();
        sweep_store_finish(sw->id, succeeded ? "succeeded" : "failed", succeeded ? NULL : "no trial succeeded", now_ms());
        sweep_store_decide(sw->id, -1, succeeded ? "succeeded" : "failed", NULL, now_ms());
        sweep_store_commit();
        publish(sw->id, NULL, succeeded ? "succeeded" : "failed", succeeded ? NULL : "no trial succeeded",
                succeeded ? "succeeded" : "failed");
        log_info("sweep %lld %s: best trial %d", (long long)sw->id, succeeded ? "succeeded" : "failed", best);
    }
    trial_rows_free(tr, n);
}

static void *searcher(void *arg) {
    (void)arg;
    pthread_mutex_lock(&W.mu);
    while (!W.stopping) {
        pthread_mutex_unlock(&W.mu);
        sweep_store_lock();
        sweep_row *sw;
        int n = sweep_store_list(&sw, true);
        for (int i = 0; i < n; i++) {
            sweep_pass(&sw[i]);
            sweep_row_free(&sw[i]);
        }
        if (n > 0) free(sw);
        sweep_store_unlock();
        pthread_mutex_lock(&W.mu);
        if (!W.stopping) {
            struct timespec until = realtime_in_ms(250);
            pthread_cond_timedwait(&W.cv, &W.mu, &until);
        }
    }
    pthread_mutex_unlock(&W.mu);
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
    sweep_store_lock();
    *id = sweep_store_insert(s->name, who->kind == CALLER_USER ? who->name : NULL, spec, s->n_trials, now_ms());
    if (*id > 0) sweep_store_decide(*id, -1, "submitted", NULL, now_ms());
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
    json_object_set_new(o, "status", json_string(sw->status));
    json_object_set_new(o, "reason", json_string_or_null(sw->reason));
    json_object_set_new(o, "n_trials", json_integer(sw->n_trials));
    json_object_set_new(o, "created_at", time_or_null(sw->created_at));
    json_object_set_new(o, "finished_at", time_or_null(sw->finished_at));
    json_t *spec = json_loads(sw->spec, 0, NULL);
    json_object_set_new(o, "metric", json_incref(json_object_get(spec, "metric")));
    trial_row *tr;
    int n = sweep_store_trials(sw->id, &tr);
    json_t *trials = json_array(), *best = json_null();
    int counts[8] = {0};
    static const char *const states[] = {"pending", "running", "paused", "succeeded", "failed", "canceled", "stopped"};
    for (int i = 0; i < n; i++) {
        json_t *tj = trial_json(&tr[i]);
        if (tr[i].trial == sw->best_trial) {
            json_decref(best);
            best = json_incref(tj);
        }
        json_array_append_new(trials, tj);
        for (int k = 0; k < 7; k++)
            if (!strcmp(tr[i].state, states[k])) counts[k]++;
    }
    json_t *c = json_object();
    for (int k = 0; k < 7; k++) json_object_set_new(c, states[k], json_integer(counts[k]));
    json_object_set_new(o, "trial_counts", c);
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
        trial_row *tr;
        int n = sweep_store_trials(id, &tr);
        for (int i = 0; i < n; i++) {
            trial_row *t = &tr[i];
            bool running = !strcmp(t->state, "running");
            if (!running && strcmp(t->state, "pending") != 0 && strcmp(t->state, "paused") != 0) continue;
            snprintf(t->state, sizeof t->state, "canceled");
            set_reason(t, xasprintf("sweep %lld was canceled", (long long)id));
            decide(&sw, t, "canceled", NULL);
            if (running && t->run_id > 0) scheduler_cancel(t->run_id, t->reason);
        }
        if (n > 0) trial_rows_free(tr, n);
        log_info("sweep %lld canceled", (long long)id);
    }
    sweep_row_free(&sw);
    sweep_store_unlock();
    return res;
}

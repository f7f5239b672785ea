/* The sweeps' searcher and what the API asks of it: see sweep.h. */
#include "sweep.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "run_resume.h"
#include "run_status.h"
#include "runs.h"
#include "scheduler.h"
#include "state_layout.h"
#include "store.h"
#include "sweep_spec.h"
#include "sweep_store.h"
#include "thread_start.h"

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

static caller owner_caller(const sweep_row *sw) {
    caller who = {.kind = sw->owner ? CALLER_USER : CALLER_ADMIN_TOKEN, .admin = !sw->owner, .max_devices = -1,
                  .max_memory_bytes = -1, .max_disk_bytes = -1};
    if (sw->owner) snprintf(who.name, sizeof who.name, "%s", sw->owner);
    return who;
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
        json_object_set_new(train, "stop_after_epochs", json_integer(sweep_rung_epochs(s, 0)));
    }
    json_decref(params);
    caller who = owner_caller(sw);
    schema_errors errs = {0};
    char err[1024] = "";
    run = runs_submit_trial(cfg, &who, sw->id, t->trial, &errs, err, sizeof err);
    json_decref(cfg);
    if (run > 0) {
        t->run_id = run;
        snprintf(t->state, sizeof t->state, "running");
        decide(sw, t, "started", NULL);
    } else if (run < 0) { /* the server's fault (the database cannot be written): made again next pass */
        log_warn("sweep %lld trial %d: its run could not be stored, tried again: %s", (long long)sw->id, t->trial, err);
    } else {
        snprintf(t->state, sizeof t->state, "failed");
        set_reason(t, run == 0 && errs.count ? xasprintf("its run config was refused: %s %s", errs.items[0].pointer,
                                                         errs.items[0].message)
                                             : xstrdup(err));
        decide(sw, t, "failed", t->reason);
    }
    schema_errors_free(&errs);
}

/* Stops a trial's run, ending it `stopped` with `reason` (again, harmlessly, when it
 * was asked before a restart). */
static void stop_run(const trial_row *t, const char *reason) {
    if (t->run_id > 0) scheduler_stop(t->run_id, reason);
}

/* A paused built-in trial's next stop: the rung after the one it was promoted from (0:
 * none, it trains to the end), in the config its trainer reads again at the resume. */
static int set_next_pause(const sweep_spec *s, const trial_row *t, char *why, size_t whylen) {
    char *path = layout_run_path(t->run_id, RUN_FILE_CONFIG), *tmp = xasprintf("%s.tmp", path);
    json_error_t je;
    json_t *cfg = json_load_file(path, 0, &je);
    int rc = -1;
    if (!cfg) {
        snprintf(why, whylen, "its config %s cannot be read: %s", path, je.text);
    } else {
        json_t *train = json_object_get(cfg, "train");
        if (!json_is_object(train)) json_object_set_new(cfg, "train", train = json_object());
        json_object_set_new(train, "stop_after_epochs", json_integer(sweep_rung_epochs(s, t->promoted + 1)));
        rc = json_dump_file(cfg, tmp, JSON_INDENT(2)) == 0 && rename(tmp, path) == 0 ? 0 : -1;
        if (rc) snprintf(why, whylen, "its config %s cannot be written", path);
    }
    json_decref(cfg);
    free(tmp);
    free(path);
    return rc;
}

static void resume_trial(const sweep_row *sw, const sweep_spec *s, trial_row *t) {
    char why[2048] = "";
    if (s->stop == STOP_ASHA && !s->command && set_next_pause(s, t, why, sizeof why) != 0) {
        snprintf(t->state, sizeof t->state, "failed");
        set_reason(t, xasprintf("it could not be continued: %s", why));
        decide(sw, t, "failed", t->reason);
        return;
    }
    resume_result r = runs_resume(t->run_id, why, sizeof why);
    if (r == RESUME_QUEUED || r == RESUME_STORE_ERROR) return; /* a store error: asked again next pass */
    snprintf(t->state, sizeof t->state, "failed");
    set_reason(t, xasprintf("it could not be continued: %s", why));
    decide(sw, t, "failed", t->reason);
}

/* ---- the searcher's rules ---- */

/* How many of the n metrics are strictly better than v. */
static int rank_of(const sweep_spec *s, const double *m, int n, double v) {
    int better = 0;
    for (int i = 0; i < n; i++)
        if (sweep_better(s, m[i], v)) better++;
    return better;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median stopping at epoch e: stops the trial when its value v is worse than the
 * median of the other trials' at e. */
static bool median_stops(const sweep_row *sw, const sweep_spec *s, trial_row *t, int e, double v) {
    if (e + 1 < s->min_resource || (!s->command && e + 1 >= s->epochs)) return false;
    int *trials;
    double *m;
    int n = sweep_store_rung(sw->id, e, &trials, &m), k = 0;
    for (int i = 0; i < n; i++)
        if (trials[i] != t->trial) m[k++] = m[i];
    bool stop = false;
    if (k >= s->min_trials) {
        qsort(m, (size_t)k, sizeof *m, cmp_double);
        double median = k % 2 ? m[k / 2] : (m[k / 2 - 1] + m[k / 2]) / 2;
        if (sweep_better(s, median, v)) {
            stop = true;
            snprintf(t->state, sizeof t->state, "stopped");
            t->rung = e;
            set_reason(t, xasprintf("stopped by sweep %lld's median rule at epoch %d: %s %.6g is worse than the "
                                    "median %.6g of %d other trials there", (long long)sw->id, e, metric_words(s), v,
                                    median, k));
        }
    }
    free(trials);
    free(m);
    return stop;
}

/* ASHA on a command trial at rung k (v: its metric there): stopped unless it ranks
 * in the top 1/reduction_factor of the trials recorded at the rung so far. */
static bool asha_command_stops(const sweep_row *sw, const sweep_spec *s, trial_row *t, int k, int epochs, double v) {
    int *trials;
    double *m;
    int n = sweep_store_rung(sw->id, k, &trials, &m);
    int keep = n / s->reduction_factor > 1 ? n / s->reduction_factor : 1;
    bool stop = rank_of(s, m, n, v) >= keep;
    free(trials);
    free(m);
    if (stop) {
        snprintf(t->state, sizeof t->state, "stopped");
        set_reason(t, xasprintf("stopped by sweep %lld's ASHA at rung %d (epoch %d): %s %.6g is not in the top 1/%d of "
                                "the %d trials there", (long long)sw->id, k, epochs, metric_words(s),
                                v, s->reduction_factor, n));
    }
    return stop;
}

/* A running trial's new epochs: its metric, the rungs it reached, what the rules say. */
static void judge_running(const sweep_row *sw, const sweep_spec *s, trial_row *t) {
    double *v;
    int n = sweep_store_run_metric(t->run_id, s->metric, &v);
    if (n <= 0) {
        free(v);
        return;
    }
    int latest = n - 1;
    while (latest >= 0 && isnan(v[latest])) latest--;
    if (latest < 0) {
        free(v);
        return;
    }
    int seen = t->metric_epoch; /* the newest epoch looked at before */
    bool changed = latest != t->metric_epoch || v[latest] != t->metric;
    t->metric = v[latest];
    t->metric_epoch = latest;
    int64_t now = now_ms();
    if (s->stop == STOP_ASHA && !s->command) {
        int k = t->promoted + 1, r = sweep_rung_epochs(s, k);
        if (r > 0 && n >= r && !isnan(v[r - 1])) {
            sweep_store_rung_put(sw->id, k, t->trial, v[r - 1], now);
            t->rung = k;
            snprintf(t->state, sizeof t->state, "paused");
            set_reason(t, xasprintf("stopped by sweep %lld's ASHA at rung %d (epoch %d, %s %.6g): it goes on from its "
                                    "checkpoint if it ranks in the top 1/%d of its rung", (long long)sw->id, k, r,
                                    metric_words(s), v[r - 1], s->reduction_factor));
            decide(sw, t, "paused", t->reason);
            /* It stops itself there, after its checkpoint (train.stop_after_epochs): a
             * stop now could cut that checkpoint short. Only one that went past it is
             * stopped; its run's reason gets the rung once it has ended. */
            if (n > r) stop_run(t, t->reason);
            free(v);
            return;
        }
    } else if (s->stop == STOP_ASHA) {
        for (int k = t->rung + 1; k < 32; k++) { /* rungs without end: a command run's length is its own */
            long r = s->min_resource;
            for (int j = 0; j < k; j++) r *= s->reduction_factor;
            if (r > n || isnan(v[r - 1])) break;
            sweep_store_rung_put(sw->id, k, t->trial, v[r - 1], now);
            t->rung = k;
            if (asha_command_stops(sw, s, t, k, (int)r, v[r - 1])) {
                decide(sw, t, "stopped", t->reason);
                stop_run(t, t->reason);
                free(v);
                return;
            }
            changed = true;
        }
    } else if (s->stop == STOP_MEDIAN) {
        for (int e = seen + 1; e < n; e++) /* each epoch once (a restart's again is ignored) */
            if (!isnan(v[e])) sweep_store_rung_put(sw->id, e, t->trial, v[e], now);
        if (median_stops(sw, s, t, latest, v[latest])) {
            decide(sw, t, "stopped", t->reason);
            stop_run(t, t->reason);
            free(v);
            return;
        }
    }
    if (changed) sweep_store_trial_put(sw->id, t, now);
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

typedef struct {
    int trial;
    double metric;
    const sweep_spec *s;
} ranked;

static const sweep_spec *SORT_SPEC;
static int by_metric(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (sweep_better(SORT_SPEC, x->metric, y->metric)) return -1;
    if (sweep_better(SORT_SPEC, y->metric, x->metric)) return 1;
    return x->trial - y->trial;
}

/* ASHA's promotions, rung by rung: the top 1/eta of those that reached a rung go on
 * from their checkpoints; once no more trials can reach it (every trial made, none
 * still on its way there), the rest end stopped, and at least its best goes on. */
static void promote(const sweep_row *sw, const sweep_spec *s, trial_row *tr, int n) {
    bool lower_closed = n == s->n_trials;
    for (int k = 0; sweep_rung_epochs(s, k) > 0; k++) {
        int *trials;
        double *m;
        int nk = sweep_store_rung(sw->id, k, &trials, &m);
        bool closed = lower_closed;
        for (int i = 0; i < n && closed; i++) {
            const trial_row *t = &tr[i];
            if (strcmp(t->state, "pending") == 0 || (strcmp(t->state, "running") == 0 && t->promoted < k) ||
                (strcmp(t->state, "paused") == 0 && t->rung < k))
                closed = false;
        }
        ranked *r = xmalloc((size_t)(nk ? nk : 1) * sizeof *r);
        for (int i = 0; i < nk; i++) r[i] = (ranked){.trial = trials[i], .metric = m[i]};
        SORT_SPEC = s;
        qsort(r, (size_t)nk, sizeof *r, by_metric);
        int keep = nk / s->reduction_factor;
        if (closed && keep < 1 && nk > 0) keep = 1;
        for (int i = 0; i < nk; i++) {
            trial_row *t = find_trial(tr, n, r[i].trial);
            if (!t || strcmp(t->state, "paused") != 0 || t->rung != k) continue;
            char status[16] = "";
            if (sweep_store_run_state(t->run_id, status, NULL) != 1 || strcmp(status, "stopped") != 0)
                continue; /* its pause has not landed yet (or it finished first): next pass */
            if (i < keep) {
                t->promoted = k;
                snprintf(t->state, sizeof t->state, "running");
                char *d = xasprintf("rung %d: %s %.6g ranks %d of %d; it goes on from its checkpoint", k,
                                    metric_words(s), r[i].metric, i + 1, nk);
                set_reason(t, NULL);
                decide(sw, t, "promoted", d);
                free(d);
                resume_trial(sw, s, t);
            } else if (closed) {
                snprintf(t->state, sizeof t->state, "stopped");
                char *d = xasprintf("stopped by sweep %lld's ASHA at rung %d (epoch %d): %s %.6g ranks %d of %d, "
                                    "not in the top %d", (long long)sw->id, k, sweep_rung_epochs(s, k),
                                    metric_words(s), r[i].metric, i + 1, nk, keep);
                set_reason(t, d);
                decide(sw, t, "stopped", d);
                runs_set_stopped_reason(t->run_id, d);
            }
        }
        free(r);
        free(trials);
        free(m);
        lower_closed = closed;
    }
}

static bool is_active(const trial_row *t) { return !strcmp(t->state, "pending") || !strcmp(t->state, "running"); }

/* The best trial: among those that succeeded, else among all with a metric. */
static int best_of(const sweep_spec *s, const trial_row *tr, int n) {
    int best = -1;
    for (int pass = 0; pass < 2 && best < 0; pass++)
        for (int i = 0; i < n; i++) {
            if (isnan(tr[i].metric) || (pass == 0 && strcmp(tr[i].state, "succeeded") != 0)) continue;
            if (best < 0 || sweep_better(s, tr[i].metric, tr[best].metric)) best = i;
        }
    return best < 0 ? -1 : tr[best].trial;
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
    int active = 0;
    for (int i = 0; i < n; i++) active += is_active(&tr[i]);
    while (active < s->parallel && n < s->n_trials) {
        tr = xrealloc(tr, (size_t)(n + 1) * sizeof *tr);
        trial_row *t = &tr[n];
        json_t *p = sweep_trial_params(s, n);
        *t = (trial_row){.trial = n, .params = json_dumps(p, JSON_FLAGS), .rung = -1, .promoted = -1,
                         .metric = NAN, .metric_epoch = -1};
        json_decref(p);
        snprintf(t->state, sizeof t->state, "pending");
        decide(sw, t, "made", t->params);
        n++;
        submit_trial(sw, s, t);
        active++;
    }
    int best = best_of(s, tr, n);
    if (best != sw->best_trial) sweep_store_set_best(sw->id, best);
    bool done = n == s->n_trials;
    int succeeded = 0;
    for (int i = 0; i < n; i++) {
        if (is_active(&tr[i]) || !strcmp(tr[i].state, "paused")) done = false;
        succeeded += !strcmp(tr[i].state, "succeeded");
    }
    if (done) {
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

sweep_result sweep_submit(const json_t *body, const caller *who, schema_errors *errs, int64_t *id, char *err,
                          size_t errlen) {
    sweep_spec *s = sweep_spec_parse(body, errs);
    if (!s) return SWEEP_INVALID;
    const char *forbidden = runs_forbidden(s->base);
    schema_errors perm = {0};
    if (forbidden) {
        snprintf(err, errlen, "%s", forbidden);
    } else if (!runs_permitted(s->base, who, &perm)) {
        snprintf(err, errlen, "%s may not submit this sweep's trials: /base%s: %s",
                 who->kind == CALLER_USER ? who->name : "this caller", perm.items[0].pointer, perm.items[0].message);
    }
    schema_errors_free(&perm);
    if (*err) {
        sweep_spec_free(s);
        return SWEEP_FORBIDDEN;
    }
    char *spec = json_dumps(s->spec, JSON_FLAGS);
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

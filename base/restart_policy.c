/* distributed.restart_policy: see restart_policy.h. */
#include "restart_policy.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_BACKOFF_MAX_S 60.0
#define DEFAULT_LOOP_FAILURES 3
#define DEFAULT_LOOP_WINDOW_S 600.0

static const char *const ACTIONS[] = {[RESTART_RETRY] = "retry", [RESTART_FAIL] = "fail",
                                      [RESTART_RETRY_ELSEWHERE] = "retry_elsewhere"};

const char *restart_action_name(restart_action a) { return (unsigned)a <= RESTART_RETRY_ELSEWHERE ? ACTIONS[a] : "retry"; }

/* What a user would choose: what runs the same again fails again (out of memory, an
 * error in the script, the built-in trainer's config or data); the rest may pass. */
static const restart_action DEFAULT_ON[FAILURE_CLASS_COUNT] = {
    [FAILURE_OOM] = RESTART_FAIL,        [FAILURE_HANG] = RESTART_RETRY, [FAILURE_COLLECTIVE] = RESTART_RETRY,
    [FAILURE_CRASH] = RESTART_RETRY,     [FAILURE_SCRIPT_ERROR] = RESTART_FAIL, [FAILURE_EXIT] = RESTART_RETRY,
    [FAILURE_INFRA] = RESTART_RETRY,     [FAILURE_DATA] = RESTART_FAIL,  [FAILURE_CONFIG] = RESTART_FAIL,
};

void restart_policy_defaults(restart_policy *p, int max_restarts, double backoff_s) {
    memset(p, 0, sizeof *p);
    p->max_restarts = max_restarts;
    memcpy(p->on, DEFAULT_ON, sizeof p->on);
    p->backoff_initial_s = p->backoff_max_s = backoff_s;
}

const char *restart_policy_budget_field(const restart_policy *p) {
    return p->own_max_restarts ? "distributed.restart_policy.max_restarts" : "distributed.max_restarts";
}

static int fail(char *err, size_t n, const char *pointer, const char *what) {
    snprintf(err, n, "/distributed/restart_policy%s: %s", pointer, what);
    return -1;
}

/* A number of seconds in [0, 86400] at key (absent: *out stays). */
static int seconds_at(const json_t *o, const char *key, const char *pointer, double *out, char *err, size_t n) {
    const json_t *v = json_object_get(o, key);
    if (!v) return 0;
    if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 86400))
        return fail(err, n, pointer, "must be a number of seconds from 0 to 86400");
    *out = json_number_value(v);
    return 0;
}

/* Every key of o is one of keys; else -1 naming it and what o takes. */
static int only_keys(const json_t *o, const char *const *keys, const char *pointer, const char *takes, char *err,
                     size_t n) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        int known = 0;
        for (int i = 0; keys[i] && !known; i++) known = strcmp(key, keys[i]) == 0;
        if (!known) {
            char what[256], ptr[160];
            snprintf(ptr, sizeof ptr, "%s/%.64s", pointer, key);
            snprintf(what, sizeof what, "is not one of its fields (it takes %s)", takes);
            return fail(err, n, ptr, what);
        }
    }
    return 0;
}

static int parse_on(const json_t *on, restart_policy *p, char *err, size_t n) {
    if (!json_is_object(on)) return fail(err, n, "/on", "must be an object {CLASS: \"retry\" | \"fail\" | \"retry_elsewhere\"}");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)on, key, v) {
        char ptr[96];
        snprintf(ptr, sizeof ptr, "/on/%.64s", key);
        failure_class c;
        if (failure_class_parse(key, &c) != 0)
            return fail(err, n, ptr, "is not a failure class (oom, hang, collective, crash, script_error, exit, infra, "
                                     "data, config)");
        const char *a = json_string_value(v);
        int found = 0;
        for (int i = 0; a && i <= RESTART_RETRY_ELSEWHERE && !found; i++)
            if (strcmp(a, ACTIONS[i]) == 0) {
                p->on[c] = (restart_action)i;
                found = 1;
            }
        if (!found) return fail(err, n, ptr, "must be \"retry\", \"fail\" or \"retry_elsewhere\"");
    }
    return 0;
}

int restart_policy_parse(const json_t *distributed, restart_policy *p, char *err, size_t n) {
    const json_t *rp = distributed ? json_object_get(distributed, "restart_policy") : NULL;
    if (!rp || json_is_null(rp)) return 0;
    if (!json_is_object(rp)) return fail(err, n, "", "must be an object");
    static const char *const KEYS[] = {"max_restarts", "on", "backoff", "reset_on_progress", "crash_loop", NULL};
    if (only_keys(rp, KEYS, "", "max_restarts, on, backoff, reset_on_progress, crash_loop", err, n) != 0) return -1;
    p->given = 1;
    p->reset_on_progress = 1;
    p->crash_loop_failures = DEFAULT_LOOP_FAILURES;
    p->crash_loop_window_s = DEFAULT_LOOP_WINDOW_S;
    p->backoff_max_s = DEFAULT_BACKOFF_MAX_S > p->backoff_initial_s ? DEFAULT_BACKOFF_MAX_S : p->backoff_initial_s;
    const json_t *v = json_object_get(rp, "max_restarts");
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 100)
            return fail(err, n, "/max_restarts", "must be an integer from 0 to 100 (torchrun's --max-restarts)");
        p->max_restarts = (int)json_integer_value(v);
        p->own_max_restarts = 1;
    }
    if ((v = json_object_get(rp, "on")) && parse_on(v, p, err, n) != 0) return -1;
    if ((v = json_object_get(rp, "backoff"))) {
        static const char *const B[] = {"initial_s", "max_s", NULL};
        if (!json_is_object(v)) return fail(err, n, "/backoff", "must be an object {initial_s, max_s}");
        if (only_keys(v, B, "/backoff", "initial_s, max_s", err, n) != 0) return -1;
        int has_max = json_object_get(v, "max_s") != NULL;
        if (seconds_at(v, "initial_s", "/backoff/initial_s", &p->backoff_initial_s, err, n) != 0 ||
            seconds_at(v, "max_s", "/backoff/max_s", &p->backoff_max_s, err, n) != 0)
            return -1;
        if (!has_max && p->backoff_max_s < p->backoff_initial_s) p->backoff_max_s = p->backoff_initial_s;
        if (p->backoff_max_s < p->backoff_initial_s)
            return fail(err, n, "/backoff/max_s", "must be at least backoff.initial_s (the pause doubles up to it)");
    }
    if ((v = json_object_get(rp, "reset_on_progress"))) {
        if (!json_is_boolean(v)) return fail(err, n, "/reset_on_progress", "must be true or false");
        p->reset_on_progress = json_is_true(v);
    }
    if ((v = json_object_get(rp, "crash_loop"))) {
        static const char *const L[] = {"failures", "window_s", NULL};
        if (!json_is_object(v)) return fail(err, n, "/crash_loop", "must be an object {failures, window_s}");
        if (only_keys(v, L, "/crash_loop", "failures, window_s", err, n) != 0) return -1;
        const json_t *f = json_object_get(v, "failures");
        if (f && (!json_is_integer(f) || json_integer_value(f) < 0 || json_integer_value(f) > CRASH_LOOP_MAX))
            return fail(err, n, "/crash_loop/failures", "must be an integer from 0 (no watch) to 100");
        if (f) p->crash_loop_failures = (int)json_integer_value(f);
        if (seconds_at(v, "window_s", "/crash_loop/window_s", &p->crash_loop_window_s, err, n) != 0) return -1;
    }
    return 0;
}

void restart_budget_init(restart_budget *b, int used) {
    memset(b, 0, sizeof *b);
    b->used = used;
    b->best_step = -1;
}

void restart_budget_baseline(restart_budget *b, long long best_step) {
    if (best_step < 0) return;
    if (best_step > b->best_step) b->best_step = best_step;
    b->baseline = 1;
}

restart_next restart_decide(const restart_policy *p, restart_budget *b, failure_class cls, long long max_step,
                            int checkpointed, double now_s, int *progress, double *backoff_s) {
    *progress = checkpointed || (b->baseline && max_step >= 0 && max_step > b->best_step);
    if (max_step > b->best_step) b->best_step = max_step;
    b->baseline = 1; /* this attempt is the next one's earlier attempt */
    if (*progress) {
        b->streak = 0;
        b->loop_n = 0;
    } else {
        b->streak++;
        /* the failures without progress within the window, this one the newest */
        int kept = 0;
        for (int i = 0; i < b->loop_n; i++)
            if (now_s - b->loop_t[i] <= p->crash_loop_window_s) b->loop_t[kept++] = b->loop_t[i];
        if (kept == CRASH_LOOP_MAX) {
            memmove(b->loop_t, b->loop_t + 1, (CRASH_LOOP_MAX - 1) * sizeof *b->loop_t);
            kept--;
        }
        b->loop_t[kept++] = now_s;
        b->loop_n = kept;
    }
    double pause = p->backoff_initial_s * pow(2.0, b->streak > 1 ? b->streak - 1 : 0);
    *backoff_s = pause < p->backoff_max_s ? pause : p->backoff_max_s;
    restart_action a = p->on[(unsigned)cls < FAILURE_CLASS_COUNT ? cls : FAILURE_EXIT];
    if (a == RESTART_FAIL) return NEXT_FAIL_CLASS;
    if (p->crash_loop_failures > 0 && b->loop_n >= p->crash_loop_failures) return NEXT_FAIL_LOOP;
    if (!(*progress && p->reset_on_progress)) b->used++;
    if (b->used > p->max_restarts) return NEXT_FAIL_SPENT;
    return a == RESTART_RETRY_ELSEWHERE ? NEXT_RESTART_ELSEWHERE : NEXT_RESTART;
}

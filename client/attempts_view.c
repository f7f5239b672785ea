/* A run's attempts for a person: see attempts_view.h. */
#include "attempts_view.h"

#include <math.h>
#include <string.h>

#include "format.h"

static const char *text_or(const json_t *v, const char *otherwise) {
    return json_is_string(v) && json_string_value(v)[0] ? json_string_value(v) : otherwise;
}

/* "rank 1, status 3", "rank 0, signal 9", or "-"; after its class when it has one
 * ("oom: rank 1, signal 9", docs/failures.md). */
static void failure_cell(const json_t *a, char *out, size_t n) {
    const json_t *rank = json_object_get(a, "failing_rank");
    const char *cls = text_or(json_object_get(json_object_get(a, "failure"), "class"), NULL);
    if (cls) {
        int w = snprintf(out, n, "%s%s", cls, json_is_integer(rank) ? ": " : "");
        if (w < 0 || (size_t)w >= n) return;
        out += w;
        n -= (size_t)w;
    }
    if (!json_is_integer(rank)) {
        if (!cls) snprintf(out, n, "-");
        return;
    }
    const json_t *code = json_object_get(a, "exit_code"), *sig = json_object_get(a, "signal");
    if (json_is_integer(sig))
        snprintf(out, n, "rank %lld, signal %lld", (long long)json_integer_value(rank), (long long)json_integer_value(sig));
    else if (json_is_integer(code))
        snprintf(out, n, "rank %lld, status %lld", (long long)json_integer_value(rank), (long long)json_integer_value(code));
    else
        snprintf(out, n, "rank %lld", (long long)json_integer_value(rank));
}

void attempts_took(const json_t *run, char *out, size_t n) {
    const char *started = json_string_value(json_object_get(run, "started_at"));
    const char *finished = json_string_value(json_object_get(run, "finished_at"));
    double total = started ? iso_diff_s(started, finished) + json_number_value(json_object_get(run, "earlier_attempts_s"))
                           : NAN;
    char all[32];
    fmt_duration(total, all, sizeof all);
    const json_t *attempts = json_object_get(run, "attempts");
    size_t count = json_array_size(attempts) + (size_t)json_integer_value(json_object_get(run, "attempts_omitted"));
    const json_t *last = json_array_get(attempts, json_array_size(attempts) - 1);
    const char *from = json_string_value(json_object_get(last, "started_at"));
    if (count < 2 || !from || !isfinite(total)) {
        snprintf(out, n, "%s", all);
        return;
    }
    const char *to = json_string_value(json_object_get(last, "ended_at"));
    char took[32];
    fmt_duration(iso_diff_s(from, to ? to : finished), took, sizeof took);
    snprintf(out, n, "%s over %zu attempts, the last %s", all, count, took);
}

void attempts_print(const json_t *run, FILE *out) {
    const json_t *attempts = json_object_get(run, "attempts");
    const json_t *dist = json_object_get(json_object_get(run, "config"), "distributed");
    const json_t *own = json_object_get(json_object_get(dist, "restart_policy"), "max_restarts");
    long long max = json_integer_value(own ? own : json_object_get(dist, "max_restarts")); /* docs/failures.md */
    size_t n = json_array_size(attempts);
    if (n == 0 || (n == 1 && max == 0)) return;
    long long omitted = json_integer_value(json_object_get(run, "attempts_omitted"));
    fprintf(out, "  attempts:  %zu%s (restart count %lld; distributed.%smax_restarts %lld)\n", n + (size_t)omitted,
            omitted ? ", the newest listed" : "", (long long)json_integer_value(json_object_get(run, "restart_count")),
            own ? "restart_policy." : "", max);
    table t;
    table_init(&t, 6);
    const char *head[6] = {"    ATTEMPT", "STARTED", "DURATION", "STATUS", "FAILED ON", "WHY"};
    table_row(&t, head);
    size_t i;
    const json_t *a;
    json_array_foreach(attempts, i, a) {
        char num[24], started[32], took[32], fail[96], why[640];
        snprintf(num, sizeof num, "    %lld", (long long)json_integer_value(json_object_get(a, "attempt")));
        const char *from = json_string_value(json_object_get(a, "started_at"));
        const char *to = json_string_value(json_object_get(a, "ended_at"));
        fmt_time(from, started, sizeof started);
        fmt_duration(from ? iso_diff_s(from, to) : NAN, took, sizeof took);
        failure_cell(a, fail, sizeof fail);
        /* its reason, and the rank's last words when the reason does not hold them */
        const char *reason = text_or(json_object_get(a, "reason"), "-");
        const char *last = text_or(json_object_get(a, "last_line"), NULL);
        if (last && !strstr(reason, last)) snprintf(why, sizeof why, "%s (last line: %s)", reason, last);
        else snprintf(why, sizeof why, "%s", reason);
        /* and what decided its class, when neither says it (an exit's status, a crash's signal: the reason does) */
        const char *cls = text_or(json_object_get(json_object_get(a, "failure"), "class"), "");
        const char *evidence = strcmp(cls, "exit") && strcmp(cls, "crash")
                                   ? text_or(json_object_get(json_object_get(a, "failure"), "evidence"), NULL)
                                   : NULL;
        size_t w = strlen(why);
        if (evidence && !strstr(why, evidence) && w < sizeof why)
            snprintf(why + w, sizeof why - w, " [%s]", evidence);
        const char *row[6] = {num, started, took, text_or(json_object_get(a, "status"), "running"), fail, why};
        table_row(&t, row);
    }
    table_print(&t, out);
    table_free(&t);
}

void attempts_describe_event(const json_t *ev, char *out, size_t n) {
    const char *phase = json_string_value(json_object_get(ev, "phase"));
    long long k = json_integer_value(json_object_get(ev, "attempt"));
    out[0] = '\0';
    if (phase && strcmp(phase, "started") == 0) {
        if (k > 0) snprintf(out, n, "attempt %lld started (TORCHELASTIC_RESTART_COUNT=%lld)", k, k);
        return;
    }
    const char *status = text_or(json_object_get(ev, "status"), "?");
    if (strcmp(status, "succeeded") == 0) return;
    const char *reason = text_or(json_object_get(ev, "reason"), "");
    if (strcmp(status, "preempted") == 0) { /* its reason says by which run */
        snprintf(out, n, "attempt %lld %s", k, *reason ? reason : status);
    } else if (json_is_true(json_object_get(ev, "restarting"))) {
        snprintf(out, n, "attempt %lld %s: %s; attempt %lld starts in %g s", k, status, reason, k + 1,
                 json_number_value(json_object_get(ev, "backoff_s")));
    } else {
        snprintf(out, n, "attempt %lld %s: %s", k, status, reason);
    }
}

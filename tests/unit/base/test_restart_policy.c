/* distributed.restart_policy (base/restart_policy.h): the parse, with its
 * errors naming the field, and the decision after each failed attempt: each class's
 * default, the budget that progress leaves as it was, the crash loop, the backoff
 * that doubles without progress. */
#include "check.h"

#include <string.h>

#include "restart_policy.h"

static json_t *dist(const char *text) {
    json_t *d = json_loads(text, 0, NULL);
    REQUIRE(d, "%s parses", text);
    return d;
}

static int parses(const char *text, restart_policy *p, char *err, size_t n) {
    restart_policy_defaults(p, 2, 1.0);
    json_t *d = dist(text);
    int rc = restart_policy_parse(d, p, err, n);
    json_decref(d);
    return rc;
}

int main(void) {
    restart_policy p;
    char err[512];
    restart_budget b;
    int progress;
    double pause;

    /* without a policy: max_restarts counts every failure; the classes' defaults */
    CHECK(parses("{\"world_size\": 2}", &p, err, sizeof err) == 0 && !p.given && p.max_restarts == 2 &&
              !p.reset_on_progress && p.crash_loop_failures == 0, "no policy: torchrun's count");
    CHECK(strcmp(restart_policy_budget_field(&p), "distributed.max_restarts") == 0,
          "no policy: the reason names distributed.max_restarts: %s", restart_policy_budget_field(&p));
    CHECK(p.on[FAILURE_OOM] == RESTART_FAIL && p.on[FAILURE_SCRIPT_ERROR] == RESTART_FAIL &&
              p.on[FAILURE_DATA] == RESTART_FAIL && p.on[FAILURE_CONFIG] == RESTART_FAIL &&
              p.on[FAILURE_CRASH] == RESTART_RETRY && p.on[FAILURE_COLLECTIVE] == RESTART_RETRY &&
              p.on[FAILURE_HANG] == RESTART_RETRY && p.on[FAILURE_INFRA] == RESTART_RETRY &&
              p.on[FAILURE_EXIT] == RESTART_RETRY, "the defaults a user would choose");
    restart_budget_init(&b, 0);
    CHECK(restart_decide(&p, &b, FAILURE_OOM, 37, 0, 0, &progress, &pause) == NEXT_FAIL_CLASS, "oom: fail at once");
    restart_budget_init(&b, 0);
    CHECK(restart_decide(&p, &b, FAILURE_EXIT, 5, 0, 0, &progress, &pause) == NEXT_RESTART && !progress && pause == 1.0,
          "exit: retried, after the fixed pause (the first attempt's steps pass no earlier attempt's)");
    CHECK(restart_decide(&p, &b, FAILURE_EXIT, 9, 0, 1, &progress, &pause) == NEXT_RESTART && progress,
          "progress, but without a policy it still counts");
    CHECK(restart_decide(&p, &b, FAILURE_EXIT, 12, 1, 2, &progress, &pause) == NEXT_FAIL_SPENT,
          "the third failure: max_restarts 2 spent");

    /* a policy: reset on progress, a crash loop, the backoff doubling */
    CHECK(parses("{\"restart_policy\": {\"max_restarts\": 1, \"on\": {\"oom\": \"retry\", \"exit\": \"fail\"},"
                 " \"backoff\": {\"initial_s\": 2, \"max_s\": 5}, \"crash_loop\": {\"failures\": 3, \"window_s\": 100}}}",
                 &p, err, sizeof err) == 0 && p.given && p.reset_on_progress && p.max_restarts == 1,
          "a policy parses: %s", err);
    CHECK(strcmp(restart_policy_budget_field(&p), "distributed.restart_policy.max_restarts") == 0,
          "a policy's own max_restarts is the one a reason names: %s", restart_policy_budget_field(&p));
    CHECK(p.on[FAILURE_OOM] == RESTART_RETRY && p.on[FAILURE_EXIT] == RESTART_FAIL &&
              p.on[FAILURE_SCRIPT_ERROR] == RESTART_FAIL, "on: the classes named change, the rest keep their default");
    restart_budget_init(&b, 0);
    CHECK(restart_decide(&p, &b, FAILURE_OOM, 10, 0, 0, &progress, &pause) == NEXT_RESTART && !progress &&
              pause == 2.0 && b.used == 1,
          "the first attempt's steps are no progress (there is no earlier attempt to pass): one used up");
    for (int k = 1; k < 5; k++)
        CHECK(restart_decide(&p, &b, FAILURE_OOM, 10 * (k + 1), 0, k, &progress, &pause) == NEXT_RESTART &&
                  progress && pause == 2.0 && b.used == 1,
              "failure %d with progress (a step beyond the earlier attempts'): no restart used up", k);
    CHECK(restart_decide(&p, &b, FAILURE_CRASH, 50, 0, 10, &progress, &pause) == NEXT_FAIL_SPENT && !progress &&
              b.used == 2, "no progress (step 50 again): the second used up, max_restarts 1 spent");
    /* max_restarts 1, failing at the same step every time: 2 attempts, not 3 (the first
     * attempt's steps once made it "progress", and a third attempt followed) */
    restart_budget_init(&b, 0);
    CHECK(restart_decide(&p, &b, FAILURE_CRASH, 5, 0, 0, &progress, &pause) == NEXT_RESTART && !progress,
          "max_restarts 1: attempt 0 at step 5: restarted, one used up");
    CHECK(restart_decide(&p, &b, FAILURE_CRASH, 5, 0, 1, &progress, &pause) == NEXT_FAIL_SPENT,
          "max_restarts 1: attempt 1 at step 5 again: no third attempt");
    /* a launch of a later attempt knows its earlier attempts' best step: beyond it is progress */
    restart_budget_init(&b, 1);
    restart_budget_baseline(&b, 37);
    CHECK(restart_decide(&p, &b, FAILURE_CRASH, 37, 0, 0, &progress, &pause) == NEXT_FAIL_SPENT && !progress,
          "step 37 again after a baseline of 37: no progress, the budget (1 used) spent");
    restart_budget_init(&b, 1);
    restart_budget_baseline(&b, 37);
    CHECK(restart_decide(&p, &b, FAILURE_CRASH, 40, 0, 0, &progress, &pause) == NEXT_RESTART && progress && b.used == 1,
          "step 40 after a baseline of 37: progress, none used up");
    restart_budget_init(&b, 0);
    CHECK(restart_decide(&p, &b, FAILURE_CRASH, -1, 1, 0, &progress, &pause) == NEXT_RESTART && progress && b.used == 0,
          "a checkpoint is progress on any attempt, the first too");
    restart_budget_init(&b, 0);
    p.max_restarts = 10;
    double pauses[4];
    restart_next last = NEXT_RESTART;
    for (int k = 0; k < 4 && last == NEXT_RESTART; k++) last = restart_decide(&p, &b, FAILURE_CRASH, 37, 0, k, &progress, &pauses[k]);
    CHECK(last == NEXT_FAIL_LOOP && b.loop_n == 3 && b.best_step == 37,
          "step 37 each time: three failures without progress, a crash loop (%d, %d)", (int)last, b.loop_n);
    CHECK(pauses[0] == 2.0 && pauses[1] == 4.0 && pauses[2] == 5.0, "the pause doubles up to max_s: %g %g %g",
          pauses[0], pauses[1], pauses[2]);
    restart_budget_init(&b, 0);
    last = NEXT_RESTART;
    for (int k = 0; k < 6 && last == NEXT_RESTART; k++)
        last = restart_decide(&p, &b, FAILURE_CRASH, -1, 0, 100.0 * k, &progress, &pause);
    CHECK(last == NEXT_RESTART && pause == 5.0, "failures further apart than the window are no loop; the pause stops at max_s");
    CHECK(restart_decide(&p, &b, FAILURE_EXIT, -1, 0, 1000, &progress, &pause) == NEXT_FAIL_CLASS, "exit: fail, as asked");

    /* bad policies name the field */
    static const struct { const char *text, *error; } BAD[] = {
        {"{\"restart_policy\": 3}", "/distributed/restart_policy: must be an object"},
        {"{\"restart_policy\": {\"tries\": 3}}", "/distributed/restart_policy/tries: is not one of its fields"},
        {"{\"restart_policy\": {\"on\": {\"segfault\": \"retry\"}}}", "/distributed/restart_policy/on/segfault: is not a failure class"},
        {"{\"restart_policy\": {\"on\": {\"oom\": \"maybe\"}}}", "/distributed/restart_policy/on/oom: must be \"retry\""},
        {"{\"restart_policy\": {\"backoff\": {\"initial_s\": 9, \"max_s\": 3}}}", "/distributed/restart_policy/backoff/max_s: must be at least"},
        {"{\"restart_policy\": {\"backoff\": {\"initial_s\": -1}}}", "/distributed/restart_policy/backoff/initial_s: must be a number"},
        {"{\"restart_policy\": {\"crash_loop\": {\"failures\": 1000}}}", "/distributed/restart_policy/crash_loop/failures: must be an integer"},
        {"{\"restart_policy\": {\"max_restarts\": 101}}", "/distributed/restart_policy/max_restarts: must be an integer"},
        {"{\"restart_policy\": {\"reset_on_progress\": 1}}", "/distributed/restart_policy/reset_on_progress: must be true or false"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        err[0] = '\0';
        CHECK(parses(BAD[i].text, &p, err, sizeof err) == -1 && strstr(err, BAD[i].error), "%s: refused with '%s': %s",
              BAD[i].text, BAD[i].error, err);
    }
    return test_done("test_restart_policy");
}

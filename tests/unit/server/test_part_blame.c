/* Unit tests of the blame among the parts of a failed run across nodes
 * (server/sched/part_blame.c): a part that ended by the stop it was sent did not fail
 * on its own, one that ended before the stop or said another reason did; a part that
 * failed on its own is blamed before one stopped, one with a reason of its own before
 * one that only lost a peer (even when the peer's launcher ended first), else the one
 * that ended first; a lost node's part (no exit status) failed on its own; nothing is
 * blamed when every part succeeded. */
#include <stdint.h>

#include "base.h"
#include "check.h"
#include "part_blame.h"

#define STOP_T 1000

static part_fate ok(int64_t end_t) { return (part_fate){.exit_code = 0, .end_t = end_t}; }
static part_fate failed(int64_t code, const char *reason, int64_t end_t) {
    return (part_fate){.exit_code = code, .reason = reason, .end_t = end_t};
}
static part_fate stopped(int64_t code, const char *reason, int64_t end_t) {
    return (part_fate){.exit_code = code, .reason = reason, .end_t = end_t, .stop = true, .stop_t = STOP_T};
}

static void test_on_its_own(void) {
    part_fate by_stop = stopped(1, "canceled by SIGTERM", STOP_T + 5);
    CHECK(!part_failed_on_its_own(&by_stop), "ended by the stop it was sent, after it: not on its own");
    part_fate before = stopped(1, "canceled by SIGTERM", STOP_T - 5);
    CHECK(part_failed_on_its_own(&before), "its launcher ended before the stop was given: on its own");
    part_fate other = stopped(3, "rank 3 exited with status 3", STOP_T + 5);
    CHECK(part_failed_on_its_own(&other), "told to stop, but says why otherwise: on its own");
    part_fate silent = stopped(1, NULL, STOP_T + 5);
    CHECK(part_failed_on_its_own(&silent), "told to stop, and says nothing: on its own");
    part_fate lost = failed(NO_INT, "node node-b (ranks 2 to 3) stopped heartbeating", STOP_T);
    CHECK(part_failed_on_its_own(&lost), "a lost node's part, with no exit status: on its own");
    part_fate fine = ok(STOP_T);
    CHECK(!part_failed_on_its_own(&fine), "a part that succeeded did not fail");
}

static void test_blame(void) {
    part_fate all_ok[] = {ok(1), ok(2)};
    CHECK(part_to_blame(all_ok, 2) == -1, "every part succeeded: nobody is blamed");
    CHECK(part_to_blame(all_ok, 0) == -1, "no parts: nobody is blamed");

    part_fate own_before_stopped[] = {stopped(143, "canceled by SIGTERM", STOP_T + 1),
                                      failed(3, "rank 3 exited with status 3", STOP_T + 50), ok(10)};
    CHECK(part_to_blame(own_before_stopped, 3) == 1, "one that failed on its own before one stopped, though it "
          "ended later: %d", part_to_blame(own_before_stopped, 3));

    part_fate own_before_peer[] = {failed(1, "rank 0: Connection closed by peer", 500),
                                   failed(1, "rank 3: cannot load the training data", 700)};
    CHECK(part_to_blame(own_before_peer, 2) == 1, "a reason of its own before a lost peer, though the peer's "
          "launcher ended first: %d", part_to_blame(own_before_peer, 2));

    part_fate first_ended[] = {failed(1, "rank 1 exited with status 1", 900), failed(2, "rank 2 exited", 800),
                               failed(1, "rank 5 exited with status 1", 850)};
    CHECK(part_to_blame(first_ended, 3) == 1, "else the one whose launcher ended first: %d",
          part_to_blame(first_ended, 3));

    part_fate lost_node[] = {stopped(143, "canceled by SIGTERM", STOP_T + 2),
                             failed(NO_INT, "node node-b (ranks 2 to 3) stopped heartbeating", STOP_T)};
    CHECK(part_to_blame(lost_node, 2) == 1, "the lost node's part, not the part stopped because of it: %d",
          part_to_blame(lost_node, 2));

    part_fate all_stopped[] = {stopped(143, "canceled by SIGTERM", STOP_T + 30),
                               stopped(143, "canceled by SIGTERM", STOP_T + 20)};
    CHECK(part_to_blame(all_stopped, 2) == 1, "every part stopped (a cancel): the one that ended first: %d",
          part_to_blame(all_stopped, 2));
}

int main(void) {
    test_on_its_own();
    test_blame();
    return test_done("test_part_blame");
}

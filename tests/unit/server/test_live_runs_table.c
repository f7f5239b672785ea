/* The scheduler's table of live runs (server/sched/live_runs.c): a list in queue order
 * (submission order; a resumed run at the back) with an index by id. 20,000 runs
 * added, appended and dropped in a seeded random order, checked after every step
 * against a plain array: find_run finds every live id and no other, and the list
 * walked forward and back holds exactly the live runs, in the order they were put. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "sched_state.h"

#define MAX_RUNS 20000

static live_run *want[MAX_RUNS]; /* the list as it should be */
static int n_want;

static void check_table(const char *after) {
    int k = 0;
    const live_run *last = NULL;
    bool order = true, back = true;
    for (const live_run *r = sched.runs; r; r = r->next, k++) {
        order = order && k < n_want && r == want[k];
        back = back && r->prev == last;
        last = r;
    }
    CHECK(order && k == n_want, "%s: the list holds the %d live runs in order (walked %d)", after, n_want, k);
    CHECK(back && sched.runs_tail == last, "%s: walked back, the same list", after);
    bool found = true;
    for (int i = 0; i < n_want && found; i++) found = find_run(want[i]->id) == want[i];
    CHECK(found, "%s: find_run finds every live run", after);
}

static unsigned seed = 12345;
static int rnd(int n) {
    seed = seed * 1103515245u + 12345u;
    return (int)((seed >> 8) % (unsigned)n);
}

int main(void) {
    int64_t next_id = 1;
    int dropped = 0, appended = 0, inside = 0;
    int64_t gone[64];
    int n_gone = 0;
    for (int step = 0; step < 40000; step++) {
        int what = rnd(10);
        if (what < 5 && n_want < MAX_RUNS) { /* a submission: at the back */
            run_needs n = {.id = next_id++, .world_size = 1, .pool = POOL_CPU};
            want[n_want++] = live_run_add(&n, RUN_QUEUED);
        } else if (what == 5 && n_want < MAX_RUNS) { /* a resume: made, then appended */
            run_needs n = {.id = next_id++, .world_size = 1, .pool = POOL_CPU};
            live_run *r = live_run_new(&n);
            live_run_append(r);
            want[n_want++] = r;
            appended++;
        } else if (what == 6 && n_gone > 0 && n_want < MAX_RUNS) {
            /* a run taken back after a restart, of an id below the last: in id order */
            run_needs n = {.id = gone[--n_gone], .world_size = 1, .pool = POOL_CPU};
            live_run *r = live_run_add(&n, RUN_RUNNING);
            int at = 0;
            while (at < n_want && want[at]->id < n.id) at++;
            memmove(&want[at + 1], &want[at], (size_t)(n_want - at) * sizeof *want);
            want[at] = r;
            n_want++;
            inside++;
        } else if (n_want > 0) { /* an end: anywhere in the list */
            int at = rnd(n_want);
            live_run *r = want[at];
            /* its id may come back (what == 6) only while the list stays in id order there */
            if (n_gone < 64 && (at == 0 || want[at - 1]->id < r->id) && (at + 1 == n_want || want[at + 1]->id > r->id))
                gone[n_gone++] = r->id;
            memmove(&want[at], &want[at + 1], (size_t)(n_want - at - 1) * sizeof *want);
            n_want--;
            live_run_drop(r);
            dropped++;
        }
        if (step % 997 == 0 || step == 39999) {
            char after[64];
            snprintf(after, sizeof after, "step %d", step);
            check_table(after);
        }
    }
    /* ids never put, and ids dropped, are not found */
    bool none = true;
    for (int64_t id = next_id; id < next_id + 1000; id++) none = none && !find_run(id);
    for (int i = 0; i < n_gone; i++) none = none && !find_run(gone[i]);
    CHECK(none, "ids not live are not found");
    printf("%d live, %d dropped, %d appended, %d put back inside\n", n_want, dropped, appended, inside);
    CHECK(dropped > 1000 && appended > 1000 && inside > 100, "every kind of change was tried");
    while (n_want > 0) live_run_drop(want[--n_want]);
    check_table("all dropped");
    return test_done("test_live_runs_table");
}

/* The cap on a run's stored points: see point_cap.h. */
#include "point_cap.h"

#include <stdlib.h>

#include "base.h"
#include "store_read.h"

typedef struct {
    int64_t id, stored;
    bool capped; /* the cap was met: said once */
} run_count;

/* The live runs' counts: few, looked up by ingest's thread alone. */
static struct {
    run_count *v;
    size_t n, cap;
} C;

static run_count *count_of(int64_t id) {
    for (size_t i = 0; i < C.n; i++)
        if (C.v[i].id == id) return &C.v[i];
    if (C.n == C.cap) C.v = xrealloc(C.v, (C.cap = C.cap ? 2 * C.cap : 16) * sizeof *C.v);
    int64_t held = store_count_points(id); /* once per run: where its count starts */
    C.v[C.n] = (run_count){.id = id, .stored = held > 0 ? held : 0};
    return &C.v[C.n++];
}

bool point_cap_take(int64_t id, int64_t points, int64_t cap, bool *first, int64_t *stored) {
    *first = false;
    if (cap <= 0 || points <= 0) return true;
    run_count *c = count_of(id);
    *stored = c->stored;
    if (c->stored + points <= cap) {
        c->stored += points;
        return true;
    }
    *first = !c->capped;
    c->capped = true;
    return false;
}

void point_cap_forget(int64_t id) {
    for (size_t i = 0; i < C.n; i++)
        if (C.v[i].id == id) {
            C.v[i] = C.v[--C.n];
            return;
        }
}

void point_cap_clear(void) {
    free(C.v);
    C.v = NULL;
    C.n = C.cap = 0;
}

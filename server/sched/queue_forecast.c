/* When each queued run is expected to start: see queue_forecast.h. */
#include "queue_forecast.h"

#include <stdlib.h>
#include <string.h>

#include "base.h"

/* A run holding devices in the walk: a running one of the snapshot, or one the walk started. */
typedef struct {
    policy_running r;
    policy_hold holds[POLICY_NODES_MAX];
    int64_t end_ms; /* -1: no expected end */
} walker;

typedef struct {
    policy_snapshot s;
    policy_node nodes[POLICY_NODES_MAX];
    walker *held;
    int n_held;
    policy_running *running; /* the walk's snapshot of held[], rebuilt for each decision */
    policy_run *queued;      /* still queued */
    int *queued_index;       /* each one's index in the caller's s->queued */
    int n_queued;
} walk;

static int node_at(const walk *w, int id) {
    for (int i = 0; i < w->s.n_nodes; i++)
        if (w->nodes[i].id == id) return i;
    return -1;
}

/* held[k] ends: what it held comes free. */
static void end_held(walk *w, int k) {
    walker *h = &w->held[k];
    for (int i = 0; i < h->r.n_holds; i++) {
        int n = node_at(w, h->holds[i].node);
        if (n >= 0) w->nodes[n].free[h->r.pool] += h->holds[i].devices;
    }
    w->held[k] = w->held[--w->n_held];
}

static void sync_running(walk *w) {
    for (int k = 0; k < w->n_held; k++) {
        w->running[k] = w->held[k].r;
        w->running[k].holds = w->held[k].holds;
    }
    w->s.running = w->running;
    w->s.n_running = w->n_held;
    w->s.queued = w->queued;
    w->s.n_queued = w->n_queued;
}

/* Queued run i starts now on d's nodes, for len ms (-1: no expected end). */
static void start_queued(walk *w, int i, const policy_decision *d, int64_t len) {
    const policy_run *q = &w->queued[i];
    walker *h = &w->held[w->n_held++];
    memset(h, 0, sizeof *h);
    h->r = (policy_running){.id = q->id, .pool = q->pool, .owner = q->owner, .priority = q->priority,
                            .started_ms = w->s.now_ms, .n_holds = d->n_nodes};
    int share = d->n_nodes ? q->world_size / d->n_nodes : 0;
    for (int n = 0; n < d->n_nodes; n++) {
        h->holds[n] = (policy_hold){.node = d->nodes[n], .devices = share};
        int at = node_at(w, d->nodes[n]);
        if (at >= 0) w->nodes[at].free[q->pool] -= share;
    }
    h->end_ms = len < 0 ? -1 : w->s.now_ms + len;
}

static void drop_queued(walk *w, int i) {
    w->queued[i] = w->queued[w->n_queued - 1];
    w->queued_index[i] = w->queued_index[w->n_queued - 1];
    w->n_queued--;
}

static int held_index(const walk *w, int64_t id) {
    for (int k = 0; k < w->n_held; k++)
        if (w->held[k].r.id == id) return k;
    return -1;
}

/* One decision at the walk's time: starts what the policy starts, ends what it
 * preempts. Returns whether anything changed. */
static bool step(walk *w, const int64_t *queued_len_ms, forecast *out) {
    sync_running(w);
    policy_decision *d = xmalloc((size_t)(w->n_queued + 1) * sizeof *d);
    queue_policy_decide(&w->s, d);
    bool changed = false;
    int n = w->n_queued;
    bool *gone = xcalloc((size_t)(n + 1), sizeof *gone);
    for (int i = 0; i < n; i++) {
        if (d[i].verb == POLICY_START) {
            int caller = w->queued_index[i];
            out[caller] = (forecast){.start_ms = w->s.now_ms};
            start_queued(w, i, &d[i], queued_len_ms[caller]);
            gone[i] = changed = true;
        }
        for (int v = 0; d[i].verb == POLICY_PREEMPT && v < d[i].n_preempt; v++) {
            int k = held_index(w, d[i].preempt[v]), keeps = d[i].preempt_to ? d[i].preempt_to[v] : 0;
            if (k >= 0 && keeps > 0 && w->held[k].r.n_holds == 1) { /* an elastic run shrunk: it goes on with the rest */
                walker *h = &w->held[k];
                int at = node_at(w, h->holds[0].node);
                if (at >= 0) w->nodes[at].free[h->r.pool] += h->holds[0].devices - keeps;
                h->holds[0].devices = keeps;
                changed = true;
            } else if (k >= 0) {
                w->held[k].r.stopping = true;
                w->held[k].end_ms = w->s.now_ms; /* it stops (and may come back queued: not foreseen) */
                changed = true;
            }
        }
    }
    for (int i = n - 1; i >= 0; i--)
        if (gone[i]) drop_queued(w, i);
    free(gone);
    queue_policy_free(d, n);
    free(d);
    for (int k = w->n_held - 1; k >= 0; k--) /* what ends now */
        if (w->held[k].end_ms >= 0 && w->held[k].end_ms <= w->s.now_ms) {
            end_held(w, k);
            changed = true;
        }
    return changed;
}

/* The first run of q's pool with no expected end that holds devices (0: none). */
static int64_t no_end_of(const walk *w, pool_kind pool) {
    int64_t first = 0;
    for (int k = 0; k < w->n_held; k++)
        if (w->held[k].end_ms < 0 && w->held[k].r.pool == pool && (!first || w->held[k].r.id < first))
            first = w->held[k].r.id;
    return first;
}

static int by_order(const void *a, const void *b, void *ctx) {
    const policy_decision *d = ctx;
    return d[*(const int *)a].order - d[*(const int *)b].order;
}

void queue_forecast(const policy_snapshot *s, const int64_t *running_end_ms, const int64_t *queued_len_ms,
                    forecast *out) {
    for (int i = 0; i < s->n_queued; i++) out[i] = (forecast){.start_ms = -1};
    if (!s->n_queued) return;
    walk w = {.s = *s};
    int n_nodes = s->n_nodes < POLICY_NODES_MAX ? s->n_nodes : POLICY_NODES_MAX;
    memcpy(w.nodes, s->nodes, (size_t)n_nodes * sizeof *w.nodes);
    w.s.nodes = w.nodes;
    w.s.n_nodes = n_nodes;
    /* the first FORECAST_RUNS_MAX in the start order are walked; the rest are beyond */
    policy_decision *d = xmalloc((size_t)(s->n_queued + 1) * sizeof *d);
    queue_policy_decide(s, d);
    int *order = xmalloc((size_t)(s->n_queued + 1) * sizeof *order);
    for (int i = 0; i < s->n_queued; i++) order[i] = i;
    qsort_r(order, (size_t)s->n_queued, sizeof *order, by_order, d);
    queue_policy_free(d, s->n_queued);
    free(d);
    int walked = s->n_queued < FORECAST_RUNS_MAX ? s->n_queued : FORECAST_RUNS_MAX;
    w.queued = xmalloc((size_t)(walked + 1) * sizeof *w.queued);
    w.queued_index = xmalloc((size_t)(walked + 1) * sizeof *w.queued_index);
    for (int k = 0; k < walked; k++) {
        w.queued[k] = s->queued[order[k]];
        w.queued_index[k] = order[k];
    }
    w.n_queued = walked;
    for (int k = walked; k < s->n_queued; k++) out[order[k]].beyond = true;
    free(order);
    w.held = xmalloc((size_t)(s->n_running + walked + 1) * sizeof *w.held);
    w.running = xmalloc((size_t)(s->n_running + walked + 1) * sizeof *w.running);
    for (int j = 0; j < s->n_running; j++) {
        walker *h = &w.held[w.n_held++];
        h->r = s->running[j];
        h->r.n_holds = s->running[j].n_holds < POLICY_NODES_MAX ? s->running[j].n_holds : POLICY_NODES_MAX;
        memcpy(h->holds, s->running[j].holds, (size_t)h->r.n_holds * sizeof *h->holds);
        h->end_ms = s->running[j].stopping ? s->now_ms : running_end_ms[j];
        if (h->end_ms >= 0 && h->end_ms < s->now_ms) h->end_ms = s->now_ms; /* overdue: it ends any moment */
    }
    /* each round starts a run, ends one, or moves time to an end: bounded */
    for (int rounds = 0; w.n_queued && rounds < 4 * (s->n_running + walked) + 8; rounds++) {
        if (step(&w, queued_len_ms, out)) continue;
        int64_t next = -1;
        for (int k = 0; k < w.n_held; k++)
            if (w.held[k].end_ms >= 0 && (next < 0 || w.held[k].end_ms < next)) next = w.held[k].end_ms;
        if (next < 0) break; /* nothing with an expected end holds anything */
        w.s.now_ms = next;
    }
    for (int i = 0; i < w.n_queued; i++) out[w.queued_index[i]].basis_run = no_end_of(&w, w.queued[i].pool);
    free(w.held);
    free(w.running);
    free(w.queued);
    free(w.queued_index);
}

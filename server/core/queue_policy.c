/* Which queued run starts next, and where: see queue_policy.h. */
#include "queue_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "placement.h"

/* A run of this host alone: it asks for no more than one node and this host's pool
 * can hold it. */
static bool here_only(const policy_snapshot *s, const policy_run *q) {
    return q->nodes_wanted <= 1 && q->world_size <= s->nodes[0].capacity[q->pool];
}

/* The nodes a run across nodes may use, in the order they are taken: this host
 * first (when it takes part in runs across nodes), then the agent nodes, each with
 * devices of the pool; avail[i] is node i's free count (what earlier starts left). */
static int candidates(const policy_snapshot *s, pool_kind pool, int (*avail)[2], place_candidate *c) {
    int n = 0;
    for (int i = 0; i < s->n_nodes && i < POLICY_NODES_MAX; i++) {
        const policy_node *node = &s->nodes[i];
        if (node->capacity[pool] <= 0 || (i == 0 && !s->here_across)) continue;
        c[n++] = (place_candidate){.id = node->id, .free = avail[i][pool], .capacity = node->capacity[pool]};
    }
    return n;
}

/* What the snapshot's nodes have free, to be taken from as runs start. */
static void free_of(const policy_snapshot *s, int (*avail)[2]) {
    for (int i = 0; i < s->n_nodes && i < POLICY_NODES_MAX; i++) {
        avail[i][POOL_CPU] = s->nodes[i].free[POOL_CPU];
        avail[i][POOL_GPU] = s->nodes[i].free[POOL_GPU];
    }
}

static int node_index(const policy_snapshot *s, int id) {
    for (int i = 0; i < s->n_nodes && i < POLICY_NODES_MAX; i++)
        if (s->nodes[i].id == id) return i;
    return -1;
}

/* Places q on what is free now (avail[i], updated by the start): a START decision,
 * or false when it does not fit. */
static bool place(const policy_snapshot *s, const policy_run *q, int (*avail)[2], policy_decision *d) {
    if (here_only(s, q)) {
        if (avail[0][q->pool] < q->world_size) return false;
        avail[0][q->pool] -= q->world_size;
        d->across = false;
        d->n_nodes = 1;
        d->nodes[0] = 0;
        return true;
    }
    place_candidate c[POLICY_NODES_MAX];
    int k = placement_choose(c, candidates(s, q->pool, avail, c), q->world_size, q->nodes_wanted, false, d->nodes);
    if (!k) return false;
    for (int p = 0; p < k; p++) avail[node_index(s, d->nodes[p])][q->pool] -= q->world_size / k;
    d->across = true;
    d->n_nodes = k;
    return true;
}

int queue_policy_decide(const policy_snapshot *s, policy_decision *out) {
    int avail[POLICY_NODES_MAX][2];
    free_of(s, avail);
    int64_t blocker[2] = {0, 0}; /* per pool: the first run that did not fit */
    for (int i = 0; i < s->n_queued; i++) {
        const policy_run *q = &s->queued[i];
        policy_decision *d = &out[i];
        memset(d, 0, sizeof *d);
        d->run = q->id;
        if (blocker[q->pool]) {
            d->verb = POLICY_WAIT;
            d->wait = WAIT_BEHIND;
            d->behind = blocker[q->pool];
        } else if (place(s, q, avail, d)) {
            d->verb = POLICY_START;
        } else {
            d->verb = POLICY_WAIT;
            d->wait = here_only(s, q) ? WAIT_THIS_HOST : WAIT_NODES;
            blocker[q->pool] = q->id;
        }
    }
    return s->n_queued;
}

void queue_policy_free(policy_decision *d, int n) {
    for (int i = 0; i < n; i++) {
        free(d[i].preempt);
        d[i].preempt = NULL;
    }
}

/* "this host 2 of 4, node-b 0 of 2": the candidates of a run across nodes and what
 * each has free now (malloc'd). */
static char *free_now(const policy_snapshot *s, pool_kind pool) {
    int avail[POLICY_NODES_MAX][2];
    free_of(s, avail);
    place_candidate c[POLICY_NODES_MAX];
    int n = candidates(s, pool, avail, c);
    buf_t b = {0};
    for (int i = 0; i < n; i++)
        buf_printf(&b, "%s%s %d of %d", i ? ", " : "", s->nodes[node_index(s, c[i].id)].name, c[i].free,
                   c[i].capacity);
    if (!n) buf_printf(&b, "no node other than this host (which has %d, and %s)", s->nodes[0].capacity[pool],
                       s->here_across ? "takes part" : "takes no part in runs across nodes: serve --advertise ADDR");
    return b.data;
}

char *queue_policy_waiting_for(const policy_snapshot *s, const policy_run *q) {
    const char *unit = pool_unit(q->pool);
    if (here_only(s, q))
        return xasprintf("%d %s on this host (%d free of %d)", q->world_size, unit, s->nodes[0].free[q->pool],
                         s->nodes[0].capacity[q->pool]);
    char *what = free_now(s, q->pool), *text;
    if (q->nodes_wanted > 1)
        text = xasprintf("%d nodes with %d free %s each (free now: %s)", q->nodes_wanted,
                         q->world_size / q->nodes_wanted, unit, what);
    else
        text = xasprintf("%d %s on as few nodes as hold them, as many on each (free now: %s)", q->world_size, unit,
                         what);
    free(what);
    return text;
}

bool queue_policy_can_place(const policy_snapshot *s, const policy_run *q, char *err, size_t errlen) {
    if (q->nodes_wanted > 0 && q->world_size % q->nodes_wanted != 0) {
        snprintf(err, errlen, "distributed.nodes %d does not divide world_size %d: every node runs as many ranks",
                 q->nodes_wanted, q->world_size);
        return false;
    }
    if (here_only(s, q)) return true;
    int avail[POLICY_NODES_MAX][2] = {{0}};
    place_candidate c[POLICY_NODES_MAX];
    int ids[POLICY_NODES_MAX];
    if (placement_choose(c, candidates(s, q->pool, avail, c), q->world_size, q->nodes_wanted, true, ids) > 0)
        return true;
    char *what = free_now(s, q->pool);
    const char *unit = pool_unit(q->pool);
    if (q->nodes_wanted > 1)
        snprintf(err, errlen, "needs %d nodes with %d %s each, and there are not that many (%s, %s as free of all)",
                 q->nodes_wanted, q->world_size / q->nodes_wanted, unit, what, unit);
    else
        snprintf(err, errlen, "needs %d %s, more than this host has (%d: --%s), and no set of nodes holds it "
                 "(%s, %s as free of all)", q->world_size, unit, s->nodes[0].capacity[q->pool],
                 q->pool == POOL_GPU ? "gpus" : "slots", what, unit);
    free(what);
    return false;
}

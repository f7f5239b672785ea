/* Which queued run starts next, and where, and whom to preempt for it: see queue_policy.h. */
#include "queue_policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "placement.h"

typedef int devices_at[POLICY_NODES_MAX][2]; /* per node of the snapshot (its index) and pool */

/* A run of this host alone: it asks for no more than one node and this host's pool
 * can hold it. */
static bool here_only(const policy_snapshot *s, const policy_run *q) {
    return q->nodes_wanted <= 1 && q->world_size <= s->nodes[0].capacity[q->pool];
}

/* Whether a run restarted by retry_elsewhere failed on node i as a whole (no device
 * named), or (dev) on one of its devices: how many. */
static int failed_there(const policy_snapshot *s, const policy_run *q, int i, bool dev) {
    int k = 0;
    size_t len = strlen(s->nodes[i].name ? s->nodes[i].name : "");
    for (int j = 0; q->elsewhere && len && j < q->n_failed_at; j++) {
        const char *f = q->failed_at[j];
        if (strncmp(f, s->nodes[i].name, len) == 0 && (dev ? f[len] == '/' : f[len] == 0)) k++;
    }
    return k;
}

/* Whether q may go to the snapshot's node i at all: not an excluded node, nor a
 * suspect one (or one it failed on) for a run restarted elsewhere. */
static bool usable(const policy_snapshot *s, const policy_run *q, int i) {
    const policy_node *n = &s->nodes[i];
    return !n->excluded && !((n->suspect || failed_there(s, q, i, false)) && q->elsewhere);
}

/* Node i's devices of q's pool that q is given only when nothing else fits (`shun`),
 * or never (a run restarted elsewhere: the suspect ones, and those it failed on). */
static int shunned(const policy_snapshot *s, const policy_run *q, int i, bool shun) {
    return shun || q->elsewhere ? s->nodes[i].shunned[q->pool] + failed_there(s, q, i, true) : 0;
}

/* What q may take of node i's avail: without the devices it shuns. */
static int clean(const policy_snapshot *s, const policy_run *q, const devices_at avail, int i, bool shun) {
    int n = avail[i][q->pool] - shunned(s, q, i, shun);
    return n > 0 ? n : 0;
}

/* The nodes of a run across nodes that q may use (candidates()'s, in its order),
 * without the suspect ones (and their suspect devices) when `shun`, without this
 * host when `agents_only`. */
static int usable_candidates(const policy_snapshot *s, const policy_run *q, const devices_at avail, bool shun,
                             bool agents_only, place_candidate *c) {
    int n = 0;
    for (int i = 0; i < s->n_nodes && i < POLICY_NODES_MAX; i++) {
        const policy_node *node = &s->nodes[i];
        if (node->capacity[q->pool] <= 0 || (i == 0 && (!s->here_across || agents_only))) continue;
        if (!usable(s, q, i) || (shun && node->suspect)) continue;
        c[n++] = (place_candidate){.id = node->id, .free = clean(s, q, avail, i, shun),
                                   .capacity = node->capacity[q->pool]};
    }
    return n;
}

/* The nodes a run across nodes may use, in the order they are taken: this host
 * first (when it takes part in runs across nodes), then the agent nodes, each with
 * devices of the pool; avail[i] is node i's count (what earlier starts left). */
static int candidates(const policy_snapshot *s, pool_kind pool, const devices_at avail, place_candidate *c) {
    int n = 0;
    for (int i = 0; i < s->n_nodes && i < POLICY_NODES_MAX; i++) {
        const policy_node *node = &s->nodes[i];
        if (node->capacity[pool] <= 0 || (i == 0 && !s->here_across)) continue;
        c[n++] = (place_candidate){.id = node->id, .free = avail[i][pool], .capacity = node->capacity[pool]};
    }
    return n;
}

/* What the snapshot's nodes have free, to be taken from as runs start. */
static void free_of(const policy_snapshot *s, devices_at avail) {
    memset(avail, 0, sizeof(devices_at));
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

/* q across nodes on avail, the suspect ones only when no other set fits (never when
 * they are not usable for it); this host left out with `agents_only`. */
static bool fit_across(const policy_snapshot *s, const policy_run *q, const devices_at avail, bool agents_only,
                       bool shun_only, policy_decision *d) {
    place_candidate c[POLICY_NODES_MAX];
    for (int shun = 1; shun >= (shun_only ? 1 : 0); shun--) {
        int k = placement_choose(c, usable_candidates(s, q, avail, shun, agents_only, c), q->world_size,
                                 q->nodes_wanted, false, d->nodes);
        if (k) {
            d->across = true;
            d->n_nodes = k;
            return true;
        }
    }
    return false;
}

/* Where q goes on `avail` (nothing taken): its nodes into d; false when it does not
 * fit. A run of this host alone goes to an agent node that holds it only when this
 * host is suspect (or not usable for it), and back here when none does. */
static bool fit(const policy_snapshot *s, const policy_run *q, const devices_at avail, policy_decision *d) {
    if (here_only(s, q)) {
        /* this host first, unless it is suspect, or has the devices free now only by
         * counting its suspect ones (a run short of free devices here waits here) */
        bool here_ok = usable(s, q, 0),
             here_first = here_ok && !s->nodes[0].suspect &&
                          (clean(s, q, avail, 0, true) >= q->world_size || avail[0][q->pool] < q->world_size);
        if (!here_first && fit_across(s, q, avail, true, true, d)) return true;
        if (!here_ok || clean(s, q, avail, 0, false) < q->world_size) return false;
        d->across = false;
        d->n_nodes = 1;
        d->nodes[0] = 0;
        return true;
    }
    return fit_across(s, q, avail, false, false, d);
}

/* Whether q could ever be placed with every node usable for it (by capacity): when
 * it can, but not on the nodes it may use, it waits for suspect or excluded nodes. */
static bool held_by_marks(const policy_snapshot *s, const policy_run *q) {
    bool marked = q->elsewhere && q->n_failed_at > 0;
    for (int i = 0; i < s->n_nodes && !marked; i++)
        marked = s->nodes[i].excluded || s->nodes[i].suspect || (q->elsewhere && s->nodes[i].shunned[q->pool]);
    if (!marked) return false;
    devices_at all;
    memset(all, 0, sizeof all);
    for (int i = 0; i < s->n_nodes && i < POLICY_NODES_MAX; i++) all[i][q->pool] = s->nodes[i].capacity[q->pool];
    policy_decision probe = {0};
    if (fit(s, q, all, &probe)) return false; /* it fits where it may go, once they are free */
    policy_snapshot open = *s;
    policy_node nodes[POLICY_NODES_MAX];
    for (int i = 0; i < s->n_nodes && i < POLICY_NODES_MAX; i++) {
        nodes[i] = s->nodes[i];
        nodes[i].suspect = nodes[i].excluded = false;
        nodes[i].shunned[POOL_CPU] = nodes[i].shunned[POOL_GPU] = 0;
    }
    open.nodes = nodes;
    policy_run free_q = *q;
    free_q.n_failed_at = 0;
    return fit(&open, &free_q, all, &probe);
}

/* The devices q takes on each of d's nodes. */
static int share_of(const policy_run *q, const policy_decision *d) { return q->world_size / d->n_nodes; }

/* ---- the start order ---- */

static double usage_of(const policy_snapshot *s, int owner) {
    return owner >= 0 && owner < s->n_owners ? s->owners[owner].usage : 0.0;
}

/* Which of two queued runs comes first: <0 a, >0 b. */
static int compare_runs(const policy_snapshot *s, const policy_run *a, const policy_run *b) {
    if (a->priority != b->priority) return a->priority > b->priority ? -1 : 1;
    double ua = usage_of(s, a->owner), ub = usage_of(s, b->owner);
    if (ua != ub) return ua < ub ? -1 : 1;
    if (a->queued_ms != b->queued_ms) return a->queued_ms < b->queued_ms ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int by_order(const void *a, const void *b, void *ctx) {
    const policy_snapshot *s = ctx;
    return compare_runs(s, &s->queued[*(const int *)a], &s->queued[*(const int *)b]);
}

/* ---- preemption: whom to stop for a run ---- */

typedef struct {
    int running;     /* index into s->running */
    int devices[POLICY_NODES_MAX]; /* what it holds on each node of the snapshot (by index), in the pool */
    int here;        /* of which on this host */
    int shrinkable;  /* elastic: how many of those it may give up and go on (0: only stopped whole) */
    int64_t lost;    /* device ms its preemption would throw away (queue_policy_lost_ms) */
} victim;

int64_t queue_policy_lost_ms(const policy_snapshot *s, const policy_running *r) {
    int devices = 0;
    for (int h = 0; h < r->n_holds; h++) devices += r->holds[h].devices;
    int64_t ms = r->checkpoint_write_ms > 0 ? r->checkpoint_write_ms : 0;
    if (!r->saves_on_notice) { /* what it did since its newest checkpoint (of this attempt), else its start */
        int64_t since = r->checkpoint_ms > r->started_ms ? r->checkpoint_ms : r->started_ms;
        if (since > 0 && s->now_ms > since) ms += s->now_ms - since;
    }
    return ms * devices;
}

/* The preferred victims first: the least work lost (unless the rule is the older
 * one), then the lowest priority, then the most recently started. */
static int by_preference(const void *a, const void *b, void *ctx) {
    const policy_snapshot *s = ctx;
    const victim *va = a, *vb = b;
    const policy_running *x = &s->running[va->running];
    const policy_running *y = &s->running[vb->running];
    if (s->victims == VICTIMS_LEAST_LOST && va->lost != vb->lost) return va->lost < vb->lost ? -1 : 1;
    if (x->priority != y->priority) return x->priority < y->priority ? -1 : 1;
    if (x->started_ms != y->started_ms) return x->started_ms > y->started_ms ? -1 : 1;
    return x->id > y->id ? -1 : x->id < y->id;
}

static victim victim_of(const policy_snapshot *s, int j) {
    const policy_running *r = &s->running[j];
    victim v = {.running = j};
    for (int h = 0; h < r->n_holds; h++) {
        int i = node_index(s, r->holds[h].node);
        if (i < 0) continue;
        v.devices[i] += r->holds[h].devices;
        if (i == 0) v.here += r->holds[h].devices;
    }
    v.lost = queue_policy_lost_ms(s, r);
    int all = 0;
    for (int h = 0; h < r->n_holds; h++) all += r->holds[h].devices;
    if (!r->stopping && r->min_devices > 0 && r->n_holds == 1 && v.here == all && r->min_devices < all)
        v.shrinkable = all - r->min_devices;
    return v;
}

/* Does q fit on avail plus what the chosen victims hold? Its nodes into d. */
static bool fits_with(const policy_snapshot *s, const policy_run *q, const devices_at avail, const victim *v,
                      const bool *chosen, int n, policy_decision *d) {
    devices_at more;
    memcpy(more, avail, sizeof more);
    for (int k = 0; k < n; k++)
        for (int i = 0; chosen[k] && i < s->n_nodes && i < POLICY_NODES_MAX; i++) more[i][q->pool] += v[k].devices[i];
    return fit(s, q, more, d);
}

/* The sum of the `count` largest of v[from..n)'s devices on this host. */
static int largest_here(const victim *v, int from, int n, int count) {
    int sum = 0;
    bool *used = calloc((size_t)(n + 1), sizeof *used);
    if (!used) abort();
    for (int c = 0; c < count; c++) {
        int best = -1;
        for (int k = from; k < n; k++)
            if (!used[k] && (best < 0 || v[k].here > v[best].here)) best = k;
        if (best < 0) break;
        used[best] = true;
        sum += v[best].here;
    }
    free(used);
    return sum;
}

/* A run of this host alone, `need` more devices than it has: the fewest victims of
 * v[0..n) (in preference order) that free them, and of those sets of that size the
 * first in preference (lexicographically). Sets chosen[]; false when none does. */
static bool choose_here(const victim *v, int n, int need, bool *chosen) {
    for (int size = 1; size <= n; size++) {
        memset(chosen, 0, (size_t)n * sizeof *chosen);
        int sum = 0, from = 0, got = 0;
        for (; got < size; got++) {
            int pick = -1;
            for (int k = from; k < n && pick < 0; k++)
                if (sum + v[k].here + largest_here(v, k + 1, n, size - got - 1) >= need) pick = k;
            if (pick < 0) break;
            chosen[pick] = true;
            sum += v[pick].here;
            from = pick + 1;
        }
        if (got == size) return true;
    }
    return false;
}

/* Set `mask` of v (a run of this host alone short of `need`): its elastic runs shrunk,
 * the others stopped whole, and as few elastic ones stopped whole besides as free
 * `need` (those that free the most by it first). Their mask into *whole; returns how
 * many are stopped whole, -1 when the set cannot free `need` even stopped whole. */
static int stops_for(const victim *v, int n, uint32_t mask, int need, uint32_t *whole) {
    int sum = 0;
    *whole = 0;
    for (int k = 0; k < n; k++) {
        if (!(mask >> k & 1u)) continue;
        sum += v[k].shrinkable > 0 ? v[k].shrinkable : v[k].here;
        if (v[k].shrinkable <= 0) *whole |= 1u << k;
    }
    while (sum < need) {
        int best = -1;
        for (int k = 0; k < n; k++)
            if ((mask >> k & 1u) && !(*whole >> k & 1u) && (best < 0 || v[k].here - v[k].shrinkable >
                                                                            v[best].here - v[best].shrinkable))
                best = k;
        if (best < 0) return -1;
        *whole |= 1u << best;
        sum += v[best].here - v[best].shrinkable;
    }
    return __builtin_popcount(*whole);
}

/* A run of this host alone, `need` more devices than it has, by the work lost: of the
 * sets of v[0..n) (in preference order) that free them, a set of shrinks alone first
 * (queue_policy.h: elastic runs), then the one that loses the least, then the fewest,
 * then the fewest stopped whole, then the first in preference (lexicographically).
 * Every set is weighed up to LEAST_LOST_EXACT candidates; past that, the fewest in
 * preference order, stopped whole (choose_here: the order puts the cheapest first).
 * Sets chosen[] and gives[] (what each chosen one frees: all it holds here, or what a
 * shrink takes of it, the first shrunk in preference order taking the most). */
#define LEAST_LOST_EXACT 16
static bool choose_least_lost(const victim *v, int n, int need, bool *chosen, int *gives) {
    if (n > LEAST_LOST_EXACT) {
        bool found = choose_here(v, n, need, chosen);
        for (int k = 0; k < n; k++) gives[k] = found && chosen[k] ? v[k].here : 0;
        return found;
    }
    uint32_t best = 0, best_whole = 0;
    int64_t best_lost = 0;
    int best_count = 0, best_stops = 0;
    bool found = false;
    for (uint32_t mask = 1; mask < (1u << n); mask++) {
        int count = 0;
        int64_t lost = 0;
        for (int k = 0; k < n; k++) {
            if (!(mask >> k & 1u)) continue;
            lost += v[k].lost;
            count++;
        }
        uint32_t whole;
        int stops = stops_for(v, n, mask, need, &whole);
        if (stops < 0) continue;
        uint32_t diff = mask ^ best, first = diff & -diff; /* the most preferred run in one set only */
        bool better;
        if (!found) better = true;
        else if ((stops == 0) != (best_stops == 0)) better = stops == 0; /* shrinks alone first */
        else better = lost < best_lost || (lost == best_lost && count < best_count) ||
                      (lost == best_lost && count == best_count && stops < best_stops) ||
                      (lost == best_lost && count == best_count && stops == best_stops && (mask & first));
        if (!better) continue;
        found = true;
        best = mask;
        best_whole = whole;
        best_lost = lost;
        best_count = count;
        best_stops = stops;
    }
    int left = need;
    for (int k = 0; k < n; k++) {
        chosen[k] = found && (best >> k & 1u);
        gives[k] = 0;
        if (chosen[k] && (best_whole >> k & 1u)) left -= gives[k] = v[k].here;
    }
    for (int k = 0; k < n; k++) { /* the shrinks take what the stops left, in preference order */
        if (!chosen[k] || (best_whole >> k & 1u)) continue;
        gives[k] = left > 0 ? (left < v[k].shrinkable ? left : v[k].shrinkable) : 0;
        left -= gives[k];
        if (!gives[k]) chosen[k] = false; /* not needed after all */
    }
    return found;
}

/* A run across nodes: victims taken in preference order until it fits, then each
 * that is not needed given back, the last taken first. Not always the fewest (what
 * fits across nodes is not a sum), but never one too many. */
static bool choose_across(const policy_snapshot *s, const policy_run *q, const devices_at avail, const victim *v,
                          int n, bool *chosen, policy_decision *d) {
    memset(chosen, 0, (size_t)n * sizeof *chosen);
    int k = 0;
    for (; k < n && !fits_with(s, q, avail, v, chosen, n, d); k++) chosen[k] = true;
    if (!fits_with(s, q, avail, v, chosen, n, d)) return false;
    for (int j = k - 1; j >= 0; j--) {
        chosen[j] = false;
        if (!fits_with(s, q, avail, v, chosen, n, d)) chosen[j] = true;
    }
    return fits_with(s, q, avail, v, chosen, n, d);
}

/* The victims of v[0..n) that make q fit on avail (`forced` ones counted already): by
 * the snapshot's rule, the least work lost (an elastic run shrunk where that frees
 * enough: v[k]'s devices become what it gives up) or the fewest. */
static bool choose_victims(const policy_snapshot *s, const policy_run *q, const devices_at avail, victim *v,
                           int n, bool *chosen, policy_decision *d) {
    if (!n) return false;
    if (here_only(s, q)) {
        int need = q->world_size - avail[0][q->pool];
        if (s->victims != VICTIMS_LEAST_LOST) return choose_here(v, n, need, chosen) && fits_with(s, q, avail, v, chosen, n, d);
        int *gives = xcalloc((size_t)n + 1, sizeof *gives);
        bool some = choose_least_lost(v, n, need, chosen, gives);
        for (int k = 0; some && k < n; k++) {
            if (!chosen[k] || gives[k] >= v[k].here) continue;
            v[k].devices[0] = v[k].here = gives[k]; /* shrunk: it keeps the rest */
        }
        free(gives);
        return some && fits_with(s, q, avail, v, chosen, n, d);
    }
    return choose_across(s, q, avail, v, n, chosen, d);
}

/* ---- the decisions ---- */

typedef struct {
    const policy_snapshot *s;
    devices_at free_now; /* free now, less what this pass's starts and reservations took */
    devices_at coming;   /* held by runs being preempted that no reservation took yet */
    bool *claimed;       /* per running run: stopping for a run of this pass, or chosen to be */
    int *held;           /* per owner: what its runs hold (and this pass gave them) */
    int64_t blocker[2];  /* per pool: the first run that waits and holds its pool (0: none) */
    int64_t blocker_queued_ms[2];
    const policy_run *blocker_run[2];
    int n_started;       /* the runs this pass starts, in order: they hold devices for the runs after them */
    const policy_run **started;
    bool *started_here;  /* ... and whether on this host */
} pass;

static void set_list(policy_decision *d, const victim *v, const bool *chosen, int n, const policy_snapshot *s) {
    d->preempt = xmalloc((size_t)(n + 1) * sizeof *d->preempt);
    d->n_preempt = 0;
    for (int k = 0; k < n; k++)
        if (chosen[k]) d->preempt[d->n_preempt++] = s->running[v[k].running].id;
}

/* q takes its share of each of d's nodes: from what is free now first, then from
 * what is coming (the devices of the runs it waits for). */
static void reserve(pass *p, const policy_run *q, const policy_decision *d) {
    int share = share_of(q, d);
    for (int n = 0; n < d->n_nodes; n++) {
        int i = node_index(p->s, d->nodes[n]);
        if (i < 0) continue;
        int now = p->free_now[i][q->pool] < share ? p->free_now[i][q->pool] : share;
        p->free_now[i][q->pool] -= now;
        p->coming[i][q->pool] -= share - now;
    }
}

/* The runs being preempted (or to be) that q's pool could take: stopping ones first,
 * then, when `new_too`, the preemptible runs of a lower priority. In preference
 * order within each kind. Returns how many; *n_stopping of them stopping. */
static bool is_protected(const policy_snapshot *s, const policy_running *r) {
    return r->protected_until_ms > 0 && s->now_ms < r->protected_until_ms;
}

/* r has held its devices for a time slice and yields them to q, of its priority and
 * another owner's, preemptible itself (queue_policy.h: time slices). */
static bool slice_over(const policy_snapshot *s, const policy_running *r, const policy_run *q) {
    return s->time_slice_ms > 0 && q->preemptible && r->priority == q->priority && r->owner != q->owner &&
           r->started_ms > 0 && s->now_ms - r->started_ms >= s->time_slice_ms;
}

/* `protected_too`: with the runs still inside their minimum run time; `slice`: with
 * the runs of q's priority whose time slice is over (slice_over). */
static int gather_victims(pass *p, const policy_run *q, bool new_too, bool protected_too, bool slice, victim *v,
                          int *n_stopping) {
    const policy_snapshot *s = p->s;
    int n = 0;
    for (int j = 0; j < s->n_running; j++) {
        const policy_running *r = &s->running[j];
        if (r->pool == q->pool && r->stopping && !p->claimed[j]) v[n++] = victim_of(s, j);
    }
    *n_stopping = n;
    for (int j = 0; new_too && j < s->n_running; j++) {
        const policy_running *r = &s->running[j];
        if (r->pool == q->pool && !r->stopping && !p->claimed[j] && r->preemptible &&
            (r->priority < q->priority || (slice && slice_over(s, r, q))) && (protected_too || !is_protected(s, r)))
            v[n++] = victim_of(s, j);
    }
    qsort_r(v + *n_stopping, (size_t)(n - *n_stopping), sizeof *v, by_preference, (void *)s);
    return n;
}

/* q does not fit what is free: the runs being preempted that free enough (it waits
 * for them), else those and the fewest new ones (it preempts them). false: neither.
 * `slice`: the new ones may be runs whose time slice is over (d->time_slice then). */
static bool try_preempt(pass *p, const policy_run *q, policy_decision *d, bool slice) {
    const policy_snapshot *s = p->s;
    victim *v = xmalloc((size_t)(s->n_running + 1) * sizeof *v);
    bool *chosen = xcalloc((size_t)(s->n_running + 1), sizeof *chosen);
    devices_at avail; /* what q may take: the free and the coming */
    for (int i = 0; i < POLICY_NODES_MAX; i++)
        for (int pool = 0; pool < 2; pool++) avail[i][pool] = p->free_now[i][pool] + p->coming[i][pool];
    int n_stopping, n = gather_victims(p, q, false, false, false, v, &n_stopping);
    bool found = fit(s, q, avail, d) || choose_victims(s, q, avail, v, n, chosen, d);
    if (found) { /* the runs already stopping free enough */
        d->verb = POLICY_WAIT;
        d->wait = WAIT_PREEMPTED;
        set_list(d, v, chosen, n, s);
    } else {
        n = gather_victims(p, q, true, false, slice, v, &n_stopping);
        /* every stopping one counts; the fewest new ones on top */
        devices_at more;
        memcpy(more, avail, sizeof more);
        for (int k = 0; k < n_stopping; k++) {
            chosen[k] = true;
            for (int i = 0; i < s->n_nodes && i < POLICY_NODES_MAX; i++) more[i][q->pool] += v[k].devices[i];
        }
        found = choose_victims(s, q, more, v + n_stopping, n - n_stopping, chosen + n_stopping, d);
        for (int k = n_stopping - 1; found && k >= 0; k--) { /* a stopping one not needed stays for another */
            chosen[k] = false;
            if (!fits_with(s, q, avail, v, chosen, n, d)) chosen[k] = true;
        }
        if (found) {
            found = fits_with(s, q, avail, v, chosen, n, d); /* d's nodes for the final set */
            d->verb = POLICY_PREEMPT;
            d->preempt = xmalloc((size_t)(n + 1) * sizeof *d->preempt);
            d->preempt_to = xcalloc((size_t)(n + 1), sizeof *d->preempt_to);
            for (int k = n_stopping; k < n; k++) {
                if (!chosen[k]) continue;
                const policy_running *r = &s->running[v[k].running];
                int all = 0;
                for (int h = 0; h < r->n_holds; h++) all += r->holds[h].devices;
                d->preempt_to[d->n_preempt] = v[k].here < all ? all - v[k].here : 0; /* shrunk: what it keeps */
                d->preempt[d->n_preempt++] = r->id;
                if (r->priority >= q->priority) d->time_slice = true;
            }
        }
    }
    if (found) {
        for (int k = 0; k < n; k++) {
            if (!chosen[k]) continue;
            p->claimed[v[k].running] = true;
            for (int i = 0; i < s->n_nodes && i < POLICY_NODES_MAX; i++) p->coming[i][q->pool] += v[k].devices[i];
        }
        reserve(p, q, d);
    }
    free(v);
    free(chosen);
    return found;
}

/* q could not preempt enough: would it, were the runs inside their minimum run time
 * past it? Then it waits for those (WAIT_PROTECTED: d->preempt names them). */
static bool wait_protected(pass *p, const policy_run *q, policy_decision *d) {
    const policy_snapshot *s = p->s;
    bool any = false;
    for (int j = 0; j < s->n_running && !any; j++) {
        const policy_running *r = &s->running[j];
        any = r->pool == q->pool && !r->stopping && !p->claimed[j] && r->preemptible && r->priority < q->priority &&
              is_protected(s, r);
    }
    if (!any) return false;
    victim *v = xmalloc((size_t)(s->n_running + 1) * sizeof *v);
    bool *chosen = xcalloc((size_t)(s->n_running + 1), sizeof *chosen);
    devices_at more;
    for (int i = 0; i < POLICY_NODES_MAX; i++)
        for (int pool = 0; pool < 2; pool++) more[i][pool] = p->free_now[i][pool] + p->coming[i][pool];
    int n_stopping, n = gather_victims(p, q, true, true, false, v, &n_stopping);
    for (int k = 0; k < n_stopping; k++)
        for (int i = 0; i < s->n_nodes && i < POLICY_NODES_MAX; i++) more[i][q->pool] += v[k].devices[i];
    policy_decision probe = {0};
    bool found = choose_victims(s, q, more, v + n_stopping, n - n_stopping, chosen + n_stopping, &probe);
    if (found) {
        d->preempt = xmalloc((size_t)(n + 1) * sizeof *d->preempt);
        d->n_preempt = 0;
        for (int k = n_stopping; k < n; k++)
            if (chosen[k] && is_protected(s, &s->running[v[k].running])) d->preempt[d->n_preempt++] = s->running[v[k].running].id;
        found = d->n_preempt > 0;
        if (!found) {
            free(d->preempt);
            d->preempt = NULL;
        }
    }
    free(v);
    free(chosen);
    return found;
}

static bool over_quota(pass *p, const policy_run *q, policy_decision *d) {
    const policy_snapshot *s = p->s;
    if (q->owner < 0 || q->owner >= s->n_owners || s->owners[q->owner].max_devices < 0) return false;
    if (p->held[q->owner] + q->world_size <= s->owners[q->owner].max_devices) return false;
    d->verb = POLICY_WAIT;
    d->wait = WAIT_QUOTA;
    d->quota_used = p->held[q->owner];
    return true;
}

static void decide_one(pass *p, const policy_run *q, policy_decision *d) {
    const policy_snapshot *s = p->s;
    if (q->not_before_ms > s->now_ms) { /* its restart's backoff: it holds nothing, and none waits behind it */
        d->verb = POLICY_WAIT;
        d->wait = WAIT_BACKOFF;
        return;
    }
    if (over_quota(p, q, d)) return;
    int64_t blocker = p->blocker[q->pool];
    bool held = blocker && s->now_ms - p->blocker_queued_ms[q->pool] >= s->backfill_window_ms;
    if (held) { /* the waiting run has waited its window: what comes free is kept for it */
        d->verb = POLICY_WAIT;
        d->wait = WAIT_BEHIND;
        d->behind = blocker;
        d->behind_at = (int)(p->blocker_run[q->pool] - s->queued);
        return;
    }
    bool took = false;
    if (fit(s, q, p->free_now, d)) {
        d->verb = POLICY_START;
        d->backfill = blocker != 0;
        d->behind = blocker;
        d->behind_at = blocker ? (int)(p->blocker_run[q->pool] - s->queued) : -1;
        took = true;
    } else if (!blocker && (try_preempt(p, q, d, false) || (s->time_slice_ms > 0 && try_preempt(p, q, d, true)))) {
        took = true; /* reserve() took its devices */
    } else {
        d->verb = POLICY_WAIT;
        d->n_nodes = 0;
        if (!blocker && wait_protected(p, q, d)) d->wait = WAIT_PROTECTED;
        else d->wait = here_only(s, q) ? WAIT_THIS_HOST : WAIT_NODES;
        if (!blocker && !held_by_marks(s, q)) { /* one that waits for a node to be cleared holds nobody up */
            p->blocker[q->pool] = q->id;
            p->blocker_queued_ms[q->pool] = q->queued_ms;
            p->blocker_run[q->pool] = q;
        }
    }
    if (!took) return;
    if (d->verb == POLICY_START) {
        reserve(p, q, d);
        p->started_here[p->n_started] = !d->across;
        p->started[p->n_started++] = q;
    }
    if (q->owner >= 0 && q->owner < s->n_owners) p->held[q->owner] += q->world_size;
}


/* ---- why it waits, as a code, and for which runs ---- */

const char *pending_reason_name(pending_reason r) {
    static const char *const names[] = {
        [PENDING_NONE] = "none", [PENDING_DEVICES] = "devices", [PENDING_USER_QUOTA] = "user_quota",
        [PENDING_FAIR_SHARE] = "fair_share", [PENDING_PRIORITY] = "priority",
        [PENDING_BACKFILL_RESERVED] = "backfill_reserved", [PENDING_RESTART_BACKOFF] = "restart_backoff",
        [PENDING_PREEMPTED] = "preempted", [PENDING_SWEEP_PARALLEL] = "sweep_parallel", [PENDING_NODES] = "nodes",
        [PENDING_SLURM] = "slurm", [PENDING_SUSPECT_NODES] = "suspect_nodes", [PENDING_TIME_SLICE] = "time_slice"};
    return r >= PENDING_NONE && r <= PENDING_TIME_SLICE ? names[r] : "unknown";
}

/* d->blocked_by gains `id` (once). */
static void block_on(policy_decision *d, int64_t id, int cap) {
    for (int i = 0; i < d->n_blocked; i++)
        if (d->blocked_by[i] == id) return;
    if (d->n_blocked < cap) d->blocked_by[d->n_blocked++] = id;
}

static int by_id(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The runs that hold what q waits for: the started runs of its pool (on this host,
 * for a run of this host alone; else anywhere), and those this pass starts before it;
 * with `owner_only`, those of q's owner in both pools (its quota). */
static void block_on_holders(pass *p, const policy_run *q, policy_decision *d, bool owner_only, int cap) {
    const policy_snapshot *s = p->s;
    bool here = here_only(s, q);
    for (int j = 0; j < s->n_running; j++) {
        const policy_running *r = &s->running[j];
        bool holds = false;
        for (int h = 0; h < r->n_holds && !holds; h++) holds = r->holds[h].devices > 0 && (!here || r->holds[h].node == 0);
        if (owner_only ? r->owner == q->owner && r->n_holds > 0 : r->pool == q->pool && holds) block_on(d, r->id, cap);
    }
    for (int k = 0; k < p->n_started; k++) {
        const policy_run *r = p->started[k];
        if (owner_only ? r->owner == q->owner : r->pool == q->pool && (!here || p->started_here[k]))
            block_on(d, r->id, cap);
    }
    qsort(d->blocked_by, (size_t)d->n_blocked, sizeof *d->blocked_by, by_id);
}

/* Why q waits when nothing comes first of it: for devices here, for nodes, and so
 * after a preemption. */
static pending_reason requeued_reason(const policy_run *q) {
    return q->yielded ? PENDING_TIME_SLICE : PENDING_PREEMPTED;
}

static pending_reason base_reason(const policy_snapshot *s, const policy_run *q) {
    if (q->preempted_by) return requeued_reason(q);
    return here_only(s, q) ? PENDING_DEVICES : PENDING_NODES;
}

/* Why `first`, a run of q's pool that waits, comes before q: its priority, its
 * owner's lesser usage; or only age (then q waits for devices as it does). */
static pending_reason ahead_reason(const policy_snapshot *s, const policy_run *first, const policy_run *q) {
    if (first->priority > q->priority) return PENDING_PRIORITY;
    if (first->priority == q->priority && usage_of(s, first->owner) < usage_of(s, q->owner)) return PENDING_FAIR_SHARE;
    return base_reason(s, q);
}

/* d's reason and blocked_by, for a run that does not start now; `blocker` is the
 * first run of its pool that waited before it (NULL: none). */
static void set_reason(pass *p, const policy_run *q, const policy_run *blocker, policy_decision *d) {
    const policy_snapshot *s = p->s;
    int cap = s->n_running + p->n_started + d->n_preempt + 2;
    d->blocked_by = xmalloc((size_t)cap * sizeof *d->blocked_by);
    d->n_blocked = 0;
    if (d->verb == POLICY_PREEMPT || d->wait == WAIT_PREEMPTED) {
        d->reason = q->preempted_by ? requeued_reason(q) : PENDING_DEVICES;
        for (int i = 0; i < d->n_preempt; i++) block_on(d, d->preempt[i], cap);
        for (int j = 0; !d->n_preempt && j < s->n_running; j++) /* what another's preemption leaves over */
            if (s->running[j].stopping && s->running[j].pool == q->pool) block_on(d, s->running[j].id, cap);
        return;
    }
    if (d->wait == WAIT_PROTECTED) { /* it comes first by priority: the runs it would preempt are not yet to be */
        d->reason = PENDING_PRIORITY;
        for (int i = 0; i < d->n_preempt; i++) block_on(d, d->preempt[i], cap);
        return;
    }
    if (d->wait == WAIT_BACKOFF) {
        d->reason = PENDING_RESTART_BACKOFF;
        return;
    }
    if (d->wait == WAIT_QUOTA) {
        d->reason = PENDING_USER_QUOTA;
        block_on_holders(p, q, d, true, cap);
        return;
    }
    if (d->wait == WAIT_BEHIND) {
        policy_decision probe = {0};
        if (fit(s, q, p->free_now, &probe)) { /* it fits, but what is free is kept for the one ahead */
            d->reason = PENDING_BACKFILL_RESERVED;
            block_on(d, d->behind, cap);
            return;
        }
    }
    d->reason = blocker ? ahead_reason(s, blocker, q) : base_reason(s, q);
    if (!blocker && (d->wait == WAIT_THIS_HOST || d->wait == WAIT_NODES) && held_by_marks(s, q))
        d->reason = PENDING_SUSPECT_NODES;
    d->ahead = blocker ? blocker->id : 0;
    d->ahead_at = blocker ? (int)(blocker - s->queued) : -1;
    if (blocker) block_on(d, blocker->id, cap);
    block_on_holders(p, q, d, false, cap);
}

int queue_policy_decide(const policy_snapshot *s, policy_decision *out) {
    pass p = {.s = s};
    free_of(s, p.free_now);
    p.claimed = xcalloc((size_t)(s->n_running + 1), sizeof *p.claimed);
    p.held = xcalloc((size_t)(s->n_owners + 1), sizeof *p.held);
    p.started = xmalloc((size_t)(s->n_queued + 1) * sizeof *p.started);
    p.started_here = xmalloc((size_t)(s->n_queued + 1) * sizeof *p.started_here);
    for (int j = 0; j < s->n_running; j++) {
        const policy_running *r = &s->running[j];
        if (r->owner < 0 || r->owner >= s->n_owners) continue;
        for (int h = 0; h < r->n_holds; h++) p.held[r->owner] += r->holds[h].devices;
    }
    int *order = xmalloc((size_t)(s->n_queued + 1) * sizeof *order);
    for (int i = 0; i < s->n_queued; i++) order[i] = i;
    qsort_r(order, (size_t)s->n_queued, sizeof *order, by_order, (void *)s);
    int in_pool[2] = {0, 0};
    for (int k = 0; k < s->n_queued; k++) {
        const policy_run *q = &s->queued[order[k]];
        policy_decision *d = &out[order[k]];
        memset(d, 0, sizeof *d);
        d->run = q->id;
        d->behind_at = d->ahead_at = -1;
        d->order = k;
        d->pool_order = in_pool[q->pool]++;
        const policy_run *blocker = p.blocker_run[q->pool];
        decide_one(&p, q, d);
        if (d->verb != POLICY_START) set_reason(&p, q, blocker, d);
    }
    free(order);
    free(p.started);
    free(p.started_here);
    free(p.claimed);
    free(p.held);
    return s->n_queued;
}

/* ---- elastic runs that grow back ---- */

int queue_policy_grow(const policy_snapshot *s, const policy_decision *d, int *grow_to) {
    bool wanted[2] = {false, false}; /* per pool: a queued run waits for devices */
    for (int i = 0; i < s->n_queued; i++)
        if (d[i].verb != POLICY_WAIT || d[i].wait != WAIT_QUOTA) wanted[s->queued[i].pool] = true;
    int free_here[2] = {s->nodes[0].free[POOL_CPU], s->nodes[0].free[POOL_GPU]};
    int *held = xcalloc((size_t)(s->n_owners + 1), sizeof *held);
    for (int j = 0; j < s->n_running; j++) {
        const policy_running *r = &s->running[j];
        grow_to[j] = 0;
        for (int h = 0; r->owner >= 0 && r->owner < s->n_owners && h < r->n_holds; h++)
            held[r->owner] += r->holds[h].devices;
    }
    int grown = 0;
    for (;;) { /* the oldest (lowest id) first */
        int pick = -1, has = 0;
        for (int j = 0; j < s->n_running; j++) {
            const policy_running *r = &s->running[j];
            if (grow_to[j] || r->stopping || !r->may_grow || r->width <= 0 || r->n_holds != 1 || r->holds[0].node != 0 ||
                wanted[r->pool] || r->holds[0].devices >= r->width || free_here[r->pool] <= 0)
                continue;
            if (pick < 0 || r->id < s->running[pick].id) pick = j;
        }
        if (pick < 0) break;
        const policy_running *r = &s->running[pick];
        has = r->holds[0].devices;
        int add = r->width - has;
        if (add > free_here[r->pool]) add = free_here[r->pool];
        if (r->owner >= 0 && r->owner < s->n_owners && s->owners[r->owner].max_devices >= 0) {
            int room = s->owners[r->owner].max_devices - held[r->owner];
            if (add > room) add = room;
        }
        grow_to[pick] = add > 0 ? has + add : -1; /* -1: looked at, does not grow */
        if (add <= 0) continue;
        free_here[r->pool] -= add;
        if (r->owner >= 0 && r->owner < s->n_owners) held[r->owner] += add;
        grown++;
    }
    for (int j = 0; j < s->n_running; j++)
        if (grow_to[j] < 0) grow_to[j] = 0;
    free(held);
    return grown;
}

int queue_policy_narrow(const policy_snapshot *s, const policy_decision *d, int *start_on) {
    bool busy[2] = {false, false}; /* per pool: a decision starts or preempts */
    for (int i = 0; i < s->n_queued; i++) {
        start_on[i] = 0;
        if (d[i].verb != POLICY_WAIT) busy[s->queued[i].pool] = true;
    }
    int started = 0;
    for (int i = 0; i < s->n_queued; i++) {
        const policy_run *q = &s->queued[i];
        int free_here = s->nodes[0].free[q->pool];
        if (busy[q->pool] || d[i].verb != POLICY_WAIT || d[i].wait != WAIT_THIS_HOST || q->min_devices <= 0 ||
            q->min_devices >= q->world_size || q->nodes_wanted > 1 || free_here < q->min_devices)
            continue;
        start_on[i] = free_here < q->world_size ? free_here : q->world_size;
        busy[q->pool] = true; /* its free devices are its now */
        started++;
    }
    return started;
}

void queue_policy_free(policy_decision *d, int n) {
    for (int i = 0; i < n; i++) {
        free(d[i].preempt);
        d[i].preempt = NULL;
        free(d[i].preempt_to);
        d[i].preempt_to = NULL;
        free(d[i].blocked_by);
        d[i].blocked_by = NULL;
    }
}

/* ---- what a person reads ---- */

/* "this host 2 of 4, node-b 0 of 2": the candidates of a run across nodes and what
 * each has free now (malloc'd). */
static char *free_now(const policy_snapshot *s, pool_kind pool) {
    devices_at avail;
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

/* The devices q waits for, with what is free now. */
static char *devices_text(const policy_snapshot *s, const policy_run *q) {
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

static const char *owner_name(const policy_snapshot *s, int owner) {
    return owner >= 0 && owner < s->n_owners && s->owners[owner].name ? s->owners[owner].name : NULL;
}

/* A usage as the reasons show it: to two significant digits (whole device-seconds
 * below 100). The exact figures are GET /queue's owners; a reason written with them
 * would change every second for every queued run of an owner whose runs are running,
 * and each such change rewrites the run's entry and its tag (10,000 queued: all of
 * them, every second). */
static double shown_usage(double v) {
    if (v < 100) return round(v);
    double unit = pow(10, floor(log10(v)) - 1);
    return round(v / unit) * unit;
}

/* Why `first` comes before q: "of a higher priority (5 over 0)", "bob's usage is
 * less (120 device-seconds against 3600)", "queued earlier" (malloc'd). */
static char *why_first(const policy_snapshot *s, const policy_run *first, const policy_run *q) {
    if (first->priority != q->priority)
        return xasprintf("of a higher priority (%d over %d)", first->priority, q->priority);
    double uf = usage_of(s, first->owner), uq = usage_of(s, q->owner);
    if (uf != uq) {
        const char *who = owner_name(s, first->owner);
        return xasprintf("%s%s decayed usage is less (%.0f device-seconds against %.0f)", who ? who : "its owner",
                         who ? "'s" : "'s", shown_usage(uf), shown_usage(uq));
    }
    return xstrdup("queued earlier");
}

/* "runs 3 and 5" (malloc'd). */
static char *run_list(const int64_t *ids, int n) {
    buf_t b = {0};
    buf_printf(&b, "run%s ", n == 1 ? "" : "s");
    for (int i = 0; i < n; i++)
        buf_printf(&b, "%s%lld", i == 0 ? "" : i == n - 1 ? " and " : ", ", (long long)ids[i]);
    return b.data;
}

/* Queued run `id`, found where the decision saw it; a decision made on another
 * snapshot (whose index does not hold it) finds it by a walk. */
static const policy_run *queued_run(const policy_snapshot *s, int at, int64_t id) {
    if (at >= 0 && at < s->n_queued && s->queued[at].id == id) return &s->queued[at];
    for (int i = 0; i < s->n_queued; i++)
        if (s->queued[i].id == id) return &s->queued[i];
    return NULL;
}

char *queue_policy_waiting_for(const policy_snapshot *s, const policy_run *q, const policy_decision *d) {
    if (d->verb == POLICY_START) return NULL;
    if (d->verb == POLICY_PREEMPT || d->wait == WAIT_PREEMPTED) {
        char *who = d->n_preempt ? run_list(d->preempt, d->n_preempt) : NULL, *what = devices_text(s, q);
        if (!who) { /* what another's preemption leaves over */
            char *text = xasprintf("runs being preempted for others to stop (%s)", what);
            free(what);
            return text;
        }
        char *text = xasprintf("%s, preempted for it, to stop (%s)", who, what);
        free(who);
        free(what);
        return text;
    }
    if (d->wait == WAIT_PROTECTED) {
        int64_t until = 0;
        for (int i = 0; i < d->n_preempt; i++)
            for (int j = 0; j < s->n_running; j++)
                if (s->running[j].id == d->preempt[i] && (!until || s->running[j].protected_until_ms < until))
                    until = s->running[j].protected_until_ms;
        char *who = run_list(d->preempt, d->n_preempt), *what = devices_text(s, q);
        int64_t left_s = until > s->now_ms ? (until - s->now_ms + 999) / 1000 : 0;
        char *text = xasprintf("%s, of a lower priority, to pass %s minimum run time (min_runtime_s): the first in %lld s "
                               "(%s)", who, d->n_preempt == 1 ? "its" : "their", (long long)left_s, what);
        free(who);
        free(what);
        return text;
    }
    if (d->reason == PENDING_SUSPECT_NODES) {
        buf_t b = {0};
        for (int i = 0; i < s->n_nodes; i++) {
            const policy_node *n = &s->nodes[i];
            bool failed = failed_there(s, q, i, false) > 0;
            if (!n->excluded && !((n->suspect || failed) && q->elsewhere)) continue;
            buf_printf(&b, "%s%s (%s)", b.data ? ", " : "", n->name,
                       n->excluded ? "excluded: it failed too many runs" : n->suspect ? "suspect"
                                                                          : "its attempt failed there");
        }
        for (int i = 0; i < s->n_nodes; i++) { /* the devices it may not be given */
            const policy_node *n = &s->nodes[i];
            if (n->excluded || !q->elsewhere || n->suspect || failed_there(s, q, i, false)) continue;
            if (n->shunned[q->pool])
                buf_printf(&b, "%s%s's suspect devices", b.data ? ", " : "", n->name);
            size_t len = strlen(n->name ? n->name : "");
            for (int j = 0; len && j < q->n_failed_at; j++)
                if (strncmp(q->failed_at[j], n->name, len) == 0 && q->failed_at[j][len] == '/')
                    buf_printf(&b, "%s%s (its attempt failed there)", b.data ? ", " : "", q->failed_at[j]);
        }
        char *what = devices_text(s, q);
        char *text = xasprintf("nodes it may use: only %s would hold it (%s%s); an admin clears a node: "
                               "ddpd node clear NAME", b.data ? b.data : "marked nodes", what,
                               q->elsewhere ? "; restarted by retry_elsewhere, it goes to no suspect node or device, "
                                              "nor where it failed" : "");
        free(b.data);
        free(what);
        return text;
    }
    if (d->wait == WAIT_BACKOFF) { /* the end, not the seconds left: the text stays the same while it waits */
        char at[32];
        format_iso8601(q->not_before_ms / 1000 * 1000 + (q->not_before_ms % 1000 ? 1000 : 0), at);
        return xasprintf("its restart's backoff (distributed.restart_policy.backoff) until %s", at);
    }
    if (d->wait == WAIT_QUOTA) {
        const char *who = owner_name(s, q->owner);
        return xasprintf("%s%s quota: %d of %d devices in use", who ? who : "its owner", "'s", d->quota_used,
                         s->owners[q->owner].max_devices);
    }
    if (d->wait == WAIT_BEHIND) {
        const policy_run *first = queued_run(s, d->behind_at, d->behind);
        if (!first) return xasprintf("behind run %lld", (long long)d->behind);
        char *why = why_first(s, first, q), *what = devices_text(s, first);
        char *text = xasprintf("behind run %lld, %s, which waits for %s and has waited longer than the backfill "
                               "window (%lld s)", (long long)d->behind, why, what,
                               (long long)(s->backfill_window_ms / 1000));
        free(why);
        free(what);
        return text;
    }
    return devices_text(s, q);
}

char *queue_policy_pending_detail(const policy_snapshot *s, const policy_run *q, const policy_decision *d) {
    return queue_policy_detail_of(s, q, d, queue_policy_waiting_for(s, q, d));
}

char *queue_policy_detail_of(const policy_snapshot *s, const policy_run *q, const policy_decision *d, char *waiting) {
    if ((d->reason != PENDING_PRIORITY && d->reason != PENDING_FAIR_SHARE) || d->wait == WAIT_BEHIND || !d->ahead)
        return waiting;
    const policy_run *first = queued_run(s, d->ahead_at, d->ahead);
    if (!first) return waiting;
    char *why = why_first(s, first, q);
    char *text = xasprintf("behind run %lld, %s, which waits too; then %s", (long long)d->ahead, why,
                           waiting ? waiting : "nothing");
    free(why);
    free(waiting);
    return text;
}

bool queue_policy_can_place(const policy_snapshot *s, const policy_run *q, char *err, size_t errlen) {
    if (q->nodes_wanted > 0 && q->world_size % q->nodes_wanted != 0) {
        snprintf(err, errlen, "distributed.nodes %d does not divide world_size %d: every node runs as many ranks",
                 q->nodes_wanted, q->world_size);
        return false;
    }
    if (here_only(s, q)) return true;
    devices_at avail = {{0}};
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

/* Which part of a failed run across nodes is to blame: see part_blame.h. */
#include "part_blame.h"

#include <string.h>

#include "peer_loss.h"

bool part_failed_on_its_own(const part_fate *f) {
    bool by_the_stop = f->stop && f->end_t >= f->stop_t && f->reason && strncmp(f->reason, "canceled by", 11) == 0;
    return f->exit_code != 0 && !by_the_stop;
}

/* Whether part p is a likelier cause of the run's failure than part q. */
static bool likelier_cause(const part_fate *p, const part_fate *q) {
    bool p_failed = part_failed_on_its_own(p), q_failed = part_failed_on_its_own(q);
    if (p_failed != q_failed) return p_failed;
    bool p_own = !says_peer_lost(p->reason), q_own = !says_peer_lost(q->reason);
    if (p_own != q_own) return p_own;
    return p->end_t < q->end_t;
}

int part_to_blame(const part_fate *parts, int n) {
    int blamed = -1;
    for (int i = 0; i < n; i++) {
        if (parts[i].exit_code == 0) continue;
        if (blamed < 0 || likelier_cause(&parts[i], &parts[blamed])) blamed = i;
    }
    return blamed;
}

/* At most one log line per interval: see log_limit.h. */
#include "log_limit.h"

#include "clock.h"

bool log_limit_now(log_limit *l, int64_t interval_ms, uint64_t *skipped) {
    int64_t now = mono_ms();
    int64_t next = atomic_load(&l->next_ms);
    if (now < next || !atomic_compare_exchange_strong(&l->next_ms, &next, now + interval_ms)) {
        atomic_fetch_add(&l->skipped, 1);
        return false;
    }
    *skipped = atomic_exchange(&l->skipped, 0);
    return true;
}

/* What a run may hold beyond its devices: see run_limits.h. */
#include "run_limits.h"

#include <math.h>
#include <stdio.h>

#include "byte_size.h"
#include "disk_use.h"
#include "users.h"

#define GIB 1073741824.0

int64_t run_memory_asked(const json_t *config) {
    const json_t *gb = json_object_get(json_object_get(config, "resources"), "memory_gb");
    double v = json_is_number(gb) ? json_number_value(gb) : 0;
    return v > 0 && isfinite(v) ? (int64_t)(v * GIB) : 0;
}

/* "alice", "the server's token" */
static const char *who_words(const caller *who) {
    return who->kind == CALLER_USER ? who->name : who->kind == CALLER_ADMIN_TOKEN ? "the server's token" : "anybody";
}

void run_limits_permitted(const json_t *config, const caller *who, schema_errors *errs) {
    int64_t asked = run_memory_asked(config);
    char a[32], m[32];
    if (!who->admin && who->max_memory_bytes >= 0 && asked > who->max_memory_bytes)
        schema_errors_add(errs, "/resources/memory_gb",
                          "asks for %s of memory but %s may give a run at most %s (ddpd user set %s --max-memory-gb, "
                          "which an admin sets): ask for less, or leave resources.memory_gb out for the server's "
                          "default", byte_size_format((uint64_t)asked, a, sizeof a), who_words(who),
                          byte_size_format((uint64_t)who->max_memory_bytes, m, sizeof m), who_words(who));
    char why[512];
    if (who->kind == CALLER_USER && disk_use_over(who->name, who->max_disk_bytes, why, sizeof why))
        schema_errors_add(errs, "", "%s: delete runs you no longer need (DELETE /runs/{id}, ddpctl delete), or ask an "
                          "admin for a larger quota, then submit again", why);
}

int64_t run_memory_limit(int64_t asked, const char *owner, pool_kind pool, int devices, int world_size,
                         int64_t per_device, char *from, size_t fromlen) {
    int64_t limit;
    char per[32];
    if (asked > 0) {
        limit = world_size > 0 ? asked / world_size * devices : asked; /* a part across nodes: its share */
        snprintf(from, fromlen, "resources.memory_gb");
    } else {
        if (per_device <= 0) return 0;
        limit = per_device * devices;
        snprintf(from, fromlen, "ddpd serve --run-memory-per-slot: %s x %d %s",
                 byte_size_format((uint64_t)per_device, per, sizeof per), devices,
                 devices == 1 ? (pool == POOL_GPU ? "GPU" : "CPU slot") : pool_unit(pool));
    }
    user_info u;
    int64_t max = owner && users_find(owner, &u) && !u.admin ? users_gb_bytes(u.max_memory_gb) : -1;
    if (max >= 0 && limit > max) {
        limit = max;
        snprintf(from, fromlen, "%s's --max-memory-gb (ddpd user set %s --max-memory-gb)", owner, owner);
    }
    return limit;
}

long run_pids_limit(long configured, int devices) {
    return configured >= 0 ? configured : devices > 4 ? 1024L * devices : 4096;
}

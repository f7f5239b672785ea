/* This host's devices: see device_pool.h. */
#include "device_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

const char *pool_name(pool_kind pool) { return pool == POOL_GPU ? "gpu" : "cpu"; }
const char *pool_unit(pool_kind pool) { return pool == POOL_GPU ? "GPUs" : "CPU slots"; }

void device_pool_init(device_pool *d, char **gpus, int n_gpus, int slots) {
    d->count[POOL_CPU] = slots;
    d->count[POOL_GPU] = n_gpus;
    d->gpus = gpus;
    d->owner[POOL_CPU] = calloc((size_t)(slots > 0 ? slots : 1), sizeof(int64_t));
    d->owner[POOL_GPU] = calloc((size_t)(n_gpus > 0 ? n_gpus : 1), sizeof(int64_t));
    if (!d->owner[POOL_CPU] || !d->owner[POOL_GPU]) abort();
}

int device_pool_capacity(const device_pool *d, pool_kind pool) { return d->count[pool]; }

int device_pool_free(const device_pool *d, pool_kind pool) {
    int n = 0;
    for (int i = 0; i < d->count[pool]; i++) n += d->owner[pool][i] == 0;
    return n;
}

void device_name(pool_kind pool, const char *node, const char *gpu, int i, char *out, size_t n) {
    char dev[100];
    if (pool == POOL_GPU) snprintf(dev, sizeof dev, "gpu:%.90s", gpu);
    else snprintf(dev, sizeof dev, "cpu:%d", i);
    if (node) snprintf(out, n, "%.63s/%s", node, dev);
    else snprintf(out, n, "%s", dev);
}

void device_pool_take(device_pool *d, pool_kind pool, int n, int64_t run, const bool *last, int *devices,
                      buf_t *names, buf_t *json, buf_t *visible) {
    for (int pass = 0, k = 0; pass < 2; pass++)
        for (int i = 0; k < n && i < d->count[pool]; i++) {
            if (d->owner[pool][i] || (last && last[i]) != pass) continue;
            d->owner[pool][i] = run;
            devices[k] = i;
            const char *label = pool == POOL_GPU ? d->gpus[i] : NULL;
            char name[200];
            device_name(pool, NULL, label, i, name, sizeof name);
            buf_printf(names, "%s%s", names->len ? ", " : "", name);
            /* device names are digits, letters, '-', '.' and ':' (GPU UUIDs, node names): no escaping needed */
            buf_printf(json, "%s\"%s\"", json->len > 1 ? "," : "", name);
            if (label) buf_printf(visible, "%s%s", visible->len ? "," : "", label);
            k++;
        }
}

void device_pool_take_named(device_pool *d, pool_kind pool, int64_t run, const json_t *names, int n) {
    for (int k = 0; k < n; k++) {
        const char *name = json_string_value(json_array_get(names, (size_t)k));
        int found = -1;
        for (int i = 0; name && found < 0 && i < d->count[pool]; i++) {
            char mine[160];
            if (pool == POOL_GPU) snprintf(mine, sizeof mine, "gpu:%s", d->gpus[i]);
            else snprintf(mine, sizeof mine, "cpu:%d", i);
            if (strcmp(mine, name) == 0 && d->owner[pool][i] == 0) found = i;
        }
        if (found >= 0) d->owner[pool][found] = run;
        else log_warn("run %lld: its device %s is not one this server has free: it is not counted", (long long)run,
                      name ? name : "(none)");
    }
}

void device_pool_release(device_pool *d, pool_kind pool, int64_t run) {
    for (int i = 0; i < d->count[pool]; i++)
        if (d->owner[pool][i] == run) d->owner[pool][i] = 0;
}

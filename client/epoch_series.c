/* A run's per-epoch series for ddpctl show: see epoch_series.h. */
#include "epoch_series.h"

#include <stdio.h>
#include <string.h>

#include "client_http.h"

#define PREFIX "epoch:"

/* "/runs/ID/metrics?key=epoch%3ANAME&max_points=10000000" (name percent-encoded). */
static void series_path(char *path, size_t len, long long id, const char *key) {
    size_t at = (size_t)snprintf(path, len, "/runs/%lld/metrics?max_points=10000000&key=", id);
    for (const unsigned char *p = (const unsigned char *)key; *p && at + 4 < len; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-_.~", *p))
            path[at++] = (char)*p;
        else at += (size_t)snprintf(path + at, len - at, "%%%02X", *p);
    }
    path[at] = '\0';
}

json_t *epoch_series_get(long long id) {
    json_t *out = json_object();
    char path[512];
    snprintf(path, sizeof path, "/runs/%lld/metrics?key=loss&max_points=3", id);
    int ec;
    json_t *first = get_json(path, &ec);
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(first, "keys"), i, k) {
        const char *key = json_string_value(k);
        if (!key || strncmp(key, PREFIX, strlen(PREFIX)) != 0 || json_object_size(out) >= EPOCH_SERIES_SHOWN) continue;
        series_path(path, sizeof path, id, key);
        json_t *s = get_json(path, &ec);
        json_t *by_epoch = json_object();
        size_t j;
        json_t *pt;
        json_array_foreach(json_object_get(s, "points"), j, pt) {
            char e[24];
            snprintf(e, sizeof e, "%lld", (long long)json_integer_value(json_array_get(pt, 0)));
            json_object_set(by_epoch, e, json_array_get(pt, 1));
        }
        json_object_set_new(out, key + strlen(PREFIX), by_epoch);
        json_decref(s);
    }
    json_decref(first);
    return out;
}

void epoch_series_cell(const json_t *series, const char *name, long long epoch, char *out, size_t n) {
    char e[24];
    snprintf(e, sizeof e, "%lld", epoch);
    const json_t *v = json_object_get(json_object_get(series, name), e);
    if (json_is_number(v)) snprintf(out, n, "%.4g", json_number_value(v));
    else snprintf(out, n, "-");
}

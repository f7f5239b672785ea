/* GPU discovery without CUDA and CUDA_VISIBLE_DEVICES' rules: see gpu_devices.h. */
#include "gpu_devices.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies the value of "Key:   value" from `line` when it starts with `key`. */
static void take_field(const char *line, const char *key, char *out, size_t outlen) {
    size_t k = strlen(key);
    if (strncmp(line, key, k) != 0) return;
    const char *v = line + k;
    while (*v == ' ' || *v == '\t') v++;
    size_t n = strcspn(v, "\r\n");
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    snprintf(out, outlen, "%.*s", (int)n, v);
}

static void read_information(const char *dir, const char *bus, gpu_info *g) {
    char path[1024], line[512];
    snprintf(path, sizeof path, "%s/%s/information", dir, bus);
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        take_field(line, "Model:", g->model, sizeof g->model);
        take_field(line, "GPU UUID:", g->uuid, sizeof g->uuid);
    }
    fclose(f);
}

static int by_bus_id(const void *a, const void *b) {
    return strcmp(((const gpu_info *)a)->bus_id, ((const gpu_info *)b)->bus_id);
}

static int scan_proc(gpu_present *p, const char *proc_dir) {
    DIR *d = opendir(proc_dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && p->count < GPU_MAX) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof p->gpu[0].bus_id) continue; /* not a bus id */
        gpu_info *g = &p->gpu[p->count++];
        memset(g, 0, sizeof *g);
        snprintf(g->bus_id, sizeof g->bus_id, "%.*s", (int)sizeof g->bus_id - 1, e->d_name);
    }
    closedir(d);
    qsort(p->gpu, (size_t)p->count, sizeof p->gpu[0], by_bus_id);
    for (int i = 0; i < p->count; i++) read_information(proc_dir, p->gpu[i].bus_id, &p->gpu[i]);
    if (p->count) snprintf(p->source, sizeof p->source, "%d GPU%s listed in %s", p->count, p->count > 1 ? "s" : "",
                           proc_dir);
    return p->count;
}

/* "nvidia0", "nvidia12": the per-GPU device nodes (not nvidiactl, nvidia-uvm...). */
static int is_gpu_node(const char *name) {
    if (strncmp(name, "nvidia", 6) != 0 || !name[6]) return 0;
    for (const char *c = name + 6; *c; c++)
        if (!isdigit((unsigned char)*c)) return 0;
    return 1;
}

static int scan_dev(gpu_present *p, const char *dev_dir) {
    DIR *d = opendir(dev_dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && p->count < GPU_MAX)
        if (is_gpu_node(e->d_name)) memset(&p->gpu[p->count++], 0, sizeof p->gpu[0]);
    closedir(d);
    if (p->count) snprintf(p->source, sizeof p->source, "%d /dev/nvidiaN node%s in %s", p->count,
                           p->count > 1 ? "s" : "", dev_dir);
    return p->count;
}

int gpu_present_scan(gpu_present *p, const char *proc_dir, const char *dev_dir) {
    memset(p, 0, sizeof *p);
    if (scan_proc(p, proc_dir) > 0) return p->count;
    p->count = 0;
    if (scan_dev(p, dev_dir) > 0) return p->count;
    snprintf(p->source, sizeof p->source, "no NVIDIA GPU on this host: nothing in %s, no %s/nvidiaN", proc_dir, dev_dir);
    return 0;
}

int gpu_present_scan_host(gpu_present *p) { return gpu_present_scan(p, "/proc/driver/nvidia/gpus", "/dev"); }

/* Parses a whole token as a non-negative decimal index; -1 if it is not one. */
static int parse_index(const char *t) {
    if (!*t) return -1;
    long v = 0;
    for (const char *c = t; *c; c++) {
        if (!isdigit((unsigned char)*c)) return -1;
        v = v * 10 + (*c - '0');
        if (v > 1000000) return -1;
    }
    return (int)v;
}

/* The present GPU whose UUID starts with `t` ("GPU-..."): its index, -1 when none
 * matches, -2 when several do (an ambiguous prefix), -3 when UUIDs are unknown. */
static int find_uuid(const gpu_present *p, const char *t) {
    int found = -1, known = 0;
    for (int i = 0; i < p->count; i++) {
        if (!p->gpu[i].uuid[0]) continue;
        known = 1;
        if (strncmp(p->gpu[i].uuid, t, strlen(t)) == 0) {
            if (found >= 0) return -2;
            found = i;
        }
    }
    return known ? found : -3;
}

void gpu_visible_resolve(const char *cvd, const gpu_present *p, gpu_visible *v) {
    memset(v, 0, sizeof *v);
    if (!cvd) {
        v->count = p->count;
        for (int i = 0; i < p->count; i++) v->physical[i] = i;
        snprintf(v->note, sizeof v->note, "%s, CUDA_VISIBLE_DEVICES unset", p->source);
        return;
    }
    char list[1024];
    snprintf(list, sizeof list, "%s", cvd);
    int used[GPU_MAX] = {0};
    const char *stop = NULL;
    char *save = NULL, stop_copy[128] = "";
    int any_token = 0;
    for (char *t = strtok_r(list, ",", &save); t && v->count < GPU_MAX; t = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*t)) t++;
        char *end = t + strlen(t);
        while (end > t && isspace((unsigned char)end[-1])) *--end = '\0';
        if (!*t) continue;
        any_token = 1;
        int phys = -1, ok = 0;
        if (strncmp(t, "MIG-", 4) == 0) {
            ok = p->count > 0; /* a MIG instance of some GPU: usable, but not mappable here */
        } else if (strncmp(t, "GPU-", 4) == 0) {
            int i = find_uuid(p, t);
            if (i >= 0) phys = i, ok = 1;
            else if (i == -3) ok = p->count > 0; /* UUIDs unknown (only /dev seen): trust it */
        } else {
            int i = parse_index(t);
            if (i >= 0 && i < p->count) phys = i, ok = 1;
        }
        if (ok && phys >= 0 && used[phys]) ok = 0;
        if (!ok) {
            snprintf(stop_copy, sizeof stop_copy, "%s", t);
            stop = stop_copy;
            break;
        }
        if (phys >= 0) used[phys] = 1;
        v->physical[v->count++] = phys;
    }
    if (!any_token) {
        snprintf(v->note, sizeof v->note, "CUDA_VISIBLE_DEVICES is set but empty, which hides every GPU");
        return;
    }
    snprintf(v->note, sizeof v->note, "CUDA_VISIBLE_DEVICES=%s; %s", cvd, p->source);
    if (stop) {
        size_t n = strlen(v->note);
        snprintf(v->note + n, sizeof v->note - n,
                 "; entry '%s' is not a GPU of this host (or repeats one): CUDA ignores it and every entry after it",
                 stop);
    }
}

int gpu_rank_device(const gpu_visible *v, int rank, int *cuda_ordinal, int *physical) {
    if (rank < 0 || rank >= v->count) return -1;
    *cuda_ordinal = rank; /* the visible set is already restricted and ordered */
    *physical = v->physical[rank];
    return 0;
}

void gpu_device_label(const gpu_visible *v, const gpu_present *p, int rank, const char *name, char *out,
                      size_t outlen) {
    int ordinal = rank, physical = -1;
    if (gpu_rank_device(v, rank, &ordinal, &physical) != 0) physical = -1;
    const char *model = name && name[0] ? name : (physical >= 0 ? p->gpu[physical].model : "");
    snprintf(out, outlen, "cuda:%d%s%s", physical >= 0 ? physical : ordinal, model[0] ? " " : "", model);
}

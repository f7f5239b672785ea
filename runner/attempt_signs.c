/* What an attempt left behind: see attempt_signs.h. */
#include "attempt_signs.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "byte_size.h"
#include "keyed_file.h"
#include "run_dir.h"

#define JOURNAL_SCAN_MAX (64LL << 20) /* an attempt's events read at most: the newest this many bytes */

void attempt_output_tail(const char *run_dir, int rank, long long from, char *out, size_t n) {
    out[0] = '\0';
    char path[PATH_MAX], rel[64];
    snprintf(rel, sizeof rel, RUN_DIR_RANK_LOG, rank);
    snprintf(path, sizeof path, "%s/%s", run_dir, rel);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0) return;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return;
    }
    long long want = (long long)(n - 1) < ATTEMPT_TAIL_BYTES ? (long long)(n - 1) : ATTEMPT_TAIL_BYTES;
    long long at = st.st_size - want;
    if (at < from) at = from;
    if (at < 0) at = 0;
    ssize_t got = at < st.st_size ? pread(fd, out, (size_t)(st.st_size - at), at) : 0;
    close(fd);
    out[got > 0 ? got : 0] = '\0';
    for (ssize_t i = 0; i < got; i++)
        if (!out[i]) out[i] = ' '; /* a NUL in the output does not end it */
}

static void limit_of(const char *path, char *limit, size_t n) {
    FILE *f = fopen(path, "re");
    char text[64] = "";
    if (f) {
        if (!fgets(text, sizeof text, f)) text[0] = '\0';
        fclose(f);
    }
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || v == 0 || v >= (1ULL << 62)) return; /* "max", or v1's "no limit" */
    byte_size_format((uint64_t)v, limit, n);
}

long attempt_cgroup_oom_kills(char *limit, size_t n) {
    limit[0] = '\0';
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return -1;
    char line[1024], v2[PATH_MAX] = "", v1[PATH_MAX] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "0::", 3) == 0) snprintf(v2, sizeof v2, "%s", line + 3);
        char *c = strchr(line, ':'), *d = c ? strchr(c + 1, ':') : NULL;
        if (c && d) {
            *d = '\0';
            for (char *w = strtok(c + 1, ","); w; w = strtok(NULL, ","))
                if (strcmp(w, "memory") == 0) snprintf(v1, sizeof v1, "%s", d + 1);
        }
    }
    fclose(f);
    char path[PATH_MAX + 64];
    if (v1[0]) {
        snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", v1);
        limit_of(path, limit, n);
        snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.oom_control", v1);
        return keyed_file_value(path, "oom_kill");
    }
    if (!v2[0]) return -1;
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", v2);
    limit_of(path, limit, n);
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.events", v2);
    return keyed_file_value(path, "oom_kill");
}

long long attempt_journal_size(const char *run_dir) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" RUN_DIR_JOURNAL, run_dir);
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

void attempt_journal_progress(const char *run_dir, long long from, long long *max_step, int *checkpointed) {
    *max_step = -1;
    *checkpointed = 0;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" RUN_DIR_JOURNAL, run_dir);
    FILE *f = fopen(path, "re");
    if (!f) return;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && st.st_size - from > JOURNAL_SCAN_MAX) from = st.st_size - JOURNAL_SCAN_MAX;
    if (fseeko(f, from, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (!strstr(line, "\"global_step\"")) continue; /* most lines: no parse */
        json_t *ev = json_loadb(line, (size_t)len, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        json_t *rank = json_object_get(ev, "rank"), *step = json_object_get(ev, "global_step");
        if (type && json_is_integer(rank) && json_integer_value(rank) >= 0) {
            /* a reporter's step is a metric with a global_step; the built-in trainer's a step */
            bool stepped = strcmp(type, "step") == 0 || strcmp(type, "metric") == 0;
            if (stepped && json_is_integer(step) && json_integer_value(step) > *max_step)
                *max_step = json_integer_value(step);
            if (strcmp(type, "checkpoint") == 0) *checkpointed = 1;
        }
        json_decref(ev);
    }
    free(line);
    fclose(f);
}

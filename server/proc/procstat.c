/* Reading /proc/PID/stat and cmdline: see procstat.h. */
#include "procstat.h"

#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long proc_read(pid_t pid, const char *what, char *buf, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

int proc_each(bool (*fn)(pid_t pid, const proc_stat *ps, void *ctx), void *ctx) {
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int called = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        proc_stat ps;
        if (proc_stat_read(pid, &ps) != 0) continue;
        called++;
        if (!fn(pid, &ps, ctx)) break;
    }
    closedir(d);
    return called;
}

int proc_each_child(bool (*fn)(pid_t pid, const proc_stat *ps, void *ctx), void *ctx) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return 0;
    int called = 0;
    bool more = true;
    struct dirent *e;
    while (more && (e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d/children", atoi(e->d_name));
        FILE *f = fopen(path, "re");
        int pid;
        while (f && more && fscanf(f, "%d", &pid) == 1) {
            proc_stat ps;
            if (proc_stat_read((pid_t)pid, &ps) != 0) continue;
            called++;
            more = fn((pid_t)pid, &ps, ctx);
        }
        if (f) fclose(f);
    }
    closedir(d);
    return called;
}

int proc_stat_read(pid_t pid, proc_stat *out) {
    char text[2048];
    if (proc_read(pid, "stat", text, sizeof text) < 0) return -1;
    /* pid (comm) state ppid pgrp ...: the command name may hold spaces and ')' */
    char *rp = strrchr(text, ')');
    if (!rp) return -1;
    int ppid, pgrp;
    char state;
    uint64_t start;
    /* after state: ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
     * utime stime cutime cstime priority nice num_threads itrealvalue starttime */
    if (sscanf(rp + 1, " %c %d %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %" SCNu64,
               &state, &ppid, &pgrp, &start) != 4)
        return -1;
    *out = (proc_stat){.state = state, .ppid = ppid, .pgrp = pgrp, .start_time = start};
    return 0;
}

bool proc_is_alive(pid_t pid, uint64_t start_time) {
    proc_stat st;
    return pid > 0 && proc_stat_read(pid, &st) == 0 && st.start_time == start_time && st.state != 'Z' &&
           st.state != 'X';
}

bool proc_cmdline_has(pid_t pid, const char *arg) {
    char buf[8192];
    long got = proc_read(pid, "cmdline", buf, sizeof buf);
    size_t n = got < 0 ? 0 : (size_t)got;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strcmp(buf + i, arg) == 0) return true;
    return false;
}

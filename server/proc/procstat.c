/* Reading /proc/PID/stat and cmdline: see procstat.h. */
#include "procstat.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int proc_stat_read(pid_t pid, proc_stat *out) {
    char path[64], text[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
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
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strcmp(buf + i, arg) == 0) return true;
    return false;
}

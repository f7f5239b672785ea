/* What /proc says of a process: its state, parent, process group and the time it
 * started (clock ticks after boot), from /proc/PID/stat; whether its command line
 * holds an argument. A pid alone does not name a process for long: the pid and its
 * start time together do. */
#ifndef DDPD_LIB_PROCSTAT_H
#define DDPD_LIB_PROCSTAT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    char state;          /* R, S, D, Z (exited, not yet reaped), T, ... */
    pid_t ppid, pgrp;
    uint64_t start_time; /* clock ticks after boot */
} proc_stat;

/* 0 with *out filled, or -1 when there is no such process (or /proc cannot say). */
int proc_stat_read(pid_t pid, proc_stat *out);

/* The process `pid` that started at `start_time` is there and has not exited (a
 * zombie has). */
bool proc_is_alive(pid_t pid, uint64_t start_time);

/* /proc/PID/cmdline holds `arg` as one of its arguments (its first 8 KiB). */
bool proc_cmdline_has(pid_t pid, const char *arg);

#endif

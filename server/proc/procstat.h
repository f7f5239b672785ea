/* What /proc says of a process: its state, parent, process group and the time it
 * started (clock ticks after boot), from /proc/PID/stat; whether its command line
 * holds an argument. A pid alone does not name a process for long: the pid and its
 * start time together do. */
#ifndef DDPD_SERVER_PROC_PROCSTAT_H
#define DDPD_SERVER_PROC_PROCSTAT_H

#include <stdbool.h>
#include <stddef.h>
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

/* /proc/PID/`what` (its first size - 1 bytes) into buf, NUL-terminated: the bytes
 * read, or -1 when it cannot be read (no such process, another account's). */
long proc_read(pid_t pid, const char *what, char *buf, size_t size);

/* Calls fn for every process /proc lists (with its stat) until fn returns false;
 * returns how many fn was called for. */
int proc_each(bool (*fn)(pid_t pid, const proc_stat *ps, void *ctx), void *ctx);

/* The same for this process's own children alone (every thread's, as
 * /proc/self/task/TID/children lists them: those it started and, as a child
 * subreaper, those handed to it), without reading the rest of /proc. */
int proc_each_child(bool (*fn)(pid_t pid, const proc_stat *ps, void *ctx), void *ctx);

#endif

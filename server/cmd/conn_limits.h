/* The HTTP side's limits as serve applies them: each from its flag (or DDPD_*
 * variable), else a default sized to the file descriptors this process may open,
 * which it first raises to its hard limit (at most 65536) as a server should. Every
 * HTTP connection is a descriptor, and an event stream replaying history holds a
 * database connection (three: the file, its WAL and its shared memory) while it
 * does; the defaults leave room for those, the database, the logs and the runs.
 * Limits set by hand that could need more descriptors than there are get a warning
 * naming both numbers. */
#ifndef DDPD_SERVER_CMD_CONN_LIMITS_H
#define DDPD_SERVER_CMD_CONN_LIMITS_H

#include <stddef.h>

#include "conn_guard.h"
#include "settings.h"

typedef struct {
    conn_guard_limits http;
    unsigned idle_timeout_s;
    unsigned max_streams, streams_per_address;
    unsigned long long fd_limit; /* RLIMIT_NOFILE, raised */
    unsigned long long fd_need;  /* about what the limits can take, at their worst */
} conn_plan;

/* The limits (the settings' bounds are settings.c's). `threads`: HTTP threads (each
 * has a database connection); `runs_fds`: what the runs may hold (their ingest
 * connections, pipes and logs). */
void conn_plan_make(const settings *o, unsigned threads, unsigned runs_fds, conn_plan *out);

/* "at most 425 connections (+16 for loopback), 64 per address; headers within 10 s,
 * idle 30 s; 147 event streams, 16 per address; 1024 file descriptors" */
void conn_plan_describe(const conn_plan *p, char *out, size_t size);

#endif

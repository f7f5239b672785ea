/* The HTTP side's limits from the settings and the descriptor limit: see
 * conn_limits.h. */
#include "conn_limits.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#define FD_RAISE_TO 65536ull
#define FD_BASE 128u          /* the database, the logs, epoll and event descriptors, the state dir lock */
#define FDS_PER_DB 3u         /* a SQLite connection in WAL mode: the file, -wal, -shm */
/* the caps of the defaults sized to the descriptors (the fixed ones are settings.c's) */
#define DEFAULT_MAX_CONNECTIONS 4096u
#define DEFAULT_RESERVED 16u
#define DEFAULT_MAX_STREAMS 1024u
#define DEFAULT_STREAMS_PER_ADDRESS 16u

/* A setting's value, else (OPT_UNSET) the default computed for it. */
static unsigned or_default(int v, unsigned dflt) { return v == OPT_UNSET ? dflt : (unsigned)v; }

static unsigned long long raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > FD_RAISE_TO ? FD_RAISE_TO : rl.rlim_max;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        struct rlimit raised = {want, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl.rlim_cur = want;
    }
    return rl.rlim_cur == RLIM_INFINITY ? FD_RAISE_TO : (unsigned long long)rl.rlim_cur;
}

static unsigned clamp(unsigned long long v, unsigned lo, unsigned hi) { return v < lo ? lo : v > hi ? hi : (unsigned)v; }

void conn_plan_make(const settings *o, unsigned threads, unsigned runs_fds, conn_plan *p) {
    memset(p, 0, sizeof *p);
    p->fd_limit = raise_fd_limit();
    unsigned long long fixed = FD_BASE + (unsigned long long)FDS_PER_DB * threads + runs_fds;
    unsigned long long budget = p->fd_limit > fixed + 64 ? p->fd_limit - fixed : 64;
    /* half the budget for connections, the rest for what streams replaying hold */
    p->http.reserved = or_default(o->reserved_connections, clamp(budget / 16, 1, DEFAULT_RESERVED));
    p->http.max_connections = or_default(
        o->max_connections,
        clamp(budget / 2 > p->http.reserved ? budget / 2 - p->http.reserved : 1, 8, DEFAULT_MAX_CONNECTIONS));
    p->http.per_address = (unsigned)o->max_connections_per_address;
    p->http.header_timeout_s = (unsigned)o->header_timeout;
    p->idle_timeout_s = (unsigned)o->idle_timeout;
    unsigned streams_dflt = clamp(budget / (2 * FDS_PER_DB), 4, DEFAULT_MAX_STREAMS);
    if (streams_dflt > p->http.max_connections) streams_dflt = p->http.max_connections;
    p->max_streams = or_default(o->max_streams, streams_dflt);
    p->streams_per_address = or_default(o->max_streams_per_address, DEFAULT_STREAMS_PER_ADDRESS < p->max_streams
                                                                        ? DEFAULT_STREAMS_PER_ADDRESS
                                                                        : p->max_streams);
    p->fd_need = fixed + p->http.max_connections + p->http.reserved + (unsigned long long)FDS_PER_DB * p->max_streams;
}

void conn_plan_describe(const conn_plan *p, char *out, size_t size) {
    snprintf(out, size,
             "at most %u connections (+%u for loopback), %u per address; headers within %u s, idle %u s; %u event "
             "streams, %u per address; %llu file descriptors",
             p->http.max_connections, p->http.reserved, p->http.per_address, p->http.header_timeout_s,
             p->idle_timeout_s, p->max_streams, p->streams_per_address, p->fd_limit);
}

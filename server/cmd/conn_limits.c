/* The HTTP side's limits from the settings and the descriptor limit: see
 * conn_limits.h. */
#include "conn_limits.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define FD_RAISE_TO 65536ull
#define FD_BASE 128u          /* the database, the logs, epoll and event descriptors, the state dir lock */
#define FDS_PER_DB 3u         /* a SQLite connection in WAL mode: the file, -wal, -shm */
#define DEFAULT_MAX_CONNECTIONS 4096u
#define DEFAULT_RESERVED 16u
#define DEFAULT_PER_ADDRESS 64u
#define DEFAULT_HEADER_TIMEOUT_S 10u
#define DEFAULT_IDLE_TIMEOUT_S 30u
#define DEFAULT_MAX_STREAMS 1024u
#define DEFAULT_STREAMS_PER_ADDRESS 16u

/* A flag's value: 1 (unset: `dflt`), or 0 with err. */
static int number(const char *flag, const char *v, unsigned dflt, unsigned min, unsigned max, unsigned *out,
                  char *err, size_t errlen) {
    if (!v || !*v) {
        *out = dflt;
        return 1;
    }
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (*end || errno || v[0] == '-' || n < min || n > max) {
        snprintf(err, errlen, "%s must be an integer from %u to %u (got \"%s\")", flag, min, max, v);
        return 0;
    }
    *out = (unsigned)n;
    return 1;
}

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

int conn_plan_make(const settings *o, unsigned threads, unsigned runs_fds, conn_plan *p, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    p->fd_limit = raise_fd_limit();
    unsigned long long fixed = FD_BASE + (unsigned long long)FDS_PER_DB * threads + runs_fds;
    unsigned long long budget = p->fd_limit > fixed + 64 ? p->fd_limit - fixed : 64;
    /* half the budget for connections, the rest for what streams replaying hold */
    unsigned reserved_dflt = clamp(budget / 16, 1, DEFAULT_RESERVED);
    if (!number("--reserved-connections", o->reserved_connections, reserved_dflt, 0, 65536, &p->http.reserved, err,
                errlen))
        return -1;
    unsigned conns_dflt = clamp(budget / 2 > p->http.reserved ? budget / 2 - p->http.reserved : 1, 8,
                                DEFAULT_MAX_CONNECTIONS);
    if (!number("--max-connections", o->max_connections, conns_dflt, 1, 1000000, &p->http.max_connections, err,
                errlen) ||
        !number("--max-connections-per-address", o->max_connections_per_address, DEFAULT_PER_ADDRESS, 1, 1000000,
                &p->http.per_address, err, errlen) ||
        !number("--header-timeout", o->header_timeout, DEFAULT_HEADER_TIMEOUT_S, 1, 3600, &p->http.header_timeout_s,
                err, errlen) ||
        !number("--idle-timeout", o->idle_timeout, DEFAULT_IDLE_TIMEOUT_S, 1, 86400, &p->idle_timeout_s, err, errlen))
        return -1;
    unsigned streams_dflt = clamp(budget / (2 * FDS_PER_DB), 4, DEFAULT_MAX_STREAMS);
    if (streams_dflt > p->http.max_connections) streams_dflt = p->http.max_connections;
    if (!number("--max-streams", o->max_streams, streams_dflt, 1, 1000000, &p->max_streams, err, errlen))
        return -1;
    unsigned per_dflt = DEFAULT_STREAMS_PER_ADDRESS < p->max_streams ? DEFAULT_STREAMS_PER_ADDRESS : p->max_streams;
    if (!number("--max-streams-per-address", o->max_streams_per_address, per_dflt, 1, 1000000,
                &p->streams_per_address, err, errlen))
        return -1;
    p->fd_need = fixed + p->http.max_connections + p->http.reserved + (unsigned long long)FDS_PER_DB * p->max_streams;
    return 0;
}

void conn_plan_describe(const conn_plan *p, char *out, size_t size) {
    snprintf(out, size,
             "at most %u connections (+%u for loopback), %u per address; headers within %u s, idle %u s; %u event "
             "streams, %u per address; %llu file descriptors",
             p->http.max_connections, p->http.reserved, p->http.per_address, p->http.header_timeout_s,
             p->idle_timeout_s, p->max_streams, p->streams_per_address, p->fd_limit);
}

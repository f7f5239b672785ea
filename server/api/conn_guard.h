/* What keeps the HTTP side answering when clients are hostile or careless: ddpd's own
 * accept thread in front of libmicrohttpd (which then has no listening socket of its
 * own). It
 *
 * - caps connections per client address (`per_address`) and in all
 *   (`max_connections`), plus a reserve (`reserved`) that only this host's loopback
 *   addresses may use once the rest are taken, so that an operator and /healthz get
 *   in while remote clients hold every other slot (addr_counts.h). A connection over
 *   a cap is answered a short 503 and closed at once;
 * - gives a connection `header_timeout_s` seconds, from its accept or from its
 *   previous answer, to deliver a request's headers: libmicrohttpd's timeout is an
 *   idle timeout, which a client sending a byte a second never reaches (slowloris).
 *   A connection past the deadline is shut down (a first request gets a 408);
 * - when accept fails for want of file descriptors (EMFILE, ENFILE), stops accepting
 *   for a moment instead of spinning on a listening socket that stays readable, turns
 *   the waiting clients away with a spare descriptor kept for that (each gets a 503),
 *   and logs it once per interval, not once per failure.
 *
 * libmicrohttpd tells it of each connection: opened (its STARTED notification),
 * headers in (the access handler's first call), answered (a request completed) and
 * closed (CLOSED). */
#ifndef DDPD_SERVER_API_CONN_GUARD_H
#define DDPD_SERVER_API_CONN_GUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct {
    unsigned max_connections;  /* open connections, every client together */
    unsigned reserved;         /* more, for loopback clients only, once max_connections are open */
    unsigned per_address;      /* open connections of one client address */
    unsigned header_timeout_s; /* to deliver a request's headers */
} conn_guard_limits;

/* Hands an admitted socket to the HTTP server. False: not taken (and closed). */
typedef bool (*conn_admit_fn)(int fd, const struct sockaddr *sa, socklen_t len);

/* Starts the accept thread on `listen_fd` (made non-blocking). 0, or -1 with err. */
int conn_guard_start(int listen_fd, const conn_guard_limits *limits, conn_admit_fn admit, char *err, size_t errlen);
/* Stops accepting (before the HTTP server stops; its connections still close through
 * conn_guard_closed). */
void conn_guard_stop(void);

typedef struct conn_track conn_track;
/* A connection the HTTP server took: its header deadline starts. */
conn_track *conn_guard_opened(int fd, const struct sockaddr *sa);
/* Its request's headers are in: no deadline until the request is answered. */
void conn_guard_headers_in(conn_track *t);
/* Its request is over: the next request's headers are due within the timeout. */
void conn_guard_answered(conn_track *t);
/* It is closed (its socket still open: the HTTP server closes it after this). */
void conn_guard_closed(conn_track *t);

typedef struct {
    unsigned open, addresses;      /* connections open now; client addresses holding them */
    uint64_t refused_per_address;  /* over per_address */
    uint64_t refused_total;        /* over max_connections (and the reserve) */
    uint64_t refused_no_fds;       /* turned away while out of file descriptors */
    uint64_t header_timeouts;      /* shut down for not delivering headers in time */
} conn_guard_counters;
void conn_guard_take_counters(conn_guard_counters *out);

#endif

/* The HTTP side of ddpd: libmicrohttpd with an internal thread pool, each thread
 * with its own epoll (the mode its manual recommends for many concurrent clients),
 * request bodies accumulated with a 1 MiB cap, and a small router. The router
 * answers 404 for unknown paths, 405 (with Allow) for known paths with the wrong
 * method, 413 for bodies past the cap (early, by Content-Length, and while
 * streaming), 415 for bodies that are not JSON, 401 for a request that changes
 * something (not GET or HEAD) without a credential the server knows, when it needs
 * one (the token, a user's: `identify`), and for a read without one once reads need
 * it (`reads_need_token`: a server with users), but for the routes open to all
 * (/healthz, the dashboard's files) and those that take the run's secret instead
 * (run_secret_auth). Who sent a request is rq_caller's answer, looked up when a
 * handler first asks (a read that needs no token and never asks costs no look-up). Errors are
 * application/problem+json (RFC 9457). When a request is over, the request_done hook
 * hears of it (main.c: its log line and its count in /metrics). Connections come
 * through conn_guard.h's accept thread (its caps and the header deadline); a
 * connection idle for idle_timeout_s is closed by libmicrohttpd. Its repeated
 * messages (one per misbehaving client) are logged at most once per interval. */
#ifndef DDPD_SERVER_API_HTTP_H
#define DDPD_SERVER_API_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "base.h"
#include "conn_guard.h"

#define HTTP_MAX_BODY (1u << 20)

struct MHD_Connection;

typedef struct {
    struct MHD_Connection *conn;
    void *state; /* http.c's own for this request (rq_caller's answer, once known) */
    const char *method;
    const char *path;
    const char *id_text; /* the {id} segment, when the route has one */
    const char *body;
    size_t body_len;
} request;

typedef struct {
    int status;
    char *body; /* malloc'd */
    size_t len;
    const char *content_type;
    char *location; /* malloc'd, or NULL */
    const char *header_name; /* one more header (X-Next-Offset), or NULL */
    char *header_value;      /* malloc'd */
    void *stream;   /* a struct MHD_Response the handler built (server-sent events, sse.c):
                       queued as it is, with status; body and content_type unused */
    char etag[96];  /* the ETag header, quotes included, when not empty; then the answer is
                       Cache-Control: no-cache (kept, revalidated) rather than no-store */
} response;

typedef void (*handler_fn)(request *rq, response *rs);

typedef struct {
    const char *method;  /* "GET" also answers HEAD */
    const char *pattern; /* "/runs/{id}/metrics" */
    handler_fn handler;
    bool json_body;      /* the handler reads a JSON body: 415 without application/json */
    bool run_secret_auth; /* the run's own route (its rendezvous): the handler checks the run's
                             secret, and the server's token is neither needed nor enough */
    bool open;            /* read without a token even where reads need one: /healthz, and the
                             dashboard's own files (code, no data: its login page must load) */
    bool token_in_query;  /* the token may also come as ?access_token=TOKEN: the event streams,
                             which a browser's EventSource opens without headers */
} route;

/* A request that is over. `route` is the matched route's pattern, or NULL; status
 * 0: no answer was queued (the client left). */
typedef struct {
    const char *client, *method, *path, *route;
    int status;
    uint64_t bytes;
    double seconds;
} http_done;

typedef struct {
    const char *listen;  /* "127.0.0.1:8080", "[::1]:0", "localhost:8080" */
    unsigned threads;
    const route *routes;
    size_t n_routes;
    const char *token;   /* NULL: no authentication (when `identify` is NULL) */
    /* Who a request is, from its Authorization header's value (main.c: users.h); a
     * request that changes something goes on only with AUTH_OK. NULL: the token alone
     * says (without one, everybody may). `refusal`: the 401's words for a verdict. */
    auth_verdict (*identify)(const char *authorization, caller *who);
    /* Whether a read needs a credential too (main.c: users exist and reads were not
     * opened with --open-reads), asked on every read: no query. NULL: reads are open.
     * `identify_read`: who a read is, without a query where it can (NULL: identify). */
    bool (*reads_need_token)(void);
    auth_verdict (*identify_read)(const char *authorization, caller *who);
    const char *(*refusal)(auth_verdict v);
    void (*request_done)(const http_done *d);
    conn_guard_limits limits; /* connections per address and in all, the header deadline */
    unsigned idle_timeout_s;  /* a connection that sends and reads nothing for this long is closed */
} http_config;

/* Starts serving. *port_out gets the bound port (useful with port 0). */
int http_start(const http_config *c, int *port_out, char *err, size_t errlen);
void http_stop(void);

/* A query-string argument, or NULL. */
const char *rq_query(request *rq, const char *key);
/* A request header, or NULL. */
const char *rq_header(request *rq, const char *name);
/* Who sent the request: a user, the server's token, or anybody (auth.h), by its
 * Authorization header. Identified when first asked: a request that changes
 * something was before its handler ran (its verdict decides a 401); a read is
 * when its handler needs to know, so a poller's GET costs no look-up of the users. */
const caller *rq_caller(request *rq);
/* Whether the request's If-None-Match names `etag` (or is "*"): RFC 9110's weak
 * comparison, so W/"x" matches "x". */
bool rq_if_none_match(request *rq, const char *etag);

/* Replies; `o` is taken (decref'd). The server's own paths in them are named by
 * their roots (path_redact.h). */
void reply_json(response *rs, int status, json_t *o);
/* The same, every byte as it is: what an agent is handed to run (its command,
 * config and paths must be the real ones). */
void reply_json_verbatim(response *rs, int status, json_t *o);
/* reply_json with more members written as they are, not renamed: `raw_members` is
 * JSON text of the form "key":value,"key2":value2 (taken, freed); a run's config
 * comes back as it was submitted (the caller names paths in the others itself). */
void reply_json_raw(response *rs, int status, json_t *o, char *raw_members);
/* A problem document: {"type": "about:blank", "title", "status", "detail"}, plus
 * "errors": [{"pointer", "message"}] and "error_count" (their number) when `errors`
 * is given (taken). */
void reply_problem(response *rs, int status, json_t *errors, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same when `errors` lists only the first of `error_count` violations. */
void reply_problem_counted(response *rs, int status, json_t *errors, size_t error_count, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* 304 Not Modified: no body, the current ETag. */
void reply_not_modified(response *rs, const char *etag);
/* Takes `text` (malloc'd). */
void reply_text(response *rs, int status, char *text, size_t len, const char *content_type);

#endif

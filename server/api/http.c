/* libmicrohttpd set-up, body accumulation with its cap, routing, and the reply
 * helpers: see http.h. */
#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "path_redact.h"
#include "hostport.h"
#include "base.h"

#define MAX_SEGMENTS 8

/* Per request, kept by MHD between calls of the access handler. */
typedef struct {
    const route *route;
    char id_text[128]; /* the whole {id} segment (a path's segments are shorter) */
    buf_t body;
    bool too_large;
    /* for the request's log line and its metrics, when it is over */
    double started;   /* mono_s() at its headers */
    char method[16];
    char path[256];
    int status;       /* of the answer queued; 0: none was */
    uint64_t bytes;   /* of its body */
    caller who;       /* who sent it (http_config.identify), once who_known */
    bool who_known;
} request_state;

static struct {
    struct MHD_Daemon *daemon;
    http_config c;
    int listen_fd;
} H = {.listen_fd = -1};

/* ---- replies ---- */

void reply_json_verbatim(response *rs, int status, json_t *o) {
    size_t n = json_dumpb(o, NULL, 0, JSON_FLAGS);
    char *s = xmalloc(n + 1);
    json_dumpb(o, s, n, JSON_FLAGS);
    s[n] = '\n'; /* curl-friendly */
    json_decref(o);
    rs->status = status;
    rs->body = s;
    rs->len = n + 1;
    rs->content_type = "application/json";
}

void reply_json(response *rs, int status, json_t *o) {
    reply_json_verbatim(rs, status, o);
    path_redact_apply(&rs->body, &rs->len);
}

void reply_json_raw(response *rs, int status, json_t *o, char *raw_members) {
    size_t n = json_dumpb(o, NULL, 0, JSON_FLAGS);
    char *s = xmalloc(n + 1);
    json_dumpb(o, s, n, JSON_FLAGS);
    json_decref(o);
    path_redact_apply(&s, &n); /* the object's members; the raw ones stay as they are */
    size_t rlen = strlen(raw_members);
    /* {...} -> {...,raw}\n; {} -> {raw}\n */
    s = xrealloc(s, n + rlen + 4);
    size_t at = n - 1; /* the closing brace */
    if (at > 1) s[at++] = ',';
    memcpy(s + at, raw_members, rlen);
    at += rlen;
    s[at++] = '}';
    s[at++] = '\n';
    free(raw_members);
    rs->status = status;
    rs->body = s;
    rs->len = at;
    rs->content_type = "application/json";
}

static void reply_problem_v(response *rs, int status, json_t *errors, size_t error_count, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));
static void reply_problem_v(response *rs, int status, json_t *errors, size_t error_count, const char *fmt, va_list ap) {
    char detail[2048];
    vsnprintf(detail, sizeof detail, fmt, ap);
    /* The detail quotes what the request carried: bytes that are not UTF-8 become
     * '?', so that the body is JSON whatever was sent. */
    json_t *probe = json_string(detail);
    if (!probe)
        for (char *c = detail; *c; c++)
            if ((unsigned char)*c >= 0x80) *c = '?';
    json_decref(probe);
    const char *title = MHD_get_reason_phrase_for((unsigned)status);
    json_t *o = json_pack("{s:s,s:s,s:i,s:s}", "type", "about:blank", "title", title && *title ? title : "Error",
                          "status", status, "detail", detail);
    if (errors) {
        json_object_set_new(o, "errors", errors);
        json_object_set_new(o, "error_count", json_integer((json_int_t)error_count));
    }
    reply_json(rs, status, o);
    rs->content_type = "application/problem+json";
}

void reply_problem(response *rs, int status, json_t *errors, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    reply_problem_v(rs, status, errors, errors ? json_array_size(errors) : 0, fmt, ap);
    va_end(ap);
}

void reply_problem_counted(response *rs, int status, json_t *errors, size_t error_count, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    reply_problem_v(rs, status, errors, error_count, fmt, ap);
    va_end(ap);
}

void reply_text(response *rs, int status, char *text, size_t len, const char *content_type) {
    rs->status = status;
    rs->body = text;
    rs->len = len;
    rs->content_type = content_type;
}

void reply_not_modified(response *rs, const char *etag) {
    rs->status = 304;
    rs->body = NULL;
    rs->len = 0;
    rs->content_type = NULL;
    snprintf(rs->etag, sizeof rs->etag, "%s", etag);
}

const char *rq_query(request *rq, const char *key) {
    return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *rq_header(request *rq, const char *name) {
    return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

/* If-None-Match: "*" or a comma-separated list of entity tags, each maybe W/-prefixed.
 * A request may send the header more than once: each is looked at. */
static enum MHD_Result match_one(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    const char **want = cls;
    if (!*want || strcasecmp(key, MHD_HTTP_HEADER_IF_NONE_MATCH) != 0 || !value) return MHD_YES;
    size_t n = strlen(*want);
    for (const char *p = value; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        if (!*p) break;
        if (*p == '*') {
            *want = NULL;
            return MHD_NO;
        }
        if (p[0] == 'W' && p[1] == '/') p += 2;
        const char *end = p;
        if (*p == '"') { /* an opaque tag: quotes and what they hold (no commas in ours) */
            end = strchr(p + 1, '"');
            end = end ? end + 1 : p + strlen(p);
        } else {
            end = p + strcspn(p, ", \t");
        }
        if ((size_t)(end - p) == n && memcmp(p, *want, n) == 0) {
            *want = NULL; /* matched */
            return MHD_NO;
        }
        p = end;
    }
    return MHD_YES;
}

bool rq_if_none_match(request *rq, const char *etag) {
    const char *want = etag;
    MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, match_one, &want);
    return want == NULL;
}

static enum MHD_Result send_response(struct MHD_Connection *conn, request_state *st, response *rs,
                                     const char *allow, bool unauthorized) {
    st->status = rs->status;
    st->bytes = rs->len;
    if (rs->stream) { /* a streamed response (sse.c): its headers are set */
        struct MHD_Response *sr = rs->stream;
        MHD_add_response_header(sr, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        enum MHD_Result sret = MHD_queue_response(conn, (unsigned)rs->status, sr);
        MHD_destroy_response(sr);
        free(rs->body);
        free(rs->location);
        free(rs->header_value);
        return sret;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(rs->len, rs->body ? rs->body : "", rs->body ? MHD_RESPMEM_MUST_FREE
                                                                                    : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(rs->body);
        free(rs->location);
        free(rs->header_value);
        return MHD_NO;
    }
    if (rs->content_type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, rs->content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, rs->etag[0] ? "no-cache" : "no-store");
    if (rs->etag[0]) MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, rs->etag);
    if (rs->location) MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, rs->location);
    if (rs->header_name && rs->header_value) MHD_add_response_header(r, rs->header_name, rs->header_value);
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (unauthorized) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"ddpd\"");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)rs->status, r);
    MHD_destroy_response(r);
    free(rs->location);
    free(rs->header_value);
    return ret;
}

static enum MHD_Result send_problem(struct MHD_Connection *conn, request_state *st, int status, const char *allow,
                                    const char *detail) {
    response rs = {0};
    reply_problem(&rs, status, NULL, "%s", detail);
    return send_response(conn, st, &rs, allow, status == MHD_HTTP_UNAUTHORIZED);
}

/* ---- framing: where the body ends must be beyond doubt ----
 * Behind a proxy, a request the proxy and ddpd would split differently can smuggle
 * a second request past the proxy. So: at most one Content-Length, never together
 * with Transfer-Encoding, and no transfer coding but a single "chunked" (the one
 * libmicrohttpd decodes). A Content-Length that is not a number libmicrohttpd refuses
 * itself, before ddpd sees the request. */

typedef struct {
    int content_lengths, transfer_encodings;
    int chunked, others; /* transfer codings named, over every Transfer-Encoding header */
    char other[64];      /* the first coding that is not chunked */
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    framing *f = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) f->content_lengths++;
    if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) != 0) return MHD_YES;
    f->transfer_encodings++;
    for (const char *p = value ? value : ""; *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",");
        size_t trimmed = n;
        while (trimmed && strchr(" \t", p[trimmed - 1])) trimmed--;
        if (trimmed == 7 && strncasecmp(p, "chunked", 7) == 0) f->chunked++;
        else if (trimmed) {
            if (!f->others++) snprintf(f->other, sizeof f->other, "%.*s", (int)(trimmed < 60 ? trimmed : 60), p);
        }
        p += n;
    }
    return MHD_YES;
}

/* 0 when the framing is sound; else the status to answer (400 or 501) with a detail. */
static int framing_problem(struct MHD_Connection *conn, char *detail, size_t size) {
    framing f = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
    if (f.content_lengths > 1) {
        snprintf(detail, size, "the request has %d Content-Length headers: send one, so that where the body ends is "
                               "beyond doubt", f.content_lengths);
        return MHD_HTTP_BAD_REQUEST;
    }
    if (f.content_lengths && f.transfer_encodings) {
        snprintf(detail, size, "the request has both Content-Length and Transfer-Encoding: send one of them, so that "
                               "where the body ends is beyond doubt");
        return MHD_HTTP_BAD_REQUEST;
    }
    if (f.others) {
        snprintf(detail, size, "the transfer coding \"%s\" is not supported: send the body as it is, with "
                               "Content-Length, or with \"Transfer-Encoding: chunked\" alone", f.other);
        return MHD_HTTP_NOT_IMPLEMENTED;
    }
    if (f.transfer_encodings && f.chunked != 1) {
        snprintf(detail, size, "the request's Transfer-Encoding %s: send \"Transfer-Encoding: chunked\" once",
                 f.chunked ? "applies chunked more than once" : "names no coding");
        return MHD_HTTP_BAD_REQUEST;
    }
    return 0;
}

/* A framing problem: answered, and the connection closed after it, since where this
 * request ends (and so where a next one would start) is unknown. */
static enum MHD_Result send_framing_problem(struct MHD_Connection *conn, request_state *st, int status,
                                            const char *detail) {
    response rs = {0};
    reply_problem(&rs, status, NULL, "%s", detail);
    rs.header_name = MHD_HTTP_HEADER_CONNECTION;
    rs.header_value = xstrdup("close");
    return send_response(conn, st, &rs, NULL, false);
}

/* ---- routing ---- */

/* The path and the query's names and values, percent-decoded in place as MHD would,
 * except "%00": it stays as it was written, so that a NUL can never end a path early
 * ("/runs/1%00" is not run 1, "/ui/index.html%00.js" is not index.html). Returns the
 * new length. */
static size_t unescape_keeping_nul(void *cls, struct MHD_Connection *conn, char *s) {
    (void)cls;
    (void)conn;
    char *out = s;
    for (const char *in = s; *in;) {
        if (in[0] == '%' && isxdigit((unsigned char)in[1]) && isxdigit((unsigned char)in[2])) {
            char hex[3] = {in[1], in[2], '\0'};
            char c = (char)strtol(hex, NULL, 16);
            if (c != '\0') {
                *out++ = c;
                in += 3;
                continue;
            }
        }
        *out++ = *in++;
    }
    *out = '\0';
    return (size_t)(out - s);
}

static int split_path(const char *path, char segs[MAX_SEGMENTS][128]) {
    int n = 0;
    const char *p = path;
    while (*p == '/') p++;
    while (*p) {
        if (n == MAX_SEGMENTS) return -1;
        size_t len = strcspn(p, "/");
        if (len >= 128) return -1;
        memcpy(segs[n], p, len);
        segs[n][len] = '\0';
        n++;
        p += len;
        if (*p == '/') p++;
        if (*p == '/') return -1; /* "//" */
    }
    return n;
}

static bool pattern_matches(const char *pattern, char segs[MAX_SEGMENTS][128], int n, char *id_out) {
    char psegs[MAX_SEGMENTS][128];
    int pn = split_path(pattern, psegs);
    if (pn != n) return false;
    for (int i = 0; i < n; i++) {
        if (strcmp(psegs[i], "{id}") == 0) {
            if (id_out) { /* whole: split_path keeps segments under 128 bytes */
                size_t l = strnlen(segs[i], 127);
                memcpy(id_out, segs[i], l);
                id_out[l] = '\0';
            }
        } else if (strcmp(psegs[i], segs[i]) != 0) {
            return false;
        }
    }
    return true;
}

static bool method_is(const char *m, const char *route_method) {
    return strcmp(m, route_method) == 0 || (strcmp(route_method, "GET") == 0 && strcmp(m, "HEAD") == 0);
}

/* The route for this method and path; else *allow lists the methods the path takes
 * (405) or stays empty (404). */
static const route *find_route(const char *method, const char *path, char *id_text, char *allow, size_t allow_len) {
    char segs[MAX_SEGMENTS][128];
    allow[0] = '\0';
    int n = split_path(path, segs);
    if (n < 0) return NULL;
    for (size_t i = 0; i < H.c.n_routes; i++) {
        const route *r = &H.c.routes[i];
        if (!pattern_matches(r->pattern, segs, n, id_text)) continue;
        if (method_is(method, r->method)) return r;
        size_t used = strlen(allow);
        snprintf(allow + used, allow_len - used, "%s%s%s", used ? ", " : "", r->method,
                 strcmp(r->method, "GET") == 0 ? ", HEAD" : "");
    }
    return NULL;
}

/* A 404's detail: the routes under the path's first segment ("/sweeps": POST
 * /sweeps/{id}/cancel, ...), else the first segments the API has. */
static void not_found_detail(const char *path, char *out, size_t len) {
    const char *seg = path[0] == '/' ? path + 1 : path;
    int seg_len = (int)strcspn(seg, "/");
    size_t at = (size_t)snprintf(out, len, "there is no %.200s; ", path);
    int any = 0;
    for (size_t i = 0; i < H.c.n_routes && at < len; i++) {
        const char *p = H.c.routes[i].pattern;
        if (p[0] != '/' || seg_len == 0 || strncmp(p + 1, seg, (size_t)seg_len) != 0 ||
            (p[1 + seg_len] && p[1 + seg_len] != '/'))
            continue;
        if (!any++) at += (size_t)snprintf(out + at, len - at, "the routes under /%.*s are", seg_len, seg);
        if (at < len) at += (size_t)snprintf(out + at, len - at, "%s %s %s", any > 1 ? "," : "", H.c.routes[i].method, p);
    }
    if (!any && at < len) {
        at += (size_t)snprintf(out + at, len - at, "the API's paths start with");
        const char *seen[64];
        int n_seen = 0;
        for (size_t i = 0; i < H.c.n_routes && at < len && n_seen < 64; i++) {
            const char *p = H.c.routes[i].pattern;
            int l = (int)strcspn(p + 1, "/");
            if (p[0] != '/' || l <= 0) continue;
            bool dup = false;
            for (int k = 0; k < n_seen; k++)
                dup = dup || ((int)strcspn(seen[k] + 1, "/") == l && strncmp(seen[k] + 1, p + 1, (size_t)l) == 0);
            if (dup) continue;
            seen[n_seen++] = p;
            at += (size_t)snprintf(out + at, len - at, "%s /%.*s", n_seen > 1 ? "," : "", l, p + 1);
        }
    }
    if (at < len) snprintf(out + at, len - at, " (see GET /openapi.json)");
}

static bool is_json_type(const char *ct) {
    if (!ct) return false;
    while (*ct == ' ') ct++;
    size_t n = strcspn(ct, ";");
    while (n && ct[n - 1] == ' ') n--;
    if (n == 16 && strncasecmp(ct, "application/json", 16) == 0) return true;
    /* application/<something>+json */
    return n > 17 && strncasecmp(ct, "application/", 12) == 0 && strncasecmp(ct + n - 5, "+json", 5) == 0;
}

static bool has_body(struct MHD_Connection *conn) {
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    return te != NULL || (cl && strtoull(cl, NULL, 10) > 0);
}

/* Who a request is: the hook's word (main.c: users.h), else the server's token alone:
 * without one, everybody is an admin; with it, the token's holder. */
static auth_verdict identify(const char *authorization, caller *who) {
    if (H.c.identify) return H.c.identify(authorization, who);
    *who = (caller){.kind = CALLER_ANONYMOUS, .admin = true, .max_priority = 100, .max_devices = -1,
                    .max_memory_bytes = -1, .max_disk_bytes = -1};
    if (!H.c.token) return AUTH_OK;
    if (!auth_bearer_ok(authorization, H.c.token)) return auth_bearer_value(authorization) ? AUTH_UNKNOWN : AUTH_MISSING;
    who->kind = CALLER_ADMIN_TOKEN;
    return AUTH_OK;
}

static auth_verdict identify_read(const char *authorization, caller *who);

const caller *rq_caller(request *rq) {
    request_state *st = rq->state;
    if (!st->who_known) {
        const char *authorization = rq_header(rq, MHD_HTTP_HEADER_AUTHORIZATION);
        if (auth_method_mutates(rq->method)) identify(authorization, &st->who);
        else identify_read(authorization, &st->who);
        st->who_known = true;
    }
    return &st->who;
}

/* Who a read is, where reads need a token: the hook's cheaper word when there is one. */
static auth_verdict identify_read(const char *authorization, caller *who) {
    return H.c.identify_read ? H.c.identify_read(authorization, who) : identify(authorization, who);
}

/* Whether this request must carry a credential the server knows before its handler
 * runs: every one that changes something, and every read once reads need a token
 * (reads_need_token), but for the routes open to all (/healthz, the dashboard's
 * files) and a run's own routes (their handlers check the run's secret). */
static bool needs_credential(const route *r, bool mutates) {
    if (r->run_secret_auth) return false;
    if (mutates) return true;
    return !r->open && H.c.reads_need_token && H.c.reads_need_token();
}

/* The request's credential as an Authorization value: the header, else (on a route
 * that takes it: an event stream, which a browser's EventSource opens without
 * headers) the access_token query parameter, written into `room`. NULL: none. The
 * query is never logged (the log names the path alone). */
static const char *credential(struct MHD_Connection *conn, const route *r, char *room, size_t size) {
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (h || !r->token_in_query) return h;
    const char *q = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "access_token");
    if (!q || !*q) return NULL;
    snprintf(room, size, "Bearer %s", q);
    return room;
}

static const char *refusal(auth_verdict v) {
    if (H.c.refusal) return H.c.refusal(v);
    return "this server needs its token to change anything: send \"Authorization: Bearer <token>\" "
           "(the token ddpd was started with: --token-file, DDPD_TOKEN or --token)";
}

/* ---- the access handler: MHD calls it once with the headers, then once per body
 * chunk, then once more with no data: that last call dispatches. ---- */

/* The connection's conn_guard record (its socket context). */
static conn_track *connection_track(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)cls;
    (void)version;
    request_state *st = *con_cls;
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return MHD_NO;
        *con_cls = st;
        conn_guard_headers_in(connection_track(conn));
        st->started = mono_s();
        snprintf(st->method, sizeof st->method, "%s", method);
        snprintf(st->path, sizeof st->path, "%s", url);
        char framing_detail[300];
        int framing_status = framing_problem(conn, framing_detail, sizeof framing_detail);
        if (framing_status) return send_framing_problem(conn, st, framing_status, framing_detail);
        char path[1024];
        snprintf(path, sizeof path, "%s", url);
        size_t pl = strlen(path);
        if (pl > 1 && path[pl - 1] == '/') path[pl - 1] = '\0';
        char allow[256];
        st->route = find_route(method, path, st->id_text, allow, sizeof allow);
        if (!st->route) {
            char detail[1400];
            if (allow[0]) {
                snprintf(detail, sizeof detail, "%s does not take %s; it takes %s", path, method, allow);
                return send_problem(conn, st, MHD_HTTP_METHOD_NOT_ALLOWED, allow, detail);
            }
            not_found_detail(path, detail, sizeof detail);
            return send_problem(conn, st, MHD_HTTP_NOT_FOUND, NULL, detail);
        }
        /* Changing needs a credential the server knows, when it has a token or users
         * (identify); reading does once it has users (needs_credential); a run's own
         * route is the handler's to check, by the run's secret. A read that needs none
         * is identified only if its handler asks (rq_caller). */
        bool mutates = auth_method_mutates(method);
        if (needs_credential(st->route, mutates)) {
            char room[600];
            const char *authorization = credential(conn, st->route, room, sizeof room);
            auth_verdict verdict = mutates ? identify(authorization, &st->who) : identify_read(authorization, &st->who);
            st->who_known = true;
            if (verdict != AUTH_OK) return send_problem(conn, st, MHD_HTTP_UNAUTHORIZED, NULL, refusal(verdict));
        }
        if (has_body(conn) || st->route->json_body) {
            const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
            if (cl && strtoull(cl, NULL, 10) > HTTP_MAX_BODY) {
                char detail[256];
                snprintf(detail, sizeof detail, "the request body is %s bytes; the limit is %u bytes (1 MiB)", cl,
                         HTTP_MAX_BODY);
                return send_problem(conn, st, MHD_HTTP_CONTENT_TOO_LARGE, NULL, detail);
            }
            const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
            if (!is_json_type(ct)) {
                char detail[512];
                snprintf(detail, sizeof detail, "the request body must be JSON, sent with \"Content-Type: application/json\" (got %s%.200s%s)",
                         ct ? "\"" : "", ct ? ct : "no Content-Type", ct ? "\"" : "");
                return send_problem(conn, st, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, NULL, detail);
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!st->too_large) {
            if (st->body.len + *upload_data_size > HTTP_MAX_BODY) {
                st->too_large = true; /* keep reading (and dropping) so that the 413 can be sent */
                buf_free(&st->body);
            } else {
                buf_append(&st->body, upload_data, *upload_data_size);
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (st->too_large) {
        char detail[128];
        snprintf(detail, sizeof detail, "the request body is over the limit of %u bytes (1 MiB)", HTTP_MAX_BODY);
        return send_problem(conn, st, MHD_HTTP_CONTENT_TOO_LARGE, NULL, detail);
    }
    request rq = {.conn = conn,
                  .state = st,
                  .method = method,
                  .path = url,
                  .id_text = st->id_text,
                  .body = st->body.data ? st->body.data : "",
                  .body_len = st->body.len};
    response rs = {0};
    st->route->handler(&rq, &rs);
    if (!rs.status) reply_problem(&rs, 500, NULL, "the handler gave no answer");
    return send_response(conn, st, &rs, NULL, rs.status == MHD_HTTP_UNAUTHORIZED);
}

/* The request is over: the hook hears of it (its log line and its metrics). */
static void account(struct MHD_Connection *conn, const request_state *st) {
    if (!H.c.request_done) return;
    double seconds = mono_s() - st->started;
    char client[INET6_ADDRSTRLEN] = "";
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, client, sizeof client);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, client, sizeof client);
    }
    http_done d = {.client = client, .method = st->method, .path = st->path,
                   .route = st->route ? st->route->pattern : NULL, .status = st->status, .bytes = st->bytes,
                   .seconds = seconds};
    H.c.request_done(&d);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)toe;
    request_state *st = *con_cls;
    if (st) {
        account(conn, st);
        buf_free(&st->body);
        free(st);
        *con_cls = NULL;
    }
    conn_guard_answered(connection_track(conn));
}

/* A connection begins (the accept thread admitted it) or ends. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ca = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        *socket_context = conn_guard_opened(fd ? fd->connect_fd : -1, ca ? ca->client_addr : NULL);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_guard_closed(*socket_context);
        *socket_context = NULL;
    }
}

/* The accept thread's hand-over (conn_guard.h). */
static bool admit(int fd, const struct sockaddr *sa, socklen_t len) {
    return MHD_add_connection(H.daemon, fd, sa, len) == MHD_YES;
}

/* libmicrohttpd's messages. Most are about one client (a request cut short, a bad
 * header), so a flood of clients would be a flood of lines: each message (by its
 * format) is logged at most once per minute, with how often it came meanwhile. */
#define MHD_LOG_KINDS 64
static struct {
    pthread_mutex_t mu;
    const char *fmt[MHD_LOG_KINDS];
    log_limit limit[MHD_LOG_KINDS];
} mhd_log = {.mu = PTHREAD_MUTEX_INITIALIZER};

static log_limit *mhd_log_limit(const char *fmt) {
    pthread_mutex_lock(&mhd_log.mu);
    log_limit *l = NULL;
    for (int i = 0; i < MHD_LOG_KINDS && !l; i++) {
        if (mhd_log.fmt[i] == fmt) l = &mhd_log.limit[i];
        else if (!mhd_log.fmt[i]) {
            mhd_log.fmt[i] = fmt;
            l = &mhd_log.limit[i];
        }
    }
    pthread_mutex_unlock(&mhd_log.mu);
    return l;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    log_limit *l = mhd_log_limit(fmt);
    uint64_t skipped = 0;
    if (l && !log_limit_now(l, 60000, &skipped)) return;
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n') line[--n] = '\0';
    if (skipped) log_warn("http: %s (and %llu times more in the last minute or so)", line, (unsigned long long)skipped);
    else log_warn("http: %s", line);
}

/* "host:port", "[v6]:port": getaddrinfo, first address. */
static int resolve_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len, char *err, size_t errlen) {
    char host[256], port[16];
    if (parse_host_port("--listen", listen, host, sizeof host, port, sizeof port, err, errlen) != 0) return -1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "--listen %s: %s", listen, gai_strerror(rc));
        return -1;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* The listening socket, bound here rather than by MHD, so that a port that cannot be
 * had gets one message saying why and what to do (MHD would first log its own
 * "Failed to bind to port 0"). Returns the socket, or -1 with *err set. */
static int listen_socket(const char *listen_at, const struct sockaddr_storage *ss, socklen_t sslen, char *err,
                         size_t errlen) {
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", listen_at, strerror(errno));
        return -1;
    }
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on); /* a restart need not wait out TIME_WAIT */
    if (ss->ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    if (bind(fd, (const struct sockaddr *)ss, sslen) != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        const char *hint = e == EADDRINUSE ? ": another program (another ddpd?) has that port; stop it, or give "
                                             "this one another: --listen HOST:PORT (DDPD_LISTEN)"
                           : e == EACCES ? ": ports below 1024 need root (or CAP_NET_BIND_SERVICE); use a port "
                                           "above 1023: --listen HOST:PORT (DDPD_LISTEN)"
                           : e == EADDRNOTAVAIL ? ": that is not an address of this host (--listen 127.0.0.1:PORT "
                                                  "for this host only, 0.0.0.0:PORT for every interface)"
                           : "";
        snprintf(err, errlen, "cannot listen on %s: %s%s", listen_at, strerror(e), hint);
        close(fd);
        return -1;
    }
    return fd;
}

int http_start(const http_config *c, int *port_out, char *err, size_t errlen) {
    H.c = *c;
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (resolve_listen(c->listen, &ss, &sslen, err, errlen) != 0) return -1;
    int fd = listen_socket(c->listen, &ss, sslen, err, errlen);
    if (fd < 0) return -1;
    /* suspend/resume: server-sent event streams wait suspended, not in a thread (sse.h).
     * No listening socket: conn_guard's thread accepts and hands connections over. */
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                     MHD_USE_NO_LISTEN_SOCKET;
    /* conn_guard holds the real caps. libmicrohttpd splits its own limit among its
     * threads, and a thread past its share drops a connection without telling anyone:
     * each share is above conn_guard's total, so that never happens. */
    unsigned threads = c->threads ? c->threads : 1;
    unsigned mhd_limit = (c->limits.max_connections + c->limits.reserved + 64) * threads;
    H.daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL,
                                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
                                MHD_OPTION_THREAD_POOL_SIZE, c->threads,
                                MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
                                MHD_OPTION_CONNECTION_TIMEOUT, c->idle_timeout_s,
                                MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                                MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
                                MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL,
                                MHD_OPTION_END);
    if (!H.daemon) {
        close(fd);
        snprintf(err, errlen, "cannot serve on %s: the HTTP server did not start (see the line before)", c->listen);
        return -1;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    *port_out = 0;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
        *port_out = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                      : ((struct sockaddr_in *)&bound)->sin_port);
    if (conn_guard_start(fd, &c->limits, admit, err, errlen) != 0) {
        MHD_stop_daemon(H.daemon);
        H.daemon = NULL;
        close(fd);
        return -1;
    }
    H.listen_fd = fd;
    return 0;
}

void http_stop(void) {
    conn_guard_stop(); /* no new connections; those open close through on_connection */
    if (H.daemon) {
        MHD_stop_daemon(H.daemon);
        H.daemon = NULL;
    }
    if (H.listen_fd >= 0) close(H.listen_fd);
    H.listen_fd = -1;
}

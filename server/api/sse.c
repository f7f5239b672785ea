/* The event-stream routes: a response per client whose content callback reads the
 * feed, and suspends its connection when there is nothing to send. See sse.h. */
#include "sse.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr_counts.h"
#include "feed.h"
#include "ids.h"
#include "store_read.h"
#include "base.h"

#define SSE_BLOCK 16384 /* MHD's buffer per call of the callback */
#define SSE_BUDGET 65536 /* what one read of the feed gathers */
#define SSE_RETRY_MS 2000 /* how soon an EventSource reconnects */

typedef struct {
    feed_sub sub; /* first: the feed hands it back */
    struct MHD_Connection *conn;
    buf_t out; /* read from the feed, not yet given to MHD */
    size_t sent;
    addr_key client; /* its place in S.streams */
} sse_client;

/* Open streams, per client address and in all (sse_set_limits). */
static struct {
    addr_counts *streams;
    unsigned max, per_address;
} S;

void sse_set_limits(unsigned max_streams, unsigned per_address) {
    addr_counts_free(S.streams);
    S.max = max_streams;
    S.per_address = per_address;
    S.streams = addr_counts_new(per_address, max_streams, 0);
}

static atomic_ullong refused_per_address, refused_total;

void sse_take_counters(sse_counters *out) {
    out->open = S.streams ? addr_counts_total(S.streams) : 0;
    out->refused_per_address = atomic_load(&refused_per_address);
    out->refused_total = atomic_load(&refused_total);
}

/* Called by the feed under its lock. */
static void client_park(feed_sub *s) { MHD_suspend_connection(((sse_client *)s)->conn); }
static void client_wake(feed_sub *s) { MHD_resume_connection(((sse_client *)s)->conn); }

static ssize_t client_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    sse_client *c = cls;
    if (c->sent == c->out.len) {
        c->out.len = c->sent = 0;
        switch (feed_read(&c->sub, &c->out, SSE_BUDGET)) {
        case FEED_CLOSED: return MHD_CONTENT_READER_END_OF_STREAM;
        case FEED_PARKED: return 0; /* suspended: MHD calls again once resumed */
        case FEED_DATA: break;
        }
    }
    size_t n = c->out.len - c->sent;
    if (n > max) n = max;
    memcpy(buf, c->out.data + c->sent, n);
    c->sent += n;
    if (c->sent == c->out.len && c->out.cap > 4 * SSE_BUDGET) { /* after a long replay */
        buf_free(&c->out);
        c->sent = 0;
    }
    return (ssize_t)n;
}

/* The response is gone: the client left, the server stops, or it was never sent. */
static void client_free(void *cls) {
    sse_client *c = cls;
    if (S.streams) addr_counts_put(S.streams, &c->client);
    feed_unsubscribe(&c->sub);
    buf_free(&c->out);
    free(c);
}

/* Last-Event-ID (a reconnect), else ?last_event_id=; -1 when neither: live from now. */
static bool resume_from(request *rq, response *rs, int64_t *out) {
    const char *h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "Last-Event-ID");
    const char *q = rq_query(rq, "last_event_id");
    const char *s = h && *h ? h : q;
    *out = -1;
    if (!s || !*s) return true;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < 0) {
        reply_problem(rs, 400, NULL, "%s must be an event id, a non-negative integer (got \"%.60s\")",
                      s == h ? "Last-Event-ID" : "last_event_id", s);
        return false;
    }
    *out = v;
    return true;
}

static void serve(request *rq, response *rs, int64_t run_id) {
    int64_t last;
    if (!resume_from(rq, rs, &last)) return;
    if (feed_closing()) {
        reply_problem(rs, 503, NULL, "the server is shutting down");
        return;
    }
    /* A stream holds its connection for as long as the client likes: counted and
     * capped, per address and in all, so that streams cannot take every connection. */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    addr_key client = addr_key_of(ci ? ci->client_addr : NULL);
    unsigned held = 0;
    addr_take taken = S.streams ? addr_counts_take(S.streams, &client, &held) : ADDR_TAKEN;
    if (taken != ADDR_TAKEN) {
        atomic_fetch_add(taken == ADDR_OVER_ADDRESS ? &refused_per_address : &refused_total, 1);
        if (taken == ADDR_OVER_ADDRESS)
            reply_problem(rs, 503, NULL, "too many event streams from this address (%u); close some or raise "
                                         "--max-streams-per-address", held);
        else
            reply_problem(rs, 503, NULL, "too many event streams open (%u, the server's limit); close some or raise "
                                         "--max-streams", S.max);
        rs->header_name = "Retry-After";
        rs->header_value = xstrdup("5");
        return;
    }
    sse_client *c = calloc(1, sizeof *c);
    if (!c) {
        if (S.streams) addr_counts_put(S.streams, &client);
        reply_problem(rs, 503, NULL, "out of memory");
        return;
    }
    c->client = client;
    c->conn = rq->conn;
    c->sub.run_id = run_id;
    c->sub.park = client_park;
    c->sub.wake = client_wake;
    int64_t newest = feed_subscribe(&c->sub, last);
    /* The greeting. A first connection's `ready` carries the newest id, so that its
     * reconnect asks for what came after; a reconnect's does not move its position. */
    buf_printf(&c->out, "retry: %d\n", SSE_RETRY_MS);
    if (last < 0) buf_printf(&c->out, "id: %lld\n", (long long)newest);
    buf_printf(&c->out, "event: ready\ndata: {\"last_event_id\":%lld", (long long)newest);
    if (last >= 0) buf_printf(&c->out, ",\"resumed_from\":%lld", (long long)c->sub.cursor);
    if (run_id) buf_printf(&c->out, ",\"run\":%lld", (long long)run_id);
    buf_printf(&c->out, "}\n\n");
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK, client_read, c, client_free);
    if (!r) {
        client_free(c);
        reply_problem(rs, 503, NULL, "cannot start the stream");
        return;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
    MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* for a proxy in front */
    rs->status = 200;
    rs->stream = r;
}

static void get_events(request *rq, response *rs) { serve(rq, rs, 0); }

static void get_run_events(request *rq, response *rs) {
    int64_t id;
    if (!parse_run_id(rq->id_text, &id)) {
        reply_problem(rs, 404, NULL, "there is no run \"%.60s\": run ids are positive integers without leading zeros", rq->id_text);
        return;
    }
    run_brief b;
    int found = store_get_brief(id, &b);
    if (found < 0) {
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
        return;
    }
    if (!found) {
        reply_problem(rs, 404, NULL, "there is no run %lld (GET /runs lists them)", (long long)id);
        return;
    }
    serve(rq, rs, id);
}

void sse_shutdown(void) { feed_close_all(); }

const route sse_routes[] = {
    {.method = "GET", .pattern = "/events", .handler = get_events, .token_in_query = true},
    {.method = "GET", .pattern = "/runs/{id}/events", .handler = get_run_events, .token_in_query = true},
};
const size_t sse_routes_count = sizeof sse_routes / sizeof *sse_routes;

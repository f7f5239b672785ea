/* One JSON answer that every reader shares, written out once (shared_reply.h). */
#include "shared_reply.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "path_redact.h"
#include "sha256.h"

static void write_out(shared_reply *c, json_t *o) {
    response tmp = {0};
    reply_json(&tmp, 200, json_incref(o));
    json_decref(c->of);
    free(c->text);
    c->of = json_incref(o);
    c->text = tmp.body;
    c->len = tmp.len;
    /* by its bytes: the same answer rebuilt keeps its tag */
    uint8_t digest[32];
    sha256(c->text, c->len, digest);
    char *e = c->etag;
    *e++ = '"';
    for (int i = 0; i < 8; i++) e += snprintf(e, 3, "%02x", digest[i]);
    *e++ = '"';
    *e = '\0';
}

void reply_shared(shared_reply *c, request *rq, response *rs, json_t *o) {
    pthread_mutex_lock(&c->mu);
    if (c->of != o || !c->text) write_out(c, o);
    json_decref(o);
    char etag[sizeof c->etag];
    memcpy(etag, c->etag, sizeof etag);
    if (rq_if_none_match(rq, etag)) {
        pthread_mutex_unlock(&c->mu);
        reply_not_modified(rs, etag);
        return;
    }
    char *body = xmalloc(c->len + 1);
    memcpy(body, c->text, c->len);
    body[c->len] = '\0';
    size_t len = c->len;
    pthread_mutex_unlock(&c->mu);
    reply_text(rs, 200, body, len, "application/json");
    snprintf(rs->etag, sizeof rs->etag, "%s", etag);
}

void shared_reply_clear(shared_reply *c) {
    pthread_mutex_lock(&c->mu);
    json_decref(c->of);
    free(c->text);
    c->of = NULL;
    c->text = NULL;
    c->len = 0;
    c->etag[0] = '\0';
    pthread_mutex_unlock(&c->mu);
}

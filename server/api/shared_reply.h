/* One JSON answer that every reader shares, written out once: a route whose answer is
 * the same for every caller and built once per change (GET /queue) keeps its text and
 * its tag here, so that a read copies bytes instead of writing the JSON again, and a
 * poller that sends the tag back gets a 304 whatever the server rebuilt meanwhile, as
 * long as the bytes are the same. */
#ifndef DDPD_SERVER_API_SHARED_REPLY_H
#define DDPD_SERVER_API_SHARED_REPLY_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>

#include "http.h"

typedef struct {
    pthread_mutex_t mu;
    json_t *of;     /* the answer the text was written from (a reference kept) */
    char *text;     /* its JSON, the server's paths named by their roots */
    size_t len;
    char etag[40];  /* "sha256 of the text, its first 16 hex digits" */
} shared_reply;

#define SHARED_REPLY_INIT {.mu = PTHREAD_MUTEX_INITIALIZER}

/* Answers 200 with `o` (taken), or 304 when the request's If-None-Match names its
 * tag; `o` written out only when it is not the answer written last. */
void reply_shared(shared_reply *c, request *rq, response *rs, json_t *o);
/* What the cache holds, at shutdown. */
void shared_reply_clear(shared_reply *c);

#endif

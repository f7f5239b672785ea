/* The event-stream parser over libcurl's write callback. See sse_reader.h. */
#include "sse_reader.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_http.h"
#include "monotonic.h"

typedef struct {
    sse_event_fn fn;
    void *cls;
    char *line; /* the line being read */
    size_t len, cap;
    char event[64];
    char id[32];
    bool has_id;
    char *data;
    size_t data_len, data_cap;
    bool stopped;
    long status; /* set at the first byte */
    CURL *curl;
    char *error_body; /* the body of an error answer */
    size_t error_len;
} parser;

static void append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        *buf = realloc(*buf, c);
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
}

static void dispatch(parser *p) {
    if (p->data_len || p->event[0]) {
        if (p->data_len && p->data[p->data_len - 1] == '\n') p->data[--p->data_len] = '\0';
        if (!p->stopped && p->fn(p->cls, p->event[0] ? p->event : "message", p->has_id ? p->id : NULL,
                                 p->data ? p->data : ""))
            p->stopped = true;
    }
    p->event[0] = '\0';
    p->has_id = false;
    p->data_len = 0;
    if (p->data) p->data[0] = '\0';
}

static void field(parser *p, const char *line, size_t n) {
    if (n == 0) {
        dispatch(p);
        return;
    }
    if (line[0] == ':') return; /* a comment: a heartbeat */
    const char *colon = memchr(line, ':', n);
    size_t nl = colon ? (size_t)(colon - line) : n;
    const char *v = colon ? colon + 1 : line + n;
    size_t vl = colon ? n - nl - 1 : 0;
    if (vl && *v == ' ') v++, vl--;
    if (nl == 5 && memcmp(line, "event", 5) == 0) {
        snprintf(p->event, sizeof p->event, "%.*s", (int)vl, v);
    } else if (nl == 4 && memcmp(line, "data", 4) == 0) {
        append(&p->data, &p->data_len, &p->data_cap, v, vl);
        append(&p->data, &p->data_len, &p->data_cap, "\n", 1);
    } else if (nl == 2 && memcmp(line, "id", 2) == 0) {
        snprintf(p->id, sizeof p->id, "%.*s", (int)vl, v);
        p->has_id = true;
    } /* retry and unknown fields: ignored */
}

static size_t on_bytes(char *ptr, size_t size, size_t nmemb, void *cls) {
    parser *p = cls;
    size_t n = size * nmemb;
    if (!p->status) curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &p->status);
    if (p->status != 200) { /* an error answer: keep its body for the message */
        size_t cap = p->error_len;
        append(&p->error_body, &p->error_len, &cap, ptr, n);
        return n;
    }
    for (size_t i = 0; i < n; i++) {
        char c = ptr[i];
        if (c == '\n') {
            size_t l = p->len;
            if (l && p->line[l - 1] == '\r') l--;
            field(p, p->line ? p->line : "", l);
            p->len = 0;
            if (p->stopped) return 0; /* ends the transfer */
        } else {
            append(&p->line, &p->len, &p->cap, &c, 1);
        }
    }
    return n;
}

static int on_progress(void *cls, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    (void)cls, (void)dt, (void)dn, (void)ut, (void)un;
    return client_interrupted() ? 1 : 0;
}

int sse_read(const char *path, int64_t last_event_id, long idle_s, sse_event_fn fn, void *cls, long *status,
             char *err, size_t errlen) {
    parser p = {.fn = fn, .cls = cls};
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, errlen, "cannot start libcurl");
        return SSE_BROKEN;
    }
    p.curl = c;
    size_t ulen = strlen(CLIENT.base) + strlen(path) + 1;
    char *url = malloc(ulen);
    snprintf(url, ulen, "%s%s", CLIENT.base, path);
    struct curl_slist *headers = curl_slist_append(NULL, "Accept: text/event-stream");
    char hdr[64], *auth = NULL;
    if (last_event_id >= 0) {
        snprintf(hdr, sizeof hdr, "Last-Event-ID: %lld", (long long)last_event_id);
        headers = curl_slist_append(headers, hdr);
    }
    if (CLIENT.token && *CLIENT.token) {
        size_t al = strlen(CLIENT.token) + 32;
        auth = malloc(al);
        snprintf(auth, al, "Authorization: Bearer %s", CLIENT.token);
        headers = curl_slist_append(headers, auth);
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_bytes);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &p);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* heartbeats keep it above this */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, idle_s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "ddpctl");
    CURLcode rc = curl_easy_perform(c);
    if (!p.status) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &p.status);
    *status = p.status;
    int ret;
    if (p.stopped) {
        ret = SSE_STOPPED;
    } else if (p.status && p.status != 200) {
        json_t *doc = p.error_body ? json_loadb(p.error_body, p.error_len, 0, NULL) : NULL;
        const char *detail = json_string_value(json_object_get(doc, "detail"));
        snprintf(err, errlen, "%s", detail ? detail : "the server refused the event stream");
        json_decref(doc);
        ret = SSE_REFUSED;
    } else if (rc == CURLE_OK) {
        ret = SSE_ENDED;
    } else {
        describe_transport_error(rc, errbuf, err, errlen);
        ret = SSE_BROKEN;
    }
    curl_slist_free_all(headers);
    free(auth);
    free(url);
    free(p.line);
    free(p.data);
    free(p.error_body);
    curl_easy_cleanup(c);
    return ret;
}

#define RECONNECT_FOR_S 60.0

int sse_retry_after(sse_retry *r, int rc, long status, bool heard, const char *err) {
    if (rc == SSE_REFUSED && status != 503) { /* no such run or sweep, or not allowed */
        if (r->before_saying) r->before_saying(r->cls);
        fprintf(stderr, "ddpctl: %s\n", err);
        return SSE_GIVE_UP_REFUSED;
    }
    if (heard || !r->broken_since) {
        r->broken_since = mono_s();
        if (r->before_saying) r->before_saying(r->cls);
        fprintf(stderr, "ddpctl: %s; reconnecting\n", rc == SSE_BROKEN ? err : "the server ended the event stream");
    }
    if (mono_s() - r->broken_since > RECONNECT_FOR_S) {
        fprintf(stderr, "ddpctl: gave up after %.0f s: %s\n", RECONNECT_FOR_S,
                rc == SSE_BROKEN ? err : "the server does not stream events");
        return SSE_GIVE_UP_UNREACHABLE;
    }
    sleep(1);
    return SSE_RETRY;
}

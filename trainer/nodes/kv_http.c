/* The coordinator's rendezvous (kv_store.h) over HTTP with libcurl: a key is written
 * with `POST URL {"key", "value": HEX}` and read with `GET URL?key=KEY`, both with
 * `Authorization: Bearer <the run's secret>`. A reader polls (10 ms, doubling to
 * 200 ms) while the key is not there yet (404) or the coordinator cannot be reached,
 * until its timeout; a refusal for any other reason (a wrong secret, a key already
 * set to another value) fails at once with the coordinator's words. */
#include "kv_store.h"
#include "monotonic.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REQUEST_TIMEOUT_MS 10000L
#define POLL_FIRST_MS 10
#define POLL_MOST_MS 200

typedef struct {
    kv_store pub;
    CURL *curl;
    char *url;
    struct curl_slist *headers;
} http_kv;

typedef struct {
    char *data;
    size_t len;
} text_buf;

static size_t on_data(char *p, size_t size, size_t n, void *ctx) {
    text_buf *b = ctx;
    size_t add = size * n;
    char *grown = realloc(b->data, b->len + add + 1);
    if (!grown) return 0;
    memcpy(grown + b->len, p, add);
    b->data = grown;
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One request: the HTTP status (-1 when there was no answer) and the body; `err`
 * says what went wrong when the status is not 2xx. */
static long request(http_kv *k, const char *url, const char *post, text_buf *answer, char *err, size_t errlen) {
    char curl_err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(k->curl, CURLOPT_URL, url);
    if (post) curl_easy_setopt(k->curl, CURLOPT_POSTFIELDS, post);
    else curl_easy_setopt(k->curl, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(k->curl, CURLOPT_WRITEDATA, answer);
    curl_easy_setopt(k->curl, CURLOPT_ERRORBUFFER, curl_err);
    CURLcode rc = curl_easy_perform(k->curl);
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "no answer from the coordinator (%s): %s; is its ddpd up and reachable from this node?",
                 k->url, curl_err[0] ? curl_err : curl_easy_strerror(rc));
        return -1;
    }
    long status = 0;
    curl_easy_getinfo(k->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 300) {
        json_t *doc = answer->data ? json_loads(answer->data, 0, NULL) : NULL;
        const char *detail = json_string_value(json_object_get(doc, "detail"));
        snprintf(err, errlen, "the coordinator answered %ld: %s", status, detail ? detail : "(no detail)");
        json_decref(doc);
    }
    return status;
}

static char *hex_of(const void *data, size_t len) {
    static const char digits[] = "0123456789abcdef";
    char *out = malloc(2 * len + 1);
    if (!out) return NULL;
    const unsigned char *b = data;
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * len] = '\0';
    return out;
}

static int nibble(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The bytes a hex string stands for (malloc'd), or NULL when it is not hex. */
static void *bytes_of(const char *hex, size_t *len) {
    size_t n = strlen(hex);
    if (n % 2) return NULL;
    unsigned char *out = malloc(n / 2 + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(out);
            return NULL;
        }
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    *len = n / 2;
    return out;
}

static int http_put(kv_store *s, const char *key, const void *data, size_t len, char *err, size_t errlen) {
    http_kv *k = (http_kv *)s;
    char *hex = hex_of(data, len);
    json_t *body = hex ? json_pack("{s:s, s:s}", "key", key, "value", hex) : NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    free(hex);
    if (!text) {
        snprintf(err, errlen, "out of memory for rendezvous key %s", key);
        return -1;
    }
    int rc = -1;
    for (int attempt = 0, wait = POLL_FIRST_MS; attempt < 5 && rc != 0; attempt++) {
        text_buf answer = {0};
        long status = request(k, k->url, text, &answer, err, errlen);
        free(answer.data);
        if (status >= 200 && status < 300) rc = 0;
        else if (status >= 0) break; /* refused: retrying changes nothing */
        else sleep_ms(wait), wait *= 4;
    }
    free(text);
    if (rc != 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "cannot write rendezvous key %s: %s", key, why);
    }
    return rc;
}

static int http_get(kv_store *s, const char *key, int timeout_ms, void **data, size_t *len, char *err,
                    size_t errlen) {
    http_kv *k = (http_kv *)s;
    size_t n = strlen(k->url) + strlen(key) + 16;
    char *url = malloc(n);
    if (!url) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(url, n, "%s?key=%s", k->url, key); /* a key's characters need no escaping in a query */
    long long deadline = mono_ms() + timeout_ms;
    char last[512] = "";
    int wait = POLL_FIRST_MS, rc = -1;
    for (;;) {
        text_buf answer = {0};
        long status = request(k, url, NULL, &answer, last, sizeof last);
        if (status == 200) {
            json_t *doc = answer.data ? json_loads(answer.data, 0, NULL) : NULL;
            const char *hex = json_string_value(json_object_get(doc, "value"));
            *data = hex ? bytes_of(hex, len) : NULL;
            if (*data) rc = 0;
            else snprintf(err, errlen, "rendezvous key %s: the coordinator's answer holds no hex value", key);
            json_decref(doc);
            free(answer.data);
            break;
        }
        free(answer.data);
        if (status >= 0 && status != 404) { /* refused: waiting changes nothing */
            snprintf(err, errlen, "cannot read rendezvous key %s: %s", key, last);
            break;
        }
        if (mono_ms() >= deadline) {
            snprintf(err, errlen, "rendezvous key %s was not there after %.1f s (%s): did every node's part of the run "
                     "start? (DDPD_RENDEZVOUS_TIMEOUT_S sets how long to wait)", key, timeout_ms / 1000.0, last);
            break;
        }
        sleep_ms(wait);
        wait = wait * 2 > POLL_MOST_MS ? POLL_MOST_MS : wait * 2;
    }
    free(url);
    return rc;
}

static void http_close(kv_store *s) {
    http_kv *k = (http_kv *)s;
    if (!k) return;
    curl_easy_cleanup(k->curl);
    curl_slist_free_all(k->headers);
    free(k->url);
    free(k);
}

kv_store *kv_http_open(const char *url, const char *secret, char *err, size_t errlen) {
    if (!url || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) {
        snprintf(err, errlen, "the rendezvous URL \"%.200s\" is not an http:// URL: give --rendezvous the coordinator's "
                 "http://HOST:PORT/runs/ID/rendezvous (ddpd passes it)", url ? url : "");
        return NULL;
    }
    if (!secret || !*secret) {
        snprintf(err, errlen, "the rendezvous at %.200s needs the run's secret, and DDPD_RUN_SECRET is not set: set it to "
                 "the secret the coordinator gave the run (ddpd and its agents set it)", url);
        return NULL;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    http_kv *k = calloc(1, sizeof *k);
    char auth[400];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", secret);
    if (k) {
        k->curl = curl_easy_init();
        k->url = strdup(url);
        k->headers = curl_slist_append(NULL, "Content-Type: application/json");
        k->headers = k->headers ? curl_slist_append(k->headers, auth) : NULL;
    }
    if (!k || !k->curl || !k->url || !k->headers) {
        if (k) http_close(&k->pub);
        snprintf(err, errlen, "out of memory for the rendezvous client");
        return NULL;
    }
    curl_easy_setopt(k->curl, CURLOPT_HTTPHEADER, k->headers);
    curl_easy_setopt(k->curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(k->curl, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
    curl_easy_setopt(k->curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(k->curl, CURLOPT_NOSIGNAL, 1L);
    /* the coordinator is on the cluster's own network: never through a proxy the
     * environment may name for the outside world */
    curl_easy_setopt(k->curl, CURLOPT_NOPROXY, "*");
    k->pub.put = http_put;
    k->pub.get = http_get;
    k->pub.close = http_close;
    return &k->pub;
}

/* One HTTP request with libcurl, and failures as sentences. See client_http.h. */
#include "client_http.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

client_config CLIENT = {"http://127.0.0.1:8080", NULL};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

void client_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

bool client_interrupted(void) { return interrupted != 0; }

typedef struct {
    char *data;
    size_t len, cap;
} growbuf;

static size_t on_body(char *ptr, size_t size, size_t n, void *cls) {
    growbuf *b = cls;
    size_t add = size * n;
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + add + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) return 0;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, add);
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

/* The one response header ddpctl reads beyond the content type: X-Next-Offset. */
static size_t on_header(char *ptr, size_t size, size_t n, void *cls) {
    http_reply *out = cls;
    size_t len = size * n;
    static const char name[] = "x-next-offset:";
    if (len > sizeof name - 1 && strncasecmp(ptr, name, sizeof name - 1) == 0) {
        char value[32];
        size_t vl = len - (sizeof name - 1) < sizeof value - 1 ? len - (sizeof name - 1) : sizeof value - 1;
        memcpy(value, ptr + sizeof name - 1, vl);
        value[vl] = '\0';
        out->next_offset = atoll(value);
    }
    return len;
}

static int on_progress(void *cls, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    (void)cls, (void)dt, (void)dn, (void)ut, (void)un;
    return interrupted ? 1 : 0;
}

void describe_transport_error(int code, const char *detail, char *err, size_t errlen) {
    const char *url = CLIENT.base;
    switch ((CURLcode)code) {
    case CURLE_COULDNT_CONNECT:
        snprintf(err, errlen, "cannot reach ddpd at %s: nothing is listening there (is it running? set --server or DDPD_URL)", url);
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
        snprintf(err, errlen, "cannot reach ddpd at %s: the host name does not resolve (set --server or DDPD_URL)", url);
        break;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(err, errlen, "ddpd at %s did not answer in time", url);
        break;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        snprintf(err, errlen, "the server URL \"%s\" is not usable: give one like http://127.0.0.1:8080", url);
        break;
    case CURLE_ABORTED_BY_CALLBACK:
        snprintf(err, errlen, "interrupted");
        break;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
        snprintf(err, errlen, "the connection to ddpd at %s broke off (did the server stop?)", url);
        break;
    default: {
        /* libcurl's own words, as a sentence: its error buffer, else its message */
        const char *what = detail && *detail ? detail : curl_easy_strerror((CURLcode)code);
        snprintf(err, errlen, "cannot talk to ddpd at %s: %s", url, what);
        size_t n = strlen(err);
        while (n && (err[n - 1] == '\n' || err[n - 1] == '.')) err[--n] = '\0';
    }
    }
}

int http_call(const char *method, const char *path, const char *body, size_t body_len, http_reply *out, char *err,
              size_t errlen) {
    memset(out, 0, sizeof *out);
    out->next_offset = -1;
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, errlen, "cannot start libcurl");
        return -1;
    }
    size_t ulen = strlen(CLIENT.base) + strlen(path) + 1;
    char *url = malloc(ulen);
    snprintf(url, ulen, "%s%s", CLIENT.base, path);
    growbuf b = {0};
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *headers = curl_slist_append(NULL, "Accept: application/json");
    char *auth = NULL;
    if (CLIENT.token && *CLIENT.token) {
        size_t al = strlen(CLIENT.token) + 32;
        auth = malloc(al);
        snprintf(auth, al, "Authorization: Bearer %s", CLIENT.token);
        headers = curl_slist_append(headers, auth);
    }
    if (body) headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "ddpctl");
    CURLcode rc = curl_easy_perform(c);
    int ret = 0;
    if (rc != CURLE_OK) {
        describe_transport_error(rc, errbuf, err, errlen);
        free(b.data);
        ret = -1;
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        snprintf(out->content_type, sizeof out->content_type, "%s", ct ? ct : "");
        out->body = b.data ? b.data : calloc(1, 1);
        out->len = b.len;
    }
    curl_slist_free_all(headers);
    free(auth);
    free(url);
    curl_easy_cleanup(c);
    return ret;
}

void http_reply_free(http_reply *r) {
    free(r->body);
    r->body = NULL;
}

int post_action(const char *path, int want, http_reply *r) {
    char err[1024];
    if (http_call("POST", path, NULL, 0, r, err, sizeof err) != 0) {
        fprintf(stderr, "ddpctl: %s\n", err);
        return EXIT_UNREACHABLE;
    }
    if (r->status == want || r->status == 200) return EXIT_OK;
    int rc = print_refusal(r, NULL);
    http_reply_free(r);
    return rc;
}

int print_refusal(const http_reply *r, const char *context) {
    json_t *p = strstr(r->content_type, "json") ? json_loadb(r->body, r->len, 0, NULL) : NULL;
    const char *detail = json_string_value(json_object_get(p, "detail"));
    json_t *errors = json_object_get(p, "errors");
    const char *pre = context && *context ? context : "";
    const char *sep = context && *context ? ": " : "";
    if (r->status == 401) {
        fprintf(stderr, "ddpctl: %s%sddpd needs a token for this%s: pass --token TOKEN or set DDPD_TOKEN (your user's "
                "token, which `ddpd user add` printed, or the server's)%s%s\n", pre, sep,
                detail && strstr(detail, "not one this server knows") ? " (the one sent is not one it knows)" : "",
                detail ? ". ddpd says: " : "", detail ? detail : "");
    } else if (json_array_size(errors) > 0) {
        /* a refused config: one line per field, as the server named it */
        fprintf(stderr, "ddpctl: %s%sthe server refused it (%zu problem%s):\n", pre, sep, json_array_size(errors),
                json_array_size(errors) == 1 ? "" : "s");
        size_t i;
        json_t *e;
        json_array_foreach(errors, i, e) {
            const char *ptr = json_string_value(json_object_get(e, "pointer"));
            const char *msg = json_string_value(json_object_get(e, "message"));
            fprintf(stderr, "  %s: %s\n", ptr && *ptr ? ptr : "(the document)", msg ? msg : "?");
        }
    } else if (detail) {
        fprintf(stderr, "ddpctl: %s%s%s\n", pre, sep, detail);
    } else {
        size_t n = r->len > 300 ? 300 : r->len;
        while (n && (r->body[n - 1] == '\n' || r->body[n - 1] == '\r')) n--;
        fprintf(stderr, "ddpctl: %s%sthe server answered %ld%s%.*s\n", pre, sep, r->status, n ? ": " : "", (int)n,
                r->body);
    }
    json_decref(p);
    return EXIT_REFUSED;
}

json_t *get_json(const char *path, int *exit_code) {
    http_reply r;
    char err[1024];
    if (http_call("GET", path, NULL, 0, &r, err, sizeof err) != 0) {
        fprintf(stderr, "ddpctl: %s\n", err);
        *exit_code = client_interrupted() ? EXIT_INTERRUPTED : EXIT_UNREACHABLE;
        return NULL;
    }
    if (r.status != 200) {
        *exit_code = print_refusal(&r, NULL);
        http_reply_free(&r);
        return NULL;
    }
    json_error_t jerr;
    json_t *doc = json_loadb(r.body, r.len, 0, &jerr);
    http_reply_free(&r);
    if (!doc) {
        fprintf(stderr, "ddpctl: the server's answer to GET %s is not JSON (%s): is %s a ddpd?\n", path, jerr.text,
                CLIENT.base);
        *exit_code = EXIT_REFUSED;
    }
    return doc;
}

/* Appends "&name=value" (value percent-encoded) to a query of at most len bytes. */
void query_add(char *q, size_t len, const char *name, const char *value) {
    if (!value) return;
    size_t at = strlen(q);
    at += (size_t)snprintf(q + at, len - at, "%s%s=", at ? "&" : "?", name);
    for (const unsigned char *p = (const unsigned char *)value; *p && at + 4 < len; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-_.~", *p))
            q[at++] = (char)*p;
        else at += (size_t)snprintf(q + at, len - at, "%%%02X", *p);
    }
    q[at] = '\0';
}

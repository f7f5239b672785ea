/* The agent's requests to its coordinator: see agent_http.h. */
#include "agent_http.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define DEADLINE_MS 5000L

static struct {
    CURL *curl;
    char *base;
    struct curl_slist *headers;
} A;

int agent_http_init(const char *base_url, const char *token) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    A.curl = curl_easy_init();
    if (!A.curl) return -1;
    A.base = xstrdup(base_url);
    size_t n = strlen(A.base);
    while (n && A.base[n - 1] == '/') A.base[--n] = '\0';
    A.headers = curl_slist_append(NULL, "Content-Type: application/json");
    A.headers = curl_slist_append(A.headers, "Accept: application/json");
    if (token) {
        char *auth = xasprintf("Authorization: Bearer %s", token);
        A.headers = curl_slist_append(A.headers, auth);
        free(auth);
    }
    return 0;
}

static size_t on_data(char *p, size_t size, size_t n, void *ctx) {
    buf_append(ctx, p, size * n);
    return size * n;
}

long agent_http_post(const char *path, json_t *body, json_t **reply, char *err, size_t errlen) {
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char *url = xasprintf("%s%s", A.base, path);
    buf_t answer = {0};
    char curl_err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(A.curl, CURLOPT_URL, url);
    curl_easy_setopt(A.curl, CURLOPT_POSTFIELDS, text ? text : "{}");
    curl_easy_setopt(A.curl, CURLOPT_HTTPHEADER, A.headers);
    curl_easy_setopt(A.curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(A.curl, CURLOPT_WRITEDATA, &answer);
    curl_easy_setopt(A.curl, CURLOPT_TIMEOUT_MS, DEADLINE_MS);
    curl_easy_setopt(A.curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(A.curl, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(A.curl, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(A.curl);
    long status = -1;
    *reply = NULL;
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "no answer from %s: %s", A.base, curl_err[0] ? curl_err : curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(A.curl, CURLINFO_RESPONSE_CODE, &status);
        *reply = answer.len ? json_loadb(answer.data, answer.len, 0, NULL) : NULL;
        const char *detail = json_string_value(json_object_get(*reply, "detail"));
        if (status >= 300) snprintf(err, errlen, "%s answered %ld: %s", A.base, status, detail ? detail : "(no detail)");
    }
    buf_free(&answer);
    free(url);
    free(text);
    return status;
}

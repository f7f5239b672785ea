/* ddpctl's HTTP side (libcurl): one request to ddpd, with the token when there is
 * one, and failures said the way a person needs them: an unreachable server is one
 * sentence naming the URL and what to check, never a libcurl code; a refusal from
 * the server is its problem document's detail, then each field it names with its
 * problem. */
#ifndef DDPD_CLIENT_CLIENT_HTTP_H
#define DDPD_CLIENT_CLIENT_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit statuses (ddpctl --help lists them). */
enum {
    EXIT_OK = 0,
    EXIT_RUN_FAILED = 1,
    EXIT_USAGE = 2,
    EXIT_UNREACHABLE = 3,
    EXIT_REFUSED = 4,
    EXIT_RUN_CANCELED = 5,
    EXIT_INTERRUPTED = 130,
};

typedef struct {
    const char *base;  /* "http://127.0.0.1:8080", no trailing slash */
    const char *token; /* NULL: none */
} client_config;

extern client_config CLIENT;

typedef struct {
    long status;
    char *body; /* NUL-terminated */
    size_t len;
    char content_type[128];
    long long next_offset; /* X-Next-Offset (GET /runs/{id}/logs), -1 when absent */
} http_reply;

/* Sends the request. 0: an answer came (any status); -1: none did, and err holds
 * the sentence to print. `body` may be NULL. */
int http_call(const char *method, const char *path, const char *body, size_t body_len, http_reply *out, char *err,
              size_t errlen);
void http_reply_free(http_reply *r);

/* Describes a failed transfer: `code` is a CURLcode, `detail` libcurl's error buffer. */
void describe_transport_error(int code, const char *detail, char *err, size_t errlen);

/* Prints why the server said no (to stderr), prefixed by `context` when given:
 *   ddpctl: the run config is invalid: ...
 *     /train/batch_size: must be a multiple of /distributed/world_size (2)
 * Returns EXIT_REFUSED. */
int print_refusal(const http_reply *r, const char *context);

/* POST to `path` with no body, for an action (cancel, resume): EXIT_OK with *r the
 * answer when its status is `want` (or 200); else the failure printed, *r freed, and
 * the exit status to return (EXIT_UNREACHABLE, or print_refusal's). */
int post_action(const char *path, int want, http_reply *r);

/* GET path and parse JSON; prints the failure and returns NULL (*exit_code set) on
 * any failure. */
json_t *get_json(const char *path, int *exit_code);

/* Sets up libcurl's globals and the SIGINT flag's handler. */
void client_init(void);
/* Set by SIGINT; long transfers check it and stop. */
bool client_interrupted(void);

/* Appends "&name=value" (the first "?name=value"; value percent-encoded) to the query
 * q of at most len bytes; nothing when value is NULL. */
void query_add(char *q, size_t len, const char *name, const char *value);

#endif

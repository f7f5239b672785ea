/* The server's own paths kept out of its answers: see path_redact.h. */
#include "path_redact.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define MAX_RULES 40

typedef struct {
    char *prefix;
    size_t len;
    char *label;
} rule;

static struct {
    rule r[MAX_RULES];
    int n;
    bool disabled;
} P;

/* A character that continues a path's component: a prefix followed by one is part of
 * a longer name ("/data" in "/database"), not that path. */
static bool continues_name(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-' || c == '+' || c == '~';
}

static void add_one(const char *prefix, const char *label) {
    size_t len = strlen(prefix);
    while (len > 1 && prefix[len - 1] == '/') len--; /* "/var/lib/ddpd/" is "/var/lib/ddpd" */
    if (len < 2 || prefix[0] != '/' || strpbrk(prefix, "\\\"") || P.n == MAX_RULES) return;
    for (int i = 0; i < P.n; i++)
        if (P.r[i].len == len && memcmp(P.r[i].prefix, prefix, len) == 0) return; /* the first label holds */
    /* longest first, so that a root inside another is named as itself */
    int at = P.n;
    while (at > 0 && P.r[at - 1].len < len) at--;
    memmove(&P.r[at + 1], &P.r[at], (size_t)(P.n - at) * sizeof P.r[0]);
    P.r[at] = (rule){.prefix = xstrndup(prefix, len), .len = len, .label = xstrdup(label)};
    P.n++;
}

void path_redact_add(const char *prefix, const char *label) {
    if (!prefix || !label) return;
    add_one(prefix, label);
    char real[PATH_MAX];
    if (realpath(prefix, real) && strcmp(real, prefix) != 0) add_one(real, label);
}

void path_redact_disable(void) { P.disabled = true; }

void path_redact_clear(void) {
    for (int i = 0; i < P.n; i++) {
        free(P.r[i].prefix);
        free(P.r[i].label);
    }
    P.n = 0;
    P.disabled = false;
}

/* The rule whose prefix stands at t[i] as a whole path or leading directories. */
static const rule *match_at(const char *t, size_t n, size_t i) {
    if (t[i] != '/') return NULL;
    /* what stands before starts no path: a name's last character, or '/', does; a JSON
     * escape ("\n/srv/...") does not */
    bool escaped = i > 1 && t[i - 2] == '\\';
    if (i > 0 && !escaped && (continues_name(t[i - 1]) || t[i - 1] == '/')) return NULL;
    for (int k = 0; k < P.n; k++) {
        const rule *r = &P.r[k];
        if (r->len <= n - i && memcmp(t + i, r->prefix, r->len) == 0 &&
            (i + r->len == n || !continues_name(t[i + r->len])))
            return r;
    }
    return NULL;
}

bool path_redact_apply(char **text, size_t *len) {
    if (P.disabled || !P.n || !*text) return false;
    const char *t = *text;
    size_t n = *len;
    buf_t out = {0};
    size_t copied = 0;
    for (size_t i = 0; i < n; i++) {
        const rule *r = match_at(t, n, i);
        if (!r) continue;
        buf_append(&out, t + copied, i - copied);
        buf_append(&out, r->label, strlen(r->label));
        i += r->len - 1;
        copied = i + 1;
    }
    if (!out.data) return false;
    buf_append(&out, t + copied, n - copied);
    free(*text);
    *text = out.data;
    *len = out.len;
    return true;
}

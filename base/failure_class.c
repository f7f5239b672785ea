/* A failed attempt's class: see failure_class.h. The rules are one table, tried in
 * order: the first that matches decides, with the line or counter it matched as the
 * evidence. A rule on the output looks at each line, newest first. */
#include "failure_class.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static const char *const NAMES[FAILURE_CLASS_COUNT] = {
    [FAILURE_OOM] = "oom",         [FAILURE_HANG] = "hang",   [FAILURE_COLLECTIVE] = "collective",
    [FAILURE_CRASH] = "crash",     [FAILURE_SCRIPT_ERROR] = "script_error", [FAILURE_EXIT] = "exit",
    [FAILURE_INFRA] = "infra",     [FAILURE_DATA] = "data",   [FAILURE_CONFIG] = "config",
};

const char *failure_class_name(failure_class c) {
    return (unsigned)c < FAILURE_CLASS_COUNT ? NAMES[c] : "exit";
}

int failure_class_parse(const char *name, failure_class *out) {
    for (int c = 0; name && c < FAILURE_CLASS_COUNT; c++)
        if (strcmp(name, NAMES[c]) == 0) {
            *out = (failure_class)c;
            return 0;
        }
    return -1;
}

typedef enum {
    ON_LOST,      /* a node, agent or launcher was lost */
    ON_HANG,      /* the hang watch stopped it */
    ON_OOM_KILLS, /* the cgroup counted an OOM kill */
    ON_EXCEPTION, /* a line is a Python exception of that name: "[pkg.]Name: ..." or "[pkg.]Name" */
    ON_LINE,      /* a line holds the text */
    ON_REASON,    /* the launcher's reason holds the text */
    ON_SIGNAL,    /* that signal ended the rank */
    ON_FAILED,    /* any failure at all: the last row */
} rule_kind;

typedef struct {
    failure_class cls;
    rule_kind on;
    const char *text; /* ON_EXCEPTION, ON_LINE, ON_REASON */
    int signal;       /* ON_SIGNAL */
    int early;        /* only before the attempt's first step (stepped != 1) */
} rule;

/* One row per rule; order matters (an OOM that ends in an NCCL abort is an OOM; a
 * collective timeout that ends in SIGABRT is a collective failure). */
static const rule RULES[] = {
    {FAILURE_INFRA, ON_LOST, NULL, 0, 0},
    {FAILURE_HANG, ON_HANG, NULL, 0, 0},
    {FAILURE_OOM, ON_OOM_KILLS, NULL, 0, 0},
    {FAILURE_OOM, ON_EXCEPTION, "OutOfMemoryError", 0, 0}, /* torch.OutOfMemoryError, torch.cuda.OutOfMemoryError */
    {FAILURE_OOM, ON_EXCEPTION, "MemoryError", 0, 0},
    {FAILURE_OOM, ON_LINE, "CUDA out of memory", 0, 0},
    {FAILURE_OOM, ON_LINE, "CUDA error: out of memory", 0, 0},
    {FAILURE_OOM, ON_LINE, "DefaultCPUAllocator: can't allocate memory", 0, 0},
    {FAILURE_COLLECTIVE, ON_LINE, "Watchdog caught collective operation timeout", 0, 0},
    {FAILURE_COLLECTIVE, ON_LINE, "NCCL error", 0, 0},
    {FAILURE_COLLECTIVE, ON_LINE, "ncclSystemError", 0, 0},
    {FAILURE_COLLECTIVE, ON_LINE, "ncclInternalError", 0, 0},
    {FAILURE_COLLECTIVE, ON_LINE, "ncclUnhandledCudaError", 0, 0},
    {FAILURE_COLLECTIVE, ON_LINE, "ncclRemoteError", 0, 0},
    {FAILURE_COLLECTIVE, ON_EXCEPTION, "DistBackendError", 0, 0},
    {FAILURE_COLLECTIVE, ON_LINE, "gloo/transport/", 0, 0}, /* "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] ..." */
    {FAILURE_COLLECTIVE, ON_LINE, "Gloo connectFullMesh failed", 0, 0},
    {FAILURE_CONFIG, ON_REASON, "is not a valid run config", 0, 0},
    {FAILURE_DATA, ON_REASON, "cannot load the training data", 0, 0},
    {FAILURE_DATA, ON_REASON, "cannot load the test data", 0, 0},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "SyntaxError", 0, 0},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "IndentationError", 0, 0},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "TabError", 0, 0},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "ModuleNotFoundError", 0, 0},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "ImportError", 0, 0},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "FileNotFoundError", 0, 1},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "PermissionError", 0, 1},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "IsADirectoryError", 0, 1},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "NotADirectoryError", 0, 1},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "NameError", 0, 1},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "AttributeError", 0, 1},
    {FAILURE_SCRIPT_ERROR, ON_EXCEPTION, "TypeError", 0, 1},
    {FAILURE_CRASH, ON_SIGNAL, NULL, SIGSEGV, 0},
    {FAILURE_CRASH, ON_SIGNAL, NULL, SIGBUS, 0},
    {FAILURE_CRASH, ON_SIGNAL, NULL, SIGILL, 0},
    {FAILURE_CRASH, ON_SIGNAL, NULL, SIGFPE, 0},
    {FAILURE_CRASH, ON_SIGNAL, NULL, SIGABRT, 0},
    {FAILURE_EXIT, ON_FAILED, NULL, 0, 0},
};

/* The line [b, e) without a "[rank3]: " or "[rank 3] " prefix that launchers put before it. */
static const char *past_rank_prefix(const char *b, const char *e) {
    if (e - b > 6 && strncmp(b, "[rank", 5) == 0) {
        const char *p = b + 5;
        while (p < e && (*p == ' ' || isdigit((unsigned char)*p))) p++;
        if (p < e && *p == ']') {
            p++;
            if (p < e && *p == ':') p++;
            while (p < e && *p == ' ') p++;
            return p;
        }
    }
    return b;
}

/* Whether [b, e) is a Python exception line whose name (the last dotted part) is `name`. */
static int is_exception(const char *b, const char *e, const char *name) {
    b = past_rank_prefix(b, e);
    const char *p = b, *last = b;
    while (p < e && (isalnum((unsigned char)*p) || *p == '_' || *p == '.')) {
        if (*p == '.') last = p + 1;
        p++;
    }
    if (p == b || isdigit((unsigned char)*b) || *b == '.' || (p < e && *p != ':')) return 0;
    size_t n = strlen(name);
    return (size_t)(p - last) == n && strncmp(last, name, n) == 0;
}

static int holds(const char *b, const char *e, const char *text) {
    size_t n = strlen(text);
    for (const char *p = b; p + n <= e; p++)
        if (*p == *text && strncmp(p, text, n) == 0) return 1;
    return 0;
}

/* The newest line of `output` the rule matches: its bounds, else 0. */
static int match_line(const rule *r, const char *output, const char **lb, const char **le) {
    if (!output) return 0;
    const char *end = output + strlen(output);
    while (end > output) {
        const char *e = end;
        while (e > output && (e[-1] == '\n' || e[-1] == '\r')) e--;
        const char *b = e;
        while (b > output && b[-1] != '\n' && b[-1] != '\r') b--;
        if (b < e && (r->on == ON_EXCEPTION ? is_exception(b, e, r->text) : holds(b, e, r->text))) {
            *lb = b;
            *le = e;
            return 1;
        }
        end = b;
    }
    return 0;
}

/* The evidence: a line (clipped, whole UTF-8 sequences only). */
static void say_line(failure_verdict *out, const char *b, const char *e) {
    while (b < e && (*b == ' ' || *b == '\t')) b++;
    size_t n = (size_t)(e - b), room = sizeof out->evidence - 1;
    if (n > room) {
        n = room;
        while (n > 0 && ((unsigned char)b[n] & 0xC0) == 0x80) n--; /* not inside a sequence */
    }
    memcpy(out->evidence, b, n);
    out->evidence[n] = '\0';
}

static int rule_matches(const rule *r, const failure_input *in, failure_verdict *out) {
    const char *b, *e;
    if (r->early && in->stepped == 1) return 0;
    switch (r->on) {
    case ON_LOST:
        if (!in->lost) return 0;
        snprintf(out->evidence, sizeof out->evidence, "%s", in->lost);
        return 1;
    case ON_HANG:
        if (!in->hang) return 0;
        snprintf(out->evidence, sizeof out->evidence, "the hang watch stopped it (distributed.hang_timeout_s)");
        return 1;
    case ON_OOM_KILLS:
        if (in->oom_kills <= 0) return 0;
        snprintf(out->evidence, sizeof out->evidence, "the run's cgroup counted %ld OOM kill%s (oom_kill)%s%s",
                 in->oom_kills, in->oom_kills > 1 ? "s" : "", in->memory_max ? "; its memory limit is " : "",
                 in->memory_max ? in->memory_max : "");
        return 1;
    case ON_EXCEPTION:
    case ON_LINE:
        if (!match_line(r, in->output, &b, &e)) return 0;
        say_line(out, b, e);
        return 1;
    case ON_REASON:
        if (!in->reason || !strstr(in->reason, r->text)) return 0;
        say_line(out, in->reason, in->reason + strlen(in->reason));
        return 1;
    case ON_SIGNAL:
        if (in->signal != r->signal) return 0;
        snprintf(out->evidence, sizeof out->evidence, "killed by SIG%s (signal %d)", sigabbrev_np(r->signal), r->signal);
        return 1;
    case ON_FAILED:
        if (in->signal > 0)
            snprintf(out->evidence, sizeof out->evidence, "killed by SIG%s (signal %d)",
                     sigabbrev_np(in->signal) ? sigabbrev_np(in->signal) : "?", in->signal);
        else if (in->exit_code >= 0) snprintf(out->evidence, sizeof out->evidence, "exit status %d", in->exit_code);
        else snprintf(out->evidence, sizeof out->evidence, "it failed without an exit status");
        return 1;
    }
    return 0;
}

void failure_classify(const failure_input *in, failure_verdict *out) {
    out->cls = FAILURE_EXIT;
    out->evidence[0] = '\0';
    for (size_t i = 0; i < sizeof RULES / sizeof RULES[0]; i++)
        if (rule_matches(&RULES[i], in, out)) {
            out->cls = RULES[i].cls;
            return;
        }
}

/* Reading a program's settings from its table: see opt_table.h. */
#include "opt_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "die.h"
#include "roff.h"

#define USAGE_WIDTH 98 /* the usage's lines are at most this long */
#define USAGE_INDENT 25 /* where a row's text starts */

bool opt_truthy(const char *v) {
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0);
}

char *opt_keep_add(opt_keep *k, char *s) {
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 8;
        k->owned = xrealloc(k->owned, (size_t)k->cap * sizeof *k->owned);
    }
    return k->owned[k->n++] = s;
}

void opt_keep_free(opt_keep *k) {
    for (int i = 0; i < k->n; i++) free(k->owned[i]);
    free(k->owned);
    memset(k, 0, sizeof *k);
}

const opt_row *opt_find(const opt_table *t, const char *flag) {
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].flag, flag) == 0) return &t->rows[i];
    return NULL;
}

static void *field_of(void *settings, const opt_row *r) { return (char *)settings + r->field; }

static void list_add(const opt_table *t, opt_list *l, const char *v, const char *from) {
    if (l->n == OPT_LIST_MAX) die("at most %d %s (see %s --help)", OPT_LIST_MAX, from, t->program);
    l->v[l->n++] = v;
}

/* The flags: each row's value as given (lists filled as they come). */
static void read_flags(const opt_table *t, int first, int argc, char **argv, void *settings, const char **given) {
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            opt_usage(t, stdout);
            exit(0);
        }
        const opt_row *r = opt_find(t, a);
        if (r && r->kind == OPT_BOOL) {
            *(bool *)field_of(settings, r) = true;
            given[r - t->rows] = r->flag;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) die("unexpected argument \"%s\" (see %s --help)", a, t->program);
        char name[64];
        const char *eq = strchr(a, '='), *v;
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        if (n >= sizeof name) die("unknown option %s (see %s --help)", a, t->program);
        memcpy(name, a, n);
        name[n] = '\0';
        r = opt_find(t, name);
        if (!r || r->kind == OPT_BOOL) die("unknown option %s (see %s --help)", name, t->program);
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else die("%s needs a value (see %s --help)", name, t->program);
        if (r->kind == OPT_PATHS || r->kind == OPT_WORDS) list_add(t, field_of(settings, r), v, r->flag);
        else given[r - t->rows] = v;
    }
}

/* The first value out of its bounds, naming its flag. */
static void note_problem(const opt_table *t, const opt_row *r, const char *v, char *problem, size_t size) {
    if (problem[0]) return;
    if (t->terse_bounds) snprintf(problem, size, "%s %s: a whole number from %d to %d is needed", r->flag, v, r->min, r->max);
    else snprintf(problem, size, "%s must be an integer from %d to %d (got \"%s\")", r->flag, r->min, r->max, v);
}

static int whole_number(const char *v, int lo, int hi, bool *ok) {
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    *ok = *v && !*end && !errno && n >= lo && n <= hi;
    return *ok ? (int)n : 0;
}

void opt_read(const opt_table *t, int first, int argc, char **argv, void *settings, opt_origins *origins,
              opt_keep *keep, char *problem, size_t problem_size) {
    if (t->n > sizeof origins->from / sizeof *origins->from) die("%s: too many settings for opt_origins", t->program);
    memset(origins, 0, sizeof *origins);
    problem[0] = '\0';
    const char *given[sizeof origins->from / sizeof *origins->from] = {0};
    read_flags(t, first, argc, argv, settings, given);
    for (size_t i = 0; i < t->n; i++) {
        const opt_row *r = &t->rows[i];
        void *f = field_of(settings, r);
        const char *env = r->env && !(r->flags & OPT_ENV_BY_HAND) ? getenv(r->env) : NULL;
        switch (r->kind) {
        case OPT_BOOL:
            if (given[i]) origins->from[i] = r->flag;
            else if (opt_truthy(env)) *(bool *)f = true, origins->from[i] = r->env;
            break;
        case OPT_PATHS:
        case OPT_WORDS: {
            opt_list *l = f;
            if (l->n) {
                origins->from[i] = r->flag;
                break;
            }
            if (!env || !*env) {
                if (r->dflt) l->v[l->n++] = r->dflt;
                break;
            }
            origins->from[i] = r->env;
            char *copy = opt_keep_add(keep, xstrdup(env)), *save = NULL;
            const char *seps = r->kind == OPT_PATHS ? ":" : " \t";
            for (char *w = strtok_r(copy, seps, &save); w; w = strtok_r(NULL, seps, &save))
                list_add(t, l, w, r->env);
            break;
        }
        case OPT_STRING:
        case OPT_INT: {
            const char *v = given[i] ? given[i] : env;
            origins->from[i] = given[i] ? r->flag : env ? r->env : NULL;
            /* "" is the default where there is one (and a string without one keeps it) */
            if ((!v || !*v) && (r->dflt || r->kind == OPT_INT)) v = r->dflt, origins->from[i] = NULL;
            if (r->kind == OPT_STRING) {
                *(const char **)f = v;
                break;
            }
            int *n = f;
            bool ok;
            *n = v ? whole_number(v, r->min, r->max, &ok) : OPT_UNSET;
            if (v && !ok) { /* said, and the default kept (a default out of bounds is the table's mistake) */
                note_problem(t, r, v, problem, problem_size);
                *n = r->dflt ? whole_number(r->dflt, r->min, r->max, &ok) : OPT_UNSET;
            }
            break;
        }
        }
    }
}

/* ---- the usage ---- */

/* `text` word by word from `column`, each line at most USAGE_WIDTH long, the next ones
 * indented to USAGE_INDENT. */
static void wrap(FILE *out, const char *text, size_t column) {
    bool line_start = true;
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        size_t len = strcspn(p, " ");
        if (!len) break;
        if (!line_start && column + 1 + len > USAGE_WIDTH) {
            fprintf(out, "\n%*s", USAGE_INDENT, "");
            column = USAGE_INDENT;
            line_start = true;
        }
        if (!line_start) {
            fputc(' ', out);
            column++;
        }
        fwrite(p, 1, len, out);
        column += len;
        p += len;
        line_start = false;
    }
    fputc('\n', out);
}

/* A row's text in the usage: its help, then its variable and default in parentheses. */
static void row_text(const opt_row *r, char *text, size_t textlen) {
    char paren[768] = "";
    bool list = r->kind == OPT_PATHS || r->kind == OPT_WORDS;
    size_t at = 0;
#define PAREN(...) (at += (size_t)snprintf(paren + at, at < sizeof paren ? sizeof paren - at : 0, __VA_ARGS__))
    if (r->env)
        PAREN("%s%s%s", r->env, r->kind == OPT_BOOL ? "=1" : "",
              r->kind == OPT_PATHS ? ", colon-separated" : r->kind == OPT_WORDS ? ", space-separated" : "");
    if (r->dflt_says) PAREN("%s%s", at ? "; " : "", r->dflt_says);
    else if (r->dflt) PAREN("%sdefault %s", at ? "; " : "", r->dflt);
    if (r->note) PAREN("%s%s", at ? "; " : "", r->note);
#undef PAREN
    snprintf(text, textlen, "%s%s%s%s%s%s", r->help, list ? "; repeatable" : "", paren[0] ? " (" : "", paren,
             paren[0] ? ")" : "", r->after ? r->after : "");
}

static void usage_row(const opt_row *r, FILE *out) {
    char head[128], text[2048];
    snprintf(head, sizeof head, "  %s%s%s", r->flag, r->meta ? " " : "", r->meta ? r->meta : "");
    row_text(r, text, sizeof text);
    size_t column = strlen(head);
    fputs(head, out);
    if (column < USAGE_INDENT) {
        fprintf(out, "%*s", (int)(USAGE_INDENT - column), "");
        column = USAGE_INDENT;
    } else {
        fputs("  ", out); /* two spaces after a long flag */
        column += 2;
    }
    wrap(out, text, column);
}

void opt_roff(const opt_table *t, FILE *out) {
    roff_usage(out, roff_after_synopsis(t->usage), NULL);
    for (size_t i = 0; i < t->n; i++) {
        const opt_row *r = &t->rows[i];
        char head[128], text[2048];
        snprintf(head, sizeof head, "%s%s%s", r->flag, r->meta ? " " : "", r->meta ? r->meta : "");
        row_text(r, text, sizeof text);
        roff_entry(out, head, text);
    }
}

void opt_usage(const opt_table *t, FILE *out) {
    fputs(t->usage, out);
    for (size_t i = 0; i < t->n; i++) usage_row(&t->rows[i], out);
}

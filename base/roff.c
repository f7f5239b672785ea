/* Manual pages in roff: see roff.h. */
#include "roff.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

void roff_header(FILE *out, const char *name, const char *source, const char *title) {
    fputs(".TH \"", out);
    for (const char *c = name; *c; c++) fputc(toupper((unsigned char)*c), out);
    fprintf(out, "\" 1 \"\" \"%s\" \"%s\"\n", source, title);
}

void roff_section(FILE *out, const char *title) { fprintf(out, ".SH \"%s\"\n", title); }

void roff_text(FILE *out, const char *s, size_t n) {
    bool line_start = true;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (line_start && (c == '.' || c == '\'')) fputs("\\&", out);
        if (c == '\\') fputs("\\e", out);
        else if (c == '-') fputs("\\-", out);
        else fputc(c, out);
        line_start = c == '\n';
    }
}

static void text_line(FILE *out, const char *s) {
    roff_text(out, s, strlen(s));
    fputc('\n', out);
}

const char *roff_after_synopsis(const char *usage) {
    if (strncmp(usage, "usage: ", 7) != 0) return usage;
    const char *blank = strstr(usage, "\n\n");
    return blank ? blank + 2 : usage + strlen(usage);
}

void roff_paragraph(FILE *out, const char *text) {
    fputs(".PP\n", out);
    text_line(out, text);
}

void roff_entry(FILE *out, const char *term, const char *text) {
    fputs(".TP\n.B ", out);
    text_line(out, term);
    text_line(out, text);
}

static size_t indent_of(const char *line) {
    size_t n = 0;
    while (line[n] == ' ') n++;
    return n;
}

/* The text after the spaces that start `line` (and its whitespace run ends). */
static const char *trimmed(const char *line) { return line + indent_of(line); }

#define DESCRIPTION_INDENT 16 /* a continuation indented this far goes on the description */

void roff_usage(FILE *out, const char *usage, const char *section) {
    char *copy = xstrdup(usage);
    /* lines, blank ones kept */
    size_t n = 0, cap = 16;
    char **lines = xmalloc(cap * sizeof *lines);
    for (char *p = copy, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        if (n == cap) lines = xrealloc(lines, (cap *= 2) * sizeof *lines);
        lines[n++] = p;
    }
    size_t i = 0;
    while (i < n) {
        const char *l = lines[i];
        if (!*trimmed(l)) {
            i++;
            continue;
        }
        if (strncmp(l, "usage: ", 7) == 0) { /* the synopsis: as written */
            fputs(".nf\n", out);
            /* "usage: " and the continuation lines' indent under it are the page's own */
            for (; i < n && *trimmed(lines[i]); i++)
                text_line(out, lines[i] + (indent_of(lines[i]) >= 7 || !strncmp(lines[i], "usage: ", 7) ? 7 : 0));
            fputs(".fi\n", out);
            if (section) roff_section(out, section);
            continue;
        }
        if (indent_of(l) == 2 && l[2] != ' ') { /* an entry: TERM, two spaces, text */
            const char *t = l + 2, *gap = strstr(t, "  ");
            char *term = gap ? xstrndup(t, (size_t)(gap - t)) : xstrdup(t);
            char *text = xstrdup(gap ? trimmed(gap) : "");
            for (i++; i < n && indent_of(lines[i]) > 2 && *trimmed(lines[i]); i++) {
                bool of_term = !*text && indent_of(lines[i]) < DESCRIPTION_INDENT;
                char *more = xasprintf("%s%s%s", of_term ? term : text, (of_term ? *term : *text) ? " " : "",
                                       trimmed(lines[i]));
                if (of_term) free(term), term = more;
                else free(text), text = more;
            }
            roff_entry(out, term, text);
            free(term);
            free(text);
            continue;
        }
        char *para = xstrdup(trimmed(l)); /* a paragraph: its lines joined */
        for (i++; i < n && *trimmed(lines[i]) && !(indent_of(lines[i]) == 2 && lines[i][2] != ' '); i++) {
            char *more = xasprintf("%s %s", para, trimmed(lines[i]));
            free(para);
            para = more;
        }
        roff_paragraph(out, para);
        free(para);
    }
    free(lines);
    free(copy);
}

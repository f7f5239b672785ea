/* Manual pages in roff (man(7)), written by the programs themselves from what their
 * --help already says: `ddpd man` (its settings tables and usage texts) and `ddpctl
 * man` (its usage), which the build turns into ddpd.1 and ddpctl.1. Text is escaped
 * so that troff prints it as written; a usage text of the shape every ddpd program's
 * --help has ("usage:" lines, paragraphs, and "  TERM  description" entries whose
 * description goes on indented) becomes a synopsis, paragraphs and tagged entries. */
#ifndef DDPD_BASE_ROFF_H
#define DDPD_BASE_ROFF_H

#include <stddef.h>
#include <stdio.h>

/* .TH: the page's name (upper-cased), section 1, its source ("ddpd 0.1.0"). */
void roff_header(FILE *out, const char *name, const char *source, const char *title);
/* .SH TITLE */
void roff_section(FILE *out, const char *title);
/* n bytes of text, escaped (a backslash, a hyphen, a line's leading period or quote). */
void roff_text(FILE *out, const char *s, size_t n);
/* A paragraph (.PP) of one text. */
void roff_paragraph(FILE *out, const char *text);
/* A tagged entry (.TP): the term in bold, then its text. */
void roff_entry(FILE *out, const char *term, const char *text);
/* A usage text: its "usage:" lines as a synopsis (no fill), then (when `section` is
 * not NULL) a section of that title, then each "  TERM  text" entry (with its
 * indented continuation lines) as a tagged entry, the rest as paragraphs. */
void roff_usage(FILE *out, const char *usage, const char *section);
/* The usage text after its "usage:" lines (a page whose SYNOPSIS says them already). */
const char *roff_after_synopsis(const char *usage);

#endif

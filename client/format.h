/* How ddpctl writes numbers, durations and times for a person: losses with 4
 * significant digits, learning rates in scientific notation, throughput with
 * thousands separators, durations as 1m23s, and tables with aligned columns. JSON
 * null (or a missing value) prints as "-". */
#ifndef DDPD_CLIENT_FORMAT_H
#define DDPD_CLIENT_FORMAT_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

void fmt_num(const json_t *v, char *out, size_t n);       /* 0.4123 */
void fmt_sci(const json_t *v, char *out, size_t n);       /* 1.00e-03 */
void fmt_thousands(const json_t *v, char *out, size_t n); /* 12,345 */
void fmt_duration(double seconds, char *out, size_t n);   /* 45s, 1m23s, 2h05m; NaN: "-" */
/* Epochs are numbered from 0, as the API numbers them; the count follows:
 * "epoch 5 (6 of 10)", or "epoch 5" when `epochs` is unknown (0). */
void fmt_epoch(long long epoch, long long epochs, char *out, size_t n);
/* "2024-06-01T12:00:03.123Z" -> "2024-06-01 12:00:03"; NULL: "-" */
void fmt_time(const char *iso, char *out, size_t n);
/* Seconds from one ISO 8601 UTC time to another (`to` NULL: now); NaN when unknown. */
double iso_diff_s(const char *from, const char *to);

/* A table: rows of cells (strings), printed with columns padded to their widest. */
typedef struct {
    int cols;
    char **cells; /* rows * cols, malloc'd strings */
    int rows, cap;
} table;
void table_init(table *t, int cols);
void table_row(table *t, const char *const *cells);
void table_print(table *t, FILE *out);
void table_free(table *t);

#endif

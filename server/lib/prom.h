/* Prometheus' text exposition format (version 0.0.4), the writing side: families
 * with their HELP and TYPE lines, samples with escaped label values, and histograms
 * (buckets cumulative, ending with +Inf, then _sum and _count). */
#ifndef DDPD_SERVER_LIB_PROM_H
#define DDPD_SERVER_LIB_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define PROM_MAX_BOUNDS 15

typedef struct {
    uint64_t counts[PROM_MAX_BOUNDS + 1]; /* per bound, not cumulative; [nb]: above the last */
    double sum;
    uint64_t count;
} prom_histogram;

void prom_observe(prom_histogram *h, const double *bounds, size_t nb, double v);

void prom_family(buf_t *b, const char *name, const char *type, const char *help);
/* labels: key, value, key, value, ..., NULL (or labels NULL). */
void prom_sample_u(buf_t *b, const char *name, const char *const *labels, uint64_t v);
void prom_sample_d(buf_t *b, const char *name, const char *const *labels, double v);
/* `labels` has room for two more entries (the le pair) after its n_labels pairs. */
void prom_histogram_lines(buf_t *b, const char *name, const char **labels, size_t n_labels, const prom_histogram *h,
                          const double *bounds, size_t nb);
/* A label value, escaped (backslash, double quote, newline), appended to `out`. */
void prom_escape_label(buf_t *out, const char *value);

#endif

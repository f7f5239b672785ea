/* The Prometheus text format: see prom.h. */
#include "prom.h"

#include <stdio.h>

void prom_observe(prom_histogram *h, const double *bounds, size_t nb, double v) {
    size_t i = 0;
    while (i < nb && v > bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void prom_escape_label(buf_t *out, const char *v) {
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '\\') buf_append(out, "\\\\", 2);
        else if (*p == '"') buf_append(out, "\\\"", 2);
        else if (*p == '\n') buf_append(out, "\\n", 2);
        else buf_append(out, p, 1);
    }
}

void prom_family(buf_t *b, const char *name, const char *type, const char *help) {
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{k1="v1",k2="v2"} with escaped values; pairs end with a NULL key. */
static void series(buf_t *b, const char *name, const char *suffix, const char *const *labels) {
    buf_printf(b, "%s%s", name, suffix ? suffix : "");
    if (labels && labels[0]) {
        buf_append(b, "{", 1);
        for (size_t i = 0; labels[i]; i += 2) {
            buf_printf(b, "%s%s=\"", i ? "," : "", labels[i]);
            prom_escape_label(b, labels[i + 1]);
            buf_append(b, "\"", 1);
        }
        buf_append(b, "}", 1);
    }
}

void prom_sample_u(buf_t *b, const char *name, const char *const *labels, uint64_t v) {
    series(b, name, NULL, labels);
    buf_printf(b, " %llu\n", (unsigned long long)v);
}

void prom_sample_d(buf_t *b, const char *name, const char *const *labels, double v) {
    series(b, name, NULL, labels);
    buf_printf(b, " %.17g\n", v);
}

/* The _bucket (cumulative, ending with +Inf), _sum and _count lines of one histogram.
 * `labels` has room for two more entries (the le pair) before its NULL. */
void prom_histogram_lines(buf_t *b, const char *name, const char **labels, size_t n_labels, const prom_histogram *h,
                            const double *bounds, size_t nb) {
    uint64_t cum = 0;
    char le[32];
    labels[n_labels] = "le";
    labels[n_labels + 1] = le;
    labels[n_labels + 2] = NULL;
    for (size_t i = 0; i <= nb; i++) {
        cum += h->counts[i];
        if (i < nb) snprintf(le, sizeof le, "%g", bounds[i]);
        else snprintf(le, sizeof le, "+Inf");
        series(b, name, "_bucket", labels);
        buf_printf(b, " %llu\n", (unsigned long long)cum);
    }
    labels[n_labels] = NULL;
    series(b, name, "_sum", labels);
    buf_printf(b, " %.17g\n", h->sum);
    series(b, name, "_count", labels);
    buf_printf(b, " %llu\n", (unsigned long long)h->count);
}

/* Number, duration, time and table formatting for ddpctl. See format.h. */
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void fmt_num(const json_t *v, char *out, size_t n) {
    if (!json_is_number(v)) snprintf(out, n, "-");
    else snprintf(out, n, "%.4g", json_number_value(v));
}

void fmt_sci(const json_t *v, char *out, size_t n) {
    if (!json_is_number(v)) snprintf(out, n, "-");
    else snprintf(out, n, "%.2e", json_number_value(v));
}

void fmt_thousands(const json_t *v, char *out, size_t n) {
    if (!json_is_number(v)) {
        snprintf(out, n, "-");
        return;
    }
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", fabs(json_number_value(v)));
    size_t len = strlen(digits), o = 0;
    if (json_number_value(v) < 0 && o + 1 < n) out[o++] = '-';
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        out[o++] = digits[i];
        if ((len - i - 1) % 3 == 0 && i + 1 < len) out[o++] = ',';
    }
    out[o] = '\0';
}

void fmt_duration(double s, char *out, size_t n) {
    if (!isfinite(s) || s < 0) {
        snprintf(out, n, "-");
        return;
    }
    long t = lround(s);
    if (t < 60) snprintf(out, n, "%lds", t);
    else if (t < 3600) snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
}

void fmt_time(const char *iso, char *out, size_t n) {
    if (!iso || strlen(iso) < 19) {
        snprintf(out, n, "-");
        return;
    }
    snprintf(out, n, "%.10s %.8s", iso, iso + 11);
}

static double iso_to_s(const char *iso) {
    struct tm tm = {0};
    double frac = 0;
    if (!iso) return NAN;
    const char *rest = strptime(iso, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest) return NAN;
    if (*rest == '.') frac = strtod(rest, NULL);
    return (double)timegm(&tm) + frac;
}

double iso_diff_s(const char *from, const char *to) {
    double a = iso_to_s(from);
    double b = to ? iso_to_s(to) : (double)time(NULL);
    return b - a;
}

void table_init(table *t, int cols) {
    memset(t, 0, sizeof *t);
    t->cols = cols;
}

void table_row(table *t, const char *const *cells) {
    if (t->rows == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->cells = realloc(t->cells, (size_t)t->cap * (size_t)t->cols * sizeof *t->cells);
    }
    for (int c = 0; c < t->cols; c++) t->cells[t->rows * t->cols + c] = strdup(cells[c] ? cells[c] : "-");
    t->rows++;
}

/* Display width: UTF-8 continuation bytes take no column. */
static int width(const char *s) {
    int w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

void table_print(table *t, FILE *out) {
    int *w = calloc((size_t)t->cols, sizeof *w);
    for (int r = 0; r < t->rows; r++)
        for (int c = 0; c < t->cols; c++) {
            int l = width(t->cells[r * t->cols + c]);
            if (l > w[c]) w[c] = l;
        }
    for (int r = 0; r < t->rows; r++) {
        for (int c = 0; c < t->cols; c++) {
            const char *s = t->cells[r * t->cols + c];
            if (c == t->cols - 1) fprintf(out, "%s", s);
            else fprintf(out, "%s%*s", s, w[c] - width(s) + 2, "");
        }
        fputc('\n', out);
    }
    free(w);
}

void table_free(table *t) {
    for (int i = 0; i < t->rows * t->cols; i++) free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

void fmt_epoch(long long epoch, long long epochs, char *out, size_t n) {
    if (epoch < 0) epoch = 0;
    if (epochs > 0 && epoch > epochs - 1) epoch = epochs - 1; /* a finished run's progress may point past the last */
    if (epochs > 0) snprintf(out, n, "epoch %lld (%lld of %lld)", epoch, epoch + 1, epochs);
    else snprintf(out, n, "epoch %lld", epoch);
}

/* Sizes in bytes: see byte_size.h. */
#include "byte_size.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int byte_size_parse(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-') return -1;
    unsigned shift = 0;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: return -1;
        }
        end++;
        if (*end == 'i') end++; /* 64Ki, 10MiB */
        if (*end == 'b' || *end == 'B') end++;
        if (*end) return -1;
    }
    if (shift && v > (UINT64_MAX >> shift)) return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

char *byte_size_format(uint64_t bytes, char *out, size_t outlen) {
    static const char *const UNITS[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(out, outlen, "%llu byte%s", (unsigned long long)bytes, bytes == 1 ? "" : "s");
        return out;
    }
    double v = (double)bytes / 1024.0;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof UNITS / sizeof *UNITS) {
        v /= 1024.0;
        u++;
    }
    snprintf(out, outlen, "%.3g %s", v, UNITS[u]);
    return out;
}

/* FNV-1a (fnv.h). */
#include "fnv.h"

uint64_t fnv1a64(const void *data, size_t len) {
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

uint32_t fnv1a32_text(const char *text) {
    uint32_t h = 2166136261u;
    for (const char *t = text; t && *t; t++) h = (h ^ (uint8_t)*t) * 16777619u;
    return h;
}

/* Random secrets and their constant-time comparison: see secret.h. */
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

int random_hex(char *out, size_t nbytes) {
    unsigned char raw[64];
    if (nbytes > sizeof raw) return -1;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(raw + got, nbytes - got, 0);
        if (n < 0) return -1;
        got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[2 * nbytes] = '\0';
    return 0;
}

bool secret_equal(const char *given, const char *held) {
    if (!given || !held) return false;
    size_t lg = strlen(given), lh = strlen(held);
    volatile unsigned char diff = lg != lh;
    for (size_t i = 0; i < lh; i++) {
        unsigned char g = i < lg ? (unsigned char)given[i] : 0;
        diff |= (unsigned char)(g ^ (unsigned char)held[i]);
    }
    return diff == 0 && lh > 0;
}

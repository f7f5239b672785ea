/* UTF-8 repair: see utf8_text.h. */
#include "utf8_text.h"


/* The length of the valid sequence at s (1 to 4), or 0 when it is not one; *cut is
 * set when it is a valid beginning that the string's end cuts short. */
static int sequence_length(const unsigned char *s, int *cut) {
    *cut = 0;
    unsigned char c = s[0];
    int n;
    unsigned min;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2, min = 0x80, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, min = 0x800, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, min = 0x10000, cp = c & 0x07;
    else return 0;
    for (int i = 1; i < n; i++) {
        if (s[i] == '\0') {
            *cut = 1;
            return 0;
        }
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

void utf8_repair(char *s) {
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int cut, n = sequence_length(p, &cut);
        if (cut) {
            *p = '\0';
            return;
        }
        if (n == 0) *p++ = '?';
        else p += n;
    }
}

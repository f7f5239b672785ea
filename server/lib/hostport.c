/* HOST:PORT: see hostport.h. */
#include "hostport.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

int parse_host_port(const char *what, const char *text, char *host, size_t hostlen, char *port, size_t portlen,
                    char *err, size_t errlen) {
    const char *colon = strrchr(text, ':');
    if (!colon || !colon[1]) {
        snprintf(err, errlen, "%s %s: expected HOST:PORT, e.g. 127.0.0.1:8080", what, text);
        return -1;
    }
    for (const char *p = colon + 1; *p; p++) {
        if (!isdigit((unsigned char)*p)) {
            snprintf(err, errlen, "%s %s: the port must be a number, e.g. 127.0.0.1:8080", what, text);
            return -1;
        }
    }
    size_t hl = (size_t)(colon - text);
    if (text[0] == '[') {
        if (hl < 2 || text[hl - 1] != ']') {
            snprintf(err, errlen, "%s %s: an IPv6 address goes in brackets, e.g. [::1]:8080", what, text);
            return -1;
        }
        text++;
        hl -= 2;
    }
    if (hl >= hostlen || strlen(colon + 1) >= portlen) {
        snprintf(err, errlen, "%s %s: too long", what, text);
        return -1;
    }
    memcpy(host, text, hl);
    host[hl] = '\0';
    snprintf(port, portlen, "%s", colon + 1);
    return 0;
}

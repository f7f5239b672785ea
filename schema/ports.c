/* Port ranges and free-port checks: see ports.h. */
#include "ports.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int port_range_parse(const char *text, int *lo, int *hi, char *err, size_t errlen) {
    char *end = NULL;
    long a = strtol(text, &end, 10), b = 0;
    bool ok = end != text && *end == '-';
    if (ok) {
        const char *second = end + 1;
        b = strtol(second, &end, 10);
        ok = end != second && *end == '\0';
    }
    if (!ok || a < 1 || b > 65535 || a > b) {
        snprintf(err, errlen, "--port-range \"%s\": want LO-HI, two ports from 1 to 65535 with LO <= HI (e.g. 29600-29999)",
                 text);
        return -1;
    }
    if ((a <= 29500 && 29500 <= b) || (a <= 29400 && 29400 <= b)) {
        snprintf(err, errlen, "--port-range \"%s\" holds torchrun's default port (29500 or 29400), which scripts "
                 "launched by hand use: pick a range without it (e.g. 29600-29999)", text);
        return -1;
    }
    *lo = (int)a;
    *hi = (int)b;
    return 0;
}

static bool can_bind(int port, bool reuse_address) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int one = 1;
    if (reuse_address && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        close(fd);
        return false;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    bool free_now = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return free_now;
}

bool port_is_free(int port) { return can_bind(port, false); }

bool port_is_listenable(int port) { return can_bind(port, true); }

int port_any_listenable(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    int port = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0
                   ? ntohs(a.sin_port)
                   : 0;
    close(fd);
    return port;
}

int port_next_listenable(int lo, int hi, int after) {
    int span = hi - lo + 1;
    int from = after >= lo && after <= hi ? after - lo + 1 : 0;
    for (int i = 0; i < span; i++) {
        int port = lo + (from + i) % span;
        if (port_is_listenable(port)) return port;
    }
    return 0;
}

/* HOST:PORT: see hostport.h. */
#include "hostport.h"

#include <ctype.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

int address_towards(const char *url, char *out, size_t outlen, char *err, size_t errlen) {
    if (strncmp(url, "http://", 7) != 0) {
        snprintf(err, errlen, "%s: an http://HOST:PORT URL is needed", url);
        return -1;
    }
    char copy[300], host[256], port[16];
    snprintf(copy, sizeof copy, "%s", url + 7);
    copy[strcspn(copy, "/")] = '\0';
    if (!strchr(copy, ':') || copy[strlen(copy) - 1] == ']') snprintf(copy + strlen(copy), sizeof copy - strlen(copy), ":80");
    if (parse_host_port(url, copy, host, sizeof host, port, sizeof port, err, errlen) != 0) return -1;
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *ai = NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0 || !ai) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage me;
    socklen_t len = sizeof me;
    char text[NI_MAXHOST] = "";
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 && getsockname(fd, (struct sockaddr *)&me, &len) == 0)
        getnameinfo((struct sockaddr *)&me, len, text, sizeof text, NULL, 0, NI_NUMERICHOST);
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    if (!text[0] || strlen(text) >= outlen) {
        snprintf(err, errlen, "cannot tell this host's address towards %s", url);
        return -1;
    }
    snprintf(out, outlen, "%s", text);
    return 0;
}

/* The bearer token and the loopback rule: see auth.h. */
#include "auth.h"

#include "hostport.h"
#include "secret.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

bool auth_method_mutates(const char *method) {
    return !(strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 || strcmp(method, "OPTIONS") == 0);
}

const char *auth_bearer_value(const char *authorization) {
    if (!authorization || strncasecmp(authorization, "Bearer", 6) != 0) return NULL;
    const char *given = authorization + 6;
    if (*given != ' ' && *given != '\t') return NULL;
    while (*given == ' ' || *given == '\t') given++;
    return *given ? given : NULL;
}

bool auth_bearer_ok(const char *authorization, const char *token) {
    return token && secret_equal(auth_bearer_value(authorization), token);
}

static bool is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET) {
        uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
        return (a >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a)) return true;
        if (IN6_IS_ADDR_V4MAPPED(a)) return a->s6_addr[12] == 127;
    }
    return false;
}

int auth_listen_is_loopback(const char *listen, char *err, size_t errlen) {
    char host[256], port[16];
    if (parse_host_port("--listen", listen, host, sizeof host, port, sizeof port, err, errlen) != 0) return -1;
    if (!host[0]) return 0; /* ":8080": every interface */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "--listen %s: %s", listen, gai_strerror(rc));
        return -1;
    }
    int all = 1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
        if (!is_loopback(ai->ai_addr)) all = 0;
    freeaddrinfo(res);
    return all;
}

/* "HOST:PORT" as --listen (and a node's address) is written: "127.0.0.1:8080",
 * "[::1]:0", "localhost:8080", ":8080" (every interface). One parser for every
 * place that reads one. And the address this host reaches another from. */
#ifndef DDPD_SERVER_LIB_HOSTPORT_H
#define DDPD_SERVER_LIB_HOSTPORT_H

#include <stddef.h>

/* Splits `text` into host (brackets of an IPv6 address removed; "" for every
 * interface) and port (the digits after the last colon; may be empty when
 * `port_optional`). 0, or -1 with a sentence in err naming `what` ("--listen"). */
int parse_host_port(const char *what, const char *text, char *host, size_t hostlen, char *port, size_t portlen,
                    char *err, size_t errlen);

/* The address this host reaches `url` (http://HOST[:PORT][/...]) from: the one the
 * other hosts reach it at, as a rule (a node's ranks, an agent). Into out (numeric);
 * 0, or -1 with why in err. No packet is sent. */
int address_towards(const char *url, char *out, size_t outlen, char *err, size_t errlen);

#endif

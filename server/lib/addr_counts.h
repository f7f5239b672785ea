/* What each client address holds (connections, event streams), with caps: at most
 * `per_address` for one address and `total` for all of them, plus `reserve` more
 * that only this host's own addresses (loopback: 127.0.0.0/8, ::1) may take once the
 * total is reached, so that an operator's curl and /healthz still get in while
 * remote clients hold every slot. Thread-safe. IPv4 addresses, plain or mapped into
 * IPv6, are one address. */
#ifndef DDPD_SERVER_LIB_ADDR_COUNTS_H
#define DDPD_SERVER_LIB_ADDR_COUNTS_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct {
    unsigned char b[16]; /* IPv6; IPv4 as ::ffff:a.b.c.d; all zero: not an IP address */
} addr_key;

/* The key of a socket address (AF_INET, AF_INET6; anything else: all zero). */
addr_key addr_key_of(const struct sockaddr *sa);
bool addr_key_is_loopback(const addr_key *k);
/* "127.0.0.1", "::1" (IPv4 without its ::ffff: prefix). */
void addr_key_text(const addr_key *k, char out[INET6_ADDRSTRLEN]);

typedef struct addr_counts addr_counts;

typedef enum {
    ADDR_TAKEN,        /* counted: give it back with addr_counts_put */
    ADDR_OVER_ADDRESS, /* the address holds per_address already */
    ADDR_OVER_TOTAL,   /* total (and, for loopback, the reserve too) taken */
} addr_take;

addr_counts *addr_counts_new(unsigned per_address, unsigned total, unsigned reserve);
void addr_counts_free(addr_counts *c);
/* One more for `k`, if the caps allow. *held (may be NULL) gets what `k` holds, this
 * one included when taken. */
addr_take addr_counts_take(addr_counts *c, const addr_key *k, unsigned *held);
void addr_counts_put(addr_counts *c, const addr_key *k);
/* What all addresses hold now. */
unsigned addr_counts_total(addr_counts *c);
/* How many addresses hold something now. */
unsigned addr_counts_addresses(addr_counts *c);

#endif

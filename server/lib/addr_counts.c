/* Counts per client address, with caps: see addr_counts.h. A chained hash table of
 * the addresses holding something; an address's entry goes when it holds nothing. */
#include "addr_counts.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define BUCKETS 4096

typedef struct entry {
    addr_key key;
    unsigned held;
    struct entry *next;
} entry;

struct addr_counts {
    pthread_mutex_t mu;
    unsigned per_address, total, reserve;
    unsigned held, addresses;
    entry *buckets[BUCKETS];
};

static const unsigned char V4_MAPPED[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

addr_key addr_key_of(const struct sockaddr *sa) {
    addr_key k;
    memset(&k, 0, sizeof k);
    if (!sa) return k;
    if (sa->sa_family == AF_INET) {
        memcpy(k.b, V4_MAPPED, 12);
        memcpy(k.b + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        memcpy(k.b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
    return k;
}

bool addr_key_is_loopback(const addr_key *k) {
    if (memcmp(k->b, V4_MAPPED, 12) == 0) return k->b[12] == 127;
    static const unsigned char V6_LOOPBACK[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return memcmp(k->b, V6_LOOPBACK, 16) == 0;
}

void addr_key_text(const addr_key *k, char out[INET6_ADDRSTRLEN]) {
    if (memcmp(k->b, V4_MAPPED, 12) == 0) inet_ntop(AF_INET, k->b + 12, out, INET6_ADDRSTRLEN);
    else inet_ntop(AF_INET6, k->b, out, INET6_ADDRSTRLEN);
}

static unsigned bucket_of(const addr_key *k) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (int i = 0; i < 16; i++) h = (h ^ k->b[i]) * 1099511628211ull;
    return (unsigned)(h % BUCKETS);
}

addr_counts *addr_counts_new(unsigned per_address, unsigned total, unsigned reserve) {
    addr_counts *c = xcalloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    c->per_address = per_address;
    c->total = total;
    c->reserve = reserve;
    return c;
}

void addr_counts_free(addr_counts *c) {
    if (!c) return;
    for (int i = 0; i < BUCKETS; i++)
        for (entry *e = c->buckets[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

addr_take addr_counts_take(addr_counts *c, const addr_key *k, unsigned *held) {
    unsigned b = bucket_of(k);
    pthread_mutex_lock(&c->mu);
    entry *e = c->buckets[b];
    while (e && memcmp(e->key.b, k->b, 16) != 0) e = e->next;
    unsigned now = e ? e->held : 0;
    if (held) *held = now;
    addr_take r = ADDR_TAKEN;
    if (now >= c->per_address) r = ADDR_OVER_ADDRESS;
    else if (c->held >= c->total && (c->held >= c->total + c->reserve || !addr_key_is_loopback(k))) r = ADDR_OVER_TOTAL;
    if (r == ADDR_TAKEN) {
        if (!e) {
            e = xmalloc(sizeof *e);
            e->key = *k;
            e->held = 0;
            e->next = c->buckets[b];
            c->buckets[b] = e;
            c->addresses++;
        }
        e->held++;
        c->held++;
        if (held) *held = e->held;
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

void addr_counts_put(addr_counts *c, const addr_key *k) {
    unsigned b = bucket_of(k);
    pthread_mutex_lock(&c->mu);
    entry **p = &c->buckets[b];
    while (*p && memcmp((*p)->key.b, k->b, 16) != 0) p = &(*p)->next;
    if (*p) {
        c->held--;
        if (--(*p)->held == 0) {
            entry *gone = *p;
            *p = gone->next;
            free(gone);
            c->addresses--;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

unsigned addr_counts_total(addr_counts *c) {
    pthread_mutex_lock(&c->mu);
    unsigned n = c->held;
    pthread_mutex_unlock(&c->mu);
    return n;
}

unsigned addr_counts_addresses(addr_counts *c) {
    pthread_mutex_lock(&c->mu);
    unsigned n = c->addresses;
    pthread_mutex_unlock(&c->mu);
    return n;
}

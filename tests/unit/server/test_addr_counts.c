/* Unit tests of server/lib/addr_counts.c and server/base/log_limit.c: the caps per
 * address and in all, the loopback reserve above the total, IPv4 plain and mapped
 * into IPv6 as one address, entries gone when an address holds nothing; and the
 * once-per-interval limiter counting what it held back. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "addr_counts.h"
#include "base.h"
#include "check.h"

static addr_key v4(const char *text) {
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, text, &sa.sin_addr);
    return addr_key_of((struct sockaddr *)&sa);
}

static addr_key v6(const char *text) {
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, text, &sa.sin6_addr);
    return addr_key_of((struct sockaddr *)&sa);
}

int main(void) {
    addr_key a = v4("192.0.2.7"), b = v4("198.51.100.1"), lo = v4("127.0.0.1"), lo2 = v4("127.9.9.9");
    addr_key six = v6("::1"), mapped = v6("::ffff:192.0.2.7");
    CHECK(!addr_key_is_loopback(&a) && addr_key_is_loopback(&lo) && addr_key_is_loopback(&lo2) &&
              addr_key_is_loopback(&six), "loopback: 127.0.0.0/8 and ::1, not 192.0.2.7");
    CHECK(memcmp(a.b, mapped.b, 16) == 0, "192.0.2.7 and ::ffff:192.0.2.7 are one address");
    char text[INET6_ADDRSTRLEN];
    addr_key_text(&a, text);
    CHECK(strcmp(text, "192.0.2.7") == 0, "an IPv4 address is written plainly: %s", text);
    addr_key_text(&six, text);
    CHECK(strcmp(text, "::1") == 0, "IPv6 as IPv6: %s", text);

    /* 2 per address, 4 in all, 2 more for loopback */
    addr_counts *c = addr_counts_new(2, 4, 2);
    unsigned held = 0;
    CHECK(addr_counts_take(c, &a, &held) == ADDR_TAKEN && held == 1, "a: first (held %u)", held);
    CHECK(addr_counts_take(c, &mapped, &held) == ADDR_TAKEN && held == 2, "a, mapped: second (held %u)", held);
    CHECK(addr_counts_take(c, &a, &held) == ADDR_OVER_ADDRESS && held == 2, "a: a third is over its cap (%u)", held);
    CHECK(addr_counts_take(c, &b, NULL) == ADDR_TAKEN && addr_counts_take(c, &b, NULL) == ADDR_TAKEN, "b: two");
    CHECK(addr_counts_total(c) == 4 && addr_counts_addresses(c) == 2, "4 held by 2 addresses: %u by %u",
          addr_counts_total(c), addr_counts_addresses(c));
    addr_key d = v4("203.0.113.5");
    CHECK(addr_counts_take(c, &d, NULL) == ADDR_OVER_TOTAL, "a remote address past the total: refused");
    CHECK(addr_counts_take(c, &lo, NULL) == ADDR_TAKEN && addr_counts_take(c, &lo2, NULL) == ADDR_TAKEN,
          "loopback: the reserve's two places");
    CHECK(addr_counts_take(c, &six, NULL) == ADDR_OVER_TOTAL, "past the reserve, loopback is refused too");
    addr_counts_put(c, &b);
    CHECK(addr_counts_take(c, &d, NULL) == ADDR_OVER_TOTAL,
          "the total counts the reserve's places: 5 held, a remote one still waits");
    addr_counts_put(c, &lo);
    addr_counts_put(c, &lo2);
    CHECK(addr_counts_take(c, &d, NULL) == ADDR_TAKEN, "once under the total, a remote one gets in");
    addr_counts_put(c, &a);
    addr_counts_put(c, &a);
    CHECK(addr_counts_addresses(c) == 2, "an address that holds nothing is gone: %u left", addr_counts_addresses(c));
    addr_counts_put(c, &a); /* not held: ignored */
    CHECK(addr_counts_total(c) == 2, "a put for an address holding nothing changes nothing: %u",
          addr_counts_total(c));
    addr_counts_free(c);

    /* no reserve: the total is the total */
    c = addr_counts_new(10, 1, 0);
    CHECK(addr_counts_take(c, &lo, NULL) == ADDR_TAKEN && addr_counts_take(c, &lo2, NULL) == ADDR_OVER_TOTAL,
          "without a reserve, loopback gets no more than the total");
    addr_counts_free(c);

    /* the log limiter */
    log_limit l = LOG_LIMIT_INIT;
    uint64_t skipped = 99;
    CHECK(log_limit_now(&l, 60000, &skipped) && skipped == 0, "the first line is written (%llu skipped)",
          (unsigned long long)skipped);
    int written = 0;
    for (int i = 0; i < 1000; i++) written += log_limit_now(&l, 60000, &skipped);
    CHECK(written == 0, "then none within the interval (%d written)", written);
    log_limit quick = LOG_LIMIT_INIT;
    log_limit_now(&quick, 1, &skipped);
    log_limit_now(&quick, 1, &skipped);
    int64_t until = mono_ms() + 5;
    while (mono_ms() < until) {
    }
    CHECK(log_limit_now(&quick, 1, &skipped) && skipped == 1, "after the interval, a line, with the count held back "
          "(%llu)", (unsigned long long)skipped);
    return test_done("test_addr_counts");
}

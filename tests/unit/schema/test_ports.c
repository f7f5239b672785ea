/* schema/ports.c on real sockets: --port-range's text, a port that is free against
 * one a restarted rank 0 can listen on (a killed listener's TIME_WAIT connections
 * stop the first, not the second, as they do not stop PyTorch's TCPStore), and the
 * next such port of a range, round it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "ports.h"

/* A listener on every address, on a port the kernel picks (an ephemeral one, far
 * from 1 and 65535), with SO_REUSEADDR as torch's store sets it. */
static int listen_any(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 4) == 0 &&
                getsockname(fd, (struct sockaddr *)&a, &len) == 0,
            "a listener on loopback");
    *port = ntohs(a.sin_port);
    return fd;
}

static void test_range_text(void) {
    int lo = 0, hi = 0;
    char err[256];
    CHECK(port_range_parse("29600-29999", &lo, &hi, err, sizeof err) == 0 && lo == 29600 && hi == 29999, "a range");
    CHECK(port_range_parse("29600", &lo, &hi, err, sizeof err) == -1 && strstr(err, "want LO-HI"), "%s", err);
    CHECK(port_range_parse("29400-29600", &lo, &hi, err, sizeof err) == -1 && strstr(err, "torchrun's default"), "%s", err);
    CHECK(port_range_parse("30000-29999", &lo, &hi, err, sizeof err) == -1, "LO after HI");
}

/* A listener that goes first leaves its side of each connection in TIME_WAIT. */
static void test_time_wait(void) {
    int port, server = listen_any(&port);
    int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    REQUIRE(connect(client, (struct sockaddr *)&a, sizeof a) == 0, "connected");
    int accepted = accept(server, NULL, NULL);
    REQUIRE(accepted >= 0, "accepted");
    CHECK(!port_is_free(port) && !port_is_listenable(port), "a port listened on is neither free nor listenable");
    close(server);
    close(accepted); /* the listener's side closes first: TIME_WAIT on `port` */
    char byte;
    CHECK(read(client, &byte, 1) == 0, "the client sees the end");
    close(client);
    CHECK(!port_is_free(port), "in TIME_WAIT, port %d cannot be bound plainly", port);
    CHECK(port_is_listenable(port), "but a listener with SO_REUSEADDR can take it again at once: port %d", port);
}

static void test_next_in_range(void) {
    int held, fd = listen_any(&held);
    int next = port_next_listenable(held - 3, held + 3, held);
    CHECK(next >= held - 3 && next <= held + 3 && next != held, "another port of the range than a held one: %d (held %d)",
          next, held);
    CHECK(port_next_listenable(held, held, held) == 0, "a range of only a held port has none");
    close(fd);
    CHECK(port_next_listenable(held, held, held) == held, "once let go, the port itself, last");
    int any = port_any_listenable();
    CHECK(any > 0 && port_is_listenable(any), "a port the kernel picks: %d", any);
}

int main(void) {
    test_range_text();
    test_time_wait();
    test_next_in_range();
    return test_done("test_ports");
}

/* The trainer's event sink (trainer/run_io/events.c) against a real Unix socket: the
 * secret reaches the socket and never the journal; a sink whose server went away
 * keeps journaling and reconnects, hello first, when a server listens again; a
 * server that stops reading does not stall the sink for good; a torn journal line
 * is isolated so that the next events still parse. */
#include "check.h"
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static char dir[256];

static int listen_at(const char *path) {
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 4) == 0, "listen on %s", path);
    return fd;
}

static int accept_within(int lfd, int ms) {
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, ms) != 1) return -1;
    return accept(lfd, NULL, NULL);
}

/* Reads what has arrived on fd within `ms` into buf (NUL-terminated). */
static size_t read_within(int fd, char *buf, size_t cap, int ms) {
    size_t n = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (n + 1 < cap && poll(&p, 1, ms) == 1) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0) break;
        n += (size_t)r;
        ms = 50;
    }
    buf[n] = '\0';
    return n;
}

/* The whole file, NUL-terminated (valid until the next call). */
static char *slurp(const char *path) {
    static char *buf;
    free(buf);
    FILE *f = fopen(path, "rb");
    long n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    buf = malloc((size_t)n + 1);
    REQUIRE(buf, "memory for %s", path);
    if (f) {
        rewind(f);
        n = (long)fread(buf, 1, (size_t)n, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

/* Counts the journal's lines that parse as events of `type`; fails on any other
 * non-empty line unless `allow_torn` (then it counts them in *torn). */
static int count_events(const char *journal, const char *type, int *torn) {
    int count = 0;
    char *text = strdup(journal), *save = NULL;
    if (torn) *torn = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *ev = json_loads(line, 0, NULL);
        if (!ev) {
            if (torn) (*torn)++;
            continue;
        }
        if (strcmp(json_string_value(json_object_get(ev, "type")), type) == 0) count++;
        json_decref(ev);
    }
    free(text);
    return count;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_secret_and_reconnect(void) {
    char sock[300], journal[300], err[256], warn[256], got[1 << 16];
    snprintf(sock, sizeof sock, "%s/ingest.sock", dir);
    snprintf(journal, sizeof journal, "%s/events.jsonl", dir);
    int lfd = listen_at(sock);
    event_sink *s = event_sink_open(sock, journal, "7", 0, "s3cret-token", err, sizeof err, warn, sizeof warn);
    REQUIRE(s, "sink opens: %s", err);
    CHECK(warn[0] == '\0', "no warning with a listening server: %s", warn);
    int cfd = accept_within(lfd, 1000);
    REQUIRE(cfd >= 0, "the sink connected");
    event_emit(s, "hello", json_pack("{s:i}", "pid", 1));
    event_emit(s, "status", json_pack("{s:s}", "state", "init"));
    read_within(cfd, got, sizeof got, 1000);
    CHECK(strstr(got, "\"type\":\"hello\"") && strstr(got, "s3cret-token"), "the socket got the hello with the secret: %s", got);
    CHECK(strstr(got, "\"state\":\"init\""), "and the status: %s", got);
    CHECK(!strstr(slurp(journal), "s3cret-token"), "the journal never holds the secret");
    CHECK(count_events(slurp(journal), "hello", NULL) == 1, "the journal holds the hello");

    /* The server dies: the sink keeps journaling, warns once, and does not fail. */
    close(cfd);
    close(lfd);
    unlink(sock);
    for (int i = 0; i < 50; i++) event_emit(s, "status", json_pack("{s:s, s:i}", "state", "training", "i", i));
    event_flush(s);
    CHECK(count_events(slurp(journal), "status", NULL) == 51, "every status is journaled while the server is gone");

    /* A server listens again: within about a second the sink connects, hello first. */
    lfd = listen_at(sock);
    sleep_ms(1100);
    event_emit(s, "status", json_pack("{s:s}", "state", "evaluating"));
    cfd = accept_within(lfd, 1000);
    REQUIRE(cfd >= 0, "the sink reconnected");
    read_within(cfd, got, sizeof got, 1000);
    CHECK(strncmp(got, "{", 1) == 0 && strstr(got, "\"type\":\"hello\"") == strstr(got, "\"type\""),
          "the new connection starts with the hello: %.200s", got);
    CHECK(strstr(got, "s3cret-token") != NULL, "with the secret");
    CHECK(strstr(got, "\"state\":\"evaluating\"") != NULL, "then the new events: %s", got);
    CHECK(!strstr(slurp(journal), "s3cret-token"), "the journal still holds no secret");
    event_sink_close(s);
    close(cfd);
    close(lfd);
    unlink(sock);
    unlink(journal);
}

/* A server that accepts but never reads (stopped): once the socket's buffer is full
 * the sink gives the connection up instead of blocking training forever. */
static void test_server_stops_reading(void) {
    char sock[300], journal[300], err[256], warn[256];
    snprintf(sock, sizeof sock, "%s/stalled.sock", dir);
    snprintf(journal, sizeof journal, "%s/stalled.jsonl", dir);
    int lfd = listen_at(sock);
    event_sink *s = event_sink_open(sock, journal, "8", 1, "x", err, sizeof err, warn, sizeof warn);
    REQUIRE(s, "sink opens: %s", err);
    int cfd = accept_within(lfd, 1000);
    REQUIRE(cfd >= 0, "connected");
    event_emit(s, "hello", NULL);
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    time_t t0 = time(NULL);
    for (int i = 0; i < 3000; i++) event_emit(s, "log", json_pack("{s:s, s:s}", "level", "info", "msg", big));
    event_flush(s);
    CHECK(time(NULL) - t0 < 60, "the sink did not block for good on a stalled server");
    CHECK(count_events(slurp(journal), "log", NULL) == 3000, "every event is in the journal");
    event_sink_close(s);
    close(cfd);
    close(lfd);
    unlink(sock);
    unlink(journal);
}

/* A journal cut in the middle of a line (a crash, a full disk): the next sink's
 * events start on a line of their own and parse; the torn piece is one bad line. */
static void test_torn_journal(void) {
    char journal[300], err[256];
    snprintf(journal, sizeof journal, "%s/torn.jsonl", dir);
    FILE *f = fopen(journal, "w");
    fputs("{\"run\":\"9\",\"rank\":0,\"seq\":0,\"t\":1,\"type\":\"hello\"}\n{\"run\":\"9\",\"rank\":0,\"seq\":1,\"t\":2,\"ty", f);
    fclose(f);
    event_sink *s = event_sink_open(NULL, journal, "9", -1, NULL, err, sizeof err, NULL, 0);
    REQUIRE(s, "sink opens: %s", err);
    event_emit(s, "end", json_pack("{s:s, s:s}", "status", "succeeded", "reason", ""));
    event_sink_close(s);
    int torn = 0;
    CHECK(count_events(slurp(journal), "end", &torn) == 1, "the end event after a torn line parses: %s", slurp(journal));
    CHECK(torn == 1, "exactly the torn piece is unreadable (%d)", torn);
    unlink(journal);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ddpd-sink-XXXXXX");
    REQUIRE(mkdtemp(dir), "temp dir");
    test_secret_and_reconnect();
    test_server_stops_reading();
    test_torn_journal();
    rmdir(dir);
    return test_done("test_event_sink");
}

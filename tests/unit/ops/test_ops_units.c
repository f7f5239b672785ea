/* Unit tests of the operations pieces that are pure logic:
 *  - server_log.c: levels and sizes as people write them; a file rotated when a line
 *    would pass max_bytes (PATH.DAY, then PATH.DAY.1, ...) and when the UTC day
 *    changes (the clock is the test's), only the newest `keep` rotated files left,
 *    nothing lost or duplicated, and a newline in a message never forging a line;
 *  - auth.c: the bearer token (scheme in any case, wrong tokens of every length
 *    refused, an empty token never matching), which methods change things, and which
 *    listen addresses are loopback;
 *  - metrics.c: label values escaped as Prometheus' format says, every family with
 *    HELP and TYPE, histograms cumulative and ending in +Inf equal to their count.
 * The whole exposition is also checked by promtool in test_ops_server.py. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "check.h"
#include "metrics.h"
#include "server_log.h"
#include "base.h"

#define DAY_MS 86400000LL

static int64_t fake_now;
static int64_t fake_clock(void) { return fake_now; }

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    buf_t b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_append(&b, chunk, n);
    fclose(f);
    return b.data ? b.data : xstrdup("");
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* Names in `dir` beginning with `prefix`, counted. */
static int count_prefixed(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    if (d) closedir(d);
    return n;
}

/* How many times "msg <i>;" appears in every file of the log. */
static int occurrences(const char *dir, int i) {
    char needle[64];
    snprintf(needle, sizeof needle, "msg %d;", i);
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *path = xasprintf("%s/%s", dir, e->d_name);
        char *text = slurp(path);
        for (const char *p = text; p && (p = strstr(p, needle)); p++) n++;
        free(text);
        free(path);
    }
    if (d) closedir(d);
    return n;
}

static void test_parsing(void) {
    log_level l;
    CHECK(log_level_parse("debug", &l) == 0 && l == LOG_DEBUG, "debug");
    CHECK(log_level_parse("INFO", &l) == 0 && l == LOG_INFO, "INFO");
    CHECK(log_level_parse("warn", &l) == 0 && l == LOG_WARN, "warn");
    CHECK(log_level_parse("warning", &l) == 0 && l == LOG_WARN, "warning");
    CHECK(log_level_parse("error", &l) == 0 && l == LOG_ERROR, "error");
    CHECK(log_level_parse("loud", &l) != 0, "an unknown level is refused");
    uint64_t v;
    CHECK(log_parse_size("4096", &v) == 0 && v == 4096, "plain bytes: %llu", (unsigned long long)v);
    CHECK(log_parse_size("64k", &v) == 0 && v == 65536, "64k: %llu", (unsigned long long)v);
    CHECK(log_parse_size("100M", &v) == 0 && v == 100ull << 20, "100M");
    CHECK(log_parse_size("1GiB", &v) == 0 && v == 1ull << 30, "1GiB");
    CHECK(log_parse_size("0", &v) == 0 && v == 0, "0: no limit");
    CHECK(log_parse_size("-1", &v) != 0 && log_parse_size("12q", &v) != 0 && log_parse_size("", &v) != 0,
          "nonsense sizes are refused");
    server_log_config c;
    char err[256];
    CHECK(server_log_parse_config(NULL, NULL, NULL, NULL, &c, err, sizeof err) == 0 && c.level == LOG_INFO &&
              !c.file && c.max_bytes == SERVER_LOG_DEFAULT_MAX_BYTES && c.keep == SERVER_LOG_DEFAULT_KEEP && c.daily,
          "the defaults");
    CHECK(server_log_parse_config("loud", NULL, NULL, NULL, &c, err, sizeof err) != 0 && strstr(err, "--log-level"),
          "a bad level names its flag: %s", err);
    CHECK(server_log_parse_config(NULL, NULL, "lots", NULL, &c, err, sizeof err) != 0 && strstr(err, "--log-max-bytes"),
          "a bad size names its flag: %s", err);
    CHECK(server_log_parse_config(NULL, NULL, NULL, "-3", &c, err, sizeof err) != 0 && strstr(err, "--log-keep"),
          "a bad keep names its flag: %s", err);
}

static void test_rotation(const char *dir) {
    char *path = xasprintf("%s/ddpd.log", dir);
    fake_now = 1717200000000LL; /* 2024-06-01T00:00:00Z */
    server_log_set_clock(fake_clock);
    server_log_config c = {.level = LOG_INFO, .file = path, .max_bytes = 1000, .daily = true, .keep = 3};
    char err[256];
    REQUIRE(server_log_setup(&c, err, sizeof err) == 0, "setup: %s", err);

    /* Levels: below the level, nothing. */
    server_log_write(LOG_DEBUG, "a debug line");
    char *text = slurp(path);
    CHECK(text && !strstr(text, "a debug line"), "debug lines are dropped at level info");
    free(text);

    /* Day one: lines of ~60 bytes; the file never passes 1000 bytes. */
    for (int i = 0; i < 40; i++) {
        server_log_write(LOG_INFO, "msg %d; some words to fill the line up", i);
        long size = file_size(path);
        CHECK(size > 0 && size <= 1000, "the file stays within max_bytes: %ld", size);
    }
    char *day1 = xasprintf("%s.2024-06-01", path), *day1_1 = xasprintf("%s.2024-06-01.1", path);
    CHECK(exists(day1), "rotated by size to %s", day1);
    CHECK(exists(day1_1), "and again, to %s", day1_1);
    for (int i = 0; i < 40; i++) CHECK(occurrences(dir, i) == 1, "msg %d is in the log once", i);

    /* Day two: the first line rotates the file as day one's, by date. */
    fake_now += DAY_MS;
    server_log_write(LOG_WARN, "msg %d; the next day", 100);
    text = slurp(path);
    CHECK(text && strstr(text, "msg 100;") && strstr(text, "2024-06-02T") && strstr(text, " ddpd warning: "),
          "the new file starts with the new day's line: %s", text ? text : "(none)");
    CHECK(text && !strstr(text, "msg 39;"), "and holds nothing of the day before");
    free(text);
    int rotated = count_prefixed(dir, "ddpd.log.");
    CHECK(rotated <= 3, "only the newest 3 rotated files are kept: %d", rotated);
    CHECK(!exists(day1), "the oldest (%s) was deleted", day1);
    char *last_day1 = NULL;
    for (int n = 9; n >= 1 && !last_day1; n--) {
        char *p = xasprintf("%s.2024-06-01.%d", path, n);
        if (exists(p)) last_day1 = p;
        else free(p);
    }
    CHECK(last_day1 != NULL, "day one's newest part is kept");
    text = last_day1 ? slurp(last_day1) : NULL;
    CHECK(text && strstr(text, "msg 39;"), "and holds day one's last line");
    free(text);
    free(last_day1);

    /* A newline in a message cannot forge a second line. */
    server_log_write(LOG_INFO, "msg %d; evil\n2024-06-02T00:00:00.000Z ddpd error: forged", 101);
    text = slurp(path);
    int lines = 0;
    for (const char *p = text; p && *p; p++) lines += *p == '\n';
    CHECK(lines == 2, "two lines in today's file, the newline made harmless: %d\n%s", lines, text ? text : "");
    free(text);

    /* A request line: one field per item. */
    server_log_request("127.0.0.1", "GET", "/runs/a b", 404, 133, 0.25);
    text = slurp(path);
    CHECK(text && strstr(text, "ddpd info: http 127.0.0.1 GET /runs/a%20b 404 133B 0.2ms"), "request line: %s",
          text ? text : "");
    free(text);
    server_log_request(NULL, "POST", "/runs", 500, 0, 3);
    text = slurp(path);
    CHECK(text && strstr(text, "ddpd warning: http - POST /runs 500 0B 3.0ms"), "a 5xx is a warning: %s",
          text ? text : "");
    free(text);

    /* A file left from an earlier day is rotated by its first line of today. */
    server_log_shutdown();
    fake_now += 3 * DAY_MS; /* 2024-06-05; the file's mtime is the real now, so set it back */
    struct timespec old[2] = {{.tv_sec = (time_t)((fake_now - 2 * DAY_MS) / 1000)},
                              {.tv_sec = (time_t)((fake_now - 2 * DAY_MS) / 1000)}};
    utimensat(AT_FDCWD, path, old, 0);
    REQUIRE(server_log_setup(&c, err, sizeof err) == 0, "setup again: %s", err);
    server_log_write(LOG_ERROR, "msg %d; days later", 102);
    char *day3 = xasprintf("%s.2024-06-03", path);
    CHECK(exists(day3), "the old file became %s (the day of its last write)", day3);
    CHECK(occurrences(dir, 101) == 1 && occurrences(dir, 102) == 1, "nothing lost or doubled across the restart");
    server_log_shutdown();
    server_log_set_clock(NULL);
    free(day3);
    free(day1);
    free(day1_1);
    free(path);
}

static void test_auth(void) {
    CHECK(auth_bearer_ok("Bearer s3cret", "s3cret"), "the token");
    CHECK(auth_bearer_ok("bearer   s3cret", "s3cret"), "the scheme in any case, spaces after it");
    CHECK(!auth_bearer_ok("Bearer s3cre", "s3cret"), "a prefix of the token");
    CHECK(!auth_bearer_ok("Bearer s3cretX", "s3cret"), "the token and more");
    CHECK(!auth_bearer_ok("Bearer S3cret", "s3cret"), "case matters in the token");
    CHECK(!auth_bearer_ok("Bearer ", "s3cret"), "an empty token sent");
    CHECK(!auth_bearer_ok("Bearers3cret", "s3cret"), "no space after the scheme");
    CHECK(!auth_bearer_ok("Basic czNjcmV0", "s3cret"), "another scheme");
    CHECK(!auth_bearer_ok(NULL, "s3cret"), "no header");
    CHECK(!auth_bearer_ok("Bearer ", ""), "an empty token never matches");
    CHECK(!auth_method_mutates("GET") && !auth_method_mutates("HEAD") && !auth_method_mutates("OPTIONS"),
          "reading does not change anything");
    CHECK(auth_method_mutates("POST") && auth_method_mutates("DELETE") && auth_method_mutates("PUT") &&
              auth_method_mutates("PATCH") && auth_method_mutates("BREW"),
          "everything else does");
    char err[256];
    CHECK(auth_listen_is_loopback("127.0.0.1:8080", err, sizeof err) == 1, "127.0.0.1");
    CHECK(auth_listen_is_loopback("127.3.4.5:0", err, sizeof err) == 1, "all of 127/8");
    CHECK(auth_listen_is_loopback("[::1]:8080", err, sizeof err) == 1, "::1");
    CHECK(auth_listen_is_loopback("localhost:8080", err, sizeof err) == 1, "localhost");
    CHECK(auth_listen_is_loopback("0.0.0.0:8080", err, sizeof err) == 0, "0.0.0.0 is every interface");
    CHECK(auth_listen_is_loopback("[::]:8080", err, sizeof err) == 0, ":: is every interface");
    CHECK(auth_listen_is_loopback(":8080", err, sizeof err) == 0, "no host is every interface");
    CHECK(auth_listen_is_loopback("10.1.2.3:8080", err, sizeof err) == 0, "a LAN address");
    CHECK(auth_listen_is_loopback("8080", err, sizeof err) == -1, "no port: refused with a reason: %s", err);
}

/* Parses the exposition line by line: HELP then TYPE before each family's samples,
 * histograms' buckets cumulative with +Inf == _count. */
static void test_metrics(void) {
    metrics_observe_request("/runs/{id}", "GET", 200, 0.0007);
    metrics_observe_request("/runs/{id}", "GET", 200, 3.0);
    metrics_observe_request("/runs/{id}", "GET", 404, 0.0001);
    metrics_observe_request(NULL, "BREW", 405, 0.0001);
    metrics_observe_request("/we\"ird\\route\nx", "POST", 201, 0.02);
    metrics_observe_store_batch(0.0003, 12, true);
    metrics_observe_store_batch(0.2, 5000, false);
    buf_t b = {0};
    metrics_render(&b);
    const char *t = b.data;
    CHECK(strstr(t, "ddpd_http_requests_total{route=\"/runs/{id}\",method=\"GET\",code=\"200\"} 2\n"),
          "two 200s counted");
    CHECK(strstr(t, "ddpd_http_requests_total{route=\"unmatched\",method=\"other\",code=\"405\"} 1\n"),
          "no route: unmatched; an unknown method: other");
    CHECK(strstr(t, "route=\"/we\\\"ird\\\\route\\nx\""), "a label value escaped (quote, backslash, newline)");
    CHECK(strstr(t, "ddpd_http_request_duration_seconds_bucket{route=\"/runs/{id}\",method=\"GET\",le=\"0.0005\"} 1\n"),
          "0.1 ms falls in the first bucket");
    CHECK(strstr(t, "ddpd_http_request_duration_seconds_bucket{route=\"/runs/{id}\",method=\"GET\",le=\"0.001\"} 2\n"),
          "0.7 ms in the next (cumulative)");
    CHECK(strstr(t, "ddpd_http_request_duration_seconds_bucket{route=\"/runs/{id}\",method=\"GET\",le=\"2.5\"} 2\n") &&
              strstr(t, "ddpd_http_request_duration_seconds_bucket{route=\"/runs/{id}\",method=\"GET\",le=\"5\"} 3\n") &&
              strstr(t, "ddpd_http_request_duration_seconds_bucket{route=\"/runs/{id}\",method=\"GET\",le=\"+Inf\"} 3\n") &&
              strstr(t, "ddpd_http_request_duration_seconds_count{route=\"/runs/{id}\",method=\"GET\"} 3\n"),
          "3 s lands under le=5; +Inf and _count are 3");
    CHECK(strstr(t, "ddpd_store_write_batch_seconds_count 2\n") && strstr(t, "ddpd_store_write_ops_total 5012\n") &&
              strstr(t, "ddpd_store_write_failures_total 1\n") &&
              strstr(t, "ddpd_store_write_batch_ops_bucket{le=\"10000\"} 2\n") &&
              strstr(t, "ddpd_store_write_batch_ops_bucket{le=\"10\"} 0\n"),
          "the store's batches");

    /* Structure: every sample belongs to the family announced just before it. */
    char family[128] = "", type[32] = "";
    bool help_seen = false;
    int samples = 0, bad = 0;
    char *copy = xstrdup(t), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# HELP ", 7) == 0) {
            sscanf(line + 7, "%127s", family);
            help_seen = true;
            type[0] = '\0';
        } else if (strncmp(line, "# TYPE ", 7) == 0) {
            char name[128];
            sscanf(line + 7, "%127s %31s", name, type);
            if (!help_seen || strcmp(name, family) != 0) bad++;
        } else {
            samples++;
            size_t fl = strlen(family);
            const char *rest = line + fl;
            bool ok = type[0] && strncmp(line, family, fl) == 0;
            if (ok && strcmp(type, "histogram") == 0)
                ok = strncmp(rest, "_bucket", 7) == 0 || strncmp(rest, "_sum", 4) == 0 || strncmp(rest, "_count", 6) == 0;
            else if (ok)
                ok = *rest == '{' || *rest == ' ';
            if (!ok) {
                bad++;
                fprintf(stderr, "sample outside its family %s (%s): %s\n", family, type, line);
            }
        }
    }
    free(copy);
    CHECK(bad == 0 && samples > 50, "every sample follows its family's HELP and TYPE (%d bad of %d)", bad, samples);
    buf_free(&b);
}

int main(void) {
    char tmpl[] = "/tmp/ddpd-ops-units-XXXXXX";
    REQUIRE(mkdtemp(tmpl), "mkdtemp: %s", strerror(errno));
    test_parsing();
    test_rotation(tmpl);
    test_auth();
    test_metrics();
    /* clean up the log directory */
    DIR *d = opendir(tmpl);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = xasprintf("%s/%s", tmpl, e->d_name);
        unlink(p);
        free(p);
    }
    if (d) closedir(d);
    rmdir(tmpl);
    return test_done("test_ops_units");
}

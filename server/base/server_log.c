/* The server's log: levels, stderr or a file, rotation by size and by UTC day,
 * pruning to the newest `keep` rotated files. See server_log.h. */
#include "server_log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "byte_size.h"
#include "clock.h"

#define DAY_MS 86400000LL

static struct {
    pthread_mutex_t mu;
    log_level level;
    int fd;              /* 2 (stderr) unless a file is open */
    char *path;          /* NULL: stderr */
    uint64_t max_bytes;
    bool daily;
    int keep;
    uint64_t size;       /* bytes in the current file */
    int64_t day;         /* the UTC day (days since 1970) the current file covers */
    int64_t (*now)(void);
} L = {.mu = PTHREAD_MUTEX_INITIALIZER, .level = LOG_INFO, .fd = 2, .now = now_ms};

static const char *const LEVEL_NAMES[] = {"debug", "info", "warn", "error"};
/* In lines: "warning", as ddpd has always written it. */
static const char *const LINE_NAMES[] = {"debug", "info", "warning", "error"};

int log_level_parse(const char *s, log_level *out) {
    if (!s) return -1;
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, LEVEL_NAMES[i]) == 0) {
            *out = (log_level)i;
            return 0;
        }
    if (strcasecmp(s, "warning") == 0) {
        *out = LOG_WARN;
        return 0;
    }
    return -1;
}

const char *log_level_name(log_level l) { return l >= LOG_DEBUG && l <= LOG_ERROR ? LEVEL_NAMES[l] : "?"; }

bool log_enabled(log_level l) { return l >= __atomic_load_n(&L.level, __ATOMIC_RELAXED); }

int log_parse_size(const char *s, uint64_t *out) { return byte_size_parse(s, out); }

int server_log_parse_config(const char *level, const char *file, const char *max_bytes, const char *keep,
                            server_log_config *out, char *err, size_t errlen) {
    *out = (server_log_config){.level = LOG_INFO, .file = file && *file ? file : NULL,
                               .max_bytes = SERVER_LOG_DEFAULT_MAX_BYTES, .daily = true,
                               .keep = SERVER_LOG_DEFAULT_KEEP};
    if (level && *level && log_level_parse(level, &out->level) != 0) {
        snprintf(err, errlen, "--log-level must be debug, info, warn or error (got \"%.60s\")", level);
        return -1;
    }
    if (max_bytes && *max_bytes && log_parse_size(max_bytes, &out->max_bytes) != 0) {
        snprintf(err, errlen, "--log-max-bytes must be a size in bytes, e.g. 100M, 64k or 0 for no limit (got \"%.60s\")",
                 max_bytes);
        return -1;
    }
    if (keep && *keep) {
        char *end;
        errno = 0;
        long v = strtol(keep, &end, 10);
        if (*end || errno || v < 0 || v > 100000) {
            snprintf(err, errlen, "--log-keep must be a number of files from 0 (keep all) to 100000 (got \"%.60s\")",
                     keep);
            return -1;
        }
        out->keep = (int)v;
    }
    return 0;
}

void server_log_set_clock(int64_t (*now)(void)) {
    pthread_mutex_lock(&L.mu);
    L.now = now ? now : now_ms;
    pthread_mutex_unlock(&L.mu);
}

/* ---- rotation ---- */

static int64_t day_of(int64_t unix_ms) { return unix_ms >= 0 ? unix_ms / DAY_MS : (unix_ms - DAY_MS + 1) / DAY_MS; }

static void format_day(int64_t day, char out[16]) {
    time_t secs = (time_t)(day * 86400);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(out, 16, "%Y-%m-%d", &tm);
}

/* Complains on stderr: the log itself is what failed. */
static void complain(const char *what, const char *path) {
    char when[32];
    format_iso8601(now_ms(), when);
    dprintf(2, "%s ddpd error: log %s %s: %s\n", when, what, path, strerror(errno));
}

/* A rotated file's name after "<base>.": YYYY-MM-DD or YYYY-MM-DD.N. Fills the sort
 * key (the date, then N, the bare date being 0); false for any other name. */
static bool rotated_suffix(const char *s, char date[11], long *n) {
    for (int i = 0; i < 10; i++) {
        bool digit = s[i] >= '0' && s[i] <= '9';
        if ((i == 4 || i == 7) ? s[i] != '-' : !digit) return false;
    }
    memcpy(date, s, 10);
    date[10] = '\0';
    if (s[10] == '\0') {
        *n = 0;
        return true;
    }
    if (s[10] != '.' || !s[11]) return false;
    char *end;
    long v = strtol(s + 11, &end, 10);
    if (*end || v < 1) return false;
    *n = v;
    return true;
}

typedef struct {
    char date[11];
    long n;
    char *name;
} rotated_file;

static int rotated_cmp(const void *a, const void *b) {
    const rotated_file *x = a, *y = b;
    int c = strcmp(x->date, y->date);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* Deletes all but the newest L.keep rotated files. */
static void prune(void) {
    if (L.keep <= 0) return;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", L.path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : L.path;
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    if (slash == dir) snprintf(dir, sizeof dir, "/");
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    rotated_file *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, blen) != 0 || e->d_name[blen] != '.') continue;
        rotated_file f;
        if (!rotated_suffix(e->d_name + blen + 1, f.date, &f.n)) continue;
        if (n == cap) v = xrealloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
        f.name = xasprintf("%s/%s", dir, e->d_name);
        v[n++] = f;
    }
    closedir(d);
    if (n > (size_t)L.keep) {
        qsort(v, n, sizeof *v, rotated_cmp);
        for (size_t i = 0; i < n - (size_t)L.keep; i++)
            if (unlink(v[i].name) != 0 && errno != ENOENT) complain("cannot delete", v[i].name);
    }
    for (size_t i = 0; i < n; i++) free(v[i].name);
    free(v);
}

static int open_log(const char *path) {
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

/* Renames the current file to <path>.<its day>[.N] and starts a new one. */
static void rotate(void) {
    char day[16];
    format_day(L.day, day);
    char *target = xasprintf("%s.%s", L.path, day);
    for (long n = 1; access(target, F_OK) == 0; n++) {
        free(target);
        target = xasprintf("%s.%s.%ld", L.path, day, n);
    }
    if (rename(L.path, target) != 0) {
        complain("cannot rotate", L.path);
        free(target);
        return; /* keep writing where we are */
    }
    free(target);
    int fd = open_log(L.path);
    if (fd < 0) {
        complain("cannot reopen", L.path);
        fd = 2;
    }
    if (L.fd != 2) close(L.fd);
    L.fd = fd;
    L.size = 0;
    prune();
}

/* ---- set-up ---- */

int server_log_setup(const server_log_config *c, char *err, size_t errlen) {
    pthread_mutex_lock(&L.mu);
    int fd = 2;
    uint64_t size = 0;
    int64_t day = day_of(L.now());
    if (c->file && *c->file) {
        fd = open_log(c->file);
        if (fd < 0) {
            snprintf(err, errlen, "cannot open the log file %s: %s", c->file, strerror(errno));
            pthread_mutex_unlock(&L.mu);
            return -1;
        }
        struct stat sb;
        if (fstat(fd, &sb) == 0 && sb.st_size > 0) {
            size = (uint64_t)sb.st_size;
            day = day_of((int64_t)sb.st_mtim.tv_sec * 1000); /* a file left from an earlier day rotates first */
        }
    }
    if (L.fd != 2) close(L.fd);
    free(L.path);
    L.path = fd != 2 ? xstrdup(c->file) : NULL;
    L.fd = fd;
    L.size = size;
    L.day = day;
    L.max_bytes = c->max_bytes;
    L.daily = c->daily;
    L.keep = c->keep;
    __atomic_store_n(&L.level, c->level, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&L.mu);
    if (c->file && *c->file) {
        char size[64], keep[64];
        if (c->max_bytes) snprintf(size, sizeof size, "and past %llu bytes", (unsigned long long)c->max_bytes);
        else snprintf(size, sizeof size, "(never by size)");
        if (c->keep) snprintf(keep, sizeof keep, "the newest %d rotated kept", c->keep);
        else snprintf(keep, sizeof keep, "every rotated file kept");
        log_debug("log: %s at level %s, rotated %s %s, %s", c->file, log_level_name(c->level),
                  c->daily ? "daily" : "", size, keep);
    } else {
        log_debug("log: stderr at level %s", log_level_name(c->level));
    }
    return 0;
}

void server_log_shutdown(void) {
    pthread_mutex_lock(&L.mu);
    if (L.fd != 2) close(L.fd);
    L.fd = 2;
    free(L.path);
    L.path = NULL;
    pthread_mutex_unlock(&L.mu);
}

/* ---- writing ---- */

static void write_all(int fd, const char *s, size_t n) {
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* Writes one finished line (with its newline), rotating first when it must. */
static void emit(const char *line, size_t n) {
    pthread_mutex_lock(&L.mu);
    if (L.path) {
        int64_t today = day_of(L.now());
        bool new_day = L.daily && today != L.day;
        bool too_big = L.max_bytes && L.size + n > L.max_bytes;
        if (L.size > 0 && (new_day || too_big)) rotate();
        if (L.size == 0) L.day = today;
    }
    write_all(L.fd, line, n);
    L.size += n;
    pthread_mutex_unlock(&L.mu);
}

/* Control characters (a newline in a request path would forge a line) become '?'. */
static void sanitize(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

void server_log_vwrite(log_level l, const char *fmt, va_list ap) {
    if (!log_enabled(l)) return;
    char line[4096];
    char when[32];
    int64_t now;
    pthread_mutex_lock(&L.mu);
    now = L.now();
    pthread_mutex_unlock(&L.mu);
    format_iso8601(now, when);
    int head = snprintf(line, sizeof line, "%s ddpd %s: ", when, LINE_NAMES[l]);
    vsnprintf(line + head, sizeof line - (size_t)head - 1, fmt, ap);
    sanitize(line + head);
    size_t n = strlen(line);
    line[n++] = '\n';
    emit(line, n);
}

void server_log_write(log_level l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    server_log_vwrite(l, fmt, ap);
    va_end(ap);
}

void server_log_request(const char *client, const char *method, const char *path, int status, uint64_t bytes,
                        double ms) {
    log_level l = status >= 500 ? LOG_WARN : LOG_INFO;
    if (!log_enabled(l)) return;
    char m[16], p[512];
    snprintf(m, sizeof m, "%s", method && *method ? method : "-");
    /* The path stays one field: a space (MHD hands the path decoded) goes back to %20. */
    size_t at = 0;
    for (const char *c = path && *path ? path : "-"; *c && at + 4 < sizeof p; c++) {
        if (*c == ' ') {
            memcpy(p + at, "%20", 3);
            at += 3;
        } else {
            p[at++] = *c;
        }
    }
    p[at] = '\0';
    server_log_write(l, "http %s %s %s %d %lluB %.1fms", client && *client ? client : "-", m, p, status,
                     (unsigned long long)bytes, ms);
}

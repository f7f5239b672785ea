/* What agents forward, delivered: see node_relay.h. */
#include "node_relay.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base.h"
#include "ids.h"
#include "state_layout.h"
#include "run_dir.h"
#include "run_files.h"

#define MAX_STREAMS 4096
#define MAX_LOGS 4096

typedef struct {
    int node;
    char id[64];
    int fd;           /* to this server's event socket; -1: refused or broken (lines are dropped) */
    int64_t next_seq;
} stream;

typedef struct {
    int node;
    int64_t run_id;
    char file[64];
    int64_t next_offset;
    bool placed;      /* it has a start: its first chunk's offset, or its first attempt's (relay_stream) */
    bool mid_line;    /* the last chunk of trainer.log ended inside a line (no prefix for the rest) */
} log_pos;

static struct {
    pthread_mutex_t mu;
    stream streams[MAX_STREAMS];
    int n_streams;
    log_pos logs[MAX_LOGS];
    int n_logs;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int connect_ingest(void) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", layout_socket_path());
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static stream *find_stream(int node, const char *id, bool create) {
    for (int i = 0; i < R.n_streams; i++)
        if (R.streams[i].node == node && strcmp(R.streams[i].id, id) == 0) return &R.streams[i];
    if (!create || R.n_streams == MAX_STREAMS) return NULL;
    stream *s = &R.streams[R.n_streams++];
    *s = (stream){.node = node, .fd = connect_ingest()};
    snprintf(s->id, sizeof s->id, "%s", id);
    if (s->fd < 0) log_warn("node %d: cannot connect its event stream %s to the event socket: %s", node, id, strerror(errno));
    return s;
}

static void drop_stream(stream *s) {
    if (s->fd >= 0) close(s->fd);
    *s = R.streams[--R.n_streams];
}

static log_pos *find_log(int node, int64_t run_id, const char *file, int64_t offset);

/* The size of this server's copy of a run's file (0: none yet). */
static int64_t copy_size(int64_t run_id, const char *file) {
    char *dir = layout_run_dir(run_id), why[512];
    struct stat st;
    int fd = run_file_open_in(dir, file, RUN_FILE_ANY_SIZE, &st, why, sizeof why); /* never through a run's link */
    int64_t n = fd >= 0 ? (int64_t)st.st_size : 0;
    if (fd >= 0) close(fd);
    free(dir);
    return n;
}

/* An attempt's start from a node says where each of its ranks' output begins in the
 * node's ranks/rank-N.log; this server's copy holds what other nodes (or this host)
 * wrote for that rank in earlier attempts too, and the node's bytes follow them as
 * they come. Its offsets become the copy's: where the node's bytes up to them are (or
 * will be, for those still to come). */
static void copy_offsets(int node, json_t *ev) {
    json_t *offsets = json_object_get(ev, "log_offsets");
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *run = json_object_get(ev, "run");
    int64_t run_id;
    if (!type || strcmp(type, "attempt") != 0 || !json_is_object(offsets) ||
        !(json_is_integer(run) ? (run_id = json_integer_value(run)) > 0
                               : json_is_string(run) && parse_run_id(json_string_value(run), &run_id)))
        return;
    const char *key;
    json_t *at;
    json_object_foreach(offsets, key, at) {
        char file[64];
        snprintf(file, sizeof file, RUN_DIR_RANKS "/rank-%s.log", key);
        log_pos *l = json_is_integer(at) ? find_log(node, run_id, file, 0) : NULL;
        if (!l) continue;
        if (!l->placed) { /* the node's copy is new to this one: its bytes go on from here */
            l->next_offset = json_integer_value(at);
            l->placed = true;
        }
        json_object_set_new(offsets, key, json_integer(copy_size(run_id, file) - l->next_offset + json_integer_value(at)));
    }
}

/* A line with an attempt's start, its offsets made this server's (malloc'd); NULL: as it is. */
static char *line_in_copy(int node, const char *line) {
    if (!strstr(line, "\"log_offsets\"")) return NULL;
    json_t *doc = json_loads(line, 0, NULL);
    if (!doc) return NULL;
    size_t n = json_is_array(doc) ? json_array_size(doc) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *ev = json_is_array(doc) ? json_array_get(doc, i) : doc;
        if (json_is_object(ev)) copy_offsets(node, ev);
    }
    char *out = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return out;
}

int64_t relay_stream(int node, const char *id, int64_t first_seq, const json_t *lines, const char *hello,
                     bool closed) {
    pthread_mutex_lock(&R.mu);
    stream *s = find_stream(node, id, false);
    bool resumed = !s && first_seq > 0; /* a source that went on while this server was away */
    if (!s && (!resumed || hello)) s = find_stream(node, id, true);
    int64_t next = first_seq + (int64_t)json_array_size(lines);
    if (!s && resumed && !hello) {
        next = 0; /* unknown: its hello first */
    } else if (!s) {
        log_warn("node %d: more than %d event streams at once: stream %s is dropped", node, MAX_STREAMS, id);
    } else {
        if (resumed) { /* its hello opens the connection, then it goes on from first_seq */
            if (s->fd >= 0 && !(write_all(s->fd, hello, strlen(hello)) && write_all(s->fd, "\n", 1))) {
                close(s->fd);
                s->fd = -1;
            }
            s->next_seq = first_seq;
        }
        if (first_seq > s->next_seq) {
            next = s->next_seq; /* a gap: ask for what is missing */
        } else {
            buf_t out = {0};
            for (size_t i = (size_t)(s->next_seq - first_seq); i < json_array_size(lines); i++) {
                const char *line = json_string_value(json_array_get(lines, i));
                if (!line) continue;
                char *copy = line_in_copy(node, line); /* an attempt's log offsets made this copy's */
                if (copy) line = copy;
                buf_append(&out, line, strlen(line));
                buf_append(&out, "\n", 1);
                free(copy);
            }
            if (s->fd >= 0 && out.len && !write_all(s->fd, out.data, out.len)) {
                log_warn("node %d: its event stream %s was closed by the event socket (a refused hello?): its lines "
                         "are dropped", node, id);
                close(s->fd);
                s->fd = -1;
            }
            buf_free(&out);
            s->next_seq = next;
            if (closed) drop_stream(s);
        }
    }
    pthread_mutex_unlock(&R.mu);
    return next;
}

/* "trainer.log" or "ranks/rank-N.log": nothing else is written for an agent. */
static bool log_name_ok(const char *f) {
    if (strcmp(f, RUN_DIR_LOG) == 0) return true;
    /* ranks/rank-N.log, N in plain decimal digits (no sign, no space, no leading zero) */
    const char *prefix = RUN_DIR_RANKS "/rank-", *d = f + strlen(prefix);
    if (strncmp(f, prefix, strlen(prefix)) != 0 || !isdigit((unsigned char)*d) || (d[0] == '0' && isdigit((unsigned char)d[1])))
        return false;
    while (isdigit((unsigned char)*d)) d++;
    return d - (f + strlen(prefix)) <= 4 && strcmp(d, ".log") == 0;
}

static log_pos *find_log(int node, int64_t run_id, const char *file, int64_t offset) {
    for (int i = 0; i < R.n_logs; i++)
        if (R.logs[i].node == node && R.logs[i].run_id == run_id && strcmp(R.logs[i].file, file) == 0) return &R.logs[i];
    if (R.n_logs == MAX_LOGS) return NULL;
    log_pos *l = &R.logs[R.n_logs++];
    *l = (log_pos){.node = node, .run_id = run_id, .next_offset = offset}; /* new here: from where it says */
    snprintf(l->file, sizeof l->file, "%s", file);
    return l;
}

/* trainer.log's lines from a node, each "[node NAME] " first. */
static void prefixed(buf_t *out, const char *name, const char *text, size_t len, bool *mid_line) {
    for (size_t i = 0; i < len;) {
        if (!*mid_line) buf_printf(out, "[node %s] ", name);
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) + 1 : len - i;
        buf_append(out, text + i, n);
        *mid_line = !nl;
        i += n;
    }
}

int64_t relay_log(int node, const char *node_name, int64_t run_id, const char *file, int64_t offset, const char *text,
                  size_t len, char *err, size_t errlen) {
    if (!log_name_ok(file)) {
        snprintf(err, errlen, "file %s: a node forwards only trainer.log and ranks/rank-N.log", file);
        return -1;
    }
    pthread_mutex_lock(&R.mu);
    log_pos *l = find_log(node, run_id, file, offset);
    int64_t next = -1;
    if (l && !l->placed) { /* the node's first bytes of it here: the earlier ones went to another copy, or none */
        l->next_offset = offset;
        l->placed = true;
    }
    if (!l) {
        snprintf(err, errlen, "more than %d forwarded logs at once", MAX_LOGS);
    } else if (offset > l->next_offset) {
        next = l->next_offset; /* a gap: ask for what is missing */
    } else if (offset + (int64_t)len <= l->next_offset) {
        next = l->next_offset; /* had it all */
    } else {
        size_t skip = (size_t)(l->next_offset - offset);
        char *dir = layout_run_dir(run_id), why[768] = "";
        run_dir d;
        int fd = -1;
        /* the run's own files, as run_files.h writes them: never through a link it left */
        if (run_dir_open(&d, dir, why, sizeof why) == 0) {
            if (strncmp(file, RUN_DIR_RANKS "/", strlen(RUN_DIR_RANKS "/")) == 0)
                (void)run_dir_make_sub(&d, RUN_DIR_RANKS, why, sizeof why);
            fd = run_file_open_append(&d, file, why, sizeof why);
            run_dir_close(&d);
        }
        buf_t out = {0};
        bool is_main = strcmp(file, RUN_DIR_LOG) == 0;
        bool mid = l->mid_line;
        if (is_main) prefixed(&out, node_name, text + skip, len - skip, &mid);
        else buf_append(&out, text + skip, len - skip);
        bool ok = fd >= 0 && write(fd, out.data, out.len) == (ssize_t)out.len;
        if (!ok)
            snprintf(err, errlen, "cannot append to run %lld's %s: %s", (long long)run_id, file,
                     fd < 0 ? why : strerror(errno));
        if (fd >= 0) close(fd);
        if (ok) {
            l->next_offset = offset + (int64_t)len;
            l->mid_line = mid;
            next = l->next_offset;
        }
        buf_free(&out);
        free(dir);
    }
    pthread_mutex_unlock(&R.mu);
    return next;
}

void relay_node_lost(int node) {
    pthread_mutex_lock(&R.mu);
    for (int i = 0; i < R.n_streams;)
        if (R.streams[i].node == node) drop_stream(&R.streams[i]);
        else i++;
    pthread_mutex_unlock(&R.mu);
}

void relay_run_ended(int64_t run_id) {
    pthread_mutex_lock(&R.mu);
    for (int i = 0; i < R.n_logs;)
        if (R.logs[i].run_id == run_id) R.logs[i] = R.logs[--R.n_logs];
        else i++;
    pthread_mutex_unlock(&R.mu);
}

json_t *relay_streams_json(int node, const json_t *streams) {
    json_t *next = json_object();
    size_t i;
    json_t *s;
    json_array_foreach(streams, i, s) {
        const char *id = json_string_value(json_object_get(s, "id"));
        json_t *seq = json_object_get(s, "seq"), *lines = json_object_get(s, "lines");
        if (!id || strlen(id) >= 64 || !json_is_integer(seq) || json_integer_value(seq) < 0 || !json_is_array(lines))
            continue;
        int64_t n = relay_stream(node, id, json_integer_value(seq), lines,
                                 json_string_value(json_object_get(s, "hello")),
                                 json_is_true(json_object_get(s, "closed")));
        json_object_set_new(next, id, json_integer(n));
    }
    return next;
}

json_t *relay_logs_json(int node, const char *node_name, const json_t *logs) {
    json_t *out = json_array();
    size_t i;
    json_t *l;
    json_array_foreach(logs, i, l) {
        json_t *run = json_object_get(l, "run"), *offset = json_object_get(l, "offset");
        const char *file = json_string_value(json_object_get(l, "file"));
        const char *text = json_string_value(json_object_get(l, "text"));
        if (!json_is_integer(run) || !json_is_integer(offset) || json_integer_value(offset) < 0 || !file || !text)
            continue;
        char err[256] = "";
        int64_t next = relay_log(node, node_name, json_integer_value(run), file, json_integer_value(offset), text,
                                 json_string_length(json_object_get(l, "text")), err, sizeof err);
        json_t *ack = json_pack("{s:O, s:s}", "run", run, "file", file);
        if (next >= 0) json_object_set_new(ack, "next_offset", json_integer(next));
        else json_object_set_new(ack, "error", json_string(err));
        json_array_append_new(out, ack);
    }
    return out;
}

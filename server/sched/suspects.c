/* Suspect nodes: see suspects.h. */
#include "suspects.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "dirs.h"
#include "state_layout.h"

#define SUSPECTS_MAX 128
#define RUNS_KEPT 32 /* the failed runs a node's mark remembers, for the exclusion's window */
#define NAME_MAX_LEN 64

typedef struct {
    char node[NAME_MAX_LEN];
    char *device, *cls, *evidence;
    int64_t since_ms, last_ms, run_id;
    int n_runs;
    int64_t runs[RUNS_KEPT], run_t[RUNS_KEPT]; /* the distinct runs that failed there, and when */
    bool excluded;
} mark;

static struct {
    mark m[SUSPECTS_MAX];
    int n;
    int exclude_after;
    int64_t window_ms;
} S;

bool suspect_class(const char *cls) {
    static const char *const CLASSES[] = {"infra", "collective", "hang", "crash", NULL};
    for (int i = 0; cls && CLASSES[i]; i++)
        if (strcmp(cls, CLASSES[i]) == 0) return true;
    return false;
}

static bool name_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n >= NAME_MAX_LEN) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              strchr("._-", s[i])))
            return false;
    return true;
}

static char *path_in(const char *state_dir, const char *rest) { return xasprintf("%s/nodes%s", state_dir, rest); }

static mark *find(const char *node) {
    for (int i = 0; node && i < S.n; i++)
        if (strcmp(S.m[i].node, node) == 0) return &S.m[i];
    return NULL;
}

static void mark_free(mark *m) {
    free(m->device);
    free(m->cls);
    free(m->evidence);
    memset(m, 0, sizeof *m);
}

static json_t *mark_json(const mark *m) {
    char since[32], last[32];
    format_iso8601(m->since_ms, since);
    format_iso8601(m->last_ms, last);
    json_t *runs = json_array();
    for (int i = 0; i < m->n_runs; i++)
        json_array_append_new(runs, json_pack("{s:I, s:I}", "run_id", (json_int_t)m->runs[i], "t",
                                              (json_int_t)m->run_t[i]));
    return json_pack("{s:s, s:o, s:s, s:s, s:I, s:I, s:s, s:s, s:I, s:i, s:b, s:o}", "node", m->node, "device",
                     json_string_or_null(m->device), "since", since, "last", last, "since_ms",
                     (json_int_t)m->since_ms, "last_ms", (json_int_t)m->last_ms, "class", m->cls ? m->cls : "",
                     "evidence", m->evidence ? m->evidence : "", "run_id", (json_int_t)m->run_id, "failed_runs",
                     m->n_runs, "excluded", m->excluded, "runs", runs);
}

/* nodes/suspects.json, written whole and renamed into place. */
static void save_locked(void) {
    const char *dir = layout_state_dir();
    if (!dir) return;
    char *d = path_in(dir, ""), *tmp = path_in(dir, "/suspects.json.tmp"), *path = path_in(dir, "/suspects.json");
    if (mkdir_p(d, 0700) != 0) log_warn("suspect nodes: cannot make %s: %s", d, strerror(errno));
    json_t *all = suspects_json_locked();
    if (json_dump_file(all, tmp, JSON_COMPACT) != 0 || rename(tmp, path) != 0)
        log_warn("suspect nodes: cannot write %s: %s (the marks hold until this server stops)", path, strerror(errno));
    json_decref(all);
    free(d);
    free(tmp);
    free(path);
}

static void load(const json_t *all) {
    size_t i;
    json_t *o;
    json_array_foreach(all, i, o) {
        const char *node = json_string_value(json_object_get(o, "node"));
        if (!name_ok(node) || S.n >= SUSPECTS_MAX || find(node)) continue;
        mark *m = &S.m[S.n++];
        memset(m, 0, sizeof *m);
        snprintf(m->node, sizeof m->node, "%s", node);
        const char *dev = json_string_value(json_object_get(o, "device"));
        m->device = dev ? xstrdup(dev) : NULL;
        m->cls = xstrdup(json_string_value(json_object_get(o, "class")) ?: "");
        m->evidence = xstrdup(json_string_value(json_object_get(o, "evidence")) ?: "");
        m->since_ms = json_integer_value(json_object_get(o, "since_ms"));
        m->last_ms = json_integer_value(json_object_get(o, "last_ms"));
        m->run_id = json_integer_value(json_object_get(o, "run_id"));
        m->excluded = json_is_true(json_object_get(o, "excluded"));
        size_t k;
        json_t *r;
        json_array_foreach(json_object_get(o, "runs"), k, r) {
            if (m->n_runs >= RUNS_KEPT) break;
            m->runs[m->n_runs] = json_integer_value(json_object_get(r, "run_id"));
            m->run_t[m->n_runs++] = json_integer_value(json_object_get(r, "t"));
        }
    }
}

void suspects_init_locked(int exclude_after, int64_t window_ms) {
    for (int i = 0; i < S.n; i++) mark_free(&S.m[i]);
    S.n = 0;
    S.exclude_after = exclude_after;
    S.window_ms = window_ms;
    const char *dir = layout_state_dir();
    if (!dir) return;
    char err[256];
    json_t *all = suspects_read_dir(dir, err, sizeof err);
    if (!all) log_warn("suspect nodes: %s: no node starts marked", err);
    else load(all);
    json_decref(all);
    if (S.n) log_info("suspect nodes: %d marked, as the state directory keeps them (GET /nodes)", S.n);
    suspects_take_requests_locked();
}

void suspect_mark_locked(const char *node, const char *device, const char *cls, const char *evidence, int64_t run_id,
                         int64_t now) {
    if (!name_ok(node) || !suspect_class(cls)) return;
    mark *m = find(node);
    if (!m) {
        if (S.n >= SUSPECTS_MAX) {
            log_warn("suspect nodes: %d are marked already: node %s is not", SUSPECTS_MAX, node);
            return;
        }
        m = &S.m[S.n++];
        memset(m, 0, sizeof *m);
        snprintf(m->node, sizeof m->node, "%s", node);
        m->since_ms = now;
    }
    free(m->device);
    free(m->cls);
    free(m->evidence);
    m->device = device && *device ? xstrdup(device) : NULL;
    m->cls = xstrdup(cls);
    m->evidence = xstrdup(evidence ? evidence : "");
    m->last_ms = now;
    m->run_id = run_id;
    /* the distinct runs that failed there within the window, this one the newest */
    int kept = 0;
    for (int i = 0; i < m->n_runs; i++)
        if (m->runs[i] != run_id && (S.window_ms <= 0 || now - m->run_t[i] <= S.window_ms)) {
            m->runs[kept] = m->runs[i];
            m->run_t[kept++] = m->run_t[i];
        }
    if (kept == RUNS_KEPT) {
        memmove(m->runs, m->runs + 1, (RUNS_KEPT - 1) * sizeof *m->runs);
        memmove(m->run_t, m->run_t + 1, (RUNS_KEPT - 1) * sizeof *m->run_t);
        kept--;
    }
    m->runs[kept] = run_id;
    m->run_t[kept++] = now;
    m->n_runs = kept;
    bool was = m->excluded;
    if (S.exclude_after > 0 && m->n_runs >= S.exclude_after) m->excluded = true;
    if (m->excluded && !was)
        log_warn("node %s is excluded: %d runs failed there within %lld s (the last, run %lld: %s: %s); an admin "
                 "clears it: ddpd node clear %s", node, m->n_runs, (long long)(S.window_ms / 1000), (long long)run_id,
                 cls, m->evidence, node);
    else
        log_warn("node %s is suspect: run %lld failed there (%s: %s); no run goes there while another place fits",
                 node, (long long)run_id, cls, m->evidence);
    save_locked();
}

bool suspect_of(const char *node, bool *excluded) {
    const mark *m = find(node);
    if (excluded) *excluded = m && m->excluded;
    return m != NULL;
}

bool suspect_clear_locked(const char *node, const char *by) {
    mark *m = find(node);
    if (!m) return false;
    log_info("node %s cleared by %s: it was %s since run %lld failed there (%s)", node, by,
             m->excluded ? "excluded" : "suspect", (long long)m->run_id, m->cls ? m->cls : "");
    mark_free(m);
    *m = S.m[--S.n];
    memset(&S.m[S.n], 0, sizeof S.m[S.n]);
    save_locked();
    return true;
}

bool suspects_take_requests_locked(void) {
    const char *state = layout_state_dir();
    if (!state) return false;
    char *dir = path_in(state, "/clear");
    DIR *d = opendir(dir);
    bool cleared = false;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char *p = xasprintf("%s/%s", dir, e->d_name);
            if (unlink(p) == 0 && name_ok(e->d_name)) {
                if (suspect_clear_locked(e->d_name, "ddpd node clear")) cleared = true;
                else log_info("ddpd node clear %s: that node is not marked", e->d_name);
            }
            free(p);
        }
        closedir(d);
    }
    free(dir);
    return cleared;
}

json_t *suspects_json_locked(void) {
    json_t *all = json_array();
    for (int i = 0; i < S.n; i++) json_array_append_new(all, mark_json(&S.m[i]));
    return all;
}

json_t *suspect_json_locked(const char *node) {
    const mark *m = find(node);
    return m ? mark_json(m) : NULL;
}

json_t *suspects_read_dir(const char *state_dir, char *err, size_t errlen) {
    char *path = path_in(state_dir, "/suspects.json");
    json_error_t je;
    json_t *all = json_load_file(path, 0, &je);
    if (!all && access(path, F_OK) != 0) all = json_array(); /* none marked yet */
    else if (!json_is_array(all)) {
        snprintf(err, errlen, "%s: %s", path, all ? "not a JSON array" : je.text);
        json_decref(all);
        all = NULL;
    }
    free(path);
    return all;
}

int suspects_request_clear(const char *state_dir, const char *node, char *err, size_t errlen) {
    if (!name_ok(node)) {
        snprintf(err, errlen, "\"%.80s\" is not a node name (1 to 63 letters, digits, '.', '_' or '-'): see ddpd "
                 "node list", node);
        return -1;
    }
    char *dir = path_in(state_dir, "/clear"), *path = xasprintf("%s/%s", dir, node);
    int rc = mkdir_p(dir, 0700);
    if (rc != 0) snprintf(err, errlen, "cannot make %s: %s", dir, strerror(errno));
    if (rc == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
            snprintf(err, errlen, "cannot leave the request %s: %s", path, strerror(errno));
            rc = -1;
        } else {
            close(fd);
        }
    }
    free(dir);
    free(path);
    return rc;
}

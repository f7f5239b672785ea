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
#define DEVICE_LEN 128
#define DEVICES_KEPT 16 /* the suspect devices a node's mark names */

/* One failure there within the window: when, of which run (and whose), on which device. */
typedef struct {
    int64_t t, run_id;
    int attempt;
    char cls[16];            /* its class: infra, collective, hang, crash */
    char device[DEVICE_LEN]; /* "cpu:1", "gpu:UUID"; "": not known */
    char owner[NAME_MAX_LEN];
} failure_at;

typedef struct {
    char node[NAME_MAX_LEN];
    char *cls, *evidence, *owner; /* the newest failure's (owner: whose run; NULL: nobody's) */
    int64_t since_ms, last_ms, run_id;
    int n_runs;
    int64_t runs[RUNS_KEPT], run_t[RUNS_KEPT]; /* the distinct runs that failed there, and when */
    int n_fail;
    failure_at fail[RUNS_KEPT]; /* the failures within the window, oldest first */
    bool suspect;               /* the whole node (failures on several devices, or on none named) */
    int n_devs;
    char devs[DEVICES_KEPT][DEVICE_LEN]; /* the devices alone that are suspect (failures on that one) */
    bool excluded;
} mark;

static struct {
    mark m[SUSPECTS_MAX];
    int n;
    int suspect_after, exclude_after;
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
    free(m->cls);
    free(m->evidence);
    free(m->owner);
    memset(m, 0, sizeof *m);
}

/* Whether the mark keeps anything from being placed: the node, a device of it, or all of it. */
static bool in_force(const mark *m) { return m->suspect || m->excluded || m->n_devs > 0; }

static const char *state_of(const mark *m) {
    return m->excluded ? "excluded" : in_force(m) ? "suspect" : "watched";
}

static bool dev_marked(const mark *m, const char *device) {
    for (int i = 0; device && i < m->n_devs; i++)
        if (strcmp(m->devs[i], device) == 0) return true;
    return false;
}

static json_t *mark_json(const mark *m) {
    char since[32], last[32];
    format_iso8601(m->since_ms, since);
    format_iso8601(m->last_ms, last);
    json_t *runs = json_array();
    for (int i = 0; i < m->n_runs; i++)
        json_array_append_new(runs, json_pack("{s:I, s:I}", "run_id", (json_int_t)m->runs[i], "t",
                                              (json_int_t)m->run_t[i]));
    json_t *devs = json_array(), *fails = json_array();
    for (int i = 0; i < m->n_devs; i++) json_array_append_new(devs, json_string(m->devs[i]));
    for (int i = 0; i < m->n_fail; i++)
        json_array_append_new(fails, json_pack("{s:I, s:I, s:i, s:o, s:o, s:o}", "t", (json_int_t)m->fail[i].t,
                                               "run_id", (json_int_t)m->fail[i].run_id, "attempt", m->fail[i].attempt,
                                               "class", json_string_or_null(m->fail[i].cls[0] ? m->fail[i].cls : NULL),
                                               "device",
                                               json_string_or_null(m->fail[i].device[0] ? m->fail[i].device : NULL),
                                               "owner", json_string_or_null(m->fail[i].owner[0] ? m->fail[i].owner
                                                                                                 : NULL)));
    /* device: the one device that is suspect when the node as a whole is not */
    const char *device = !m->suspect && !m->excluded && m->n_devs ? m->devs[0] : NULL;
    return json_pack("{s:s, s:s, s:b, s:o, s:o, s:s, s:s, s:I, s:I, s:s, s:s, s:I, s:o, s:i, s:b, s:o, s:o}", "node",
                     m->node, "state", state_of(m), "suspect", m->suspect, "device", json_string_or_null(device),
                     "devices", devs, "since", since, "last", last, "since_ms", (json_int_t)m->since_ms, "last_ms",
                     (json_int_t)m->last_ms, "class", m->cls ? m->cls : "", "evidence",
                     m->evidence ? m->evidence : "", "run_id", (json_int_t)m->run_id, "owner",
                     json_string_or_null(m->owner), "failed_runs", m->n_runs, "excluded", m->excluded, "runs", runs,
                     "failures", fails);
}

/* nodes/suspects.json, written whole and renamed into place. */
static void save_locked(void) {
    const char *dir = layout_state_dir();
    if (!dir) return;
    char *d = path_in(dir, ""), *tmp = path_in(dir, "/suspects.json.tmp"), *path = path_in(dir, "/suspects.json");
    if (mkdir_p(d, 0700) != 0) log_warn("suspect nodes: cannot make %s: %s", d, strerror(errno));
    json_t *all = json_array();
    for (int i = 0; i < S.n; i++) json_array_append_new(all, mark_json(&S.m[i]));
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
        size_t k;
        const char *node = json_string_value(json_object_get(o, "node"));
        if (!name_ok(node) || S.n >= SUSPECTS_MAX || find(node)) continue;
        mark *m = &S.m[S.n++];
        memset(m, 0, sizeof *m);
        snprintf(m->node, sizeof m->node, "%s", node);
        const char *owner = json_string_value(json_object_get(o, "owner"));
        m->owner = owner ? xstrdup(owner) : NULL;
        /* a mark of the server before suspect-after: no state, and in force */
        const char *state = json_string_value(json_object_get(o, "state"));
        m->suspect = json_object_get(o, "suspect") ? json_is_true(json_object_get(o, "suspect")) : !state;
        json_t *d;
        json_array_foreach(json_object_get(o, "devices"), k, d) {
            if (m->n_devs >= DEVICES_KEPT || !json_string_value(d)) break;
            snprintf(m->devs[m->n_devs++], DEVICE_LEN, "%s", json_string_value(d));
        }
        json_array_foreach(json_object_get(o, "failures"), k, d) {
            if (m->n_fail >= RUNS_KEPT) break;
            failure_at *f = &m->fail[m->n_fail++];
            f->t = json_integer_value(json_object_get(d, "t"));
            f->run_id = json_integer_value(json_object_get(d, "run_id"));
            f->attempt = (int)json_integer_value(json_object_get(d, "attempt"));
            snprintf(f->device, sizeof f->device, "%s", json_string_value(json_object_get(d, "device")) ?: "");
            snprintf(f->cls, sizeof f->cls, "%s", json_string_value(json_object_get(d, "class")) ?: "");
            snprintf(f->owner, sizeof f->owner, "%s", json_string_value(json_object_get(d, "owner")) ?: "");
        }
        m->cls = xstrdup(json_string_value(json_object_get(o, "class")) ?: "");
        m->evidence = xstrdup(json_string_value(json_object_get(o, "evidence")) ?: "");
        m->since_ms = json_integer_value(json_object_get(o, "since_ms"));
        m->last_ms = json_integer_value(json_object_get(o, "last_ms"));
        m->run_id = json_integer_value(json_object_get(o, "run_id"));
        m->excluded = json_is_true(json_object_get(o, "excluded"));
        json_t *r;
        json_array_foreach(json_object_get(o, "runs"), k, r) {
            if (m->n_runs >= RUNS_KEPT) break;
            m->runs[m->n_runs] = json_integer_value(json_object_get(r, "run_id"));
            m->run_t[m->n_runs++] = json_integer_value(json_object_get(r, "t"));
        }
    }
}

void suspects_init_locked(int suspect_after, int exclude_after, int64_t window_ms) {
    for (int i = 0; i < S.n; i++) mark_free(&S.m[i]);
    S.n = 0;
    S.suspect_after = suspect_after > 0 ? suspect_after : 1;
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

/* Whether the failures within the window make the node, or the device of the newest,
 * suspect: suspect_after of them on one named device mark that device alone; as many
 * on several devices, or on none named, mark the node. */
static void judge(mark *m, const char *device) {
    int same = 0, all = m->n_fail;
    bool one_device = all > 0;
    for (int i = 0; i < all; i++) {
        if (!m->fail[i].device[0] || strcmp(m->fail[i].device, m->fail[0].device) != 0) one_device = false;
        if (device && *device && strcmp(m->fail[i].device, device) == 0) same++;
    }
    if (device && *device && same >= S.suspect_after && !dev_marked(m, device) && m->n_devs < DEVICES_KEPT)
        snprintf(m->devs[m->n_devs++], DEVICE_LEN, "%s", device);
    if (all >= S.suspect_after && !one_device) m->suspect = true;
}

void suspect_mark_locked(const char *node, const char *device, const char *cls, const char *evidence, int64_t run_id,
                         int attempt, const char *owner, int64_t now) {
    if (!name_ok(node) || !suspect_class(cls)) return;
    mark *m = find(node);
    for (int i = 0; m && i < m->n_fail; i++)
        if (m->fail[i].run_id == run_id && m->fail[i].attempt == attempt) return; /* told twice: counted once */
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
    bool was_in_force = in_force(m), was_excluded = m->excluded, was_dev = dev_marked(m, device);
    free(m->cls);
    free(m->evidence);
    free(m->owner);
    m->cls = xstrdup(cls);
    m->evidence = xstrdup(evidence ? evidence : "");
    m->owner = owner ? xstrdup(owner) : NULL;
    m->last_ms = now;
    m->run_id = run_id;
    /* the failures within the window, this one the newest */
    int kept = 0;
    for (int i = 0; i < m->n_fail; i++)
        if (S.window_ms <= 0 || now - m->fail[i].t <= S.window_ms) m->fail[kept++] = m->fail[i];
    if (!kept && !was_in_force) m->since_ms = now; /* a watch whose failures all passed starts again */
    if (kept == RUNS_KEPT) memmove(m->fail, m->fail + 1, (size_t)--kept * sizeof *m->fail);
    m->fail[kept] = (failure_at){.t = now, .run_id = run_id, .attempt = attempt};
    snprintf(m->fail[kept].device, DEVICE_LEN, "%s", device ? device : "");
    snprintf(m->fail[kept].cls, sizeof m->fail[kept].cls, "%s", cls);
    snprintf(m->fail[kept].owner, NAME_MAX_LEN, "%s", owner ? owner : "");
    m->n_fail = kept + 1;
    /* the distinct runs that failed there within the window, this one the newest */
    kept = 0;
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
    judge(m, device);
    if (S.exclude_after > 0 && m->n_runs >= S.exclude_after) m->excluded = true;
    if (!was_in_force && in_force(m)) m->since_ms = now;
    if (m->excluded && !was_excluded)
        log_warn("node %s is excluded: %d runs failed there within %lld s (the last, run %lld: %s: %s); an admin "
                 "clears it: ddpd node clear %s", node, m->n_runs, (long long)(S.window_ms / 1000), (long long)run_id,
                 cls, m->evidence, node);
    else if (m->suspect)
        log_warn("node %s is suspect: %d failures there within %lld s, the last of run %lld (%s: %s); no run goes "
                 "there while another place fits", node, m->n_fail, (long long)(S.window_ms / 1000),
                 (long long)run_id, cls, m->evidence);
    else if (dev_marked(m, device) && !was_dev)
        log_warn("device %s of node %s is suspect: %d failures on it within %lld s, the last of run %lld (%s: %s); "
                 "no run is given it while other devices fit", device, node, S.suspect_after,
                 (long long)(S.window_ms / 1000), (long long)run_id, cls, m->evidence);
    else
        log_info("node %s: run %lld failed there (%s%s%s: %s): %d failure%s within %lld s, suspect at %d", node,
                 (long long)run_id, cls, device && *device ? " on " : "", device ? device : "", m->evidence, m->n_fail,
                 m->n_fail == 1 ? "" : "s", (long long)(S.window_ms / 1000), S.suspect_after);
    save_locked();
}

bool suspect_of(const char *node, bool *excluded) {
    const mark *m = find(node);
    if (excluded) *excluded = m && m->excluded;
    return m && (m->suspect || m->excluded);
}

bool suspect_device_of(const char *node, const char *device) {
    const mark *m = find(node);
    return m && dev_marked(m, device);
}

bool suspect_clear_locked(const char *node, const char *by) {
    mark *m = find(node);
    if (!m) return false;
    log_info("node %s cleared by %s: it was %s since run %lld failed there (%s)", node, by, state_of(m),
             (long long)m->run_id, m->cls ? m->cls : "");
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
    for (int i = 0; i < S.n; i++)
        if (in_force(&S.m[i])) json_array_append_new(all, mark_json(&S.m[i]));
    return all;
}

json_t *suspect_json_locked(const char *node) {
    const mark *m = find(node);
    return m && in_force(m) ? mark_json(m) : NULL;
}

json_t *watch_json_locked(const char *node) {
    const mark *m = find(node);
    bool recent = m && m->n_fail > 0 && (S.window_ms <= 0 || now_ms() - m->last_ms <= S.window_ms);
    return recent && !in_force(m) ? mark_json(m) : json_null();
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

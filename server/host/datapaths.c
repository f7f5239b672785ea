/* Resolving a submitted config's file paths inside the data roots: see datapaths.h. */
#include "datapaths.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

int data_roots_add(data_roots *r, const char *dir, char *err, size_t errlen) {
    char real[PATH_MAX];
    struct stat sb;
    if (!realpath(dir, real) || stat(real, &sb) != 0) {
        snprintf(err, errlen, "data root %s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "data root %s is not a directory", dir);
        return -1;
    }
    r->roots = xrealloc(r->roots, (size_t)(r->n + 1) * sizeof *r->roots);
    r->roots[r->n++] = xstrdup(real);
    return 0;
}

void data_roots_free(data_roots *r) {
    for (int i = 0; i < r->n; i++) free(r->roots[i]);
    free(r->roots);
    r->roots = NULL;
    r->n = 0;
}

char *data_roots_list(const data_roots *r) {
    buf_t b = {0};
    for (int i = 0; i < r->n; i++) buf_printf(&b, "%s%s", i ? ", " : "", r->roots[i]);
    if (!r->n) buf_printf(&b, "(none)");
    return b.data;
}

/* Does `rel`, read segment by segment, climb above its starting directory? */
static bool climbs_out(const char *rel) {
    int depth = 0;
    const char *p = rel;
    while (*p) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0) return true;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            depth++;
        }
        p += n;
        if (*p == '/') p++;
    }
    return false;
}

static bool inside(const char *path, const char *root) {
    size_t n = strlen(root);
    if (strcmp(root, "/") == 0) return true;
    return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* Walks a JSON pointer of plain object keys ("/data/train/images"). */
static json_t *at_pointer(const json_t *doc, const char *pointer) {
    json_t *cur = (json_t *)doc;
    char key[256];
    const char *p = pointer;
    while (cur && *p == '/') {
        p++;
        size_t n = strcspn(p, "/");
        if (n >= sizeof key) return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        cur = json_is_object(cur) ? json_object_get(cur, key) : NULL;
        p += n;
    }
    return cur;
}

/* An absolute path (as a person types it, $PWD, a path copied from ls): taken when it
 * lies inside one of the roots, by its canonical path, with the checks a relative one
 * gets. */
static void resolve_absolute(const data_roots *roots, const char *what, const char *list, const char *abs,
                             bool want_dir, json_t *resolved, const char *pointer, schema_errors *errs) {
    char real[PATH_MAX];
    struct stat sb;
    bool in_a_root = false;
    const char *thing = want_dir ? "directory" : "file";
    if (!realpath(abs, real)) {
        schema_errors_add(errs, pointer, "no %s \"%s\": %s", thing, abs, strerror(errno));
        return;
    }
    for (int k = 0; k < roots->n; k++) in_a_root |= inside(real, roots->roots[k]);
    if (!in_a_root) {
        if (want_dir)
            schema_errors_add(errs, pointer,
                              "\"%s\" is not inside any of the %s (%s): give a directory inside one of them, absolute "
                              "or relative to the root (ddpctl run --workdir DIR), or start the server with "
                              "--work-root for it",
                              abs, what, list);
        else
            schema_errors_add(errs, pointer,
                              "\"%s\" is not inside any of the %s (%s): give a file inside one of them, absolute or "
                              "relative to the root%s",
                              abs, what, list, strcmp(real, abs) != 0 ? " (a symlink on the way leads out)" : "");
    } else if (stat(real, &sb) != 0 || !(want_dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode)) ||
               access(real, want_dir ? R_OK | X_OK : R_OK) != 0) {
        schema_errors_add(errs, pointer, "%s is not a readable %s", real, want_dir ? "directory" : "regular file");
    } else {
        json_t *slot = at_pointer(resolved, pointer);
        if (slot) json_string_set(slot, real);
    }
}

/* A file (want_dir false) or a directory beneath the roots: see the header. */
static void resolve(const data_roots *roots, const char *what, const json_t *config, json_t *resolved,
                    const char *pointer, bool want_dir, schema_errors *errs) {
    const json_t *v = at_pointer(config, pointer);
    if (!json_is_string(v)) return;
    const char *rel = json_string_value(v);
    const char *thing = want_dir ? "directory" : "file";
    char *list = data_roots_list(roots);
    if (roots->n == 0) {
        schema_errors_add(errs, pointer, "cannot be used: this server has no %s (ddpd serve --%s DIR)", what,
                          want_dir ? "work-root" : "data-root");
    } else if (rel[0] == '\0') {
        schema_errors_add(errs, pointer, "must name a %s (a path relative to one of the %s: %s)", thing, what, list);
    } else if (rel[0] == '/') {
        resolve_absolute(roots, what, list, rel, want_dir, resolved, pointer, errs);
    } else if (climbs_out(rel)) {
        schema_errors_add(errs, pointer, "\"%s\" escapes the %s (%s) with \"..\": name a %s inside",
                          rel, what, list, thing);
    } else {
        bool found = false;
        char *escaped_to = NULL, *not_file = NULL;
        for (int i = 0; i < roots->n && !found; i++) {
            char *joined = xasprintf("%s/%s", roots->roots[i], rel);
            char real[PATH_MAX];
            struct stat sb;
            if (realpath(joined, real)) {
                bool in_a_root = false; /* a symlink from one root into another is fine */
                for (int k = 0; k < roots->n; k++) in_a_root |= inside(real, roots->roots[k]);
                if (!in_a_root) {
                    if (!escaped_to) escaped_to = xstrdup(real);
                } else if (stat(real, &sb) != 0 || !(want_dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode)) ||
                           access(real, want_dir ? R_OK | X_OK : R_OK) != 0) {
                    if (!not_file) not_file = xstrdup(real);
                } else {
                    json_t *slot = at_pointer(resolved, pointer);
                    if (slot) json_string_set(slot, real);
                    found = true;
                }
            }
            free(joined);
        }
        if (!found) {
            if (escaped_to)
                schema_errors_add(errs, pointer, "\"%s\" leads out of the %s (%s) to %s (a symlink?): name a %s inside",
                                  rel, what, list, escaped_to, thing);
            else if (not_file)
                schema_errors_add(errs, pointer, "%s is not a readable %s", not_file,
                                  want_dir ? "directory" : "regular file");
            else
                schema_errors_add(errs, pointer, "no %s \"%s\" in the %s (%s)", thing, rel, what, list);
        }
        free(escaped_to);
        free(not_file);
    }
    free(list);
}

void datapaths_resolve_field(const data_roots *roots, const char *what, const json_t *config,
                             json_t *resolved, const char *pointer, schema_errors *errs) {
    resolve(roots, what, config, resolved, pointer, false, errs);
}

void datapaths_resolve_dir(const data_roots *roots, const char *what, const json_t *config, json_t *resolved,
                           const char *pointer, schema_errors *errs) {
    resolve(roots, what, config, resolved, pointer, true, errs);
}

void datapaths_resolve_config(const data_roots *roots, const json_t *config, json_t *resolved,
                              schema_errors *errs) {
    static const char *const fields[] = {"/data/train/images", "/data/train/labels",
                                         "/data/test/images", "/data/test/labels"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        datapaths_resolve_field(roots, "data roots", config, resolved, fields[i], errs);
}

/* `abs` made canonical into out (PATH_MAX): realpath of its longest existing part, the
 * rest appended as written (*missing then). False when that rest climbs (".", "..")
 * or it is too long. */
static bool canonical_now(const char *abs, char *out, bool *missing) {
    if (realpath(abs, out)) return true;
    *missing = true;
    if (errno != ENOENT && errno != ENOTDIR) return false;
    const char *slash = strrchr(abs, '/');
    if (!slash || slash == abs) return false;
    const char *last = slash + 1;
    if (!*last || strcmp(last, ".") == 0 || strcmp(last, "..") == 0) return false;
    char parent[PATH_MAX];
    if ((size_t)(slash - abs) >= sizeof parent) return false;
    memcpy(parent, abs, (size_t)(slash - abs));
    parent[slash - abs] = '\0';
    if (!canonical_now(parent, out, missing)) return false;
    size_t n = strlen(out);
    if (n + 1 + strlen(last) >= PATH_MAX) return false;
    snprintf(out + n, PATH_MAX - n, "%s%s", strcmp(out, "/") == 0 ? "" : "/", last);
    return true;
}

void datapaths_recheck(const data_roots *roots, const char *what, json_t *config, const char *pointer,
                       schema_errors *errs) {
    json_t *slot = at_pointer(config, pointer);
    const char *path = json_string_value(slot);
    if (!path || !*path) return;
    char real[PATH_MAX];
    char *list = data_roots_list(roots);
    bool in_a_root = false, missing = false;
    if (path[0] != '/' || !canonical_now(path, real, &missing)) {
        schema_errors_add(errs, pointer, "is \"%.300s\", not the canonical path the server wrote at submission (the "
                          "run's config.json was changed since): it must lie inside the %s (%s)", path, what, list);
    } else {
        for (int k = 0; k < roots->n; k++) in_a_root |= inside(real, roots->roots[k]);
        if (!in_a_root)
            schema_errors_add(errs, pointer, "leads to %.300s, outside the %s (%s): the run's config.json was "
                              "changed since its submission", real, what, list);
        else
            json_string_set(slot, missing ? "" : real);
    }
    free(list);
}

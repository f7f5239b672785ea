/* A run reads only its submitter's runs: see run_reads.h. */
#include "run_reads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_read.h"

/* The paths of a config that name files or directories. */
static const char *const POINTERS[] = {"/data/train/images", "/data/train/labels", "/data/test/images",
                                       "/data/test/labels", "/working_dir", "/checkpoint/load"};

static const char *string_at(const json_t *doc, const char *pointer) {
    const json_t *cur = doc;
    char key[64];
    for (const char *p = pointer; cur && *p == '/';) {
        p++;
        size_t n = strcspn(p, "/");
        snprintf(key, sizeof key, "%.*s", (int)n, p);
        cur = json_object_get(cur, key);
        p += n;
    }
    return json_string_value(cur);
}

/* The run a path inside `runs_dir` lies in: its id, 0 when it is the runs directory
 * itself or something in it that is no run's (a directory set aside), -1 when the
 * path is not inside it. */
static long long run_of(const char *path, const char *runs_dir) {
    size_t n = strlen(runs_dir);
    if (strncmp(path, runs_dir, n) != 0 || (path[n] != '/' && path[n] != '\0')) return -1;
    const char *seg = path + n + (path[n] == '/');
    size_t len = strcspn(seg, "/");
    if (len == 0 || len > 18 || strspn(seg, "0123456789") != len) return 0;
    return strtoll(seg, NULL, 10);
}

bool run_reads_own(const json_t *resolved, const char *runs_dir, const caller *who, schema_errors *errs) {
    if (who->admin) return true;
    const char *whose = who->kind == CALLER_USER ? who->name : "this caller";
    bool fine = true;
    for (size_t i = 0; i < sizeof POINTERS / sizeof *POINTERS; i++) {
        const char *path = string_at(resolved, POINTERS[i]);
        long long id = path && path[0] == '/' ? run_of(path, runs_dir) : -1;
        if (id < 0) continue;
        run_brief b;
        int found = id > 0 ? store_get_brief(id, &b) : 0;
        if (found > 0 && who->kind == CALLER_USER && b.has_owner && strcmp(b.owner, who->name) == 0) continue;
        fine = false;
        if (found > 0 && b.has_owner)
            schema_errors_add(errs, POINTERS[i], "leads into run %lld, which is %s's: a run reads only its submitter's "
                              "runs (%s's); ask %s to share the file through a data root, or an admin to submit it",
                              id, b.owner, whose, b.owner);
        else if (found > 0)
            schema_errors_add(errs, POINTERS[i], "leads into run %lld, which has no owner (it was submitted before this "
                              "server had users, or with its own token): only an admin may have a run read it", id);
        else
            schema_errors_add(errs, POINTERS[i], "leads into the runs directory but into no run of %s's: name a file of "
                              "one of your own runs", whose);
    }
    return fine;
}

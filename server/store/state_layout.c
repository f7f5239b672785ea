/* The state directory's layout: see state_layout.h. */
#include "state_layout.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "ckpt_files.h"
#include "run_dir.h"

static const char *const RUN_FILES[] = {
    [RUN_FILE_CONFIG] = RUN_DIR_CONFIG,
    [RUN_FILE_LOG] = RUN_DIR_LOG,
    [RUN_FILE_JOURNAL] = RUN_DIR_JOURNAL,
    [RUN_FILE_CHECKPOINTS] = CKPT_DIR,
};

static struct {
    char *dir, *db, *lock, *socket, *runs;
} S;

void state_layout_init(const char *state_dir) {
    state_layout_free();
    S.dir = xstrdup(state_dir);
    S.db = xasprintf("%s/ddpd.db", state_dir);
    S.lock = xasprintf("%s/ddpd.lock", state_dir);
    S.socket = xasprintf("%s/events.sock", state_dir);
    S.runs = xasprintf("%s/runs", state_dir);
}

void state_layout_free(void) {
    free(S.dir);
    free(S.db);
    free(S.lock);
    free(S.socket);
    free(S.runs);
    S.dir = S.db = S.lock = S.socket = S.runs = NULL;
}

const char *layout_state_dir(void) { return S.dir; }
const char *layout_db_path(void) { return S.db; }
const char *layout_lock_path(void) { return S.lock; }
const char *layout_socket_path(void) { return S.socket; }
const char *layout_runs_dir(void) { return S.runs; }

void state_layout_set_runs_dir(const char *runs_dir) {
    free(S.runs);
    S.runs = xstrdup(runs_dir);
}

bool layout_runs_apart(void) {
    size_t n = S.dir ? strlen(S.dir) : 0;
    return S.runs && !(n && strncmp(S.runs, S.dir, n) == 0 && S.runs[n] == '/');
}

char *layout_run_dir(int64_t id) { return xasprintf("%s/%lld", S.runs, (long long)id); }

char *layout_run_path(int64_t id, run_file which) {
    return xasprintf("%s/%lld/%s", S.runs, (long long)id, RUN_FILES[which]);
}

char *layout_rank_log_path(int64_t id, int rank) {
    char *dir = layout_run_dir(id);
    char *p = xasprintf("%s/" RUN_DIR_RANK_LOG, dir, rank);
    free(dir);
    return p;
}

const char *layout_run_file_name(run_file which) { return RUN_FILES[which]; }

/* ---- tightening: this user's only ---- */

static struct {
    long tightened, refused;
    bool shallow; /* the top's own entries only: no directory beneath it is entered */
    bool dry;     /* counted, not changed (ddpd check) */
    char first[512]; /* dry: the first loose entry, "PATH (mode NNNN)" */
} T;

/* The mode a directory the server keeps others out of may have (the pass-through
 * bit of 0711 kept); -1 and err when it cannot be made so. */
static int tighten_top(const char *dir, const char *what, char *err, size_t errlen) {
    struct stat st;
    errno = 0;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s %s: %s", what, dir, errno ? strerror(errno) : "not a directory");
        return -1;
    }
    if (st.st_mode & 066) { /* pass-through only (0711, where runs run as other accounts) is kept */
        if (chmod(dir, 0700) != 0) {
            snprintf(err, errlen, "%s %s is mode %04o (others may read %s) and cannot be made 0700: %s", what, dir,
                     (unsigned)(st.st_mode & 07777), S.runs == dir ? "the runs" : "the database and the runs",
                     strerror(errno));
            return -1;
        }
        log_warn("%s %s was mode %04o: others could read %s; it is now 0700", what, dir, (unsigned)(st.st_mode & 07777),
                 S.runs == dir ? "the runs" : "the database and the runs");
    }
    return 0;
}

static int tighten_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    /* a run directory handed to its account (run_as.h) is that account's: never
     * touched here (a run could swap what lies in it under a path) */
    if (ftw->level > 0 && st->st_uid != geteuid()) return type == FTW_D ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
    /* the shallow pass of every start: the top's own files and the modes of its
     * directories (runs/), never what lies in them (docs/security.md) */
    int next = T.shallow && ftw->level > 0 && type == FTW_D ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
    /* a directory others may only pass through (0711: layout_open_for_accounts) lists nothing */
    mode_t loose = S_ISDIR(st->st_mode) ? 066 : 077;
    if (ftw->level == 0 || type == FTW_SL || type == FTW_SLN || !(st->st_mode & loose)) return next;
    if (T.dry) {
        if (!T.tightened++) snprintf(T.first, sizeof T.first, "%s (mode %04o)", path, (unsigned)(st->st_mode & 07777));
    } else if (chmod(path, st->st_mode & (07700 | (S_ISDIR(st->st_mode) ? 011 : 0))) == 0) {
        T.tightened++;
    } else if (T.refused++ < 5) {
        log_warn("state dir: cannot take group and other access off %s (mode %04o, owner uid %d): %s", path,
                 (unsigned)(st->st_mode & 07777), (int)st->st_uid, strerror(errno));
    }
    return next;
}

/* `dir` and what is beneath it (its own mode by tighten_top). */
static int tighten_tree(const char *dir, const char *what, bool shallow, char *err, size_t errlen) {
    if (tighten_top(dir, what, err, errlen) != 0) return -1;
    T.tightened = T.refused = 0;
    T.shallow = shallow;
    T.dry = false;
    nftw(dir, tighten_entry, 16, FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL);
    if (T.tightened)
        log_warn("%s %s: %ld file(s) and directories in it were readable by others; they are now this user's only",
                 what, dir, T.tightened);
    if (T.refused > 5) log_warn("%s %s: %ld more entries could not be tightened", what, dir, T.refused - 5);
    return 0;
}

int layout_tighten(bool walk, char *err, size_t errlen) {
    if (tighten_tree(S.dir, "state dir", !walk, err, errlen) != 0) return -1;
    if (!layout_runs_apart()) return 0;
    /* runs/ apart: its own mode at each start (its entries are the run directories) */
    return walk ? tighten_tree(S.runs, "runs dir", false, err, errlen) : tighten_top(S.runs, "runs dir", err, errlen);
}

long layout_loose_entries(const char *dir, char *first, size_t firstlen) {
    T.tightened = T.refused = 0;
    T.shallow = false;
    T.dry = true;
    T.first[0] = '\0';
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    nftw(dir, tighten_entry, 16, FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL);
    T.dry = false;
    snprintf(first, firstlen, "%s", T.first);
    return T.tightened;
}

void layout_open_for_accounts(void) {
    /* search only (no listing) for others: a run's account reaches its own directory and
     * the socket by name; the database, the lock and every other run stay 0600/0700 */
    if (chmod(S.dir, 0711) != 0) log_warn("state dir %s: cannot make it 0711: %s", S.dir, strerror(errno));
    if (chmod(S.runs, 0711) != 0) log_warn("%s: cannot make it 0711: %s", S.runs, strerror(errno));
    struct stat st;
    if (lstat(S.socket, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) != 0666 && chmod(S.socket, 0666) != 0)
        log_warn("event socket %s: cannot open it to the runs' accounts: %s", S.socket, strerror(errno));
}

static int by_id(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

size_t layout_run_dir_ids(const char *runs_dir, int64_t **ids) {
    *ids = NULL;
    size_t n = 0, cap = 0;
    DIR *d = opendir(runs_dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long long id = strtoll(e->d_name, &end, 10);
        if (e->d_name[0] < '1' || e->d_name[0] > '9' || *end) continue;
        char *p = xasprintf("%s/%s", runs_dir, e->d_name);
        struct stat sb;
        bool dir = stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(p);
        if (!dir) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            *ids = realloc(*ids, cap * sizeof **ids);
            if (!*ids) abort();
        }
        (*ids)[n++] = id;
    }
    closedir(d);
    if (n) qsort(*ids, n, sizeof **ids, by_id);
    return n;
}

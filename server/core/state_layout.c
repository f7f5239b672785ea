/* The state directory's layout: see state_layout.h. */
#include "state_layout.h"

#include <stdlib.h>

#include "base.h"

static const char *const RUN_FILES[] = {
    [RUN_FILE_CONFIG] = "config.json",
    [RUN_FILE_LOG] = "trainer.log",
    [RUN_FILE_JOURNAL] = "events.jsonl",
    [RUN_FILE_CHECKPOINTS] = "checkpoints",
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

char *layout_run_dir(int64_t id) { return xasprintf("%s/%lld", S.runs, (long long)id); }

char *layout_run_path(int64_t id, run_file which) {
    return xasprintf("%s/%lld/%s", S.runs, (long long)id, RUN_FILES[which]);
}

char *layout_rank_log_path(int64_t id, int rank) {
    char *dir = layout_run_dir(id);
    char *p = xasprintf("%s/ranks/rank-%d.log", dir, rank);
    free(dir);
    return p;
}

const char *layout_run_file_name(run_file which) { return RUN_FILES[which]; }

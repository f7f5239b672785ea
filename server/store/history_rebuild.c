/* Rebuilding the history from the run directories: see history_rebuild.h. */
#include "history_rebuild.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "command_run.h"
#include "event_kinds.h"
#include "journal_replay.h"
#include "line_reader.h"
#include "procstat.h"
#include "run_dir.h"
#include "run_files.h"
#include "run_status.h"
#include "state_layout.h"
#include "store.h"

int history_rebuild_applies(const db_report *verdict, const char *db_path, char *why, size_t len) {
    struct stat sb;
    switch (verdict->state) {
    case DB_LOST:
    case DB_DAMAGED:
        return 1;
    case DB_UNREADABLE: /* not an SQLite file: garbage, moved aside; anything else is not ours to move */
        if (stat(db_path, &sb) == 0 && S_ISREG(sb.st_mode)) return 1;
        snprintf(why, len, "--rebuild-from-runs: %s", verdict->line);
        return -1;
    case DB_NONE:
    case DB_EMPTY:
        return 0;
    case DB_CURRENT:
    case DB_OLDER:
        if (verdict->runs == 0) return 1; /* a schema and no runs: nothing in it to lose */
        snprintf(why, len,
                 "--rebuild-from-runs: %s holds a history of %lld runs and passes its check: there is nothing to "
                 "rebuild; serve without --rebuild-from-runs (or move it aside yourself to rebuild from the run "
                 "directories)", db_path, (long long)verdict->runs);
        return -1;
    default:
        snprintf(why, len, "--rebuild-from-runs does not replace this database: %s", verdict->line);
        return -1;
    }
}

int history_move_db_aside(const char *db_path, char *moved_to, size_t len, char *err, size_t errlen) {
    moved_to[0] = '\0';
    struct stat sb;
    if (stat(db_path, &sb) != 0) return 0;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    char *aside = xasprintf("%s.damaged-%s", db_path, stamp);
    for (int n = 2; access(aside, F_OK) == 0; n++) { /* never over an earlier one */
        free(aside);
        aside = xasprintf("%s.damaged-%s-%d", db_path, stamp, n);
    }
    int rc = 0;
    if (rename(db_path, aside) != 0) {
        snprintf(err, errlen, "cannot move %s aside to %s: %s", db_path, aside, strerror(errno));
        rc = -1;
    }
    for (int i = 0; rc == 0 && i < 2; i++) { /* its WAL and shared memory go with it */
        const char *ext = i ? "-shm" : "-wal";
        char *from = xasprintf("%s%s", db_path, ext), *to = xasprintf("%s%s", aside, ext);
        if (rename(from, to) != 0 && errno != ENOENT) {
            snprintf(err, errlen, "cannot move %s aside to %s: %s", from, to, strerror(errno));
            rc = -1;
        }
        free(from);
        free(to);
    }
    if (rc == 0) snprintf(moved_to, len, "%s", aside);
    free(aside);
    return rc;
}

/* Kills what still runs for run_dir (a process whose command line names it) and
 * waits (up to 5 s) until it has exited, so that its journal is whole; how many. */
static int kill_left_running(const char *run_dir) {
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int killed = 0;
    proc_stat st[64];
    pid_t pids[64];
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (pid <= 1 || *end || pid == (long)getpid()) continue;
        proc_stat ps;
        if (proc_stat_read((pid_t)pid, &ps) != 0 || ps.state == 'Z' || !proc_cmdline_has((pid_t)pid, run_dir)) continue;
        if (kill((pid_t)pid, SIGKILL) != 0) continue;
        if (killed < 64) st[killed] = ps, pids[killed] = (pid_t)pid;
        killed++;
    }
    closedir(d);
    for (int i = 0, tries = 0; i < killed && i < 64 && tries < 500; tries++) {
        if (!proc_is_alive(pids[i], st[i].start_time)) i++;
        else nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    return killed;
}

/* Whether a run of `config` ran on GPUs: its backend, else (auto) the device its
 * ranks' hellos in the journal name ("cuda:0 NAME"). */
static const char *device_kind_of(const json_t *config, const char *dir) {
    const char *backend = json_string_value(json_object_get(json_object_get(config, "distributed"), "backend"));
    if (backend && strcmp(backend, "nccl") == 0) return "gpu";
    if (backend && strcmp(backend, "cpu") == 0) return "cpu";
    struct stat st;
    char why[512];
    int fd = run_file_open_in(dir, RUN_DIR_JOURNAL, RUN_FILE_ANY_SIZE, &st, why, sizeof why);
    const char *kind = "cpu";
    line_reader lr;
    line_reader_init(&lr, fd, 0, 1 << 20);
    const char *line;
    size_t n;
    int64_t budget = 64 << 20;
    for (int i = 0; fd >= 0 && i < 4096 && line_reader_next(&lr, &line, &n, &budget) == 1; i++) { /* the hellos come first */
        json_t *ev = json_loadb(line, n, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *device = json_string_value(json_object_get(ev, "device"));
        bool found = type && strcmp(type, "hello") == 0 && device;
        if (found && strncmp(device, "cuda", 4) == 0) kind = "gpu";
        json_decref(ev);
        if (found) break;
    }
    line_reader_free(&lr);
    if (fd >= 0) close(fd);
    return kind;
}

/* One run directory into the store. 1 rebuilt, 0 skipped (logged), -1 the store failed. */
static int rebuild_run(int64_t id, rebuild_counts *out, char *err, size_t errlen) {
    char *dir = layout_run_dir(id), why[1024];
    run_dir d;
    json_t *config = NULL;
    int rc = 0;
    struct stat sb = {0};
    bool opened = run_dir_open(&d, dir, why, sizeof why) == 0;
    if (opened) { /* the run's own files (run_files.h): never through a link, never a FIFO */
        config = run_file_load_json(&d, RUN_DIR_CONFIG, RUN_FILE_SMALL_MAX, why, sizeof why);
        if (config && run_dir_stat(&d, RUN_DIR_CONFIG, &sb) != 0) sb.st_mtim.tv_sec = 0;
        run_dir_close(&d);
    }
    if (!json_is_object(config)) {
        log_warn("rebuild: run %lld skipped: its config cannot be read: %s", (long long)id,
                 config ? "it is not a JSON object" : why);
        out->skipped++;
        goto done;
    }
    const json_t *ws = json_object_get(json_object_get(config, "distributed"), "world_size");
    store_op ins = {.kind = OP_RUN_INSERT, .run_id = id,
                    .t = sb.st_mtim.tv_sec ? (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000
                                           : now_ms()};
    ins.u.insert.name = xstrdup(json_string_value(json_object_get(config, "name")));
    ins.u.insert.config = json_dumps(config, JSON_COMPACT | JSON_PRESERVE_ORDER);
    ins.u.insert.world_size = json_is_integer(ws) && json_integer_value(ws) > 0 ? (int)json_integer_value(ws) : 1;
    ins.u.insert.device_kind = device_kind_of(config, dir);
    ins.u.insert.command = command_run_is(config);
    if (store_submit_wait(&ins) != id) {
        snprintf(err, errlen, "run %lld could not be stored in the new database (see the log above)", (long long)id);
        rc = -1;
        goto done;
    }
    int killed = kill_left_running(dir);
    journal_replay *j = journal_replay_open(id, dir, NULL);
    if (!j) {
        snprintf(err, errlen, "run %lld: the new database cannot be read", (long long)id);
        rc = -1;
        goto done;
    }
    journal_replay_read(j, true, 0);
    const journal_outcome *o = journal_replay_outcome(j);
    run_status said = RUN_FAILED;
    bool ended = o->ended && run_status_parse(o->status, &said) && run_status_is_final(said);
    store_op fin = {.kind = OP_RUN_FINISH, .run_id = id, .t = ended && o->end_t != NO_INT ? o->end_t : now_ms()};
    fin.u.finish.status = run_status_name(ended ? said : RUN_FAILED);
    fin.u.finish.exit_code = ended ? o->exit_code : NO_INT;
    fin.u.finish.exit_signal = NO_INT;
    if (ended) {
        fin.u.finish.reason = o->reason ? xstrdup(o->reason) : NULL;
    } else {
        char *ending = o->last_step == NO_INT ? xstrdup("its journal has no step")
                                              : xasprintf("its journal ends at step %lld", (long long)o->last_step);
        fin.u.finish.reason = xasprintf("rebuilt from its run directory without an end event: %s%s", ending,
                                        killed ? "; what still ran of it was killed (without its database entry it "
                                                 "could not be taken back)"
                                               : "");
        free(ending);
        out->without_end++;
    }
    out->events += o->replayed;
    journal_replay_close(j);
    if (store_submit_wait(&fin) < 0) {
        snprintf(err, errlen, "run %lld: its end could not be stored in the new database", (long long)id);
        rc = -1;
        goto done;
    }
    run_status final = ended ? said : RUN_FAILED;
    if (final == RUN_SUCCEEDED) out->succeeded++;
    else if (final == RUN_CANCELED) out->canceled++;
    else out->failed++;
    out->runs++;
    rc = 1;
done:
    json_decref(config);
    free(dir);
    return rc;
}

int history_rebuild(const char *runs_dir, rebuild_counts *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    int64_t *ids;
    size_t n = layout_run_dir_ids(runs_dir, &ids);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (rebuild_run(ids[i], out, err, errlen) < 0) rc = -1;
    free(ids);
    store_sync();
    return rc;
}

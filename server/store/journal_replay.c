/* Replaying a run's journal into the store: see journal_replay.h. */
#include "journal_replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "event_kinds.h"
#include "ids.h"
#include "line_reader.h"
#include "run_dir.h"
#include "run_files.h"
#include "store.h"
#include "store_read.h"

#define SUBMIT_BATCH 4096
#define MAX_LINE (16 << 20) /* as ingest: a longer line is no event */

struct journal_replay {
    int64_t run_id;
    char *dir;      /* its run directory */
    int fd;         /* its journal, once there is one (-1 before) */
    line_reader lr; /* where it was read to: the start of a line */
    bool said;      /* a journal that is not the run's own file was logged */
    int64_t said_long; /* overlong lines logged so far */
    rank_seen *seen;
    int n_seen;
    journal_hooks hooks;
    journal_outcome out;
    store_op *ops;
    size_t n_ops;
    bool one_process;       /* journal_replay_open_process */
    journal_process process;
    bool in_scope;          /* the lines read are after that process's hello */
};

/* A replay of `path` for run `run_id`, reading from the start. */
static journal_replay *replay_new(int64_t run_id, const char *dir, const journal_hooks *hooks) {
    journal_replay *j = xcalloc(1, sizeof *j);
    j->run_id = run_id;
    j->dir = xstrdup(dir);
    j->fd = -1;
    if (hooks) j->hooks = *hooks;
    j->out.exit_code = j->out.last_step = j->out.end_t = j->out.last_seq = j->out.last_attempt = NO_INT;
    j->ops = xmalloc(SUBMIT_BATCH * sizeof *j->ops);
    return j;
}

journal_replay *journal_replay_open(int64_t run_id, const char *dir, const journal_hooks *hooks) {
    journal_replay *j = replay_new(run_id, dir, hooks);
    j->n_seen = store_ranks_last_seen(run_id, &j->seen);
    if (j->n_seen < 0) {
        journal_replay_close(j);
        return NULL;
    }
    return j;
}

journal_replay *journal_replay_open_process(int64_t run_id, const char *dir, const journal_process *p,
                                            const journal_hooks *hooks) {
    journal_replay *j = replay_new(run_id, dir, hooks);
    j->one_process = true;
    j->process = *p;
    return j;
}

/* journal_replay_open_process: is this event one of that process's not yet stored?
 * Its hello (which is not replayed) opens its part of the journal; another hello of
 * its rank (a later process: the run resumed) closes it. */
static bool of_the_process(journal_replay *j, const char *type, int64_t rank, const json_t *ev) {
    const journal_process *p = &j->process;
    if (rank != p->rank) return false;
    int64_t seq = event_int(ev, "seq");
    if (strcmp(type, "hello") == 0) {
        j->in_scope = event_int(ev, "pid") == p->pid && event_int(ev, "t") == p->hello_t && seq == p->hello_seq;
        return false;
    }
    if (!j->in_scope || seq == NO_INT || (p->after_seq != NO_INT && seq <= p->after_seq)) return false;
    if (j->out.last_seq == NO_INT || seq > j->out.last_seq) j->out.last_seq = seq;
    return true;
}

/* Does the store already hold this event of `rank` (journaled at t)? */
static bool already_stored(const journal_replay *j, int rank, int64_t t) {
    for (int i = 0; i < j->n_seen; i++)
        if (j->seen[i].rank == rank) return t != NO_INT && t < j->seen[i].last_seen;
    return false;
}

static void flush_ops(journal_replay *j) {
    store_submit(j->ops, j->n_ops);
    j->n_ops = 0;
}

static void note_end(journal_replay *j, const json_t *ev) {
    const char *status = json_string_value(json_object_get(ev, "status"));
    const char *reason = json_string_value(json_object_get(ev, "reason"));
    j->out.ended = true;
    snprintf(j->out.status, sizeof j->out.status, "%s", status ? status : "");
    free(j->out.reason);
    j->out.reason = reason && *reason ? xstrdup(reason) : NULL;
    j->out.exit_code = event_int(ev, "exit_code");
    j->out.end_t = event_int(ev, "t");
}

/* One event of the journal: queued as an op unless the store has it already. */
static void replay_event(journal_replay *j, const json_t *ev) {
    const char *type = json_string_value(json_object_get(ev, "type"));
    int64_t rank = event_int(ev, "rank"), t = event_int(ev, "t"), run_id;
    const json_t *run = json_object_get(ev, "run");
    bool ours = json_is_integer(run) ? json_integer_value(run) == j->run_id
                                     : json_is_string(run) && parse_run_id(json_string_value(run), &run_id) &&
                                           run_id == j->run_id;
    if (!type || !ours || rank == NO_INT || rank < -1 || rank > 1 << 20) {
        j->out.skipped++;
        return;
    }
    if (j->one_process && !of_the_process(j, type, rank, ev)) return;
    if (strcmp(type, "end") == 0) {
        note_end(j, ev);
        return;
    }
    const op_kind_desc *d = op_kind_for_event(type);
    /* the launcher's events other than its end and attempts change nothing the store keeps */
    if (!d || (rank < 0 && !d->of_launcher) || already_stored(j, (int)rank, t)) return;
    store_op op = {.kind = d->kind, .run_id = j->run_id, .rank = (int)rank, .t = t == NO_INT ? now_ms() : t};
    if (d->parse(ev, &op)) { /* not a well-formed event of its kind */
        store_op_free(&op);
        j->out.skipped++;
        return;
    }
    if (op.kind == OP_SYNC) return; /* nothing the store keeps (another rank's epoch) */
    if (op.kind == OP_STEP || op.kind == OP_HEARTBEAT) {
        int64_t gs = op.kind == OP_STEP ? op.u.step.global_step : op.u.heartbeat.global_step;
        if (gs != NO_INT && (j->out.last_step == NO_INT || gs > j->out.last_step)) j->out.last_step = gs;
        if (j->hooks.progress) j->hooks.progress(j->hooks.ctx, op.rank, gs);
    }
    if (op.kind == OP_ATTEMPT_STARTED || op.kind == OP_ATTEMPT_ENDED) {
        int64_t k = op.u.attempt.attempt;
        if (j->out.last_attempt == NO_INT || k > j->out.last_attempt) {
            j->out.last_attempt = k;
            j->out.attempt_open = op.kind == OP_ATTEMPT_STARTED;
        } else if (k == j->out.last_attempt && op.kind == OP_ATTEMPT_ENDED) {
            j->out.attempt_open = false;
        }
        if (j->hooks.attempt) j->hooks.attempt(j->hooks.ctx, &op);
    }
    if (op.kind == OP_RANK_STATE && j->hooks.attempt) j->hooks.attempt(j->hooks.ctx, &op);
    if (j->hooks.keep && !j->hooks.keep(j->hooks.ctx, &op)) { /* past the run's cap on its points */
        store_op_free(&op);
        j->out.capped++;
        return;
    }
    j->ops[j->n_ops++] = op;
    j->out.replayed++;
    if (j->n_ops == SUBMIT_BATCH) flush_ops(j);
}

static void replay_line(journal_replay *j, const char *line, size_t len) {
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ')) len--;
    if (!len) return;
    json_t *doc = len < MAX_LINE ? json_loadb(line, len, 0, NULL) : NULL;
    if (!doc) { /* a torn piece, closed by a later write's newline */
        j->out.skipped++;
        return;
    }
    size_t n = json_is_array(doc) ? json_array_size(doc) : 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *ev = json_is_array(doc) ? json_array_get(doc, i) : doc;
        if (json_is_object(ev)) replay_event(j, ev);
        else j->out.skipped++;
    }
    json_decref(doc);
}

void journal_replay_read(journal_replay *j, bool final, int64_t budget) {
    if (j->fd < 0) {
        /* the run's own file (run_files.h): never through a link, never a FIFO */
        struct stat st;
        char why[768];
        j->fd = run_file_open_in(j->dir, RUN_DIR_JOURNAL, RUN_FILE_ANY_SIZE, &st, why, sizeof why);
        if (j->fd < 0) {
            if (errno != ENOENT && !j->said) log_warn("run %lld: its journal is not read: %s", (long long)j->run_id, why);
            j->said = j->said || errno != ENOENT;
            return;
        }
        line_reader_init(&j->lr, j->fd, 0, MAX_LINE);
    }
    int64_t left = budget > 0 ? budget : INT64_MAX;
    const char *line;
    size_t n;
    while (line_reader_next(&j->lr, &line, &n, &left) == 1) replay_line(j, line, n);
    if (j->lr.skipped_lines > j->said_long) { /* each said once, without its bytes */
        log_warn("run %lld: %lld line(s) of its journal longer than %d MiB skipped (%lld bytes in all): no event is "
                 "that long", (long long)j->run_id, (long long)j->lr.skipped_lines, MAX_LINE >> 20,
                 (long long)j->lr.skipped_bytes);
        j->out.skipped += j->lr.skipped_lines - j->said_long;
        j->said_long = j->lr.skipped_lines;
    }
    size_t rest = line_reader_rest(&j->lr);
    if (final && left > 0 && (rest || j->lr.skipping)) { /* the last line, not whole: torn */
        j->out.skipped++;
        if (j->lr.skipping) j->said_long++; /* counted here, not again as overlong */
        line_reader_drop_rest(&j->lr);
        log_warn("run %lld: the last line of its journal is torn (%zu bytes without a newline): skipped",
                 (long long)j->run_id, rest);
    }
    flush_ops(j);
}

const journal_outcome *journal_replay_outcome(const journal_replay *j) { return &j->out; }

void journal_replay_close(journal_replay *j) {
    if (!j) return;
    if (j->fd >= 0) close(j->fd);
    line_reader_free(&j->lr);
    for (size_t i = 0; i < j->n_ops; i++) store_op_free(&j->ops[i]);
    free(j->ops);
    free(j->seen);
    free(j->dir);
    free(j->out.reason);
    free(j);
}

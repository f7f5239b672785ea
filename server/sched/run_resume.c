/* Resuming a failed or canceled run: see run_resume.h. */
#include "run_resume.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "ckpt_header.h"
#include "run_dir.h"
#include "run_files.h"
#include "run_status.h"
#include "runs.h"
#include "scheduler.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"

/* The checkpoint a resumed trainer starts from, as its --resume picks it: the
 * newest in the run directory, else the config's checkpoint.load (where the run
 * started from). NULL (and why) when there is none. */
static char *checkpoint_to_resume(int64_t id, const json_t *cfg, char *why, size_t whylen) {
    char *dir = layout_run_dir(id);
    char *path = ckpt_newest(dir);
    free(dir);
    if (path) return path;
    const json_t *ck = json_object_get(cfg, "checkpoint");
    const char *load = json_string_value(json_object_get(ck, "load"));
    if (load && *load) return xstrdup(load);
    json_int_t every = json_integer_value(json_object_get(ck, "every_epochs"));
    snprintf(why, whylen,
             "run %lld has no checkpoint to resume from; its config's checkpoint.every_epochs is %lld (%s)",
             (long long)id, (long long)every,
             every == 0 ? "it writes none: submit the run again with checkpoint.every_epochs of 1 or more"
                        : "it ended before its first checkpoint: submit it again (POST /runs)");
    return NULL;
}

resume_result runs_resume(int64_t id, char *why, size_t whylen) {
    run_brief b;
    int found = store_get_brief(id, &b);
    if (found < 0) return RESUME_STORE_ERROR;
    if (!found) return RESUME_NOT_FOUND;
    if (b.status != RUN_FAILED && b.status != RUN_CANCELED && b.status != RUN_STOPPED && b.status != RUN_TIMEOUT) {
        snprintf(why, whylen, "only a failed or canceled run can be resumed; run %lld is %s (a stopped or timed-out one "
                 "can be too)", (long long)id,
                 run_status_name(b.status));
        return RESUME_REFUSED;
    }
    /* The config as its trainer reads it (paths resolved), which --resume reads again:
     * the run's own file (run_files.h: never through a link, never a FIFO, bounded) */
    char *dir = layout_run_dir(id), err[1024];
    json_t *cfg = run_file_load_json_in(dir, RUN_DIR_CONFIG, RUN_FILE_SMALL_MAX, err, sizeof err);
    free(dir);
    if (!cfg) {
        snprintf(why, whylen, "run %lld cannot be resumed: its config cannot be read: %s", (long long)id, err);
        return RESUME_REFUSED;
    }
    resume_result res = RESUME_REFUSED;
    char *ckpt = NULL;
    const char *mode = json_string_value(json_object_get(cfg, "mode"));
    pool_kind pool = strcmp(b.device_kind, "gpu") == 0 ? POOL_GPU : POOL_CPU;
    ckpt_header h = {0};
    /* the gates again, on what its launcher would read back, as its owner may now */
    submit_outcome gate = {0};
    if (runs_check_resume(cfg, b.has_owner ? b.owner : NULL, b.priority, b.world_size, &gate) != SUBMIT_OK) {
        snprintf(why, whylen, "run %lld cannot be resumed: %s", (long long)id, gate.why);
        submit_outcome_free(&gate);
        res = RESUME_FORBIDDEN;
        goto out;
    }
    if (!b.command && mode && strcmp(mode, "eval") == 0) {
        snprintf(why, whylen, "run %lld is an eval run (mode eval): there is no training to continue; submit it again "
                 "(POST /runs)", (long long)id);
        goto out;
    }
    int next = b.last_attempt + 1; /* its count of attempts goes on */
    run_needs need = {.id = id, .world_size = b.world_size, .pool = pool, .command = b.command, .resume = !b.command,
                      .restart_count = next, .restarts_from = next, .owner = b.has_owner ? b.owner : NULL,
                      .priority = b.priority, .preemptible = b.preemptible, .memory_bytes = b.memory_bytes, .sweep_id = b.sweep_id};
    /* how it runs, from the config as submitted (the database's, which its account
     * cannot edit) */
    json_t *submitted = NULL;
    if (store_get_config(id, &submitted) < 0) {
        res = RESUME_STORE_ERROR;
        goto out;
    }
    run_needs_distributed(submitted ? submitted : cfg, &need);
    json_decref(submitted);
    if (!scheduler_can_place(&need, err, sizeof err)) {
        /* as at submission: what this host holds fits; a larger run goes across nodes, if they hold it */
        const char *flag = pool == POOL_GPU ? "--gpus" : "--slots";
        snprintf(why, whylen, "run %lld needs %d %s but this server now has %d (%s) and %s: serve with %s giving it "
                 "%d, add nodes (ddpd agent), or submit the run again with a world_size of at most %d", (long long)id,
                 b.world_size, pool_unit(pool), scheduler_capacity(pool), flag, err, flag, b.world_size,
                 scheduler_capacity(pool));
        goto out;
    }
    store_op op = {.kind = OP_RUN_RESUME, .run_id = id, .t = now_ms()};
    op.u.resume.from_epoch = op.u.resume.from_global_step = NO_INT;
    op.u.resume.attempt = next;
    if (!b.command) { /* a command run has no checkpoint of ddpd's: its script keeps its own */
        if (!(ckpt = checkpoint_to_resume(id, cfg, why, whylen))) goto out;
        bool readable = ckpt_header_read(layout_runs_dir(), ckpt, &h, err, sizeof err) == 0;
        /* a checkpoint within epoch 0 (a preemption's or a timeout's) holds a position too */
        bool within_first = h.next_epoch == 0 && h.next_step > 0;
        if (!readable || (h.next_epoch < 1 && !within_first) || h.global_step < 0) {
            if (readable) /* err names the file first */
                snprintf(err, sizeof err, "%s: it holds no position to continue from (next_epoch, global_step)", ckpt);
            snprintf(why, whylen, "run %lld cannot be resumed from %s; delete that file to resume from the one before "
                     "it, or submit the run again", (long long)id, err);
            goto out;
        }
        op.u.resume.from_checkpoint = xstrdup(ckpt);
        op.u.resume.from_epoch = h.next_epoch - 1;
        op.u.resume.from_global_step = h.global_step;
    }
    int64_t done = store_submit_wait(&op);
    if (done < 0) {
        res = RESUME_STORE_ERROR;
    } else if (done == 0) {
        snprintf(why, whylen, "run %lld changed meanwhile (resumed or deleted by another request); GET /runs/%lld says "
                 "how it is", (long long)id, (long long)id);
    } else {
        if (b.command)
            log_info("run %lld resumed: its command starts again at attempt %d (TORCHELASTIC_RESTART_COUNT=%d)",
                     (long long)id, next + 1, next);
        else
            log_info("run %lld resumed from %s (epoch %lld, global step %lld), at attempt %d", (long long)id, ckpt,
                     (long long)(h.next_epoch - 1), (long long)h.global_step, next + 1);
        scheduler_resume(&need);
        res = RESUME_QUEUED;
    }
out:
    ckpt_header_free(&h);
    free(ckpt);
    json_decref(cfg);
    return res;
}

/* The rank loop: load state, then for each epoch: sample, forward, backward with
 * bucketed gradient all-reduce, optimizer step, report; an epoch barrier, sharded
 * evaluation, and a checkpoint. See rank.h. */
#include "rank.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_select.h"
#include "checkpoint.h"
#include "engine.h"
#include "events.h"
#include "log.h"
#include "lr_schedule.h"
#include "progress.h"
#include "run_board.h"
#include "sampler.h"
#include "run_dir.h"

#define SMOKE_TEST_STEPS 20
#define SMOKE_TEST_EVAL 1000
#define EVAL_ROWS 512
#define HEARTBEAT_SECONDS 1.0
#define RANK_PREEMPTED 2 /* train_epoch: it stopped for a preemption, its checkpoint written */

typedef struct {
    const rank_context *x;
    const run_config *cfg;
    int rank, world;   /* world: the run's logical width (distributed.world_size) */
    int first_part, parts; /* the batch shards this rank computes (its comm's) */
    event_sink *events;
    engine *eng;
    dist_sampler sampler[COLL_MAX_PARTS]; /* one per batch shard, as rank first_part + j of `world` */
    int local_batch, epochs;
    long steps_per_epoch;
    ckpt_position pos;
    progress_bar bar;
    double last_heartbeat;
    double beat_seconds; /* the steps' time since the last heartbeat, and how many: */
    long beat_steps;     /* a heartbeat reports their mean, not one step's noise */
} rank_state;

int rank_epochs(const run_config *cfg) { return cfg->train.smoke_test ? 1 : cfg->train.epochs; }

long rank_steps_per_epoch(const run_config *cfg, size_t train_count) {
    size_t world = (size_t)cfg->distributed.world_size;
    size_t per_rank = (train_count + world - 1) / world;
    size_t local_batch = (size_t)cfg->train.batch_size / world;
    long steps = (long)((per_rank + local_batch - 1) / local_batch);
    if (cfg->train.smoke_test && steps > SMOKE_TEST_STEPS) steps = SMOKE_TEST_STEPS;
    return steps;
}

static void set_status(rank_state *s, const char *state, const char *detail) {
    event_emit(s->events, "status", json_pack("{s:s, s:s}", "state", state, "detail", detail ? detail : ""));
}

/* Records why this rank fails, for the launcher's reason and the run's events. */
static int fail(rank_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(rank_state *s, const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    run_board_set_failure(s->x->board, s->x->slot, why);
    log_msg(LOG_ERROR, "%s", why);
    if (s->events) {
        log_set_events(NULL);
        set_status(s, "failed", why);
        event_sink_close(s->events);
        s->events = NULL;
    }
    return 1;
}

/* Why the group was aborted, as ": <reason>" (nccl: the watchdog's or the GPU's;
 * across nodes: what gloo met), or "" (a peer on this host died, and the launcher
 * says which). */
static const char *abort_detail(rank_state *s, char *buf, size_t n) {
    coll_comm *c = s->x->comm;
    const char *why = c->failure ? c->failure(c) : "";
    buf[0] = '\0';
    if (why[0]) snprintf(buf, n, ": %s", why);
    return buf;
}

static int fail_aborted(rank_state *s) {
    char why[600];
    /* a device's failure (the GPU's or NCCL's) is the whole story (what failed, and
     * what to try), not an abort of a group */
    const char *device_failure = backend_device_failure(s->x->comm);
    if (device_failure[0]) return fail(s, "rank %d on %s: %s", s->rank, s->x->device, device_failure);
    return fail(s, "rank %d: the process group was aborted%s", s->rank, abort_detail(s, why, sizeof why));
}

/* Across nodes the run's checkpoints are on rank 0's host (rank 0 writes them
 * there): its ranks find and load one; the other hosts' learn from rank 0 whether
 * there is one and where it left off, and take its state (the engine's
 * sync_from_host). */
static int holds_checkpoints(const rank_state *s) { return s->x->comm->node_rank == 0; }

static void send_hello(rank_state *s) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    const char *device = s->x->device ? s->x->device : "cpu"; /* the backend's device (nccl: "cuda:N NAME") */
    json_t *hello = json_pack("{s:i, s:s, s:s, s:i, s:i, s:I, s:I}", "pid", (int)getpid(), "host", host, "device",
                              device, "world_size", s->world, "epochs", s->epochs, "steps_per_epoch",
                              (json_int_t)s->steps_per_epoch, "total_steps",
                              (json_int_t)(s->steps_per_epoch * s->epochs));
    event_emit(s->events, "hello", hello); /* the sink adds the secret on the socket only */
}

static int setup(rank_state *s) {
    const run_config *cfg = s->cfg;
    char err[512];
    s->local_batch = cfg->train.batch_size / s->world;
    engine_params p = {
        .cfg = cfg,
        .comm = s->x->comm,
        .train = s->x->train,
        .test = s->x->test,
        .max_rows = s->local_batch > EVAL_ROWS ? s->local_batch : EVAL_ROWS,
    };
    s->eng = backend_engine_create(&p, err, sizeof err);
    if (!s->eng) return fail(s, "rank %d: %s", s->rank, err);
    if (s->rank == 0) {
        char layers[1024];
        model_describe(&s->eng->shape, layers, sizeof layers);
        log_msg(LOG_INFO, "model: %s (%zu parameters)", layers, s->eng->shape.n_params);
    }
    for (int j = 0; j < s->parts && s->x->train; j++)
        if (sampler_init(&s->sampler[j], s->x->train->count, s->world, s->first_part + j, cfg->seed) != 0)
            return fail(s, "rank %d: out of memory for the sampler", s->rank);
    /* Parameters start equal on every rank: rank 0 initialises, then broadcasts. */
    if (s->eng->ops->init_params(s->eng, cfg->seed) != 0) {
        if (!s->x->device) /* (the GPU's failures say what failed themselves) */
            return fail(s, "rank %d: the process group was aborted during the initial broadcast%s", s->rank,
                        abort_detail(s, err, sizeof err));
        return fail_aborted(s);
    }
    return 0;
}

static int restore(rank_state *s, const char *path, int with_optimizer) {
    char err[1024];
    engine *e = s->eng;
    coll_comm *comm = s->x->comm;
    if (holds_checkpoints(s) && checkpoint_load(path, &e->shape, e->params, e->stats, with_optimizer ? &e->opt : NULL,
                                                &s->pos, err, sizeof err) != 0)
        return fail(s, "cannot load checkpoint: %s", err);
    if (comm->nodes > 1 && comm->broadcast(comm, &s->pos, sizeof s->pos, 0) != 0) return fail_aborted(s);
    if (e->ops->sync_from_host(e) != 0) return fail(s, "rank %d: cannot load the checkpoint's state", s->rank);
    if (s->rank == 0)
        log_msg(LOG_INFO, "loaded %s: it continues at epoch %d step %ld (global step %ld)", path, s->pos.next_epoch,
                s->pos.next_step, s->pos.global_step);
    return 0;
}

/* Which checkpoint a run starts from: in eval mode, checkpoint.load (else the run's
 * newest); a resumed train run, its own newest (else checkpoint.load, where it
 * started from); a fresh train run, checkpoint.load when set. 1 when there is one,
 * 0 when a fresh run has none, -1 when one is needed and missing (already failed). */
static int find_checkpoint(rank_state *s, char *path, size_t n) {
    char err[1024];
    const char *load = s->cfg->checkpoint.load;
    int eval = s->cfg->mode == RUN_MODE_EVAL;
    if (load[0] && (eval || !s->x->resume)) {
        snprintf(path, n, "%s", load);
        return 1;
    }
    if (!eval && !s->x->resume) return 0;
    if (checkpoint_find_latest(s->x->run_dir, path, n, err, sizeof err) == 0) return 1;
    if (load[0]) {
        snprintf(path, n, "%s", load);
        return 1;
    }
    fail(s, "%s", err);
    return -1;
}

/* Test loss and accuracy, each batch shard taking a contiguous part of the test set,
 * summed in shard order (the same bits on any number of ranks: every shard's sums
 * go to the sum over ranks beside zeros, then are added up in order). */
static int evaluate(rank_state *s, double *test_loss, double *test_acc) {
    size_t n = s->x->test->count, w = (size_t)s->world;
    if (s->cfg->train.smoke_test && n > SMOKE_TEST_EVAL) n = SMOKE_TEST_EVAL;
    size_t begin[COLL_MAX_PARTS], end[COLL_MAX_PARTS];
    double part_sums[2 * COLL_MAX_PARTS] = {0};
    for (int j = 0; j < s->parts; j++) {
        size_t part = (size_t)(s->first_part + j);
        begin[j] = n * part / w;
        end[j] = n * (part + 1) / w;
    }
    if (s->eng->ops->evaluate(s->eng, s->parts, begin, end, part_sums) != 0) return -1;
    double *all = calloc(3 * w, sizeof(double)), sums[3] = {0, 0, 0};
    if (!all) return -1;
    for (int j = 0; j < s->parts; j++) {
        double *row = all + 3 * (size_t)(s->first_part + j);
        row[0] = part_sums[2 * j];
        row[1] = part_sums[2 * j + 1];
        row[2] = (double)(end[j] - begin[j]);
    }
    int rc = s->x->comm->world_size > 1 ? s->x->comm->allreduce_sum_f64(s->x->comm, all, 3 * w) : 0;
    for (size_t k = 0; k < w; k++)
        for (int i = 0; i < 3; i++) sums[i] = k ? sums[i] + (all[3 * k + i] + 0.0) : all[i] + 0.0;
    free(all);
    if (rc != 0) return -1;
    *test_loss = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
    *test_acc = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
    return 0;
}

/* step_ms is this rank's mean step time since its previous heartbeat (null when it
 * took no step since): one step's time on a busy host is mostly noise. */
static void heartbeat(rank_state *s) {
    s->last_heartbeat = now_seconds();
    json_t *hb = json_pack("{s:I}", "global_step", (json_int_t)s->pos.global_step);
    json_object_set_new(hb, "step_ms", s->beat_steps ? json_real(s->beat_seconds / (double)s->beat_steps * 1e3) : json_null());
    s->beat_seconds = 0;
    s->beat_steps = 0;
    size_t used, total; /* the GPU's memory in use */
    if (s->eng && s->eng->ops->device_memory && s->eng->ops->device_memory(s->eng, &used, &total) == 0) {
        json_object_set_new(hb, "gpu_mem_used_bytes", json_integer((json_int_t)used));
        json_object_set_new(hb, "gpu_mem_total_bytes", json_integer((json_int_t)total));
    }
    event_emit(s->events, "heartbeat", hb);
}

/* One optimisation step; returns the loss averaged over ranks, or NAN when the
 * group was aborted (*aborted is set). */
static double train_step(rank_state *s, long step, double lr, int *aborted) {
    long first = step * s->local_batch;
    const size_t *indices[COLL_MAX_PARTS];
    int rows[COLL_MAX_PARTS];
    for (int j = 0; j < s->parts; j++) { /* every shard has as many samples */
        long left = (long)s->sampler[j].num_samples - first;
        rows[j] = left < s->local_batch ? (int)left : s->local_batch;
        indices[j] = s->sampler[j].indices + first;
    }
    double loss;
    if (s->eng->ops->step(s->eng, indices, rows, lr, s->pos.global_step, &loss) != 0) {
        *aborted = 1;
        return NAN;
    }
    return loss;
}

/* Rank 0: the run's state at s->pos into a new checkpoint (its path in path), and the
 * `checkpoint` event saying so. -1 with why in err when it could not be written. */
static int write_checkpoint(rank_state *s, int epoch, char *path, size_t pathlen, char *err, size_t errlen) {
    engine *e = s->eng;
    size_t bytes = 0;
    json_t *removed = json_array();
    if (checkpoint_save(s->x->run_dir, s->cfg, &e->shape, e->params, e->stats, &e->opt, s->pos, path, pathlen, &bytes,
                        removed, err, errlen) != 0) {
        json_decref(removed);
        return -1;
    }
    event_emit(s->events, "checkpoint",
               json_pack("{s:i, s:I, s:s, s:I, s:o}", "epoch", epoch, "global_step", (json_int_t)s->pos.global_step,
                         "path", path, "bytes", (json_int_t)bytes, "removed", removed));
    return 0;
}

/* Preempted: every rank stops after the same step (run_board.h); the position and the
 * epoch's loss so far go into a checkpoint there, which a resume continues from as if
 * the run had not stopped. RANK_PREEMPTED, or 1 when it could not be written. */
static int stop_preempted(rank_state *s, int epoch, double loss_total, long epoch_steps) {
    s->pos.epoch_loss_sum = loss_total;
    s->pos.epoch_steps = epoch_steps;
    engine *e = s->eng;
    if (e->ops->sync_to_host(e) != 0) return fail_aborted(s);
    if (s->rank == 0) {
        char detail[128];
        snprintf(detail, sizeof detail, "preempted at epoch %d step %ld (global step %ld)", epoch, s->pos.next_step,
                 s->pos.global_step);
        set_status(s, "checkpointing", detail);
        char path[2048], err[1024];
        if (write_checkpoint(s, epoch, path, sizeof path, err, sizeof err) != 0)
            return fail(s, "preempted, but cannot write its checkpoint: %s", err);
        log_msg(LOG_INFO, "%s: checkpoint %s written; stopping", detail, path);
    }
    run_board_set_preempted(s->x->board, s->x->slot);
    return RANK_PREEMPTED;
}

static int train_epoch(rank_state *s, int epoch) {
    char detail[64];
    snprintf(detail, sizeof detail, "epoch %d", epoch);
    set_status(s, "training", detail);
    for (int j = 0; j < s->parts; j++) sampler_set_epoch(&s->sampler[j], epoch);
    progress_epoch_start(&s->bar);
    /* the epoch's loss so far: a run that stopped within it (a preemption) carries it on */
    double t0 = now_seconds(), loss_total = s->pos.next_step > 0 ? s->pos.epoch_loss_sum : 0;
    long epoch_steps = s->pos.next_step > 0 ? s->pos.epoch_steps : 0;
    long steps_done = 0;
    for (long step = s->pos.next_step; step < s->steps_per_epoch; step++) {
        double ts = now_seconds();
        double lr = lr_at(s->cfg, epoch, step, s->steps_per_epoch);
        int aborted = 0;
        double loss = train_step(s, step, lr, &aborted);
        if (aborted) return fail_aborted(s);
        if (!isfinite(loss))
            return fail(s, "loss became %s at epoch %d step %ld (global step %ld)", isnan(loss) ? "NaN" : "infinite",
                        epoch, step, s->pos.global_step);
        s->pos.global_step++;
        s->pos.next_step = step + 1;
        steps_done++;
        epoch_steps++;
        loss_total += loss;
        run_board_set_position(s->x->board, s->x->slot, epoch, step, s->pos.global_step);
        double now = now_seconds();
        double samples_per_s = (double)steps_done * s->cfg->train.batch_size / (now - t0);
        if (s->rank == 0) {
            event_emit(s->events, "step",
                       json_pack("{s:i, s:I, s:I, s:f, s:f, s:f}", "epoch", epoch, "step", (json_int_t)step,
                                 "global_step", (json_int_t)s->pos.global_step, "loss", loss, "lr", lr,
                                 "samples_per_s", samples_per_s));
            progress_update(&s->bar, epoch, step, loss, lr, samples_per_s);
        }
        s->beat_seconds += now - ts;
        s->beat_steps++;
        if (now - s->last_heartbeat >= HEARTBEAT_SECONDS) heartbeat(s);
        long stop = run_board_stop_after(s->x->board, s->pos.global_step);
        if (stop && s->pos.global_step >= stop) return stop_preempted(s, epoch, loss_total, epoch_steps);
    }
    double seconds = now_seconds() - t0;
    if (s->eng->ops->step_profile) {
        char profile[512];
        s->eng->ops->step_profile(s->eng, profile, sizeof profile);
        if (profile[0]) log_msg(LOG_INFO, "epoch %d steps: %s", epoch, profile);
    }
    if (s->x->comm->barrier(s->x->comm) != 0) return fail_aborted(s);

    set_status(s, "evaluating", detail);
    double test_loss, test_acc;
    if (evaluate(s, &test_loss, &test_acc) != 0) return fail_aborted(s);
    double train_loss = epoch_steps ? loss_total / epoch_steps : 0.0;
    if (s->rank == 0) {
        event_emit(s->events, "epoch",
                   json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "epoch", epoch, "lr",
                             lr_at(s->cfg, epoch, 0, s->steps_per_epoch), "train_loss", train_loss, "test_loss",
                             test_loss, "test_acc", test_acc, "seconds", seconds, "samples_per_s",
                             seconds > 0 ? steps_done * (double)s->cfg->train.batch_size / seconds : 0.0));
        progress_epoch_end(&s->bar, epoch, train_loss, test_loss, test_acc, seconds);
        log_msg(LOG_INFO, "epoch %d: train loss %.4f, test loss %.4f, test accuracy %.4f, %.1f s", epoch, train_loss,
                test_loss, test_acc, seconds);
    }
    s->pos.next_epoch = epoch + 1;
    s->pos.next_step = 0;
    return 0;
}

static int save_checkpoint(rank_state *s, int epoch) {
    int every = s->cfg->checkpoint.every_epochs;
    int last = epoch == s->epochs - 1;
    if (every == 0 || ((epoch + 1) % every != 0 && !last)) return 0;
    engine *e = s->eng;
    if (e->ops->sync_to_host(e) != 0) return fail_aborted(s);
    if (s->rank != 0) return 0;
    set_status(s, "checkpointing", NULL);
    char path[2048], err[1024];
    if (write_checkpoint(s, epoch, path, sizeof path, err, sizeof err) != 0)
        return fail(s, "cannot write checkpoint: %s", err);
    return 0;
}

/* train.stop_after_epochs: every rank stops after the same epoch, as for a preemption,
 * where rank 0 has its checkpoint (written now unless save_checkpoint just did). */
static int stop_paused(rank_state *s, int epoch) {
    int every = s->cfg->checkpoint.every_epochs;
    if (every == 0 || (epoch + 1) % every != 0) {
        engine *e = s->eng;
        if (e->ops->sync_to_host(e) != 0) return fail_aborted(s);
        char path[2048], err[1024];
        if (s->rank == 0 && write_checkpoint(s, epoch, path, sizeof path, err, sizeof err) != 0)
            return fail(s, "stopping after epoch %d (train.stop_after_epochs), but cannot write its checkpoint: %s",
                        epoch, err);
    }
    if (s->rank == 0) log_msg(LOG_INFO, "stopped after epoch %d (train.stop_after_epochs)", epoch);
    run_board_set_paused(s->x->board, s->x->slot);
    return RANK_PREEMPTED;
}

static int run_eval_mode(rank_state *s) {
    char path[RUN_CONFIG_PATH_MAX];
    if ((holds_checkpoints(s) && find_checkpoint(s, path, sizeof path) != 1) || restore(s, path, 0) != 0) return 1;
    set_status(s, "evaluating", holds_checkpoints(s) ? path : "rank 0's checkpoint");
    double test_loss, test_acc;
    if (evaluate(s, &test_loss, &test_acc) != 0) return fail_aborted(s);
    if (s->rank == 0) {
        json_t *ev = json_pack("{s:i, s:f, s:f, s:s}", "epoch", s->pos.next_epoch - 1, "test_loss", test_loss,
                               "test_acc", test_acc, "checkpoint", path);
        json_object_set_new(ev, "lr", json_null());
        json_object_set_new(ev, "train_loss", json_null());
        event_emit(s->events, "epoch", ev);
        log_msg(LOG_INFO, "evaluated %s: test loss %.4f, test accuracy %.4f", path, test_loss, test_acc);
    }
    return 0;
}

int rank_main(const rank_context *x) {
    rank_state s = {.x = x, .cfg = x->cfg, .rank = x->rank, .world = x->cfg->distributed.world_size,
                    .first_part = x->comm->first_part, .parts = x->comm->parts};
    char path[RUN_CONFIG_PATH_MAX], err[1024], warning[1024], who[32];
    openblas_set_num_threads(x->cfg->distributed.threads_per_rank);
    snprintf(path, sizeof path, "%s/" RUN_DIR_LOG, x->run_dir);
    snprintf(who, sizeof who, "rank %d", x->rank);
    log_open(path, who);
    snprintf(path, sizeof path, "%s/" RUN_DIR_JOURNAL, x->run_dir);
    s.events = event_sink_open(x->events_target, path, x->run_id, x->rank, x->secret, err, sizeof err, warning, sizeof warning);
    if (!s.events) return fail(&s, "%s", err);
    if (warning[0] && x->rank == 0) log_msg(LOG_WARN, "%s", warning);
    log_set_events(s.events);

    s.epochs = rank_epochs(x->cfg);
    s.steps_per_epoch = x->train ? rank_steps_per_epoch(x->cfg, x->train->count) : 0;
    send_hello(&s);
    set_status(&s, "init", NULL);
    if (setup(&s) != 0) return 1;

    int rc = 0;
    if (x->cfg->mode == RUN_MODE_EVAL) {
        rc = run_eval_mode(&s);
    } else {
        int found = holds_checkpoints(&s) ? find_checkpoint(&s, path, sizeof path) : 0;
        if (found < 0) return 1;
        if (x->comm->nodes > 1 && x->comm->broadcast(x->comm, &found, sizeof found, 0) != 0) return fail_aborted(&s);
        if (found && restore(&s, path, 1) != 0) return 1;
        progress_init(&s.bar, s.epochs, s.steps_per_epoch);
        s.last_heartbeat = now_seconds();
        for (int epoch = s.pos.next_epoch; epoch < s.epochs && rc == 0; epoch++) {
            rc = train_epoch(&s, epoch);
            if (rc == 0) rc = save_checkpoint(&s, epoch);
            int pause = x->cfg->train.stop_after_epochs;
            if (rc == 0 && pause > 0 && epoch + 1 == pause && epoch + 1 < s.epochs) rc = stop_paused(&s, epoch);
        }
        if (rc == 0 || rc == RANK_PREEMPTED) heartbeat(&s);
    }
    if (rc == RANK_PREEMPTED) { /* stopped where its checkpoint is: it exits as one that is done */
        s.eng->ops->destroy(s.eng);
        set_status(&s, "preempted", NULL);
        event_sink_close(s.events);
        log_close();
        return 0;
    }
    if (rc != 0) return rc;
    s.eng->ops->destroy(s.eng);
    if (backend_comm_close(x->comm) != 0) return fail_aborted(&s);
    set_status(&s, "done", NULL);
    event_sink_close(s.events);
    log_close();
    return 0;
}

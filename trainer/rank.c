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

#include "checkpoint.h"
#include "cpu_kernels.h"
#include "events.h"
#include "grad_buckets.h"
#include "log.h"
#include "lr_schedule.h"
#include "mlp.h"
#include "optim.h"
#include "progress.h"
#include "sampler.h"

#define SMOKE_TEST_STEPS 20
#define SMOKE_TEST_EVAL 1000
#define EVAL_ROWS 512
#define HEARTBEAT_SECONDS 1.0
#define PIXEL_SCALE (1.0f / 255.0f)

typedef struct {
    const rank_context *x;
    const run_config *cfg;
    int rank, world;
    event_sink *events;
    mlp_shape shape;
    mlp_workspace ws;
    float *params, *grads;
    optimizer opt;
    grad_buckets buckets;
    dist_sampler sampler;
    uint8_t *batch_labels;
    int local_batch, epochs;
    long steps_per_epoch;
    ckpt_position pos;
    progress_bar bar;
    double last_heartbeat;
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
    run_board_set_failure(s->x->board, s->rank, why);
    log_msg(LOG_ERROR, "%s", why);
    if (s->events) {
        log_set_events(NULL);
        set_status(s, "failed", why);
        event_sink_close(s->events);
        s->events = NULL;
    }
    return 1;
}

static void send_hello(rank_state *s) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    json_t *hello = json_pack("{s:i, s:s, s:s, s:i, s:i, s:I, s:I}", "pid", (int)getpid(), "host", host, "device",
                              "cpu", "world_size", s->world, "epochs", s->epochs, "steps_per_epoch",
                              (json_int_t)s->steps_per_epoch, "total_steps",
                              (json_int_t)(s->steps_per_epoch * s->epochs));
    json_object_set_new(hello, "secret", s->x->secret ? json_string(s->x->secret) : json_null());
    event_emit(s->events, "hello", hello);
}

static int setup(rank_state *s) {
    const run_config *cfg = s->cfg;
    const idx_dataset *shape_src = s->x->train ? s->x->train : s->x->test;
    s->local_batch = cfg->train.batch_size / s->world;
    s->epochs = rank_epochs(cfg);
    s->steps_per_epoch = s->x->train ? rank_steps_per_epoch(cfg, s->x->train->count) : 0;
    mlp_shape_init(&s->shape, shape_src->rows * shape_src->cols, cfg->model.hidden, cfg->model.n_hidden,
                   shape_src->num_classes, cfg->model.activation);
    int rows = s->local_batch > EVAL_ROWS ? s->local_batch : EVAL_ROWS;
    s->params = malloc(sizeof(float) * s->shape.n_params);
    s->grads = s->x->comm->alloc(s->x->comm, sizeof(float) * s->shape.n_params);
    s->batch_labels = malloc((size_t)rows);
    if (!s->params || !s->grads || !s->batch_labels || mlp_workspace_init(&s->ws, &s->shape, rows) != 0 ||
        optimizer_init(&s->opt, cfg, s->shape.n_params) != 0)
        return fail(s, "rank %d: out of memory for a model of %zu parameters", s->rank, s->shape.n_params);
    if (s->x->train && sampler_init(&s->sampler, s->x->train->count, s->world, s->rank, cfg->seed) != 0)
        return fail(s, "rank %d: out of memory for the sampler", s->rank);
    grad_buckets_init(&s->buckets, &s->shape, cfg->distributed.bucket_mb, s->x->comm, s->grads);

    /* Parameters start equal on every rank: rank 0 initialises, then broadcasts. */
    if (s->rank == 0) mlp_init_params(&s->shape, s->params, cfg->seed);
    if (s->x->comm->broadcast(s->x->comm, s->params, sizeof(float) * s->shape.n_params, 0) != 0)
        return fail(s, "rank %d: the process group was aborted during the initial broadcast", s->rank);
    return 0;
}

static int restore(rank_state *s, const char *path, optimizer *opt) {
    char err[1024];
    if (checkpoint_load(path, &s->shape, s->params, opt, &s->pos, err, sizeof err) != 0)
        return fail(s, "cannot load checkpoint: %s", err);
    if (s->rank == 0)
        log_msg(LOG_INFO, "loaded %s (epoch %d, global step %ld)", path, s->pos.next_epoch, s->pos.global_step);
    return 0;
}

static int find_checkpoint(rank_state *s, char *path, size_t n) {
    char err[1024];
    if (s->cfg->checkpoint.load[0]) {
        snprintf(path, n, "%s", s->cfg->checkpoint.load);
        return 0;
    }
    if (checkpoint_find_latest(s->x->run_dir, path, n, err, sizeof err) != 0) return fail(s, "%s", err);
    return 0;
}

/* Test loss and accuracy, each rank taking a contiguous shard, summed in rank order. */
static int evaluate(rank_state *s, double *test_loss, double *test_acc) {
    const idx_dataset *t = s->x->test;
    size_t n = t->count;
    if (s->cfg->train.smoke_test && n > SMOKE_TEST_EVAL) n = SMOKE_TEST_EVAL;
    size_t begin = n * (size_t)s->rank / (size_t)s->world, end = n * (size_t)(s->rank + 1) / (size_t)s->world;
    size_t pixels = (size_t)t->rows * t->cols;
    double sums[3] = {0, 0, (double)(end - begin)};
    for (size_t i = begin; i < end; i += EVAL_ROWS) {
        int rows = (int)(end - i < EVAL_ROWS ? end - i : EVAL_ROWS);
        k_u8_to_f32(s->ws.act[0], t->images + i * pixels, (size_t)rows * pixels, PIXEL_SCALE);
        long correct = 0;
        mlp_evaluate(&s->ws, s->params, t->labels + i, rows, &sums[0], &correct);
        sums[1] += (double)correct;
    }
    if (s->x->comm->allreduce_sum_f64(s->x->comm, sums, 3) != 0) return -1;
    *test_loss = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
    *test_acc = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
    return 0;
}

static void load_batch(rank_state *s, long step, int rows) {
    const idx_dataset *d = s->x->train;
    size_t pixels = (size_t)d->rows * d->cols;
    const size_t *idx = s->sampler.indices + (size_t)step * (size_t)s->local_batch;
    for (int i = 0; i < rows; i++) {
        k_u8_to_f32(s->ws.act[0] + (size_t)i * pixels, d->images + idx[i] * pixels, pixels, PIXEL_SCALE);
        s->batch_labels[i] = d->labels[idx[i]];
    }
}

static void heartbeat(rank_state *s, double step_ms) {
    s->last_heartbeat = now_seconds();
    event_emit(s->events, "heartbeat",
               json_pack("{s:I, s:f}", "global_step", (json_int_t)s->pos.global_step, "step_ms", step_ms));
}

/* One optimisation step; returns the loss averaged over ranks, or NAN when the
 * group was aborted. */
static double train_step(rank_state *s, int epoch, long step, double lr) {
    long first = step * s->local_batch;
    long left = (long)s->sampler.num_samples - first;
    int rows = left < s->local_batch ? (int)left : s->local_batch;
    load_batch(s, step, rows);
    double loss_sum = 0;
    long correct = 0;
    grad_buckets_begin(&s->buckets);
    mlp_forward_backward(&s->ws, s->params, s->grads, s->batch_labels, rows, &loss_sum, &correct,
                         grad_buckets_layer_ready, &s->buckets);
    if (s->buckets.failed) return NAN;
    if (s->cfg->train.grad_clip_norm > 0) clip_grad_norm(s->grads, s->shape.n_params, s->cfg->train.grad_clip_norm);
    optimizer_step(&s->opt, s->params, s->grads, lr);
    double loss = loss_sum / rows;
    if (s->world > 1) {
        if (s->x->comm->allreduce_sum_f64(s->x->comm, &loss, 1) != 0) return NAN;
        loss /= s->world;
    }
    (void)epoch;
    return loss;
}

static int train_epoch(rank_state *s, int epoch) {
    char detail[64];
    snprintf(detail, sizeof detail, "epoch %d", epoch);
    set_status(s, "training", detail);
    sampler_set_epoch(&s->sampler, epoch);
    progress_epoch_start(&s->bar);
    double t0 = now_seconds(), loss_total = 0;
    long steps_done = 0;
    for (long step = s->pos.next_step; step < s->steps_per_epoch; step++) {
        double ts = now_seconds();
        double lr = lr_at(s->cfg, epoch, step, s->steps_per_epoch);
        double loss = train_step(s, epoch, step, lr);
        if (isnan(loss) && s->buckets.failed) return fail(s, "rank %d: the process group was aborted", s->rank);
        if (!isfinite(loss))
            return fail(s, "loss became %s at epoch %d step %ld (global step %ld)", isnan(loss) ? "NaN" : "infinite",
                        epoch, step, s->pos.global_step);
        s->pos.global_step++;
        s->pos.next_step = step + 1;
        steps_done++;
        loss_total += loss;
        run_board_set_position(s->x->board, s->rank, epoch, step, s->pos.global_step);
        double now = now_seconds();
        double samples_per_s = (double)steps_done * s->cfg->train.batch_size / (now - t0);
        if (s->rank == 0) {
            event_emit(s->events, "step",
                       json_pack("{s:i, s:I, s:I, s:f, s:f, s:f}", "epoch", epoch, "step", (json_int_t)step,
                                 "global_step", (json_int_t)s->pos.global_step, "loss", loss, "lr", lr,
                                 "samples_per_s", samples_per_s));
            progress_update(&s->bar, epoch, step, loss, lr, samples_per_s);
        }
        if (now - s->last_heartbeat >= HEARTBEAT_SECONDS) heartbeat(s, (now - ts) * 1e3);
    }
    double seconds = now_seconds() - t0;
    if (s->x->comm->barrier(s->x->comm) != 0) return fail(s, "rank %d: the process group was aborted", s->rank);

    set_status(s, "evaluating", detail);
    double test_loss, test_acc;
    if (evaluate(s, &test_loss, &test_acc) != 0) return fail(s, "rank %d: the process group was aborted", s->rank);
    double train_loss = steps_done ? loss_total / steps_done : 0.0;
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
    if (every == 0 || s->rank != 0 || ((epoch + 1) % every != 0 && !last)) return 0;
    set_status(s, "checkpointing", NULL);
    char path[2048], err[1024];
    size_t bytes = 0;
    if (checkpoint_save(s->x->run_dir, s->cfg, &s->shape, s->params, &s->opt, s->pos, path, sizeof path, &bytes, err,
                        sizeof err) != 0)
        return fail(s, "cannot write checkpoint: %s", err);
    event_emit(s->events, "checkpoint",
               json_pack("{s:i, s:I, s:s, s:I}", "epoch", epoch, "global_step", (json_int_t)s->pos.global_step,
                         "path", path, "bytes", (json_int_t)bytes));
    return 0;
}

static int run_eval_mode(rank_state *s) {
    char path[2048];
    if (find_checkpoint(s, path, sizeof path) != 0 || restore(s, path, NULL) != 0) return 1;
    set_status(s, "evaluating", path);
    double test_loss, test_acc;
    if (evaluate(s, &test_loss, &test_acc) != 0) return fail(s, "rank %d: the process group was aborted", s->rank);
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
    rank_state s = {.x = x, .cfg = x->cfg, .rank = x->rank, .world = x->cfg->distributed.world_size};
    char path[2048], err[1024], warning[1024], who[32];
    openblas_set_num_threads(x->cfg->distributed.threads_per_rank);
    snprintf(path, sizeof path, "%s/trainer.log", x->run_dir);
    snprintf(who, sizeof who, "rank %d", x->rank);
    log_open(path, who);
    snprintf(path, sizeof path, "%s/events.jsonl", x->run_dir);
    s.events = event_sink_open(x->events_target, path, x->run_id, x->rank, err, sizeof err, warning, sizeof warning);
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
        if (x->resume) {
            if (find_checkpoint(&s, path, sizeof path) != 0 || restore(&s, path, &s.opt) != 0) return 1;
        }
        progress_init(&s.bar, s.epochs, s.steps_per_epoch);
        s.last_heartbeat = now_seconds();
        for (int epoch = s.pos.next_epoch; epoch < s.epochs && rc == 0; epoch++) {
            rc = train_epoch(&s, epoch);
            if (rc == 0) rc = save_checkpoint(&s, epoch);
        }
        if (rc == 0) heartbeat(&s, 0);
    }
    if (rc != 0) return rc;
    set_status(&s, "done", NULL);
    event_sink_close(s.events);
    log_close();
    return 0;
}

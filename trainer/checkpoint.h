/* Training checkpoints in safetensors files: the model (tensors named like
 * PyTorch's, N counting the layers with parameters in forward order:
 * "layers.0.weight" [out, in] for linear, [out, in, k, k] for conv2d, batch norm's
 * weight and bias [C] and its running statistics "layers.N.running_mean" and
 * "layers.N.running_var" [C]), the optimizer state
 * ("optimizer.exp_avg.layers.0.weight", ...; none for running statistics), and the
 * position (epoch, global step, optimizer step, sampler seed) in the metadata. Written by rank 0, atomically,
 * under <run_dir>/checkpoints/epoch-NNNN.safetensors at an epoch's end, keeping the newest `keep`.
 *
 * A preempted run's checkpoint is written where it stopped, within an epoch:
 * epoch-NNNN-step-SSSSSSSSS.safetensors (NNNN the epoch in progress, S the next step in
 * it), which sorts after the end of epoch NNNN-1 and before the end of epoch NNNN, so
 * the newest is the one to go on from. It also holds the epoch's loss so far (the sum
 * of its steps' losses, exactly, and how many), so that the epoch's train_loss comes out
 * as if it had not stopped. */
#ifndef DDPD_TRAINER_CHECKPOINT_H
#define DDPD_TRAINER_CHECKPOINT_H

#include <jansson.h>
#include <stddef.h>

#include "model.h"
#include "optim.h"
#include "run_config.h"

typedef struct {
    int next_epoch;     /* the epoch to run next (epochs are numbered from 0) */
    long next_step;     /* the step within next_epoch to run next (the sampler position) */
    long global_step;   /* steps done so far */
    double epoch_loss_sum; /* within next_epoch: the sum of its steps' losses so far (0 at its start) */
    long epoch_steps;      /* and how many steps that is */
} ckpt_position;

/* Writes the checkpoint, then deletes the oldest beyond checkpoint.keep; the paths it
 * deleted are appended to `removed` (a JSON array; may be NULL), for the checkpoint
 * event, so that what the server lists is what is on disk. */
int checkpoint_save(const char *run_dir, const run_config *cfg, const model_shape *s, const float *params,
                    const float *stats, const optimizer *opt, ckpt_position pos, char *path_out, size_t path_len,
                    size_t *bytes_out, json_t *removed, char *err, size_t errlen);

/* The newest checkpoint of the run directory; -1 (and err) when there is none. */
int checkpoint_find_latest(const char *run_dir, char *path, size_t path_len, char *err, size_t errlen);

/* Loads a checkpoint into params and stats (and opt, when non-NULL), checking that
 * it was made for this model shape (and optimizer). */
int checkpoint_load(const char *path, const model_shape *s, float *params, float *stats, optimizer *opt,
                    ckpt_position *pos, char *err, size_t errlen);

#endif

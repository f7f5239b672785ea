/* Does a checkpoint fit the config that names it in checkpoint.load? Checked at
 * submission from the file's header (ckpt_header.h), so that a run that could not
 * load it is refused with the reason instead of failing once started: a ddpd
 * checkpoint, of the config's kind of model (an mlp's layer widths too), with the
 * optimizer state a train run continues (it takes the weights, the optimizer's
 * state and the position), and epochs left to train after its position. */
#ifndef DDPD_SERVER_HOST_CKPT_FIT_H
#define DDPD_SERVER_HOST_CKPT_FIT_H

#include <jansson.h>

#include "validator.h"

/* config: with its defaults filled; path: checkpoint.load resolved (absolute), a
 * checkpoint of a run directory beneath runs_dir. Adds every misfit to errs, at
 * /checkpoint/load (or /train/epochs). */
void ckpt_fit_check(const json_t *config, const char *runs_dir, const char *path, schema_errors *errs);

#endif

/* One rank of a data-parallel run: the training loop the tutorial's `main(rank)`
 * runs in each process, natively. The launcher forks one process per rank and
 * calls rank_main in it. */
#ifndef DDPD_TRAINER_RANK_H
#define DDPD_TRAINER_RANK_H

#include "collectives.h"
#include "idx.h"
#include "run_board.h"
#include "run_config.h"

typedef struct {
    const run_config *cfg;
    const char *run_dir;
    const char *events_target; /* --events (NULL: journal only) */
    const char *run_id;
    const char *secret;        /* NULL when run on its own */
    int rank;                  /* its rank in the run */
    int slot;                  /* its slot on the run board: its rank among this host's ranks */
    int resume;
    const idx_dataset *train;  /* NULL in eval mode */
    const idx_dataset *test;
    coll_comm *comm;
    run_board *board;
    const char *device;        /* the rank's device for its hello: "cpu", "cuda:0 NVIDIA H200" (NULL: "cpu") */
} rank_context;

/* Steps per epoch for this config and dataset size (the same on every rank). */
long rank_steps_per_epoch(const run_config *cfg, size_t train_count);
/* Epochs the run will do (1 for a smoke test). */
int rank_epochs(const run_config *cfg);

/* Runs the rank; returns its process exit code (0: done). */
int rank_main(const rank_context *ctx);

#endif

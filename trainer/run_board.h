/* The run board: a small shared-memory table where each rank posts where it is
 * (epoch, step) and, when it fails on purpose, why. The launcher reads it to say
 * "rank 1 exited with signal 9 (Killed) at epoch 0 step 12" when a rank dies. */
#ifndef DDPD_RUN_BOARD_H
#define DDPD_RUN_BOARD_H

#include <stdatomic.h>

typedef struct {
    atomic_int epoch;
    atomic_long step;
    atomic_long global_step;
    char failure[512]; /* written once, before the rank exits non-zero */
} rank_slot;

typedef struct {
    int world_size;
    rank_slot slot[];
} run_board;

/* Anonymous shared mapping, created by the launcher before it forks. */
run_board *run_board_create(int world_size);
void run_board_destroy(run_board *b);
void run_board_set_position(run_board *b, int rank, int epoch, long step, long global_step);
void run_board_set_failure(run_board *b, int rank, const char *why);

#endif

/* The run board: a small shared-memory table where each rank posts where it is
 * (epoch, step), how far it got (steps done, collectives entered, and when it last
 * moved) and, when it fails on purpose, why. The launcher reads it to say "rank 1
 * exited with signal 9 (Killed) at epoch 0 step 12" when a rank dies, and to name
 * the rank that stopped moving when a run hangs.
 *
 * Preemption goes through it too: the launcher, asked to stop the run for another
 * (SIGUSR1), raises `preempt`; each rank, after each step, learns the global step every
 * rank stops after (run_board_stop_after). The first rank to see the request fixes it
 * at one more than the steps it has done: no rank can have done more yet (a step ends
 * only once every rank has handed its gradients for it), so every rank reaches it and
 * none passes it, and all write-or-wait at the same position. */
#ifndef DDPD_TRAINER_RUN_BOARD_H
#define DDPD_TRAINER_RUN_BOARD_H

#include <stdatomic.h>

typedef struct {
    atomic_int epoch;
    atomic_long step;
    atomic_long global_step;
    atomic_long collectives;     /* collective calls entered */
    atomic_llong progress_ms;    /* CLOCK_MONOTONIC ms of the last step done or collective entered */
    char failure[512]; /* written once, before the rank exits non-zero */
    atomic_int preempted; /* it stopped for a preemption, after its checkpoint (rank 0: written) */
    atomic_int paused;    /* it stopped at train.stop_after_epochs, after its checkpoint (rank 0: written) */
} rank_slot;

typedef struct {
    int world_size;
    atomic_int preempt;  /* the launcher was asked to stop the run for another */
    atomic_long stop_at; /* the global step every rank stops after; 0: none yet */
    rank_slot slot[];
} run_board;

/* Anonymous shared mapping, created by the launcher before it forks. */
run_board *run_board_create(int world_size);
void run_board_destroy(run_board *b);
void run_board_set_position(run_board *b, int rank, int epoch, long step, long global_step);
void run_board_set_failure(run_board *b, int rank, const char *why);
/* A collective call is being entered (the comm_watch wrapper calls it). */
void run_board_enter_collective(run_board *b, int rank);
long long run_board_now_ms(void);

/* The launcher: stop the ranks for a preemption. */
void run_board_request_preempt(run_board *b);
/* A rank that has done `done` global steps: the global step every rank stops after
 * once a preemption is asked (fixed by the first rank to ask, at done + 1), else 0. */
long run_board_stop_after(run_board *b, long done);
/* The rank stopped for a preemption (its position saved). */
void run_board_set_preempted(run_board *b, int rank);
/* The rank stopped at train.stop_after_epochs (its checkpoint written). */
void run_board_set_paused(run_board *b, int rank);

#endif

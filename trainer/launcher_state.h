/* The launcher's state, shared by its files (launcher.h is what others use):
 * launcher.c (start-up: the config, the event sink, the backend, the end of the run),
 * launcher_attempts.c (the attempts and the restarts between them),
 * launcher_data.c (the data and the host-memory plan, before any rank starts),
 * launcher_nodes.c (this node's ranks of a run across nodes, and how they meet the
 * others: gloo, or NCCL's id), launcher_ranks.c (the shared memory, forking the
 * ranks and how each starts) and launcher_watch.c (supervising the ranks: deaths,
 * the hang watch, cancels and preemptions). */
#ifndef DDPD_TRAINER_LAUNCHER_STATE_H
#define DDPD_TRAINER_LAUNCHER_STATE_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "attempts.h"
#include "collectives.h"
#include "events.h"
#include "idx.h"
#include "model_shape.h"
#include "run_board.h"
#include "run_config.h"
#if DDPD_NCCL_BACKEND
#include "cuda/coll_nccl.h" /* nccl hook */
#endif

struct launcher_options; /* launcher.h: the files include it themselves (it includes nothing of theirs) */

typedef struct {
    pid_t pid;
    int running;
} rank_proc;

typedef struct {
    const struct launcher_options *o;
    run_config cfg;
    const char *run_id, *secret;
    event_sink *events;
    idx_dataset train, test;
    int have_train, have_test;
    coll_cpu_group *group;
    run_board *board;
    rank_proc *ranks;
    int world;              /* ranks in the run */
    int local, first;       /* ranks on this node, and the first of them (0 on one host) */
    int backend;            /* BACKEND_CPU or BACKEND_NCCL */
    int resume;             /* this attempt's ranks carry on from the newest checkpoint */
    attempt_plan plan;      /* distributed.max_restarts */
    size_t arena;           /* bytes of the ranks' shared memory */
    sigset_t mask;          /* SIGCHLD, the cancel signals and SIGUSR1, blocked and taken with sigtimedwait */
    int preempt_asked;      /* SIGUSR1 came: the ranks stop for a preemption (run_board.h) */
    sigset_t child_mask;    /* the mask before: what the ranks start with */
#if DDPD_NCCL_BACKEND
    nccl_rendezvous nccl;   /* nccl hook: made before fork, inherited by the ranks */
#endif
} launcher;

/* How one attempt of the ranks ended. */
typedef struct {
    int failed, canceled_by;
    char reason[2048];
    int failing_rank; /* the rank the reason names, else -1 */
    int status;       /* its wait status when it died (failing_rank >= 0 and not a hang) */
    int died;         /* 1: it died (status holds how); 0: the hang watch stopped it */
    char last_line[1024];
} attempt_outcome;

/* launcher.c: the run's last event, with the exit status the launcher exits with next. */
void launcher_end_run(launcher *L, const char *status, const char *reason, int exit_code);

/* launcher_attempts.c: the data, the plan, then every attempt; the exit status. */
int launcher_start_and_supervise(launcher *L);

/* launcher_data.c */
int launcher_load_data(launcher *L, char *reason, size_t n);
int launcher_check_host_memory(launcher *L, const model_shape *shape, char *why, size_t whylen);

/* launcher_nodes.c */
int launcher_plan_nodes(launcher *L);
coll_comm *launcher_join_nodes(launcher *L, coll_comm *local, int slot, char *why, size_t whylen);
#if DDPD_NCCL_BACKEND
int launcher_nccl_id_made(launcher *L, char *why, size_t whylen);
#endif

/* launcher_ranks.c */
int launcher_make_rendezvous(launcher *L, char *why, size_t whylen);
int launcher_fork_ranks(launcher *L, char *why, size_t whylen);
void launcher_signal_ranks(launcher *L, int sig);

/* launcher_watch.c */
void launcher_supervise(launcher *L, const sigset_t *mask, attempt_outcome *out);
void launcher_preempt_signal(launcher *L);
long launcher_stopped_preempted(const launcher *L);
/* Whether every rank stopped at train.stop_after_epochs. */
bool launcher_stopped_paused(const launcher *L);

#endif

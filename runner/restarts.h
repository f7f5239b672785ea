/* A command run's attempts (distributed.max_restarts, torchrun's --max-restarts),
 * in the loop both launchers share (attempts.h): each attempt is one gang (gang.h),
 * in the same working directory with the same environment and devices,
 * TORCHELASTIC_RESTART_COUNT the attempt's number, and the same MASTER_PORT unless it
 * was taken meanwhile (then another free one of --port-range, else one the kernel
 * picks). Each rank's log keeps every attempt's output, each after a line that says
 * which attempt, the program found for argv[0] and the working directory, and the attempt's `started` event says where each begins, so that the
 * readers of ranks/rank-N.log by byte offset (the server's tail, an agent's relay)
 * read on as before. */
#ifndef DDPD_RUNNER_RESTARTS_H
#define DDPD_RUNNER_RESTARTS_H

#include "attempt_signs.h"
#include "attempts.h"
#include "gang.h"

typedef struct {
    gang_params gang;     /* the gang of every attempt */
    rank_env_params *env; /* gang.env: its restart_count and master_port change from one attempt to the next */
    attempt_plan plan;
    int port_lo, port_hi; /* --port-range, where another MASTER_PORT comes from (0: the kernel's choice) */
    const char *program;  /* argv[0] as found (absolute), or as given when not found: each attempt's banner */
    /* this attempt's beginnings, for what it left (attempt_signs.h): its ranks' logs' offsets (by local rank;
     * -1: none), the journal's size, the cgroup's OOM kills */
    long long *log_from;
    long long journal_from;
    long oom_before;
    char tail[ATTEMPT_TAIL_BYTES + 1]; /* the failing rank's output, its tail */
} restart_params;

/* Runs the run's attempts: see attempts_run. */
void restarts_run(restart_params *p, attempts_outcome *out);

#endif

/* A command run's attempts (distributed.max_restarts, torchrun's --max-restarts):
 * the gang runs (gang.h); when a rank failed and restarts remain, the whole gang
 * starts again after a pause, in the same working directory with the same
 * environment and devices, TORCHELASTIC_RESTART_COUNT one higher, and the same
 * MASTER_PORT unless it was taken meanwhile (then another free one of --port-range,
 * else one the kernel picks). Every attempt's start and end is an `attempt` event
 * (attempts.h); each rank's log keeps every attempt's output, a restart's after a
 * line that says which, and the `started` event says where each begins. A cancel
 * stops it all for good, also during the pause. A node's part of a run across
 * nodes is never restarted on its own: the other nodes' ranks lost their peers,
 * and only the coordinator can start every part again. */
#ifndef DDPD_RESTARTS_H
#define DDPD_RESTARTS_H

#include "attempts.h"
#include "gang.h"

typedef struct {
    gang_params gang;       /* the gang of every attempt */
    rank_env_params *env;   /* gang.env: its restart_count and master_port change from one attempt to the next */
    attempt_plan plan;      /* the first attempt's number and distributed.max_restarts */
    int port_lo, port_hi;   /* --port-range, where another MASTER_PORT comes from (0: the kernel's choice) */
    double backoff_s;       /* the pause before a restart */
} restart_params;

/* Runs attempt after attempt until one succeeds, is canceled, fails without a
 * restart left, or a rank could not start (which another attempt would not change).
 * The result is the run's: a failure's reason says how many attempts there were. */
void restarts_run(restart_params *p, gang_result *result);

#endif

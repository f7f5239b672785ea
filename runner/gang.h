/* The gang: every rank of a command run started, then supervised together. When a
 * rank exits non-zero or by a signal, every other rank's process group gets SIGTERM,
 * then SIGKILL after a grace, and the run fails naming the first failing rank, how it
 * ended and its last words (its error file's message, else its last non-empty output
 * line). SIGTERM, SIGINT or SIGHUP to the launcher stops every rank the same way and
 * cancels the run. */
#ifndef DDPD_GANG_H
#define DDPD_GANG_H

#include <stddef.h>

#include "command_config.h"
#include "events.h"
#include "rank_env.h"

typedef enum { GANG_SUCCEEDED, GANG_FAILED, GANG_CANCELED } gang_outcome;

typedef struct {
    const command_config *cfg;
    const rank_env_params *env;
    const char *run_dir;
    const char *working_dir; /* where the ranks start */
    double grace_s;          /* between SIGTERM and SIGKILL */
    event_sink *events;      /* the launcher's own (rank -1) */
} gang_params;

typedef struct {
    gang_outcome outcome;
    int signal;        /* GANG_CANCELED: the signal that canceled the run */
    char reason[2048]; /* GANG_FAILED, GANG_CANCELED: why, for a person */
} gang_result;

/* Runs the gang to its end (every rank gone, every output read). */
void gang_run(const gang_params *p, gang_result *result);

#endif

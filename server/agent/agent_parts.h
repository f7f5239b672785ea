/* The run parts an agent runs: each one launcher (ddp-trainer or ddp-run) in its own
 * process group, started as the coordinator describes it (the run's config, its node
 * rank, secret, devices, where rank 0 is), dying with the agent (PR_SET_PDEATHSIG),
 * its run directory under the agent's state dir. Their logs are forwarded from
 * there; their exits (with the launcher's `end` from its journal) are reported once
 * every line of their logs was taken. */
#ifndef DDPD_AGENT_PARTS_H
#define DDPD_AGENT_PARTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *state_dir, *events_socket;
    const char *trainer, *runner;
    const char *advertise;        /* this node's address (the trainer's --node-addr) */
    const char *coordinator;      /* base URL: a built-in part's rendezvous is under it */
    const char *node_name;
    const char *const *data_roots;
    int n_data_roots;
    bool allow_commands;
    double grace_s;               /* SIGTERM, then SIGKILL this much later */
} agent_parts_config;

void agent_parts_init(const agent_parts_config *c);

/* The coordinator's answer: the parts this node should run. New ones start; those
 * running here and not in it are stopped. */
void agent_parts_reconcile(const json_t *wanted);
/* Stops every part (the coordinator is gone). */
void agent_parts_stop_all(const char *why);
/* Reaps exited launchers; SIGKILLs those past their grace. */
void agent_parts_tick(void);

/* The heartbeat's "parts" (what runs, what exited) and "logs" (new whole lines of
 * each part's logs, at most `budget` bytes); `streams_pending`: an exit is reported
 * once its events and logs are all delivered. */
json_t *agent_parts_reports(bool streams_pending);
json_t *agent_parts_log_batch(size_t budget);
/* The answer's "logs": what the coordinator took. */
void agent_parts_logs_acked(const json_t *acks);
/* After a heartbeat's answer: exited parts the coordinator no longer lists are forgotten. */
void agent_parts_forget_reported(const json_t *wanted);
int agent_parts_running(void);

#endif

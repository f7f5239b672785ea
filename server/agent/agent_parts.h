/* The run parts an agent runs: each one launcher (ddp-trainer or ddp-run) in its own
 * process group, started as the coordinator describes it (the run's config, its node
 * rank, secret, devices, where rank 0 is), dying with the agent (PR_SET_PDEATHSIG),
 * its run directory under the agent's state dir. Their logs are forwarded from
 * there (what a log held before its launcher started, an earlier start's, is not);
 * their exits (with the launcher's `end` from its journal) are reported once every
 * line of their logs was taken. `ddpd part` runs one part the same way (part.h). */
#ifndef DDPD_SERVER_AGENT_AGENT_PARTS_H
#define DDPD_SERVER_AGENT_AGENT_PARTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    const char *run_dir;          /* a one-run part's directory (ddpd part); NULL: state_dir/runs/ID */
    const char *visible;          /* the GPUs of every part, as CUDA_VISIBLE_DEVICES names them (a batch system's,
                                   * from its environment); NULL: those the coordinator's description lists */
} agent_parts_config;

void agent_parts_init(const agent_parts_config *c);
/* Whether this agent can run parts as other accounts (root, or CAP_SETUID and
 * CAP_SETGID): *how says why or what it lacks, *missing the capabilities a
 * non-root agent lacks to end and read its parts' files ("": none). A part whose
 * description names an account (part_wire.h) runs as that account, looked up on
 * this node, in a directory handed to it (run_account.h, as this host's runs of
 * other accounts), or is refused saying what the operator must do: never as the
 * agent's own user. */
bool agent_parts_can_switch(const char **how, const char **missing);
/* Whether a connection of uid to the event socket may speak for run `run`: the
 * account its part here runs as; else (no account) the agent's own user. */
bool agent_parts_peer_ok(int64_t run, long uid);

/* The coordinator's answer: the parts this node should run. New ones start; those
 * running here and not in it are stopped. */
void agent_parts_reconcile(const json_t *wanted);
/* Stops every part (the coordinator is gone). */
void agent_parts_stop_all(const char *why);
/* Every part's launcher was sent its SIGTERM by someone else (Slurm signals every
 * process of a job's step): only its SIGKILL after the grace is this module's. A
 * second SIGTERM would cut its ranks' grace short (a launcher takes it as "now"). */
void agent_parts_stopped_elsewhere(const char *why);
/* Reaps exited launchers; SIGKILLs those past their grace. */
void agent_parts_tick(void);

/* The heartbeat's "parts" (what runs, what exited) and "logs" (new whole lines of
 * each part's logs, at most `budget` bytes); `streams_pending`: an exit is reported
 * once its events and logs are all delivered. */
json_t *agent_parts_reports(bool streams_pending);
json_t *agent_parts_log_batch(size_t budget);
/* The answer's "logs": what the coordinator took. */
void agent_parts_logs_acked(const json_t *acks);
/* Whether every part there was has exited and been reported (none: false). */
bool agent_parts_all_reported(void);
/* How the first part's launcher ended, as a shell's $? says it (128 + the signal that
 * killed it); -1 while it runs, or when there is none. */
int agent_parts_exit_status(void);
/* After a heartbeat's answer: exited parts the coordinator no longer lists are forgotten. */
void agent_parts_forget_reported(const json_t *wanted);
int agent_parts_running(void);

#endif

/* The warm start's zygotes (docs/sweeps.md, "Trials that start fast"): for a sweep
 * whose trials name warm_start.imports, one interpreter per sweep and account
 * (reporter/python/ddpd_zygote.py) that has imported them, run as the account in a
 * cgroup of its own with the trial's limits, listening in a directory of the state
 * directory only that account (and the server) may enter. A trial that starts while
 * its zygote is ready is handed a trial zygote forked from it: the supervisor's
 * child, still root and already in the trial's cgroup, asks the zygote for one,
 * checks that what answered is the zygote's child and the account's, moves it into
 * the trial's cgroup and passes the connection to ddp-run (DDPD_WARM_FD). A trial that
 * starts while its zygote still imports waits for it (zygote_handoff.h), in its own
 * child. A zygote ends when its sweep ends or is canceled (zygotes_sweep_ended), once
 * no trial of its sweep has been live for ZYGOTE_IDLE_MS (a sweep paused that long),
 * and with the server. It is started when its sweep is submitted
 * (zygotes_sweep_submitted), else by its first trial. One that ends before it listens
 * (an import failed) is remembered: its sweep's trials start cold, and why is said in
 * the server's log once, the sweep's answer (zygotes_state_of) and each such trial's log. */
#ifndef DDPD_SERVER_EXEC_ZYGOTES_H
#define DDPD_SERVER_EXEC_ZYGOTES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "run_account.h"
#include "run_cgroup.h"
#include "zygote_handoff.h"

#define ZYGOTE_GROUP (-7)       /* the supervisor's group of a zygote's spawn (its run_id: the zygote's key) */
#define ZYGOTE_IDLE_MS 1800000 /* no trial of its sweep live this long (paused, or queued behind others): it ends */

/* The zygote code's directory (the runner's share/ddpd/reporter/python, else the source tree's). */
void zygotes_init(const char *runner);

/* A warm sweep was submitted (its first trial's config: warm_start.imports, command,
 * working_dir, env; the account and limits its trials will run with): its zygote
 * starts now, so that its first trial finds it loaded, or loading. */
void zygotes_sweep_submitted(int64_t sweep_id, const run_account *account, const json_t *config,
                             const run_cgroup_limits *limits);
/* A warm trial of `sweep_id` starts (its config as above): its zygote's socket in *out
 * (the handoff waits while it loads; one is started when there is none). "" when the
 * trial starts cold; then, when its zygote failed, why in `cold` (else ""). Counts the
 * trial live until zygotes_trial_ended. */
void zygotes_trial_starts(int64_t sweep_id, const run_account *account, const json_t *config,
                          const run_cgroup_limits *limits, warm_handle *out, char *cold, size_t coldlen);
void zygotes_trial_ended(int64_t sweep_id, long uid);
/* The zygote's pid by its key (0: its spawn not answered yet): warm_handle's resolve. */
pid_t zygotes_pid_of(int64_t key);
/* The sweep ended or was canceled: its zygotes end. */
void zygotes_sweep_ended(int64_t sweep_id);

/* The supervisor's word on a zygote's spawn (group ZYGOTE_GROUP) and exits: true when pid was a zygote. */
void zygotes_spawned(int64_t key, pid_t pid, const char *err);
bool zygotes_exited(pid_t pid);
/* Where a sweep's zygote is (ZYGOTE_NONE: it has none, or it ended with the sweep);
 * ZYGOTE_FAILED with why ("ended before it was ready: ModuleNotFoundError: ..."). */
typedef enum { ZYGOTE_NONE, ZYGOTE_LOADING, ZYGOTE_READY, ZYGOTE_FAILED } zygote_state;
zygote_state zygotes_state_of(int64_t sweep_id, char *why, size_t whylen);
/* Whether pid is a zygote (the server's child, never an orphan of a run). */
bool zygotes_has(pid_t pid);

/* Ends the zygotes idle for ZYGOTE_IDLE_MS (all of them: `all`). */
void zygotes_tick(bool all);

#endif

/* What an attempt of a command run left behind that tells its failure apart
 * (failure_class.h) and whether it made progress (restart_policy.h): the tail of a
 * rank's output this attempt (from its log), the OOM kills the run's cgroup counted
 * (the launcher runs in it: /proc/self/cgroup names it) and its memory limit, and the
 * steps and checkpoints the ranks reported in the run's journal since the attempt
 * began. Each is "not known" when its file cannot be read: never an error. */
#ifndef DDPD_RUNNER_ATTEMPT_SIGNS_H
#define DDPD_RUNNER_ATTEMPT_SIGNS_H

#include <stddef.h>

#define ATTEMPT_TAIL_BYTES (16 * 1024)

/* The last ATTEMPT_TAIL_BYTES (at most) of <run_dir>/ranks/rank-N.log past byte
 * `from` into out (NUL-terminated); "" when there is none. */
void attempt_output_tail(const char *run_dir, int rank, long long from, char *out, size_t n);

/* The OOM kills this process's memory cgroup has counted (cgroup v2's memory.events
 * oom_kill, v1's memory.oom_control), -1 when not known; its limit said into limit
 * ("256 MiB"; "" when it has none or it is not known). */
long attempt_cgroup_oom_kills(char *limit, size_t n);

/* The journal's size now: where an attempt's events begin. */
long long attempt_journal_size(const char *run_dir);

/* The highest global step a rank (rank >= 0) reported in the journal past byte
 * `from` (a step, or a reporter's metric at a step; -1: none), and whether a rank
 * reported a checkpoint there. */
void attempt_journal_progress(const char *run_dir, long long from, long long *max_step, int *checkpointed);

#endif

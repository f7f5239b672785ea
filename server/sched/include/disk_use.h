/* Each user's disk use: what its runs' directories hold, measured by walking each
 * directory by descriptors without following a link (lib/dir_usage.h), kept per run
 * (in memory, and in the store: runs.disk_bytes, for `ddpd user list` and the next
 * server), and summed per owner. Walks run on a thread of their own, never on a
 * request's, ingest's or the scheduler's (a directory may be slow to walk), at the
 * cheap moments: a checkpoint of the run (ingest's hook), its end, every few minutes
 * for the runs that are live, and at start-up for runs never measured. A request
 * reads the sums, never walks.
 *
 * The quota (ddpd user add|set NAME --max-disk-gb N): a submission of a user past
 * it is refused (disk_use_over, through the submission's gate); a run whose
 * owner is past it when one of its checkpoints has been measured is failed
 * (scheduler_fail, which main.c hands to disk_use_start: the scheduler calls this
 * module, which does not call it back), resumable from that checkpoint, its reason
 * naming the usage and the quota. A directory the walk could not finish (deeper than its limit, more
 * entries than its limit) counts as past any quota its owner has. */
#ifndef DDPD_SERVER_SCHED_INCLUDE_DISK_USE_H
#define DDPD_SERVER_SCHED_INCLUDE_DISK_USE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads what the store has measured and starts the walking thread (runs never
 * measured, and the live ones, are walked first); `fail` fails a run for good with a
 * reason (scheduler_fail), false when it is not live. 0, or -1 and why. */
int disk_use_start(bool (*fail)(int64_t id, const char *reason), char *err, size_t errlen);
void disk_use_stop(void);

/* A new run of `owner` (NULL: nobody in particular), its directory empty. */
void disk_use_run_added(int64_t id, const char *owner);
/* A checkpoint of run `id` (its file `path`) was stored (ingest's hook): it is
 * walked, and failed if its owner is past the quota. */
void disk_use_checkpoint(int64_t id, const char *path);
/* Run `id` ended: walked once more (what it left). */
void disk_use_run_ended(int64_t id);
/* Run `id` was deleted: it counts no more. */
void disk_use_run_deleted(int64_t id);

/* What `owner`'s runs hold on disk as last measured, in bytes; -1 when nothing is
 * known (no run of it measured). */
int64_t disk_use_of(const char *owner);
/* Whether `owner` is past `quota` bytes (< 0: none): true with a sentence in
 * why that names the usage, the quota and what to do. */
bool disk_use_over(const char *owner, long long quota, char *why, size_t whylen);

#endif

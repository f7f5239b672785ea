/* POST /runs/{id}/resume: a failed, canceled or stopped run goes on under the same id, its
 * count of attempts too (its launchers start with --restart-count: the attempt after
 * its last, whose ranks see TORCHELASTIC_RESTART_COUNT one higher; distributed.
 * max_restarts more may follow it). The store records the resume (with what the run
 * was and the attempt it starts) and queues the run again.
 *
 * A built-in model's run continues from its newest checkpoint on disk: the steps,
 * epochs and checkpoints it recorded past that checkpoint are dropped (the trainer
 * does them again), and its trainer starts with --resume, which continues
 * bit-identically. A command run starts its program again in the same working
 * directory, as a restart does: the script's own snapshot does the rest, and the
 * steps it reports again replace the earlier ones.
 *
 * Refused, with a sentence that says why and what to do: a run that is not there,
 * one that is active or succeeded, an eval run, a built-in run with no checkpoint to
 * continue from, and one that no longer fits this server's devices. Before any of
 * its files is read for the resume, the run passes the gates again (runs.h,
 * runs_check_resume) as its owner may now: the config its launcher would read back
 * (which the run's account may have rewritten since) naming another member's run or
 * a path outside its roots, or a priority or world size past the owner's current
 * limits, is refused (RESUME_FORBIDDEN) and nothing starts. */
#ifndef DDPD_SERVER_SCHED_INCLUDE_RUN_RESUME_H
#define DDPD_SERVER_SCHED_INCLUDE_RUN_RESUME_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    RESUME_QUEUED,      /* queued again */
    RESUME_NOT_FOUND,   /* no such run */
    RESUME_REFUSED,     /* 409: why says why */
    RESUME_FORBIDDEN,   /* 403: the gates refuse it (runs.h); why names what and whose */
    RESUME_STORE_ERROR, /* the database could not be read or written */
} resume_result;

resume_result runs_resume(int64_t id, char *why, size_t whylen);

#endif

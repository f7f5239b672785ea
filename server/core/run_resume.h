/* POST /runs/{id}/resume: a failed or canceled run of a built-in model continues from
 * its newest checkpoint on disk, under the same id. The store records the resume
 * (with what the run was) and queues the run again, dropping the steps, epochs and
 * checkpoints it recorded past that checkpoint (the trainer does them again); the
 * scheduler starts its trainer with --resume, which continues bit-identically.
 *
 * Refused, with a sentence that says why and what to do: a run that is not there,
 * one that is active or succeeded, a command run (ddpd cannot continue the user's
 * program), an eval run, one with no checkpoint to continue from, and one that no
 * longer fits this server's devices. */
#ifndef DDPD_CORE_RUN_RESUME_H
#define DDPD_CORE_RUN_RESUME_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    RESUME_QUEUED,      /* queued again */
    RESUME_NOT_FOUND,   /* no such run */
    RESUME_REFUSED,     /* 409: why says why */
    RESUME_STORE_ERROR, /* the database could not be read or written */
} resume_result;

resume_result runs_resume(int64_t id, char *why, size_t whylen);

#endif

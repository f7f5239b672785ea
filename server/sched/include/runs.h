/* What the API does to runs, top to bottom in one place: submit (the config checked
 * against the schema and against this host — devices it can never give, files it
 * will not let the trainer read — then stored, its directory and config.json
 * written, and queued), cancel, and delete (the store's rows and the directory). */
#ifndef DDPD_CORE_RUNS_H
#define DDPD_CORE_RUNS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "datapaths.h"
#include "run_status.h"
#include "validator.h"

typedef struct {
    const data_roots *data_roots; /* where configs may read data */
    const data_roots *runs_root;  /* the runs directory as a root: where checkpoint.load may point */
    const data_roots *work_roots; /* where a command run's working_dir may lie */
    bool allow_commands;          /* command runs accepted (ddpd serve --allow-commands) */
} runs_config;

void runs_init(const runs_config *c);

/* Why the server refuses even to look at `config` (403: a command run on a server
 * that does not allow them); NULL when it may. */
const char *runs_forbidden(const json_t *config);

/* What `who` may not submit though the config is valid (403): a priority over its
 * max-priority, a world size over its quota (max-devices: such a run could never
 * start), a memory limit over its max-memory-gb, any run while its runs hold more
 * than its disk quota (max-disk-gb). Each with its pointer in errs; true when there
 * is none. */
bool runs_permitted(const json_t *config, const caller *who, schema_errors *errs);

/* A parsed config (an object; defaults not yet filled), submitted by `who` (a user
 * owns its runs; the server's token and anybody own none). Returns the new run's id;
 * 0 when the config is refused (every violation in errs); RUNS_SUBMIT_FORBIDDEN when
 * it names files of runs that are not `who`'s (run_reads.h: errs holds those alone);
 * -1 when it could not be stored or set up (a sentence in err: the server's fault,
 * not the config's). */
#define RUNS_SUBMIT_FORBIDDEN (-2)
int64_t runs_submit(json_t *config, const caller *who, schema_errors *errs, char *err, size_t errlen);
/* runs_submit for a sweep's trial: the run is stored with its sweep and trial number
 * (in the same insert, so a restarted sweep finds it and never makes it twice). */
int64_t runs_submit_trial(json_t *config, const caller *who, int64_t sweep_id, int trial, schema_errors *errs, char *err,
                          size_t errlen);

typedef enum {
    RUNS_DONE,          /* canceled (queued), signaled (started), or deleted */
    RUNS_NOT_FOUND,
    RUNS_FINISHED,      /* nothing to cancel or already finished; *status says how */
    RUNS_SETTING_UP,    /* its POST is still writing its config: try again */
    RUNS_NOT_FINISHED,  /* delete: cancel it first; *status says how it is */
    RUNS_CHANGED,       /* delete: it changed meanwhile */
    RUNS_STORE_ERROR,
    RUNS_FORBIDDEN,     /* not the run's owner nor an admin: why names the owner */
} runs_result;

/* Whether `who` may change run `id` (`verb`: "cancel", "delete", "resume"): its
 * owner may, and an admin. RUNS_DONE when it may; RUNS_FORBIDDEN with why naming the
 * owner; RUNS_NOT_FOUND; RUNS_STORE_ERROR. */
runs_result runs_may_change(int64_t id, const caller *who, const char *verb, char *why, size_t whylen);

runs_result runs_cancel(int64_t id, run_status *status);
/* A stopped run's reason, rewritten (a sweep's searcher: the rung it stopped at, and
 * why); queued to the store. */
void runs_set_stopped_reason(int64_t id, const char *reason);
runs_result runs_delete(int64_t id, run_status *status);

#endif

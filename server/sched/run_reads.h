/* What a submitted run may read of other runs. The runs directory holds every run's
 * config, logs and checkpoints; a path a config names (its data files, a command
 * run's working_dir, checkpoint.load) may lead into it (checkpoint.load always does;
 * the others through a root that holds it, or a symlink a run made in its own
 * directory). Such a path must lie in a run of the submitter's own: a user reads her
 * runs' files, not another's (the shared data roots and work roots are everybody's;
 * the account a run runs as keeps it to its owner's files beyond that). An admin, the
 * server's token and anybody on a box without users may name any run. Checked on the
 * resolved (canonical) paths, at submission. */
#ifndef DDPD_SERVER_SCHED_RUN_READS_H
#define DDPD_SERVER_SCHED_RUN_READS_H

#include <jansson.h>
#include <stdbool.h>

#include "auth.h"
#include "validator.h"

/* `resolved`: the config with its paths made absolute and canonical (datapaths.h);
 * `runs_dir`: the runs directory, canonical. Each path inside a run that is not
 * `who`'s adds an error at its pointer to `errs`, naming whose it is. True when none. */
bool run_reads_own(const json_t *resolved, const char *runs_dir, const caller *who, schema_errors *errs);

#endif

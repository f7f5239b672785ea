/* The rules of a command run (a config with "command": the user's own program,
 * run once per rank with torchrun's environment) that the schema alone cannot say:
 * which fields belong to it and which to the built-in models, and which environment
 * variables ddpd owns. run_config_validate applies them; ddp-run and the server's
 * submit path read the same list of owned variables. */
#ifndef DDPD_SCHEMA_COMMAND_RUN_H
#define DDPD_SCHEMA_COMMAND_RUN_H

#include <jansson.h>
#include <stdbool.h>

#include "validator.h"

/* What a reader who is not a command run's owner (nor an admin) is shown in place of
 * each of its env values and of each argument of its command (api/run_mask.h), and of
 * a sweep's parameter values that reach them. */
#define COMMAND_RUN_HIDDEN "<hidden>"

/* Whether `doc` is a command run (it has "command"). */
bool command_run_is(const json_t *doc);

/* Before defaults are filled: the fields the user gave that do not belong to the
 * kind of run `doc` is (a built-in section beside "command", a command run's field
 * without it), and the names in "env" that are not variable names or that ddpd sets
 * itself. Each as a violation at its pointer. */
void command_run_check_given(const json_t *doc, schema_errors *errs);

/* Before defaults are filled: a command run's own defaults where they differ from a
 * built-in run's (distributed.hang_timeout_s: 0, off). */
void command_run_fill_own_defaults(json_t *doc);

/* After defaults are filled: drops what the defaults added that does not apply to
 * the kind of run (a command run keeps name, command, working_dir, env and its
 * distributed fields; a built-in run loses distributed.isolate_devices). */
void command_run_drop_foreign_defaults(json_t *doc);

/* Whether ddpd sets the variable `name` for a command run's ranks (RANK, MASTER_PORT,
 * TORCHELASTIC_*, DDPD_*, ...): then a config may not. */
bool command_run_owns_variable(const char *name);

#endif

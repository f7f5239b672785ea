/* What of a run's answer (GET /runs/{id}) only its owner and admins see: a command
 * run's environment values (API keys, passwords) and its command's arguments (a
 * token passed as --token=...). Anyone else who may read runs sees the variables'
 * names, the program (command[0]) and how many arguments it was given, each shown
 * as RUN_MASK_HIDDEN, and the answer says so in "hidden". */
#ifndef DDPD_SERVER_API_RUN_MASK_H
#define DDPD_SERVER_API_RUN_MASK_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "auth.h"
#include "command_run.h"

#define RUN_MASK_HIDDEN COMMAND_RUN_HIDDEN

/* Whether a run's answer (its JSON text) holds something to hide: env values or
 * command arguments. */
bool run_mask_needed(const char *body, size_t len);
/* Whether `who` sees all of a run owned by `owner` ("": none): its owner and admins
 * (the server's token among them). The one rule: a sweep's answer follows it too
 * (sweep_mask.h). */
bool run_mask_sees_all(const caller *who, const char *owner);
/* Hides a run config's env values and its command's arguments in place, appending
 * `at` + "/env" and `at` + "/command" to `hidden` (an array) for what it hid. True
 * when it hid anything. */
bool run_mask_config(json_t *config, json_t *hidden, const char *at);
/* Rewrites the answer *body (malloc'd, *len bytes) with the values hidden; false
 * (left as it was) when it cannot be read as JSON. */
bool run_mask_apply(char **body, size_t *len);

#endif

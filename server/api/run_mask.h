/* What of a run's answer (GET /runs/{id}) only its owner and admins see: a command
 * run's environment values (API keys, passwords) and its command's arguments (a
 * token passed as --token=...). Anyone else who may read runs sees the variables'
 * names, the program (command[0]) and how many arguments it was given, each shown
 * as RUN_MASK_HIDDEN, and the answer says so in "hidden". */
#ifndef DDPD_API_RUN_MASK_H
#define DDPD_API_RUN_MASK_H

#include <stdbool.h>
#include <stddef.h>

#include "auth.h"

#define RUN_MASK_HIDDEN "<hidden>"

/* Whether a run's answer (its JSON text) holds something to hide: env values or
 * command arguments. */
bool run_mask_needed(const char *body, size_t len);
/* Whether `who` sees all of a run owned by `owner` ("": none): its owner and admins. */
bool run_mask_sees_all(const caller *who, const char *owner);
/* Rewrites the answer *body (malloc'd, *len bytes) with the values hidden; false
 * (left as it was) when it cannot be read as JSON. */
bool run_mask_apply(char **body, size_t *len);

#endif

/* A run's attempts for a person (distributed.max_restarts, resumes, the server's own
 * restarts): the table `ddpctl show` prints, and the lines `--follow` says as
 * attempts end and start. */
#ifndef DDPD_CLIENT_ATTEMPTS_VIEW_H
#define DDPD_CLIENT_ATTEMPTS_VIEW_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/* `ddpctl show`'s attempts: a table of GET /runs/{id}'s `attempts` (each one's number,
 * start, duration, how it ended, the rank it failed on and why), printed when there is
 * more than one or restarts are allowed. */
void attempts_print(const json_t *run, FILE *out);

/* How long a run (GET /runs/{id}) has taken, every attempt counted: "7s", or
 * "1m12s over 3 attempts, the last 7s"; "—" when it never started. */
void attempts_took(const json_t *run, char *out, size_t n);

/* A live `attempt` event as one line ("attempt 1 failed: ...; attempt 2 in 1 s"), or
 * "" when it is not worth a line (the first attempt's start, a success). */
void attempts_describe_event(const json_t *ev, char *out, size_t n);

#endif

/* A duration the environment may set (DDPD_COLLECTIVE_TIMEOUT_S, DDPD_CANCEL_GRACE_S
 * and the like). Both launchers use these (the run's I/O library). */
#ifndef DDPD_TRAINER_RUN_IO_ENV_SECONDS_H
#define DDPD_TRAINER_RUN_IO_ENV_SECONDS_H

/* The positive number of seconds the variable `name` holds, else `fallback`. */
double env_seconds(const char *name, double fallback);

/* The number of seconds from lo to hi the variable `name` holds; `fallback` when it
 * is unset or empty, and when it holds anything else, which is then said on stderr
 * ("PROGRAM: NAME=VALUE is not a number of seconds (LO to HI): using FALLBACK"). */
double env_seconds_between(const char *name, double fallback, double lo, double hi, const char *program);

#endif

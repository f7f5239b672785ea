/* A duration the environment may set (DDPD_COLLECTIVE_TIMEOUT_S and the like). */
#ifndef DDPD_ENV_SECONDS_H
#define DDPD_ENV_SECONDS_H

/* The positive number of seconds the variable `name` holds, else `fallback`. */
double env_seconds(const char *name, double fallback);

#endif

/* The environment a server starts a child with: its own, less the variables whose
 * names start with a dropped prefix ("DDPD_") or that are set anew, plus those set.
 * The supervisor's launchers and an agent's parts are made the same way. */
#ifndef DDPD_LIB_CHILD_ENV_H
#define DDPD_LIB_CHILD_ENV_H

/* A NULL-terminated array (free it alone: its strings are base's and set's). */
char **child_env(char *const *base, char *const *drop, char *const *set);

#endif

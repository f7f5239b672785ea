/* The part of a run config that a command run uses (config.json as ddpd wrote it):
 * the argv, the working directory, the extra environment and the gang's shape.
 * The server has validated the whole config against the schema already; this is the
 * launcher's own check, so that a config written by hand gets the same clear
 * messages (each naming the field by its JSON pointer). */
#ifndef DDPD_RUNNER_COMMAND_CONFIG_H
#define DDPD_RUNNER_COMMAND_CONFIG_H

#include <stdio.h>

typedef struct {
    char **argv;          /* `command`, NULL-terminated */
    int argc;
    char *working_dir;    /* absolute; NULL: the run directory */
    char **env;           /* `env` as "NAME=value" strings, NULL-terminated */
    int world_size;
    int min_world_size;   /* distributed.min_world_size: the fewest ranks --ranks may start (world_size: not elastic) */
    int isolate_devices;
    int threads_per_rank;
    int max_restarts;     /* distributed.max_restarts: restarts of the whole gang after a failure */
    int exit_timeout_s;   /* distributed.exit_timeout_s: ranks still running this long after another exited 0,
                           * silent meanwhile, are stopped and the attempt succeeds; 0: never */
} command_config;

/* Reads and checks `path`. 0, or -1 after printing every problem on `errors`
 * ("  /pointer: message" lines under a heading naming the file). */
int command_config_load(const char *path, command_config *c, FILE *errors);
void command_config_free(command_config *c);

#endif

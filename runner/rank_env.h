/* Each rank's environment: the launcher's own, the config's `env`, and the torchrun
 * contract (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT, TORCHELASTIC_*, ...) plus
 * what the `ddpd` reporter needs (DDPD_EVENTS_SOCKET, DDPD_EVENTS_JOURNAL, the
 * reporter on PYTHONPATH). The variables ddpd sets are its own: a config's `env`
 * may not set them (rank_env_reserved). */
#ifndef DDPD_RUNNER_RANK_ENV_H
#define DDPD_RUNNER_RANK_ENV_H

typedef struct {
    const char *run_id;
    const char *run_dir;
    const char *events_socket;   /* NULL: no socket (the reporter stays off) */
    const char *reporter_dir;    /* NULL: not found, PYTHONPATH as inherited */
    const char *devices;         /* CUDA_VISIBLE_DEVICES as the server gave it ("" on CPU) */
    int master_port;
    int restart_count;           /* TORCHELASTIC_RESTART_COUNT: the attempt's number, from 0 */
    int max_restarts;            /* TORCHELASTIC_MAX_RESTARTS: distributed.max_restarts */
    const char *master_addr;     /* rank 0's node (NULL: 127.0.0.1, one node) */
    int world_size;
    int nodes, node_rank;        /* a run across nodes: this launcher's node part (1 and 0: one node) */
    int first_rank, local_ranks; /* the global ranks it starts: first_rank .. first_rank + local_ranks - 1 */
    int isolate_devices;
    int threads_per_rank;
    const char *working_dir;     /* PWD: where the ranks start */
    char *const *config_env;     /* "NAME=value", NULL-terminated (may be NULL) */
} rank_env_params;

/* 1 when ddpd sets `name` for every rank (a config may not). */
int rank_env_reserved(const char *name);

/* The number of entries in a CUDA_VISIBLE_DEVICES list ("" -> 0). */
int rank_env_device_count(const char *devices);

/* The environment of global rank `rank`, one of this launcher's (malloc'd "NAME=value" strings, NULL-terminated;
 * free with rank_env_free), or NULL when out of memory. */
char **rank_env_build(const rank_env_params *p, int rank);
void rank_env_free(char **env);

/* The `ddpd` Python reporter's directory: beside an installed ddp-run
 * (<exe dir>/../share/ddpd/reporter/python), else the source tree's. NULL when
 * neither exists. */
const char *rank_env_reporter_dir(void);

#endif

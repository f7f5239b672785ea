/* A run's launcher (ddp-trainer, or ddp-run for a command run) as it is started:
 * its command line and the environment it is given, built in this one place for
 * the coordinator's own parts and for an agent's, which must agree.
 *
 *   PROGRAM --config C --run-dir D --events SOCKET
 *           [--master-port P --port-range LO-HI]       a command run (a restart's other port from the range)
 *           [--stop-grace S --preempt-grace S]         a command run: its ranks' grace after SIGTERM, SIGUSR1
 *           [--nodes K --node-rank I                   a part of a run across nodes:
 *              [--master-addr A]                         a command run's rank 0's node
 *              | [--node-addr ADDR --rendezvous URL]]    a built-in run's address, and its rendezvous
 *           [--restart-count K [--restarts-from F]]    a run whose count of attempts goes on (K > 0), whose
 *                                                        restarts count from attempt F (when not K)
 *           [--resume] [--data-root DIR]...            a built-in run
 *           [--ranks N]                                an elastic run on fewer ranks than its width
 *
 * The environment is the starter's own, less its DDPD_* settings (LAUNCHER_ENV_DROP),
 * plus the run's id and secret, CUDA_VISIBLE_DEVICES and the settings a launcher
 * reads too (trainer_env.h). */
#ifndef DDPD_SERVER_HOST_LAUNCHER_ARGV_H
#define DDPD_SERVER_HOST_LAUNCHER_ARGV_H

#include <stdbool.h>
#include <stdint.h>

#include "trainer_env.h"

/* A command run's launcher is killed this long after the grace it gives its ranks (its
 * --stop-grace, --preempt-grace) has passed, so that it sees them go and closes its
 * attempt with how they ended. */
#define LAUNCHER_GRACE_MARGIN_MS 3000

/* The most --data-root options passed on. */
#define LAUNCHER_DATA_ROOTS_MAX 64

typedef struct {
    const char *program;
    const char *config, *run_dir, *events;
    bool command;              /* ddp-run's options, not ddp-trainer's */
    int master_port;           /* a command run's MASTER_PORT */
    int port_lo, port_hi;      /* a command run: the server's --port-range (0: none given) */
    bool graces;               /* a command run: pass stop_grace_s and preempt_grace_s on (else ddp-run's own) */
    int stop_grace_s;          /* seconds between SIGTERM and SIGKILL to the ranks: a cancel, a shutdown */
    int preempt_grace_s;       /* and after SIGUSR1: a preemption */
    int restart_count;         /* the first attempt's number (TORCHELASTIC_RESTART_COUNT); 0: the run's first */
    int restarts_from;         /* the attempt distributed.max_restarts counts from (<= restart_count) */
    int nodes, node_rank;      /* nodes > 0: this is node node_rank's part of a run across that many */
    const char *master_addr;   /* a command run across nodes: rank 0's node */
    const char *node_addr;     /* a built-in run across nodes: this node's address */
    const char *rendezvous;    /* a built-in run across nodes: the rendezvous URL */
    bool resume;               /* continue from the newest checkpoint */
    int ranks;                 /* an elastic run: its processes when not its world_size (--ranks); 0: world_size */
    const char *const *data_roots;
    int n_data_roots;          /* built-in runs: where the trainer may open data */
    int64_t run_id;
    const char *secret;
    const char *visible;       /* CUDA_VISIBLE_DEVICES (NULL: "") */
} launcher_spec;

typedef struct {
    const char *argv[32 + 2 * LAUNCHER_DATA_ROOTS_MAX]; /* NULL-terminated; points into the spec and below */
    char *env[4 + TRAINER_PASSED_ON_MAX];               /* "NAME=VALUE", NULL-terminated, malloc'd */
    char numbers[9][24];
} launcher_cmd;

/* The launcher's command line and the variables it is given (launcher_cmd_free
 * frees them). */
void launcher_cmd_build(const launcher_spec *s, launcher_cmd *out);
void launcher_cmd_free(launcher_cmd *c);

/* What a run's processes get from ddpd wherever they start: DDPD_RUN_ID,
 * DDPD_RUN_SECRET and the settings passed on (trainer_env.h), into env (malloc'd
 * strings, NULL-terminated; room for LAUNCHER_ENV_COMMON_MAX). Returns how many: the
 * launcher's (above, with CUDA_VISIBLE_DEVICES), and a Slurm job's (sbatch hands its
 * environment to the job's `ddpd part`s). */
#define LAUNCHER_ENV_COMMON_MAX (3 + TRAINER_PASSED_ON_MAX)
int launcher_env_common(int64_t run_id, const char *secret, char **env);

/* The prefixes of the starter's own variables a launcher does not get. */
extern char *const LAUNCHER_ENV_DROP[];

#endif

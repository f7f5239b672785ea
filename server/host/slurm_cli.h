/* What ddpd says to Slurm and reads back, as text: sbatch's command line for a run,
 * the batch script that starts one `ddpd part` per node, and squeue's and
 * scontrol's answers parsed, with what a job's state means for its run. Pure (no
 * process, no clock): tested alone (tests/unit/server/test_slurm_cli.c); the Slurm
 * executor (executor_slurm.c) runs the commands.
 *
 * Slurm 22.05 (Debian 12's): `squeue --json` ignores -j and `scontrol` has no --json,
 * so the text forms are read: `squeue -h -t all -j IDS -o %i|%T|%r|%N` while a job
 * lives (its state and pending reason), and `scontrol -o show job ID` once it has
 * ended (its ExitCode, Reason, Restarts). */
#ifndef DDPD_SERVER_HOST_SLURM_CLI_H
#define DDPD_SERVER_HOST_SLURM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A run as a job: what sbatch is told. */
typedef struct {
    int64_t run;
    int nodes;          /* --nodes: one ddpd part each */
    int ranks_per_node; /* --ntasks-per-node: the node's ranks (a task's CPUs each) */
    int cpus_per_rank;  /* --cpus-per-task: the config's distributed.threads_per_rank */
    bool gpus;          /* --gpus-per-node ranks_per_node: one GPU per rank */
    const char *partition, *account; /* NULL: Slurm's defaults */
    /* The run's sharing settings in Slurm's terms: its owner's own account (wins over
     * `account`; serve --slurm-user-account), its priority (-100..100) as a nice of
     * -100 x priority (a negative priority lowers the job among Slurm's; a positive one
     * raises it only where the site lets ddpd's Slurm user, --slurm-allow-priority: a
     * negative nice needs an operator, and sbatch's own --priority sets an absolute
     * priority, below every job's default, not a raise), and the QOS the site names
     * for preemptible runs (NULL: the run is not preemptible, or the site names none). */
    const char *owner_account;
    int priority;
    bool site_allows_priority;
    const char *preemptible_qos;
    const char *const *extra; /* the site's own sbatch options (serve --slurm-option), as given */
    int n_extra;
    /* the nodes the job must not get (--exclude): where a run restarted by
     * retry_elsewhere failed, and the nodes ddpd marks suspect (docs/failures.md) */
    const char *const *exclude;
    int n_exclude;
    const char *script; /* the batch script's path */
} slurm_job_spec;

/* serve --slurm-user-account's USER=ACCOUNT: true when it is one (a user's name and
 * an account, neither empty, no space), else why not into err. */
bool slurm_user_account_ok(const char *spec, char *err, size_t n);
/* The account `user`'s runs go under among such USER=ACCOUNT pairs (the first that
 * names them), or NULL: none (nobody in particular: NULL). */
const char *slurm_user_account(const char *const *pairs, int n_pairs, const char *user);

/* How many nodes of a partition a job that excludes exclude[0 .. n) may still get,
 * from `sinfo -h -N -o %N|%P` (a line a node and one of its partitions; the default
 * partition's name ends in '*'): of `partition`'s, or of the default partition's when
 * it is NULL or empty. Its name into part (when given). -1: sinfo lists no such
 * partition. */
int slurm_nodes_outside(const char *sinfo, const char *partition, const char *const *exclude, int n, char *part,
                        size_t part_len);
/* exclude[0 .. n) as --exclude takes them, "n1,n2" (malloc'd). */
char *slurm_node_list(const char *const *exclude, int n);

/* sbatch's argv, NULL-terminated (slurm_argv_free frees it). */
char **slurm_sbatch_argv(const slurm_job_spec *j);
void slurm_argv_free(char **argv);

/* What the batch script runs: srun, one task per node, `ddpd part` on each. */
typedef struct {
    int64_t run;
    const char *ddpd;       /* the ddpd binary on the nodes */
    const char *server_url; /* where the parts reach this server */
    const char *work_dir;   /* where the parts keep their run directories (WORK/ID/part-K) */
    int cpus_per_node;      /* --cpus-per-task of the node's one task */
    const char *const *data_roots;
    int n_data_roots;
    int port_lo, port_hi;   /* a command run: the --port-range node 0's part takes MASTER_PORT from (0: any) */
} slurm_script_spec;

/* The batch script's text (malloc'd). */
char *slurm_batch_script(const slurm_script_spec *s);

/* `s` quoted for sh (malloc'd): 'it'\''s'. */
char *slurm_sh_quote(const char *s);

/* The job id sbatch --parsable printed ("123", or "123;cluster"): into job; false
 * when there is none. */
bool slurm_parse_sbatch(const char *out, char *job, size_t n);

/* One line of squeue -o "%i|%T|%r|%N". */
typedef struct {
    char job[32];
    char state[32];   /* PENDING, RUNNING, COMPLETING, COMPLETED, CANCELLED, ... */
    char reason[128]; /* the pending reason (Resources, Priority, ...), "None" */
    char nodes[256];  /* its nodes, Slurm's hostlist ("n[1-2]"); "" while pending */
} slurm_queue_line;

/* squeue's lines into out[0 .. max); returns how many (a line that is not one is
 * skipped). */
int slurm_parse_squeue(const char *text, slurm_queue_line *out, int max);

/* scontrol -o show job ID: what is kept of it. */
typedef struct {
    char state[32], reason[128];
    int exit_code, exit_signal; /* ExitCode=code:signal, the batch script's; -1: none */
    int restarts;
    char nodes[256], batch_host[64];
} slurm_job_info;
bool slurm_parse_show_job(const char *line, slurm_job_info *out);

/* Where a job is in its life, by its state. */
typedef enum {
    SLURM_WAITING, /* pending, held, or requeued and pending again */
    SLURM_RUNNING, /* running (suspended, configuring, signaling included) */
    SLURM_ENDING,  /* completing: its processes are being stopped */
    SLURM_ENDED,   /* a final state */
    SLURM_UNKNOWN, /* a state this ddpd does not know: treated as running */
} slurm_phase;
slurm_phase slurm_state_phase(const char *state);

/* What an ended job's state means for its run. */
typedef enum {
    SLURM_END_PLAIN,    /* COMPLETED, FAILED: the parts' own ends say how it went */
    SLURM_END_CANCELED, /* CANCELLED: canceled (by scancel), unless ddpd asked */
    SLURM_END_LOST,     /* TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY: Slurm ended it */
} slurm_end_kind;
/* Its kind, and words for a person into out: "Slurm ended job 12 at its time limit
 * (TIMEOUT)". */
slurm_end_kind slurm_end_words(const char *job, const char *state, const char *reason, char *out, size_t n);

/* A pending reason for a person: "Resources (the nodes it asks for are busy)". */
void slurm_reason_words(const char *reason, char *out, size_t n);

#endif

/* ddpd's settings, as `serve` and `check` both read them: each flag, else its DDPD_*
 * environment variable, else a default that suits a laptop. One place, so the two
 * commands can never disagree about what a setting means. */
#ifndef DDPD_CMD_SETTINGS_H
#define DDPD_CMD_SETTINGS_H

#include <stdbool.h>

#define SETTINGS_MAX_ROOTS 64

typedef struct {
    const char *listen;          /* default 127.0.0.1:8080 */
    const char *state_dir;       /* as given or the default (may not exist yet) */
    const char *trainer;         /* default: the ddp-trainer beside this ddpd */
    const char *runner;          /* default: the ddp-run beside this ddpd (command runs) */
    bool allow_commands;         /* command runs accepted */
    bool show_paths;             /* answers show the server's absolute paths (else named by their roots) */
    bool rebuild_from_runs;      /* serve: a missing, empty or damaged database is rebuilt from the run directories */
    const char *port_range;      /* "LO-HI": MASTER_PORTs for command runs */
    const char *work_roots[SETTINGS_MAX_ROOTS]; /* where a command run's working_dir may lie */
    int n_work_roots;
    const char *token;           /* NULL: none (an empty value is none) */
    const char *token_file;      /* where the token was read from (--token-file, DDPD_TOKEN_FILE), or NULL */
    bool token_on_command_line;  /* --token T: every local user can read it (ps, /proc/PID/cmdline) */
    char token_error[512];       /* "": fine; else why the token cannot be used (serve refuses, check fails) */
    bool insecure;
    const char *gpus, *slots, *http_threads, *cancel_grace, *web_dir; /* NULL: defaults */
    const char *log_level, *log_file, *log_max_bytes, *log_keep;       /* NULL: defaults */
    /* connection limits (conn_limits.h); NULL: defaults */
    const char *max_connections, *max_connections_per_address, *reserved_connections, *header_timeout,
        *idle_timeout, *max_streams, *max_streams_per_address;
    /* runs across nodes: this host's name among them, the address other nodes reach
     * it at (NULL: it takes no part in runs across nodes), how long a silent node lives */
    const char *node_name, *advertise, *node_timeout;
    /* sharing: the backfill window, fair share's half-life, a preemption's grace (seconds); NULL: defaults */
    const char *backfill_window, *fairshare_half_life, *preempt_grace, *max_stop_grace;
    /* where runs execute: "local" (this host and agents) or "slurm" (every run a Slurm
     * job), and Slurm's settings */
    const char *executor;
    const char *slurm_partition, *slurm_account, *slurm_work_dir, *slurm_ddpd;
    const char *slurm_options[SETTINGS_MAX_ROOTS]; /* more sbatch options, as given */
    int n_slurm_options;
    bool slurm_gpus;             /* the Slurm nodes have GPUs: a backend "auto" asks for them */
    /* the runs' sharing settings in Slurm's: "USER=ACCOUNT" pairs (checked), whether a
     * positive priority raises the job, the QOS of preemptible runs (NULL: none) */
    const char *slurm_user_accounts[SETTINGS_MAX_ROOTS];
    int n_slurm_user_accounts;
    bool slurm_allow_priority;
    const char *slurm_preemptible_qos;
    const char *data_roots[SETTINGS_MAX_ROOTS];
    int n_data_roots;
    bool data_roots_given;       /* by flag or DDPD_DATA_ROOT (else the defaults: a missing one is skipped) */
    char *storage_[9];           /* what the above point into, freed by settings_free */
} settings;

/* argv[2..]: the options after the command. Prints usage and exits 0 for --help;
 * exits 2 with a line naming the mistake for a bad option. */
void settings_read(int argc, char **argv, settings *s);
void settings_free(settings *s);
/* The state directory: `flag` (--state-dir), else DDPD_STATE_DIR, else the default
 * ($XDG_STATE_HOME/ddpd, ~/.local/state/ddpd). malloc'd. */
char *settings_state_dir(const char *flag);

/* The usage text, for --help and mistakes. */
extern const char SETTINGS_USAGE[];

#endif

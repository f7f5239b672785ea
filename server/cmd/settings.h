/* ddpd's settings, as `serve` and `check` both read them: each flag, else its DDPD_*
 * environment variable, else a default that suits a laptop. One table (settings.c)
 * says each setting once (flag, variable, kind, bounds, default, help), so the two
 * commands and the usage can never disagree about what a setting means. */
#ifndef DDPD_SERVER_CMD_SETTINGS_H
#define DDPD_SERVER_CMD_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "opt_table.h"

typedef struct {
    const char *listen;          /* default 127.0.0.1:8080 */
    const char *state_dir;       /* as given or the default (may not exist yet) */
    opt_list data_roots;         /* as given, or the defaults */
    bool data_roots_given;       /* by flag or DDPD_DATA_ROOT (else the defaults: a missing one is skipped) */
    int slots;                   /* default: the number of cores */
    const char *gpus;            /* NULL: detect */
    const char *trainer;         /* default: the ddp-trainer beside this ddpd */
    bool rebuild_from_runs;      /* serve: a missing, empty or damaged database is rebuilt from the run directories */
    bool keep_journals;          /* finished runs' journals kept whole (else compacted: journal_compact.h) */
    bool show_paths;             /* answers show the server's absolute paths (else named by their roots) */
    bool allow_commands;         /* command runs accepted */
    opt_list work_roots;         /* where a command run's working_dir may lie */
    const char *run_user;        /* the account runs without one of their own run as; NULL: none */
    bool unsafe_commands_as_server; /* command runs without an account may run as the server's own user */
    const char *port_range;      /* "LO-HI": MASTER_PORTs for command runs */
    const char *runner;          /* default: the ddp-run beside this ddpd (command runs) */
    const char *token_file;      /* where the token was read from (--token-file, DDPD_TOKEN_FILE), or NULL */
    const char *token;           /* NULL: none (an empty value is none) */
    bool token_on_command_line;  /* --token T: every local user can read it (ps, /proc/PID/cmdline) */
    bool insecure;
    bool open_reads;             /* with users, reads need no token all the same (as before users) */
    /* runs across nodes: the address other nodes reach this host at (NULL or "": it
     * takes no part in runs across nodes), its name among them, how long a silent node lives */
    const char *advertise, *node_name;
    int node_timeout;
    /* where runs execute: "local" (this host and agents) or "slurm" (every run a Slurm
     * job), and Slurm's settings */
    const char *executor;
    const char *slurm_partition, *slurm_account;
    /* the runs' sharing settings in Slurm's: "USER=ACCOUNT" pairs (checked), whether a
     * positive priority raises the job, the QOS of preemptible runs (NULL: none) */
    opt_list slurm_user_accounts;
    bool slurm_allow_priority;
    const char *slurm_preemptible_qos;
    opt_list slurm_options;      /* more sbatch options, as given */
    const char *slurm_work_dir;  /* default /tmp/ddpd-slurm-UID */
    const char *slurm_ddpd;      /* default: this ddpd's path */
    bool slurm_gpus;             /* the Slurm nodes have GPUs: a backend "auto" asks for them */
    const char *web_dir;         /* NULL: the default */
    int http_threads;            /* default: cores, from 2 to 16 */
    int cancel_grace, backfill_window, fairshare_half_life, preempt_grace, max_stop_grace, min_runtime; /* seconds */
    int elastic_grow_interval; /* seconds */
    int time_slice;            /* seconds; 0: no time slices */
    int suspect_after;                           /* suspect nodes (suspects.h): failures that mark one */
    int exclude_node_after, exclude_node_window; /* ... failed runs that exclude it, and their window (seconds) */
    /* connection limits (conn_limits.h); OPT_UNSET: sized to the descriptors there are */
    int max_connections, reserved_connections, max_connections_per_address, header_timeout, idle_timeout,
        max_streams, max_streams_per_address;
    const char *log_level, *log_file, *log_max_bytes, *log_keep; /* NULL: defaults (server_log.h reads them) */
    /* where the runs' directories are (default <state-dir>/runs), as given or the default */
    const char *runs_dir;
    /* each run bounded: the memory a run gets per device it holds when its config asks for
     * none (GiB as given; NULL: derived, see settings_memory_per_device), the processes
     * and threads a run's part may hold (OPT_UNSET: 1024 per device, at least 4096), the
     * points stored per run, and the bytes of each of its logs (as given, and parsed) */
    const char *run_memory_per_slot;
    int max_run_processes;
    int max_points_per_run;
    const char *max_log_bytes_per_run;
    uint64_t max_log_bytes; /* parsed; 0: no cap */
    char problem[512];           /* "": fine; else the first setting that cannot be used (serve refuses, check fails) */
    opt_keep keep;               /* what the above point into, freed by settings_free */
} settings;

/* argv[2..]: the options after the command. Prints usage and exits 0 for --help;
 * exits 2 with a line naming the mistake for an unknown option or a missing value. A
 * value that cannot be used is said in s->problem. */
void settings_read(int argc, char **argv, settings *s);
void settings_free(settings *s);
/* The state directory: `flag` (--state-dir), else DDPD_STATE_DIR, else the default
 * ($XDG_STATE_HOME/ddpd, ~/.local/state/ddpd). malloc'd. */
char *settings_state_dir(const char *flag);

/* The memory a run gets per device it holds when its config asks for none, in bytes,
 * per pool ([0] a CPU slot, [1] a GPU): --run-memory-per-slot for both, else this
 * host's memory divided among its CPU slots, and among its GPUs (0: none to divide).
 * Its words for a person in `says` ("11.7 GiB a CPU slot (this host's 23.4 GiB over
 * 2 slots)"). */
void settings_memory_per_device(const settings *s, int n_gpus, int64_t out[2], char *says, size_t sayslen);

/* The usage text, for --help and mistakes. */
void settings_usage(FILE *out);

/* The table itself (the unit tests walk it). */
extern const opt_table SETTINGS_TABLE;

#endif

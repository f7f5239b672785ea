/* The run config: validation against schema/run-config.schema.json (embedded in the
 * binary), the cross-field rules the schema cannot say, and the typed struct the
 * trainer reads. The server validates submissions with the same functions. */
#ifndef DDPD_SCHEMA_RUN_CONFIG_H
#define DDPD_SCHEMA_RUN_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "validator.h"

#define RUN_CONFIG_MAX_HIDDEN 16 /* also the most hidden fully connected layers of a cnn */
#define RUN_CONFIG_MAX_CONV 8     /* convolution blocks of a cnn */
#define RUN_CONFIG_MAX_RESTARTS 100 /* distributed.max_restarts: the schema's maximum */
#define RUN_CONFIG_EXIT_TIMEOUT_S 30 /* distributed.exit_timeout_s: the schema's default */
/* Bytes for a path: the schema allows 1023 characters, and a character is at most 4
 * bytes in UTF-8, so every path the schema allows fits (as do the absolute paths
 * the server resolves them to: PATH_MAX is 4096). */
#define RUN_CONFIG_PATH_MAX 4096

typedef enum { RUN_MODE_TRAIN, RUN_MODE_EVAL } run_mode;
typedef enum { MODEL_MLP, MODEL_CNN } model_kind;
typedef enum { ACT_RELU, ACT_GELU, ACT_TANH } activation_kind;
typedef enum { BN_STATS_PER_RANK, BN_STATS_SYNC } batch_norm_stats_kind;
typedef enum { OPT_SGD, OPT_ADAM, OPT_ADAMW } optimizer_kind;
typedef enum { LR_CONSTANT, LR_STEP, LR_COSINE } lr_schedule_kind;
typedef enum { BACKEND_AUTO, BACKEND_CPU, BACKEND_NCCL } backend_kind;

/* One convolution block of a cnn: conv2d, [batch norm], activation, [max-pool], [dropout]. */
typedef struct {
    int channels, kernel, stride, padding;
    int pool;       /* max-pool window and stride; 1 = none */
    bool batch_norm;
    double dropout; /* 0 = none */
} conv_block_config;

typedef struct {
    char name[128];
    run_mode mode;
    uint64_t seed;
    int priority;     /* -100 to 100: the server's queue (the trainer does not use it) */
    bool preemptible; /* the server may preempt it */
    double max_duration_s; /* the server ends it `timeout` after this long in one start; 0: no limit */
    double min_runtime_s;  /* not preempted before it has run this long in one start; -1: the server's default */
    struct {
        double memory_gb; /* GiB its processes may use together (the server's cgroup); 0 = the server's default */
    } resources;
    struct {
        model_kind type;
        int hidden[RUN_CONFIG_MAX_HIDDEN]; /* mlp */
        int n_hidden;
        activation_kind activation;
        struct {
            conv_block_config conv[RUN_CONFIG_MAX_CONV];
            int n_conv;
            int fc[RUN_CONFIG_MAX_HIDDEN]; /* hidden fully connected widths */
            int n_fc;
            double dropout;                /* after each hidden fully connected layer */
            batch_norm_stats_kind batch_norm_stats;
        } cnn;
    } model;
    struct {
        char train_images[RUN_CONFIG_PATH_MAX], train_labels[RUN_CONFIG_PATH_MAX];
        char test_images[RUN_CONFIG_PATH_MAX], test_labels[RUN_CONFIG_PATH_MAX];
        long limit;      /* train on the first N examples; 0 = all */
        long test_limit; /* evaluate on the first N test examples; 0 = all */
    } data;
    struct {
        int epochs;
        int stop_after_epochs; /* end `stopped` after this many epochs, checkpointed; 0 = never */
        int batch_size; /* global; each rank takes batch_size / world_size */
        bool smoke_test;
        double grad_clip_norm; /* 0 = no clipping */
        struct {
            optimizer_kind type;
            double lr, momentum, weight_decay, beta1, beta2, eps;
            bool nesterov;
        } optimizer;
        struct {
            lr_schedule_kind type;
            int step_epochs;
            double gamma;
            double warmup_epochs;
            double min_lr;
        } lr_schedule;
    } train;
    struct {
        int world_size;     /* a built-in run: its logical width (batch shards), whatever ranks hold them */
        int min_world_size; /* the fewest ranks it may train on; 0 = world_size (run_config_min_ranks) */
        int nodes; /* 0 = automatic: this host when the run fits, else the fewest nodes that hold it */
        backend_kind backend;
        double gpu_memory_fraction;
        double bucket_mb;
        int threads_per_rank;
        bool allow_tf32;
        double hang_timeout_s; /* 0 = never */
        double collective_timeout_s; /* nccl: a collective or GPU wait longer than this fails the run */
        int max_restarts;      /* restarts of the whole group after a failure; 0 = none */
        int stop_grace_s;      /* a command run's ranks' grace between SIGTERM and SIGKILL; 0 = the server's */
        int exit_timeout_s;    /* a command run: ranks left running this long after one exited 0 are stopped */
    } distributed;
    struct {
        int every_epochs; /* 0 = never */
        int keep;
        char load[RUN_CONFIG_PATH_MAX]; /* mode eval: checkpoint to evaluate; "" = newest in run dir */
    } checkpoint;
} run_config;

/* The schema document (parsed once, owned by this module; never free it). */
const json_t *run_config_schema(void);
/* The schema's text, as embedded at build time. */
const char *run_config_schema_text(void);

/* Validates `doc` in place: fills defaults, checks the schema and the cross-field
 * rules, appends every violation to `errs`. Returns the number of violations. */
int run_config_validate(json_t *doc, schema_errors *errs);

/* Validates `doc` (filling defaults) and, when it is valid, fills `out`.
 * Returns 0 on success, else the number of violations (listed in `errs`). */
int run_config_from_json(json_t *doc, run_config *out, schema_errors *errs);

/* Parses a config's text (`flags`: Jansson's, e.g. JSON_REJECT_DUPLICATES). Any JSON
 * value parses, and so do strings holding "\u0000" and integers beyond 64 bits, so
 * that the schema can name the field at fault; what is not JSON at all gets one error
 * at "" ("not valid JSON: ... at line L, column C", after `source`, a file name, when
 * given). Returns the document (the caller owns it) or NULL. */
json_t *run_config_parse(const char *bytes, size_t len, size_t flags, const char *source, schema_errors *errs);

/* Reads a JSON file and does run_config_from_json. Parse errors and an unreadable
 * file are reported in `errs` too (pointer "" and a sentence naming the file). */
int run_config_load_file(const char *path, run_config *out, json_t **doc_out, schema_errors *errs);

const char *model_kind_name(model_kind m);
const char *activation_name(activation_kind a);
const char *batch_norm_stats_name(batch_norm_stats_kind s);
const char *optimizer_name(optimizer_kind o);
const char *lr_schedule_name(lr_schedule_kind s);
const char *backend_name(backend_kind b);
const char *run_mode_name(run_mode m);

#endif

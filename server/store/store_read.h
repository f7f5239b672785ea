/* Reading the run store, from any thread. Each thread gets its own SQLite
 * connection (opened on first use, closed when the thread ends), with its prepared
 * statements; in WAL mode it sees the last committed state and never waits on the
 * writer. Results come back as the API's JSON shapes. */
#ifndef DDPD_SERVER_STORE_STORE_READ_H
#define DDPD_SERVER_STORE_STORE_READ_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "run_list.h"
#include "downsample.h"
#include "op_types.h"
#include "run_status.h"

typedef struct {
    int64_t id;
    run_status status;
    int world_size;
    char device_kind[8];
    int64_t pid;  /* NO_INT if never started */
    bool command; /* a command run (ddp-run starts it), else a built-in model's (ddp-trainer) */
    int resumes;  /* how often it was resumed (POST /runs/{id}/resume): its trainer continues from a checkpoint */
    char owner[72];       /* "" : nobody in particular (has_owner false) */
    bool has_owner;
    int priority;
    bool preemptible;
    int64_t queued_at, started_at; /* unix ms; NO_INT when unknown */
    int preemptions;      /* how often it was preempted and queued again */
    bool preempting;      /* a preemption is under way (it was asked to stop) */
    int64_t preempted_by; /* the run it was last preempted for; NO_INT: none */
    int last_attempt;  /* the newest of its attempts on record; -1: none */
    int restarts_from; /* the attempt its latest resume started (0: never resumed): its restarts count from it */
    int64_t memory_bytes; /* resources.memory_gb as submitted, in bytes; 0: the server's default */
    int64_t sweep_id;     /* a sweep's trial: its sweep (its warm start's zygote is the sweep's); 0: none */
} run_brief;

typedef enum { METRIC_LOSS, METRIC_LR, METRIC_SAMPLES_PER_S, METRIC_COUNT } metric_key;
extern const char *const metric_names[METRIC_COUNT];

/* 1 found, 0 no such run, -1 database error. */
int store_get_brief(int64_t id, run_brief *out);
/* Runs not yet finished (queued, starting, running, canceling), oldest first.
 * Returns how many (*out malloc'd), or -1. */
int store_list_unfinished(run_brief **out);

/* What a restarted server needs to take a started run back (scheduler_recover): the
 * launcher's start time (NO_INT when not recorded: started by an older ddpd), the run's
 * secret ("" when not recorded), its devices (a JSON array, NULL when none; the
 * caller decrefs) and its Slurm job ("" when none). 1 found, 0 no such run, -1
 * database error. */
typedef struct {
    int64_t pid_start_time;
    char secret[80];
    json_t *devices;
    char job[64];
} run_process;
int store_get_run_process(int64_t id, run_process *out);

/* An elastic run's change of size that was under way when the server stopped: its
 * timeline's newest "resizing" entry (sched/run_life.c), when it comes after its
 * newest start and relaunch. 1 and *to (the ranks it starts again on) and *by (the
 * run a shrink made room for; 0: a grow), 0 none, -1 database error. */
int store_get_resizing(int64_t id, int *to, int64_t *by);

/* The run's config as it was submitted and checked (the database's copy, which no
 * run can edit; its directory's config.json is its account's): *out, the caller's to
 * decref (NULL when it does not parse). 1 found, 0 no such run, -1 database error. */
int store_get_config(int64_t id, json_t **out);

/* What the store holds of run `id`'s points (the rows of its steps, series and
 * epochs): where a cap on them counts from. -1 on a database error. */
int64_t store_count_points(int64_t id);
/* The points `op` would store: 1 and its series' values for an epoch or a
 * step; 0 for every other kind (what store_count_points counts). */
int64_t store_op_points(const store_op *op);

/* Each run's disk use as last measured (sched's disk use): its id, owner ("" none),
 * bytes (-1: never measured), whether it is finished. How many (*out malloc'd), or -1. */
typedef struct {
    int64_t id;
    char owner[72];
    int64_t bytes;
    bool finished;
} run_disk;
int store_list_disk(run_disk **out);

/* Fair share: each owner's decayed usage as the store kept it (owner "": nobody in
 * particular). Returns how many (the three arrays malloc'd, the names too), or -1. */
int store_list_usage(char ***owners, double **values, int64_t **as_of);

/* The median length (finished - started, ms) of the newest 15 runs of `owner` (NULL:
 * nobody in particular) named `name` that succeeded: how long its next such run is
 * expected to take (the start estimate). 0: none, or the store could not say. */
int64_t store_median_length(const char *owner, const char *name);

/* GET /runs/{id}/timeline's entries, oldest first: {t, kind, detail} of what the
 * scheduler noted (run_timeline) and its checkpoints (kind "checkpoint", detail
 * {epoch, global_step}). NULL when the store could not be read. */
json_t *store_timeline_json(int64_t id);

/* Per rank of the run, the time (unix ms) of the newest event of it the store holds:
 * what a journal replay skips up to. Returns how many (*out malloc'd), or -1. */
typedef struct {
    int rank;
    int64_t last_seen;
} rank_seen;
int store_ranks_last_seen(int64_t id, rank_seen **out);

/* A run as GET /runs/{id} shows it; NULL when there is no such run. Its config,
 * checkpoints, resumes and attempts come apart, in *raw_members (malloc'd): the JSON
 * text of the members "config" (as stored: it never changes after submission),
 * "checkpoints", "resumes", "restart_count", "attempts" (the newest 100, oldest
 * first) and "attempts_omitted" (how many older ones are not listed), built by
 * SQLite, to be written as they are, not decoded and encoded again. */
json_t *store_run_json(int64_t id, char **raw_members);
/* Newest first, at most `limit` of the runs that pass f (run_list.h: which, through
 * which index). Returns {"runs": [...]} and sets *next_before to the cursor for the
 * next page (0 when this is the last page). */
json_t *store_runs_page(const run_filter *f, int limit, int64_t *next_before);

/* The steps a series holds after `after` (NO_INT: all): its first and last step.
 * name NULL: the steps table's (loss, lr, samples_per_s); else the named series a
 * command run reported. Returns 0 when there are none, 1 when there are, -1 on error. */
int store_series_range(int64_t id, const char *name, int64_t after, int64_t *first, int64_t *last);
/* This thread's statement of `sql` in slot `slot` (0 .. STORE_READ_EXTRA - 1, one SQL
 * per slot: the caller's own numbering), on its reader connection, reset; NULL on
 * error. For the store's other readers (series_read.c). */
#define STORE_READ_EXTRA 16
sqlite3_stmt *store_read_extra(int slot, const char *sql);
/* The i-th of this file's statements that read the steps (step_rows), NULL past the
 * last: for the test that holds their plans to one range of the key. */
const char *store_read_steps_sql(int i);
/* Feeds the series' points after `after`, in step order, to the downsampler: the
 * steps table's `key` when name is NULL, else the named series. */
int store_series_scan(int64_t id, metric_key key, const char *name, int64_t after, downsampler *d);
/* The names of a run's series: loss, lr, samples_per_s (for a command run only once
 * a step has one: no series of nulls), then those it reported. */
json_t *store_series_keys(int64_t id, bool command);

/* Where attempt `attempt`'s output of rank `rank` is in ranks/rank-RANK.log: from
 * *begin to *end (-1: the end of the file, it is the newest there is). 1 found; 0 the
 * run has no such attempt (*newest: its newest attempt, -1 when none); 2 the attempt
 * has no offset for that rank (its launcher could not write the log, or its start was
 * never heard); -1 a database error. */
int store_attempt_span(int64_t id, int64_t attempt, int rank, int64_t *begin, int64_t *end, int64_t *newest);

json_t *store_epochs_json(int64_t id);
/* Runs per status, counts[RUN_STATUS_COUNT]. 0, or -1 on a database error. */
int store_count_by_status(int64_t counts[RUN_STATUS_COUNT]);
json_t *store_ranks_json(int64_t id);

/* GET /audit: the audit log's entries (audit.h), oldest first, after entry `after_id`
 * (0: from the first), at most `limit`: those of `actor`, about `target`, since
 * `since_ms` (NULL, NULL, NO_INT: any); `viewer` non-NULL: only the entries it made
 * or that are about it or its runs (a user's read; NULL: an admin's). Returns
 * {"entries": [...], "next_after": ID or null} (*next_after: 0 on the last page), or
 * NULL on a database error. */
json_t *store_audit_json(const char *actor, const char *target, int64_t since_ms, int64_t after_id,
                         const char *viewer, int limit, int64_t *next_after);

/* GET /usage (usage_ledger.h): device seconds by phase between two UTC days ("YYYY-MM-DD",
 * both included; NULL: no bound), by "user", "run" or "day" (each day's users): {by,
 * groups: [{user, [run, lost_steps | day], phases: {startup, productive, checkpoint,
 * lost, idle, unknown, queue}, held_device_s, goodput}], box: {the same for all}}.
 * NULL on a database error. */
json_t *store_usage_json(const char *from_day, const char *to_day, const char *by);

/* Closes this thread's connection now (also done at thread exit). */
void store_read_release(void);

#endif

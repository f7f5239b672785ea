/* Every gate a run passes, and submitting, canceling and deleting runs: see runs.h. */
#include "runs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "base.h"
#include "ckpt_fit.h"
#include "command_run.h"
#include "run_config.h"
#include "run_as.h"
#include "run_dir.h"
#include "run_files.h"
#include "run_fit.h"
#include "run_reads.h"
#include "run_limits.h"
#include "disk_use.h"
#include "scheduler.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"
#include "users.h"

static runs_config R;

void runs_init(const runs_config *c) { R = *c; }

/* Why the server refuses even to look at `config` (a command run on a server that does
 * not allow them); NULL when it may. */
static const char *runs_forbidden(const json_t *config) {
    if (command_run_is(config) && !R.allow_commands)
        return "command runs are off on this server: they run the user's program as the server's user. "
               "An operator turns them on with ddpd serve --allow-commands (DDPD_ALLOW_COMMANDS=1)";
    return NULL;
}

/* An error the schema found in /distributed already: placing it would only say it again. */
static bool distributed_is_wrong(const schema_errors *errs) {
    for (size_t i = 0; i < errs->count; i++)
        if (strncmp(errs->items[i].pointer, "/distributed", 12) == 0) return true;
    return false;
}

/* What the run needs of the scheduler (its pool, its world size, its nodes), and
 * whether it can ever be placed: on this host, or across the nodes there are. Decided
 * here once; the scheduler is handed the result. */
static bool placement(const json_t *config, run_needs *need, schema_errors *errs) {
    if (distributed_is_wrong(errs)) return false;
    const json_t *dist = json_object_get(config, "distributed");
    const json_t *ws = json_object_get(dist, "world_size");
    const char *backend = json_string_value(json_object_get(dist, "backend"));
    if (!backend) backend = "auto";
    bool slurm_gpus = false, batch = scheduler_batch(&slurm_gpus);
    bool have_gpus = batch ? slurm_gpus : scheduler_capacity(POOL_GPU) > 0;
    if (strcmp(backend, "nccl") == 0 && !have_gpus && !batch) {
        schema_errors_add(errs, "/distributed/backend",
                          "\"nccl\" needs GPUs and this server manages none: use \"cpu\" or \"auto\"");
        return false;
    }
    /* on Slurm, "nccl" asks Slurm for GPUs whatever this host has */
    need->pool = strcmp(backend, "cpu") == 0 ? POOL_CPU : strcmp(backend, "nccl") == 0 ? POOL_GPU
                                                         : have_gpus ? POOL_GPU : POOL_CPU;
    if (!json_is_integer(ws) || json_integer_value(ws) < 1) return false; /* the schema says why */
    json_int_t n = json_integer_value(ws);
    need->world_size = (int)n;
    need->command = command_run_is(config);
    run_needs_distributed(config, need);
    char why[1024];
    if (scheduler_can_place(need, why, sizeof why)) return true;
    if (need->nodes_wanted > 1) {
        schema_errors_add(errs, "/distributed/nodes", "%s", why);
    } else { /* no node to share it with: the message of a host alone */
        int cap = scheduler_capacity(need->pool);
        schema_errors_add(errs, "/distributed/world_size",
                          "needs %lld %s but this server has %d (%s): use a world_size of at most %d, or add "
                          "nodes (ddpd agent); %s",
                          (long long)n, pool_unit(need->pool), cap, need->pool == POOL_GPU ? "--gpus" : "--slots",
                          cap, why);
    }
    return false;
}

/* The run's directory made (one left by a database that was reset is kept, out of
 * the way) and config.json written in it through a fresh file: the trainer never
 * reads half of one (run_files.h). Not flushed: a submission's one durable write is
 * its commit, and the database row is the config's durable copy; a power cut that
 * takes the file (missing, empty, torn) leaves the row, from which the run's start
 * makes it again (runs_config_mend). A crash of the server loses nothing of it. */
static int make_run_dir(int64_t id, const json_t *config, char *err, size_t errlen) {
    char *path = layout_run_dir(id);
    run_dir d;
    int rc = run_dir_make(path, err, errlen) == 0 && run_dir_open(&d, path, err, errlen) == 0 ? 0 : -1;
    if (rc == 0) {
        rc = run_file_write_json_unflushed(&d, RUN_DIR_CONFIG, config, err, errlen);
        run_dir_close(&d);
    }
    free(path);
    return rc;
}

/* The config's paths as the trainer reads them, into for_trainer (errs: what does not
 * resolve): its data files beneath the data roots; a command run's working_dir beneath
 * a work root ("" is its own run directory); checkpoint.load, a checkpoint of an
 * earlier run ("12/checkpoints/..."), never an arbitrary file ("" means the newest in
 * its own run directory). Returns errs' total before checkpoint.load's. */
static size_t resolve_paths(const json_t *config, json_t *for_trainer, schema_errors *errs) {
    datapaths_resolve_config(R.data_roots, config, for_trainer, errs);
    const char *wd = json_string_value(json_object_get(config, "working_dir"));
    if (command_run_is(config) && wd && *wd)
        datapaths_resolve_dir(R.work_roots, "work roots", config, for_trainer, "/working_dir", errs);
    size_t before_load = schema_errors_total(errs);
    const char *load = json_string_value(json_object_get(json_object_get(config, "checkpoint"), "load"));
    if (load && *load)
        datapaths_resolve_field(R.runs_root, "run directories", config, for_trainer, "/checkpoint/load", errs);
    return before_load;
}

/* Whether the config.json in the run directory `path` loads as a JSON object (1); 0
 * when it is missing, empty or torn; 2 when the directory is missing; -1 when it
 * cannot be opened for another reason. */
static int config_loads(const char *path) {
    run_dir d;
    char why[512];
    if (run_dir_open(&d, path, why, sizeof why) != 0) return errno == ENOENT ? 2 : -1;
    json_t *doc = run_file_load_json(&d, RUN_DIR_CONFIG, RUN_FILE_SMALL_MAX, why, sizeof why);
    run_dir_close(&d);
    bool ok = json_is_object(doc);
    json_decref(doc);
    return ok ? 1 : 0;
}

int runs_config_mend(int64_t id, char *err, size_t errlen) {
    char *path = layout_run_dir(id);
    int state = config_loads(path);
    if (state == 1 || state == -1) { /* there (the usual case), or its directory cannot be opened: the start says why */
        free(path);
        return 0;
    }
    /* missing, empty or torn (a power cut after its unflushed write): made again from
     * the database row, its paths resolved as its submission resolved them */
    json_t *config = NULL;
    int rc = -1;
    if (store_get_config(id, &config) != 1 || !json_is_object(config)) {
        snprintf(err, errlen, "its config.json is missing or unreadable and the database holds no config for it "
                 "either: submit it again");
    } else {
        schema_errors errs = {0};
        json_t *for_trainer = json_deep_copy(config);
        resolve_paths(config, for_trainer, &errs);
        run_dir d;
        char why[768];
        if (errs.count) {
            snprintf(err, errlen, "its config.json was missing or torn (the server or its host stopped right after "
                     "its submission), and its config from the database no longer resolves: %s: %s; restore that path, "
                     "or submit the run again with one that resolves",
                     errs.items[0].pointer, errs.items[0].message);
        } else if ((state == 2 && run_dir_make(path, why, sizeof why) != 0) || run_dir_open(&d, path, why, sizeof why) != 0) {
            snprintf(err, errlen, "its config.json was missing and its directory cannot be made: %s; free space or "
                     "mend the permissions of the state directory, then submit the run again", why);
        } else {
            rc = run_file_write_json(&d, RUN_DIR_CONFIG, for_trainer, why, sizeof why); /* flushed: a rare write */
            run_dir_close(&d);
            if (rc != 0) {
                snprintf(err, errlen, "its config.json was missing or torn and cannot be written again: %s; free "
                         "space or mend the permissions of the state directory, then submit the run again", why);
            } else {
                log_warn("run %lld: its config.json was missing or torn (the server or its host stopped right after "
                         "its submission): written again from the database", (long long)id);
            }
        }
        json_decref(for_trainer);
        schema_errors_free(&errs);
    }
    json_decref(config);
    free(path);
    return rc;
}

/* The caller's words for what it is: "alice", "the server's token". */
static const char *who_words(const caller *who) {
    return who->kind == CALLER_USER ? who->name : who->kind == CALLER_ADMIN_TOKEN ? "the server's token" : "anybody";
}

/* What `who` may not submit though the config may be valid: a priority over its
 * max-priority, a world size over its quota (max-devices: such a run could never
 * start), a run it has no account to run as. Each with its pointer in errs; true when
 * there is none. Any JSON number, as the validator reads it: 100.0 and 1e2 are the
 * integer 100 to it (and become it), so the limits are checked on the value, not on
 * how it is written. */
static bool runs_permitted(const json_t *config, const caller *who, schema_errors *errs) {
    size_t before = schema_errors_total(errs);
    /* a config without one has the schema's default, 0, which a limit below 0 refuses */
    const json_t *p = json_object_get(config, "priority");
    double priority = json_is_number(p) ? json_number_value(p) : 0;
    if (!who->admin && (json_is_number(p) || !p) && priority > who->max_priority)
        schema_errors_add(errs, "/priority",
                          "must be at most %d for %s (the highest priority this user may give a run: ddpd user "
                          "add|set --max-priority; an admin may give any) (got %g%s)",
                          who->max_priority, who_words(who), priority, p ? "" : ", the default");
    const json_t *ws = json_object_get(json_object_get(config, "distributed"), "world_size");
    if (who->max_devices >= 0 && json_is_number(ws) && json_number_value(ws) > who->max_devices)
        schema_errors_add(errs, "/distributed/world_size",
                          "needs %g devices but %s's quota is %d (ddpd user add --max-devices): the run could never "
                          "start; use a world_size of at most %d, or ask an admin for a larger quota",
                          json_number_value(ws), who_words(who), who->max_devices, who->max_devices);
    /* whom its processes would run as (run_as.h): never the server where that hands it the server */
    run_account account;
    char why[1024];
    if (run_as_resolve(who->kind == CALLER_USER ? who->name : NULL, command_run_is(config), &account, why,
                       sizeof why) == RUN_AS_REFUSED)
        schema_errors_add(errs, command_run_is(config) ? "/command" : "", "%s", why);
    run_limits_permitted(config, who, errs); /* its memory, its owner's disk (run_limits.h) */
    return schema_errors_total(errs) == before;
}

runs_result runs_may_change(int64_t id, const caller *who, const char *verb, char *why, size_t whylen) {
    run_brief b;
    int found = store_get_brief(id, &b);
    if (found < 0) return RUNS_STORE_ERROR;
    if (!found) return RUNS_NOT_FOUND;
    if (who->admin || (who->kind == CALLER_USER && b.has_owner && strcmp(b.owner, who->name) == 0)) return RUNS_DONE;
    if (b.has_owner)
        snprintf(why, whylen, "run %lld is %s's: only %s or an admin may %s it (this request is %s's)", (long long)id,
                 b.owner, b.owner, verb, who_words(who));
    else
        snprintf(why, whylen, "run %lld has no owner (it was submitted before this server had users, or with its own "
                 "token): only an admin may %s it (this request is %s's)", (long long)id, verb, who_words(who));
    return RUNS_FORBIDDEN;
}

void submit_outcome_free(submit_outcome *o) { schema_errors_free(&o->errs); }

int submit_http_status(submit_result r) {
    switch (r) {
    case SUBMIT_OK: return 201;
    case SUBMIT_INVALID: return 400;
    case SUBMIT_FORBIDDEN:
    case SUBMIT_NOT_PERMITTED: return 403;
    case SUBMIT_UNAVAILABLE: return 503;
    default: return 500;
    }
}

/* Ends a gate with result r, its sentence the first problem in out->errs: "bob may not
 * VERB: POINTER: ..." where it is the submitter's to mend, "the run config
 * is invalid: ..." where it is the config's. */
static submit_result refuse(submit_outcome *out, submit_result r, const caller *who, const char *verb) {
    const schema_error *e = out->errs.count ? &out->errs.items[0] : NULL;
    char first[1280];
    if (e && e->pointer[0]) snprintf(first, sizeof first, "%s: %s", e->pointer, e->message);
    else snprintf(first, sizeof first, "%s", e ? e->message : "refused");
    if (r == SUBMIT_INVALID) snprintf(out->why, sizeof out->why, "the run config is invalid: %s", first);
    else snprintf(out->why, sizeof out->why, "%s may not %s: %s", who_words(who), verb, first);
    return out->result = r;
}

/* Every gate (runs.h), in order; on SUBMIT_OK *resolved is the config as its trainer
 * reads it (paths made absolute) and *need what it needs of the scheduler. */
static submit_result gate(json_t *config, const caller *who, json_t **resolved, run_needs *need, submit_outcome *out) {
    schema_errors *errs = &out->errs;
    *resolved = NULL;
    /* 1. what the server forbids whoever asks */
    const char *forbidden = runs_forbidden(config);
    if (forbidden) {
        schema_errors_add(errs, "/command", "%s", forbidden);
        snprintf(out->why, sizeof out->why, "%s", forbidden);
        return out->result = SUBMIT_FORBIDDEN;
    }
    /* 2. what its owner may */
    if (!runs_permitted(config, who, errs)) return refuse(out, SUBMIT_NOT_PERMITTED, who, "submit this run");
    /* 3. every violation at once: the schema's (defaults filled in), then this host's */
    run_config_validate(config, errs);
    json_t *for_trainer = json_deep_copy(config);
    bool placed = placement(config, need, errs);
    bool command = command_run_is(config);
    size_t before_load = resolve_paths(config, for_trainer, errs);
    const char *load = json_string_value(json_object_get(json_object_get(config, "checkpoint"), "load"));
    /* what it names of other runs must be the submitter's (run_reads.h): said before
     * anything of such a file is (a checkpoint's shapes are its owner's to know) */
    schema_errors denied = {0};
    if (R.runs_root->n && !run_reads_own(for_trainer, R.runs_root->roots[0], who, &denied)) {
        json_decref(for_trainer);
        schema_errors_free(errs);
        *errs = denied;
        return refuse(out, SUBMIT_FORBIDDEN, who, "submit this run");
    }
    /* 4. the checkpoint's fit; the model and the host-memory plan, by the trainer's code
     * (run_fit.h); on Slurm the model only: its nodes' memory is Slurm's to give */
    const char *loads = json_string_value(json_object_get(json_object_get(for_trainer, "checkpoint"), "load"));
    if (load && *load && schema_errors_total(errs) == before_load && loads)
        ckpt_fit_check(config, R.runs_root->roots[0], loads, errs);
    if (!command && placed && errs->count == 0)
        run_fit_check(for_trainer, need->pool == POOL_CPU && !scheduler_batch(NULL), scheduler_capacity(POOL_CPU), errs);
    if (errs->count || !placed) {
        if (!errs->count) schema_errors_add(errs, "/distributed/world_size", "must be an integer of at least 1");
        json_decref(for_trainer);
        return refuse(out, SUBMIT_INVALID, who, "submit this run");
    }
    *resolved = for_trainer;
    return out->result = SUBMIT_OK;
}

submit_result runs_check(json_t *config, const caller *who, submit_outcome *out) {
    json_t *resolved;
    run_needs need = {.pool = POOL_CPU};
    gate(config, who, &resolved, &need, out);
    json_decref(resolved);
    return out->result;
}

json_t *runs_resolve(json_t *config, const caller *who) {
    json_t *resolved;
    run_needs need = {.pool = POOL_CPU};
    submit_outcome out = {0};
    gate(config, who, &resolved, &need, &out);
    submit_outcome_free(&out);
    return resolved;
}

submit_result runs_submit(json_t *config, const caller *who, int64_t sweep_id, int trial, submit_outcome *out) {
    json_t *for_trainer;
    run_needs need = {.pool = POOL_CPU};
    if (gate(config, who, &for_trainer, &need, out) != SUBMIT_OK) return out->result;

    store_op ins = {.kind = OP_RUN_INSERT, .t = now_ms()};
    ins.u.insert.name = xstrdup(json_string_value(json_object_get(config, "name")));
    ins.u.insert.config = json_dumps(config, JSON_FLAGS);
    ins.u.insert.world_size = need.world_size;
    ins.u.insert.device_kind = pool_name(need.pool);
    ins.u.insert.command = command_run_is(config);
    need.owner = who->kind == CALLER_USER ? who->name : NULL;
    need.priority = (int)json_integer_value(json_object_get(config, "priority"));
    need.preemptible = json_is_true(json_object_get(config, "preemptible"));
    need.queued_ms = ins.t;
    ins.u.insert.owner = need.owner ? xstrdup(need.owner) : NULL;
    ins.u.insert.priority = need.priority;
    ins.u.insert.preemptible = need.preemptible;
    ins.u.insert.sweep_id = sweep_id;
    ins.u.insert.trial = trial;
    ins.u.insert.memory_bytes = need.memory_bytes = run_memory_asked(config);
    need.expected_ms = store_median_length(need.owner, ins.u.insert.name);
    char actor[80];
    ins.u.insert.actor = xstrdup(audit_actor(who, actor, sizeof actor)); /* its audit entry, in its insert */
    /* and its timeline's first entry: everything a submission writes is one commit */
    json_t *submitted = json_pack("{s:i, s:s, s:i}", "world_size", need.world_size, "device_kind",
                                  pool_name(need.pool), "priority", need.priority);
    ins.u.insert.submitted = json_dumps(submitted, JSON_COMPACT);
    json_decref(submitted);
    int64_t id = store_submit_wait(&ins);
    if (id <= 0) {
        char why[768];
        json_decref(for_trainer);
        if (store_unwritable(why, sizeof why)) {
            snprintf(out->why, sizeof out->why,
                     "the run was not stored (submit it again once the database can be written): %s", why);
            return out->result = SUBMIT_UNAVAILABLE;
        }
        snprintf(out->why, sizeof out->why, "the run could not be stored (a database error; see the server's log)");
        return out->result = SUBMIT_FAILED;
    }
    char why[1024];
    bool ready = make_run_dir(id, for_trainer, why, sizeof why) == 0;
    json_decref(for_trainer);
    if (!ready) {
        store_op fin = {.kind = OP_RUN_FINISH, .run_id = id, .t = now_ms()};
        fin.u.finish.status = run_status_name(RUN_FAILED);
        fin.u.finish.reason = xstrdup(why);
        fin.u.finish.exit_code = fin.u.finish.exit_signal = NO_INT;
        store_submit_wait(&fin);
        snprintf(out->why, sizeof out->why, "run %lld was stored but cannot start: %s", (long long)id, why);
        out->id = id;
        return out->result = SUBMIT_FAILED;
    }
    need.id = id;
    need.sweep_id = sweep_id;
    disk_use_run_added(id, need.owner);
    scheduler_submit(&need);
    out->id = id;
    return out->result = SUBMIT_OK;
}

/* The paths of a config its launcher reads, and the roots each must lie in. */
static const struct {
    const char *pointer;
    int roots; /* 0: data roots, 1: work roots, 2: the runs directory */
} RESUME_PATHS[] = {{"/data/train/images", 0}, {"/data/train/labels", 0}, {"/data/test/images", 0},
                    {"/data/test/labels", 0},  {"/working_dir", 1},       {"/checkpoint/load", 2}};

submit_result runs_check_resume(const json_t *config, const char *owner, int priority, int world_size,
                                submit_outcome *out) {
    caller who;
    if (!users_caller(owner, &who)) {
        schema_errors_add(&out->errs, "", "the run's owner %s is no longer a user of this server (ddpd user list): "
                          "its runs are kept, but none of them is resumed; an admin may submit it again", owner);
        return refuse(out, SUBMIT_NOT_PERMITTED, &who, "resume this run");
    }
    const char *forbidden = runs_forbidden(config);
    if (forbidden) {
        schema_errors_add(&out->errs, "/command", "%s", forbidden);
        snprintf(out->why, sizeof out->why, "%s", forbidden);
        return out->result = SUBMIT_FORBIDDEN;
    }
    /* its limits now, on the priority and world size the scheduler gives it */
    json_t *view = json_deep_copy(config);
    json_object_set_new(view, "priority", json_integer(priority));
    bool permitted = runs_permitted(view, &who, &out->errs);
    const json_t *ws = json_object_get(json_object_get(config, "distributed"), "world_size");
    if (permitted && (!json_is_integer(ws) || json_integer_value(ws) != world_size))
        schema_errors_add(&out->errs, "/distributed/world_size", "is not %d, the world size the run was submitted "
                          "with (its config.json was changed since): submit it again as a new run", world_size);
    if (out->errs.count) {
        json_decref(view);
        return refuse(out, permitted ? SUBMIT_FORBIDDEN : SUBMIT_NOT_PERMITTED, &who, "resume this run");
    }
    /* every path as the launcher would open it now: in the roots of its kind, in no
     * other member's run (one that leads to nothing now reads nothing: its roots judge
     * it, no run's owner; the run it started from may have been deleted since) */
    const data_roots *roots[] = {R.data_roots, R.work_roots, R.runs_root};
    static const char *const what[] = {"data roots", "work roots", "run directories"};
    for (size_t i = 0; i < sizeof RESUME_PATHS / sizeof *RESUME_PATHS; i++)
        datapaths_recheck(roots[RESUME_PATHS[i].roots], what[RESUME_PATHS[i].roots], view, RESUME_PATHS[i].pointer,
                          &out->errs);
    if (!out->errs.count && R.runs_root->n) run_reads_own(view, R.runs_root->roots[0], &who, &out->errs);
    json_decref(view);
    if (out->errs.count) return refuse(out, SUBMIT_FORBIDDEN, &who, "resume this run");
    return out->result = SUBMIT_OK;
}

void runs_set_stopped_reason(int64_t id, const char *reason) {
    store_op op = {.kind = OP_RUN_REASON, .run_id = id, .t = now_ms()};
    op.u.finish.reason = xstrdup(reason);
    store_submit_now(&op);
}

runs_result runs_cancel(int64_t id, run_status *status) {
    run_brief b;
    int found = store_get_brief(id, &b);
    if (found < 0) return RUNS_STORE_ERROR;
    if (!found) return RUNS_NOT_FOUND;
    if (scheduler_cancel(id, "canceled by request") != CANCEL_NOT_LIVE) {
        store_sync();
        return RUNS_DONE;
    }
    store_sync(); /* it may have just finished: read its final state */
    if (store_get_brief(id, &b) != 1) return RUNS_NOT_FOUND;
    *status = b.status;
    return run_status_is_final(b.status) ? RUNS_FINISHED : RUNS_SETTING_UP;
}

runs_result runs_delete(int64_t id, run_status *status) {
    run_brief b;
    int found = store_get_brief(id, &b);
    if (found < 0) return RUNS_STORE_ERROR;
    if (!found) return RUNS_NOT_FOUND;
    *status = b.status;
    if (!run_status_is_final(b.status)) return RUNS_NOT_FINISHED;
    store_op op = {.kind = OP_RUN_DELETE, .run_id = id, .t = now_ms()};
    int64_t deleted = store_submit_wait(&op);
    if (deleted < 0) return RUNS_STORE_ERROR; /* the database cannot be written: nothing was deleted */
    if (deleted != 1) return RUNS_CHANGED;
    /* by descriptors: what its account left there (links, a subdirectory swapped for
     * one mid-walk) leads nowhere (run_files.h) */
    char *dir = layout_run_dir(id), why[768];
    if (run_dir_remove(dir, why, sizeof why) != 0) log_warn("run %lld deleted, but not all of its directory: %s", (long long)id, why);
    else log_info("run %lld deleted", (long long)id);
    free(dir);
    return RUNS_DONE;
}

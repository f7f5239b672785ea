/* The launcher: see launcher.h. Signals are handled synchronously (blocked, then
 * taken with sigtimedwait), so the supervision loop is plain sequential code. */
#include "launcher.h"

#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attempts.h"
#include "backend_select.h"
#include "checkpoint.h"
#include "collectives.h"
#include "comm_watch.h"
#include "engine.h"
#include "env_seconds.h"
#include "ddpd_build_config.h"
#include "events.h"
#include "cuda/memory_plan.h"
#include "host_plan.h"
#include "idx.h"
#include "log.h"
#include "model.h"
#include "paths.h"
#include "progress.h"
#include "rank.h"
#include "run_board.h"
#include "run_config.h"
#include "kv_store.h"
#if DDPD_NODES_GLOO
#include "coll_nodes.h"
#endif
#if DDPD_NCCL_BACKEND
#include "cuda/coll_nccl.h" /* nccl hook */
#endif

#define PEER_STOP_GRACE_S 1.0  /* a rank died: the others get this long after SIGTERM */
#define CANCEL_GRACE_S 3.0     /* canceled: the ranks get this long after SIGTERM */
#define ARENA_SLACK (64 * 1024)
/* Across nodes: how long a rank waits for the other nodes' ranks to come (they start
 * when their agents hear of the run, about a second apart, and load their data;
 * DDPD_RENDEZVOUS_TIMEOUT_S overrides it). A collective between nodes gives up after
 * the hang watch's time and a minute more, so that the hang watch, which names the
 * rank that stopped, speaks first (a week when the watch is off;
 * DDPD_COLLECTIVE_TIMEOUT_S overrides it). */
#define RENDEZVOUS_TIMEOUT_S 120.0
#define NODES_COLLECTIVE_SLACK_S 60.0
#define NODES_COLLECTIVE_UNWATCHED_S (7 * 86400.0)

typedef struct {
    pid_t pid;
    int running;
} rank_proc;

typedef struct {
    const launcher_options *o;
    run_config cfg;
    const char *run_id, *secret;
    event_sink *events;
    idx_dataset train, test;
    int have_train, have_test;
    coll_cpu_group *group;
    run_board *board;
    rank_proc *ranks;
    int world;              /* ranks in the run */
    int local, first;       /* ranks on this node, and the first of them (0 on one host) */
    int backend;            /* BACKEND_CPU or BACKEND_NCCL */
    int resume;             /* this attempt's ranks carry on from the newest checkpoint */
    attempt_plan plan;      /* distributed.max_restarts */
    size_t arena;           /* bytes of the ranks' shared memory */
    sigset_t mask;          /* SIGCHLD and the cancel signals, blocked and taken with sigtimedwait */
    sigset_t child_mask;    /* the mask before: what the ranks start with */
#if DDPD_NCCL_BACKEND
    nccl_rendezvous nccl;   /* nccl hook: made before fork, inherited by the ranks */
#endif
} launcher;

/* The run's last event, with the exit status the launcher exits with next: a server
 * that is not its parent (one restarted meanwhile) learns it from the journal. */
static void end_run(launcher *L, const char *status, const char *reason, int exit_code) {
    if (reason && reason[0]) log_msg(strcmp(status, "succeeded") ? LOG_ERROR : LOG_INFO, "run %s: %s", status, reason);
    else log_msg(LOG_INFO, "run %s", status);
    if (L->events) {
        log_set_events(NULL);
        event_emit(L->events, "end", json_pack("{s:s, s:s, s:i}", "status", status, "reason", reason ? reason : "",
                                               "exit_code", exit_code));
        event_sink_close(L->events);
        L->events = NULL;
    }
    if (strcmp(status, "succeeded") != 0) fprintf(stderr, "ddp-trainer: run %s: %s\n", status, reason);
}

static int load_config(launcher *L) {
    schema_errors errs = {0};
    json_t *doc = NULL;
    if (run_config_load_file(L->o->config_path, &L->cfg, &doc, &errs) != 0) {
        fprintf(stderr, "ddp-trainer: %s is not a valid run config:\n", L->o->config_path);
        for (size_t i = 0; i < errs.count; i++)
            fprintf(stderr, "  %s%s%s\n", errs.items[i].pointer, errs.items[i].pointer[0] ? ": " : "",
                    errs.items[i].message);
        if (errs.dropped) fprintf(stderr, "  (and %zu more: %zu violations in all)\n", errs.dropped, schema_errors_total(&errs));
        schema_errors_free(&errs);
        json_decref(doc);
        return -1;
    }
    schema_errors_free(&errs);
    /* Keep the config as it was run, defaults filled, beside the run's outputs. */
    char path[2048];
    snprintf(path, sizeof path, "%s/config.resolved.json", L->o->run_dir);
    if (mkdir_p(L->o->run_dir) == 0) json_dump_file(doc, path, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(doc);
    return 0;
}

static int load_data(launcher *L, char *reason, size_t n) {
    const run_config *c = &L->cfg;
    char err[768], note[640] = "", cache_buf[2048];
    const char *cache = idx_default_cache_dir(cache_buf, sizeof cache_buf);
    double t0 = now_seconds();
    if (c->mode == RUN_MODE_TRAIN) {
        if (idx_load_cached(&L->o->data_roots, c->data.train_images, c->data.train_labels, (size_t)c->data.limit, cache, &L->train, err,
                            sizeof err, note, sizeof note)) {
            snprintf(reason, n, "cannot load the training data: %s", err);
            return -1;
        }
        L->have_train = 1;
    }
    if (note[0]) log_msg(LOG_INFO, "training data %s", note);
    if (idx_load_cached(&L->o->data_roots, c->data.test_images, c->data.test_labels, (size_t)c->data.test_limit, cache, &L->test, err,
                        sizeof err, note, sizeof note)) {
        snprintf(reason, n, "cannot load the test data: %s", err);
        return -1;
    }
    L->have_test = 1;
    if (L->have_train) {
        if (L->train.rows != L->test.rows || L->train.cols != L->test.cols) {
            snprintf(reason, n, "the test images are %dx%d but the training images are %dx%d", L->test.rows,
                     L->test.cols, L->train.rows, L->train.cols);
            return -1;
        }
        int classes = L->train.num_classes > L->test.num_classes ? L->train.num_classes : L->test.num_classes;
        L->train.num_classes = L->test.num_classes = classes;
        if (L->train.count < (size_t)L->world) {
            snprintf(reason, n, "the training set has %zu examples, fewer than the %d ranks", L->train.count, L->world);
            return -1;
        }
        log_msg(LOG_INFO, "loaded %zu training and %zu test examples (%dx%d, %d classes) in %.2f s", L->train.count,
                L->test.count, L->train.rows, L->train.cols, classes, now_seconds() - t0);
    }
    return 0;
}

/* The run's secret, taken out of the environment: the ranks get it from memory, and
 * the value in the process's environment block (which /proc shows) is blanked. */
static const char *take_secret(void) {
    static char secret[256];
    char *v = getenv("DDPD_RUN_SECRET");
    if (!v) return NULL;
    snprintf(secret, sizeof secret, "%s", v);
    memset(v, '-', strlen(v));
    unsetenv("DDPD_RUN_SECRET");
    return secret;
}

static void send_hello(launcher *L) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    json_t *hello = json_pack("{s:i, s:s, s:n, s:i}", "pid", (int)getpid(), "host", host, "device", "world_size",
                              L->world);
    event_emit(L->events, "hello", hello); /* the sink adds the secret on the socket only */
}

/* Across nodes, the cpu backend: this rank's node comm and its gloo link to the same
 * local rank on the other nodes, met through the coordinator's rendezvous. NULL and
 * why on failure. */
static coll_comm *join_nodes(launcher *L, coll_comm *local, int slot, char *why, size_t whylen) {
#if DDPD_NODES_GLOO
    char prefix[64];
    kv_store *kv = kv_http_open(L->o->rendezvous, L->secret, why, whylen);
    if (!kv) return NULL;
    snprintf(prefix, sizeof prefix, "gloo/local-%d/", slot);
    const char *iface = getenv("GLOO_SOCKET_IFNAME");
    double hang_s = L->cfg.distributed.hang_timeout_s;
    int watched = hang_s > 0;
    gloo_link_options o = {
        .store = kv,
        .prefix = prefix,
        .rank = L->o->node_rank,
        .size = L->o->nodes,
        .iface = iface && *iface ? iface : NULL,
        .hostname = L->o->node_addr,
        .connect_timeout_ms = (int)(env_seconds("DDPD_RENDEZVOUS_TIMEOUT_S", RENDEZVOUS_TIMEOUT_S) * 1000),
        .timeout_ms = (int)(env_seconds("DDPD_COLLECTIVE_TIMEOUT_S", watched ? hang_s + NODES_COLLECTIVE_SLACK_S
                                                                          : NODES_COLLECTIVE_UNWATCHED_S) * 1000),
    };
    gloo_link *link = gloo_link_open(&o, why, whylen);
    kv->close(kv); /* met: the link talks directly from now on */
    if (!link) return NULL;
    coll_comm *c = coll_nodes_create(local, link, L->o->nodes, L->o->node_rank);
    if (!c) snprintf(why, whylen, "out of memory");
    return c;
#else
    (void)L, (void)local, (void)slot;
    if (DDPD_NCCL_BACKEND) /* a CPU run in the GPU build: backend auto, too few GPUs */
        snprintf(why, whylen, "ddp-trainer-nccl runs GPU runs across nodes, not CPU ones: set distributed.backend to "
                 "\"cpu\" (ddp-trainer runs those, over gloo), or give each node a GPU per rank");
    else
        snprintf(why, whylen, "this ddp-trainer was built without gloo (libgloo-dev), which a CPU run across nodes "
                 "needs: install libgloo-dev and build again, or run it on one node");
    return NULL;
#endif
}

#if DDPD_NCCL_BACKEND
/* nccl hook: NCCL's unique id, made here on one host; across nodes, made by node 0's
 * launcher and relayed to the others through the coordinator's rendezvous. */
static int nccl_id_made(launcher *L, char *why, size_t whylen) {
    int rc;
    if (L->o->nodes <= 1) {
        rc = nccl_rendezvous_create(&L->nccl, L->world, why, whylen);
    } else {
        kv_store *kv = kv_http_open(L->o->rendezvous, L->secret, why, whylen);
        if (!kv) return -1;
        int timeout_ms = (int)(env_seconds("DDPD_RENDEZVOUS_TIMEOUT_S", RENDEZVOUS_TIMEOUT_S) * 1000);
        rc = nccl_rendezvous_across(&L->nccl, L->world, L->o->nodes, L->o->node_rank, kv, timeout_ms, why, whylen);
        kv->close(kv);
    }
    L->nccl.timeout_s = L->cfg.distributed.collective_timeout_s;
    return rc;
}
#endif

static void child_start(launcher *L, int slot, pid_t launcher_pid, const sigset_t *old_mask) {
    int rank = L->first + slot;
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* no rank outlives the launcher, even a SIGKILLed one */
    if (getppid() != launcher_pid) _exit(EXIT_RUN_FAILED);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    if (L->have_train) idx_cache_map_in(&L->train); /* no page faults in the first epoch's steps */
    idx_cache_map_in(&L->test);
    rank_context ctx = {
        .cfg = &L->cfg,
        .run_dir = L->o->run_dir,
        .events_target = L->o->events_target,
        .run_id = L->run_id,
        .secret = L->secret,
        .rank = rank,
        .slot = slot,
        .resume = L->resume,
        .train = L->have_train ? &L->train : NULL,
        .test = &L->test,
        .board = L->board,
    };
#if DDPD_NCCL_BACKEND
    /* nccl hook: the rank selects its GPU and joins the communicator; a failure is
     * the rank's reason on the board, which the launcher reports. */
    char device[128], why[512];
    if (L->backend == BACKEND_NCCL) {
        ctx.comm = coll_nccl_attach(&L->nccl, rank, L->board, device, sizeof device, why, sizeof why);
        if (!ctx.comm) {
            run_board_set_failure(L->board, slot, why);
            _exit(EXIT_RUN_FAILED);
        }
        ctx.device = device;
    }
#endif
    if (!ctx.comm) {
        char why[1024];
        coll_comm *c = coll_cpu_attach(L->group, slot);
        if (c && L->o->nodes > 1 && !(c = join_nodes(L, c, slot, why, sizeof why))) {
            run_board_set_failure(L->board, slot, why);
            _exit(EXIT_RUN_FAILED);
        }
        ctx.comm = comm_watch_wrap(c, L->board, slot);
    }
    if (!ctx.comm) _exit(EXIT_RUN_FAILED);
    fflush(NULL);
    _exit(rank_main(&ctx));
}

static void describe_death(launcher *L, int r, int status, char *out, size_t n) {
    rank_slot *slot = &L->board->slot[r];
    int rank = L->first + r;
    char where[96] = "";
    int epoch = atomic_load(&slot->epoch);
    if (epoch >= 0) snprintf(where, sizeof where, " at epoch %d step %ld", epoch, atomic_load(&slot->step));
    char cause[1024];
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS &&
        (idx_cache_explain_bus_error(&L->train, cause, sizeof cause) ||
         idx_cache_explain_bus_error(&L->test, cause, sizeof cause)))
        snprintf(out, n, "rank %d exited with signal %d (%s)%s: %s", rank, SIGBUS, strsignal(SIGBUS), where, cause);
    else if (WIFSIGNALED(status))
        snprintf(out, n, "rank %d exited with signal %d (%s)%s", rank, WTERMSIG(status), strsignal(WTERMSIG(status)),
                 where);
    else if (slot->failure[0])
        snprintf(out, n, "rank %d failed: %s", rank, slot->failure);
    else
        snprintf(out, n, "rank %d exited with code %d%s", rank, WEXITSTATUS(status), where);
}

/* The last line rank `rank` wrote to trainer.log (its message part), or "". */
static void last_log_line(launcher *L, int rank, char *out, size_t n) {
    char path[2048], tag[32], buf[65536];
    out[0] = '\0';
    snprintf(path, sizeof path, "%s/trainer.log", L->o->run_dir);
    snprintf(tag, sizeof tag, " rank %d: ", rank);
    FILE *f = fopen(path, "r");
    if (!f) return;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
    long from = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
    size_t got = fseek(f, from, SEEK_SET) == 0 ? fread(buf, 1, sizeof buf - 1, f) : 0;
    fclose(f);
    buf[got] = '\0';
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *at = strstr(line, tag);
        if (at) snprintf(out, n, "%s", at + strlen(tag));
    }
}

/* How telling a stalled process's state is: stopped (SIGSTOP, a debugger) 2, busy
 * on a CPU (an endless loop) 1, asleep (waiting, as peers in a collective do) 0. */
static int stall_evidence(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');
    char state = close_paren && close_paren[1] ? close_paren[2] : '?';
    return state == 'T' || state == 't' ? 2 : state == 'R' ? 1 : 0;
}

/* The hang watch (distributed.hang_timeout_s): when a rank has made no progress
 * (no step done, no collective entered) for that long, the run fails naming the
 * ranks furthest behind: those with the fewest steps, then the fewest collectives
 * entered; their peers are waiting for them inside a collective. Ranks stuck inside
 * the same collective tie on both counts: among them, a stopped process, else a
 * busy one, is the one holding the others up. 1 when it fired. */
static int hang_detected(launcher *L, char *reason, size_t n, int *first_named) {
    double limit_s = L->cfg.distributed.hang_timeout_s;
    if (limit_s <= 0) return 0;
    long long now = run_board_now_ms(), stalest = 0;
    for (int r = 0; r < L->local; r++) {
        long long idle = now - atomic_load(&L->board->slot[r].progress_ms);
        if (L->ranks[r].running && idle > stalest) stalest = idle;
    }
    if (stalest < (long long)(limit_s * 1000)) return 0;
    long best_steps = -1, best_colls = -1;
    for (int r = 0; r < L->local; r++) {
        if (!L->ranks[r].running) continue;
        long steps = atomic_load(&L->board->slot[r].global_step), colls = atomic_load(&L->board->slot[r].collectives);
        if (best_steps < 0 || steps < best_steps || (steps == best_steps && colls < best_colls))
            best_steps = steps, best_colls = colls;
    }
    int behind[L->local], evidence[L->local], strongest = 0;
    for (int r = 0; r < L->local; r++) {
        rank_slot *slot = &L->board->slot[r];
        behind[r] = L->ranks[r].running && atomic_load(&slot->global_step) == best_steps &&
                    atomic_load(&slot->collectives) == best_colls;
        evidence[r] = behind[r] ? stall_evidence(L->ranks[r].pid) : 0;
        if (evidence[r] > strongest) strongest = evidence[r];
    }
    size_t len = 0;
    int named = 0;
    for (int r = 0; r < L->local && len < n; r++) {
        rank_slot *slot = &L->board->slot[r];
        if (!behind[r] || evidence[r] < strongest) continue;
        char where[96] = "before its first step", line[256];
        int epoch = atomic_load(&slot->epoch);
        if (epoch >= 0)
            snprintf(where, sizeof where, "last at epoch %d step %ld (global step %ld)", epoch,
                     atomic_load(&slot->step), atomic_load(&slot->global_step));
        last_log_line(L, L->first + r, line, sizeof line);
        if (!named) *first_named = L->first + r;
        double idle_s = (double)(now - atomic_load(&slot->progress_ms)) / 1000.0;
        len += (size_t)snprintf(reason + len, n - len, "%srank %d made no progress for %.0f s, %s, %s%s%s", named++ ? "; " : "",
                                L->first + r, idle_s, where, line[0] ? "its last log line: \"" : "no log line from it", line,
                                line[0] ? "\"" : "");
    }
    if (len < n)
        snprintf(reason + len, n - len, " (distributed.hang_timeout_s is %g)%s: stopping every rank", limit_s,
                 L->o->nodes > 1 && strongest == 0 ? "; every rank here was waiting in a collective, so the one that "
                                                     "stopped may be on another node"
                                                   : "");
    return 1;
}

static void signal_ranks(launcher *L, int sig) {
    for (int r = 0; r < L->local; r++)
        if (L->ranks[r].running) kill(L->ranks[r].pid, sig);
}

/* How one attempt of the ranks ended. */
typedef struct {
    int failed, canceled_by;
    char reason[2048];
    int failing_rank; /* the rank the reason names, else -1 */
    int status;       /* its wait status when it died (failing_rank >= 0 and not a hang) */
    int died;         /* 1: it died (status holds how); 0: the hang watch stopped it */
    char last_line[1024];
} attempt_outcome;

/* A rank died: why, and its last words (the reason it gave on the board, else its
 * last log line). */
static void rank_died(launcher *L, int r, int status, attempt_outcome *out) {
    out->failed = 1;
    out->failing_rank = L->first + r;
    out->status = status;
    out->died = 1;
    describe_death(L, r, status, out->reason, sizeof out->reason);
    if (L->board->slot[r].failure[0]) snprintf(out->last_line, sizeof out->last_line, "%s", L->board->slot[r].failure);
    else last_log_line(L, L->first + r, out->last_line, sizeof out->last_line);
}

/* Supervises the ranks until all have exited. */
static void supervise(launcher *L, const sigset_t *mask, attempt_outcome *out) {
    int alive = L->local;
    double kill_deadline = 0;
    *out = (attempt_outcome){.failing_rank = -1};
    while (alive > 0) {
        struct timespec tick = {0, 50 * 1000 * 1000};
        siginfo_t info;
        int sig = sigtimedwait(mask, &info, &tick);
        if ((sig == SIGTERM || sig == SIGINT || sig == SIGHUP) && !out->canceled_by) {
            out->canceled_by = sig;
            if (!out->failed) {
                snprintf(out->reason, sizeof out->reason, "canceled by %s", sigabbrev_np(sig) ? sigabbrev_np(sig) : "signal");
                log_msg(LOG_WARN, "received SIG%s: stopping every rank", sigabbrev_np(sig));
            }
            coll_cpu_group_abort(L->group);
            signal_ranks(L, SIGTERM);
            kill_deadline = now_seconds() + CANCEL_GRACE_S;
        }
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (int r = 0; r < L->local; r++) {
                if (L->ranks[r].pid != pid || !L->ranks[r].running) continue;
                L->ranks[r].running = 0;
                alive--;
                int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
                if (!ok && !out->failed && !out->canceled_by) {
                    rank_died(L, r, status, out);
                    log_msg(LOG_ERROR, "%s: stopping the other ranks", out->reason);
                    coll_cpu_group_abort(L->group);
                    signal_ranks(L, SIGTERM);
                    kill_deadline = now_seconds() + PEER_STOP_GRACE_S;
                }
            }
        }
        if (!out->failed && !out->canceled_by && hang_detected(L, out->reason, sizeof out->reason, &out->failing_rank)) {
            out->failed = 1;
            log_msg(LOG_ERROR, "%s", out->reason);
            coll_cpu_group_abort(L->group);
            signal_ranks(L, SIGTERM);
            kill_deadline = now_seconds() + PEER_STOP_GRACE_S;
        }
        if (kill_deadline > 0 && now_seconds() >= kill_deadline) {
            signal_ranks(L, SIGKILL);
            kill_deadline = 0;
        }
    }
}

/* The host-memory plan (host_plan.h) against the host and what is available now,
 * before the shared memory is made and the ranks allocate. The server checked the
 * run's share of its slots at submission by the same code. */
static int check_host_memory(launcher *L, const model_shape *shape, char *why, size_t whylen) {
    host_plan_input in = {.shape = shape,
                          .world_size = L->local,
                          .local_batch = L->cfg.train.batch_size / L->world,
                          .n_opt_states = host_plan_optimizer_states(&L->cfg),
                          .threads_per_rank = L->cfg.distributed.threads_per_rank,
                          .pixels = (size_t)L->test.rows * L->test.cols,
                          .train_count = L->train.count,
                          .test_count = L->test.count};
    host_plan plan;
    host_plan_compute(&in, &plan);
    char need[32];
    memory_plan_format_bytes(plan.total_bytes, need, sizeof need);
    log_msg(LOG_INFO, "host memory plan: %s (%zu bytes) for %d rank%s", need, plan.total_bytes, L->local,
            L->local > 1 ? "s" : "");
    return host_plan_check(&plan, 1, 1, host_plan_host_total(), host_plan_host_available(), why, whylen);
}

/* The shared memory an attempt's ranks meet in, and NCCL's unique id: made again
 * for every attempt (a failed one aborted its group). 0, or -1 and why. */
static int make_rendezvous(launcher *L, char *why, size_t whylen) {
    if (L->group) coll_cpu_group_destroy(L->group);
    if (L->board) run_board_destroy(L->board);
    L->group = coll_cpu_group_create(L->local, L->arena);
    L->board = run_board_create(L->local);
    if (!L->group || !L->board) {
        snprintf(why, whylen, "cannot create the shared memory for %d ranks: %s", L->local, strerror(errno));
        return -1;
    }
#if DDPD_NCCL_BACKEND
    /* nccl hook: the NCCL unique id, before fork and without initialising CUDA. */
    if (L->backend == BACKEND_NCCL && nccl_id_made(L, why, whylen) != 0) return -1;
#endif
    return 0;
}

/* Forks the attempt's ranks. 0, or -1 and why (those started are killed and reaped). */
static int fork_ranks(launcher *L, char *why, size_t whylen) {
    pid_t self = getpid();
    event_flush(L->events);
    fflush(NULL);
    memset(L->ranks, 0, (size_t)L->local * sizeof *L->ranks);
    for (int r = 0; r < L->local; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            child_start(L, r, self, &L->child_mask);
        } else if (pid < 0) {
            snprintf(why, whylen, "cannot start rank %d: fork: %s", L->first + r, strerror(errno));
            coll_cpu_group_abort(L->group);
            signal_ranks(L, SIGKILL);
            while (wait(NULL) > 0) {}
            return -1;
        }
        L->ranks[r] = (rank_proc){.pid = pid, .running = 1};
    }
    if (L->o->nodes > 1)
        log_msg(LOG_INFO, "started ranks %d to %d of %d (node %d of %d)", L->first, L->first + L->local - 1, L->world,
                L->o->node_rank, L->o->nodes);
    else
        log_msg(LOG_INFO, "started %d rank%s", L->world, L->world > 1 ? "s" : "");
    return 0;
}

/* Attempt hooks (attempts.h). A restart carries on from the run's newest checkpoint,
 * as a resume does (and from the start when it has none yet). */
static json_t *prepare_attempt(void *ctx, int attempt) {
    launcher *L = ctx;
    char path[2048], err[512];
    int own = checkpoint_find_latest(L->o->run_dir, path, sizeof path, err, sizeof err) == 0;
    L->resume = L->o->resume || (attempt > L->plan.first && own);
    const char *from = L->resume && own ? path : L->cfg.checkpoint.load[0] ? L->cfg.checkpoint.load : NULL;
    return json_pack("{s:s?}", "checkpoint", from);
}

static void run_attempt(void *ctx, int attempt, attempt_result *r) {
    (void)attempt;
    launcher *L = ctx;
    if (make_rendezvous(L, r->reason, sizeof r->reason) != 0 || fork_ranks(L, r->reason, sizeof r->reason) != 0)
        return;
    attempt_outcome out;
    supervise(L, &L->mask, &out);
    r->status = out.failed ? "failed" : out.canceled_by ? "canceled" : "succeeded";
    snprintf(r->reason, sizeof r->reason, "%s", out.reason);
    r->cancel_signal = out.canceled_by;
    r->may_restart = out.failed;
    r->failing_rank = out.failing_rank;
    snprintf(r->last_line, sizeof r->last_line, "%s", out.last_line);
    if (!out.died) return;
    r->exit_code = WIFEXITED(out.status) ? WEXITSTATUS(out.status) : -1;
    r->signal = WIFSIGNALED(out.status) ? WTERMSIG(out.status) : 0;
}

static int pause_before_restart(void *ctx, double seconds) {
    launcher *L = ctx;
    for (;;) {
        event_flush(L->events); /* the reason for the restart goes out at once; the sink reconnects */
        if (seconds <= 0) return 0;
        double now = seconds < 1.0 ? seconds : 1.0;
        struct timespec wait = {(time_t)now, (long)((now - (double)(time_t)now) * 1e9)};
        siginfo_t info;
        int sig = sigtimedwait(&L->mask, &info, &wait);
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) return sig;
        if (sig < 0) seconds -= now; /* (a SIGCHLD, or an interrupted wait: round again) */
    }
}

static int start_and_supervise(launcher *L) {
    char reason[1024];
    if (load_data(L, reason, sizeof reason) != 0) {
        end_run(L, "failed", reason, EXIT_RUN_FAILED);
        return EXIT_RUN_FAILED;
    }
    const idx_dataset *d = &L->test;
    model_shape shape;
    if (model_shape_init(&shape, &L->cfg, 1, d->rows, d->cols, d->num_classes, reason, sizeof reason) != 0) {
        end_run(L, "failed", reason, EXIT_RUN_FAILED);
        return EXIT_RUN_FAILED;
    }
    if (L->backend != BACKEND_NCCL && check_host_memory(L, &shape, reason, sizeof reason) != 0) {
        end_run(L, "failed", reason, EXIT_RUN_FAILED);
        return EXIT_RUN_FAILED;
    }
    /* nccl hook: with nccl the cpu group only serves aborts, so its arena stays small. */
    L->arena = L->backend == BACKEND_NCCL ? ARENA_SLACK : engine_cpu_arena_bytes(&shape) + ARENA_SLACK;
    L->ranks = calloc((size_t)L->local, sizeof *L->ranks);
    if (!L->ranks) {
        end_run(L, "failed", "out of memory", EXIT_RUN_FAILED);
        return EXIT_RUN_FAILED;
    }
    sigemptyset(&L->mask);
    sigaddset(&L->mask, SIGCHLD);
    sigaddset(&L->mask, SIGTERM);
    sigaddset(&L->mask, SIGINT);
    sigaddset(&L->mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &L->mask, &L->child_mask);
    L->plan = (attempt_plan){.first = L->o->restart_count, .max_restarts = L->cfg.distributed.max_restarts,
                             .restarts_allowed = L->o->nodes <= 1, .backoff_s = attempts_backoff_s("ddp-trainer")};
    attempt_hooks hooks = {.ctx = L, .prepare = prepare_attempt, .run = run_attempt, .pause = pause_before_restart};
    attempts_outcome out;
    attempts_run(L->events, &L->plan, &hooks, &out);
    sigprocmask(SIG_SETMASK, &L->child_mask, NULL);
    int rc = strcmp(out.status, "succeeded") == 0 ? EXIT_RUN_SUCCEEDED
             : strcmp(out.status, "canceled") == 0 ? 128 + out.signal
                                                   : EXIT_RUN_FAILED;
    end_run(L, out.status, out.reason, rc);
    return rc;
}

/* This node's ranks, when the run spans nodes; -1 (said on stderr) when the command
 * line cannot be right. */
static int plan_nodes(launcher *L) {
    const launcher_options *o = L->o;
    int nodes = o->nodes > 0 ? o->nodes : 1;
    if (o->node_rank < 0 || o->node_rank >= nodes) {
        fprintf(stderr, "ddp-trainer: --node-rank %d is not one of the %d nodes (0 to %d)\n", o->node_rank, nodes,
                nodes - 1);
        return -1;
    }
    if (L->world % nodes != 0) {
        fprintf(stderr, "ddp-trainer: distributed.world_size %d does not divide into %d nodes\n", L->world, nodes);
        return -1;
    }
    if (nodes > 1 && (!o->rendezvous || !o->node_addr)) {
        fprintf(stderr, "ddp-trainer: --nodes %d needs --rendezvous URL (the coordinator's) and --node-addr ADDR (this "
                "node's address): ddpd passes both\n", nodes);
        return -1;
    }
    L->local = L->world / nodes;
    L->first = o->node_rank * L->local;
    return 0;
}


int launcher_run(const launcher_options *o) {
    launcher L = {.o = o};
    if (load_config(&L) != 0) return EXIT_BAD_INPUT;
    L.world = L.cfg.distributed.world_size;
    if (plan_nodes(&L) != 0) return EXIT_BAD_INPUT;
    char nccl_path[4096];
    if (backend_handoff(&L.cfg, nccl_path, sizeof nccl_path)) { /* a GPU run: the GPU build takes it */
        execv(nccl_path, o->argv);
        fprintf(stderr, "ddp-trainer: cannot start the GPU backend %s: %s\n", nccl_path, strerror(errno));
        return EXIT_BAD_INPUT;
    }
    if (mkdir_p(o->run_dir) != 0) {
        fprintf(stderr, "ddp-trainer: cannot create the run directory %s: %s\n", o->run_dir, strerror(errno));
        return EXIT_BAD_INPUT;
    }
    char run_dir_copy[2048], path[2048], err[1024], warning[1024], why[512];
    snprintf(run_dir_copy, sizeof run_dir_copy, "%s", o->run_dir);
    L.run_id = getenv("DDPD_RUN_ID") ? getenv("DDPD_RUN_ID") : basename(run_dir_copy);
    L.secret = take_secret();

    snprintf(path, sizeof path, "%s/trainer.log", o->run_dir);
    log_open(path, "launcher");
    snprintf(path, sizeof path, "%s/events.jsonl", o->run_dir);
    L.events = event_sink_open(o->events_target, path, L.run_id, EVENT_RANK_LAUNCHER, L.secret, err, sizeof err, warning,
                               sizeof warning);
    if (!L.events) {
        fprintf(stderr, "ddp-trainer: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    log_set_events(L.events);
    send_hello(&L);
    if (warning[0]) log_msg(LOG_WARN, "%s", warning);

    int backend = backend_select(&L.cfg, L.local, why, sizeof why);
    if (backend < 0) {
        end_run(&L, "failed", why, EXIT_BAD_INPUT);
        return EXIT_BAD_INPUT;
    }
    L.backend = backend;
    log_msg(LOG_INFO, "run %s: %d rank%s, %s", L.run_id, L.world, L.world > 1 ? "s" : "", why);
    int rc = start_and_supervise(&L);
    if (L.have_train) idx_free(&L.train);
    if (L.have_test) idx_free(&L.test);
    if (L.group) coll_cpu_group_destroy(L.group);
    run_board_destroy(L.board);
    free(L.ranks);
    log_close();
    return rc;
}

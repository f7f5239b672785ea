/* The agents' executor: see executor_agents.h. */
#include "executor_agents.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "journal_writers.h"
#include "node_relay.h"
#include "nodes.h"
#include "part_desc.h"

/* One part on an agent node. */
typedef struct agent_part {
    int64_t run;
    int part; /* its node rank */
    int node;
    int per_node;  /* ranks on the node */
    int restart_count; /* the attempt it starts at: an agent's report of an earlier part of the run is not its */
    json_t *desc;  /* what its agent is told: the heartbeat answer's entry */
    bool stop;     /* left out of the answer from now on */
    bool ended;
    char *refused; /* why it cannot start (its run's account, part_launch.account_refused): never handed to its
                    * agent; the tick tells the scheduler its start failed */
    bool refusal_told;
    struct agent_part *next;
} agent_part;

static struct {
    executor_hooks hooks;
    pthread_mutex_t mu;
    agent_part *parts; /* in the order they were started */
} A = {.mu = PTHREAD_MUTEX_INITIALIZER};

static agent_part **slot_of(int64_t run, int part) {
    agent_part **p = &A.parts;
    while (*p && !((*p)->run == run && (*p)->part == part)) p = &(*p)->next;
    return p;
}

/* The run's part on the node that starts at attempt `restart_count` (NO_INT: any;
 * an agent that does not say). */
static agent_part *on_node(int64_t run, int node, int64_t restart_count) {
    for (agent_part *p = A.parts; p; p = p->next)
        if (p->run == run && p->node == node && (restart_count == NO_INT || p->restart_count == restart_count))
            return p;
    return NULL;
}

/* What an agent needs to start its part (part_desc.h), with its devices there; its
 * config is added when the agent is answered (executor_agents_heartbeat). */
static json_t *part_json(const part_launch *l) {
    json_t *devices = json_array();
    for (int d = 0; d < l->n_devices; d++) {
        if (l->gpu) json_array_append_new(devices, json_string(nodes_gpu_id(l->node, l->devices[d])));
        else json_array_append_new(devices, json_integer(l->devices[d]));
    }
    return part_description(l, l->master_addr, l->master_port, devices);
}

static start_result agents_start(const part_launch *l, part_handle *h) {
    journal_writers_started(l->run); /* before the relay may write into its directory */
    agent_part *p = xcalloc(1, sizeof *p);
    p->run = l->run;
    p->part = l->part;
    p->node = l->node;
    p->per_node = l->n_devices;
    p->restart_count = l->restart_count;
    p->desc = part_json(l);
    p->refused = l->account_refused ? xstrdup(l->account_refused) : NULL;
    p->ended = p->refused != NULL; /* it never runs: no end to wait for, no loss to tell */
    pthread_mutex_lock(&A.mu);
    agent_part **tail = &A.parts;
    while (*tail) tail = &(*tail)->next;
    *tail = p;
    pthread_mutex_unlock(&A.mu);
    h->node = l->node;
    return p->refused ? START_PENDING : START_DONE; /* a refusal: a start that failed, told from the tick (a hook
                                                       * takes the scheduler's lock, held here) */
}

static void agents_stop(int64_t run, int part, int grace_ms) {
    (void)grace_ms; /* the agent's own */
    pthread_mutex_lock(&A.mu);
    agent_part *p = *slot_of(run, part);
    if (p) p->stop = true;
    pthread_mutex_unlock(&A.mu);
}

static void agents_release(int64_t run, int part) {
    pthread_mutex_lock(&A.mu);
    agent_part **slot = slot_of(run, part), *p = *slot;
    if (p) *slot = p->next;
    pthread_mutex_unlock(&A.mu);
    if (!p) return;
    json_decref(p->desc);
    free(p->refused);
    free(p); /* (where its logs were is kept while the run lives: its next attempt's logs go on from there) */
}

/* An agent's word on one of its parts: an exit is its end. */
static void part_report(int node, const json_t *rep) {
    int64_t run = (int64_t)json_integer_value(json_object_get(rep, "run"));
    const char *state = json_string_value(json_object_get(rep, "state"));
    if (!state || strcmp(state, "exited") != 0) return;
    const json_t *count = json_object_get(rep, "restart_count");
    pthread_mutex_lock(&A.mu);
    agent_part *p = on_node(run, node, json_is_integer(count) ? json_integer_value(count) : NO_INT);
    bool ends = p && !p->ended;
    int part = ends ? p->part : 0;
    if (ends) p->ended = true;
    pthread_mutex_unlock(&A.mu);
    if (!ends) return;
    const json_t *code = json_object_get(rep, "exit_code"), *sig = json_object_get(rep, "signal");
    const json_t *t = json_object_get(rep, "end_t");
    const char *reason = json_string_value(json_object_get(rep, "reason"));
    part_end e = {.exit_code = json_is_integer(code) ? json_integer_value(code) : NO_INT,
                  .exit_signal = json_is_integer(sig) ? json_integer_value(sig) : NO_INT,
                  .reason = reason && reason[0] ? reason : NULL,
                  .end_t = json_is_integer(t) ? json_integer_value(t) : now_ms()};
    A.hooks.ended(run, part, &e);
}

json_t *executor_agents_heartbeat(int node, const json_t *reports) {
    size_t i;
    json_t *rep;
    json_array_foreach(reports, i, rep) part_report(node, rep);
    json_t *parts = json_array();
    pthread_mutex_lock(&A.mu);
    for (agent_part *p = A.parts; p; p = p->next)
        if (p->node == node && !p->ended && !p->stop && !p->refused) json_array_append(parts, p->desc);
    pthread_mutex_unlock(&A.mu);
    /* A part's config is read from its run directory here, the first time it is asked
     * for, not in agents_start (under the scheduler's lock). A description is never
     * changed once made (answers being written hold it): the one with its config
     * replaces it. */
    json_t *desc;
    json_array_foreach(parts, i, desc) {
        if (json_is_object(json_object_get(desc, "config"))) continue;
        json_t *whole = json_copy(desc);
        if (part_description_add_config(whole)) {
            pthread_mutex_lock(&A.mu);
            for (agent_part *p = A.parts; p; p = p->next)
                if (p->desc == desc) {
                    json_decref(p->desc);
                    p->desc = json_incref(whole);
                }
            pthread_mutex_unlock(&A.mu);
            json_array_set(parts, i, whole);
        }
        json_decref(whole);
    }
    return parts;
}

/* The parts whose account cannot be used: their start failed. Nodes not heard from
 * for the node timeout are lost, and every part they ran ends: lost, naming the node. */
static void agents_tick(void) {
    for (;;) { /* the starts refused: one at a time, the hook may release others */
        pthread_mutex_lock(&A.mu);
        agent_part *p = A.parts;
        while (p && !(p->refused && !p->refusal_told)) p = p->next;
        int64_t run = p ? p->run : 0;
        int part = p ? p->part : 0;
        char *why = p ? xstrdup(p->refused) : NULL;
        if (p) p->refusal_told = true;
        pthread_mutex_unlock(&A.mu);
        if (!why) break;
        A.hooks.started(run, part, NULL, why);
        free(why);
    }
    int ids[NODES_MAX];
    int64_t silent[NODES_MAX];
    int n = nodes_take_lost(mono_ms(), ids, silent, NODES_MAX);
    for (int i = 0; i < n; i++) {
        char name[NODE_NAME_MAX], address[NODE_ADDR_MAX] = "";
        if (!nodes_describe(ids[i], name, sizeof name, address, sizeof address))
            snprintf(name, sizeof name, "%d", ids[i]);
        log_warn("node %s (%s) is lost: nothing heard from it for %.1f s", name, address, (double)silent[i] / 1000);
        relay_node_lost(ids[i]);
        for (;;) { /* one part at a time: the hook may stop and release others */
            pthread_mutex_lock(&A.mu);
            agent_part *p = A.parts;
            while (p && !(p->node == ids[i] && !p->ended)) p = p->next;
            int64_t run = p ? p->run : 0;
            int part = p ? p->part : 0;
            char *why = p ? xasprintf("node %s (ranks %d to %d) stopped heartbeating: nothing heard from it for %.0f "
                                      "s (the node timeout); the run was stopped on every node", name,
                                      p->part * p->per_node, (p->part + 1) * p->per_node - 1,
                                      (double)silent[i] / 1000)
                          : NULL;
            if (p) p->ended = true;
            pthread_mutex_unlock(&A.mu);
            if (!why) break;
            part_end e = {.exit_code = NO_INT, .exit_signal = NO_INT, .reason = why, .end_t = now_ms(), .lost = true};
            A.hooks.ended(run, part, &e);
            free(why);
        }
    }
}

static const executor AGENTS = {.name = "agents", .title = "the agent nodes", .start = agents_start, .stop = agents_stop,
                                .release = agents_release, .tick = agents_tick};

const executor *executor_agents_init(int64_t node_timeout_ms, const executor_hooks *hooks) {
    A.hooks = *hooks;
    nodes_init(node_timeout_ms);
    return &AGENTS;
}

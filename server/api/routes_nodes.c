/* The nodes' routes: see routes_nodes.h. An agent's requests carry the server's
 * token (changing anything needs it); its heartbeat is one request a second that
 * carries its event lines and log chunks, then its parts' states, and answers with
 * what was taken of them and the parts it should run. */
#include "routes_nodes.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "base.h"
#include "executor_agents.h"
#include "fnv.h"
#include "ids.h"
#include "ingest.h"
#include "node_relay.h"
#include "nodes.h"
#include "run_mask.h"
#include "scheduler.h"

#define HEARTBEAT_S 1

/* A node name: letters, digits, '.', '_' and '-', 1 to 63 of them (it is part of
 * device names and log prefixes). */
static bool name_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n >= NODE_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i])) return false;
    return true;
}

static json_t *body_object(request *rq, response *rs) {
    json_error_t e;
    json_t *b = json_loadb(rq->body, rq->body_len, 0, &e);
    if (!json_is_object(b)) {
        reply_problem(rs, 400, NULL, "the body is not a JSON object: %s", b ? "it is another JSON value" : e.text);
        json_decref(b);
        return NULL;
    }
    return b;
}

/* POST /nodes {"name", "address", "slots", "gpus": [...]} -> 201 {"id", "heartbeat_s"} */
static void post_nodes(request *rq, response *rs) {
    json_t *b = body_object(rq, rs);
    if (!b) return;
    const char *name = json_string_value(json_object_get(b, "name"));
    const char *address = json_string_value(json_object_get(b, "address"));
    json_t *slots = json_object_get(b, "slots"), *gpus = json_object_get(b, "gpus");
    const char *bad = !name_ok(name) ? "name: 1 to 63 letters, digits, '.', '_' or '-' is needed"
                      : !address || !*address || strlen(address) >= NODE_ADDR_MAX
                          ? "address: the address other nodes reach this node at is needed (ddpd agent --advertise)"
                      : !json_is_integer(slots) || json_integer_value(slots) < 0 || json_integer_value(slots) > NODE_MAX_DEVICES
                          ? "slots: a number of CPU slots from 0 to 256 is needed"
                      : gpus && (!json_is_array(gpus) || json_array_size(gpus) > NODE_MAX_DEVICES)
                          ? "gpus: a list of GPU ids is needed"
                          : NULL;
    const char *ids[NODE_MAX_DEVICES];
    size_t n_gpus = json_array_size(gpus);
    for (size_t i = 0; !bad && i < n_gpus; i++) {
        ids[i] = json_string_value(json_array_get(gpus, i));
        if (!ids[i] || !*ids[i] || strlen(ids[i]) > 90) bad = "gpus: each GPU id is a string of 1 to 90 characters";
    }
    if (bad) {
        reply_problem(rs, 400, NULL, "cannot register the node: %s", bad);
        json_decref(b);
        return;
    }
    node_spec spec = {.name = name, .address = address, .slots = (int)json_integer_value(slots), .gpus = ids,
                      .n_gpus = (int)n_gpus};
    char err[256];
    int id = -1;
    if (strcmp(name, scheduler_local_name()) == 0)
        snprintf(err, sizeof err, "that is this coordinator's own node name (serve --node-name): give the agent "
                 "another (ddpd agent --name)");
    else
        id = nodes_register(&spec, err, sizeof err);
    if (id < 0) reply_problem(rs, 409, NULL, "cannot register node %s: %s", name, err);
    else {
        log_info("node %s (id %d, %s) registered: %d CPU slots, %zu GPUs", name, id, address, spec.slots, n_gpus);
        reply_json(rs, 201, json_pack("{s:i, s:s, s:i}", "id", id, "name", name, "heartbeat_s", HEARTBEAT_S));
    }
    json_decref(b);
}

/* A mark's evidence is a line of the failed run's output (a rank's last words): only
 * the run's owner and admins read it (run_mask.h's rule); anyone else sees the class,
 * the run's id and RUN_MASK_HIDDEN in its place, and "hidden" says so. */
static void mask_mark(json_t *mark, const caller *who) {
    if (!json_is_object(mark) || run_mask_sees_all(who, json_string_value(json_object_get(mark, "owner")))) return;
    json_object_set_new(mark, "evidence", json_string(RUN_MASK_HIDDEN));
    json_object_set_new(mark, "hidden", json_pack("[s]", "evidence"));
}

/* GET /nodes, tagged by its bytes as this caller reads them (the evidence hidden or
 * not): a poller that sends the tag back in If-None-Match gets 304 until it changes. */
static void get_nodes(request *rq, response *rs) {
    const caller *who = rq_caller(rq);
    json_t *nodes = scheduler_nodes_json(), *marks = scheduler_suspects_json(), *x;
    size_t i;
    json_array_foreach(nodes, i, x) {
        mask_mark(json_object_get(x, "suspect"), who);
        mask_mark(json_object_get(x, "watch"), who);
    }
    json_array_foreach(marks, i, x) mask_mark(x, who);
    json_t *body = json_pack("{s:o, s:o}", "nodes", nodes, "suspects", marks);
    char *text = json_dumps(body, JSON_COMPACT);
    char etag[96];
    snprintf(etag, sizeof etag, "\"%016llx-nodes\"", (unsigned long long)fnv1a64(text, text ? strlen(text) : 0));
    free(text);
    if (rq_if_none_match(rq, etag)) {
        json_decref(body);
        reply_not_modified(rs, etag);
        return;
    }
    reply_json(rs, 200, body);
    snprintf(rs->etag, sizeof rs->etag, "%s", etag);
}

/* POST /nodes/{name}/clear: an admin clears a node's suspect mark (docs/failures.md). */
static void post_clear(request *rq, response *rs) {
    const caller *who = rq_caller(rq);
    if (!who->admin) {
        reply_problem(rs, 403, NULL, "only an admin clears a suspect node (a user's token may not): ask one, or "
                      "ddpd node clear NAME on the server's state directory");
        return;
    }
    const char *name = rq->id_text;
    if (!name_ok(name)) {
        reply_problem(rs, 400, NULL, "\"%.60s\" is not a node name (1 to 63 letters, digits, '.', '_' or '-'): "
                      "GET /nodes lists them", name ? name : "");
        return;
    }
    const char *by = who->name[0] ? who->name : "the server's token";
    if (!scheduler_node_clear(name, by)) {
        reply_problem(rs, 404, NULL, "node %s is not marked suspect or excluded: GET /nodes lists the marks", name);
        return;
    }
    char actor[128], target[96];
    snprintf(target, sizeof target, "node/%s", name);
    audit_queue(audit_actor(who, actor, sizeof actor), "node.clear", 0, target, NULL, NULL);
    reply_json(rs, 200, json_pack("{s:s, s:b}", "node", name, "cleared", 1));
}

/* POST /nodes/{id}/heartbeat {"parts": [...], "streams": [...], "logs": [...]} */
static void post_heartbeat(request *rq, response *rs) {
    int64_t id;
    char name[NODE_NAME_MAX], address[NODE_ADDR_MAX];
    if (!parse_run_id(rq->id_text, &id) || id > NODES_MAX * 1000000LL || !nodes_heard((int)id) ||
        !nodes_describe((int)id, name, sizeof name, address, sizeof address)) {
        reply_problem(rs, 404, NULL, "there is no node \"%.60s\" up on this coordinator: register again (POST /nodes)",
                      rq->id_text);
        return;
    }
    json_t *b = body_object(rq, rs);
    if (!b) return;
    json_t *streams = relay_streams_json((int)id, json_object_get(b, "streams"));
    json_t *logs = relay_logs_json((int)id, name, json_object_get(b, "logs"));
    /* what was relayed is read before a part's exit is heard: its last events count */
    ingest_sync();
    json_t *parts = executor_agents_heartbeat((int)id, json_object_get(b, "parts"));
    /* verbatim: the parts carry the commands, configs and paths the agent starts */
    reply_json_verbatim(rs, 200, json_pack("{s:o, s:o, s:o, s:i}", "parts", parts, "streams", streams, "logs", logs,
                                  "heartbeat_s", HEARTBEAT_S));
    json_decref(b);
}

const route node_routes[] = {
    {.method = "POST", .pattern = "/nodes", .handler = post_nodes, .json_body = true},
    {.method = "GET", .pattern = "/nodes", .handler = get_nodes},
    {.method = "POST", .pattern = "/nodes/{id}/heartbeat", .handler = post_heartbeat, .json_body = true},
    {.method = "POST", .pattern = "/nodes/{id}/clear", .handler = post_clear},
};
const size_t node_routes_count = sizeof node_routes / sizeof *node_routes;

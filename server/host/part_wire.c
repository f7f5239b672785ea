/* A part's description on the wire: see part_wire.h. */
#include "part_wire.h"

#include <stdio.h>
#include <string.h>

json_t *part_wire_write(const part_wire *w) {
    json_t *j = json_pack("{s:I, s:i, s:i, s:i, s:b, s:b, s:s, s:s, s:s, s:i, s:s, s:i, s:i}", "run", (json_int_t)w->run,
                          "node_rank", w->node_rank, "nodes", w->nodes, "world_size", w->world_size, "command",
                          w->command, "resume", w->resume, "pool", w->gpu ? "gpu" : "cpu", "secret", w->secret,
                          "master_addr", w->master_addr ? w->master_addr : "", "master_port", w->master_port,
                          "rendezvous", w->rendezvous, "restart_count", w->restart_count, "restarts_from",
                          w->restarts_from);
    if (!j) return NULL; /* a NULL secret or rendezvous */
    json_object_set_new(j, "config", w->config ? json_incref((json_t *)w->config) : json_null());
    json_object_set_new(j, "devices", w->devices ? json_incref((json_t *)w->devices) : json_array());
    if (w->graces) { /* its launcher's grace for its ranks (the agent kills it a little later) */
        json_object_set_new(j, "stop_grace_s", json_integer(w->stop_grace_s));
        json_object_set_new(j, "preempt_grace_s", json_integer(w->preempt_grace_s));
    }
    if (w->port_lo > 0) json_object_set_new(j, "port_range", json_pack("[i,i]", w->port_lo, w->port_hi));
    if (w->account) json_object_set_new(j, "account", json_string(w->account));
    return j;
}

static bool fail(char *why, size_t n, const char *what) {
    snprintf(why, n, "%s", what);
    return false;
}

bool part_wire_read(const json_t *j, part_wire *w, char *why, size_t why_len) {
    memset(w, 0, sizeof *w);
    if (!json_is_object(j)) return fail(why, why_len, "not an object");
    const json_t *run = json_object_get(j, "run"), *world = json_object_get(j, "world_size");
    if (!json_is_integer(run) || json_integer_value(run) < 1) return fail(why, why_len, "no run id");
    w->run = json_integer_value(run);
    w->node_rank = (int)json_integer_value(json_object_get(j, "node_rank"));
    w->nodes = (int)json_integer_value(json_object_get(j, "nodes"));
    w->world_size = (int)json_integer_value(world);
    if (w->world_size < 1 || w->node_rank < 0 || w->nodes < 0 || (w->nodes > 0 && w->node_rank >= w->nodes))
        return fail(why, why_len, "no world size, or a node rank outside its nodes");
    w->command = json_is_true(json_object_get(j, "command"));
    w->resume = json_is_true(json_object_get(j, "resume"));
    const char *pool = json_string_value(json_object_get(j, "pool"));
    w->gpu = pool && strcmp(pool, "gpu") == 0;
    w->secret = json_string_value(json_object_get(j, "secret"));
    w->master_addr = json_string_value(json_object_get(j, "master_addr"));
    w->rendezvous = json_string_value(json_object_get(j, "rendezvous"));
    if (!w->secret || !w->master_addr || !w->rendezvous)
        return fail(why, why_len, "no secret, master address or rendezvous");
    w->master_port = (int)json_integer_value(json_object_get(j, "master_port"));
    w->restart_count = (int)json_integer_value(json_object_get(j, "restart_count"));
    w->restarts_from = (int)json_integer_value(json_object_get(j, "restarts_from"));
    const json_t *stop = json_object_get(j, "stop_grace_s"), *preempt = json_object_get(j, "preempt_grace_s");
    w->graces = json_is_integer(stop) && json_is_integer(preempt); /* a coordinator that does not say: ddp-run's own */
    w->stop_grace_s = (int)json_integer_value(stop);
    w->preempt_grace_s = (int)json_integer_value(preempt);
    const json_t *range = json_object_get(j, "port_range");
    w->port_lo = (int)json_integer_value(json_array_get(range, 0));
    w->port_hi = (int)json_integer_value(json_array_get(range, 1));
    w->config = json_object_get(j, "config");
    if (!json_is_object(w->config)) return fail(why, why_len, "no run config");
    w->devices = json_object_get(j, "devices");
    const json_t *account = json_object_get(j, "account"); /* absent: the node's own user, as before accounts */
    w->account = json_string_value(account);
    if (account && (!w->account || !w->account[0] || strlen(w->account) > 32))
        return fail(why, why_len, "an account that is not an account's name");
    return true;
}

/* A part's description: see part_desc.h. */
#include "part_desc.h"

#include <stdlib.h>

#include "state_layout.h"

json_t *part_description(const part_launch *l, const char *master_addr, int master_port, json_t *devices) {
    char *path = layout_run_path(l->run, RUN_FILE_CONFIG);
    json_t *config = json_load_file(path, 0, NULL); /* as this host's trainer reads it: paths resolved */
    free(path);
    json_t *part = json_pack("{s:I, s:i, s:i, s:i, s:b, s:b, s:o, s:s, s:s, s:i, s:s, s:s, s:o}", "run",
                             (json_int_t)l->run, "node_rank", l->part, "nodes", l->nodes, "world_size", l->world_size,
                             "command", l->command, "resume", l->resume, "config", config ? config : json_null(),
                             "secret", l->secret, "master_addr", master_addr ? master_addr : "", "master_port",
                             master_port, "rendezvous", l->rendezvous, "pool", l->gpu ? "gpu" : "cpu", "devices",
                             devices ? devices : json_array());
    /* a run started again: its attempt names the part (the node's earlier one of the run has ended) */
    json_object_set_new(part, "restart_count", json_integer(l->restart_count));
    json_object_set_new(part, "restarts_from", json_integer(l->restarts_from));
    if (l->command) { /* its launcher's grace for its ranks (the agent kills it a little later) */
        json_object_set_new(part, "stop_grace_s", json_integer(l->stop_grace_s));
        json_object_set_new(part, "preempt_grace_s", json_integer(l->preempt_grace_s));
    }
    if (l->command && l->port_lo > 0) json_object_set_new(part, "port_range", json_pack("[i,i]", l->port_lo, l->port_hi));
    return part;
}

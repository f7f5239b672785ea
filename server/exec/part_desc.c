/* A part's description: see part_desc.h. */
#include "part_desc.h"

#include <stdlib.h>

#include "part_wire.h"
#include "state_layout.h"

json_t *part_description(const part_launch *l, const char *master_addr, int master_port, json_t *devices) {
    part_wire w = {.run = l->run, .node_rank = l->part, .nodes = l->nodes, .world_size = l->world_size,
                   .command = l->command, .resume = l->resume, .gpu = l->gpu, .secret = l->secret,
                   .master_addr = master_addr, .master_port = master_port, .rendezvous = l->rendezvous,
                   .restart_count = l->restart_count, .restarts_from = l->restarts_from, .graces = l->command,
                   .stop_grace_s = l->stop_grace_s, .preempt_grace_s = l->preempt_grace_s,
                   .port_lo = l->command ? l->port_lo : 0, .port_hi = l->command ? l->port_hi : 0,
                   .devices = devices, .account = l->account ? l->account->name : NULL};
    json_t *desc = part_wire_write(&w);
    json_decref(devices);
    return desc;
}

bool part_description_add_config(json_t *desc) {
    if (json_is_object(json_object_get(desc, "config"))) return true;
    char *path = layout_run_path(json_integer_value(json_object_get(desc, "run")), RUN_FILE_CONFIG);
    json_t *config = json_load_file(path, 0, NULL); /* as this host's trainer reads it: paths resolved */
    free(path);
    if (!config) return false;
    json_object_set_new(desc, "config", config);
    return true;
}

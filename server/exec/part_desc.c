/* A part's description: see part_desc.h. */
#include "part_desc.h"

#include <stdlib.h>

#include "part_wire.h"
#include "run_dir.h"
#include "run_files.h"
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
    char *dir = layout_run_dir(json_integer_value(json_object_get(desc, "run"))), why[512];
    /* as this host's trainer reads it (paths resolved), as the run's own file (run_files.h) */
    json_t *config = run_file_load_json_in(dir, RUN_DIR_CONFIG, RUN_FILE_SMALL_MAX, why, sizeof why);
    free(dir);
    if (!config) return false;
    json_object_set_new(desc, "config", config);
    return true;
}

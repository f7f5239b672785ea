/* `ddpd node`: see node_cmd.h. */
#include "node_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "die.h"
#include "node_marks.h"
#include "settings.h"

const char NODE_USAGE[] =
    "usage: ddpd node list [--state-dir DIR]\n"
    "       ddpd node clear NAME [--state-dir DIR]\n"
    "\n"
    "The nodes a failure marked (docs/failures.md): a node where --suspect-after attempts failed in a way\n"
    "that blames the place (class infra, collective, hang or crash) within --exclude-node-window is\n"
    "suspect (or only its device, when they all failed on one): no run goes there while another place\n"
    "fits, and a run restarted by retry_elsewhere never; one where --exclude-node-after runs failed within\n"
    "the window is excluded: no run goes there. Fewer failures: watched. Only an admin clears a mark.\n"
    "\n"
    "  list                 every mark: the node, watched, suspect or excluded, the device, since when,\n"
    "                       the class and evidence\n"
    "  clear NAME           clears NAME's mark; a running server takes it within a second\n"
    "  --state-dir DIR      the server's state directory (DDPD_STATE_DIR; default as ddpd serve's)\n";

int node_main(int argc, char **argv) {
    const char *verb = argc >= 3 ? argv[2] : NULL, *name = NULL, *state_flag = NULL;
    if (!verb || strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0) {
        fputs(NODE_USAGE, verb ? stdout : stderr);
        return verb ? 0 : 2;
    }
    if (strcmp(verb, "list") != 0 && strcmp(verb, "clear") != 0)
        die("ddpd node: \"%.60s\" is not list or clear (ddpd node --help)", verb);
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--state-dir") == 0) {
            if (i + 1 >= argc) die("--state-dir needs a value");
            state_flag = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            die("ddpd node %s takes no %s (ddpd node --help)", verb, argv[i]);
        } else if (strcmp(verb, "clear") == 0 && !name) {
            name = argv[i];
        } else {
            die("unexpected argument \"%s\" (ddpd node --help)", argv[i]);
        }
    }
    if (strcmp(verb, "clear") == 0 && !name) die("ddpd node clear needs the node's NAME (ddpd node list)");
    char *state_dir = settings_state_dir(state_flag), err[512];
    json_t *all = suspects_read_dir(state_dir, err, sizeof err);
    if (!all) die("%s", err);
    int rc = 0;
    if (strcmp(verb, "list") == 0) {
        /* watched: failures below --suspect-after, which place nothing elsewhere yet */
        printf("%-20s %-9s %-12s %-20s %-11s %-8s %-5s %s\n", "NODE", "STATE", "DEVICE", "SINCE", "CLASS", "FAILURES",
               "RUNS", "EVIDENCE");
        size_t i;
        json_t *m;
        json_array_foreach(all, i, m) {
            /* a mark from a server before --suspect-after has no state: it was in force */
            const char *state = json_string_value(json_object_get(m, "state"));
            const char *device = json_string_value(json_object_get(m, "device"));
            printf("%-20s %-9s %-12s %-20.19s %-11s %-8zu %-5lld run %lld: %s\n",
                   json_string_value(json_object_get(m, "node")),
                   state ? state : json_is_true(json_object_get(m, "excluded")) ? "excluded" : "suspect",
                   device ? device : "(node)", json_string_value(json_object_get(m, "since")),
                   json_string_value(json_object_get(m, "class")), json_array_size(json_object_get(m, "failures")),
                   (long long)json_integer_value(json_object_get(m, "failed_runs")),
                   (long long)json_integer_value(json_object_get(m, "run_id")),
                   json_string_value(json_object_get(m, "evidence")));
        }
        if (!json_array_size(all)) printf("(no node is marked suspect, excluded or watched)\n");
    } else {
        bool marked = false;
        size_t i;
        json_t *m;
        json_array_foreach(all, i, m) marked = marked || strcmp(json_string_value(json_object_get(m, "node")), name) == 0;
        if (suspects_request_clear(state_dir, name, err, sizeof err) != 0) die("%s", err);
        if (marked)
            printf("node %s: cleared (a running server takes it within a second)\n", name);
        else {
            printf("node %s: not marked as the state directory says; the request is left for the server\n", name);
        }
    }
    json_decref(all);
    free(state_dir);
    return rc;
}

/* ddpctl nodes: see nodes_cmd.h. One row per node (its state, free slots and GPUs,
 * its mark), then one per mark: the node or device, since when, the class, the
 * failures and the evidence (<hidden> for another user's run: docs/failures.md). */
#include "nodes_cmd.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "client_http.h"
#include "format.h"

static const char *str_or(const json_t *v, const char *dflt) {
    return json_is_string(v) ? json_string_value(v) : dflt;
}

/* "cpu:0, cpu:1" from an array of names; "-" when empty. */
static void names_of(const json_t *a, char *out, size_t n) {
    size_t i, at = 0;
    json_t *x;
    out[0] = 0;
    json_array_foreach(a, i, x) at += (size_t)snprintf(out + at, at < n ? n - at : 0, "%s%s", i ? ", " : "",
                                                       str_or(x, "?"));
    if (!out[0]) snprintf(out, n, "-");
}

int nodes_command(bool json) {
    int ec = 0;
    json_t *o = get_json("/nodes", &ec);
    if (!o) return ec;
    if (json) {
        json_dumpf(o, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(o);
        return EXIT_OK;
    }
    table t;
    table_init(&t, 6);
    table_row(&t, (const char *const[]){"NODE", "STATE", "SLOTS FREE", "GPUS FREE", "MARK", "SUSPECT DEVICES"});
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(o, "nodes"), i, n) {
        char slots[32], gpus[32], devs[256];
        snprintf(slots, sizeof slots, "%lld/%lld", (long long)json_integer_value(json_object_get(n, "free_slots")),
                 (long long)json_integer_value(json_object_get(n, "slots")));
        snprintf(gpus, sizeof gpus, "%lld/%zu", (long long)json_integer_value(json_object_get(n, "free_gpus")),
                 json_array_size(json_object_get(n, "gpus")));
        names_of(json_object_get(n, "suspect_devices"), devs, sizeof devs);
        json_t *m = json_object_get(n, "suspect");
        const char *mark = !json_is_object(m) ? "-" : json_is_true(json_object_get(m, "excluded")) ? "excluded"
                           : json_is_true(json_object_get(m, "suspect"))                           ? "suspect"
                                                                                                   : "devices";
        table_row(&t, (const char *const[]){str_or(json_object_get(n, "name"), "?"),
                                            str_or(json_object_get(n, "state"), "?"), slots, gpus, mark, devs});
    }
    table_print(&t, stdout);
    table_free(&t);
    json_t *marks = json_object_get(o, "suspects");
    if (!json_array_size(marks)) {
        printf("\nno node or device is marked suspect or excluded\n");
        json_decref(o);
        return EXIT_OK;
    }
    printf("\n");
    table m;
    table_init(&m, 8);
    table_row(&m, (const char *const[]){"NODE", "STATE", "WHAT", "SINCE", "CLASS", "FAILURES", "RUN", "EVIDENCE"});
    json_array_foreach(marks, i, n) {
        char since[40], fails[16], run[24], what[256];
        fmt_time(str_or(json_object_get(n, "since"), ""), since, sizeof since);
        snprintf(fails, sizeof fails, "%zu", json_array_size(json_object_get(n, "failures")));
        snprintf(run, sizeof run, "%lld", (long long)json_integer_value(json_object_get(n, "run_id")));
        if (json_is_true(json_object_get(n, "suspect")) || json_is_true(json_object_get(n, "excluded")))
            snprintf(what, sizeof what, "the node");
        else names_of(json_object_get(n, "devices"), what, sizeof what);
        table_row(&m, (const char *const[]){str_or(json_object_get(n, "node"), "?"),
                                            str_or(json_object_get(n, "state"), "?"), what, since,
                                            str_or(json_object_get(n, "class"), "-"), fails, run,
                                            str_or(json_object_get(n, "evidence"), "-")});
    }
    table_print(&m, stdout);
    table_free(&m);
    printf("an admin clears a mark: ddpd node clear NAME, or POST /nodes/{name}/clear (docs/failures.md)\n");
    json_decref(o);
    return EXIT_OK;
}

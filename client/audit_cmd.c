/* ddpctl audit: see audit_cmd.h. */
#include "audit_cmd.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_http.h"
#include "format.h"

int audit_command(const char *actor, const char *target, const char *since, const char *limit, bool json) {
    char path[2048] = "", q[1900] = "";
    query_add(q, sizeof q, "actor", actor);
    query_add(q, sizeof q, "target", target);
    query_add(q, sizeof q, "since", since);
    query_add(q, sizeof q, "limit", limit);
    snprintf(path, sizeof path, "/audit%s", q);
    int ec = 0;
    json_t *o = get_json(path, &ec);
    if (!o) return ec;
    if (json) {
        json_dumpf(o, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(o);
        return EXIT_OK;
    }
    json_t *entries = json_object_get(o, "entries");
    if (!json_array_size(entries)) printf("no entries\n");
    table t;
    table_init(&t, 5);
    const char *head[5] = {"TIME", "ACTOR", "ACTION", "TARGET", "DETAIL"};
    table_row(&t, head);
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        char when[32];
        fmt_time(json_string_value(json_object_get(e, "t")), when, sizeof when);
        char *detail = json_dumps(json_object_get(e, "detail"), JSON_COMPACT | JSON_SORT_KEYS);
        const char *row[5] = {when, json_string_value(json_object_get(e, "actor")),
                              json_string_value(json_object_get(e, "action")),
                              json_string_value(json_object_get(e, "target")),
                              detail && strcmp(detail, "{}") != 0 ? detail : "-"};
        table_row(&t, row);
        free(detail);
    }
    if (json_array_size(entries)) table_print(&t, stdout);
    table_free(&t);
    if (json_is_integer(json_object_get(o, "next_after")))
        printf("(more: the first %zu shown; --limit N shows more)\n", json_array_size(entries));
    json_decref(o);
    return EXIT_OK;
}

/* ddpctl usage: see usage_cmd.h. One row per group (user, run or day and user), then
 * the box: device hours held, each phase's share of them, queue wait, goodput. */
#include "usage_cmd.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "client_http.h"
#include "format.h"

static const char *const PHASES[] = {"startup", "productive", "checkpoint", "lost", "idle", "unknown"};
#define N_PHASES (sizeof PHASES / sizeof *PHASES)
#define COLS (3 + N_PHASES + 2)

/* Device seconds as hours ("12.50h"), or seconds under an hour ("42.0s"). */
static void fmt_device_s(double s, char *out, size_t n) {
    if (s >= 3600) snprintf(out, n, "%.2fh", s / 3600);
    else snprintf(out, n, "%.1fs", s);
}

static void row_of(table *t, const char *name, const char *extra, json_t *g) {
    char cells[COLS][32];
    const char *row[COLS];
    json_t *phases = json_object_get(g, "phases");
    double held = json_number_value(json_object_get(g, "held_device_s"));
    snprintf(cells[0], 32, "%s", name);
    snprintf(cells[1], 32, "%s", extra);
    fmt_device_s(held, cells[2], 32);
    for (size_t p = 0; p < N_PHASES; p++) {
        double v = json_number_value(json_object_get(phases, PHASES[p]));
        if (held > 0) snprintf(cells[3 + p], 32, "%.1f%%", 100.0 * v / held);
        else snprintf(cells[3 + p], 32, "-");
    }
    fmt_duration(json_number_value(json_object_get(phases, "queue")), cells[3 + N_PHASES], 32);
    json_t *gp = json_object_get(g, "goodput");
    if (json_is_number(gp)) snprintf(cells[4 + N_PHASES], 32, "%.1f%%", 100.0 * json_number_value(gp));
    else snprintf(cells[4 + N_PHASES], 32, "-");
    for (size_t i = 0; i < COLS; i++) row[i] = cells[i];
    table_row(t, row);
}

int usage_command(const char *by, const char *from, const char *to, bool json) {
    char path[512];
    int at = snprintf(path, sizeof path, "/usage?by=%s", by ? by : "user");
    if (from) at += snprintf(path + at, sizeof path - (size_t)at, "&from=%s", from);
    if (to) snprintf(path + at, sizeof path - (size_t)at, "&to=%s", to);
    for (char *c = path; *c; c++) if (*c == ' ' || *c == '+') *c = '_'; /* a time has neither */
    int ec = 0;
    json_t *o = get_json(path, &ec);
    if (!o) return ec;
    if (json) {
        json_dumpf(o, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(o);
        return EXIT_OK;
    }
    const char *how = json_string_value(json_object_get(o, "by"));
    bool by_run = how && !strcmp(how, "run"), by_day = how && !strcmp(how, "day");
    table t;
    table_init(&t, COLS);
    const char *head[COLS] = {"USER", by_run ? "RUN" : by_day ? "DAY" : "", "HELD", "STARTUP", "PRODUCTIVE",
                              "CHECKPOINT", "LOST", "IDLE", "UNKNOWN", "QUEUED", "GOODPUT"};
    table_row(&t, head);
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(o, "groups"), i, g) {
        char extra[32] = "";
        if (by_run) snprintf(extra, sizeof extra, "%lld", (long long)json_integer_value(json_object_get(g, "run")));
        if (by_day) snprintf(extra, sizeof extra, "%s", json_string_value(json_object_get(g, "day")));
        const char *user = json_string_value(json_object_get(g, "user"));
        row_of(&t, user ? user : "-", extra, g);
    }
    row_of(&t, "(box)", "", json_object_get(o, "box"));
    table_print(&t, stdout);
    table_free(&t);
    printf("HELD: device time (device-seconds, or hours); each phase: its share of it; QUEUED: wall time waiting;\n"
           "GOODPUT: productive / held (docs/using.md, \"Where the device time went\")\n");
    json_decref(o);
    return EXIT_OK;
}

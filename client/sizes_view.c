/* An elastic run's ranks now and its changes of size: see sizes_view.h. */
#include "sizes_view.h"

#include <stdbool.h>

#include "format.h"

void sizes_print(const json_t *run, FILE *out) {
    const json_t *dist = json_object_get(json_object_get(run, "config"), "distributed");
    json_int_t width = json_integer_value(json_object_get(dist, "world_size"));
    json_int_t least = json_integer_value(json_object_get(dist, "min_world_size"));
    const json_t *sizes = json_object_get(run, "sizes");
    bool elastic = least > 0 && least < width;
    if (!elastic && !json_array_size(sizes)) return;
    const json_t *now = json_object_get(run, "ranks_now");
    if (json_is_integer(now))
        fprintf(out, "  ranks:     %lld of %lld", (long long)json_integer_value(now), (long long)width);
    else
        fprintf(out, "  ranks:     none held now, of %lld", (long long)width);
    if (elastic) fprintf(out, " (elastic, at least %lld)", (long long)least);
    fputc('\n', out);
    size_t i;
    const json_t *c;
    json_array_foreach(sizes, i, c) {
        char when[32], step[48] = "";
        fmt_time(json_string_value(json_object_get(c, "at")), when, sizeof when);
        const char *why = json_string_value(json_object_get(c, "why"));
        const json_t *for_run = json_object_get(c, "for_run"), *from_step = json_object_get(c, "from_global_step");
        if (json_is_integer(from_step))
            snprintf(step, sizeof step, ", from global step %lld", (long long)json_integer_value(from_step));
        fprintf(out, "  %-10s %s: %s from %lld to %lld ranks", i == 0 ? "resized:" : "", when,
                why && why[0] == 's' ? "shrunk" : "grown", (long long)json_integer_value(json_object_get(c, "from")),
                (long long)json_integer_value(json_object_get(c, "to")));
        if (json_is_integer(for_run)) fprintf(out, " for run %lld", (long long)json_integer_value(for_run));
        else if (why && why[0] == 'g') fprintf(out, " (devices idle)");
        fprintf(out, "%s\n", step);
    }
}

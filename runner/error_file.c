/* A rank's error file: see error_file.h. */
#include "error_file.h"
#include "run_dir.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

void error_file_path(char *out, size_t n, const char *run_dir, int rank) {
    snprintf(out, n, "%s/" RUN_DIR_RANK_ERROR, run_dir, rank);
}

int error_file_message(const char *path, char *out, size_t n) {
    json_t *doc = json_load_file(path, 0, NULL);
    if (!doc) return 0;
    json_t *m = json_object_get(doc, "message");
    if (json_is_object(m)) m = json_object_get(m, "message");
    int found = json_is_string(m) && json_string_length(m) > 0;
    if (found) {
        const char *s = json_string_value(m);
        snprintf(out, n, "%.*s", (int)strcspn(s, "\n"), s);
        found = out[0] != '\0';
    }
    json_decref(doc);
    return found;
}

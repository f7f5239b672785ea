/* The launcher's `end` in a journal: see journal_end.h. */
#include "journal_end.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_dir.h"
#include "run_files.h"

#define TAIL_BYTES (256 * 1024)

static bool parse_end(const char *line, size_t len, journal_end *out) {
    json_t *ev = json_loadb(line, len, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    bool ok = type && strcmp(type, "end") == 0 && json_integer_value(json_object_get(ev, "rank")) == -1 &&
              json_is_string(json_object_get(ev, "status"));
    if (ok) {
        snprintf(out->status, sizeof out->status, "%s", json_string_value(json_object_get(ev, "status")));
        const char *reason = json_string_value(json_object_get(ev, "reason"));
        snprintf(out->reason, sizeof out->reason, "%s", reason ? reason : "");
        out->t = json_integer_value(json_object_get(ev, "t"));
    }
    json_decref(ev);
    return ok;
}

bool journal_end_read(const char *run_dir, journal_end *out) {
    struct stat st;
    char why[512];
    int fd = run_file_open_in(run_dir, RUN_DIR_JOURNAL, RUN_FILE_ANY_SIZE, &st, why, sizeof why);
    if (fd < 0) return false;
    off_t from = st.st_size > TAIL_BYTES ? st.st_size - TAIL_BYTES : 0;
    size_t n = (size_t)(st.st_size - from);
    char *tail = malloc(n + 1);
    ssize_t got = tail ? pread(fd, tail, n, from) : -1;
    close(fd);
    bool found = false;
    if (got > 0) {
        /* the last whole lines first: an end is the launcher's last event */
        size_t end = (size_t)got;
        while (!found && end > 0) {
            size_t start = end - 1;
            while (start > 0 && tail[start - 1] != '\n') start--;
            if (end - start > 1) found = parse_end(tail + start, end - start, out);
            end = start;
        }
    }
    free(tail);
    return found;
}

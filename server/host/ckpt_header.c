/* Reading a checkpoint's header and finding the newest one: see ckpt_header.h. */
#include "ckpt_header.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "base.h"
#include "ckpt_files.h"
#include "run_files.h"
#include "safetensors.h"

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char *ckpt_newest(const char *dir) {
    run_dir d, sub;
    char why[512];
    if (run_dir_open(&d, dir, why, sizeof why) != 0) return NULL;
    int rc = run_dir_open_sub(&d, CKPT_DIR, &sub, why, sizeof why);
    run_dir_close(&d);
    if (rc != 0) return NULL;
    char **names;
    int n = run_dir_names(&sub, &names);
    char *newest = NULL;
    if (n > 0) {
        qsort(names, (size_t)n, sizeof *names, by_name); /* the names sort by position, as the trainer's */
        for (int i = n - 1; i >= 0 && !newest; i--) {
            struct stat st;
            if (ckpt_is_file_name(names[i]) && run_dir_stat(&sub, names[i], &st) == 0 && S_ISREG(st.st_mode))
                newest = xasprintf("%s/%s", sub.path, names[i]);
        }
    }
    run_dir_names_free(names, n);
    run_dir_close(&sub);
    return newest;
}

static int64_t meta_int(const json_t *meta, const char *key) {
    const char *v = json_string_value(json_object_get(meta, key));
    if (!v || !*v) return -1;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end ? -1 : (int64_t)x;
}

int ckpt_header_read(const char *runs_dir, const char *path, ckpt_header *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    char *dir;
    const char *rel;
    if (run_path_split(runs_dir, path, &dir, &rel) != 0) {
        snprintf(err, errlen, "%s: not a checkpoint of a run", path);
        return -1;
    }
    struct stat st;
    int fd = run_file_open_in(dir, rel, RUN_FILE_ANY_SIZE, &st, err, errlen);
    free(dir);
    if (fd < 0) return -1;
    int rc = st_read_header_fd(fd, path, &out->header, err, errlen);
    close(fd);
    if (rc != 0) return -1;
    const json_t *meta = json_object_get(out->header, "__metadata__");
    out->format = json_string_value(json_object_get(meta, "format"));
    out->model = json_string_value(json_object_get(meta, "model"));
    out->optimizer = json_string_value(json_object_get(meta, "optimizer"));
    out->next_epoch = meta_int(meta, "next_epoch");
    out->next_step = meta_int(meta, "next_step");
    out->global_step = meta_int(meta, "global_step");
    return 0;
}

int ckpt_tensor_shape(const ckpt_header *h, const char *name, int64_t dims[4]) {
    const json_t *shape = json_object_get(json_object_get(h->header, name), "shape");
    if (!json_is_array(shape) || json_array_size(shape) > 4) return -1;
    for (size_t i = 0; i < json_array_size(shape); i++) dims[i] = json_integer_value(json_array_get(shape, i));
    return (int)json_array_size(shape);
}

void ckpt_header_free(ckpt_header *h) {
    json_decref(h->header);
    memset(h, 0, sizeof *h);
}

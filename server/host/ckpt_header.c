/* Reading a checkpoint's header and finding the newest one: see ckpt_header.h. */
#include "ckpt_header.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "ckpt_files.h"
#include "safetensors.h"

char *ckpt_newest(const char *dir) {
    char path[4096];
    return ckpt_newest_in(dir, path, sizeof path) == 0 ? xstrdup(path) : NULL;
}

static int64_t meta_int(const json_t *meta, const char *key) {
    const char *v = json_string_value(json_object_get(meta, key));
    if (!v || !*v) return -1;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end ? -1 : (int64_t)x;
}

int ckpt_header_read(const char *path, ckpt_header *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (st_read_header(path, &out->header, err, errlen) != 0) return -1;
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

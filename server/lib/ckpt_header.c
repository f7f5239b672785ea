/* Reading a checkpoint's header and finding the newest one: see ckpt_header.h. */
#include "ckpt_header.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"

#define CKPT_PREFIX "epoch-"
#define CKPT_SUFFIX ".safetensors"
#define HEADER_MAX (64u << 20) /* a header beyond this is no checkpoint of ours */

static int is_checkpoint_name(const char *name) {
    size_t n = strlen(name), p = strlen(CKPT_PREFIX), s = strlen(CKPT_SUFFIX);
    return n > p + s && strncmp(name, CKPT_PREFIX, p) == 0 && strcmp(name + n - s, CKPT_SUFFIX) == 0;
}

char *ckpt_newest(const char *dir) {
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    if (n < 0) return NULL;
    char *found = NULL;
    for (int i = n - 1; i >= 0; i--) {
        if (!found && is_checkpoint_name(list[i]->d_name)) found = xasprintf("%s/%s", dir, list[i]->d_name);
        free(list[i]);
    }
    free(list);
    return found;
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
    FILE *f = fopen(path, "rbe");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    unsigned char len_bytes[8];
    uint64_t len = 0;
    int rc = -1;
    char *text = NULL;
    if (fstat(fileno(f), &sb) != 0 || fread(len_bytes, 1, 8, f) != 8) {
        snprintf(err, errlen, "%s is not a safetensors file: shorter than its 8-byte header length", path);
        goto out;
    }
    for (int i = 7; i >= 0; i--) len = len << 8 | len_bytes[i];
    if (len == 0 || len > HEADER_MAX || len > (uint64_t)sb.st_size - 8) {
        snprintf(err, errlen, "%s is not a safetensors file: its header length %llu does not fit the file's %lld bytes",
                 path, (unsigned long long)len, (long long)sb.st_size);
        goto out;
    }
    text = xmalloc(len);
    if (fread(text, 1, len, f) != len) {
        snprintf(err, errlen, "%s: cannot read its header: %s", path, ferror(f) ? strerror(errno) : "the file ended");
        goto out;
    }
    json_error_t je;
    out->header = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(out->header)) {
        snprintf(err, errlen, "%s is not a safetensors file: its header is not a JSON object (%s)", path, je.text);
        goto out;
    }
    const json_t *meta = json_object_get(out->header, "__metadata__");
    out->format = json_string_value(json_object_get(meta, "format"));
    out->model = json_string_value(json_object_get(meta, "model"));
    out->optimizer = json_string_value(json_object_get(meta, "optimizer"));
    out->next_epoch = meta_int(meta, "next_epoch");
    out->next_step = meta_int(meta, "next_step");
    out->global_step = meta_int(meta, "global_step");
    rc = 0;
out:
    free(text);
    fclose(f);
    if (rc != 0) ckpt_header_free(out);
    return rc;
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

/* safetensors files: an 8-byte little-endian header length, a JSON header naming
 * each tensor's dtype, shape and byte range (plus "__metadata__", a string map),
 * then the raw little-endian data. Loadable by PyTorch's safetensors. Writes are
 * atomic: a temporary file, fsync, rename. */
#ifndef DDPD_TRAINER_CKPT_FILES_SAFETENSORS_H
#define DDPD_TRAINER_CKPT_FILES_SAFETENSORS_H

#include <jansson.h>
#include <stddef.h>

typedef struct {
    const char *name;
    const float *data; /* F32 only: all that ddpd stores */
    size_t shape[4];
    int ndim;
} st_tensor;

/* metadata: a JSON object whose values are strings (may be NULL). */
int safetensors_write(const char *path, const st_tensor *tensors, size_t n,
                      const json_t *metadata, char *err, size_t errlen);

typedef struct {
    char *buf;        /* the whole file */
    size_t size;
    json_t *header;   /* parsed header */
    size_t data_start;
} st_file;

/* Reads and checks the whole file (header JSON, offsets within the file, dtypes). */
int st_open(const char *path, st_file *f, char *err, size_t errlen);
/* Reads and checks the header only (the same checks, against the file's size): for
 * what a reader needs without the tensors (the server: a checkpoint's shapes and
 * metadata). *header is the parsed header, the caller's to json_decref. 0, or -1
 * (and err). A header over ST_HEADER_MAX bytes is refused before it is read. */
#define ST_HEADER_MAX 100000000u /* the safetensors format's own limit */
int st_read_header(const char *path, json_t **header, char *err, size_t errlen);
/* The same from a file already open (the server opens a run's files itself:
 * server/lib/run_files.h); `path` names it in messages. The descriptor stays open. */
int st_read_header_fd(int fd, const char *path, json_t **header, char *err, size_t errlen);
/* The named F32 tensor, checking that it holds `count` elements; NULL + err if not. */
const float *st_get_f32(const st_file *f, const char *name, size_t count, char *err, size_t errlen);
/* A metadata value, or NULL. */
const char *st_metadata(const st_file *f, const char *key);
void st_close(st_file *f);

#endif

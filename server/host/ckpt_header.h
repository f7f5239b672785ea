/* What the server reads of a checkpoint without loading it: the newest one in a
 * directory, and ddpd's metadata in its header (the model, the optimizer, the
 * position it continues from) and its tensors' shapes. For POST /runs/{id}/resume
 * and for checking a checkpoint.load at submission. The file rules and the format
 * are the trainer's own (ckpt_files.h, safetensors.h): the server picks the file
 * the trainer's --resume does and reads its header as the trainer would. */
#ifndef DDPD_SERVER_HOST_CKPT_HEADER_H
#define DDPD_SERVER_HOST_CKPT_HEADER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* The newest checkpoint in the run directory run_dir's checkpoints/: its path
 * (malloc'd: run_dir/checkpoints/epoch-NNNN.safetensors), or NULL when there is none
 * (or the folder is not the run's own: listed as run_files.h lists a run's files,
 * never through a link). */
char *ckpt_newest(const char *run_dir);

typedef struct {
    json_t *header;           /* the whole header: {"name": {"dtype", "shape", ...}, "__metadata__": {...}} */
    const char *format;       /* "ddpd-checkpoint-1"; NULL when missing */
    const char *model;        /* "mlp", "cnn"; NULL: an older checkpoint (mlp) */
    const char *optimizer;    /* "adam", ...; NULL when missing */
    int64_t next_epoch, next_step, global_step; /* -1 when missing */
} ckpt_header;

/* Reads the header of the checkpoint `path`, a file of a run directory beneath
 * runs_dir (runs_dir/ID/checkpoints/...), opened as run_files.h opens a run's files
 * (never through a link, never a FIFO, of the run's account), then st_read_header_fd
 * (the length is checked against the file's size before it is read). 0, or -1 with
 * why in err. */
int ckpt_header_read(const char *runs_dir, const char *path, ckpt_header *out, char *err, size_t errlen);
/* The shape of tensor `name`: its number of dimensions (dims[0..3] set), or -1 when
 * there is no such tensor. */
int ckpt_tensor_shape(const ckpt_header *h, const char *name, int64_t dims[4]);
void ckpt_header_free(ckpt_header *h);

#endif

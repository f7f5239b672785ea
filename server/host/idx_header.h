/* What the submission checks need of a run's dataset without loading it: an IDX
 * file's count and image size from its header, and a labels file's classes (its
 * largest label + 1), gzipped or plain (the trainer's idx.h loads them whole). */
#ifndef DDPD_SERVER_HOST_IDX_HEADER_H
#define DDPD_SERVER_HOST_IDX_HEADER_H

#include <stddef.h>

/* An images file (magic 0x00000803): count, rows, cols. -1 and err when unreadable. */
int idx_header_images(const char *path, size_t *count, int *rows, int *cols, char *err, size_t errlen);
/* A labels file (0x00000801): count and the classes among its first `limit` labels
 * (0 = all). -1 and err when unreadable. */
int idx_header_labels(const char *path, size_t limit, size_t *count, int *num_classes, char *err, size_t errlen);

#endif

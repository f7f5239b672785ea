/* A run's checkpoint files: <run_dir>/checkpoints/epoch-NNNN.safetensors, and a
 * preempted run's epoch-NNNN-step-SSSSSSSSS.safetensors within epoch NNNN; the newest
 * last (the names sort by position). The trainer writes, prunes and resumes from them;
 * the server finds the one a resume continues from: one rule for both. */
#ifndef DDPD_TRAINER_CKPT_FILES_CKPT_FILES_H
#define DDPD_TRAINER_CKPT_FILES_CKPT_FILES_H

#include <stdbool.h>
#include <stddef.h>

#define CKPT_DIR "checkpoints"
#define CKPT_PREFIX "epoch-"
#define CKPT_SUFFIX ".safetensors"

/* name is a checkpoint file's name ("epoch-0003.safetensors"). */
bool ckpt_is_file_name(const char *name);

/* The newest checkpoint file in dir, its path ("dir/epoch-NNNN.safetensors") into
 * path: 0; 1 when dir holds none; -1 when dir cannot be read (errno says why) or
 * the path does not fit in len. */
int ckpt_newest_in(const char *dir, char *path, size_t len);

#endif

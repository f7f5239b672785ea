/* Asks CUDA how many GPUs it can use, from a short-lived child process, so that
 * the caller (the launcher, which forks the ranks later) never initialises CUDA
 * itself: a process that forks after CUDA initialisation gives children that
 * cannot use the GPU. CUDA builds only. */
#ifndef DDPD_TRAINER_CUDA_GPU_PROBE_H
#define DDPD_TRAINER_CUDA_GPU_PROBE_H

#include <stddef.h>

/* 0 and *count (CUDA_VISIBLE_DEVICES applies, as in the ranks), or -1 and `why`
 * (CUDA's error, or the child that did not answer within a timeout). */
int gpu_probe_usable(int *count, char *why, size_t whylen);

#endif

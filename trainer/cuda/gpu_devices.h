/* Which GPUs a run can see, found WITHOUT initialising CUDA: the launcher forks
 * the ranks afterwards, and a process that initialised CUDA cannot fork children
 * that use it. The driver lists its GPUs in /proc/driver/nvidia/gpus/<pci bus id>/
 * (or at least as /dev/nvidiaN); CUDA_VISIBLE_DEVICES (indices or GPU UUIDs) then
 * restricts and orders them, and a rank r uses CUDA device r of that visible set.
 * Plain C, compiled in every build (the backend selection and the tests use it). */
#ifndef DDPD_TRAINER_CUDA_GPU_DEVICES_H
#define DDPD_TRAINER_CUDA_GPU_DEVICES_H

#include <stddef.h>

#define GPU_MAX 64

/* One physical GPU; its index in gpu_present is its position in PCI bus order,
 * which is how nvidia-smi numbers GPUs. */
typedef struct {
    char bus_id[64]; /* "0000:18:00.0"; "" when only /dev was seen */
    char uuid[80];   /* "GPU-7c2f...", "" when unknown */
    char model[96];  /* "NVIDIA H200", "" when unknown */
} gpu_info;

typedef struct {
    int count;
    gpu_info gpu[GPU_MAX];
    char source[160]; /* where they were found, for messages */
} gpu_present;

/* Lists the driver's GPUs from `proc_dir` (normally /proc/driver/nvidia/gpus), or
 * when that is absent counts the nvidiaN device nodes in `dev_dir` (normally /dev).
 * Returns the count (0: no NVIDIA GPU on this host). */
int gpu_present_scan(gpu_present *p, const char *proc_dir, const char *dev_dir);
/* gpu_present_scan of the real /proc/driver/nvidia/gpus and /dev. */
int gpu_present_scan_host(gpu_present *p);

/* The GPUs CUDA will show this process, in CUDA's order (rank r gets entry r). */
typedef struct {
    int count;
    int physical[GPU_MAX]; /* index into gpu_present, -1 when it cannot be known (MIG, unresolved UUID) */
    char note[320];        /* how the set came about, in words ("CUDA_VISIBLE_DEVICES=1,0 of 2 GPUs") */
} gpu_visible;

/* Applies CUDA_VISIBLE_DEVICES (`cvd`: its value, NULL when unset) to the present
 * GPUs with CUDA's rules: unset = all; empty = none; a comma-separated list of
 * indices, GPU UUIDs (or unique UUID prefixes) or MIG UUIDs, cut at the first entry
 * that is invalid, unknown or repeated (CUDA ignores it and every entry after it). */
void gpu_visible_resolve(const char *cvd, const gpu_present *p, gpu_visible *v);

/* The device of `rank` (one rank per GPU, ranks in order): the CUDA ordinal to
 * cudaSetDevice and the physical index (-1 unknown). Returns -1 when the visible
 * set has fewer GPUs than rank + 1 (two ranks never share a GPU). */
int gpu_rank_device(const gpu_visible *v, int rank, int *cuda_ordinal, int *physical);

/* "cuda:N NAME" for the rank's device: N is the physical index when known, else
 * the CUDA ordinal; NAME is `name` (from CUDA) or the driver's model. */
void gpu_device_label(const gpu_visible *v, const gpu_present *p, int rank, const char *name, char *out,
                      size_t outlen);

#endif

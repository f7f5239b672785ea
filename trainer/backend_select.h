/* Which collectives backend a run uses (`distributed.backend`), and why, in words
 * the run's log shows. `auto` picks nccl when the GPUs this process can see cover
 * the world size (one rank per GPU: NCCL cannot put two ranks on one GPU), else
 * cpu. GPUs are counted without initialising CUDA in the calling process (the
 * launcher forks the ranks after this): see cuda/gpu_devices.h and cuda/gpu_probe.h. */
#ifndef DDPD_BACKEND_SELECT_H
#define DDPD_BACKEND_SELECT_H

#include <stddef.h>

#include "run_config.h"

/* Returns the backend to use (BACKEND_CPU or BACKEND_NCCL) for the `ranks_here`
 * ranks this host runs (the world size, or a node's part of it) and writes why into
 * `why`; returns -1 (and `why` says what to do) when the asked backend cannot run. */
int backend_select(const run_config *cfg, int ranks_here, char *why, size_t whylen);

/* The GPU backend lives in its own executable, ddp-trainer-nccl, so that CPU runs
 * (and this binary's start-up) never load CUDA, cuBLAS and NCCL (0.4 s and 200 MB
 * per start). In the lean ddp-trainer: when the config may use GPUs (nccl or auto),
 * the driver lists a visible GPU, and ddp-trainer-nccl is installed beside it (or
 * named by $DDPD_TRAINER_NCCL), writes its path and returns 1: the launcher then
 * execs it with the same command line. Returns 0 otherwise, and always in
 * ddp-trainer-nccl itself. */
int backend_handoff(const run_config *cfg, char *path, size_t pathlen);

/* The ddp-trainer-nccl that backend_handoff would exec ($DDPD_TRAINER_NCCL, else the
 * one beside this executable): its path in `path`, or NULL when there is none, and
 * always NULL in ddp-trainer-nccl itself. For --version. */
const char *backend_nccl_executable(char *path, size_t pathlen);

/* The decision alone (pure, for tests): `gpus` usable GPUs are visible, and
 * `gpu_note` says which or why none. */
int backend_decide(backend_kind asked, int world_size, int gpus, const char *gpu_note, char *why, size_t whylen);

#endif

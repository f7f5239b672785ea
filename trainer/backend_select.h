/* Which collectives backend a run uses (`distributed.backend`), and why, in words
 * the run's log shows. `auto` picks nccl when the GPUs this process can see cover
 * the world size (one rank per GPU: NCCL cannot put two ranks on one GPU), else
 * cpu. GPUs are counted without initialising CUDA in the calling process (the
 * launcher forks the ranks after this): see cuda/gpu_devices.h and cuda/gpu_probe.h.
 *
 * And, in a rank, what differs by backend once its comm is made: the engine it
 * runs on, the device's own account of a failure, and closing the comm. The rank
 * loop (rank.c) calls these and reads the same for every backend; which backends a
 * build has is decided here. */
#ifndef DDPD_TRAINER_BACKEND_SELECT_H
#define DDPD_TRAINER_BACKEND_SELECT_H

#include <stddef.h>

#include "collectives.h"
#include "engine.h"
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

/* The engine of a rank on its comm's backend: cuda on an nccl comm (GPU build),
 * else cpu. NULL (and err) on failure. */
engine *backend_engine_create(const engine_params *p, char *err, size_t errlen);

/* Why the rank's device failed, when its backend keeps a device's account (nccl:
 * the GPU's or NCCL's words, what failed and what to try), "" otherwise: such a
 * reason is the whole story of a failure, not why a group was aborted. */
const char *backend_device_failure(coll_comm *c);

/* On the way out of a rank that succeeded: the comm's backend closes what it holds
 * beyond the process's life (nccl: the communicator, watched). 0, or -1
 * (backend_device_failure says why); 0 where there is nothing to close (cpu). */
int backend_comm_close(coll_comm *c);

#endif

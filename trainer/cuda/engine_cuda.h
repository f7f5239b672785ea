/* The cuda engine (engine.h) of one rank on its GPU: the twin of engine_cpu.c.
 * See engine_cuda.c for the streams, events and buckets of a step. CUDA builds
 * only; the rank's comm must come from coll_nccl_attach (the device is chosen). */
#ifndef DDPD_TRAINER_CUDA_ENGINE_CUDA_H
#define DDPD_TRAINER_CUDA_ENGINE_CUDA_H

#include <stddef.h>

#include "engine.h"

/* NULL (and err) on failure, including a run that does not fit its share of the
 * GPU ("needs 3.1 GiB of GPU memory, its share is 2.0 GiB (...)"). */
engine *engine_cuda_create(const engine_params *p, char *err, size_t errlen);

/* 1 when the dataset is resident on the device, 0 when batches are staged (tests). */
int engine_cuda_data_resident(const engine *e);

#endif

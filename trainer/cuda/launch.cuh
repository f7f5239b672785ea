// What every kernel launch of the .cu files shares: the block size (kernel_bodies.h's
// KB_THREADS), the grid of a grid-stride loop, and a thread's place in it.
#ifndef DDPD_TRAINER_CUDA_LAUNCH_CUH
#define DDPD_TRAINER_CUDA_LAUNCH_CUH

#include "kernel_bodies.h"

#define THREADS KB_THREADS
#define MAX_BLOCKS 8192 // grid-stride loops need no more

static inline unsigned blocks_for(size_t n) {
    size_t b = (n + THREADS - 1) / THREADS;
    if (b > MAX_BLOCKS) b = MAX_BLOCKS;
    return (unsigned)(b ? b : 1);
}

__device__ __forceinline__ size_t first_index() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t grid_stride() { return (size_t)gridDim.x * blockDim.x; }

#endif

/* HD_INLINE: a function that is compiled for both sides. nvcc compiles it for the
 * GPU and the host (__host__ __device__); the C compiler as a plain static inline
 * function. The kernels' per-element bodies (cuda/kernel_bodies.h) and the
 * optimizers' update rules (optim_rules.h) are written once this way, so the CUDA
 * launches, the CPU stand-in of the GPU tests (tests/support/fake_cuda.c) and, for the
 * optimizers, the CPU engine run the very same arithmetic. */
#ifndef DDPD_TRAINER_HOST_DEVICE_H
#define DDPD_TRAINER_HOST_DEVICE_H

#if defined(__CUDACC__)
#define HD_INLINE static __host__ __device__ __forceinline__
#else
#define HD_INLINE static inline
#endif

#endif

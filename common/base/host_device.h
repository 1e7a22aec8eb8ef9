// NEREUS_HOST_DEVICE marks a function that both the host compiler and nvcc's
// device pass compile: __host__ __device__ under nvcc, nothing otherwise, so
// a plain C++ translation unit (and every CPU-only build) sees an ordinary
// inline function. The trainer's GPU kernels and its CPU loops call the same
// such functions for their per-element arithmetic (docs/GPU.md,
// "Arithmetic"); the solver update rules in common/update/sgd_rules.h are written
// this way so that the servers, the standalone CPU trainer and the GPU
// trainer share one definition.
//
// This header includes nothing: common/ and server/ stay free of CUDA at
// compile time (scripts/include_graph.py checks it). It lives in common/, the
// lowest floor that needs it; worker/trainer/gpu/ uses it too.
#ifndef NEREUS_COMMON_BASE_HOST_DEVICE_H_
#define NEREUS_COMMON_BASE_HOST_DEVICE_H_

#ifdef __CUDACC__
#define NEREUS_HOST_DEVICE __host__ __device__
#else
#define NEREUS_HOST_DEVICE
#endif

// True in the device pass of nvcc (code that only the GPU runs).
#if defined(__CUDA_ARCH__)
#define NEREUS_DEVICE_PASS 1
#else
#define NEREUS_DEVICE_PASS 0
#endif

#endif  // NEREUS_COMMON_BASE_HOST_DEVICE_H_

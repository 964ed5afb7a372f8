/*
 * The "gpu_stage" class of examples/modules/gpu_stages.c (emulated device) and
 * gpu_stages_kernel.cu (CUDA), shared with examples/gpu_pipeline.c, which
 * computes the same function in C to check every element it gets back.
 *
 * A stage works on an f32 tensor of any shape, seen as rows x cols (cols =
 * the last dimension): each element becomes half itself plus a filter of
 * the GPU_STAGE_TAPS elements from it rightwards in its row (wrapping
 * around), with alternating weights, plus the stage's bias. Only
 * multiplications and additions, each rounded on its own and in this order
 * (in a CUDA kernel __fmul_rn and __fadd_rn, which nvcc never fuses into an
 * FMA; in C, GCC contracts nothing in ISO mode, -std=c11, as the Makefile
 * builds), so the kernel, the host variant and the driver's reference, all
 * this one function, agree bit for bit.
 */
#ifndef ADAG_EXAMPLE_GPU_STAGES_H
#define ADAG_EXAMPLE_GPU_STAGES_H

#include <stdint.h>

#define GPU_STAGE_TAPS 16

#ifdef __CUDACC__ /* the functions below run in the kernel too */
#define GPU_STAGE_FN __host__ __device__ static inline
#else
#define GPU_STAGE_FN static inline
#endif
#ifdef __CUDA_ARCH__
#define GPU_STAGE_MUL(a, b) __fmul_rn((a), (b))
#define GPU_STAGE_ADD(a, b) __fadd_rn((a), (b))
#else
#define GPU_STAGE_MUL(a, b) ((a) * (b))
#define GPU_STAGE_ADD(a, b) ((a) + (b))
#endif

/* The init bytes of a "gpu_stage" actor: its place in the pipeline. */
typedef struct {
    int32_t index;
} gpu_stage_init_t;

GPU_STAGE_FN float gpu_stage_bias(int32_t index)
{
    return 0.125f * (float)(index + 1);
}

/* Weight of tap k: 1/16 on even taps, -1/32 on odd ones. */
GPU_STAGE_FN float gpu_stage_weight(int k)
{
    return (k & 1) ? -0.03125f : 0.0625f;
}

/* Element j of a row x of `cols` elements. */
GPU_STAGE_FN float gpu_stage_element(const float *x, uint64_t cols, uint64_t j, float bias)
{
    float acc = GPU_STAGE_MUL(0.5f, x[j]);
    uint64_t m = j;
    for (int k = 0; k < GPU_STAGE_TAPS; k++, m++) {
        while (m >= cols) /* wrap around the row (no division in the inner loop) */
            m -= cols;
        acc = GPU_STAGE_ADD(acc, GPU_STAGE_MUL(gpu_stage_weight(k), x[m]));
    }
    return GPU_STAGE_ADD(acc, bias);
}

/* The whole tensor: rows x cols elements from x into y (y != x). */
GPU_STAGE_FN void gpu_stage_compute(const float *x, float *y, uint64_t rows, uint64_t cols,
                                     int32_t index)
{
    float bias = gpu_stage_bias(index);
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t j = 0; j < cols; j++)
            y[r * cols + j] = gpu_stage_element(x + r * cols, cols, j, bias);
}

#endif

/*
 * The "cuda_stage" class of libcuda_stage.so (tests/gpu/README.md): the
 * device pipeline stage of tests/modules/gpu_stage.c, with CUDA kernels.
 * cuda_stage.c is the class (built by cc), cuda_stage_kernels.cu its
 * kernels and the driver's CUDA helpers (built and linked by nvcc against
 * the shared CUDA runtime, the library the cuda device backend loads).
 *
 *   step(x) -> (y, info)  y = stage_apply(stage, x) element by element
 *                         (tests/modules/gpu_stage.h, the C reference the
 *                         test checks against), the shape reversed; info
 *                         (host bytes) = cuda_stage_info_t
 *   apply(x) -> y         the same kernels, y only (a collective member's
 *                         part: tests/gpu/cuda_dag_coll.c)
 *   apply_flaky(x) -> y   apply, except that stage 2 fails every execution
 *                         whose ref % 4 == 1, enqueueing nothing
 *
 * Each call enqueues on the actor's compute stream (adag_call_stream) a
 * kernel that spins spin_us on the GPU (if > 0), then the stage kernel, and
 * returns without waiting for them.
 */
#ifndef ADAG_TESTS_GPU_CUDA_STAGE_H
#define ADAG_TESTS_GPU_CUDA_STAGE_H

#include <stddef.h>
#include <stdint.h>

/* The init bytes of a "cuda_stage" actor. */
typedef struct {
    int32_t stage;   /* the stage number stage_apply takes */
    int32_t spin_us; /* each call's kernels first spin this long on the GPU */
} cuda_stage_init_t;

/* What step's method saw (its second return, host bytes). */
typedef struct {
    uint64_t ref;
    uint64_t elements;
    uint32_t dtype;
    int32_t device;          /* adag_call_device */
    int64_t method_begin_ns; /* CLOCK_MONOTONIC when the method began */
    int64_t method_end_ns;   /* ... and right before it returned */
} cuda_stage_info_t;

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues on `stream` (a cudaStream_t) the spin kernel (spin_us > 0) and
 * the stage kernel over n elements of dtype (an adag_dtype_t) from in to
 * out (none for n = 0). 0, or the cudaError_t with "<call>: <name>: <text>"
 * in err. */
int cuda_stage_launch(void *stream, const void *in, void *out, uint64_t n, uint32_t dtype,
                      int32_t stage, int32_t spin_us, char *err, size_t errlen);

/* The driver's side, for the test program (found with dlsym). Each returns
 * 0, or the cudaError_t with "<call>: <name>: <text>" in err. */

/* Makes `device` current on the calling thread and creates its context. */
int cuda_stage_host_init(int device, char *err, size_t errlen);
/* cudaMemGetInfo of the current device. */
int cuda_stage_mem_info(size_t *free_bytes, size_t *total_bytes, char *err, size_t errlen);
/* cudaMalloc / cudaFree (NULL is fine). */
int cuda_stage_malloc(void **ptr, size_t size, char *err, size_t errlen);
int cuda_stage_free(void *ptr, char *err, size_t errlen);
/* Copies n bytes in whatever direction the pointers say (cudaMemcpyDefault):
 * with a stream, enqueued there (cudaMemcpyAsync); without (NULL), done
 * when it returns, in every direction (cudaMemcpy, then the legacy default
 * stream synchronized, which a pageable host-to-device copy needs). */
int cuda_stage_copy(void *dst, const void *src, size_t n, void *stream, char *err,
                    size_t errlen);
/* cudaStreamSynchronize. */
int cuda_stage_stream_sync(void *stream, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif

// The CUDA work of the "gpu_stage" class (gpu_stages.c built with
// -DGPU_STAGES_CUDA): one thread per element, each computing
// gpu_stage_element of gpu_stages.h, the function the driver checks against.
// Linked by nvcc into libgpu_stages_cuda.so with the shared CUDA runtime
// (libcudart.so.N), the same library the cuda device backend loads, so the
// stream the method is given is this runtime's.
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu_stages.h"

__global__ static void gpu_stage_kernel(const float *x, float *y, uint64_t rows, uint64_t cols,
                                        float bias)
{
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        uint64_t r = i / cols, j = i % cols;
        y[i] = gpu_stage_element(x + r * cols, cols, j, bias);
    }
}

extern "C" int gpu_stages_launch(void *stream, const float *x, float *y, uint64_t rows,
                                 uint64_t cols, int32_t index, char *err, size_t errlen)
{
    const unsigned threads = 256;
    uint64_t n = rows * cols;
    unsigned blocks = (unsigned)((n + threads - 1) / threads);
    gpu_stage_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>(x, y, rows, cols,
                                                                   gpu_stage_bias(index));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        snprintf(err, errlen, "gpu_stage_kernel launch (%llu elements): %s: %s",
                 (unsigned long long)n, cudaGetErrorName(e), cudaGetErrorString(e));
    return (int)e;
}

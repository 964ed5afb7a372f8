// The CUDA side of libcuda_stage.so (cuda_stage.h): the stage kernel, the
// spin kernel, their launcher, and the driver's helpers the test program
// finds with dlsym. Built and linked by nvcc with the shared CUDA runtime
// (libcudart.so.N), the library the cuda device backend loads, so the
// streams it is given and the contexts it uses are that runtime's.
//
// The stage kernel is written here on its own; the test compares every
// element it makes with stage_apply (tests/modules/gpu_stage.h). Integers
// wrap at their width (computed unsigned), bool flips with the stage's low
// bit, f16/bf16 are bit patterns, f32/f64 are x * 0.5 + stage with each
// operation rounded on its own (__fmul_rn/__fadd_rn, which nvcc never fuses
// into an FMA), as the C reference computes them.
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

#include <adag.h>

#include "cuda_stage.h"

// x * 3 + stage at the width of T
template <typename T> __device__ static T int_step(T x, int32_t stage)
{
    return (T)((T)(x * 3u) + (T)(uint32_t)stage);
}

template <typename T> __device__ static const T *in_as(const void *p)
{
    return static_cast<const T *>(p);
}

template <typename T> __device__ static T *out_as(void *p)
{
    return static_cast<T *>(p);
}

__global__ static void stage_kernel(const void *in, void *out, uint64_t n, uint32_t dtype,
                                    int32_t stage)
{
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        switch (dtype) {
        case ADAG_DTYPE_U8:
        case ADAG_DTYPE_I8:
            out_as<uint8_t>(out)[i] = int_step(in_as<uint8_t>(in)[i], stage);
            break;
        case ADAG_DTYPE_I16:
            out_as<uint16_t>(out)[i] = int_step(in_as<uint16_t>(in)[i], stage);
            break;
        case ADAG_DTYPE_I32:
            out_as<uint32_t>(out)[i] = int_step(in_as<uint32_t>(in)[i], stage);
            break;
        case ADAG_DTYPE_I64:
            out_as<uint64_t>(out)[i] = int_step(in_as<uint64_t>(in)[i], stage);
            break;
        case ADAG_DTYPE_BOOL:
            out_as<uint8_t>(out)[i] = (uint8_t)(in_as<uint8_t>(in)[i] ^ (stage & 1));
            break;
        case ADAG_DTYPE_F16:
        case ADAG_DTYPE_BF16:
            out_as<uint16_t>(out)[i] =
                (uint16_t)(in_as<uint16_t>(in)[i] ^ (uint16_t)(0x0101 * stage));
            break;
        case ADAG_DTYPE_F32:
            out_as<float>(out)[i] = __fadd_rn(__fmul_rn(in_as<float>(in)[i], 0.5f), (float)stage);
            break;
        case ADAG_DTYPE_F64:
            out_as<double>(out)[i] = __dadd_rn(__dmul_rn(in_as<double>(in)[i], 0.5), (double)stage);
            break;
        default: // no such dtype reaches here: the class checks it
            break;
        }
    }
}

__device__ static uint64_t global_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// One thread spins for ns nanoseconds of the GPU's global timer, a kernel
// that takes time without taking a CPU. Bounded by clock cycles too (4 per
// ns, more than any SM clock), so a timer that does not advance cannot
// make it spin forever.
__global__ static void spin_kernel(uint64_t ns)
{
    const uint64_t t0 = global_ns();
    const long long c0 = clock64(), max_cycles = (long long)ns * 4;
    while (global_ns() - t0 < ns && clock64() - c0 < max_cycles) {
#if __CUDA_ARCH__ >= 700
        __nanosleep(1000);
#endif
    }
}

static int failed(cudaError_t e, const char *call, char *err, size_t errlen)
{
    if (e != cudaSuccess)
        snprintf(err, errlen, "%s: %s: %s", call, cudaGetErrorName(e), cudaGetErrorString(e));
    return (int)e;
}

extern "C" int cuda_stage_launch(void *stream, const void *in, void *out, uint64_t n,
                                 uint32_t dtype, int32_t stage, int32_t spin_us, char *err,
                                 size_t errlen)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (spin_us > 0) {
        spin_kernel<<<1, 1, 0, s>>>((uint64_t)spin_us * 1000u);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return failed(e, "spin_kernel launch", err, errlen);
    }
    if (n == 0)
        return 0; // an empty tensor: no kernel (a grid of 0 blocks is an error)
    const unsigned threads = 256;
    uint64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535) // the grid-stride loop covers the rest
        blocks = 65535;
    stage_kernel<<<(unsigned)blocks, threads, 0, s>>>(in, out, n, dtype, stage);
    char call[96];
    snprintf(call, sizeof call, "stage_kernel launch (%llu elements)", (unsigned long long)n);
    return failed(cudaGetLastError(), call, err, errlen);
}

extern "C" int cuda_stage_host_init(int device, char *err, size_t errlen)
{
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return failed(e, "cudaSetDevice", err, errlen);
    return failed(cudaFree(0), "cudaFree(0) (creating the context)", err, errlen);
}

extern "C" int cuda_stage_mem_info(size_t *free_bytes, size_t *total_bytes, char *err,
                                   size_t errlen)
{
    return failed(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo", err, errlen);
}

extern "C" int cuda_stage_malloc(void **ptr, size_t size, char *err, size_t errlen)
{
    *ptr = NULL;
    return failed(cudaMalloc(ptr, size), "cudaMalloc", err, errlen);
}

extern "C" int cuda_stage_free(void *ptr, char *err, size_t errlen)
{
    return failed(cudaFree(ptr), "cudaFree", err, errlen);
}

extern "C" int cuda_stage_copy(void *dst, const void *src, size_t n, void *stream, char *err,
                               size_t errlen)
{
    if (stream)
        return failed(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, (cudaStream_t)stream),
                      "cudaMemcpyAsync", err, errlen);
    cudaError_t e = cudaMemcpy(dst, src, n, cudaMemcpyDefault);
    if (e != cudaSuccess)
        return failed(e, "cudaMemcpy", err, errlen);
    return failed(cudaStreamSynchronize(0), "cudaStreamSynchronize(0) after cudaMemcpy", err,
                  errlen);
}

extern "C" int cuda_stage_stream_sync(void *stream, char *err, size_t errlen)
{
    return failed(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize", err,
                  errlen);
}

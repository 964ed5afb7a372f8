// The one kernel of `make test-gpu` (tests/gpu/README.md): y = a * x + b,
// element by element. Built with nvcc into a shared module that the test
// program loads with dlopen; it links the CUDA runtime (libcudart.so.N), the
// same library the cuda backend loads, so both use one runtime.
//
// The multiply and the add are rounded one after the other (__fmul_rn,
// __fadd_rn: nvcc would otherwise fuse them into one FMA), exactly as the C
// reference computes them, so results compare bit for bit.
#include <cuda_runtime_api.h>
#include <stdio.h>

__global__ static void scale_kernel(float *y, const float *x, float a, float b, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __fadd_rn(__fmul_rn(a, x[i]), b);
}

// Runs the kernel on `device` (default stream) and waits for it. Returns the
// cudaError_t; on failure err says which call failed and why.
extern "C" __attribute__((visibility("default"))) int
adag_test_scale(int device, float *y, const float *x, float a, float b, size_t n, char *err,
                size_t errlen)
{
    const char *call = "cudaSetDevice";
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess && n > 0) {
        const unsigned threads = 256;
        unsigned blocks = (unsigned)((n + threads - 1) / threads);
        scale_kernel<<<blocks, threads>>>(y, x, a, b, n);
        call = "scale_kernel launch";
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) {
        call = "cudaDeviceSynchronize after scale_kernel";
        e = cudaDeviceSynchronize();
    }
    if (e != cudaSuccess)
        snprintf(err, errlen, "%s: %s: %s", call, cudaGetErrorName(e), cudaGetErrorString(e));
    return (int)e;
}

// The same kernel launched on `stream` (a cudaStream_t), not waited for:
// what a capture records (tests/gpu/test_cuda.c's graph test, the graph
// rows of adag-bench). Returns the launch's cudaError_t.
extern "C" __attribute__((visibility("default"))) int
adag_test_scale_on(void *stream, float *y, const float *x, float a, float b, size_t n)
{
    const unsigned threads = 256;
    unsigned blocks = (unsigned)((n + threads - 1) / threads);
    if (n > 0)
        scale_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>(y, x, a, b, n);
    return (int)cudaGetLastError();
}

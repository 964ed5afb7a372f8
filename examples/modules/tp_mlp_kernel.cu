// The CUDA work of the "tp_mlp" class (tp_mlp.c built with -DTP_MLP_CUDA):
// the shard's weights in device memory and its kernel, one block per batch
// row: the block's threads compute the row's hidden units into shared
// memory (relu applied), then the row's output from them. Every value is an
// integer below 2^24 (tp_mlp.h), so the order of the sums does not matter
// and the result equals the C reference bit for bit. Linked by nvcc into
// libtp_mlp_cuda.so with the shared CUDA runtime (libcudart.so.N), the one
// the cuda device backend loads, so the stream a method is given is this
// runtime's.
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

__global__ static void tp_mlp_kernel(const float *x, float *y, uint32_t dim, uint32_t ncols,
                                     const float *w1, const float *w2)
{
    extern __shared__ float h[]; // ncols floats
    const float *xr = x + (uint64_t)blockIdx.x * dim;
    float *yr = y + (uint64_t)blockIdx.x * dim;
    for (uint32_t k = threadIdx.x; k < ncols; k += blockDim.x) {
        float acc = 0.0f;
        for (uint32_t d = 0; d < dim; d++)
            acc += xr[d] * w1[(uint64_t)d * ncols + k];
        h[k] = acc > 0.0f ? acc : 0.0f;
    }
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < dim; j += blockDim.x) {
        float acc = 0.0f;
        for (uint32_t k = 0; k < ncols; k++)
            acc += h[k] * w2[(uint64_t)k * dim + j];
        yr[j] = acc;
    }
}

static int cuda_failed(cudaError_t e, const char *what, char *err, size_t errlen)
{
    if (e != cudaSuccess)
        snprintf(err, errlen, "%s: %s: %s", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return (int)e;
}

extern "C" int tp_mlp_cuda_upload(const float *w1, const float *w2, size_t nfloats,
                                  void **dev_w1, void **dev_w2, char *err, size_t errlen)
{
    size_t bytes = nfloats * sizeof(float);
    void *a = NULL, *b = NULL;
    int rc = cuda_failed(cudaMalloc(&a, bytes), "cudaMalloc (W1 shard)", err, errlen);
    if (rc == 0)
        rc = cuda_failed(cudaMalloc(&b, bytes), "cudaMalloc (W2 shard)", err, errlen);
    if (rc == 0)
        rc = cuda_failed(cudaMemcpy(a, w1, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (W1)",
                         err, errlen);
    if (rc == 0)
        rc = cuda_failed(cudaMemcpy(b, w2, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (W2)",
                         err, errlen);
    if (rc != 0) {
        cudaFree(a);
        cudaFree(b);
        return rc;
    }
    *dev_w1 = a;
    *dev_w2 = b;
    return 0;
}

extern "C" void tp_mlp_cuda_free(void *dev_w1, void *dev_w2)
{
    cudaFree(dev_w1);
    cudaFree(dev_w2);
}

extern "C" int tp_mlp_cuda_launch(void *stream, const float *x, float *y, uint64_t rows,
                                  uint32_t dim, uint32_t ncols, const float *w1, const float *w2,
                                  char *err, size_t errlen)
{
    const unsigned threads = 128;
    if (rows > 0x7fffffffu) {
        snprintf(err, errlen, "tp_mlp_kernel: %llu rows, more than a grid holds",
                 (unsigned long long)rows);
        return -1;
    }
    tp_mlp_kernel<<<(unsigned)rows, threads, ncols * sizeof(float), (cudaStream_t)stream>>>(
        x, y, dim, ncols, w1, w2);
    return cuda_failed(cudaGetLastError(), "tp_mlp_kernel launch", err, errlen);
}

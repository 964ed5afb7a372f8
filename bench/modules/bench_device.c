/*
 * Actor class "bench_dev" of adag-bench's device rows (bench/device.c): a
 * device-bound actor whose methods move tensor bytes on its compute stream
 * and return at once, as a kernel launch would. Each method's only device
 * work is copies, so one code path serves every backend:
 *
 *   emulated device  adag_call_enqueue of a memmove (device pointers are host
 *                addresses there);
 *   cuda         cudaMemcpyAsync(cudaMemcpyDefault) on adag_call_stream,
 *                from the CUDA runtime the worker's cuda backend already
 *                loaded (found among the loaded objects, never loaded here).
 *
 * The init bytes are one int32: 1 on a cuda device, 0 on the emulated device.
 *
 *   copy(x)  -> y          y = x (same dtype and shape): one device copy
 *   stamp(s) -> y u8[n]    s = host bytes {u64 stamp, u64 n}; the first and
 *                          last 8 bytes of y get the stamp, the rest is left
 *                          as it was (the row measures moving y, not filling it);
 *                          s = {u64 stamp, u64 n, u64 dtype}: y is n bytes of
 *                          that dtype (the allreduce-dag row: i32)
 *   ends(x)  -> y i64[2]   the first and last 8 bytes of x
 */
#include "bench_actors.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    int32_t cuda;
} dev_state_t;

/* ---- the CUDA runtime of this process ---- */

typedef int (*memcpy_async_fn)(void *dst, const void *src, size_t n, int kind, void *stream);
#define CUDA_MEMCPY_DEFAULT 4 /* cudaMemcpyDefault: unified addressing says the direction */

static struct {
    pthread_once_t once;
    memcpy_async_fn memcpy_async;
    char why[160];
} cudart = {.once = PTHREAD_ONCE_INIT};

static int find_cudart(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcudart.so")) {
        snprintf(out, PATH_MAX, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

/* Takes the copy the cuda backend loaded (RTLD_NOLOAD: never a second
 * runtime, whose streams would not be the backend's). */
static void cudart_find(void)
{
    char name[PATH_MAX] = "";
    void *lib = NULL;
    if (!dl_iterate_phdr(find_cudart, name)) {
        snprintf(cudart.why, sizeof cudart.why, "no CUDA runtime is loaded in this process");
        return;
    }
    if (!(lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD))) {
        snprintf(cudart.why, sizeof cudart.why, "dlopen(%s, RTLD_NOLOAD): %s", name, dlerror());
        return;
    }
    cudart.memcpy_async = (memcpy_async_fn)(uintptr_t)dlsym(lib, "cudaMemcpyAsync");
    if (!cudart.memcpy_async)
        snprintf(cudart.why, sizeof cudart.why, "%s has no cudaMemcpyAsync", name);
    /* the handle stays open: the backend holds the runtime for the process's life */
}

/* ---- one device copy on the compute stream ---- */

typedef struct {
    void *dst;
    const void *src;
    size_t n;
} copy_args_t;

static void copy_kernel(void *p)
{
    const copy_args_t *a = p;
    memmove(a->dst, a->src, a->n);
}

static adag_status_t device_copy(const dev_state_t *s, adag_call_h call, void *dst,
                                 const void *src, size_t n)
{
    if (!s->cuda) {
        copy_args_t a = {dst, src, n};
        return adag_call_enqueue(call, copy_kernel, &a, sizeof a);
    }
    pthread_once(&cudart.once, cudart_find);
    if (!cudart.memcpy_async)
        return adag_call_fail(call, "%s", cudart.why);
    int err = cudart.memcpy_async(dst, src, n, CUDA_MEMCPY_DEFAULT, adag_call_stream(call));
    if (err != 0)
        return adag_call_fail(call, "cudaMemcpyAsync of %zu bytes: CUDA error %d", n, err);
    return ADAG_OK;
}

/* ---- methods ---- */

static adag_status_t dev_init(void *state, const void *data, size_t size)
{
    if (size != sizeof(int32_t))
        return ADAG_ERR_INVALID;
    memcpy(&((dev_state_t *)state)->cuda, data, sizeof(int32_t));
    return ADAG_OK;
}

static adag_status_t tensor_arg(adag_call_h call, size_t min, adag_value_t *x)
{
    adag_status_t st = adag_call_arg(call, 0, x);
    if (st != ADAG_OK)
        return st;
    if (x->kind != ADAG_VALUE_TENSOR || x->device != adag_call_device(call) || x->size < min)
        return adag_call_fail(call, "expects a tensor of at least %zu bytes on device %d, got "
                                    "kind %d, %zu bytes on device %d",
                              min, adag_call_device(call), x->kind, x->size, x->device);
    return ADAG_OK;
}

static adag_status_t dev_copy(void *state, adag_call_h call)
{
    adag_value_t x;
    void *y;
    adag_status_t st = tensor_arg(call, 0, &x);
    if (st == ADAG_OK)
        st = adag_call_output_tensor(call, 0, x.dtype, x.ndim, x.shape, &y);
    if (st == ADAG_OK && x.size)
        st = device_copy(state, call, y, x.data, x.size);
    return st;
}

static adag_status_t dev_stamp(void *state, adag_call_h call)
{
    adag_value_t s;
    uint64_t n;
    char *y;
    adag_status_t st = adag_call_arg(call, 0, &s);
    if (st != ADAG_OK)
        return st;
    if ((s.size != 16 && s.size != 24) || s.device != ADAG_DEVICE_HOST)
        return adag_call_fail(call, "stamp expects 16 host bytes {stamp, size} or 24 {stamp, "
                                    "size, dtype}, got %zu", s.size);
    memcpy(&n, (const char *)s.data + 8, 8);
    uint64_t dtype = ADAG_DTYPE_U8;
    if (s.size == 24)
        memcpy(&dtype, (const char *)s.data + 16, 8);
    size_t es = adag_dtype_size((adag_dtype_t)dtype);
    if (n < 8 || !es || n % es)
        return adag_call_fail(call, "stamp: %llu bytes of dtype %llu cannot hold the stamp",
                              (unsigned long long)n, (unsigned long long)dtype);
    int64_t shape = (int64_t)(n / es);
    if ((st = adag_call_output_tensor(call, 0, (adag_dtype_t)dtype, 1, &shape, (void **)&y)) !=
        ADAG_OK)
        return st;
    /* the input stays valid for the work enqueued on the compute stream */
    if ((st = device_copy(state, call, y, s.data, 8)) != ADAG_OK)
        return st;
    return device_copy(state, call, y + n - 8, s.data, 8);
}

static adag_status_t dev_ends(void *state, adag_call_h call)
{
    adag_value_t x;
    char *y;
    int64_t two = 2;
    adag_status_t st = tensor_arg(call, 8, &x);
    if (st == ADAG_OK)
        st = adag_call_output_tensor(call, 0, ADAG_DTYPE_I64, 1, &two, (void **)&y);
    if (st == ADAG_OK)
        st = device_copy(state, call, y, x.data, 8);
    if (st == ADAG_OK)
        st = device_copy(state, call, y + 8, (const char *)x.data + x.size - 8, 8);
    return st;
}

static const adag_method_def_t dev_methods[] = {
    {"copy", dev_copy, 1, 1},
    {"stamp", dev_stamp, 1, 1},
    {"ends", dev_ends, 1, 1},
};

const adag_class_def_t bench_device_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "bench_dev",
    .state_size = sizeof(dev_state_t),
    .init = dev_init,
    .methods = dev_methods,
    .nmethods = sizeof(dev_methods) / sizeof(dev_methods[0]),
};

/*
 * The "cuda" device backend (gpu/device.h) on the CUDA runtime.
 *
 * The runtime is not linked: it is loaded with dlopen at first use
 * (ADAG_CUDART_PATH if set, and then only that; else libcudart.so.13,
 * libcudart.so.12, libcudart.so, then the build's toolkit's copy), and every
 * function is called through a table resolved with dlsym, so libadag runs
 * (and its cuda backend says why it has no device) where CUDA is absent.
 * The toolkit's headers give the types, enums and prototypes only: this file
 * is compiled with -DADAG_HAVE_CUDA when the Makefile finds them, and
 * without them it is a backend whose probe says "not built" and whose open
 * fails.
 *
 * How each op maps to CUDA:
 *   - open, bind_thread and every op that creates something on a device
 *     (memory, streams, events, imports) make that device current for the
 *     calling thread first (cudaSetDevice), so the object lands on it;
 *   - streams are cudaStreamNonBlocking (no implicit sync with stream 0);
 *     destroying one waits for its work first;
 *   - copy_async is cudaMemcpyAsync(cudaMemcpyDefault): the addresses say the
 *     direction (unified addressing). With pageable host memory CUDA may
 *     return only after the stream reached the copy and did it (device to
 *     pageable host memory always does); device and pinned memory
 *     (host_alloc: cudaHostAlloc, host_register: cudaHostRegister; both
 *     portable and mapped) copy without the host waiting;
 *   - events are cudaEventDisableTiming | cudaEventInterprocess, so each can
 *     be exported; a handle is the 64-byte CUDA IPC handle (memory: plus the
 *     size, 8 bytes) and a trailer naming the exporting process, no fds.
 *     Another process opens the IPC handle; it must not have inherited an
 *     initialized CUDA from fork. The exporting process itself (thread
 *     actors) gets an alias of the object instead, since CUDA refuses to
 *     open a handle in its own process (gpu/cuda_alias.c). event_create_timed's events have the
 *     default flags (timing, not interprocess), timed with
 *     cudaEventElapsedTime (ms as a float, about 0.5 us resolution);
 *   - stream_sync and event_sync with a deadline poll cudaStreamQuery /
 *     cudaEventQuery (yields, then sleeps doubling from 1 us to 200 us);
 *     with ADAG_FOREVER they block in cudaStreamSynchronize /
 *     cudaEventSynchronize;
 *   - the value ops are the driver's cuStreamWriteValue64 /
 *     cuStreamWaitValue64 on a word's device address
 *     (cudaHostGetDevicePointer), reached through the runtime's
 *     cudaGetDriverEntryPointByVersion: gpu/cuda_values.c.
 * A CUDA error becomes ADAG_ERR_NO_MEMORY (cudaErrorMemoryAllocation) or
 * ADAG_ERR_IO, with "cuda device <i> (<name>): <call>: <cudaError name>:
 * <text>" as the message; ops that return nothing (free, destroy) log it.
 */
#include "gpu/device.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"

#include <stdio.h>
#include <string.h>

extern const adag_device_ops_t adag_device_cuda_ops;

#ifndef ADAG_CUDA_HOME
#define ADAG_CUDA_HOME "/usr/local/cuda"
#endif

#ifndef ADAG_HAVE_CUDA

/* Built without the toolkit's headers: no device, and why. */
static unsigned cuda_probe_unbuilt(char *why, size_t len)
{
    if (why && len)
        snprintf(why, len, "not built: CUDA toolkit headers not found at %s/include",
                 ADAG_CUDA_HOME);
    return 0;
}

static adag_status_t cuda_open_unbuilt(unsigned index, adag_device_t **out)
{
    char why[256];
    *out = NULL;
    cuda_probe_unbuilt(why, sizeof(why));
    return adag__error(ADAG_ERR_NOT_FOUND, "cuda device %u: no CUDA device here: %s", index, why);
}

/* Every other op needs an opened device, which never exists. */
const adag_device_ops_t adag_device_cuda_ops = {
    .name = "cuda",
    .kind = ADAG_DEV_CUDA,
    .probe = cuda_probe_unbuilt,
    .open = cuda_open_unbuilt,
};

#else /* ADAG_HAVE_CUDA */

#include "gpu/cuda_alias.h"
#include "gpu/cuda_impl.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdalign.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- objects ---- */

/* adag_dev_mem_t.impl says which kind of memory it is. */
static char mem_tag_device, mem_tag_host, mem_tag_import, mem_tag_registered;

#define MEM_HANDLE_LEN (sizeof(cudaIpcMemHandle_t) + sizeof(uint64_t))
_Static_assert(MEM_HANDLE_LEN <= ADAG_DEVICE_HANDLE_BYTES, "a CUDA memory handle does not fit");


/* ---- probe, open, close ---- */

static adag_status_t cuda_pci_bus_id(unsigned index, char *buf, size_t len)
{
    if (!adag__cudart_loaded())
        return adag__error(ADAG_ERR_NOT_FOUND, "cuda device %u: %s", index, adag_cudart.error);
    cudaError_t err = adag_cudart.fn.DeviceGetPCIBusId(buf, (int)len, (int)index);
    if (err != cudaSuccess) {
        (void)adag_cudart.fn.GetLastError(); /* not the program's error (cuda_vmsg) */
        return adag__error(ADAG_ERR_NOT_FOUND, "cuda device %u: cudaDeviceGetPCIBusId: %s",
                          index, adag_cudart.fn.GetErrorString(err));
    }
    return ADAG_OK;
}

/* The number of devices; 0 and why not. On success `why` says what runs
 * them ("libcudart.so.13: runtime 13.0, driver 13.0"). */
static unsigned cuda_probe(char *why, size_t len)
{
    char scratch[8];
    if (!why || !len) {
        why = scratch;
        len = sizeof(scratch);
    }
    if (!adag__cudart_loaded()) {
        snprintf(why, len, "%s", adag_cudart.error);
        return 0;
    }
    int n = 0;
    cudaError_t err = adag_cudart.fn.GetDeviceCount(&n);
    if (err != cudaSuccess) {
        const char *kind = err == cudaErrorInsufficientDriver ? "no driver"
                           : err == cudaErrorNoDevice         ? "no device"
                                                              : "cudaGetDeviceCount failed";
        snprintf(why, len, "%s (%s: %s)", kind, adag_cudart.fn.GetErrorName(err),
                 adag_cudart.fn.GetErrorString(err));
        (void)adag_cudart.fn.GetLastError(); /* not the program's error (cuda_vmsg) */
        return 0;
    }
    if (n <= 0) {
        snprintf(why, len, "no device (cudaGetDeviceCount found none)");
        return 0;
    }
    int rv = 0, dv = 0;
    adag_cudart.fn.RuntimeGetVersion(&rv);
    adag_cudart.fn.DriverGetVersion(&dv);
    snprintf(why, len, "%s: runtime %d.%d, driver %d.%d", adag_cudart.loaded, rv / 1000, rv % 1000 / 10,
             dv / 1000, dv % 1000 / 10);
    return (unsigned)n;
}

/* cudaGetDeviceProperties writes into this; only the name (the first
 * field) is read. It is larger than this header's struct: a runtime of
 * another version may write more. */
typedef union {
    struct cudaDeviceProp p;
    char bytes[sizeof(struct cudaDeviceProp) + 4096];
} device_prop_t;

static adag_status_t cuda_open(unsigned index, adag_device_t **out)
{
    *out = NULL;
    char why[ADAG_ERROR_MAX / 2];
    unsigned n = cuda_probe(why, sizeof(why));
    if (n == 0)
        return adag__error(ADAG_ERR_NOT_FOUND, "cuda device %u: no CUDA device here: %s", index,
                          why);
    if (index >= n)
        return adag__error(ADAG_ERR_NOT_FOUND, "cuda device %u: there are %u CUDA devices here",
                          index, n);
    adag_status_t st;
    device_prop_t *prop = NULL;
    cuda_dev_t *d = calloc(1, sizeof(*d));
    if (!d || !(prop = calloc(1, sizeof(*prop)))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u: out of memory", index);
        goto fail;
    }
    d->base.ops = &adag_device_cuda_ops;
    d->base.index = index;
    snprintf(d->name, sizeof(d->name), "?");
    if ((st = adag__cuda_set_device(d)) != ADAG_OK)
        goto fail;
    cudaError_t err = adag_cudart.fn.GetDeviceProperties(&prop->p, (int)index);
    if (err != cudaSuccess) {
        st = adag__cuda_fail(d, err, "cudaGetDeviceProperties");
        goto fail;
    }
    snprintf(d->name, sizeof(d->name), "%.*s", (int)sizeof(prop->p.name), prop->p.name);
    free(prop);
    adag__cuda_values_probe(d);
    *out = &d->base;
    return ADAG_OK;
fail:
    free(prop);
    free(d);
    return st;
}

static void cuda_close(adag_device_t *dev)
{
    if (!dev)
        return;
    cuda_dev_t *d = adag__cuda_dev(dev);
    uint64_t live[7] = {d->mem,          d->host_mem,        d->streams,   d->events,
                        d->imported_mem, d->imported_events, d->registered};
    if (live[0] | live[1] | live[2] | live[3] | live[4] | live[5] | live[6])
        ADAG_LOG_WARN("cuda device %u (%s): closed with objects live: %llu memory, %llu host "
                      "memory, %llu streams, %llu events, %llu imported memory, %llu imported "
                      "events, %llu registered ranges",
                      dev->index, d->name, (unsigned long long)live[0], (unsigned long long)live[1],
                      (unsigned long long)live[2], (unsigned long long)live[3],
                      (unsigned long long)live[4], (unsigned long long)live[5],
                      (unsigned long long)live[6]);
    free(d);
}

static adag_status_t cuda_bind_thread(adag_device_t *dev)
{
    return adag__cuda_set_device(adag__cuda_dev(dev));
}

/* ---- memory ---- */

static adag_status_t cuda_mem_alloc(adag_device_t *dev, size_t size, adag_dev_mem_t *mem)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    memset(mem, 0, sizeof(*mem));
    adag_status_t st = adag__cuda_set_device(d);
    if (st != ADAG_OK)
        return st;
    void *ptr = NULL;
    cudaError_t err = adag_cudart.fn.Malloc(&ptr, size);
    if (err != cudaSuccess)
        return adag__cuda_fail(d, err, "cudaMalloc(%zu bytes)", size);
    *mem = (adag_dev_mem_t){.ptr = ptr, .size = size, .impl = &mem_tag_device};
    atomic_fetch_add(&d->mem, 1);
    return ADAG_OK;
}

/* Frees memory that the allocator tagged `tag` gave (anything else is
 * refused with a log line and left alone). */
static void free_tagged(adag_device_t *dev, adag_dev_mem_t *mem, const char *tag,
                        cudaError_t (*release)(void *), const char *what,
                        _Atomic uint64_t *count)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    if (!mem || !mem->impl)
        return;
    if (mem->impl != tag) {
        ADAG_LOG_ERROR("cuda device %u (%s): %s of memory its allocator did not give: left alone",
                       dev->index, d->name, what);
        return;
    }
    cudaError_t err = release(mem->ptr);
    if (err != cudaSuccess)
        adag__cuda_warn(d, err, "%s(%p)", what, mem->ptr);
    atomic_fetch_sub(count, 1);
    memset(mem, 0, sizeof(*mem));
}

static void cuda_mem_free(adag_device_t *dev, adag_dev_mem_t *mem)
{
    if (mem && mem->impl == &mem_tag_device && adag__cuda_alias_mem_free(adag__cuda_dev(dev), mem))
        return; /* exported: freed with its last alias (gpu/cuda_alias.c) */
    free_tagged(dev, mem, &mem_tag_device, adag_cudart.fn.Free, "cudaFree",
                &adag__cuda_dev(dev)->mem);
}

static adag_status_t cuda_host_alloc(adag_device_t *dev, size_t size, adag_dev_mem_t *mem)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    memset(mem, 0, sizeof(*mem));
    adag_status_t st = adag__cuda_set_device(d);
    if (st != ADAG_OK)
        return st;
    void *ptr = NULL;
    /* mapped: a word (value ops) may live in it (gpu/cuda_values.c) */
    cudaError_t err =
        adag_cudart.fn.HostAlloc(&ptr, size, cudaHostAllocPortable | cudaHostAllocMapped);
    if (err != cudaSuccess)
        return adag__cuda_fail(d, err, "cudaHostAlloc(%zu bytes)", size);
    *mem = (adag_dev_mem_t){.ptr = ptr, .size = size, .impl = &mem_tag_host};
    atomic_fetch_add(&d->host_mem, 1);
    return ADAG_OK;
}

static void cuda_host_free(adag_device_t *dev, adag_dev_mem_t *mem)
{
    free_tagged(dev, mem, &mem_tag_host, adag_cudart.fn.FreeHost, "cudaFreeHost",
                &adag__cuda_dev(dev)->host_mem);
}

static adag_status_t cuda_host_register(adag_device_t *dev, void *ptr, size_t size,
                                        adag_dev_mem_t *reg)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    memset(reg, 0, sizeof(*reg));
    void *base; /* whole pages (what the driver pins anyway): a shared page overlaps */
    size_t len;
    adag__device_page_span(ptr, size, &base, &len);
    adag_status_t st = adag__cuda_set_device(d);
    if (st != ADAG_OK)
        return st;
    /* mapped: cudaHostGetDevicePointer gives a word's device address in it
     * (value ops; under unified addressing CUDA maps it anyway) */
    cudaError_t err =
        adag_cudart.fn.HostRegister(base, len, cudaHostRegisterPortable | cudaHostRegisterMapped);
    if (err == cudaErrorHostMemoryAlreadyRegistered) {
        (void)adag_cudart.fn.GetLastError();
        return adag__error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): host_register of %zu bytes at %p: the range "
                          "overlaps memory already registered",
                          dev->index, d->name, len, (void *)base);
    }
    if (err != cudaSuccess)
        return adag__cuda_fail(d, err, "cudaHostRegister(%p, %zu bytes)", (void *)base, len);
    *reg = (adag_dev_mem_t){.ptr = base, .size = len, .impl = &mem_tag_registered};
    atomic_fetch_add(&d->registered, 1);
    return ADAG_OK;
}

static void cuda_host_unregister(adag_device_t *dev, adag_dev_mem_t *reg)
{
    free_tagged(dev, reg, &mem_tag_registered, adag_cudart.fn.HostUnregister,
                "cudaHostUnregister", &adag__cuda_dev(dev)->registered);
}

static adag_status_t cuda_mem_export(adag_device_t *dev, const adag_dev_mem_t *mem,
                                     adag_dev_handle_t *h)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    memset(h, 0, sizeof(*h));
    h->fds[0] = h->fds[1] = -1;
    if (mem->impl != &mem_tag_device)
        return adag__error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): mem_export: only memory from mem_alloc can be "
                          "exported",
                          dev->index, d->name);
    cudaIpcMemHandle_t ipc;
    cudaError_t err = adag_cudart.fn.IpcGetMemHandle(&ipc, mem->ptr);
    if (err != cudaSuccess)
        return adag__cuda_fail(d, err, "cudaIpcGetMemHandle(%p)", mem->ptr);
    uint64_t size = mem->size;
    memcpy(h->bytes, &ipc, sizeof(ipc));
    memcpy(h->bytes + sizeof(ipc), &size, sizeof(size));
    h->len = MEM_HANDLE_LEN;
    return adag__cuda_alias_export_mem(d, h, MEM_HANDLE_LEN, mem->ptr, mem->size);
}

static adag_status_t cuda_mem_import(adag_device_t *dev, adag_dev_handle_t *h, adag_dev_mem_t *mem)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    memset(mem, 0, sizeof(*mem));
    adag_status_t st;
    if (adag__cuda_alias_import_mem(d, h, MEM_HANDLE_LEN, mem, &st))
        return st; /* this process's own: an alias (gpu/cuda_alias.c) */
    if (h->nfds || h->len != MEM_HANDLE_LEN) {
        st = adag__error(ADAG_ERR_PROTOCOL,
                        "cuda device %u (%s): mem_import: not a CUDA memory handle (%u bytes, %u "
                        "fds; one is %zu bytes, no fds)",
                        dev->index, d->name, h->len, h->nfds, MEM_HANDLE_LEN);
        goto out;
    }
    cudaIpcMemHandle_t ipc;
    uint64_t size;
    memcpy(&ipc, h->bytes, sizeof(ipc));
    memcpy(&size, h->bytes + sizeof(ipc), sizeof(size));
    if ((st = adag__cuda_set_device(d)) != ADAG_OK)
        goto out;
    void *ptr = NULL;
    cudaError_t err = adag_cudart.fn.IpcOpenMemHandle(&ptr, ipc, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
        st = adag__cuda_fail(d, err, "cudaIpcOpenMemHandle (%llu bytes)", (unsigned long long)size);
        goto out;
    }
    *mem = (adag_dev_mem_t){.ptr = ptr, .size = (size_t)size, .impl = &mem_tag_import};
    atomic_fetch_add(&d->imported_mem, 1);
out:
    adag__dev_handle_close(h); /* CUDA handles carry no fds */
    return st;
}

static void cuda_mem_unimport(adag_device_t *dev, adag_dev_mem_t *mem)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    if (!mem || !mem->impl || adag__cuda_alias_mem_unimport(d, mem))
        return;
    if (mem->impl != &mem_tag_import) {
        ADAG_LOG_ERROR("cuda device %u (%s): mem_unimport of memory that mem_import did not "
                       "give: left alone",
                       dev->index, d->name);
        return;
    }
    cudaError_t err = adag_cudart.fn.IpcCloseMemHandle(mem->ptr);
    if (err != cudaSuccess)
        adag__cuda_warn(d, err, "cudaIpcCloseMemHandle(%p)", mem->ptr);
    atomic_fetch_sub(&d->imported_mem, 1);
    memset(mem, 0, sizeof(*mem));
}

static void cuda_counts(adag_device_t *dev, adag_device_counts_t *c)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    *c = (adag_device_counts_t){
        .mem = atomic_load(&d->mem),
        .host_mem = atomic_load(&d->host_mem),
        .streams = atomic_load(&d->streams),
        .events = atomic_load(&d->events),
        .imported_mem = atomic_load(&d->imported_mem),
        .imported_events = atomic_load(&d->imported_events),
        .registered = atomic_load(&d->registered),
        .graphs = atomic_load(&d->graphs),
    };
}

const adag_device_ops_t adag_device_cuda_ops = {
    .name = "cuda",
    .kind = ADAG_DEV_CUDA,
    .probe = cuda_probe,
    .open = cuda_open,
    .close = cuda_close,
    .pci_bus_id = cuda_pci_bus_id,
    .bind_thread = cuda_bind_thread,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .mem_export = cuda_mem_export,
    .mem_import = cuda_mem_import,
    .mem_unimport = cuda_mem_unimport,
    .stream_create = adag__cuda_stream_create,
    .stream_destroy = adag__cuda_stream_destroy,
    .copy_async = adag__cuda_graph_copy_async,
    .host_fn = adag__cuda_host_fn,
    .launch_host = adag__cuda_graph_launch_host,
    .stream_native = adag__cuda_stream_native,
    .stream_sync = adag__cuda_graph_stream_sync,
    .event_create = adag__cuda_event_create,
    .event_destroy = adag__cuda_event_destroy,
    .event_record = adag__cuda_graph_event_record,
    .stream_wait_event = adag__cuda_graph_stream_wait_event,
    .event_query = adag__cuda_graph_event_query,
    .event_sync = adag__cuda_graph_event_sync,
    .event_export = adag__cuda_event_export,
    .event_import = adag__cuda_event_import,
    .event_abandon = adag__cuda_event_abandon,
    .event_create_timed = adag__cuda_event_create_timed,
    .event_elapsed_ns = adag__cuda_event_elapsed_ns,
    .values_supported = adag__cuda_values_supported,
    .word_map = adag__cuda_word_map,
    .stream_write_value64 = adag__cuda_stream_write_value64,
    .stream_wait_value64 = adag__cuda_stream_wait_value64,
    .word_store = adag__cuda_word_store,
    .stream_capture_begin = adag__cuda_stream_capture_begin,
    .stream_capture_end = adag__cuda_stream_capture_end,
    .graph_launch = adag__cuda_graph_launch,
    .graph_destroy = adag__cuda_graph_destroy,
    .counts = cuda_counts,
};

#endif /* ADAG_HAVE_CUDA */

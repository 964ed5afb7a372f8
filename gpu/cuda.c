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
 *     stage the copy before it returns; device and pinned memory
 *     (host_alloc) copy without waiting;
 *   - events are cudaEventDisableTiming | cudaEventInterprocess, so each can
 *     be exported; a handle is the 64-byte CUDA IPC handle (memory: plus the
 *     size, 8 bytes), no fds. Importing needs another process than the one
 *     that exported (CUDA's rule), and that process must not have inherited
 *     an initialized CUDA from fork. event_create_timed's events have the
 *     default flags (timing, not interprocess), timed with
 *     cudaEventElapsedTime (ms as a float, about 0.5 us resolution);
 *   - stream_sync and event_sync with a deadline poll cudaStreamQuery /
 *     cudaEventQuery (yields, then sleeps doubling from 1 us to 200 us);
 *     with ADAG_FOREVER they block in cudaStreamSynchronize /
 *     cudaEventSynchronize.
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
    return adag_error(ADAG_ERR_NOT_FOUND, "cuda device %u: no CUDA device here: %s", index, why);
}

/* Every other op needs an opened device, which never exists. */
const adag_device_ops_t adag_device_cuda_ops = {
    .name = "cuda",
    .kind = ADAG_DEVICE_KIND_CUDA,
    .probe = cuda_probe_unbuilt,
    .open = cuda_open_unbuilt,
};

#else /* ADAG_HAVE_CUDA */

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

/* ---- the runtime, loaded once ---- */

/* Every runtime function this backend calls; each field has the type of the
 * header's prototype, and is resolved as "cuda" #name. */
#define CUDART_FUNCTIONS(X)                                                                        \
    X(GetErrorName) X(GetErrorString) X(RuntimeGetVersion) X(DriverGetVersion)                     \
    X(GetDeviceCount) X(SetDevice) X(GetDeviceProperties)                                          \
    X(Malloc) X(Free) X(HostAlloc) X(FreeHost)                                                     \
    X(IpcGetMemHandle) X(IpcOpenMemHandle) X(IpcCloseMemHandle)                                    \
    X(StreamCreateWithFlags) X(StreamDestroy) X(StreamSynchronize) X(StreamQuery)                  \
    X(StreamWaitEvent) X(MemcpyAsync) X(LaunchHostFunc)                                            \
    X(EventCreateWithFlags) X(EventDestroy) X(EventRecord) X(EventQuery) X(EventSynchronize)       \
    X(EventElapsedTime) X(IpcGetEventHandle) X(IpcOpenEventHandle)

#define CUDART_FIELD(name) __typeof__(&cuda##name) name;
typedef struct {
    CUDART_FUNCTIONS(CUDART_FIELD)
} cudart_fns_t;
#undef CUDART_FIELD

static struct {
    pthread_once_t once;
    void *lib;                  /* NULL if loading failed */
    char loaded[256];           /* what was loaded */
    char error[ADAG_ERROR_MAX]; /* why not */
    cudart_fns_t fn;
} rt = {.once = PTHREAD_ONCE_INIT};

/* The candidates when ADAG_CUDART_PATH is unset, in order. The toolkit's
 * lib64 comes last: it is often not on the loader's path. */
static const char *const cudart_names[] = {
    "libcudart.so.13",
    "libcudart.so.12",
    "libcudart.so",
    ADAG_CUDA_HOME "/lib64/libcudart.so",
};
#define NCUDART_NAMES (sizeof(cudart_names) / sizeof(cudart_names[0]))

static void cudart_load(void)
{
    const char *forced = adag_settings()->cudart_path;
    const char *name = NULL;
    if (forced) {
        rt.lib = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
        if (!rt.lib) {
            snprintf(rt.error, sizeof(rt.error),
                     "cannot load the CUDA runtime %s (ADAG_CUDART_PATH): %s", forced, dlerror());
            return;
        }
        name = forced;
    } else {
        char first[ADAG_ERROR_MAX / 2] = "";
        for (size_t i = 0; i < NCUDART_NAMES && !rt.lib; i++) {
            rt.lib = dlopen(cudart_names[i], RTLD_NOW | RTLD_LOCAL);
            if (rt.lib)
                name = cudart_names[i];
            else if (i == 0)
                snprintf(first, sizeof(first), "%s", dlerror());
        }
        if (!rt.lib) {
            snprintf(rt.error, sizeof(rt.error),
                     "cannot load the CUDA runtime (tried libcudart.so.13, .so.12, .so and %s; "
                     "ADAG_CUDART_PATH sets the path): %s",
                     cudart_names[NCUDART_NAMES - 1], first);
            return;
        }
    }
    snprintf(rt.loaded, sizeof(rt.loaded), "%s", name);
#define CUDART_RESOLVE(sym)                                                                        \
    rt.fn.sym = (__typeof__(rt.fn.sym))dlsym(rt.lib, "cuda" #sym);                                 \
    if (!rt.fn.sym) {                                                                              \
        snprintf(rt.error, sizeof(rt.error), "the CUDA runtime %s has no cuda" #sym, name);       \
        goto fail;                                                                                 \
    }
    CUDART_FUNCTIONS(CUDART_RESOLVE)
#undef CUDART_RESOLVE
    return;
fail:
    dlclose(rt.lib);
    rt.lib = NULL;
}

/* Whether the runtime is loaded (the first call loads it); rt.error says
 * why not. */
static bool cudart_loaded(void)
{
    pthread_once(&rt.once, cudart_load);
    return rt.lib != NULL;
}

/* ---- objects ---- */

typedef struct {
    adag_device_t base;
    char name[128]; /* cudaDeviceProp.name, for messages */
    _Atomic uint64_t mem, host_mem, streams, events, imported_mem, imported_events;
} cuda_dev_t;

struct adag_dev_stream {
    cuda_dev_t *dev;
    cudaStream_t s;
};

struct adag_dev_event {
    cuda_dev_t *dev;
    cudaEvent_t ev;
    bool imported; /* can be waited on, not recorded */
    bool timed;    /* event_create_timed: can be timed, not exported */
};

/* adag_dev_mem_t.impl says which kind of memory it is. */
static char mem_tag_device, mem_tag_host, mem_tag_import;

#define MEM_HANDLE_LEN (sizeof(cudaIpcMemHandle_t) + sizeof(uint64_t))
#define EVENT_HANDLE_LEN (sizeof(cudaIpcEventHandle_t))
_Static_assert(MEM_HANDLE_LEN <= ADAG_DEVICE_HANDLE_BYTES, "a CUDA memory handle does not fit");
_Static_assert(EVENT_HANDLE_LEN <= ADAG_DEVICE_HANDLE_BYTES, "a CUDA event handle does not fit");

static cuda_dev_t *cuda_dev(adag_device_t *dev)
{
    return (cuda_dev_t *)dev;
}

/* ---- errors ---- */

/* "cuda device <i> (<name>): <what>: <error name>: <error text>" into buf. */
static void cuda_vmsg(char *buf, size_t len, const cuda_dev_t *d, cudaError_t err,
                      const char *fmt, va_list ap)
{
    char what[256];
    vsnprintf(what, sizeof(what), fmt, ap);
    const char *ename = rt.fn.GetErrorName(err);
    const char *etext = rt.fn.GetErrorString(err);
    snprintf(buf, len, "cuda device %u (%s): %s: %s: %s", d->base.index, d->name, what,
             ename ? ename : "?", etext ? etext : "?");
}

/* Records a CUDA failure (what names the call) as this thread's error. */
static adag_status_t ADAG_PRINTF(3, 4)
    cuda_fail(const cuda_dev_t *d, cudaError_t err, const char *fmt, ...)
{
    char msg[ADAG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    cuda_vmsg(msg, sizeof(msg), d, err, fmt, ap);
    va_end(ap);
    return adag_error(err == cudaErrorMemoryAllocation ? ADAG_ERR_NO_MEMORY : ADAG_ERR_IO, "%s",
                      msg);
}

/* The same for ops that return nothing: logged, the thread's error kept. */
static void ADAG_PRINTF(3, 4) cuda_warn(const cuda_dev_t *d, cudaError_t err, const char *fmt, ...)
{
    char msg[ADAG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    cuda_vmsg(msg, sizeof(msg), d, err, fmt, ap);
    va_end(ap);
    ADAG_LOG_WARN("%s", msg);
}

static adag_status_t set_device(cuda_dev_t *d)
{
    cudaError_t err = rt.fn.SetDevice((int)d->base.index);
    return err == cudaSuccess ? ADAG_OK : cuda_fail(d, err, "cudaSetDevice(%u)", d->base.index);
}

/* ---- probe, open, close ---- */

/* The number of devices; 0 and why not. On success `why` says what runs
 * them ("libcudart.so.13: runtime 13.0, driver 13.0"). */
static unsigned cuda_probe(char *why, size_t len)
{
    char scratch[8];
    if (!why || !len) {
        why = scratch;
        len = sizeof(scratch);
    }
    if (!cudart_loaded()) {
        snprintf(why, len, "%s", rt.error);
        return 0;
    }
    int n = 0;
    cudaError_t err = rt.fn.GetDeviceCount(&n);
    if (err != cudaSuccess) {
        const char *kind = err == cudaErrorInsufficientDriver ? "no driver"
                           : err == cudaErrorNoDevice         ? "no device"
                                                              : "cudaGetDeviceCount failed";
        snprintf(why, len, "%s (%s: %s)", kind, rt.fn.GetErrorName(err),
                 rt.fn.GetErrorString(err));
        return 0;
    }
    if (n <= 0) {
        snprintf(why, len, "no device (cudaGetDeviceCount found none)");
        return 0;
    }
    int rv = 0, dv = 0;
    rt.fn.RuntimeGetVersion(&rv);
    rt.fn.DriverGetVersion(&dv);
    snprintf(why, len, "%s: runtime %d.%d, driver %d.%d", rt.loaded, rv / 1000, rv % 1000 / 10,
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
        return adag_error(ADAG_ERR_NOT_FOUND, "cuda device %u: no CUDA device here: %s", index,
                          why);
    if (index >= n)
        return adag_error(ADAG_ERR_NOT_FOUND, "cuda device %u: there are %u CUDA devices here",
                          index, n);
    adag_status_t st;
    device_prop_t *prop = NULL;
    cuda_dev_t *d = calloc(1, sizeof(*d));
    if (!d || !(prop = calloc(1, sizeof(*prop)))) {
        st = adag_error(ADAG_ERR_NO_MEMORY, "cuda device %u: out of memory", index);
        goto fail;
    }
    d->base.ops = &adag_device_cuda_ops;
    d->base.index = index;
    snprintf(d->name, sizeof(d->name), "?");
    if ((st = set_device(d)) != ADAG_OK)
        goto fail;
    cudaError_t err = rt.fn.GetDeviceProperties(&prop->p, (int)index);
    if (err != cudaSuccess) {
        st = cuda_fail(d, err, "cudaGetDeviceProperties");
        goto fail;
    }
    snprintf(d->name, sizeof(d->name), "%.*s", (int)sizeof(prop->p.name), prop->p.name);
    free(prop);
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
    cuda_dev_t *d = cuda_dev(dev);
    uint64_t live[6] = {d->mem, d->host_mem, d->streams, d->events, d->imported_mem,
                        d->imported_events};
    if (live[0] | live[1] | live[2] | live[3] | live[4] | live[5])
        ADAG_LOG_WARN("cuda device %u (%s): closed with objects live: %llu memory, %llu host "
                      "memory, %llu streams, %llu events, %llu imported memory, %llu imported "
                      "events",
                      dev->index, d->name, (unsigned long long)live[0], (unsigned long long)live[1],
                      (unsigned long long)live[2], (unsigned long long)live[3],
                      (unsigned long long)live[4], (unsigned long long)live[5]);
    free(d);
}

static adag_status_t cuda_bind_thread(adag_device_t *dev)
{
    return set_device(cuda_dev(dev));
}

/* ---- memory ---- */

static adag_status_t cuda_mem_alloc(adag_device_t *dev, size_t size, adag_dev_mem_t *mem)
{
    cuda_dev_t *d = cuda_dev(dev);
    memset(mem, 0, sizeof(*mem));
    adag_status_t st = set_device(d);
    if (st != ADAG_OK)
        return st;
    void *ptr = NULL;
    cudaError_t err = rt.fn.Malloc(&ptr, size);
    if (err != cudaSuccess)
        return cuda_fail(d, err, "cudaMalloc(%zu bytes)", size);
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
    cuda_dev_t *d = cuda_dev(dev);
    if (!mem || !mem->impl)
        return;
    if (mem->impl != tag) {
        ADAG_LOG_ERROR("cuda device %u (%s): %s of memory its allocator did not give: left alone",
                       dev->index, d->name, what);
        return;
    }
    cudaError_t err = release(mem->ptr);
    if (err != cudaSuccess)
        cuda_warn(d, err, "%s(%p)", what, mem->ptr);
    atomic_fetch_sub(count, 1);
    memset(mem, 0, sizeof(*mem));
}

static void cuda_mem_free(adag_device_t *dev, adag_dev_mem_t *mem)
{
    free_tagged(dev, mem, &mem_tag_device, rt.fn.Free, "cudaFree", &cuda_dev(dev)->mem);
}

static adag_status_t cuda_host_alloc(adag_device_t *dev, size_t size, adag_dev_mem_t *mem)
{
    cuda_dev_t *d = cuda_dev(dev);
    memset(mem, 0, sizeof(*mem));
    adag_status_t st = set_device(d);
    if (st != ADAG_OK)
        return st;
    void *ptr = NULL;
    cudaError_t err = rt.fn.HostAlloc(&ptr, size, cudaHostAllocPortable);
    if (err != cudaSuccess)
        return cuda_fail(d, err, "cudaHostAlloc(%zu bytes)", size);
    *mem = (adag_dev_mem_t){.ptr = ptr, .size = size, .impl = &mem_tag_host};
    atomic_fetch_add(&d->host_mem, 1);
    return ADAG_OK;
}

static void cuda_host_free(adag_device_t *dev, adag_dev_mem_t *mem)
{
    free_tagged(dev, mem, &mem_tag_host, rt.fn.FreeHost, "cudaFreeHost",
                &cuda_dev(dev)->host_mem);
}

static adag_status_t cuda_mem_export(adag_device_t *dev, const adag_dev_mem_t *mem,
                                     adag_dev_handle_t *h)
{
    cuda_dev_t *d = cuda_dev(dev);
    memset(h, 0, sizeof(*h));
    h->fds[0] = h->fds[1] = -1;
    if (mem->impl != &mem_tag_device)
        return adag_error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): mem_export: only memory from mem_alloc can be "
                          "exported",
                          dev->index, d->name);
    cudaIpcMemHandle_t ipc;
    cudaError_t err = rt.fn.IpcGetMemHandle(&ipc, mem->ptr);
    if (err != cudaSuccess)
        return cuda_fail(d, err, "cudaIpcGetMemHandle(%p)", mem->ptr);
    uint64_t size = mem->size;
    memcpy(h->bytes, &ipc, sizeof(ipc));
    memcpy(h->bytes + sizeof(ipc), &size, sizeof(size));
    h->len = MEM_HANDLE_LEN;
    return ADAG_OK;
}

static adag_status_t cuda_mem_import(adag_device_t *dev, adag_dev_handle_t *h, adag_dev_mem_t *mem)
{
    cuda_dev_t *d = cuda_dev(dev);
    memset(mem, 0, sizeof(*mem));
    adag_status_t st;
    if (h->nfds || h->len != MEM_HANDLE_LEN) {
        st = adag_error(ADAG_ERR_PROTOCOL,
                        "cuda device %u (%s): mem_import: not a CUDA memory handle (%u bytes, %u "
                        "fds; one is %zu bytes, no fds)",
                        dev->index, d->name, h->len, h->nfds, MEM_HANDLE_LEN);
        goto out;
    }
    cudaIpcMemHandle_t ipc;
    uint64_t size;
    memcpy(&ipc, h->bytes, sizeof(ipc));
    memcpy(&size, h->bytes + sizeof(ipc), sizeof(size));
    if ((st = set_device(d)) != ADAG_OK)
        goto out;
    void *ptr = NULL;
    cudaError_t err = rt.fn.IpcOpenMemHandle(&ptr, ipc, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
        st = cuda_fail(d, err, "cudaIpcOpenMemHandle (%llu bytes)", (unsigned long long)size);
        goto out;
    }
    *mem = (adag_dev_mem_t){.ptr = ptr, .size = (size_t)size, .impl = &mem_tag_import};
    atomic_fetch_add(&d->imported_mem, 1);
out:
    adag_dev_handle_close(h); /* CUDA handles carry no fds */
    return st;
}

static void cuda_mem_unimport(adag_device_t *dev, adag_dev_mem_t *mem)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (!mem || !mem->impl)
        return;
    if (mem->impl != &mem_tag_import) {
        ADAG_LOG_ERROR("cuda device %u (%s): mem_unimport of memory that mem_import did not "
                       "give: left alone",
                       dev->index, d->name);
        return;
    }
    cudaError_t err = rt.fn.IpcCloseMemHandle(mem->ptr);
    if (err != cudaSuccess)
        cuda_warn(d, err, "cudaIpcCloseMemHandle(%p)", mem->ptr);
    atomic_fetch_sub(&d->imported_mem, 1);
    memset(mem, 0, sizeof(*mem));
}

/* ---- waiting with a deadline ---- */

/* Yields a few times, then sleeps 1 us doubling to 200 us, never past the
 * deadline. */
static void backoff(unsigned *round, int64_t deadline)
{
    unsigned r = (*round)++;
    if (r < 16) {
        sched_yield();
        return;
    }
    int64_t ns = (int64_t)1000 << (r - 16 < 8 ? r - 16 : 8);
    if (ns > 200000)
        ns = 200000;
    int64_t left = deadline - adag_now_ns();
    if (left <= 0)
        return;
    if (ns > left)
        ns = left;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ns};
    nanosleep(&ts, NULL);
}

/* ---- streams ---- */

static adag_status_t cuda_stream_create(adag_device_t *dev, adag_dev_stream_t **out)
{
    cuda_dev_t *d = cuda_dev(dev);
    *out = NULL;
    adag_status_t st = set_device(d);
    if (st != ADAG_OK)
        return st;
    adag_dev_stream_t *s = calloc(1, sizeof(*s));
    if (!s)
        return adag_error(ADAG_ERR_NO_MEMORY, "cuda device %u (%s): stream_create: out of memory",
                          dev->index, d->name);
    s->dev = d;
    cudaError_t err = rt.fn.StreamCreateWithFlags(&s->s, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        st = cuda_fail(d, err, "cudaStreamCreateWithFlags(cudaStreamNonBlocking)");
        free(s);
        return st;
    }
    atomic_fetch_add(&d->streams, 1);
    *out = s;
    return ADAG_OK;
}

static void cuda_stream_destroy(adag_device_t *dev, adag_dev_stream_t *s)
{
    (void)dev;
    if (!s)
        return;
    cuda_dev_t *d = s->dev;
    cudaError_t err = rt.fn.StreamSynchronize(s->s);
    if (err != cudaSuccess)
        cuda_warn(d, err, "cudaStreamSynchronize before cudaStreamDestroy");
    if ((err = rt.fn.StreamDestroy(s->s)) != cudaSuccess)
        cuda_warn(d, err, "cudaStreamDestroy");
    atomic_fetch_sub(&d->streams, 1);
    free(s);
}

static adag_status_t cuda_copy_async(adag_dev_stream_t *s, void *dst, const void *src, size_t size)
{
    if (size == 0)
        return ADAG_OK;
    cudaError_t err = rt.fn.MemcpyAsync(dst, src, size, cudaMemcpyDefault, s->s);
    return err == cudaSuccess ? ADAG_OK
                              : cuda_fail(s->dev, err, "cudaMemcpyAsync(%p <- %p, %zu bytes)",
                                          dst, src, size);
}

static adag_status_t cuda_host_fn(adag_dev_stream_t *s, adag_host_fn fn, void *arg)
{
    cudaError_t err = rt.fn.LaunchHostFunc(s->s, fn, arg);
    return err == cudaSuccess ? ADAG_OK : cuda_fail(s->dev, err, "cudaLaunchHostFunc");
}

/* launch_host: the copy of the arguments travels with fn and is freed
 * after it ran. */
typedef struct {
    adag_host_fn fn;
    size_t size;
    alignas(16) unsigned char args[];
} launch_block_t;

static void launch_trampoline(void *arg)
{
    launch_block_t *b = arg;
    b->fn(b->args);
    free(b);
}

static adag_status_t cuda_launch_host(adag_dev_stream_t *s, adag_host_fn fn, const void *args,
                                      size_t size)
{
    if (size > ADAG_DEVICE_ARGS_MAX)
        return adag_error(ADAG_ERR_INVALID,
                          "cuda device %u: launch_host: %zu bytes of arguments, at most %d",
                          s->dev->base.index, size, ADAG_DEVICE_ARGS_MAX);
    launch_block_t *b = malloc(sizeof(*b) + size);
    if (!b)
        return adag_error(ADAG_ERR_NO_MEMORY, "cuda device %u: launch_host", s->dev->base.index);
    b->fn = fn;
    b->size = size;
    if (size)
        memcpy(b->args, args, size);
    cudaError_t err = rt.fn.LaunchHostFunc(s->s, launch_trampoline, b);
    if (err != cudaSuccess) {
        free(b);
        return cuda_fail(s->dev, err, "cudaLaunchHostFunc");
    }
    return ADAG_OK;
}

static void *cuda_stream_native(adag_dev_stream_t *s)
{
    return s->s;
}

static adag_status_t cuda_stream_sync(adag_dev_stream_t *s, int64_t deadline)
{
    cudaError_t err;
    if (deadline == ADAG_FOREVER) {
        err = rt.fn.StreamSynchronize(s->s);
        return err == cudaSuccess ? ADAG_OK : cuda_fail(s->dev, err, "cudaStreamSynchronize");
    }
    for (unsigned round = 0;; backoff(&round, deadline)) {
        err = rt.fn.StreamQuery(s->s);
        if (err == cudaSuccess)
            return ADAG_OK;
        if (err != cudaErrorNotReady)
            return cuda_fail(s->dev, err, "cudaStreamQuery");
        if (adag_now_ns() >= deadline)
            return adag_error(ADAG_ERR_TIMEOUT,
                              "cuda device %u (%s): stream_sync: the stream's work did not finish "
                              "before the deadline",
                              s->dev->base.index, s->dev->name);
    }
}

/* ---- events ---- */

static adag_status_t event_create(adag_device_t *dev, bool timed, adag_dev_event_t **out)
{
    cuda_dev_t *d = cuda_dev(dev);
    *out = NULL;
    adag_status_t st = set_device(d);
    if (st != ADAG_OK)
        return st;
    adag_dev_event_t *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return adag_error(ADAG_ERR_NO_MEMORY, "cuda device %u (%s): event_create: out of memory",
                          dev->index, d->name);
    ev->dev = d;
    ev->timed = timed;
    unsigned flags = timed ? cudaEventDefault : cudaEventDisableTiming | cudaEventInterprocess;
    cudaError_t err = rt.fn.EventCreateWithFlags(&ev->ev, flags);
    if (err != cudaSuccess) {
        st = cuda_fail(d, err, "cudaEventCreateWithFlags(%s)",
                       timed ? "cudaEventDefault"
                             : "cudaEventDisableTiming | cudaEventInterprocess");
        free(ev);
        return st;
    }
    atomic_fetch_add(&d->events, 1);
    *out = ev;
    return ADAG_OK;
}

static adag_status_t cuda_event_create(adag_device_t *dev, adag_dev_event_t **out)
{
    return event_create(dev, false, out);
}

static adag_status_t cuda_event_create_timed(adag_device_t *dev, adag_dev_event_t **out)
{
    return event_create(dev, true, out);
}

/* cudaEventElapsedTime, after checking what CUDA would refuse with a
 * message of its own (cudaErrorInvalidResourceHandle says neither which
 * event nor why). */
static adag_status_t cuda_event_elapsed_ns(adag_dev_event_t *start, adag_dev_event_t *end,
                                           int64_t *ns)
{
    adag_dev_event_t *untimed = !start->timed ? start : !end->timed ? end : NULL;
    if (untimed)
        return adag_error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): event_elapsed_ns: the %s event was not created "
                          "by event_create_timed",
                          untimed->dev->base.index, untimed->dev->name,
                          untimed == start ? "start" : "end");
    float ms = 0;
    cudaError_t err = rt.fn.EventElapsedTime(&ms, start->ev, end->ev);
    if (err == cudaErrorNotReady)
        return ADAG_ERR_AGAIN;
    if (err == cudaErrorInvalidResourceHandle)
        return adag_error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): event_elapsed_ns: an event was never recorded, "
                          "or the two cannot be timed together (cudaEventElapsedTime: "
                          "cudaErrorInvalidResourceHandle)",
                          start->dev->base.index, start->dev->name);
    if (err != cudaSuccess)
        return cuda_fail(start->dev, err, "cudaEventElapsedTime");
    *ns = (int64_t)((double)ms * 1e6);
    return ADAG_OK;
}

static void cuda_event_destroy(adag_device_t *dev, adag_dev_event_t *ev)
{
    (void)dev;
    if (!ev)
        return;
    cuda_dev_t *d = ev->dev;
    cudaError_t err = rt.fn.EventDestroy(ev->ev);
    if (err != cudaSuccess)
        cuda_warn(d, err, "cudaEventDestroy%s", ev->imported ? " (imported event)" : "");
    atomic_fetch_sub(ev->imported ? &d->imported_events : &d->events, 1);
    free(ev);
}

static adag_status_t cuda_event_record(adag_dev_event_t *ev, adag_dev_stream_t *s)
{
    if (ev->imported)
        return adag_error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): event_record: an imported event can be waited "
                          "on, not recorded",
                          ev->dev->base.index, ev->dev->name);
    cudaError_t err = rt.fn.EventRecord(ev->ev, s->s);
    return err == cudaSuccess ? ADAG_OK : cuda_fail(ev->dev, err, "cudaEventRecord");
}

static adag_status_t cuda_stream_wait_event(adag_dev_stream_t *s, adag_dev_event_t *ev)
{
    cudaError_t err = rt.fn.StreamWaitEvent(s->s, ev->ev, 0);
    return err == cudaSuccess ? ADAG_OK : cuda_fail(s->dev, err, "cudaStreamWaitEvent");
}

static adag_status_t cuda_event_query(adag_dev_event_t *ev)
{
    cudaError_t err = rt.fn.EventQuery(ev->ev);
    if (err == cudaSuccess)
        return ADAG_OK;
    if (err == cudaErrorNotReady)
        return ADAG_ERR_AGAIN;
    return cuda_fail(ev->dev, err, "cudaEventQuery");
}

static adag_status_t cuda_event_sync(adag_dev_event_t *ev, int64_t deadline)
{
    cudaError_t err;
    if (deadline == ADAG_FOREVER) {
        err = rt.fn.EventSynchronize(ev->ev);
        return err == cudaSuccess ? ADAG_OK : cuda_fail(ev->dev, err, "cudaEventSynchronize");
    }
    for (unsigned round = 0;; backoff(&round, deadline)) {
        err = rt.fn.EventQuery(ev->ev);
        if (err == cudaSuccess)
            return ADAG_OK;
        if (err != cudaErrorNotReady)
            return cuda_fail(ev->dev, err, "cudaEventQuery");
        if (adag_now_ns() >= deadline)
            return adag_error(ADAG_ERR_TIMEOUT,
                              "cuda device %u (%s): event_sync: the event did not complete "
                              "before the deadline",
                              ev->dev->base.index, ev->dev->name);
    }
}

static adag_status_t cuda_event_export(adag_device_t *dev, adag_dev_event_t *ev,
                                       adag_dev_handle_t *h)
{
    cuda_dev_t *d = cuda_dev(dev);
    memset(h, 0, sizeof(*h));
    h->fds[0] = h->fds[1] = -1;
    if (ev->imported || ev->timed)
        return adag_error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): event_export: %s",
                          dev->index, d->name,
                          ev->imported ? "an imported event cannot be exported again"
                                       : "a timed event cannot be exported (CUDA shares only "
                                         "events created with cudaEventInterprocess, which "
                                         "cannot be timed)");
    cudaIpcEventHandle_t ipc;
    cudaError_t err = rt.fn.IpcGetEventHandle(&ipc, ev->ev);
    if (err != cudaSuccess)
        return cuda_fail(d, err, "cudaIpcGetEventHandle");
    memcpy(h->bytes, &ipc, sizeof(ipc));
    h->len = EVENT_HANDLE_LEN;
    return ADAG_OK;
}

/* A stream waiting on an IPC event of a process that died or stopped
 * cannot be released by the importer: CUDA has no call for it (the
 * exporter's death tears down its context; a stopped exporter keeps the
 * wait). Nothing to do here; teardown is bounded instead (a stream that
 * does not drain leaves its endpoint allocated and says so). */
static void cuda_event_abandon(adag_dev_event_t *ev)
{
    (void)ev;
}

static adag_status_t cuda_event_import(adag_device_t *dev, adag_dev_handle_t *h,
                                       adag_dev_event_t **out)
{
    cuda_dev_t *d = cuda_dev(dev);
    adag_dev_event_t *ev = NULL;
    adag_status_t st;
    *out = NULL;
    if (h->nfds || h->len != EVENT_HANDLE_LEN) {
        st = adag_error(ADAG_ERR_PROTOCOL,
                        "cuda device %u (%s): event_import: not a CUDA event handle (%u bytes, %u "
                        "fds; one is %zu bytes, no fds)",
                        dev->index, d->name, h->len, h->nfds, EVENT_HANDLE_LEN);
        goto out;
    }
    if ((st = set_device(d)) != ADAG_OK)
        goto out;
    if (!(ev = calloc(1, sizeof(*ev)))) {
        st = adag_error(ADAG_ERR_NO_MEMORY, "cuda device %u (%s): event_import: out of memory",
                        dev->index, d->name);
        goto out;
    }
    ev->dev = d;
    ev->imported = true;
    cudaIpcEventHandle_t ipc;
    memcpy(&ipc, h->bytes, sizeof(ipc));
    cudaError_t err = rt.fn.IpcOpenEventHandle(&ev->ev, ipc);
    if (err != cudaSuccess) {
        st = cuda_fail(d, err, "cudaIpcOpenEventHandle");
        free(ev);
        goto out;
    }
    atomic_fetch_add(&d->imported_events, 1);
    *out = ev;
out:
    adag_dev_handle_close(h); /* CUDA handles carry no fds */
    return st;
}

static void cuda_counts(adag_device_t *dev, adag_device_counts_t *c)
{
    cuda_dev_t *d = cuda_dev(dev);
    *c = (adag_device_counts_t){
        .mem = atomic_load(&d->mem),
        .host_mem = atomic_load(&d->host_mem),
        .streams = atomic_load(&d->streams),
        .events = atomic_load(&d->events),
        .imported_mem = atomic_load(&d->imported_mem),
        .imported_events = atomic_load(&d->imported_events),
    };
}

const adag_device_ops_t adag_device_cuda_ops = {
    .name = "cuda",
    .kind = ADAG_DEVICE_KIND_CUDA,
    .probe = cuda_probe,
    .open = cuda_open,
    .close = cuda_close,
    .bind_thread = cuda_bind_thread,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .mem_export = cuda_mem_export,
    .mem_import = cuda_mem_import,
    .mem_unimport = cuda_mem_unimport,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .copy_async = cuda_copy_async,
    .host_fn = cuda_host_fn,
    .launch_host = cuda_launch_host,
    .stream_native = cuda_stream_native,
    .stream_sync = cuda_stream_sync,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .event_export = cuda_event_export,
    .event_import = cuda_event_import,
    .event_abandon = cuda_event_abandon,
    .event_create_timed = cuda_event_create_timed,
    .event_elapsed_ns = cuda_event_elapsed_ns,
    .counts = cuda_counts,
};

#endif /* ADAG_HAVE_CUDA */

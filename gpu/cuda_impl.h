/*
 * What the cuda device backend's files share (gpu/cuda_runtime.c, below
 * the others: the runtime loaded once, the error helpers; gpu/cuda.c:
 * devices, memory, the ops table; gpu/cuda_stream.c: streams and events;
 * gpu/cuda_values.c: the value ops; gpu/cuda_graph.c: graphs;
 * gpu/cuda_alias.c: a process's own handles):
 * the runtime's function table, loaded once with dlopen, the objects, and
 * the error helpers. Only with the toolkit's headers (ADAG_HAVE_CUDA).
 */
#ifndef ADAG_GPU_CUDA_IMPL_H
#define ADAG_GPU_CUDA_IMPL_H

#ifdef ADAG_HAVE_CUDA

#include "common/error.h"
#include "gpu/device.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Every runtime function this backend calls; each field has the type of the
 * header's prototype, and is resolved as "cuda" #name. */
#define CUDART_FUNCTIONS(X)                                                                        \
    X(GetErrorName) X(GetErrorString) X(RuntimeGetVersion) X(DriverGetVersion)                     \
    X(GetDeviceCount) X(SetDevice) X(GetDeviceProperties) X(DeviceGetPCIBusId)                                          \
    X(GetLastError) X(Malloc) X(Free) X(HostAlloc) X(FreeHost) X(HostRegister) X(HostUnregister)   \
    X(IpcGetMemHandle) X(IpcOpenMemHandle) X(IpcCloseMemHandle)                                    \
    X(StreamCreateWithFlags) X(StreamDestroy) X(StreamSynchronize) X(StreamQuery)                  \
    X(StreamWaitEvent) X(MemcpyAsync) X(LaunchHostFunc)                                            \
    X(EventCreateWithFlags) X(EventDestroy) X(EventRecord) X(EventQuery) X(EventSynchronize)       \
    X(EventElapsedTime) X(IpcGetEventHandle) X(IpcOpenEventHandle) X(HostGetDevicePointer)         \
    X(StreamBeginCapture) X(StreamEndCapture) X(GraphInstantiateWithFlags) X(GraphLaunch)          \
    X(GraphExecDestroy) X(GraphDestroy) X(EventRecordWithFlags) X(PointerGetAttributes)            \
    X(UserObjectCreate) X(GraphRetainUserObject)

/* Runtime functions that only some supported runtimes have: NULL in the
 * table when absent, and the ops that need one say so (a runtime without
 * cudaGetDriverEntryPointByVersion, before CUDA 12.5, has no value ops). */
#define CUDART_OPTIONAL_FUNCTIONS(X) X(GetDriverEntryPointByVersion)

#define CUDART_FIELD(name) __typeof__(&cuda##name) name;
typedef struct {
    CUDART_FUNCTIONS(CUDART_FIELD)
    CUDART_OPTIONAL_FUNCTIONS(CUDART_FIELD)
} cudart_fns_t;
#undef CUDART_FIELD

typedef struct {
    pthread_once_t once;
    void *lib;                  /* NULL if loading failed */
    char loaded[256];           /* what was loaded */
    char error[ADAG_ERROR_MAX]; /* why not */
    cudart_fns_t fn;
} cudart_t;

/* The runtime (gpu/cuda.c loads it). */
extern cudart_t adag_cudart;
/* Whether the runtime is loaded (the first call loads it); adag_cudart.error
 * says why not. */
bool adag__cudart_loaded(void);

typedef struct {
    adag_device_t base;
    char name[128]; /* cudaDeviceProp.name, for messages */
    /* whether its streams run value ops, found at open (gpu/cuda_values.c);
     * if not, why not */
    bool values_ok;
    char values_why[ADAG_ERROR_MAX / 2];
    _Atomic uint64_t mem, host_mem, streams, events, imported_mem, imported_events, registered;
    _Atomic uint64_t graphs;
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


#define EVENT_HANDLE_LEN (sizeof(cudaIpcEventHandle_t))
_Static_assert(EVENT_HANDLE_LEN <= ADAG_DEVICE_HANDLE_BYTES, "a CUDA event handle does not fit");

static inline cuda_dev_t *adag__cuda_dev(adag_device_t *dev)
{
    return (cuda_dev_t *)dev;
}

/* A CUDA failure (fmt names the call) as this thread's error:
 * ADAG_ERR_NO_MEMORY or ADAG_ERR_IO, "cuda device <i> (<name>): <call>:
 * <error name>: <text>". */
adag_status_t adag__cuda_fail(const cuda_dev_t *d, cudaError_t err, const char *fmt, ...)
    ADAG_PRINTF(3, 4);
/* The same for ops that return nothing: logged. */
void adag__cuda_warn(const cuda_dev_t *d, cudaError_t err, const char *fmt, ...) ADAG_PRINTF(3, 4);
/* Makes d the calling thread's current device. */
adag_status_t adag__cuda_set_device(cuda_dev_t *d);

/* Streams and events (gpu/cuda_stream.c): the ops of gpu/device.h. */
adag_status_t adag__cuda_stream_create(adag_device_t *dev, adag_dev_stream_t **out);
void adag__cuda_stream_destroy(adag_device_t *dev, adag_dev_stream_t *s);
adag_status_t adag__cuda_copy_async(adag_dev_stream_t *s, void *dst, const void *src, size_t size);
adag_status_t adag__cuda_host_fn(adag_dev_stream_t *s, adag_host_fn fn, void *arg);
adag_status_t adag__cuda_launch_host(adag_dev_stream_t *s, adag_host_fn fn, const void *args,
                                    size_t size);
void *adag__cuda_stream_native(adag_dev_stream_t *s);
adag_status_t adag__cuda_stream_sync(adag_dev_stream_t *s, int64_t deadline);
adag_status_t adag__cuda_event_create(adag_device_t *dev, adag_dev_event_t **out);
adag_status_t adag__cuda_event_create_timed(adag_device_t *dev, adag_dev_event_t **out);
adag_status_t adag__cuda_event_elapsed_ns(adag_dev_event_t *start, adag_dev_event_t *end,
                                         int64_t *ns);
void adag__cuda_event_destroy(adag_device_t *dev, adag_dev_event_t *ev);
adag_status_t adag__cuda_event_record(adag_dev_event_t *ev, adag_dev_stream_t *s);
adag_status_t adag__cuda_stream_wait_event(adag_dev_stream_t *s, adag_dev_event_t *ev);
adag_status_t adag__cuda_event_query(adag_dev_event_t *ev);
adag_status_t adag__cuda_event_sync(adag_dev_event_t *ev, int64_t deadline);
adag_status_t adag__cuda_event_export(adag_device_t *dev, adag_dev_event_t *ev,
                                     adag_dev_handle_t *h);
void adag__cuda_event_abandon(adag_dev_event_t *ev);
adag_status_t adag__cuda_event_import(adag_device_t *dev, adag_dev_handle_t *h,
                                     adag_dev_event_t **out);

/* Value ops (gpu/cuda_values.c): the ops of gpu/device.h. values_probe
 * fills d->values_ok and d->values_why (open calls it once). */
void adag__cuda_values_probe(cuda_dev_t *d);
int adag__cuda_values_supported(adag_device_t *dev, char *why, size_t len);
adag_status_t adag__cuda_word_map(adag_device_t *dev, _Atomic uint64_t *host, adag_dev_word_t *w);
adag_status_t adag__cuda_stream_write_value64(adag_dev_stream_t *s, const adag_dev_word_t *w,
                                             uint64_t v);
adag_status_t adag__cuda_stream_wait_value64(adag_dev_stream_t *s, const adag_dev_word_t *w,
                                            uint64_t v);
void adag__cuda_word_store(const adag_dev_word_t *w, uint64_t v);
/* A graph's memory-operation nodes (captured value ops) and their
 * parameters as captured, so that a launch can shift their values. */
typedef struct {
    void **nodes;      /* CUgraphNode */
    void **params;     /* per node: its CUDA_BATCH_MEM_OP_NODE_PARAMS, then its ops */
    size_t n;
    uint64_t shift;    /* the shift the executable graph holds now */
} cuda_value_nodes_t;
/* Finds graph's memory-operation nodes (none: n 0, without the driver's
 * graph functions too, since then value ops were not captured). */
adag_status_t adag__cuda_value_nodes(cuda_dev_t *d, cudaGraph_t graph, cuda_value_nodes_t *out);
/* Sets every node's values to the captured ones plus shift in exec. */
adag_status_t adag__cuda_value_nodes_shift(cuda_dev_t *d, cudaGraphExec_t exec,
                                          cuda_value_nodes_t *v, uint64_t shift);
void adag__cuda_value_nodes_free(cuda_value_nodes_t *v);
/* Graphs (gpu/cuda_graph.c): the capture ops, and the ops of gpu/device.h
 * that a capture changes (they check what is illegal during a capture, or
 * record differently, then call the ones above). */
adag_status_t adag__cuda_stream_capture_begin(adag_dev_stream_t *s);
adag_status_t adag__cuda_stream_capture_end(adag_dev_stream_t *s, adag_dev_graph_t **out);
adag_status_t adag__cuda_graph_launch(adag_dev_graph_t *g, adag_dev_stream_t *s, uint64_t shift);
void adag__cuda_graph_destroy(adag_device_t *dev, adag_dev_graph_t *g);
adag_status_t adag__cuda_graph_copy_async(adag_dev_stream_t *s, void *dst, const void *src,
                                          size_t size);
adag_status_t adag__cuda_graph_launch_host(adag_dev_stream_t *s, adag_host_fn fn,
                                           const void *args, size_t size);
adag_status_t adag__cuda_graph_event_record(adag_dev_event_t *ev, adag_dev_stream_t *s);
adag_status_t adag__cuda_graph_stream_wait_event(adag_dev_stream_t *s, adag_dev_event_t *ev);
adag_status_t adag__cuda_graph_stream_sync(adag_dev_stream_t *s, int64_t deadline);
adag_status_t adag__cuda_graph_event_query(adag_dev_event_t *ev);
adag_status_t adag__cuda_graph_event_sync(adag_dev_event_t *ev, int64_t deadline);

#endif /* ADAG_HAVE_CUDA */
#endif

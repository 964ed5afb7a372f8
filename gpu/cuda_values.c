/*
 * The cuda device backend's value ops (gpu/device.h, adag_dev_word_t):
 * CUDA's stream memory operations, cuStreamWriteValue64 and
 * cuStreamWaitValue64, which are driver API functions. libcuda is not
 * linked (nor the runtime: gpu/cuda.c loads it with dlopen): the driver's
 * functions come from the runtime's cudaGetDriverEntryPointByVersion (CUDA
 * 12.5 and later runtimes), asked once for the CUDA 12.0 ABI of each, with
 * the types of the toolkit's <cudaTypedefs.h>.
 *
 * What CUDA 12/13 documents, and how it is used here:
 *   - a device runs 64-bit memory operations if its attribute
 *     CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is set (the "v2"
 *     operations of CUDA 12, on by default; the v1 attributes, which needed
 *     the nvidia module's NVreg_EnableStreamMemOPs, are deprecated and not
 *     read). A word lives in host memory the device maps, so
 *     CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY must be set too. open reads
 *     both once per device (values_supported answers from that);
 *   - the operations take *device* addresses: a word in registered host
 *     memory is addressed by cudaHostGetDevicePointer of its host address,
 *     which is why host_register registers with cudaHostRegisterMapped and
 *     host_alloc allocates with cudaHostAllocMapped (under unified addressing
 *     the two addresses are usually equal, but CUDA does not promise it);
 *   - the wait uses CU_STREAM_WAIT_VALUE_GEQ, CUDA's cyclic comparison
 *     (int64_t)(*addr - value) >= 0, which is the rule of gpu/device.h; it
 *     has no timeout: a wait whose writer is gone is released by the host
 *     storing ADAG_DEV_WORD_ABORT (word_store);
 *   - the write uses CU_STREAM_WRITE_VALUE_DEFAULT: a memory barrier before
 *     it (like __threadfence_system, scoped to the stream) makes every
 *     write of the work before it on the stream visible before the value;
 *   - stream capture: a value op enqueued on a capturing stream becomes a
 *     memory-operation node of the graph (CU_GRAPH_NODE_TYPE_BATCH_MEM_OP),
 *     run at each launch. A launch with a shift (gpu/device.h) first sets
 *     each such node's value to the captured one plus the shift with
 *     cuGraphExecBatchMemOpNodeSetParams (one driver call per node, only
 *     when the shift differs from the last launch's); the nodes and their
 *     captured parameters are found at stream_capture_end (cuGraphGetNodes,
 *     cuGraphNodeGetType, cuGraphBatchMemOpNodeGetParams);
 *   - CUDA does not see the order a value op makes (it is not an event):
 *     a wait and the write that releases it must not be queued where CUDA
 *     may serialize them behind each other (one stream; the device's
 *     hardware queues, CUDA_DEVICE_MAX_CONNECTIONS). The device channels put
 *     them on different processes' streams.
 * The host reads a word with an atomic load and stores it with word_store
 * (seq_cst; the device polls the memory, so nothing is woken).
 */
#ifdef ADAG_HAVE_CUDA

#include "gpu/cuda_impl.h"

#include "common/error.h"

#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ABI asked of the driver for each function: CUDA 12.0's (the
 * cuStreamWaitValue64_v2 family), so a 12.x or 13.x driver answers. */
#define DRIVER_ABI 12000

/* The driver's functions, resolved once. */
static struct {
    pthread_once_t once;
    bool ok;
    char error[ADAG_ERROR_MAX / 2]; /* why not */
    PFN_cuStreamWriteValue64_v11070 write64;
    PFN_cuStreamWaitValue64_v11070 wait64;
    PFN_cuDeviceGetAttribute_v2000 attribute;
    PFN_cuGetErrorName_v6000 error_name;
    PFN_cuGetErrorString_v6000 error_string;
    /* graphs' memory-operation nodes: all four, or none */
    bool graph_ok;
    PFN_cuGraphGetNodes_v10000 graph_nodes;
    PFN_cuGraphNodeGetType_v10000 node_type;
    PFN_cuGraphBatchMemOpNodeGetParams_v11070 memop_get;
    PFN_cuGraphExecBatchMemOpNodeSetParams_v11070 memop_exec_set;
} drv = {.once = PTHREAD_ONCE_INIT};

/* One driver function by name into *fn; false and drv.error if absent. */
static bool resolve(const char *symbol, void **fn)
{
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    *fn = NULL;
    cudaError_t err = adag_cudart.fn.GetDriverEntryPointByVersion(symbol, fn, DRIVER_ABI,
                                                                  cudaEnableDefault, &found);
    if (err == cudaSuccess && found == cudaDriverEntryPointSuccess && *fn)
        return true;
    const char *why = err != cudaSuccess ? adag_cudart.fn.GetErrorName(err)
                      : found == cudaDriverEntryPointVersionNotSufficent
                          ? "the driver is older than CUDA 12.0"
                          : "the driver has no such function";
    (void)adag_cudart.fn.GetLastError(); /* not the program's error (gpu/cuda.c) */
    snprintf(drv.error, sizeof(drv.error),
             "cudaGetDriverEntryPointByVersion(%s, CUDA %d.%d) of %s: %s", symbol,
             DRIVER_ABI / 1000, DRIVER_ABI % 1000 / 10, adag_cudart.loaded, why ? why : "?");
    *fn = NULL;
    return false;
}

static void drv_load(void)
{
    if (!adag__cudart_loaded()) {
        snprintf(drv.error, sizeof(drv.error), "%s", adag_cudart.error);
        return;
    }
    if (!adag_cudart.fn.GetDriverEntryPointByVersion) {
        snprintf(drv.error, sizeof(drv.error),
                 "the CUDA runtime %s has no cudaGetDriverEntryPointByVersion (CUDA 12.5 or "
                 "later has it), so the driver's stream memory operations cannot be reached",
                 adag_cudart.loaded);
        return;
    }
    drv.ok = resolve("cuStreamWriteValue64", (void **)&drv.write64) &&
             resolve("cuStreamWaitValue64", (void **)&drv.wait64) &&
             resolve("cuDeviceGetAttribute", (void **)&drv.attribute) &&
             resolve("cuGetErrorName", (void **)&drv.error_name) &&
             resolve("cuGetErrorString", (void **)&drv.error_string);
    drv.graph_ok = drv.ok && resolve("cuGraphGetNodes", (void **)&drv.graph_nodes) &&
                   resolve("cuGraphNodeGetType", (void **)&drv.node_type) &&
                   resolve("cuGraphBatchMemOpNodeGetParams", (void **)&drv.memop_get) &&
                   resolve("cuGraphExecBatchMemOpNodeSetParams", (void **)&drv.memop_exec_set);
}

/* A driver failure (fmt names the call) as this thread's error, in
 * adag__cuda_fail's form: ADAG_ERR_NO_MEMORY or ADAG_ERR_IO, "cuda device
 * <i> (<name>): <call>: <CUresult name>: <text>". */
static adag_status_t ADAG_PRINTF(3, 4)
    drv_fail(const cuda_dev_t *d, CUresult res, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    const char *name = NULL, *text = NULL;
    if (drv.error_name(res, &name) != CUDA_SUCCESS)
        name = NULL;
    if (drv.error_string(res, &text) != CUDA_SUCCESS)
        text = NULL;
    return adag__error(res == CUDA_ERROR_OUT_OF_MEMORY ? ADAG_ERR_NO_MEMORY : ADAG_ERR_IO,
                      "cuda device %u (%s): %s: %s: %s", d->base.index, d->name, what,
                      name ? name : "?", text ? text : "?");
}

/* Reads one attribute of d into *v; false with d->values_why if it fails. */
static bool attribute(cuda_dev_t *d, CUdevice_attribute attr, const char *name, int *v)
{
    *v = 0;
    CUresult res = drv.attribute(v, attr, (CUdevice)d->base.index);
    if (res == CUDA_SUCCESS)
        return true;
    const char *ename = NULL;
    if (drv.error_name(res, &ename) != CUDA_SUCCESS)
        ename = NULL;
    snprintf(d->values_why, sizeof(d->values_why), "cuDeviceGetAttribute(%s): %s", name,
             ename ? ename : "?");
    return false;
}

void adag__cuda_values_probe(cuda_dev_t *d)
{
    d->values_ok = false;
    pthread_once(&drv.once, drv_load);
    if (!drv.ok) {
        snprintf(d->values_why, sizeof(d->values_why), "%s", drv.error);
        return;
    }
    int mem_ops = 0, map_host = 0;
    if (!attribute(d, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                   "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS", &mem_ops) ||
        !attribute(d, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
                   "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY", &map_host))
        return;
    if (!mem_ops) {
        snprintf(d->values_why, sizeof(d->values_why),
                 "the device has no 64-bit stream memory operations "
                 "(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is 0)");
        return;
    }
    if (!map_host) {
        snprintf(d->values_why, sizeof(d->values_why),
                 "the device cannot map host memory (CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY "
                 "is 0)");
        return;
    }
    d->values_why[0] = '\0';
    d->values_ok = true;
}

int adag__cuda_values_supported(adag_device_t *dev, char *why, size_t len)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    if (!d->values_ok && why && len)
        snprintf(why, len, "cuda device %u (%s): %s", dev->index, d->name, d->values_why);
    return d->values_ok;
}

/* Refuses the value ops on a device without them (callers ask
 * values_supported first). */
static adag_status_t check_supported(const cuda_dev_t *d, const char *op)
{
    if (d->values_ok)
        return ADAG_OK;
    return adag__error(ADAG_ERR_INVALID, "cuda device %u (%s): %s: no value ops here: %s",
                      d->base.index, d->name, op, d->values_why);
}

/* The device address of host byte p, or 0 if p is not in host memory this
 * process registered or allocated pinned (the CUDA error name in *err). */
static uint64_t device_address(void *p, const char **err)
{
    void *dptr = NULL;
    cudaError_t e = adag_cudart.fn.HostGetDevicePointer(&dptr, p, 0);
    if (e == cudaSuccess && dptr)
        return (uint64_t)(uintptr_t)dptr;
    *err = e == cudaSuccess ? "no address" : adag_cudart.fn.GetErrorName(e);
    (void)adag_cudart.fn.GetLastError(); /* not the program's error (gpu/cuda.c) */
    return 0;
}

adag_status_t adag__cuda_word_map(adag_device_t *dev, _Atomic uint64_t *host, adag_dev_word_t *w)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    memset(w, 0, sizeof(*w));
    adag_status_t st = check_supported(d, "word_map");
    if (st != ADAG_OK)
        return st;
    if ((uintptr_t)host % ADAG_DEV_WORD_BYTES)
        return adag__error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): word_map: word %p is not %d-byte aligned",
                          dev->index, d->name, (void *)host, ADAG_DEV_WORD_BYTES);
    if ((st = adag__cuda_set_device(d)) != ADAG_OK)
        return st;
    /* the whole cell, mapped contiguously (it may not straddle two ranges) */
    const char *err = "?";
    uint64_t first = device_address((void *)host, &err);
    uint64_t last = first ? device_address((char *)host + ADAG_DEV_WORD_BYTES - 1, &err) : 0;
    if (!first || last != first + ADAG_DEV_WORD_BYTES - 1)
        return adag__error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): word_map: word %p is not in host memory this "
                          "process registered (host_register) or allocated (host_alloc): "
                          "cudaHostGetDevicePointer: %s",
                          dev->index, d->name, (void *)host,
                          first && last ? "not contiguous" : err);
    w->host = host;
    w->dev = first;
    return ADAG_OK;
}

adag_status_t adag__cuda_stream_write_value64(adag_dev_stream_t *s, const adag_dev_word_t *w,
                                             uint64_t v)
{
    adag_status_t st = check_supported(s->dev, "stream_write_value64");
    if (st != ADAG_OK)
        return st;
    CUresult res = drv.write64((CUstream)s->s, (CUdeviceptr)w->dev, (cuuint64_t)v,
                               CU_STREAM_WRITE_VALUE_DEFAULT);
    return res == CUDA_SUCCESS ? ADAG_OK
                               : drv_fail(s->dev, res, "cuStreamWriteValue64(word %p, %llu)",
                                          (void *)w->host, (unsigned long long)v);
}

adag_status_t adag__cuda_stream_wait_value64(adag_dev_stream_t *s, const adag_dev_word_t *w,
                                            uint64_t v)
{
    adag_status_t st = check_supported(s->dev, "stream_wait_value64");
    if (st != ADAG_OK)
        return st;
    CUresult res = drv.wait64((CUstream)s->s, (CUdeviceptr)w->dev, (cuuint64_t)v,
                              CU_STREAM_WAIT_VALUE_GEQ);
    return res == CUDA_SUCCESS ? ADAG_OK
                               : drv_fail(s->dev, res, "cuStreamWaitValue64(word %p, >= %llu)",
                                          (void *)w->host, (unsigned long long)v);
}

/* The device polls the cell: a seq_cst store is all a release needs. */
void adag__cuda_word_store(const adag_dev_word_t *w, uint64_t v)
{
    atomic_store_explicit(w->host, v, memory_order_seq_cst);
}

/* ---- graphs' memory-operation nodes ---- */

void adag__cuda_value_nodes_free(cuda_value_nodes_t *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->params[i]);
    free(v->params);
    free(v->nodes);
    memset(v, 0, sizeof(*v));
}

adag_status_t adag__cuda_value_nodes(cuda_dev_t *d, cudaGraph_t graph, cuda_value_nodes_t *out)
{
    memset(out, 0, sizeof(*out));
    pthread_once(&drv.once, drv_load);
    if (!drv.graph_ok)
        return ADAG_OK; /* no value op reached the graph: the driver's are missing */
    size_t n = 0;
    CUgraphNode *all = NULL;
    CUresult res = drv.graph_nodes((CUgraph)graph, NULL, &n);
    if (res != CUDA_SUCCESS)
        return drv_fail(d, res, "cuGraphGetNodes");
    if (n && !(all = calloc(n, sizeof(*all))))
        return adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u: a graph's nodes: out of memory",
                           d->base.index);
    adag_status_t st = ADAG_OK;
    if (n && (res = drv.graph_nodes((CUgraph)graph, all, &n)) != CUDA_SUCCESS) {
        st = drv_fail(d, res, "cuGraphGetNodes");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType type;
        if ((res = drv.node_type(all[i], &type)) != CUDA_SUCCESS) {
            st = drv_fail(d, res, "cuGraphNodeGetType");
            goto out;
        }
        if (type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)
            continue;
        CUDA_BATCH_MEM_OP_NODE_PARAMS p;
        if ((res = drv.memop_get(all[i], &p)) != CUDA_SUCCESS) {
            st = drv_fail(d, res, "cuGraphBatchMemOpNodeGetParams");
            goto out;
        }
        /* the parameters, then a copy of the node's operations (its own
         * array belongs to the node) */
        size_t bytes = sizeof(p) + (size_t)p.count * sizeof(CUstreamBatchMemOpParams);
        void *copy = malloc(bytes);
        void **nodes = realloc(out->nodes, (out->n + 1) * sizeof(*nodes));
        if (nodes)
            out->nodes = nodes;
        void **params = nodes ? realloc(out->params, (out->n + 1) * sizeof(*params)) : NULL;
        if (params)
            out->params = params;
        if (!copy || !nodes || !params) {
            free(copy);
            st = adag__error(ADAG_ERR_NO_MEMORY,
                             "cuda device %u: a graph's memory operations: out of memory",
                             d->base.index);
            goto out;
        }
        CUstreamBatchMemOpParams *ops = (CUstreamBatchMemOpParams *)((char *)copy + sizeof(p));
        memcpy(ops, p.paramArray, (size_t)p.count * sizeof(*ops));
        p.paramArray = ops;
        memcpy(copy, &p, sizeof(p));
        out->nodes[out->n] = all[i];
        out->params[out->n++] = copy;
    }
out:
    free(all);
    if (st != ADAG_OK)
        adag__cuda_value_nodes_free(out);
    return st;
}

adag_status_t adag__cuda_value_nodes_shift(cuda_dev_t *d, cudaGraphExec_t exec,
                                          cuda_value_nodes_t *v, uint64_t shift)
{
    if (!v->n || shift == v->shift)
        return ADAG_OK;
    CUstreamBatchMemOpParams ops[16];
    for (size_t i = 0; i < v->n; i++) {
        CUDA_BATCH_MEM_OP_NODE_PARAMS p;
        memcpy(&p, v->params[i], sizeof(p));
        const CUstreamBatchMemOpParams *captured = p.paramArray;
        CUstreamBatchMemOpParams *shifted = p.count <= 16 ? ops : malloc(p.count * sizeof(*ops));
        if (!shifted)
            return adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u: graph_launch: out of memory",
                               d->base.index);
        for (unsigned k = 0; k < p.count; k++) {
            shifted[k] = captured[k];
            if (captured[k].operation == CU_STREAM_MEM_OP_WAIT_VALUE_64)
                shifted[k].waitValue.value64 = captured[k].waitValue.value64 + shift;
            else if (captured[k].operation == CU_STREAM_MEM_OP_WRITE_VALUE_64)
                shifted[k].writeValue.value64 = captured[k].writeValue.value64 + shift;
        }
        p.paramArray = shifted;
        CUresult res = drv.memop_exec_set((CUgraphExec)exec, (CUgraphNode)v->nodes[i], &p);
        if (shifted != ops)
            free(shifted);
        if (res != CUDA_SUCCESS)
            return drv_fail(d, res, "cuGraphExecBatchMemOpNodeSetParams(shift %llu)",
                            (unsigned long long)shift);
    }
    v->shift = shift;
    return ADAG_OK;
}

#endif /* ADAG_HAVE_CUDA */

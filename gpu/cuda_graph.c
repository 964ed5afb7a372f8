/*
 * The cuda device backend's graphs (gpu/device.h, stream_capture_begin):
 * CUDA's stream capture, through the runtime's function table.
 *
 *   stream_capture_begin  cudaStreamBeginCapture, mode thread-local: the
 *                         capturing thread may not make potentially unsafe
 *                         calls (a cudaMalloc or a synchronous copy inside
 *                         a captured method is then an error named at
 *                         stream_capture_end), while the other threads of
 *                         the process (other actors on the same device,
 *                         allocating for their own work) are left alone,
 *                         which global mode would not do; relaxed mode
 *                         would let the capturing thread's unsafe calls
 *                         through unnoticed;
 *   stream_capture_end    cudaStreamEndCapture, then
 *                         cudaGraphInstantiateWithFlags (flags 0);
 *   graph_launch          cudaGraphLaunch, after setting the values of the
 *                         graph's memory-operation nodes (captured value
 *                         ops) to the captured ones plus the launch's
 *                         shift when it differs from the last launch's
 *                         (gpu/cuda_values.c);
 *   graph_destroy         cudaGraphExecDestroy and cudaGraphDestroy (CUDA
 *                         frees them once launches in flight are done).
 *
 * What the table's other ops do differently while their stream captures:
 * launch_host keeps its copy of the arguments for every launch of the
 * graph (a cudaUserObject of the graph frees the copies with it, after
 * the last launch that runs them); event_record and stream_wait_event
 * make external event nodes (cudaEventRecordExternal,
 * cudaEventWaitExternal), so that a launch records the event and waits
 * for it as the emulated device's graphs do; stream_sync, event_query and
 * event_sync of an event recorded in the capture, and copy_async with
 * pageable host memory (cudaPointerGetAttributes: unregistered) are
 * refused and invalidate the capture (gpu/capture.h keeps which and the
 * first one for the message of stream_capture_end).
 */
#ifdef ADAG_HAVE_CUDA

#include "gpu/capture.h"
#include "gpu/cuda_impl.h"

#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct adag_dev_graph {
    cuda_dev_t *dev;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cuda_value_nodes_t values; /* its captured value ops (graph_launch's shift) */
};

/* launch_host's argument copies made during a capture (its impl). */
typedef struct {
    void **blocks;
    size_t n, cap;
} cuda_capture_t;

typedef struct {
    adag_host_fn fn;
    size_t size;
    alignas(16) unsigned char args[];
} kept_launch_t;

/* Each run of the node gets its own copy of the recorded arguments. */
static void kept_trampoline(void *arg)
{
    const kept_launch_t *b = arg;
    alignas(16) unsigned char args[ADAG_DEVICE_ARGS_MAX];
    memcpy(args, b->args, b->size);
    b->fn(args);
}

/* The destructor of the graph's user object (a CUDA thread; no CUDA call). */
static void free_capture(void *p)
{
    cuda_capture_t *w = p;
    for (size_t i = 0; i < w->n; i++)
        free(w->blocks[i]);
    free(w->blocks);
    free(w);
}

static const char *who_of(const cuda_dev_t *d, char *buf, size_t len)
{
    snprintf(buf, len, "cuda device %u", d->base.index);
    return buf;
}

adag_status_t adag__cuda_stream_capture_begin(adag_dev_stream_t *s)
{
    char who[48];
    who_of(s->dev, who, sizeof who);
    cuda_capture_t *w = calloc(1, sizeof(*w));
    if (!w)
        return adag__error(ADAG_ERR_NO_MEMORY, "%s: stream_capture_begin: out of memory", who);
    adag_capture_t *c;
    adag_status_t st = adag__capture_begin(s, who, &c);
    if (st != ADAG_OK) {
        free(w);
        return st;
    }
    c->impl = w;
    cudaError_t err = adag_cudart.fn.StreamBeginCapture(s->s, cudaStreamCaptureModeThreadLocal);
    if (err != cudaSuccess) {
        st = adag__cuda_fail(s->dev, err, "cudaStreamBeginCapture(cudaStreamCaptureModeThreadLocal)");
        adag__capture_end(c);
        free_capture(w);
        adag__error(st, "%s", adag_last_error()); /* the failure, not capture_end's */
        return st;
    }
    return ADAG_OK;
}

adag_status_t adag__cuda_stream_capture_end(adag_dev_stream_t *s, adag_dev_graph_t **out)
{
    cuda_dev_t *d = s->dev;
    *out = NULL;
    adag_capture_t *c = adag__capture_of(s);
    if (!c)
        return adag__error(ADAG_ERR_INVALID,
                           "cuda device %u (%s): stream_capture_end of a stream that does not "
                           "capture", d->base.index, d->name);
    cuda_capture_t *w = c->impl;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaUserObject_t obj;
    adag_dev_graph_t *g = NULL;
    /* always: the stream is an ordinary stream again */
    cudaError_t err = adag_cudart.fn.StreamEndCapture(s->s, &graph);
    adag_status_t st = adag__capture_end(c); /* our first illegal operation, if any */
    if (st != ADAG_OK)
        goto fail;
    if (err != cudaSuccess) {
        st = adag__cuda_fail(d, err, "stream_capture_end: cudaStreamEndCapture");
        goto fail;
    }
    if (w->n) {
        err = adag_cudart.fn.UserObjectCreate(&obj, w, free_capture, 1,
                                              cudaUserObjectNoDestructorSync);
        if (err != cudaSuccess) {
            st = adag__cuda_fail(d, err, "stream_capture_end: cudaUserObjectCreate");
            goto fail;
        }
        w = NULL; /* the object's (released by the retain's move or with the graph) */
        err = adag_cudart.fn.GraphRetainUserObject(graph, obj, 1, cudaGraphUserObjectMove);
        if (err != cudaSuccess) {
            st = adag__cuda_fail(d, err, "stream_capture_end: cudaGraphRetainUserObject");
            goto fail;
        }
    }
    err = adag_cudart.fn.GraphInstantiateWithFlags(&exec, graph, 0);
    if (err != cudaSuccess) {
        st = adag__cuda_fail(d, err, "stream_capture_end: cudaGraphInstantiateWithFlags");
        goto fail;
    }
    if (!(g = calloc(1, sizeof(*g)))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u (%s): stream_capture_end: out of "
                         "memory", d->base.index, d->name);
        goto fail;
    }
    if ((st = adag__cuda_value_nodes(d, graph, &g->values)) != ADAG_OK) {
        adag__error_prefix("cuda device %u (%s): stream_capture_end", d->base.index, d->name);
        free(g);
        g = NULL;
        goto fail;
    }
    g->dev = d;
    g->graph = graph;
    g->exec = exec;
    atomic_fetch_add(&d->graphs, 1);
    *out = g;
    if (w)
        free_capture(w);
    return ADAG_OK;
fail:
    if (exec)
        adag_cudart.fn.GraphExecDestroy(exec);
    if (graph)
        adag_cudart.fn.GraphDestroy(graph);
    if (w)
        free_capture(w);
    return st;
}

adag_status_t adag__cuda_graph_launch(adag_dev_graph_t *g, adag_dev_stream_t *s, uint64_t shift)
{
    if (g->dev != s->dev)
        return adag__error(ADAG_ERR_INVALID,
                           "cuda device %u (%s): graph_launch of a graph of cuda device %u",
                           s->dev->base.index, s->dev->name, g->dev->base.index);
    adag_capture_t *c = adag__capture_of(s);
    if (c)
        return adag__capture_illegal(c, "graph_launch on the capturing stream");
    adag_status_t st = adag__cuda_value_nodes_shift(g->dev, g->exec, &g->values, shift);
    if (st != ADAG_OK)
        return st;
    cudaError_t err = adag_cudart.fn.GraphLaunch(g->exec, s->s);
    return err == cudaSuccess ? ADAG_OK : adag__cuda_fail(s->dev, err, "cudaGraphLaunch");
}

void adag__cuda_graph_destroy(adag_device_t *dev, adag_dev_graph_t *g)
{
    (void)dev;
    if (!g)
        return;
    cudaError_t err = adag_cudart.fn.GraphExecDestroy(g->exec);
    if (err != cudaSuccess)
        adag__cuda_warn(g->dev, err, "cudaGraphExecDestroy");
    if ((err = adag_cudart.fn.GraphDestroy(g->graph)) != cudaSuccess)
        adag__cuda_warn(g->dev, err, "cudaGraphDestroy");
    adag__cuda_value_nodes_free(&g->values);
    atomic_fetch_sub(&g->dev->graphs, 1);
    free(g);
}

/* ---- the ops a capture changes ---- */

/* Whether p is pageable host memory (neither device nor page-locked). */
static int pageable(const void *p)
{
    struct cudaPointerAttributes a;
    if (adag_cudart.fn.PointerGetAttributes(&a, p) != cudaSuccess) {
        adag_cudart.fn.GetLastError(); /* not sticky: clear it */
        return 1;
    }
    return a.type == cudaMemoryTypeUnregistered;
}

adag_status_t adag__cuda_graph_copy_async(adag_dev_stream_t *s, void *dst, const void *src,
                                          size_t size)
{
    adag_capture_t *c = adag__capture_of(s);
    if (c && size && (pageable(dst) || pageable(src)))
        return adag__capture_illegal(c, "copy_async with pageable host memory (%p <- %p, %zu "
                                        "bytes)", dst, src, size);
    return adag__cuda_copy_async(s, dst, src, size);
}

adag_status_t adag__cuda_graph_launch_host(adag_dev_stream_t *s, adag_host_fn fn,
                                           const void *args, size_t size)
{
    adag_capture_t *c = adag__capture_of(s);
    if (!c || size > ADAG_DEVICE_ARGS_MAX)
        return adag__cuda_launch_host(s, fn, args, size);
    kept_launch_t *b = malloc(sizeof(*b) + size);
    if (!b)
        return adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u: launch_host in a capture",
                           s->dev->base.index);
    b->fn = fn;
    b->size = size;
    if (size)
        memcpy(b->args, args, size);
    adag_status_t st = ADAG_OK;
    adag__capture_lock();
    cuda_capture_t *w = c->impl;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        void **blocks = realloc(w->blocks, cap * sizeof(*blocks));
        if (blocks) {
            w->blocks = blocks;
            w->cap = cap;
        } else
            st = adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u: launch_host in a capture",
                             s->dev->base.index);
    }
    if (st == ADAG_OK)
        w->blocks[w->n++] = b;
    adag__capture_unlock();
    if (st != ADAG_OK) {
        free(b);
        return st;
    }
    /* on failure the block stays with the capture, freed at its end */
    cudaError_t err = adag_cudart.fn.LaunchHostFunc(s->s, kept_trampoline, b);
    return err == cudaSuccess ? ADAG_OK : adag__cuda_fail(s->dev, err, "cudaLaunchHostFunc");
}

adag_status_t adag__cuda_graph_event_record(adag_dev_event_t *ev, adag_dev_stream_t *s)
{
    adag_capture_t *c = adag__capture_of(s);
    if (!c || ev->imported)
        return adag__cuda_event_record(ev, s);
    adag__capture_lock();
    adag_status_t st = adag__capture_note_event(c, ev);
    adag__capture_unlock();
    if (st != ADAG_OK)
        return st;
    cudaError_t err = adag_cudart.fn.EventRecordWithFlags(ev->ev, s->s, cudaEventRecordExternal);
    return err == cudaSuccess
               ? ADAG_OK
               : adag__cuda_fail(ev->dev, err, "cudaEventRecordWithFlags(cudaEventRecordExternal)");
}

adag_status_t adag__cuda_graph_stream_wait_event(adag_dev_stream_t *s, adag_dev_event_t *ev)
{
    if (!adag__capture_of(s))
        return adag__cuda_stream_wait_event(s, ev);
    cudaError_t err = adag_cudart.fn.StreamWaitEvent(s->s, ev->ev, cudaEventWaitExternal);
    return err == cudaSuccess
               ? ADAG_OK
               : adag__cuda_fail(s->dev, err, "cudaStreamWaitEvent(cudaEventWaitExternal)");
}

adag_status_t adag__cuda_graph_stream_sync(adag_dev_stream_t *s, int64_t deadline)
{
    adag_capture_t *c = adag__capture_of(s);
    if (!c)
        return adag__cuda_stream_sync(s, deadline);
    /* CUDA refuses it too and invalidates its own capture, so later
     * enqueues fail as on the emulated device */
    adag_cudart.fn.StreamSynchronize(s->s);
    adag_cudart.fn.GetLastError();
    return adag__capture_illegal(c, "stream_sync of the capturing stream");
}

adag_status_t adag__cuda_graph_event_query(adag_dev_event_t *ev)
{
    adag_status_t st = adag__capture_check_event(ev, "event_query");
    return st != ADAG_OK ? st : adag__cuda_event_query(ev);
}

adag_status_t adag__cuda_graph_event_sync(adag_dev_event_t *ev, int64_t deadline)
{
    adag_status_t st = adag__capture_check_event(ev, "event_sync");
    return st != ADAG_OK ? st : adag__cuda_event_sync(ev, deadline);
}

#else
typedef int adag_cuda_graph_not_built; /* without the toolkit's headers: gpu/cuda.c says so */
#endif

/*
 * The cuda device backend's streams and events (gpu/device.h; gpu/cuda.c
 * has the runtime, devices, memory and the ops table; what maps to what is
 * described there).
 */
#ifdef ADAG_HAVE_CUDA

#include "gpu/cuda_alias.h"
#include "gpu/cuda_impl.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

#include <sched.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    int64_t left = deadline - adag__now_ns();
    if (left <= 0)
        return;
    if (ns > left)
        ns = left;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ns};
    nanosleep(&ts, NULL);
}

/* Waits for a stream's work (s) or an event (ev) by the deadline: blocks
 * in the runtime for ADAG_FOREVER, else polls with backoff. */
static adag_status_t wait_done(const cuda_dev_t *d, cudaStream_t s, cudaEvent_t ev,
                               int64_t deadline)
{
    const char *what = s ? "cudaStreamSynchronize" : "cudaEventSynchronize";
    cudaError_t err;
    if (deadline == ADAG_FOREVER) {
        err = s ? adag_cudart.fn.StreamSynchronize(s) : adag_cudart.fn.EventSynchronize(ev);
        return err == cudaSuccess ? ADAG_OK : adag__cuda_fail(d, err, "%s", what);
    }
    for (unsigned round = 0;; backoff(&round, deadline)) {
        err = s ? adag_cudart.fn.StreamQuery(s) : adag_cudart.fn.EventQuery(ev);
        if (err == cudaSuccess)
            return ADAG_OK;
        if (err != cudaErrorNotReady)
            return adag__cuda_fail(d, err, "%s", s ? "cudaStreamQuery" : "cudaEventQuery");
        if (adag__now_ns() >= deadline)
            return adag__error(ADAG_ERR_TIMEOUT,
                              "cuda device %u (%s): %s: %s before the deadline", d->base.index,
                              d->name, s ? "stream_sync" : "event_sync",
                              s ? "the stream's work did not finish" : "the event did not complete");
    }
}

/* ---- streams ---- */

adag_status_t adag__cuda_stream_create(adag_device_t *dev, adag_dev_stream_t **out)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    *out = NULL;
    adag_status_t st = adag__cuda_set_device(d);
    if (st != ADAG_OK)
        return st;
    adag_dev_stream_t *s = calloc(1, sizeof(*s));
    if (!s)
        return adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u (%s): stream_create: out of memory",
                          dev->index, d->name);
    s->dev = d;
    cudaError_t err = adag_cudart.fn.StreamCreateWithFlags(&s->s, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        st = adag__cuda_fail(d, err, "cudaStreamCreateWithFlags(cudaStreamNonBlocking)");
        free(s);
        return st;
    }
    atomic_fetch_add(&d->streams, 1);
    *out = s;
    return ADAG_OK;
}

void adag__cuda_stream_destroy(adag_device_t *dev, adag_dev_stream_t *s)
{
    (void)dev;
    if (!s)
        return;
    cuda_dev_t *d = s->dev;
    cudaError_t err = adag_cudart.fn.StreamSynchronize(s->s);
    if (err != cudaSuccess)
        adag__cuda_warn(d, err, "cudaStreamSynchronize before cudaStreamDestroy");
    if ((err = adag_cudart.fn.StreamDestroy(s->s)) != cudaSuccess)
        adag__cuda_warn(d, err, "cudaStreamDestroy");
    atomic_fetch_sub(&d->streams, 1);
    free(s);
}

adag_status_t adag__cuda_copy_async(adag_dev_stream_t *s, void *dst, const void *src, size_t size)
{
    if (size == 0)
        return ADAG_OK;
    cudaError_t err = adag_cudart.fn.MemcpyAsync(dst, src, size, cudaMemcpyDefault, s->s);
    return err == cudaSuccess ? ADAG_OK
                              : adag__cuda_fail(s->dev, err, "cudaMemcpyAsync(%p <- %p, %zu bytes)",
                                          dst, src, size);
}

adag_status_t adag__cuda_host_fn(adag_dev_stream_t *s, adag_host_fn fn, void *arg)
{
    cudaError_t err = adag_cudart.fn.LaunchHostFunc(s->s, fn, arg);
    return err == cudaSuccess ? ADAG_OK : adag__cuda_fail(s->dev, err, "cudaLaunchHostFunc");
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

adag_status_t adag__cuda_launch_host(adag_dev_stream_t *s, adag_host_fn fn, const void *args,
                                      size_t size)
{
    if (size > ADAG_DEVICE_ARGS_MAX)
        return adag__error(ADAG_ERR_INVALID,
                          "cuda device %u: launch_host: %zu bytes of arguments, at most %d",
                          s->dev->base.index, size, ADAG_DEVICE_ARGS_MAX);
    launch_block_t *b = malloc(sizeof(*b) + size);
    if (!b)
        return adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u: launch_host", s->dev->base.index);
    b->fn = fn;
    b->size = size;
    if (size)
        memcpy(b->args, args, size);
    cudaError_t err = adag_cudart.fn.LaunchHostFunc(s->s, launch_trampoline, b);
    if (err != cudaSuccess) {
        free(b);
        return adag__cuda_fail(s->dev, err, "cudaLaunchHostFunc");
    }
    return ADAG_OK;
}

void *adag__cuda_stream_native(adag_dev_stream_t *s)
{
    return s->s;
}

adag_status_t adag__cuda_stream_sync(adag_dev_stream_t *s, int64_t deadline)
{
    return wait_done(s->dev, s->s, NULL, deadline);
}

/* ---- events ---- */

static adag_status_t event_create(adag_device_t *dev, bool timed, adag_dev_event_t **out)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    *out = NULL;
    adag_status_t st = adag__cuda_set_device(d);
    if (st != ADAG_OK)
        return st;
    adag_dev_event_t *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u (%s): event_create: out of memory",
                          dev->index, d->name);
    ev->dev = d;
    ev->timed = timed;
    unsigned flags = timed ? cudaEventDefault : cudaEventDisableTiming | cudaEventInterprocess;
    cudaError_t err = adag_cudart.fn.EventCreateWithFlags(&ev->ev, flags);
    if (err != cudaSuccess) {
        st = adag__cuda_fail(d, err, "cudaEventCreateWithFlags(%s)",
                       timed ? "cudaEventDefault"
                             : "cudaEventDisableTiming | cudaEventInterprocess");
        free(ev);
        return st;
    }
    atomic_fetch_add(&d->events, 1);
    *out = ev;
    return ADAG_OK;
}

adag_status_t adag__cuda_event_create(adag_device_t *dev, adag_dev_event_t **out)
{
    return event_create(dev, false, out);
}

adag_status_t adag__cuda_event_create_timed(adag_device_t *dev, adag_dev_event_t **out)
{
    return event_create(dev, true, out);
}

/* cudaEventElapsedTime, after checking what CUDA would refuse with a
 * message of its own (cudaErrorInvalidResourceHandle says neither which
 * event nor why). */
adag_status_t adag__cuda_event_elapsed_ns(adag_dev_event_t *start, adag_dev_event_t *end,
                                           int64_t *ns)
{
    adag_dev_event_t *untimed = !start->timed ? start : !end->timed ? end : NULL;
    if (untimed)
        return adag__error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): event_elapsed_ns: the %s event was not created "
                          "by event_create_timed",
                          untimed->dev->base.index, untimed->dev->name,
                          untimed == start ? "start" : "end");
    float ms = 0;
    cudaError_t err = adag_cudart.fn.EventElapsedTime(&ms, start->ev, end->ev);
    if (err == cudaErrorNotReady)
        return ADAG_ERR_AGAIN;
    if (err == cudaErrorInvalidResourceHandle)
        return adag__error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): event_elapsed_ns: an event was never recorded, "
                          "or the two cannot be timed together (cudaEventElapsedTime: "
                          "cudaErrorInvalidResourceHandle)",
                          start->dev->base.index, start->dev->name);
    if (err != cudaSuccess)
        return adag__cuda_fail(start->dev, err, "cudaEventElapsedTime");
    *ns = (int64_t)((double)ms * 1e6);
    return ADAG_OK;
}

void adag__cuda_event_destroy(adag_device_t *dev, adag_dev_event_t *ev)
{
    (void)dev;
    if (!ev || adag__cuda_alias_event_destroy(ev))
        return; /* exported, or an alias: destroyed with its last holder */
    cuda_dev_t *d = ev->dev;
    cudaError_t err = adag_cudart.fn.EventDestroy(ev->ev);
    if (err != cudaSuccess)
        adag__cuda_warn(d, err, "cudaEventDestroy%s", ev->imported ? " (imported event)" : "");
    atomic_fetch_sub(ev->imported ? &d->imported_events : &d->events, 1);
    free(ev);
}

adag_status_t adag__cuda_event_record(adag_dev_event_t *ev, adag_dev_stream_t *s)
{
    if (ev->imported)
        return adag__error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): event_record: an imported event can be waited "
                          "on, not recorded",
                          ev->dev->base.index, ev->dev->name);
    cudaError_t err = adag_cudart.fn.EventRecord(ev->ev, s->s);
    return err == cudaSuccess ? ADAG_OK : adag__cuda_fail(ev->dev, err, "cudaEventRecord");
}

adag_status_t adag__cuda_stream_wait_event(adag_dev_stream_t *s, adag_dev_event_t *ev)
{
    cudaError_t err = adag_cudart.fn.StreamWaitEvent(s->s, ev->ev, 0);
    return err == cudaSuccess ? ADAG_OK : adag__cuda_fail(s->dev, err, "cudaStreamWaitEvent");
}

adag_status_t adag__cuda_event_query(adag_dev_event_t *ev)
{
    cudaError_t err = adag_cudart.fn.EventQuery(ev->ev);
    if (err == cudaSuccess)
        return ADAG_OK;
    if (err == cudaErrorNotReady)
        return ADAG_ERR_AGAIN;
    return adag__cuda_fail(ev->dev, err, "cudaEventQuery");
}

adag_status_t adag__cuda_event_sync(adag_dev_event_t *ev, int64_t deadline)
{
    return wait_done(ev->dev, NULL, ev->ev, deadline);
}

adag_status_t adag__cuda_event_export(adag_device_t *dev, adag_dev_event_t *ev,
                                       adag_dev_handle_t *h)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    memset(h, 0, sizeof(*h));
    h->fds[0] = h->fds[1] = -1;
    if (ev->imported || ev->timed)
        return adag__error(ADAG_ERR_INVALID,
                          "cuda device %u (%s): event_export: %s",
                          dev->index, d->name,
                          ev->imported ? "an imported event cannot be exported again"
                                       : "a timed event cannot be exported (CUDA shares only "
                                         "events created with cudaEventInterprocess, which "
                                         "cannot be timed)");
    cudaIpcEventHandle_t ipc;
    cudaError_t err = adag_cudart.fn.IpcGetEventHandle(&ipc, ev->ev);
    if (err != cudaSuccess)
        return adag__cuda_fail(d, err, "cudaIpcGetEventHandle");
    memcpy(h->bytes, &ipc, sizeof(ipc));
    h->len = EVENT_HANDLE_LEN;
    return adag__cuda_alias_export_event(d, h, EVENT_HANDLE_LEN, ev->ev);
}

/* A stream waiting on an IPC event of a process that died or stopped
 * cannot be released by the importer: CUDA has no call for it (the
 * exporter's death tears down its context; a stopped exporter keeps the
 * wait). Nothing to do here; teardown is bounded instead (a stream that
 * does not drain leaves its endpoint allocated and says so). */
void adag__cuda_event_abandon(adag_dev_event_t *ev)
{
    (void)ev;
}

adag_status_t adag__cuda_event_import(adag_device_t *dev, adag_dev_handle_t *h,
                                       adag_dev_event_t **out)
{
    cuda_dev_t *d = adag__cuda_dev(dev);
    adag_dev_event_t *ev = NULL;
    adag_status_t st;
    *out = NULL;
    if (adag__cuda_alias_import_event(d, h, EVENT_HANDLE_LEN, out, &st))
        return st; /* this process's own: an alias (gpu/cuda_alias.c) */
    if (h->nfds || h->len != EVENT_HANDLE_LEN) {
        st = adag__error(ADAG_ERR_PROTOCOL,
                        "cuda device %u (%s): event_import: not a CUDA event handle (%u bytes, %u "
                        "fds; one is %zu bytes, no fds)",
                        dev->index, d->name, h->len, h->nfds, EVENT_HANDLE_LEN);
        goto out;
    }
    if ((st = adag__cuda_set_device(d)) != ADAG_OK)
        goto out;
    if (!(ev = calloc(1, sizeof(*ev)))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u (%s): event_import: out of memory",
                        dev->index, d->name);
        goto out;
    }
    ev->dev = d;
    ev->imported = true;
    cudaIpcEventHandle_t ipc;
    memcpy(&ipc, h->bytes, sizeof(ipc));
    cudaError_t err = adag_cudart.fn.IpcOpenEventHandle(&ev->ev, ipc);
    if (err != cudaSuccess) {
        st = adag__cuda_fail(d, err, "cudaIpcOpenEventHandle");
        free(ev);
        goto out;
    }
    atomic_fetch_add(&d->imported_events, 1);
    *out = ev;
out:
    adag__dev_handle_close(h); /* CUDA handles carry no fds */
    return st;
}

#else
typedef int adag_cuda_stream_not_built; /* without the toolkit's headers: gpu/cuda.c says so */
#endif

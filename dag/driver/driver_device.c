/*
 * The driver's device (adag_compile_params_t.driver_device): the DAG opens
 * it in the driver's process with a compute and a communication stream,
 * like a device-bound actor's (dag/exec/actor_device.h). Tensor inputs and
 * outputs of the graph then live on it, and get returns device views,
 * ready in the order of the compute stream (adag_dag_stream).
 *
 * An input on the device is written in one of three ways (dag/driver/reserve.c):
 * in its pinned host staging (one buffer per input and slot, allocated at
 * compile time: the DAG's memory), whose copy to the device slot the
 * commit enqueues on the compute stream; in the device slot directly, by
 * the client's work on that stream; or (execute) device to device from a
 * tensor on the device, enqueued by the commit. Every such copy comes
 * after the waits the slot's acquire enqueued on the stream and before
 * the `ready` record of its publish. A staging buffer's copy records an
 * event; the next reservation of that slot waits for it (outside the
 * DAG's lock, in the one thread taking the next ref) before the buffer is
 * handed out again. Several threads enqueue on the one stream: the
 * backends' enqueueing is thread-safe (CUDA's API; the emulated device's
 * queue mutex).
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "dag/exec/actor_device.h"
#include "dag/driver/dag.h"

#include <stdio.h>
#include <stdlib.h>

static void staging_close(adag_dag_h dag);

adag_status_t adag__dag_driver_device_open(adag_dag_h dag, const char *spec)
{
    adag_device_kind_t kind;
    unsigned index;
    adag_status_t st = adag__device_parse(spec, &kind, &index);
    if (st == ADAG_OK)
        st = adag__actor_device_open(kind, index, &dag->run.rt->settings, &dag->ends.driver_dev);
    if (st != ADAG_OK) {
        adag__error_prefix("adag_graph_compile: driver_device");
        return st;
    }
    dag->plan.driver_dev_kind = (int32_t)kind;
    dag->plan.driver_dev_index = index;
    return ADAG_OK;
}

void adag__dag_driver_device_close(adag_dag_h dag)
{
    if (!dag->ends.driver_dev)
        return;
    staging_close(dag);
    /* the endpoints are closed: only work the caller enqueued may remain */
    (void)adag__actor_device_close(dag->ends.driver_dev, "the driver",
                                  adag__deadline_ms(dag->teardown_timeout_ms));
    dag->ends.driver_dev = NULL;
}

int adag__dag_input_on_device(adag_dag_h dag, unsigned i)
{
    const adag_dag_chan_t *c = &dag->plan.chans[dag->ends.input_chan[i]];
    return c->places && c->places[0].kind >= 0;
}

adag_status_t adag__dag_check_device_input(adag_dag_h dag, const char *fn, unsigned i,
                                          const adag_value_t *v)
{
    if (v->kind != ADAG_VALUE_TENSOR || v->device == ADAG_DEVICE_HOST)
        return ADAG_OK;
    if (adag__dag_input_on_device(dag, i) &&
        v->device == ADAG_DEVICE(dag->plan.driver_dev_kind, dag->plan.driver_dev_index))
        return ADAG_OK;
    char name[ADAG_DEVICE_NAME_MAX], mine[ADAG_DEVICE_NAME_MAX];
    adag__device_name(v->device, name);
    if (!dag->ends.driver_dev)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: input %u: a tensor on device %s, but DAG %s has no driver device "
                          "(adag_compile_params_t.driver_device): its inputs are in host memory",
                          fn, i, name, dag->run.name);
    return adag__error(ADAG_ERR_INVALID,
                      "%s: input %u: a tensor on device %s; this input takes host memory or "
                      "the driver's device %s, and only a tensor field (adag_node_tensor) lives "
                      "on it",
                      fn, i, name,
                      adag__device_name(ADAG_DEVICE(dag->plan.driver_dev_kind, dag->plan.driver_dev_index),
                                       mine));
}

/* ---- the pinned staging of the inputs on the device ---- */

static size_t staging_index(adag_dag_h dag, uint64_t ref, unsigned i)
{
    return (size_t)(ref % dag->plan.max_inflight) * dag->plan.ninputs + i;
}

adag_status_t adag__dag_staging_open(adag_dag_h dag)
{
    if (!dag->ends.driver_dev || !dag->plan.ninputs)
        return ADAG_OK;
    const adag_chan_device_t *d = &dag->ends.driver_dev->chan;
    const adag_device_ops_t *ops = d->dev->ops;
    size_t n = (size_t)dag->plan.max_inflight * dag->plan.ninputs;
    dag->resv.staging = calloc(n, sizeof(*dag->resv.staging));
    dag->resv.staged = calloc(n, sizeof(*dag->resv.staged));
    dag->resv.staged_pending = calloc(n, 1);
    if (!dag->resv.staging || !dag->resv.staged || !dag->resv.staged_pending)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    for (unsigned i = 0; i < dag->plan.ninputs; i++) {
        if (!adag__dag_input_on_device(dag, i))
            continue;
        size_t capacity = dag->ends.inputs[i]->capacity;
        for (unsigned s = 0; s < dag->plan.max_inflight; s++) {
            size_t k = staging_index(dag, s, i);
            adag_status_t st = ops->host_alloc(d->dev, capacity, &dag->resv.staging[k]);
            if (st == ADAG_OK)
                st = ops->event_create(d->dev, &dag->resv.staged[k]);
            if (st != ADAG_OK) {
                adag__error_prefix("adag_graph_compile: the pinned staging of input %u (channel "
                                  "%s, %zu bytes, slot %u)",
                                  i, dag->ends.inputs[i]->name, capacity, s);
                return st; /* adag__dag_free frees what exists */
            }
        }
    }
    return ADAG_OK;
}

/* After the endpoints closed: the copies out of the staging are done
 * (the compute stream drained) before it is freed. */
static void staging_close(adag_dag_h dag)
{
    if (!dag->resv.staging && !dag->resv.staged)
        return;
    const adag_chan_device_t *d = &dag->ends.driver_dev->chan;
    const adag_device_ops_t *ops = d->dev->ops;
    if (ops->stream_sync(d->compute, adag__deadline_ms(dag->teardown_timeout_ms)) != ADAG_OK) {
        /* a copy may still read the staging: leaked rather than freed */
        ADAG_LOG_WARN("DAG %s: the driver's stream did not drain within the teardown timeout "
                      "(%d ms): its pinned input staging is left allocated",
                      dag->run.name, dag->teardown_timeout_ms);
    } else {
        size_t n = (size_t)dag->plan.max_inflight * dag->plan.ninputs;
        for (size_t k = 0; k < n; k++) {
            if (dag->resv.staged && dag->resv.staged[k])
                ops->event_destroy(d->dev, dag->resv.staged[k]);
            if (dag->resv.staging && dag->resv.staging[k].ptr)
                ops->host_free(d->dev, &dag->resv.staging[k]);
        }
    }
    free(dag->resv.staging);
    free(dag->resv.staged);
    free(dag->resv.staged_pending);
    dag->resv.staging = NULL;
    dag->resv.staged = NULL;
    dag->resv.staged_pending = NULL;
}

void *adag__dag_staging_buf(adag_dag_h dag, uint64_t ref, unsigned i)
{
    return dag->resv.staging ? dag->resv.staging[staging_index(dag, ref, i)].ptr : NULL;
}

adag_status_t adag__dag_staging_wait(adag_dag_h dag, uint64_t ref, int nonblock, int64_t deadline,
                                    const char *fn)
{
    if (!dag->resv.staged_pending)
        return ADAG_OK;
    const adag_device_ops_t *ops = dag->ends.driver_dev->chan.dev->ops;
    for (unsigned i = 0; i < dag->plan.ninputs; i++) {
        size_t k = staging_index(dag, ref, i);
        if (!dag->resv.staged_pending[k])
            continue;
        adag_status_t st = nonblock ? ops->event_query(dag->resv.staged[k])
                                    : ops->event_sync(dag->resv.staged[k], deadline);
        if (st == ADAG_ERR_AGAIN || st == ADAG_ERR_TIMEOUT)
            return adag__error(nonblock ? ADAG_ERR_AGAIN : ADAG_ERR_TIMEOUT,
                              "%s: %s: the copy of input %u of ref %llu from its pinned staging "
                              "(channel %s) is still running",
                              fn, nonblock ? "no room now" : "no room in time", i,
                              (unsigned long long)(ref - dag->plan.max_inflight),
                              dag->ends.inputs[i]->name);
        if (st != ADAG_OK) {
            adag__error_prefix("%s: waiting for the copy of input %u of ref %llu from its "
                              "pinned staging",
                              fn, i, (unsigned long long)(ref - dag->plan.max_inflight));
            return st;
        }
        dag->resv.staged_pending[k] = 0;
    }
    return ADAG_OK;
}

adag_status_t adag__dag_copy_device_inputs(adag_dag_h dag, uint64_t ref, void *const *bufs,
                                          const adag_value_t *inputs, const char *fn)
{
    if (!dag->ends.driver_dev)
        return ADAG_OK;
    const adag_chan_device_t *d = &dag->ends.driver_dev->chan;
    const adag_device_ops_t *ops = d->dev->ops;
    for (unsigned i = 0; i < dag->plan.ninputs; i++) {
        if (!adag__dag_input_on_device(dag, i) || !inputs[i].size || inputs[i].data == bufs[i])
            continue; /* written in the slot, on the stream */
        /* in the compute stream's order: after the readers' `consumed`
         * waits that the reservation's acquire enqueued, before publish's
         * `ready` record; from the staging (host), or device to device */
        size_t k = staging_index(dag, ref, i);
        int staged = inputs[i].device == ADAG_DEVICE_HOST;
        const void *src = staged ? dag->resv.staging[k].ptr : inputs[i].data;
        adag_status_t st = ops->copy_async(d->compute, bufs[i], src, inputs[i].size);
        if (st == ADAG_OK && staged && (st = ops->event_record(dag->resv.staged[k], d->compute)) == ADAG_OK)
            dag->resv.staged_pending[k] = 1;
        if (st != ADAG_OK) {
            adag__error_prefix("%s: input %u (channel %s): copying %zu bytes to %s:%u", fn, i,
                              dag->ends.inputs[i]->name, inputs[i].size,
                              adag_device_kind_name((uint32_t)dag->plan.driver_dev_kind),
                              dag->plan.driver_dev_index);
            return st;
        }
    }
    return ADAG_OK;
}

adag_status_t adag_dag_enqueue(adag_dag_h dag, void (*fn)(void *args), const void *args,
                               size_t size)
{
    static const char *name = "adag_dag_enqueue";
    if (!dag || !fn || (size && !args))
        return adag__error(ADAG_ERR_INVALID, "%s: dag, fn and args must not be NULL", name);
    if (!dag->ends.driver_dev)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: DAG %s has no driver device (adag_compile_params_t.driver_device)",
                          name, dag->run.name);
    if (size > ADAG_DEVICE_ARGS_MAX)
        return adag__error(ADAG_ERR_INVALID, "%s: %zu bytes of arguments, at most %d", name, size,
                          ADAG_DEVICE_ARGS_MAX);
    const adag_chan_device_t *d = &dag->ends.driver_dev->chan;
    adag_status_t st = d->dev->ops->launch_host(d->compute, fn, args, size);
    if (st != ADAG_OK)
        adag__error_prefix("%s: DAG %s", name, dag->run.name);
    return st;
}

adag_status_t adag_dag_stream(adag_dag_h dag, void **stream)
{
    if (!dag || !stream)
        return adag__error(ADAG_ERR_INVALID, "adag_dag_stream: dag and stream must not be NULL");
    if (!dag->ends.driver_dev)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_dag_stream: DAG %s has no driver device "
                          "(adag_compile_params_t.driver_device)",
                          dag->run.name);
    const adag_chan_device_t *d = &dag->ends.driver_dev->chan;
    *stream = d->dev->ops->stream_native(d->compute);
    return ADAG_OK;
}

adag_status_t adag_dag_stream_sync(adag_dag_h dag, int timeout_ms)
{
    void *unused;
    adag_status_t st = adag_dag_stream(dag, &unused);
    if (st != ADAG_OK)
        return st;
    if (timeout_ms < -1)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_dag_stream_sync: timeout_ms %d is negative; use -1 to wait "
                          "forever",
                          timeout_ms);
    const adag_chan_device_t *d = &dag->ends.driver_dev->chan;
    st = d->dev->ops->stream_sync(d->compute, adag__deadline_ms(timeout_ms));
    if (st != ADAG_OK)
        adag__error_prefix("adag_dag_stream_sync: DAG %s", dag->run.name);
    return st;
}

/*
 * The driver's device (adag_compile_params_t.driver_device): the DAG opens
 * it in the driver's process with a compute and a communication stream,
 * like a device-bound actor's (dag/actor_device.h). Tensor inputs and
 * outputs of the graph then live on it: execute copies each tensor input
 * into its device slot on the compute stream (from host memory, or device
 * to device from a tensor on that device), and get returns device views,
 * ready in the order of that stream (adag_dag_stream).
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/settings.h"
#include "dag/actor_device.h"
#include "dag/internal.h"

#include <stdio.h>

adag_status_t adag_dag_driver_device_open(adag_dag_h dag, const char *spec)
{
    adag_device_kind_t kind;
    unsigned index;
    adag_status_t st = adag_device_parse(spec, &kind, &index);
    if (st == ADAG_OK)
        st = adag_actor_device_open(kind, index, &dag->rt->settings, &dag->driver_dev);
    if (st != ADAG_OK) {
        adag_error_prefix("adag_graph_compile: driver_device");
        return st;
    }
    dag->driver_dev_kind = (int32_t)kind;
    dag->driver_dev_index = index;
    return ADAG_OK;
}

void adag_dag_driver_device_close(adag_dag_h dag)
{
    if (!dag->driver_dev)
        return;
    /* the endpoints are closed: only work the caller enqueued may remain */
    (void)adag_actor_device_close(dag->driver_dev, "the driver",
                                  adag_deadline_ms(dag->teardown_timeout_ms));
    dag->driver_dev = NULL;
}

int adag_dag_input_on_device(adag_dag_h dag, unsigned i)
{
    const adag_dag_chan_t *c = &dag->chans[dag->input_chan[i]];
    return c->places && c->places[0].kind >= 0;
}

adag_status_t adag_dag_check_device_input(adag_dag_h dag, const char *fn, unsigned i,
                                          const adag_value_t *v)
{
    if (v->kind != ADAG_VALUE_TENSOR || v->device == ADAG_DEVICE_HOST)
        return ADAG_OK;
    if (adag_dag_input_on_device(dag, i) &&
        v->device == ADAG_DEVICE_GPU(dag->driver_dev_index))
        return ADAG_OK;
    if (!dag->driver_dev)
        return adag_error(ADAG_ERR_INVALID,
                          "%s: input %u: a tensor on device %d, but DAG %s has no driver device "
                          "(adag_compile_params_t.driver_device): its inputs are in host memory",
                          fn, i, (int)v->device, dag->name);
    return adag_error(ADAG_ERR_INVALID,
                      "%s: input %u: a tensor on device %d; this input takes host memory or "
                      "the driver's device %s:%u (ADAG_DEVICE_GPU(%u)), and only a tensor "
                      "field (adag_node_tensor) lives on it",
                      fn, i, (int)v->device, adag_device_kind_name((uint32_t)dag->driver_dev_kind),
                      dag->driver_dev_index, dag->driver_dev_index);
}

adag_status_t adag_dag_copy_device_inputs(adag_dag_h dag, void *const *bufs,
                                          const adag_value_t *inputs, int64_t deadline)
{
    const adag_chan_device_t *d = &dag->driver_dev->chan;
    const adag_device_ops_t *ops = d->dev->ops;
    int from_host = 0;
    for (unsigned i = 0; i < dag->ninputs; i++) {
        if (!adag_dag_input_on_device(dag, i) || !inputs[i].size)
            continue;
        /* in the compute stream's order: after the readers' `consumed`
         * waits that acquire enqueued, before publish's `ready` record */
        adag_status_t st = ops->copy_async(d->compute, bufs[i], inputs[i].data, inputs[i].size);
        if (st != ADAG_OK) {
            adag_error_prefix("adag_dag_execute: input %u", i);
            return st;
        }
        from_host |= inputs[i].device == ADAG_DEVICE_HOST;
    }
    /* host memory is the caller's again when execute returns: wait for
     * those copies (a device tensor is read in the stream's order) */
    if (from_host) {
        adag_status_t st = ops->stream_sync(d->compute, deadline);
        if (st != ADAG_OK) {
            adag_error_prefix("adag_dag_execute: copying the inputs to %s:%u",
                              adag_device_kind_name((uint32_t)dag->driver_dev_kind),
                              dag->driver_dev_index);
            return st;
        }
    }
    return ADAG_OK;
}

adag_status_t adag_dag_stream(adag_dag_h dag, void **stream)
{
    if (!dag || !stream)
        return adag_error(ADAG_ERR_INVALID, "adag_dag_stream: dag and stream must not be NULL");
    if (!dag->driver_dev)
        return adag_error(ADAG_ERR_INVALID,
                          "adag_dag_stream: DAG %s has no driver device "
                          "(adag_compile_params_t.driver_device)",
                          dag->name);
    const adag_chan_device_t *d = &dag->driver_dev->chan;
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
        return adag_error(ADAG_ERR_INVALID,
                          "adag_dag_stream_sync: timeout_ms %d is negative; use -1 to wait "
                          "forever",
                          timeout_ms);
    const adag_chan_device_t *d = &dag->driver_dev->chan;
    st = d->dev->ops->stream_sync(d->compute, adag_deadline_ms(timeout_ms));
    if (st != ADAG_OK)
        adag_error_prefix("adag_dag_stream_sync: DAG %s", dag->name);
    return st;
}

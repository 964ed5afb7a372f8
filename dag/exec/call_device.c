/*
 * The adag_call_* functions of device-bound actors: which device, its
 * compute stream, and work enqueued there in stream order (the emulated
 * device's "kernels"). A method enqueues and returns; the loop goes on to
 * the next operation while the stream runs the work.
 */
#include "common/error.h"
#include "dag/exec/loop.h"
#include "gpu/device.h"

int32_t adag_call_device(adag_call_h call)
{
    if (!call || !call->loop->actor.device)
        return ADAG_DEVICE_HOST;
    const adag_device_t *dev = call->loop->actor.device->dev;
    return ADAG_DEVICE(dev->ops->kind, dev->index);
}

int32_t adag_call_output_device(adag_call_h call, unsigned i)
{
    if (!call || !call->op || i >= call->op->nrets || !call->loop->chans[call->op->rets[i]]->on_device)
        return ADAG_DEVICE_HOST;
    return adag_call_device(call);
}

void *adag_call_stream(adag_call_h call)
{
    if (!call || !call->loop->actor.device)
        return NULL;
    const adag_chan_device_t *d = call->loop->actor.device;
    call->used_stream = 1;
    return d->dev->ops->stream_native(call->stream ? call->stream : d->compute);
}

adag_status_t adag_call_enqueue(adag_call_h call, void (*fn)(void *args), const void *args,
                                size_t size)
{
    if (!call)
        return adag__error(ADAG_ERR_INVALID, "adag_call_enqueue: call is NULL");
    const char *actor = call->loop->actor_name, *method = adag__call_method_name(call);
    const adag_chan_device_t *d = call->loop->actor.device;
    if (!d)
        return adag__call_error(call, ADAG_ERR_INVALID,
                               "actor %s.%s: adag_call_enqueue: the actor has no device "
                               "(adag_actor_params_t.device)",
                               actor, method);
    if (!fn)
        return adag__call_error(call, ADAG_ERR_INVALID,
                               "actor %s.%s: adag_call_enqueue: fn is NULL", actor, method);
    if (size > ADAG_DEVICE_ARGS_MAX)
        return adag__call_error(call, ADAG_ERR_INVALID,
                               "actor %s.%s: adag_call_enqueue: %zu bytes of arguments, at most "
                               "%d",
                               actor, method, size, ADAG_DEVICE_ARGS_MAX);
    if (size && !args)
        return adag__call_error(call, ADAG_ERR_INVALID,
                               "actor %s.%s: adag_call_enqueue: args is NULL for %zu bytes", actor,
                               method, size);
    adag_status_t st =
        d->dev->ops->launch_host(call->stream ? call->stream : d->compute, fn, args, size);
    call->used_stream = 1;
    if (st != ADAG_OK)
        return adag__call_error(call, st, "actor %s.%s: adag_call_enqueue: %s", actor, method,
                               adag_last_error());
    return ADAG_OK;
}

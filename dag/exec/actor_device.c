/* The device of a device-bound actor: see dag/exec/actor_device.h. */
#include "dag/exec/actor_device.h"

#include "common/error.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>

static const char *dev_name(const adag_actor_device_t *d)
{
    return d->chan.dev->ops->name;
}

adag_status_t adag__actor_device_open(adag_device_kind_t kind, unsigned index,
                                     const adag_settings_t *settings, adag_actor_device_t **out)
{
    const adag_device_ops_t *ops = adag__device_backend(kind);
    adag_actor_device_t *d = NULL;
    adag_status_t st;
    char why[ADAG_ERROR_MAX / 2] = "";

    *out = NULL;
    if (!ops)
        return adag__error(ADAG_ERR_NOT_FOUND, "device backend %u does not exist", (unsigned)kind);
    unsigned n = ops->probe(why, sizeof(why));
    if (index >= n)
        return adag__error(ADAG_ERR_NOT_FOUND,
                          "device %s:%u does not exist here (%s: %u device%s%s%s)", ops->name,
                          index, ops->name, n, n == 1 ? "" : "s", why[0] ? ": " : "", why);
    if (!(d = calloc(1, sizeof(*d))))
        return adag__error(ADAG_ERR_NO_MEMORY, "device %s:%u: out of memory", ops->name, index);
    d->chan.kind = kind;
    if ((st = ops->open(index, &d->chan.dev)) != ADAG_OK)
        goto cleanup;
    /* before its streams: they read it */
    d->chan.dev->tuning.copy_mbps = settings->emu_copy_mbps;
    d->chan.dev->tuning.spin_ns = settings->spin_ns_crowded;
    d->chan.dev->tuning.memops = (int)settings->device_memops;
    if ((st = ops->bind_thread(d->chan.dev)) != ADAG_OK)
        goto cleanup;
    if ((st = ops->stream_create(d->chan.dev, &d->chan.compute)) != ADAG_OK) {
        adag__error_prefix("device %s:%u: compute stream", ops->name, index);
        goto cleanup;
    }
    if ((st = ops->stream_create(d->chan.dev, &d->chan.comm)) != ADAG_OK) {
        adag__error_prefix("device %s:%u: communication stream", ops->name, index);
        goto cleanup;
    }
    *out = d;
    return ADAG_OK;
cleanup:
    if (d->chan.compute)
        ops->stream_destroy(d->chan.dev, d->chan.compute); /* nothing was enqueued */
    if (d->chan.dev)
        ops->close(d->chan.dev);
    free(d);
    return st;
}

adag_status_t adag__actor_device_bind(adag_actor_device_t *d)
{
    adag_status_t st = d->chan.dev->ops->bind_thread(d->chan.dev);
    if (st != ADAG_OK)
        adag__error_prefix("device %s:%u", dev_name(d), d->chan.dev->index);
    return st;
}

adag_status_t adag__actor_device_sync(adag_actor_device_t *d, int64_t deadline)
{
    const adag_device_ops_t *ops = d->chan.dev->ops;
    adag_dev_stream_t *streams[2] = {d->chan.compute, d->chan.comm};
    static const char *const names[2] = {"compute", "communication"};
    for (unsigned i = 0; i < 2; i++) {
        adag_status_t st = ops->stream_sync(streams[i], deadline);
        if (st != ADAG_OK) {
            adag__error_prefix("device %s:%u, %s stream", dev_name(d), d->chan.dev->index,
                              names[i]);
            return st;
        }
    }
    return ADAG_OK;
}

adag_status_t adag__actor_device_close(adag_actor_device_t *d, const char *actor, int64_t deadline)
{
    if (!d)
        return ADAG_OK;
    const adag_device_ops_t *ops = d->chan.dev->ops;
    adag_status_t st = adag__actor_device_sync(d, deadline);
    if (st != ADAG_OK) {
        adag__error_prefix("actor %s", actor);
        ADAG_LOG_ERROR("%s; its streams and device are left open (leaked), as work on them may "
                       "still use their memory",
                       adag_last_error());
        return st;
    }
    ops->stream_destroy(d->chan.dev, d->chan.comm);
    ops->stream_destroy(d->chan.dev, d->chan.compute);
    ops->close(d->chan.dev);
    free(d);
    return ADAG_OK;
}

adag_status_t adag__actor_device_stop(adag_actor_device_t *d, const char *actor, int64_t deadline,
                                     void (*fini)(void *state), void *state)
{
    adag_status_t st;
    if (d) {
        if (adag__actor_device_bind(d) != ADAG_OK)
            ADAG_LOG_ERROR("actor %s: %s (fini runs on an unbound thread)", actor,
                           adag_last_error());
        /* the work its methods enqueued may use what fini frees */
        if ((st = adag__actor_device_sync(d, deadline)) != ADAG_OK) {
            adag__error_prefix("actor %s", actor);
            ADAG_LOG_ERROR("%s; fini does not run, and its state, streams and device are left "
                           "(leaked), as that work may still use them",
                           adag_last_error());
            return st;
        }
    }
    if (fini)
        fini(state);
    return adag__actor_device_close(d, actor, deadline);
}

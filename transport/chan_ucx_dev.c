/*
 * A "ucx" endpoint whose actor keeps the channel's value on its device
 * (a device tensor between nodes): the value is staged through the
 * endpoint's host ring, the one UCX sends from and receives into.
 *   writer  acquire hands a device slot (one per ring slot) that the
 *           actor's methods fill on its compute stream; publish copies it
 *           out to the host slot on that stream and waits for the copy
 *           (every method's work on the value came before it), then sends;
 *   reader  wait copies the landed host slot into a device slot on the
 *           compute stream and waits for it, so the host slot may be
 *           released (a credit lets the writer overwrite it) and the
 *           device slot is not overwritten before the work enqueued on
 *           it earlier ran (the copy queues behind that work).
 * Every wait is a host wait in 100 ms slices that ends when the DAG is
 * aborted. The copies are synchronous for the loop: the network, not the
 * copy, is what such a channel waits on.
 */
#include "transport/ucx.h"

#include "common/clock.h"
#include "common/error.h"

#include <stdio.h>
#include <string.h>

#define SLICE_MS 100

int adag__ucx_dev_read_places(adag_rbuf_t *rb, uint32_t nreaders, int reader,
                             adag_chan_place_t *me)
{
    uint32_t nplaces = adag__rbuf_u32(rb);
    *me = ADAG_CHAN_PLACE_HOST;
    if (rb->failed || (nplaces != 0 && nplaces != 1 + nreaders))
        return 0;
    for (uint32_t j = 0; j < nplaces; j++) {
        adag_chan_place_t pl = ADAG_CHAN_PLACE_HOST;
        pl.kind = (int32_t)adag__rbuf_u32(rb);
        pl.index = adag__rbuf_u32(rb);
        if (rb->failed || (pl.kind >= 0 && !adag__device_backend((uint32_t)pl.kind)))
            return 0;
        if ((int)j == reader + 1)
            *me = pl;
    }
    return 1;
}

adag_status_t adag__ucx_dev_open(adag_ucx_chan_t *c, const adag_chan_open_params_t *p,
                                adag_chan_place_t me)
{
    if (me.kind < 0)
        return ADAG_OK;
    if (!p->device || (int32_t)p->device->kind != me.kind || p->device->dev->index != me.index)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "ucx channel %s: this endpoint was compiled for %s:%u but its actor %s",
                          p->name, adag_device_kind_name((uint32_t)me.kind), me.index,
                          p->device ? "has another device" : "has no device");
    const adag_chan_device_t *d = p->device;
    adag_status_t st = d->dev->ops->mem_alloc(d->dev, c->mem_len, &c->dev_slots);
    if (st != ADAG_OK) {
        adag__error_prefix("ucx channel %s: %u device slots of %zu bytes on %s:%u", p->name,
                          c->base.nslots, c->stride, adag_device_kind_name((uint32_t)me.kind),
                          me.index);
        return st;
    }
    c->device = d;
    c->base.on_device = 1;
    return ADAG_OK;
}

void adag__ucx_dev_close(adag_ucx_chan_t *c)
{
    if (c->device && c->dev_slots.ptr)
        c->device->dev->ops->mem_free(c->device->dev, &c->dev_slots);
    c->dev_slots.ptr = NULL;
}

void *adag__ucx_dev_slot(const adag_ucx_chan_t *c, uint64_t seq)
{
    return (char *)c->dev_slots.ptr + (size_t)(seq % c->base.nslots) * c->stride;
}

/* Copies size bytes src -> dst on the compute stream and waits for it. */
static adag_status_t copy_sync(adag_ucx_chan_t *c, void *dst, const void *src, size_t size,
                               const char *what, uint64_t seq)
{
    const adag_chan_device_t *d = c->device;
    adag_status_t st = d->dev->ops->copy_async(d->compute, dst, src, size);
    while (st == ADAG_OK) {
        st = d->dev->ops->stream_sync(d->compute, adag__deadline_ms(SLICE_MS));
        if (st != ADAG_ERR_TIMEOUT)
            break;
        /* seq_cst: the abort word's handshake (common/event.h) */
        if (atomic_load_explicit(c->base.abort, memory_order_seq_cst))
            return ADAG_ERR_CLOSED;
        st = ADAG_OK;
    }
    if (st != ADAG_OK)
        adag__error_prefix("ucx channel %s: execution %llu: copying %zu bytes %s %s:%u",
                          c->base.name, (unsigned long long)seq, size, what,
                          adag_device_kind_name((uint32_t)d->kind), d->dev->index);
    return st;
}

adag_status_t adag__ucx_dev_stage_out(adag_ucx_chan_t *c, uint64_t seq, void *host, size_t size)
{
    return size ? copy_sync(c, host, adag__ucx_dev_slot(c, seq), size, "out of", seq) : ADAG_OK;
}

adag_status_t adag__ucx_dev_stage_in(adag_ucx_chan_t *c, uint64_t seq, const void *host,
                                    size_t size)
{
    return size ? copy_sync(c, adag__ucx_dev_slot(c, seq), host, size, "into", seq) : ADAG_OK;
}

adag_status_t adag__ucx_dev_view(adag_ucx_chan_t *c, uint64_t seq, size_t size,
                                adag_slot_view_t *view)
{
    /* a reader's value lands in its host slot; the writer's own is in its device slot */
    adag_status_t st = c->base.reader >= 0 ? adag__ucx_dev_stage_in(c, seq, view->data, size)
                                           : ADAG_OK;
    if (st != ADAG_OK)
        return st;
    view->data = adag__ucx_dev_slot(c, seq);
    view->device = ADAG_DEVICE(c->device->kind, c->device->dev->index);
    return ADAG_OK;
}

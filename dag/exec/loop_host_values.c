/*
 * Host values and a device-bound actor's work. A value not declared a
 * tensor lies in host memory, even between device-bound actors, and a
 * method that used its compute stream (adag_call_stream,
 * adag_call_enqueue) may have enqueued work that writes such a return or
 * reads such an argument after the method returned. Device tensors are
 * ordered on the device (events); host values are ordered here:
 *
 *   - a host return whose buffer the method was handed (adag_call_output,
 *     adag_call_output_tensor; adag_call_set_output copies final bytes) is
 *     published only after the stream ran the work enqueued so far: the
 *     loop waits for the stream;
 *   - the slots an execution read are handed back to their writers only
 *     after that work, when the actor's methods take host arguments: an
 *     event is recorded on the compute stream at the end of the execution
 *     and its release is held until the event completed (but for the
 *     tickets of shared communicators, which only the loop reads: given
 *     back at once, so that an idle loop holds none). Held executions
 *     are released in order at the start of a later execution, without
 *     waiting while the event is pending, except for those whose slots
 *     that execution's writers need: a writer fills slot seq of a channel
 *     of k slots only after every reader released seq - k, so before it
 *     waits for execution seq's inputs the loop waits for the events of
 *     execution seq - k and older, k the fewest slots among the channels
 *     it reads (held_slots; every channel's own geometry). At most that
 *     many executions are ever held.
 *
 * Every wait is a host wait in 100 ms slices, so that an abort ends it;
 * a stream that fails fails that execution (returns) or the DAG (inputs)
 * with the device's message. All of it runs on the loop thread.
 */
#include "common/clock.h"
#include "common/error.h"
#include "dag/exec/loop.h"
#include "gpu/device.h"

#include <stdio.h>
#include <stdlib.h>

#define SLICE_MS 100

/* 1 if channel c of the program lies in host memory on this side. */
static int host_chan(const adag_loop_t *loop, uint32_t c)
{
    return !loop->chans[c]->on_device;
}

/* Waits for sync(arg) in slices; ADAG_ERR_CLOSED if the DAG was aborted
 * meanwhile, another error if the device failed. */
static adag_status_t wait_sliced(adag_loop_t *loop,
                                 adag_status_t (*sync)(void *arg, int64_t deadline), void *arg)
{
    for (;;) {
        adag_status_t st = sync(arg, adag__deadline_ms(SLICE_MS));
        if (st != ADAG_ERR_TIMEOUT)
            return st;
        if (adag__ctx_aborted(loop->ctx))
            return ADAG_ERR_CLOSED;
    }
}

static adag_status_t sync_stream(void *arg, int64_t deadline)
{
    const adag_chan_device_t *d = arg;
    return d->dev->ops->stream_sync(d->compute, deadline);
}

static adag_status_t sync_event(void *arg, int64_t deadline)
{
    adag_loop_t *loop = arg;
    const adag_chan_device_t *d = loop->actor.device;
    return d->dev->ops->event_sync(loop->held_ev[loop->held_from % loop->prog.max_inflight], deadline);
}

adag_status_t adag__loop_hold_open(adag_loop_t *loop)
{
    const adag_chan_device_t *d = loop->actor.device;
    for (uint32_t i = 0; d && i < loop->prog.nops; i++) {
        const adag_prog_op_t *op = &loop->prog.ops[i];
        for (uint32_t a = 0; op->kind == ADAG_OP_CALL && a < op->nargs; a++)
            loop->host_args |= host_chan(loop, op->args[a]);
    }
    if (!loop->host_args)
        return ADAG_OK;
    loop->held_slots = loop->prog.max_inflight;
    for (unsigned i = 0; i < loop->nreads; i++)
        if (loop->chans[loop->reads[i]]->nslots < loop->held_slots)
            loop->held_slots = loop->chans[loop->reads[i]]->nslots;
    loop->held_ev = calloc(loop->prog.max_inflight, sizeof(*loop->held_ev));
    if (!loop->held_ev)
        return adag__error(ADAG_ERR_NO_MEMORY, "%u events", loop->prog.max_inflight);
    for (uint32_t i = 0; i < loop->prog.max_inflight; i++) {
        adag_status_t st = d->dev->ops->event_create(d->dev, &loop->held_ev[i]);
        if (st != ADAG_OK) {
            adag__error_prefix("the events that hold its host inputs for its device work");
            return st;
        }
    }
    return ADAG_OK;
}

void adag__loop_hold_close(adag_loop_t *loop)
{
    const adag_chan_device_t *d = loop->actor.device;
    for (uint32_t i = 0; loop->held_ev && i < loop->prog.max_inflight; i++)
        if (loop->held_ev[i])
            d->dev->ops->event_destroy(d->dev, loop->held_ev[i]);
    free(loop->held_ev);
    loop->held_ev = NULL;
}

adag_status_t adag__loop_settle_returns(adag_loop_t *loop, const adag_prog_op_t *op,
                                       struct adag_call *call)
{
    int host = 0;
    for (uint32_t r = 0; r < op->nrets && !host; r++)
        host = (call->handed >> r & 1) && host_chan(loop, op->rets[r]);
    if (!host)
        return ADAG_OK;
    adag_status_t st = wait_sliced(loop, sync_stream, (void *)loop->actor.device);
    if (st == ADAG_OK)
        loop->stream_dirty = 0;
    if (st == ADAG_OK || st == ADAG_ERR_CLOSED)
        return st;
    if (call->fail_status == ADAG_OK) {
        snprintf(call->msg, sizeof(call->msg),
                 "actor %s.%s: its device work, before its host returns were published: %s",
                 loop->actor_name, adag__call_method_name(call), adag_last_error());
        call->fail_status = st;
    }
    return ADAG_OK;
}

adag_status_t adag__loop_end_reads(adag_loop_t *loop, uint64_t seq)
{
    /* nothing enqueued may still read them, and none held before: now */
    if (!loop->host_args || (!loop->stream_dirty && loop->held_to == loop->held_from)) {
        adag__loop_release_reads(loop, seq, ADAG_READS_ALL);
        return ADAG_OK;
    }
    /* the tickets are no method's argument: never held, so that an idle
     * loop holds none (a destroy waits for every rank to give its last
     * ticket back) */
    adag__loop_release_reads(loop, seq, ADAG_READS_ORDERS);
    const adag_chan_device_t *d = loop->actor.device;
    adag_status_t st = d->dev->ops->event_record(loop->held_ev[seq % loop->prog.max_inflight],
                                                 d->compute);
    if (st != ADAG_OK) {
        adag__error_prefix("holding the host inputs of execution %llu for its device work",
                          (unsigned long long)seq);
        return st;
    }
    if (loop->held_to == loop->held_from)
        loop->held_from = seq;
    loop->held_to = seq + 1;
    loop->stream_dirty = 0; /* the event covers what was enqueued */
    return ADAG_OK;
}

adag_status_t adag__loop_release_held(adag_loop_t *loop, uint64_t seq)
{
    const adag_chan_device_t *d = loop->actor.device;
    while (loop->held_from < loop->held_to) {
        uint64_t n = loop->held_from;
        adag_status_t st = d->dev->ops->event_query(loop->held_ev[n % loop->prog.max_inflight]);
        if (st == ADAG_ERR_AGAIN) {
            if (n + loop->held_slots > seq)
                return ADAG_OK; /* still read, and nobody needs it yet */
            st = wait_sliced(loop, sync_event, loop);
        }
        if (st != ADAG_OK) {
            if (st != ADAG_ERR_CLOSED)
                adag__error_prefix("the device work that reads the host inputs of execution "
                                  "%llu",
                                  (unsigned long long)n);
            return st;
        }
        adag__loop_release_reads(loop, n, ADAG_READS_HELD);
        loop->held_from = n + 1;
    }
    return ADAG_OK;
}

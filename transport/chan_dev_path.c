/*
 * The device channel's hot path: acquire, publish, wait, release, ready
 * for every role (transport/chan_dev.h describes the roles).
 */
#include "common/error.h"
#include "common/log.h"
#include "transport/chan_dev.h"

#include <stdio.h>
#include <string.h>

static adag_status_t stream_fail(dev_chan_t *c, adag_status_t st, const char *what, uint64_t seq)
{
    adag__error_prefix("device channel %s: %s for execution %llu", c->base.name, what,
                      (unsigned long long)seq);
    return st;
}

static adag_status_t enqueue_read(dev_chan_t *c, unsigned s, uint64_t seq,
                                  adag_slot_view_t *view);
static adag_status_t confirm_ahead(dev_chan_t *c, unsigned s, uint64_t seq,
                                   adag_slot_view_t *view);

/* The writer's stream `on` waits until every device reader is done with
 * slot s's previous value (seq - nslots): its word or its event. */
static adag_status_t credit_waits(dev_chan_t *c, unsigned s, uint64_t seq, adag_dev_stream_t *on)
{
    adag_status_t st;
    unsigned nslots = c->base.nslots;
    for (unsigned r = 0; r + 1 < c->nplaces; r++) {
        adag_dev_event_t *ev = c->consumed[(size_t)r * nslots + s];
        if (c->done_words && c->done_words[r].host) {
            /* reader r's word says it is done with seq - nslots */
            if (seq >= nslots &&
                (st = c->ops->stream_wait_value64(on, &c->done_words[r], seq - nslots + 1)) !=
                    ADAG_OK)
                return stream_fail(c, st, "waiting for a reader's word", seq);
        } else if (ev && (st = c->ops->stream_wait_event(on, ev)) != ADAG_OK) {
            return stream_fail(c, st, "waiting for a reader", seq);
        }
    }
    return ADAG_OK;
}

adag_status_t adag__chan_dev_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf)
{
    dev_chan_t *c = dev_of(ch);
    void *ring_buf;
    adag_status_t st = c->ring->ops->acquire(c->ring, seq, deadline, &ring_buf);
    if (st != ADAG_OK)
        return st;
    if (c->role != ROLE_DEV_WRITER) {
        *buf = ring_buf;
        return ADAG_OK;
    }
    unsigned s = slot_index(c, seq);
    c->ring_bufs[s] = ring_buf;
    adag_dev_stream_t *compute = c->device->compute;
    *buf = (char *)c->slots.ptr + (size_t)s * c->stride;
    /* deferred (graphable: words only, no copy, no sends): device_before */
    if (c->deferred)
        return ADAG_OK;
    /* the device readers are done with the slot, and so is the payload copy */
    if ((st = credit_waits(c, s, seq, compute)) != ADAG_OK)
        return st;
    if (c->copied && (st = c->ops->stream_wait_event(compute, c->copied[s])) != ADAG_OK)
        return stream_fail(c, st, "waiting for the host copy", seq);
    /* by communicator: the sends of seq - nslots read the slot until done */
    if (c->sent && (st = c->ops->stream_wait_event(compute, c->sent[s])) != ADAG_OK)
        return stream_fail(c, st, "waiting for the sends", seq);
    return ADAG_OK;
}

static void deferred_publish(void *arg)
{
    deferred_t *p = arg;
    adag_chan_t *ring = p->ch->ring;
    /* an aborted DAG publishes nothing more: its streams may have given up
     * on a peer (event_abandon) and copied bytes that peer never wrote;
     * the readers end on the abort word (seq_cst: stored before the
     * abandon that let this stream go on) */
    if (atomic_load_explicit(p->ch->base.abort, memory_order_seq_cst))
        return;
    ring->ops->publish(ring, p->seq, p->size, p->has_meta ? &p->meta : NULL, p->status,
                       p->err[0] ? p->err : NULL);
}

/* The writer's value of seq is on stream `on` (its compute stream, or a
 * capture of its work): its `ready` event, and its word for the readers by
 * words. */
static adag_status_t record_value(dev_chan_t *c, unsigned s, uint64_t seq, adag_dev_stream_t *on)
{
    adag_status_t st = c->ops->event_record(c->ready[s], on);
    if (st == ADAG_OK && c->ready_by_word)
        st = c->ops->stream_write_value64(on, &c->ready_word, seq + 1);
    return st;
}

adag_status_t adag__chan_dev_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                                    const adag_tensor_meta_t *meta, adag_status_t status,
                                    const char *err)
{
    dev_chan_t *c = dev_of(ch);
    adag_status_t st = adag__chan_publish_fits(ch, seq, size, status);
    if (st != ADAG_OK)
        return st; /* before any event or copy: nothing of seq is on a stream */
    if (c->role != ROLE_DEV_WRITER)
        return c->ring->ops->publish(c->ring, seq, size, meta, status, err);
    unsigned s = slot_index(c, seq);
    /* pending[s] is free: the ring publish of seq - nslots ran before the
     * readers released it, which acquire(seq) waited for */
    deferred_t *p = &c->pending[s];
    p->ch = c;
    p->seq = seq;
    p->size = status == ADAG_OK ? size : 0;
    p->has_meta = status == ADAG_OK && meta != NULL;
    adag__tensor_meta_store(&p->meta, p->has_meta ? meta : NULL);
    p->status = status;
    snprintf(p->err, sizeof(p->err), "%s", status != ADAG_OK && err ? err : "");
    /* recorded already by publish_ahead; a failed execution's too, so that
     * a reader that waits ahead of the ring goes on (its loop then reads
     * the failure on the ring) */
    int ahead = c->ahead && c->ahead[s] == seq + 1;
    if (!ahead && (status == ADAG_OK || c->ready_by_word) &&
        (st = record_value(c, s, seq, c->device->compute)) != ADAG_OK)
        return stream_fail(c, st, "recording the value", seq);
    if (c->payload) {
        /* host readers: copy to the ring's slot, then publish it, in stream order */
        adag_dev_stream_t *comm = c->device->comm;
        watch_arm(c->watch, s, seq);
        if (status == ADAG_OK && p->size) {
            uint64_t t0 = ch->trace ? adag__trace_clock() : 0;
            if ((st = c->ops->stream_wait_event(comm, c->ready[s])) != ADAG_OK ||
                (st = c->ops->copy_async(comm, c->ring_bufs[s], (char *)c->slots.ptr +
                                                                   (size_t)s * c->stride,
                                         p->size)) != ADAG_OK)
                return stream_fail(c, st, "copying the value to host memory", seq);
            if (ch->trace)
                adag__trace_add(ch->trace, ADAG_SPAN_DEVICE_COPY, ADAG_SPAN_NO_OP, ch->trace_chan,
                               seq, t0, adag__trace_clock());
        }
        if ((st = c->ops->event_record(c->copied[s], comm)) != ADAG_OK ||
            (st = c->ops->host_fn(comm, deferred_publish, p)) != ADAG_OK)
            return stream_fail(c, st, "publishing", seq);
    }
    /* device readers by communicator: a send each (a failure or 0 bytes: none) */
    if (c->comm_readers && status == ADAG_OK && p->size &&
        (st = adag__chan_dev_comm_send(c, s, seq, p->size)) != ADAG_OK)
        return st;
    /* without payload, only now: a reader that sees the ring finds its send queued */
    if (!c->payload)
        return c->ring->ops->publish(c->ring, seq, size, meta, status, err);
    return ADAG_OK;
}

adag_status_t adag__chan_dev_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                                 adag_slot_view_t *view)
{
    dev_chan_t *c = dev_of(ch);
    adag_status_t st;
    if (c->role == ROLE_DEV_WRITER) {
        /* the writer reading its own value: same stream, nothing to wait for */
        const deferred_t *p = &c->pending[slot_index(c, seq)];
        view->data = (char *)c->slots.ptr + (size_t)slot_index(c, seq) * c->stride;
        view->size = p->size;
        adag__tensor_meta_load(&view->meta, &p->meta);
        view->device = ADAG_DEVICE(c->device->kind, c->device->dev->index);
        view->status = p->status;
        view->err = p->err;
        view->err_len = strlen(p->err);
        return ADAG_OK;
    }
    if ((st = c->ring->ops->wait(c->ring, seq, deadline, view)) != ADAG_OK)
        return st;
    if (c->role == ROLE_HOST_WRITER || c->role == ROLE_HOST_READER)
        return ADAG_OK;
    if (view->status != ADAG_OK) {
        /* a peer copy by words: no copy to say the writer's slot is free */
        if (c->role == ROLE_PEER_COPY && c->ready_by_word &&
            (st = adag__chan_dev_word_done(c, c->device->comm, seq)) != ADAG_OK)
            return stream_fail(c, st, "giving the writer's slot back", seq);
        return ADAG_OK;
    }
    if (c->role == ROLE_COMM_RECV)
        return adag__chan_dev_comm_recv(c, seq, view);
    unsigned s = slot_index(c, seq);
    if (c->ahead && c->ahead[s] == seq + 1)
        return confirm_ahead(c, s, seq, view);
    if (c->deferred) {
        /* graphable: a reader on the writer's device, by words;
         * device_before enqueues the wait, and watches it */
        view->device = ADAG_DEVICE(c->device->kind, c->device->dev->index);
        view->data = (char *)c->peer.ptr + (size_t)s * c->stride;
        return ADAG_OK;
    }
    watch_arm(c->watch, s, seq);
    uint64_t t0 = ch->trace ? adag__trace_clock() : 0;
    if ((st = enqueue_read(c, s, seq, view)) != ADAG_OK)
        return st;
    if (ch->trace && c->role != ROLE_SAME_DEVICE)
        adag__trace_add(ch->trace, ADAG_SPAN_DEVICE_COPY, ADAG_SPAN_NO_OP, ch->trace_chan, seq, t0,
                       adag__trace_clock());
    return ADAG_OK;
}

/* What a device reader's streams do to read seq (view->size bytes): wait
 * for the writer's value, copy it where it is not read in place; the
 * view's data and device then say where it is. */
static adag_status_t enqueue_read(dev_chan_t *c, unsigned s, uint64_t seq,
                                  adag_slot_view_t *view)
{
    adag_status_t st;
    adag_dev_stream_t *compute = c->device->compute, *comm = c->device->comm;
    char *local = c->local.ptr ? (char *)c->local.ptr + (size_t)s * c->stride : NULL;
    view->device = ADAG_DEVICE(c->device->kind, c->device->dev->index);
    switch (c->role) {
    case ROLE_SAME_DEVICE:
        /* `arrived` completes when the wait did (the watchdog's view) */
        if ((st = c->ready_by_word
                      ? c->ops->stream_wait_value64(compute, &c->ready_word, seq + 1)
                      : c->ops->stream_wait_event(compute, c->peer_ready[s])) != ADAG_OK ||
            (st = c->ops->event_record(c->arrived[s], compute)) != ADAG_OK)
            return stream_fail(c, st, "waiting for the writer", seq);
        view->data = (char *)c->peer.ptr + (size_t)s * c->stride;
        return ADAG_OK;
    case ROLE_PEER_COPY:
        if ((st = c->ready_by_word
                      ? c->ops->stream_wait_value64(comm, &c->ready_word, seq + 1)
                      : c->ops->stream_wait_event(comm, c->peer_ready[s])) != ADAG_OK ||
            (st = c->ops->stream_wait_event(comm, c->local_free[s])) != ADAG_OK ||
            (st = c->ops->copy_async(comm, local, (char *)c->peer.ptr + (size_t)s * c->stride,
                                     view->size)) != ADAG_OK ||
            (st = c->ready_by_word ? adag__chan_dev_word_done(c, comm, seq)
                                   : c->ops->event_record(c->my_consumed[s], comm)) != ADAG_OK)
            return stream_fail(c, st, "copying from the writer's device", seq);
        break;
    case ROLE_H2D:
        if ((st = c->ops->stream_wait_event(comm, c->local_free[s])) != ADAG_OK ||
            (st = c->ops->copy_async(comm, local, view->data, view->size)) != ADAG_OK)
            return stream_fail(c, st, "copying from host memory", seq);
        break;
    default:
        break;
    }
    if ((st = c->ops->event_record(c->local_ready[s], comm)) != ADAG_OK ||
        (st = c->ops->stream_wait_event(compute, c->local_ready[s])) != ADAG_OK)
        return stream_fail(c, st, "ordering the copy", seq);
    view->data = local;
    return ADAG_OK;
}

int adag__chan_dev_ahead(adag_chan_t *ch)
{
    dev_chan_t *c = dev_of(ch);
    return c->ahead && c->ready_by_word &&
           (c->role == ROLE_SAME_DEVICE || c->role == ROLE_PEER_COPY ||
            (c->role == ROLE_DEV_WRITER && !c->comm_key));
}

adag_status_t adag__chan_dev_wait_ahead(adag_chan_t *ch, uint64_t seq, size_t size,
                                       const adag_tensor_meta_t *meta, adag_slot_view_t *view)
{
    dev_chan_t *c = dev_of(ch);
    unsigned s = slot_index(c, seq);
    if (size > c->stride)
        return adag__error(ADAG_ERR_INVALID, "device channel %s: a value of %zu bytes ahead, "
                                            "its slots hold %zu", ch->name, size, c->stride);
    memset(view, 0, sizeof(*view));
    view->size = size;
    adag__tensor_meta_load(&view->meta, meta);
    view->status = ADAG_OK;
    view->err = "";
    adag_status_t st = enqueue_read(c, s, seq, view);
    if (st != ADAG_OK)
        return st;
    c->ahead_size[s] = size;
    c->ahead[s] = seq + 1;
    return ADAG_OK;
}

/* The ring's view of a value read ahead: its status and size are the
 * ring's (a failed execution's data is the stream's to ignore), its data
 * where wait_ahead put it. The watchdog counts the read from here: the
 * writer's loop has enqueued its work. */
static adag_status_t confirm_ahead(dev_chan_t *c, unsigned s, uint64_t seq,
                                   adag_slot_view_t *view)
{
    if (view->status == ADAG_OK && view->size != c->ahead_size[s])
        return adag__error(ADAG_ERR_PROTOCOL,
                          "device channel %s: execution %llu is %zu bytes, read ahead as %zu",
                          c->base.name, (unsigned long long)seq, view->size, c->ahead_size[s]);
    watch_arm(c->watch, s, seq);
    view->device = ADAG_DEVICE(c->device->kind, c->device->dev->index);
    view->data = c->role == ROLE_SAME_DEVICE ? (char *)c->peer.ptr + (size_t)s * c->stride
                                             : (char *)c->local.ptr + (size_t)s * c->stride;
    return ADAG_OK;
}

adag_status_t adag__chan_dev_publish_ahead(adag_chan_t *ch, uint64_t seq)
{
    dev_chan_t *c = dev_of(ch);
    unsigned s = slot_index(c, seq);
    adag_status_t st = record_value(c, s, seq, c->device->compute);
    if (st != ADAG_OK)
        return stream_fail(c, st, "recording the value", seq);
    c->ahead[s] = seq + 1;
    return ADAG_OK;
}

/* ---- device work in a graph (dag/exec/loop_graph.c) ---- */

int adag__chan_dev_graphable(adag_chan_t *ch)
{
    dev_chan_t *c = dev_of(ch);
    if (!c->device || !atomic_load_explicit(&c->connected, memory_order_acquire) ||
        !c->ready_by_word)
        return 0;
    if (c->role == ROLE_SAME_DEVICE)
        return 1; /* a wait on the writer's word and the `arrived` record */
    if (c->role != ROLE_DEV_WRITER || c->payload || c->copied || c->sent || c->comm_key)
        return 0;
    /* every reader by words: credits on their words, none by events */
    for (unsigned r = 0; r + 1 < c->nplaces; r++)
        if (!c->done_words || !c->done_words[r].host)
            return 0;
    return 1;
}

void adag__chan_dev_defer(adag_chan_t *ch, int on)
{
    dev_of(ch)->deferred = on;
}

adag_status_t adag__chan_dev_device_before(adag_chan_t *ch, uint64_t seq, adag_dev_stream_t *s)
{
    dev_chan_t *c = dev_of(ch);
    unsigned k = slot_index(c, seq);
    adag_status_t st;
    if (c->role == ROLE_DEV_WRITER)
        return s ? credit_waits(c, k, seq, s) : ADAG_OK;
    /* ROLE_SAME_DEVICE (graphable); `arrived` completes when the wait did */
    if (s && ((st = c->ops->stream_wait_value64(s, &c->ready_word, seq + 1)) != ADAG_OK ||
              (st = c->ops->event_record(c->arrived[k], s)) != ADAG_OK))
        return stream_fail(c, st, "waiting for the writer", seq);
    /* watched once it is on the stream for good (not while captured: the
     * watchdog's query of `arrived` would be illegal during a capture) */
    if (!s || s == c->device->compute)
        watch_arm(c->watch, k, seq);
    return ADAG_OK;
}

adag_status_t adag__chan_dev_device_after(adag_chan_t *ch, uint64_t seq, adag_dev_stream_t *s)
{
    dev_chan_t *c = dev_of(ch);
    unsigned k = slot_index(c, seq);
    if (c->role != ROLE_DEV_WRITER)
        return ADAG_OK;
    if (!s) {
        /* recorded by a launched graph: publish only publishes the ring */
        c->ahead[k] = seq + 1;
        return ADAG_OK;
    }
    adag_status_t st = record_value(c, k, seq, s);
    return st == ADAG_OK ? ADAG_OK : stream_fail(c, st, "recording the value", seq);
}

static void deferred_release(void *arg)
{
    deferred_t *p = arg;
    adag_chan_t *ring = p->ch->ring;
    ring->ops->release(ring, p->seq);
}

void adag__chan_dev_release(adag_chan_t *ch, uint64_t seq)
{
    dev_chan_t *c = dev_of(ch);
    unsigned s = slot_index(c, seq);
    adag_status_t st = ADAG_OK;
    if (c->role == ROLE_HOST_WRITER || c->role == ROLE_HOST_READER) {
        c->ring->ops->release(c->ring, seq);
        return;
    }
    if (c->role == ROLE_DEV_WRITER)
        return; /* the writer reading its own slot holds nothing */
    switch (c->role) {
    case ROLE_SAME_DEVICE:
        /* the compute stream's reads of the writer's slot come first */
        st = c->ready_by_word ? adag__chan_dev_word_done(c, c->device->compute, seq)
                              : c->ops->event_record(c->my_consumed[s], c->device->compute);
        break;
    case ROLE_PEER_COPY:
        /* by words: a seq this endpoint never waited for gives the slot
         * back too (never a lower value: adag__chan_dev_word_done) */
        if (c->ready_by_word && (st = adag__chan_dev_word_done(c, c->device->comm, seq)) != ADAG_OK)
            break;
        /* fall through */
    case ROLE_COMM_RECV:
        /* the compute stream's reads of the own slot come before its next copy/recv */
        st = c->ops->event_record(c->local_free[s], c->device->compute);
        break;
    case ROLE_H2D:
        if ((st = c->ops->event_record(c->local_free[s], c->device->compute)) == ADAG_OK) {
            /* the ring's host slot is free once the copy on comm read it */
            c->releases[s].ch = c;
            c->releases[s].seq = seq;
            st = c->ops->host_fn(c->device->comm, deferred_release, &c->releases[s]);
            if (st == ADAG_OK)
                return;
        }
        break;
    default:
        break;
    }
    if (st != ADAG_OK) {
        /* an event that cannot be recorded: wait for the streams instead,
         * so that releasing never lets the writer overwrite a slot in use */
        ADAG_LOG_WARN("device channel %s: %s; waiting for the streams before releasing "
                      "execution %llu",
                      ch->name, adag_last_error(), (unsigned long long)seq);
        c->ops->stream_sync(c->device->comm, ADAG_FOREVER);
        c->ops->stream_sync(c->device->compute, ADAG_FOREVER);
    }
    c->ring->ops->release(c->ring, seq);
}

int adag__chan_dev_ready(adag_chan_t *ch, uint64_t seq)
{
    dev_chan_t *c = dev_of(ch);
    if (c->role == ROLE_DEV_WRITER)
        return 1;
    return c->ring->ops->ready(c->ring, seq);
}


/*
 * The UCX channel's messages (the protocol: transport/chan_ucx.c): what an
 * endpoint's failure does, the callbacks of its UCX requests, the AM
 * handlers that land values in a reader's slots and apply credits to a
 * writer, and the credits going out (on their own, or carried by a value
 * going the writer's way), and freeing an endpoint. Everything here runs under the domain's lock:
 * inside progress (callbacks, handlers) or called with it held. The
 * endpoint's ops (transport/chan_ucx.c) and the domain
 * (transport/ucx_domain.c) call this file; it calls neither.
 *
 * Memory ordering: the conditions waiters wait on (written, a credit, a
 * slot's sends, an endpoint's status) are stored seq_cst here, then the
 * endpoint's event is notified: the handshake of common/event.h. The
 * store of `written` also releases the slot's bytes to the reader.
 */
#include "transport/ucx.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Fails the endpoint (the first reason stays) and wakes its waiters. */
void adag__ucx_chan_fail(adag_ucx_chan_t *c, adag_status_t st, const char *fmt, ...)
{
    if (atomic_load_explicit(&c->status, memory_order_seq_cst) != ADAG_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
    atomic_store_explicit(&c->status, st, memory_order_seq_cst);
    adag__event_notify(&c->ev);
}

/* The endpoint's failure, reported (once, here) as the caller's error. */
adag_status_t adag__ucx_chan_error(adag_ucx_chan_t *c)
{
    adag_status_t st = atomic_load_explicit(&c->status, memory_order_seq_cst);
    return adag__error(st, "ucx channel %s: %s", c->base.name, c->why);
}

int adag__ucx_chan_peer_failed(adag_ucx_chan_t *c, const adag_ucx_conn_t *conn)
{
    if (c->to_writer == conn) {
        adag__ucx_chan_fail(c, ADAG_ERR_IO, "its writer's process failed or is unreachable: %s",
                  conn->why);
        return 1;
    }
    for (unsigned r = 0; c->to_reader && r < c->nreaders; r++)
        if (c->to_reader[r] == conn) {
            adag__ucx_chan_fail(c, ADAG_ERR_IO, "the process of its reader %u failed or is unreachable: %s",
                      r, conn->why);
            return 1;
        }
    return 0;
}

/* ---- request callbacks (inside progress: under the domain's lock) ---- */

/* The connection a request of x goes over (NULL only for a value that
 * reached a reader before its CONNECT, which no DAG does). */
static adag_ucx_conn_t *req_conn(const adag_ucx_req_ctx_t *x)
{
    return x->reader < 0 ? x->ch->to_writer : x->ch->to_reader[x->reader];
}

/* A UCX request of x started / ended (its callback ran). `pending` and
 * the connection's `inflight` change under d->lock; relaxed: they are
 * read under it. `requests` is only a hint for how long a waiter spins. */
void adag__ucx_request_started(const adag_ucx_req_ctx_t *x)
{
    adag_ucx_conn_t *conn = req_conn(x);
    atomic_fetch_add_explicit(&x->ch->pending, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->ch->d->requests, 1, memory_order_relaxed);
    if (conn)
        conn->inflight++;
}

static void request_done(const adag_ucx_req_ctx_t *x, void *req)
{
    adag_ucx_conn_t *conn = req_conn(x);
    ucp_request_free(req);
    if (conn)
        conn->inflight--;
    atomic_fetch_sub_explicit(&x->ch->pending, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&x->ch->d->requests, 1, memory_order_relaxed);
}

void adag__ucx_sent(void *req, ucs_status_t us, void *arg)
{
    adag_ucx_req_ctx_t *x = arg;
    adag_ucx_chan_t *c = x->ch;
    if (us != UCS_OK)
        adag__ucx_chan_fail(c, ADAG_ERR_IO, "sending a value failed: %s", ucs_status_string(us));
    atomic_fetch_sub_explicit(&c->slot_sends[x->slot], 1, memory_order_seq_cst);
    adag__event_notify(&c->ev);
    request_done(x, req);
}

static void credit_sent(void *req, ucs_status_t us, void *arg)
{
    adag_ucx_req_ctx_t *x = arg;
    adag_ucx_chan_t *c = x->ch;
    if (us != UCS_OK)
        adag__ucx_chan_fail(c, ADAG_ERR_IO, "sending a credit to the writer failed: %s",
                  ucs_status_string(us));
    atomic_store_explicit(&c->slot_credits[x->slot], 0, memory_order_seq_cst);
    request_done(x, req);
}

/* seq landed in its slot: advance `written` over every landed seq. */
static void landed(adag_ucx_chan_t *c, uint64_t seq)
{
    adag_ucx_domain_t *d = c->d;
    c->landed[seq % c->base.nslots] = seq + 1;
    uint64_t w = atomic_load_explicit(&c->written, memory_order_relaxed);
    uint64_t was = w;
    while (c->landed[w % c->base.nslots] == w + 1)
        w++;
    if (w == was)
        return;
    /* seq_cst: releases the slots' bytes; part of the event handshake */
    atomic_store_explicit(&c->written, w, memory_order_seq_cst);
    adag__event_notify(&c->ev);
    if (atomic_load_explicit(&c->notify_armed, memory_order_seq_cst)) {
        uint64_t one = 1;
        while (write(d->notify_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
        }
    }
}

static void received(void *req, ucs_status_t us, size_t length, void *arg)
{
    adag_ucx_req_ctx_t *x = arg;
    adag_ucx_chan_t *c = x->ch;
    (void)length;
    if (us != UCS_OK)
        adag__ucx_chan_fail(c, ADAG_ERR_IO, "receiving a value failed: %s", ucs_status_string(us));
    else
        landed(c, adag__ucx_slot_of(c, x->slot)->seq);
    request_done(x, req);
}

/* ---- AM handlers (inside progress) ---- */

/* Reader r of a channel whose writer is here released below `released`. */
static void credit_apply(adag_ucx_domain_t *d, const adag_ucx_credit_hdr_t *h)
{
    adag_ucx_chan_t *c = adag__ucx_domain_find(d, h->chan, -1);
    if (!c)
        return;
    if (h->reader >= c->nreaders) {
        adag__ucx_chan_fail(c, ADAG_ERR_PROTOCOL, "a credit from reader %u of %u", h->reader,
                  c->nreaders);
        return;
    }
    _Atomic uint64_t *cr = &c->credit[h->reader];
    if (h->released > atomic_load_explicit(cr, memory_order_relaxed)) {
        atomic_store_explicit(cr, h->released, memory_order_seq_cst);
        adag__event_notify(&c->ev);
    }
}


ucs_status_t adag__ucx_on_data(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param)
{
    adag_ucx_domain_t *d = arg;
    int rndv = !!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV);
    adag_ucx_data_hdr_t h;
    if (header_length >= sizeof(h))
        memcpy(&h, header, sizeof(h));
    if (header_length < sizeof(h) || h.ncredits > ADAG_UCX_MAX_CARRIED ||
        header_length != sizeof(h) + h.ncredits * sizeof(adag_ucx_credit_hdr_t)) {
        ADAG_LOG_WARN("ucx: a value with a %zu-byte header dropped", header_length);
        return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
    }
    for (uint32_t i = 0; i < h.ncredits; i++) {
        adag_ucx_credit_hdr_t cr;
        memcpy(&cr, (const char *)header + sizeof(h) + i * sizeof(cr), sizeof(cr));
        credit_apply(d, &cr);
    }
    adag_ucx_chan_t *c = adag__ucx_domain_find(d, h.chan, (int)h.reader);
    if (!c || atomic_load_explicit(&c->status, memory_order_seq_cst) != ADAG_OK)
        return UCS_OK; /* closed here, or failed: dropped (a rendezvous completes) */
    uint64_t w = atomic_load_explicit(&c->written, memory_order_relaxed);
    size_t max = h.status == ADAG_OK ? c->base.capacity : ADAG_SLOT_ERR_MAX - 1;
    if (h.seq < w || h.seq >= c->released + c->base.nslots ||
        c->landed[h.seq % c->base.nslots] == h.seq + 1) {
        adag__ucx_chan_fail(c, ADAG_ERR_PROTOCOL,
                  "execution %llu arrived while the reader holds %llu..%llu (%u slots)",
                  (unsigned long long)h.seq, (unsigned long long)c->released,
                  (unsigned long long)w, c->base.nslots);
        return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
    }
    if (length != h.size || length > max || h.meta.ndim > ADAG_MAX_DIMS ||
        (h.status == ADAG_OK && rndv == 0 && !data && length)) {
        adag__ucx_chan_fail(c, ADAG_ERR_PROTOCOL,
                  "execution %llu: %zu bytes (header says %llu, %u dims) do not fit a slot of "
                  "%zu bytes",
                  (unsigned long long)h.seq, length, (unsigned long long)h.size, h.meta.ndim,
                  max);
        return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
    }
    adag_ucx_slot_t *s = adag__ucx_slot_of(c, h.seq);
    s->seq = h.seq;
    s->status = h.status;
    adag__tensor_meta_store(&s->meta, h.status == ADAG_OK ? &h.meta : NULL);
    char *dst = h.status == ADAG_OK ? adag__ucx_slot_data(c, h.seq) : s->err;
    s->size = h.status == ADAG_OK ? length : 0;
    s->err_len = h.status == ADAG_OK ? 0 : (uint32_t)length;
    s->err[h.status == ADAG_OK ? 0 : length] = '\0';
    if (!rndv) {
        if (length)
            memcpy(dst, data, length);
        landed(c, h.seq);
        return UCS_OK;
    }
    adag_ucx_req_ctx_t *x = &c->req_ctx[h.seq % c->base.nslots];
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        (h.status == ADAG_OK ? UCP_OP_ATTR_FIELD_MEMH : 0),
        .cb.recv_am = received,
        .user_data = x,
        .memh = c->memh,
    };
    void *req = ucp_am_recv_data_nbx(d->worker, data, dst, length, &p);
    if (UCS_PTR_IS_ERR(req))
        adag__ucx_chan_fail(c, ADAG_ERR_IO, "receiving execution %llu failed: %s",
                  (unsigned long long)h.seq, ucs_status_string(UCS_PTR_STATUS(req)));
    else if (req)
        adag__ucx_request_started(x);
    else
        landed(c, h.seq);
    return UCS_OK;
}

ucs_status_t adag__ucx_on_credit(void *arg, const void *header, size_t header_length,
                                void *data, size_t length, const ucp_am_recv_param_t *param)
{
    adag_ucx_credit_hdr_t h;
    (void)data;
    (void)param;
    if (header_length != sizeof(h) || length) {
        ADAG_LOG_WARN("ucx: a malformed credit dropped (%zu + %zu bytes)",
                 header_length, length);
        return UCS_OK;
    }
    memcpy(&h, header, sizeof(h));
    credit_apply(arg, &h);
    return UCS_OK;
}

/* ---- credits going out (under d->lock) ---- */

/* The reader's due credit is on its way (or lost with its endpoint). */
void adag__ucx_credit_taken(adag_ucx_chan_t *c)
{
    c->credited = c->released;
    atomic_fetch_sub_explicit(&c->d->credits_due, 1, memory_order_relaxed);
}

/* Sends the reader's due credit on its own. */
void adag__ucx_credit_send(adag_ucx_chan_t *c)
{
    adag_ucx_domain_t *d = c->d;
    unsigned slot = (unsigned)((c->released - 1) % c->base.nslots);
    adag__ucx_credit_taken(c);
    /* the header of this slot's last credit must outlive its send: such a
     * send (16 bytes, eager) is long done unless the peer is gone */
    int64_t deadline = adag__now_ns() + 1000000000LL;
    while (atomic_load_explicit(&c->slot_credits[slot], memory_order_seq_cst) &&
           adag__now_ns() < deadline)
        ucp_worker_progress(d->worker);
    if (atomic_load_explicit(&c->slot_credits[slot], memory_order_seq_cst) ||
        atomic_load_explicit(&c->status, memory_order_seq_cst) != ADAG_OK)
        return; /* the writer's waits end on the failure, not on credits */
    adag_ucx_credit_hdr_t *h = &c->credits[slot];
    *h = (adag_ucx_credit_hdr_t){c->index, (uint32_t)c->base.reader, c->released};
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_FLAGS,
        .cb.send = credit_sent,
        .user_data = &c->req_ctx[slot],
        .flags = UCP_AM_SEND_FLAG_EAGER,
    };
    void *req = ucp_am_send_nbx(c->to_writer->ep, ADAG_UCX_AM_CREDIT, h, sizeof(*h), NULL, 0, &p);
    if (UCS_PTR_IS_ERR(req)) {
        adag__ucx_chan_fail(c, ADAG_ERR_IO, "sending a credit to the writer failed: %s",
                  ucs_status_string(UCS_PTR_STATUS(req)));
    } else if (req) {
        atomic_store_explicit(&c->slot_credits[slot], 1, memory_order_seq_cst);
        adag__ucx_request_started(&c->req_ctx[slot]);
    }
}

void adag__ucx_credits_flush_locked(adag_ucx_domain_t *d)
{
    for (unsigned i = 0;
         i < d->neps && atomic_load_explicit(&d->credits_due, memory_order_relaxed); i++)
        if (adag__ucx_credit_is_due(d->eps[i]))
            adag__ucx_credit_send(d->eps[i]);
}

void adag__ucx_credits_flush(adag_ucx_domain_t *d)
{
    /* relaxed: a hint; the thread that made a credit due flushes its own
     * later in program order, the progress thread under the lock */
    if (!atomic_load_explicit(&d->credits_due, memory_order_relaxed))
        return;
    pthread_mutex_lock(&d->lock);
    adag__ucx_credits_flush_locked(d);
    pthread_mutex_unlock(&d->lock);
}

/* Takes the due credits whose writer is at the other end of `to` into
 * `out` (at most ADAG_UCX_MAX_CARRIED); how many. */
uint32_t adag__ucx_credits_carry(adag_ucx_domain_t *d, const adag_ucx_conn_t *to,
                              adag_ucx_credit_hdr_t *out)
{
    uint32_t n = 0;
    for (unsigned i = 0; i < d->neps && n < ADAG_UCX_MAX_CARRIED &&
                         atomic_load_explicit(&d->credits_due, memory_order_relaxed);
         i++) {
        adag_ucx_chan_t *e = d->eps[i];
        if (!adag__ucx_credit_is_due(e) || e->to_writer != to)
            continue;
        out[n++] = (adag_ucx_credit_hdr_t){e->index, (uint32_t)e->base.reader, e->released};
        adag__ucx_credit_taken(e);
    }
    return n;
}

/* Frees an endpoint: its memory registration, ring and arrays (its
 * domain removed it; nothing of UCX refers to it any more). */
void adag__ucx_chan_free(adag_ucx_chan_t *c)
{
    if (c->memh)
        ucp_mem_unmap(c->d->ctx, c->memh);
    if (c->mem)
        munmap(c->mem, c->mem_len);
    free(c->slots);
    free(c->req_ctx);
    free(c->to_reader);
    free(c->credit);
    free(c->slot_sends);
    free(c->hdrs);
    free(c->landed);
    free(c->credits);
    free(c->slot_credits);
    free(c);
}

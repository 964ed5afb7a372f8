/*
 * The "ucx" channel: the slot protocol of shm between processes that share
 * no memory (other hosts), over UCP active messages.
 *
 * Every endpoint keeps its own ring of nslots slots of capacity bytes,
 * registered with UCX (adag__ucx_slot_stride: a slot of a page or more starts on a
 * page), and apart from it a header per slot:
 *   writer  acquire(seq) waits until every reader's credit says it released
 *           seq - nslots and the sends out of that slot completed; returns
 *           the slot's bytes (zero-copy write);
 *           publish(seq) sends one AM per reader: the slot's header fields
 *           in the AM header, its bytes (or a failure's message) as the data,
 *           straight from the registered slot (zero-copy where the
 *           transport can);
 *   reader  the AM handler puts the value into slot seq % nslots: eager
 *           data is copied there, rendezvous data is received straight into
 *           it (ucp_am_recv_data_nbx); `written` counts the seqs landed
 *           without a gap (a rendezvous may land after a later eager value);
 *           wait(seq) returns a view of the slot (zero-copy read);
 *           release(seq) makes a credit {released = seq + 1} due to the
 *           writer (see Credits).
 * A writer never sends seq before every reader released seq - nslots, so a
 * reader's slot is free when seq arrives; a value that would overwrite an
 * unreleased slot, or does not fit, fails the endpoint (ADAG_ERR_PROTOCOL).
 *
 * Credits. Over TCP every message costs a send and a receive on both
 * hosts, so a credit rides with a value going to its writer's process
 * when one follows soon: a round trip (driver -> actor -> driver) then
 * carries two messages, not four (a worker loop releases its inputs
 * before it publishes its last outputs, so its credits ride with them;
 * the driver's ride with its next execution). A due credit goes on its
 * own right after a worker loop's publishes (flush), when its reader's
 * process next waits on a ucx endpoint (before a wait for a value;
 * before a wait for room that has to wait), at a release when the
 * progress thread is not parked (nobody spins: nothing is sure to
 * follow), and else when the parked progress thread next wakes (within
 * PARK_NS). A credit only ever arrives later than it could, so the
 * writer waits, it never overwrites.
 *
 * Why active messages (docs/design.md, "UCX channels"): measured with
 * ucx_perftest over veth, AM and tag matching have the same latency and
 * bandwidth, RMA put is slower (TCP emulates it) and a put into the
 * reader's ring wakes nobody; AM carries the slot header with the value
 * and lets the handler route it, with no receives to post per slot.
 *
 * This file: the endpoint's ops (open, connect, close; the writer's
 * acquire and publish; a reader's wait and release) and the ops table.
 * What arrives (request callbacks, AM handlers) and the credits going out
 * are transport/chan_ucx_msg.c's; this file calls it, never the reverse.
 *
 * Waiting and progress: see transport/ucx.h. The conditions (written, a
 * credit, a slot's sends, an endpoint's status) are atomics stored seq_cst
 * by the callbacks (under the domain's lock) and loaded seq_cst by waiters,
 * then the endpoint's event is notified: the handshake of common/event.h.
 * The store of `written` also releases the slot's bytes to the reader.
 */
#include "transport/ucx.h"
#include "transport/chan_ucx_query.h"

#include "common/error.h"
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern const adag_chan_ops_t adag_chan_ucx_ops;

static adag_ucx_chan_t *ucx_of(adag_chan_t *ch)
{
    return (adag_ucx_chan_t *)ch;
}


/* ---- the writer ---- */

typedef struct {
    adag_ucx_chan_t *c;
    uint64_t need; /* every reader released at least this many */
    unsigned slot;
} space_arg_t;

static int space_ready(const void *p)
{
    const space_arg_t *a = p;
    adag_ucx_chan_t *c = a->c;
    if (atomic_load_explicit(&c->status, memory_order_seq_cst) != ADAG_OK)
        return 1;
    int ok = atomic_load_explicit(&c->slot_sends[a->slot], memory_order_seq_cst) == 0;
    for (unsigned r = 0; ok && r < c->nreaders; r++)
        ok = atomic_load_explicit(&c->credit[r], memory_order_seq_cst) >= a->need;
    return ok;
}

static adag_status_t ucx_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf)
{
    adag_ucx_chan_t *c = ucx_of(ch);
    space_arg_t a = {c, seq >= ch->nslots ? seq - ch->nslots + 1 : 0,
                     (unsigned)(seq % ch->nslots)};
    adag_status_t st =
        adag__ucx_wait(c->d, &c->ev, space_ready, &a, ch->abort, deadline, &ch->spin);
    if (st != ADAG_OK)
        return st;
    if (atomic_load_explicit(&c->status, memory_order_seq_cst) != ADAG_OK)
        return adag__ucx_chan_error(c);
    *buf = c->device ? adag__ucx_dev_slot(c, seq) : adag__ucx_slot_data(c, seq);
    return ADAG_OK;
}

static uint32_t ucx_in_use(adag_chan_t *ch)
{
    adag_ucx_chan_t *c = ucx_of(ch);
    uint64_t w = atomic_load_explicit(&c->written, memory_order_seq_cst), low = w;
    for (unsigned r = 0; r < c->nreaders; r++) {
        uint64_t cr = atomic_load_explicit(&c->credit[r], memory_order_seq_cst);
        if (cr < low)
            low = cr;
    }
    return (uint32_t)(w - low);
}

static adag_status_t ucx_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                                 const adag_tensor_meta_t *meta, adag_status_t status,
                                 const char *err)
{
    adag_ucx_chan_t *c = ucx_of(ch);
    adag_ucx_domain_t *d = c->d;
    unsigned slot = (unsigned)(seq % ch->nslots);
    adag_ucx_slot_t *s = adag__ucx_slot_of(c, seq);
    const void *data = adag__ucx_slot_data(c, seq);
    adag_status_t fits = adag__chan_publish_fits(ch, seq, size, status);
    if (fits != ADAG_OK)
        return fits;
    size_t len = size;
    if (status != ADAG_OK) {
        len = err ? strnlen(err, ADAG_SLOT_ERR_MAX - 1) : 0;
        memcpy(s->err, err ? err : "", len);
        s->err[len] = '\0';
        data = s->err;
    }
    if (atomic_load_explicit(&c->status, memory_order_seq_cst) != ADAG_OK)
        return adag__ucx_chan_error(c);
    adag_status_t st;
    if (c->device && status == ADAG_OK &&
        (st = adag__ucx_dev_stage_out(c, seq, adag__ucx_slot_data(c, seq), len)) != ADAG_OK)
        return st;
    uint64_t t0 = ch->trace ? adag__trace_clock() : 0;
    /* the writer reads its own slot too (a later method of its actor) */
    s->seq = seq;
    s->size = status == ADAG_OK ? len : 0;
    s->status = status;
    s->err_len = status == ADAG_OK ? 0 : (uint32_t)len;
    if (status == ADAG_OK)
        s->err[0] = '\0';
    adag__tensor_meta_store(&s->meta, status == ADAG_OK ? meta : NULL);
    atomic_store_explicit(&c->written, seq + 1, memory_order_seq_cst);
    pthread_mutex_lock(&d->lock);
    for (unsigned r = 0; r < c->nreaders; r++) {
        adag_ucx_data_msg_t *m = &c->hdrs[slot * c->nreaders + r];
        m->h = (adag_ucx_data_hdr_t){.chan = c->index, .reader = r, .seq = seq, .size = len,
                                     .status = status};
        adag__tensor_meta_store(&m->h.meta, status == ADAG_OK ? meta : NULL);
        m->h.ncredits = adag__ucx_credits_carry(d, c->to_reader[r], m->credits);
        ucp_request_param_t p = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                            (status == ADAG_OK ? UCP_OP_ATTR_FIELD_MEMH : 0),
            .cb.send = adag__ucx_sent,
            .user_data = &c->req_ctx[slot * c->nreaders + r],
            .memh = c->memh,
        };
        void *req = ucp_am_send_nbx(c->to_reader[r]->ep, ADAG_UCX_AM_DATA, m,
                                    sizeof(m->h) + m->h.ncredits * sizeof(m->credits[0]), data,
                                    len, &p);
        if (UCS_PTR_IS_ERR(req)) {
            adag__ucx_chan_fail(c, ADAG_ERR_IO, "sending execution %llu to reader %u failed: %s",
                      (unsigned long long)seq, r, ucs_status_string(UCS_PTR_STATUS(req)));
            break;
        }
        if (req) {
            atomic_fetch_add_explicit(&c->slot_sends[slot], 1, memory_order_seq_cst);
            adag__ucx_request_started(p.user_data);
        }
    }
    /* a send UCX could not finish in the call (a rendezvous, a full
     * socket) starts moving here; the rest moves with whoever progresses
     * next. One that finished (an eager value) needs no progress: over
     * TCP that would be one more syscall on the round trip */
    if (atomic_load_explicit(&c->slot_sends[slot], memory_order_seq_cst))
        ucp_worker_progress(d->worker);
    pthread_mutex_unlock(&d->lock);
    if (ch->trace)
        adag__trace_add(ch->trace, ADAG_SPAN_UCX_SEND, ADAG_SPAN_NO_OP, ch->trace_chan, seq, t0,
                       adag__trace_clock());
    if (atomic_load_explicit(&c->status, memory_order_seq_cst) != ADAG_OK)
        return adag__ucx_chan_error(c);
    return ADAG_OK;
}

/* ---- readers ---- */

typedef struct {
    adag_ucx_chan_t *c;
    uint64_t seq;
} data_arg_t;

static int data_ready(const void *p)
{
    const data_arg_t *a = p;
    return atomic_load_explicit(&a->c->written, memory_order_seq_cst) > a->seq ||
           atomic_load_explicit(&a->c->status, memory_order_seq_cst) != ADAG_OK;
}

static adag_status_t ucx_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                              adag_slot_view_t *view)
{
    adag_ucx_chan_t *c = ucx_of(ch);
    data_arg_t a = {c, seq};
    adag__ucx_credits_flush(c->d);
    adag_status_t st = adag__ucx_wait(c->d, &c->ev, data_ready, &a, ch->abort, deadline, &ch->spin);
    if (st != ADAG_OK)
        return st;
    if (atomic_load_explicit(&c->written, memory_order_seq_cst) <= seq)
        return adag__ucx_chan_error(c);
    adag_ucx_slot_t *s = adag__ucx_slot_of(c, seq);
    if (s->seq != seq)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "ucx channel %s: slot for execution %llu holds execution %llu",
                          ch->name, (unsigned long long)seq, (unsigned long long)s->seq);
    view->data = adag__ucx_slot_data(c, seq);
    view->device = ADAG_DEVICE_HOST;
    if (c->device && s->status == ADAG_OK &&
        (st = adag__ucx_dev_view(c, seq, s->size, view)) != ADAG_OK)
        return st; /* a device endpoint: the view is its device slot */
    view->size = s->size;
    adag__tensor_meta_load(&view->meta, &s->meta);
    view->status = s->status;
    view->err = s->err;
    view->err_len = s->err_len;
    return ADAG_OK;
}

/* Makes the reader's credit due; sends it now when `now` (see Credits). */
static void release(adag_chan_t *ch, uint64_t seq, int now)
{
    adag_ucx_chan_t *c = ucx_of(ch);
    adag_ucx_domain_t *d = c->d;
    if (ch->reader < 0)
        return;
    pthread_mutex_lock(&d->lock);
    if (seq + 1 > c->released) {
        if (!adag__ucx_credit_is_due(c))
            atomic_fetch_add_explicit(&d->credits_due, 1, memory_order_relaxed);
        c->released = seq + 1;
    }
    if (now && adag__ucx_credit_is_due(c))
        adag__ucx_credit_send(c);
    pthread_mutex_unlock(&d->lock);
}

static void ucx_release(adag_chan_t *ch, uint64_t seq)
{
    /* parked: a value going the writer's way is likely to follow (this
     * process spins on its channels), and the progress thread flushes
     * within PARK_NS if none does; else nothing is sure to follow */
    release(ch, seq, !atomic_load_explicit(&ucx_of(ch)->d->parked, memory_order_seq_cst));
}

static void ucx_release_held(adag_chan_t *ch, uint64_t seq)
{
    release(ch, seq, 0); /* the caller publishes, then flushes */
}

static void ucx_flush(adag_chan_t *ch)
{
    adag__ucx_credits_flush(ucx_of(ch)->d);
}

static int ucx_ready(adag_chan_t *ch, uint64_t seq)
{
    adag_ucx_chan_t *c = ucx_of(ch);
    adag__ucx_credits_flush(c->d);
    if (atomic_load_explicit(&c->written, memory_order_seq_cst) > seq)
        return 1;
    adag__ucx_try_progress(c->d);
    return atomic_load_explicit(&c->written, memory_order_seq_cst) > seq;
}

static int ucx_notify_fd(adag_chan_t *ch)
{
    adag_ucx_chan_t *c = ucx_of(ch);
    if (ch->reader < 0)
        return -1;
    atomic_store_explicit(&c->notify_armed, 1, memory_order_seq_cst);
    return c->d->notify_fd;
}

static void ucx_wake_all(adag_chan_t *ch)
{
    adag__event_notify(&ucx_of(ch)->ev);
}

/* ---- endpoints ---- */

static adag_status_t ucx_open(adag_chan_domain_t *dom, const adag_chan_open_params_t *p,
                              adag_wbuf_t *peer_info, adag_chan_t **out)
{
    adag_ucx_domain_t *d = (adag_ucx_domain_t *)dom;
    const adag_chan_geom_t *g = &p->geom;
    adag_rbuf_t rb = {p->desc.data, p->desc.len, 0, 0};
    uint32_t index = adag__rbuf_u32(&rb);
    uint32_t nslots = adag__rbuf_u32(&rb), nreaders = adag__rbuf_u32(&rb);
    uint64_t capacity = adag__rbuf_u64(&rb);
    adag_chan_place_t me;
    if (!adag__ucx_dev_read_places(&rb, nreaders, p->reader, &me))
        rb.failed = 1;
    adag_status_t st;
    if (!d || rb.failed || rb.pos != rb.len)
        return adag__error(ADAG_ERR_PROTOCOL, "ucx channel %s: %s", p->name,
                          d ? "malformed descriptor" : "no UCX worker in this process");
    if (nslots != g->nslots || nreaders != g->nreaders || capacity != g->capacity ||
        g->nslots == 0 || p->reader >= (int)g->nreaders || p->reader < -1)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "ucx channel %s: descriptor does not match its geometry "
                          "(%u slots, %u readers, %zu bytes, reader %d)",
                          p->name, g->nslots, g->nreaders, g->capacity, p->reader);
    adag_ucx_chan_t *c = calloc(1, sizeof(*c));
    if (!c)
        return adag__error(ADAG_ERR_NO_MEMORY, "ucx channel %s: out of memory", p->name);
    adag__chan_init_common(&c->base, &adag_chan_ucx_ops, p);
    c->d = d;
    c->index = index;
    c->nreaders = nreaders;
    c->stride = adag__ucx_slot_stride(g->capacity);
    c->mem_len = (size_t)nslots * c->stride;
    c->mem = mmap(NULL, c->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c->mem == MAP_FAILED) {
        c->mem = NULL;
        st = adag__error_errno(errno, "ucx channel %s: %u slots of %zu bytes", p->name, nslots,
                              g->capacity);
        goto fail;
    }
    ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                                             UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                               .address = c->mem,
                               .length = c->mem_len};
    ucs_status_t us = ucp_mem_map(d->ctx, &mp, &c->memh);
    if (us != UCS_OK) {
        c->memh = NULL;
        st = adag__error(ADAG_ERR_IO, "ucx channel %s: registering %zu bytes: %s", p->name,
                        c->mem_len, ucs_status_string(us));
        goto fail;
    }
    /* the writer's sends of a slot, one per reader, each have their
     * connection; a reader's requests all go to its writer */
    unsigned nctx = p->reader < 0 && nreaders ? nreaders : 1;
    c->slots = calloc(nslots, sizeof(*c->slots));
    c->req_ctx = calloc((size_t)nslots * nctx, sizeof(*c->req_ctx));
    if (p->reader < 0) {
        c->to_reader = calloc(nreaders ? nreaders : 1, sizeof(*c->to_reader));
        c->credit = calloc(nreaders ? nreaders : 1, sizeof(*c->credit));
        c->slot_sends = calloc(nslots, sizeof(*c->slot_sends));
        c->hdrs = calloc((size_t)nslots * (nreaders ? nreaders : 1), sizeof(*c->hdrs));
    } else {
        c->landed = calloc(nslots, sizeof(*c->landed));
        c->credits = calloc(nslots, sizeof(*c->credits));
        c->slot_credits = calloc(nslots, sizeof(*c->slot_credits));
    }
    if (!c->slots || !c->req_ctx || (p->reader < 0 && (!c->to_reader || !c->credit || !c->slot_sends ||
                                          !c->hdrs)) ||
        (p->reader >= 0 && (!c->landed || !c->credits || !c->slot_credits))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "ucx channel %s: out of memory", p->name);
        goto fail;
    }
    for (unsigned i = 0; i < nslots * nctx; i++)
        c->req_ctx[i] = (adag_ucx_req_ctx_t){c, i / nctx, p->reader < 0 ? (int)(i % nctx) : -1};
    if ((st = adag__ucx_dev_open(c, p, me)) != ADAG_OK)
        goto fail;
    pthread_mutex_lock(&d->lock);
    st = adag__ucx_domain_add(d, c);
    pthread_mutex_unlock(&d->lock);
    if (st != ADAG_OK)
        goto fail;
    if (peer_info)
        adag__wbuf_bytes(peer_info, d->addr, d->addr_len);
    *out = &c->base;
    return ADAG_OK;
fail:
    adag__ucx_dev_close(c);
    adag__ucx_chan_free(c);
    return st;
}

/* Where a peer's info says its worker is. */
static adag_status_t peer_addr(adag_ucx_chan_t *c, const adag_blob_t *b, unsigned i,
                               const void **addr, size_t *len)
{
    adag_rbuf_t rb = {b->data, b->len, 0, 0};
    *addr = adag__rbuf_bytes(&rb, len);
    if (rb.failed || rb.pos != rb.len || !*len || *len > ADAG_UCX_MAX_ADDR)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "ucx channel %s: malformed peer info of %s (%zu bytes)", c->base.name,
                          i ? "a reader" : "the writer", b->len);
    return ADAG_OK;
}

static adag_status_t ucx_connect(adag_chan_t *ch, const adag_blob_t *peers, unsigned npeers)
{
    adag_ucx_chan_t *c = ucx_of(ch);
    adag_ucx_domain_t *d = c->d;
    const void *addr;
    size_t len;
    adag_status_t st = ADAG_OK;
    if (npeers != 1 + c->nreaders)
        return adag__error(ADAG_ERR_PROTOCOL, "ucx channel %s: %u peers for %u readers",
                          ch->name, npeers, c->nreaders);
    pthread_mutex_lock(&d->lock);
    if (ch->reader < 0) {
        for (unsigned r = 0; r < c->nreaders && st == ADAG_OK; r++)
            if ((st = peer_addr(c, &peers[1 + r], 1 + r, &addr, &len)) == ADAG_OK)
                st = adag__ucx_conn_get(d, addr, len, ch->name, &c->to_reader[r]);
    } else if ((st = peer_addr(c, &peers[0], 0, &addr, &len)) == ADAG_OK) {
        st = adag__ucx_conn_get(d, addr, len, ch->name, &c->to_writer);
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

static void ucx_close(adag_chan_t *ch)
{
    adag_ucx_chan_t *c = ucx_of(ch);
    adag_ucx_domain_t *d = c->d;
    adag__ucx_dev_close(c); /* UCX moves only the host ring: no request uses it */
    pthread_mutex_lock(&d->lock);
    if (adag__ucx_credit_is_due(c))
        adag__ucx_credit_taken(c); /* nobody needs it: the DAG goes */
    adag__ucx_domain_remove(d, c); /* frees c, or keeps it until its requests end */
    pthread_mutex_unlock(&d->lock);
}

const adag_chan_ops_t adag_chan_ucx_ops = {
    .name = "ucx",
    .query = adag__chan_ucx_query,
    .label = adag__chan_ucx_label,
    .domain_create = adag__ucx_domain_create,
    .domain_export = adag__ucx_domain_export,
    .domain_import = adag__ucx_domain_import,
    .domain_destroy = adag__ucx_domain_destroy,
    .memory = adag__ucx_memory,
    .open = ucx_open,
    .connect = ucx_connect,
    .close = ucx_close,
    .wake_all = ucx_wake_all,
    .notify_fd = ucx_notify_fd,
    .acquire = ucx_acquire,
    .publish = ucx_publish,
    .wait = ucx_wait,
    .release = ucx_release,
    .release_held = ucx_release_held,
    .flush = ucx_flush,
    .ready = ucx_ready,
    .in_use = ucx_in_use,
    .counts_waits = 1,
};

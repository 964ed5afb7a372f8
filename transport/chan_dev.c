/*
 * The device channel: a tensor whose writer or readers live on a device,
 * between processes of one host. It is built from two lower pieces:
 *
 *   - a *ring*: an shm channel (through its ops table) that carries every
 *     slot's metadata (seq, size, tensor meta, status, error text), the
 *     readers' releases and, where a host endpoint needs them, the bytes
 *     (host payload; a ring without payload never touches its slots'
 *     bytes, so their pages are never allocated);
 *   - the device ops table (gpu/device.h) for device memory, copies on the
 *     actors' streams, and events, exported as handles (bytes) in the
 *     endpoints' peer info and imported at CONNECT.
 *
 * Where each endpoint keeps the value (its place: host or device k) gives
 * its role, fixed at compile time in the descriptor:
 *
 *   writer on a device   the method writes slot `seq % nslots` of the
 *                        writer's device memory on its compute stream;
 *                        publish records the slot's `ready` event there.
 *                        With host readers (payload), the communication
 *                        stream waits for `ready`, copies the slot into the
 *                        ring's host slot, records `copied` and publishes
 *                        the ring from that stream (a host function), so no
 *                        host thread waits for the device.
 *   writer in host memory  the ring as is (the driver, a host actor).
 *   reader, same device  zero copies: the reader's compute stream waits for
 *                        the writer's `ready` and reads the writer's slot
 *                        (imported memory); release records its `consumed`
 *                        event, which the writer's compute stream waits for
 *                        before it writes that slot again.
 *   reader, another device  one peer copy on the reader's communication
 *                        stream into its own slot (after `ready`), then
 *                        `consumed` (the writer's slot is free again) and
 *                        `local_ready`, which the compute stream waits for.
 *   reader on a device, writer in host memory  an async host-to-device copy
 *                        of the ring's slot on the communication stream; the
 *                        ring slot is released from that stream after the
 *                        copy (a host function).
 *   reader in host memory  the ring as is (host payload).
 *
 * A reader's own slot (copies) is reused only after the compute stream's
 * `local_free` event of its previous use. The host-level ring keeps the
 * window (a writer never runs more than nslots ahead); the events order the
 * device work inside it. Memory ordering: the ring's seq_cst counters
 * (transport/chan_shm.c); an event is recorded before the ring store that
 * makes it visible (publish, release), and waited for after the ring load
 * that saw that store, so the wait always covers the record.
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/channel.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const adag_chan_ops_t adag_chan_shm_ops;
extern const adag_chan_ops_t adag_chan_dev_ops;

#define SLOT_ALIGN 256 /* device slots start on 256-byte boundaries */
#define CLOSE_SYNC_MS 10000

/* ---- domain: an shm domain for the rings ---- */

typedef struct {
    adag_chan_domain_t base;
    adag_chan_domain_t *rings;
} dev_domain_t;

static int is_dev(adag_chan_place_t p)
{
    return p.kind >= 0;
}

static int same_place(adag_chan_place_t a, adag_chan_place_t b)
{
    return a.kind == b.kind && a.index == b.index;
}

/* The ring carries the bytes when a host endpoint writes or reads them. */
static int needs_payload(const adag_chan_place_t *pl, unsigned nreaders)
{
    if (!pl || !is_dev(pl[0]))
        return 1;
    for (unsigned r = 0; r < nreaders; r++)
        if (!is_dev(pl[1 + r]))
            return 1;
    return 0;
}

static void dev_domain_destroy(adag_chan_domain_t *dom)
{
    dev_domain_t *d = (dev_domain_t *)dom;
    if (!d)
        return;
    if (d->rings)
        d->rings->ops->domain_destroy(d->rings);
    free(d);
}

static dev_domain_t *dev_domain_new(void)
{
    dev_domain_t *d = calloc(1, sizeof(*d));
    if (d)
        d->base.ops = &adag_chan_dev_ops;
    return d;
}

/* Descriptor: u32 payload flag, u32 nplaces, per place (i32 kind, u32
 * index), then the ring's descriptor as a byte run. */
static adag_status_t dev_domain_create(const char *dag_name, const adag_chan_geom_t *geoms,
                                       const adag_chan_place_t *const *places, unsigned n,
                                       adag_wbuf_t *descs, adag_chan_domain_t **out)
{
    adag_status_t st = ADAG_OK;
    adag_chan_geom_t *rg = calloc(n + 1, sizeof(*rg));
    adag_wbuf_t *rd = calloc(n + 1, sizeof(*rd));
    dev_domain_t *d = dev_domain_new();
    if (!rg || !rd || !d) {
        st = adag_error(ADAG_ERR_NO_MEMORY, "device channels of DAG %s: out of memory", dag_name);
        goto out;
    }
    /* Every ring has the full capacity, so it carries sizes as they are;
     * a ring whose endpoints are all on devices never touches its slots'
     * bytes, and memfd pages never touched take no memory. */
    for (unsigned i = 0; i < n; i++)
        rg[i] = geoms[i];
    st = adag_chan_shm_ops.domain_create(dag_name, rg, NULL, n, rd, &d->rings);
    if (st != ADAG_OK)
        goto out;
    for (unsigned i = 0; i < n; i++) {
        const adag_chan_place_t *pl = places ? places[i] : NULL;
        unsigned np = 1 + geoms[i].nreaders;
        adag_wbuf_u32(&descs[i], (uint32_t)needs_payload(pl, geoms[i].nreaders));
        adag_wbuf_u32(&descs[i], np);
        for (unsigned j = 0; j < np; j++) {
            adag_chan_place_t p = pl ? pl[j] : ADAG_CHAN_PLACE_HOST;
            adag_wbuf_u32(&descs[i], (uint32_t)p.kind);
            adag_wbuf_u32(&descs[i], p.index);
        }
        adag_wbuf_bytes(&descs[i], rd[i].data, rd[i].len);
    }
    *out = &d->base;
    d = NULL;
out:
    for (unsigned i = 0; rd && i < n; i++)
        adag_wbuf_free(&rd[i]);
    free(rd);
    free(rg);
    dev_domain_destroy(d ? &d->base : NULL);
    return st;
}

static adag_status_t dev_domain_export(adag_chan_domain_t *dom, adag_wbuf_t *blob, int *fds,
                                       unsigned *nfds)
{
    dev_domain_t *d = (dev_domain_t *)dom;
    return d->rings->ops->domain_export(d->rings, blob, fds, nfds);
}

static adag_status_t dev_domain_import(adag_blob_t blob, const int *fds, unsigned nfds,
                                       adag_chan_domain_t **out)
{
    dev_domain_t *d = dev_domain_new();
    if (!d) {
        adag_chan_domain_t *tmp = NULL;
        /* the ring import takes the fds; a failed allocation must too */
        if (adag_chan_shm_ops.domain_import(blob, fds, nfds, &tmp) == ADAG_OK)
            adag_chan_shm_ops.domain_destroy(tmp);
        return adag_error(ADAG_ERR_NO_MEMORY, "device channel domain: out of memory");
    }
    adag_status_t st = adag_chan_shm_ops.domain_import(blob, fds, nfds, &d->rings);
    if (st != ADAG_OK) {
        dev_domain_destroy(&d->base);
        return st;
    }
    *out = &d->base;
    return ADAG_OK;
}

static size_t dev_domain_bytes(const adag_chan_domain_t *dom)
{
    const dev_domain_t *d = (const dev_domain_t *)dom;
    return d->rings->ops->domain_bytes(d->rings);
}

/* ---- endpoints ---- */

typedef enum {
    ROLE_HOST_WRITER,  /* the ring as is */
    ROLE_DEV_WRITER,
    ROLE_HOST_READER,  /* the ring as is */
    ROLE_SAME_DEVICE,  /* zero copies */
    ROLE_PEER_COPY,    /* from another device */
    ROLE_H2D,          /* from host memory */
} role_t;

/* A publish or release run later on a stream (host function). */
typedef struct {
    struct dev_chan *ch;
    uint64_t seq;
    size_t size;
    adag_tensor_meta_t meta;
    int has_meta;
    adag_status_t status;
    char err[ADAG_SLOT_ERR_MAX];
} deferred_t;

typedef struct dev_chan {
    adag_chan_t base;
    adag_chan_t *ring;
    role_t role;
    int payload;                 /* the ring carries the bytes */
    unsigned nplaces;
    adag_chan_place_t *places;   /* writer, then each reader */
    const adag_chan_device_t *device; /* NULL for host roles */
    const adag_device_ops_t *ops;
    size_t stride;               /* bytes per device slot */
    /* writer on a device */
    adag_dev_mem_t slots;        /* nslots * stride */
    adag_dev_event_t **ready;    /* per slot, exported */
    adag_dev_event_t **copied;   /* per slot: the payload copy read the slot */
    adag_dev_event_t **consumed; /* [reader * nslots + slot], imported (device readers) */
    void **ring_bufs;            /* per slot: the ring's host slot (payload) */
    /* per slot: what was published (the writer reads its own value from
     * here), and the ring publish that runs on comm when there is payload */
    deferred_t *pending;
    /* reader on a device */
    adag_dev_mem_t peer;         /* the writer's slots, imported */
    adag_dev_event_t **peer_ready;
    adag_dev_event_t **my_consumed; /* per slot, exported */
    adag_dev_mem_t local;        /* own slots (copies) */
    adag_dev_event_t **local_ready, **local_free;
    deferred_t *releases;        /* per slot: the ring release to run on comm (H2D) */
    int connected;
} dev_chan_t;

static dev_chan_t *dev_of(adag_chan_t *ch)
{
    return (dev_chan_t *)ch;
}

static unsigned slot_index(const dev_chan_t *c, uint64_t seq)
{
    return (unsigned)(seq % c->base.nslots);
}

static adag_status_t events_create(dev_chan_t *c, adag_dev_event_t ***evs)
{
    unsigned n = c->base.nslots;
    if (!(*evs = calloc(n, sizeof(**evs))))
        return adag_error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", c->base.name);
    for (unsigned i = 0; i < n; i++) {
        adag_status_t st = c->ops->event_create(c->device->dev, &(*evs)[i]);
        if (st != ADAG_OK) {
            adag_error_prefix("device channel %s", c->base.name);
            return st;
        }
    }
    return ADAG_OK;
}

static void events_destroy(dev_chan_t *c, adag_dev_event_t **evs, unsigned n)
{
    if (!evs)
        return;
    for (unsigned i = 0; i < n; i++)
        if (evs[i])
            c->ops->event_destroy(c->device->dev, evs[i]);
    free(evs);
}

static void put_handle(adag_wbuf_t *w, const adag_dev_handle_t *h)
{
    adag_wbuf_bytes(w, h->bytes, h->len);
}

static adag_status_t export_events(dev_chan_t *c, adag_dev_event_t **evs, adag_wbuf_t *w)
{
    for (unsigned i = 0; i < c->base.nslots; i++) {
        adag_dev_handle_t h;
        adag_status_t st = c->ops->event_export(c->device->dev, evs[i], &h);
        if (st != ADAG_OK) {
            adag_error_prefix("device channel %s", c->base.name);
            return st;
        }
        put_handle(w, &h);
    }
    return ADAG_OK;
}

static void dev_close(adag_chan_t *ch);

static role_t role_of(const adag_chan_open_params_t *p, const adag_chan_place_t *pl)
{
    adag_chan_place_t me = pl[p->reader + 1];
    if (p->reader < 0)
        return is_dev(me) ? ROLE_DEV_WRITER : ROLE_HOST_WRITER;
    if (!is_dev(me))
        return ROLE_HOST_READER;
    if (!is_dev(pl[0]))
        return ROLE_H2D;
    return same_place(me, pl[0]) ? ROLE_SAME_DEVICE : ROLE_PEER_COPY;
}

static adag_status_t dev_open(adag_chan_domain_t *dom, const adag_chan_open_params_t *p,
                              adag_wbuf_t *peer_info, adag_chan_t **out)
{
    dev_domain_t *d = (dev_domain_t *)dom;
    adag_rbuf_t rb = {p->desc.data, p->desc.len, 0, 0};
    adag_status_t st;
    dev_chan_t *c = calloc(1, sizeof(*c));
    if (!c)
        return adag_error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
    adag_chan_init_common(&c->base, &adag_chan_dev_ops, p);
    c->payload = (int)adag_rbuf_u32(&rb);
    c->nplaces = adag_rbuf_u32(&rb);
    if (!d || rb.failed || c->nplaces != 1 + p->geom.nreaders || p->reader < -1 ||
        p->reader >= (int)p->geom.nreaders || p->geom.nslots == 0) {
        st = adag_error(ADAG_ERR_PROTOCOL, "device channel %s: %s", p->name,
                        d ? "malformed descriptor" : "no domain");
        goto fail;
    }
    if (!(c->places = calloc(c->nplaces, sizeof(*c->places)))) {
        st = adag_error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
        goto fail;
    }
    for (unsigned j = 0; j < c->nplaces; j++) {
        c->places[j].kind = (int32_t)adag_rbuf_u32(&rb);
        c->places[j].index = adag_rbuf_u32(&rb);
        if (c->places[j].kind >= 0 && !adag_device_backend((uint32_t)c->places[j].kind))
            rb.failed = 1;
    }
    adag_blob_t ring_desc;
    ring_desc.data = adag_rbuf_bytes(&rb, &ring_desc.len);
    if (rb.failed || rb.pos != rb.len || c->payload > 1 ||
        c->payload != needs_payload(c->places, p->geom.nreaders)) {
        st = adag_error(ADAG_ERR_PROTOCOL, "device channel %s: malformed descriptor", p->name);
        goto fail;
    }
    c->role = role_of(p, c->places);
    adag_chan_place_t me = c->places[p->reader + 1];
    if (is_dev(me)) {
        if (!p->device || (int32_t)p->device->kind != me.kind ||
            p->device->dev->index != me.index) {
            st = adag_error(ADAG_ERR_PROTOCOL,
                            "device channel %s: this endpoint was compiled for %s:%u but its "
                            "actor %s",
                            p->name, adag_device_kind_name((uint32_t)me.kind), me.index,
                            p->device ? "has another device" : "has no device");
            goto fail;
        }
        c->device = p->device;
        c->ops = p->device->dev->ops;
    }
    adag_chan_open_params_t rp = *p;
    rp.desc = ring_desc;
    rp.device = NULL;
    if ((st = adag_chan_shm_ops.open(d->rings, &rp, NULL, &c->ring)) != ADAG_OK)
        goto fail;

    unsigned n = c->base.nslots;
    c->stride = (p->geom.capacity + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
    if (c->stride == 0)
        c->stride = SLOT_ALIGN;
    if (c->stride > SIZE_MAX / n) {
        st = adag_error(ADAG_ERR_INVALID, "device channel %s: %u slots of %zu bytes", p->name, n,
                        p->geom.capacity);
        goto fail;
    }
    switch (c->role) {
    case ROLE_DEV_WRITER:
        c->ring_bufs = calloc(n, sizeof(*c->ring_bufs));
        c->pending = calloc(n, sizeof(*c->pending));
        c->consumed = calloc((size_t)n * p->geom.nreaders + 1, sizeof(*c->consumed));
        if (!c->ring_bufs || !c->pending || !c->consumed) {
            st = adag_error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
            goto fail;
        }
        if ((st = c->ops->mem_alloc(c->device->dev, c->stride * n, &c->slots)) != ADAG_OK ||
            (st = events_create(c, &c->ready)) != ADAG_OK ||
            (c->payload && (st = events_create(c, &c->copied)) != ADAG_OK))
            goto fail_prefixed;
        adag_dev_handle_t h;
        if ((st = c->ops->mem_export(c->device->dev, &c->slots, &h)) != ADAG_OK)
            goto fail_prefixed;
        put_handle(peer_info, &h);
        if ((st = export_events(c, c->ready, peer_info)) != ADAG_OK)
            goto fail;
        break;
    case ROLE_SAME_DEVICE:
    case ROLE_PEER_COPY:
    case ROLE_H2D:
        if ((st = events_create(c, &c->my_consumed)) != ADAG_OK)
            goto fail;
        if (c->role != ROLE_SAME_DEVICE) {
            if ((st = c->ops->mem_alloc(c->device->dev, c->stride * n, &c->local)) != ADAG_OK ||
                (st = events_create(c, &c->local_ready)) != ADAG_OK ||
                (st = events_create(c, &c->local_free)) != ADAG_OK)
                goto fail_prefixed;
        }
        if (c->role == ROLE_H2D && !(c->releases = calloc(n, sizeof(*c->releases)))) {
            st = adag_error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
            goto fail;
        }
        if (c->role != ROLE_H2D && (st = export_events(c, c->my_consumed, peer_info)) != ADAG_OK)
            goto fail;
        break;
    case ROLE_HOST_WRITER:
    case ROLE_HOST_READER:
        break;
    }
    *out = &c->base;
    return ADAG_OK;
fail_prefixed:
    adag_error_prefix("device channel %s", p->name);
fail:
    dev_close(&c->base);
    return st;
}

/* Reads one handle from a peer's info. */
static int get_handle(adag_rbuf_t *rb, adag_dev_handle_t *h)
{
    size_t len;
    const void *b = adag_rbuf_bytes(rb, &len);
    memset(h, 0, sizeof(*h));
    h->fds[0] = h->fds[1] = -1;
    if (rb->failed || len > sizeof(h->bytes))
        return -1;
    memcpy(h->bytes, b, len);
    h->len = (uint32_t)len;
    return 0;
}

static adag_status_t import_events(dev_chan_t *c, adag_rbuf_t *rb, adag_dev_event_t **evs,
                                   const char *whose)
{
    for (unsigned i = 0; i < c->base.nslots; i++) {
        adag_dev_handle_t h;
        if (get_handle(rb, &h) != 0)
            return adag_error(ADAG_ERR_PROTOCOL, "device channel %s: %s info is malformed",
                              c->base.name, whose);
        adag_status_t st = c->ops->event_import(c->device->dev, &h, &evs[i]);
        if (st != ADAG_OK) {
            adag_error_prefix("device channel %s: %s event %u", c->base.name, whose, i);
            return st;
        }
    }
    return ADAG_OK;
}

static adag_status_t dev_connect(adag_chan_t *ch, const adag_blob_t *peers, unsigned npeers)
{
    dev_chan_t *c = dev_of(ch);
    adag_status_t st = ADAG_OK;
    unsigned n = ch->nslots;
    if (npeers != c->nplaces)
        return adag_error(ADAG_ERR_PROTOCOL, "device channel %s: %u peers, expected %u",
                          ch->name, npeers, c->nplaces);
    if (c->role == ROLE_SAME_DEVICE || c->role == ROLE_PEER_COPY) {
        adag_rbuf_t rb = {peers[0].data, peers[0].len, 0, 0};
        adag_dev_handle_t h;
        if (get_handle(&rb, &h) != 0)
            return adag_error(ADAG_ERR_PROTOCOL, "device channel %s: the writer's info is "
                                                 "malformed", ch->name);
        if ((st = c->ops->mem_import(c->device->dev, &h, &c->peer)) != ADAG_OK) {
            adag_error_prefix("device channel %s: the writer's slots", ch->name);
            return st;
        }
        if (c->peer.size < c->stride * n)
            return adag_error(ADAG_ERR_PROTOCOL,
                              "device channel %s: the writer's slots are %zu bytes, expected %zu",
                              ch->name, c->peer.size, c->stride * n);
        if (!(c->peer_ready = calloc(n, sizeof(*c->peer_ready))))
            return adag_error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", ch->name);
        if ((st = import_events(c, &rb, c->peer_ready, "the writer's")) != ADAG_OK)
            return st;
        if (rb.pos != rb.len)
            return adag_error(ADAG_ERR_PROTOCOL, "device channel %s: trailing bytes in the "
                                                 "writer's info", ch->name);
    } else if (c->role == ROLE_DEV_WRITER) {
        for (unsigned r = 0; r + 1 < c->nplaces; r++) {
            adag_chan_place_t rp = c->places[1 + r];
            if (!is_dev(rp))
                continue; /* a host reader: the payload copy and the ring */
            adag_rbuf_t rb = {peers[1 + r].data, peers[1 + r].len, 0, 0};
            char whose[32];
            snprintf(whose, sizeof(whose), "reader %u's", r);
            if ((st = import_events(c, &rb, c->consumed + (size_t)r * n, whose)) != ADAG_OK)
                return st;
            if (rb.pos != rb.len)
                return adag_error(ADAG_ERR_PROTOCOL, "device channel %s: trailing bytes in %s "
                                                     "info", ch->name, whose);
        }
    }
    c->connected = 1;
    return ADAG_OK;
}

/* Every stream this endpoint enqueued on is done with it (or the deadline
 * passed: then the endpoint is leaked, never freed under a stream). */
static int drain_streams(dev_chan_t *c)
{
    if (!c->device)
        return 1;
    int64_t deadline = adag_deadline_ms(CLOSE_SYNC_MS);
    adag_status_t a = c->ops->stream_sync(c->device->comm, deadline);
    adag_status_t b = c->ops->stream_sync(c->device->compute, deadline);
    if (a == ADAG_OK && b == ADAG_OK)
        return 1;
    ADAG_LOG_WARN("device channel %s: the actor's streams did not drain in %d ms; its memory "
                  "and events are left allocated",
                  c->base.name, CLOSE_SYNC_MS);
    return 0;
}

static void dev_close(adag_chan_t *ch)
{
    dev_chan_t *c = dev_of(ch);
    if (!c)
        return;
    if (!drain_streams(c))
        return;
    unsigned n = ch->nslots;
    if (c->device) {
        adag_device_t *dev = c->device->dev;
        events_destroy(c, c->ready, n);
        events_destroy(c, c->copied, n);
        if (c->consumed) {
            for (size_t i = 0; i < (size_t)n * (c->nplaces - 1); i++)
                if (c->consumed[i])
                    c->ops->event_destroy(dev, c->consumed[i]);
            free(c->consumed);
        }
        events_destroy(c, c->peer_ready, n);
        events_destroy(c, c->my_consumed, n);
        events_destroy(c, c->local_ready, n);
        events_destroy(c, c->local_free, n);
        if (c->slots.ptr)
            c->ops->mem_free(dev, &c->slots);
        if (c->local.ptr)
            c->ops->mem_free(dev, &c->local);
        if (c->peer.ptr)
            c->ops->mem_unimport(dev, &c->peer);
    }
    if (c->ring)
        c->ring->ops->close(c->ring);
    free(c->places);
    free(c->ring_bufs);
    free(c->pending);
    free(c->releases);
    free(c);
}

static void dev_wake_all(adag_chan_t *ch)
{
    adag_chan_t *ring = dev_of(ch)->ring;
    ring->ops->wake_all(ring);
}

static int dev_notify_fd(adag_chan_t *ch)
{
    adag_chan_t *ring = dev_of(ch)->ring;
    return ring->ops->notify_fd ? ring->ops->notify_fd(ring) : -1;
}

/* ---- the hot path ---- */

static adag_status_t stream_fail(dev_chan_t *c, adag_status_t st, const char *what, uint64_t seq)
{
    adag_error_prefix("device channel %s: %s for execution %llu", c->base.name, what,
                      (unsigned long long)seq);
    return st;
}

static adag_status_t dev_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf)
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
    /* the device readers are done with the slot, and so is the payload copy */
    for (unsigned r = 0; r + 1 < c->nplaces; r++) {
        adag_dev_event_t *ev = c->consumed[(size_t)r * ch->nslots + s];
        if (ev && (st = c->ops->stream_wait_event(compute, ev)) != ADAG_OK)
            return stream_fail(c, st, "waiting for a reader", seq);
    }
    if (c->copied && (st = c->ops->stream_wait_event(compute, c->copied[s])) != ADAG_OK)
        return stream_fail(c, st, "waiting for the host copy", seq);
    *buf = (char *)c->slots.ptr + (size_t)s * c->stride;
    return ADAG_OK;
}

static void deferred_publish(void *arg)
{
    deferred_t *p = arg;
    adag_chan_t *ring = p->ch->ring;
    ring->ops->publish(ring, p->seq, p->size, p->has_meta ? &p->meta : NULL, p->status,
                       p->err[0] ? p->err : NULL);
}

static adag_status_t dev_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                                 const adag_tensor_meta_t *meta, adag_status_t status,
                                 const char *err)
{
    dev_chan_t *c = dev_of(ch);
    if (c->role != ROLE_DEV_WRITER)
        return c->ring->ops->publish(c->ring, seq, size, meta, status, err);
    unsigned s = slot_index(c, seq);
    adag_status_t st;
    /* pending[s] is free: the ring publish of seq - nslots ran before the
     * readers released it, which acquire(seq) waited for */
    deferred_t *p = &c->pending[s];
    p->ch = c;
    p->seq = seq;
    p->size = status == ADAG_OK && size <= ch->capacity ? size : 0;
    p->has_meta = status == ADAG_OK && meta != NULL;
    adag_tensor_meta_store(&p->meta, p->has_meta ? meta : NULL);
    p->status = status;
    snprintf(p->err, sizeof(p->err), "%s", status != ADAG_OK && err ? err : "");
    if (status == ADAG_OK &&
        (st = c->ops->event_record(c->ready[s], c->device->compute)) != ADAG_OK)
        return stream_fail(c, st, "recording the value", seq);
    if (!c->payload)
        return c->ring->ops->publish(c->ring, seq, size, meta, status, err);
    /* host readers: copy to the ring's slot, then publish it, in stream order */
    adag_dev_stream_t *comm = c->device->comm;
    if (status == ADAG_OK && p->size) {
        if ((st = c->ops->stream_wait_event(comm, c->ready[s])) != ADAG_OK ||
            (st = c->ops->copy_async(comm, c->ring_bufs[s], (char *)c->slots.ptr +
                                                               (size_t)s * c->stride,
                                     p->size)) != ADAG_OK)
            return stream_fail(c, st, "copying the value to host memory", seq);
    }
    if ((st = c->ops->event_record(c->copied[s], comm)) != ADAG_OK ||
        (st = c->ops->host_fn(comm, deferred_publish, p)) != ADAG_OK)
        return stream_fail(c, st, "publishing", seq);
    return ADAG_OK;
}

static adag_status_t dev_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                              adag_slot_view_t *view)
{
    dev_chan_t *c = dev_of(ch);
    adag_status_t st;
    if (c->role == ROLE_DEV_WRITER) {
        /* the writer reading its own value: same stream, nothing to wait for */
        const deferred_t *p = &c->pending[slot_index(c, seq)];
        view->data = (char *)c->slots.ptr + (size_t)slot_index(c, seq) * c->stride;
        view->size = p->size;
        adag_tensor_meta_load(&view->meta, &p->meta);
        view->device = ADAG_DEVICE_GPU(c->device->dev->index);
        view->status = p->status;
        view->err = p->err;
        view->err_len = strlen(p->err);
        return ADAG_OK;
    }
    if ((st = c->ring->ops->wait(c->ring, seq, deadline, view)) != ADAG_OK)
        return st;
    if (c->role == ROLE_HOST_WRITER || c->role == ROLE_HOST_READER || view->status != ADAG_OK)
        return ADAG_OK;
    unsigned s = slot_index(c, seq);
    adag_dev_stream_t *compute = c->device->compute, *comm = c->device->comm;
    char *local = c->local.ptr ? (char *)c->local.ptr + (size_t)s * c->stride : NULL;
    view->device = ADAG_DEVICE_GPU(c->device->dev->index);
    switch (c->role) {
    case ROLE_SAME_DEVICE:
        if ((st = c->ops->stream_wait_event(compute, c->peer_ready[s])) != ADAG_OK)
            return stream_fail(c, st, "waiting for the writer", seq);
        view->data = (char *)c->peer.ptr + (size_t)s * c->stride;
        return ADAG_OK;
    case ROLE_PEER_COPY:
        if ((st = c->ops->stream_wait_event(comm, c->peer_ready[s])) != ADAG_OK ||
            (st = c->ops->stream_wait_event(comm, c->local_free[s])) != ADAG_OK ||
            (st = c->ops->copy_async(comm, local, (char *)c->peer.ptr + (size_t)s * c->stride,
                                     view->size)) != ADAG_OK ||
            (st = c->ops->event_record(c->my_consumed[s], comm)) != ADAG_OK)
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

static void deferred_release(void *arg)
{
    deferred_t *p = arg;
    adag_chan_t *ring = p->ch->ring;
    ring->ops->release(ring, p->seq);
}

static void dev_release(adag_chan_t *ch, uint64_t seq)
{
    dev_chan_t *c = dev_of(ch);
    unsigned s = slot_index(c, seq);
    adag_status_t st = ADAG_OK;
    switch (c->role) {
    case ROLE_HOST_WRITER:
    case ROLE_HOST_READER:
        c->ring->ops->release(c->ring, seq);
        return;
    case ROLE_DEV_WRITER:
        return; /* the writer reading its own slot holds nothing */
    case ROLE_SAME_DEVICE:
        /* the compute stream's reads of the writer's slot come first */
        st = c->ops->event_record(c->my_consumed[s], c->device->compute);
        break;
    case ROLE_PEER_COPY:
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

static int dev_ready(adag_chan_t *ch, uint64_t seq)
{
    dev_chan_t *c = dev_of(ch);
    if (c->role == ROLE_DEV_WRITER)
        return 1;
    return c->ring->ops->ready(c->ring, seq);
}

const adag_chan_ops_t adag_chan_dev_ops = {
    .name = "device",
    .kind = ADAG_CHAN_DEVICE,
    .domain_create = dev_domain_create,
    .domain_export = dev_domain_export,
    .domain_import = dev_domain_import,
    .domain_destroy = dev_domain_destroy,
    .domain_bytes = dev_domain_bytes,
    .open = dev_open,
    .connect = dev_connect,
    .close = dev_close,
    .wake_all = dev_wake_all,
    .notify_fd = dev_notify_fd,
    .acquire = dev_acquire,
    .publish = dev_publish,
    .wait = dev_wait,
    .release = dev_release,
    .ready = dev_ready,
};

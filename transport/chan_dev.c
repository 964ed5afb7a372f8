/*
 * The device channel: its descriptor and domain, and the life of an
 * endpoint (open, connect, watch, wake, close). transport/chan_dev.h
 * describes the roles; transport/chan_dev_path.c is the hot path.
 */
#include "common/error.h"
#include "common/log.h"
#include "transport/chan_dev.h"
#include "transport/chan_shm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const adag_chan_ops_t adag_chan_shm_ops;

#define SLOT_ALIGN 256 /* device slots start on 256-byte boundaries */
#define CLOSE_SYNC_MS 10000

/* ---- domain: an shm domain for the rings ---- */

typedef struct {
    adag_chan_domain_t base;
    adag_chan_domain_t *rings;
} dev_domain_t;

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

/* Descriptor: u32 payload flag, u64 comm_key, u32 nplaces, per place (i32
 * kind, u32 index, its actor's name, u32 comm_rank), then the ring's
 * descriptor as a byte run. */
static adag_status_t dev_domain_create(const char *dag_name, const adag_chan_geom_t *geoms,
                                       const adag_chan_place_t *const *places, unsigned n,
                                       adag_wbuf_t *descs, adag_chan_domain_t **out)
{
    adag_status_t st = ADAG_OK;
    adag_chan_geom_t *rg = calloc(n + 1, sizeof(*rg));
    adag_wbuf_t *rd = calloc(n + 1, sizeof(*rd));
    dev_domain_t *d = dev_domain_new();
    if (!rg || !rd || !d) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "device channels of DAG %s: out of memory", dag_name);
        goto out;
    }
    /* Every ring has the channel's capacity, so it carries sizes as they
     * are; a ring whose endpoints all keep the value on devices keeps its
     * slots' headers only. */
    for (unsigned i = 0; i < n; i++) {
        const adag_chan_place_t *pl = places ? places[i] : NULL;
        char why[160];
        if (geoms[i].comm_key &&
            !adag__chan_dev_comm_places_ok(pl, 1 + geoms[i].nreaders, why, sizeof(why))) {
            st = adag__error(ADAG_ERR_INVALID,
                            "device channel %u of DAG %s (written by %s) moves its value by "
                            "communicator %llu, but %s",
                            i, dag_name, pl && pl[0].who ? pl[0].who : "?",
                            (unsigned long long)geoms[i].comm_key, why);
            goto out;
        }
        rg[i] = geoms[i];
        rg[i].headers_only = !needs_payload(pl, geoms[i].nreaders);
    }
    st = adag_chan_shm_ops.domain_create(dag_name, rg, NULL, n, rd, &d->rings);
    if (st != ADAG_OK)
        goto out;
    for (unsigned i = 0; i < n; i++) {
        const adag_chan_place_t *pl = places ? places[i] : NULL;
        unsigned np = 1 + geoms[i].nreaders;
        adag__wbuf_u32(&descs[i], (uint32_t)needs_payload(pl, geoms[i].nreaders));
        adag__wbuf_u64(&descs[i], geoms[i].comm_key);
        adag__wbuf_u32(&descs[i], np);
        for (unsigned j = 0; j < np; j++) {
            adag_chan_place_t p = pl ? pl[j] : ADAG_CHAN_PLACE_HOST;
            adag__wbuf_u32(&descs[i], (uint32_t)p.kind);
            adag__wbuf_u32(&descs[i], p.index);
            adag__wbuf_str(&descs[i], p.who ? p.who : "?");
            adag__wbuf_u32(&descs[i], geoms[i].comm_key && is_dev(p) ? p.comm_rank : 0);
        }
        adag__wbuf_bytes(&descs[i], rd[i].data, rd[i].len);
    }
    *out = &d->base;
    d = NULL;
out:
    for (unsigned i = 0; rd && i < n; i++)
        adag__wbuf_free(&rd[i]);
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
        return adag__error(ADAG_ERR_NO_MEMORY, "device channel domain: out of memory");
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

static adag_status_t events_create(dev_chan_t *c, adag_dev_event_t ***evs)
{
    unsigned n = c->base.nslots;
    if (!(*evs = calloc(n, sizeof(**evs))))
        return adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", c->base.name);
    for (unsigned i = 0; i < n; i++) {
        adag_status_t st = c->ops->event_create(c->device->dev, &(*evs)[i]);
        if (st != ADAG_OK) {
            adag__error_prefix("device channel %s", c->base.name);
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
    adag__wbuf_bytes(w, h->bytes, h->len);
}

static adag_status_t export_events(dev_chan_t *c, adag_dev_event_t **evs, adag_wbuf_t *w)
{
    for (unsigned i = 0; i < c->base.nslots; i++) {
        adag_dev_handle_t h;
        adag_status_t st = c->ops->event_export(c->device->dev, evs[i], &h);
        if (st != ADAG_OK) {
            adag__error_prefix("device channel %s", c->base.name);
            return st;
        }
        put_handle(w, &h);
    }
    return ADAG_OK;
}

static void dev_close(adag_chan_t *ch);

/* The role of place j (0: the writer, 1 + r: reader r) of a channel
 * with these places. */
static role_t role_at(const adag_chan_place_t *pl, unsigned j, uint64_t comm_key)
{
    adag_chan_place_t me = pl[j];
    if (j == 0)
        return is_dev(me) ? ROLE_DEV_WRITER : ROLE_HOST_WRITER;
    if (!is_dev(me))
        return ROLE_HOST_READER;
    if (comm_key)
        return ROLE_COMM_RECV;
    if (!is_dev(pl[0]))
        return ROLE_H2D;
    return same_place(me, pl[0]) ? ROLE_SAME_DEVICE : ROLE_PEER_COPY;
}

/* Bytes per device slot of a channel of `capacity` bytes. */
static size_t dev_stride(size_t capacity)
{
    if (capacity > SIZE_MAX - SLOT_ALIGN)
        return SIZE_MAX;
    size_t stride = (capacity + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
    return stride ? stride : SLOT_ALIGN;
}

/* Whether a role keeps slots of its own in device memory: the writer's,
 * or a reader's copy of the value (not a reader that reads the writer's
 * slots in place). */
static int role_allocates(role_t r)
{
    return r == ROLE_DEV_WRITER || r == ROLE_PEER_COPY || r == ROLE_H2D || r == ROLE_COMM_RECV;
}

static void dev_memory(const adag_chan_geom_t *g, const adag_chan_place_t *places, size_t *host,
                       size_t *device)
{
    adag_chan_geom_t rg = *g;
    rg.headers_only = !needs_payload(places, g->nreaders);
    *host = adag__shm_chan_span(&rg);
    *device = 0;
    for (unsigned j = 0; places && j <= g->nreaders; j++)
        if (role_allocates(role_at(places, j, g->comm_key)))
            *device += dev_stride(g->capacity) * g->nslots;
}

static adag_status_t dev_open(adag_chan_domain_t *dom, const adag_chan_open_params_t *p,
                              adag_wbuf_t *peer_info, adag_chan_t **out)
{
    dev_domain_t *d = (dev_domain_t *)dom;
    adag_rbuf_t rb = {p->desc.data, p->desc.len, 0, 0};
    adag_status_t st;
    dev_chan_t *c = calloc(1, sizeof(*c));
    if (!c)
        return adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
    adag__chan_init_common(&c->base, &adag_chan_dev_ops, p);
    c->payload = (int)adag__rbuf_u32(&rb);
    c->comm_key = adag__rbuf_u64(&rb);
    c->nplaces = adag__rbuf_u32(&rb);
    if (!d || rb.failed || c->nplaces != 1 + p->geom.nreaders || p->reader < -1 ||
        p->reader >= (int)p->geom.nreaders || p->geom.nslots == 0) {
        st = adag__error(ADAG_ERR_PROTOCOL, "device channel %s: %s", p->name,
                        d ? "malformed descriptor" : "no domain");
        goto fail;
    }
    if (!(c->places = calloc(c->nplaces, sizeof(*c->places))) ||
        !(c->who = calloc(c->nplaces, sizeof(*c->who)))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
        goto fail;
    }
    for (unsigned j = 0; j < c->nplaces; j++) {
        c->places[j].kind = (int32_t)adag__rbuf_u32(&rb);
        c->places[j].index = adag__rbuf_u32(&rb);
        adag__rbuf_str(&rb, c->who[j], sizeof(c->who[j]));
        c->places[j].comm_rank = adag__rbuf_u32(&rb);
        c->places[j].who = c->who[j];
        if (c->places[j].kind >= 0 && !adag__device_backend((uint32_t)c->places[j].kind))
            rb.failed = 1;
    }
    adag_blob_t ring_desc;
    ring_desc.data = adag__rbuf_bytes(&rb, &ring_desc.len);
    if (rb.failed || rb.pos != rb.len || c->payload > 1 ||
        c->payload != needs_payload(c->places, p->geom.nreaders)) {
        st = adag__error(ADAG_ERR_PROTOCOL, "device channel %s: malformed descriptor", p->name);
        goto fail;
    }
    char why[160];
    if (c->comm_key != p->geom.comm_key) {
        st = adag__error(ADAG_ERR_PROTOCOL,
                        "device channel %s: the descriptor moves the value by communicator "
                        "%llu, the geometry by communicator %llu (0: none)",
                        p->name, (unsigned long long)c->comm_key,
                        (unsigned long long)p->geom.comm_key);
        goto fail;
    }
    if (c->comm_key && !adag__chan_dev_comm_places_ok(c->places, c->nplaces, why, sizeof(why))) {
        st = adag__error(ADAG_ERR_PROTOCOL, "device channel %s: malformed descriptor (%s)",
                        p->name, why);
        goto fail;
    }
    c->comms = p->comms;
    c->ncomms = p->comms ? p->ncomms : 0;
    c->role = role_at(c->places, (unsigned)(p->reader + 1), p->geom.comm_key);
    adag_chan_place_t me = c->places[p->reader + 1];
    if (is_dev(me)) {
        if (!p->device || (int32_t)p->device->kind != me.kind ||
            p->device->dev->index != me.index) {
            st = adag__error(ADAG_ERR_PROTOCOL,
                            "device channel %s: this endpoint was compiled for %s:%u but its "
                            "actor %s",
                            p->name, adag_device_kind_name((uint32_t)me.kind), me.index,
                            p->device ? "has another device" : "has no device");
            goto fail;
        }
        c->device = p->device;
        c->ops = p->device->dev->ops;
        c->base.on_device = 1;
    }
    adag_chan_open_params_t rp = *p;
    rp.desc = ring_desc;
    rp.device = NULL;
    rp.geom.headers_only = !c->payload;
    if ((st = adag_chan_shm_ops.open(d->rings, &rp, NULL, &c->ring)) != ADAG_OK)
        goto fail;

    unsigned n = c->base.nslots;
    c->stride = dev_stride(p->geom.capacity);
    if (c->stride > SIZE_MAX / n) {
        st = adag__error(ADAG_ERR_INVALID, "device channel %s: %u slots of %zu bytes", p->name, n,
                        p->geom.capacity);
        goto fail;
    }
    switch (c->role) {
    case ROLE_DEV_WRITER:
        c->ring_bufs = calloc(n, sizeof(*c->ring_bufs));
        c->pending = calloc(n, sizeof(*c->pending));
        c->consumed = calloc((size_t)n * p->geom.nreaders + 1, sizeof(*c->consumed));
        if (!c->ring_bufs || !c->pending || !c->consumed) {
            st = adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
            goto fail;
        }
        for (unsigned r = 1; c->comm_key && r < c->nplaces; r++)
            c->comm_readers += is_dev(c->places[r]) ? 1u : 0u;
        if ((st = c->ops->mem_alloc(c->device->dev, c->stride * n, &c->slots)) != ADAG_OK ||
            (st = events_create(c, &c->ready)) != ADAG_OK ||
            (c->payload && (st = events_create(c, &c->copied)) != ADAG_OK) ||
            (c->comm_readers && (st = events_create(c, &c->sent)) != ADAG_OK))
            goto fail_prefixed;
        if (c->comm_key)
            break; /* no reader reaches the slots or events by IPC */
        if ((st = adag__chan_dev_words_open(c, peer_info)) != ADAG_OK)
            goto fail;
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
        if (c->role == ROLE_SAME_DEVICE && (st = events_create(c, &c->arrived)) != ADAG_OK)
            goto fail;
        if (c->role != ROLE_SAME_DEVICE) {
            if ((st = c->ops->mem_alloc(c->device->dev, c->stride * n, &c->local)) != ADAG_OK ||
                (st = events_create(c, &c->local_ready)) != ADAG_OK ||
                (st = events_create(c, &c->local_free)) != ADAG_OK)
                goto fail_prefixed;
        }
        if (c->role == ROLE_H2D && !(c->releases = calloc(n, sizeof(*c->releases)))) {
            st = adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
            goto fail;
        }
        if (c->role != ROLE_H2D && ((st = adag__chan_dev_words_open(c, peer_info)) != ADAG_OK ||
                                    (st = export_events(c, c->my_consumed, peer_info)) != ADAG_OK))
            goto fail;
        break;
    case ROLE_COMM_RECV:
        if (!(c->received = calloc(n, sizeof(*c->received)))) {
            st = adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
            goto fail;
        }
        if ((st = c->ops->mem_alloc(c->device->dev, c->stride * n, &c->local)) != ADAG_OK ||
            (st = events_create(c, &c->local_ready)) != ADAG_OK ||
            (st = events_create(c, &c->local_free)) != ADAG_OK)
            goto fail_prefixed;
        break;
    case ROLE_HOST_WRITER:
    case ROLE_HOST_READER:
        break;
    }
    /* the roles that copy between the device and the ring's host slots:
     * without the lock the copies are right but synchronous (logged) */
    if ((c->role == ROLE_H2D || (c->role == ROLE_DEV_WRITER && c->payload)) && !c->pin &&
        adag__chan_dev_pin(c) != ADAG_OK)
        ADAG_LOG_WARN("%s: its copies will hold the loop until done", adag_last_error());
    /* the roles with communication operations on device streams */
    int watched = c->role == ROLE_SAME_DEVICE || c->role == ROLE_PEER_COPY ||
                  c->role == ROLE_H2D || c->role == ROLE_COMM_RECV ||
                  (c->role == ROLE_DEV_WRITER && c->payload);
    if (c->comm_readers && !(c->send_watch = calloc(n, sizeof(*c->send_watch)))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
        goto fail;
    }
    if (watched && !(c->watch = calloc(n, sizeof(*c->watch)))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", p->name);
        goto fail;
    }
    *out = &c->base;
    return ADAG_OK;
fail_prefixed:
    adag__error_prefix("device channel %s", p->name);
fail:
    dev_close(&c->base);
    return st;
}

/* Reads one handle from a peer's info. */
static int get_handle(adag_rbuf_t *rb, adag_dev_handle_t *h)
{
    size_t len;
    const void *b = adag__rbuf_bytes(rb, &len);
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
            return adag__error(ADAG_ERR_PROTOCOL, "device channel %s: %s info is malformed",
                              c->base.name, whose);
        adag_status_t st = c->ops->event_import(c->device->dev, &h, &evs[i]);
        if (st != ADAG_OK) {
            adag__error_prefix("device channel %s: %s event %u", c->base.name, whose, i);
            return st;
        }
    }
    return ADAG_OK;
}

/* Reads past a peer's event handles that this endpoint does not use. */
static adag_status_t skip_handles(dev_chan_t *c, adag_rbuf_t *rb, const char *whose)
{
    for (unsigned i = 0; i < c->base.nslots; i++) {
        adag_dev_handle_t h;
        if (get_handle(rb, &h) != 0)
            return adag__error(ADAG_ERR_PROTOCOL, "device channel %s: %s info is malformed",
                              c->base.name, whose);
    }
    return ADAG_OK;
}

static adag_status_t dev_connect(adag_chan_t *ch, const adag_blob_t *peers, unsigned npeers)
{
    dev_chan_t *c = dev_of(ch);
    adag_status_t st = ADAG_OK;
    unsigned n = ch->nslots;
    if (npeers != c->nplaces)
        return adag__error(ADAG_ERR_PROTOCOL, "device channel %s: %u peers, expected %u",
                          ch->name, npeers, c->nplaces);
    if (c->role == ROLE_SAME_DEVICE || c->role == ROLE_PEER_COPY) {
        adag_rbuf_t rb = {peers[0].data, peers[0].len, 0, 0};
        if ((st = adag__chan_dev_words_connect(c, &rb, 0)) != ADAG_OK)
            return st;
        adag_dev_handle_t h;
        if (get_handle(&rb, &h) != 0)
            return adag__error(ADAG_ERR_PROTOCOL, "device channel %s: the writer's info is "
                                                 "malformed", ch->name);
        if ((st = c->ops->mem_import(c->device->dev, &h, &c->peer)) != ADAG_OK) {
            adag__error_prefix("device channel %s: the writer's slots", ch->name);
            return st;
        }
        if (c->peer.size < c->stride * n)
            return adag__error(ADAG_ERR_PROTOCOL,
                              "device channel %s: the writer's slots are %zu bytes, expected %zu",
                              ch->name, c->peer.size, c->stride * n);
        if (!(c->peer_ready = calloc(n, sizeof(*c->peer_ready))))
            return adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", ch->name);
        if (c->ready_by_word)
            st = skip_handles(c, &rb, "the writer's"); /* its events: not used */
        else
            st = import_events(c, &rb, c->peer_ready, "the writer's");
        if (st != ADAG_OK)
            return st;
        if (rb.pos != rb.len)
            return adag__error(ADAG_ERR_PROTOCOL, "device channel %s: trailing bytes in the "
                                                 "writer's info", ch->name);
    } else if (c->role == ROLE_DEV_WRITER && !c->comm_key) {
        for (unsigned r = 0; r + 1 < c->nplaces; r++) {
            adag_chan_place_t rp = c->places[1 + r];
            if (!is_dev(rp))
                continue; /* a host reader: the payload copy and the ring */
            adag_rbuf_t rb = {peers[1 + r].data, peers[1 + r].len, 0, 0};
            char whose[32];
            snprintf(whose, sizeof(whose), "reader %u's", r);
            if ((st = adag__chan_dev_words_connect(c, &rb, r)) != ADAG_OK)
                return st;
            if (c->done_words && c->done_words[r].host)
                st = skip_handles(c, &rb, whose); /* its events: not used */
            else
                st = import_events(c, &rb, c->consumed + (size_t)r * n, whose);
            if (st != ADAG_OK)
                return st;
            if (rb.pos != rb.len)
                return adag__error(ADAG_ERR_PROTOCOL, "device channel %s: trailing bytes in %s "
                                                     "info", ch->name, whose);
        }
    }
    if ((c->role == ROLE_COMM_RECV || (c->role == ROLE_DEV_WRITER && c->comm_key)) &&
        (st = adag__chan_dev_comm_connect(c, (unsigned)(ch->reader + 1))) != ADAG_OK)
        return st;
    atomic_store_explicit(&c->connected, 1, memory_order_release);
    return ADAG_OK;
}

/* Every stream this endpoint enqueued on is done with it (or the deadline
 * passed: then the endpoint is leaked, never freed under a stream). */
static int drain_streams(dev_chan_t *c)
{
    if (!c->device)
        return 1;
    int64_t deadline = adag__deadline_ms(CLOSE_SYNC_MS);
    adag_status_t a = c->ops->stream_sync(c->device->comm, deadline);
    adag_status_t b = c->ops->stream_sync(c->device->compute, deadline);
    /* the communicator's stream: set at connect, which the loop thread
     * (the closing one) ran */
    adag_status_t m = c->comm_stream ? c->ops->stream_sync(c->comm_stream, deadline) : ADAG_OK;
    if (a == ADAG_OK && b == ADAG_OK && m == ADAG_OK)
        return 1;
    ADAG_LOG_WARN("device channel %s: the actor's streams%s did not drain in %d ms; its memory "
                  "and events are left allocated",
                  c->base.name, c->comm_stream ? " (and its communicator's)" : "",
                  CLOSE_SYNC_MS);
    return 0;
}

static void dev_close(adag_chan_t *ch)
{
    dev_chan_t *c = dev_of(ch);
    if (!c)
        return;
    if (!drain_streams(c))
        return; /* the pin too: a stream may still copy with the memory */
    adag__chan_dev_unpin(c);
    unsigned n = ch->nslots;
    if (c->device) {
        adag_device_t *dev = c->device->dev;
        events_destroy(c, c->ready, n);
        events_destroy(c, c->copied, n);
        events_destroy(c, c->sent, n);
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
        events_destroy(c, c->arrived, n);
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
    free(c->who);
    free(c->watch);
    free(c->send_watch);
    free(c->received);
    free(c->ring_bufs);
    free(c->pending);
    free(c->releases);
    free(c->done_words);
    free(c->ahead);
    free(c->ahead_size);
    free(c);
}

static void abandon_events(dev_chan_t *c, adag_dev_event_t **evs, size_t n)
{
    for (size_t i = 0; evs && i < n; i++)
        if (evs[i])
            c->ops->event_abandon(evs[i]);
}

/* Wakes the ring's waiters and gives up on the peers' events: the DAG is
 * aborted, so a peer that died or stopped must not keep this endpoint's
 * streams waiting (they then drain, and close frees everything). */
static void dev_wake_all(adag_chan_t *ch)
{
    dev_chan_t *c = dev_of(ch);
    c->ring->ops->wake_all(c->ring);
    if (!c->device || !atomic_load_explicit(&c->connected, memory_order_acquire))
        return;
    abandon_events(c, c->peer_ready, ch->nslots);
    abandon_events(c, c->consumed, (size_t)ch->nslots * (c->nplaces - 1));
    adag__chan_dev_words_abort(c);
    /* a failed DAG: a send or recv whose peer stopped must give up. A plain
     * destroy (ADAG_ERR_CLOSED) let the executions finish: the communicator
     * stays usable for the actor's next DAG. */
    uint32_t why = atomic_load_explicit(ch->abort, memory_order_seq_cst);
    if (c->comm && why != 0 && why != (uint32_t)-ADAG_ERR_CLOSED)
        c->comm->ops->abort(c->comm);
}

/* The event that completes slot s's watched operation (the writer's sends
 * by communicator if `sends`), and what to call the operation in a message. */
static adag_dev_event_t *watched_op(dev_chan_t *c, int sends, unsigned s, char *what, size_t len)
{
    const adag_chan_place_t *w = &c->places[0];
    if (sends || c->role == ROLE_COMM_RECV) {
        adag__chan_dev_comm_describe(c, what, len);
        return sends ? c->sent[s] : c->local_ready[s];
    }
    switch (c->role) {
    case ROLE_SAME_DEVICE:
        snprintf(what, len, "waiting for the value of %s (%s:%u) by %s", c->who[0],
                 adag_device_kind_name((uint32_t)w->kind), w->index,
                 c->ready_by_word ? "a stream memory op on its word" : "its IPC event");
        return c->arrived[s];
    case ROLE_PEER_COPY:
        snprintf(what, len, "the peer copy from %s (%s:%u) after %s", c->who[0],
                 adag_device_kind_name((uint32_t)w->kind), w->index,
                 c->ready_by_word ? "a stream memory op on its word" : "its IPC event");
        return c->local_ready[s];
    case ROLE_H2D:
        snprintf(what, len, "the copy from host memory (written by %s)", c->who[0]);
        return c->local_ready[s];
    case ROLE_DEV_WRITER: {
        unsigned r = 1;
        while (r + 1 < c->nplaces && is_dev(c->places[r]))
            r++;
        snprintf(what, len, "the copy to host memory (read by %s%s)", c->who[r],
                 c->nplaces > 2 ? " and others" : "");
        return c->copied[s];
    }
    default:
        return NULL;
    }
}

static adag_status_t dev_watch(adag_chan_t *ch, int64_t now, int64_t timeout_ns,
                               int64_t *since_out)
{
    dev_chan_t *c = dev_of(ch);
    char what[ADAG_CHAN_DEV_WHAT_MAX];
    int64_t oldest = INT64_MAX;
    unsigned oldest_slot = 0;
    int oldest_sends = 0;
    uint64_t oldest_seq1 = 0;
    if (!atomic_load_explicit(&c->connected, memory_order_acquire))
        return ADAG_OK;
    /* the role's op per slot, then a writer's sends by communicator */
    for (int sends = 0; sends < 2; sends++) {
        chan_watch_t *wt = sends ? c->send_watch : c->watch;
        for (unsigned s = 0; wt && s < ch->nslots; s++) {
            uint64_t seq1 = atomic_load_explicit(&wt[s].seq1, memory_order_seq_cst);
            if (!seq1)
                continue;
            int64_t since = atomic_load_explicit(&wt[s].since, memory_order_relaxed);
            if (now - since <= timeout_ns || since >= oldest)
                continue;
            adag_dev_event_t *ev = watched_op(c, sends, s, what, sizeof(what));
            if (!ev || c->ops->event_query(ev) == ADAG_OK)
                continue;
            /* the slot moved on meanwhile: the event checked was not its op's */
            if (atomic_load_explicit(&wt[s].seq1, memory_order_seq_cst) != seq1)
                continue;
            oldest = since;
            oldest_slot = s;
            oldest_sends = sends;
            oldest_seq1 = seq1;
        }
    }
    if (!oldest_seq1)
        return ADAG_OK;
    watched_op(c, oldest_sends, oldest_slot, what, sizeof(what));
    *since_out = oldest;
    return adag__error(ADAG_ERR_TIMEOUT,
                      "device channel %s: %s for execution %llu did not complete within %lld ms",
                      ch->name, what, (unsigned long long)(oldest_seq1 - 1),
                      (long long)(timeout_ns / 1000000));
}

static int dev_notify_fd(adag_chan_t *ch)
{
    adag_chan_t *ring = dev_of(ch)->ring;
    return ring->ops->notify_fd ? ring->ops->notify_fd(ring) : -1;
}

/* The ring's slots published and not yet released by every reader: a
 * device value counts from when its ring slot is published (after its
 * copy, if any) until every reader released it. */
static uint32_t dev_in_use(adag_chan_t *ch)
{
    return adag__chan_in_use(dev_of(ch)->ring);
}

/* How the value reaches reader r: "cuda_ipc zero copy cuda:0 -> cuda:0",
 * "emu_ipc peer copy emu:0 -> emu:1", "async copy in host memory ->
 * cuda:1", "async copy out emu:2 -> host memory", "nccl send/recv cuda:0
 * rank 0 -> cuda:1 rank 1". */
static void dev_label(const adag_chan_geom_t *g, const adag_chan_place_t *places, unsigned r,
                      char *buf, size_t len)
{
    char w[32], rd[32];
    adag_chan_place_t a = places[0], b = places[1 + r];
    if (a.kind >= 0)
        snprintf(w, sizeof(w), "%s:%u", adag_device_kind_name((uint32_t)a.kind), a.index);
    else
        snprintf(w, sizeof(w), "host memory");
    if (b.kind >= 0)
        snprintf(rd, sizeof(rd), "%s:%u", adag_device_kind_name((uint32_t)b.kind), b.index);
    else
        snprintf(rd, sizeof(rd), "host memory");
    const char *how = a.kind < 0 ? "async copy in" : b.kind < 0 ? "async copy out"
                      : a.index == b.index ? "zero copy" : "peer copy";
    if (g->comm_key && a.kind >= 0 && b.kind >= 0) {
        /* by the DAG's communicator: "host_comm send/recv rank 0 -> 1" */
        const adag_comm_ops_t *c = adag__comm_backend_for_device((adag_device_kind_t)a.kind);
        snprintf(buf, len, "%s%s send/recv %s rank %u -> %s rank %u", c ? c->name : "?",
                 c && c->kind == ADAG_COMM_KIND_HOST ? "_comm" : "", w, a.comm_rank, rd,
                 b.comm_rank);
        return;
    }
    snprintf(buf, len, "%s%s%s %s -> %s", a.kind >= 0 && b.kind >= 0
                                              ? adag_device_kind_name((uint32_t)a.kind) : "",
             a.kind >= 0 && b.kind >= 0 ? "_ipc " : "", how, w, rd);
}

/* An endpoint keeps the value in device memory, every endpoint on one
 * node: IPC, peer and host copies, or a communicator. */
static adag_chan_cost_t dev_query(const adag_chan_edge_t *e, char *why, size_t why_len)
{
    unsigned away = adag__chan_edge_away(e);
    if (!adag__chan_edge_device(e))
        snprintf(why, why_len, "no endpoint keeps its value in device memory");
    else if (away)
        snprintf(why, why_len, "its endpoints are on more than one node (%s, %s)",
                 e->ends[0].node[0] ? e->ends[0].node : "the driver's",
                 e->ends[away].node[0] ? e->ends[away].node : "the driver's");
    else if (e->transport == ADAG_TRANSPORT_HOST)
        snprintf(why, why_len, "its transport is ADAG_TRANSPORT_HOST");
    else
        return ADAG_CHAN_COST_DEVICE;
    return ADAG_CHAN_CANNOT;
}

const adag_chan_ops_t adag_chan_dev_ops = {
    .name = "device",
    .query = dev_query,
    .label = dev_label,
    .domain_create = dev_domain_create,
    .domain_export = dev_domain_export,
    .domain_import = dev_domain_import,
    .domain_destroy = dev_domain_destroy,
    .domain_bytes = dev_domain_bytes,
    .memory = dev_memory,
    .open = dev_open,
    .connect = dev_connect,
    .close = dev_close,
    .wake_all = dev_wake_all,
    .notify_fd = dev_notify_fd,
    .watch = dev_watch,
    .acquire = adag__chan_dev_acquire,
    .publish = adag__chan_dev_publish,
    .wait = adag__chan_dev_wait,
    .release = adag__chan_dev_release,
    .ready = adag__chan_dev_ready,
    .in_use = dev_in_use,
    .ahead = adag__chan_dev_ahead,
    .wait_ahead = adag__chan_dev_wait_ahead,
    .publish_ahead = adag__chan_dev_publish_ahead,
    .graphable = adag__chan_dev_graphable,
    .defer = adag__chan_dev_defer,
    .device_before = adag__chan_dev_device_before,
    .device_after = adag__chan_dev_device_after,
};

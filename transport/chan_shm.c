/*
 * The "shm" channel: a ring inside a memfd segment that every process of a
 * DAG on this host maps (the domain: one segment per DAG, plus an eventfd
 * that writers signal for readers that asked for a pollable fd).
 *
 * Segment: a 64-byte header {magic, size}, then every channel, 64-byte
 * aligned. A channel's descriptor is its offset. Layout of one channel:
 *
 *   header       written counter + data event (readers sleep here),
 *                space event (the writer sleeps here), geometry
 *   cursors      nreaders x 64 bytes: released counter of each reader
 *   slots        nslots x (slot header + capacity rounded up to 64); a
 *                headers-only ring (adag_chan_geom_t.headers_only) keeps
 *                the headers alone
 *
 * Every channel has its own slot count and capacity (its geometry).
 * Counters are 64-bit and never wrap in practice. The writer may fill slot
 * seq % nslots once min(released) >= seq - nslots + 1; a reader may read it
 * once written >= seq + 1.
 *
 * Memory ordering: `written`, the cursors and `notify_armed` are stored and
 * loaded seq_cst, as the event handshake requires (common/event.h). The
 * store of `written` is also the release that publishes the slot's bytes;
 * a cursor store releases the slot back to the writer. Readers never write
 * a slot.
 */
#include "transport/chan_shm.h"

#include "common/error.h"
#include "common/event.h"
#include "common/fd.h"
#include "common/log.h"
#include "common/mempolicy.h"

#include <errno.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

extern const adag_chan_ops_t adag_chan_shm_ops;

#define SEGMENT_MAGIC 0x6164616773656733ull /* "adagseg3" */
#define SEGMENT_HDR_SIZE 64
#define CHAN_MAGIC 0x6164616763683032ull /* "adagch02" */
/* a reader's cursor, then its device word (below) */
#define CURSOR_STRIDE 128
#define WORD_BYTES 64 /* a device word's cell (gpu/device.h, ADAG_DEV_WORD_BYTES) */
#define SLOT_HDR_SIZE 576

typedef struct {
    uint64_t magic;
    uint64_t size;
} segment_hdr_t;

struct adag_shm_chan_hdr {
    /* written by the writer, read by readers */
    alignas(64) _Atomic uint64_t written; /* seqs published */
    adag_event_t data_ev;                 /* readers sleep here */
    /* written by readers, read by the writer */
    alignas(64) adag_event_t space_ev;    /* the writer sleeps here */
    /* geometry, set once at init; notify_armed set once by a reader */
    alignas(64) uint64_t magic;
    uint32_t nslots;
    uint32_t nreaders;
    uint64_t capacity;
    uint64_t stride; /* bytes per slot, header included */
    _Atomic uint32_t notify_armed; /* signal the domain's eventfd after each publish */
    /* the writer's device word (device channels' value ops: written by the
     * writer's stream, waited on by the readers' streams); each reader's
     * follows its cursor */
    alignas(64) unsigned char writer_word[WORD_BYTES];
};

typedef adag_slot_hdr_t slot_hdr_t;

_Static_assert(sizeof(slot_hdr_t) <= SLOT_HDR_SIZE, "slot header too large");
_Static_assert(sizeof(struct adag_shm_chan_hdr) % 64 == 0, "header not cache aligned");
_Static_assert(sizeof(segment_hdr_t) <= SEGMENT_HDR_SIZE, "segment header too large");

typedef struct {
    adag_chan_domain_t base;
    adag_shm_segment_t seg;
    int notify_fd; /* eventfd */
} shm_domain_t;

typedef struct {
    adag_chan_t base;
    struct adag_shm_chan_hdr *hdr;
    char *slots;
    size_t size;   /* the channel's bytes in the segment (adag__shm_chan_size) */
    int bytes;     /* 0: a headers-only ring */
    int notify_fd; /* the domain's eventfd */
} shm_chan_t;

static shm_chan_t *shm_of(adag_chan_t *ch)
{
    return (shm_chan_t *)ch;
}

static size_t round64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* A channel's share of its segment: whole pages (the segment header is
 * one), so no two channels share a page and a device endpoint can
 * page-lock its channel's memory alone (transport/chan_dev_pin.c). The
 * pages a channel never touches take no memory. */
static size_t ring_span(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (size + page - 1) & ~(page - 1);
}

static size_t slot_stride(size_t capacity)
{
    return SLOT_HDR_SIZE + round64(capacity);
}

/* Bytes of value each slot of geometry g keeps. */
static size_t slot_bytes(const adag_chan_geom_t *g)
{
    return g->headers_only ? 0 : g->capacity;
}

/* The channel's bytes in its segment, whole pages (SIZE_MAX: too large). */
static size_t geom_span(const adag_chan_geom_t *g)
{
    size_t sz = adag__shm_chan_size(g->nslots, g->nreaders, slot_bytes(g));
    size_t span = sz == SIZE_MAX ? SIZE_MAX : ring_span(sz);
    return span < sz ? SIZE_MAX : span;
}

size_t adag__shm_chan_size(unsigned nslots, unsigned nreaders, size_t capacity)
{
    /* Saturates at SIZE_MAX instead of wrapping: the geometry may come from a
     * peer's program, and a wrapped size would pass "fits in the segment". */
    size_t fixed = sizeof(struct adag_shm_chan_hdr) + (size_t)nreaders * CURSOR_STRIDE;
    if (capacity > SIZE_MAX - SLOT_HDR_SIZE - 63)
        return SIZE_MAX;
    size_t stride = slot_stride(capacity);
    if (nslots && stride > (SIZE_MAX - fixed) / nslots)
        return SIZE_MAX;
    return fixed + (size_t)nslots * stride;
}

static _Atomic uint64_t *cursor(struct adag_shm_chan_hdr *hdr, unsigned reader)
{
    return (_Atomic uint64_t *)((char *)(hdr + 1) + (size_t)reader * CURSOR_STRIDE);
}

static slot_hdr_t *slot_of(shm_chan_t *s, uint64_t seq)
{
    return (slot_hdr_t *)(s->slots + (seq % s->base.nslots) * s->hdr->stride);
}

static void chan_init(void *base, const adag_chan_geom_t *g)
{
    struct adag_shm_chan_hdr *hdr = base;
    hdr->magic = CHAN_MAGIC;
    hdr->nslots = g->nslots;
    hdr->nreaders = g->nreaders;
    hdr->capacity = g->capacity;
    hdr->stride = slot_stride(slot_bytes(g));
    atomic_store_explicit(&hdr->written, 0, memory_order_relaxed);
    atomic_store_explicit(&hdr->notify_armed, 0, memory_order_relaxed);
    memset(hdr->writer_word, 0, WORD_BYTES);
    for (unsigned r = 0; r < g->nreaders; r++) {
        atomic_store_explicit(cursor(hdr, r), 0, memory_order_relaxed);
        memset((char *)cursor(hdr, r) + WORD_BYTES, 0, WORD_BYTES);
    }
}

static void shm_wake_all(adag_chan_t *ch)
{
    struct adag_shm_chan_hdr *hdr = shm_of(ch)->hdr;
    adag__event_notify(&hdr->data_ev);
    adag__event_notify(&hdr->space_ev);
}

/* ---- writer ---- */

typedef struct {
    struct adag_shm_chan_hdr *hdr;
    uint64_t need; /* every reader must have released at least this many */
} space_arg_t;

static int space_ready(const void *p)
{
    const space_arg_t *a = p;
    for (uint32_t r = 0; r < a->hdr->nreaders; r++)
        if (atomic_load_explicit(cursor(a->hdr, r), memory_order_seq_cst) < a->need)
            return 0;
    return 1;
}

static adag_status_t shm_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf)
{
    shm_chan_t *s = shm_of(ch);
    space_arg_t arg = {s->hdr, seq >= ch->nslots ? seq - ch->nslots + 1 : 0};
    adag_status_t st =
        adag__event_wait(&s->hdr->space_ev, space_ready, &arg, ch->abort, deadline, &ch->spin);
    if (st != ADAG_OK)
        return st;
    *buf = s->bytes ? (char *)slot_of(s, seq) + SLOT_HDR_SIZE : NULL;
    return ADAG_OK;
}

static uint32_t shm_in_use(adag_chan_t *ch)
{
    shm_chan_t *s = shm_of(ch);
    uint64_t w = atomic_load_explicit(&s->hdr->written, memory_order_acquire), low = w;
    for (uint32_t r = 0; r < s->hdr->nreaders; r++) {
        uint64_t c = atomic_load_explicit(cursor(s->hdr, r), memory_order_acquire);
        if (c < low)
            low = c;
    }
    return (uint32_t)(w - low);
}

static adag_status_t shm_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                                 const adag_tensor_meta_t *meta, adag_status_t status,
                                 const char *err)
{
    shm_chan_t *s = shm_of(ch);
    adag_status_t st = adag__chan_publish_fits(ch, seq, size, status);
    if (st != ADAG_OK)
        return st;
    slot_hdr_t *slot = slot_of(s, seq);
    slot->seq = seq;
    slot->size = status == ADAG_OK ? size : 0;
    adag__tensor_meta_store(&slot->meta, status == ADAG_OK ? meta : NULL);
    slot->status = status;
    size_t n = status != ADAG_OK && err ? strnlen(err, ADAG_SLOT_ERR_MAX - 1) : 0;
    if (n)
        memcpy(slot->err, err, n);
    slot->err[n] = '\0';
    slot->err_len = (uint32_t)n;
    /* seq_cst (a release, and part of the event handshake): the slot's contents
     * happen-before any reader's load of written */
    atomic_store_explicit(&s->hdr->written, seq + 1, memory_order_seq_cst);
    adag__event_notify(&s->hdr->data_ev);
    /* seq_cst with the arming reader's store of notify_armed and its later
     * load of written: either we see it armed, or it sees this publish */
    if (atomic_load_explicit(&s->hdr->notify_armed, memory_order_seq_cst) && s->notify_fd >= 0) {
        uint64_t one = 1;
        while (write(s->notify_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
        }
    }
    return ADAG_OK;
}

/* ---- reader ---- */

typedef struct {
    struct adag_shm_chan_hdr *hdr;
    uint64_t seq;
} data_arg_t;

static int data_ready(const void *p)
{
    const data_arg_t *a = p;
    return atomic_load_explicit(&a->hdr->written, memory_order_seq_cst) > a->seq;
}

static adag_status_t shm_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                              adag_slot_view_t *view)
{
    shm_chan_t *s = shm_of(ch);
    data_arg_t arg = {s->hdr, seq};
    adag_status_t st =
        adag__event_wait(&s->hdr->data_ev, data_ready, &arg, ch->abort, deadline, &ch->spin);
    if (st != ADAG_OK)
        return st;
    slot_hdr_t *slot = slot_of(s, seq);
    if (slot->seq != seq || slot->size > ch->capacity || slot->err_len >= ADAG_SLOT_ERR_MAX ||
        slot->meta.ndim > ADAG_MAX_DIMS)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "shm channel %s: slot for execution %llu holds execution %llu "
                          "(size %llu of %zu)",
                          ch->name, (unsigned long long)seq, (unsigned long long)slot->seq,
                          (unsigned long long)slot->size, ch->capacity);
    view->data = s->bytes ? (char *)slot + SLOT_HDR_SIZE : NULL;
    view->size = slot->size;
    adag__tensor_meta_load(&view->meta, &slot->meta);
    view->device = ADAG_DEVICE_HOST;
    view->status = slot->status;
    view->err = slot->err; /* terminated by the writer; readers never write a slot */
    view->err_len = slot->err_len;
    return ADAG_OK;
}

static void shm_release(adag_chan_t *ch, uint64_t seq)
{
    shm_chan_t *s = shm_of(ch);
    if (ch->reader < 0)
        return; /* the writer reading its own slot holds nothing */
    /* seq_cst (a release, and part of the event handshake): our reads of the
     * slot happen-before the writer refills it */
    atomic_store_explicit(cursor(s->hdr, (unsigned)ch->reader), seq + 1, memory_order_seq_cst);
    adag__event_notify(&s->hdr->space_ev);
}

static int shm_ready(adag_chan_t *ch, uint64_t seq)
{
    return atomic_load_explicit(&shm_of(ch)->hdr->written, memory_order_seq_cst) > seq;
}

static int shm_notify_fd(adag_chan_t *ch)
{
    shm_chan_t *s = shm_of(ch);
    if (s->notify_fd < 0)
        return -1;
    atomic_store_explicit(&s->hdr->notify_armed, 1, memory_order_seq_cst);
    return s->notify_fd;
}

/* ---- endpoints ---- */

static adag_status_t shm_open_endpoint(adag_chan_domain_t *dom, const adag_chan_open_params_t *p,
                              adag_wbuf_t *peer_info, adag_chan_t **out)
{
    shm_domain_t *d = (shm_domain_t *)dom;
    adag_rbuf_t rb = {p->desc.data, p->desc.len, 0, 0};
    uint64_t off = adag__rbuf_u64(&rb);
    const adag_chan_geom_t *g = &p->geom;
    (void)peer_info;
    if (!d || rb.failed || rb.pos != rb.len)
        return adag__error(ADAG_ERR_PROTOCOL, "shm channel %s: %s", p->name,
                          d ? "malformed descriptor" : "no shared-memory segment");
    size_t size = adag__shm_chan_size(g->nslots, g->nreaders, slot_bytes(g));
    if (off < SEGMENT_HDR_SIZE || (off & 63) || off > d->seg.size || size > d->seg.size - off)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "shm channel %s: offset %llu does not fit a segment of %zu bytes",
                          p->name, (unsigned long long)off, d->seg.size);
    struct adag_shm_chan_hdr *hdr = (void *)((char *)d->seg.base + off);
    if (hdr->magic != CHAN_MAGIC || hdr->nslots != g->nslots || hdr->nreaders != g->nreaders ||
        hdr->capacity != g->capacity || hdr->stride != slot_stride(slot_bytes(g)) ||
        g->nslots == 0 || p->reader >= (int)g->nreaders || p->reader < -1)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "shm channel %s: header does not match its geometry "
                          "(%u slots, %u readers, %zu bytes%s, reader %d)",
                          p->name, g->nslots, g->nreaders, g->capacity,
                          g->headers_only ? " (headers only)" : "", p->reader);
    shm_chan_t *s = calloc(1, sizeof(*s));
    if (!s)
        return adag__error(ADAG_ERR_NO_MEMORY, "shm channel %s: out of memory", p->name);
    adag__chan_init_common(&s->base, &adag_chan_shm_ops, p);
    s->hdr = hdr;
    s->slots = (char *)(hdr + 1) + (size_t)g->nreaders * CURSOR_STRIDE;
    s->size = size;
    s->bytes = !g->headers_only;
    s->notify_fd = d->notify_fd;
    if (p->reader < 0 && p->has_numa) {
        /* the writer's node: its pages are placed when first written */
        size_t span = size - (size_t)(s->slots - (char *)hdr);
        if (adag__mempolicy_range(s->slots, span, p->numa) != 0)
            ADAG_LOG_WARN("shm channel %s: its slots stay where the kernel puts them: mbind "
                          "to NUMA node %d: %s", p->name, p->numa, strerror(errno));
    }
    *out = &s->base;
    return ADAG_OK;
}

void adag__shm_chan_memory(adag_chan_t *ch, void **base, size_t *size)
{
    shm_chan_t *s = shm_of(ch);
    *base = s->hdr;
    *size = s->size;
}

static void shm_close_endpoint(adag_chan_t *ch)
{
    free(ch);
}

/* ---- domains ---- */

static void shm_domain_destroy(adag_chan_domain_t *dom)
{
    shm_domain_t *d = (shm_domain_t *)dom;
    if (!d)
        return;
    adag__shm_segment_destroy(&d->seg);
    if (d->notify_fd >= 0)
        close(d->notify_fd);
    free(d);
}

static shm_domain_t *domain_new(void)
{
    shm_domain_t *d = calloc(1, sizeof(*d));
    if (d) {
        d->base.ops = &adag_chan_shm_ops;
        d->seg.fd = -1;
        d->notify_fd = -1;
    }
    return d;
}

static adag_status_t shm_domain_create(const char *dag_name, const adag_chan_geom_t *geoms,
                                       const adag_chan_place_t *const *places, unsigned n,
                                       adag_wbuf_t *descs, adag_chan_domain_t **out)
{
    (void)places; /* host memory, whatever the endpoints' devices */
    size_t off = ring_span(SEGMENT_HDR_SIZE); /* the header has a page */
    char name[96];
    adag_status_t st;
    shm_domain_t *d = domain_new();
    if (!d)
        return adag__error(ADAG_ERR_NO_MEMORY, "shm domain of DAG %s: out of memory", dag_name);
    for (unsigned i = 0; i < n; i++) {
        size_t span = geom_span(&geoms[i]);
        if (span == SIZE_MAX || off + span < off) {
            st = adag__error(ADAG_ERR_INVALID,
                            "DAG %s: shared-memory channels too large (%u slots of %zu bytes)",
                            dag_name, geoms[i].nslots, geoms[i].capacity);
            goto fail;
        }
        adag__wbuf_u64(&descs[i], off);
        off += span;
    }
    snprintf(name, sizeof(name), "adag:%s", dag_name);
    if ((st = adag__shm_segment_create(&d->seg, name, off)) != ADAG_OK) {
        adag__error_prefix("shared memory for DAG %s", dag_name);
        goto fail;
    }
    d->notify_fd = adag__fd_above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (d->notify_fd < 0) {
        st = adag__error_errno(errno, "DAG %s: eventfd", dag_name);
        goto fail;
    }
    segment_hdr_t *sh = d->seg.base;
    sh->magic = SEGMENT_MAGIC;
    sh->size = d->seg.size;
    off = ring_span(SEGMENT_HDR_SIZE);
    for (unsigned i = 0; i < n; i++) {
        chan_init((char *)d->seg.base + off, &geoms[i]);
        off += geom_span(&geoms[i]);
    }
    *out = &d->base;
    return ADAG_OK;
fail:
    shm_domain_destroy(&d->base);
    return st;
}

static adag_status_t shm_domain_export(adag_chan_domain_t *dom, adag_wbuf_t *blob, int *fds,
                                       unsigned *nfds)
{
    shm_domain_t *d = (shm_domain_t *)dom;
    adag__wbuf_u64(blob, d->seg.size);
    fds[0] = d->seg.fd;
    fds[1] = d->notify_fd;
    *nfds = 2;
    return ADAG_OK;
}

static adag_status_t shm_domain_import(adag_blob_t blob, const int *fds, unsigned nfds,
                                       adag_chan_domain_t **out)
{
    adag_rbuf_t rb = {blob.data, blob.len, 0, 0};
    uint64_t size = adag__rbuf_u64(&rb);
    adag_status_t st;
    shm_domain_t *d = domain_new();
    if (!d) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "shm domain: out of memory");
        goto fail_fds;
    }
    if (rb.failed || rb.pos != rb.len || nfds != 2 || size < SEGMENT_HDR_SIZE ||
        size > SIZE_MAX) {
        st = adag__error(ADAG_ERR_PROTOCOL,
                        "shm domain: malformed (%zu bytes, %u fds; expected 8 bytes, 2 fds)",
                        blob.len, nfds);
        goto fail_fds;
    }
    d->notify_fd = fds[1];
    st = adag__shm_segment_map(&d->seg, fds[0], (size_t)size); /* takes fds[0] */
    if (st != ADAG_OK)
        goto fail;
    const segment_hdr_t *sh = d->seg.base;
    if (sh->magic != SEGMENT_MAGIC || sh->size != size) {
        st = adag__error(ADAG_ERR_PROTOCOL, "shm domain: the segment has a bad header");
        goto fail;
    }
    *out = &d->base;
    return ADAG_OK;
fail_fds:
    for (unsigned i = 0; i < nfds; i++)
        close(fds[i]);
fail:
    shm_domain_destroy(d ? &d->base : NULL);
    return st;
}

static size_t shm_domain_bytes(const adag_chan_domain_t *dom)
{
    return ((const shm_domain_t *)dom)->seg.size;
}

_Atomic uint64_t *adag__shm_chan_word(adag_chan_t *ch, int reader)
{
    struct adag_shm_chan_hdr *hdr = shm_of(ch)->hdr;
    if (reader < 0)
        return (_Atomic uint64_t *)(void *)hdr->writer_word;
    return (_Atomic uint64_t *)(void *)((char *)cursor(hdr, (unsigned)reader) + WORD_BYTES);
}

size_t adag__shm_chan_span(const adag_chan_geom_t *g)
{
    return geom_span(g);
}

static void shm_memory(const adag_chan_geom_t *g, const adag_chan_place_t *places, size_t *host,
                       size_t *device)
{
    (void)places;
    *host = geom_span(g);
    *device = 0;
}

/* Host memory, every endpoint on the driver's node (the segment is made
 * there and passed to worker processes as an fd). */
static adag_chan_cost_t shm_query(const adag_chan_edge_t *e, char *why, size_t why_len)
{
    if (adag__chan_edge_device(e)) {
        snprintf(why, why_len, "its value is in device memory");
        return ADAG_CHAN_CANNOT;
    }
    for (unsigned i = 0; i <= e->nreaders; i++)
        if (e->ends[i].node[0]) {
            snprintf(why, why_len, "%s is on %s, not the driver's node",
                     e->ends[i].place.who ? e->ends[i].place.who : "an endpoint",
                     e->ends[i].node);
            return ADAG_CHAN_CANNOT;
        }
    return ADAG_CHAN_COST_SHM;
}

const adag_chan_ops_t adag_chan_shm_ops = {
    .name = "shm",
    .query = shm_query,
    .domain_create = shm_domain_create,
    .domain_export = shm_domain_export,
    .domain_import = shm_domain_import,
    .domain_destroy = shm_domain_destroy,
    .domain_bytes = shm_domain_bytes,
    .memory = shm_memory,
    .open = shm_open_endpoint,
    .close = shm_close_endpoint,
    .wake_all = shm_wake_all,
    .notify_fd = shm_notify_fd,
    .acquire = shm_acquire,
    .publish = shm_publish,
    .wait = shm_wait,
    .release = shm_release,
    .ready = shm_ready,
    .in_use = shm_in_use,
    .counts_waits = 1,
};

/* ---- segments ---- */

adag_status_t adag__shm_segment_create(adag_shm_segment_t *seg, const char *name, size_t size)
{
    long page = sysconf(_SC_PAGESIZE);
    size = (size + (size_t)page - 1) & ~((size_t)page - 1);
    seg->base = NULL;
    seg->size = 0;
    seg->fd = adag__fd_above_stdio(memfd_create(name, MFD_CLOEXEC));
    if (seg->fd < 0)
        return adag__error_errno(errno, "memfd_create(%s)", name);
    if (ftruncate(seg->fd, (off_t)size) != 0) {
        adag_status_t st = adag__error_errno(errno, "ftruncate(%s, %zu)", name, size);
        close(seg->fd);
        seg->fd = -1;
        return st;
    }
    seg->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
    if (seg->base == MAP_FAILED) {
        adag_status_t st = adag__error_errno(errno, "mmap(%s, %zu)", name, size);
        close(seg->fd);
        seg->fd = -1;
        seg->base = NULL;
        return st;
    }
    seg->size = size;
    return ADAG_OK;
}

adag_status_t adag__shm_segment_map(adag_shm_segment_t *seg, int fd, size_t size)
{
    struct stat sb;
    seg->fd = fd;
    seg->base = NULL;
    seg->size = 0;
    if (fstat(fd, &sb) != 0) {
        adag_status_t st = adag__error_errno(errno, "fstat(segment fd %d)", fd);
        close(fd);
        seg->fd = -1;
        return st;
    }
    if ((uint64_t)sb.st_size != size) {
        close(fd);
        seg->fd = -1;
        return adag__error(ADAG_ERR_PROTOCOL, "segment is %lld bytes, expected %zu",
                          (long long)sb.st_size, size);
    }
    seg->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (seg->base == MAP_FAILED) {
        adag_status_t st = adag__error_errno(errno, "mmap(segment, %zu)", size);
        seg->base = NULL;
        close(fd);
        seg->fd = -1;
        return st;
    }
    seg->size = size;
    return ADAG_OK;
}

void adag__shm_segment_destroy(adag_shm_segment_t *seg)
{
    if (seg->base)
        munmap(seg->base, seg->size);
    if (seg->fd >= 0)
        close(seg->fd);
    seg->base = NULL;
    seg->fd = -1;
    seg->size = 0;
}

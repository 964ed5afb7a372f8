/*
 * The host communicator (gpu/comm.h): ranks on emulated devices (gpu/host.c)
 * of one host, in any mix of threads and processes, talking through one
 * shared memory segment per communicator.
 *
 * This file: ids, init, send and recv, the ops table. The segment's
 * layout, error record and a rank's references are gpu/comm_host_seg.c's,
 * the collectives gpu/comm_host_coll.c's (calls go one way: this file ->
 * comm_host_coll.c -> comm_host_seg.c).
 *
 * The id is bytes only (gpu/comm_host.h): the driver's memfd, named like a
 * emulated device handle (pid, fd, identity; gpu/memfd_handle.h) and opened by
 * each rank through /proc, so it travels in any message. The driver keeps
 * the memfd open until id_destroy; each rank maps the segment at init and
 * keeps it mapped until its communicator is freed.
 *
 * The segment:
 *   header      magic, version, nranks, geometry; the abort word, the error
 *               record (the first failure's status and text) and one joined
 *               flag per rank, with the futex word init waits on;
 *   rank areas  one per rank, holding that rank's inboxes: a mailbox per
 *               peer (head/tail counters, turns, wake words, chunk headers),
 *               then the rings' chunk bytes;
 *   collective  each rank's barrier counter, turn and posted call, then
 *   area        three staging slots per rank (gpu/comm_host_coll.c says
 *               how the collectives use them, and their ordering).
 *
 * A mailbox carries one peer's messages to one rank, in order, through a
 * ring of ADAG_COMM_HOST_RING_CHUNKS chunks. A message of size bytes is
 * max(1, ceil(size / chunk)) chunks, each with a header (message number,
 * message size, offset, length), so a 0-byte message is still one chunk
 * and every recv checks the size its sender sent. Each send and recv is
 * numbered per peer when it is enqueued (under the rank's enqueue lock, so
 * the numbers follow the enqueue order even across streams) and runs on
 * its stream as host work (launch_host, the arguments copied) that waits
 * for its turn, moves its chunks and, for a send, waits until the receiver
 * has consumed them: like an NCCL kernel, a send with no matching recv
 * never completes.
 *
 * Memory ordering. Every shared counter is read and written seq_cst, the
 * discipline common/event.h's futex handshake requires of the conditions
 * it waits on (and on x86 costs what acquire/release do):
 *   head        (sender only) chunks published. The sender writes a chunk's
 *               header and bytes, then stores head: the receiver's load of
 *               head orders its reads of them after those writes;
 *   tail        (receiver only) chunks consumed. The receiver reads a
 *               chunk, then stores tail: the sender's load of tail orders
 *               its next write of that slot after those reads;
 *   send_turn,  (one side's stream threads) messages that side finished,
 *   recv_turn   so operations of one rank on several streams take turns in
 *               their enqueue order;
 *   joined[r]   set once by rank r at init; init waits until all are set;
 *   abort       set once (after the error record claimed): every wait
 *               passes it to adag__event_wait, which gives up with
 *               ADAG_ERR_CLOSED; adag__comm_host_fail then notifies every wake word;
 *   error_code  claimed by compare-and-swap (the first failure wins), then
 *               its text is written and error_ready stored (release);
 *               status loads error_ready (acquire) before reading the text.
 *               A later failure waits (bounded) for error_ready before it
 *               stores abort, so abort implies a complete text.
 * Waiters sleep on adag_event_t words in the segment (process-shared
 * futexes): recv_wake (head or recv_turn moved), send_wake (tail or
 * send_turn moved), join_wake; the collectives' coll_wake and turn_wake,
 * which adag__comm_host_fail's wake-up covers too.
 */
#include "gpu/comm_host_seg.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/event.h"
#include "common/fd.h"
#include "common/settings.h"
#include "gpu/comm.h"

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern const adag_comm_ops_t adag_comm_host_ops;

#define RING_CHUNKS ADAG_COMM_HOST_RING_CHUNKS
#define COMM_SPIN_NS ADAG_COMM_HOST_SPIN_NS
#define HEADER_BYTES ADAG_COMM_HOST_HEADER_BYTES

/* ---- waiting ---- */

typedef struct {
    const _Atomic uint64_t *counter;
    uint64_t value;
} reach_arg_t;

static int counter_reached(const void *p)
{
    const reach_arg_t *a = p;
    return atomic_load_explicit(a->counter, memory_order_seq_cst) >= a->value;
}

/* Waits (no deadline: the watchdog aborts) until *counter >= value: ADAG_OK,
 * or ADAG_ERR_CLOSED once the communicator is aborted. */
static adag_status_t wait_reached(seg_header_t *h, adag_event_t *ev,
                                  const _Atomic uint64_t *counter, uint64_t value,
                                  adag_spin_t *spin)
{
    reach_arg_t a = {counter, value};
    if (atomic_load_explicit(&h->abort, memory_order_seq_cst))
        return ADAG_ERR_CLOSED;
    return adag__event_wait(ev, counter_reached, &a, &h->abort, ADAG_FOREVER, spin);
}

/* ---- ids ---- */

typedef struct {
    int fd;
} host_owner_t;

static _Atomic uint64_t live_ids;

static adag_status_t host_id_create(unsigned nranks, adag_comm_id_t *id, void **owner)
{
    seg_header_t g;
    adag_comm_host_id_t hid;
    adag_status_t st;
    if (nranks < 1 || nranks > ADAG_COMM_MAX_RANKS)
        return adag__error(ADAG_ERR_INVALID, "host communicator: %u ranks (1 to %d)", nranks,
                          ADAG_COMM_MAX_RANKS);
    memset(&g, 0, sizeof(g));
    adag__comm_host_seg_layout(nranks, &g);
    host_owner_t *o = calloc(1, sizeof(*o));
    if (!o)
        return adag__error(ADAG_ERR_NO_MEMORY, "host communicator: out of memory");
    o->fd = adag__fd_above_stdio(memfd_create("adag-comm", MFD_CLOEXEC));
    if (o->fd < 0) {
        st = adag__error_errno(errno, "host communicator: memfd_create for %u ranks", nranks);
        goto fail;
    }
    if (ftruncate(o->fd, (off_t)g.size) != 0) {
        st = adag__error_errno(errno, "host communicator: a segment of %llu bytes for %u ranks",
                              (unsigned long long)g.size, nranks);
        goto fail_fd;
    }
    /* only the header is written here: the rest is zero, as it must start */
    seg_header_t *h = mmap(NULL, HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, o->fd, 0);
    if (h == MAP_FAILED) {
        st = adag__error_errno(errno, "host communicator: mapping its header");
        goto fail_fd;
    }
    h->magic = g.magic;
    h->version = g.version;
    h->nranks = g.nranks;
    h->ring_chunks = g.ring_chunks;
    h->chunk_bytes = g.chunk_bytes;
    h->boxes_bytes = g.boxes_bytes;
    h->area_bytes = g.area_bytes;
    h->coll_offset = g.coll_offset;
    h->slot_bytes = g.slot_bytes;
    h->size = g.size;
    munmap(h, HEADER_BYTES);
    memset(&hid, 0, sizeof(hid));
    hid.magic = ADAG_COMM_HOST_ID_MAGIC;
    hid.version = ADAG_COMM_HOST_VERSION;
    hid.nranks = nranks;
    st = adag__memfd_ref_make(o->fd, g.size, "host communicator", "communicator id",
                             &hid.segment);
    if (st != ADAG_OK)
        goto fail_fd;
    memset(id, 0, sizeof(*id));
    memcpy(id->bytes, &hid, sizeof(hid));
    id->len = sizeof(hid);
    *owner = o;
    atomic_fetch_add(&live_ids, 1);
    return ADAG_OK;
fail_fd:
    close(o->fd);
fail:
    free(o);
    return st;
}

static void host_id_destroy(void *owner)
{
    host_owner_t *o = owner;
    if (!o)
        return;
    close(o->fd);
    free(o);
    atomic_fetch_sub(&live_ids, 1);
}

/* ---- a rank ---- */

static host_comm_t *host_comm(adag_comm_t *c)
{
    return (host_comm_t *)c;
}

static int all_joined(const void *p)
{
    const seg_t *g = p;
    for (unsigned r = 0; r < g->nranks; r++)
        if (!atomic_load_explicit(&g->h->joined[r], memory_order_seq_cst))
            return 0;
    return 1;
}

/* "1, 3" : the ranks that have not joined. */
static void missing_ranks(const seg_t *g, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned r = 0; r < g->nranks && used < len; r++)
        if (!atomic_load_explicit(&g->h->joined[r], memory_order_seq_cst))
            used += (size_t)snprintf(buf + used, len - used, "%s%u", used ? ", " : "", r);
}

/* Maps the segment an id names and checks it is one laid out for nranks. */
static adag_status_t map_segment(const adag_comm_id_t *id, unsigned nranks, const char *who,
                                 seg_t *out)
{
    adag_comm_host_id_t hid;
    seg_header_t want;
    adag_status_t st = ADAG_OK;
    if (id->len != sizeof(hid))
        return adag__error(ADAG_ERR_PROTOCOL, "%s: malformed id (%u bytes; a host id is %zu)", who,
                          id->len, sizeof(hid));
    memcpy(&hid, id->bytes, sizeof(hid));
    if (hid.magic != ADAG_COMM_HOST_ID_MAGIC || hid.version != ADAG_COMM_HOST_VERSION)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "%s: malformed id (magic 0x%x, version %u; want 0x%x, version %d)", who,
                          hid.magic, hid.version, ADAG_COMM_HOST_ID_MAGIC, ADAG_COMM_HOST_VERSION);
    if (hid.nranks != nranks)
        return adag__error(ADAG_ERR_PROTOCOL, "%s: the id is for %u ranks, not %u", who,
                          hid.nranks, nranks);
    memset(&want, 0, sizeof(want));
    adag__comm_host_seg_layout(nranks, &want);
    if (hid.segment.size != want.size)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "%s: the id names a segment of %llu bytes; %u ranks take %llu", who,
                          (unsigned long long)hid.segment.size, nranks,
                          (unsigned long long)want.size);
    int fd = adag__memfd_ref_open(&hid.segment, want.size, who, "communicator id", &st);
    if (fd < 0)
        return st;
    seg_header_t *h = mmap(NULL, (size_t)want.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the segment */
    if (h == MAP_FAILED)
        return adag__error_errno(errno, "%s: mapping the segment (%llu bytes)", who,
                                (unsigned long long)want.size);
    if (h->magic != want.magic || h->version != want.version || h->nranks != want.nranks ||
        h->ring_chunks != want.ring_chunks || h->chunk_bytes != want.chunk_bytes ||
        h->boxes_bytes != want.boxes_bytes || h->area_bytes != want.area_bytes ||
        h->coll_offset != want.coll_offset || h->slot_bytes != want.slot_bytes ||
        h->size != want.size) {
        st = adag__error(ADAG_ERR_PROTOCOL,
                        "%s: the segment's header does not describe a host communicator of %u "
                        "ranks (magic 0x%x, version %u, %u ranks, %llu-byte chunks)",
                        who, nranks, h->magic, h->version, h->nranks,
                        (unsigned long long)h->chunk_bytes);
        munmap(h, (size_t)want.size);
        return st;
    }
    *out = (seg_t){h,
                   (size_t)want.size,
                   nranks,
                   want.chunk_bytes,
                   want.boxes_bytes,
                   want.area_bytes,
                   want.coll_offset,
                   want.slot_bytes};
    return ADAG_OK;
}

/* Sets rank's joined flag and waits until every rank's is set. */
static adag_status_t join(const seg_t *g, unsigned rank, int64_t deadline, const char *who)
{
    seg_header_t *h = g->h;
    uint32_t unset = 0;
    char missing[256];
    if (!atomic_compare_exchange_strong_explicit(&h->joined[rank], &unset, 1,
                                                 memory_order_seq_cst, memory_order_seq_cst))
        return adag__error(ADAG_ERR_PROTOCOL, "%s: rank %u already joined this communicator",
                          who, rank);
    adag__event_notify(&h->join_wake);
    adag_spin_t spin;
    adag__spin_init(&spin, (adag_wait_policy_t){COMM_SPIN_NS, 1});
    adag_status_t st = adag__event_wait(&h->join_wake, all_joined, g, &h->abort, deadline, &spin);
    if (st == ADAG_ERR_CLOSED)
        return adag__comm_host_seg_status(h, who);
    if (st == ADAG_ERR_TIMEOUT) {
        missing_ranks(g, missing, sizeof(missing));
        /* the ranks waiting with it give up now rather than at their own deadlines */
        adag__comm_host_fail(g, ADAG_ERR_TIMEOUT,
                             "rank %u gave up at its init deadline: rank(s) %s of %u "
                             "had not joined",
                             rank, missing, g->nranks);
        return adag__error(ADAG_ERR_TIMEOUT, "%s: init deadline passed: rank(s) %s of %u had not "
                          "joined", who, missing, g->nranks);
    }
    return st;
}

static adag_status_t host_init(const adag_comm_id_t *id, unsigned nranks, unsigned rank,
                               adag_device_t *dev, int64_t deadline, adag_comm_t **out)
{
    char who[48];
    seg_t g;
    adag_status_t st;
    *out = NULL;
    snprintf(who, sizeof(who), "host communicator (rank %u of %u)", rank, nranks);
    if (!id || !dev || nranks < 1 || nranks > ADAG_COMM_MAX_RANKS || rank >= nranks)
        return adag__error(ADAG_ERR_INVALID, "%s: init needs an id, a device, 1 to %d ranks and "
                          "a rank below them", who, ADAG_COMM_MAX_RANKS);
    if (dev->ops->kind != ADAG_DEV_EMULATED)
        return adag__error(ADAG_ERR_INVALID, "%s: its ranks are on emulated devices, not %s", who,
                          dev->ops->name);
    if ((st = map_segment(id, nranks, who, &g)) != ADAG_OK)
        return st;
    if ((st = adag__comm_host_seg_status(g.h, who)) != ADAG_OK)
        goto fail;
    if ((st = join(&g, rank, deadline, who)) != ADAG_OK)
        goto fail;
    host_comm_t *c = calloc(1, sizeof(*c));
    if (!c) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "%s: out of memory", who);
        adag__comm_host_fail(&g, ADAG_ERR_NO_MEMORY, "rank %u ran out of memory in init", rank);
        goto fail;
    }
    c->base = (adag_comm_t){&adag_comm_host_ops, nranks, rank, dev,
                            adag__settings_env_int("ADAG_COMM_TIMEOUT_MS")};
    c->seg = g;
    memcpy(c->who, who, sizeof(c->who));
    pthread_mutex_init(&c->enqueue_lock, NULL);
    atomic_init(&c->refs, 1);
    atomic_fetch_add(&adag__comm_host_live_comms, 1);
    *out = &c->base;
    return ADAG_OK;
fail:
    munmap(g.h, g.size);
    return st;
}

/* ---- send and recv, run on the streams ---- */

typedef struct {
    host_comm_t *c;
    void *buf;
    uint64_t size, seq;
    uint32_t peer, is_send;
} comm_op_t;

static uint64_t chunks_of(uint64_t size, uint64_t chunk)
{
    return size == 0 ? 1 : (size + chunk - 1) / chunk;
}

static void run_send(const comm_op_t *op, adag_spin_t *spin)
{
    const seg_t *g = &op->c->seg;
    seg_header_t *h = g->h;
    unsigned me = op->c->base.rank;
    mailbox_t *mb = adag__comm_host_mailbox(g, me, op->peer);
    unsigned char *ring = adag__comm_host_ring_bytes(g, me, op->peer);
    const unsigned char *src = op->buf;
    uint64_t chunk = g->chunk_bytes, off = 0;
    if (wait_reached(h, &mb->send_wake, &mb->send_turn, op->seq, spin) != ADAG_OK)
        return;
    uint64_t head = atomic_load_explicit(&mb->head, memory_order_seq_cst);
    for (uint64_t i = 0, n = chunks_of(op->size, chunk); i < n; i++) {
        /* room: the receiver consumed the chunk RING_CHUNKS back */
        if (head >= RING_CHUNKS &&
            wait_reached(h, &mb->send_wake, &mb->tail, head - RING_CHUNKS + 1, spin) != ADAG_OK)
            return;
        uint64_t slot = head % RING_CHUNKS;
        uint64_t len = op->size - off < chunk ? op->size - off : chunk;
        mb->heads[slot] = (chunk_head_t){op->seq, op->size, off, len};
        memcpy(ring + slot * chunk, src + off, (size_t)len);
        off += len;
        atomic_store_explicit(&mb->head, ++head, memory_order_seq_cst);
        adag__event_notify(&mb->recv_wake);
    }
    atomic_store_explicit(&mb->send_turn, op->seq + 1, memory_order_seq_cst);
    adag__event_notify(&mb->send_wake);
    /* done once the receiver has moved every chunk out */
    wait_reached(h, &mb->send_wake, &mb->tail, head, spin);
}

/* Checks the chunk header a receiver found; breaks the communicator and
 * returns nonzero if it is not the next piece of its message. */
static int chunk_wrong(const comm_op_t *op, const chunk_head_t *ch, uint64_t i, uint64_t got)
{
    host_comm_t *c = op->c;
    const seg_t *g = &c->seg;
    unsigned me = c->base.rank;
    if (ch->msg_seq != op->seq) {
        adag__comm_host_fail(g, ADAG_ERR_PROTOCOL,
                             "rank %u expected message %llu from rank %u; its ring "
                             "holds a chunk of message %llu",
                             me, (unsigned long long)op->seq, op->peer,
                             (unsigned long long)ch->msg_seq);
        return 1;
    }
    if (ch->msg_size != op->size) {
        adag__comm_host_fail(g, ADAG_ERR_PROTOCOL,
                             "size mismatch: rank %u sent %llu bytes to rank %u, whose "
                             "matching recv (message %llu from rank %u) takes %llu bytes",
                             op->peer, (unsigned long long)ch->msg_size, me,
                             (unsigned long long)op->seq, op->peer, (unsigned long long)op->size);
        return 1;
    }
    uint64_t want = op->size - got < g->chunk_bytes ? op->size - got : g->chunk_bytes;
    if (ch->offset != got || ch->len != want) {
        adag__comm_host_fail(g, ADAG_ERR_PROTOCOL,
                             "rank %u: chunk %llu of message %llu from rank %u is "
                             "bytes %llu+%llu, expected %llu+%llu",
                             me, (unsigned long long)i, (unsigned long long)op->seq, op->peer,
                             (unsigned long long)ch->offset, (unsigned long long)ch->len,
                             (unsigned long long)got, (unsigned long long)want);
        return 1;
    }
    return 0;
}

static void run_recv(const comm_op_t *op, adag_spin_t *spin)
{
    const seg_t *g = &op->c->seg;
    seg_header_t *h = g->h;
    unsigned me = op->c->base.rank;
    mailbox_t *mb = adag__comm_host_mailbox(g, op->peer, me);
    const unsigned char *ring = adag__comm_host_ring_bytes(g, op->peer, me);
    unsigned char *dst = op->buf;
    uint64_t chunk = g->chunk_bytes, got = 0;
    if (wait_reached(h, &mb->recv_wake, &mb->recv_turn, op->seq, spin) != ADAG_OK)
        return;
    uint64_t tail = atomic_load_explicit(&mb->tail, memory_order_seq_cst);
    for (uint64_t i = 0, n = chunks_of(op->size, chunk); i < n; i++) {
        if (wait_reached(h, &mb->recv_wake, &mb->head, tail + 1, spin) != ADAG_OK)
            return;
        uint64_t slot = tail % RING_CHUNKS;
        chunk_head_t ch = mb->heads[slot];
        if (chunk_wrong(op, &ch, i, got))
            return;
        memcpy(dst + got, ring + slot * chunk, (size_t)ch.len);
        got += ch.len;
        atomic_store_explicit(&mb->tail, ++tail, memory_order_seq_cst);
        adag__event_notify(&mb->send_wake);
    }
    atomic_store_explicit(&mb->recv_turn, op->seq + 1, memory_order_seq_cst);
    adag__event_notify(&mb->recv_wake);
}

/* The stream work of one send or recv (its arguments copied at enqueue). */
static void comm_op_main(void *arg)
{
    const comm_op_t *op = arg;
    adag_spin_t spin;
    adag__spin_init(&spin, (adag_wait_policy_t){COMM_SPIN_NS, 1});
    if (op->is_send)
        run_send(op, &spin);
    else
        run_recv(op, &spin);
    adag__comm_host_unref(op->c);
}

static adag_status_t enqueue_op(adag_comm_t *base, void *buf, size_t size, unsigned peer,
                                adag_dev_stream_t *s, int is_send)
{
    host_comm_t *c = host_comm(base);
    const char *verb = is_send ? "send to" : "recv from";
    if (peer >= base->nranks || peer == base->rank || !s || (!buf && size))
        return adag__error(ADAG_ERR_INVALID, "%s: %s rank %u: the peer must be another rank "
                          "below %u, with a stream and a buffer", c->who, verb, peer,
                          base->nranks);
    adag_status_t st = adag__comm_host_seg_status(c->seg.h, c->who);
    if (st != ADAG_OK)
        return st;
    pthread_mutex_lock(&c->enqueue_lock);
    uint64_t *seq = is_send ? &c->send_seq[peer] : &c->recv_seq[peer];
    comm_op_t op = {c, buf, size, *seq, peer, (uint32_t)is_send};
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    st = base->dev->ops->launch_host(s, comm_op_main, &op, sizeof(op));
    if (st == ADAG_OK)
        (*seq)++;
    else
        atomic_fetch_sub_explicit(&c->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&c->enqueue_lock);
    if (st != ADAG_OK)
        adag__error_prefix("%s: %s rank %u", c->who, verb, peer);
    return st;
}

static adag_status_t host_send(adag_comm_t *c, const void *buf, size_t size, unsigned peer,
                               adag_dev_stream_t *s)
{
    return enqueue_op(c, (void *)buf, size, peer, s, 1);
}

static adag_status_t host_recv(adag_comm_t *c, void *buf, size_t size, unsigned peer,
                               adag_dev_stream_t *s)
{
    return enqueue_op(c, buf, size, peer, s, 0);
}

static void host_abort(adag_comm_t *base)
{
    if (!base)
        return;
    host_comm_t *c = host_comm(base);
    adag__comm_host_fail(&c->seg, ADAG_ERR_CLOSED, "rank %u aborted the communicator", base->rank);
}

static adag_status_t host_status(adag_comm_t *base)
{
    host_comm_t *c = host_comm(base);
    return adag__comm_host_seg_status(c->seg.h, c->who);
}

static void host_destroy(adag_comm_t *base)
{
    if (base)
        adag__comm_host_unref(host_comm(base));
}

static void host_counts(adag_comm_counts_t *out)
{
    out->comms = atomic_load(&adag__comm_host_live_comms);
    out->ids = atomic_load(&live_ids);
}

static int host_probe(char *why, size_t len)
{
    const adag_device_ops_t *dev = adag__device_backend(ADAG_DEV_EMULATED);
    char dev_why[256] = "";
    if (dev->probe(dev_why, sizeof(dev_why)) == 0) {
        snprintf(why, len, "no emulated device (%s)", dev_why);
        return 0;
    }
    snprintf(why, len, "a memfd segment per communicator: a ring of %d x %llu KiB per pair of "
             "ranks up to 8 ranks, smaller beyond", RING_CHUNKS,
             (unsigned long long)(ADAG_COMM_HOST_CHUNK_MAX >> 10));
    return 1;
}

const adag_comm_ops_t adag_comm_host_ops = {
    .name = "host",
    .kind = ADAG_COMM_KIND_HOST,
    .device_kind = ADAG_DEV_EMULATED,
    .probe = host_probe,
    .id_create = host_id_create,
    .id_destroy = host_id_destroy,
    .init = host_init,
    .send = host_send,
    .recv = host_recv,
    .allreduce = adag__comm_host_allreduce,
    .allgather = adag__comm_host_allgather,
    .reducescatter = adag__comm_host_reducescatter,
    .broadcast = adag__comm_host_broadcast,
    .laggards = adag__comm_host_laggards,
    .abort = host_abort,
    .status = host_status,
    .destroy = host_destroy,
    .counts = host_counts,
};

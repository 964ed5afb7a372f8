/*
 * The host communicator's collectives (gpu/comm.h: allreduce, allgather,
 * reducescatter, broadcast), over the collective area of the segment
 * (gpu/comm_host_seg.c lays it out):
 *
 *   per rank    a coll_rank_t: `arrived` (the barriers it arrived at), its
 *               streams' `turn`, the call it posted (desc[seq % 2]) and,
 *               for a large allreduce, where its buffers are (bufs[seq % 2]);
 *   per rank    ADAG_COMM_HOST_COLL_SLOTS (3) staging slots of slot_bytes
 *               (adag__comm_host_slot_bytes: 1 MiB up to 8 ranks, halved so
 *               all slots stay under 48 MiB, at least 64 KiB).
 *
 * Barrier t: a rank stores arrived = t and waits until every rank's
 * arrived >= t. The ranks pass the same barriers (every rank computes the
 * same chunking from the same call), so their counters agree op after op.
 * Slots rotate with the barriers: what a rank stages after passing barrier
 * v goes to its slot v % 3, which it writes again only after barrier v + 3;
 * every algorithm below reads a slot staged after barrier v before it
 * arrives at v + 3, so a slot is never rewritten while a peer reads it.
 *
 * The algorithms (chunks of at most one slot per rank):
 *   flat       stage the chunk; barrier; every rank reads what it needs
 *              from every slot. allgather (copy every slot out), broadcast
 *              (copy the root's), reducescatter (each rank reduces its
 *              piece of every slot) and small allreduce (each rank reduces
 *              the whole chunk: one barrier), all in rank order;
 *   direct     (allreduce past FLAT_ALLREDUCE_BYTES, every rank's buffers
 *              in memfds) reads the peers' send and recv in place: see
 *              "Allreduce, direct" below;
 *   allreduce  (past FLAT_ALLREDUCE_BYTES otherwise) reduce-scatter then allgather,
 *              pipelined with one barrier per chunk: block r of each chunk
 *              is reduced by rank r from every slot in rank order into its
 *              recv, and copied back into its own slot's block r; after the
 *              next barrier every rank copies the other blocks out. Between
 *              two barriers a rank reduces chunk j, stages chunk j + 1 and
 *              gathers chunk j - 1 (three slots in use: the rotation).
 * Each element is reduced ((x0 op x1) op x2) ... whatever the path, so the
 * result does not depend on the number of chunks or on timing.
 *
 * Order and mismatches. Collectives are numbered per rank at enqueue
 * (under the enqueue lock send/recv use; their own sequence), and run on
 * the streams as step work (adag__host_launch_steps) that first waits for
 * its turn (the rank's earlier collectives finished, whatever their
 * stream).
 *
 * Steps. The stream thread runs an op with no deadline; a thread waiting
 * for the stream may run it with its own (gpu/host_stream.c, "helping").
 * At that deadline the op returns ADAG_ERR_TIMEOUT with its progress in
 * its coll_op_t (turn taken and call posted; barriers passed; arrived at
 * the next one) and is continued later from there. Each step is
 * idempotent until its barrier is passed: what it stages, reduces and
 * gathers is rewritten only three barriers later. Each rank
 * posts its call before the op's first barrier; after it, every rank
 * compares every posted call with rank 0's, before reading any slot: a
 * difference breaks the communicator (ADAG_ERR_PROTOCOL naming both calls).
 * desc[seq % 2] is stable while it is read: a rank posts call seq + 2 only
 * after the first barrier of call seq + 1, which every rank reaches after
 * its check of call seq.
 *
 * Memory ordering: arrived, turn and the abort word are seq_cst (the
 * discipline of common/event.h's futex handshake). A rank writes its slot,
 * its posted call and buffers (bufs, `failed`) and, direct, its recv
 * block, then stores arrived (release in effect); a peer loads arrived
 * (acquire in effect) before reading them. Reads of a slot (or of a
 * peer's buffers) precede the reader's later arrived store, which the
 * owner loads before it writes them again. Waiters sleep on the header's
 * coll_wake (every arrival notifies it) or their rank's turn_wake; every
 * wait gives up once the abort word is set (ADAG_ERR_CLOSED), and
 * adag__comm_host_fail wakes both.
 */
#include "common/log.h"
#include "gpu/comm_host_seg.h"
#include "gpu/comm_reduce.h"
#include "gpu/host_impl.h"

#include <stdio.h>
#include <string.h>

/* Up to this many bytes (times the ranks), allreduce is one flat round. */
#define FLAT_ALLREDUCE_BYTES ((uint64_t)64 << 10)
#define NSLOTS ADAG_COMM_HOST_COLL_SLOTS
/* reduce_from's tile (see there) */
#define REDUCE_TILE_BYTES ((uint64_t)8 << 10)

typedef enum {
    COLL_ALLREDUCE = 0,
    COLL_ALLGATHER = 1,
    COLL_REDUCESCATTER = 2,
    COLL_BROADCAST = 3,
} coll_kind_t;

static const char *coll_kind_name(uint32_t kind)
{
    static const char *const names[] = {"allreduce", "allgather", "reducescatter", "broadcast"};
    return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

/* "allreduce(count 100, f32, sum)", "broadcast(count 7, i8, root 2)":
 * fields of a call another process posted, so every name is looked up
 * with a bound. */
static void describe(const coll_desc_t *d, char *buf, size_t len)
{
    const char *dtype = d->dtype <= ADAG_DTYPE_BOOL ? adag_dtype_name(d->dtype) : "?";
    if (d->kind == COLL_ALLREDUCE || d->kind == COLL_REDUCESCATTER)
        snprintf(buf, len, "%s(count %llu, %s, %s)", coll_kind_name(d->kind),
                 (unsigned long long)d->count, dtype,
                 adag__reduce_op_name((adag_reduce_op_t)d->op));
    else if (d->kind == COLL_BROADCAST)
        snprintf(buf, len, "%s(count %llu, %s, root %u)", coll_kind_name(d->kind),
                 (unsigned long long)d->count, dtype, d->root);
    else
        snprintf(buf, len, "%s(count %llu, %s)", coll_kind_name(d->kind),
                 (unsigned long long)d->count, dtype);
}

/* One collective: its arguments, copied into the stream's work, and its
 * progress, kept there between the calls of coll_step. */
typedef struct coll_algo coll_algo_t;
typedef struct {
    host_comm_t *c;
    const unsigned char *send;
    unsigned char *recv;
    coll_desc_t desc;
    int started;             /* its turn came; its call is posted */
    int checked;             /* the calls were compared after the first barrier */
    int arrived;             /* it arrived at barrier `passed` and waits there */
    const coll_algo_t *algo; /* the phase it runs */
    uint64_t v0;             /* the rank's barriers passed when the phase began */
    uint64_t passed;         /* barriers of the phase passed */
    adag_spin_t spin;
} coll_op_t;

/* One call of coll_step, over the op's progress. */
typedef struct {
    const coll_op_t *op;
    const seg_t *g;
    unsigned n, me;
    size_t es; /* bytes per element */
} coll_run_t;

/* Rank q's slot that a rank staging after barrier v writes. */
static unsigned char *slot(const coll_run_t *r, unsigned q, uint64_t v)
{
    const seg_t *g = r->g;
    char *slots = (char *)g->h + g->coll_offset + adag__comm_host_coll_ctl_bytes(g->nranks);
    return (unsigned char *)slots + ((uint64_t)q * NSLOTS + v % NSLOTS) * g->slot_bytes;
}

typedef struct {
    const seg_t *g;
    uint64_t value;
} all_arrived_arg_t;

static int all_arrived(const void *p)
{
    const all_arrived_arg_t *a = p;
    for (unsigned q = 0; q < a->g->nranks; q++)
        if (atomic_load_explicit(&adag__comm_host_coll_rank(a->g, q)->arrived,
                                 memory_order_seq_cst) < a->value)
            return 0;
    return 1;
}

/* After the op's first barrier: every rank's posted call against rank 0's.
 * Nonzero (the communicator broken) on a difference. */
static int calls_differ(const coll_run_t *r)
{
    const coll_desc_t *mine = &r->op->desc;
    uint64_t seq = mine->seq;
    coll_desc_t first = adag__comm_host_coll_rank(r->g, 0)->desc[seq % 2];
    for (unsigned q = 1; q < r->n; q++) {
        coll_desc_t d = adag__comm_host_coll_rank(r->g, q)->desc[seq % 2];
        if (memcmp(&d, &first, sizeof(d)) == 0)
            continue;
        char a[96], b[96];
        describe(&first, a, sizeof(a));
        describe(&d, b, sizeof(b));
        adag__comm_host_fail(r->g, ADAG_ERR_PROTOCOL,
                            "collective mismatch: rank 0 called %s as its collective %llu; rank "
                            "%u called %s as its collective %llu",
                            a, (unsigned long long)first.seq, q, b, (unsigned long long)d.seq);
        return 1;
    }
    return 0;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* dst = src[0] op src[1] op ... in rank order, n elements; then AVG's
 * division. In tiles, so the partial result stays in the L1 cache while
 * every source is added to it. One source may be dst itself (an in-place
 * allreduce): its tile is copied aside before dst's is written. */
static void reduce_from(const coll_run_t *r, const unsigned char *const *src, unsigned char *dst,
                        uint64_t n)
{
    adag_dtype_t dtype = (adag_dtype_t)r->op->desc.dtype;
    adag_reduce_op_t op = (adag_reduce_op_t)r->op->desc.op;
    size_t es = r->es;
    uint64_t tile = REDUCE_TILE_BYTES / es;
    unsigned self = r->n;
    _Alignas(64) unsigned char kept[REDUCE_TILE_BYTES];
    for (unsigned q = 0; q < r->n; q++)
        if (src[q] == dst)
            self = q;
    for (uint64_t i = 0; i < n; i += tile) {
        uint64_t m = min_u64(tile, n - i);
        unsigned char *d = dst + i * es;
        if (self < r->n)
            memcpy(kept, d, m * es);
        for (unsigned q = 0; q < r->n; q++) {
            const unsigned char *from = q == self ? kept : src[q] + i * es;
            if (q == 0)
                memcpy(d, from, m * es);
            else
                adag__reduce_into(dtype, op, d, from, m);
        }
        if (op == ADAG_REDUCE_AVG)
            adag__reduce_divide(dtype, d, m, r->n);
    }
}

/* The same over n elements at byte `off` of every rank's slot staged
 * after barrier v. */
static void reduce_slots(const coll_run_t *r, uint64_t v, uint64_t off, unsigned char *dst,
                         uint64_t n)
{
    const unsigned char *src[ADAG_COMM_MAX_RANKS];
    for (unsigned q = 0; q < r->n; q++)
        src[q] = slot(r, q, v) + off;
    reduce_from(r, src, dst, n);
}

/* Chunks of at most per_chunk elements that cover count (at least one: a
 * 0-count collective still meets every rank). */
static uint64_t chunks_of(uint64_t count, uint64_t per_chunk)
{
    return count == 0 ? 1 : (count + per_chunk - 1) / per_chunk;
}

/* ---- the algorithms, as barriers and the work between them ---- */

/* An algorithm is one or more phases. A phase is nbarriers barriers:
 * before barrier b the rank does before(b); after the last, `then` (if
 * any) names the phase that follows (NULL: none), else the rank does
 * after_last and the op ends. Slots staged before barrier b of a phase
 * belong to v = v0 + b (the rank's barriers passed then). Every rank
 * reads the same posted state after a barrier, so every rank picks the
 * same next phase. */
struct coll_algo {
    uint64_t (*nbarriers)(const coll_run_t *r);
    void (*before)(const coll_run_t *r, uint64_t b);
    const coll_algo_t *(*then)(const coll_run_t *r);
    void (*after_last)(const coll_run_t *r);
};

/* Flat: stage chunk j; barrier j; every rank reads what it needs of chunk
 * j from every slot (before barrier j + 1, or after the last). */

/* elements of each rank's send per chunk (reducescatter: of each block) */
static uint64_t flat_per_chunk(const coll_run_t *r)
{
    const coll_desc_t *d = &r->op->desc;
    return r->g->slot_bytes / r->es / (d->kind == COLL_REDUCESCATTER ? r->n : 1);
}

static uint64_t flat_nbarriers(const coll_run_t *r)
{
    return chunks_of(r->op->desc.count, flat_per_chunk(r));
}

static void flat_stage(const coll_run_t *r, uint64_t j)
{
    const coll_desc_t *d = &r->op->desc;
    const unsigned char *send = r->op->send;
    uint64_t per = flat_per_chunk(r), off = j * per, m = min_u64(per, d->count - off);
    unsigned char *mine = slot(r, r->me, r->op->v0 + j);
    size_t es = r->es;
    if (d->kind == COLL_REDUCESCATTER) {
        for (unsigned b = 0; b < r->n; b++)
            memcpy(mine + b * m * es, send + (b * d->count + off) * es, m * es);
    } else if (d->kind != COLL_BROADCAST || r->me == d->root) {
        memcpy(mine, send + off * es, m * es);
    }
}

static void flat_read(const coll_run_t *r, uint64_t j)
{
    const coll_desc_t *d = &r->op->desc;
    unsigned char *recv = r->op->recv;
    uint64_t per = flat_per_chunk(r), off = j * per, m = min_u64(per, d->count - off);
    uint64_t v = r->op->v0 + j;
    size_t es = r->es;
    switch (d->kind) {
    case COLL_ALLREDUCE:
        reduce_slots(r, v, 0, recv + off * es, m);
        break;
    case COLL_REDUCESCATTER:
        reduce_slots(r, v, r->me * m * es, recv + off * es, m);
        break;
    case COLL_ALLGATHER:
        for (unsigned q = 0; q < r->n; q++)
            memcpy(recv + (q * d->count + off) * es, slot(r, q, v), m * es);
        break;
    case COLL_BROADCAST:
        memcpy(recv + off * es, slot(r, d->root, v), m * es);
        break;
    }
}

static void flat_before(const coll_run_t *r, uint64_t b)
{
    if (b > 0)
        flat_read(r, b - 1);
    flat_stage(r, b);
}

static void flat_after_last(const coll_run_t *r)
{
    flat_read(r, flat_nbarriers(r) - 1);
}

static const coll_algo_t flat_algo = {flat_nbarriers, flat_before, NULL, flat_after_last};

/* Allreduce, pipelined: reduce-scatter then allgather with one barrier per
 * chunk. Before barrier b (1..k) a rank reduces its block of chunk b - 1,
 * stages chunk b and gathers the other blocks of chunk b - 2. */

static uint64_t pipe_per_chunk(const coll_run_t *r)
{
    return r->g->slot_bytes / r->es;
}

static uint64_t pipe_chunks(const coll_run_t *r)
{
    return chunks_of(r->op->desc.count, pipe_per_chunk(r));
}

static uint64_t pipe_nbarriers(const coll_run_t *r)
{
    return pipe_chunks(r) + 1;
}

/* Block q of a chunk of m elements: [*lo, *lo + *len). */
static void block_of(const coll_run_t *r, uint64_t m, unsigned q, uint64_t *lo, uint64_t *len)
{
    *lo = m * q / r->n;
    *len = m * (q + 1) / r->n - *lo;
}

/* Chunk j's offset and length in elements. */
static void pipe_chunk(const coll_run_t *r, uint64_t j, uint64_t *off, uint64_t *m)
{
    uint64_t per = pipe_per_chunk(r);
    *off = j * per;
    *m = min_u64(per, r->op->desc.count - *off);
}

/* Rank me's block of chunk j: reduced into recv, then published in its
 * own slot for the others. */
static void reduce_block(const coll_run_t *r, uint64_t j)
{
    uint64_t off, m, lo, len, v = r->op->v0 + j;
    size_t es = r->es;
    pipe_chunk(r, j, &off, &m);
    block_of(r, m, r->me, &lo, &len);
    unsigned char *dst = r->op->recv + (off + lo) * es;
    reduce_slots(r, v, lo * es, dst, len);
    memcpy(slot(r, r->me, v) + lo * es, dst, len * es);
}

/* Every other rank's reduced block of chunk j. */
static void gather_blocks(const coll_run_t *r, uint64_t j)
{
    uint64_t off, m, v = r->op->v0 + j;
    size_t es = r->es;
    pipe_chunk(r, j, &off, &m);
    for (unsigned q = 0; q < r->n; q++) {
        uint64_t lo, len;
        if (q == r->me)
            continue;
        block_of(r, m, q, &lo, &len);
        memcpy(r->op->recv + (off + lo) * es, slot(r, q, v) + lo * es, len * es);
    }
}

static void pipe_before(const coll_run_t *r, uint64_t b)
{
    uint64_t k = pipe_chunks(r);
    if (b > 0)
        reduce_block(r, b - 1);
    if (b < k) {
        uint64_t off, m;
        pipe_chunk(r, b, &off, &m);
        memcpy(slot(r, r->me, r->op->v0 + b), r->op->send + off * r->es, m * r->es);
    }
    if (b > 1)
        gather_blocks(r, b - 2);
}

static void pipe_after_last(const coll_run_t *r)
{
    gather_blocks(r, pipe_chunks(r) - 1);
}

static const coll_algo_t pipelined_allreduce_algo = {pipe_nbarriers, pipe_before, NULL,
                                                     pipe_after_last};

/* Allreduce, direct (past FLAT_ALLREDUCE_BYTES, when every rank's send
 * and recv lie in memfds: the emulated device's memory, its own or imported).
 * Three phases of one barrier each:
 *   offer    every rank has posted, with its call, where its buffers are
 *            (coll_bufs_t), or that they cannot be mapped. If one cannot,
 *            the op goes on as the pipelined allreduce;
 *   reduce   rank r maps its peers' buffers (gpu/comm_host_peers.c) and
 *            reduces block r of every rank's send, in rank order, into its
 *            recv: no staging, each byte of the sends is read once. A rank
 *            that cannot map a peer's buffer posts `failed` (and logs why)
 *            instead, and every rank then goes on with the pipelined
 *            allreduce, which rewrites all of recv;
 *   gather   every rank copies the other blocks from their owners' recv.
 *            Its barrier ends the op: no rank's buffers are given back to
 *            its stream before every peer has read them.
 * A rank writes its own recv only; its send is read by all. In place
 * (send == recv) that still holds: rank q reads block q of every send and
 * writes block q of its own recv, which no other rank reads before the
 * gather (reduce_from keeps its own tile before overwriting it); the
 * gather rewrites the other blocks after the reduce barrier, when every
 * read of the sends is done. */

static uint64_t one_barrier(const coll_run_t *r)
{
    (void)r;
    return 1;
}

static const coll_bufs_t *posted_bufs(const coll_run_t *r, unsigned q)
{
    return &adag__comm_host_coll_rank(r->g, q)->bufs[r->op->desc.seq % 2];
}

static void nothing_before(const coll_run_t *r, uint64_t b)
{
    (void)r;
    (void)b;
}

static void nothing_after(const coll_run_t *r)
{
    (void)r;
}

/* Rank q's send (or recv) bytes of block `block`: its own pointers for
 * this rank, else mapped from what q posted; NULL with the error
 * recorded. */
static const unsigned char *block_bytes(const coll_run_t *r, unsigned q, int recv, unsigned block)
{
    uint64_t lo, len;
    block_of(r, r->op->desc.count, block, &lo, &len);
    if (q == r->me)
        return (recv ? r->op->recv : r->op->send) + lo * r->es;
    coll_bufs_t b = *posted_bufs(r, q); /* another process writes it: a copy, then checked */
    return adag__comm_host_peer_bytes(r->op->c, q, recv ? &b.recv : &b.send,
                                     (recv ? b.recv_off : b.send_off) + lo * r->es, len * r->es);
}

static const coll_algo_t direct_reduce_phase, direct_gather_phase;

static const coll_algo_t *after_offer(const coll_run_t *r)
{
    for (unsigned q = 0; q < r->n; q++)
        if (posted_bufs(r, q)->offered != 1)
            return &pipelined_allreduce_algo;
    return &direct_reduce_phase;
}

static const coll_algo_t direct_offer_phase = {one_barrier, nothing_before, after_offer,
                                               nothing_after};

static void direct_reduce(const coll_run_t *r, uint64_t b)
{
    (void)b;
    const unsigned char *src[ADAG_COMM_MAX_RANKS];
    uint64_t lo, len;
    for (unsigned q = 0; q < r->n; q++) {
        /* the recv too, so a failure to map shows here, where every rank
         * can still go another way */
        if (!(src[q] = block_bytes(r, q, 0, r->me)) || !block_bytes(r, q, 1, q)) {
            ADAG_LOG_WARN("%s; its allreduce stages its buffers from now on", adag_last_error());
            r->op->c->direct_off = 1;
            adag__comm_host_coll_rank(r->g, r->me)->bufs[r->op->desc.seq % 2].failed = 1;
            return;
        }
    }
    block_of(r, r->op->desc.count, r->me, &lo, &len);
    reduce_from(r, src, r->op->recv + lo * r->es, len);
}

static const coll_algo_t *after_direct_reduce(const coll_run_t *r)
{
    for (unsigned q = 0; q < r->n; q++)
        if (posted_bufs(r, q)->failed)
            return &pipelined_allreduce_algo;
    return &direct_gather_phase;
}

static const coll_algo_t direct_reduce_phase = {one_barrier, direct_reduce, after_direct_reduce,
                                                nothing_after};

static void direct_gather(const coll_run_t *r, uint64_t b)
{
    (void)b;
    for (unsigned q = 0; q < r->n; q++) {
        uint64_t lo, len;
        const unsigned char *src;
        if (q == r->me)
            continue;
        block_of(r, r->op->desc.count, q, &lo, &len);
        if (!(src = block_bytes(r, q, 1, q))) { /* mapped in the reduce phase: not expected */
            adag__comm_host_fail(r->g, ADAG_ERR_PROTOCOL, "rank %u lost its map of rank %u's "
                                "buffer: %s", r->me, q, adag_last_error());
            return;
        }
        memcpy(r->op->recv + lo * r->es, src, len * r->es);
    }
}

static const coll_algo_t direct_gather_phase = {one_barrier, direct_gather, NULL, nothing_after};

/* ---- running and enqueueing ---- */

static int turn_reached(const void *p)
{
    const coll_op_t *op = p;
    return atomic_load_explicit(&adag__comm_host_coll_rank(&op->c->seg, op->c->base.rank)->turn,
                                memory_order_seq_cst) >= op->desc.seq;
}

/* What a rank posts for the direct allreduce: where its buffers are, if
 * they lie in memfds its peers can map. */
static void post_bufs(const coll_run_t *r, coll_bufs_t *mine)
{
    coll_bufs_t b = {0};
    size_t bytes = (size_t)r->op->desc.count * r->es;
    b.offered = !r->op->c->direct_off &&
                adag__host_ranges_memfd(r->op->send, bytes, &b.send, &b.send_off) &&
                adag__host_ranges_memfd(r->op->recv, bytes, &b.recv, &b.recv_off);
    *mine = b;
}

/* Runs the op from where it stopped until it finishes (ADAG_OK, or a
 * failure: the communicator is broken or aborted) or the deadline comes
 * while it waits (ADAG_ERR_TIMEOUT, its progress kept in *op). */
static adag_status_t coll_advance(coll_op_t *op, int64_t deadline)
{
    host_comm_t *c = op->c;
    coll_rank_t *mine = adag__comm_host_coll_rank(&c->seg, c->base.rank);
    seg_header_t *h = c->seg.h;
    const coll_desc_t *d = &op->desc;
    coll_run_t r = {op, &c->seg, c->base.nranks, c->base.rank, adag_dtype_size(d->dtype)};
    adag_status_t st;
    if (atomic_load_explicit(&h->abort, memory_order_seq_cst))
        return ADAG_ERR_CLOSED;
    if (!op->started) {
        if ((st = adag__event_wait(&mine->turn_wake, turn_reached, op, &h->abort, deadline,
                                  &op->spin)) != ADAG_OK)
            return st;
        op->v0 = atomic_load_explicit(&mine->arrived, memory_order_seq_cst);
        mine->desc[d->seq % 2] = *d;
        /* every rank picks the first phase from the call alone */
        op->algo = &flat_algo;
        if (d->kind == COLL_ALLREDUCE && d->count * r.es * r.n > FLAT_ALLREDUCE_BYTES) {
            op->algo = &direct_offer_phase;
            post_bufs(&r, &mine->bufs[d->seq % 2]);
        }
        op->started = 1;
    }
    for (;;) {
        const coll_algo_t *algo = op->algo;
        if (op->passed == algo->nbarriers(&r)) {
            const coll_algo_t *next = algo->then ? algo->then(&r) : NULL;
            if (!next)
                break;
            op->algo = next;
            op->v0 += op->passed;
            op->passed = 0;
            continue;
        }
        all_arrived_arg_t a = {r.g, op->v0 + op->passed + 1};
        if (!op->arrived) {
            /* Barrier t: a rank stores arrived = t, then waits until every
             * rank's arrived >= t. */
            algo->before(&r, op->passed);
            atomic_store_explicit(&mine->arrived, a.value, memory_order_seq_cst);
            adag__event_notify(&h->coll_wake);
            op->arrived = 1;
            if (atomic_load_explicit(&h->abort, memory_order_seq_cst))
                return ADAG_ERR_CLOSED;
        }
        if ((st = adag__event_wait(&h->coll_wake, all_arrived, &a, &h->abort, deadline,
                                  &op->spin)) != ADAG_OK)
            return st;
        op->arrived = 0;
        op->passed++;
        if (!op->checked) {
            op->checked = 1;
            if (calls_differ(&r))
                return ADAG_ERR_PROTOCOL;
        }
        if (atomic_load_explicit(&h->abort, memory_order_seq_cst))
            return ADAG_ERR_CLOSED; /* a phase above failed the communicator */
    }
    op->algo->after_last(&r);
    atomic_store_explicit(&mine->turn, d->seq + 1, memory_order_seq_cst);
    adag__event_notify(&mine->turn_wake);
    return ADAG_OK;
}

/* The stream's work (adag__host_launch_steps): the op until it finishes
 * or the deadline. */
static adag_status_t coll_step(void *arg, int64_t deadline)
{
    coll_op_t *op = arg;
    if (coll_advance(op, deadline) == ADAG_ERR_TIMEOUT)
        return ADAG_ERR_TIMEOUT;
    adag__comm_host_unref(op->c);
    return ADAG_OK;
}

/* Checks a call and enqueues it on s, numbered. */
static adag_status_t enqueue_coll(adag_comm_t *base, coll_kind_t kind, const void *send,
                                  void *recv, size_t count, adag_dtype_t dtype,
                                  adag_reduce_op_t op, unsigned root, adag_dev_stream_t *s)
{
    host_comm_t *c = (host_comm_t *)base;
    const char *name = coll_kind_name(kind);
    int reduces = kind == COLL_ALLREDUCE || kind == COLL_REDUCESCATTER;
    size_t es = dtype == ADAG_DTYPE_BYTES ? 0 : adag_dtype_size(dtype);
    if (es == 0)
        return adag__error(ADAG_ERR_INVALID, "%s: %s of %zu elements: dtype %d (%s) is not a "
                          "tensor dtype", c->who, name, count, (int)dtype, adag_dtype_name(dtype));
    if (reduces && !adag__reduce_supported(dtype, op))
        return adag__error(ADAG_ERR_INVALID, "%s: %s of %zu %s elements: op %d (%s) does not "
                          "reduce %s", c->who, name, count, adag_dtype_name(dtype), (int)op,
                          adag__reduce_op_name(op), adag_dtype_name(dtype));
    if (kind == COLL_BROADCAST && root >= base->nranks)
        return adag__error(ADAG_ERR_INVALID, "%s: broadcast from root %u: there are %u ranks",
                          c->who, root, base->nranks);
    int reads_send = kind != COLL_BROADCAST || root == base->rank;
    if (!s || (count && (!recv || (reads_send && !send))))
        return adag__error(ADAG_ERR_INVALID, "%s: %s of %zu elements needs a stream and buffers",
                          c->who, name, count);
    if (count > SIZE_MAX / es / base->nranks)
        return adag__error(ADAG_ERR_INVALID, "%s: %s of %zu %s elements for %u ranks overflows "
                          "a size", c->who, name, count, adag_dtype_name(dtype), base->nranks);
    adag_status_t st = adag__comm_host_seg_status(c->seg.h, c->who);
    if (st != ADAG_OK)
        return st;
    coll_op_t work = {c, send, recv,
                      (coll_desc_t){0, count, (uint32_t)kind, (uint32_t)dtype,
                                    reduces ? (uint32_t)op : 0,
                                    kind == COLL_BROADCAST ? root : 0},
                      0, 0, 0, NULL, 0, 0, {0}};
    adag__spin_init(&work.spin, (adag_wait_policy_t){ADAG_COMM_HOST_SPIN_NS, 1});
    pthread_mutex_lock(&c->enqueue_lock);
    work.desc.seq = c->coll_seq;
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    st = adag__host_launch_steps(s, coll_step, &work, sizeof(work));
    if (st == ADAG_OK)
        c->coll_seq++;
    else
        atomic_fetch_sub_explicit(&c->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&c->enqueue_lock);
    if (st != ADAG_OK)
        adag__error_prefix("%s: %s of %zu elements", c->who, name, count);
    return st;
}

adag_status_t adag__comm_host_allreduce(adag_comm_t *c, const void *send, void *recv,
                                       size_t count, adag_dtype_t dtype, adag_reduce_op_t op,
                                       adag_dev_stream_t *s)
{
    return enqueue_coll(c, COLL_ALLREDUCE, send, recv, count, dtype, op, 0, s);
}

adag_status_t adag__comm_host_allgather(adag_comm_t *c, const void *send, void *recv,
                                       size_t count, adag_dtype_t dtype, adag_dev_stream_t *s)
{
    return enqueue_coll(c, COLL_ALLGATHER, send, recv, count, dtype, ADAG_REDUCE_SUM, 0, s);
}

adag_status_t adag__comm_host_reducescatter(adag_comm_t *c, const void *send, void *recv,
                                           size_t count, adag_dtype_t dtype,
                                           adag_reduce_op_t op, adag_dev_stream_t *s)
{
    return enqueue_coll(c, COLL_REDUCESCATTER, send, recv, count, dtype, op, 0, s);
}

adag_status_t adag__comm_host_broadcast(adag_comm_t *c, const void *send, void *recv,
                                       size_t count, adag_dtype_t dtype, unsigned root,
                                       adag_dev_stream_t *s)
{
    return enqueue_coll(c, COLL_BROADCAST, send, recv, count, dtype, ADAG_REDUCE_SUM, root, s);
}

unsigned adag__comm_host_laggards(adag_comm_t *base, uint64_t *ranks)
{
    const host_comm_t *c = (const host_comm_t *)base;
    uint64_t arrived[ADAG_COMM_MAX_RANKS], furthest = 0;
    unsigned n = 0;
    *ranks = 0;
    /* a snapshot, acquire loads: a diagnosis, nothing is ordered by it */
    for (unsigned r = 0; r < c->seg.nranks; r++) {
        arrived[r] = atomic_load_explicit(&adag__comm_host_coll_rank(&c->seg, r)->arrived,
                                          memory_order_acquire);
        if (arrived[r] > furthest)
            furthest = arrived[r];
    }
    for (unsigned r = 0; r < c->seg.nranks; r++)
        if (arrived[r] < furthest) {
            *ranks |= (uint64_t)1 << r;
            n++;
        }
    return n;
}

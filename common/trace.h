/*
 * Trace rings: what a thread does (waiting for an input, running a method,
 * waiting for room, publishing), kept in memory, the oldest overwritten.
 * Adding a record takes no lock, no system call, no allocation and no
 * locked instruction: the caller reads the span clock, the ring stores
 * one 64-byte record (one cache line).
 *
 * A record is either one span (a kind, start and end: a collective, an
 * execute or get of the driver, a backend's transfer) or an actor loop's
 * whole op (ADAG_SPAN_OP): five stamps, wait start, inputs in, room got,
 * method done, published, which adag__trace_expand turns into up to four
 * spans (wait input, wait room, compute, publish). An op's record costs
 * one clock read per boundary and one store of a line, where four spans
 * cost four.
 *
 * A layer below dag/ adds spans of its own with one call, adag__trace_add,
 * and a kind from ADAG_SPAN_BACKEND up, into the ring of the thread it
 * runs on. This file knows those kinds only by number: the layer that
 * records them numbers and names them (the channels' in
 * transport/channel.h, adag__chan_span_name), and the exporter asks it.
 *
 * Two kinds of ring:
 *   - one writer (an actor loop's): records get indices 0, 1, 2, ... in
 *     the order added; head counts them.
 *   - indexed (the driver's: execute and get run on any thread): the
 *     caller gives each record its index (2 ref for an execute, 2 ref + 1
 *     for its get), which only one thread ever writes at a time, so no
 *     claim is needed either; slots must outnumber twice the executions in
 *     flight (a ref's index is reused once ref + slots / 2 executes, after
 *     ref was released).
 *
 * Memory ordering: each slot is a seqlock without fences (TSan models
 * them poorly). The writer of index i stores the slot's stamp 0, the
 * fields with release (so a reader that reads any of them also sees the
 * stamp's 0, which precedes them), then stamp i + 1 (release). A reader
 * loads the stamp (acquire), the fields (acquire), then the stamp again:
 * the same nonzero value both times, the fields are that record's, whole.
 * On x86 every access is a plain move.
 */
#ifndef ADAG_COMMON_TRACE_H
#define ADAG_COMMON_TRACE_H

#include "common/clock.h"

#include <stdatomic.h>
#include <stdint.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <adag.h>

typedef enum {
    ADAG_SPAN_WAIT_INPUT = 1, /* a loop waits for an input value (arg: channel) */
    ADAG_SPAN_COMPUTE = 2,    /* a method runs (op: which; arg: -) */
    ADAG_SPAN_WAIT_ROOM = 3,  /* waiting for a free output slot (arg: channel) */
    ADAG_SPAN_PUBLISH = 4,    /* publishing an output (arg: channel) */
    ADAG_SPAN_COLLECTIVE = 5, /* a collective operation (op: which) */
    ADAG_SPAN_EXECUTE = 6,    /* the driver starts an execution (arg: -) */
    ADAG_SPAN_GET = 7,        /* the driver waits for a result (arg: -) */
    ADAG_SPAN_OP = 8,         /* a record of a loop's whole op (never a span) */
    ADAG_SPAN_BACKEND = 16,   /* and up (to 255): a lower layer's own spans, numbered and
                               * named by that layer (arg: channel) */
} adag_span_kind_t;

/* Clocks of two processes. Two on one kernel (one boot: the same
 * /proc/sys/kernel/random/boot_id, network namespaces included) share
 * CLOCK_MONOTONIC: the offset is 0. Otherwise it is estimated from
 * samples {t0, remote now, t2} (t0, t2: this process's clock around a
 * request that read the remote one) by the sample with the shortest round
 * trip, its remote reading taken at the middle (off by at most half that
 * round trip). */
#define ADAG_BOOT_ID_MAX 40
const char *adag__boot_id(void); /* "" if unreadable */
int64_t adag__clock_offset(const int64_t (*samples)[3], unsigned n);

/* A span's op when its layer does not know the op (a backend's). */
#define ADAG_SPAN_NO_OP 0xffffu

/* What the exporter calls a kind of this file ("wait input", "compute",
 * ...); "backend" for one from ADAG_SPAN_BACKEND up (its layer has the
 * name) or one unknown. */
const char *adag__span_kind_name(unsigned kind);

/* An op record's parts (its flags). */
enum {
    ADAG_OP_HAS_INPUT = 1,  /* waited for inputs: wait input [t0, t1] */
    ADAG_OP_HAS_OUTPUT = 2, /* has returns: wait room [t1, t2], publish [t3, t4] */
    ADAG_OP_COMPUTED = 4,   /* the method ran: compute [t2, t3] */
};

/* The span clock: the TSC where it is invariant (x86-64: 13 ns a read on
 * this VM against 33 for clock_gettime's vDSO), else CLOCK_MONOTONIC in
 * ns. adag__trace_to_ns turns a copy's stamps into CLOCK_MONOTONIC ns by
 * the line through two (TSC, CLOCK_MONOTONIC) pairs of this process: one
 * read when its first ring was made, one at the conversion; every span
 * lies between them, so a stamp is off by about the error of one clock
 * read, tens of ns. Set by the first adag__trace_ring_init. */
extern int adag_trace_tsc;

static inline uint64_t adag__trace_clock(void)
{
#if defined(__x86_64__)
    if (adag_trace_tsc)
        return __rdtsc();
#endif
    return (uint64_t)adag__now_ns();
}

/* A duration of the span clock in ns (the ratio measured since the first
 * ring was made, measured again at each call: convert figures that are
 * compared with each other by one adag__trace_ns_per_tick). */
uint64_t adag__trace_ticks_to_ns(uint64_t ticks);
double adag__trace_ns_per_tick(void);

/* One record as copied out of a ring (and sent over the control
 * connection). packed: kind (8 bits), flags (8), op (16), then a span's
 * arg (32 bits), or an op record's input channel (16) and output channel
 * (16). */
typedef struct {
    uint64_t seq;  /* the execution's ref */
    uint64_t t[5]; /* a span: start, end; an op: the five stamps above */
    uint64_t packed;
} adag_trace_rec_t;

static inline unsigned adag__trace_rec_kind(const adag_trace_rec_t *r)
{
    return (unsigned)(r->packed & 0xff);
}

/* One span, as expanded from records. */
typedef struct {
    uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC of the process that wrote it */
    uint64_t seq;              /* the execution's ref */
    uint16_t kind;             /* adag_span_kind_t, never ADAG_SPAN_OP */
    uint16_t op;               /* the op's index in its actor's program */
    uint32_t arg;              /* kind's argument: a channel */
} adag_span_t;

/* The most spans one record expands to. */
#define ADAG_TRACE_SPANS_PER_REC 4
/* The most records a ring keeps (its copy fits one control frame). */
#define ADAG_TRACE_MAX_SPANS ((uint64_t)1 << 20)

typedef struct {
    _Atomic uint64_t stamp; /* index + 1 once whole; 0 while written */
    _Atomic uint64_t seq;
    _Atomic uint64_t t[5];
    _Atomic uint64_t packed;
} __attribute__((aligned(64))) adag_trace_slot_t;

typedef struct adag_trace_ring {
    _Atomic uint64_t head; /* one writer: records added so far */
    uint64_t mask;         /* slots - 1 */
    int indexed;           /* the caller gives each record's index */
    adag_trace_slot_t *slots;
} adag_trace_ring_t;

/* A ring of `records` slots rounded up to a power of two (16 ..
 * ADAG_TRACE_MAX_SPANS); indexed: see above. */
adag_status_t adag__trace_ring_init(adag_trace_ring_t *r, uint64_t records, int indexed);
void adag__trace_ring_free(adag_trace_ring_t *r);

/* Writes a record's fields into slot s as index; t: nt (2 or 5) stamps
 * (written out: the writer's path stays a run of moves). */
static inline void adag__trace_store(adag_trace_slot_t *s, uint64_t index, uint64_t seq,
                                    const uint64_t *t, unsigned nt, uint64_t packed)
{
    atomic_store_explicit(&s->stamp, 0, memory_order_relaxed);
    atomic_store_explicit(&s->seq, seq, memory_order_release);
    atomic_store_explicit(&s->t[0], t[0], memory_order_release);
    atomic_store_explicit(&s->t[1], t[1], memory_order_release);
    if (nt > 2) {
        atomic_store_explicit(&s->t[2], t[2], memory_order_release);
        atomic_store_explicit(&s->t[3], t[3], memory_order_release);
        atomic_store_explicit(&s->t[4], t[4], memory_order_release);
    }
    atomic_store_explicit(&s->packed, packed, memory_order_release);
    atomic_store_explicit(&s->stamp, index + 1, memory_order_release);
}

/* Records ahead of the one being written whose line is fetched for
 * writing now: a ring larger than the caches would otherwise miss on
 * every record, and the writer's next locked instruction (a mutex, a
 * seq_cst publish) would wait for that miss. */
#define ADAG_TRACE_PREFETCH 4

/* The next slot of a one-writer ring and its index. */
static inline adag_trace_slot_t *adag__trace_claim(adag_trace_ring_t *r, uint64_t *index)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    *index = h;
    __builtin_prefetch(&r->slots[(h + ADAG_TRACE_PREFETCH) & r->mask], 1);
    return &r->slots[h & r->mask];
}

/* Adds a span to a one-writer ring; r NULL: nothing (tracing off). The one
 * call a backend makes for a span of its own. */
static inline void adag__trace_add(adag_trace_ring_t *r, unsigned kind, uint32_t op, uint32_t arg,
                                  uint64_t seq, uint64_t start, uint64_t end)
{
    if (!r)
        return;
    uint64_t i, t[2] = {start, end};
    adag_trace_slot_t *s = adag__trace_claim(r, &i);
    adag__trace_store(s, i, seq, t, 2,
                     (uint64_t)(kind & 0xff) | (uint64_t)(op & 0xffff) << 16 | (uint64_t)arg << 32);
}

/* Adds a loop's op record: flags ADAG_OP_*, t the five stamps. */
static inline void adag__trace_add_op(adag_trace_ring_t *r, uint32_t op, unsigned flags,
                                     uint32_t in_chan, uint32_t out_chan, uint64_t seq,
                                     const uint64_t t[5])
{
    uint64_t i;
    adag_trace_slot_t *s = adag__trace_claim(r, &i);
    adag__trace_store(s, i, seq, t, 5,
                     (uint64_t)ADAG_SPAN_OP | (uint64_t)(flags & 0xff) << 8 |
                         (uint64_t)(op & 0xffff) << 16 | (uint64_t)(in_chan & 0xffff) << 32 |
                         (uint64_t)(out_chan & 0xffff) << 48);
}

/* Adds a span as record `index` of an indexed ring. */
static inline void adag__trace_put(adag_trace_ring_t *r, uint64_t index, unsigned kind,
                                  uint64_t seq, uint64_t start, uint64_t end)
{
    uint64_t t[2] = {start, end};
    __builtin_prefetch(&r->slots[(index + ADAG_TRACE_PREFETCH) & r->mask], 1);
    adag__trace_store(&r->slots[index & r->mask], index, seq, t, 2, (uint64_t)(kind & 0xff));
}

/* Begins record `index` of an indexed ring for a span that ends later (off
 * the path where it ends): its kind and seq now; not whole, so skipped by
 * a copy, until adag__trace_put_begun or adag__trace_end_begun finishes it.
 * The finishing thread must see these stores (happen after them). */
static inline void adag__trace_begin(adag_trace_ring_t *r, uint64_t index, unsigned kind,
                                    uint64_t seq)
{
    adag_trace_slot_t *s = &r->slots[index & r->mask];
    atomic_store_explicit(&s->stamp, 0, memory_order_relaxed);
    atomic_store_explicit(&s->seq, seq, memory_order_release);
    atomic_store_explicit(&s->packed, (uint64_t)(kind & 0xff), memory_order_release);
}

/* Begins it with its start known now (adag__trace_end_begun ends it). */
static inline void adag__trace_begin_at(adag_trace_ring_t *r, uint64_t index, unsigned kind,
                                       uint64_t seq, uint64_t start)
{
    adag__trace_begin(r, index, kind, seq);
    atomic_store_explicit(&r->slots[index & r->mask].t[0], start, memory_order_release);
}

/* Whether record `index` was begun for this kind and seq and not finished. */
static inline int adag__trace_begun(adag_trace_ring_t *r, uint64_t index, unsigned kind,
                                   uint64_t seq)
{
    adag_trace_slot_t *s = &r->slots[index & r->mask];
    return atomic_load_explicit(&s->seq, memory_order_relaxed) == seq &&
           atomic_load_explicit(&s->stamp, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&s->packed, memory_order_relaxed) == (uint64_t)(kind & 0xff);
}

/* Ends begun record `index` in slot s: its end, then its stamp (whole). */
static inline void adag__trace_finish(adag_trace_slot_t *s, uint64_t index, uint64_t end)
{
    atomic_store_explicit(&s->t[1], end, memory_order_release);
    atomic_store_explicit(&s->stamp, index + 1, memory_order_release);
}

/* Adds a span as record `index` of an indexed ring: when adag__trace_begin
 * began it for this kind and seq, only its stamps and its stamp; else
 * whole. */
static inline void adag__trace_put_begun(adag_trace_ring_t *r, uint64_t index, unsigned kind,
                                        uint64_t seq, uint64_t start, uint64_t end)
{
    if (!adag__trace_begun(r, index, kind, seq)) {
        adag__trace_put(r, index, kind, seq, start, end);
        return;
    }
    adag_trace_slot_t *s = &r->slots[index & r->mask];
    atomic_store_explicit(&s->t[0], start, memory_order_release);
    adag__trace_finish(s, index, end);
}

/* Ends a record begun with its start (adag__trace_begin_at); one not begun
 * so is a span [end, end]. */
static inline void adag__trace_end_begun(adag_trace_ring_t *r, uint64_t index, unsigned kind,
                                        uint64_t seq, uint64_t end)
{
    if (!adag__trace_begun(r, index, kind, seq))
        adag__trace_put(r, index, kind, seq, end, end);
    else
        adag__trace_finish(&r->slots[index & r->mask], index, end);
}

/* Copies the records still whole in the ring, oldest first, into out
 * (room for mask + 1); returns how many. A one-writer ring's *lost: the
 * records added so far that were overwritten or are being written (so not
 * copied); an indexed ring's: 0 (its owner knows how many it wrote). The
 * stamps are the span clock's: adag__trace_to_ns converts them. */
uint64_t adag__trace_ring_copy(adag_trace_ring_t *r, adag_trace_rec_t *out, uint64_t *lost);

/* The stamps of n records copied in this process, from the span clock to
 * CLOCK_MONOTONIC ns. */
void adag__trace_to_ns(adag_trace_rec_t *recs, uint64_t n);

/* The spans of n records into out (room for ADAG_TRACE_SPANS_PER_REC n);
 * returns how many. A record of an unknown kind is a span of that kind. */
uint64_t adag__trace_expand(const adag_trace_rec_t *recs, uint64_t n, adag_span_t *out);

#endif

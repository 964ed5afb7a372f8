/*
 * Trace rings: spans of what a thread does (waiting for an input, running a
 * method, waiting for room, publishing), kept in memory, the oldest
 * overwritten. Adding a span takes no lock, no system call and no
 * allocation: two clock reads (vDSO) by the caller and one atomic
 * increment. Any thread may copy a ring while it is written.
 *
 * A layer below dag/ adds spans of its own with adag_trace_add and a kind
 * from ADAG_SPAN_BACKEND up (a backend's transfer, a device copy); the
 * exporter names them by kind.
 *
 * Memory ordering: each slot is a seqlock without fences (TSan models
 * them poorly). The writer claims index h, sets the slot's stamp to 0,
 * stores the fields with release (so a reader that reads any of them
 * also sees the stamp's 0, which precedes them), then stamp h + 1
 * (release). A reader loads the stamp (acquire), the fields (acquire),
 * then the stamp again: i + 1 both times, the fields are span i's, whole.
 * A ring with one writer (an actor loop) claims h with a plain load and
 * store of head and stores the 0: no locked instruction (on x86 every
 * access above is a plain move). A ring with several writers (the
 * driver's: execute and get run on any thread) claims h with fetch_add and
 * the slot with a compare-exchange of its stamp from a whole span's to 0;
 * a slot another writer still holds (stamp 0: a writer lapped while it
 * wrote) is not touched and span h is lost instead (two writers in one
 * slot could leave halves of each under a stamp that looks whole).
 * Several threads may write one ring (the driver's: execute and get run
 * on any thread).
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
    ADAG_SPAN_COMPUTE = 2,    /* a method runs (arg: method) */
    ADAG_SPAN_WAIT_ROOM = 3,  /* waiting for a free output slot (arg: channel) */
    ADAG_SPAN_PUBLISH = 4,    /* publishing an output (arg: channel) */
    ADAG_SPAN_COLLECTIVE = 5, /* a collective operation (arg: its index) */
    ADAG_SPAN_EXECUTE = 6,    /* the driver starts an execution (arg: -) */
    ADAG_SPAN_GET = 7,        /* the driver waits for a result (arg: -) */
    ADAG_SPAN_BACKEND = 16,   /* and up: a backend's own spans */
} adag_span_kind_t;

/* The span clock: the TSC where it is invariant (x86-64: 13 ns a read on
 * this VM against 33 for clock_gettime's vDSO), else CLOCK_MONOTONIC in
 * ns. adag_trace_to_ns turns a copy's stamps into CLOCK_MONOTONIC ns by
 * the line through two (TSC, CLOCK_MONOTONIC) pairs of this process: one
 * read when its first ring was made, one at the conversion; every span
 * lies between them, so a stamp is off by about the error of one clock
 * read, tens of ns. Set by the first adag_trace_ring_init. */
extern int adag_trace_tsc;

static inline uint64_t adag_trace_clock(void)
{
#if defined(__x86_64__)
    if (adag_trace_tsc)
        return __rdtsc();
#endif
    return (uint64_t)adag_now_ns();
}

/* One span, as copied out of a ring. */
typedef struct {
    uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC of the process that wrote it */
    uint64_t seq;              /* the execution's ref */
    uint16_t kind;             /* adag_span_kind_t */
    uint16_t op;               /* the op's index in its actor's program */
    uint32_t arg;              /* kind's argument: a channel or method index */
} adag_span_t;

/* The most spans a ring keeps (its copy fits one control frame). */
#define ADAG_TRACE_MAX_SPANS ((uint64_t)1 << 20)

typedef struct {
    _Atomic uint64_t stamp; /* index + 1 once whole; 0 while written */
    _Atomic uint64_t start_ns, end_ns, seq, packed;
} adag_trace_slot_t;

typedef struct adag_trace_ring {
    _Atomic uint64_t head; /* spans claimed so far */
    uint64_t mask;         /* slots - 1 */
    int one_writer;        /* only one thread ever adds spans */
    adag_trace_slot_t *slots;
} adag_trace_ring_t;

/* A ring of `spans` slots rounded up to a power of two (16 ..
 * ADAG_TRACE_MAX_SPANS); one_writer: only one thread will add spans. */
adag_status_t adag_trace_ring_init(adag_trace_ring_t *r, uint64_t spans, int one_writer);
void adag_trace_ring_free(adag_trace_ring_t *r);

/* Adds a span; r NULL: nothing (tracing off). */
static inline void adag_trace_add(adag_trace_ring_t *r, adag_span_kind_t kind, uint32_t op,
                                  uint32_t arg, uint64_t seq, uint64_t start_ns, uint64_t end_ns)
{
    if (!r)
        return;
    uint64_t h;
    adag_trace_slot_t *s;
    if (r->one_writer) {
        h = atomic_load_explicit(&r->head, memory_order_relaxed);
        atomic_store_explicit(&r->head, h + 1, memory_order_relaxed);
        s = &r->slots[h & r->mask];
        atomic_store_explicit(&s->stamp, 0, memory_order_relaxed);
    } else {
        h = atomic_fetch_add_explicit(&r->head, 1, memory_order_relaxed);
        s = &r->slots[h & r->mask];
        uint64_t was = atomic_load_explicit(&s->stamp, memory_order_relaxed);
        if (was == 0 && h >= r->mask + 1)
            return; /* held by a lapped writer: this span is lost */
        if (!atomic_compare_exchange_strong_explicit(&s->stamp, &was, 0, memory_order_relaxed,
                                                     memory_order_relaxed))
            return; /* taken meanwhile: lost */
    }
    atomic_store_explicit(&s->start_ns, start_ns, memory_order_release);
    atomic_store_explicit(&s->end_ns, end_ns, memory_order_release);
    atomic_store_explicit(&s->seq, seq, memory_order_release);
    atomic_store_explicit(&s->packed,
                          (uint64_t)kind | (uint64_t)(op & 0xffff) << 16 | (uint64_t)arg << 32,
                          memory_order_release);
    atomic_store_explicit(&s->stamp, h + 1, memory_order_release);
}

/* Copies the spans still whole in the ring, oldest first, into out (room
 * for mask + 1 spans); returns how many. *lost: spans claimed so far that
 * were overwritten or are being written (so not copied). The stamps are
 * the span clock's: adag_trace_to_ns converts them. */
uint64_t adag_trace_ring_copy(adag_trace_ring_t *r, adag_span_t *out, uint64_t *lost);

/* The stamps of n spans copied in this process, from the span clock to
 * CLOCK_MONOTONIC ns. */
void adag_trace_to_ns(adag_span_t *spans, uint64_t n);

#endif

#include "common/trace.h"

#include "common/error.h"

#include <pthread.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#define MIN_SPANS 16
#define MAX_SPANS ADAG_TRACE_MAX_SPANS

int adag_trace_tsc;
static uint64_t anchor_tsc, anchor_ns; /* when the span clock was chosen */
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

static void clock_choose(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    /* CPUID 0x80000007 EDX bit 8: the TSC runs at a constant rate in every
     * power state, the same on every core */
    if (__get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8))) {
        anchor_ns = (uint64_t)adag_now_ns();
        anchor_tsc = __rdtsc();
        adag_trace_tsc = 1;
    }
#endif
}

void adag_trace_to_ns(adag_span_t *spans, uint64_t n)
{
    pthread_once(&clock_once, clock_choose);
    if (!adag_trace_tsc || n == 0)
        return;
#if defined(__x86_64__)
    uint64_t ns1 = (uint64_t)adag_now_ns(), tsc1 = __rdtsc();
    double per_tick = tsc1 > anchor_tsc ? (double)(ns1 - anchor_ns) / (double)(tsc1 - anchor_tsc)
                                        : 0;
    for (uint64_t i = 0; i < n; i++) {
        spans[i].start_ns = anchor_ns + (uint64_t)((double)(spans[i].start_ns - anchor_tsc) *
                                                   per_tick);
        spans[i].end_ns = anchor_ns + (uint64_t)((double)(spans[i].end_ns - anchor_tsc) *
                                                 per_tick);
    }
#endif
}

adag_status_t adag_trace_ring_init(adag_trace_ring_t *r, uint64_t spans, int one_writer)
{
    pthread_once(&clock_once, clock_choose);
    uint64_t n = MIN_SPANS;
    while (n < spans && n < MAX_SPANS)
        n <<= 1;
    atomic_init(&r->head, 0);
    r->mask = n - 1;
    r->one_writer = one_writer;
    r->slots = calloc(n, sizeof(*r->slots));
    if (!r->slots)
        return adag_error(ADAG_ERR_NO_MEMORY, "trace ring of %llu spans",
                          (unsigned long long)n);
    return ADAG_OK;
}

void adag_trace_ring_free(adag_trace_ring_t *r)
{
    free(r->slots);
    r->slots = NULL;
}

uint64_t adag_trace_ring_copy(adag_trace_ring_t *r, adag_span_t *out, uint64_t *lost)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t n = r->mask + 1, first = head > n ? head - n : 0, got = 0;
    for (uint64_t i = first; i < head; i++) {
        adag_trace_slot_t *s = &r->slots[i & r->mask];
        uint64_t s1 = atomic_load_explicit(&s->stamp, memory_order_acquire);
        adag_span_t sp = {
            .start_ns = atomic_load_explicit(&s->start_ns, memory_order_acquire),
            .end_ns = atomic_load_explicit(&s->end_ns, memory_order_acquire),
            .seq = atomic_load_explicit(&s->seq, memory_order_acquire),
        };
        uint64_t packed = atomic_load_explicit(&s->packed, memory_order_acquire);
        uint64_t s2 = atomic_load_explicit(&s->stamp, memory_order_relaxed);
        if (s1 != i + 1 || s2 != i + 1)
            continue; /* overwritten meanwhile, or still being written */
        sp.kind = (uint16_t)(packed & 0xffff);
        sp.op = (uint16_t)(packed >> 16 & 0xffff);
        sp.arg = (uint32_t)(packed >> 32);
        out[got++] = sp;
    }
    if (lost)
        *lost = head - got;
    return got;
}

#include "common/trace.h"

#include "common/error.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#define MIN_RECORDS 16
#define MAX_RECORDS ADAG_TRACE_MAX_SPANS

int adag_trace_tsc;
static uint64_t anchor_tsc, anchor_ns; /* when the span clock was chosen */
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
/* The kernel keeps time with the TSC: it found it stable and the same on
 * every CPU (a virtual machine's CPUID often hides the invariant bit). */
static int kernel_uses_tsc(void)
{
    char name[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f)
        return 0;
    int got = fgets(name, sizeof name, f) != NULL;
    fclose(f);
    return got && strcmp(name, "tsc\n") == 0;
}

/* A (TSC, CLOCK_MONOTONIC) pair read at one moment: of 8 tries, the TSC
 * read between the two clock reads closest together, against their
 * middle. A pair read across a preemption would shift every stamp this
 * process converts (by microseconds on a loaded machine), and the stamps
 * of two processes must agree to well under the time a value takes from
 * one to the other. */
static void tsc_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 8; i++) {
        uint64_t n0 = (uint64_t)adag__now_ns(), t = __rdtsc(), n1 = (uint64_t)adag__now_ns();
        if (n1 - n0 < best) {
            best = n1 - n0;
            *tsc = t;
            *ns = n0 + (n1 - n0) / 2;
        }
    }
}
#endif

static void clock_choose(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    /* CPUID 0x80000007 EDX bit 8: the TSC runs at a constant rate in every
     * power state, the same on every core; or the kernel's own clock is it */
    if ((__get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8))) || kernel_uses_tsc()) {
        tsc_pair(&anchor_tsc, &anchor_ns);
        adag_trace_tsc = 1;
    }
#endif
}

/* ns per tick, measured from the anchor to now (0 before a tick passed) */
static double ns_per_tick(void)
{
#if defined(__x86_64__)
    uint64_t ns1, tsc1;
    tsc_pair(&tsc1, &ns1);
    return tsc1 > anchor_tsc ? (double)(ns1 - anchor_ns) / (double)(tsc1 - anchor_tsc) : 0;
#else
    return 1;
#endif
}

double adag__trace_ns_per_tick(void)
{
    pthread_once(&clock_once, clock_choose);
    return adag_trace_tsc ? ns_per_tick() : 1.0;
}

uint64_t adag__trace_ticks_to_ns(uint64_t ticks)
{
    return (uint64_t)((double)ticks * adag__trace_ns_per_tick());
}

/* stamps a record of this kind carries */
static unsigned stamps_of(unsigned kind)
{
    return kind == ADAG_SPAN_OP ? 5 : 2;
}

void adag__trace_to_ns(adag_trace_rec_t *recs, uint64_t n)
{
    pthread_once(&clock_once, clock_choose);
    if (!adag_trace_tsc || n == 0)
        return;
    double per_tick = ns_per_tick();
    for (uint64_t i = 0; i < n; i++) {
        unsigned k = stamps_of(adag__trace_rec_kind(&recs[i]));
        for (unsigned j = 0; j < k; j++)
            recs[i].t[j] = anchor_ns + (uint64_t)((double)(int64_t)(recs[i].t[j] - anchor_tsc) *
                                                  per_tick);
    }
}

adag_status_t adag__trace_ring_init(adag_trace_ring_t *r, uint64_t records, int indexed)
{
    pthread_once(&clock_once, clock_choose);
    uint64_t n = MIN_RECORDS;
    while (n < records && n < MAX_RECORDS)
        n <<= 1;
    atomic_init(&r->head, 0);
    r->mask = n - 1;
    r->indexed = indexed;
    r->slots = aligned_alloc(64, n * sizeof(*r->slots));
    if (!r->slots)
        return adag__error(ADAG_ERR_NO_MEMORY, "trace ring of %llu records",
                          (unsigned long long)n);
    memset(r->slots, 0, n * sizeof(*r->slots));
    return ADAG_OK;
}

void adag__trace_ring_free(adag_trace_ring_t *r)
{
    free(r->slots);
    r->slots = NULL;
}

/* Slot s's record if whole (stamp nonzero and unchanged around the copy). */
static int copy_slot(adag_trace_slot_t *s, adag_trace_rec_t *out, uint64_t *stamp)
{
    uint64_t s1 = atomic_load_explicit(&s->stamp, memory_order_acquire);
    out->seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    for (unsigned j = 0; j < 5; j++)
        out->t[j] = atomic_load_explicit(&s->t[j], memory_order_acquire);
    out->packed = atomic_load_explicit(&s->packed, memory_order_acquire);
    uint64_t s2 = atomic_load_explicit(&s->stamp, memory_order_relaxed);
    *stamp = s1;
    return s1 != 0 && s1 == s2;
}

/* an indexed ring's records in index order: by ref, then kind (its
 * execute before its get) */
static int by_ref(const void *a, const void *b)
{
    const adag_trace_rec_t *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    unsigned kx = adag__trace_rec_kind(x), ky = adag__trace_rec_kind(y);
    return kx < ky ? -1 : kx > ky;
}

uint64_t adag__trace_ring_copy(adag_trace_ring_t *r, adag_trace_rec_t *out, uint64_t *lost)
{
    uint64_t n = r->mask + 1, got = 0, stamp;
    if (r->indexed) {
        for (uint64_t i = 0; i < n; i++)
            if (copy_slot(&r->slots[i], &out[got], &stamp))
                got++;
        qsort(out, got, sizeof(*out), by_ref);
        if (lost)
            *lost = 0;
        return got;
    }
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t first = head > n ? head - n : 0;
    for (uint64_t i = first; i < head; i++)
        if (copy_slot(&r->slots[i & r->mask], &out[got], &stamp) && stamp == i + 1)
            got++;
    if (lost)
        *lost = head - got;
    return got;
}

static char boot_id[ADAG_BOOT_ID_MAX];
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;

static void boot_read(void)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return;
    if (!fgets(boot_id, sizeof(boot_id), f))
        boot_id[0] = '\0';
    fclose(f);
    boot_id[strcspn(boot_id, "\n")] = '\0';
}

const char *adag__boot_id(void)
{
    pthread_once(&boot_once, boot_read);
    return boot_id;
}

int64_t adag__clock_offset(const int64_t (*samples)[3], unsigned n)
{
    unsigned best = 0;
    for (unsigned i = 1; i < n; i++)
        if (samples[i][2] - samples[i][0] < samples[best][2] - samples[best][0])
            best = i;
    if (n == 0)
        return 0;
    const int64_t *s = samples[best];
    return s[0] + (s[2] - s[0]) / 2 - s[1];
}

const char *adag__span_kind_name(unsigned kind)
{
    switch (kind) {
    case ADAG_SPAN_WAIT_INPUT: return "wait input";
    case ADAG_SPAN_COMPUTE: return "compute";
    case ADAG_SPAN_WAIT_ROOM: return "wait room";
    case ADAG_SPAN_PUBLISH: return "publish";
    case ADAG_SPAN_COLLECTIVE: return "collective";
    case ADAG_SPAN_EXECUTE: return "execute";
    case ADAG_SPAN_GET: return "get";
    }
    return "backend";
}

uint64_t adag__trace_expand(const adag_trace_rec_t *recs, uint64_t n, adag_span_t *out)
{
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++) {
        const adag_trace_rec_t *r = &recs[i];
        unsigned kind = adag__trace_rec_kind(r), flags = (unsigned)(r->packed >> 8 & 0xff);
        uint16_t op = (uint16_t)(r->packed >> 16 & 0xffff);
        if (kind != ADAG_SPAN_OP) {
            out[k++] = (adag_span_t){r->t[0], r->t[1], r->seq, (uint16_t)kind, op,
                                     (uint32_t)(r->packed >> 32)};
            continue;
        }
        uint32_t in = (uint32_t)(r->packed >> 32 & 0xffff), ret = (uint32_t)(r->packed >> 48);
        if (flags & ADAG_OP_HAS_INPUT)
            out[k++] = (adag_span_t){r->t[0], r->t[1], r->seq, ADAG_SPAN_WAIT_INPUT, op, in};
        if (flags & ADAG_OP_HAS_OUTPUT)
            out[k++] = (adag_span_t){r->t[1], r->t[2], r->seq, ADAG_SPAN_WAIT_ROOM, op, ret};
        if (flags & ADAG_OP_COMPUTED)
            out[k++] = (adag_span_t){r->t[2], r->t[3], r->seq, ADAG_SPAN_COMPUTE, op, 0};
        if (flags & ADAG_OP_HAS_OUTPUT)
            out[k++] = (adag_span_t){r->t[3], r->t[4], r->seq, ADAG_SPAN_PUBLISH, op, ret};
    }
    return k;
}

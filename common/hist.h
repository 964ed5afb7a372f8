/*
 * A histogram of durations with bounded relative error: bucket 0..15 hold
 * the values 0..15, then each power of two [2^e, 2^(e+1)) is cut into 16
 * buckets of equal width (a bucket's width is at most 1/16 of its values,
 * so a quantile read from it is within ~3 % of the true one). Values from
 * 2^48 up share the last bucket. One thread adds (relaxed loads and
 * stores, no locked instruction); any thread reads a copy that may lag
 * by the adds in flight.
 */
#ifndef ADAG_COMMON_HIST_H
#define ADAG_COMMON_HIST_H

#include <stdatomic.h>
#include <stdint.h>

#define ADAG_HIST_SUB 16
#define ADAG_HIST_MAX_EXP 47
#define ADAG_HIST_BUCKETS ((ADAG_HIST_MAX_EXP - 3) * ADAG_HIST_SUB + ADAG_HIST_SUB)

typedef struct {
    _Atomic uint64_t n[ADAG_HIST_BUCKETS];
} adag_hist_t;

static inline unsigned adag__hist_bucket(uint64_t v)
{
    if (v < ADAG_HIST_SUB)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v);
    if (e > ADAG_HIST_MAX_EXP)
        return ADAG_HIST_BUCKETS - 1;
    return (e - 3) * ADAG_HIST_SUB + (unsigned)((v >> (e - 4)) & (ADAG_HIST_SUB - 1));
}

/* The smallest value of bucket b, and its width. */
static inline uint64_t adag__hist_floor(unsigned b, uint64_t *width)
{
    if (b < ADAG_HIST_SUB) {
        *width = 1;
        return b;
    }
    unsigned e = b / ADAG_HIST_SUB + 3, sub = b % ADAG_HIST_SUB;
    *width = (uint64_t)1 << (e - 4);
    return ((uint64_t)1 << e) + (uint64_t)sub * *width;
}

/* One thread only. */
static inline void adag__hist_add(adag_hist_t *h, uint64_t v)
{
    _Atomic uint64_t *c = &h->n[adag__hist_bucket(v)];
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* The q-quantile (0 < q <= 1) of counts n[0..ADAG_HIST_BUCKETS): the
 * middle of the bucket holding it, at most max (the largest value added);
 * 0 with no values. */
uint64_t adag__hist_quantile(const uint64_t *n, double q, uint64_t max);

/* A copy of h's counts into n (ADAG_HIST_BUCKETS of them); their sum. */
uint64_t adag__hist_copy(const adag_hist_t *h, uint64_t *n);

#endif

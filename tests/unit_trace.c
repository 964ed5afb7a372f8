/*
 * Unit tests of the trace rings, the duration histogram and the clock
 * offset between processes (common/trace.h, common/hist.h).
 */
#include <criterion/criterion.h>

#include "common/hist.h"
#include "common/trace.h"

#include <stdlib.h>
#include <string.h>

/* Every value lands in a bucket whose range holds it, ranges of 1/16 of
 * their values at most; the buckets are in order. */
Test(hist, buckets_hold_their_values)
{
    uint64_t values[] = {0, 1, 15, 16, 17, 31, 32, 33, 1000, 1023, 1024, 123456789,
                         (1ull << 47) + 5, (1ull << 48) - 1};
    unsigned last = 0;
    for (unsigned i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        uint64_t v = values[i], width;
        unsigned b = adag__hist_bucket(v);
        uint64_t lo = adag__hist_floor(b, &width);
        cr_assert(b < ADAG_HIST_BUCKETS && lo <= v && v < lo + width,
                  "value %llu: bucket %u [%llu, +%llu)", (unsigned long long)v, b,
                  (unsigned long long)lo, (unsigned long long)width);
        cr_assert(v < 16 || width * 16 <= lo, "bucket %u too wide", b);
        cr_assert_geq(b, last);
        last = b;
    }
    cr_assert_eq(adag__hist_bucket(UINT64_MAX), ADAG_HIST_BUCKETS - 1);
}

/* Quantiles of 1..1000 within the bucket error; capped by the max. */
Test(hist, quantiles)
{
    adag_hist_t *h = calloc(1, sizeof(*h));
    uint64_t *n = calloc(ADAG_HIST_BUCKETS, sizeof(*n));
    cr_assert_eq(adag__hist_quantile(n, 0.5, 0), 0, "no values: 0");
    for (uint64_t v = 1; v <= 1000; v++)
        adag__hist_add(h, v);
    cr_assert_eq(adag__hist_copy(h, n), 1000);
    uint64_t p50 = adag__hist_quantile(n, 0.5, 1000), p99 = adag__hist_quantile(n, 0.99, 1000);
    cr_assert(p50 >= 500 * 15 / 16 && p50 <= 500 * 17 / 16, "p50 %llu", (unsigned long long)p50);
    cr_assert(p99 >= 990 * 15 / 16 && p99 <= 1000, "p99 %llu", (unsigned long long)p99);
    cr_assert_eq(adag__hist_quantile(n, 1.0, 1000), 1000);
    /* one value: every quantile is in its bucket, at most it */
    memset(h, 0, sizeof(*h));
    adag__hist_add(h, 777777);
    adag__hist_copy(h, n);
    uint64_t q = adag__hist_quantile(n, 0.5, 777777);
    cr_assert(q <= 777777 && q >= 777777 - 777777 / 16, "%llu", (unsigned long long)q);
    cr_assert_eq(adag__hist_quantile(n, 0.01, 777777), q);
    free(h);
    free(n);
}

/* One writer: the copy is the last records, oldest first; lost counts
 * the rest. Indexed: records by index, sorted by ref then kind. */
Test(trace_ring, copies_and_losses)
{
    adag_trace_ring_t r;
    cr_assert_eq(adag__trace_ring_init(&r, 10, 0), ADAG_OK);
    cr_assert_eq(r.mask + 1, 16);
    for (uint64_t i = 0; i < 40; i++)
        adag__trace_add(&r, ADAG_SPAN_BACKEND, 1, 2, i, i * 10, i * 10 + 5);
    adag_trace_rec_t out[16];
    uint64_t lost, n = adag__trace_ring_copy(&r, out, &lost);
    cr_assert(n == 16 && lost == 24, "%llu kept, %llu lost", (unsigned long long)n,
              (unsigned long long)lost);
    for (uint64_t i = 0; i < n; i++)
        cr_assert(out[i].seq == 24 + i && out[i].t[0] == (24 + i) * 10);
    adag__trace_ring_free(&r);

    cr_assert_eq(adag__trace_ring_init(&r, 16, 1), ADAG_OK);
    for (uint64_t ref = 0; ref < 12; ref++) { /* gets first, out of order */
        adag__trace_put(&r, 2 * ref + 1, ADAG_SPAN_GET, ref, 5, 6);
        adag__trace_put(&r, 2 * ref, ADAG_SPAN_EXECUTE, ref, 1, 2);
    }
    n = adag__trace_ring_copy(&r, out, &lost);
    cr_assert_eq(n, 16, "the last 8 refs' records");
    for (uint64_t i = 0; i < n; i++)
        cr_assert(out[i].seq == 4 + i / 2 &&
                      adag__trace_rec_kind(&out[i]) == (i % 2 ? ADAG_SPAN_GET : ADAG_SPAN_EXECUTE),
                  "record %llu: ref %llu kind %u", (unsigned long long)i,
                  (unsigned long long)out[i].seq, adag__trace_rec_kind(&out[i]));
    adag__trace_ring_free(&r);
}

/* The offset comes from the sample with the shortest round trip. */
Test(trace_clock, offset_from_the_shortest_round_trip)
{
    const int64_t samples[3][3] = {{1000, 5000, 1400}, {2000, 6000, 2020}, {3000, 7000, 3300}};
    cr_assert_eq(adag__clock_offset(samples, 3), 2010 - 6000);
    cr_assert_eq(adag__clock_offset(samples, 0), 0);
    cr_assert_gt(strlen(adag__boot_id()), 8, "this kernel's boot id is readable");
}

/* A duration in ticks converts to about as many ns as passed. */
Test(trace_clock, ticks_to_ns)
{
    adag_trace_ring_t r;
    cr_assert_eq(adag__trace_ring_init(&r, 16, 0), ADAG_OK); /* chooses the clock */
    uint64_t t0 = adag__trace_clock();
    int64_t n0 = adag__now_ns();
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    uint64_t ns = adag__trace_ticks_to_ns(adag__trace_clock() - t0);
    int64_t real = adag__now_ns() - n0;
    cr_assert(ns > (uint64_t)real * 9 / 10 && ns < (uint64_t)real * 11 / 10, "%llu ns for %lld",
              (unsigned long long)ns, (long long)real);
    adag__trace_ring_free(&r);
}

/*
 * Suite "copy_pool": the split copy of common/copy_pool.h. A copy from
 * ADAG_COPY_SPLIT_MIN on starts the helpers (min(CPUs allowed, 8) - 1) and
 * is counted as split; a smaller one is not; every byte lands, at odd
 * sizes and offsets; on one allowed CPU no helper starts and the copy is
 * still whole. (Through a DAG: tests/test_execute_copy.c.)
 */
#include "common/copy_pool.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t j = 0; j < n; j++)
        b[j] = (uint8_t)(j * 131u + (j >> 12) * 7u + seed);
}

/* Copies n bytes from src + off to dst + off through p; every byte checked,
 * the bytes around the copy untouched. */
static void copy_checked(adag_copy_pool_t *p, size_t n, size_t off, unsigned seed)
{
    uint8_t *src = malloc(n + 2 * off + 64), *dst = malloc(n + 2 * off + 64);
    cr_assert(src && dst);
    fill(src, n + 2 * off + 64, seed);
    memset(dst, 0xee, n + 2 * off + 64);
    adag__copy_pool_memcpy(p, dst + off, src + off, n);
    for (size_t j = 0; j < off; j++)
        cr_assert_eq(dst[j], 0xee, "%zu bytes at offset %zu: byte %zu before the copy written",
                     n, off, j);
    for (size_t j = 0; j < n; j++)
        if (dst[off + j] != src[off + j])
            cr_assert_fail("%zu bytes at offset %zu: byte %zu is 0x%02x, want 0x%02x", n, off,
                           j, dst[off + j], src[off + j]);
    cr_assert_eq(dst[off + n], 0xee, "%zu bytes at offset %zu: the byte after written", n, off);
    free(src);
    free(dst);
}

Test(copy_pool, splits_large_copies_only, .timeout = 60)
{
    cpu_set_t cpus;
    cr_assert_eq(sched_getaffinity(0, sizeof cpus, &cpus), 0);
    unsigned ncpu = (unsigned)CPU_COUNT(&cpus), want = ncpu > 8 ? 7 : ncpu - 1;
    adag_copy_pool_t p;
    adag__copy_pool_init(&p);
    unsigned helpers;
    unsigned long long copies;
    copy_checked(&p, ADAG_COPY_SPLIT_MIN - 1, 3, 1);
    adag__copy_pool_figures(&p, &helpers, &copies);
    cr_assert_eq(helpers, 0, "a small copy started %u helpers", helpers);
    cr_assert_eq(copies, 0);
    const size_t sizes[] = {ADAG_COPY_SPLIT_MIN, ADAG_COPY_SPLIT_MIN + 1, (size_t)24 << 20,
                            ((size_t)9 << 20) + 4097};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        copy_checked(&p, sizes[i], i * 7, i + 2);
    adag__copy_pool_figures(&p, &helpers, &copies);
    cr_assert_eq(helpers, want, "%u helpers for %u CPUs, want %u", helpers, ncpu, want);
    cr_assert_eq(copies, want ? 4 : 0, "%llu copies split, want %u", copies, want ? 4 : 0);
    adag__copy_pool_fini(&p);
}

/* On one allowed CPU: no helper, the copy on the caller, whole. */
static void *one_cpu_main(void *arg)
{
    adag_copy_pool_t *p = arg;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        return NULL;
    copy_checked(p, (size_t)6 << 20, 5, 9);
    return p;
}

Test(copy_pool, one_cpu_copies_on_the_caller, .timeout = 60)
{
    adag_copy_pool_t p;
    adag__copy_pool_init(&p);
    pthread_t t;
    void *ret;
    cr_assert_eq(pthread_create(&t, NULL, one_cpu_main, &p), 0);
    cr_assert_eq(pthread_join(t, &ret), 0);
    cr_assert_eq(ret, &p, "could not pin the thread to one CPU");
    unsigned helpers;
    unsigned long long copies;
    adag__copy_pool_figures(&p, &helpers, &copies);
    cr_assert_eq(helpers, 0, "%u helpers on one CPU", helpers);
    cr_assert_eq(copies, 0);
    adag__copy_pool_fini(&p);
}

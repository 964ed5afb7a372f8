/*
 * Suite "order": the keyed permutations behind the data source's order
 * (data/order.c): bijections for every size, windows that stay windows,
 * and keys that change the order.
 */
#include "data/order.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* adag__order_permute is a bijection on [0, n) for sizes around powers of
 * two and odd ones, for several keys. */
Test(order, permute_is_a_bijection)
{
    static const uint64_t sizes[] = {1, 2, 3, 4, 5, 7, 15, 16, 17, 63, 64, 65, 100, 255, 256,
                                     257, 1000, 4095, 4097};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        uint64_t n = sizes[s];
        unsigned char *seen = calloc(n, 1);
        for (uint64_t key = 0; key < 3; key++) {
            memset(seen, 0, n);
            unsigned fixed = 0;
            for (uint64_t i = 0; i < n; i++) {
                uint64_t j = adag__order_permute(i, n, adag__order_key(1, 2, key, 0));
                cr_assert_lt(j, n, "n %llu: %llu -> %llu", (unsigned long long)n,
                             (unsigned long long)i, (unsigned long long)j);
                cr_assert_eq(seen[j]++, 0, "n %llu: %llu hit twice", (unsigned long long)n,
                             (unsigned long long)j);
                fixed += i == j;
            }
            if (n >= 64)
                cr_assert_lt(fixed, n / 8, "n %llu: %u fixed points", (unsigned long long)n,
                             fixed);
        }
        free(seen);
    }
}

/* Different keys give different permutations; the same key the same. */
Test(order, keys_change_the_order)
{
    uint64_t a[100], b[100], c[100];
    for (uint64_t i = 0; i < 100; i++) {
        a[i] = adag__order_permute(i, 100, adag__order_key(7, 0, 1, 0));
        b[i] = adag__order_permute(i, 100, adag__order_key(7, 0, 1, 0));
        c[i] = adag__order_permute(i, 100, adag__order_key(7, 1, 1, 0));
    }
    cr_assert_arr_eq(a, b, sizeof(a));
    cr_assert(memcmp(a, c, sizeof(a)), "epochs 0 and 1 permute alike");
    cr_assert_neq(adag__order_key(1, 0, 0, 0), adag__order_key(0, 1, 0, 0));
    cr_assert_neq(adag__order_key(0, 0, 1, 0), adag__order_key(0, 0, 0, 1));
}

/* The shard shuffle is a permutation, and keyed. */
Test(order, shuffle_is_a_permutation)
{
    uint32_t p[50], q[50];
    adag__order_shuffle(p, 50, 11);
    adag__order_shuffle(q, 50, 12);
    unsigned char seen[50] = {0};
    for (unsigned i = 0; i < 50; i++) {
        cr_assert_lt(p[i], 50);
        cr_assert_eq(seen[p[i]]++, 0);
    }
    cr_assert(memcmp(p, q, sizeof(p)), "two keys shuffle alike");
    adag__order_shuffle(p, 1, 5);
    cr_assert_eq(p[0], 0);
    adag__order_shuffle(p, 0, 5); /* nothing to do, nothing touched */
}

/* A windowed position maps inside its window (the last one shorter), each
 * window is a permutation of itself, and windows below 2 keep the order. */
Test(order, windows_stay_windows)
{
    const uint64_t n = 103, w = 10;
    unsigned char seen[103] = {0};
    for (uint64_t p = 0; p < n; p++) {
        uint64_t o = adag__order_window(p, n, w, 3, 4);
        cr_assert_eq(o / w, p / w, "position %llu left its window for %llu",
                     (unsigned long long)p, (unsigned long long)o);
        cr_assert_eq(seen[o]++, 0);
        cr_assert_eq(adag__order_window(p, n, 1, 3, 4), p);
        cr_assert_eq(adag__order_window(p, n, 0, 3, 4), p);
    }
}

/*
 * The data source's order (include/adag/data.h, "Order"): pure functions
 * of (seed, epoch, position), so that any thread computes any batch, and a
 * source opened at a cursor needs nothing that came before it.
 */
#ifndef ADAG_DATA_ORDER_H
#define ADAG_DATA_ORDER_H

#include <stdint.h>

/* A 64-bit mix of x (splitmix64's finalizer): the keys and per-sample
 * random states are made with it. */
uint64_t adag__order_mix(uint64_t x);

/* A key for (seed, epoch, a and b): distinct inputs give unrelated keys. */
uint64_t adag__order_key(uint64_t seed, uint64_t epoch, uint64_t a, uint64_t b);

/* A pseudorandom permutation of [0, n) keyed by key: the image of i
 * (i < n). A bijection for every n >= 1, computed in O(1) expected time
 * (a Feistel network over the next even power of two, walked until it
 * lands below n). */
uint64_t adag__order_permute(uint64_t i, uint64_t n, uint64_t key);

/* perm[0..n-1] = a shuffle of 0..n-1 keyed by key (Fisher-Yates). */
void adag__order_shuffle(uint32_t *perm, uint32_t n, uint64_t key);

/* Position p of an epoch of n samples, with windows of w samples (w < 2:
 * none): the epoch-order ordinal of the sample that goes there. */
uint64_t adag__order_window(uint64_t p, uint64_t n, uint64_t w, uint64_t seed, uint64_t epoch);

#endif

/*
 * The data source's order: keyed permutations (data/order.h).
 */
#include "data/order.h"

uint64_t adag__order_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t adag__order_key(uint64_t seed, uint64_t epoch, uint64_t a, uint64_t b)
{
    uint64_t k = adag__order_mix(seed);
    k = adag__order_mix(k ^ epoch);
    k = adag__order_mix(k ^ a);
    return adag__order_mix(k ^ b);
}

/* One Feistel round's function on a half of `half` bits. */
static uint64_t round_fn(uint64_t x, uint64_t key, unsigned round, unsigned half)
{
    uint64_t mask = half >= 64 ? ~0ull : (1ull << half) - 1;
    return adag__order_mix(x ^ adag__order_mix(key + round)) & mask;
}

/* A bijection on [0, 2^(2*half)): four balanced Feistel rounds. */
static uint64_t feistel(uint64_t x, uint64_t key, unsigned half)
{
    uint64_t mask = (1ull << half) - 1;
    uint64_t l = x >> half, r = x & mask;
    for (unsigned round = 0; round < 4; round++) {
        uint64_t t = l ^ round_fn(r, key, round, half);
        l = r;
        r = t;
    }
    return (l << half) | r;
}

uint64_t adag__order_permute(uint64_t i, uint64_t n, uint64_t key)
{
    if (n <= 1)
        return 0;
    /* the smallest even bit count whose range holds n: the domain is at
     * most 4n, so a walk takes under 4 steps on average */
    unsigned bits = 2;
    while (bits < 62 && (1ull << bits) < n)
        bits += 2;
    uint64_t x = i;
    do
        x = feistel(x, key, bits / 2);
    while (x >= n);
    return x;
}

void adag__order_shuffle(uint32_t *perm, uint32_t n, uint64_t key)
{
    uint64_t state = key;
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint32_t i = n; i > 1; i--) {
        state = adag__order_mix(state);
        /* multiply-shift: an index below i from the high 32 bits */
        uint32_t j = (uint32_t)(((state >> 32) * (uint64_t)i) >> 32);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

uint64_t adag__order_window(uint64_t p, uint64_t n, uint64_t w, uint64_t seed, uint64_t epoch)
{
    if (w < 2 || n < 2)
        return p;
    uint64_t win = p / w, start = win * w;
    uint64_t len = n - start < w ? n - start : w;
    return start + adag__order_permute(p - start, len, adag__order_key(seed, epoch, 1, win));
}

/*
 * "geom" (tests/modules/geom_actors.c, for tests/test_geometry.c): an
 * actor that turns any value into one of the size its init gives, every
 * byte a function of every byte of its input, so a chain of them moves
 * values of very different sizes and the driver checks each byte against
 * geom_fill. init bytes: geom_init_t.
 *
 *   make(x) -> a tensor of dtype init.dtype, shape [init.elems] (one
 *       element more in execution init.over_ref, which then overflows a
 *       slot sized for init.elems): bytes geom_fill(geom_hash(x), stage).
 *       A device-bound actor computes it in a kernel on its stream
 *       (adag_call_enqueue; x and the result are device memory), a host
 *       actor in the method.
 */
#ifndef ADAG_TEST_GEOM_ACTORS_H
#define ADAG_TEST_GEOM_ACTORS_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    int32_t stage;
    uint32_t dtype;   /* adag_dtype_t of the result (not BYTES) */
    int64_t elems;    /* its elements */
    int64_t over_ref; /* the execution that writes elems + 1 (-1: none) */
} geom_init_t;

extern const adag_class_def_t test_geom_class;

static inline uint64_t geom_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A hash of n bytes (8 at a time, then the tail, then the length). */
static inline uint64_t geom_hash(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0x6a09e667f3bcc908ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = geom_mix(h ^ w);
    }
    uint64_t tail = 0;
    if (n > i)
        memcpy(&tail, b + i, n - i);
    return geom_mix(h ^ tail ^ ((uint64_t)n << 3));
}

/* n bytes of what stage `stage` makes of an input of hash h. */
static inline void geom_fill(void *out, size_t n, uint64_t h, int32_t stage)
{
    unsigned char *b = out;
    uint64_t seed = geom_mix(h + 0x9e3779b97f4a7c15ull * (uint64_t)(stage + 1));
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = geom_mix(seed + i);
        memcpy(b + i, &w, n - i < 8 ? n - i : 8);
    }
}

#endif

/*
 * f16 and bf16 <-> f32, exactly as IEEE says: widening is exact, narrowing
 * rounds to nearest, ties to even (NaN stays a quiet NaN, overflow goes to
 * inf). Static inline, no state: the host communicator's reductions
 * (gpu/comm_reduce.c) and the data stage's image map (data/image.c, in
 * libadag-data) each compile their own.
 */
#ifndef ADAG_COMMON_HALF_H
#define ADAG_COMMON_HALF_H

#include <stdint.h>
#include <string.h>

static inline float adag__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    float f;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | man << 13; /* inf, NaN (payload kept) */
    } else if (exp != 0) {
        bits = sign | (exp + 112) << 23 | man << 13; /* rebias 15 -> 127 */
    } else {
        f = (float)man * 0x1p-24f; /* zero or subnormal: man units of 2^-24, exact */
        memcpy(&bits, &f, sizeof(bits));
        bits |= sign;
    }
    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* q plus one if the dropped bits rem (of `shift` bits) are over half, or
 * exactly half and q is odd: round to nearest, ties to even. */
static inline uint32_t adag__round_even(uint32_t q, uint32_t rem, unsigned shift)
{
    uint32_t half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

static inline uint16_t adag__f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, top payload bits kept */
        return sign | 0x7e00u | (uint16_t)((ax >> 13) & 0x1ffu);
    if (ax >= 0x477ff000u) /* 65520 and up (inf too) round to inf */
        return sign | 0x7c00u;
    if (ax >= 0x38800000u) { /* a normal f16: rebias 127 -> 15, drop 13 bits */
        uint32_t r = ax - 0x38000000u;
        return sign | (uint16_t)adag__round_even(r >> 13, r & 0x1fffu, 13);
    }
    uint32_t exp = ax >> 23;
    if (exp < 102) /* below 2^-25: rounds to zero */
        return sign;
    /* subnormal: the value in units of 2^-24 is man >> (126 - exp) */
    uint32_t man = (ax & 0x7fffffu) | 0x800000u;
    unsigned shift = 126 - exp; /* 14..24 */
    return sign | (uint16_t)adag__round_even(man >> shift, man & ((1u << shift) - 1), shift);
}

static inline float adag__bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

static inline uint16_t adag__f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet */
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)adag__round_even(x >> 16, x & 0xffffu, 16); /* a carry reaches inf */
}

#endif

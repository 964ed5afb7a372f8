/* The device pipeline stage of tests/modules/gpu_stage.c and its C
 * reference (the test checks every element against stage_apply). */
#ifndef ADAG_TESTS_GPU_STAGE_H
#define ADAG_TESTS_GPU_STAGE_H

#include <adag.h>
#include <stdint.h>
#include <string.h>

extern const adag_class_def_t test_gpu_stage_class;

typedef struct {
    uint64_t ref;
    uint64_t elements;
    uint32_t dtype;
    int32_t device;
    int64_t method_ns; /* CLOCK_MONOTONIC when the method ran */
} stage_info_t;

/* What stage `stage` makes of one element: integers x * 3 + stage (wrapping
 * at their width), bool x ^ (stage & 1), f16/bf16 their bits ^ 0x0101 *
 * stage, f32/f64 x * 0.5 + stage (exact in binary floating point). */
static inline void stage_apply(uint32_t dtype, int stage, const void *in, void *out)
{
    switch ((adag_dtype_t)dtype) {
#define INT_CASE(D, T)                                                                         \
    case D: {                                                                                  \
        T v;                                                                                   \
        memcpy(&v, in, sizeof(v));                                                             \
        v = (T)((T)(v * 3) + (T)stage);                                                        \
        memcpy(out, &v, sizeof(v));                                                            \
        break;                                                                                 \
    }
        INT_CASE(ADAG_DTYPE_U8, uint8_t)
        INT_CASE(ADAG_DTYPE_I8, uint8_t)
        INT_CASE(ADAG_DTYPE_I16, uint16_t)
        INT_CASE(ADAG_DTYPE_I32, uint32_t)
        INT_CASE(ADAG_DTYPE_I64, uint64_t)
#undef INT_CASE
    case ADAG_DTYPE_BOOL:
        *(uint8_t *)out = (uint8_t)(*(const uint8_t *)in ^ (stage & 1));
        break;
    case ADAG_DTYPE_F16:
    case ADAG_DTYPE_BF16: {
        uint16_t v;
        memcpy(&v, in, 2);
        v ^= (uint16_t)(0x0101 * stage);
        memcpy(out, &v, 2);
        break;
    }
    case ADAG_DTYPE_F32: {
        float v;
        memcpy(&v, in, 4);
        v = v * 0.5f + (float)stage;
        memcpy(out, &v, 4);
        break;
    }
    case ADAG_DTYPE_F64: {
        double v;
        memcpy(&v, in, 8);
        v = v * 0.5 + stage;
        memcpy(out, &v, 8);
        break;
    }
    default:
        memcpy(out, in, 1);
        break;
    }
}

#endif

/*
 * The host communicator's reductions (gpu/comm_reduce.h): one plain loop
 * per dtype and op over restrict pointers, so the compiler vectorizes the
 * integer and f32/f64 ones. Signed integers add and multiply as their
 * unsigned twins (the same bits, without signed overflow); f16 and bf16 go
 * through f32 one element at a time.
 */
#include "gpu/comm_reduce.h"

#include "common/half.h"

#include <string.h>

int adag__reduce_supported(adag_dtype_t dtype, adag_reduce_op_t op)
{
    if (dtype < ADAG_DTYPE_U8 || dtype > ADAG_DTYPE_BOOL || op < ADAG_REDUCE_SUM ||
        op > ADAG_REDUCE_AVG)
        return 0;
    return !(dtype == ADAG_DTYPE_BOOL && op == ADAG_REDUCE_AVG);
}

const char *adag__reduce_op_name(adag_reduce_op_t op)
{
    static const char *const names[] = {"sum", "prod", "min", "max", "avg"};
    return (unsigned)op < sizeof(names) / sizeof(names[0]) ? names[op] : "?";
}

/* ---- the loops ---- */

/* dst[i] = EXPR of a = dst[i] and b = src[i], elements of type T: in
 * groups of 64 bytes (an inner loop of a constant count, which -O2's
 * cheap vectorizer takes), then the tail. */
#define LOOP(T, EXPR)                                                                          \
    do {                                                                                       \
        T *restrict d_ = dst;                                                                  \
        const T *restrict s_ = src;                                                            \
        enum { W_ = 64 / sizeof(T) };                                                          \
        size_t i = 0;                                                                          \
        for (; i + W_ <= n; i += W_)                                                           \
            for (size_t k = i; k < i + W_; k++) {                                              \
                T a = d_[k], b = s_[k];                                                        \
                d_[k] = (T)(EXPR);                                                             \
            }                                                                                  \
        for (; i < n; i++) {                                                                   \
            T a = d_[i], b = s_[i];                                                            \
            d_[i] = (T)(EXPR);                                                                 \
        }                                                                                      \
    } while (0)

/* The ops of an integer type S whose wrapping twin is U (and W, U widened
 * so a product of two U never overflows an int). */
#define INT_OPS(S, U, W)                                                                       \
    switch (op) {                                                                              \
    case ADAG_REDUCE_SUM:                                                                      \
    case ADAG_REDUCE_AVG:                                                                      \
        LOOP(U, (W)a + (W)b);                                                                  \
        return;                                                                                \
    case ADAG_REDUCE_PROD:                                                                     \
        LOOP(U, (W)a * (W)b);                                                                  \
        return;                                                                                \
    case ADAG_REDUCE_MIN:                                                                      \
        LOOP(S, b < a ? b : a);                                                                \
        return;                                                                                \
    case ADAG_REDUCE_MAX:                                                                      \
        LOOP(S, b > a ? b : a);                                                                \
        return;                                                                                \
    }

#define FLOAT_OPS(T)                                                                           \
    switch (op) {                                                                              \
    case ADAG_REDUCE_SUM:                                                                      \
    case ADAG_REDUCE_AVG:                                                                      \
        LOOP(T, a + b);                                                                        \
        return;                                                                                \
    case ADAG_REDUCE_PROD:                                                                     \
        LOOP(T, a * b);                                                                        \
        return;                                                                                \
    case ADAG_REDUCE_MIN:                                                                      \
        LOOP(T, b < a ? b : a);                                                                \
        return;                                                                                \
    case ADAG_REDUCE_MAX:                                                                      \
        LOOP(T, b > a ? b : a);                                                                \
        return;                                                                                \
    }

/* A 16-bit float through f32: TO_F32 and FROM_F32 convert. */
#define HALF_OPS(TO_F32, FROM_F32)                                                             \
    switch (op) {                                                                              \
    case ADAG_REDUCE_SUM:                                                                      \
    case ADAG_REDUCE_AVG:                                                                      \
        LOOP(uint16_t, FROM_F32(TO_F32(a) + TO_F32(b)));                                       \
        return;                                                                                \
    case ADAG_REDUCE_PROD:                                                                     \
        LOOP(uint16_t, FROM_F32(TO_F32(a) * TO_F32(b)));                                       \
        return;                                                                                \
    case ADAG_REDUCE_MIN:                                                                      \
        LOOP(uint16_t, FROM_F32(TO_F32(b) < TO_F32(a) ? TO_F32(b) : TO_F32(a)));               \
        return;                                                                                \
    case ADAG_REDUCE_MAX:                                                                      \
        LOOP(uint16_t, FROM_F32(TO_F32(b) > TO_F32(a) ? TO_F32(b) : TO_F32(a)));               \
        return;                                                                                \
    }

void adag__reduce_into(adag_dtype_t dtype, adag_reduce_op_t op, void *restrict dst,
                      const void *restrict src, size_t n)
{
    switch (dtype) {
    case ADAG_DTYPE_U8:
        INT_OPS(uint8_t, uint8_t, unsigned);
        return;
    case ADAG_DTYPE_I8:
        INT_OPS(int8_t, uint8_t, unsigned);
        return;
    case ADAG_DTYPE_I16:
        INT_OPS(int16_t, uint16_t, uint32_t);
        return;
    case ADAG_DTYPE_I32:
        INT_OPS(int32_t, uint32_t, uint32_t);
        return;
    case ADAG_DTYPE_I64:
        INT_OPS(int64_t, uint64_t, uint64_t);
        return;
    case ADAG_DTYPE_F16:
        HALF_OPS(adag__f16_to_f32, adag__f32_to_f16);
        return;
    case ADAG_DTYPE_BF16:
        HALF_OPS(adag__bf16_to_f32, adag__f32_to_bf16);
        return;
    case ADAG_DTYPE_F32:
        FLOAT_OPS(float);
        return;
    case ADAG_DTYPE_F64:
        FLOAT_OPS(double);
        return;
    case ADAG_DTYPE_BOOL:
        if (op == ADAG_REDUCE_SUM || op == ADAG_REDUCE_MAX)
            LOOP(uint8_t, (a | b) != 0);
        else
            LOOP(uint8_t, (a != 0) & (b != 0));
        return;
    case ADAG_DTYPE_BYTES:
        return;
    }
}

#define DIVIDE(T, EXPR)                                                                        \
    do {                                                                                       \
        T *d_ = dst;                                                                           \
        for (size_t i = 0; i < n; i++) {                                                       \
            T a = d_[i];                                                                       \
            d_[i] = (T)(EXPR);                                                                 \
        }                                                                                      \
    } while (0)

void adag__reduce_divide(adag_dtype_t dtype, void *dst, size_t n, unsigned divisor)
{
    /* C's integer division truncates toward zero */
    int sdiv = (int)divisor;
    switch (dtype) {
    case ADAG_DTYPE_U8:
        DIVIDE(uint8_t, a / divisor);
        return;
    case ADAG_DTYPE_I8:
        DIVIDE(int8_t, a / sdiv);
        return;
    case ADAG_DTYPE_I16:
        DIVIDE(int16_t, a / sdiv);
        return;
    case ADAG_DTYPE_I32:
        DIVIDE(int32_t, a / sdiv);
        return;
    case ADAG_DTYPE_I64:
        DIVIDE(int64_t, a / (int64_t)sdiv);
        return;
    case ADAG_DTYPE_F16:
        DIVIDE(uint16_t, adag__f32_to_f16(adag__f16_to_f32(a) / (float)divisor));
        return;
    case ADAG_DTYPE_BF16:
        DIVIDE(uint16_t, adag__f32_to_bf16(adag__bf16_to_f32(a) / (float)divisor));
        return;
    case ADAG_DTYPE_F32:
        DIVIDE(float, a / (float)divisor);
        return;
    case ADAG_DTYPE_F64:
        DIVIDE(double, a / (double)divisor);
        return;
    case ADAG_DTYPE_BOOL:
    case ADAG_DTYPE_BYTES:
        return;
    }
}

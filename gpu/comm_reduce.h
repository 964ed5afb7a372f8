/*
 * The element-wise reductions of the host communicator's collectives
 * (gpu/comm_reduce.c), one loop per dtype and op, and the f16/bf16
 * conversions they go through (common/half.h).
 *
 * Semantics (adag_reduce_op_t, include/adag.h):
 *   u8 i8 i16 i32 i64  SUM and PROD wrap (two's complement); MIN/MAX by
 *                      the type's signedness; AVG = the wrapped sum divided
 *                      by the number of ranks, truncated toward zero;
 *   f32 f64            IEEE arithmetic; MIN is (b < a ? b : a), MAX is
 *                      (b > a ? b : a); AVG = the sum divided at the end;
 *   f16 bf16           each step in f32 (exact conversions), rounded back
 *                      to nearest, ties to even;
 *   bool               SUM and MAX are OR, PROD and MIN are AND (results
 *                      0 or 1; any nonzero byte is true); no AVG.
 */
#ifndef ADAG_GPU_COMM_REDUCE_H
#define ADAG_GPU_COMM_REDUCE_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

/* Nonzero if dtype (not ADAG_DTYPE_BYTES) can be reduced with op. */
int adag__reduce_supported(adag_dtype_t dtype, adag_reduce_op_t op);
/* "sum", "prod", "min", "max", "avg"; "?" for another number. */
const char *adag__reduce_op_name(adag_reduce_op_t op);

/* dst[i] = dst[i] op src[i] for i < n elements of dtype (AVG sums; its
 * division is adag__reduce_divide's). dst and src do not overlap. */
void adag__reduce_into(adag_dtype_t dtype, adag_reduce_op_t op, void *restrict dst,
                      const void *restrict src, size_t n);
/* dst[i] = dst[i] / divisor: AVG's last step. */
void adag__reduce_divide(adag_dtype_t dtype, void *dst, size_t n, unsigned divisor);

#endif

#ifndef ADAG_TEST_TENSOR_ACTORS_H
#define ADAG_TEST_TENSOR_ACTORS_H
#include <adag.h>
#include <stdint.h>

/* "tensor" (tests/modules/tensor_actors.c, in the test module and the test
 * programs): no state. Methods:
 *   interleave(t) -> t's dtype, t's shape with the last dimension doubled
 *       (a scalar becomes [2]): out[2k] = f(t[k]), out[2k+1] = g(t[k]) in
 *       row-major order, f and g per dtype (tests/test_tensor.c has the
 *       reference); fails unless t is a host tensor whose size is its shape's;
 *   emit(spec) -> what spec (a tensor_spec_t) asks for, byte k = k * 7 + 1;
 *       the status of adag_call_output(_tensor) is returned as is;
 *   pair(t, b) -> (interleave(t), the bytes b). */
typedef struct {
    uint32_t dtype;    /* ADAG_DTYPE_BYTES: shape[0] bytes with adag_call_output */
    uint32_t ndim;
    int64_t shape[ADAG_MAX_DIMS];
    uint32_t fallback; /* when the output is refused: write 8 bytes instead, return OK */
    uint32_t pad;
} tensor_spec_t;

extern const adag_class_def_t test_tensor_class;
#endif

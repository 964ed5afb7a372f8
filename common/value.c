#include "common/value.h"

#include "common/error.h"

adag_status_t adag_value_check_input(const adag_value_t *v, const char *fn, unsigned i)
{
    for (unsigned r = 0; r < sizeof(v->reserved) / sizeof(v->reserved[0]); r++)
        if (v->reserved[r])
            return adag_error(ADAG_ERR_INVALID,
                              "%s: input %u: reserved[%u] is 0x%llx; the reserved words of "
                              "adag_value_t must be zero",
                              fn, i, r, (unsigned long long)v->reserved[r]);
    if (v->ndim > ADAG_MAX_DIMS)
        return adag_error(ADAG_ERR_INVALID, "%s: input %u: ndim %u exceeds ADAG_MAX_DIMS (%d)", fn,
                          i, v->ndim, ADAG_MAX_DIMS);
    if (v->kind == ADAG_VALUE_TENSOR)
        return adag_error(ADAG_ERR_INVALID,
                          "%s: input %u: kind ADAG_VALUE_TENSOR is not accepted yet: tensor "
                          "values come with the GPU layer",
                          fn, i);
    if (v->kind != ADAG_VALUE_BYTES)
        return adag_error(ADAG_ERR_INVALID, "%s: input %u: unknown value kind %d", fn, i,
                          (int)v->kind);
    if (v->dtype != ADAG_DTYPE_BYTES || v->ndim != 0 || v->device != ADAG_DEVICE_HOST)
        return adag_error(ADAG_ERR_INVALID,
                          "%s: input %u: a bytes value (ADAG_VALUE_BYTES) has dtype %d, ndim %u "
                          "and device %d; all three must be 0 (tensor fields are for "
                          "ADAG_VALUE_TENSOR)",
                          fn, i, (int)v->dtype, v->ndim, (int)v->device);
    if (v->size && !v->data)
        return adag_error(ADAG_ERR_INVALID, "%s: input %u: data is NULL but size is %zu", fn, i,
                          v->size);
    return ADAG_OK;
}

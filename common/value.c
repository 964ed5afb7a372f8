#include "common/value.h"

#include "common/error.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [ADAG_DTYPE_BYTES] = {"bytes", 1}, [ADAG_DTYPE_U8] = {"u8", 1},
    [ADAG_DTYPE_I8] = {"i8", 1},       [ADAG_DTYPE_I16] = {"i16", 2},
    [ADAG_DTYPE_I32] = {"i32", 4},     [ADAG_DTYPE_I64] = {"i64", 8},
    [ADAG_DTYPE_F16] = {"f16", 2},     [ADAG_DTYPE_BF16] = {"bf16", 2},
    [ADAG_DTYPE_F32] = {"f32", 4},     [ADAG_DTYPE_F64] = {"f64", 8},
    [ADAG_DTYPE_BOOL] = {"bool", 1},
};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

size_t adag_dtype_size(adag_dtype_t dtype)
{
    return (unsigned)dtype < NDTYPES ? dtypes[dtype].size : 0;
}

const char *adag_dtype_name(adag_dtype_t dtype)
{
    return (unsigned)dtype < NDTYPES ? dtypes[dtype].name : "?";
}

static const char *const device_kinds[] = {
    [ADAG_DEV_HOST] = "host",
    [ADAG_DEV_EMULATED] = "emu",
    [ADAG_DEV_CUDA] = "cuda",
};
#define NDEVICE_KINDS (sizeof(device_kinds) / sizeof(device_kinds[0]))

const char *adag_device_kind_name(adag_device_kind_t kind)
{
    return (unsigned)kind < NDEVICE_KINDS ? device_kinds[kind] : "?";
}

int adag__device_id_valid(int32_t device)
{
    adag_device_kind_t kind = ADAG_DEVICE_KIND(device);
    return device >= 0 && (unsigned)kind < NDEVICE_KINDS &&
           (kind != ADAG_DEV_HOST || device == ADAG_DEVICE_HOST);
}

const char *adag__device_name(int32_t device, char buf[ADAG_DEVICE_NAME_MAX])
{
    if (device == ADAG_DEVICE_HOST)
        snprintf(buf, ADAG_DEVICE_NAME_MAX, "host");
    else if (adag__device_id_valid(device))
        snprintf(buf, ADAG_DEVICE_NAME_MAX, "%s:%u",
                 adag_device_kind_name(ADAG_DEVICE_KIND(device)), ADAG_DEVICE_INDEX(device));
    else
        snprintf(buf, ADAG_DEVICE_NAME_MAX, "0x%08x (no such device)", (unsigned)device);
    return buf;
}

adag_tensor_check_t adag__tensor_bytes(uint32_t dtype, uint32_t ndim, const int64_t *shape,
                                      size_t *bytes, char *why, size_t len)
{
    char scratch[8];
    if (!why) {
        why = scratch;
        len = sizeof(scratch);
    }
    if (!adag__dtype_is_tensor(dtype)) {
        snprintf(why, len, "dtype %u (%s) is not a tensor dtype (ADAG_DTYPE_U8..ADAG_DTYPE_BOOL)",
                 dtype, adag_dtype_name((adag_dtype_t)dtype));
        return ADAG_TENSOR_BAD;
    }
    if (ndim > ADAG_MAX_DIMS) {
        snprintf(why, len, "ndim %u exceeds ADAG_MAX_DIMS (%d)", ndim, ADAG_MAX_DIMS);
        return ADAG_TENSOR_BAD;
    }
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            snprintf(why, len, "shape[%u] is %lld; dimensions must be >= 0", d,
                     (long long)shape[d]);
            return ADAG_TENSOR_BAD;
        }
    }
    /* a zero dimension makes 0 bytes whatever the others are */
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] == 0) {
            *bytes = 0;
            return ADAG_TENSOR_OK;
        }
    }
    size_t n = dtypes[dtype].size;
    for (uint32_t d = 0; d < ndim; d++) {
        if ((uint64_t)shape[d] > SIZE_MAX / n) {
            char t[160];
            adag__tensor_format(t, sizeof(t), dtype, ndim, shape);
            snprintf(why, len, "%s has more bytes than a size_t holds", t);
            return ADAG_TENSOR_OVERFLOW;
        }
        n *= (size_t)shape[d];
    }
    *bytes = n;
    return ADAG_TENSOR_OK;
}

void adag__tensor_format(char *buf, size_t len, uint32_t dtype, uint32_t ndim,
                        const int64_t *shape)
{
    if (dtype == ADAG_DTYPE_BYTES) {
        snprintf(buf, len, "bytes");
        return;
    }
    size_t pos = (size_t)snprintf(buf, len, "%s[", adag_dtype_name((adag_dtype_t)dtype));
    for (uint32_t d = 0; d < ndim && d < ADAG_MAX_DIMS && pos < len; d++)
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%lld", d ? "," : "", (long long)shape[d]);
    if (pos < len)
        snprintf(buf + pos, len - pos, "]");
}

void adag__tensor_decl_format(char *buf, size_t len, const adag_tensor_decl_t *d)
{
    if (!(d->flags & (ADAG_TENSOR_STATIC_DTYPE | ADAG_TENSOR_STATIC_SHAPE))) {
        snprintf(buf, len, "%s", "");
        return;
    }
    const char *dt = d->flags & ADAG_TENSOR_STATIC_DTYPE ? adag_dtype_name((adag_dtype_t)d->dtype)
                                                         : "?";
    if (!(d->flags & ADAG_TENSOR_STATIC_SHAPE)) {
        snprintf(buf, len, "%s[?]", dt);
        return;
    }
    size_t pos = (size_t)snprintf(buf, len, "%s[", dt);
    for (uint32_t k = 0; k < d->ndim && k < ADAG_MAX_DIMS && pos < len; k++)
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%lld", k ? "," : "",
                                (long long)d->shape[k]);
    if (pos < len)
        snprintf(buf + pos, len - pos, "]");
}

int adag__tensor_decl_valid(const adag_tensor_decl_t *d)
{
    if ((d->flags & ~(uint32_t)ADAG_TENSOR_DECL_KNOWN) ||
        (d->flags && !(d->flags & ADAG_TENSOR_DECLARED)) || d->transport > ADAG_TRANSPORT_COMM)
        return 0;
    if ((d->flags & ADAG_TENSOR_STATIC_DTYPE) ? !adag__dtype_is_tensor(d->dtype) : d->dtype != 0)
        return 0;
    if (d->ndim > ADAG_MAX_DIMS || (!(d->flags & ADAG_TENSOR_STATIC_SHAPE) && d->ndim != 0))
        return 0;
    for (uint32_t k = 0; k < ADAG_MAX_DIMS; k++)
        if (k < d->ndim ? d->shape[k] < 0 : d->shape[k] != 0)
            return 0;
    return 1;
}

adag_status_t adag__value_check_input(const adag_value_t *v, const char *fn, unsigned i)
{
    for (unsigned r = 0; r < sizeof(v->reserved) / sizeof(v->reserved[0]); r++)
        if (v->reserved[r])
            return adag__error(ADAG_ERR_INVALID,
                              "%s: input %u: reserved[%u] is 0x%llx; the reserved words of "
                              "adag_value_t must be zero",
                              fn, i, r, (unsigned long long)v->reserved[r]);
    if (v->ndim > ADAG_MAX_DIMS)
        return adag__error(ADAG_ERR_INVALID, "%s: input %u: ndim %u exceeds ADAG_MAX_DIMS (%d)", fn,
                          i, v->ndim, ADAG_MAX_DIMS);
    if (v->kind == ADAG_VALUE_TENSOR) {
        char why[200];
        size_t bytes = 0;
        if (!adag__device_id_valid(v->device))
            return adag__error(ADAG_ERR_INVALID,
                              "%s: input %u: a tensor on device 0x%08x, which is neither "
                              "ADAG_DEVICE_HOST nor ADAG_DEVICE(kind, index) of a kind of "
                              "adag_device_kind_t",
                              fn, i, (unsigned)v->device);
        /* whether its device may be used: the DAG's (driver_device) */
        if (adag__tensor_bytes(v->dtype, v->ndim, v->shape, &bytes, why, sizeof(why)) !=
            ADAG_TENSOR_OK)
            return adag__error(ADAG_ERR_INVALID, "%s: input %u: a tensor whose %s", fn, i, why);
        if (bytes != v->size) {
            char t[160];
            adag__tensor_format(t, sizeof(t), v->dtype, v->ndim, v->shape);
            return adag__error(ADAG_ERR_INVALID,
                              "%s: input %u: size is %zu bytes but a %s tensor is %zu bytes", fn,
                              i, v->size, t, bytes);
        }
    } else if (v->kind != ADAG_VALUE_BYTES) {
        return adag__error(ADAG_ERR_INVALID, "%s: input %u: unknown value kind %d", fn, i,
                          (int)v->kind);
    } else if (v->dtype != ADAG_DTYPE_BYTES || v->ndim != 0 || v->device != ADAG_DEVICE_HOST) {
        char dev[ADAG_DEVICE_NAME_MAX];
        return adag__error(ADAG_ERR_INVALID,
                          "%s: input %u: a bytes value (ADAG_VALUE_BYTES) has dtype %d, ndim %u "
                          "and device %s; they must be 0, 0 and host (tensor fields are for "
                          "ADAG_VALUE_TENSOR)",
                          fn, i, (int)v->dtype, v->ndim, adag__device_name(v->device, dev));
    }
    if (v->size && !v->data)
        return adag__error(ADAG_ERR_INVALID, "%s: input %u: data is NULL but size is %zu", fn, i,
                          v->size);
    return ADAG_OK;
}

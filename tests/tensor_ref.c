#include "tensor_ref.h"

#include <string.h>

const adag_dtype_t t_dtypes[T_NDTYPES] = {
    ADAG_DTYPE_U8,  ADAG_DTYPE_I8,   ADAG_DTYPE_I16, ADAG_DTYPE_I32, ADAG_DTYPE_I64,
    ADAG_DTYPE_F16, ADAG_DTYPE_BF16, ADAG_DTYPE_F32, ADAG_DTYPE_F64, ADAG_DTYPE_BOOL,
};

adag_runtime_h t_runtime(void)
{
    adag_runtime_h rt = h_runtime();
    ASSERT_OK(adag_class_register(rt, &test_tensor_class));
    return rt;
}

adag_actor_h t_actor(adag_runtime_h rt, adag_placement_t pl, const char *name)
{
    adag_actor_params_t p = h_actor_params_init("tensor", pl, name, NULL, 0);
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    return a;
}

size_t t_elem(adag_dtype_t dt)
{
    static const size_t sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 1};
    cr_assert((unsigned)dt < sizeof(sizes) / sizeof(sizes[0]));
    return sizes[dt];
}

size_t t_count(unsigned ndim, const int64_t *shape)
{
    size_t n = 1;
    for (unsigned d = 0; d < ndim; d++)
        n *= (size_t)shape[d];
    return n;
}

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static float float_of_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void t_fill(adag_dtype_t dt, size_t count, unsigned seed, void *buf)
{
    uint32_t s = seed * 2654435761u + 12345u;
    for (size_t k = 0; k < count; k++) {
        s = s * 1103515245u + 12345u;
        uint64_t bits = ((uint64_t)s << 32) | (s >> 7);
        double real = ((double)k - 7.0) * 0.5 + seed * 0.25;
        switch (dt) {
        case ADAG_DTYPE_BOOL:
            ((uint8_t *)buf)[k] = (uint8_t)((s >> 13) & 1);
            break;
        case ADAG_DTYPE_BF16: {
            uint16_t b = bf16_of((float)real);
            memcpy((char *)buf + 2 * k, &b, 2);
            break;
        }
        case ADAG_DTYPE_F32: {
            float f = (float)real;
            memcpy((char *)buf + 4 * k, &f, 4);
            break;
        }
        case ADAG_DTYPE_F64:
            memcpy((char *)buf + 8 * k, &real, 8);
            break;
        default: /* integers and f16: any bits */
            memcpy((char *)buf + t_elem(dt) * k, &bits, t_elem(dt));
            break;
        }
    }
}

/* One element: f into out[0], g into out[1]. */
static void ref_elem(adag_dtype_t dt, const void *in, void *out)
{
#define INT_CASE(T, U)                                                                       \
    {                                                                                        \
        T x, o[2];                                                                           \
        memcpy(&x, in, sizeof(x));                                                           \
        o[0] = (T)(U)((U)x * 3u + 1u);                                                       \
        o[1] = (T)(U)((U)x ^ 0x5au);                                                         \
        memcpy(out, o, sizeof(o));                                                           \
        return;                                                                              \
    }
    switch (dt) {
    case ADAG_DTYPE_U8:
        INT_CASE(uint8_t, uint8_t)
    case ADAG_DTYPE_I8:
        INT_CASE(int8_t, uint8_t)
    case ADAG_DTYPE_I16:
        INT_CASE(int16_t, uint16_t)
    case ADAG_DTYPE_I32:
        INT_CASE(int32_t, uint32_t)
    case ADAG_DTYPE_I64:
        INT_CASE(int64_t, uint64_t)
    case ADAG_DTYPE_BOOL: {
        const uint8_t *x = in;
        uint8_t o[2] = {(uint8_t)(*x == 0), *x};
        memcpy(out, o, 2);
        return;
    }
    case ADAG_DTYPE_F16: { /* -x and |x| on the IEEE half's sign bit */
        uint16_t x, o[2];
        memcpy(&x, in, 2);
        o[0] = (uint16_t)(x ^ 0x8000u);
        o[1] = (uint16_t)(x & 0x7fffu);
        memcpy(out, o, 4);
        return;
    }
    case ADAG_DTYPE_BF16: { /* through float: -x and |x| are exact */
        uint16_t x, o[2];
        memcpy(&x, in, 2);
        float f = float_of_bf16(x);
        uint32_t fb;
        memcpy(&fb, &f, 4);
        o[0] = bf16_of(-f);
        o[1] = bf16_of(fb >> 31 ? -f : f); /* -0 too */
        memcpy(out, o, 4);
        return;
    }
    case ADAG_DTYPE_F32: {
        float x, o[2];
        memcpy(&x, in, 4);
        o[0] = x * 2.5f + 1.0f;
        o[1] = -x;
        memcpy(out, o, 8);
        return;
    }
    case ADAG_DTYPE_F64: {
        double x, o[2];
        memcpy(&x, in, 8);
        o[0] = x * 2.5 + 1.0;
        o[1] = -x;
        memcpy(out, o, 16);
        return;
    }
    default:
        cr_assert_fail("no reference for dtype %d", (int)dt);
    }
#undef INT_CASE
}

void t_interleave(adag_dtype_t dt, unsigned *ndim, int64_t *shape, const void *in, void *out)
{
    size_t n = t_elem(dt), count = t_count(*ndim, shape);
    for (size_t k = 0; k < count; k++)
        ref_elem(dt, (const char *)in + k * n, (char *)out + 2 * k * n);
    if (*ndim == 0) {
        *ndim = 1;
        shape[0] = 1;
    }
    shape[*ndim - 1] *= 2;
}

adag_value_t t_tensor(adag_dtype_t dt, unsigned ndim, const int64_t *shape, const void *data)
{
    adag_value_t v = {.data = data, .kind = ADAG_VALUE_TENSOR, .dtype = dt, .ndim = ndim};
    for (unsigned d = 0; d < ndim; d++)
        v.shape[d] = shape[d];
    v.size = t_count(ndim, shape) * t_elem(dt);
    return v;
}

void t_assert_tensor(const adag_value_t *v, adag_dtype_t dt, unsigned ndim, const int64_t *shape,
                     const void *expect, const char *what)
{
    cr_assert_eq(v->kind, ADAG_VALUE_TENSOR, "%s: kind %d", what, (int)v->kind);
    cr_assert_eq(v->dtype, dt, "%s: dtype %s, expected %s", what, adag_dtype_name(v->dtype),
                 adag_dtype_name(dt));
    cr_assert_eq(v->device, ADAG_DEVICE_HOST, "%s: device %d", what, (int)v->device);
    cr_assert_eq(v->ndim, ndim, "%s: ndim %u, expected %u", what, v->ndim, ndim);
    for (unsigned d = 0; d < ADAG_MAX_DIMS; d++)
        cr_assert_eq(v->shape[d], d < ndim ? shape[d] : 0, "%s: shape[%u] is %lld", what, d,
                     (long long)v->shape[d]);
    for (unsigned r = 0; r < 4; r++)
        cr_assert_eq(v->reserved[r], 0, "%s: reserved[%u] set", what, r);
    size_t n = t_elem(dt), count = t_count(ndim, shape);
    cr_assert_eq(v->size, count * n, "%s: size %zu, expected %zu", what, v->size, count * n);
    cr_assert(count == 0 || v->data, "%s: no data", what);
    for (size_t k = 0; k < count; k++)
        cr_assert(memcmp((const char *)v->data + k * n, (const char *)expect + k * n, n) == 0,
                  "%s: %s element %zu differs from the reference", what, adag_dtype_name(dt), k);
}

tensor_spec_t t_spec(adag_dtype_t dt, unsigned ndim, const int64_t *shape)
{
    tensor_spec_t s = {.dtype = (uint32_t)dt, .ndim = ndim};
    for (unsigned d = 0; d < ndim; d++)
        s.shape[d] = shape[d];
    return s;
}

adag_tensor_params_t t_params(adag_dtype_t dt, int ndim, const int64_t *shape)
{
    adag_tensor_params_t p = {.field_mask = 0};
    if (dt != ADAG_DTYPE_BYTES) {
        p.field_mask |= ADAG_TENSOR_PARAM_DTYPE;
        p.dtype = dt;
    }
    if (ndim >= 0) {
        p.field_mask |= ADAG_TENSOR_PARAM_SHAPE;
        p.ndim = (unsigned)ndim;
        for (int d = 0; d < ndim; d++)
            p.shape[d] = shape[d];
    }
    return p;
}

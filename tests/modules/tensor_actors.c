/*
 * The "tensor" test class (tensor_actors.h): methods that read tensor
 * arguments and write tensor returns, element by element, for every dtype.
 * Exported by the test module (test_actors.c's ADAG_MODULE) and compiled
 * into the test programs for thread actors.
 */
#include "tensor_actors.h"

#include <stdio.h>
#include <string.h>

static size_t elem_size(adag_dtype_t dt)
{
    switch (dt) {
    case ADAG_DTYPE_U8:
    case ADAG_DTYPE_I8:
    case ADAG_DTYPE_BOOL:
        return 1;
    case ADAG_DTYPE_I16:
    case ADAG_DTYPE_F16:
    case ADAG_DTYPE_BF16:
        return 2;
    case ADAG_DTYPE_I32:
    case ADAG_DTYPE_F32:
        return 4;
    case ADAG_DTYPE_I64:
    case ADAG_DTYPE_F64:
        return 8;
    default:
        return 0;
    }
}

/* out[0] = f(in), out[1] = g(in) for one element; 0, or -1 if it is not a
 * valid element (a bool other than 0/1) */
static int pair_elem(adag_dtype_t dt, const unsigned char *in, unsigned char *out)
{
    size_t n = elem_size(dt);
    switch (dt) {
    case ADAG_DTYPE_U8:
    case ADAG_DTYPE_I8:
    case ADAG_DTYPE_I16:
    case ADAG_DTYPE_I32:
    case ADAG_DTYPE_I64: {
        /* on the unsigned bits of the element's width (little-endian) */
        uint64_t x = 0, f, g;
        memcpy(&x, in, n);
        f = x * 3u + 1u;
        g = x ^ 0x5au;
        memcpy(out, &f, n);
        memcpy(out + n, &g, n);
        return 0;
    }
    case ADAG_DTYPE_BOOL:
        if (in[0] > 1)
            return -1;
        out[0] = (unsigned char)!in[0];
        out[1] = in[0];
        return 0;
    case ADAG_DTYPE_F16:
    case ADAG_DTYPE_BF16: {
        uint16_t x, f, g;
        memcpy(&x, in, 2);
        f = (uint16_t)(x ^ 0x8000u); /* -x */
        g = (uint16_t)(x & 0x7fffu); /* |x| */
        memcpy(out, &f, 2);
        memcpy(out + 2, &g, 2);
        return 0;
    }
    case ADAG_DTYPE_F32: {
        float x, f, g;
        memcpy(&x, in, 4);
        f = x * 2.5f + 1.0f;
        g = -x;
        memcpy(out, &f, 4);
        memcpy(out + 4, &g, 4);
        return 0;
    }
    case ADAG_DTYPE_F64: {
        double x, f, g;
        memcpy(&x, in, 8);
        f = x * 2.5 + 1.0;
        g = -x;
        memcpy(out, &f, 8);
        memcpy(out + 8, &g, 8);
        return 0;
    }
    default:
        return -1;
    }
}

/* Writes interleave(arg 0) into return `ret`. */
static adag_status_t interleave_into(adag_call_h call, unsigned ret)
{
    adag_value_t t;
    adag_status_t st = adag_call_arg(call, 0, &t);
    if (st != ADAG_OK)
        return st;
    if (t.kind != ADAG_VALUE_TENSOR || t.device != ADAG_DEVICE_HOST || t.ndim > ADAG_MAX_DIMS)
        return adag_call_fail(call, "interleave: argument is not a host tensor (kind %d, device "
                                    "%d, ndim %u)",
                              (int)t.kind, (int)t.device, t.ndim);
    size_t n = elem_size(t.dtype), count = 1;
    if (n == 0)
        return adag_call_fail(call, "interleave: dtype %d", (int)t.dtype);
    int64_t shape[ADAG_MAX_DIMS];
    unsigned ndim = t.ndim ? t.ndim : 1;
    for (unsigned d = 0; d < t.ndim; d++) {
        shape[d] = t.shape[d];
        count *= (size_t)t.shape[d];
    }
    if (count * n != t.size)
        return adag_call_fail(call, "interleave: size %zu is not %zu elements of %zu bytes",
                              t.size, count, n);
    if (t.ndim == 0)
        shape[0] = 1;
    shape[ndim - 1] *= 2;
    void *buf;
    if ((st = adag_call_output_tensor(call, ret, t.dtype, ndim, shape, &buf)) != ADAG_OK)
        return st;
    const unsigned char *in = t.data;
    unsigned char *out = buf;
    for (size_t k = 0; k < count; k++)
        if (pair_elem(t.dtype, in + k * n, out + 2 * k * n) != 0)
            return adag_call_fail(call, "interleave: element %zu is not a valid %s", k,
                                  adag_dtype_name(t.dtype));
    return ADAG_OK;
}

static adag_status_t tensor_interleave(void *state, adag_call_h call)
{
    (void)state;
    return interleave_into(call, 0);
}

static adag_status_t tensor_emit(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t in;
    tensor_spec_t spec;
    void *buf = NULL;
    size_t size = 0;
    adag_status_t st = adag_call_arg(call, 0, &in);
    if (st != ADAG_OK)
        return st;
    if (in.size != sizeof(spec))
        return adag_call_fail(call, "emit: expects a tensor_spec_t");
    memcpy(&spec, in.data, sizeof(spec));
    if (spec.dtype == ADAG_DTYPE_BYTES) {
        size = (size_t)spec.shape[0];
        st = adag_call_output(call, 0, size, &buf);
    } else {
        size = elem_size((adag_dtype_t)spec.dtype);
        for (unsigned d = 0; d < spec.ndim && d < ADAG_MAX_DIMS; d++)
            size *= (size_t)spec.shape[d];
        st = adag_call_output_tensor(call, 0, (adag_dtype_t)spec.dtype, spec.ndim, spec.shape,
                                     &buf);
    }
    if (st != ADAG_OK) {
        if (!spec.fallback)
            return st;
        /* a method that ignores the refusal, writes what it can and
         * returns OK: the execution fails all the same */
        int64_t x = 8;
        (void)adag_call_set_output(call, 0, &x, sizeof(x));
        (void)adag_call_output_tensor(call, 0, ADAG_DTYPE_I64, 1, &x, &buf);
        return ADAG_OK;
    }
    unsigned char *p = buf;
    for (size_t k = 0; k < size; k++)
        p[k] = (unsigned char)(k * 7 + 1);
    return ADAG_OK;
}

static adag_status_t tensor_pair(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t b;
    adag_status_t st = interleave_into(call, 0);
    if (st != ADAG_OK)
        return st;
    if ((st = adag_call_arg(call, 1, &b)) != ADAG_OK)
        return st;
    if (b.kind != ADAG_VALUE_BYTES)
        return adag_call_fail(call, "pair: argument 1 is not bytes (kind %d)", (int)b.kind);
    return adag_call_set_output(call, 1, b.data, b.size);
}

static const adag_method_def_t tensor_methods[] = {
    {"interleave", tensor_interleave, 1, 1},
    {"emit", tensor_emit, 1, 1},
    {"pair", tensor_pair, 2, 2},
};

const adag_class_def_t test_tensor_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "tensor",
    .state_size = 8,
    .methods = tensor_methods,
    .nmethods = sizeof(tensor_methods) / sizeof(tensor_methods[0]),
};

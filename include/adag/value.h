/*
 * Values: dtypes, device ids, and adag_value_t (bytes or a tensor, in host
 * or device memory).
 *
 * A part of <adag.h>, which programs and modules include (it includes
 * every part, in order; this one includes the parts it builds on).
 */
#ifndef ADAG_VALUE_H
#define ADAG_VALUE_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

typedef enum {
    ADAG_VALUE_BYTES = 0,  /* plain bytes in host memory */
    ADAG_VALUE_TENSOR = 1, /* a dense, contiguous (row-major) tensor: dtype, shape,
                              device; size is the product of the shape times the
                              dtype's size */
} adag_value_kind_t;

/* Element types of tensor values. ADAG_DTYPE_BYTES (0) is untyped bytes,
 * the dtype of every ADAG_VALUE_BYTES value. New types get new numbers. */
typedef enum {
    ADAG_DTYPE_BYTES = 0,
    ADAG_DTYPE_U8 = 1,
    ADAG_DTYPE_I8 = 2,
    ADAG_DTYPE_I16 = 3,
    ADAG_DTYPE_I32 = 4,
    ADAG_DTYPE_I64 = 5,
    ADAG_DTYPE_F16 = 6,
    ADAG_DTYPE_BF16 = 7,
    ADAG_DTYPE_F32 = 8,
    ADAG_DTYPE_F64 = 9,
    ADAG_DTYPE_BOOL = 10,
} adag_dtype_t;

#define ADAG_MAX_DIMS 8

/* How a collective combines the ranks' elements (adag_graph_allreduce,
 * adag_graph_reducescatter). Integers wrap at their width; AVG is the SUM
 * divided by the number of ranks (integers: truncated toward zero); f16 and
 * bf16 are computed in f32 and rounded to nearest even. bool: SUM and MAX
 * are OR, PROD and MIN are AND, AVG is refused. */
typedef enum {
    ADAG_REDUCE_SUM = 0,
    ADAG_REDUCE_PROD = 1,
    ADAG_REDUCE_MIN = 2,
    ADAG_REDUCE_MAX = 3,
    ADAG_REDUCE_AVG = 4,
} adag_reduce_op_t;

/* Bytes per element of a dtype (1 for ADAG_DTYPE_BYTES and BOOL), 0 for a
 * number that is not an adag_dtype_t. */
ADAG_API size_t adag_dtype_size(adag_dtype_t dtype);
/* "f32", "bf16", ...; "?" for an unknown number. */
ADAG_API const char *adag_dtype_name(adag_dtype_t dtype);

/* Kinds of memory a value's bytes can live in. */
typedef enum {
    ADAG_DEV_HOST = 0,     /* host memory ("host") */
    ADAG_DEV_EMULATED = 1, /* the emulated device "emu:<index>" (ADAG_EMU_DEVICES of
                              them): host memory, with threads for its streams */
    ADAG_DEV_CUDA = 2,     /* a CUDA device "cuda:<index>" (the index-th the process sees) */
} adag_device_kind_t;

/* Where a value's bytes live (adag_value_t.device, adag_input_view_t.device,
 * adag_call_device): a device id, its kind in bits 24..30 and its index in
 * bits 0..23, so ids of every kind are distinct and never negative, and 0
 * is host memory (a zeroed value is host bytes):
 *     ADAG_DEVICE(ADAG_DEV_CUDA, 1)      cuda:1
 *     ADAG_DEVICE(ADAG_DEV_EMULATED, 0)  emu:0
 *     ADAG_DEVICE_HOST                   host memory
 * ADAG_DEVICE_KIND and ADAG_DEVICE_INDEX take an id apart. An index is at
 * most ADAG_DEVICE_INDEX_MAX (device strings with larger ones are
 * refused). */
#define ADAG_DEVICE_INDEX_MAX 0xFFFFFF
#define ADAG_DEVICE(kind, index)                                                               \
    ((int32_t)((((uint32_t)(kind) & 0x7Fu) << 24) | ((uint32_t)(index) & 0xFFFFFFu)))
#define ADAG_DEVICE_HOST ADAG_DEVICE(ADAG_DEV_HOST, 0)
#define ADAG_DEVICE_KIND(device) ((adag_device_kind_t)(((uint32_t)(device) >> 24) & 0x7Fu))
#define ADAG_DEVICE_INDEX(device) ((unsigned)((uint32_t)(device) & 0xFFFFFFu))

/* A kind's name: "host", "emu", "cuda" (a device prints as
 * "<name>:<index>", host memory as "host"); "?" for a number that is not
 * an adag_device_kind_t. */
ADAG_API const char *adag_device_kind_name(adag_device_kind_t kind);

/* A value passed to execute() or returned by get(). For results, data
 * points into the channel slot (zero copy) and stays valid until
 * adag_dag_release() of its ref.
 *
 * A zero-initialized value with data and size set is host bytes; both
 * {data, size, ADAG_VALUE_BYTES} (positional: -Wextra then warns about the
 * fields left out, which is harmless) and {.data = p, .size = n} build one.
 * Everything past kind is for tensors: for ADAG_VALUE_BYTES, dtype, ndim
 * and device must be 0 and reserved must be zero (execute says which field
 * is not); the library fills every field of the values it returns. */
typedef struct {
    const void *data;
    size_t size;                   /* bytes */
    adag_value_kind_t kind;        /* ADAG_VALUE_BYTES (0) or ADAG_VALUE_TENSOR */
    adag_dtype_t dtype;            /* ADAG_DTYPE_BYTES (0) for bytes */
    uint32_t ndim;                 /* 0..ADAG_MAX_DIMS; 0 for bytes */
    int32_t device;                /* ADAG_DEVICE_HOST (0) or ADAG_DEVICE(kind, index) */
    int64_t shape[ADAG_MAX_DIMS];  /* shape[0..ndim-1]; the rest is ignored */
    uint64_t reserved[4];          /* must be zero */
} adag_value_t;

/* A host tensor viewing data: kind ADAG_VALUE_TENSOR, dtype, ndim and
 * shape[0..ndim) as given, size their bytes (the product of the shape
 * times adag_dtype_size(dtype); 0 when a dimension is 0), every other
 * field zero:
 *     int64_t shape[2] = {4, 8};
 *     adag_value_t in = adag_value_tensor(buf, ADAG_DTYPE_F32, 2, shape);
 * It reports nothing itself: a tensor that cannot be (dtype BYTES or not
 * an adag_dtype_t, ndim above ADAG_MAX_DIMS, a negative dimension, shape
 * NULL with ndim > 0, bytes beyond a size_t) comes back with size SIZE_MAX
 * and the fields as given (the dimensions that fit; zeros for a NULL
 * shape), which adag_dag_execute refuses with ADAG_ERR_INVALID saying
 * what is wrong ("a tensor whose dtype 0 (bytes) is not a tensor dtype",
 * "... has more bytes than a size_t holds"). */
static inline adag_value_t adag_value_tensor(const void *data, adag_dtype_t dtype, unsigned ndim,
                                             const int64_t *shape)
{
    adag_value_t v;
    size_t elem = dtype == ADAG_DTYPE_BYTES ? 0 : adag_dtype_size(dtype), size = elem;
    int valid = elem != 0 && ndim <= ADAG_MAX_DIMS && (shape || ndim == 0), zero = 0;
    v.data = data;
    v.kind = ADAG_VALUE_TENSOR;
    v.dtype = dtype;
    v.ndim = ndim;
    v.device = ADAG_DEVICE_HOST;
    for (unsigned i = 0; i < ADAG_MAX_DIMS; i++) {
        v.shape[i] = shape && i < ndim ? shape[i] : 0;
        valid = valid && v.shape[i] >= 0;
        zero = zero || (i < ndim && v.shape[i] == 0);
    }
    for (unsigned i = 0; i < sizeof(v.reserved) / sizeof(v.reserved[0]); i++)
        v.reserved[i] = 0;
    for (unsigned i = 0; valid && !zero && i < ndim; i++) {
        if ((uint64_t)v.shape[i] > SIZE_MAX / size)
            valid = 0;
        else
            size *= (size_t)v.shape[i];
    }
    v.size = !valid ? SIZE_MAX : zero ? 0 : size;
    return v;
}

#ifdef __cplusplus
}
#endif
#endif /* ADAG_VALUE_H */

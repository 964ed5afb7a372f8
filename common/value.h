/* adag_value_t inside the library: building the values it hands out,
 * checking the ones it is given, and the tensor metadata and declarations
 * (adag_node_tensor) that travel with values. */
#ifndef ADAG_COMMON_VALUE_H
#define ADAG_COMMON_VALUE_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

/* A host-bytes value viewing data[0..size): every other field zero, so a
 * caller never reads stale tensor fields from a reused struct. */
static inline adag_value_t adag__value_bytes(const void *data, size_t size)
{
    adag_value_t v = {.data = data, .size = size, .kind = ADAG_VALUE_BYTES};
    return v;
}

/* ADAG_OK if value is one this library accepts as an input (host bytes or
 * a host tensor, see adag_value_t), else ADAG_ERR_INVALID:
 * "<fn>: input <i>: <what is wrong>". */
adag_status_t adag__value_check_input(const adag_value_t *value, const char *fn, unsigned i);

/* ---- devices ---- */

/* Nonzero for a device id of a known kind (adag.h's ADAG_DEVICE): host
 * memory (only ADAG_DEVICE_HOST itself), emu:i or cuda:i. */
int adag__device_id_valid(int32_t device);
/* A device id's name: "cuda:1", "emu:0", "host" for ADAG_DEVICE_HOST,
 * "0x... (no such device)" for an id that is not valid; returns buf. */
#define ADAG_DEVICE_NAME_MAX 32
const char *adag__device_name(int32_t device, char buf[ADAG_DEVICE_NAME_MAX]);

/* ---- tensor metadata ---- */

/* Nonzero for a dtype a tensor can have: known and not ADAG_DTYPE_BYTES. */
static inline int adag__dtype_is_tensor(uint32_t dtype)
{
    return dtype >= ADAG_DTYPE_U8 && dtype <= ADAG_DTYPE_BOOL;
}

/* What adag__tensor_bytes found. */
typedef enum {
    ADAG_TENSOR_OK = 0,
    ADAG_TENSOR_BAD = 1,      /* dtype, ndim or a dimension is invalid */
    ADAG_TENSOR_OVERFLOW = 2, /* valid, but its bytes do not fit a size_t */
} adag_tensor_check_t;

/* The bytes of a dense tensor of dtype/ndim/shape (product of the shape
 * times the element size, computed without overflow). On failure `why`
 * (len bytes, may be NULL) says what is wrong, e.g. "shape[2] is -1". */
adag_tensor_check_t adag__tensor_bytes(uint32_t dtype, uint32_t ndim, const int64_t *shape,
                                      size_t *bytes, char *why, size_t len);

/* "f32[4,8]" ("f32[]" for a scalar), or "bytes" for dtype ADAG_DTYPE_BYTES. */
void adag__tensor_format(char *buf, size_t len, uint32_t dtype, uint32_t ndim,
                        const int64_t *shape);

/* ---- declarations (adag_node_tensor) ---- */

enum {
    ADAG_TENSOR_DECLARED = 1u << 0,     /* the value was declared a tensor */
    ADAG_TENSOR_STATIC_DTYPE = 1u << 1, /* dtype is fixed */
    ADAG_TENSOR_STATIC_SHAPE = 1u << 2, /* ndim and shape are fixed */
};
#define ADAG_TENSOR_DECL_KNOWN                                                               \
    (ADAG_TENSOR_DECLARED | ADAG_TENSOR_STATIC_DTYPE | ADAG_TENSOR_STATIC_SHAPE)

/* What adag_node_tensor declared of a value; graph nodes, DAG channels and
 * program channels carry it. All zero: not declared (host bytes or a
 * tensor, per execution). */
typedef struct {
    uint32_t flags;     /* ADAG_TENSOR_* */
    uint32_t dtype;     /* with STATIC_DTYPE, else 0 */
    uint32_t ndim;      /* with STATIC_SHAPE, else 0 */
    uint32_t transport; /* adag_transport_t */
    int64_t shape[ADAG_MAX_DIMS]; /* shape[0..ndim); the rest 0 */
} adag_tensor_decl_t;

/* Nonzero if a declaration read from a peer is one adag_node_tensor makes. */
int adag__tensor_decl_valid(const adag_tensor_decl_t *d);

/* Nonzero if the value (dtype 0: bytes) is allowed by d's static dtype and
 * shape. */
static inline int adag__tensor_decl_allows(const adag_tensor_decl_t *d, uint32_t dtype,
                                          uint32_t ndim, const int64_t *shape)
{
    if (!(d->flags & (ADAG_TENSOR_STATIC_DTYPE | ADAG_TENSOR_STATIC_SHAPE)))
        return 1;
    if (dtype == ADAG_DTYPE_BYTES)
        return 0;
    if ((d->flags & ADAG_TENSOR_STATIC_DTYPE) && dtype != d->dtype)
        return 0;
    if (d->flags & ADAG_TENSOR_STATIC_SHAPE) {
        if (ndim != d->ndim)
            return 0;
        for (uint32_t k = 0; k < ndim; k++)
            if (shape[k] != d->shape[k])
                return 0;
    }
    return 1;
}

/* The static part of a declaration: "f32[4,8]", "f32[?]" (static dtype
 * only), "?[4,8]" (static shape only); "" when nothing is static. */
void adag__tensor_decl_format(char *buf, size_t len, const adag_tensor_decl_t *d);

#endif

/*
 * The DLPack ABI, as much of it as adag._adag uses: the structs a
 * "dltensor" (legacy, DLManagedTensor) or "dltensor_versioned" (DLPack 1.x,
 * DLManagedTensorVersioned) capsule points at. The layout is DLPack's public,
 * stable ABI (dmlc/dlpack, include/dlpack/dlpack.h); these definitions are
 * written here so the extension needs no DLPack install.
 *
 * The capsule protocol (Python array API, __dlpack__): a producer returns
 * a PyCapsule named "dltensor" or "dltensor_versioned" whose pointer is a
 * managed tensor; a consumer that takes the tensor renames the capsule
 * "used_dltensor" / "used_dltensor_versioned" and calls the tensor's
 * deleter once it is done with the memory. A capsule freed still carrying
 * its first name was never taken: its destructor calls the deleter.
 */
#ifndef ADAGPY_DLPACK_H
#define ADAGPY_DLPACK_H

#include <stdint.h>

/* Device types (DLDeviceType), the ones adag maps; the others exist
 * (OpenCL, Vulkan, Metal, ROCm, ...) and are refused by number. */
enum {
    kDLCPU = 1,         /* host memory */
    kDLCUDA = 2,        /* CUDA device memory */
    kDLCUDAHost = 3,    /* pinned host memory (cudaMallocHost): host addressable */
    kDLCUDAManaged = 13 /* CUDA managed memory */
};

typedef struct {
    int32_t device_type; /* a kDL* device type (a C enum in dlpack.h: int sized) */
    int32_t device_id;   /* the device's index; 0 for kDLCPU */
} DLDevice;

/* Type codes (DLDataTypeCode) */
enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5,
    kDLBool = 6
};

typedef struct {
    uint8_t code;   /* kDLInt, ... */
    uint8_t bits;   /* bits per lane: 8, 16, 32, 64 */
    uint16_t lanes; /* 1 for a scalar element; adag takes only 1 */
} DLDataType;

typedef struct {
    void *data;           /* the base address; the elements start at data + byte_offset */
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;       /* ndim dimensions */
    int64_t *strides;     /* in elements, ndim of them; NULL: compact row-major */
    uint64_t byte_offset;
} DLTensor;

/* The legacy managed tensor ("dltensor" capsules). */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;                            /* the producer's */
    void (*deleter)(struct DLManagedTensor *self); /* may be NULL */
} DLManagedTensor;

typedef struct {
    uint32_t major; /* a consumer refuses a major it does not know */
    uint32_t minor;
} DLPackVersion;

/* DLManagedTensorVersioned.flags */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1ull << 0) /* the consumer must not write it */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ull << 1) /* a copy the producer made for it */

/* The managed tensor of DLPack 1.x ("dltensor_versioned" capsules): the
 * version first, so a consumer reads it before anything else. */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* The version adag._adag produces, and the major it consumes. */
#define ADAGPY_DLPACK_MAJOR 1
#define ADAGPY_DLPACK_MINOR 0

/* A value's DLPack dtype and device (view.c): bytes as uint8, host and
 * emulated-device memory as kDLCPU (host addresses), cuda as kDLCUDA. */
#include <adag.h>
void adagpy_dl_dtype(const adag_value_t *v, DLDataType *t);
void adagpy_dl_device(int32_t device, DLDevice *d);
/* t's dtype, ndim, shape and row-major strides for v (bytes: uint8, 1-D),
 * into shape[ADAG_MAX_DIMS] and strides[ADAG_MAX_DIMS]; byte_offset 0. */
void adagpy_dl_layout(const adag_value_t *v, DLTensor *t, int64_t *shape, int64_t *strides);

#endif

/*
 * NumPy .npy headers (format versions 1-3), parsed with every length
 * bounded (data/npy.c): what the data source's .npy format reads.
 */
#ifndef ADAG_DATA_NPY_H
#define ADAG_DATA_NPY_H

#include <adag.h>

#include <stddef.h>
#include <stdint.h>

typedef struct {
    unsigned version;     /* 1, 2 or 3 */
    adag_dtype_t dtype;
    size_t item_size;     /* bytes per element */
    unsigned ndim;        /* 0..ADAG_MAX_DIMS (0: a scalar, one element) */
    uint64_t shape[ADAG_MAX_DIMS];
    uint64_t count;       /* elements: the product of shape (1 for ndim 0) */
    uint64_t data_offset; /* where the array's bytes start in the file */
    uint64_t data_size;   /* count * item_size */
} adag_npy_header_t;

/* Parses the header at the start of buf (len bytes of the file's start;
 * the whole header must be inside them); file_size, the file's size, must
 * hold data_offset + data_size. ADAG_ERR_INVALID with `why` (what, and at
 * which offset) for anything else; nothing is logged. */
adag_status_t adag__npy_parse(const void *buf, size_t len, uint64_t file_size,
                             adag_npy_header_t *out, char *why, size_t why_len);

#endif

/*
 * libFuzzer target: the .npy header parser of the data stage (data/npy.c).
 *
 * Input: the file's first bytes; the file size claimed is the input's size
 * plus a varying amount (the last byte), so both "fits" and "does not fit"
 * are reached. The input is copied to a heap block of exactly its size, so
 * ASan sees any read past it.
 * Invariants on success: a known dtype and item size, at most 8 dims,
 * count = the product of the shape, data_size = count * item_size, and the
 * array inside the claimed file; on failure, a message was written.
 */
#include "data/npy.h"

#include "tests/fuzz/fuzz_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond) FUZZ_CHECK("fuzz_npy", cond)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    uint64_t file_size = size + (size ? data[size - 1] : 0) * 4096ull;
    adag_npy_header_t h;
    char why[128] = "";
    adag_status_t st = adag__npy_parse(buf, size, file_size, &h, why, sizeof(why));
    if (st == ADAG_OK) {
        CHECK(h.version >= 1 && h.version <= 3);
        CHECK(h.item_size == 1 || h.item_size == 2 || h.item_size == 4 || h.item_size == 8);
        CHECK(h.ndim <= ADAG_MAX_DIMS);
        uint64_t count = 1;
        for (unsigned d = 0; d < h.ndim; d++)
            count *= h.shape[d];
        CHECK(count == h.count);
        CHECK(h.data_size == h.count * h.item_size);
        CHECK(h.data_offset <= size && h.data_offset + h.data_size <= file_size);
    } else {
        CHECK(st == ADAG_ERR_INVALID);
        CHECK(why[0] != '\0');
    }
    free(buf);
    return 0;
}

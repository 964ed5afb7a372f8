/*
 * libFuzzer target: the Megatron .idx parser of the data stage
 * (data/megatron_idx.c).
 *
 * Input: the index; the .bin size claimed comes from its first 2 bytes
 * (scaled), so indexes that fit and that overrun are both reached. The
 * input is copied to a heap block of exactly its size (ASan sees any
 * overread). Invariants on success: the arrays lie inside the input, every
 * sequence is inside the .bin and follows the previous one, the document
 * index rises from 0 to the sequence count, total_tokens is the sum.
 */
#include "data/megatron_idx.h"

#include "tests/fuzz/fuzz_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond) FUZZ_CHECK("fuzz_megatron", cond)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    uint64_t bin = size >= 2 ? ((uint64_t)data[0] | (uint64_t)data[1] << 8) * 16 : 0;
    adag_megatron_idx_t idx;
    char why[128] = "";
    adag_status_t st = adag__megatron_idx_parse(buf, size, bin, &idx, why, sizeof(why));
    if (st == ADAG_OK) {
        CHECK(idx.sizes >= buf && idx.doc_idx + idx.ndocs * 8 <= buf + size);
        uint64_t at = 0, total = 0;
        for (uint64_t i = 0; i < idx.nseqs; i++) {
            CHECK(adag__megatron_seq_offset(&idx, i) == at);
            at += (uint64_t)adag__megatron_seq_size(&idx, i) * idx.item_size;
            total += adag__megatron_seq_size(&idx, i);
            CHECK(at <= bin);
        }
        CHECK(total == idx.total_tokens);
    } else {
        CHECK(st == ADAG_ERR_INVALID);
        CHECK(why[0] != '\0');
    }
    free(buf);
    return 0;
}

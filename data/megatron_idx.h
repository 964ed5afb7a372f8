/*
 * The index (.idx) of a Megatron-LM token dataset (.bin + .idx), parsed
 * with every count bounded by the buffer (data/megatron_idx.c). Layout,
 * little-endian: "MMIDIDX\0\0", u64 version (1), u8 dtype code, u64
 * sequences, u64 documents, i32 sizes[sequences], i64 pointers[sequences]
 * (byte offsets in .bin), i64 doc_idx[documents].
 */
#ifndef ADAG_DATA_MEGATRON_IDX_H
#define ADAG_DATA_MEGATRON_IDX_H

#include <adag.h>

#include <stddef.h>
#include <stdint.h>

typedef struct {
    unsigned code;          /* the dtype code as written */
    adag_dtype_t dtype;     /* the token type; uint16 (code 8) has no adag dtype:
                               ADAG_DTYPE_BYTES, item_size 2, raw little-endian */
    size_t item_size;
    uint64_t nseqs;
    uint64_t ndocs;
    const unsigned char *sizes;    /* nseqs int32, in the caller's buffer */
    const unsigned char *pointers; /* nseqs int64 */
    const unsigned char *doc_idx;  /* ndocs int64 */
    uint64_t total_tokens;
} adag_megatron_idx_t;

/* Parses an index of len bytes whose .bin has bin_size bytes. */
adag_status_t adag__megatron_idx_parse(const void *buf, size_t len, uint64_t bin_size,
                                      adag_megatron_idx_t *out, char *why, size_t why_len);
/* Sequence i's token count and byte offset (i < nseqs). */
uint32_t adag__megatron_seq_size(const adag_megatron_idx_t *idx, uint64_t i);
uint64_t adag__megatron_seq_offset(const adag_megatron_idx_t *idx, uint64_t i);

#endif

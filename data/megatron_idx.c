/*
 * Megatron token dataset indexes (data/megatron_idx.h).
 */
#include "data/megatron_idx.h"
#include "data/why.h"

#include <stdio.h>
#include <string.h>

#define MAGIC "MMIDIDX\0\0"
#define MAGIC_LEN 9
#define FIXED (MAGIC_LEN + 8 + 1 + 8 + 8)


static uint64_t u64_at(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int64_t i64_at(const unsigned char *p)
{
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int32_t i32_at(const unsigned char *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

uint32_t adag__megatron_seq_size(const adag_megatron_idx_t *idx, uint64_t i)
{
    return (uint32_t)i32_at(idx->sizes + i * 4);
}

uint64_t adag__megatron_seq_offset(const adag_megatron_idx_t *idx, uint64_t i)
{
    return (uint64_t)i64_at(idx->pointers + i * 8);
}

static int dtype_of(unsigned code, adag_dtype_t *dt, size_t *size)
{
    static const struct {
        unsigned code;
        adag_dtype_t dtype;
        size_t size;
    } codes[] = {
        {1, ADAG_DTYPE_U8, 1},  {2, ADAG_DTYPE_I8, 1},  {3, ADAG_DTYPE_I16, 2},
        {4, ADAG_DTYPE_I32, 4}, {5, ADAG_DTYPE_I64, 8}, {6, ADAG_DTYPE_F64, 8},
        {7, ADAG_DTYPE_F32, 4}, {8, ADAG_DTYPE_BYTES, 2},
    };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (codes[i].code == code) {
            *dt = codes[i].dtype;
            *size = codes[i].size;
            return 1;
        }
    return 0;
}

adag_status_t adag__megatron_idx_parse(const void *buf, size_t len, uint64_t bin_size,
                                      adag_megatron_idx_t *out, char *why, size_t why_len)
{
    const unsigned char *b = buf;
    memset(out, 0, sizeof(*out));
    if (!b || len < FIXED || memcmp(b, MAGIC, MAGIC_LEN))
        return adag__data_refuse(why, why_len, "megatron index: no MMIDIDX header in its %zu bytes",
                                 len);
    uint64_t version = u64_at(b + MAGIC_LEN);
    if (version != 1)
        return adag__data_refuse(why, why_len, "megatron index: version %llu is not 1",
                      (unsigned long long)version);
    out->code = b[MAGIC_LEN + 8];
    if (!dtype_of(out->code, &out->dtype, &out->item_size))
        return adag__data_refuse(why, why_len, "megatron index: unknown dtype code %u at offset %d",
                      out->code, MAGIC_LEN + 8);
    out->nseqs = u64_at(b + MAGIC_LEN + 9);
    out->ndocs = u64_at(b + MAGIC_LEN + 17);
    /* bound the counts by the buffer before any multiplication */
    size_t room = len - FIXED;
    if (out->nseqs > room / 12 || out->ndocs > (room - out->nseqs * 12) / 8)
        return adag__data_refuse(why, why_len,
                      "megatron index: %llu sequences and %llu documents need more than its "
                      "%zu bytes",
                      (unsigned long long)out->nseqs, (unsigned long long)out->ndocs, len);
    out->sizes = b + FIXED;
    out->pointers = out->sizes + out->nseqs * 4;
    out->doc_idx = out->pointers + out->nseqs * 8;
    uint64_t expect = 0;
    for (uint64_t i = 0; i < out->nseqs; i++) {
        int32_t n = i32_at(out->sizes + i * 4);
        int64_t at = i64_at(out->pointers + i * 8);
        if (n < 0)
            return adag__data_refuse(why, why_len, "megatron index: sequence %llu has size %d",
                          (unsigned long long)i, n);
        if (at < 0 || (uint64_t)at != expect)
            return adag__data_refuse(why, why_len,
                          "megatron index: sequence %llu starts at byte %lld, not %llu (the "
                          "sequences must follow each other in .bin)",
                          (unsigned long long)i, (long long)at, (unsigned long long)expect);
        expect += (uint64_t)n * out->item_size;
        out->total_tokens += (uint64_t)n;
        if (expect > bin_size)
            return adag__data_refuse(why, why_len,
                          "megatron index: sequence %llu ends at byte %llu, past the .bin's "
                          "%llu bytes",
                          (unsigned long long)i, (unsigned long long)expect,
                          (unsigned long long)bin_size);
    }
    int64_t prev = 0;
    for (uint64_t d = 0; d < out->ndocs; d++) {
        int64_t v = i64_at(out->doc_idx + d * 8);
        if ((d == 0 && v != 0) || v < prev || (uint64_t)v > out->nseqs)
            return adag__data_refuse(why, why_len,
                          "megatron index: document index entry %llu is %lld (they must "
                          "start at 0 and rise to %llu)",
                          (unsigned long long)d, (long long)v, (unsigned long long)out->nseqs);
        prev = v;
    }
    if (out->ndocs && (uint64_t)prev != out->nseqs)
        return adag__data_refuse(why, why_len,
                      "megatron index: the document index ends at %lld, not at the %llu "
                      "sequences",
                      (long long)prev, (unsigned long long)out->nseqs);
    return ADAG_OK;
}

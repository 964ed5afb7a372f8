/*
 * libFuzzer target: the WebDataset shard index (data/format_tar.c) over
 * libarchive's tar reader, on the input as the shard's mapped bytes.
 *
 * Byte 0 picks the fields asked for (bit 0 "bin", bit 1 "cls", bit 2 "jpg";
 * none: "bin") and bit 3 the bad-record policy; the rest is the tar. The
 * input sits in a heap block of exactly its size (ASan sees any read past
 * it). Invariants on success: every field of every sample lies inside the
 * input, has the extension asked for, and samples have keys; on failure a
 * message was set. The index is freed either way (LeakSanitizer).
 */
#include "data/shard.h"
#include "tests/fuzz/fuzz_check.h"

#include <adag.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond) FUZZ_CHECK("fuzz_tar", cond)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const char *const names[3] = {"bin", "cls", "jpg"};
    const char *fields[3];
    unsigned n = 0;
    for (unsigned b = 0; b < 3; b++)
        if (data[0] & (1u << b))
            fields[n++] = names[b];
    if (!n)
        fields[n++] = "bin";
    adag_data_params_t p = {
        .fields = fields,
        .nfields = n,
        .bad_policy = (data[0] & 8) ? ADAG_DATA_BAD_SKIP : ADAG_DATA_BAD_FAIL,
    };
    size_t len = size - 1;
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, len);
    adag_data_shard_t sh = {.path = "fuzz.tar", .data = {buf, len}};
    adag_status_t st = adag__data_tar_index(&sh, &p);
    if (st == ADAG_OK) {
        for (uint64_t i = 0; i < sh.nsamples; i++) {
            adag_data_sample_t s = {0};
            adag__data_format(ADAG_DATA_FORMAT_WEBDATASET)->fields(&sh, i, &s);
            CHECK(s.key && s.nfields == n);
            for (unsigned f = 0; f < n; f++) {
                const unsigned char *d = s.fields[f].data;
                CHECK(!strcmp(s.fields[f].ext, fields[f]));
                CHECK(d >= buf && s.fields[f].size <= len &&
                      d - buf <= (ptrdiff_t)(len - s.fields[f].size));
            }
        }
    } else {
        CHECK(adag_last_error()[0] != '\0');
    }
    adag__data_tar_unindex(&sh);
    free(buf);
    return 0;
}

/*
 * libFuzzer target: the image map of the data stage (data/image.c): the
 * JPEG header and decoder of libjpeg-turbo as adag drives them (scale
 * choice, scratch bounds, crop and resampling over whatever the decoder
 * accepted).
 *
 * Byte 0 picks the output (bits 0-1: f32, f16, bf16; bit 2: 7 x 5, else
 * 16 x 16; bit 3: always flip); bytes 1-8 seed the sample's rng; the rest
 * is the JPEG, in a heap block of exactly its size. At most 512 x 512
 * pixels are decoded (max_pixels; larger images at a smaller scale, and
 * refused if even 1/8 is larger), so every run is bounded. Invariants: on
 * success every output element is finite and within the normalized range
 * of pixel values 0..255; on failure the status is ADAG_ERR_INVALID and the
 * message names the sample.
 */
#include <adag/data.h>

#include "common/half.h"
#include "tests/fuzz/fuzz_check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond) FUZZ_CHECK("fuzz_jpeg", cond)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 10)
        return 0;
    static const adag_dtype_t dtypes[4] = {ADAG_DTYPE_F32, ADAG_DTYPE_F16, ADAG_DTYPE_BF16,
                                           ADAG_DTYPE_F32};
    adag_data_image_t img = {
        .field_mask = ADAG_DATA_IMAGE_DTYPE | ADAG_DATA_IMAGE_MAX_PIXELS | ADAG_DATA_IMAGE_FLIP,
        .height = data[0] & 4 ? 5 : 16,
        .width = data[0] & 4 ? 7 : 16,
        .dtype = dtypes[data[0] & 3],
        .max_pixels = 512 * 512,
        .flip = data[0] & 8 ? 1.0f : 0.5f,
    };
    uint64_t rng;
    memcpy(&rng, data + 1, sizeof(rng));
    size_t jlen = size - 9;
    uint8_t *jpeg = malloc(jlen);
    size_t out_size = adag_data_image_size(&img), scratch_size = adag_data_image_scratch(&img);
    void *out = malloc(out_size), *scratch = malloc(scratch_size);
    CHECK(out_size && scratch_size);
    if (!jpeg || !out || !scratch)
        goto done;
    memcpy(jpeg, data + 9, jlen);
    adag_data_sample_t s = {
        .data = jpeg,
        .size = jlen,
        .shard = "fuzz.jpg",
        .scratch = scratch,
        .scratch_size = scratch_size,
    };
    adag_status_t st = adag_data_image_map(&img, &s, &rng, out, out_size);
    if (st == ADAG_OK) {
        size_t n = out_size / adag_dtype_size(img.dtype);
        const float lo = (0.0f - 0.485f) / 0.229f - 0.02f, hi = (1.0f - 0.406f) / 0.225f + 0.02f;
        for (size_t i = 0; i < n; i++) {
            float v;
            uint16_t h;
            if (img.dtype == ADAG_DTYPE_F32) {
                memcpy(&v, (char *)out + 4 * i, 4);
            } else {
                memcpy(&h, (char *)out + 2 * i, 2);
                v = img.dtype == ADAG_DTYPE_F16 ? adag__f16_to_f32(h) : adag__bf16_to_f32(h);
            }
            CHECK(isfinite(v) && v >= lo && v <= hi);
        }
    } else {
        CHECK(st == ADAG_ERR_INVALID);
        CHECK(strstr(adag_last_error(), "fuzz.jpg: sample 0") != NULL);
    }
done:
    free(jpeg);
    free(out);
    free(scratch);
    return 0;
}

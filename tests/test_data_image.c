/*
 * Suite "data_image": the image map (adag_data_image_map) over JPEGs the
 * tests encode with libjpeg-turbo (quality 100, 4:4:4, so decoded pixels
 * are within a few levels of what was encoded): normalization and channel
 * order, the crop's geometry and the flip, f16/bf16 against f32, the DCT
 * scale that keeps the scratch small, bad JPEGs failing with the file or
 * being replaced and counted, WebDataset fields, and the same bytes with
 * 1 or 3 threads.
 */
#include <adag/data.h>

#include "data_rig.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

TestSuite(data_image, .init = data_dir_make, .fini = data_dir_remove, .timeout = 60);

typedef void (*paint_fn)(unsigned x, unsigned y, unsigned char rgb[3], void *arg);

/* Encodes a w x h image painted by `paint` into data_dir/name. */
static void write_jpeg(const char *name, unsigned w, unsigned h, paint_fn paint, void *arg)
{
    unsigned char *px = malloc((size_t)w * h * 3);
    cr_assert_not_null(px);
    for (unsigned y = 0; y < h; y++)
        for (unsigned x = 0; x < w; x++)
            paint(x, y, px + ((size_t)y * w + x) * 3, arg);
    data_write_jpeg(name, px, w, h, TJSAMP_444, 100, 0);
    free(px);
}

static void paint_solid(unsigned x, unsigned y, unsigned char rgb[3], void *arg)
{
    (void)x;
    (void)y;
    memcpy(rgb, arg, 3);
}

/* R = x, G = y (so a pixel says where it came from), B = 128 */
static void paint_coords(unsigned x, unsigned y, unsigned char rgb[3], void *arg)
{
    (void)arg;
    rgb[0] = (unsigned char)x;
    rgb[1] = (unsigned char)y;
    rgb[2] = 128;
}

static void write_solid(const char *name, unsigned w, unsigned h, unsigned char r,
                        unsigned char g, unsigned char b)
{
    unsigned char rgb[3] = {r, g, b};
    write_jpeg(name, w, h, paint_solid, rgb);
}

static const float MEAN[3] = {0.485f, 0.456f, 0.406f}, STD[3] = {0.229f, 0.224f, 0.225f};

/* The pixel value (0..255) an f32 output element stands for. */
static float pixel_of(float v, int c)
{
    return (v * STD[c] + MEAN[c]) * 255.0f;
}

/* A source over `glob` (ADAG_DATA_FORMAT_FILES) with the image map. */
static adag_status_t open_images(const char *glob, const adag_data_image_t *img, unsigned batch,
                                 unsigned threads, uint64_t seed, adag_data_bad_policy_t bad,
                                 adag_data_source_h *src)
{
    const char *shards[] = {data_path(glob)};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_MAP | ADAG_DATA_PARAM_SCRATCH | ADAG_DATA_PARAM_THREADS |
                      ADAG_DATA_PARAM_SEED | ADAG_DATA_PARAM_BAD_POLICY,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_FILES,
        .batch_size = batch,
        .sample_size = adag_data_image_size(img),
        .map = adag_data_image_map,
        .map_arg = (void *)img,
        .scratch_size = adag_data_image_scratch(img),
        .threads = threads,
        .seed = seed,
        .bad_policy = bad,
    };
    return adag_data_open(&p, src);
}

/* A one-thread source over one JPEG file, batches of 1, with the scratch
 * given. */
static adag_status_t open_one(const char *path, const adag_data_image_t *img, size_t scratch,
                              adag_data_source_h *src)
{
    const char *shards[] = {path};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_MAP | ADAG_DATA_PARAM_SCRATCH | ADAG_DATA_PARAM_THREADS,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_FILES,
        .batch_size = 1,
        .sample_size = adag_data_image_size(img),
        .map = adag_data_image_map,
        .map_arg = (void *)img,
        .scratch_size = scratch,
        .threads = 1,
    };
    return adag_data_open(&p, src);
}

/* The first batch of a source (copied; the caller frees it). */
static float *first_batch(adag_data_source_h src, size_t *size)
{
    adag_data_batch_t b;
    cr_assert_eq(adag_data_next(src, &b, 20000), ADAG_OK, "%s", adag_last_error());
    float *copy = malloc(b.size);
    cr_assert_not_null(copy);
    memcpy(copy, b.data, b.size);
    *size = b.size;
    cr_assert_eq(adag_data_release(src, &b), ADAG_OK);
    return copy;
}

Test(data_image, solid_color_is_normalized_per_channel_in_chw)
{
    write_solid("a.jpg", 64, 64, 200, 100, 50);
    adag_data_image_t img = {.field_mask = ADAG_DATA_IMAGE_FLIP, .height = 24, .width = 32};
    cr_assert_eq(adag_data_image_check(&img), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(adag_data_image_size(&img), 3u * 24 * 32 * 4);
    adag_data_source_h src;
    cr_assert_eq(open_images("*.jpg", &img, 1, 1, 7, ADAG_DATA_BAD_FAIL, &src), ADAG_OK, "%s",
                 adag_last_error());
    size_t size;
    float *out = first_batch(src, &size);
    const float want[3] = {200, 100, 50};
    for (int c = 0; c < 3; c++)
        for (unsigned i = 0; i < 24 * 32; i++) {
            float px = pixel_of(out[c * 24 * 32 + i], c);
            cr_assert(fabsf(px - want[c]) < 3.0f, "channel %d element %u: pixel %.2f, want %.0f",
                      c, i, px, want[c]);
        }
    free(out);
    adag_data_close(src);
}

/* The crop of a 256 x 256 image whose pixels say where they are: each
 * output must be a scale-0.25 square of it, 4 source pixels per output
 * pixel, flipped when the flip says so; the crops differ between samples
 * and the same seed gives the same bytes with 1 or 3 threads. */
Test(data_image, crops_are_squares_of_the_asked_scale_and_flips_mirror)
{
    write_jpeg("coords.jpg", 256, 256, paint_coords, NULL);
    for (int i = 1; i < 16; i++) { /* 16 samples: the same image */
        char name[32];
        snprintf(name, sizeof(name), "coords%02d.jpg", i);
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "cp %s %s", data_path("coords.jpg"), data_path(name));
        cr_assert_eq(system(cmd), 0);
    }
    adag_data_image_t img = {
        .field_mask = ADAG_DATA_IMAGE_SCALE | ADAG_DATA_IMAGE_RATIO,
        .height = 32,
        .width = 32,
        .scale_min = 0.25f,
        .scale_max = 0.25f,
        .ratio_min = 1.0f,
        .ratio_max = 1.0f,
    };
    adag_data_source_h src;
    cr_assert_eq(open_images("coords*.jpg", &img, 16, 1, 11, ADAG_DATA_BAD_FAIL, &src), ADAG_OK,
                 "%s", adag_last_error());
    size_t size;
    float *one = first_batch(src, &size);
    adag_data_close(src);

    size_t plane = 32 * 32;
    int flipped = 0, straight = 0;
    float x0_first = -1;
    int x0_differs = 0;
    for (int s = 0; s < 16; s++) {
        const float *R = one + (size_t)s * 3 * plane, *G = R + plane;
        /* slope of R along a row and of G down a column: +-4 (a 128-pixel
         * crop over 32 outputs) */
        float dx = (pixel_of(R[16 * 32 + 31], 0) - pixel_of(R[16 * 32 + 0], 0)) / 31;
        float dy = (pixel_of(G[31 * 32 + 16], 1) - pixel_of(G[0 * 32 + 16], 1)) / 31;
        cr_assert(fabsf(dy - 4) < 0.3f, "sample %d: G slope %.2f, want 4", s, dy);
        cr_assert(fabsf(fabsf(dx) - 4) < 0.3f, "sample %d: R slope %.2f, want +-4", s, dx);
        flipped += dx < 0;
        straight += dx > 0;
        /* the crop lies inside the image */
        float left = dx > 0 ? pixel_of(R[0], 0) : pixel_of(R[31], 0);
        float top = pixel_of(G[0], 1);
        cr_assert(left > -3 && left + 4 * 31 < 258, "sample %d: crop from x %.1f", s, left);
        cr_assert(top > -3 && top + 4 * 31 < 258, "sample %d: crop from y %.1f", s, top);
        if (s == 0)
            x0_first = left;
        else if (fabsf(left - x0_first) > 6)
            x0_differs = 1;
    }
    cr_assert(flipped > 0 && straight > 0, "flip 0.5 over 16 samples: %d flipped, %d not",
              flipped, straight);
    cr_assert(x0_differs, "every sample was cropped at the same place");

    /* the same seed with 3 threads: the same bytes; another seed: others */
    cr_assert_eq(open_images("coords*.jpg", &img, 16, 3, 11, ADAG_DATA_BAD_FAIL, &src), ADAG_OK);
    float *three = first_batch(src, &size);
    adag_data_close(src);
    cr_assert_eq(memcmp(one, three, size), 0, "1 and 3 threads gave different images");
    cr_assert_eq(open_images("coords*.jpg", &img, 16, 2, 12, ADAG_DATA_BAD_FAIL, &src), ADAG_OK);
    float *other = first_batch(src, &size);
    adag_data_close(src);
    cr_assert_neq(memcmp(one, other, size), 0, "seeds 11 and 12 gave the same crops");
    free(one);
    free(three);
    free(other);
}

static float f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e ? ldexpf(1.0f + m / 1024.0f, e - 15) : ldexpf(m / 1024.0f, -14);
    return h & 0x8000 ? -v : v;
}

static float bf16_value(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, sizeof(v));
    return v;
}

Test(data_image, f16_and_bf16_round_the_f32_output)
{
    write_jpeg("coords.jpg", 256, 256, paint_coords, NULL);
    adag_data_image_t img = {.field_mask = ADAG_DATA_IMAGE_DTYPE, .height = 16, .width = 16};
    adag_dtype_t dtypes[3] = {ADAG_DTYPE_F32, ADAG_DTYPE_F16, ADAG_DTYPE_BF16};
    void *outs[3];
    for (int d = 0; d < 3; d++) {
        img.dtype = dtypes[d];
        cr_assert_eq(adag_data_image_size(&img), 3u * 16 * 16 * (d ? 2 : 4));
        adag_data_source_h src;
        cr_assert_eq(open_images("coords.jpg", &img, 1, 1, 5, ADAG_DATA_BAD_FAIL, &src), ADAG_OK,
                     "%s", adag_last_error());
        size_t size;
        outs[d] = first_batch(src, &size);
        adag_data_close(src);
    }
    const float *f32 = outs[0];
    const uint16_t *f16 = outs[1], *bf16 = outs[2];
    for (unsigned i = 0; i < 3 * 16 * 16; i++) {
        float v = f32[i];
        cr_assert(fabsf(f16_value(f16[i]) - v) <= fabsf(v) * 0x1p-11f + 0x1p-24f,
                  "element %u: f16 %g, f32 %g", i, f16_value(f16[i]), v);
        cr_assert(fabsf(bf16_value(bf16[i]) - v) <= fabsf(v) * 0x1p-8f, "element %u: bf16 %g, f32 %g",
                  i, bf16_value(bf16[i]), v);
    }
    for (int d = 0; d < 3; d++)
        free(outs[d]);
}

/* A 1024 x 1024 JPEG cropped whole to 64 x 64 decodes at 1/8 (128 x 128):
 * 200 KB of scratch do; a 512 x 512 output needs scale 1/2 and does not
 * fit, and the error says how much it needs. */
Test(data_image, dct_scaling_keeps_the_scratch_small)
{
    write_solid("big.jpg", 1024, 1024, 10, 20, 30);
    const char *shards[] = {data_path("big.jpg")};
    adag_data_image_t img = {
        .field_mask = ADAG_DATA_IMAGE_SCALE | ADAG_DATA_IMAGE_RATIO,
        .height = 64,
        .width = 64,
        .scale_min = 1,
        .scale_max = 1,
        .ratio_min = 1,
        .ratio_max = 1,
    };
    for (int big = 0; big < 2; big++) {
        img.height = img.width = big ? 512 : 64;
        adag_data_source_h src;
        cr_assert_eq(open_one(shards[0], &img, 200 << 10, &src), ADAG_OK, "%s",
                     adag_last_error());
        adag_data_batch_t b;
        adag_status_t st = adag_data_next(src, &b, 20000);
        if (!big) {
            cr_assert_eq(st, ADAG_OK, "64x64 from 1024x1024 in 200 KB: %s", adag_last_error());
            const float *R = b.data;
            cr_assert(fabsf(pixel_of(R[100], 0) - 10) < 3);
            adag_data_release(src, &b);
        } else {
            cr_assert_eq(st, ADAG_ERR_INVALID);
            cr_assert(strstr(adag_last_error(), "big.jpg") &&
                          strstr(adag_last_error(), "scale 1/2") &&
                          strstr(adag_last_error(), "scratch"),
                      "%s", adag_last_error());
        }
        adag_data_close(src);
    }
    /* max_pixels below what the covering scale (1/4 for 256) decodes: the
     * largest scale under it (1/8) is used; below even 1/8: a bad sample */
    for (int tiny = 0; tiny < 2; tiny++) {
        img.field_mask |= ADAG_DATA_IMAGE_MAX_PIXELS;
        img.height = img.width = 256;
        img.max_pixels = tiny ? 100 : 200 * 200;
        adag_data_source_h src;
        cr_assert_eq(open_one(shards[0], &img, adag_data_image_scratch(&img), &src), ADAG_OK,
                     "%s", adag_last_error());
        adag_data_batch_t b;
        adag_status_t st = adag_data_next(src, &b, 20000);
        if (!tiny) {
            cr_assert_eq(st, ADAG_OK, "256 from 1024 within 200x200 pixels: %s",
                         adag_last_error());
            const float *B = (const float *)b.data + 2 * 256 * 256;
            cr_assert(fabsf(pixel_of(B[1000], 2) - 30) < 3);
            adag_data_release(src, &b);
        } else {
            cr_assert_eq(st, ADAG_ERR_INVALID);
            cr_assert(strstr(adag_last_error(), "even decoded at 1/8"), "%s", adag_last_error());
        }
        adag_data_close(src);
    }
}

/* a.jpg red, b.jpg truncated, c.jpg blue, d.jpg not a JPEG at all */
static void write_bad_set(void)
{
    write_solid("a.jpg", 32, 32, 250, 0, 0);
    write_solid("c.jpg", 32, 32, 0, 0, 250);
    write_solid("b.jpg", 32, 32, 0, 250, 0);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "truncate -s 300 %s && head -c 700 /dev/urandom > %s",
             data_path("b.jpg"), data_path("d.jpg"));
    cr_assert_eq(system(cmd), 0);
}

Test(data_image, a_bad_jpeg_fails_naming_the_file)
{
    write_bad_set();
    adag_data_image_t img = {.field_mask = 0, .height = 8, .width = 8};
    adag_data_source_h src;
    cr_assert_eq(open_images("*.jpg", &img, 4, 2, 1, ADAG_DATA_BAD_FAIL, &src), ADAG_OK, "%s",
                 adag_last_error());
    adag_data_batch_t b;
    cr_assert_eq(adag_data_next(src, &b, 20000), ADAG_ERR_INVALID);
    const char *why = adag_last_error();
    cr_assert(strstr(why, "b.jpg") || strstr(why, "d.jpg"), "%s", why);
    cr_assert(strstr(why, "sample"), "%s", why);
    adag_data_close(src);
}

/* With BAD_SKIP, b (position 1) is replaced by c (position 2) and d
 * (position 3) by a (position 0, wrapping): red, blue, blue, red; two
 * counted per batch. */
Test(data_image, bad_jpegs_are_replaced_by_the_next_and_counted)
{
    write_bad_set();
    adag_data_image_t img = {.field_mask = 0, .height = 8, .width = 8};
    adag_data_source_h src;
    cr_assert_eq(open_images("*.jpg", &img, 4, 2, 1, ADAG_DATA_BAD_SKIP, &src), ADAG_OK, "%s",
                 adag_last_error());
    size_t size;
    float *out = first_batch(src, &size);
    const int red[4] = {1, 0, 0, 1};
    for (int s = 0; s < 4; s++) {
        const float *R = out + (size_t)s * 3 * 64, *B = R + 2 * 64;
        float r = pixel_of(R[27], 0), bl = pixel_of(B[27], 2);
        cr_assert(red[s] ? (r > 240 && bl < 10) : (r < 10 && bl > 240),
                  "sample %d: R %.0f B %.0f, want %s", s, r, bl, red[s] ? "red" : "blue");
    }
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    /* two per batch filled (the threads fill ahead: later epochs count too) */
    cr_assert(st.bad_skipped >= 2 && st.bad_skipped % 2 == 0, "bad_skipped %llu",
              (unsigned long long)st.bad_skipped);
    free(out);
    adag_data_close(src);
}

/* WebDataset: the JPEG is the second field; the first (.cls) says which
 * colour it is. */
static adag_data_image_t wds_img = {
    .field_mask = ADAG_DATA_IMAGE_FIELD, .height = 8, .width = 8, .field = 1};

static adag_status_t map_cls_image(void *arg, const adag_data_sample_t *s, uint64_t *rng,
                                   void *out, size_t out_size)
{
    (void)arg;
    /* the class in the first 4 bytes, the image after */
    int32_t cls = (int32_t)strtol(s->fields[0].data, NULL, 10);
    memcpy(out, &cls, 4);
    return adag_data_image_map(&wds_img, s, rng, (char *)out + 4, out_size - 4);
}

Test(data_image, webdataset_field_holds_the_jpeg)
{
    write_solid("k0.jpg", 40, 30, 250, 0, 0);
    write_solid("k1.jpg", 30, 40, 0, 250, 0);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "cd %s && python3 - <<'EOF'\n"
             "import tarfile, io\n"
             "t = tarfile.open('s.tar', 'w')\n"
             "for i in range(6):\n"
             "    k = 'd/%%04d' %% i\n"
             "    for ext, b in (('cls', str(i %% 2).encode()), ('jpg', open('k%%d.jpg' %% (i %% 2), 'rb').read())):\n"
             "        ti = tarfile.TarInfo(k + '.' + ext); ti.size = len(b); t.addfile(ti, io.BytesIO(b))\n"
             "t.close()\n"
             "EOF",
             data_dir);
    cr_assert_eq(system(cmd), 0);
    const char *shards[] = {data_path("s.tar")};
    const char *fields[] = {"cls", "jpg"};
    size_t sample = 4 + adag_data_image_size(&wds_img);
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_MAP | ADAG_DATA_PARAM_SCRATCH | ADAG_DATA_PARAM_FIELDS,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_WEBDATASET,
        .batch_size = 6,
        .sample_size = sample,
        .fields = fields,
        .nfields = 2,
        .map = map_cls_image,
        .scratch_size = adag_data_image_scratch(&wds_img),
    };
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    adag_data_batch_t b;
    cr_assert_eq(adag_data_next(src, &b, 20000), ADAG_OK, "%s", adag_last_error());
    for (int i = 0; i < 6; i++) {
        const unsigned char *s = (const unsigned char *)b.data + i * sample;
        int32_t cls;
        memcpy(&cls, s, 4);
        cr_assert_eq(cls, i % 2);
        float r, g;
        memcpy(&r, s + 4 + 4 * 20, 4);
        memcpy(&g, s + 4 + 4 * (64 + 20), 4);
        r = pixel_of(r, 0);
        g = pixel_of(g, 1);
        cr_assert(cls ? (g > 240 && r < 10) : (r > 240 && g < 10), "sample %d: R %.0f G %.0f", i,
                  r, g);
    }
    adag_data_release(src, &b);
    adag_data_close(src);
}

Test(data_image, bad_transforms_are_refused_with_a_reason)
{
    adag_data_image_t ok = {.height = 8, .width = 8};
    cr_assert_eq(adag_data_image_check(&ok), ADAG_OK);
    struct {
        adag_data_image_t img;
        const char *word;
    } bad[] = {
        {{.height = 0, .width = 8}, "output"},
        {{.field_mask = ADAG_DATA_IMAGE_SCALE, .height = 8, .width = 8, .scale_min = 0,
          .scale_max = 1},
         "scale"},
        {{.field_mask = ADAG_DATA_IMAGE_RATIO, .height = 8, .width = 8, .ratio_min = 2,
          .ratio_max = 1},
         "ratio"},
        {{.field_mask = ADAG_DATA_IMAGE_FLIP, .height = 8, .width = 8, .flip = 2}, "flip"},
        {{.field_mask = ADAG_DATA_IMAGE_NORMALIZE, .height = 8, .width = 8, .std = {1, 0, 1}},
         "std"},
        {{.field_mask = ADAG_DATA_IMAGE_DTYPE, .height = 8, .width = 8, .dtype = ADAG_DTYPE_I32},
         "dtype"},
        {{.field_mask = 1u << 30, .height = 8, .width = 8}, "field_mask"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(adag_data_image_check(&bad[i].img), ADAG_ERR_INVALID, "case %zu", i);
        cr_assert(strstr(adag_last_error(), bad[i].word), "case %zu: %s", i, adag_last_error());
        cr_assert_eq(adag_data_image_size(&bad[i].img), 0);
        cr_assert_eq(adag_data_image_scratch(&bad[i].img), 0);
    }
    /* a map without scratch says so */
    uint64_t rng = 1;
    unsigned char jpeg[4] = {0xff, 0xd8, 0xff, 0xd9};
    adag_data_sample_t s = {.data = jpeg, .size = 4, .shard = "x"};
    float out[3 * 64];
    cr_assert_eq(adag_data_image_map(&ok, &s, &rng, out, sizeof(out)), ADAG_ERR_INVALID);
}

/* Steps after the map: each sees what the map (and the steps before it)
 * wrote, in order; their time is in the stats, under their names. */
static adag_status_t plus_one(void *arg, const adag_data_sample_t *s, uint64_t *rng, void *out,
                              size_t out_size)
{
    (void)arg;
    (void)s;
    (void)rng;
    for (size_t i = 0; i < out_size / 4; i++)
        ((float *)out)[i] += 1.0f;
    return ADAG_OK;
}

static adag_status_t times(void *arg, const adag_data_sample_t *s, uint64_t *rng, void *out,
                           size_t out_size)
{
    (void)s;
    (void)rng;
    for (size_t i = 0; i < out_size / 4; i++)
        ((float *)out)[i] *= *(const float *)arg;
    return ADAG_OK;
}

Test(data_image, steps_run_after_the_map_in_order)
{
    write_jpeg("coords.jpg", 256, 256, paint_coords, NULL);
    adag_data_image_t img = {.height = 16, .width = 16};
    size_t n = 3 * 16 * 16;
    float *plain, *stepped;
    adag_data_source_h src;
    cr_assert_eq(open_images("coords.jpg", &img, 1, 1, 5, ADAG_DATA_BAD_FAIL, &src), ADAG_OK);
    size_t size;
    plain = first_batch(src, &size);
    adag_data_close(src);

    static const float two = 2.0f;
    const adag_data_step_t steps[2] = {{.fn = plus_one, .name = "plus one"},
                                       {.fn = times, .arg = (void *)&two}};
    const char *shards[] = {data_path("coords.jpg")};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_MAP | ADAG_DATA_PARAM_SCRATCH | ADAG_DATA_PARAM_THREADS |
                      ADAG_DATA_PARAM_SEED | ADAG_DATA_PARAM_STEPS,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_FILES,
        .batch_size = 1,
        .sample_size = adag_data_image_size(&img),
        .map = adag_data_image_map,
        .map_arg = &img,
        .scratch_size = adag_data_image_scratch(&img),
        .threads = 1,
        .seed = 5,
        .steps = steps,
        .nsteps = 2,
    };
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    stepped = first_batch(src, &size);
    for (size_t i = 0; i < n; i++)
        cr_assert(stepped[i] == (plain[i] + 1.0f) * 2.0f, "element %zu: %g, want (%g + 1) * 2", i,
                  stepped[i], plain[i]);
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    cr_assert_eq(st.nsteps, 2);
    cr_assert(st.step_s[0] > 0 && st.step_s[1] > 0 && st.step_s[2] > 0, "step times %g %g %g",
              st.step_s[0], st.step_s[1], st.step_s[2]);
    char text[4096];
    cr_assert_eq(adag_data_format_stats(src, text, sizeof(text), NULL), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert(strstr(text, "plus one") && strstr(text, "step 2") && strstr(text, "map"), "%s",
              text);
    adag_data_close(src);
    free(plain);
    free(stepped);

    /* refused: too many steps, a step without a function */
    p.nsteps = ADAG_DATA_MAX_STEPS + 1;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    const adag_data_step_t none[1] = {{.fn = NULL}};
    p.steps = none;
    p.nsteps = 1;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "no function"), "%s", adag_last_error());
}

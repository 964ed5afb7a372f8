/*
 * Suite "data_image_memory": the image map's memory is in the source's
 * budget. A progressive JPEG is decoded by libjpeg-turbo out of a
 * coefficient buffer for the whole image (2 bytes a coefficient, whatever
 * the DCT scale), which the thread's scratch counts: 3072 x 3072
 * progressive JPEGs (a 28 MB buffer each) are bad samples under the
 * default max_pixels, and decode within the budget once max_pixels allows
 * them; baseline JPEGs of the same size decode under the default. The
 * process's anonymous memory (RssAnon) is measured against the budget.
 */
#include <adag/data.h>

#include "data_rig.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

TestSuite(data_image_memory, .init = data_dir_make, .fini = data_dir_remove, .timeout = 120);

#define SIDE 3072
#define NIMG 4
/* allocator arenas, libjpeg-turbo's small state, the test's own */
#define SLACK ((size_t)16 << 20)

/* What the process grows by is compared with the budget, except under
 * AddressSanitizer, whose quarantine keeps freed blocks resident. */
#ifdef __SANITIZE_ADDRESS__
#define ASSERT_GREW_WITHIN(r)                                                                     \
    cr_log_info("RssAnon not compared under AddressSanitizer (grew %zu MB, budget %zu MB)",     \
                (r).grew >> 20, (r).stats.budget >> 20)
#else
#define ASSERT_GREW_WITHIN(r)                                                                     \
    cr_assert_leq((r).grew, (r).stats.budget + SLACK,                                             \
                  "anonymous memory grew %zu MB, budget %zu MB", (r).grew >> 20,                  \
                  (r).stats.budget >> 20)
#endif

/* This process's anonymous resident memory, in bytes. */
static size_t rss_anon(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    cr_assert_not_null(f);
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "RssAnon: %zu kB", &kb) == 1)
            break;
    fclose(f);
    cr_assert_gt(kb, 0, "no RssAnon in /proc/self/status");
    return kb << 10;
}

/* NIMG SIDE x SIDE JPEGs "<prefix><i>.jpg" (4:2:0, quality 90). */
static void write_big(const char *prefix, int flags)
{
    unsigned char *px = malloc((size_t)SIDE * SIDE * 3);
    cr_assert_not_null(px);
    for (unsigned i = 0; i < NIMG; i++) {
        for (size_t k = 0; k < (size_t)SIDE * SIDE; k++) {
            unsigned x = (unsigned)(k % SIDE), y = (unsigned)(k / SIDE);
            px[k * 3] = (unsigned char)(x * 7 + i);
            px[k * 3 + 1] = (unsigned char)(y * 3);
            px[k * 3 + 2] = (unsigned char)((x ^ y) + 40 * i);
        }
        char name[64];
        snprintf(name, sizeof(name), "%s%u.jpg", prefix, i);
        data_write_jpeg(name, px, SIDE, SIDE, TJSAMP_420, 90, flags);
    }
    free(px);
}

typedef struct {
    adag_status_t st;  /* of the first batch that failed, or ADAG_OK */
    char why[512];
    unsigned batches;
    size_t grew;       /* most RssAnon above the start */
    adag_data_stats_t stats;
} run_t;

/* Two threads, batches of 1, 64 x 64 f32 crops of the whole image, over
 * "<prefix>*.jpg"; takes NIMG batches (or until one fails), sampling
 * RssAnon after each. */
static run_t run(const char *prefix, uint64_t max_pixels)
{
    adag_data_image_t img = {
        .field_mask = ADAG_DATA_IMAGE_SCALE | (max_pixels ? ADAG_DATA_IMAGE_MAX_PIXELS : 0),
        .height = 64,
        .width = 64,
        .scale_min = 1,
        .scale_max = 1,
        .max_pixels = max_pixels,
    };
    char glob[64];
    snprintf(glob, sizeof(glob), "%s*.jpg", prefix);
    const char *shards[] = {data_path(glob)};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_MAP | ADAG_DATA_PARAM_SCRATCH | ADAG_DATA_PARAM_THREADS,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_FILES,
        .batch_size = 1,
        .sample_size = adag_data_image_size(&img),
        .map = adag_data_image_map,
        .map_arg = &img,
        .scratch_size = adag_data_image_scratch(&img),
        .threads = 2,
    };
    run_t r = {.st = ADAG_OK};
    size_t base = rss_anon();
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    for (; r.batches < NIMG; r.batches++) {
        adag_data_batch_t bt;
        r.st = adag_data_next(src, &bt, 60000);
        size_t now = rss_anon();
        if (now > base && now - base > r.grew)
            r.grew = now - base;
        if (r.st != ADAG_OK) {
            snprintf(r.why, sizeof(r.why), "%s", adag_last_error());
            break;
        }
        adag_data_release(src, &bt);
    }
    adag_data_stats(src, &r.stats);
    adag_data_close(src);
    return r;
}

/* Under the default max_pixels (2048 x 2048: a scratch of 2 x 12.6 MB a
 * thread), a 3072 x 3072 progressive JPEG's 28 MB coefficient buffer does
 * not fit: a bad sample, refused before it is decoded, and the process
 * grows by no more than the budget (it grew by 67 MB over a 28 MB budget
 * while the stats' peak stayed within it). Baseline JPEGs of the same size
 * decode at 1/8 under the default. */
Test(data_image_memory, a_progressive_jpeg_is_refused_when_its_coefficients_do_not_fit)
{
    write_big("prog", TJFLAG_PROGRESSIVE);
    run_t r = run("prog", 0);
    cr_assert_eq(r.st, ADAG_ERR_INVALID,
                 "a 3072x3072 progressive JPEG decoded under the default max_pixels (%u "
                 "batches; anonymous memory grew %zu MB, budget %zu MB)",
                 r.batches, r.grew >> 20, r.stats.budget >> 20);
    cr_assert(strstr(r.why, "prog") && strstr(r.why, "progressive") &&
                  strstr(r.why, "coefficient") && strstr(r.why, "max_pixels"),
              "%s", r.why);
    ASSERT_GREW_WITHIN(r);

    write_big("base", 0);
    r = run("base", 0);
    cr_assert_eq(r.st, ADAG_OK, "a baseline 3072x3072 JPEG: %s", r.why);
    cr_assert_eq(r.batches, NIMG);
    cr_assert_leq(r.stats.bytes_peak, r.stats.budget);
    ASSERT_GREW_WITHIN(r);
}

/* With max_pixels at the whole image, the scratch counts its coefficient
 * buffer: the progressive JPEGs decode, and what the process grows by
 * stays within the budget the stats report. */
Test(data_image_memory, a_progressive_jpeg_decodes_within_the_budget_when_it_fits)
{
    write_big("prog", TJFLAG_PROGRESSIVE);
    run_t r = run("prog", (uint64_t)SIDE * SIDE);
    cr_assert_eq(r.st, ADAG_OK, "%s", r.why);
    cr_assert_eq(r.batches, NIMG);
    cr_assert_leq(r.stats.bytes_peak, r.stats.budget);
    cr_assert_geq(r.stats.budget, (size_t)2 * 28 << 20,
                  "the budget (%zu MB) does not count two coefficient buffers of 28 MB",
                  r.stats.budget >> 20);
    ASSERT_GREW_WITHIN(r);
}

/*
 * Writes a WebDataset of generated JPEGs: what examples/loader_pipeline.c
 * reads when it is given no shards, and what adag-bench's image rows read
 * (bench/data_images.c). Shard k is "<dir>/shard-<k>.tar" (ustar, written
 * with libarchive) holding samples "s<k>/<index>.jpg" (side x side RGB,
 * quality 90, 4:2:0, encoded with libjpeg-turbo) and "s<k>/<index>.cls"
 * (index % 1000 as text). Each image is a pure function of (seed, index):
 * smooth gradients, a disc and noise, which compress about as photos of
 * the same size do (20-30 KB at 256 x 256).
 */
#ifndef ADAG_EXAMPLES_JPEG_SHARDS_H
#define ADAG_EXAMPLES_JPEG_SHARDS_H

#include <archive.h>
#include <archive_entry.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <turbojpeg.h>

static inline uint64_t jpeg_shards_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline void jpeg_shards_paint(unsigned char *px, unsigned side, uint64_t seed)
{
    uint64_t s = seed;
    int cx = (int)(jpeg_shards_mix(s++) % side), cy = (int)(jpeg_shards_mix(s++) % side);
    int r = (int)(side / 12 + jpeg_shards_mix(s++) % (side / 3));
    unsigned char base[3];
    for (int c = 0; c < 3; c++)
        base[c] = (unsigned char)jpeg_shards_mix(s++);
    for (unsigned y = 0; y < side; y++)
        for (unsigned x = 0; x < side; x++) {
            unsigned char *p = px + ((size_t)y * side + x) * 3;
            int in = ((int)x - cx) * ((int)x - cx) + ((int)y - cy) * ((int)y - cy) < r * r;
            uint64_t n = jpeg_shards_mix(s + (uint64_t)y * side + x);
            for (int c = 0; c < 3; c++) {
                int v = base[c] + (int)(x * (c + 1) + y * (3 - c)) / 4 + (in ? 90 : 0) +
                        (int)(n >> (8 * c) & 15);
                p[c] = (unsigned char)(v & 255);
            }
        }
}

/* One shard; 0 on success, -1 (and a message on stderr) on failure. */
static inline int jpeg_shards_write_one(const char *dir, unsigned k, unsigned per_shard,
                                        unsigned side, uint64_t seed, tjhandle tj,
                                        unsigned char *px)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/shard-%02u.tar", dir, k);
    struct archive *a = archive_write_new();
    struct archive_entry *e = archive_entry_new();
    int rc = -1;
    if (!a || !e || archive_write_set_format_ustar(a) != ARCHIVE_OK ||
        archive_write_open_filename(a, path) != ARCHIVE_OK)
        goto out;
    for (unsigned i = 0; i < per_shard; i++) {
        unsigned idx = k * per_shard + i;
        jpeg_shards_paint(px, side, jpeg_shards_mix(seed ^ jpeg_shards_mix(idx)));
        unsigned char *jpeg = NULL;
        unsigned long len = 0;
        if (tjCompress2(tj, px, (int)side, 0, (int)side, TJPF_RGB, &jpeg, &len, TJSAMP_420, 90,
                        0) != 0)
            goto out;
        char cls[16], name[64];
        int clen = snprintf(cls, sizeof cls, "%u", idx % 1000);
        const void *bodies[2] = {jpeg, cls};
        size_t sizes[2] = {len, (size_t)clen};
        const char *exts[2] = {"jpg", "cls"};
        for (int f = 0; f < 2; f++) {
            snprintf(name, sizeof name, "s%02u/%06u.%s", k, idx, exts[f]);
            archive_entry_clear(e);
            archive_entry_set_pathname(e, name);
            archive_entry_set_size(e, (la_int64_t)sizes[f]);
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_perm(e, 0644);
            if (archive_write_header(a, e) != ARCHIVE_OK ||
                archive_write_data(a, bodies[f], sizes[f]) != (la_ssize_t)sizes[f]) {
                tjFree(jpeg);
                goto out;
            }
        }
        tjFree(jpeg);
    }
    rc = archive_write_close(a) == ARCHIVE_OK ? 0 : -1;
out:
    if (rc)
        fprintf(stderr, "writing %s: %s\n", path,
                a && archive_error_string(a) ? archive_error_string(a) : tjGetErrorStr2(tj));
    if (e)
        archive_entry_free(e);
    if (a)
        archive_write_free(a);
    return rc;
}

/* nshards shards of per_shard samples in dir (which exists). */
static inline int jpeg_shards_write(const char *dir, unsigned nshards, unsigned per_shard,
                                    unsigned side, uint64_t seed)
{
    tjhandle tj = tjInitCompress();
    unsigned char *px = malloc((size_t)side * side * 3);
    int rc = tj && px ? 0 : -1;
    for (unsigned k = 0; k < nshards && rc == 0; k++)
        rc = jpeg_shards_write_one(dir, k, per_shard, side, seed, tj, px);
    free(px);
    if (tj)
        tjDestroy(tj);
    return rc;
}

static inline int jpeg_shards_remove_one(const char *p, const struct stat *s, int f,
                                         struct FTW *w)
{
    (void)s;
    (void)f;
    (void)w;
    remove(p);
    return 0;
}

/* Removes dir and everything in it. */
static inline void jpeg_shards_remove(const char *dir)
{
    nftw(dir, jpeg_shards_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif

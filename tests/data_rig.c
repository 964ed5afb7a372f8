/*
 * The data suites' scratch directory and the files they write
 * (tests/data_rig.h).
 */
#include "data_rig.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <unistd.h>

char data_dir[64];

void data_dir_make(void)
{
    snprintf(data_dir, sizeof(data_dir), "/tmp/adag-data-XXXXXX");
    cr_assert_not_null(mkdtemp(data_dir));
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void data_dir_remove(void)
{
    if (data_dir[0])
        nftw(data_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *data_path(const char *name)
{
    static char paths[8][512];
    static unsigned next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s/%s", data_dir, name);
    return p;
}

void data_write_file(const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", data_dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

void data_write_npy(const char *name, const char *descr, unsigned ndim, const unsigned *shape,
                    const void *data, size_t size)
{
    char dims[96] = "";
    for (unsigned d = 0, n = 0; d < ndim && d < 4; d++)
        n += (unsigned)snprintf(dims + n, sizeof(dims) - n, "%u, ", shape[d]);
    char dict[192];
    int n = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr, dims);
    size_t hlen = 10 + (size_t)n + 1;
    size_t pad = (64 - hlen % 64) % 64;
    size_t total = hlen + pad + size;
    unsigned char *buf = calloc(1, total);
    cr_assert_not_null(buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    uint16_t h = (uint16_t)(n + 1 + pad);
    memcpy(buf + 8, &h, 2);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', pad);
    buf[hlen + pad - 1] = '\n';
    memcpy(buf + hlen + pad, data, size);
    data_write_file(name, buf, total);
    free(buf);
}

void data_write_jpeg(const char *name, const unsigned char *px, unsigned w, unsigned h,
                     int subsamp, int quality, int flags)
{
    tjhandle t = tjInitCompress();
    cr_assert_not_null(t);
    unsigned char *jpeg = NULL;
    unsigned long size = 0;
    cr_assert_eq(tjCompress2(t, px, (int)w, 0, (int)h, TJPF_RGB, &jpeg, &size, subsamp, quality,
                             flags),
                 0, "tjCompress2: %s", tjGetErrorStr2(t));
    data_write_file(name, jpeg, size);
    tjFree(jpeg);
    tjDestroy(t);
}

/* A token dataset "t" of int32 tokens: documents of the given sizes, token
 * values counting up from 0 across them. */
uint64_t data_write_tokens(const char *name, const uint32_t *sizes, unsigned ndocs)
{
    uint64_t total = 0;
    for (unsigned d = 0; d < ndocs; d++)
        total += sizes[d];
    int32_t *bin = malloc(total * 4 + 4);
    for (uint64_t i = 0; i < total; i++)
        bin[i] = (int32_t)i;
    char file[64];
    snprintf(file, sizeof(file), "%s.bin", name);
    data_write_file(file, bin, total * 4);
    free(bin);
    size_t len = 9 + 8 + 1 + 8 + 8 + ndocs * 4 + ndocs * 8 + (ndocs + 1) * 8;
    unsigned char *idx = calloc(1, len), *q = idx;
    memcpy(q, "MMIDIDX\0\0", 9), q += 9;
    uint64_t v = 1;
    memcpy(q, &v, 8), q += 8;
    *q++ = 4; /* int32 */
    v = ndocs;
    memcpy(q, &v, 8), q += 8;
    v = ndocs + 1;
    memcpy(q, &v, 8), q += 8;
    for (unsigned d = 0; d < ndocs; d++, q += 4)
        memcpy(q, &sizes[d], 4);
    int64_t off = 0;
    for (unsigned d = 0; d < ndocs; d++, q += 8) {
        memcpy(q, &off, 8);
        off += (int64_t)sizes[d] * 4;
    }
    for (int64_t d = 0; d <= (int64_t)ndocs; d++, q += 8)
        memcpy(q, &d, 8);
    snprintf(file, sizeof(file), "%s.idx", name);
    data_write_file(file, idx, len);
    free(idx);
    return total;
}

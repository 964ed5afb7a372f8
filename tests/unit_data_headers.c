/*
 * Suites "npy" and "megatron": the bounded header parsers of the data
 * stage (data/npy.c, data/megatron_idx.c) on headers built here: every
 * form numpy writes, every refusal with its message, and every truncation
 * (refused, never read past: ASan runs these too).
 */
#include "data/megatron_idx.h"
#include "data/npy.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* ---- .npy ---- */

/* A .npy image: magic, version, header length, dict padded to 64 bytes
 * with '\n', then data_bytes zero bytes. */
static size_t npy_image(unsigned char *out, size_t cap, unsigned major, const char *dict,
                        size_t data_bytes)
{
    size_t pre = major == 1 ? 10 : 12, n = strlen(dict);
    size_t total = pre + n + 1;
    size_t pad = (64 - total % 64) % 64, hlen = n + pad + 1;
    cr_assert_leq(pre + hlen + data_bytes, cap);
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major;
    out[7] = 0;
    for (unsigned i = 0; i < pre - 8; i++)
        out[8 + i] = (unsigned char)(hlen >> (8 * i));
    memcpy(out + pre, dict, n);
    memset(out + pre + n, ' ', pad);
    out[pre + hlen - 1] = '\n';
    memset(out + pre + hlen, 0, data_bytes);
    return pre + hlen + data_bytes;
}

static adag_status_t npy(const char *dict, size_t data_bytes, adag_npy_header_t *h, char *why)
{
    static unsigned char buf[1 << 16];
    size_t len = npy_image(buf, sizeof(buf), 1, dict, data_bytes);
    return adag__npy_parse(buf, len, len, h, why, 256);
}

/* The forms numpy writes, and some it could: quotes, spacing, key order,
 * trailing commas, 0 to 3 dimensions, versions 1 to 3. */
Test(npy, headers_numpy_writes)
{
    adag_npy_header_t h;
    char why[256];
    cr_assert_eq(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 48, &h, why),
                 ADAG_OK, "%s", why);
    cr_assert_eq(h.version, 1);
    cr_assert_eq(h.dtype, ADAG_DTYPE_F32);
    cr_assert_eq(h.item_size, 4);
    cr_assert_eq(h.ndim, 2);
    cr_assert_eq(h.shape[0], 3);
    cr_assert_eq(h.shape[1], 4);
    cr_assert_eq(h.count, 12);
    cr_assert_eq(h.data_size, 48);
    cr_assert_eq(h.data_offset % 64, 0, "numpy aligns the data to 64 bytes");
    cr_assert_eq(npy("{\"shape\":(5,),\"descr\":\"<i8\",\"fortran_order\":False}", 40, &h, why),
                 ADAG_OK, "%s", why);
    cr_assert_eq(h.dtype, ADAG_DTYPE_I64);
    cr_assert_eq(h.ndim, 1);
    cr_assert_eq(h.shape[0], 5);
    cr_assert_eq(npy("{'descr': '|u1', 'fortran_order': False, 'shape': (), }", 1, &h, why),
                 ADAG_OK, "%s", why);
    cr_assert_eq(h.ndim, 0);
    cr_assert_eq(h.count, 1);
    cr_assert_eq(npy("{ 'descr' : '<f2' , 'fortran_order' : False , 'shape' : ( 2 , 3 , 4 ) , "
                     "'extra': (1, 'x'), }",
                     48, &h, why),
                 ADAG_OK, "%s", why);
    cr_assert_eq(h.dtype, ADAG_DTYPE_F16);
    cr_assert_eq(h.ndim, 3);
    cr_assert_eq(h.shape[2], 4);
    cr_assert_eq(npy("{'descr': '|b1', 'fortran_order': False, 'shape': (0, 7), }", 0, &h, why),
                 ADAG_OK, "%s", why);
    cr_assert_eq(h.dtype, ADAG_DTYPE_BOOL);
    cr_assert_eq(h.count, 0);
    static unsigned char buf[256];
    for (unsigned major = 2; major <= 3; major++) {
        size_t len = npy_image(buf, sizeof(buf), major,
                               "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16);
        cr_assert_eq(adag__npy_parse(buf, len, len, &h, why, sizeof(why)), ADAG_OK, "%s", why);
        cr_assert_eq(h.version, major);
        cr_assert_eq(h.dtype, ADAG_DTYPE_F64);
        cr_assert_eq(h.data_offset, len - 16);
    }
}

/* Everything it must refuse, each with what and where. */
Test(npy, refusals_say_why)
{
    static const struct {
        const char *dict;
        size_t data;
        const char *want;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", 12, "Fortran order"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", 12, "big-endian"},
        {"{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", 6, "no adag dtype"},
        {"{'descr': '<U5', 'fortran_order': False, 'shape': (3,), }", 60, "no adag dtype"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", 12,
         "structured"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4,
         "more than 8 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }",
         0, "overflows"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0,
         "overflows"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8, "the file has"},
        {"{'descr': '<f4', 'shape': (3,), }", 12, "'fortran_order' is missing"},
        {"{'fortran_order': False, 'shape': (3,), }", 12, "'descr' is missing"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 3, }", 12, "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3,), }", 12, "neither True"},
        {"{'descr': '<f4' 'fortran_order': False}", 12, "expected"},
        {"['descr', '<f4']", 12, "no '{'"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (3,), }", 12, "no adag dtype"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        adag_npy_header_t h;
        char why[256] = "";
        cr_assert_eq(npy(cases[i].dict, cases[i].data, &h, why), ADAG_ERR_INVALID, "case %zu: %s",
                     i, cases[i].dict);
        cr_assert(strstr(why, cases[i].want), "case %zu: '%s' lacks '%s'", i, why,
                  cases[i].want);
    }
    static unsigned char buf[256];
    adag_npy_header_t h;
    char why[256];
    size_t len = npy_image(buf, sizeof(buf), 1, "{'descr': '<f4', 'fortran_order': False, "
                                                "'shape': (3,), }", 12);
    buf[0] = 'x';
    cr_assert_eq(adag__npy_parse(buf, len, len, &h, why, sizeof(why)), ADAG_ERR_INVALID);
    cr_assert(strstr(why, "magic"), "%s", why);
    buf[0] = 0x93;
    buf[6] = 4;
    cr_assert_eq(adag__npy_parse(buf, len, len, &h, why, sizeof(why)), ADAG_ERR_INVALID);
    cr_assert(strstr(why, "version 4"), "%s", why);
    cr_assert_eq(adag__npy_parse(NULL, 0, 0, &h, why, sizeof(why)), ADAG_ERR_INVALID);
}

/* A header cut at any length is refused and never read past (a copy of
 * exactly that many bytes, so ASan sees any overread). */
Test(npy, every_truncation_is_refused)
{
    static unsigned char full[512];
    size_t len = npy_image(full, sizeof(full), 2,
                           "{'descr': '<i4', 'fortran_order': False, 'shape': (7, 2), }", 56);
    size_t header = len - 56;
    adag_npy_header_t h;
    char why[256];
    for (size_t n = 0; n < header; n++) {
        unsigned char *cut = malloc(n ? n : 1);
        memcpy(cut, full, n);
        cr_assert_eq(adag__npy_parse(cut, n, len, &h, why, sizeof(why)), ADAG_ERR_INVALID,
                     "accepted %zu bytes of a %zu-byte header", n, header);
        free(cut);
    }
    cr_assert_eq(adag__npy_parse(full, header, len, &h, why, sizeof(why)), ADAG_OK, "%s", why);
    cr_assert_eq(adag__npy_parse(full, header, len - 1, &h, why, sizeof(why)), ADAG_ERR_INVALID,
                 "data one byte short of the file");
}

/* ---- Megatron .idx ---- */

typedef struct {
    unsigned char b[4096];
    size_t len;
    size_t sizes, pointers, docs; /* offsets of the arrays */
} idx_t;

/* An index of int32 tokens for documents of the given sizes. */
static void idx_build(idx_t *x, unsigned code, const int32_t *sizes, unsigned n, size_t item)
{
    unsigned char *q = x->b;
    memcpy(q, "MMIDIDX\0\0", 9), q += 9;
    uint64_t v = 1;
    memcpy(q, &v, 8), q += 8;
    *q++ = (unsigned char)code;
    v = n;
    memcpy(q, &v, 8), q += 8;
    v = n + 1;
    memcpy(q, &v, 8), q += 8;
    x->sizes = (size_t)(q - x->b);
    for (unsigned i = 0; i < n; i++, q += 4)
        memcpy(q, &sizes[i], 4);
    x->pointers = (size_t)(q - x->b);
    int64_t off = 0;
    for (unsigned i = 0; i < n; i++, q += 8) {
        memcpy(q, &off, 8);
        off += (int64_t)sizes[i] * (int64_t)item;
    }
    x->docs = (size_t)(q - x->b);
    for (int64_t d = 0; d <= (int64_t)n; d++, q += 8)
        memcpy(q, &d, 8);
    x->len = (size_t)(q - x->b);
}

static void put64(idx_t *x, size_t at, int64_t v)
{
    memcpy(x->b + at, &v, 8);
}

Test(megatron, index_fields)
{
    idx_t x;
    int32_t sizes[3] = {4, 0, 9};
    idx_build(&x, 4, sizes, 3, 4);
    adag_megatron_idx_t idx;
    char why[256];
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 13 * 4, &idx, why, sizeof(why)), ADAG_OK,
                 "%s", why);
    cr_assert_eq(idx.dtype, ADAG_DTYPE_I32);
    cr_assert_eq(idx.item_size, 4);
    cr_assert_eq(idx.nseqs, 3);
    cr_assert_eq(idx.ndocs, 4);
    cr_assert_eq(idx.total_tokens, 13);
    cr_assert_eq(adag__megatron_seq_size(&idx, 2), 9);
    cr_assert_eq(adag__megatron_seq_offset(&idx, 2), 16);
    /* uint16 tokens (GPT-2 vocabularies): raw 2-byte values */
    idx_build(&x, 8, sizes, 3, 2);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 26, &idx, why, sizeof(why)), ADAG_OK, "%s",
                 why);
    cr_assert_eq(idx.dtype, ADAG_DTYPE_BYTES);
    cr_assert_eq(idx.item_size, 2);
}

Test(megatron, refusals_say_why)
{
    int32_t sizes[3] = {4, 2, 9};
    adag_megatron_idx_t idx;
    char why[256];
    idx_t x;
    struct {
        const char *want;
    } c;

    idx_build(&x, 4, sizes, 3, 4);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 15 * 4 - 1, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, "sequence 2 ends at byte 60, past the .bin's 59 bytes"), "%s", why);

    idx_build(&x, 4, sizes, 3, 4);
    x.b[0] = 'X';
    c.want = "no MMIDIDX header";
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 60, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, c.want), "%s", why);

    idx_build(&x, 4, sizes, 3, 4);
    put64(&x, 9, 2);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 60, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, "version 2"), "%s", why);

    idx_build(&x, 9, sizes, 3, 4);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 60, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, "unknown dtype code 9"), "%s", why);

    int32_t neg[3] = {4, -2, 9};
    idx_build(&x, 4, neg, 3, 4);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 60, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, "sequence 1 has size -2"), "%s", why);

    idx_build(&x, 4, sizes, 3, 4);
    put64(&x, x.pointers + 8, 20);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 60, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, "sequence 1 starts at byte 20, not 16"), "%s", why);

    idx_build(&x, 4, sizes, 3, 4);
    put64(&x, x.docs, 1);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 60, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, "document index entry 0 is 1"), "%s", why);

    idx_build(&x, 4, sizes, 3, 4);
    put64(&x, x.docs + 16, 0);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 60, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, "document index entry 2 is 0"), "%s", why);

    idx_build(&x, 4, sizes, 3, 4);
    put64(&x, x.docs + 24, 2);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 60, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, "ends at 2, not at the 3 sequences"), "%s", why);

    /* counts far larger than the file: refused before any multiplication */
    idx_build(&x, 4, sizes, 3, 4);
    put64(&x, 18, INT64_MAX);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 60, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, "need more than its"), "%s", why);
    idx_build(&x, 4, sizes, 3, 4);
    put64(&x, 26, (int64_t)1 << 61);
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 60, &idx, why, sizeof(why)),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(why, "need more than its"), "%s", why);
}

Test(megatron, every_truncation_is_refused)
{
    int32_t sizes[5] = {3, 1, 4, 1, 5};
    idx_t x;
    idx_build(&x, 4, sizes, 5, 4);
    adag_megatron_idx_t idx;
    char why[256];
    for (size_t n = 0; n < x.len; n++) {
        unsigned char *cut = malloc(n ? n : 1);
        memcpy(cut, x.b, n);
        cr_assert_eq(adag__megatron_idx_parse(cut, n, 56, &idx, why, sizeof(why)),
                     ADAG_ERR_INVALID, "accepted %zu of %zu bytes", n, x.len);
        free(cut);
    }
    cr_assert_eq(adag__megatron_idx_parse(x.b, x.len, 56, &idx, why, sizeof(why)), ADAG_OK, "%s",
                 why);
}

/*
 * NumPy .npy headers (data/npy.h). The header is a Python dict literal,
 * e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }, read
 * with a small scanner that never looks past the header's length.
 */
#include "data/npy.h"
#include "data/why.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *p, *end, *start; /* start: the file's first byte (offsets) */
    char *why;
    size_t why_len;
} scan_t;


#define FAIL(sc, ...) adag__data_refuse((sc)->why, (sc)->why_len, __VA_ARGS__)
#define AT(sc) ((long long)((sc)->p - (sc)->start))

static void skip_space(scan_t *sc)
{
    while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\n' || *sc->p == '\r'))
        sc->p++;
}

static int take(scan_t *sc, char c)
{
    skip_space(sc);
    if (sc->p < sc->end && *sc->p == c) {
        sc->p++;
        return 1;
    }
    return 0;
}

/* A quoted string ('...' or "...") into out (at most n - 1 bytes). */
static adag_status_t string(scan_t *sc, char *out, size_t n)
{
    skip_space(sc);
    if (sc->p >= sc->end || (*sc->p != '\'' && *sc->p != '"'))
        return FAIL(sc, "npy header: a quoted string expected at offset %lld", AT(sc));
    char q = *sc->p++;
    size_t k = 0;
    while (sc->p < sc->end && *sc->p != q) {
        if (k + 1 >= n)
            return FAIL(sc, "npy header: a string longer than %zu bytes at offset %lld", n - 1,
                        AT(sc));
        out[k++] = *sc->p++;
    }
    if (sc->p >= sc->end)
        return FAIL(sc, "npy header: an unterminated string at offset %lld", AT(sc));
    sc->p++;
    out[k] = '\0';
    return ADAG_OK;
}

static adag_status_t shape(scan_t *sc, adag_npy_header_t *h)
{
    if (!take(sc, '('))
        return FAIL(sc, "npy header: shape is not a tuple, at offset %lld", AT(sc));
    h->ndim = 0;
    for (;;) {
        skip_space(sc);
        if (take(sc, ')'))
            return ADAG_OK;
        if (sc->p >= sc->end || *sc->p < '0' || *sc->p > '9')
            return FAIL(sc, "npy header: a dimension expected at offset %lld", AT(sc));
        uint64_t v = 0;
        while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9') {
            if (v > (UINT64_MAX - 9) / 10)
                return FAIL(sc, "npy header: a dimension overflows, at offset %lld", AT(sc));
            v = v * 10 + (uint64_t)(*sc->p++ - '0');
        }
        if (h->ndim == ADAG_MAX_DIMS)
            return FAIL(sc, "npy header: shape has more than %d dimensions, at offset %lld",
                        ADAG_MAX_DIMS, AT(sc));
        h->shape[h->ndim++] = v;
        if (!take(sc, ',')) {
            if (take(sc, ')'))
                return ADAG_OK;
            return FAIL(sc, "npy header: ',' or ')' expected in shape at offset %lld", AT(sc));
        }
    }
}

static adag_status_t descr(scan_t *sc, const char *d, adag_npy_header_t *h)
{
    static const struct {
        const char *code;
        adag_dtype_t dtype;
        size_t size;
    } known[] = {
        {"u1", ADAG_DTYPE_U8, 1},  {"i1", ADAG_DTYPE_I8, 1},   {"b1", ADAG_DTYPE_BOOL, 1},
        {"i2", ADAG_DTYPE_I16, 2}, {"i4", ADAG_DTYPE_I32, 4},  {"i8", ADAG_DTYPE_I64, 8},
        {"f2", ADAG_DTYPE_F16, 2}, {"f4", ADAG_DTYPE_F32, 4},  {"f8", ADAG_DTYPE_F64, 8},
    };
    char order = d[0];
    if (order != '<' && order != '|' && order != '=' && order != '>')
        return FAIL(sc, "npy header: descr '%s' is not a simple type (structured, or no "
                    "byte order)", d);
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(d + 1, known[i].code))
            continue;
        if (order == '>' && known[i].size > 1)
            return FAIL(sc, "npy header: descr '%s' is big-endian; save the array "
                        "little-endian", d);
        h->dtype = known[i].dtype;
        h->item_size = known[i].size;
        return ADAG_OK;
    }
    return FAIL(sc, "npy header: descr '%s' has no adag dtype (u1 i1 i2 i4 i8 f2 f4 f8 b1)", d);
}

/* The value of a key we do not use: a string, a word, a number or a
 * tuple, skipped. */
static adag_status_t skip_value(scan_t *sc)
{
    char tmp[256];
    skip_space(sc);
    if (sc->p < sc->end && (*sc->p == '\'' || *sc->p == '"'))
        return string(sc, tmp, sizeof(tmp));
    int depth = 0;
    while (sc->p < sc->end) {
        char c = *sc->p;
        if (c == '(' || c == '[')
            depth++;
        else if ((c == ')' || c == ']') && depth > 0)
            depth--;
        else if ((c == ',' || c == '}') && depth == 0)
            return ADAG_OK;
        sc->p++;
    }
    return FAIL(sc, "npy header: a value runs past the header's end");
}

static adag_status_t dict(scan_t *sc, adag_npy_header_t *h)
{
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!take(sc, '{'))
        return FAIL(sc, "npy header: no '{' at offset %lld", AT(sc));
    for (;;) {
        if (take(sc, '}'))
            break;
        char key[64], val[64];
        adag_status_t st = string(sc, key, sizeof(key));
        if (st != ADAG_OK)
            return st;
        if (!take(sc, ':'))
            return FAIL(sc, "npy header: ':' expected after '%s' at offset %lld", key, AT(sc));
        if (!strcmp(key, "descr")) {
            skip_space(sc);
            if (sc->p < sc->end && *sc->p == '[')
                return FAIL(sc, "npy header: a structured descr (a list) is not supported");
            if ((st = string(sc, val, sizeof(val))) != ADAG_OK || (st = descr(sc, val, h)) != ADAG_OK)
                return st;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            skip_space(sc);
            if ((size_t)(sc->end - sc->p) >= 4 && !memcmp(sc->p, "True", 4))
                return FAIL(sc, "npy header: Fortran order is not supported: save the array "
                            "C-contiguous");
            if ((size_t)(sc->end - sc->p) < 5 || memcmp(sc->p, "False", 5))
                return FAIL(sc, "npy header: fortran_order is neither True nor False, at "
                            "offset %lld", AT(sc));
            sc->p += 5;
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            if ((st = shape(sc, h)) != ADAG_OK)
                return st;
            have_shape = 1;
        } else if ((st = skip_value(sc)) != ADAG_OK) {
            return st;
        }
        if (!take(sc, ',')) {
            if (take(sc, '}'))
                break;
            return FAIL(sc, "npy header: ',' or '}' expected at offset %lld", AT(sc));
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return FAIL(sc, "npy header: '%s' is missing",
                    !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    return ADAG_OK;
}

adag_status_t adag__npy_parse(const void *buf, size_t len, uint64_t file_size,
                             adag_npy_header_t *out, char *why, size_t why_len)
{
    const unsigned char *b = buf;
    memset(out, 0, sizeof(*out));
    if (len < 10 || !b || memcmp(b, "\x93NUMPY", 6))
        return adag__data_refuse(why, why_len, "npy header: no .npy magic in the first %zu bytes",
                                 len);
    unsigned major = b[6];
    size_t hlen, pre;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        pre = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return adag__data_refuse(why, why_len,
                                     "npy header: %zu bytes hold no v%u header length", len, major);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        pre = 12;
    } else {
        return adag__data_refuse(why, why_len, "npy header: format version %u.%u is not 1, 2 or 3",
                                 major, b[7]);
    }
    if (hlen > len - pre)
        return adag__data_refuse(why, why_len, "npy header: needs %zu bytes, only %zu available",
                      pre + hlen, len);
    scan_t sc = {(const char *)b + pre, (const char *)b + pre + hlen, (const char *)b, why,
                 why_len};
    adag_status_t st = dict(&sc, out);
    if (st != ADAG_OK)
        return st;
    out->version = major;
    out->count = 1;
    for (unsigned d = 0; d < out->ndim; d++) {
        if (out->shape[d] && out->count > UINT64_MAX / out->shape[d])
            return adag__data_refuse(why, why_len,
                                     "npy header: the shape's element count overflows");
        out->count *= out->shape[d];
    }
    if (out->count > UINT64_MAX / out->item_size)
        return adag__data_refuse(why, why_len, "npy header: the array's size overflows");
    out->data_offset = pre + hlen;
    out->data_size = out->count * out->item_size;
    if (out->data_offset > file_size || out->data_size > file_size - out->data_offset)
        return adag__data_refuse(why, why_len,
                      "npy header: the array needs %llu bytes from offset %llu, the file has "
                      "%llu",
                      (unsigned long long)out->data_size, (unsigned long long)out->data_offset,
                      (unsigned long long)file_size);
    return ADAG_OK;
}

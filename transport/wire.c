#include "transport/wire.h"

#include <stdlib.h>
#include <string.h>

static void wbuf_put(adag_wbuf_t *b, const void *p, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        char *data = realloc(b->data, cap);
        if (!data) {
            b->failed = 1;
            return;
        }
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void adag__wbuf_u32(adag_wbuf_t *b, uint32_t v)
{
    wbuf_put(b, &v, sizeof(v));
}

void adag__wbuf_u64(adag_wbuf_t *b, uint64_t v)
{
    wbuf_put(b, &v, sizeof(v));
}

void adag__wbuf_bytes(adag_wbuf_t *b, const void *data, size_t len)
{
    adag__wbuf_u64(b, len);
    if (len)
        wbuf_put(b, data, len);
}

void adag__wbuf_raw(adag_wbuf_t *b, const void *data, size_t len)
{
    if (len)
        wbuf_put(b, data, len);
}

void adag__wbuf_str(adag_wbuf_t *b, const char *s)
{
    adag__wbuf_bytes(b, s ? s : "", s ? strlen(s) : 0);
}

void adag__wbuf_free(adag_wbuf_t *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

static const void *rbuf_take(adag_rbuf_t *b, size_t n)
{
    if (b->failed || n > b->len - b->pos) {
        b->failed = 1;
        return NULL;
    }
    const void *p = b->data + b->pos;
    b->pos += n;
    return p;
}

uint32_t adag__rbuf_u32(adag_rbuf_t *b)
{
    uint32_t v = 0;
    const void *p = rbuf_take(b, sizeof(v));
    if (p)
        memcpy(&v, p, sizeof(v));
    return v;
}

uint64_t adag__rbuf_u64(adag_rbuf_t *b)
{
    uint64_t v = 0;
    const void *p = rbuf_take(b, sizeof(v));
    if (p)
        memcpy(&v, p, sizeof(v));
    return v;
}

const void *adag__rbuf_bytes(adag_rbuf_t *b, size_t *len)
{
    uint64_t n = adag__rbuf_u64(b);
    if (b->failed || n > b->len - b->pos) {
        b->failed = 1;
        *len = 0;
        return NULL;
    }
    *len = (size_t)n;
    return rbuf_take(b, (size_t)n);
}

void adag__rbuf_str(adag_rbuf_t *b, char *out, size_t max)
{
    size_t n;
    const char *p = adag__rbuf_bytes(b, &n);
    out[0] = '\0';
    if (!p && n == 0 && b->failed)
        return;
    if (n >= max || memchr(p, '\0', n)) {
        b->failed = 1;
        return;
    }
    memcpy(out, p, n);
    out[n] = '\0';
}

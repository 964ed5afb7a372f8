/* Encoding of control messages: little helpers that append fixed-width
 * integers, strings and byte runs to a growing buffer, and read them back
 * with bounds checks (every length from a peer is checked before use). */
#ifndef ADAG_TRANSPORT_WIRE_H
#define ADAG_TRANSPORT_WIRE_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data;
    size_t len, cap;
    int failed; /* an allocation failed; the buffer is unusable */
} adag_wbuf_t;

void adag__wbuf_u32(adag_wbuf_t *b, uint32_t v);
void adag__wbuf_u64(adag_wbuf_t *b, uint64_t v);
void adag__wbuf_bytes(adag_wbuf_t *b, const void *data, size_t len); /* u64 length + bytes */
void adag__wbuf_raw(adag_wbuf_t *b, const void *data, size_t len);   /* bytes, no length */
void adag__wbuf_str(adag_wbuf_t *b, const char *s);                  /* NULL allowed */
void adag__wbuf_free(adag_wbuf_t *b);

typedef struct {
    const char *data;
    size_t len, pos;
    int failed; /* read past the end or malformed */
} adag_rbuf_t;

uint32_t adag__rbuf_u32(adag_rbuf_t *b);
uint64_t adag__rbuf_u64(adag_rbuf_t *b);
/* A view of a byte run inside the buffer (no copy); NULL + failed on error. */
const void *adag__rbuf_bytes(adag_rbuf_t *b, size_t *len);
/* Copies a string of at most max-1 bytes into out; sets failed if longer. */
void adag__rbuf_str(adag_rbuf_t *b, char *out, size_t max);

#endif

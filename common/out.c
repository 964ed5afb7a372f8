#include "common/out.h"

#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- adag_out_t ---- */

void adag__out_writer(adag_out_t *o, adag_writer_t w)
{
    memset(o, 0, offsetof(adag_out_t, stage));
    o->to_writer = 1;
    o->w = w;
    o->buf = o->stage;
    o->cap = sizeof(o->stage);
    if (!w.fn) {
        o->st = ADAG_ERR_INVALID;
        snprintf(o->why, sizeof(o->why), "its fn is NULL");
    }
}

void adag__out_buffer(adag_out_t *o, char *buf, size_t len)
{
    memset(o, 0, offsetof(adag_out_t, stage));
    o->buf = len ? buf : NULL;
    o->cap = o->buf ? len : 0;
    if (o->cap)
        o->buf[0] = '\0';
}

/* Hands data[0..n) to the writer; its first failure sticks, with its
 * message (or, from a writer that set none, what it returned). */
static void deliver(adag_out_t *o, const void *data, size_t n)
{
    if (o->st != ADAG_OK || n == 0)
        return;
    adag__error_clear();
    adag_status_t st = o->w.fn(o->w.ctx, data, n);
    if (st == ADAG_OK) {
        o->delivered += n;
        return;
    }
    /* a status's name is what adag_status_str gives before its ':' (a
     * value that is no status has none): the public API, as this file is
     * compiled into libadag-data too */
    const char *str = adag_status_str(st), *colon = strchr(str, ':');
    o->st = st < ADAG_OK && colon ? st : ADAG_ERR_IO;
    if (adag_last_error()[0])
        snprintf(o->why, sizeof(o->why), "%s", adag_last_error());
    else if (colon)
        snprintf(o->why, sizeof(o->why), "it returned %.*s (%d)", (int)(colon - str), str, (int)st);
    else
        snprintf(o->why, sizeof(o->why), "it returned no adag status (%d)", (int)st);
}

void adag__out_flush(adag_out_t *o)
{
    if (!o->to_writer)
        return;
    deliver(o, o->stage, o->len);
    o->len = 0;
}

/* Buffer mode: what fits of data[0..n), the rest counted. */
static void keep(adag_out_t *o, const void *data, size_t n)
{
    o->total += n;
    if (!o->cap || o->len + 1 >= o->cap)
        return;
    size_t room = o->cap - 1 - o->len, k = n < room ? n : room;
    memcpy(o->buf + o->len, data, k);
    o->len += k;
    o->buf[o->len] = '\0';
}

void adag__out_write(adag_out_t *o, const void *data, size_t n)
{
    if (o->st != ADAG_OK)
        return;
    if (!o->to_writer) {
        keep(o, data, n);
        return;
    }
    o->total += n;
    if (n > o->cap - o->len) {
        adag__out_flush(o);
        if (n >= o->cap) { /* larger than the stage: as it is */
            deliver(o, data, n);
            return;
        }
    }
    memcpy(o->stage + o->len, data, n);
    o->len += n;
}

void adag__out_putc(adag_out_t *o, char c)
{
    adag__out_write(o, &c, 1);
}

void adag__out_printf(adag_out_t *o, const char *fmt, ...)
{
    if (o->st != ADAG_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    /* formatted where it goes when it fits (the usual case) */
    size_t room = o->cap - o->len;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    if ((size_t)n < room) {
        o->len += (size_t)n;
        o->total += (size_t)n;
        return;
    }
    if (!o->to_writer) { /* cut off: what fit is in place, NUL-terminated */
        o->total += (size_t)n;
        if (o->cap)
            o->len = o->cap - 1;
        return;
    }
    /* the stage up to len is intact (what vsnprintf cut is past it): it
     * goes, and the text is formatted again into the empty stage, or into
     * a block of its size when it is larger */
    adag__out_flush(o);
    if (o->st != ADAG_OK)
        return;
    o->total += (size_t)n;
    char *text = (size_t)n < o->cap ? o->stage : malloc((size_t)n + 1);
    if (!text) {
        o->st = ADAG_ERR_NO_MEMORY;
        snprintf(o->why, sizeof(o->why), "out of memory for %d bytes of text", n);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    if (text == o->stage) {
        o->len = (size_t)n;
        return;
    }
    deliver(o, text, (size_t)n);
    free(text);
}

adag_status_t adag__out_end(adag_out_t *o, const char *fn, size_t *needed)
{
    if (o->to_writer) {
        adag__out_flush(o);
        if (o->st == ADAG_OK)
            return ADAG_OK;
        return adag__error(o->st, "%s: writing failed after %llu bytes: %s", fn,
                          (unsigned long long)o->delivered, o->why);
    }
    if (needed)
        *needed = (size_t)o->total + 1;
    if (o->total < o->cap)
        return ADAG_OK;
    return adag__error(ADAG_ERR_TOO_LARGE,
                      "%s: the text is %llu bytes (%llu with its NUL); the buffer holds %zu "
                      "(it has the first %zu)",
                      fn, (unsigned long long)o->total, (unsigned long long)o->total + 1, o->cap,
                      o->len);
}

adag_status_t adag__out_run(const char *fn, const char *what, void *obj, adag_writer_t w,
                           adag_out_body_fn body)
{
    if (!obj || !w.fn)
        return adag__error(ADAG_ERR_INVALID, "%s: %s and out.fn must not be NULL", fn, what);
    adag_out_t o;
    adag__out_writer(&o, w);
    adag_status_t st = body(obj, &o);
    return st == ADAG_OK ? adag__out_end(&o, fn, NULL) : st;
}

adag_status_t adag__out_run_buffer(const char *fn, const char *what, void *obj, char *buf,
                                  size_t len, size_t *needed, adag_out_body_fn body)
{
    if (!obj || (len && !buf))
        return adag__error(ADAG_ERR_INVALID, "%s: %s must not be NULL, nor buf with len %zu", fn,
                          what, len);
    adag_out_t o;
    adag__out_buffer(&o, buf, len);
    adag_status_t st = body(obj, &o);
    return st == ADAG_OK ? adag__out_end(&o, fn, needed) : st;
}

/*
 * Stream captures of this process (gpu/capture.h).
 */
#include "gpu/capture.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t captures_lock = PTHREAD_MUTEX_INITIALIZER;
static adag_capture_t *captures;
/* How many captures are in the list; changed under the lock, loaded
 * relaxed by the fast paths (a capture is begun before its thread enqueues,
 * so that thread sees its own count). */
static _Atomic size_t ncaptures;

int adag__capture_any(void)
{
    return atomic_load_explicit(&ncaptures, memory_order_relaxed) != 0;
}

void adag__capture_lock(void)
{
    pthread_mutex_lock(&captures_lock);
}

void adag__capture_unlock(void)
{
    pthread_mutex_unlock(&captures_lock);
}

adag_capture_t *adag__capture_of_locked(const void *stream)
{
    for (adag_capture_t *c = captures; c; c = c->next)
        if (c->stream == stream)
            return c;
    return NULL;
}

adag_capture_t *adag__capture_of(const void *stream)
{
    if (!atomic_load_explicit(&ncaptures, memory_order_relaxed))
        return NULL;
    adag__capture_lock();
    adag_capture_t *c = adag__capture_of_locked(stream);
    adag__capture_unlock();
    return c;
}

static adag_status_t villegal(adag_capture_t *c, const char *fmt, va_list ap)
{
    char op[ADAG_ERROR_MAX];
    vsnprintf(op, sizeof op, fmt, ap);
    if (!c->illegal[0])
        snprintf(c->illegal, sizeof c->illegal, "%s", op);
    return adag__error(ADAG_ERR_INVALID,
                       "%s: %s is illegal while a stream captures (CUDA: "
                       "cudaErrorStreamCaptureUnsupported); the capture is invalidated",
                       c->who, op);
}

adag_status_t adag__capture_illegal_locked(adag_capture_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    adag_status_t st = villegal(c, fmt, ap);
    va_end(ap);
    return st;
}

adag_status_t adag__capture_illegal(adag_capture_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    adag__capture_lock();
    adag_status_t st = villegal(c, fmt, ap);
    adag__capture_unlock();
    va_end(ap);
    return st;
}

adag_status_t adag__capture_invalidated_locked(adag_capture_t *c, const char *op)
{
    return adag__error(ADAG_ERR_INVALID,
                       "%s: %s on a stream whose capture was invalidated by %s (CUDA: "
                       "cudaErrorStreamCaptureInvalidated)",
                       c->who, op, c->illegal);
}

adag_status_t adag__capture_begin(const void *stream, const char *who, adag_capture_t **out)
{
    *out = NULL;
    adag__capture_lock();
    adag_capture_t *c = adag__capture_of_locked(stream);
    if (c) {
        adag_status_t st = adag__capture_illegal_locked(c, "a second stream_capture_begin");
        adag__capture_unlock();
        return st;
    }
    if (!(c = calloc(1, sizeof(*c)))) {
        adag__capture_unlock();
        return adag__error(ADAG_ERR_NO_MEMORY, "%s: stream_capture_begin: out of memory", who);
    }
    c->stream = stream;
    snprintf(c->who, sizeof c->who, "%s", who);
    c->next = captures;
    captures = c;
    atomic_fetch_add_explicit(&ncaptures, 1, memory_order_relaxed);
    adag__capture_unlock();
    *out = c;
    return ADAG_OK;
}

adag_status_t adag__capture_note_event(adag_capture_t *c, const void *ev)
{
    for (size_t i = 0; i < c->nevents; i++)
        if (c->events[i] == ev)
            return ADAG_OK;
    if (c->nevents == c->events_cap) {
        size_t cap = c->events_cap ? 2 * c->events_cap : 8;
        const void **e = realloc(c->events, cap * sizeof(*e));
        if (!e)
            return adag__error(ADAG_ERR_NO_MEMORY, "%s: event_record in a capture: out of memory",
                               c->who);
        c->events = e;
        c->events_cap = cap;
    }
    c->events[c->nevents++] = ev;
    return ADAG_OK;
}

adag_status_t adag__capture_check_event(const void *ev, const char *op)
{
    if (!atomic_load_explicit(&ncaptures, memory_order_relaxed))
        return ADAG_OK;
    adag_status_t st = ADAG_OK;
    adag__capture_lock();
    for (adag_capture_t *c = captures; c && st == ADAG_OK; c = c->next)
        for (size_t i = 0; i < c->nevents; i++)
            if (c->events[i] == ev) {
                st = adag__capture_illegal_locked(c, "%s of an event recorded in the capture",
                                                  op);
                break;
            }
    adag__capture_unlock();
    return st;
}

adag_status_t adag__capture_end(adag_capture_t *c)
{
    adag__capture_lock();
    for (adag_capture_t **p = &captures; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            atomic_fetch_sub_explicit(&ncaptures, 1, memory_order_relaxed);
            break;
        }
    adag__capture_unlock();
    adag_status_t st = ADAG_OK;
    if (c->illegal[0])
        st = adag__error(ADAG_ERR_INVALID,
                         "%s: stream_capture_end: the capture was invalidated by %s (CUDA: "
                         "cudaErrorStreamCaptureInvalidated); no graph",
                         c->who, c->illegal);
    free(c->events);
    free(c);
    return st;
}

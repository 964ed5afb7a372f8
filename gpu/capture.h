/*
 * The bookkeeping of stream captures that every device backend shares
 * (gpu/device.h, stream_capture_begin): which streams of this process
 * capture now, the events recorded in each capture, and the first illegal
 * operation of each, so that the backends refuse and name the same things.
 *
 * A process-wide list under one mutex; adag__capture_of and
 * adag__capture_of_event first load the number of live captures (relaxed):
 * with none, they cost that load and nothing else, so the ops of streams
 * that never capture stay as they were. A capture is begun and ended by
 * one thread; another thread that enqueues on the stream meanwhile is
 * captured, as CUDA does, once it sees the capture in the list (the
 * mutex orders the two).
 */
#ifndef ADAG_GPU_CAPTURE_H
#define ADAG_GPU_CAPTURE_H

#include "common/error.h"

#include <stddef.h>

typedef struct adag_capture {
    struct adag_capture *next;
    const void *stream; /* the key: the backend's adag_dev_stream_t */
    char who[48];       /* "device emu:0", for messages */
    /* the first illegal operation ("" while the capture is valid) */
    char illegal[ADAG_ERROR_MAX];
    const void **events; /* recorded in the capture */
    size_t nevents, events_cap;
    void *impl; /* the backend's recorded work */
} adag_capture_t;

/* Registers a capture of stream. ADAG_ERR_INVALID if the stream captures
 * already: that capture is then invalidated ("a second
 * stream_capture_begin"). */
adag_status_t adag__capture_begin(const void *stream, const char *who, adag_capture_t **out);
/* The capture of stream, or NULL. The caller holds adag__capture_lock. */
adag_capture_t *adag__capture_of_locked(const void *stream);
/* The capture of stream, or NULL (a pointer the caller may use until its
 * own thread ends the capture: the capturing thread's view). */
adag_capture_t *adag__capture_of(const void *stream);
/* Whether any stream of this process captures now (relaxed: the fast
 * path of the enqueues of every stream). */
int adag__capture_any(void);
void adag__capture_lock(void);
void adag__capture_unlock(void);
/* Adds ev to the capture's recorded events (caller holds the lock). */
adag_status_t adag__capture_note_event(adag_capture_t *c, const void *ev);
/* Whether an event recorded in a live capture is ev: if so the capture is
 * invalidated with `op` and ADAG_ERR_INVALID returned (with the message);
 * else ADAG_OK. */
adag_status_t adag__capture_check_event(const void *ev, const char *op);
/* Invalidates c with "fmt ..." unless it already was, and returns
 * ADAG_ERR_INVALID with a message naming the capture and the operation.
 * The caller holds the lock (_locked) or not. */
adag_status_t adag__capture_illegal_locked(adag_capture_t *c, const char *fmt, ...)
    ADAG_PRINTF(2, 3);
adag_status_t adag__capture_illegal(adag_capture_t *c, const char *fmt, ...) ADAG_PRINTF(2, 3);
/* The status of an enqueue on an invalidated capture (caller holds the
 * lock): ADAG_ERR_INVALID naming the first illegal operation. */
adag_status_t adag__capture_invalidated_locked(adag_capture_t *c, const char *op);
/* Unregisters c (the stream is an ordinary stream again) and frees it;
 * c->impl is the caller's. If the capture was invalidated, returns
 * ADAG_ERR_INVALID saying so and naming the first illegal operation. */
adag_status_t adag__capture_end(adag_capture_t *c);

#endif

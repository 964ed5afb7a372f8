/*
 * What the emulated device's files share (gpu/host.c: memory, handles, devices
 * and the ops table; gpu/host_stream.c: events and streams): the device
 * object and its live counts, page rounding and handles.
 */
#ifndef ADAG_GPU_HOST_IMPL_H
#define ADAG_GPU_HOST_IMPL_H

#include "gpu/device.h"
#include "gpu/memfd_handle.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* What is live (relaxed: counts, read by tests after the work is joined),
 * and the value ops queued so far. */
typedef struct {
    _Atomic uint64_t mem, host_mem, streams, events, imported_mem, imported_events, registered;
    _Atomic uint64_t graphs;
    _Atomic uint64_t value_ops;
} host_counts_t;

typedef struct {
    adag_device_t base;
    host_counts_t live;
} host_dev_t;

/* The same, over every emulated device of the process (counts(NULL, ...)). */
extern host_counts_t adag_host_process_live;

#define COUNT(d, field, delta)                                                                \
    do {                                                                                      \
        atomic_fetch_add_explicit(&(d)->live.field, (uint64_t)(delta), memory_order_relaxed); \
        atomic_fetch_add_explicit(&adag_host_process_live.field, (uint64_t)(delta),                    \
                                  memory_order_relaxed);                                     \
    } while (0)

static inline host_dev_t *adag__host_dev(adag_device_t *d)
{
    return (host_dev_t *)d;
}

/* n rounded up to whole pages (one page for 0). */
size_t adag__host_page_round(size_t n);
/* A handle (bytes only) naming memfd fd of `size` bytes; `what` names it
 * in messages ("memory", "event"). */
adag_status_t adag__host_handle_make(adag_device_t *d, int fd, uint64_t size, const char *what,
                                   adag_dev_handle_t *h);
/* Opens the memfd a handle names; *size gets the size it claims, which
 * the memfd is checked to hold at least `min` bytes of. Takes h's fds.
 * -1 and *st on failure. */
int adag__host_handle_open(adag_device_t *d, adag_dev_handle_t *h, const char *what, uint64_t min,
                          uint64_t *size, adag_status_t *st);

/* Aliases (gpu/host_alias.c): a handle this process exported, imported
 * here again, gives the exporter's object itself (memory: its mapping;
 * events: its page, with an event object of the importer's own), held by
 * a reference until the import is closed, even if the exporter freed it
 * first: no second mapping through /proc/self/fd. handle_local says
 * whether h names a memfd of this process (and gives its name); the
 * exporter adds its object once exported and removes it before it drops
 * its own reference; take finds the object exported under ref's memfd and
 * calls take(obj) (which takes a reference) under the table's lock, or
 * returns NULL (the exporter freed it: a stale handle). */
int adag__host_handle_local(const adag_dev_handle_t *h, adag_memfd_ref_t *ref);
adag_status_t adag__host_alias_add(const adag_dev_handle_t *h, void *obj);
void adag__host_alias_remove(void *obj);
void *adag__host_alias_take(const adag_memfd_ref_t *ref, void (*take)(void *obj));

/* The process's map of device and page-locked memory (gpu/host_ranges.c):
 * add refuses a range that overlaps one in the map (ADAG_ERR_INVALID),
 * unless the memory is fresh (just mapped or allocated: what it overlaps
 * is stale and dropped);
 * ref (NULL if none) names the memfd the range maps from its start;
 * remove takes the range that begins at ptr; cover says whether
 * [ptr, ptr + size) lies in one range; memfd whether it lies in one that
 * maps a memfd, and gives that memfd's name and ptr's offset in it. */
adag_status_t adag__host_ranges_add(const void *ptr, size_t size, int fresh,
                                   const adag_memfd_ref_t *ref);
void adag__host_ranges_remove(const void *ptr);
int adag__host_ranges_cover(const void *ptr, size_t size);
int adag__host_ranges_memfd(const void *ptr, size_t size, adag_memfd_ref_t *ref, uint64_t *offset);

/* Events and streams (gpu/host_stream.c): the ops of gpu/device.h. */
adag_status_t adag__host_event_create_timed(adag_device_t *d, adag_dev_event_t **out);
adag_status_t adag__host_event_create(adag_device_t *d, adag_dev_event_t **out);
void adag__host_event_destroy(adag_device_t *d, adag_dev_event_t *ev);
adag_status_t adag__host_event_export(adag_device_t *d, adag_dev_event_t *ev, adag_dev_handle_t *h);
adag_status_t adag__host_event_import(adag_device_t *d, adag_dev_handle_t *h,
                                      adag_dev_event_t **out);
void adag__host_event_abandon(adag_dev_event_t *ev);
adag_status_t adag__host_event_query(adag_dev_event_t *ev);
adag_status_t adag__host_event_sync(adag_dev_event_t *ev, int64_t deadline);
adag_status_t adag__host_event_elapsed_ns(adag_dev_event_t *start, adag_dev_event_t *end,
                                          int64_t *ns);
adag_status_t adag__host_stream_create(adag_device_t *d, adag_dev_stream_t **out);
void adag__host_stream_destroy(adag_device_t *d, adag_dev_stream_t *s);
adag_status_t adag__host_copy_async(adag_dev_stream_t *s, void *dst, const void *src, size_t size);
adag_status_t adag__host_host_fn(adag_dev_stream_t *s, adag_host_fn fn, void *arg);
adag_status_t adag__host_launch_host(adag_dev_stream_t *s, adag_host_fn fn, const void *args,
                                     size_t size);
void *adag__host_stream_native(adag_dev_stream_t *s);
adag_status_t adag__host_stream_sync(adag_dev_stream_t *s, int64_t deadline);
/* Work that keeps a deadline, on a emulated device's stream (gpu/host_stream.c,
 * "helping"): fn(arg, deadline) returns ADAG_ERR_TIMEOUT if the deadline
 * came first, having kept its progress in *arg, and is called again (with
 * the same arg) to go on; anything else means it finished. The stream
 * thread calls it with ADAG_FOREVER; a thread waiting for the stream may
 * call it with its own deadline. args as launch_host's. */
typedef adag_status_t (*adag_host_step_fn)(void *arg, int64_t deadline);
adag_status_t adag__host_launch_steps(adag_dev_stream_t *s, adag_host_step_fn fn,
                                     const void *args, size_t size);
adag_status_t adag__host_event_record(adag_dev_event_t *ev, adag_dev_stream_t *s);
adag_status_t adag__host_stream_wait_event(adag_dev_stream_t *s, adag_dev_event_t *ev);
/* Value ops (gpu/device.h). */
typedef struct word_cell word_cell_t;
int adag__host_values_supported(adag_device_t *d, char *why, size_t len);
adag_status_t adag__host_word_map(adag_device_t *d, _Atomic uint64_t *host, adag_dev_word_t *w);
void adag__host_word_store(const adag_dev_word_t *w, uint64_t v);
adag_status_t adag__host_stream_write_value64(adag_dev_stream_t *s, const adag_dev_word_t *w,
                                             uint64_t v);
adag_status_t adag__host_stream_wait_value64(adag_dev_stream_t *s, const adag_dev_word_t *w,
                                            uint64_t v);
/* (gpu/host_values.c) A word's cell; storing a value into it (then waking
 * its waiters); waiting until the value reaches want (cyclic), or the
 * deadline (ADAG_ERR_TIMEOUT, no message). */
word_cell_t *adag__host_cell(const adag_dev_word_t *w);
void adag__host_value_store(word_cell_t *cell, uint64_t v);
adag_status_t adag__host_value_wait(word_cell_t *cell, uint64_t want, int64_t deadline);


/* A stream's operation (gpu/host_stream.c runs them; gpu/host_graph.c
 * records them in a capture and runs them again in a graph's launch). */
typedef enum {
    OP_COPY,
    OP_HOST_FN,
    OP_STEPS,
    OP_RECORD,
    OP_WAIT,
    OP_WRITE_VALUE,
    OP_WAIT_VALUE,
    OP_STOP
} op_kind_t;

typedef struct stream_op {
    struct stream_op *next;
    op_kind_t kind;
    void *dst;
    const void *src;
    size_t size;
    adag_host_fn fn;
    adag_host_step_fn step; /* OP_STEPS */
    void *arg;
    adag_dev_event_t *ev;
    uint64_t ticket; /* OP_RECORD, OP_WAIT; OP_*_VALUE: the value */
    word_cell_t *cell; /* OP_*_VALUE */
    uint64_t mbps; /* OP_COPY: its device's copy_mbps when it was enqueued */
    int unhelped; /* OP_STEPS: a helper may not run it (a graph's launch of opaque work) */
    void (*release)(void *arg); /* if set: called with arg when the operation is freed */
    /* OP_HOST_FN from launch_host: arg points here; OP_COPY from pageable
     * memory: the staged bytes (src is NULL) */
    alignas(16) unsigned char args[];
} stream_op_t;

/* Queues a copy of proto, with args[0..size) copied after it (arg then
 * points at the copy); while s captures, the capture takes it instead. */
adag_status_t adag__host_enqueue(adag_dev_stream_t *s, stream_op_t proto, const void *args,
                                 size_t size);
/* Runs op until the deadline: 1 if it finished, 0 if it kept its progress
 * (OP_STEPS, waits) to be called again. */
int adag__host_op_run(stream_op_t *op, int64_t deadline);
/* Whether a thread helping a stream (stream_sync) may run op. */
int adag__host_op_helpable(const stream_op_t *op);
/* Drops what op holds (its event, a graph's launch) and frees it. */
void adag__host_op_free(stream_op_t *op);
/* An event's latest ticket (take 0), or a new one (take 1: a record). */
uint64_t adag__host_event_ticket(adag_dev_event_t *ev, int take);
/* Completes a ticket nobody will reach (a record that was not queued). */
void adag__host_event_complete(adag_dev_event_t *ev, uint64_t ticket);
/* Notes that ev's latest record is on s (event_sync helps s). */
void adag__host_event_recorded_on(adag_dev_event_t *ev, adag_dev_stream_t *s);

/* Graphs (gpu/host_graph.c), which calls this file and is never called
 * by it: while the hook is set (the first stream_capture_begin of the
 * process sets it, acquire/release), every enqueue first offers its
 * operation to it; it returns 1 if s captures and took op (it then holds
 * op and its event reference; size: the bytes of arguments copied after
 * it), *st saying how that went, else 0. */
typedef int (*adag_host_capture_hook_t)(adag_dev_stream_t *s, stream_op_t *op, size_t size,
                                        adag_status_t *st);
extern _Atomic(adag_host_capture_hook_t) adag__host_capture_hook;
/* The ops of gpu/device.h that a capture changes: they check what is
 * illegal during a capture, then call the ones above. */
adag_status_t adag__host_graph_copy_async(adag_dev_stream_t *s, void *dst, const void *src,
                                          size_t size);
adag_status_t adag__host_graph_event_record(adag_dev_event_t *ev, adag_dev_stream_t *s);
adag_status_t adag__host_graph_stream_wait_event(adag_dev_stream_t *s, adag_dev_event_t *ev);
adag_status_t adag__host_graph_stream_sync(adag_dev_stream_t *s, int64_t deadline);
adag_status_t adag__host_graph_event_query(adag_dev_event_t *ev);
adag_status_t adag__host_graph_event_sync(adag_dev_event_t *ev, int64_t deadline);
adag_status_t adag__host_stream_capture_begin(adag_dev_stream_t *s);
adag_status_t adag__host_stream_capture_end(adag_dev_stream_t *s, adag_dev_graph_t **out);
adag_status_t adag__host_graph_launch(adag_dev_graph_t *g, adag_dev_stream_t *s, uint64_t shift);
void adag__host_graph_destroy(adag_device_t *d, adag_dev_graph_t *g);
/* The stream's device (for host_graph.c, which does not see the stream). */
host_dev_t *adag__host_stream_dev(adag_dev_stream_t *s);

#endif

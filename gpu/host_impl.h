/*
 * What the emulated device's files share (gpu/host.c: memory, handles, devices
 * and the ops table; gpu/host_stream.c: events and streams): the device
 * object and its live counts, page rounding and handles.
 */
#ifndef ADAG_GPU_HOST_IMPL_H
#define ADAG_GPU_HOST_IMPL_H

#include "gpu/device.h"
#include "gpu/memfd_handle.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* What is live (relaxed: counts, read by tests after the work is joined). */
typedef struct {
    _Atomic uint64_t mem, host_mem, streams, events, imported_mem, imported_events, registered;
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

#endif

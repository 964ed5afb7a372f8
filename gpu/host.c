/*
 * The emulated device: an emulated GPU with CUDA's semantics, so every rule of
 * the device path runs on CPU-only machines.
 *
 *   memory   a memfd per allocation, mapped shared: another process opens it
 *            through /proc from a handle of bytes (the twin of a CUDA IPC
 *            memory handle; see "handles");
 *   stream   a FIFO of operations run one after the other by a thread of
 *            its own, or by a thread waiting for the stream while that one
 *            is idle ("helping", gpu/host_stream.c); enqueueing never
 *            waits for the work;
 *   event    two counters in a shared page: `recorded` (the ticket of the
 *            latest record, taken when it is enqueued) and `completed` (the
 *            highest ticket whose stream reached it). Waiting for an event
 *            is waiting for completed >= the ticket seen when the wait was
 *            enqueued (or asked for); another process maps the same page.
 *            A timed event's page also holds the CLOCK_MONOTONIC time at
 *            which `completed` last moved (event_elapsed_ns);
 *   copies   a memmove on the stream thread; with ADAG_EMU_COPY_MBPS the
 *            thread then sleeps until size / bandwidth has passed since it
 *            began, so a copy takes time without taking a CPU. Copies
 *            with pageable memory (not device memory, host_alloc'd or
 *            host_register'ed: gpu/host_ranges.c) follow CUDA's rules:
 *            one to pageable memory returns only once done, one from it
 *            stages the bytes at once;
 *
 * Memory ordering: the counters are seq_cst, with the futex sleeper count
 * of common/event.h (the event's wake word lives in the same shared page),
 * so a waiter in any process never misses a completion. A stream's queue
 * is under its mutex; its counts of queued and finished operations are
 * seq_cst with the same handshake (gpu/host_stream.c). The completion time is
 * stored before the seq_cst store of `completed` that it goes with (see
 * complete_ticket).
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/event.h"
#include "common/fd.h"
#include "common/settings.h"
#include "gpu/host_impl.h"
#include "gpu/memfd_handle.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

extern const adag_device_ops_t adag_device_emu_ops;

host_counts_t adag_host_process_live;

/* ---- memory ---- */

/* Device memory that this process allocated or imported. An allocation
 * is held by its owner and by every alias (an import of its own handle in
 * this process, gpu/host_alias.c): the last reference unmaps it. refs is
 * acq_rel on the drop, so every use by a dropper happens before the unmap. */
typedef struct host_mem {
    int fd;       /* -1 for an import (closed once mapped) and host memory */
    size_t map_size;
    void *ptr;               /* the mapping */
    _Atomic int refs;        /* the owner's (or an import's own) and its aliases' */
    struct host_mem *origin; /* an alias: the exporter's allocation, which it holds */
} host_mem_t;

static char host_registered_tag; /* adag_dev_mem_t.impl of a registration */

size_t adag__host_page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return n ? (n + page - 1) & ~(page - 1) : page;
}

static adag_status_t host_mem_alloc(adag_device_t *d, size_t size, adag_dev_mem_t *mem)
{
    char name[32];
    host_mem_t *m = calloc(1, sizeof(*m));
    if (!m)
        return adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: out of memory", d->index);
    snprintf(name, sizeof(name), "adag-dev%u", d->index);
    m->map_size = adag__host_page_round(size);
    m->fd = adag__fd_above_stdio(memfd_create(name, MFD_CLOEXEC));
    adag_status_t st;
    if (m->fd < 0) {
        st = adag__error_errno(errno, "device emu:%u: memfd_create of %zu bytes", d->index, size);
        goto fail;
    }
    if (ftruncate(m->fd, (off_t)m->map_size) != 0) {
        st = adag__error_errno(errno, "device emu:%u: %zu bytes of device memory", d->index,
                              size);
        goto fail_fd;
    }
    char who[32];
    adag_memfd_ref_t ref;
    snprintf(who, sizeof(who), "device emu:%u", d->index);
    if ((st = adag__memfd_ref_make(m->fd, m->map_size, who, "memory", &ref)) != ADAG_OK)
        goto fail_fd;
    void *p = mmap(NULL, m->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (p == MAP_FAILED) {
        st = adag__error_errno(errno, "device emu:%u: mapping %zu bytes", d->index, size);
        goto fail_fd;
    }
    if ((st = adag__host_ranges_add(p, m->map_size, 1, &ref)) != ADAG_OK) {
        munmap(p, m->map_size);
        goto fail_fd;
    }
    m->ptr = p;
    atomic_init(&m->refs, 1);
    mem->ptr = p;
    mem->size = size;
    mem->impl = m;
    COUNT(adag__host_dev(d), mem, 1);
    return ADAG_OK;
fail_fd:
    close(m->fd);
fail:
    free(m);
    return st;
}

static void mem_ref(void *obj)
{
    atomic_fetch_add_explicit(&((host_mem_t *)obj)->refs, 1, memory_order_relaxed);
}

/* Drops a reference to a mapping (an allocation or an import through
 * /proc); the last one unmaps it. */
static void mem_unref(host_mem_t *m)
{
    if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
        return;
    adag__host_ranges_remove(m->ptr);
    munmap(m->ptr, m->map_size);
    if (m->fd >= 0)
        close(m->fd);
    free(m);
}

/* The allocation stops being the owner's at once (its count, its handle:
 * a later import of it is stale); the mapping lives on while aliases hold it. */
static void host_mem_free(adag_device_t *d, adag_dev_mem_t *mem)
{
    host_mem_t *m = mem->impl;
    if (!m)
        return;
    adag__host_alias_remove(m);
    memset(mem, 0, sizeof(*mem));
    COUNT(adag__host_dev(d), mem, -1);
    mem_unref(m);
}

static adag_status_t host_host_alloc(adag_device_t *d, size_t size, adag_dev_mem_t *mem)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 1) != 0)
        return adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: %zu bytes of pinned memory",
                          d->index, size);
    adag_status_t st = adag__host_ranges_add(p, size, 1, NULL);
    if (st != ADAG_OK) {
        free(p);
        return st;
    }
    mem->ptr = p;
    mem->size = size;
    mem->impl = NULL;
    COUNT(adag__host_dev(d), host_mem, 1);
    return ADAG_OK;
}

static void host_host_free(adag_device_t *d, adag_dev_mem_t *mem)
{
    if (!mem->ptr)
        return;
    adag__host_ranges_remove(mem->ptr);
    free(mem->ptr);
    memset(mem, 0, sizeof(*mem));
    COUNT(adag__host_dev(d), host_mem, -1);
}

/* Locks nothing (the emulated device's memory is all host memory): it enters
 * the range in the process's map, so copies with it run without waiting,
 * as with CUDA's registered memory. */
static adag_status_t host_host_register(adag_device_t *d, void *ptr, size_t size,
                                        adag_dev_mem_t *reg)
{
    memset(reg, 0, sizeof(*reg));
    void *base;
    size_t len;
    adag__device_page_span(ptr, size, &base, &len);
    adag_status_t st = adag__host_ranges_add(base, len, 0, NULL);
    if (st != ADAG_OK) {
        adag__error_prefix("device emu:%u", d->index);
        return st;
    }
    *reg = (adag_dev_mem_t){.ptr = base, .size = len, .impl = &host_registered_tag};
    COUNT(adag__host_dev(d), registered, 1);
    return ADAG_OK;
}

static void host_host_unregister(adag_device_t *d, adag_dev_mem_t *reg)
{
    if (reg->impl != &host_registered_tag)
        return;
    adag__host_ranges_remove(reg->ptr);
    memset(reg, 0, sizeof(*reg));
    COUNT(adag__host_dev(d), registered, -1);
}

/* ---- handles ----
 *
 * A handle is bytes only, like a CUDA IPC handle, so it travels in any
 * message: a memfd named by the exporter's pid and fd number plus its
 * identity (gpu/memfd_handle.h), opened by the importer through /proc.
 * A handle of this process itself is never opened that way: its import is
 * an alias of the exporter's object (gpu/host_alias.c), as on CUDA, where
 * a process cannot open its own IPC handles. */

adag_status_t adag__host_handle_make(adag_device_t *d, int fd, uint64_t size, const char *what,
                                   adag_dev_handle_t *h)
{
    char who[32], kind[32];
    adag_memfd_ref_t ref;
    memset(h, 0, sizeof(*h));
    h->fds[0] = h->fds[1] = -1;
    snprintf(who, sizeof(who), "device emu:%u", d->index);
    snprintf(kind, sizeof(kind), "%s handle", what);
    adag_status_t st = adag__memfd_ref_make(fd, size, who, kind, &ref);
    if (st != ADAG_OK)
        return st;
    memcpy(h->bytes, &ref, sizeof(ref));
    h->len = sizeof(ref);
    return ADAG_OK;
}

/* Opens the memfd a handle names; *size gets the size it claims, which
 * the memfd is checked to hold at least `min` bytes of. Takes h's fds. */
int adag__host_handle_open(adag_device_t *d, adag_dev_handle_t *h, const char *what, uint64_t min,
                          uint64_t *size, adag_status_t *st)
{
    char who[32], kind[32];
    adag_memfd_ref_t ref;
    int nfds = (int)h->nfds;
    adag__dev_handle_close(h);
    if (h->len != sizeof(ref) || nfds) {
        *st = adag__error(ADAG_ERR_PROTOCOL,
                         "device emu:%u: malformed %s handle (%u bytes and %d fds; one is %zu "
                         "bytes, no fds)",
                         d->index, what, h->len, nfds, sizeof(ref));
        return -1;
    }
    memcpy(&ref, h->bytes, sizeof(ref));
    snprintf(who, sizeof(who), "device emu:%u", d->index);
    snprintf(kind, sizeof(kind), "%s handle", what);
    int fd = adag__memfd_ref_open(&ref, min, who, kind, st);
    if (fd >= 0)
        *size = ref.size;
    return fd;
}

static adag_status_t host_mem_export(adag_device_t *d, const adag_dev_mem_t *mem,
                                     adag_dev_handle_t *h)
{
    host_mem_t *m = mem->impl;
    if (!m || m->fd < 0)
        return adag__error(ADAG_ERR_INVALID, "device emu:%u: only device memory it allocated "
                                            "can be exported", d->index);
    adag_status_t st = adag__host_handle_make(d, m->fd, mem->size, "memory", h);
    return st == ADAG_OK ? adag__host_alias_add(h, m) : st;
}

/* An import of a handle this process exported: the exporter's mapping. */
static adag_status_t mem_import_alias(adag_device_t *d, const adag_memfd_ref_t *ref,
                                      adag_dev_mem_t *mem)
{
    host_mem_t *a = calloc(1, sizeof(*a));
    if (!a)
        return adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: out of memory", d->index);
    host_mem_t *o = adag__host_alias_take(ref, mem_ref);
    if (!o) {
        free(a);
        return adag__error(ADAG_ERR_PROTOCOL,
                          "device emu:%u: a memory handle of this process (fd %d, %llu bytes) "
                          "names memory that is no longer exported (freed)",
                          d->index, ref->fd, (unsigned long long)ref->size);
    }
    *a = (host_mem_t){.fd = -1, .map_size = o->map_size, .ptr = o->ptr, .origin = o};
    atomic_init(&a->refs, 1);
    *mem = (adag_dev_mem_t){.ptr = o->ptr, .size = (size_t)ref->size, .impl = a};
    COUNT(adag__host_dev(d), imported_mem, 1);
    return ADAG_OK;
}

static adag_status_t host_mem_import(adag_device_t *d, adag_dev_handle_t *h, adag_dev_mem_t *mem)
{
    uint64_t size = 0;
    adag_status_t st = ADAG_OK;
    host_mem_t *m = NULL;
    adag_memfd_ref_t ref = {0}; /* the owner's name for it: checked by the open */
    if (adag__host_handle_local(h, &ref))
        return mem_import_alias(d, &ref, mem);
    if (h->len == sizeof(ref))
        memcpy(&ref, h->bytes, sizeof(ref));
    int fd = adag__host_handle_open(d, h, "memory", 0, &size, &st);
    if (fd < 0)
        return st;
    if (!(m = calloc(1, sizeof(*m)))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: out of memory", d->index);
        goto out;
    }
    m->fd = -1;
    m->map_size = adag__host_page_round((size_t)size);
    void *p = mmap(NULL, m->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        st = adag__error_errno(errno, "device emu:%u: mapping imported memory", d->index);
        free(m);
        goto out;
    }
    if ((st = adag__host_ranges_add(p, m->map_size, 1, &ref)) != ADAG_OK) {
        munmap(p, m->map_size);
        free(m);
        goto out;
    }
    m->ptr = p;
    atomic_init(&m->refs, 1);
    mem->ptr = p;
    mem->size = (size_t)size;
    mem->impl = m;
    COUNT(adag__host_dev(d), imported_mem, 1);
out:
    close(fd); /* the mapping keeps the memory */
    return st;
}

static void host_mem_unimport(adag_device_t *d, adag_dev_mem_t *mem)
{
    host_mem_t *m = mem->impl;
    if (!m)
        return;
    memset(mem, 0, sizeof(*mem));
    COUNT(adag__host_dev(d), imported_mem, -1);
    if (m->origin) { /* an alias: lets go of the exporter's mapping */
        mem_unref(m->origin);
        free(m);
        return;
    }
    mem_unref(m);
}

/* ---- devices ---- */

static unsigned host_probe(char *why, size_t len)
{
    unsigned n = (unsigned)adag__process_settings()->emu_devices;
    if (n == 0)
        snprintf(why, len, "ADAG_EMU_DEVICES is 0");
    return n;
}

static adag_status_t host_open(unsigned index, adag_device_t **out)
{
    unsigned n = (unsigned)adag__process_settings()->emu_devices;
    if (index >= n)
        return adag__error(ADAG_ERR_NOT_FOUND,
                          "device emu:%u does not exist (ADAG_EMU_DEVICES is %u)", index, n);
    host_dev_t *d = calloc(1, sizeof(*d));
    if (!d)
        return adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: out of memory", index);
    d->base.ops = &adag_device_emu_ops;
    d->base.index = index;
    d->base.tuning.copy_mbps = adag__settings_env_int("ADAG_EMU_COPY_MBPS");
    d->base.tuning.spin_ns = adag__settings_env_int("ADAG_SPIN_NS_CROWDED");
    d->base.tuning.memops = (int)adag__settings_env_int("ADAG_DEVICE_MEMOPS");
    *out = &d->base;
    return ADAG_OK;
}

static void host_close(adag_device_t *d)
{
    free(d);
}

static adag_status_t host_bind_thread(adag_device_t *d)
{
    (void)d; /* every thread sees the whole host */
    return ADAG_OK;
}

/* d NULL: every emulated device of this process together. */
static void host_counts(adag_device_t *d, adag_device_counts_t *c)
{
    const host_counts_t *h = d ? &adag__host_dev(d)->live : &adag_host_process_live;
    c->mem = atomic_load_explicit(&h->mem, memory_order_relaxed);
    c->host_mem = atomic_load_explicit(&h->host_mem, memory_order_relaxed);
    c->streams = atomic_load_explicit(&h->streams, memory_order_relaxed);
    c->events = atomic_load_explicit(&h->events, memory_order_relaxed);
    c->imported_mem = atomic_load_explicit(&h->imported_mem, memory_order_relaxed);
    c->imported_events = atomic_load_explicit(&h->imported_events, memory_order_relaxed);
    c->registered = atomic_load_explicit(&h->registered, memory_order_relaxed);
    c->graphs = atomic_load_explicit(&h->graphs, memory_order_relaxed);
    c->value_ops = atomic_load_explicit(&h->value_ops, memory_order_relaxed);
}

const adag_device_ops_t adag_device_emu_ops = {
    .name = "emu",
    .kind = ADAG_DEV_EMULATED,
    .probe = host_probe,
    .open = host_open,
    .close = host_close,
    .bind_thread = host_bind_thread,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .host_alloc = host_host_alloc,
    .host_free = host_host_free,
    .host_register = host_host_register,
    .host_unregister = host_host_unregister,
    .mem_export = host_mem_export,
    .mem_import = host_mem_import,
    .mem_unimport = host_mem_unimport,
    .stream_create = adag__host_stream_create,
    .stream_destroy = adag__host_stream_destroy,
    .copy_async = adag__host_graph_copy_async,
    .host_fn = adag__host_host_fn,
    .launch_host = adag__host_launch_host,
    .stream_native = adag__host_stream_native,
    .stream_sync = adag__host_graph_stream_sync,
    .event_create = adag__host_event_create,
    .event_destroy = adag__host_event_destroy,
    .event_record = adag__host_graph_event_record,
    .stream_wait_event = adag__host_graph_stream_wait_event,
    .event_query = adag__host_graph_event_query,
    .event_sync = adag__host_graph_event_sync,
    .event_export = adag__host_event_export,
    .event_import = adag__host_event_import,
    .event_abandon = adag__host_event_abandon,
    .values_supported = adag__host_values_supported,
    .word_map = adag__host_word_map,
    .stream_write_value64 = adag__host_stream_write_value64,
    .stream_wait_value64 = adag__host_stream_wait_value64,
    .word_store = adag__host_word_store,
    .event_create_timed = adag__host_event_create_timed,
    .event_elapsed_ns = adag__host_event_elapsed_ns,
    .stream_capture_begin = adag__host_stream_capture_begin,
    .stream_capture_end = adag__host_stream_capture_end,
    .graph_launch = adag__host_graph_launch,
    .graph_destroy = adag__host_graph_destroy,
    .counts = host_counts,
};

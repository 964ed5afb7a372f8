/* Unit tests (suite "device"): the device ops table (gpu/device.h), every
 * test over every backend that has a device here (the emulated device always;
 * cuda where a GPU exists, else "skipped: <reason>"). Streams run in
 * order and never block the host; events order streams, in this process
 * and in another; memory and events cross processes; counts return to
 * zero. */
#include "common/clock.h"
#include "device_kinds.h"
#include "gpu/device.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* One test per device kind (a backend without a device here skips). */
#define DEVICE_TEST(name, tmo) DEVICE_KIND_TEST(device, name, tmo)

static adag_device_t *open_or_skip(uint32_t kind)
{
    return device_open_or_skip(kind, 0);
}

static void assert_no_live_objects(adag_device_t *dev)
{
    adag_device_counts_t c;
    dev->ops->counts(dev, &c);
    cr_assert(c.mem == 0 && c.host_mem == 0 && c.streams == 0 && c.events == 0 &&
                  c.imported_mem == 0 && c.imported_events == 0 && c.registered == 0,
              "%s: live objects left: mem %llu host %llu streams %llu events %llu imported "
              "%llu/%llu registered %llu",
              dev->ops->name, (unsigned long long)c.mem, (unsigned long long)c.host_mem,
              (unsigned long long)c.streams, (unsigned long long)c.events,
              (unsigned long long)c.imported_mem, (unsigned long long)c.imported_events,
              (unsigned long long)c.registered);
}

/* ---- host functions used as stream work ---- */

typedef struct {
    _Atomic int order[64];
    _Atomic int n;
} order_log_t;

typedef struct {
    order_log_t *log;
    int id;
    int sleep_ms;
} logged_t;

static void log_fn(void *arg)
{
    logged_t *l = arg;
    if (l->sleep_ms)
        sleep_ms(l->sleep_ms);
    int i = atomic_fetch_add(&l->log->n, 1);
    atomic_store(&l->log->order[i], l->id);
}

static _Atomic int gate_open;

static void gate_fn(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate_open))
        sleep_ms(1);
}

DEVICE_TEST(stream_runs_in_order_and_never_blocks, 30)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_stream_t *s;
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    static order_log_t log;
    static logged_t items[8];
    double t0 = now_ms();
    for (int i = 0; i < 8; i++) {
        items[i] = (logged_t){&log, i, i == 0 ? 150 : 0};
        cr_assert_eq(o->host_fn(s, log_fn, &items[i]), ADAG_OK);
    }
    double enqueued = now_ms() - t0;
    cr_assert_lt(enqueued, 100, "enqueueing 8 operations took %.0f ms: it waited for the work",
                 enqueued);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(&log.n), 8);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(atomic_load(&log.order[i]), i, "operation %d ran at position %d",
                     atomic_load(&log.order[i]), i);
    o->stream_destroy(dev, s);
    assert_no_live_objects(dev);
    o->close(dev);
}

DEVICE_TEST(copies_round_trip, 30)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    const size_t n = 3 << 20;
    adag_dev_mem_t h_in, h_out, d_a, d_b;
    adag_dev_stream_t *s;
    cr_assert_eq(o->host_alloc(dev, n, &h_in), ADAG_OK);
    cr_assert_eq(o->host_alloc(dev, n, &h_out), ADAG_OK);
    cr_assert_eq(o->mem_alloc(dev, n, &d_a), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->mem_alloc(dev, n, &d_b), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)h_in.ptr)[i] = (unsigned char)(i * 7 + 3);
    memset(h_out.ptr, 0, n);
    cr_assert_eq(o->copy_async(s, d_a.ptr, h_in.ptr, n), ADAG_OK);
    cr_assert_eq(o->copy_async(s, d_b.ptr, d_a.ptr, n), ADAG_OK);
    cr_assert_eq(o->copy_async(s, h_out.ptr, d_b.ptr, n), ADAG_OK);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(10000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(memcmp(h_in.ptr, h_out.ptr, n), 0, "H2D -> D2D -> D2H changed the bytes");
    o->stream_destroy(dev, s);
    o->mem_free(dev, &d_a);
    o->mem_free(dev, &d_b);
    o->host_free(dev, &h_in);
    o->host_free(dev, &h_out);
    assert_no_live_objects(dev);
    o->close(dev);
}

DEVICE_TEST(events_query_sync_and_rerecord, 30)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_stream_t *s;
    adag_dev_event_t *ev;
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->event_create(dev, &ev), ADAG_OK);
    cr_assert_eq(o->event_query(ev), ADAG_OK, "an event never recorded must be complete");
    atomic_store(&gate_open, 0);
    cr_assert_eq(o->host_fn(s, gate_fn, NULL), ADAG_OK);
    cr_assert_eq(o->event_record(ev, s), ADAG_OK);
    cr_assert_eq(o->event_query(ev), ADAG_ERR_AGAIN, "complete before the work it captures");
    double t0 = now_ms();
    cr_assert_eq(o->event_sync(ev, adag__deadline_ms(30)), ADAG_ERR_TIMEOUT);
    cr_assert_lt(now_ms() - t0, 1000);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(20)), ADAG_ERR_TIMEOUT);
    atomic_store(&gate_open, 1);
    cr_assert_eq(o->event_sync(ev, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->event_query(ev), ADAG_OK);
    /* recording again moves it to the new work */
    atomic_store(&gate_open, 0);
    cr_assert_eq(o->host_fn(s, gate_fn, NULL), ADAG_OK);
    cr_assert_eq(o->event_record(ev, s), ADAG_OK);
    cr_assert_eq(o->event_query(ev), ADAG_ERR_AGAIN, "a re-recorded event kept its old state");
    atomic_store(&gate_open, 1);
    cr_assert_eq(o->event_sync(ev, adag__deadline_ms(5000)), ADAG_OK);
    o->event_destroy(dev, ev);
    o->stream_destroy(dev, s);
    assert_no_live_objects(dev);
    o->close(dev);
}

static void *open_gate_later(void *arg)
{
    sleep_ms(*(int *)arg);
    atomic_store(&gate_open, 1);
    return NULL;
}

/* CUDA's rules for copies with host memory that is not page-locked, which
 * the emulated device keeps too (a path that forgot host_register stalls on
 * CPU-only machines as on a GPU): a copy to pageable memory returns once
 * done, whatever is queued before it; one from pageable memory takes the
 * bytes at the call; host_register'ed memory copies without waiting. */
DEVICE_TEST(pageable_and_registered_copies, 30)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 3 * page;
    adag_dev_stream_t *s;
    adag_dev_mem_t d, reg, reg2;
    unsigned char *a = aligned_alloc(page, n), *b = aligned_alloc(page, n);
    cr_assert(a && b);
    memset(a, 0x11, n);
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->mem_alloc(dev, n, &d), ADAG_OK);
    /* from pageable a, behind a closed gate: the bytes are taken now */
    atomic_store(&gate_open, 0);
    cr_assert_eq(o->host_fn(s, gate_fn, NULL), ADAG_OK);
    pthread_t opener;
    int after_ms = 300;
    cr_assert_eq(pthread_create(&opener, NULL, open_gate_later, &after_ms), 0);
    cr_assert_eq(o->copy_async(s, d.ptr, a, n), ADAG_OK, "%s", adag_last_error());
    memset(a, 0x22, n);
    /* to registered a (an unaligned range: whole pages are registered) */
    cr_assert_eq(o->host_register(dev, a + 100, n - 200, &reg), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(reg.ptr, a, "the registration does not begin at the page");
    cr_assert_eq(reg.size, n);
    cr_assert_eq(o->host_register(dev, a + page, 10, &reg2), ADAG_ERR_INVALID,
                 "registering a registered page twice");
    double t0 = now_ms();
    cr_assert_eq(o->copy_async(s, a, d.ptr, n), ADAG_OK, "%s", adag_last_error());
    double took = now_ms() - t0;
    cr_assert(!atomic_load(&gate_open), "the copy to registered memory waited %.0f ms for the "
              "stream", took);
    /* to pageable b: returns once done (the gate opens meanwhile) */
    memset(b, 0, n);
    cr_assert_eq(o->copy_async(s, b, d.ptr, n), ADAG_OK, "%s", adag_last_error());
    cr_assert(atomic_load(&gate_open), "the copy to pageable memory returned before the stream "
              "reached it");
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(b[i], 0x11, "b[%zu] = %#x at the return of its copy: not done, or the "
                     "source's later bytes", i, b[i]);
    cr_assert_eq(pthread_join(opener, NULL), 0);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(a[0], 0x11);
    cr_assert_eq(a[n - 1], 0x11);
    o->host_unregister(dev, &reg);
    cr_assert_eq(o->host_register(dev, a + page, 10, &reg2), ADAG_OK, "%s", adag_last_error());
    o->host_unregister(dev, &reg2);
    o->mem_free(dev, &d);
    o->stream_destroy(dev, s);
    free(a);
    free(b);
    assert_no_live_objects(dev);
    o->close(dev);
}

static _Atomic int produced;
static _Atomic int seen_by_consumer = -1;

static void produce_fn(void *arg)
{
    (void)arg;
    sleep_ms(80);
    atomic_store(&produced, 1);
}

static void consume_fn(void *arg)
{
    (void)arg;
    atomic_store(&seen_by_consumer, atomic_load(&produced));
}

/* Stream B waits on an event of stream A: B's work runs after A's, and
 * neither enqueue waits on the host. */
DEVICE_TEST(event_orders_two_streams, 30)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_stream_t *a, *b;
    adag_dev_event_t *ev;
    cr_assert_eq(o->stream_create(dev, &a), ADAG_OK);
    cr_assert_eq(o->stream_create(dev, &b), ADAG_OK);
    cr_assert_eq(o->event_create(dev, &ev), ADAG_OK);
    atomic_store(&produced, 0);
    double t0 = now_ms();
    cr_assert_eq(o->host_fn(a, produce_fn, NULL), ADAG_OK);
    cr_assert_eq(o->event_record(ev, a), ADAG_OK);
    cr_assert_eq(o->stream_wait_event(b, ev), ADAG_OK);
    cr_assert_eq(o->host_fn(b, consume_fn, NULL), ADAG_OK);
    cr_assert_lt(now_ms() - t0, 50, "enqueueing waited on the host");
    cr_assert_eq(o->stream_sync(b, adag__deadline_ms(5000)), ADAG_OK);
    cr_assert_eq(atomic_load(&seen_by_consumer), 1, "stream B ran before the event it waits on");
    o->event_destroy(dev, ev);
    o->stream_destroy(dev, a);
    o->stream_destroy(dev, b);
    assert_no_live_objects(dev);
    o->close(dev);
}

/* Another process imports the memory and the event: its stream waits on
 * the event (recorded here after a slow copy), then reads the bytes. */
DEVICE_TEST(memory_and_events_cross_processes, 60)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    if (*kind != ADAG_DEV_EMULATED)
        cr_skip_test("skipped: %s: importing in a forked child needs a fresh CUDA context "
                     "(tests/gpu covers it)", o->name);
    const size_t n = 1 << 16;
    adag_dev_mem_t d, h;
    adag_dev_stream_t *s;
    adag_dev_event_t *ev;
    adag_dev_handle_t mh, eh;
    cr_assert_eq(o->mem_alloc(dev, n, &d), ADAG_OK);
    cr_assert_eq(o->host_alloc(dev, n, &h), ADAG_OK);
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->event_create(dev, &ev), ADAG_OK);
    memset(d.ptr, 0, n);
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)h.ptr)[i] = (unsigned char)(i ^ 0x5a);
    cr_assert_eq(o->mem_export(dev, &d, &mh), ADAG_OK);
    cr_assert_eq(o->event_export(dev, ev, &eh), ADAG_OK);
    /* the copy and the record are enqueued behind a closed gate */
    atomic_store(&gate_open, 0);
    cr_assert_eq(o->host_fn(s, gate_fn, NULL), ADAG_OK);
    cr_assert_eq(o->copy_async(s, d.ptr, h.ptr, n), ADAG_OK);
    cr_assert_eq(o->event_record(ev, s), ADAG_OK);
    int sv[2];
    cr_assert_eq(pipe(sv), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(sv[0]);
        adag_dev_handle_t cm = mh, ce = eh; /* bytes only: a copy is the handle */
        adag_dev_mem_t im;
        adag_dev_event_t *iev;
        adag_dev_stream_t *cs;
        int ok = o->mem_import(dev, &cm, &im) == ADAG_OK &&
                 o->event_import(dev, &ce, &iev) == ADAG_OK &&
                 o->stream_create(dev, &cs) == ADAG_OK && o->stream_wait_event(cs, iev) == ADAG_OK;
        char ready = 'r';
        ok &= write(sv[1], &ready, 1) == 1;
        ok &= o->stream_sync(cs, adag__deadline_ms(10000)) == ADAG_OK;
        for (size_t i = 0; ok && i < n; i++)
            ok = ((unsigned char *)im.ptr)[i] == (unsigned char)(i ^ 0x5a);
        if (ok) {
            o->stream_destroy(dev, cs);
            o->event_destroy(dev, iev);
            o->mem_unimport(dev, &im);
        }
        _exit(ok ? 0 : 1);
    }
    close(sv[1]);
    char c;
    cr_assert_eq(read(sv[0], &c, 1), 1, "the child could not import");
    close(sv[0]);
    sleep_ms(30); /* the child waits on the event before it is reached */
    atomic_store(&gate_open, 1);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the child saw the memory before the event, or wrong bytes (status 0x%x)", status);
    o->event_destroy(dev, ev);
    o->stream_destroy(dev, s);
    o->mem_free(dev, &d);
    o->host_free(dev, &h);
    assert_no_live_objects(dev);
    o->close(dev);
}

/* A malformed handle is refused and its fds are closed. */
DEVICE_TEST(import_refuses_malformed_handles, 30)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_handle_t h;
    memset(&h, 0, sizeof h);
    h.len = 3; /* no backend's handle is 3 bytes */
    h.fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    h.nfds = *kind == ADAG_DEV_EMULATED ? 1 : 0;
    int fd = h.fds[0];
    adag_dev_mem_t m;
    cr_assert_eq(o->mem_import(dev, &h, &m), ADAG_ERR_PROTOCOL, "%s", adag_last_error());
    if (*kind == ADAG_DEV_EMULATED)
        cr_assert_eq(fcntl(fd, F_GETFD), -1, "the refused handle's fd is still open");
    else
        close(fd);
    adag_dev_event_t *ev;
    memset(&h, 0, sizeof h);
    h.len = 3;
    cr_assert_eq(o->event_import(dev, &h, &ev), ADAG_ERR_PROTOCOL, "%s", adag_last_error());
    assert_no_live_objects(dev);
    o->close(dev);
}

/* Host handles are bytes naming the exporter's memfd: a handle whose
 * memory was freed (its fd number now another memfd) or whose exporter is
 * gone is refused, never mapped. */
Test(device, host_handle_names_one_memfd, .timeout = 30)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev;
    cr_assert_eq(o->open(0, &dev), ADAG_OK);
    adag_dev_mem_t a, b, im;
    adag_dev_handle_t h, stale, copy;
    cr_assert_eq(o->mem_alloc(dev, 4096, &a), ADAG_OK);
    cr_assert_eq(o->mem_export(dev, &a, &h), ADAG_OK);
    cr_assert_eq(h.nfds, 0u);
    copy = h;
    cr_assert_eq(o->mem_import(dev, &copy, &im), ADAG_OK, "%s", adag_last_error());
    ((volatile char *)a.ptr)[7] = 42;
    cr_assert_eq(((volatile char *)im.ptr)[7], 42, "the import does not see the same bytes");
    o->mem_unimport(dev, &im);
    stale = h;
    o->mem_free(dev, &a);
    cr_assert_eq(o->mem_alloc(dev, 4096, &b), ADAG_OK); /* likely reuses the fd number */
    cr_assert_neq(o->mem_import(dev, &stale, &im), ADAG_OK, "a freed memory was imported");
    cr_assert(strstr(adag_last_error(), "memory"), "%s", adag_last_error());
    /* another pid: a child that exits at once */
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    cr_assert_eq(o->mem_export(dev, &b, &h), ADAG_OK);
    memcpy(h.bytes + 4, &pid, sizeof(pid)); /* the pid field of the handle */
    cr_assert_eq(o->mem_import(dev, &h, &im), ADAG_ERR_IO, "%s", adag_last_error());
    cr_assert(strstr(adag_last_error(), "/proc/"), "%s", adag_last_error());
    o->mem_free(dev, &b);
    assert_no_live_objects(dev);
    o->close(dev);
}

Test(device, unknown_kind_and_index)
{
    cr_assert_null(adag__device_backend(ADAG_DEVICE_KIND_COUNT));
    cr_assert_null(adag__device_backend(ADAG_DEV_HOST), "host memory has no device backend");
    cr_assert_str_eq(adag_device_kind_name(ADAG_DEV_EMULATED), "emu");
    /* a backend's name is its kind's (specs and messages use the one, ids the other) */
    for (uint32_t k = 0; k < ADAG_DEVICE_KIND_COUNT; k++) {
        const adag_device_ops_t *ops = adag__device_backend(k);
        if (ops)
            cr_assert(ops->kind == (adag_device_kind_t)k &&
                          strcmp(ops->name, adag_device_kind_name(ops->kind)) == 0,
                      "backend %u: kind %d, name %s", k, (int)ops->kind, ops->name);
    }
    adag_device_t *dev;
    cr_assert_eq(adag__device_backend(ADAG_DEV_EMULATED)->open(1000, &dev), ADAG_ERR_NOT_FOUND);
    cr_assert(strstr(adag_last_error(), "ADAG_EMU_DEVICES"), "%s", adag_last_error());
}

/* ---- event timing ---- */

static void sleep_20ms_fn(void *arg)
{
    (void)arg;
    sleep_ms(20);
}

/* Timed events measure the stream, not the host: behind a closed gate
 * neither is complete (AGAIN, both ways); once open, the time across a
 * 20 ms host function is at least 20 ms (had the stamps been taken at
 * enqueue, both records were enqueued together: about 0), and the other
 * way round it is the same time, negative. */
DEVICE_TEST(elapsed_time_across_stream_work, 30)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_stream_t *s;
    adag_dev_event_t *start, *end;
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->event_create_timed(dev, &start), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->event_create_timed(dev, &end), ADAG_OK, "%s", adag_last_error());
    atomic_store(&gate_open, 0);
    cr_assert_eq(o->host_fn(s, gate_fn, NULL), ADAG_OK);
    cr_assert_eq(o->event_record(start, s), ADAG_OK);
    cr_assert_eq(o->host_fn(s, sleep_20ms_fn, NULL), ADAG_OK);
    cr_assert_eq(o->event_record(end, s), ADAG_OK);
    int64_t ns = -1;
    cr_assert_eq(o->event_elapsed_ns(start, end, &ns), ADAG_ERR_AGAIN,
                 "timed before either event completed");
    cr_assert_eq(o->event_elapsed_ns(end, start, &ns), ADAG_ERR_AGAIN);
    sleep_ms(30);
    atomic_store(&gate_open, 1);
    cr_assert_eq(o->event_sync(end, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->event_elapsed_ns(start, end, &ns), ADAG_OK, "%s", adag_last_error());
    cr_assert_geq(ns, 20000000, "%s: %lld ns across a host function that sleeps 20 ms", o->name,
                  (long long)ns);
    int64_t back = 0;
    cr_assert_eq(o->event_elapsed_ns(end, start, &back), ADAG_OK, "%s", adag_last_error());
    cr_assert(llabs(back + ns) <= 1000, "end to start: %lld ns, start to end %lld ns",
              (long long)back, (long long)ns);
    o->event_destroy(dev, start);
    o->event_destroy(dev, end);
    o->stream_destroy(dev, s);
    assert_no_live_objects(dev);
    o->close(dev);
}

/* Only timed events that were recorded can be timed (INVALID, saying which
 * and why, as CUDA refuses them); a timed event cannot be exported. */
DEVICE_TEST(elapsed_time_refuses_untimed_events, 30)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_stream_t *s;
    adag_dev_event_t *plain, *timed, *never;
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->event_create(dev, &plain), ADAG_OK);
    cr_assert_eq(o->event_create_timed(dev, &timed), ADAG_OK);
    cr_assert_eq(o->event_create_timed(dev, &never), ADAG_OK);
    cr_assert_eq(o->event_record(plain, s), ADAG_OK);
    cr_assert_eq(o->event_record(timed, s), ADAG_OK);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK);
    int64_t ns = 0;
    cr_assert_eq(o->event_elapsed_ns(timed, timed, &ns), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(ns, 0);
    cr_assert_eq(o->event_elapsed_ns(plain, timed, &ns), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "start event") &&
                  strstr(adag_last_error(), "event_create_timed"),
              "%s", adag_last_error());
    cr_assert_eq(o->event_elapsed_ns(timed, plain, &ns), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "end event"), "%s", adag_last_error());
    cr_assert_eq(o->event_elapsed_ns(timed, never, &ns), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "never recorded"), "%s", adag_last_error());
    adag_dev_handle_t h;
    cr_assert_eq(o->event_export(dev, timed, &h), ADAG_ERR_INVALID,
                 "a timed event was exported");
    cr_assert(strstr(adag_last_error(), "timed"), "%s", adag_last_error());
    o->event_destroy(dev, plain);
    o->event_destroy(dev, timed);
    o->event_destroy(dev, never);
    o->stream_destroy(dev, s);
    assert_no_live_objects(dev);
    o->close(dev);
}

/* ADAG_EMU_COPY_MBPS=10 in the environment, which a device opened
 * outside any runtime takes (whatever was read before): a 1 MiB copy takes
 * at least 1048576 / 10^7 s (104.9 ms) of stream time, measured by timed
 * events around it, and still copies the bytes. */
Test(device, host_copy_bandwidth, .timeout = 30)
{
    setenv("ADAG_EMU_COPY_MBPS", "10", 1);
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev;
    cr_assert_eq(o->open(0, &dev), ADAG_OK);
    cr_assert_eq(dev->tuning.copy_mbps, 10, "the device did not take the environment's value");
    const size_t n = 1 << 20;
    adag_dev_mem_t h, d;
    adag_dev_stream_t *s;
    adag_dev_event_t *before, *after;
    cr_assert_eq(o->host_alloc(dev, n, &h), ADAG_OK);
    cr_assert_eq(o->mem_alloc(dev, n, &d), ADAG_OK);
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->event_create_timed(dev, &before), ADAG_OK);
    cr_assert_eq(o->event_create_timed(dev, &after), ADAG_OK);
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)h.ptr)[i] = (unsigned char)(i * 13 + 1);
    cr_assert_eq(o->event_record(before, s), ADAG_OK);
    cr_assert_eq(o->copy_async(s, d.ptr, h.ptr, n), ADAG_OK);
    cr_assert_eq(o->event_record(after, s), ADAG_OK);
    cr_assert_eq(o->event_sync(after, adag__deadline_ms(10000)), ADAG_OK, "%s",
                 adag_last_error());
    int64_t ns = 0;
    cr_assert_eq(o->event_elapsed_ns(before, after, &ns), ADAG_OK, "%s", adag_last_error());
    cr_assert_geq(ns, (int64_t)n * 1000 / 10, "1 MiB at 10 MB/s took %.1f ms", ns / 1e6);
    cr_assert_eq(memcmp(d.ptr, h.ptr, n), 0, "the slow copy changed the bytes");
    o->event_destroy(dev, before);
    o->event_destroy(dev, after);
    o->stream_destroy(dev, s);
    o->mem_free(dev, &d);
    o->host_free(dev, &h);
    assert_no_live_objects(dev);
    o->close(dev);
}

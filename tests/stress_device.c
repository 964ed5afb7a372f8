/*
 * The emulated device (gpu/host.c) under ThreadSanitizer (`make
 * test-tsan`; the harness: tests/stress.h): two streams ordered only by
 * events, pageable and registered copies racing with range changes, and
 * an imported event abandoned while a stream waits on it, graphs replaying
 * the ping-pong and copies run by a helping stream_sync. The buffers the
 * streams share are plain memory: only the events order their accesses,
 * so a missing edge is a race TSan reports.
 */
#include "common/clock.h"
#include "gpu/device.h"

#include "stress.h"
#include <adag.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the emulated device: streams ordered by events, under TSan ---- */

typedef struct {
    int64_t buf[64]; /* plain memory: only the events order its accesses */
    int64_t round;
    int bad;
} relay_t;

static void relay_write(void *arg)
{
    relay_t *r = arg;
    r->round++;
    for (int i = 0; i < 64; i++)
        r->buf[i] = r->round * 64 + i;
}

static void relay_check(void *arg)
{
    relay_t *r = arg;
    for (int i = 0; i < 64; i++)
        r->bad |= r->buf[i] != r->round * 64 + i;
}

/* A writes, records; B waits, checks, records; A waits on B before the next
 * write: 2000 rounds of a two-stream ping-pong on plain memory. */
static int run_host_device(void)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev;
    adag_dev_stream_t *a, *b;
    adag_dev_event_t *ea, *eb;
    static relay_t r;
    if (o->open(0, &dev) || o->stream_create(dev, &a) || o->stream_create(dev, &b) ||
        o->event_create(dev, &ea) || o->event_create(dev, &eb)) {
        fprintf(stderr, "emulated device: %s\n", adag_last_error());
        return 0;
    }
    int ok = 1;
    for (int i = 0; i < 2000 && ok; i++) {
        ok &= o->stream_wait_event(a, eb) == ADAG_OK && o->host_fn(a, relay_write, &r) == ADAG_OK &&
              o->event_record(ea, a) == ADAG_OK && o->stream_wait_event(b, ea) == ADAG_OK &&
              o->host_fn(b, relay_check, &r) == ADAG_OK && o->event_record(eb, b) == ADAG_OK;
        if (i % 500 == 0) /* now and then the host waits too */
            ok &= o->event_sync(eb, adag__deadline_ms(10000)) == ADAG_OK;
    }
    ok &= o->stream_sync(b, adag__deadline_ms(10000)) == ADAG_OK;
    o->event_destroy(dev, ea);
    o->event_destroy(dev, eb);
    o->stream_destroy(dev, a);
    o->stream_destroy(dev, b);
    adag_device_counts_t c;
    o->counts(dev, &c);
    o->close(dev);
    return ok && !r.bad && r.round == 2000 && c.streams == 0 && c.events == 0;
}

/* Copies with pageable and registered plain memory (gpu/host_ranges.c): a
 * staged copy in, a copy out to registered memory read after an event, a
 * copy out to pageable memory read as the call returns, while another
 * thread registers and unregisters ranges of its own. 1000 rounds. */
static _Atomic int churn_stop;

static void *range_churn(void *arg)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev = arg;
    static char mine[4 * 4096] __attribute__((aligned(4096)));
    while (!atomic_load(&churn_stop)) {
        adag_dev_mem_t reg;
        if (o->host_register(dev, mine, sizeof mine, &reg) == ADAG_OK)
            o->host_unregister(dev, &reg);
    }
    return NULL;
}

static int run_host_copies(void)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev;
    adag_dev_stream_t *s;
    adag_dev_event_t *ev;
    adag_dev_mem_t d = {0}, reg = {0};
    static int64_t in[512], out_reg[512] __attribute__((aligned(4096))), out_page[512];
    pthread_t churn;
    if (o->open(0, &dev) || o->stream_create(dev, &s) || o->event_create(dev, &ev) ||
        o->mem_alloc(dev, sizeof in, &d) || o->host_register(dev, out_reg, sizeof out_reg, &reg)) {
        fprintf(stderr, "emulated device: %s\n", adag_last_error());
        return 0;
    }
    atomic_store(&churn_stop, 0);
    int ok = pthread_create(&churn, NULL, range_churn, dev) == 0;
    for (int64_t round = 1; round <= 1000 && ok; round++) {
        for (int i = 0; i < 512; i++)
            in[i] = round * 512 + i;
        ok &= o->copy_async(s, d.ptr, in, sizeof in) == ADAG_OK; /* staged: in is free now */
        memset(in, 0, sizeof in);
        ok &= o->copy_async(s, out_reg, d.ptr, sizeof in) == ADAG_OK &&
              o->event_record(ev, s) == ADAG_OK &&
              o->copy_async(s, out_page, d.ptr, sizeof in) == ADAG_OK; /* returns once done */
        for (int i = 0; i < 512; i++)
            ok &= out_page[i] == round * 512 + i;
        ok &= o->event_sync(ev, adag__deadline_ms(10000)) == ADAG_OK;
        for (int i = 0; i < 512; i++)
            ok &= out_reg[i] == round * 512 + i;
    }
    atomic_store(&churn_stop, 1);
    pthread_join(churn, NULL);
    o->host_unregister(dev, &reg);
    o->mem_free(dev, &d);
    o->event_destroy(dev, ev);
    o->stream_destroy(dev, s);
    adag_device_counts_t c;
    o->counts(dev, &c);
    o->close(dev);
    return ok && c.streams == 0 && c.events == 0 && c.mem == 0 && c.registered == 0;
}

/* A stream of device 1 waits on an import of device 0's event whose
 * stream is held by a gate; another thread abandons the import while the
 * wait runs (and while the main thread syncs): the wait ends, the stream
 * drains, nothing races. 200 rounds. */
static _Atomic int abandon_gate;

static void gate_wait(void *arg)
{
    (void)arg;
    while (!atomic_load(&abandon_gate))
        sched_yield();
}

static void *abandoner(void *arg)
{
    adag_dev_event_t *imp = arg;
    adag__device_backend(ADAG_DEV_EMULATED)->event_abandon(imp);
    return NULL;
}

static int run_host_abandon(void)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *d0, *d1;
    adag_dev_stream_t *s0, *s1;
    int ok = 1;
    if (o->open(0, &d0) || o->open(1, &d1) || o->stream_create(d0, &s0) ||
        o->stream_create(d1, &s1)) {
        fprintf(stderr, "emulated device: %s\n", adag_last_error());
        return 0;
    }
    for (int i = 0; i < 200 && ok; i++) {
        adag_dev_event_t *ev = NULL, *imp = NULL;
        adag_dev_handle_t h;
        pthread_t th;
        atomic_store(&abandon_gate, 0);
        ok &= o->event_create(d0, &ev) == ADAG_OK && o->event_export(d0, ev, &h) == ADAG_OK &&
              o->event_import(d1, &h, &imp) == ADAG_OK;
        if (!ok)
            break;
        ok &= o->host_fn(s0, gate_wait, NULL) == ADAG_OK && o->event_record(ev, s0) == ADAG_OK &&
              o->stream_wait_event(s1, imp) == ADAG_OK;
        ok &= pthread_create(&th, NULL, abandoner, imp) == 0;
        ok &= o->stream_sync(s1, adag__deadline_ms(10000)) == ADAG_OK;
        pthread_join(th, NULL);
        atomic_store(&abandon_gate, 1);
        ok &= o->event_sync(ev, adag__deadline_ms(10000)) == ADAG_OK;
        o->event_destroy(d1, imp);
        o->event_destroy(d0, ev);
    }
    atomic_store(&abandon_gate, 1);
    o->stream_destroy(d0, s0);
    o->stream_destroy(d1, s1);
    o->close(d0);
    o->close(d1);
    adag_device_counts_t c;
    o->counts(NULL, &c);
    return ok && c.streams == 0 && c.events == 0 && c.imported_events == 0;
}

/* The ping-pong of run_host_device as two graphs (gpu/host_graph.c), each
 * waiting for the other's event and recording its own at every launch, and
 * a graph of copies that stream_sync runs on the host thread (a helper)
 * while the stream thread competes for it. 2000 rounds. */
static int run_host_graphs(void)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev;
    adag_dev_stream_t *a, *b, *c;
    adag_dev_event_t *ea, *eb;
    adag_dev_graph_t *ga = NULL, *gb = NULL, *gc = NULL;
    adag_dev_mem_t m;
    static relay_t r;
    if (o->open(0, &dev) || o->stream_create(dev, &a) || o->stream_create(dev, &b) ||
        o->stream_create(dev, &c) || o->event_create(dev, &ea) || o->event_create(dev, &eb) ||
        o->mem_alloc(dev, 4096, &m)) {
        fprintf(stderr, "emulated device: %s\n", adag_last_error());
        return 0;
    }
    int ok = o->stream_capture_begin(a) == ADAG_OK && o->stream_wait_event(a, eb) == ADAG_OK &&
             o->host_fn(a, relay_write, &r) == ADAG_OK && o->event_record(ea, a) == ADAG_OK &&
             o->stream_capture_end(a, &ga) == ADAG_OK;
    ok = ok && o->stream_capture_begin(b) == ADAG_OK && o->stream_wait_event(b, ea) == ADAG_OK &&
         o->host_fn(b, relay_check, &r) == ADAG_OK && o->event_record(eb, b) == ADAG_OK &&
         o->stream_capture_end(b, &gb) == ADAG_OK;
    int64_t *words = m.ptr;
    ok = ok && o->stream_capture_begin(c) == ADAG_OK &&
         o->copy_async(c, words + 64, words, 512) == ADAG_OK &&
         o->copy_async(c, words, words + 64, 512) == ADAG_OK &&
         o->stream_capture_end(c, &gc) == ADAG_OK;
    for (int i = 0; i < 2000 && ok; i++) {
        words[0] = i; /* c's last launch is done: the sync below */
        ok &= o->graph_launch(ga, a, 0) == ADAG_OK && o->graph_launch(gb, b, 0) == ADAG_OK &&
              o->graph_launch(gc, c, 0) == ADAG_OK;
        ok &= o->stream_sync(c, adag__deadline_ms(10000)) == ADAG_OK && words[64] == i;
        if (i % 500 == 0)
            ok &= o->event_sync(eb, adag__deadline_ms(10000)) == ADAG_OK;
    }
    if (!ok)
        fprintf(stderr, "graphs: %s\n", adag_last_error());
    ok &= o->stream_sync(b, adag__deadline_ms(10000)) == ADAG_OK;
    o->graph_destroy(dev, ga);
    o->graph_destroy(dev, gb);
    o->graph_destroy(dev, gc);
    o->mem_free(dev, &m);
    o->event_destroy(dev, ea);
    o->event_destroy(dev, eb);
    o->stream_destroy(dev, a);
    o->stream_destroy(dev, b);
    o->stream_destroy(dev, c);
    adag_device_counts_t n;
    o->counts(dev, &n);
    o->close(dev);
    return ok && !r.bad && r.round == 2000 && n.streams == 0 && n.events == 0 && n.graphs == 0;
}

int main(void)
{
    static const stress_part_t parts[] = {
        {"emulated device: two streams ordered by events", run_host_device},
        {"emulated device: pageable and registered copies", run_host_copies},
        {"emulated device: an import abandoned while a stream waits on it", run_host_abandon},
        {"emulated device: graphs ordered by events, copies helped", run_host_graphs},
    };
    return stress_run_parts("stress_device", parts, sizeof(parts) / sizeof(parts[0]));
}

/* Unit tests (suite "device_graph"): graphs of the device ops table
 * (gpu/device.h, stream_capture_begin), every test over every backend that
 * has a device here (the emulated device always; cuda where a GPU exists,
 * else "skipped: <reason>"). A replayed graph does what the same work
 * enqueued eagerly does, element for element; it runs on any stream of its
 * device, copies at its addresses, waits for events and words recorded
 * outside it; every illegal operation during a capture fails the capture
 * naming it, and the stream works again after; counts return to zero. */
#include "common/clock.h"
#include "gpu/device.h"

#include "device_kinds.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GRAPH_TEST(name, tmo) DEVICE_KIND_TEST(device_graph, name, tmo)

/* Device 0 of the kind, or the test skips saying why. */
static adag_device_t *graph_device(uint32_t kind)
{
    return device_open_or_skip(kind, 0);
}

static void close_checked(adag_device_t *dev)
{
    adag_device_counts_t c;
    dev->ops->counts(dev, &c);
    cr_assert(c.mem == 0 && c.host_mem == 0 && c.streams == 0 && c.events == 0 &&
                  c.graphs == 0 && c.registered == 0,
              "%s: live objects left: mem %llu host %llu streams %llu events %llu graphs %llu "
              "registered %llu",
              dev->ops->name, (unsigned long long)c.mem, (unsigned long long)c.host_mem,
              (unsigned long long)c.streams, (unsigned long long)c.events,
              (unsigned long long)c.graphs, (unsigned long long)c.registered);
    dev->ops->close(dev);
}

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the kernels: host functions on buffers the host can reach ---- */

/* x[i] = x[i] * 3 + k + i (mod 2^32): any change of order or of k shows */
typedef struct {
    uint32_t *x;
    size_t n;
    uint32_t k;
} step_args_t;

static void step_kernel(void *arg)
{
    const step_args_t *a = arg;
    for (size_t i = 0; i < a->n; i++)
        a->x[i] = a->x[i] * 3u + a->k + (uint32_t)i;
}

#define CHAIN 50

static void enqueue_chain(const adag_device_ops_t *o, adag_dev_stream_t *s, uint32_t *x,
                          size_t n)
{
    step_args_t a = {x, n, 0};
    for (uint32_t k = 0; k < CHAIN; k++) {
        a.k = k * 7 + 1; /* the same struct each time: launch_host copies it now */
        cr_assert_eq(o->launch_host(s, step_kernel, &a, sizeof a), ADAG_OK, "%s",
                     adag_last_error());
    }
}

static _Atomic int gate_open;

static void gate_kernel(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate_open))
        pause_ms(1);
}

static void count_kernel(void *arg)
{
    atomic_fetch_add((_Atomic int *)arg, 1);
}

/* ---- tests ---- */

GRAPH_TEST(replay_equals_eager, 60)
{
    adag_device_t *dev = graph_device(*kind);
    const adag_device_ops_t *o = dev->ops;
    const size_t n = 4096;
    const int replays = 200;
    adag_dev_stream_t *s;
    adag_dev_mem_t gm = {0}, em = {0};
    adag_dev_graph_t *g = NULL;
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->host_alloc(dev, n * sizeof(uint32_t), &gm), ADAG_OK);
    cr_assert_eq(o->host_alloc(dev, n * sizeof(uint32_t), &em), ADAG_OK);
    uint32_t *gx = gm.ptr, *ex = em.ptr;
    for (size_t i = 0; i < n; i++)
        gx[i] = ex[i] = (uint32_t)(i * 2654435761u);

    cr_assert_eq(o->stream_capture_begin(s), ADAG_OK, "%s", adag_last_error());
    enqueue_chain(o, s, gx, n);
    cr_assert_eq(o->stream_capture_end(s, &g), ADAG_OK, "%s", adag_last_error());
    cr_assert_not_null(g);
    adag_device_counts_t c;
    o->counts(dev, &c);
    cr_assert_eq(c.graphs, 1, "%llu live graphs, want 1", (unsigned long long)c.graphs);
    pause_ms(50);
    cr_assert_eq(gx[1], (uint32_t)2654435761u, "the captured work ran during the capture");

    for (int r = 0; r < replays; r++)
        cr_assert_eq(o->graph_launch(g, s, 0), ADAG_OK, "launch %d: %s", r, adag_last_error());
    for (int r = 0; r < replays; r++)
        enqueue_chain(o, s, ex, n);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(30000)), ADAG_OK, "%s", adag_last_error());
    int changed = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(gx[i], ex[i], "element %zu: replayed %u, eager %u", i, gx[i], ex[i]);
        changed |= gx[i] != (uint32_t)(i * 2654435761u);
    }
    cr_assert(changed, "the graph's launches changed nothing");
    o->graph_destroy(dev, g);
    o->host_free(dev, &gm);
    o->host_free(dev, &em);
    o->stream_destroy(dev, s);
    close_checked(dev);
}

GRAPH_TEST(launched_on_another_stream, 30)
{
    adag_device_t *dev = graph_device(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_stream_t *s1, *s2;
    adag_dev_graph_t *g;
    adag_dev_event_t *ev;
    static _Atomic int runs;
    atomic_store(&runs, 0);
    cr_assert_eq(o->stream_create(dev, &s1), ADAG_OK);
    cr_assert_eq(o->stream_create(dev, &s2), ADAG_OK);
    cr_assert_eq(o->event_create(dev, &ev), ADAG_OK);
    cr_assert_eq(o->stream_capture_begin(s1), ADAG_OK, "%s", adag_last_error());
    for (int i = 0; i < 3; i++)
        cr_assert_eq(o->host_fn(s1, count_kernel, (void *)&runs), ADAG_OK);
    cr_assert_eq(o->stream_capture_end(s1, &g), ADAG_OK, "%s", adag_last_error());
    /* s2 held by a closed gate: its launches wait behind it, s1's do not */
    atomic_store(&gate_open, 0);
    cr_assert_eq(o->host_fn(s2, gate_kernel, NULL), ADAG_OK);
    cr_assert_eq(o->graph_launch(g, s2, 0), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->graph_launch(g, s2, 0), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->graph_launch(g, s1, 0), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(s1, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(&runs), 3, "after the launch on s1: %d runs, want 3",
                 atomic_load(&runs));
    atomic_store(&gate_open, 1);
    cr_assert_eq(o->event_record(ev, s2), ADAG_OK);
    cr_assert_eq(o->event_sync(ev, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(&runs), 9, "after s2's two launches: %d runs, want 9",
                 atomic_load(&runs));
    o->graph_destroy(dev, g);
    o->event_destroy(dev, ev);
    o->stream_destroy(dev, s1);
    o->stream_destroy(dev, s2);
    close_checked(dev);
}

static void add_one_kernel(void *arg)
{
    const step_args_t *a = arg;
    for (size_t i = 0; i < a->n; i++)
        a->x[i] += 1;
}

GRAPH_TEST(copies_inside_a_graph, 30)
{
    adag_device_t *dev = graph_device(*kind);
    const adag_device_ops_t *o = dev->ops;
    const size_t n = 1000;
    adag_dev_stream_t *s;
    adag_dev_mem_t in = {0}, out = {0}, d = {0};
    adag_dev_graph_t *g;
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->host_alloc(dev, n * 4, &in), ADAG_OK);
    cr_assert_eq(o->host_alloc(dev, n * 4, &out), ADAG_OK);
    cr_assert_eq(o->mem_alloc(dev, n * 4, &d), ADAG_OK);
    uint32_t *x = in.ptr, *y = out.ptr;
    memset(y, 0, n * 4);
    cr_assert_eq(o->stream_capture_begin(s), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->copy_async(s, d.ptr, in.ptr, n * 4), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->copy_async(s, out.ptr, d.ptr, n * 4), ADAG_OK, "%s", adag_last_error());
    step_args_t a = {y, n, 0};
    cr_assert_eq(o->launch_host(s, add_one_kernel, &a, sizeof a), ADAG_OK);
    cr_assert_eq(o->stream_capture_end(s, &g), ADAG_OK, "%s", adag_last_error());
    for (uint32_t round = 0; round < 5; round++) {
        /* the graph copies from its addresses when it runs: new input each time */
        for (size_t i = 0; i < n; i++)
            x[i] = (uint32_t)(i * 31 + round * 1000);
        cr_assert_eq(o->graph_launch(g, s, 0), ADAG_OK, "%s", adag_last_error());
        cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s",
                     adag_last_error());
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(y[i], (uint32_t)(i * 31 + round * 1000 + 1),
                         "round %u, element %zu: %u", round, i, y[i]);
    }
    o->graph_destroy(dev, g);
    o->mem_free(dev, &d);
    o->host_free(dev, &in);
    o->host_free(dev, &out);
    o->stream_destroy(dev, s);
    close_checked(dev);
}

GRAPH_TEST(waits_on_an_event_recorded_outside, 30)
{
    adag_device_t *dev = graph_device(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_stream_t *s, *other;
    adag_dev_event_t *outside, *inside;
    adag_dev_graph_t *g;
    static _Atomic int runs;
    atomic_store(&runs, 0);
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->stream_create(dev, &other), ADAG_OK);
    cr_assert_eq(o->event_create(dev, &outside), ADAG_OK);
    cr_assert_eq(o->event_create(dev, &inside), ADAG_OK);
    cr_assert_eq(o->stream_capture_begin(s), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_wait_event(s, outside), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->host_fn(s, count_kernel, (void *)&runs), ADAG_OK);
    cr_assert_eq(o->event_record(inside, s), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_capture_end(s, &g), ADAG_OK, "%s", adag_last_error());
    /* the outside event's record comes after the capture: a launch waits
     * for its latest record as of the launch */
    atomic_store(&gate_open, 0);
    cr_assert_eq(o->host_fn(other, gate_kernel, NULL), ADAG_OK);
    cr_assert_eq(o->event_record(outside, other), ADAG_OK);
    cr_assert_eq(o->graph_launch(g, s, 0), ADAG_OK, "%s", adag_last_error());
    pause_ms(100);
    cr_assert_eq(atomic_load(&runs), 0, "the graph ran before the event it waits for");
    cr_assert_eq(o->event_query(inside), ADAG_ERR_AGAIN,
                 "the event the graph records completed before the graph ran");
    atomic_store(&gate_open, 1);
    cr_assert_eq(o->event_sync(inside, adag__deadline_ms(5000)), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(atomic_load(&runs), 1);
    /* again: the record of this launch is a new one */
    atomic_store(&gate_open, 0);
    cr_assert_eq(o->host_fn(other, gate_kernel, NULL), ADAG_OK);
    cr_assert_eq(o->event_record(outside, other), ADAG_OK);
    cr_assert_eq(o->graph_launch(g, s, 0), ADAG_OK, "%s", adag_last_error());
    pause_ms(50);
    cr_assert_eq(o->event_query(inside), ADAG_ERR_AGAIN,
                 "the second launch's record was complete before it ran");
    atomic_store(&gate_open, 1);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(other, adag__deadline_ms(5000)), ADAG_OK);
    cr_assert_eq(atomic_load(&runs), 2);
    cr_assert_eq(o->event_query(inside), ADAG_OK);
    o->graph_destroy(dev, g);
    o->event_destroy(dev, outside);
    o->event_destroy(dev, inside);
    o->stream_destroy(dev, s);
    o->stream_destroy(dev, other);
    close_checked(dev);
}

/* A device with value ops (else the test skips), a stream, and two words
 * "in" and "out" (zero) in host_alloc'd cells. */
static adag_device_t *words_device(uint32_t kind, adag_dev_stream_t **s, adag_dev_mem_t *cells,
                                   adag_dev_word_t *in, adag_dev_word_t *out)
{
    adag_device_t *dev = graph_device(kind);
    const adag_device_ops_t *o = dev->ops;
    char why[256] = "";
    if (!o->values_supported || !o->values_supported(dev, why, sizeof why)) {
        o->close(dev);
        cr_skip_test("skipped: %s: no value ops: %s", o->name, why);
    }
    cr_assert_eq(o->stream_create(dev, s), ADAG_OK);
    cr_assert_eq(o->host_alloc(dev, 2 * ADAG_DEV_WORD_BYTES, cells), ADAG_OK);
    memset(cells->ptr, 0, 2 * ADAG_DEV_WORD_BYTES);
    cr_assert_eq(o->word_map(dev, cells->ptr, in), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->word_map(dev, (void *)((char *)cells->ptr + ADAG_DEV_WORD_BYTES), out),
                 ADAG_OK, "%s", adag_last_error());
    return dev;
}

/* A graph of: wait until `in` reaches 5, count a run, write 7 to `out`. */
static adag_dev_graph_t *capture_wait_count_write(const adag_device_ops_t *o,
                                                  adag_dev_stream_t *s, adag_dev_word_t *in,
                                                  adag_dev_word_t *out, _Atomic int *runs)
{
    adag_dev_graph_t *g = NULL;
    cr_assert_eq(o->stream_capture_begin(s), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_wait_value64(s, in, 5), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->host_fn(s, count_kernel, (void *)runs), ADAG_OK);
    cr_assert_eq(o->stream_write_value64(s, out, 7), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_capture_end(s, &g), ADAG_OK, "%s", adag_last_error());
    return g;
}

GRAPH_TEST(waits_on_a_word_written_outside, 30)
{
    adag_dev_stream_t *s;
    adag_dev_mem_t cells = {0};
    adag_dev_word_t in, out;
    adag_dev_graph_t *g;
    adag_device_t *dev = words_device(*kind, &s, &cells, &in, &out);
    const adag_device_ops_t *o = dev->ops;
    static _Atomic int runs;
    atomic_store(&runs, 0);
    g = capture_wait_count_write(o, s, &in, &out, &runs);
    cr_assert_eq(o->graph_launch(g, s, 0), ADAG_OK, "%s", adag_last_error());
    pause_ms(100);
    cr_assert_eq(atomic_load(&runs), 0, "the graph ran before the word reached its value");
    cr_assert_eq(atomic_load(out.host), 0, "the graph wrote its word before its wait ended");
    o->word_store(&in, 5);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(&runs), 1);
    cr_assert_eq(atomic_load(out.host), 7, "the word the graph writes: %llu",
                 (unsigned long long)atomic_load(out.host));
    o->graph_destroy(dev, g);
    o->host_free(dev, &cells);
    o->stream_destroy(dev, s);
    close_checked(dev);
}

/* A graph's value ops with the launch's shift: captured waiting for 5
 * and writing 7, launched with shift 10 it waits for 15 and writes 17;
 * with 10 again the same (CUDA: no update); with 3 (lower) it waits for 8
 * (passed) and writes 10; with 0 as recorded. */
GRAPH_TEST(value_ops_shifted_at_launch, 30)
{
    adag_dev_stream_t *s;
    adag_dev_mem_t cells = {0};
    adag_dev_word_t in, out;
    adag_dev_graph_t *g;
    adag_device_t *dev = words_device(*kind, &s, &cells, &in, &out);
    const adag_device_ops_t *o = dev->ops;
    static _Atomic int runs;
    atomic_store(&runs, 0);
    g = capture_wait_count_write(o, s, &in, &out, &runs);
    o->word_store(&in, 5);
    cr_assert_eq(o->graph_launch(g, s, 10), ADAG_OK, "%s", adag_last_error());
    pause_ms(100);
    cr_assert_eq(atomic_load(&runs), 0, "shift 10: the wait for 15 passed at 5");
    cr_assert_eq(atomic_load(out.host), 0, "shift 10: the word was written before the wait");
    o->word_store(&in, 15);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(&runs), 1);
    cr_assert_eq(atomic_load(out.host), 17, "shift 10 wrote %llu, want 17",
                 (unsigned long long)atomic_load(out.host));
    o->word_store(&out, 0);
    cr_assert_eq(o->graph_launch(g, s, 10), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(out.host), 17, "shift 10 again wrote %llu, want 17",
                 (unsigned long long)atomic_load(out.host));
    cr_assert_eq(o->graph_launch(g, s, 3), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(out.host), 10, "shift 3 wrote %llu, want 10",
                 (unsigned long long)atomic_load(out.host));
    cr_assert_eq(o->graph_launch(g, s, 0), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(out.host), 7, "shift 0 wrote %llu, want 7",
                 (unsigned long long)atomic_load(out.host));
    cr_assert_eq(atomic_load(&runs), 4);
    o->graph_destroy(dev, g);
    o->host_free(dev, &cells);
    o->stream_destroy(dev, s);
    close_checked(dev);
}

/* An illegal operation during a capture: it fails, the capture's end
 * fails naming it, nothing captured ran, and the stream works again. */
typedef enum {
    ILLEGAL_SYNC,
    ILLEGAL_EVENT_QUERY,
    ILLEGAL_EVENT_SYNC,
    ILLEGAL_PAGEABLE_COPY,
    ILLEGAL_SECOND_BEGIN,
    ILLEGAL_COUNT
} illegal_t;

static const char *const illegal_names[ILLEGAL_COUNT] = {
    "stream_sync", "event_query", "event_sync", "pageable host memory",
    "a second stream_capture_begin"};

GRAPH_TEST(illegal_operations_invalidate_the_capture, 60)
{
    adag_device_t *dev = graph_device(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_stream_t *s;
    adag_dev_event_t *ev;
    adag_dev_mem_t d = {0};
    static _Atomic int runs;
    static unsigned char pageable[4096];
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->event_create(dev, &ev), ADAG_OK);
    cr_assert_eq(o->mem_alloc(dev, sizeof pageable, &d), ADAG_OK);
    for (int k = 0; k < ILLEGAL_COUNT; k++) {
        atomic_store(&runs, 0);
        cr_assert_eq(o->stream_capture_begin(s), ADAG_OK, "%s", adag_last_error());
        cr_assert_eq(o->host_fn(s, count_kernel, (void *)&runs), ADAG_OK);
        cr_assert_eq(o->event_record(ev, s), ADAG_OK, "%s", adag_last_error());
        adag_status_t st = ADAG_OK;
        switch ((illegal_t)k) {
        case ILLEGAL_SYNC:
            st = o->stream_sync(s, adag__deadline_ms(1000));
            break;
        case ILLEGAL_EVENT_QUERY:
            st = o->event_query(ev);
            break;
        case ILLEGAL_EVENT_SYNC:
            st = o->event_sync(ev, adag__deadline_ms(1000));
            break;
        case ILLEGAL_PAGEABLE_COPY:
            st = o->copy_async(s, d.ptr, pageable, sizeof pageable);
            break;
        case ILLEGAL_SECOND_BEGIN:
            st = o->stream_capture_begin(s);
            break;
        case ILLEGAL_COUNT:
            break;
        }
        cr_assert_eq(st, ADAG_ERR_INVALID, "%s during a capture: %s, want ADAG_ERR_INVALID",
                     illegal_names[k], adag_status_str(st));
        cr_assert(strstr(adag_last_error(), illegal_names[k]), "%s: the message: %s",
                  illegal_names[k], adag_last_error());
        adag_dev_graph_t *g = (adag_dev_graph_t *)1;
        st = o->stream_capture_end(s, &g);
        cr_assert_eq(st, ADAG_ERR_INVALID, "%s: stream_capture_end gave %s, want "
                     "ADAG_ERR_INVALID", illegal_names[k], adag_status_str(st));
        cr_assert_null(g, "%s: a graph from an invalidated capture", illegal_names[k]);
        const char *msg = adag_last_error();
        cr_assert(strstr(msg, illegal_names[k]) && strstr(msg, "invalidated"),
                  "%s: stream_capture_end's message does not name it: %s", illegal_names[k],
                  msg);
        /* an ordinary stream again: work runs, syncs, events complete */
        cr_assert_eq(o->host_fn(s, count_kernel, (void *)&runs), ADAG_OK, "%s",
                     adag_last_error());
        cr_assert_eq(o->event_record(ev, s), ADAG_OK, "%s", adag_last_error());
        cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s: after the "
                     "capture: %s", illegal_names[k], adag_last_error());
        cr_assert_eq(o->event_query(ev), ADAG_OK, "%s: %s", illegal_names[k],
                     adag_last_error());
        cr_assert_eq(atomic_load(&runs), 1, "%s: %d runs: the captured work ran, or the "
                     "stream's did not", illegal_names[k], atomic_load(&runs));
    }
    adag_device_counts_t c;
    o->counts(dev, &c);
    cr_assert_eq(c.graphs, 0);
    o->mem_free(dev, &d);
    o->event_destroy(dev, ev);
    o->stream_destroy(dev, s);
    close_checked(dev);
}

GRAPH_TEST(destroyed_with_launches_pending, 30)
{
    adag_device_t *dev = graph_device(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_stream_t *s;
    adag_dev_graph_t *g;
    static _Atomic int runs;
    atomic_store(&runs, 0);
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->stream_capture_begin(s), ADAG_OK, "%s", adag_last_error());
    step_args_t a = {NULL, 0, 0};
    cr_assert_eq(o->launch_host(s, step_kernel, &a, sizeof a), ADAG_OK);
    cr_assert_eq(o->host_fn(s, count_kernel, (void *)&runs), ADAG_OK);
    cr_assert_eq(o->stream_capture_end(s, &g), ADAG_OK, "%s", adag_last_error());
    atomic_store(&gate_open, 0);
    cr_assert_eq(o->host_fn(s, gate_kernel, NULL), ADAG_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(o->graph_launch(g, s, 0), ADAG_OK, "%s", adag_last_error());
    o->graph_destroy(dev, g);
    atomic_store(&gate_open, 1);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(&runs), 4, "%d of 4 launches ran", atomic_load(&runs));
    o->stream_destroy(dev, s);
    close_checked(dev);
}

GRAPH_TEST(end_without_begin_and_foreign_device, 30)
{
    adag_device_t *dev = graph_device(*kind);
    const adag_device_ops_t *o = dev->ops;
    adag_dev_stream_t *s;
    adag_dev_graph_t *g = NULL;
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->stream_capture_end(s, &g), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "does not capture"), "%s", adag_last_error());
    cr_assert_null(g);
    /* an empty graph launches and does nothing */
    cr_assert_eq(o->stream_capture_begin(s), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_capture_end(s, &g), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->graph_launch(g, s, 0), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    o->graph_destroy(dev, g);
    o->stream_destroy(dev, s);
    close_checked(dev);
}

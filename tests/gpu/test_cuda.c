/*
 * test-cuda: every op of the cuda device backend (gpu/cuda.c) on a real GPU
 * (`make test-gpu`; tests/gpu/README.md). A plain program: the IPC test
 * runs a second copy of it (`--ipc-child`), started with posix_spawn so the
 * child's CUDA is fresh, as cudaIpc requires.
 *
 * Each test opens device 0, runs, frees what it made, checks that the
 * counts are back to zero and closes. Without a device every test prints
 * "skipped: <reason>" and the program exits 77 (never counted as passed).
 */
#include "test_cuda.h"

#include "common/clock.h"
#include "gpu/device.h"

#include <adag.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef ADAG_TEST_GPU_KERNEL
#define ADAG_TEST_GPU_KERNEL "" /* built without nvcc */
#endif
#ifndef ADAG_TEST_NVCC
#define ADAG_TEST_NVCC "nvcc"
#endif

char skip_reason[256];
const char *who = ""; /* "ipc child: " in the child */

void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

double now_ms(void)
{
    return (double)adag__now_ns() / 1e6;
}

int counts_zero(adag_device_t *dev)
{
    adag_device_counts_t c;
    O->counts(dev, &c);
    if (c.mem | c.host_mem | c.streams | c.events | c.imported_mem | c.imported_events |
        c.registered | c.graphs) {
        fprintf(stderr,
                "  live objects left: mem %llu host %llu streams %llu events %llu imported "
                "mem %llu events %llu registered %llu graphs %llu\n",
                (unsigned long long)c.mem, (unsigned long long)c.host_mem,
                (unsigned long long)c.streams, (unsigned long long)c.events,
                (unsigned long long)c.imported_mem, (unsigned long long)c.imported_events,
                (unsigned long long)c.registered, (unsigned long long)c.graphs);
        return 0;
    }
    return 1;
}

/* ---- host functions run as stream work ---- */

static _Atomic int gate_open = 1;

static void gate_fn(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate_open))
        sleep_ms(1);
}

typedef struct {
    _Atomic int n;
    _Atomic int order[16];
} order_log_t;

typedef struct {
    order_log_t *log;
    int id;
    int sleep_ms;
    const unsigned char *check; /* if set: the bytes a copy before it landed */
    size_t check_n;
    _Atomic int check_ok;
} logged_t;

static void log_fn(void *arg)
{
    logged_t *l = arg;
    if (l->sleep_ms)
        sleep_ms(l->sleep_ms);
    if (l->check) {
        int ok = 1;
        for (size_t i = 0; i < l->check_n && ok; i++)
            ok = l->check[i] == (unsigned char)(i * 13 + 1);
        atomic_store(&l->check_ok, ok);
    }
    int i = atomic_fetch_add(&l->log->n, 1);
    atomic_store(&l->log->order[i], l->id);
}

/* ---- tests ---- */

static int test_open_and_errors(adag_device_t *dev)
{
    int rc = PASS;
    adag_dev_mem_t big = {0}, host = {0}, m;
    adag_dev_event_t *ev = NULL;
    adag_dev_handle_t h;
    adag_device_t *none = NULL;
    char why[256];
    unsigned n = O->probe(why, sizeof why);
    CHECK(O->open(n, &none) == ADAG_ERR_NOT_FOUND && !none, "open(%u) of %u devices", n, n);
    CHECK(strstr(adag_last_error(), "CUDA devices here"), "%s", adag_last_error());
    CHECK_OK(O->bind_thread(dev));
    /* a CUDA failure names the call, the device and the CUDA error */
    adag_status_t st = O->mem_alloc(dev, (size_t)1 << 52, &big);
    CHECK(st == ADAG_ERR_NO_MEMORY, "cudaMalloc(4 PiB): %s", adag_status_str(st));
    CHECK(strstr(adag_last_error(), "cuda device 0 (") &&
              strstr(adag_last_error(), "cudaMalloc(") &&
              strstr(adag_last_error(), "cudaErrorMemoryAllocation"),
          "message: %s", adag_last_error());
    /* handles that are not this backend's */
    memset(&h, 0, sizeof h);
    h.len = 3;
    CHECK(O->mem_import(dev, &h, &m) == ADAG_ERR_PROTOCOL, "%s", adag_last_error());
    CHECK(O->event_import(dev, &h, &ev) == ADAG_ERR_PROTOCOL && !ev, "%s", adag_last_error());
    CHECK_OK(O->host_alloc(dev, 4096, &host));
    CHECK(O->mem_export(dev, &host, &h) == ADAG_ERR_INVALID, "exported pinned host memory");
out:
    O->host_free(dev, &host);
    O->mem_free(dev, &big);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    return rc;
}

/* H2D -> D2D -> D2H through pinned memory, and D2H into pageable memory. */
static int test_copies_round_trip(adag_device_t *dev)
{
    int rc = PASS;
    const size_t n = (3 << 20) + 5;
    adag_dev_mem_t h_in = {0}, h_out = {0}, d_a = {0}, d_b = {0};
    adag_dev_stream_t *s = NULL;
    unsigned char *pageable = calloc(1, n);
    CHECK(pageable, "out of memory");
    CHECK_OK(O->host_alloc(dev, n, &h_in));
    CHECK_OK(O->host_alloc(dev, n, &h_out));
    CHECK_OK(O->mem_alloc(dev, n, &d_a));
    CHECK_OK(O->mem_alloc(dev, n, &d_b));
    CHECK(d_a.size == n && d_a.ptr && d_a.ptr != d_b.ptr, "mem_alloc gave %p, %zu bytes",
          d_a.ptr, d_a.size);
    CHECK_OK(O->stream_create(dev, &s));
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)h_in.ptr)[i] = (unsigned char)(i * 7 + 3);
    memset(h_out.ptr, 0, n);
    CHECK_OK(O->copy_async(s, d_a.ptr, h_in.ptr, n));
    CHECK_OK(O->copy_async(s, d_b.ptr, d_a.ptr, n));
    CHECK_OK(O->copy_async(s, h_out.ptr, d_b.ptr, n));
    CHECK_OK(O->copy_async(s, pageable, d_b.ptr, n));
    CHECK_OK(O->copy_async(s, pageable, d_b.ptr, 0));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(10000)));
    CHECK(memcmp(h_in.ptr, h_out.ptr, n) == 0, "H2D -> D2D -> D2H changed the bytes");
    CHECK(memcmp(h_in.ptr, pageable, n) == 0, "D2H into pageable memory changed the bytes");
out:
    O->stream_destroy(dev, s);
    O->mem_free(dev, &d_a);
    O->mem_free(dev, &d_b);
    O->host_free(dev, &h_in);
    O->host_free(dev, &h_out);
    free(pageable);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    return rc;
}

/* A stream runs host functions and copies in order; enqueueing never
 * waits; stream_sync keeps its deadline. */
static int test_stream_order(adag_device_t *dev)
{
    int rc = PASS;
    const size_t n = 1 << 20;
    adag_dev_stream_t *s = NULL;
    adag_dev_mem_t h_in = {0}, h_out = {0}, d = {0};
    static order_log_t log;
    static logged_t items[4];
    CHECK_OK(O->stream_create(dev, &s));
    CHECK_OK(O->host_alloc(dev, n, &h_in));
    CHECK_OK(O->host_alloc(dev, n, &h_out));
    CHECK_OK(O->mem_alloc(dev, n, &d));
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)h_in.ptr)[i] = (unsigned char)(i * 13 + 1);
    memset(h_out.ptr, 0, n);
    for (int i = 0; i < 4; i++)
        items[i] = (logged_t){.log = &log, .id = i, .sleep_ms = i == 0 ? 150 : 0};
    items[3].check = h_out.ptr;
    items[3].check_n = n;
    double t0 = now_ms();
    CHECK_OK(O->host_fn(s, log_fn, &items[0])); /* 150 ms: the copies must wait for it */
    CHECK_OK(O->copy_async(s, d.ptr, h_in.ptr, n));
    CHECK_OK(O->host_fn(s, log_fn, &items[1]));
    CHECK_OK(O->host_fn(s, log_fn, &items[2]));
    CHECK_OK(O->copy_async(s, h_out.ptr, d.ptr, n));
    CHECK_OK(O->host_fn(s, log_fn, &items[3])); /* sees the bytes of the copy before it */
    double enqueued = now_ms() - t0;
    CHECK(enqueued < 100, "enqueueing took %.0f ms: it waited for the work", enqueued);
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    CHECK(atomic_load(&log.n) == 4, "%d host functions ran", atomic_load(&log.n));
    for (int i = 0; i < 4; i++)
        CHECK(atomic_load(&log.order[i]) == i, "host function %d ran at position %d",
              atomic_load(&log.order[i]), i);
    CHECK(atomic_load(&items[3].check_ok), "a host function ran before the copy before it");
    /* the deadline: work held by a closed gate */
    atomic_store(&gate_open, 0);
    CHECK_OK(O->host_fn(s, gate_fn, NULL));
    t0 = now_ms();
    adag_status_t st = O->stream_sync(s, adag__deadline_ms(20));
    CHECK(st == ADAG_ERR_TIMEOUT, "stream_sync behind a closed gate: %s", adag_status_str(st));
    CHECK(now_ms() - t0 < 1000, "stream_sync(20 ms) took %.0f ms", now_ms() - t0);
    CHECK(strstr(adag_last_error(), "deadline"), "%s", adag_last_error());
    atomic_store(&gate_open, 1);
    CHECK_OK(O->stream_sync(s, ADAG_FOREVER));
out:
    atomic_store(&gate_open, 1);
    O->stream_destroy(dev, s);
    O->mem_free(dev, &d);
    O->host_free(dev, &h_in);
    O->host_free(dev, &h_out);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    return rc;
}

static _Atomic int produced, seen_by_consumer = -1;

static void produce_fn(void *arg)
{
    (void)arg;
    atomic_store(&produced, 1);
}

static void consume_fn(void *arg)
{
    (void)arg;
    atomic_store(&seen_by_consumer, atomic_load(&produced));
}

/* Events: query, sync with a deadline, re-record, and one stream waiting on
 * another's event without the host waiting. */
static int test_events(adag_device_t *dev)
{
    int rc = PASS;
    adag_dev_stream_t *a = NULL, *b = NULL;
    adag_dev_event_t *ev = NULL;
    CHECK_OK(O->stream_create(dev, &a));
    CHECK_OK(O->stream_create(dev, &b));
    CHECK_OK(O->event_create(dev, &ev));
    CHECK(O->event_query(ev) == ADAG_OK, "an event never recorded must be complete");
    atomic_store(&produced, 0);
    atomic_store(&gate_open, 0);
    double t0 = now_ms();
    CHECK_OK(O->host_fn(a, gate_fn, NULL));
    CHECK_OK(O->host_fn(a, produce_fn, NULL));
    CHECK_OK(O->event_record(ev, a));
    CHECK_OK(O->stream_wait_event(b, ev));
    CHECK_OK(O->host_fn(b, consume_fn, NULL));
    CHECK(now_ms() - t0 < 50, "enqueueing waited on the host (%.0f ms)", now_ms() - t0);
    CHECK(O->event_query(ev) == ADAG_ERR_AGAIN, "complete before the work it captures");
    t0 = now_ms();
    adag_status_t st = O->event_sync(ev, adag__deadline_ms(30));
    CHECK(st == ADAG_ERR_TIMEOUT, "event_sync behind a closed gate: %s", adag_status_str(st));
    CHECK(now_ms() - t0 < 1000, "event_sync(30 ms) took %.0f ms", now_ms() - t0);
    st = O->stream_sync(b, adag__deadline_ms(20));
    CHECK(st == ADAG_ERR_TIMEOUT, "stream b ran past the event it waits on: %s",
          adag_status_str(st));
    CHECK(atomic_load(&seen_by_consumer) == -1, "stream b's host function ran too early");
    atomic_store(&gate_open, 1);
    CHECK_OK(O->event_sync(ev, ADAG_FOREVER));
    CHECK(O->event_query(ev) == ADAG_OK, "complete after event_sync, yet not by query");
    CHECK_OK(O->stream_sync(b, adag__deadline_ms(5000)));
    CHECK(atomic_load(&seen_by_consumer) == 1, "stream b ran before the event it waits on");
    /* recording again moves the event to the new work */
    atomic_store(&gate_open, 0);
    CHECK_OK(O->host_fn(a, gate_fn, NULL));
    CHECK_OK(O->event_record(ev, a));
    CHECK(O->event_query(ev) == ADAG_ERR_AGAIN, "a re-recorded event kept its old state");
    atomic_store(&gate_open, 1);
    CHECK_OK(O->event_sync(ev, adag__deadline_ms(5000)));
out:
    atomic_store(&gate_open, 1);
    O->stream_destroy(dev, a); /* streams first: they wait for their work */
    O->stream_destroy(dev, b);
    O->event_destroy(dev, ev);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    return rc;
}

/* ---- memory and an event across processes ---- */

typedef struct {
    adag_dev_handle_t mem, event;
    uint64_t n;
} ipc_msg_t;

static unsigned char pattern(size_t i, int which)
{
    return (unsigned char)(which == 2 ? i ^ 0x5a : i * 31 + 7);
}

int full_io(int fd, void *buf, size_t n, int writing)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = writing ? write(fd, (char *)buf + done, n - done)
                            : read(fd, (char *)buf + done, n - done);
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

/* The child: imports the memory and the event, waits on the event in a
 * stream (the parent holds it back), reads pattern 2, writes pattern 3. */
static int ipc_child(void)
{
    int rc = PASS;
    who = "ipc child: ";
    ipc_msg_t msg;
    adag_device_t *dev = NULL;
    adag_dev_mem_t im = {0}, buf = {0};
    adag_dev_event_t *iev = NULL, *own = NULL;
    adag_dev_stream_t *cs = NULL;
    CHECK(full_io(0, &msg, sizeof msg, 0) == 0, "no handles from the parent");
    CHECK_OK(O->open(0, &dev));
    CHECK_OK(O->mem_import(dev, &msg.mem, &im));
    CHECK(im.size == msg.n && im.ptr, "imported %zu bytes at %p", im.size, im.ptr);
    CHECK_OK(O->event_import(dev, &msg.event, &iev));
    CHECK_OK(O->stream_create(dev, &cs));
    CHECK_OK(O->host_alloc(dev, im.size, &buf));
    CHECK_OK(O->event_create(dev, &own));
    CHECK(O->event_record(iev, cs) == ADAG_ERR_INVALID, "recorded an imported event");
    CHECK(O->event_query(iev) == ADAG_ERR_AGAIN, "the parent's event is complete too early");
    CHECK_OK(O->stream_wait_event(cs, iev));
    CHECK_OK(O->copy_async(cs, buf.ptr, im.ptr, im.size));
    CHECK_OK(O->event_record(own, cs));
    CHECK(O->event_query(own) == ADAG_ERR_AGAIN, "the copy did not wait for the parent's event");
    char ready = 'r';
    CHECK(full_io(1, &ready, 1, 1) == 0, "cannot tell the parent");
    CHECK_OK(O->event_sync(iev, adag__deadline_ms(20000)));
    CHECK_OK(O->stream_sync(cs, adag__deadline_ms(20000)));
    for (size_t i = 0; i < im.size; i++)
        CHECK(((unsigned char *)buf.ptr)[i] == pattern(i, 2),
              "byte %zu is 0x%02x, not the parent's 0x%02x", i, ((unsigned char *)buf.ptr)[i],
              pattern(i, 2));
    for (size_t i = 0; i < im.size; i++)
        ((unsigned char *)buf.ptr)[i] = pattern(i, 3);
    CHECK_OK(O->copy_async(cs, im.ptr, buf.ptr, im.size));
    CHECK_OK(O->stream_sync(cs, adag__deadline_ms(20000)));
out:
    if (dev) {
        O->stream_destroy(dev, cs);
        O->event_destroy(dev, own);
        O->event_destroy(dev, iev);
        O->host_free(dev, &buf);
        O->mem_unimport(dev, &im);
        if (rc == PASS && !counts_zero(dev))
            rc = FAIL;
        O->close(dev);
    }
    return rc;
}

static int test_ipc(adag_device_t *dev)
{
    int rc = PASS;
    const size_t n = (1 << 20) + 3;
    adag_dev_mem_t d = {0}, h = {0};
    adag_dev_stream_t *s = NULL;
    adag_dev_event_t *ev = NULL;
    ipc_msg_t msg = {.n = n};
    int to_child[2] = {-1, -1}, from_child[2] = {-1, -1};
    pid_t pid = -1;
    CHECK_OK(O->mem_alloc(dev, n, &d));
    CHECK_OK(O->host_alloc(dev, n, &h));
    CHECK_OK(O->stream_create(dev, &s));
    CHECK_OK(O->event_create(dev, &ev));
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)h.ptr)[i] = pattern(i, 1);
    CHECK_OK(O->copy_async(s, d.ptr, h.ptr, n));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(10000)));
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)h.ptr)[i] = pattern(i, 2);
    CHECK_OK(O->mem_export(dev, &d, &msg.mem));
    CHECK_OK(O->event_export(dev, ev, &msg.event));
    CHECK(msg.mem.nfds == 0 && msg.mem.len == 72 && msg.event.len == 64,
          "handles of %u and %u bytes", msg.mem.len, msg.event.len);
    /* pattern 2 and the event's record wait behind a closed gate */
    atomic_store(&gate_open, 0);
    CHECK_OK(O->host_fn(s, gate_fn, NULL));
    CHECK_OK(O->copy_async(s, d.ptr, h.ptr, n));
    CHECK_OK(O->event_record(ev, s));
    CHECK(pipe2(to_child, O_CLOEXEC) == 0 && pipe2(from_child, O_CLOEXEC) == 0, "pipe2");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
    char *argv[] = {"test-cuda", "--ipc-child", NULL};
    int err = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    CHECK(err == 0, "posix_spawn of the child: %s", strerror(err));
    close(to_child[0]);
    close(from_child[1]);
    to_child[0] = from_child[1] = -1;
    CHECK(full_io(to_child[1], &msg, sizeof msg, 1) == 0, "cannot send the handles");
    struct pollfd p = {.fd = from_child[0], .events = POLLIN};
    char c = 0;
    CHECK(poll(&p, 1, 60000) == 1 && read(from_child[0], &c, 1) == 1 && c == 'r',
          "the child did not import (its messages are above)");
    sleep_ms(30); /* the child's stream waits on the event before it completes */
    atomic_store(&gate_open, 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    pid = -1;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status 0x%x)", status);
    CHECK_OK(O->copy_async(s, h.ptr, d.ptr, n));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(10000)));
    for (size_t i = 0; i < n; i++)
        CHECK(((unsigned char *)h.ptr)[i] == pattern(i, 3), "byte %zu: not the child's write", i);
out:
    atomic_store(&gate_open, 1);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    for (int i = 0; i < 2; i++) {
        if (to_child[i] >= 0)
            close(to_child[i]);
        if (from_child[i] >= 0)
            close(from_child[i]);
    }
    O->stream_destroy(dev, s);
    O->event_destroy(dev, ev);
    O->mem_free(dev, &d);
    O->host_free(dev, &h);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    return rc;
}

/* ---- the kernel (tests/gpu/scale.cu) against a C reference ---- */

typedef int (*scale_fn_t)(int device, float *y, const float *x, float a, float b, size_t n,
                          char *err, size_t errlen);

static int test_scale_kernel(adag_device_t *dev)
{
    int rc = PASS;
    const size_t n = 1000003;
    const float a = 1.75f, b = -0.3f;
    adag_dev_mem_t hx = {0}, hy = {0}, dx = {0}, dy = {0};
    adag_dev_stream_t *s = NULL;
    void *mod = NULL;
    if (!ADAG_TEST_GPU_KERNEL[0]) {
        snprintf(skip_reason, sizeof skip_reason,
                 "the kernel was not built: no nvcc at %s at build time", ADAG_TEST_NVCC);
        return SKIP;
    }
    mod = dlopen(ADAG_TEST_GPU_KERNEL, RTLD_NOW | RTLD_LOCAL);
    CHECK(mod, "dlopen: %s", dlerror());
    scale_fn_t scale = (scale_fn_t)dlsym(mod, "adag_test_scale");
    CHECK(scale, "%s has no adag_test_scale", ADAG_TEST_GPU_KERNEL);
    CHECK_OK(O->host_alloc(dev, n * sizeof(float), &hx));
    CHECK_OK(O->host_alloc(dev, n * sizeof(float), &hy));
    CHECK_OK(O->mem_alloc(dev, n * sizeof(float), &dx));
    CHECK_OK(O->mem_alloc(dev, n * sizeof(float), &dy));
    CHECK_OK(O->stream_create(dev, &s));
    float *x = hx.ptr, *y = hy.ptr;
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)((double)(i % 4099) * 0.37 - 700.0) / (float)(1 + i % 7);
        y[i] = 12345.0f;
    }
    CHECK_OK(O->copy_async(s, dx.ptr, hx.ptr, n * sizeof(float)));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(10000)));
    /* a failed call of the backend first: the kernel's own check
     * (cudaGetLastError after the launch) must not see it */
    adag_dev_mem_t huge = {0};
    CHECK(O->mem_alloc(dev, (size_t)1 << 50, &huge) == ADAG_ERR_NO_MEMORY,
          "a 1 PiB cudaMalloc: %s", adag_last_error());
    char err[256] = "";
    int e = scale(0, dy.ptr, dx.ptr, a, b, n, err, sizeof err);
    CHECK(e == 0, "the kernel failed: %s", err);
    CHECK_OK(O->copy_async(s, hy.ptr, dy.ptr, n * sizeof(float)));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(10000)));
    for (size_t i = 0; i < n; i++) {
        float want = a * x[i] + b;
        CHECK(memcmp(&y[i], &want, sizeof want) == 0, "y[%zu] = %.9g, the C reference %.9g", i,
              (double)y[i], (double)want);
    }
out:
    if (s)
        O->stream_destroy(dev, s);
    O->mem_free(dev, &dx);
    O->mem_free(dev, &dy);
    O->host_free(dev, &hx);
    O->host_free(dev, &hy);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    if (mod)
        dlclose(mod);
    return rc;
}

/* ---- graphs (tests/unit_device_graph.c on CUDA, with the real kernel) ---- */

typedef int (*scale_on_fn_t)(void *stream, float *y, const float *x, float a, float b, size_t n);

static void count_host(void *arg)
{
    atomic_fetch_add((_Atomic int *)arg, 1);
}

/* 50 kernels on one buffer, captured once and launched 200 times, against
 * the same 50 launched eagerly 200 times (bit for bit); launch_host and
 * copies inside the graph; each illegal operation fails the capture naming
 * it, and the stream works after. */
static int test_graphs(adag_device_t *dev)
{
    int rc = PASS;
    enum { CHAIN = 50, REPLAYS = 200 };
    const size_t n = 65536;
    adag_dev_mem_t h = {0}, dg = {0}, de = {0}, hg = {0};
    adag_dev_stream_t *s = NULL, *s2 = NULL;
    adag_dev_event_t *ev = NULL;
    adag_dev_graph_t *g = NULL;
    static _Atomic int runs;
    static unsigned char pageable[4096];
    void *mod = NULL;
    if (!ADAG_TEST_GPU_KERNEL[0]) {
        snprintf(skip_reason, sizeof skip_reason,
                 "the kernel was not built: no nvcc at %s at build time", ADAG_TEST_NVCC);
        return SKIP;
    }
    mod = dlopen(ADAG_TEST_GPU_KERNEL, RTLD_NOW | RTLD_LOCAL);
    CHECK(mod, "dlopen: %s", dlerror());
    scale_on_fn_t scale_on = (scale_on_fn_t)dlsym(mod, "adag_test_scale_on");
    CHECK(scale_on, "%s has no adag_test_scale_on", ADAG_TEST_GPU_KERNEL);
    CHECK_OK(O->host_alloc(dev, n * sizeof(float), &h));
    CHECK_OK(O->host_alloc(dev, n * sizeof(float), &hg));
    CHECK_OK(O->mem_alloc(dev, n * sizeof(float), &dg));
    CHECK_OK(O->mem_alloc(dev, n * sizeof(float), &de));
    CHECK_OK(O->stream_create(dev, &s));
    CHECK_OK(O->stream_create(dev, &s2));
    CHECK_OK(O->event_create(dev, &ev));
    float *x = h.ptr, *y = hg.ptr;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i % 1013) * 0.25f - 100.0f;
    CHECK_OK(O->copy_async(s, dg.ptr, h.ptr, n * sizeof(float)));
    CHECK_OK(O->copy_async(s, de.ptr, h.ptr, n * sizeof(float)));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(10000)));
    atomic_store(&runs, 0);
    CHECK_OK(O->stream_capture_begin(s));
    for (int k = 0; k < CHAIN; k++)
        CHECK(scale_on(O->stream_native(s), dg.ptr, dg.ptr, 0.5f, (float)k * 0.01f, n) == 0,
              "a kernel launch in the capture failed");
    CHECK_OK(O->host_fn(s, count_host, (void *)&runs));
    CHECK_OK(O->stream_capture_end(s, &g));
    for (int r = 0; r < REPLAYS; r++)
        CHECK_OK(O->graph_launch(g, s2, 0)); /* another stream than the capture's */
    for (int r = 0; r < REPLAYS; r++)
        for (int k = 0; k < CHAIN; k++)
            CHECK(scale_on(O->stream_native(s), de.ptr, de.ptr, 0.5f, (float)k * 0.01f, n) == 0,
                  "an eager kernel launch failed");
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(30000)));
    CHECK_OK(O->stream_sync(s2, adag__deadline_ms(30000)));
    CHECK(atomic_load(&runs) == REPLAYS, "the graph's host function ran %d times, want %d",
          atomic_load(&runs), REPLAYS);
    CHECK_OK(O->copy_async(s, hg.ptr, dg.ptr, n * sizeof(float)));
    CHECK_OK(O->copy_async(s, h.ptr, de.ptr, n * sizeof(float)));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(10000)));
    for (size_t i = 0; i < n; i++)
        CHECK(memcmp(&y[i], &x[i], sizeof(float)) == 0, "element %zu: replayed %.9g, eager %.9g",
              i, (double)y[i], (double)x[i]);
    O->graph_destroy(dev, g);
    g = NULL;
    /* each illegal operation fails the capture, naming it */
    static const char *const names[] = {"stream_sync", "event_query", "event_sync",
                                        "pageable host memory", "a second stream_capture_begin"};
    for (int k = 0; k < 5; k++) {
        CHECK_OK(O->stream_capture_begin(s));
        CHECK_OK(O->event_record(ev, s));
        adag_status_t st = k == 0   ? O->stream_sync(s, adag__deadline_ms(1000))
                           : k == 1 ? O->event_query(ev)
                           : k == 2 ? O->event_sync(ev, adag__deadline_ms(1000))
                           : k == 3 ? O->copy_async(s, dg.ptr, pageable, sizeof pageable)
                                    : O->stream_capture_begin(s);
        CHECK(st == ADAG_ERR_INVALID, "%s during a capture: %s", names[k], adag_status_str(st));
        CHECK(O->stream_capture_end(s, &g) == ADAG_ERR_INVALID && !g,
              "%s: the capture ended with a graph", names[k]);
        CHECK(strstr(adag_last_error(), names[k]), "%s: the message: %s", names[k],
              adag_last_error());
        CHECK_OK(O->host_fn(s, count_host, (void *)&runs));
        CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    }
out:
    if (g)
        O->graph_destroy(dev, g);
    if (s)
        O->stream_destroy(dev, s);
    if (s2)
        O->stream_destroy(dev, s2);
    if (ev)
        O->event_destroy(dev, ev);
    O->mem_free(dev, &dg);
    O->mem_free(dev, &de);
    O->host_free(dev, &h);
    O->host_free(dev, &hg);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    if (mod)
        dlclose(mod);
    return rc;
}

static void *open_gate_later(void *arg)
{
    sleep_ms(*(int *)arg);
    atomic_store(&gate_open, 1);
    return NULL;
}

/* tests/unit_device.c's pageable_and_registered_copies on CUDA: a copy to
 * pageable memory returns once done; from pageable memory the bytes are
 * taken at the call; to host_register'ed memory the call does not wait. */
static int test_pageable_and_registered(adag_device_t *dev)
{
    int rc = PASS;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 3 * page;
    adag_dev_stream_t *s = NULL;
    adag_dev_mem_t d = {0}, reg = {0}, reg2 = {0};
    unsigned char *a = aligned_alloc(page, n), *b = aligned_alloc(page, n);
    pthread_t opener;
    int opener_started = 0, after_ms = 300;
    CHECK(a && b, "out of memory");
    memset(a, 0x11, n);
    CHECK_OK(O->stream_create(dev, &s));
    CHECK_OK(O->mem_alloc(dev, n, &d));
    atomic_store(&gate_open, 0);
    CHECK_OK(O->host_fn(s, gate_fn, NULL));
    CHECK(pthread_create(&opener, NULL, open_gate_later, &after_ms) == 0, "pthread_create");
    opener_started = 1;
    CHECK_OK(O->copy_async(s, d.ptr, a, n));
    memset(a, 0x22, n);
    CHECK_OK(O->host_register(dev, a + 100, n - 200, &reg));
    CHECK(reg.ptr == a && reg.size == n, "registered %zu bytes at %p, want %zu at %p", reg.size,
          reg.ptr, n, (void *)a);
    CHECK(O->host_register(dev, a + page, 10, &reg2) == ADAG_ERR_INVALID,
          "registering a registered page again: %s", adag_last_error());
    double t0 = now_ms();
    CHECK_OK(O->copy_async(s, a, d.ptr, n));
    CHECK(!atomic_load(&gate_open), "the copy to registered memory waited %.0f ms for the stream",
          now_ms() - t0);
    memset(b, 0, n);
    CHECK_OK(O->copy_async(s, b, d.ptr, n));
    CHECK(atomic_load(&gate_open), "the copy to pageable memory returned before the stream got there");
    for (size_t i = 0; i < n; i++)
        CHECK(b[i] == 0x11, "b[%zu] = %#x when its copy returned", i, b[i]);
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    CHECK(a[0] == 0x11 && a[n - 1] == 0x11, "the copy into registered memory: %#x %#x", a[0],
          a[n - 1]);
out:
    atomic_store(&gate_open, 1);
    if (opener_started)
        pthread_join(opener, NULL);
    if (s) {
        O->stream_sync(s, adag__deadline_ms(5000));
        O->stream_destroy(dev, s);
    }
    O->host_unregister(dev, &reg);
    O->mem_free(dev, &d);
    free(a);
    free(b);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    return rc;
}

static const struct {
    const char *name;
    int (*fn)(adag_device_t *dev);
} tests[] = {
    {"open_and_errors", test_open_and_errors},
    {"copies_round_trip", test_copies_round_trip},
    {"stream_order_and_deadline", test_stream_order},
    {"events", test_events},
    {"ipc_memory_and_event_across_processes", test_ipc},
    {"pageable_and_registered_copies", test_pageable_and_registered},
    {"scale_kernel_vs_c_reference", test_scale_kernel},
    {"values_write_after_copy_releases_another_stream", test_values_order},
    {"values_stuck_wait_released_by_abort", test_values_abort},
    {"values_word_written_by_another_process", test_values_ipc},
    {"graphs_replay_equals_eager", test_graphs},
    {"values_in_graphs_shifted_at_launch", test_values_in_graphs},
};
#define NTESTS (sizeof(tests) / sizeof(tests[0]))

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--ipc-child") == 0)
        return ipc_child();
    if (argc == 2 && strcmp(argv[1], "--values-child") == 0)
        return values_child();
    setvbuf(stdout, NULL, _IOLBF, 0);
    char why[256] = "";
    unsigned ndev = O->probe(why, sizeof why);
    if (ndev == 0) {
        for (size_t i = 0; i < NTESTS; i++)
            printf("test-cuda: %s: skipped: %s\n", tests[i].name, why);
        printf("test-cuda: 0 passed, 0 failed, %zu skipped (no CUDA device: %s)\n", NTESTS, why);
        return SKIP;
    }
    printf("test-cuda: %u CUDA device(s) (%s)\n", ndev, why);
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < NTESTS; i++) {
        adag_device_t *dev = NULL;
        double t0 = now_ms();
        int rc = FAIL;
        if (O->open(0, &dev) != ADAG_OK)
            fprintf(stderr, "  open(0): %s\n", adag_last_error());
        else
            rc = tests[i].fn(dev);
        if (dev)
            O->close(dev);
        if (rc == PASS) {
            passed++;
            printf("test-cuda: %s: passed (%.0f ms)\n", tests[i].name, now_ms() - t0);
        } else if (rc == SKIP) {
            skipped++;
            printf("test-cuda: %s: skipped: %s\n", tests[i].name, skip_reason);
        } else {
            failed++;
            printf("test-cuda: %s: FAILED\n", tests[i].name);
        }
    }
    printf("test-cuda: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? FAIL : PASS;
}

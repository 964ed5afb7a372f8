/* Unit tests (suite "device_values"): the value ops of the device ops
 * table (gpu/device.h, adag_dev_word_t) over every backend that has a
 * device here (the emulated device always; cuda where a GPU with stream
 * memory operations exists, else "skipped: <reason>"). A stream's write
 * comes after its earlier work and releases another stream's wait, which
 * compares cyclically; a stuck wait is released by the host's abort value,
 * also when the writer was another process that died; word_map refuses
 * what no device can reach; a deadline on a stream stuck in a wait is
 * kept. The words live in a memfd mapped shared, as a channel's ring. */
#include "common/clock.h"
#include "gpu/device.h"

#include "device_kinds.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* One test per device kind (a backend without a device or without value
 * ops here skips). */
#define VALUES_TEST(name, tmo) DEVICE_KIND_TEST(device_values, name, tmo)

/* Opens device 0 of the kind, or skips the test saying why (no device, or
 * no value ops on it). */
static adag_device_t *open_or_skip(uint32_t kind)
{
    adag_device_t *dev = device_open_or_skip(kind, 0);
    const adag_device_ops_t *ops = dev->ops;
    char why[512] = "";
    if (!ops->values_supported || !ops->values_supported(dev, why, sizeof why)) {
        char reason[600];
        snprintf(reason, sizeof reason, "%s", ops->values_supported ? why : "no value ops");
        ops->close(dev);
        cr_skip_test("skipped: %s: %s", ops->name, reason);
    }
    return dev;
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

/* ---- a ring: a memfd mapped shared, registered, holding words and data ---- */

#define WORD_OFF 0        /* the producer's word */
#define ACK_OFF 64        /* the consumer's word */
#define DATA_OFF 4096     /* one round's elements */
#define ELEMS 256         /* uint32 elements a round */
#define RING_BYTES (DATA_OFF + ELEMS * sizeof(uint32_t))

typedef struct {
    int fd;
    unsigned char *base;
    adag_dev_mem_t reg;
} ring_t;

static void ring_map(ring_t *r, int fd)
{
    r->fd = fd;
    r->base = mmap(NULL, RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(r->base, MAP_FAILED, "mmap of the ring: %s", strerror(errno));
}

static void ring_open(adag_device_t *dev, ring_t *r)
{
    int fd = memfd_create("adag-test-values", MFD_CLOEXEC);
    cr_assert_geq(fd, 0, "memfd_create: %s", strerror(errno));
    cr_assert_eq(ftruncate(fd, RING_BYTES), 0);
    ring_map(r, fd);
    cr_assert_eq(dev->ops->host_register(dev, r->base, RING_BYTES, &r->reg), ADAG_OK, "%s",
                 adag_last_error());
}

static void ring_close(adag_device_t *dev, ring_t *r)
{
    dev->ops->host_unregister(dev, &r->reg);
    munmap(r->base, RING_BYTES);
    close(r->fd);
}

static adag_dev_word_t ring_word(adag_device_t *dev, ring_t *r, size_t off)
{
    adag_dev_word_t w;
    cr_assert_eq(dev->ops->word_map(dev, (_Atomic uint64_t *)(r->base + off), &w), ADAG_OK,
                 "%s", adag_last_error());
    return w;
}

/* Round r's element i: changes with both. */
static uint32_t element(uint64_t r, size_t i)
{
    return (uint32_t)(r * 2654435761u + i * 40503u + 1);
}

static void set_flag(void *arg)
{
    atomic_store((_Atomic int *)arg, 1);
}

/* ---- a stream's write after a copy releases another stream's wait ---- */

/* Stream A copies round r's elements into the ring and writes the word r;
 * stream B waits for r, copies the ring out into round r's slot and
 * writes the ack r, which A waits for before the next round: 2000 rounds,
 * all enqueued before any ran, ordered by value ops alone. Every element
 * of every round must be that round's. */
VALUES_TEST(write_after_copy_releases_another_stream, 60)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    const uint64_t rounds = 2000;
    const size_t bytes = ELEMS * sizeof(uint32_t);
    ring_t ring;
    ring_open(dev, &ring);
    adag_dev_word_t word = ring_word(dev, &ring, WORD_OFF), ack = ring_word(dev, &ring, ACK_OFF);
    adag_dev_mem_t src, dst;
    cr_assert_eq(o->host_alloc(dev, rounds * bytes, &src), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->host_alloc(dev, rounds * bytes, &dst), ADAG_OK, "%s", adag_last_error());
    uint32_t *in = src.ptr, *out = dst.ptr;
    for (uint64_t r = 0; r < rounds; r++)
        for (size_t i = 0; i < ELEMS; i++)
            in[r * ELEMS + i] = element(r + 1, i);
    memset(out, 0, rounds * bytes);
    adag_dev_stream_t *a, *b;
    cr_assert_eq(o->stream_create(dev, &a), ADAG_OK);
    cr_assert_eq(o->stream_create(dev, &b), ADAG_OK);
    void *data = ring.base + DATA_OFF;
    for (uint64_t r = 1; r <= rounds; r++) {
        cr_assert_eq(o->stream_wait_value64(a, &ack, r - 1), ADAG_OK, "%s", adag_last_error());
        cr_assert_eq(o->copy_async(a, data, in + (r - 1) * ELEMS, bytes), ADAG_OK);
        cr_assert_eq(o->stream_write_value64(a, &word, r), ADAG_OK, "%s", adag_last_error());
        cr_assert_eq(o->stream_wait_value64(b, &word, r), ADAG_OK);
        cr_assert_eq(o->copy_async(b, out + (r - 1) * ELEMS, data, bytes), ADAG_OK);
        cr_assert_eq(o->stream_write_value64(b, &ack, r), ADAG_OK);
    }
    cr_assert_eq(o->stream_sync(b, adag__deadline_ms(30000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(a, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(word.host), rounds);
    cr_assert_eq(atomic_load(ack.host), rounds);
    for (uint64_t r = 0; r < rounds; r++)
        for (size_t i = 0; i < ELEMS; i++)
            cr_assert_eq(out[r * ELEMS + i], element(r + 1, i),
                         "round %llu element %zu: %#x, not that round's %#x (round %llu's "
                         "would be %#x): B read the ring before A's copy of it was done",
                         (unsigned long long)r + 1, i, out[r * ELEMS + i], element(r + 1, i),
                         (unsigned long long)r, element(r, i));
    o->stream_destroy(dev, a);
    o->stream_destroy(dev, b);
    o->host_free(dev, &src);
    o->host_free(dev, &dst);
    ring_close(dev, &ring);
    assert_no_live_objects(dev);
    o->close(dev);
}

/* ---- GEQ, cyclic ---- */

/* Whether a wait for `want` on s (a flag set behind it) is released by
 * `deadline_ms`: 1 if it was (the flag set), 0 if the sync timed out. */
static int released_within(const adag_device_ops_t *o, adag_dev_stream_t *s, _Atomic int *flag,
                           int deadline_ms)
{
    adag_status_t st = o->stream_sync(s, adag__deadline_ms(deadline_ms));
    cr_assert(st == ADAG_OK || st == ADAG_ERR_TIMEOUT, "stream_sync: %s", adag_last_error());
    cr_assert_eq(atomic_load(flag), st == ADAG_OK, "the flag behind the wait disagrees with "
                                                   "stream_sync (%s)", adag_status_str(st));
    return st == ADAG_OK;
}

/* A wait for a value the word already passed returns; a lower value, from
 * the host or a stream, does not release; across the wrap of 2^64 the
 * comparison is (int64_t)(value - want) >= 0. */
VALUES_TEST(wait_compares_cyclically, 60)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    ring_t ring;
    ring_open(dev, &ring);
    adag_dev_word_t w = ring_word(dev, &ring, WORD_OFF);
    adag_dev_stream_t *s, *t;
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->stream_create(dev, &t), ADAG_OK);
    static _Atomic int flags[6];
    static const struct {
        uint64_t value, want;
    } passed[] = {{10, 5}, {10, 10}, {3, UINT64_MAX}, {ADAG_DEV_WORD_ABORT, 123456789}};
    for (size_t k = 0; k < sizeof passed / sizeof passed[0]; k++) {
        o->word_store(&w, passed[k].value);
        atomic_store(&flags[0], 0);
        cr_assert_eq(o->stream_wait_value64(s, &w, passed[k].want), ADAG_OK);
        cr_assert_eq(o->host_fn(s, set_flag, &flags[0]), ADAG_OK);
        cr_assert(released_within(o, s, &flags[0], 5000),
                  "a wait for %#llx on a word at %#llx (already passed) did not return",
                  (unsigned long long)passed[k].want, (unsigned long long)passed[k].value);
    }
    /* 100, then a wait for 150: 120 from the host and 140 from a stream
     * keep it; 150 releases it */
    o->word_store(&w, 100);
    cr_assert_eq(o->stream_wait_value64(s, &w, 150), ADAG_OK);
    cr_assert_eq(o->host_fn(s, set_flag, &flags[1]), ADAG_OK);
    o->word_store(&w, 120);
    cr_assert(!released_within(o, s, &flags[1], 100), "120 released a wait for 150");
    cr_assert_eq(o->stream_write_value64(t, &w, 140), ADAG_OK);
    cr_assert_eq(o->stream_sync(t, adag__deadline_ms(5000)), ADAG_OK);
    cr_assert_eq(atomic_load(w.host), 140u);
    cr_assert(!released_within(o, s, &flags[1], 100), "140 (a stream's) released a wait for 150");
    cr_assert_eq(o->stream_write_value64(t, &w, 150), ADAG_OK);
    cr_assert(released_within(o, s, &flags[1], 5000), "150 did not release a wait for 150");
    /* across the wrap: at 2^64 - 6, a wait for 2 is 8 ahead */
    o->word_store(&w, UINT64_MAX - 5);
    cr_assert_eq(o->stream_wait_value64(s, &w, 2), ADAG_OK);
    cr_assert_eq(o->host_fn(s, set_flag, &flags[2]), ADAG_OK);
    cr_assert(!released_within(o, s, &flags[2], 100),
              "a wait for 2 returned at 2^64 - 6: the comparison is not cyclic");
    cr_assert_eq(o->stream_write_value64(t, &w, 1), ADAG_OK);
    cr_assert(!released_within(o, s, &flags[2], 100), "1 released a wait for 2");
    cr_assert_eq(o->stream_write_value64(t, &w, 3), ADAG_OK);
    cr_assert(released_within(o, s, &flags[2], 5000), "3 (past the wrap) did not release 2");
    o->stream_destroy(dev, s);
    o->stream_destroy(dev, t);
    ring_close(dev, &ring);
    assert_no_live_objects(dev);
    o->close(dev);
}

/* ---- a stuck wait and the abort value ---- */

/* A wait nobody will satisfy: stream_sync with a deadline times out in
 * time, the work behind the wait not run; the host's word_store of
 * ADAG_DEV_WORD_ABORT releases it (the stream thread asleep by then), and
 * later waits below the abort value return at once. */
VALUES_TEST(stuck_wait_released_by_abort, 60)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    ring_t ring;
    ring_open(dev, &ring);
    adag_dev_word_t w = ring_word(dev, &ring, WORD_OFF);
    adag_dev_stream_t *s;
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    static _Atomic int behind, later;
    cr_assert_eq(o->stream_wait_value64(s, &w, 1), ADAG_OK);
    cr_assert_eq(o->host_fn(s, set_flag, &behind), ADAG_OK);
    double t0 = now_ms();
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(200)), ADAG_ERR_TIMEOUT,
                 "a stream stuck in a wait synced: %s", adag_last_error());
    double took = now_ms() - t0;
    cr_assert(took >= 190 && took < 3000, "stream_sync with a 200 ms deadline took %.0f ms", took);
    cr_assert(strstr(adag_last_error(), o->name), "the timeout does not name the device: %s",
              adag_last_error());
    sleep_ms(100); /* the waiter sleeps now */
    cr_assert_eq(atomic_load(&behind), 0, "the work behind a stuck wait ran");
    o->word_store(&w, ADAG_DEV_WORD_ABORT);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK,
                 "the abort value did not release the wait: %s", adag_last_error());
    cr_assert_eq(atomic_load(&behind), 1);
    cr_assert_eq(atomic_load(w.host), ADAG_DEV_WORD_ABORT);
    cr_assert_eq(o->stream_wait_value64(s, &w, 1000000), ADAG_OK);
    cr_assert_eq(o->host_fn(s, set_flag, &later), ADAG_OK);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK,
                 "a wait below the abort value did not return: %s", adag_last_error());
    cr_assert_eq(atomic_load(&later), 1);
    o->stream_destroy(dev, s);
    ring_close(dev, &ring);
    assert_no_live_objects(dev);
    o->close(dev);
}

/* ---- another process writes ---- */

typedef struct {
    uint32_t *data;
    uint64_t round;
} fill_args_t;

/* The child's "kernel": writes round r's elements into the ring. */
static void fill_fn(void *arg)
{
    const fill_args_t *f = arg;
    for (size_t i = 0; i < ELEMS; i++)
        f->data[i] = element(f->round, i);
}

/* The child: its own mapping of the ring's memfd, registered; its stream
 * writes each round into the ring (launch_host, in stream order) and the
 * word, after waiting for the parent's ack of the round before; then it
 * says so and stops, never writing round rounds + 1. */
static void writer_child(adag_device_t *dev, int fd, uint64_t rounds, int tell)
{
    const adag_device_ops_t *o = dev->ops;
    ring_t mine = {.fd = fd};
    adag_dev_word_t word, ack;
    adag_dev_stream_t *s;
    mine.base = mmap(NULL, RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int ok = mine.base != MAP_FAILED &&
             o->host_register(dev, mine.base, RING_BYTES, &mine.reg) == ADAG_OK &&
             o->word_map(dev, (_Atomic uint64_t *)(mine.base + WORD_OFF), &word) == ADAG_OK &&
             o->word_map(dev, (_Atomic uint64_t *)(mine.base + ACK_OFF), &ack) == ADAG_OK &&
             o->stream_create(dev, &s) == ADAG_OK;
    for (uint64_t r = 1; ok && r <= rounds; r++) {
        fill_args_t f = {(uint32_t *)(mine.base + DATA_OFF), r};
        ok = o->stream_wait_value64(s, &ack, r - 1) == ADAG_OK &&
             o->launch_host(s, fill_fn, &f, sizeof f) == ADAG_OK &&
             o->stream_write_value64(s, &word, r) == ADAG_OK;
    }
    ok = ok && o->stream_sync(s, adag__deadline_ms(30000)) == ADAG_OK;
    if (!ok)
        fprintf(stderr, "writer child: %s\n", adag_last_error());
    char c = ok ? 'k' : 'f';
    if (write(tell, &c, 1) != 1)
        _exit(2);
    for (;;)
        pause(); /* the parent kills it */
}

/* A child process maps the same memfd, registers it and writes the word
 * from its own stream, round by round; the parent's stream waits for each
 * round, copies the ring out and acks. Then the parent's stream waits for
 * a round the child never writes; the child is killed and the parent's
 * abort value releases the wait. */
VALUES_TEST(word_written_by_another_process, 60)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    if (*kind != ADAG_DEV_EMULATED) {
        o->close(dev);
        cr_skip_test("skipped: %s: a forked child needs a fresh CUDA context (tests/gpu's "
                     "test-cuda covers it with a spawned child)", o->name);
    }
    const uint64_t rounds = 500;
    const size_t bytes = ELEMS * sizeof(uint32_t);
    ring_t ring;
    ring_open(dev, &ring);
    adag_dev_word_t word = ring_word(dev, &ring, WORD_OFF), ack = ring_word(dev, &ring, ACK_OFF);
    int tell[2];
    cr_assert_eq(pipe(tell), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(tell[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed test */
        writer_child(dev, ring.fd, rounds, tell[1]);
    }
    close(tell[1]);
    adag_dev_mem_t dst;
    adag_dev_stream_t *s;
    adag_dev_event_t *ev;
    static _Atomic int behind;
    cr_assert_eq(o->host_alloc(dev, rounds * bytes, &dst), ADAG_OK);
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->event_create(dev, &ev), ADAG_OK);
    uint32_t *out = dst.ptr;
    memset(out, 0, rounds * bytes);
    for (uint64_t r = 1; r <= rounds; r++) {
        cr_assert_eq(o->stream_wait_value64(s, &word, r), ADAG_OK);
        cr_assert_eq(o->copy_async(s, out + (r - 1) * ELEMS, ring.base + DATA_OFF, bytes), ADAG_OK);
        cr_assert_eq(o->stream_write_value64(s, &ack, r), ADAG_OK);
    }
    cr_assert_eq(o->event_record(ev, s), ADAG_OK);
    cr_assert_eq(o->stream_wait_value64(s, &word, rounds + 1), ADAG_OK);
    cr_assert_eq(o->host_fn(s, set_flag, &behind), ADAG_OK);
    cr_assert_eq(o->event_sync(ev, adag__deadline_ms(30000)), ADAG_OK,
                 "the child's rounds did not all arrive (word at %llu): %s",
                 (unsigned long long)atomic_load(word.host), adag_last_error());
    char c = 0;
    cr_assert_eq(read(tell[0], &c, 1), 1, "the child died");
    close(tell[0]);
    cr_assert_eq(c, 'k', "the child failed (its message is above)");
    for (uint64_t r = 0; r < rounds; r++)
        for (size_t i = 0; i < ELEMS; i++)
            cr_assert_eq(out[r * ELEMS + i], element(r + 1, i),
                         "round %llu element %zu: %#x, not the child's %#x",
                         (unsigned long long)r + 1, i, out[r * ELEMS + i], element(r + 1, i));
    /* round rounds + 1 never comes: the writer dies, the parent aborts */
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(100)), ADAG_ERR_TIMEOUT);
    cr_assert_eq(kill(pid, SIGKILL), 0);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status), "the child ended by itself (status 0x%x)", status);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&behind), 0, "the work behind the stuck wait ran");
    o->word_store(&word, ADAG_DEV_WORD_ABORT);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK,
                 "the abort value did not release a wait on a dead writer: %s",
                 adag_last_error());
    cr_assert_eq(atomic_load(&behind), 1);
    o->event_destroy(dev, ev);
    o->stream_destroy(dev, s);
    o->host_free(dev, &dst);
    ring_close(dev, &ring);
    assert_no_live_objects(dev);
    o->close(dev);
}

/* ---- word_map refuses ---- */

/* A cell that is not 64-aligned, one in memory never registered and one in
 * memory no longer registered are refused, the message naming the device
 * and the address. */
VALUES_TEST(word_map_refuses_unaligned_and_unregistered, 30)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    ring_t ring;
    ring_open(dev, &ring);
    adag_dev_word_t w;
    char addr[32];
    _Atomic uint64_t *bad = (_Atomic uint64_t *)(ring.base + 8);
    snprintf(addr, sizeof addr, "%p", (void *)bad);
    cr_assert_eq(o->word_map(dev, bad, &w), ADAG_ERR_INVALID, "an unaligned cell was mapped");
    cr_assert(strstr(adag_last_error(), "aligned") && strstr(adag_last_error(), addr) &&
                  strstr(adag_last_error(), o->name),
              "the message does not say what (alignment), where (%s) and which device: %s", addr,
              adag_last_error());
    void *plain = aligned_alloc(4096, 4096);
    cr_assert_not_null(plain);
    snprintf(addr, sizeof addr, "%p", plain);
    cr_assert_eq(o->word_map(dev, plain, &w), ADAG_ERR_INVALID,
                 "a cell in unregistered memory was mapped");
    cr_assert(strstr(adag_last_error(), "registered") && strstr(adag_last_error(), addr) &&
                  strstr(adag_last_error(), o->name),
              "the message does not say what (registration), where (%s) and which device: %s",
              addr, adag_last_error());
    free(plain);
    cr_assert_eq(o->word_map(dev, (_Atomic uint64_t *)(ring.base + ACK_OFF), &w), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq((void *)w.host, (void *)(ring.base + ACK_OFF));
    o->host_unregister(dev, &ring.reg);
    cr_assert_eq(o->word_map(dev, (_Atomic uint64_t *)(ring.base + ACK_OFF), &w),
                 ADAG_ERR_INVALID, "a cell of unregistered memory was mapped");
    ring_close(dev, &ring);
    assert_no_live_objects(dev);
    o->close(dev);
}

/* ---- a deadline on a stream stuck in a wait ---- */

/* The head of the stream is a wait nobody satisfied yet (on the emulated
 * device stream_sync helps: it runs the queued wait itself, and must give
 * it back at its deadline): the sync times out in time and nothing behind
 * the wait ran; once another stream writes the value the copy behind it
 * and the stream's later work run. */
VALUES_TEST(sync_deadline_on_a_stream_stuck_in_a_wait, 60)
{
    adag_device_t *dev = open_or_skip(*kind);
    const adag_device_ops_t *o = dev->ops;
    const size_t bytes = ELEMS * sizeof(uint32_t);
    ring_t ring;
    ring_open(dev, &ring);
    adag_dev_word_t word = ring_word(dev, &ring, WORD_OFF), ack = ring_word(dev, &ring, ACK_OFF);
    adag_dev_mem_t buf;
    cr_assert_eq(o->host_alloc(dev, 2 * bytes, &buf), ADAG_OK);
    uint32_t *in = buf.ptr, *out = in + ELEMS;
    for (size_t i = 0; i < ELEMS; i++)
        in[i] = element(7, i);
    memset(out, 0, bytes);
    adag_dev_stream_t *s, *t;
    cr_assert_eq(o->stream_create(dev, &s), ADAG_OK);
    cr_assert_eq(o->stream_create(dev, &t), ADAG_OK);
    cr_assert_eq(o->stream_wait_value64(s, &word, 1), ADAG_OK);
    cr_assert_eq(o->copy_async(s, out, in, bytes), ADAG_OK);
    cr_assert_eq(o->stream_write_value64(s, &ack, 1), ADAG_OK);
    for (int k = 0; k < 3; k++) {
        double t0 = now_ms();
        cr_assert_eq(o->stream_sync(s, adag__deadline_ms(50)), ADAG_ERR_TIMEOUT,
                     "sync %d of a stream stuck in a wait: %s", k, adag_last_error());
        double took = now_ms() - t0;
        cr_assert(took < 2000, "stream_sync with a 50 ms deadline took %.0f ms", took);
    }
    sleep_ms(50);
    cr_assert_eq(out[0], 0u, "the copy behind the unreleased wait ran");
    cr_assert_eq(atomic_load(ack.host), 0u, "the write behind the unreleased wait ran");
    cr_assert_eq(o->stream_write_value64(t, &word, 1), ADAG_OK);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK,
                 "the released stream did not finish: %s", adag_last_error());
    cr_assert_eq(atomic_load(ack.host), 1u);
    for (size_t i = 0; i < ELEMS; i++)
        cr_assert_eq(out[i], element(7, i), "element %zu: %#x", i, out[i]);
    /* and it keeps working */
    for (size_t i = 0; i < ELEMS; i++)
        in[i] = element(8, i);
    cr_assert_eq(o->copy_async(s, out, in, bytes), ADAG_OK);
    cr_assert_eq(o->stream_write_value64(s, &ack, 2), ADAG_OK);
    cr_assert_eq(o->stream_sync(s, adag__deadline_ms(5000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(atomic_load(ack.host), 2u);
    for (size_t i = 0; i < ELEMS; i++)
        cr_assert_eq(out[i], element(8, i), "after: element %zu: %#x", i, out[i]);
    o->stream_destroy(dev, s);
    o->stream_destroy(dev, t);
    o->host_free(dev, &buf);
    ring_close(dev, &ring);
    assert_no_live_objects(dev);
    o->close(dev);
}

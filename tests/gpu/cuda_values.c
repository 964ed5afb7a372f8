/*
 * test-cuda's value-op tests (gpu/cuda_values.c: cuStreamWriteValue64 /
 * cuStreamWaitValue64 on words in registered host memory; the harness is
 * tests/gpu/test_cuda.h). Each skips, saying why, where the device has no
 * value ops (values_supported). The words and the data live in a memfd
 * mapped shared, as a channel's ring; the cross-process test gives the
 * memfd to a spawned copy of this program (`--values-child`, a fresh CUDA
 * context), which maps, registers and writes it from its own stream.
 */
#include "test_cuda.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define WORD_OFF 0    /* the producer's word */
#define ACK_OFF 64    /* the consumer's word */
#define DATA_OFF 4096 /* one round's elements */
#define ELEMS 4096    /* uint32 elements a round */
#define ROUND_BYTES (ELEMS * sizeof(uint32_t))
#define RING_BYTES (DATA_OFF + ROUND_BYTES)
#define CHILD_FD 3    /* the ring's memfd in the child */

/* Round r's element i: changes with both. */
static uint32_t element(uint64_t r, size_t i)
{
    return (uint32_t)(r * 2654435761u + i * 40503u + 1);
}

static int values_or_skip(adag_device_t *dev)
{
    char why[512] = "";
    if (O->values_supported(dev, why, sizeof why))
        return 1;
    snprintf(skip_reason, sizeof skip_reason, "no value ops: %s", why);
    return 0;
}

/* The ring: a memfd (fd) mapped shared at base, registered in reg. */
typedef struct {
    int fd;
    unsigned char *base;
    adag_dev_mem_t reg;
    adag_dev_word_t word, ack;
} ring_t;

/* Maps fd (ring->fd) and registers it, words mapped; ADAG_OK or the
 * failure (this thread's error says it). */
static adag_status_t ring_map(adag_device_t *dev, ring_t *r)
{
    r->base = mmap(NULL, RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (r->base == MAP_FAILED) {
        r->base = NULL;
        return adag_fail(ADAG_ERR_IO, "mmap of the ring: %s", strerror(errno));
    }
    adag_status_t st = O->host_register(dev, r->base, RING_BYTES, &r->reg);
    if (st == ADAG_OK)
        st = O->word_map(dev, (_Atomic uint64_t *)(r->base + WORD_OFF), &r->word);
    if (st == ADAG_OK)
        st = O->word_map(dev, (_Atomic uint64_t *)(r->base + ACK_OFF), &r->ack);
    return st;
}

static adag_status_t ring_open(adag_device_t *dev, ring_t *r)
{
    memset(r, 0, sizeof(*r));
    int fd = memfd_create("adag-test-cuda-values", MFD_CLOEXEC);
    /* above the child's CHILD_FD, so the dup2 onto it really dups */
    r->fd = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10);
    if (fd >= 0)
        close(fd);
    if (r->fd < 0 || ftruncate(r->fd, RING_BYTES) != 0)
        return adag_fail(ADAG_ERR_IO, "memfd for the ring: %s", strerror(errno));
    return ring_map(dev, r);
}

static void ring_close(adag_device_t *dev, ring_t *r)
{
    O->host_unregister(dev, &r->reg);
    if (r->base)
        munmap(r->base, RING_BYTES);
    if (r->fd >= 0)
        close(r->fd);
    r->base = NULL;
    r->fd = -1;
}

static void set_flag(void *arg)
{
    atomic_store((_Atomic int *)arg, 1);
}

/* Stream A copies round r into the ring and writes the word r; stream B
 * waits for r, copies the ring out into round r's slot and writes the ack
 * r, which A waits for before its next copy: 2000 rounds enqueued at once,
 * ordered by value ops alone; every element of every round checked. */
int test_values_order(adag_device_t *dev)
{
    int rc = PASS;
    const uint64_t rounds = 2000;
    ring_t ring = {.fd = -1};
    adag_dev_mem_t src = {0}, dst = {0};
    adag_dev_stream_t *a = NULL, *b = NULL;
    if (!values_or_skip(dev))
        return SKIP;
    CHECK_OK(ring_open(dev, &ring));
    CHECK_OK(O->host_alloc(dev, rounds * ROUND_BYTES, &src));
    CHECK_OK(O->host_alloc(dev, rounds * ROUND_BYTES, &dst));
    uint32_t *in = src.ptr, *outp = dst.ptr;
    for (uint64_t r = 0; r < rounds; r++)
        for (size_t i = 0; i < ELEMS; i++)
            in[r * ELEMS + i] = element(r + 1, i);
    memset(outp, 0, rounds * ROUND_BYTES);
    CHECK_OK(O->stream_create(dev, &a));
    CHECK_OK(O->stream_create(dev, &b));
    void *data = ring.base + DATA_OFF;
    double t0 = now_ms();
    for (uint64_t r = 1; r <= rounds; r++) {
        CHECK_OK(O->stream_wait_value64(a, &ring.ack, r - 1));
        CHECK_OK(O->copy_async(a, data, in + (r - 1) * ELEMS, ROUND_BYTES));
        CHECK_OK(O->stream_write_value64(a, &ring.word, r));
        CHECK_OK(O->stream_wait_value64(b, &ring.word, r));
        CHECK_OK(O->copy_async(b, outp + (r - 1) * ELEMS, data, ROUND_BYTES));
        CHECK_OK(O->stream_write_value64(b, &ring.ack, r));
    }
    CHECK_OK(O->stream_sync(b, adag__deadline_ms(60000)));
    CHECK_OK(O->stream_sync(a, adag__deadline_ms(5000)));
    printf("test-cuda:   %llu rounds of %zu bytes in %.0f ms\n", (unsigned long long)rounds,
           ROUND_BYTES, now_ms() - t0);
    CHECK(atomic_load(ring.word.host) == rounds && atomic_load(ring.ack.host) == rounds,
          "words at %llu and %llu", (unsigned long long)atomic_load(ring.word.host),
          (unsigned long long)atomic_load(ring.ack.host));
    for (uint64_t r = 0; r < rounds; r++)
        for (size_t i = 0; i < ELEMS; i++)
            CHECK(outp[r * ELEMS + i] == element(r + 1, i),
                  "round %llu element %zu: %#x, not that round's %#x (the round before's: %#x)",
                  (unsigned long long)r + 1, i, outp[r * ELEMS + i], element(r + 1, i),
                  element(r, i));
out:
    if ((a && O->stream_sync(a, adag__deadline_ms(5000)) != ADAG_OK) ||
        (b && O->stream_sync(b, adag__deadline_ms(5000)) != ADAG_OK)) {
        O->word_store(&ring.word, ADAG_DEV_WORD_ABORT); /* never leave them stuck */
        O->word_store(&ring.ack, ADAG_DEV_WORD_ABORT);
    }
    O->stream_destroy(dev, a);
    O->stream_destroy(dev, b);
    O->host_free(dev, &src);
    O->host_free(dev, &dst);
    ring_close(dev, &ring);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    return rc;
}

/* A wait nobody satisfies: stream_sync keeps its deadline, the work behind
 * the wait does not run; the host's abort value releases it; the cyclic
 * comparison holds (a lower value does not release, a passed one does). */
int test_values_abort(adag_device_t *dev)
{
    int rc = PASS;
    ring_t ring = {.fd = -1};
    adag_dev_stream_t *s = NULL;
    static _Atomic int behind, lower, passed;
    if (!values_or_skip(dev))
        return SKIP;
    CHECK_OK(ring_open(dev, &ring));
    CHECK_OK(O->stream_create(dev, &s));
    O->word_store(&ring.word, 100);
    CHECK_OK(O->stream_wait_value64(s, &ring.word, 150));
    CHECK_OK(O->host_fn(s, set_flag, &lower));
    O->word_store(&ring.word, 120);
    CHECK(O->stream_sync(s, adag__deadline_ms(200)) == ADAG_ERR_TIMEOUT && !atomic_load(&lower),
          "120 released a wait for 150");
    O->word_store(&ring.word, 150);
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    CHECK(atomic_load(&lower), "the work behind the released wait did not run");
    O->word_store(&ring.word, 3);
    CHECK_OK(O->stream_wait_value64(s, &ring.word, UINT64_MAX)); /* 4 behind: passed */
    CHECK_OK(O->host_fn(s, set_flag, &passed));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    CHECK(atomic_load(&passed), "a wait for a passed value (cyclically) did not return");
    O->word_store(&ring.word, 0);
    CHECK_OK(O->stream_wait_value64(s, &ring.word, 1));
    CHECK_OK(O->host_fn(s, set_flag, &behind));
    double t0 = now_ms();
    adag_status_t st = O->stream_sync(s, adag__deadline_ms(300));
    double took = now_ms() - t0;
    CHECK(st == ADAG_ERR_TIMEOUT, "a stream stuck in a wait synced: %s", adag_status_str(st));
    CHECK(took < 3000, "stream_sync with a 300 ms deadline took %.0f ms", took);
    sleep_ms(100);
    CHECK(!atomic_load(&behind), "the work behind a stuck wait ran");
    O->word_store(&ring.word, ADAG_DEV_WORD_ABORT);
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    CHECK(atomic_load(&behind), "the abort value did not release the wait");
out:
    if (s) {
        if (O->stream_sync(s, adag__deadline_ms(100)) != ADAG_OK)
            O->word_store(&ring.word, ADAG_DEV_WORD_ABORT); /* never leave it stuck */
        O->stream_destroy(dev, s);
    }
    ring_close(dev, &ring);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    return rc;
}

/* Value ops captured into a graph (memory-operation nodes) and launched
 * with shifts: captured waiting on the word for 5 and writing the ack 7,
 * a launch with shift 10 waits for 15 and writes 17, 10 again the same,
 * 3 writes 10 (its wait for 8 passed), 0 writes 7 as captured. Skipped
 * with the reason where the device keeps value ops out of its graphs. */
int test_values_in_graphs(adag_device_t *dev)
{
    int rc = PASS;
    ring_t ring = {.fd = -1};
    adag_dev_stream_t *s = NULL;
    adag_dev_graph_t *g = NULL;
    static _Atomic int ran;
    if (!values_or_skip(dev))
        return SKIP;
    CHECK_OK(ring_open(dev, &ring));
    CHECK_OK(O->stream_create(dev, &s));
    O->word_store(&ring.word, 5);
    O->word_store(&ring.ack, 0);
    CHECK_OK(O->stream_capture_begin(s));
    adag_status_t w = O->stream_wait_value64(s, &ring.word, 5);
    adag_status_t st = w == ADAG_OK ? O->stream_write_value64(s, &ring.ack, 7) : w;
    char why[512];
    snprintf(why, sizeof why, "%s", adag_last_error());
    adag_status_t end = O->stream_capture_end(s, &g);
    if (st != ADAG_OK || end != ADAG_OK) {
        snprintf(skip_reason, sizeof skip_reason, "value ops in a capture: %s",
                 st != ADAG_OK ? why : adag_last_error());
        rc = SKIP;
        goto out;
    }
    CHECK_OK(O->graph_launch(g, s, 10));
    CHECK_OK(O->host_fn(s, set_flag, &ran));
    sleep_ms(100);
    CHECK(!atomic_load(&ran) && atomic_load(ring.ack.host) == 0,
          "shift 10: the wait for 15 passed at 5 (ack %llu)",
          (unsigned long long)atomic_load(ring.ack.host));
    O->word_store(&ring.word, 15);
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    CHECK(atomic_load(ring.ack.host) == 17, "shift 10 wrote %llu, want 17",
          (unsigned long long)atomic_load(ring.ack.host));
    O->word_store(&ring.ack, 0);
    CHECK_OK(O->graph_launch(g, s, 10));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    CHECK(atomic_load(ring.ack.host) == 17, "shift 10 again wrote %llu, want 17",
          (unsigned long long)atomic_load(ring.ack.host));
    CHECK_OK(O->graph_launch(g, s, 3));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    CHECK(atomic_load(ring.ack.host) == 10, "shift 3 wrote %llu, want 10",
          (unsigned long long)atomic_load(ring.ack.host));
    CHECK_OK(O->graph_launch(g, s, 0));
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    CHECK(atomic_load(ring.ack.host) == 7, "shift 0 wrote %llu, want 7",
          (unsigned long long)atomic_load(ring.ack.host));
out:
    if (g)
        O->graph_destroy(dev, g);
    if (s) {
        if (O->stream_sync(s, adag__deadline_ms(100)) != ADAG_OK)
            O->word_store(&ring.word, ADAG_DEV_WORD_ABORT); /* never leave it stuck */
        O->stream_destroy(dev, s);
    }
    ring_close(dev, &ring);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    return rc;
}

/* ---- another process writes ---- */

#define CHILD_ROUNDS 300

/* The child (`--values-child`, the ring's memfd at CHILD_FD): maps and
 * registers it; its stream copies each round into the ring and writes the
 * word, after waiting for the parent's ack of the round before; says 'k'
 * on stdout, then waits to be killed, never writing round CHILD_ROUNDS + 1. */
int values_child(void)
{
    int rc = PASS;
    who = "values child: ";
    adag_device_t *dev = NULL;
    ring_t ring = {.fd = CHILD_FD};
    adag_dev_mem_t src = {0};
    adag_dev_stream_t *s = NULL;
    CHECK_OK(O->open(0, &dev));
    CHECK(O->values_supported(dev, NULL, 0), "the parent's device has value ops, the child's not");
    CHECK_OK(ring_map(dev, &ring));
    CHECK_OK(O->host_alloc(dev, (size_t)CHILD_ROUNDS * ROUND_BYTES, &src));
    uint32_t *in = src.ptr;
    for (uint64_t r = 0; r < CHILD_ROUNDS; r++)
        for (size_t i = 0; i < ELEMS; i++)
            in[r * ELEMS + i] = element(r + 1, i);
    CHECK_OK(O->stream_create(dev, &s));
    for (uint64_t r = 1; r <= CHILD_ROUNDS; r++) {
        CHECK_OK(O->stream_wait_value64(s, &ring.ack, r - 1));
        CHECK_OK(O->copy_async(s, ring.base + DATA_OFF, in + (r - 1) * ELEMS, ROUND_BYTES));
        CHECK_OK(O->stream_write_value64(s, &ring.word, r));
    }
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(60000)));
    char done = 'k';
    CHECK(full_io(1, &done, 1, 1) == 0, "cannot tell the parent");
    for (;;)
        pause(); /* the parent kills it */
out:
    if (dev) {
        O->stream_destroy(dev, s);
        O->host_free(dev, &src);
        ring_close(dev, &ring);
        O->close(dev);
    }
    return rc;
}

/* A spawned child maps the ring's memfd, registers it and writes the word
 * round by round from its own stream (copies of its own data before each
 * write); this process's stream waits for each round, copies the ring out
 * and acks. Then it waits for a round that never comes: the child is
 * killed, and the abort value releases the wait. */
int test_values_ipc(adag_device_t *dev)
{
    int rc = PASS;
    ring_t ring = {.fd = -1};
    adag_dev_mem_t dst = {0};
    adag_dev_stream_t *s = NULL;
    adag_dev_event_t *ev = NULL;
    int from_child[2] = {-1, -1};
    pid_t pid = -1;
    static _Atomic int behind;
    if (!values_or_skip(dev))
        return SKIP;
    CHECK_OK(ring_open(dev, &ring));
    CHECK_OK(O->host_alloc(dev, (size_t)CHILD_ROUNDS * ROUND_BYTES, &dst));
    uint32_t *outp = dst.ptr;
    memset(outp, 0, (size_t)CHILD_ROUNDS * ROUND_BYTES);
    CHECK_OK(O->stream_create(dev, &s));
    CHECK_OK(O->event_create(dev, &ev));
    for (uint64_t r = 1; r <= CHILD_ROUNDS; r++) {
        CHECK_OK(O->stream_wait_value64(s, &ring.word, r));
        CHECK_OK(O->copy_async(s, outp + (r - 1) * ELEMS, ring.base + DATA_OFF, ROUND_BYTES));
        CHECK_OK(O->stream_write_value64(s, &ring.ack, r));
    }
    CHECK_OK(O->event_record(ev, s));
    CHECK_OK(O->stream_wait_value64(s, &ring.word, CHILD_ROUNDS + 1));
    CHECK_OK(O->host_fn(s, set_flag, &behind));
    CHECK(pipe2(from_child, O_CLOEXEC) == 0, "pipe2: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, ring.fd, CHILD_FD);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
    char *argv[] = {"test-cuda", "--values-child", NULL};
    int err = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    CHECK(err == 0, "posix_spawn of the child: %s", strerror(err));
    close(from_child[1]);
    from_child[1] = -1;
    CHECK_OK(O->event_sync(ev, adag__deadline_ms(60000)));
    struct pollfd p = {.fd = from_child[0], .events = POLLIN};
    char c = 0;
    CHECK(poll(&p, 1, 60000) == 1 && read(from_child[0], &c, 1) == 1 && c == 'k',
          "the child failed (its messages are above)");
    for (uint64_t r = 0; r < CHILD_ROUNDS; r++)
        for (size_t i = 0; i < ELEMS; i++)
            CHECK(outp[r * ELEMS + i] == element(r + 1, i),
                  "round %llu element %zu: %#x, not the child's %#x", (unsigned long long)r + 1,
                  i, outp[r * ELEMS + i], element(r + 1, i));
    CHECK(O->stream_sync(s, adag__deadline_ms(100)) == ADAG_ERR_TIMEOUT,
          "the wait for a round the child never writes returned");
    CHECK(kill(pid, SIGKILL) == 0, "kill: %s", strerror(errno));
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    pid = -1;
    CHECK(WIFSIGNALED(status), "the child ended by itself (status 0x%x)", status);
    sleep_ms(50);
    CHECK(!atomic_load(&behind), "the work behind the stuck wait ran");
    O->word_store(&ring.word, ADAG_DEV_WORD_ABORT);
    CHECK_OK(O->stream_sync(s, adag__deadline_ms(5000)));
    CHECK(atomic_load(&behind), "the abort value did not release the wait on a dead writer");
out:
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    for (int i = 0; i < 2; i++)
        if (from_child[i] >= 0)
            close(from_child[i]);
    if (s) {
        if (O->stream_sync(s, adag__deadline_ms(100)) != ADAG_OK)
            O->word_store(&ring.word, ADAG_DEV_WORD_ABORT); /* never leave it stuck */
        O->stream_destroy(dev, s);
    }
    O->event_destroy(dev, ev);
    O->host_free(dev, &dst);
    ring_close(dev, &ring);
    if (rc == PASS && !counts_zero(dev))
        rc = FAIL;
    return rc;
}

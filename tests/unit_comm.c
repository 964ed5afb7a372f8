/* Unit tests (suite "comm"): the communicator ops table (gpu/comm.h).
 * The tests marked COMM_TEST run over every backend (the host one always;
 * nccl where it has enough CUDA devices, else "skipped: <reason>"); the
 * others are the host backend's own: ranks in forked processes, size
 * mismatches, forged and stale ids. Every test ends with no communicator,
 * id or stream left (assert_counts_zero). */
#include "common/clock.h"
#include "gpu/comm.h"
#include "gpu/comm_host.h"
#include "gpu/comm_host_seg.h"
#include "gpu/device.h"
#include "comm_rig.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define COMM_TEST(name, tmo) COMM_TEST_IN(comm, name, tmo)

/* ---- one rank: its device, stream, staging memory and communicator ---- */

#define MAX_MSG ((size_t)3 << 20 | 4567) /* past three rings of two ranks */

typedef struct {
    const adag_comm_ops_t *ops;
    const adag_device_ops_t *d;
    adag_comm_id_t id;
    unsigned nranks, rank;
    int64_t deadline;
    adag_device_t *dev;
    adag_dev_stream_t *s;
    adag_dev_mem_t dbuf, hsend, hrecv; /* device buffer, host staging */
    adag_comm_t *comm;
    adag_status_t init_st;
    char err[512];
} rank_t;

/* Opens device `rank` of the backend's kind and a stream on it. Returns
 * nonzero (r->err says why) on failure. */
static int rank_open(rank_t *r, const adag_comm_ops_t *ops, const adag_comm_id_t *id,
                     unsigned nranks, unsigned rank, size_t buf)
{
    memset(r, 0, sizeof(*r));
    r->ops = ops;
    r->d = adag__device_backend(ops->device_kind);
    r->id = *id;
    r->nranks = nranks;
    r->rank = rank;
    r->deadline = adag__deadline_ms(20000);
    if (r->d->open(rank, &r->dev) != ADAG_OK || r->d->bind_thread(r->dev) != ADAG_OK ||
        r->d->stream_create(r->dev, &r->s) != ADAG_OK ||
        (buf && (r->d->mem_alloc(r->dev, buf, &r->dbuf) != ADAG_OK ||
                 r->d->host_alloc(r->dev, buf, &r->hsend) != ADAG_OK ||
                 r->d->host_alloc(r->dev, buf, &r->hrecv) != ADAG_OK))) {
        snprintf(r->err, sizeof(r->err), "rank %u: opening its device: %s", rank,
                 adag_last_error());
        return 1;
    }
    return 0;
}

static void rank_close(rank_t *r)
{
    if (r->comm)
        r->ops->destroy(r->comm);
    if (r->s)
        r->d->stream_destroy(r->dev, r->s);
    if (r->dbuf.ptr)
        r->d->mem_free(r->dev, &r->dbuf);
    if (r->hsend.ptr)
        r->d->host_free(r->dev, &r->hsend);
    if (r->hrecv.ptr)
        r->d->host_free(r->dev, &r->hrecv);
    if (r->dev)
        r->d->close(r->dev);
    r->comm = NULL;
    r->dev = NULL;
}

static void *rank_init_main(void *arg)
{
    rank_t *r = arg;
    r->d->bind_thread(r->dev);
    r->init_st = r->ops->init(&r->id, r->nranks, r->rank, r->dev, r->deadline, &r->comm);
    if (r->init_st != ADAG_OK)
        snprintf(r->err, sizeof(r->err), "rank %u: init: %s", r->rank, adag_last_error());
    return NULL;
}

/* Every rank inits in a thread of its own, at once (init is collective). */
static void init_all(rank_t *ranks, unsigned n)
{
    pthread_t t[8];
    for (unsigned i = 1; i < n; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, rank_init_main, &ranks[i]), 0);
    rank_init_main(&ranks[0]);
    for (unsigned i = 1; i < n; i++)
        pthread_join(t[i], NULL);
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq(ranks[i].init_st, ADAG_OK, "%s", ranks[i].err);
}

/* Two ranks on devices 0 and 1, with buf bytes of buffers each, joined;
 * the id is destroyed once both inits returned (as the contract allows). */
static void pair_up(const adag_comm_ops_t *ops, rank_t *r, size_t buf)
{
    adag_comm_id_t id;
    void *owner;
    cr_assert_eq(ops->id_create(2, &id, &owner), ADAG_OK, "%s", adag_last_error());
    for (unsigned i = 0; i < 2; i++)
        cr_assert_eq(rank_open(&r[i], ops, &id, 2, i, buf), 0, "%s", r[i].err);
    init_all(r, 2);
    ops->id_destroy(owner);
}

/* Closes both ranks and checks that nothing is left. */
static void pair_close(rank_t *r)
{
    rank_close(&r[0]);
    rank_close(&r[1]);
    assert_counts_zero();
}

/* ---- messages: sizes around the ring, bytes that say which message ---- */

static size_t msg_size(unsigned i)
{
    size_t chunk = (size_t)adag__comm_host_chunk_bytes(2);
    size_t ring = chunk * ADAG_COMM_HOST_RING_CHUNKS;
    const size_t sizes[] = {0,         1,     7,        4096,          chunk - 1, chunk,
                            chunk + 1, ring,  ring + 1, 3 * ring + 99, 100,       65536};
    size_t n = sizeof(sizes) / sizeof(sizes[0]);
    /* the multi-ring sizes one time in twelve, so 1000 messages stay quick */
    return sizes[(i * 5 + i / n) % n];
}

static unsigned char msg_byte(unsigned i, size_t off, unsigned dir)
{
    return (unsigned char)(off * 131 + (off >> 9) + i * 7 + dir * 29);
}

static void msg_fill(unsigned char *p, unsigned i, size_t size, unsigned dir)
{
    for (size_t off = 0; off < size; off++)
        p[off] = msg_byte(i, off, dir);
}

/* Nonzero (and err says where) if p is not message i of direction dir. */
static int msg_check(const unsigned char *p, unsigned i, size_t size, unsigned dir, char *err,
                     size_t len)
{
    for (size_t off = 0; off < size; off++)
        if (p[off] != msg_byte(i, off, dir)) {
            snprintf(err, len, "message %u (%zu bytes, direction %u): byte %zu is %u, not %u", i,
                     size, dir, off, p[off], msg_byte(i, off, dir));
            return 1;
        }
    return 0;
}

/* Sends message i of direction dir from the host staging buffer through
 * the device buffer, or receives it back out, on the rank's stream. */
static adag_status_t stage_send(rank_t *r, unsigned peer, unsigned i, size_t size, unsigned dir)
{
    msg_fill(r->hsend.ptr, i, size, dir);
    adag_status_t st = r->d->copy_async(r->s, r->dbuf.ptr, r->hsend.ptr, size);
    return st != ADAG_OK ? st : r->ops->send(r->comm, r->dbuf.ptr, size, peer, r->s);
}

static adag_status_t stage_recv(rank_t *r, unsigned peer, size_t size)
{
    memset(r->hrecv.ptr, 0xee, size);
    adag_status_t st = r->ops->recv(r->comm, r->dbuf.ptr, size, peer, r->s);
    return st != ADAG_OK ? st : r->d->copy_async(r->s, r->hrecv.ptr, r->dbuf.ptr, size);
}

#define PINGPONG_MESSAGES 1000

/* Rank 0 sends message i, rank 1 checks it and answers with message i of
 * the other direction, which rank 0 checks; 1000 times. Returns nonzero
 * with r->err on a failure. */
static int pingpong_rank(rank_t *r)
{
    unsigned peer = 1 - r->rank;
    for (unsigned i = 0; i < PINGPONG_MESSAGES; i++) {
        size_t size = msg_size(i);
        adag_status_t st = ADAG_OK;
        if (r->rank == 0)
            st = stage_send(r, peer, i, size, 0);
        if (st == ADAG_OK)
            st = stage_recv(r, peer, size);
        if (st == ADAG_OK)
            st = r->d->stream_sync(r->s, adag__deadline_ms(20000));
        if (st != ADAG_OK) {
            snprintf(r->err, sizeof(r->err), "rank %u, message %u: %s", r->rank, i,
                     adag_last_error());
            goto fail;
        }
        if (msg_check(r->hrecv.ptr, i, size, r->rank == 0 ? 1 : 0, r->err, sizeof(r->err)))
            goto fail;
        if (r->rank == 1 && (st = stage_send(r, peer, i, size, 1)) != ADAG_OK) {
            snprintf(r->err, sizeof(r->err), "rank 1, message %u: %s", i, adag_last_error());
            goto fail;
        }
    }
    if (r->d->stream_sync(r->s, adag__deadline_ms(20000)) != ADAG_OK) {
        snprintf(r->err, sizeof(r->err), "rank %u: final sync: %s", r->rank, adag_last_error());
        goto fail;
    }
    return 0;
fail:
    r->ops->abort(r->comm); /* the peer gives up too, rather than at its deadline */
    return 1;
}

static void *pingpong_main(void *arg)
{
    rank_t *r = arg;
    r->d->bind_thread(r->dev);
    return (void *)(intptr_t)pingpong_rank(r);
}

COMM_TEST(pingpong_threads, 120)
{
    const adag_comm_ops_t *ops = ops_or_skip(*kind, 2);
    rank_t r[2];
    pair_up(ops, r, MAX_MSG);
    pthread_t t;
    void *res;
    cr_assert_eq(pthread_create(&t, NULL, pingpong_main, &r[1]), 0);
    int failed0 = pingpong_rank(&r[0]);
    pthread_join(t, &res);
    cr_assert_eq(failed0, 0, "%s", r[0].err);
    cr_assert_eq((intptr_t)res, 0, "%s", r[1].err);
    cr_assert_eq(ops->status(r[0].comm), ADAG_OK, "%s", adag_last_error());
    pair_close(r);
}

/* Rank 1 in a child forked before it has any thread or stream: it opens
 * its own device, joins and answers; its exit code says how it went. */
Test(comm, pingpong_processes, .timeout = 120)
{
    const adag_comm_ops_t *ops = host_ops();
    adag_comm_id_t id;
    void *owner;
    rank_t r0, r1;
    cr_assert_eq(ops->id_create(2, &id, &owner), ADAG_OK, "%s", adag_last_error());
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int bad = rank_open(&r1, ops, &id, 2, 1, MAX_MSG);
        if (!bad && (r1.init_st = ops->init(&id, 2, 1, r1.dev, r1.deadline, &r1.comm)))
            snprintf(r1.err, sizeof(r1.err), "init: %s", adag_last_error()), bad = 1;
        if (!bad)
            bad = pingpong_rank(&r1);
        if (bad) {
            fprintf(stderr, "child: %s\n", r1.err);
            _exit(1);
        }
        rank_close(&r1);
        _exit(0);
    }
    cr_assert_eq(rank_open(&r0, ops, &id, 2, 0, MAX_MSG), 0, "%s", r0.err);
    cr_assert_eq(ops->init(&id, 2, 0, r0.dev, r0.deadline, &r0.comm), ADAG_OK, "%s",
                 adag_last_error());
    ops->id_destroy(owner);
    int failed = pingpong_rank(&r0);
    int status = wait_child(pid, 30000);
    cr_assert_eq(failed, 0, "%s", r0.err);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child rank failed (0x%x)",
              status);
    rank_close(&r0);
    assert_counts_zero();
}

/* ---- order ---- */

#define NQUEUED 8

/* Rank 0 enqueues 8 sends on two streams (in one order) before rank 1
 * enqueues any recv: each recv gets the message of its number. */
COMM_TEST(queued_sends_keep_their_order, 60)
{
    const adag_comm_ops_t *ops = ops_or_skip(*kind, 2);
    size_t ring = (size_t)adag__comm_host_chunk_bytes(2) * ADAG_COMM_HOST_RING_CHUNKS;
    const size_t sizes[NQUEUED] = {10, ring / 4 + 3, 0, 2 * ring + 1, 5, ring, 77, 3};
    rank_t r[2];
    adag_dev_stream_t *s_other;
    adag_dev_mem_t dsend[NQUEUED], drecv[NQUEUED], hsend[NQUEUED], hrecv[NQUEUED];
    pair_up(ops, r, 0);
    const adag_device_ops_t *d = r[0].d;
    cr_assert_eq(d->stream_create(r[0].dev, &s_other), ADAG_OK);
    for (unsigned m = 0; m < NQUEUED; m++) {
        size_t n = sizes[m] ? sizes[m] : 1;
        cr_assert_eq(d->mem_alloc(r[0].dev, n, &dsend[m]), ADAG_OK);
        cr_assert_eq(d->host_alloc(r[0].dev, n, &hsend[m]), ADAG_OK);
        cr_assert_eq(d->mem_alloc(r[1].dev, n, &drecv[m]), ADAG_OK);
        cr_assert_eq(d->host_alloc(r[1].dev, n, &hrecv[m]), ADAG_OK);
        msg_fill(hsend[m].ptr, m, sizes[m], 0);
        memset(hrecv[m].ptr, 0xee, sizes[m]);
        adag_dev_stream_t *s = m % 3 == 1 ? s_other : r[0].s;
        cr_assert_eq(d->copy_async(s, dsend[m].ptr, hsend[m].ptr, sizes[m]), ADAG_OK);
        cr_assert_eq(ops->send(r[0].comm, dsend[m].ptr, sizes[m], 1, s), ADAG_OK, "%s",
                     adag_last_error());
    }
    if (*kind == ADAG_COMM_KIND_HOST) /* NCCL may send small messages eagerly */
        cr_assert_eq(d->stream_sync(r[0].s, adag__deadline_ms(100)), ADAG_ERR_TIMEOUT,
                     "a send completed with no matching recv");
    for (unsigned m = 0; m < NQUEUED; m++) {
        cr_assert_eq(ops->recv(r[1].comm, drecv[m].ptr, sizes[m], 0, r[1].s), ADAG_OK, "%s",
                     adag_last_error());
        cr_assert_eq(d->copy_async(r[1].s, hrecv[m].ptr, drecv[m].ptr, sizes[m]), ADAG_OK);
    }
    cr_assert_eq(d->stream_sync(r[1].s, adag__deadline_ms(20000)), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(d->stream_sync(r[0].s, adag__deadline_ms(20000)), ADAG_OK);
    cr_assert_eq(d->stream_sync(s_other, adag__deadline_ms(20000)), ADAG_OK);
    cr_assert_eq(ops->status(r[1].comm), ADAG_OK, "%s", adag_last_error());
    char err[256];
    for (unsigned m = 0; m < NQUEUED; m++)
        cr_assert_eq(msg_check(hrecv[m].ptr, m, sizes[m], 0, err, sizeof(err)), 0, "recv %u: %s",
                     m, err);
    for (unsigned m = 0; m < NQUEUED; m++) {
        d->mem_free(r[0].dev, &dsend[m]);
        d->host_free(r[0].dev, &hsend[m]);
        d->mem_free(r[1].dev, &drecv[m]);
        d->host_free(r[1].dev, &hrecv[m]);
    }
    d->stream_destroy(r[0].dev, s_other);
    pair_close(r);
}

/* Like an NCCL kernel, a send occupies its stream until its recv took the
 * bytes, even one that fits the ring. */
Test(comm, a_send_waits_for_its_recv, .timeout = 30)
{
    const adag_comm_ops_t *ops = host_ops();
    rank_t r[2];
    pair_up(ops, r, 64);
    cr_assert_eq(ops->send(r[0].comm, r[0].dbuf.ptr, 64, 1, r[0].s), ADAG_OK);
    cr_assert_eq(r[0].d->stream_sync(r[0].s, adag__deadline_ms(100)), ADAG_ERR_TIMEOUT,
                 "a send completed with no matching recv");
    cr_assert_eq(ops->recv(r[1].comm, r[1].dbuf.ptr, 64, 0, r[1].s), ADAG_OK);
    for (unsigned i = 0; i < 2; i++)
        cr_assert_eq(r[i].d->stream_sync(r[i].s, adag__deadline_ms(5000)), ADAG_OK);
    pair_close(r);
}

/* ---- abort ---- */

/* A recv with no matching send (and a send queued behind it) blocks its
 * stream until the rank's communicator is aborted from another thread;
 * then the stream drains, status says ADAG_ERR_CLOSED and later
 * operations are refused. */
COMM_TEST(abort_unblocks_a_waiting_recv, 60)
{
    const adag_comm_ops_t *ops = ops_or_skip(*kind, 2);
    rank_t r[2];
    pair_up(ops, r, 4096);
    cr_assert_eq(ops->recv(r[1].comm, r[1].dbuf.ptr, 4096, 0, r[1].s), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(ops->send(r[1].comm, r[1].dbuf.ptr, 100, 0, r[1].s), ADAG_OK);
    cr_assert_eq(r[1].d->stream_sync(r[1].s, adag__deadline_ms(100)), ADAG_ERR_TIMEOUT,
                 "the recv completed with no matching send");
    cr_assert_eq(ops->status(r[1].comm), ADAG_OK, "%s", adag_last_error());
    ops->abort(r[1].comm);
    ops->abort(r[1].comm); /* idempotent */
    cr_assert_eq(r[1].d->stream_sync(r[1].s, adag__deadline_ms(5000)), ADAG_OK,
                 "the stream did not drain after abort: %s", adag_last_error());
    cr_assert_eq(ops->status(r[1].comm), ADAG_ERR_CLOSED, "%s", adag_last_error());
    cr_assert_eq(ops->send(r[1].comm, r[1].dbuf.ptr, 10, 0, r[1].s), ADAG_ERR_CLOSED);
    cr_assert_eq(r[1].d->stream_sync(r[1].s, adag__deadline_ms(5000)), ADAG_OK);
    pair_close(r);
}

/* The host communicator is one segment: rank 0's abort reaches rank 1,
 * a process of its own, whose recv gives up at once. */
Test(comm, abort_reaches_another_process, .timeout = 60)
{
    const adag_comm_ops_t *ops = host_ops();
    adag_comm_id_t id;
    void *owner;
    rank_t r0, r1;
    int sync_pipe[2];
    cr_assert_eq(ops->id_create(2, &id, &owner), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(pipe(sync_pipe), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(sync_pipe[0]);
        int code = 0;
        char queued = 'q';
        if (rank_open(&r1, ops, &id, 2, 1, 4096) ||
            ops->init(&id, 2, 1, r1.dev, r1.deadline, &r1.comm) != ADAG_OK ||
            ops->recv(r1.comm, r1.dbuf.ptr, 4096, 0, r1.s) != ADAG_OK ||
            write(sync_pipe[1], &queued, 1) != 1)
            code = 1;
        else if (r1.d->stream_sync(r1.s, adag__deadline_ms(10000)) != ADAG_OK)
            code = 2; /* the recv did not give up */
        else if (ops->status(r1.comm) != ADAG_ERR_CLOSED ||
                 !strstr(adag_last_error(), "rank 0 aborted"))
            code = 3;
        if (code) {
            fprintf(stderr, "child: code %d: %s\n", code, adag_last_error());
            _exit(code);
        }
        rank_close(&r1);
        _exit(0);
    }
    close(sync_pipe[1]);
    cr_assert_eq(rank_open(&r0, ops, &id, 2, 0, 0), 0, "%s", r0.err);
    cr_assert_eq(ops->init(&id, 2, 0, r0.dev, r0.deadline, &r0.comm), ADAG_OK, "%s",
                 adag_last_error());
    ops->id_destroy(owner);
    char c;
    cr_assert_eq(read(sync_pipe[0], &c, 1), 1, "the child could not queue its recv");
    close(sync_pipe[0]);
    sleep_ms(50); /* the child's stream is (most likely) asleep in the recv */
    ops->abort(r0.comm);
    cr_assert_eq(ops->status(r0.comm), ADAG_ERR_CLOSED);
    int status = wait_child(pid, 30000);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the child's recv did not end with ADAG_ERR_CLOSED (status 0x%x)", status);
    rank_close(&r0);
    assert_counts_zero();
}

/* Two failures at once (two ranks often detect one mismatch together):
 * the second returns only once the first one's text is complete, so a rank
 * whose wait the abort ended reads the whole text, never "its message is
 * being written". The first text formats a 64 MiB argument, which
 * vsnprintf measures whole: milliseconds, against the abort's microseconds. */
typedef struct {
    host_comm_t *c;
    const char *big;
} slow_fail_t;

static void *slow_fail_main(void *arg)
{
    slow_fail_t *a = arg;
    adag__comm_host_fail(&a->c->seg, ADAG_ERR_PROTOCOL, "the first failure %s", a->big);
    return NULL;
}

Test(comm, a_second_failure_waits_for_the_first_text, .timeout = 60)
{
    const adag_comm_ops_t *ops = host_ops();
    rank_t r[2];
    pair_up(ops, r, 64);
    size_t n = (size_t)64 << 20;
    char *big = malloc(n + 1);
    cr_assert_not_null(big);
    memset(big, 'q', n);
    big[n] = 0;
    slow_fail_t a = {(host_comm_t *)r[0].comm, big};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, slow_fail_main, &a), 0);
    /* claimed: the first failure is formatting its text now */
    while (atomic_load_explicit(&a.c->seg.h->error_code, memory_order_acquire) == 0)
        sched_yield();
    ops->abort(r[1].comm);
    cr_assert_eq(ops->status(r[1].comm), ADAG_ERR_PROTOCOL, "%s", adag_last_error());
    cr_assert(strstr(adag_last_error(), "the first failure qqqq"),
              "rank 1 read \"%s\" after its abort returned", adag_last_error());
    pthread_join(t, NULL);
    free(big);
    pair_close(r);
}

/* ---- size mismatch ---- */

static void mismatch(size_t sent, size_t received)
{
    const adag_comm_ops_t *ops = host_ops();
    rank_t r[2];
    char want[64];
    pair_up(ops, r, sent > received ? sent : received);
    cr_assert_eq(ops->send(r[0].comm, r[0].dbuf.ptr, sent, 1, r[0].s), ADAG_OK);
    cr_assert_eq(ops->recv(r[1].comm, r[1].dbuf.ptr, received, 0, r[1].s), ADAG_OK);
    for (unsigned i = 0; i < 2; i++) {
        cr_assert_eq(r[i].d->stream_sync(r[i].s, adag__deadline_ms(5000)), ADAG_OK,
                     "rank %u's stream did not drain after the mismatch", i);
        cr_assert_eq(ops->status(r[i].comm), ADAG_ERR_PROTOCOL, "rank %u: %s", i,
                     adag_last_error());
        const char *msg = adag_last_error();
        snprintf(want, sizeof(want), "rank 0 sent %zu bytes to rank 1", sent);
        cr_assert(strstr(msg, want), "rank %u: \"%s\" lacks \"%s\"", i, msg, want);
        snprintf(want, sizeof(want), "takes %zu bytes", received);
        cr_assert(strstr(msg, want), "rank %u: \"%s\" lacks \"%s\"", i, msg, want);
    }
    /* broken: later operations are refused with the same status */
    cr_assert_eq(ops->send(r[0].comm, r[0].dbuf.ptr, 1, 1, r[0].s), ADAG_ERR_PROTOCOL);
    ops->abort(r[1].comm); /* the first error stays */
    cr_assert_eq(ops->status(r[0].comm), ADAG_ERR_PROTOCOL);
    pair_close(r);
}

Test(comm, size_mismatch_breaks_both_ranks, .timeout = 60)
{
    mismatch(1000, 999);
}

Test(comm, size_mismatch_of_multi_ring_messages, .timeout = 60)
{
    size_t ring = (size_t)adag__comm_host_chunk_bytes(2) * ADAG_COMM_HOST_RING_CHUNKS;
    mismatch(3 * ring, 3 * ring + 1);
}

Test(comm, empty_message_against_a_nonempty_recv, .timeout = 60)
{
    mismatch(0, 8);
}

/* ---- init ---- */

/* Rank 1 never joins: rank 0's init fails with ADAG_ERR_TIMEOUT at (not
 * before) its deadline. */
COMM_TEST(init_times_out_without_every_rank, 60)
{
    const adag_comm_ops_t *ops = ops_or_skip(*kind, 1);
    adag_comm_id_t id;
    void *owner;
    rank_t r0;
    cr_assert_eq(ops->id_create(2, &id, &owner), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(rank_open(&r0, ops, &id, 2, 0, 0), 0, "%s", r0.err);
    r0.deadline = adag__deadline_ms(200);
    cr_assert_eq(ops->init(&id, 2, 0, r0.dev, r0.deadline, &r0.comm), ADAG_ERR_TIMEOUT, "%s",
                 adag_last_error());
    cr_assert_geq(adag__now_ns(), r0.deadline, "init gave up before its deadline");
    cr_assert_lt(adag__now_ns(), r0.deadline + (int64_t)10000 * 1000000,
                 "init went on long past its deadline");
    cr_assert_null(r0.comm);
    ops->id_destroy(owner);
    rank_close(&r0);
    assert_counts_zero();
}

/* Three ranks, two join: both time out, and the message names rank 2.
 * Rank 1, whose own deadline is far, gives up with rank 0. */
Test(comm, init_timeout_names_the_missing_rank, .timeout = 60)
{
    const adag_comm_ops_t *ops = host_ops();
    adag_comm_id_t id;
    void *owner;
    rank_t r[2];
    pthread_t t;
    cr_assert_eq(ops->id_create(3, &id, &owner), ADAG_OK, "%s", adag_last_error());
    for (unsigned i = 0; i < 2; i++) {
        cr_assert_eq(rank_open(&r[i], ops, &id, 3, i, 0), 0, "%s", r[i].err);
        r[i].deadline = adag__deadline_ms(i == 0 ? 300 : 20000);
    }
    cr_assert_eq(pthread_create(&t, NULL, rank_init_main, &r[1]), 0);
    rank_init_main(&r[0]);
    pthread_join(t, NULL);
    for (unsigned i = 0; i < 2; i++) {
        cr_assert_eq(r[i].init_st, ADAG_ERR_TIMEOUT, "rank %u: %s", i, r[i].err);
        cr_assert(strstr(r[i].err, "rank(s) 2 of 3"), "rank %u: %s", i, r[i].err);
    }
    cr_assert_lt(adag__now_ns(), r[1].deadline, "rank 1 waited for its own deadline");
    ops->id_destroy(owner);
    rank_close(&r[0]);
    rank_close(&r[1]);
    assert_counts_zero();
}

/* A rank number taken twice is refused at once, and leaves the
 * communicator working. */
Test(comm, a_rank_joins_once, .timeout = 60)
{
    const adag_comm_ops_t *ops = host_ops();
    adag_comm_id_t id;
    void *owner;
    rank_t r[2], dup;
    cr_assert_eq(ops->id_create(2, &id, &owner), ADAG_OK, "%s", adag_last_error());
    for (unsigned i = 0; i < 2; i++)
        cr_assert_eq(rank_open(&r[i], ops, &id, 2, i, 64), 0, "%s", r[i].err);
    cr_assert_eq(rank_open(&dup, ops, &id, 2, 0, 0), 0, "%s", dup.err);
    init_all(r, 2);
    cr_assert_eq(ops->init(&id, 2, 0, dup.dev, adag__deadline_ms(5000), &dup.comm),
                 ADAG_ERR_PROTOCOL, "%s", adag_last_error());
    cr_assert(strstr(adag_last_error(), "rank 0 already joined"), "%s", adag_last_error());
    cr_assert_null(dup.comm);
    ops->id_destroy(owner);
    cr_assert_eq(ops->send(r[0].comm, r[0].dbuf.ptr, 64, 1, r[0].s), ADAG_OK);
    cr_assert_eq(ops->recv(r[1].comm, r[1].dbuf.ptr, 64, 0, r[1].s), ADAG_OK);
    for (unsigned i = 0; i < 2; i++)
        cr_assert_eq(r[i].d->stream_sync(r[i].s, adag__deadline_ms(5000)), ADAG_OK);
    cr_assert_eq(ops->status(r[1].comm), ADAG_OK, "%s", adag_last_error());
    rank_close(&dup);
    rank_close(&r[0]);
    rank_close(&r[1]);
    assert_counts_zero();
}

/* ---- ids ---- */

/* init with an id or parameters that do not fit: refused at once. */
Test(comm, malformed_ids_are_refused, .timeout = 30)
{
    const adag_comm_ops_t *ops = host_ops();
    adag_comm_id_t id, bad;
    adag_comm_host_id_t hid;
    void *owner;
    rank_t r;
    cr_assert_eq(ops->id_create(2, &id, &owner), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(id.len, sizeof(hid));
    cr_assert_eq(rank_open(&r, ops, &id, 2, 0, 0), 0, "%s", r.err);
    int64_t soon = adag__deadline_ms(5000);

    bad = id;
    bad.len = 3;
    cr_assert_eq(ops->init(&bad, 2, 0, r.dev, soon, &r.comm), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(adag_last_error(), "malformed id"), "%s", adag_last_error());

    bad = id;
    memcpy(&hid, bad.bytes, sizeof(hid));
    hid.magic ^= 1;
    memcpy(bad.bytes, &hid, sizeof(hid));
    cr_assert_eq(ops->init(&bad, 2, 0, r.dev, soon, &r.comm), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(adag_last_error(), "magic"), "%s", adag_last_error());

    bad = id;
    memcpy(&hid, bad.bytes, sizeof(hid));
    hid.segment.magic = 0;
    memcpy(bad.bytes, &hid, sizeof(hid));
    cr_assert_eq(ops->init(&bad, 2, 0, r.dev, soon, &r.comm), ADAG_ERR_PROTOCOL);

    cr_assert_eq(ops->init(&id, 3, 0, r.dev, soon, &r.comm), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(adag_last_error(), "for 2 ranks, not 3"), "%s", adag_last_error());

    /* an id that claims 3 ranks for the 2-rank segment: the sizes differ */
    bad = id;
    memcpy(&hid, bad.bytes, sizeof(hid));
    hid.nranks = 3;
    memcpy(bad.bytes, &hid, sizeof(hid));
    cr_assert_eq(ops->init(&bad, 3, 0, r.dev, soon, &r.comm), ADAG_ERR_PROTOCOL);

    cr_assert_eq(ops->init(&id, 2, 2, r.dev, soon, &r.comm), ADAG_ERR_INVALID);
    cr_assert_eq(ops->id_create(0, &bad, &owner), ADAG_ERR_INVALID);
    cr_assert_eq(ops->id_create(ADAG_COMM_MAX_RANKS + 1, &bad, &owner), ADAG_ERR_INVALID);
    cr_assert_null(r.comm);
    ops->id_destroy(owner);
    rank_close(&r);
    assert_counts_zero();
}

/* An id names the driver's memfd: once id_destroy closed it (and another
 * memfd took its number), or once its process is gone, init refuses it
 * rather than mapping something else. */
Test(comm, stale_ids_are_refused, .timeout = 30)
{
    const adag_comm_ops_t *ops = host_ops();
    adag_comm_id_t old_id, new_id, dead;
    adag_comm_host_id_t old_hid, new_hid, hid;
    void *old_owner, *new_owner;
    rank_t r;
    cr_assert_eq(ops->id_create(2, &old_id, &old_owner), ADAG_OK, "%s", adag_last_error());
    ops->id_destroy(old_owner);
    cr_assert_eq(ops->id_create(2, &new_id, &new_owner), ADAG_OK, "%s", adag_last_error());
    memcpy(&old_hid, old_id.bytes, sizeof(old_hid));
    memcpy(&new_hid, new_id.bytes, sizeof(new_hid));
    cr_assert_eq(old_hid.segment.fd, new_hid.segment.fd, "the fd number was not reused");
    cr_assert_eq(rank_open(&r, ops, &old_id, 2, 0, 0), 0, "%s", r.err);
    cr_assert_eq(ops->init(&old_id, 2, 0, r.dev, adag__deadline_ms(5000), &r.comm),
                 ADAG_ERR_PROTOCOL, "%s", adag_last_error());
    cr_assert(strstr(adag_last_error(), "not that memfd any more"), "%s", adag_last_error());

    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    dead = new_id;
    memcpy(&hid, dead.bytes, sizeof(hid));
    hid.segment.pid = pid;
    memcpy(dead.bytes, &hid, sizeof(hid));
    cr_assert_eq(ops->init(&dead, 2, 0, r.dev, adag__deadline_ms(5000), &r.comm), ADAG_ERR_IO);
    cr_assert(strstr(adag_last_error(), "/proc/"), "%s", adag_last_error());
    cr_assert_null(r.comm);
    ops->id_destroy(new_owner);
    rank_close(&r);
    assert_counts_zero();
}

/* ---- the table ---- */

Test(comm, backends_by_kind_name_and_device)
{
    const adag_comm_ops_t *host = adag__comm_backend(ADAG_COMM_KIND_HOST);
    const adag_comm_ops_t *nccl = adag__comm_backend(ADAG_COMM_KIND_NCCL);
    cr_assert(host && nccl);
    cr_assert_str_eq(host->name, "host");
    cr_assert_str_eq(nccl->name, "nccl");
    cr_assert_eq(host->kind, ADAG_COMM_KIND_HOST);
    cr_assert_eq(nccl->kind, ADAG_COMM_KIND_NCCL);
    cr_assert_null(adag__comm_backend(ADAG_COMM_KIND_COUNT));
    cr_assert_eq(adag__comm_backend_named("host"), host);
    cr_assert_eq(adag__comm_backend_named("nccl"), nccl);
    cr_assert_null(adag__comm_backend_named("gloo"));
    cr_assert_null(adag__comm_backend_named(NULL));
    cr_assert_eq(adag__comm_backend_for_device(ADAG_DEV_EMULATED), host);
    cr_assert_eq(adag__comm_backend_for_device(ADAG_DEV_CUDA), nccl);
    cr_assert_null(adag__comm_backend_for_device(ADAG_DEVICE_KIND_COUNT));
    char why[256] = "";
    cr_assert_eq(host->probe(why, sizeof(why)), 1, "%s", why);
}

/* ---- nccl without a GPU (CI): probe says why, nothing is created ---- */

Test(comm, nccl_probe_says_why)
{
    const adag_comm_ops_t *nccl = adag__comm_backend(ADAG_COMM_KIND_NCCL);
    const adag_device_ops_t *cuda = adag__device_backend(ADAG_DEV_CUDA);
    char why[512] = "", cuda_why[512] = "";
    int usable = nccl->probe(why, sizeof(why));
    cr_assert(why[0], "probe said nothing");
    if (cuda->probe(cuda_why, sizeof(cuda_why)) > 0)
        cr_skip_test("skipped: a CUDA device is here (%s); nccl: %s", cuda_why, why);
    cr_assert_eq(usable, 0, "nccl usable without a CUDA device: %s", why);
    adag_comm_id_t id;
    void *owner = &owner;
    cr_assert_eq(nccl->id_create(2, &id, &owner), ADAG_ERR_NOT_FOUND);
    cr_assert_null(owner);
    cr_assert(strstr(adag_last_error(), why), "id_create does not say why: %s (probe: %s)",
              adag_last_error(), why);
    assert_counts_zero();
}

/* Criterion runs each test in a process of its own: the setting is read anew. */
Test(comm, nccl_path_that_does_not_load_is_named)
{
    cr_assert_eq(setenv("ADAG_NCCL_PATH", "/nonexistent/libnccl.so.2", 1), 0);
    char why[512] = "";
    cr_assert_eq(adag__comm_backend(ADAG_COMM_KIND_NCCL)->probe(why, sizeof(why)), 0);
    if (strncmp(why, "not built", 9) == 0)
        cr_skip_test("skipped: %s", why);
    cr_assert(strstr(why, "/nonexistent/libnccl.so.2") && strstr(why, "ADAG_NCCL_PATH"), "%s",
              why);
}

/* Unit tests (suite "comm_coll"): the communicators' collectives
 * (gpu/comm.h: allreduce, allgather, reducescatter, broadcast) over every
 * backend (COMM_TEST_IN; nccl skips without enough CUDA devices), ranks in
 * threads and in forked processes, against the reference of
 * tests/comm_coll_ref.h (each element reduced in rank order). The host backend
 * must match it bit for bit; NCCL integers exactly, NCCL floats within
 * FLOAT_TOLERANCE (relative) since NCCL's order of reduction is its own.
 * Every test ends with no communicator, id or stream left. */
#include "gpu/comm.h"
#include "gpu/comm_host.h"
#include "gpu/device.h"
#include "comm_coll_rank.h"
#include "comm_coll_ref.h"
#include "comm_rig.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMM_TEST(name, tmo) COMM_TEST_IN(comm_coll, name, tmo)

/* ---- the matrix ---- */

static const adag_dtype_t dtypes[] = {ADAG_DTYPE_U8,  ADAG_DTYPE_I8,   ADAG_DTYPE_I16,
                                      ADAG_DTYPE_I32, ADAG_DTYPE_I64,  ADAG_DTYPE_F16,
                                      ADAG_DTYPE_BF16, ADAG_DTYPE_F32, ADAG_DTYPE_F64,
                                      ADAG_DTYPE_BOOL};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))
/* 0, 1, odd, not divisible by 2..5, and past the flat allreduce */
static const size_t counts[] = {0, 1, 37, 1001, 5003};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

/* Whether the backend reduces dtype with op (NCCL: no i16, no bool). */
static int reducible(uint32_t kind, adag_dtype_t dtype, adag_reduce_op_t op)
{
    if (dtype == ADAG_DTYPE_BOOL && op == ADAG_REDUCE_AVG)
        return 0;
    return kind != ADAG_COMM_KIND_NCCL || (dtype != ADAG_DTYPE_I16 && dtype != ADAG_DTYPE_BOOL);
}

/* Every collective x op x dtype x count for n ranks (in place every other
 * time, roots in turn); *ncalls set. The caller frees. */
static call_t *matrix(uint32_t kind, unsigned n, size_t *ncalls)
{
    call_t *calls = calloc(NKINDS * 5 * NDTYPES * NCOUNTS, sizeof(*calls));
    size_t k = 0;
    cr_assert_not_null(calls);
    for (int c = 0; c < NKINDS; c++)
        for (int op = 0; op < 5; op++) {
            if ((c == ALLGATHER || c == BROADCAST) && op > 0)
                continue; /* no op */
            for (size_t d = 0; d < NDTYPES; d++) {
                if ((c == ALLREDUCE || c == REDUCESCATTER) &&
                    !reducible(kind, dtypes[d], (adag_reduce_op_t)op))
                    continue;
                for (size_t i = 0; i < NCOUNTS; i++, k++)
                    calls[k] = (call_t){c, dtypes[d], (adag_reduce_op_t)op, counts[i],
                                        (unsigned)(k % n), (int)(k % 2), (unsigned)k};
            }
        }
    *ncalls = k;
    return calls;
}

static void matrix_in_threads(uint32_t kind, unsigned n)
{
    const adag_comm_ops_t *ops = ops_or_skip(kind, n);
    size_t ncalls;
    call_t *calls = matrix(kind, n, &ncalls);
    run_in_threads(ops, n, calls, ncalls, 5003 * 8 * n);
    free(calls);
}

/* Host devices for 5 ranks (Criterion runs each test in a process of its
 * own: the setting is read anew). */
static void more_host_devices(void)
{
    cr_assert_eq(setenv("ADAG_EMU_DEVICES", "8", 1), 0);
}

/* One rank (a TP-1 group): every collective is a copy of its input, and
 * on one GPU the only NCCL communicator there is (NCCL refuses two ranks
 * on one device). */
COMM_TEST(matrix_1_rank, 120)
{
    matrix_in_threads(*kind, 1);
}

COMM_TEST(matrix_2_ranks, 120)
{
    matrix_in_threads(*kind, 2);
}

COMM_TEST(matrix_3_ranks, 120)
{
    matrix_in_threads(*kind, 3);
}

COMM_TEST(matrix_4_ranks, 120)
{
    matrix_in_threads(*kind, 4);
}

COMM_TEST(matrix_5_ranks, 120)
{
    more_host_devices();
    matrix_in_threads(*kind, 5);
}

/* ---- sizes past the collective area ---- */

/* 9 MiB and odd sizes over several slots: allreduce (pipelined), the
 * others (flat), 3 ranks, a few dtypes. */
COMM_TEST(larger_than_the_collective_area, 240)
{
    const adag_comm_ops_t *ops = ops_or_skip(*kind, 3);
    size_t slot = (size_t)adag__comm_host_slot_bytes(3);
    size_t big = ((size_t)9 << 20) / 4 + 3; /* f32 elements: 9 MiB and a bit */
    const call_t calls[] = {
        {ALLREDUCE, ADAG_DTYPE_F32, ADAG_REDUCE_SUM, big, 0, 0, 1},
        {ALLREDUCE, ADAG_DTYPE_BF16, ADAG_REDUCE_AVG, slot + 1, 0, 1, 2},
        {ALLREDUCE, ADAG_DTYPE_I64, ADAG_REDUCE_PROD, 3 * slot / 8 - 1, 0, 0, 3},
        {ALLREDUCE, ADAG_DTYPE_U8, ADAG_REDUCE_MAX, 2 * slot + 5, 0, 1, 4},
        {REDUCESCATTER, ADAG_DTYPE_F64, ADAG_REDUCE_SUM, slot / 8 + 77, 0, 0, 5},
        {REDUCESCATTER, ADAG_DTYPE_F16, ADAG_REDUCE_MIN, slot, 0, 1, 6},
        {ALLGATHER, ADAG_DTYPE_I32, ADAG_REDUCE_SUM, slot / 2 + 9, 0, 1, 7},
        {BROADCAST, ADAG_DTYPE_I16, ADAG_REDUCE_SUM, slot + 11, 2, 0, 8},
        {BROADCAST, ADAG_DTYPE_F32, ADAG_REDUCE_SUM, big, 1, 1, 9},
    };
    run_in_threads(ops, 3, calls, sizeof(calls) / sizeof(calls[0]), big * 4 * 3 + 64);
}

/* ---- ranks in processes ---- */

/* 4 ranks: 1..3 forked children (each before it has any thread), rank 0
 * here; every rank runs the 4-rank matrix at the odd counts and a call past
 * the area; a child's exit code says how it went. */
Test(comm_coll, ranks_in_processes, .timeout = 240)
{
    const adag_comm_ops_t *ops = host_ops();
    enum { N = 4 };
    size_t ncalls;
    call_t *all = matrix(ADAG_COMM_KIND_HOST, N, &ncalls), *calls = calloc(ncalls + 1, sizeof(*calls));
    size_t k = 0;
    for (size_t i = 0; i < ncalls; i++)
        if (all[i].count == 37 || all[i].count == 5003 || i % 7 == 0)
            calls[k++] = all[i];
    calls[k++] = (call_t){ALLREDUCE, ADAG_DTYPE_F32, ADAG_REDUCE_SUM,
                          (size_t)adag__comm_host_slot_bytes(N) + 1001, 0, 0, 77};
    size_t cap = ((size_t)adag__comm_host_slot_bytes(N) + 1001) * 4 + 5003 * 8 * N;
    adag_comm_id_t id;
    void *owner;
    pid_t pid[N];
    cr_assert_eq(ops->id_create(N, &id, &owner), ADAG_OK, "%s", adag_last_error());
    for (unsigned i = 1; i < N; i++) {
        pid[i] = fork();
        cr_assert_geq(pid[i], 0);
        if (pid[i] == 0) {
            rank_t r;
            int bad = rank_open(&r, ops, &id, N, i, cap);
            r.calls = calls;
            r.ncalls = k;
            if (!bad)
                bad = rank_main(&r) != NULL;
            if (bad) {
                fprintf(stderr, "child rank %u: %s\n", i, r.err);
                _exit(1);
            }
            rank_close(&r);
            _exit(0);
        }
    }
    rank_t r0;
    cr_assert_eq(rank_open(&r0, ops, &id, N, 0, cap), 0, "%s", r0.err);
    r0.calls = calls;
    r0.ncalls = k;
    int failed = rank_main(&r0) != NULL;
    ops->id_destroy(owner);
    for (unsigned i = 1; i < N; i++) {
        int status = wait_child(pid[i], 60000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child rank %u failed (0x%x)",
                  i, status);
    }
    cr_assert_eq(failed, 0, "%s", r0.err);
    rank_close(&r0);
    free(calls);
    free(all);
    assert_counts_zero();
}

/* ---- order ---- */

/* 3 ranks in threads run one sequence: allreduce, a ring of send/recv,
 * broadcast, another ring, allgather, reducescatter; every result checked. */
static void *mixed_main(void *arg)
{
    rank_t *r = arg;
    unsigned n = r->nranks, next = (r->rank + 1) % n, prev = (r->rank + n - 1) % n;
    static const call_t calls[] = {
        {ALLREDUCE, ADAG_DTYPE_I32, ADAG_REDUCE_SUM, 1001, 0, 0, 11},
        {BROADCAST, ADAG_DTYPE_F32, ADAG_REDUCE_SUM, 300, 1, 0, 12},
        {ALLGATHER, ADAG_DTYPE_U8, ADAG_REDUCE_SUM, 77, 0, 0, 13},
        {REDUCESCATTER, ADAG_DTYPE_F64, ADAG_REDUCE_MAX, 50, 0, 0, 14},
    };
    r->d->bind_thread(r->dev);
    for (unsigned i = 0; i < 4; i++) {
        if (run_call(r, &calls[i]))
            goto fail;
        if (i % 2 == 1)
            continue;
        /* a ring: send 100 bytes of (rank, i) to next, receive prev's */
        unsigned char *h = r->hbuf.ptr;
        memset(h, (int)(r->rank * 16 + i), 100);
        adag_status_t st = r->d->copy_async(r->s, r->dsend.ptr, h, 100);
        if (st == ADAG_OK)
            st = r->rank % 2 ? r->ops->recv(r->comm, r->drecv.ptr, 100, prev, r->s)
                             : r->ops->send(r->comm, r->dsend.ptr, 100, next, r->s);
        if (st == ADAG_OK)
            st = r->rank % 2 ? r->ops->send(r->comm, r->dsend.ptr, 100, next, r->s)
                             : r->ops->recv(r->comm, r->drecv.ptr, 100, prev, r->s);
        if (st == ADAG_OK)
            st = r->d->copy_async(r->s, h, r->drecv.ptr, 100);
        if (st == ADAG_OK)
            st = r->d->stream_sync(r->s, adag__deadline_ms(30000));
        if (st != ADAG_OK || h[0] != prev * 16 + i || h[99] != prev * 16 + i) {
            snprintf(r->err, sizeof(r->err), "rank %u: ring after call %u: %s (byte 0x%x)",
                     r->rank, i, adag_last_error(), h[0]);
            goto fail;
        }
    }
    return NULL;
fail:
    r->ops->abort(r->comm);
    return (void *)1;
}

COMM_TEST(collectives_and_send_recv_in_one_order, 60)
{
    const adag_comm_ops_t *ops = ops_or_skip(*kind, 3);
    rank_t r[3];
    pthread_t t[3];
    void *res[3];
    open_all(ops, 3, 64 << 10, r);
    for (unsigned i = 0; i < 3; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, mixed_main, &r[i]), 0);
    for (unsigned i = 0; i < 3; i++)
        pthread_join(t[i], &res[i]);
    for (unsigned i = 0; i < 3; i++)
        cr_assert_null(res[i], "%s", r[i].err);
    close_all(r, 3);
}

/* Rank 0 enqueues collective A on stream 1, then B on stream 2 (which
 * run concurrently); rank 1 enqueues both on one stream: the n-th call of
 * each rank is matched with the other's n-th (A and B differ in count, so
 * a swap would be a mismatch), and both results are right. */
COMM_TEST(collectives_on_two_streams_keep_their_order, 60)
{
    const adag_comm_ops_t *ops = ops_or_skip(*kind, 2);
    rank_t r[2];
    adag_dev_stream_t *s2;
    adag_dev_mem_t dB, hB[2];
    open_all(ops, 2, 1 << 20, r);
    const adag_device_ops_t *d = r[0].d;
    cr_assert_eq(d->stream_create(r[0].dev, &s2), ADAG_OK);
    cr_assert_eq(d->mem_alloc(r[0].dev, 4096, &dB), ADAG_OK);
    for (unsigned i = 0; i < 2; i++) {
        cr_assert_eq(d->host_alloc(r[i].dev, 4096, &hB[i]), ADAG_OK);
        for (unsigned j = 0; j < 1024; j++)
            ((int32_t *)hB[i].ptr)[j] = (int32_t)(j + 1000 * i);
        for (unsigned j = 0; j < 100000; j++)
            ((int32_t *)r[i].hbuf.ptr)[j] = (int32_t)(j * 3 + i);
    }
    /* rank 0: A (100000 elements) on its stream, B (1024) on s2 */
    cr_assert_eq(d->copy_async(r[0].s, r[0].dsend.ptr, r[0].hbuf.ptr, 400000), ADAG_OK);
    cr_assert_eq(ops->allreduce(r[0].comm, r[0].dsend.ptr, r[0].drecv.ptr, 100000,
                                ADAG_DTYPE_I32, ADAG_REDUCE_SUM, r[0].s), ADAG_OK);
    cr_assert_eq(d->copy_async(s2, dB.ptr, hB[0].ptr, 4096), ADAG_OK);
    cr_assert_eq(ops->allreduce(r[0].comm, dB.ptr, dB.ptr, 1024, ADAG_DTYPE_I32,
                                ADAG_REDUCE_SUM, s2), ADAG_OK);
    cr_assert_eq(d->copy_async(s2, hB[0].ptr, dB.ptr, 4096), ADAG_OK);
    cr_assert_eq(d->copy_async(r[0].s, r[0].hbuf.ptr, r[0].drecv.ptr, 400000), ADAG_OK);
    /* rank 1: both on one stream, B's buffer in recv past A's */
    unsigned char *B1 = (unsigned char *)r[1].drecv.ptr + 400000;
    cr_assert_eq(d->copy_async(r[1].s, r[1].dsend.ptr, r[1].hbuf.ptr, 400000), ADAG_OK);
    cr_assert_eq(ops->allreduce(r[1].comm, r[1].dsend.ptr, r[1].drecv.ptr, 100000,
                                ADAG_DTYPE_I32, ADAG_REDUCE_SUM, r[1].s), ADAG_OK);
    cr_assert_eq(d->copy_async(r[1].s, B1, hB[1].ptr, 4096), ADAG_OK);
    cr_assert_eq(ops->allreduce(r[1].comm, B1, B1, 1024, ADAG_DTYPE_I32, ADAG_REDUCE_SUM,
                                r[1].s), ADAG_OK);
    cr_assert_eq(d->copy_async(r[1].s, hB[1].ptr, B1, 4096), ADAG_OK);
    cr_assert_eq(d->copy_async(r[1].s, r[1].hbuf.ptr, r[1].drecv.ptr, 400000), ADAG_OK);
    cr_assert_eq(d->stream_sync(r[0].s, adag__deadline_ms(30000)), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(d->stream_sync(s2, adag__deadline_ms(30000)), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(d->stream_sync(r[1].s, adag__deadline_ms(30000)), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(ops->status(r[0].comm), ADAG_OK, "%s", adag_last_error());
    for (unsigned i = 0; i < 2; i++) {
        for (unsigned j = 0; j < 100000; j++)
            cr_assert_eq(((int32_t *)r[i].hbuf.ptr)[j], (int32_t)(j * 6 + 1), "rank %u A[%u]", i, j);
        for (unsigned j = 0; j < 1024; j++)
            cr_assert_eq(((int32_t *)hB[i].ptr)[j], (int32_t)(2 * j + 1000), "rank %u B[%u]", i, j);
    }
    d->mem_free(r[0].dev, &dB);
    for (unsigned i = 0; i < 2; i++)
        d->host_free(r[i].dev, &hB[i]);
    d->stream_destroy(r[0].dev, s2);
    close_all(r, 2);
}

/* ---- mismatches ---- */

/* 3 ranks: ranks 0 and 1 call `same`, rank 2 calls `odd`: every rank's
 * stream drains, status is ADAG_ERR_PROTOCOL naming both calls. */
static void mismatch(const call_t *same, const call_t *odd, const char *want0,
                     const char *want2)
{
    const adag_comm_ops_t *ops = host_ops();
    rank_t r[3];
    open_all(ops, 3, 64 << 10, r);
    for (unsigned i = 0; i < 3; i++)
        cr_assert_eq(enqueue_call(&r[i], i == 2 ? odd : same, r[i].dsend.ptr, r[i].drecv.ptr),
                     ADAG_OK, "%s", adag_last_error());
    for (unsigned i = 0; i < 3; i++) {
        cr_assert_eq(r[i].d->stream_sync(r[i].s, adag__deadline_ms(10000)), ADAG_OK,
                     "rank %u's stream did not drain after the mismatch", i);
        cr_assert_eq(ops->status(r[i].comm), ADAG_ERR_PROTOCOL, "rank %u: %s", i,
                     adag_last_error());
        const char *msg = adag_last_error();
        cr_assert(strstr(msg, want0) && strstr(msg, want2) && strstr(msg, "rank 2"),
                  "rank %u: \"%s\" lacks \"%s\" or \"%s\"", i, msg, want0, want2);
    }
    /* broken: later calls are refused with the same status */
    cr_assert_eq(enqueue_call(&r[0], same, r[0].dsend.ptr, r[0].drecv.ptr), ADAG_ERR_PROTOCOL);
    close_all(r, 3);
}

Test(comm_coll, count_mismatch, .timeout = 60)
{
    call_t a = {ALLREDUCE, ADAG_DTYPE_F32, ADAG_REDUCE_SUM, 100, 0, 0, 0}, b = a;
    b.count = 99;
    mismatch(&a, &b, "allreduce(count 100, f32, sum)", "allreduce(count 99, f32, sum)");
}

Test(comm_coll, op_mismatch, .timeout = 60)
{
    call_t a = {REDUCESCATTER, ADAG_DTYPE_I32, ADAG_REDUCE_MAX, 1000, 0, 0, 0}, b = a;
    b.op = ADAG_REDUCE_MIN;
    mismatch(&a, &b, "reducescatter(count 1000, i32, max)", "reducescatter(count 1000, i32, min)");
}

Test(comm_coll, dtype_mismatch, .timeout = 60)
{
    call_t a = {ALLREDUCE, ADAG_DTYPE_F32, ADAG_REDUCE_SUM, 8000, 0, 0, 0}, b = a;
    b.dtype = ADAG_DTYPE_I32;
    mismatch(&a, &b, "allreduce(count 8000, f32, sum)", "allreduce(count 8000, i32, sum)");
}

Test(comm_coll, root_mismatch, .timeout = 60)
{
    call_t a = {BROADCAST, ADAG_DTYPE_U8, ADAG_REDUCE_SUM, 10, 1, 0, 0}, b = a;
    b.root = 2;
    mismatch(&a, &b, "broadcast(count 10, u8, root 1)", "broadcast(count 10, u8, root 2)");
}

Test(comm_coll, kind_mismatch, .timeout = 60)
{
    call_t a = {ALLGATHER, ADAG_DTYPE_I8, ADAG_REDUCE_SUM, 5, 0, 0, 0}, b = a;
    b.kind = BROADCAST;
    mismatch(&a, &b, "allgather(count 5, i8)", "broadcast(count 5, i8, root 0)");
}

/* ---- abort and a rank that dies ---- */

/* Ranks 0 and 1 of 3 call allreduce; rank 2 never does: their streams hold
 * until rank 1's communicator is aborted from this thread, then drain;
 * status ADAG_ERR_CLOSED on every rank. */
COMM_TEST(abort_mid_collective, 60)
{
    const adag_comm_ops_t *ops = ops_or_skip(*kind, 3);
    rank_t r[3];
    call_t c = {ALLREDUCE, ADAG_DTYPE_F32, ADAG_REDUCE_SUM, 200000, 0, 0, 0};
    open_all(ops, 3, 1 << 20, r);
    for (unsigned i = 0; i < 2; i++)
        cr_assert_eq(enqueue_call(&r[i], &c, r[i].dsend.ptr, r[i].drecv.ptr), ADAG_OK);
    for (unsigned i = 0; i < 2; i++)
        cr_assert_eq(r[i].d->stream_sync(r[i].s, adag__deadline_ms(100)), ADAG_ERR_TIMEOUT,
                     "rank %u's allreduce completed without rank 2", i);
    ops->abort(r[1].comm);
    for (unsigned i = 0; i < 2; i++) {
        cr_assert_eq(r[i].d->stream_sync(r[i].s, adag__deadline_ms(10000)), ADAG_OK,
                     "rank %u's stream did not drain after abort", i);
        if (*kind == ADAG_COMM_KIND_HOST) /* NCCL's abort covers the calling rank only */
            cr_assert_eq(ops->status(r[i].comm), ADAG_ERR_CLOSED, "%s", adag_last_error());
    }
    cr_assert_eq(ops->status(r[1].comm), ADAG_ERR_CLOSED);
    for (unsigned i = 0; i < 3; i++)
        ops->abort(r[i].comm);
    close_all(r, 3);
}

/* Rank 1 of 3, a forked child, joins and is killed (SIGKILL) before its
 * allreduce; ranks 0 and 2 (threads here) hold in theirs until this thread
 * aborts, as the watchdog would; then they drain, ADAG_ERR_CLOSED. */
Test(comm_coll, a_rank_that_dies, .timeout = 60)
{
    const adag_comm_ops_t *ops = host_ops();
    adag_comm_id_t id;
    void *owner;
    rank_t r[3];
    int ready[2];
    call_t c = {ALLREDUCE, ADAG_DTYPE_F64, ADAG_REDUCE_SUM, 300000, 0, 0, 0};
    cr_assert_eq(ops->id_create(3, &id, &owner), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(pipe(ready), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        rank_t child;
        close(ready[0]);
        if (rank_open(&child, ops, &id, 3, 1, 64) || rank_join(&child) != ADAG_OK)
            _exit(1);
        char b = 'j';
        if (write(ready[1], &b, 1) != 1)
            _exit(2);
        pause(); /* until killed */
        _exit(3);
    }
    close(ready[1]);
    pthread_t t[2];
    for (unsigned i = 0; i < 3; i += 2)
        cr_assert_eq(rank_open(&r[i], ops, &id, 3, i, 300000 * 8), 0, "%s", r[i].err);
    cr_assert_eq(pthread_create(&t[0], NULL, join_main, &r[0]), 0);
    cr_assert_eq(pthread_create(&t[1], NULL, join_main, &r[2]), 0);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    ops->id_destroy(owner);
    char b;
    cr_assert_eq(read(ready[0], &b, 1), 1, "the child rank did not join");
    close(ready[0]);
    for (unsigned i = 0; i < 3; i += 2) {
        cr_assert_eq(r[i].init_st, ADAG_OK, "%s", r[i].err);
        cr_assert_eq(enqueue_call(&r[i], &c, r[i].dsend.ptr, r[i].drecv.ptr), ADAG_OK);
    }
    kill(pid, SIGKILL);
    int status = wait_child(pid, 10000);
    cr_assert(WIFSIGNALED(status), "the child rank was not killed (0x%x)", status);
    cr_assert_eq(r[0].d->stream_sync(r[0].s, adag__deadline_ms(100)), ADAG_ERR_TIMEOUT,
                 "an allreduce completed without rank 1");
    ops->abort(r[0].comm);
    for (unsigned i = 0; i < 3; i += 2) {
        cr_assert_eq(r[i].d->stream_sync(r[i].s, adag__deadline_ms(10000)), ADAG_OK,
                     "rank %u's stream did not drain after abort", i);
        cr_assert_eq(ops->status(r[i].comm), ADAG_ERR_CLOSED, "%s", adag_last_error());
        rank_close(&r[i]);
    }
    assert_counts_zero();
}

/* ---- a wait that gives up ---- */

/* Rank 0's stream_sync gives up (ADAG_ERR_TIMEOUT) while rank 1 has not
 * called yet; the allreduce (3 chunks of the host backend's pipeline) goes
 * on: rank 0 then waits in syncs of 1 ms that give up until it is done
 * (on the emulated device, each hands the collective back to the stream
 * thread mid-barrier, and a later one may take it again), and the result
 * is exact on both ranks. */
COMM_TEST(a_sync_that_gives_up_leaves_the_collective_running, 60)
{
    const adag_comm_ops_t *ops = ops_or_skip(*kind, 2);
    call_t c = {ALLREDUCE, ADAG_DTYPE_I32, ADAG_REDUCE_SUM, 600000, 0, 0, 21};
    size_t bytes = c.count * sizeof(int32_t);
    rank_t r[2];
    open_all(ops, 2, bytes, r);
    unsigned char *h = r[0].hbuf.ptr;
    for (size_t i = 0; i < c.count; i++)
        element(&c, 0, i, h + i * sizeof(int32_t));
    cr_assert_eq(r[0].d->copy_async(r[0].s, r[0].dsend.ptr, h, bytes), ADAG_OK);
    cr_assert_eq(enqueue_call(&r[0], &c, r[0].dsend.ptr, r[0].drecv.ptr), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(r[0].d->copy_async(r[0].s, h, r[0].drecv.ptr, bytes), ADAG_OK);
    cr_assert_eq(r[0].d->stream_sync(r[0].s, adag__deadline_ms(50)), ADAG_ERR_TIMEOUT,
                 "an allreduce finished without rank 1");
    r[1].calls = &c;
    r[1].ncalls = 1;
    pthread_t t;
    void *res;
    cr_assert_eq(pthread_create(&t, NULL, calls_main, &r[1]), 0);
    int64_t give_up = adag__deadline_ms(30000);
    adag_status_t st;
    unsigned gave_up = 0;
    while ((st = r[0].d->stream_sync(r[0].s, adag__deadline_ms(1))) == ADAG_ERR_TIMEOUT &&
           adag__now_ns() < give_up)
        gave_up++;
    pthread_join(t, &res);
    cr_assert_eq(st, ADAG_OK, "rank 0 (after %u syncs that gave up): %s", gave_up,
                 adag_last_error());
    cr_assert_null(res, "%s", r[1].err);
    cr_assert_eq(check_recv(&c, 2, 0, h, *kind == ADAG_COMM_KIND_HOST, r[0].err,
                            sizeof(r[0].err)), 0, "%s", r[0].err);
    close_all(r, 2);
}

/* ---- refused at enqueue ---- */

/* What no backend reduces (bool AVG, the bytes dtype, an unknown op or
 * dtype, a root past the ranks; NCCL also i16 and bool) is refused at
 * enqueue with ADAG_ERR_INVALID naming it; nothing was enqueued, so a
 * valid call after it still matches the other rank's. */
COMM_TEST(refused_at_enqueue, 60)
{
    const adag_comm_ops_t *ops = ops_or_skip(*kind, 2);
    rank_t r[2];
    open_all(ops, 2, 4096, r);
    void *s = r[0].dsend.ptr, *d = r[0].drecv.ptr;
    cr_assert_eq(ops->allreduce(r[0].comm, s, d, 4, ADAG_DTYPE_BOOL, ADAG_REDUCE_AVG, r[0].s),
                 ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "avg") && strstr(adag_last_error(), "bool"), "%s",
              adag_last_error());
    cr_assert_eq(ops->reducescatter(r[0].comm, s, d, 4, ADAG_DTYPE_BOOL, ADAG_REDUCE_AVG,
                                    r[0].s), ADAG_ERR_INVALID);
    cr_assert_eq(ops->allreduce(r[0].comm, s, d, 4, ADAG_DTYPE_BYTES, ADAG_REDUCE_SUM, r[0].s),
                 ADAG_ERR_INVALID);
    cr_assert_eq(ops->allgather(r[0].comm, s, d, 4, (adag_dtype_t)99, r[0].s), ADAG_ERR_INVALID);
    cr_assert_eq(ops->allreduce(r[0].comm, s, d, 4, ADAG_DTYPE_F32, (adag_reduce_op_t)9, r[0].s),
                 ADAG_ERR_INVALID);
    cr_assert_eq(ops->broadcast(r[0].comm, s, d, 4, ADAG_DTYPE_F32, 2, r[0].s), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "root 2"), "%s", adag_last_error());
    if (*kind == ADAG_COMM_KIND_NCCL) {
        cr_assert_eq(ops->allreduce(r[0].comm, s, d, 4, ADAG_DTYPE_I16, ADAG_REDUCE_SUM, r[0].s),
                     ADAG_ERR_INVALID);
        cr_assert(strstr(adag_last_error(), "i16"), "%s", adag_last_error());
    }
    call_t c = {ALLREDUCE, ADAG_DTYPE_I32, ADAG_REDUCE_SUM, 1000, 0, 0, 3};
    r[0].calls = r[1].calls = &c;
    r[0].ncalls = r[1].ncalls = 1;
    pthread_t t;
    void *res;
    cr_assert_eq(pthread_create(&t, NULL, calls_main, &r[1]), 0);
    int failed = run_calls(&r[0]);
    pthread_join(t, &res);
    cr_assert_eq(failed, 0, "%s", r[0].err);
    cr_assert_null(res, "%s", r[1].err);
    close_all(r, 2);
}

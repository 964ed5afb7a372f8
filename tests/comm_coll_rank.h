/*
 * A rank of the collective tests (tests/unit_comm_coll.c: "comm_coll",
 * tests/unit_comm_direct.c: "comm_direct"): its device, stream and
 * buffers (device memory, or host memory with rank_open_mem), joining, and
 * running calls of tests/comm_coll_ref.h against the reference.
 */
#ifndef ADAG_TESTS_COMM_COLL_RANK_H
#define ADAG_TESTS_COMM_COLL_RANK_H

#include "gpu/comm.h"
#include "gpu/device.h"
#include "comm_coll_ref.h"
#include "comm_rig.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 5

/* ---- a rank ---- */

typedef struct {
    const adag_comm_ops_t *ops;
    const adag_device_ops_t *d;
    adag_comm_id_t id;
    unsigned nranks, rank;
    adag_device_t *dev;
    adag_dev_stream_t *s;
    adag_dev_mem_t dsend, drecv, hbuf; /* device buffers, host staging */
    size_t cap;                        /* bytes of each */
    int host_mem;                      /* dsend and drecv are host_alloc'd */
    adag_comm_t *comm;
    adag_status_t init_st;
    const call_t *calls;
    size_t ncalls;
    char err[512];
} rank_t;

/* host_mem: send and recv in page-locked host memory rather than device
 * memory (the host communicator cannot map them into its peers). */
static inline int rank_open_mem(rank_t *r, const adag_comm_ops_t *ops, const adag_comm_id_t *id,
                                unsigned nranks, unsigned rank, size_t cap, int host_mem)
{
    memset(r, 0, sizeof(*r));
    r->host_mem = host_mem;
    r->ops = ops;
    r->d = adag__device_backend(ops->device_kind);
    r->id = *id;
    r->nranks = nranks;
    r->rank = rank;
    r->cap = cap ? cap : 1;
    if (r->d->open(rank, &r->dev) != ADAG_OK || r->d->bind_thread(r->dev) != ADAG_OK ||
        r->d->stream_create(r->dev, &r->s) != ADAG_OK ||
        (host_mem ? r->d->host_alloc : r->d->mem_alloc)(r->dev, r->cap, &r->dsend) != ADAG_OK ||
        (host_mem ? r->d->host_alloc : r->d->mem_alloc)(r->dev, r->cap, &r->drecv) != ADAG_OK ||
        r->d->host_alloc(r->dev, r->cap, &r->hbuf) != ADAG_OK) {
        snprintf(r->err, sizeof(r->err), "rank %u: opening its device: %s", rank,
                 adag_last_error());
        return 1;
    }
    return 0;
}

static inline int rank_open(rank_t *r, const adag_comm_ops_t *ops, const adag_comm_id_t *id,
                            unsigned nranks, unsigned rank, size_t cap)
{
    return rank_open_mem(r, ops, id, nranks, rank, cap, 0);
}

static inline void rank_close(rank_t *r)
{
    if (r->comm)
        r->ops->destroy(r->comm);
    if (r->s)
        r->d->stream_destroy(r->dev, r->s);
    if (r->dsend.ptr)
        (r->host_mem ? r->d->host_free : r->d->mem_free)(r->dev, &r->dsend);
    if (r->drecv.ptr)
        (r->host_mem ? r->d->host_free : r->d->mem_free)(r->dev, &r->drecv);
    if (r->hbuf.ptr)
        r->d->host_free(r->dev, &r->hbuf);
    if (r->dev)
        r->d->close(r->dev);
    r->comm = NULL;
    r->dev = NULL;
}

static inline adag_status_t rank_join(rank_t *r)
{
    r->d->bind_thread(r->dev);
    r->init_st = r->ops->init(&r->id, r->nranks, r->rank, r->dev, adag__deadline_ms(20000),
                              &r->comm);
    if (r->init_st != ADAG_OK)
        snprintf(r->err, sizeof(r->err), "rank %u: init: %s", r->rank, adag_last_error());
    return r->init_st;
}

/* Enqueues call c on the rank's stream (no staging, no sync). */
static inline adag_status_t enqueue_call(rank_t *r, const call_t *c, void *send, void *recv)
{
    switch (c->kind) {
    case ALLREDUCE:
        return r->ops->allreduce(r->comm, send, recv, c->count, c->dtype, c->op, r->s);
    case ALLGATHER:
        return r->ops->allgather(r->comm, send, recv, c->count, c->dtype, r->s);
    case REDUCESCATTER:
        return r->ops->reducescatter(r->comm, send, recv, c->count, c->dtype, c->op, r->s);
    default:
        return r->ops->broadcast(r->comm, send, recv, c->count, c->dtype, c->root, r->s);
    }
}

/* Runs call c: fills the send buffer (host staging, copied to the device),
 * enqueues, copies the result back, syncs and checks it. */
static inline int run_call(rank_t *r, const call_t *c)
{
    size_t es = adag_dtype_size(c->dtype), n = r->nranks;
    size_t sbytes = send_count(c, r->nranks) * es, rbytes = recv_count(c, r->nranks) * es;
    unsigned char *h = r->hbuf.ptr;
    /* in place: the send elements sit where the call reads them in recv */
    unsigned char *dsend = c->in_place ? r->drecv.ptr : r->dsend.ptr;
    if (sbytes > r->cap || rbytes > r->cap) {
        snprintf(r->err, sizeof(r->err), "call of %zu/%zu bytes past the buffers", sbytes, rbytes);
        return 1;
    }
    adag_status_t st = ADAG_OK;
    if (!c->in_place) { /* recv starts as garbage */
        memset(h, 0xa5, rbytes);
        st = r->d->copy_async(r->s, r->drecv.ptr, h, rbytes);
        if (st == ADAG_OK)
            st = r->d->stream_sync(r->s, adag__deadline_ms(60000));
    }
    for (size_t i = 0; i < send_count(c, r->nranks); i++)
        element(c, r->rank, i, h + i * es);
    if (st == ADAG_OK)
        st = r->d->copy_async(r->s, dsend, h, sbytes);
    if (st == ADAG_OK)
        st = enqueue_call(r, c, dsend, r->drecv.ptr);
    if (st == ADAG_OK)
        st = r->d->copy_async(r->s, h, r->drecv.ptr, rbytes);
    if (st == ADAG_OK)
        st = r->d->stream_sync(r->s, adag__deadline_ms(60000));
    if (st != ADAG_OK) {
        snprintf(r->err, sizeof(r->err), "rank %u: %s(count %zu, %s) of %zu ranks: %s", r->rank,
                 kind_names[c->kind], c->count, adag_dtype_name(c->dtype), n, adag_last_error());
        return 1;
    }
    return check_recv(c, r->nranks, r->rank, h, r->ops->kind == ADAG_COMM_KIND_HOST, r->err,
                      sizeof(r->err));
}

/* Runs the rank's calls in order; on a failure aborts the communicator
 * (the other ranks give up too) and returns nonzero with r->err. */
static inline int run_calls(rank_t *r)
{
    for (size_t i = 0; i < r->ncalls; i++)
        if (run_call(r, &r->calls[i])) {
            r->ops->abort(r->comm);
            return 1;
        }
    return 0;
}

static inline void *rank_main(void *arg)
{
    rank_t *r = arg;
    if (rank_join(r) != ADAG_OK)
        return (void *)1;
    return (void *)(intptr_t)run_calls(r);
}

/* n ranks in threads on devices 0..n-1, each running calls[0..ncalls). */
static inline void run_in_threads(const adag_comm_ops_t *ops, unsigned n, const call_t *calls,
                           size_t ncalls, size_t cap)
{
    adag_comm_id_t id;
    void *owner;
    rank_t r[MAX_RANKS];
    pthread_t t[MAX_RANKS];
    void *res[MAX_RANKS];
    cr_assert_eq(ops->id_create(n, &id, &owner), ADAG_OK, "%s", adag_last_error());
    for (unsigned i = 0; i < n; i++) {
        cr_assert_eq(rank_open(&r[i], ops, &id, n, i, cap), 0, "%s", r[i].err);
        r[i].calls = calls;
        r[i].ncalls = ncalls;
    }
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, rank_main, &r[i]), 0);
    for (unsigned i = 0; i < n; i++)
        pthread_join(t[i], &res[i]);
    ops->id_destroy(owner);
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq((intptr_t)res[i], 0, "%s", r[i].err);
    for (unsigned i = 0; i < n; i++)
        rank_close(&r[i]);
    assert_counts_zero();
}

static inline void *join_main(void *arg)
{
    rank_join(arg);
    return NULL;
}

static inline void *calls_main(void *arg)
{
    rank_t *r = arg;
    r->d->bind_thread(r->dev);
    return (void *)(intptr_t)run_calls(r);
}

/* n ranks, joined, with buffers of cap bytes (no calls yet); rank i's in
 * host memory if bit i of host_mem is set. */
static inline void open_all_mem(const adag_comm_ops_t *ops, unsigned n, size_t cap, rank_t *r,
                                unsigned host_mem)
{
    adag_comm_id_t id;
    void *owner;
    pthread_t t[MAX_RANKS];
    cr_assert_eq(ops->id_create(n, &id, &owner), ADAG_OK, "%s", adag_last_error());
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq(rank_open_mem(&r[i], ops, &id, n, i, cap, (host_mem >> i) & 1), 0, "%s",
                     r[i].err);
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, join_main, &r[i]), 0);
    for (unsigned i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    ops->id_destroy(owner);
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq(r[i].init_st, ADAG_OK, "%s", r[i].err);
}

static inline void open_all(const adag_comm_ops_t *ops, unsigned n, size_t cap, rank_t *r)
{
    open_all_mem(ops, n, cap, r, 0);
}

/* The opened ranks r[0..n) each run calls[0..ncalls) in a thread; asserts
 * that every call was right. */
static inline void run_opened(rank_t *r, unsigned n, const call_t *calls, size_t ncalls)
{
    pthread_t t[MAX_RANKS];
    void *res[MAX_RANKS];
    for (unsigned i = 0; i < n; i++) {
        r[i].calls = calls;
        r[i].ncalls = ncalls;
        cr_assert_eq(pthread_create(&t[i], NULL, calls_main, &r[i]), 0);
    }
    for (unsigned i = 0; i < n; i++)
        pthread_join(t[i], &res[i]);
    for (unsigned i = 0; i < n; i++)
        cr_assert_null(res[i], "%s", r[i].err);
}

static inline void close_all(rank_t *r, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        rank_close(&r[i]);
    assert_counts_zero();
}

#endif

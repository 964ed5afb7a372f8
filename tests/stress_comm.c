/*
 * A stand-alone stress test of the host communicator (gpu/comm_host.c) for
 * ThreadSanitizer (`make test-tsan`; Criterion cannot run under TSan). The
 * ranks are threads of one process, each on a emulated device of its own with
 * three streams (two that send, one that receives), so TSan sees every
 * access to the mailboxes: a missing happens-before edge is a reported
 * race and fails the run (TSAN_OPTIONS=halt_on_error=1), as does any
 * message that arrives wrong or a stream that does not drain.
 *
 *   exchange  4 ranks, 600 rounds: in round j every rank sends to the rank
 *             k = 1 + j % 3 after it and receives from the rank k before it,
 *             its sends alternating between two streams (so a rank's sends
 *             to one peer take turns across streams); sizes from 0 bytes to
 *             1.5 rings; every byte checked;
 *   abort     the same exchange, endless, until another thread aborts the
 *             communicator through rank 2 mid-stream: every rank's streams
 *             drain and its status is ADAG_ERR_CLOSED naming rank 2;
 *   allreduce 4 ranks, 400 checked i32 allreduces from 0 elements to past
 *             a collective slot (several chunks), alternating between two
 *             streams (the turns) and in place every third; a rank waits
 *             for them in turn with stream_sync (which runs the collective
 *             on the waiting thread when the stream thread is idle), with
 *             event_sync on an event recorded after it (the same, through
 *             the event's stream), and with syncs of 200 us that give up
 *             until it is done (the collective goes back to the stream
 *             thread, and maybe to the waiter again, mid-barrier); then
 *             the same, endless, until the abort through rank 2
 *             mid-collective.
 * The process gives itself 240 s (alarm): a hang is a failure.
 */
#include "common/clock.h"
#include "gpu/comm.h"
#include "gpu/comm_host.h"
#include "gpu/device.h"

#include "stress.h"
#include <adag.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#define NRANKS 4
#define ROUNDS 600
#define BATCH 4 /* rounds enqueued before a rank syncs and checks */
#define SEND_STREAMS 2
#define DEADLINE_MS 60000

typedef struct {
    const adag_comm_ops_t *ops;
    const adag_device_ops_t *d;
    adag_comm_id_t id;
    unsigned rank;
    adag_device_t *dev;
    adag_dev_stream_t *send_s[SEND_STREAMS], *recv_s;
    adag_dev_mem_t send_buf[BATCH], recv_buf[BATCH];
    adag_dev_event_t *ev; /* recorded after a collective, then waited for */
    adag_comm_t *comm;
    _Atomic int joined;    /* init returned (comm is set): seq_cst */
    _Atomic int finished;  /* the exchange ended */
    unsigned rounds;       /* 0: until aborted */
    _Atomic unsigned done; /* rounds checked (read by the aborting thread) */
    uint64_t bytes;        /* received and checked */
    adag_status_t end;     /* the status the exchange ended with */
} rank_t;

static size_t max_size(void)
{
    size_t ring = (size_t)adag__comm_host_chunk_bytes(NRANKS) * ADAG_COMM_HOST_RING_CHUNKS;
    return ring + ring / 2;
}

/* The size of the message src sends in round j: mostly small, now and
 * then over a chunk, rarely over the ring. */
static size_t msg_size(unsigned j, unsigned src)
{
    unsigned h = (j * 2654435761u) ^ (src * 40503u);
    if (j % 31 == 5)
        return max_size() - h % 1000;
    if (j % 7 == 3)
        return (size_t)adag__comm_host_chunk_bytes(NRANKS) + h % 70000;
    return h % 9 == 0 ? 0 : h % 5000;
}

static unsigned char msg_byte(unsigned j, unsigned src, size_t off)
{
    return (unsigned char)(off * 37 + (off >> 10) + j * 11 + src * 101);
}

/* round j: send to me + k, receive from me - k */
static unsigned step(unsigned j)
{
    return 1 + j % (NRANKS - 1);
}

static int rank_open(rank_t *r, const adag_comm_id_t *id, unsigned rank)
{
    memset(r, 0, sizeof(*r));
    r->ops = adag__comm_backend(ADAG_COMM_KIND_HOST);
    r->d = adag__device_backend(ADAG_DEV_EMULATED);
    r->id = *id;
    r->rank = rank;
    int ok = r->d->open(rank, &r->dev) == ADAG_OK &&
             r->d->stream_create(r->dev, &r->recv_s) == ADAG_OK;
    for (unsigned i = 0; ok && i < SEND_STREAMS; i++)
        ok = r->d->stream_create(r->dev, &r->send_s[i]) == ADAG_OK;
    ok = ok && r->d->event_create(r->dev, &r->ev) == ADAG_OK;
    for (unsigned b = 0; ok && b < BATCH; b++)
        ok = r->d->mem_alloc(r->dev, max_size(), &r->send_buf[b]) == ADAG_OK &&
             r->d->mem_alloc(r->dev, max_size(), &r->recv_buf[b]) == ADAG_OK;
    EXPECT(ok, "rank %u: %s", rank, adag_last_error());
    return ok;
}

static void rank_close(rank_t *r)
{
    if (r->comm)
        r->ops->destroy(r->comm);
    for (unsigned i = 0; i < SEND_STREAMS; i++)
        if (r->send_s[i])
            r->d->stream_destroy(r->dev, r->send_s[i]);
    if (r->recv_s)
        r->d->stream_destroy(r->dev, r->recv_s);
    if (r->ev)
        r->d->event_destroy(r->dev, r->ev);
    for (unsigned b = 0; b < BATCH; b++) {
        if (r->send_buf[b].ptr)
            r->d->mem_free(r->dev, &r->send_buf[b]);
        if (r->recv_buf[b].ptr)
            r->d->mem_free(r->dev, &r->recv_buf[b]);
    }
    if (r->dev)
        r->d->close(r->dev);
}

static adag_status_t sync_all(rank_t *r)
{
    adag_status_t st = r->d->stream_sync(r->recv_s, adag__deadline_ms(DEADLINE_MS));
    for (unsigned i = 0; st == ADAG_OK && i < SEND_STREAMS; i++)
        st = r->d->stream_sync(r->send_s[i], adag__deadline_ms(DEADLINE_MS));
    return st;
}

/* Enqueues rounds [j0, j0 + BATCH): ADAG_OK or the refusal. */
static adag_status_t enqueue_batch(rank_t *r, unsigned j0)
{
    for (unsigned j = j0; j < j0 + BATCH; j++) {
        unsigned k = step(j), b = j % BATCH;
        unsigned to = (r->rank + k) % NRANKS, from = (r->rank + NRANKS - k) % NRANKS;
        size_t out = msg_size(j, r->rank), in = msg_size(j, from);
        unsigned char *p = r->send_buf[b].ptr;
        for (size_t off = 0; off < out; off++)
            p[off] = msg_byte(j, r->rank, off);
        adag_status_t st =
            r->ops->send(r->comm, p, out, to, r->send_s[j % SEND_STREAMS]);
        if (st == ADAG_OK)
            st = r->ops->recv(r->comm, r->recv_buf[b].ptr, in, from, r->recv_s);
        if (st != ADAG_OK)
            return st;
    }
    return ADAG_OK;
}

static int check_batch(rank_t *r, unsigned j0)
{
    for (unsigned j = j0; j < j0 + BATCH; j++) {
        unsigned from = (r->rank + NRANKS - step(j)) % NRANKS;
        size_t in = msg_size(j, from);
        const unsigned char *p = r->recv_buf[j % BATCH].ptr;
        for (size_t off = 0; off < in; off++)
            if (p[off] != msg_byte(j, from, off)) {
                EXPECT(0, "rank %u, round %u (%zu bytes from rank %u): byte %zu is %u, not %u",
                       r->rank, j, in, from, off, p[off], msg_byte(j, from, off));
                return 0;
            }
        r->bytes += in;
    }
    return 1;
}

static int run_ranks(void *(*rank_main)(void *), unsigned rounds, unsigned abort_after,
                     rank_t *ranks);

static void *exchange_main(void *arg)
{
    rank_t *r = arg;
    r->d->bind_thread(r->dev);
    r->end = r->ops->init(&r->id, NRANKS, r->rank, r->dev, adag__deadline_ms(DEADLINE_MS),
                          &r->comm);
    EXPECT(r->end == ADAG_OK, "rank %u: init: %s", r->rank, adag_last_error());
    atomic_store(&r->joined, 1);
    for (unsigned j0 = 0; r->end == ADAG_OK && (!r->rounds || j0 < r->rounds); j0 += BATCH) {
        adag_status_t st = enqueue_batch(r, j0);
        adag_status_t synced = sync_all(r); /* drains what was enqueued, either way */
        EXPECT(synced == ADAG_OK, "rank %u: streams did not drain: %s", r->rank,
               adag_last_error());
        if (st == ADAG_OK)
            st = r->ops->status(r->comm);
        if (st != ADAG_OK || synced != ADAG_OK) {
            r->end = st != ADAG_OK ? st : synced;
            break;
        }
        if (!check_batch(r, j0)) {
            r->end = ADAG_ERR_INTERNAL;
            break;
        }
        atomic_store(&r->done, j0 + BATCH);
    }
    atomic_store(&r->finished, 1);
    return NULL;
}

/* ---- allreduce ---- */

#define COLL_ROUNDS 400

/* Elements of allreduce j: mostly small, now and then past a slot. */
static size_t coll_count(unsigned j)
{
    size_t slot = (size_t)adag__comm_host_slot_bytes(NRANKS);
    if (j % 23 == 7)
        return (slot + slot / 4) / 4 + j;
    return (j * 2654435761u) % (j % 3 ? 3000 : 40000);
}

static int32_t coll_value(unsigned j, unsigned rank, size_t i)
{
    return (int32_t)(i * 7 + j * 13 + rank * 1000003u);
}

static void *allreduce_main(void *arg)
{
    rank_t *r = arg;
    r->d->bind_thread(r->dev);
    r->end = r->ops->init(&r->id, NRANKS, r->rank, r->dev, adag__deadline_ms(DEADLINE_MS),
                          &r->comm);
    EXPECT(r->end == ADAG_OK, "rank %u: init: %s", r->rank, adag_last_error());
    atomic_store(&r->joined, 1);
    for (unsigned j = 0; r->end == ADAG_OK && (!r->rounds || j < r->rounds); j++) {
        size_t n = coll_count(j);
        int32_t *send = r->send_buf[0].ptr;
        int32_t *recv = j % 3 == 0 ? send : r->recv_buf[0].ptr;
        for (size_t i = 0; i < n; i++)
            send[i] = coll_value(j, r->rank, i);
        adag_dev_stream_t *s = r->send_s[j % SEND_STREAMS];
        adag_status_t st = r->ops->allreduce(r->comm, send, recv, n, ADAG_DTYPE_I32,
                                             ADAG_REDUCE_SUM, s);
        if (st == ADAG_OK && j % 3 == 1) {
            st = r->d->event_record(r->ev, s);
            if (st == ADAG_OK)
                st = r->d->event_sync(r->ev, adag__deadline_ms(DEADLINE_MS));
        } else if (st == ADAG_OK && j % 3 == 2) {
            for (int k = 0; k < 100000 && r->d->stream_sync(s, adag__now_ns() + 200000) ==
                                              ADAG_ERR_TIMEOUT; k++) {
            }
        }
        adag_status_t synced = sync_all(r);
        EXPECT(synced == ADAG_OK, "rank %u: streams did not drain: %s", r->rank,
               adag_last_error());
        if (st == ADAG_OK)
            st = r->ops->status(r->comm);
        if (st != ADAG_OK || synced != ADAG_OK) {
            r->end = st != ADAG_OK ? st : synced;
            break;
        }
        for (size_t i = 0; i < n; i++) {
            uint32_t want = 0;
            for (unsigned q = 0; q < NRANKS; q++)
                want += (uint32_t)coll_value(j, q, i);
            if ((uint32_t)recv[i] != want) {
                EXPECT(0, "rank %u, allreduce %u (%zu elements): element %zu is %d, not %d",
                       r->rank, j, n, i, recv[i], (int32_t)want);
                r->end = ADAG_ERR_INTERNAL;
                break;
            }
        }
        r->bytes += n * 4;
        atomic_store(&r->done, j + 1);
    }
    atomic_store(&r->finished, 1);
    return NULL;
}

/* Runs the exchange on a fresh communicator; with abort_after, a thread
 * aborts it through rank 2 once rank 2 checked that many rounds. */
static int run_exchange(unsigned rounds, unsigned abort_after, rank_t *ranks)
{
    return run_ranks(exchange_main, rounds, abort_after, ranks);
}

static int run_ranks(void *(*rank_main)(void *), unsigned rounds, unsigned abort_after,
                     rank_t *ranks)
{
    const adag_comm_ops_t *ops = adag__comm_backend(ADAG_COMM_KIND_HOST);
    adag_comm_id_t id;
    void *owner;
    pthread_t t[NRANKS];
    if (ops->id_create(NRANKS, &id, &owner) != ADAG_OK) {
        EXPECT(0, "id_create: %s", adag_last_error());
        return 0;
    }
    int ok = 1;
    for (unsigned i = 0; i < NRANKS && ok; i++) {
        ok = rank_open(&ranks[i], &id, i);
        ranks[i].rounds = rounds;
    }
    for (unsigned i = 0; i < NRANKS && ok; i++)
        ok = pthread_create(&t[i], NULL, rank_main, &ranks[i]) == 0;
    if (ok && abort_after) {
        struct timespec ts = {0, 1000000L};
        while (atomic_load(&ranks[2].done) < abort_after &&
               !atomic_load(&ranks[2].finished))
            nanosleep(&ts, NULL);
        if (atomic_load(&ranks[2].joined) && ranks[2].comm)
            ops->abort(ranks[2].comm);
    }
    for (unsigned i = 0; i < NRANKS && ok; i++)
        pthread_join(t[i], NULL);
    ops->id_destroy(owner);
    return ok;
}

static int run_exchange_checked(void)
{
    static rank_t ranks[NRANKS];
    int ok = run_exchange(ROUNDS, 0, ranks);
    uint64_t bytes = 0;
    for (unsigned i = 0; i < NRANKS; i++) {
        EXPECT(ranks[i].end == ADAG_OK && ranks[i].done == ROUNDS,
               "rank %u ended with %d after %u of %u rounds", i, ranks[i].end, ranks[i].done,
               ROUNDS);
        ok &= ranks[i].end == ADAG_OK && ranks[i].done == ROUNDS;
        bytes += ranks[i].bytes;
        rank_close(&ranks[i]);
    }
    printf("stress_comm: %u messages, %llu bytes checked\n", NRANKS * ROUNDS,
           (unsigned long long)bytes);
    return ok;
}

static int run_abort_mid_stream(void)
{
    static rank_t ranks[NRANKS];
    int ok = run_exchange(0, 100, ranks);
    for (unsigned i = 0; i < NRANKS; i++) {
        adag_status_t st = ranks[i].comm ? ranks[i].ops->status(ranks[i].comm) : ADAG_OK;
        EXPECT(ranks[i].end == ADAG_ERR_CLOSED && st == ADAG_ERR_CLOSED &&
                   strstr(adag_last_error(), "rank 2 aborted"),
               "rank %u ended with %d, status %d (%s)", i, ranks[i].end, st, adag_last_error());
        ok &= ranks[i].end == ADAG_ERR_CLOSED && st == ADAG_ERR_CLOSED;
        EXPECT(atomic_load(&ranks[i].done) >= 100 - 2 * BATCH, "rank %u stopped after %u rounds, "
               "before the abort", i, atomic_load(&ranks[i].done));
        printf("stress_comm: abort: rank %u stopped after %u rounds\n", i,
               atomic_load(&ranks[i].done));
        rank_close(&ranks[i]);
    }
    return ok;
}

static int run_allreduce_checked(void)
{
    static rank_t ranks[NRANKS];
    int ok = run_ranks(allreduce_main, COLL_ROUNDS, 0, ranks);
    uint64_t bytes = 0;
    for (unsigned i = 0; i < NRANKS; i++) {
        EXPECT(ranks[i].end == ADAG_OK && ranks[i].done == COLL_ROUNDS,
               "rank %u ended with %d after %u of %u allreduces", i, ranks[i].end,
               ranks[i].done, COLL_ROUNDS);
        ok &= ranks[i].end == ADAG_OK && ranks[i].done == COLL_ROUNDS;
        bytes += ranks[i].bytes;
        rank_close(&ranks[i]);
    }
    printf("stress_comm: %u allreduces, %llu bytes checked\n", NRANKS * COLL_ROUNDS,
           (unsigned long long)bytes);
    return ok;
}

static int run_abort_mid_collective(void)
{
    static rank_t ranks[NRANKS];
    int ok = run_ranks(allreduce_main, 0, 60, ranks);
    for (unsigned i = 0; i < NRANKS; i++) {
        adag_status_t st = ranks[i].comm ? ranks[i].ops->status(ranks[i].comm) : ADAG_OK;
        EXPECT(ranks[i].end == ADAG_ERR_CLOSED && st == ADAG_ERR_CLOSED &&
                   strstr(adag_last_error(), "rank 2 aborted"),
               "rank %u ended with %d, status %d (%s)", i, ranks[i].end, st, adag_last_error());
        ok &= ranks[i].end == ADAG_ERR_CLOSED && st == ADAG_ERR_CLOSED;
        printf("stress_comm: abort: rank %u stopped after %u allreduces\n", i,
               atomic_load(&ranks[i].done));
        rank_close(&ranks[i]);
    }
    return ok;
}

static int counts_zero(void)
{
    adag_comm_counts_t c;
    adag_device_counts_t d;
    adag__comm_backend(ADAG_COMM_KIND_HOST)->counts(&c);
    adag__device_backend(ADAG_DEV_EMULATED)->counts(NULL, &d);
    EXPECT(c.comms == 0 && c.ids == 0 && d.streams == 0, "left: %llu comms, %llu ids, %llu "
           "streams", (unsigned long long)c.comms, (unsigned long long)c.ids,
           (unsigned long long)d.streams);
    return c.comms == 0 && c.ids == 0 && d.streams == 0;
}

int main(void)
{
    struct {
        const char *name;
        int (*run)(void);
    } parts[] = {
        {"4 ranks exchanging on 3 streams each", run_exchange_checked},
        {"abort mid-stream", run_abort_mid_stream},
        {"4 ranks allreducing on 2 streams each", run_allreduce_checked},
        {"abort mid-collective", run_abort_mid_collective},
        {"nothing left", counts_zero},
    };
    alarm(240);
    unsigned n = sizeof(parts) / sizeof(parts[0]), passed = 0;
    for (unsigned i = 0; i < n; i++) {
        int before = atomic_load(&failures);
        int ok = parts[i].run() && atomic_load(&failures) == before;
        printf("stress_comm: %s: %s\n", parts[i].name, ok ? "ok" : "FAILED");
        passed += ok;
    }
    printf("stress_comm: %u passed, %u failed\n", passed, n - passed);
    return passed == n && atomic_load(&failures) == 0 ? 0 : 1;
}

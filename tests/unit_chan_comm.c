/*
 * The device channel by communicator (suite "chan_comm", ADAG_TRANSPORT_COMM
 * on the emulated device and the host communicator): what the conformance
 * lines (tests/unit_channel.c, CAP_BY_COMM) do not cover. Values of every
 * size reach two device readers by send/recv and a host reader by the ring;
 * a seq waited twice is received once; failed and empty executions send
 * nothing; watch names a send nobody receives and a recv whose writer
 * stopped; a failure's wake_all aborts the communicator so the streams
 * drain, a plain destroy's (ADAG_ERR_CLOSED) leaves it working for the
 * next channel; descriptors, geometries and communicator tables that do
 * not match are refused. The rig (tests/unit_chan_rig.c) checks at close
 * that no device object, communicator or id is left.
 */
#define RIG_NO_WRAP /* raw ops where a test must not wait for the streams */
#include "chan_rig.h"

#include "common/error.h"
#include "gpu/comm_host.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const chan_backend_t by_comm = {CHAN_DEVICE, CAP_RING | CAP_BY_COMM,
                                       "emu:0 -> emu:1 by communicator", 0, 1};
static const chan_backend_t by_comm_same = {CHAN_DEVICE, CAP_RING | CAP_BY_COMM,
                                            "emu:0 -> emu:0 by communicator", 0, 0};

#define DEADLINE adag__deadline_ms(10000)

#define HAS(needle)                                                                           \
    cr_assert(strstr(adag_last_error(), (needle)), "message \"%s\" lacks \"%s\"",              \
              adag_last_error(), (needle))

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static adag_status_t watch(adag_chan_t *ch, int64_t timeout_ms)
{
    int64_t since = 0;
    return ch->ops->watch(ch, adag__now_ns(), timeout_ms * 1000000, &since);
}

static adag_status_t stream_sync(const rig_t *r, unsigned place, adag_dev_stream_t *s, int ms)
{
    return r->devs[place].dev->ops->stream_sync(s, adag__deadline_ms(ms));
}

/* Every rank of the rig's communicator reports `want`. */
static void assert_comm_status(const rig_t *r, adag_status_t want)
{
    for (unsigned j = 0; j <= RIG_MAX_READERS; j++) {
        adag_comm_t *c = r->comms[j].comm;
        if (c)
            cr_assert_eq(c->ops->status(c), want, "rank %u: %s (want %s)", c->rank,
                         adag_status_str(c->ops->status(c)), adag_status_str(want));
    }
}

/* acquire, fill (the rig's pattern) and publish seq with `size` bytes and
 * status st; the acquire waits for the compute stream (the slot is free). */
static void put_status(rig_t *r, uint64_t seq, size_t size, adag_status_t st, const char *err)
{
    void *buf;
    cr_assert_eq(rig_acquire(r->w, seq, DEADLINE, &buf), ADAG_OK, "%s", adag_last_error());
    value_fill(buf, seq, size < r->geom.capacity ? size : r->geom.capacity);
    cr_assert_eq(r->w->ops->publish(r->w, seq, size, NULL, st, err), ADAG_OK, "%s",
                 adag_last_error());
}

/* ---- values of every size: two device readers and a host reader ---- */

#define SIZES 10

static size_t size_of(uint64_t seq)
{
    size_t chunk = (size_t)adag__comm_host_chunk_bytes(3);
    size_t ring = chunk * ADAG_COMM_HOST_RING_CHUNKS;
    const size_t sizes[SIZES] = {0,     1,         7,    4096,     chunk - 1,
                                 chunk, chunk + 1, ring, ring + 1, 3 * ring + 99};
    return sizes[seq % SIZES];
}

static void meta_of(uint64_t seq, adag_tensor_meta_t *m)
{
    size_t size = size_of(seq);
    memset(m, 0, sizeof(*m));
    m->dtype = ADAG_DTYPE_U8;
    m->ndim = size % 2 ? 1 : 2;
    m->shape[0] = size % 2 ? (int64_t)size : 2;
    m->shape[1] = (int64_t)size / 2;
}

typedef struct {
    adag_chan_t *rd;
    int32_t device; /* where its views must be */
    uint64_t n;
    char err[256];
} taker_t;

static void *taker_main(void *p)
{
    taker_t *t = p;
    for (uint64_t s = 0; s < t->n; s++) {
        adag_slot_view_t v;
        adag_tensor_meta_t want;
        meta_of(s, &want);
        if (rig_wait(t->rd, s, adag__deadline_ms(30000), &v) != ADAG_OK) {
            snprintf(t->err, sizeof(t->err), "seq %llu: %s", (unsigned long long)s,
                     adag_last_error());
            return NULL;
        }
        int rc = value_check(&v, s, size_of(s));
        if (!rc && (v.meta.dtype != want.dtype || v.meta.ndim != want.ndim ||
                    v.meta.shape[0] != want.shape[0] ||
                    (want.ndim == 2 && v.meta.shape[1] != want.shape[1])))
            rc = 5;
        if (!rc && v.device != t->device)
            rc = 6;
        if (rc) {
            snprintf(t->err, sizeof(t->err), "seq %llu (%zu bytes): check %d failed",
                     (unsigned long long)s, size_of(s), rc);
            return NULL;
        }
        adag__chan_release(t->rd, s);
    }
    return NULL;
}

Test(chan_comm, every_size_reaches_two_device_readers_and_a_host_reader, .timeout = 120)
{
    rig_t r;
    const int rdevs[3] = {1, 2, -1};
    const unsigned nslots = 3;
    const uint64_t n = nslots * 10;
    rig_open_at(&r, &by_comm, nslots, 3, size_of(SIZES - 1), 0, rdevs);
    taker_t t[3];
    pthread_t th[3];
    for (unsigned i = 0; i < 3; i++) {
        t[i] = (taker_t){r.rd[i],
                         rdevs[i] < 0 ? ADAG_DEVICE_HOST : ADAG_DEVICE(ADAG_DEV_EMULATED, rdevs[i]),
                         n, ""};
        cr_assert_eq(pthread_create(&th[i], NULL, taker_main, &t[i]), 0);
    }
    for (uint64_t s = 0; s < n; s++) {
        void *buf;
        adag_tensor_meta_t m;
        meta_of(s, &m);
        cr_assert_eq(rig_acquire(r.w, s, adag__deadline_ms(30000), &buf), ADAG_OK, "%s",
                     adag_last_error());
        value_fill(buf, s, size_of(s));
        cr_assert_eq(rig_publish(r.w, s, size_of(s), &m, ADAG_OK, NULL), ADAG_OK, "%s",
                     adag_last_error());
    }
    for (unsigned i = 0; i < 3; i++) {
        cr_assert_eq(pthread_join(th[i], NULL), 0);
        cr_assert_str_empty(t[i].err, "reader %u: %s", i, t[i].err);
    }
    assert_comm_status(&r, ADAG_OK);
    rig_close(&r);
}

/* ---- one recv per seq ---- */

/* The loop may wait for a seq twice: the second wait finds the value
 * without another recv (which would take the next execution's send, or
 * wait forever for it: the rig's wait on the compute stream would fail). */
Test(chan_comm, a_seq_waited_twice_is_received_once, .timeout = 60)
{
    rig_t r;
    rig_open(&r, &by_comm, 2, 1, 4096, 0);
    for (uint64_t s = 0; s < 8; s++) {
        cr_assert_eq(value_put(r.w, s, DEADLINE), ADAG_OK, "%s", adag_last_error());
        for (int k = 0; k < 2; k++) {
            adag_slot_view_t v;
            cr_assert_eq(rig_wait(r.rd[0], s, adag__deadline_ms(5000), &v), ADAG_OK,
                         "seq %llu, wait %d: %s", (unsigned long long)s, k, adag_last_error());
            cr_assert_eq(value_check(&v, s, value_size(s, 4096)), 0, "seq %llu, wait %d",
                         (unsigned long long)s, k);
        }
        adag__chan_release(r.rd[0], s);
    }
    cr_assert_eq(stream_sync(&r, 1, r.comms[1].stream, 2000), ADAG_OK,
                 "a recv is still pending");
    assert_comm_status(&r, ADAG_OK);
    rig_close(&r);
}

/* ---- executions that move no bytes ---- */

/* A failed execution, an empty value and one too large for the slot (its
 * publish refused with ADAG_ERR_TOO_LARGE, then the execution published
 * again with a size that fits) send nothing, so the next value still meets
 * its own recv. */
Test(chan_comm, executions_without_bytes_send_nothing, .timeout = 60)
{
    rig_t r;
    const int rdevs[2] = {1, 2};
    rig_open_at(&r, &by_comm, 2, 2, 256, 0, rdevs);
    const struct {
        size_t size;
        adag_status_t st;
        size_t arrives;
    } ex[] = {{100, ADAG_OK, 100},           {64, ADAG_ERR_METHOD, 0}, {0, ADAG_OK, 0},
              {257, ADAG_OK, 8},             {200, ADAG_OK, 200},      {64, ADAG_ERR_ACTOR_DIED, 0},
              {256, ADAG_OK, 256}};
    for (uint64_t s = 0; s < sizeof(ex) / sizeof(ex[0]); s++) {
        if (ex[s].size > r.geom.capacity) {
            void *buf;
            cr_assert_eq(rig_acquire(r.w, s, DEADLINE, &buf), ADAG_OK, "%s", adag_last_error());
            value_fill(buf, s, ex[s].arrives);
            cr_assert_eq(r.w->ops->publish(r.w, s, ex[s].size, NULL, ADAG_OK, NULL),
                         ADAG_ERR_TOO_LARGE, "seq %llu: %s", (unsigned long long)s,
                         adag_last_error());
            for (unsigned i = 0; i < 2; i++)
                cr_assert(!adag__chan_ready(r.rd[i], s), "refused seq %llu reached reader %u",
                          (unsigned long long)s, i);
            /* the same execution again, with a size that fits */
            cr_assert_eq(r.w->ops->publish(r.w, s, ex[s].arrives, NULL, ADAG_OK, NULL), ADAG_OK,
                         "%s", adag_last_error());
        } else {
            put_status(&r, s, ex[s].size, ex[s].st, ex[s].st ? "actor a.m: failed" : NULL);
        }
        for (unsigned i = 0; i < 2; i++) {
            adag_slot_view_t v;
            cr_assert_eq(rig_wait(r.rd[i], s, adag__deadline_ms(5000), &v), ADAG_OK,
                         "seq %llu, reader %u: %s", (unsigned long long)s, i, adag_last_error());
            cr_assert_eq(v.status, ex[s].st, "seq %llu", (unsigned long long)s);
            if (ex[s].st == ADAG_OK)
                cr_assert_eq(value_check(&v, s, ex[s].arrives), 0, "seq %llu, reader %u",
                             (unsigned long long)s, i);
            adag__chan_release(r.rd[i], s);
        }
    }
    assert_comm_status(&r, ADAG_OK);
    rig_close(&r);
}

/* ---- a kernel that blocks its stream until the test lets it go ---- */

static _Atomic int gate_open;

static void gate_kernel(void *arg)
{
    (void)arg;
    int64_t give_up = adag__deadline_ms(20000); /* a broken test must still end */
    while (!atomic_load(&gate_open) && adag__now_ns() < give_up)
        sleep_ms(1);
}

static void block_stream(adag_device_t *dev, adag_dev_stream_t *s)
{
    atomic_store(&gate_open, 0);
    cr_assert_eq(dev->ops->host_fn(s, gate_kernel, NULL), ADAG_OK);
}

/* ---- slot reuse ---- */

/* A reader releases a value on the host before its recv ran (a loop does
 * not wait for its device): the writer's next use of the slot waits on
 * its compute stream until the send is done, so the value sent is the one
 * published. */
Test(chan_comm, the_next_use_of_a_slot_waits_for_its_sends, .timeout = 60)
{
    rig_t r;
    void *buf;
    adag_slot_view_t v;
    rig_open(&r, &by_comm, 1, 1, 4096, 0);
    adag_chan_t *rd = r.rd[0];
    cr_assert_eq(value_put(r.w, 0, DEADLINE), ADAG_OK);
    block_stream(r.devs[1].dev, r.comms[1].stream); /* the recv cannot run yet */
    cr_assert_eq(rd->ops->wait(rd, 0, DEADLINE, &v), ADAG_OK, "%s", adag_last_error());
    rd->ops->release(rd, 0);
    cr_assert_eq(r.w->ops->acquire(r.w, 1, DEADLINE, &buf), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(stream_sync(&r, 0, r.devs[0].compute, 100), ADAG_ERR_TIMEOUT,
                 "the writer may write the slot while its send still reads it");
    atomic_store(&gate_open, 1);
    cr_assert_eq(stream_sync(&r, 0, r.devs[0].compute, 5000), ADAG_OK);
    cr_assert_eq(stream_sync(&r, 1, r.devs[1].compute, 5000), ADAG_OK);
    cr_assert_eq(value_check(&v, 0, value_size(0, 4096)), 0, "the reader got another value");
    value_fill(buf, 1, value_size(1, 4096));
    cr_assert_eq(rig_publish(r.w, 1, value_size(1, 4096), NULL, ADAG_OK, NULL), ADAG_OK);
    cr_assert_eq(value_get(rd, 1, DEADLINE), 0);
    assert_comm_status(&r, ADAG_OK);
    rig_close(&r);
}

/* ---- faults ---- */

/* A value nobody receives: the writer's send is named once overdue (not
 * before), and is quiet once the reader took it. */
Test(chan_comm, watch_names_a_send_nobody_receives, .timeout = 60)
{
    rig_t r;
    rig_open(&r, &by_comm, 2, 1, 4096, 0);
    cr_assert_eq(value_put(r.w, 0, DEADLINE), ADAG_OK);
    cr_assert_eq(watch(r.w, 2000), ADAG_OK, "overdue before its time: %s", adag_last_error());
    sleep_ms(120);
    cr_assert_eq(watch(r.w, 2000), ADAG_OK);
    cr_assert_eq(watch(r.w, 50), ADAG_ERR_TIMEOUT, "a send nobody receives was not reported");
    HAS("device channel conf.m[0]: the send to reader (communicator rank 1)");
    HAS("for execution 0 did not complete within 50 ms");
    cr_assert_eq(watch(r.rd[0], 50), ADAG_OK, "the reader has not received anything yet");
    cr_assert_eq(value_get(r.rd[0], 0, DEADLINE), 0);
    cr_assert_eq(stream_sync(&r, 0, r.comms[0].stream, 5000), ADAG_OK);
    cr_assert_eq(watch(r.w, 1), ADAG_OK, "a completed send: %s", adag_last_error());
    cr_assert_eq(watch(r.rd[0], 1), ADAG_OK, "a completed recv: %s", adag_last_error());
    assert_comm_status(&r, ADAG_OK);
    rig_close(&r);
}

/* The writer stops (its compute stream never records the value): the
 * reader's recv is named, and so is the writer's send; the reader's DAG
 * fails (a timeout): its wake_all aborts the communicator, and the
 * reader's streams drain although the writer is still stuck. */
Test(chan_comm, a_recv_whose_writer_stopped_is_named_and_abort_drains_it, .timeout = 60)
{
    rig_t r;
    void *buf;
    adag_slot_view_t v;
    rig_open(&r, &by_comm, 2, 1, 4096, 0);
    cr_assert_eq(rig_acquire(r.w, 0, DEADLINE, &buf), ADAG_OK);
    block_stream(r.devs[0].dev, r.devs[0].compute);
    memset(buf, 7, 64);
    cr_assert_eq(r.w->ops->publish(r.w, 0, 64, NULL, ADAG_OK, NULL), ADAG_OK);
    /* the ring says a value is there: the recv is enqueued, not done */
    cr_assert_eq(r.rd[0]->ops->wait(r.rd[0], 0, DEADLINE, &v), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(watch(r.rd[0], 2000), ADAG_OK);
    sleep_ms(120);
    cr_assert_eq(watch(r.rd[0], 50), ADAG_ERR_TIMEOUT, "a stuck recv was not reported");
    HAS("device channel conf.m[0]: the recv from writer (communicator rank 0)");
    HAS("for execution 0 did not complete within 50 ms");
    cr_assert_eq(watch(r.w, 50), ADAG_ERR_TIMEOUT, "a stuck send was not reported");
    HAS("the send to reader (communicator rank 1)");
    /* the reader's streams wait for the writer ... */
    cr_assert_eq(stream_sync(&r, 1, r.comms[1].stream, 100), ADAG_ERR_TIMEOUT);
    cr_assert_eq(stream_sync(&r, 1, r.devs[1].compute, 100), ADAG_ERR_TIMEOUT);
    assert_comm_status(&r, ADAG_OK);
    /* ... until the reader's DAG fails */
    adag__ctx_abort(&r.peer, ADAG_ERR_TIMEOUT);
    cr_assert_eq(stream_sync(&r, 1, r.comms[1].stream, 2000), ADAG_OK,
                 "the recv still waits on the stopped writer");
    cr_assert_eq(stream_sync(&r, 1, r.devs[1].compute, 2000), ADAG_OK,
                 "the compute stream still waits for the recv");
    assert_comm_status(&r, ADAG_ERR_CLOSED);
    atomic_store(&gate_open, 1);
    rig_close(&r);
}

/* The writer's DAG fails while its sends wait for readers that will never
 * receive: wake_all aborts the communicator (every rank sees it), the
 * writer's streams drain, and closing leaves nothing (the rig checks the
 * devices, communicators and ids). */
Test(chan_comm, a_failure_aborts_the_communicator_and_the_streams_drain, .timeout = 60)
{
    rig_t r;
    const int rdevs[2] = {1, 2};
    rig_open_at(&r, &by_comm, 2, 2, 4096, 0, rdevs);
    cr_assert_eq(value_put(r.w, 0, DEADLINE), ADAG_OK);
    cr_assert_eq(value_put(r.w, 1, DEADLINE), ADAG_OK);
    cr_assert_eq(stream_sync(&r, 0, r.comms[0].stream, 100), ADAG_ERR_TIMEOUT,
                 "the sends completed with no reader");
    assert_comm_status(&r, ADAG_OK);
    adag__ctx_abort(&r.drv, ADAG_ERR_ACTOR_DIED); /* the writer's context only */
    assert_comm_status(&r, ADAG_ERR_CLOSED);
    cr_assert_eq(stream_sync(&r, 0, r.comms[0].stream, 2000), ADAG_OK,
                 "the sends still wait after the abort");
    cr_assert_eq(stream_sync(&r, 0, r.devs[0].compute, 2000), ADAG_OK);
    rig_close(&r);
}

/* A plain destroy (ADAG_ERR_CLOSED) after every value was taken does not
 * abort the communicator: the next channel of the same actors (the next
 * DAG) moves its values with it. */
Test(chan_comm, closed_keeps_the_communicator_for_the_next_channel, .timeout = 60)
{
    rig_t r;
    const int rdevs[2] = {1, 2};
    rig_open_at(&r, &by_comm, 2, 2, 4096, 0, rdevs);
    for (int round = 0; round < 2; round++) {
        for (uint64_t s = 0; s < 6; s++) {
            cr_assert_eq(value_put(r.w, s, DEADLINE), ADAG_OK, "round %d: %s", round,
                         adag_last_error());
            for (unsigned i = 0; i < 2; i++)
                cr_assert_eq(value_get(r.rd[i], s, DEADLINE), 0, "round %d, seq %llu", round,
                             (unsigned long long)s);
        }
        adag__ctx_abort(&r.drv, ADAG_ERR_CLOSED);
        adag__ctx_abort(&r.peer, ADAG_ERR_CLOSED);
        assert_comm_status(&r, ADAG_OK);
        if (round == 0)
            rig_reopen(&r, 3, 8192); /* asserts the first channel left nothing */
    }
    rig_close(&r);
}

/* ---- refusals ---- */

/* Opens an endpoint of the rig's channel in the worker's context with
 * geometry g and the given communicator table, and connects it. */
static adag_status_t open_connect(rig_t *r, adag_chan_geom_t g, int reader,
                                  const adag_chan_comm_t *comms, unsigned ncomms)
{
    adag_chan_t *ch;
    adag_chan_open_params_t p = {.name = "conf.bad[0]", .geom = g, .reader = reader,
                                 .desc = {r->desc.data, r->desc.len}, .policy = RIG_POLICY,
                                 .device = &r->devs[reader + 1], .comms = comms,
                                 .ncomms = ncomms};
    adag_status_t st = adag__ctx_open(&r->peer, CHAN_DEVICE, &p, NULL, &ch);
    if (st != ADAG_OK)
        return st;
    adag_blob_t peers[1 + RIG_MAX_READERS];
    memset(peers, 0, sizeof(peers));
    return ch->ops->connect(ch, peers, 1 + g.nreaders);
}

Test(chan_comm, a_descriptor_of_another_communicator_is_refused, .timeout = 30)
{
    rig_t r;
    rig_open(&r, &by_comm, 2, 1, 4096, 0);
    adag_chan_geom_t g = r.geom;
    cr_assert_eq(open_connect(&r, g, 0, &r.comms[1], 1), ADAG_OK, "%s", adag_last_error());
    g.comm_key = RIG_COMM_KEY + 1;
    cr_assert_eq(open_connect(&r, g, 0, &r.comms[1], 1), ADAG_ERR_PROTOCOL);
    HAS("device channel conf.bad[0]: the descriptor moves the value by communicator");
    g.comm_key = 0;
    cr_assert_eq(open_connect(&r, g, -1, NULL, 0), ADAG_ERR_PROTOCOL);
    HAS("by communicator 0 (0: none)");
    rig_close(&r);
    /* a channel without a communicator, opened as if it had one */
    const chan_backend_t plain = {CHAN_DEVICE, CAP_RING, "emu:0 -> emu:1", 0, 1};
    rig_open(&r, &plain, 2, 1, 4096, 0);
    g = r.geom;
    g.comm_key = RIG_COMM_KEY;
    cr_assert_eq(open_connect(&r, g, 0, NULL, 0), ADAG_ERR_PROTOCOL);
    HAS("the descriptor moves the value by communicator 0");
    rig_close(&r);
}

Test(chan_comm, a_communicator_the_actor_did_not_join_is_refused, .timeout = 30)
{
    rig_t r;
    char msg[128];
    rig_open(&r, &by_comm_same, 2, 1, 4096, 0);
    snprintf(msg, sizeof(msg), "device channel conf.bad[0]: communicator %llu was not joined "
             "by this actor", (unsigned long long)RIG_COMM_KEY);
    adag_chan_comm_t other = r.comms[1], none = r.comms[1];
    other.key = RIG_COMM_KEY + 1;
    none.comm = NULL;
    for (int reader = -1; reader <= 0; reader++) {
        cr_assert_eq(open_connect(&r, r.geom, reader, NULL, 0), ADAG_ERR_PROTOCOL);
        HAS(msg);
        cr_assert_eq(open_connect(&r, r.geom, reader, &other, 1), ADAG_ERR_PROTOCOL);
        HAS(msg);
        cr_assert_eq(open_connect(&r, r.geom, reader, &none, 1), ADAG_ERR_PROTOCOL);
        HAS(msg);
    }
    /* the writer's rank (same device) given to a reader */
    cr_assert_eq(open_connect(&r, r.geom, 0, &r.comms[0], 1), ADAG_ERR_PROTOCOL);
    HAS("this endpoint is rank 1 of communicator");
    HAS("but its actor joined it as rank 0");
    cr_assert_eq(open_connect(&r, r.geom, 0, &r.comms[1], 1), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(open_connect(&r, r.geom, -1, &r.comms[0], 1), ADAG_OK, "%s",
                 adag_last_error());
    rig_close(&r);
}

/* domain_create refuses a channel by communicator whose writer is in host
 * memory, or whose device endpoints share a rank. */
Test(chan_comm, places_without_a_device_writer_or_with_one_rank_twice_are_refused,
     .timeout = 30)
{
    adag_chan_geom_t g = {2, 2, 64, 9, 0};
    uint32_t kind = CHAN_DEVICE;
    const struct {
        adag_chan_place_t pl[3];
        const char *why;
    } bad[] = {
        {{{-1, 0, "w", 0}, {ADAG_DEV_EMULATED, 1, "a", 1}, {ADAG_DEV_EMULATED, 2, "b", 2}},
         "(written by w) moves its value by communicator 9, but its writer is not on a device"},
        {{{ADAG_DEV_EMULATED, 0, "w", 0}, {ADAG_DEV_EMULATED, 1, "a", 1},
          {ADAG_DEV_EMULATED, 2, "b", 1}},
         "a and b both have communicator rank 1"},
        {{{ADAG_DEV_EMULATED, 0, "w", 0}, {ADAG_DEV_EMULATED, 1, "a", 1},
          {ADAG_DEV_EMULATED, 2, "b", ADAG_COMM_MAX_RANKS}},
         "reader b has communicator rank 64"},
    };
    for (unsigned i = 0; i <= sizeof(bad) / sizeof(bad[0]); i++) {
        adag_dag_ctx_t ctx;
        adag_wbuf_t desc = {0};
        adag__ctx_init(&ctx);
        const adag_chan_place_t *places[1] = {i < 3 ? bad[i].pl : NULL};
        cr_assert_eq(adag__ctx_create_domains(&ctx, "cdag", &kind, &g, places, 1, &desc),
                     ADAG_ERR_INVALID, "places %u accepted", i);
        HAS("device channel 0 of DAG cdag");
        if (i < 3)
            HAS(bad[i].why);
        adag__ctx_destroy(&ctx);
        adag__wbuf_free(&desc);
    }
    /* the same places with distinct ranks are fine */
    adag_dag_ctx_t ctx;
    adag_wbuf_t desc = {0};
    adag__ctx_init(&ctx);
    adag_chan_place_t ok[3] = {{ADAG_DEV_EMULATED, 0, "w", 2},
                               {ADAG_DEV_EMULATED, 1, "a", 0},
                               {-1, 0, "h", 0}};
    const adag_chan_place_t *places[1] = {ok};
    cr_assert_eq(adag__ctx_create_domains(&ctx, "cdag", &kind, &g, places, 1, &desc), ADAG_OK,
                 "%s", adag_last_error());
    adag__ctx_destroy(&ctx);
    adag__wbuf_free(&desc);
}

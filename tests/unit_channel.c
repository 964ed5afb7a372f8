/*
 * Channel conformance (suite "chan"): every test runs on every backend of
 * the table below that has the capabilities it needs, through the ops
 * table only (adag__chan_backend), with endpoints opened the real way
 * (tests/chan_rig.h: a domain created by the driver's context, exported and
 * imported into a worker's context). A new backend adds one line to
 * chan_backends[]; `chan.table_covers_every_backend` fails until it does.
 *
 * Suite "shm": what only the shm backend's descriptor format allows to
 * check (offsets outside the segment, geometries whose size wraps).
 */
#include "chan_rig.h"

#include "common/error.h"
#include "transport/chan_shm.h"

#include <criterion/parameterized.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the backends: one line each ---- */

#define DEV_CAPS (CAP_RING | CAP_GEOM_CHECKED | CAP_NOTIFY_FD)
const chan_backend_t chan_backends[] = {
    {CHAN_SHM, CAP_RING | CAP_GEOM_CHECKED | CAP_NOTIFY_FD | CAP_FORK, "shm", -1, -1},
    {CHAN_SELF, 0, "self", -1, -1},
    {CHAN_UCX, CAP_RING | CAP_GEOM_CHECKED | CAP_NOTIFY_FD | CAP_ASYNC, "ucx", -1, -1},
    /* ucx with device endpoints: the value staged through the host rings */
    {CHAN_UCX, CAP_RING | CAP_GEOM_CHECKED | CAP_NOTIFY_FD | CAP_ASYNC, "ucx dev0->dev1 (staged)",
     0, 1},
    {CHAN_UCX, CAP_RING | CAP_GEOM_CHECKED | CAP_NOTIFY_FD | CAP_ASYNC, "ucx host->dev0 (staged)",
     -1, 0},
    {CHAN_UCX, CAP_RING | CAP_GEOM_CHECKED | CAP_NOTIFY_FD | CAP_ASYNC, "ucx dev0->host (staged)",
     0, -1},
    /* the device channel on the emulated device, one line per arrangement */
    {CHAN_DEVICE, DEV_CAPS, "device host->dev0 (async copy in)", -1, 0},
    {CHAN_DEVICE, DEV_CAPS, "device dev0->host (async copy out)", 0, -1},
    {CHAN_DEVICE, DEV_CAPS, "device dev0->dev0 (zero copy)", 0, 0},
    {CHAN_DEVICE, DEV_CAPS, "device dev0->dev1 (peer copy)", 0, 1},
    /* the same by the host communicator's send/recv */
    {CHAN_DEVICE, DEV_CAPS | CAP_BY_COMM, "device dev0->dev1 (communicator)", 0, 1},
    {CHAN_DEVICE, DEV_CAPS | CAP_BY_COMM, "device dev0->dev0 (communicator)", 0, 0},
};
const unsigned chan_nbackends = sizeof(chan_backends) / sizeof(chan_backends[0]);

static void free_params(struct criterion_test_params *p)
{
    cr_free(p->params);
}

/* The backends that have every capability in `needs`. */
static struct criterion_test_params backends_with(unsigned needs)
{
    chan_backend_t *a = cr_malloc(sizeof(chan_backends));
    size_t n = 0;
    for (unsigned i = 0; i < chan_nbackends; i++)
        if ((chan_backends[i].caps & needs) == needs)
            a[n++] = chan_backends[i];
    return cr_make_param_array(chan_backend_t, a, n, free_params);
}

/* A conformance test: runs once per backend with the capabilities `needs`. */
#define CONFORMANCE(name, needs)                                                             \
    ParameterizedTestParameters(chan, name)                                                  \
    {                                                                                        \
        return backends_with(needs);                                                         \
    }                                                                                        \
    ParameterizedTest(const chan_backend_t *be, chan, name, .timeout = 60)

#define NAME (be->label)
#define DEADLINE adag__deadline_ms(10000)

/* Every backend of the registry has a line (the registry's indices name
 * what tests/chan_index.h says); the flags agree with the ops. */
Test(chan, table_covers_every_backend)
{
    static const char *const builtin[CHAN_NBUILTIN] = {
        [CHAN_SELF] = "self", [CHAN_SHM] = "shm", [CHAN_DEVICE] = "device", [CHAN_UCX] = "ucx"};
    cr_assert_geq(adag__chan_nbackends(), CHAN_NBUILTIN);
    for (uint32_t k = 0; k < CHAN_NBUILTIN; k++) {
        cr_assert_str_eq(adag__chan_backend_name(k), builtin[k]);
        cr_assert_eq(adag__chan_backend_find(builtin[k]), (int)k);
    }
    for (uint32_t k = 0; k < adag__chan_nbackends(); k++) {
        const adag_chan_ops_t *ops = adag__chan_backend(k);
        cr_assert(ops, "index %u has no backend", k);
        cr_assert(ops->query, "%s has no query", ops->name);
        cr_assert_lt(strlen(ops->name), ADAG_CHAN_BACKEND_NAME_MAX, "%s", ops->name);
        unsigned lines = 0;
        for (unsigned i = 0; i < chan_nbackends; i++) {
            const chan_backend_t *line = &chan_backends[i];
            if (line->kind != k)
                continue;
            lines++;
            cr_assert_eq(!!(line->caps & CAP_NOTIFY_FD), ops->notify_fd != NULL, "%s",
                         line->label);
            if (line->caps & CAP_FORK)
                cr_assert(ops->domain_export && ops->domain_import, "%s", line->label);
            for (unsigned j = 0; j < i; j++)
                cr_assert(chan_backends[j].kind != k || chan_backends[j].wdev != line->wdev ||
                              chan_backends[j].rdev != line->rdev ||
                              (chan_backends[j].caps & CAP_BY_COMM) !=
                                  (line->caps & CAP_BY_COMM),
                          "%s has the same arrangement as %s", line->label,
                          chan_backends[j].label);
        }
        cr_assert(lines, "backend %s has no line in chan_backends[]", ops->name);
        cr_assert(ops->open && ops->close && ops->wake_all && ops->acquire && ops->publish &&
                      ops->wait && ops->release && ops->ready,
                  "%s lacks a mandatory op", ops->name);
        cr_assert_eq(!ops->domain_create, !ops->domain_destroy, "%s", ops->name);
    }
    cr_assert_null(adag__chan_backend(adag__chan_nbackends()));
    cr_assert_str_eq(adag__chan_backend_name(adag__chan_nbackends()), "?");
    cr_assert_eq(adag__chan_backend_find("foo"), -1);
}

/* ---- ordering, fan-out, wrap-around ---- */

static void fail_msg(char *buf, size_t len, uint64_t seq)
{
    snprintf(buf, len, "actor a.m: execution %llu failed", (unsigned long long)seq);
}

/* Values go out a window (the endpoint's slots: 1 for self, written and
 * read in one iteration) at a time and arrive in order with their bytes,
 * sizes, statuses and error texts; every 5th is a failure. Each reader
 * takes the whole window before the next one, except by communicator
 * (whose readers move together): there every reader takes each value. */
CONFORMANCE(ordering, 0)
{
    rig_t r;
    char msg[64];
    rig_open(&r, be, 4, 2, 200, 0);
    unsigned window = r.w->nslots;
    int together = !!(be->caps & CAP_BY_COMM);
    cr_assert(window >= 1 && window <= 4);
    for (uint64_t base = 0; base < 40; base += window) {
        for (uint64_t s = base; s < base + window; s++) {
            void *buf;
            cr_assert_eq(adag__chan_acquire(r.w, s, DEADLINE, &buf), ADAG_OK, "%s", NAME);
            if (s % 5 == 3) {
                fail_msg(msg, sizeof(msg), s);
                cr_assert_eq(adag__chan_publish(r.w, s, 0, NULL, ADAG_ERR_METHOD, msg), ADAG_OK);
            } else {
                value_fill(buf, s, value_size(s, 200));
                cr_assert_eq(adag__chan_publish(r.w, s, value_size(s, 200), NULL, ADAG_OK, NULL),
                             ADAG_OK);
            }
        }
        for (unsigned k = 0; k < r.nrd * window; k++) {
            unsigned i = together ? k % r.nrd : k / window;
            uint64_t s = base + (together ? k / r.nrd : k % window);
            adag_slot_view_t v;
            cr_assert_eq(adag__chan_wait(r.rd[i], s, DEADLINE, &v), ADAG_OK, "%s", NAME);
            if (s % 5 == 3) {
                fail_msg(msg, sizeof(msg), s);
                cr_assert_eq(v.status, ADAG_ERR_METHOD, "%s seq %llu", NAME,
                             (unsigned long long)s);
                cr_assert_str_eq(v.err, msg, "%s", NAME);
                cr_assert_eq(v.err_len, strlen(msg));
            } else {
                cr_assert_eq(value_check(&v, s, value_size(s, 200)), 0,
                             "%s: reader %u, seq %llu: wrong value", NAME, i,
                             (unsigned long long)s);
            }
            adag__chan_release(r.rd[i], s);
        }
    }
    rig_close(&r);
}

typedef struct {
    adag_chan_t *rd;
    uint64_t n;
    int speed; /* 0 fast; 1 yields while holding each value; 2 sleeps while holding some */
    int rc;
    uint64_t bad;
} reader_t;

static void *reader_main(void *p)
{
    reader_t *a = p;
    for (uint64_t s = 0; s < a->n; s++) {
        adag_slot_view_t v;
        adag_status_t st = adag__chan_wait(a->rd, s, adag__deadline_ms(20000), &v);
        size_t size = value_size(s, a->rd->capacity);
        if (st != ADAG_OK || (a->rc = value_check(&v, s, size)) != 0) {
            a->rc = a->rc ? a->rc : st;
            a->bad = s;
            return NULL;
        }
        if (a->speed == 1)
            sched_yield();
        else if (a->speed == 2 && s % 3 == 0)
            usleep(300);
        /* still ours while held: the writer may not have refilled it */
        if (a->speed && (a->rc = value_check(&v, s, size)) != 0) {
            a->rc += 10;
            a->bad = s;
            return NULL;
        }
        adag__chan_release(a->rd, s);
    }
    return NULL;
}

/* n values through a rig with reader threads of the given speeds. */
static void run_readers(const chan_backend_t *be, unsigned nslots, unsigned nreaders,
                        uint64_t n, int varied_speeds)
{
    rig_t r;
    pthread_t th[RIG_MAX_READERS];
    reader_t a[RIG_MAX_READERS];
    rig_open(&r, be, nslots, nreaders, 96, 0);
    cr_assert_eq(r.nrd, nreaders);
    for (unsigned i = 0; i < nreaders; i++) {
        a[i] = (reader_t){r.rd[i], n, varied_speeds ? (int)(i % 3) : 0, 0, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, reader_main, &a[i]), 0);
    }
    for (uint64_t s = 0; s < n; s++)
        cr_assert_eq(value_put(r.w, s, adag__deadline_ms(20000)), ADAG_OK,
                     "%s: acquire %llu: %s", NAME, (unsigned long long)s, adag_last_error());
    for (unsigned i = 0; i < nreaders; i++) {
        cr_assert_eq(pthread_join(th[i], NULL), 0);
        cr_assert_eq(a[i].rc, 0, "%s: %u readers, reader %u: error %d at seq %llu", NAME,
                     nreaders, i, a[i].rc, (unsigned long long)a[i].bad);
    }
    rig_close(&r);
}

/* Every reader sees every value, for 1, 3 and 8 readers. */
CONFORMANCE(fanout, CAP_RING)
{
    static const unsigned ns[] = {1, 3, 8};
    for (unsigned i = 0; i < 3; i++)
        run_readers(be, 4, ns[i], 300, 0);
}

/* 50 times around the ring, readers at different speeds holding their
 * slots for a while: nothing is overwritten while a reader holds it. */
CONFORMANCE(wraparound, CAP_RING)
{
    run_readers(be, 3, 3, 50 * 3, 1);
    run_readers(be, 1, 2, 50, 1);
}

/* ---- slot reuse ---- */

/* The writer's acquire of seq + nslots does not return while any reader
 * still holds seq, and returns once the last one released it (also to a
 * writer asleep in acquire). */
CONFORMANCE(slot_reuse_waits_for_every_reader, CAP_RING)
{
    rig_t r;
    void *buf;
    adag_slot_view_t v;
    rig_open(&r, be, 2, 3, 64, 0);
    cr_assert_eq(value_put(r.w, 0, DEADLINE), ADAG_OK);
    cr_assert_eq(value_put(r.w, 1, DEADLINE), ADAG_OK);
    cr_assert_eq(adag__chan_acquire(r.w, 2, adag__deadline_ms(20), &buf), ADAG_ERR_TIMEOUT,
                 "%s: every reader holds seq 0", NAME);
    cr_assert_eq(value_get(r.rd[0], 0, DEADLINE), 0);
    cr_assert_eq(value_get(r.rd[1], 0, DEADLINE), 0);
    cr_assert_eq(adag__chan_acquire(r.w, 2, adag__deadline_ms(20), &buf), ADAG_ERR_TIMEOUT,
                 "%s: reader 2 still holds seq 0", NAME);
    cr_assert_eq(adag__chan_wait(r.rd[2], 0, DEADLINE, &v), ADAG_OK);
    cr_assert_eq(adag__chan_acquire(r.w, 2, adag__deadline_ms(20), &buf), ADAG_ERR_TIMEOUT,
                 "%s: reader 2 read seq 0 but has not released it", NAME);
    adag__chan_release(r.rd[2], 0);
    cr_assert_eq(adag__chan_acquire(r.w, 2, adag__deadline_ms(1000), &buf), ADAG_OK,
                 "%s: every reader released seq 0", NAME);
    /* seq 2 is not visible before it is published */
    cr_assert_eq(adag__chan_wait(r.rd[0], 2, adag__deadline_ms(20), &v), ADAG_ERR_TIMEOUT);
    value_fill(buf, 2, value_size(2, 64));
    cr_assert_eq(adag__chan_publish(r.w, 2, value_size(2, 64), NULL, ADAG_OK, NULL), ADAG_OK);

    /* a writer asleep in acquire(3) is woken by the last release of seq 1 */
    _Atomic int done = 0;
    blocked_t b;
    blocked_start(&b, r.w, 1, 3, adag__deadline_ms(10000), &done);
    cr_assert_eq(value_get(r.rd[0], 1, DEADLINE), 0);
    cr_assert_eq(value_get(r.rd[1], 1, DEADLINE), 0);
    usleep(50000);
    cr_assert_eq(atomic_load(&done), 0, "%s: acquire(3) returned while reader 2 holds seq 1",
                 NAME);
    int64_t t0 = adag__now_ns();
    cr_assert_eq(value_get(r.rd[2], 1, DEADLINE), 0);
    blocked_join(&b);
    cr_assert_eq(b.st, ADAG_OK, "%s: %s", NAME, adag_status_str(b.st));
    cr_assert_lt(ms_since(t0), PROMPT_MS, "%s: the writer slept through the release", NAME);
    rig_close(&r);
}

/* A release held back for the publishes that follow it (release_held,
 * what a worker loop does before its last outputs) takes effect at the
 * latest with flush: the writer's acquire of seq + nslots then returns,
 * also to a writer already asleep in it. */
CONFORMANCE(held_release_frees_the_slot_after_flush, CAP_RING)
{
    rig_t r;
    adag_slot_view_t v;
    rig_open(&r, be, 1, 2, 64, 0);
    cr_assert_eq(value_put(r.w, 0, DEADLINE), ADAG_OK);
    cr_assert_eq(value_get(r.rd[0], 0, DEADLINE), 0);
    cr_assert_eq(adag__chan_wait(r.rd[1], 0, DEADLINE, &v), ADAG_OK);
    _Atomic int done = 0;
    blocked_t b;
    blocked_start(&b, r.w, 1, 1, adag__deadline_ms(10000), &done);
    usleep(20000);
    cr_assert_eq(atomic_load(&done), 0, "%s: acquire(1) returned while reader 1 holds seq 0",
                 NAME);
    adag__chan_release_held(r.rd[1], 0);
    int64_t t0 = adag__now_ns();
    adag__chan_flush(r.rd[1]);
    blocked_join(&b);
    cr_assert_eq(b.st, ADAG_OK, "%s: %s", NAME, adag_status_str(b.st));
    cr_assert_lt(ms_since(t0), PROMPT_MS, "%s: the flushed release did not reach the writer",
                 NAME);
    /* and the channel goes on */
    cr_assert_eq(adag__chan_publish(r.w, 1, 0, NULL, ADAG_OK, NULL), ADAG_OK);
    for (unsigned i = 0; i < 2; i++) {
        cr_assert_eq(adag__chan_wait(r.rd[i], 1, DEADLINE, &v), ADAG_OK, "%s", NAME);
        cr_assert_eq(v.size, 0);
        adag__chan_release_held(r.rd[i], 1);
        adag__chan_flush(r.rd[i]);
    }
    cr_assert_eq(value_put(r.w, 2, DEADLINE), ADAG_OK, "%s: seq 1's slot came back", NAME);
    rig_close(&r);
}

/* ---- oversize values ---- */

/* A publish larger than the slot is refused with ADAG_ERR_TOO_LARGE,
 * naming the channel, the execution and both sizes, and publishes nothing:
 * no reader sees the execution until the writer publishes it again with a
 * size that fits (the loop refuses such a value before publishing,
 * dag/exec/loop.c; a caller that gets the refusal fails the DAG). Exactly the
 * capacity fits. A failed execution's size says nothing and is not
 * checked. */
CONFORMANCE(oversize_values, 0)
{
    rig_t r;
    rig_open(&r, be, 2, 2, 64, 0);
    const struct {
        size_t size;
        adag_status_t st;
    } ex[] = {{65, ADAG_OK}, {64 + 4096, ADAG_OK}, {SIZE_MAX, ADAG_OK},
              {64, ADAG_OK}, {0, ADAG_OK},         {SIZE_MAX, ADAG_ERR_METHOD}};
    for (uint64_t s = 0; s < sizeof(ex) / sizeof(ex[0]); s++) {
        void *buf;
        size_t fit = ex[s].size <= 64 ? ex[s].size : 64;
        cr_assert_eq(adag__chan_acquire(r.w, s, DEADLINE, &buf), ADAG_OK);
        value_fill(buf, s, 64);
        if (ex[s].st == ADAG_OK && ex[s].size > 64) {
            adag_status_t st = adag__chan_publish(r.w, s, ex[s].size, NULL, ADAG_OK, NULL);
            char want[64];
            snprintf(want, sizeof(want), "%zu bytes", ex[s].size);
            cr_assert(st == ADAG_ERR_TOO_LARGE && strstr(adag_last_error(), r.w->name) &&
                          strstr(adag_last_error(), want) &&
                          strstr(adag_last_error(), "capacity of 64 bytes"),
                      "%s: a publish of %zu bytes into 64: %s (%s)", NAME, ex[s].size,
                      adag_status_str(st), adag_last_error());
            for (unsigned i = 0; (be->caps & CAP_RING) && i < r.nrd; i++)
                cr_assert(!adag__chan_ready(r.rd[i], s), "%s: reader %u sees refused seq %llu",
                          NAME, i, (unsigned long long)s);
        }
        cr_assert_eq(adag__chan_publish(r.w, s, ex[s].st ? ex[s].size : fit, NULL, ex[s].st,
                                       ex[s].st ? "it broke" : NULL),
                     ADAG_OK, "%s: %s", NAME, adag_last_error());
        for (unsigned i = 0; i < r.nrd; i++) {
            adag_slot_view_t v;
            cr_assert_eq(adag__chan_wait(r.rd[i], s, DEADLINE, &v), ADAG_OK);
            cr_assert_eq(v.status, ex[s].st, "%s", NAME);
            cr_assert(ex[s].st ? strstr(v.err, "it broke") != NULL : !value_check(&v, s, fit),
                      "%s: seq %llu, %zu bytes arrived", NAME, (unsigned long long)s, v.size);
            adag__chan_release(r.rd[i], s);
        }
    }
    rig_close(&r);
}

/* ---- abort ---- */

/* Writers blocked in acquire and readers blocked in wait, in other threads,
 * all return ADAG_ERR_CLOSED promptly after adag__ctx_abort; an endpoint
 * opened after the abort does not block either. */
CONFORMANCE(abort_wakes_every_waiter, CAP_RING)
{
    rig_t r;
    rig_open(&r, be, 2, 3, 64, RIG_ONE_CTX);
    cr_assert_eq(value_put(r.w, 0, DEADLINE), ADAG_OK);
    cr_assert_eq(value_put(r.w, 1, DEADLINE), ADAG_OK);
    /* the ring is full: acquire(2) waits for readers that wait for seq 2 */
    _Atomic int done = 0;
    blocked_t b[5];
    blocked_start(&b[0], r.w, 1, 2, DEADLINE, &done);
    for (unsigned i = 0; i < 3; i++)
        blocked_start(&b[1 + i], r.rd[i], 0, 2, DEADLINE, &done);
    blocked_start(&b[4], r.rd[0], 0, 7, DEADLINE, &done);
    usleep(100000); /* long past the spin: asleep */
    cr_assert_eq(atomic_load(&done), 0, "%s: a call returned before the abort", NAME);
    int64_t t0 = adag__now_ns();
    cr_assert(adag__ctx_abort(&r.drv, ADAG_ERR_ACTOR_DIED));
    for (unsigned i = 0; i < 5; i++) {
        blocked_join(&b[i]);
        cr_assert_eq(b[i].st, ADAG_ERR_CLOSED, "%s: call %u: %s", NAME, i,
                     adag_status_str(b[i].st));
    }
    cr_assert_lt(ms_since(t0), PROMPT_MS, "%s: waiters woke %.0f ms after the abort", NAME,
                 ms_since(t0));

    /* opened after the abort */
    adag_chan_t *late_r, *late_w;
    cr_assert_eq(rig_endpoint(&r, &r.drv, 0, &late_r), ADAG_OK);
    cr_assert_eq(rig_endpoint(&r, &r.drv, -1, &late_w), ADAG_OK);
    t0 = adag__now_ns();
    adag_slot_view_t v;
    void *buf;
    cr_assert_eq(adag__chan_wait(late_r, 2, DEADLINE, &v), ADAG_ERR_CLOSED, "%s", NAME);
    cr_assert_eq(adag__chan_acquire(late_w, 2, DEADLINE, &buf), ADAG_ERR_CLOSED, "%s", NAME);
    cr_assert_lt(ms_since(t0), PROMPT_MS);
    /* what was published is still there (a late endpoint of an async
     * backend has its own ring: nothing was sent to it); ready never blocks */
    if (!(be->caps & CAP_ASYNC))
        cr_assert(adag__chan_ready(late_r, 1));
    cr_assert(!adag__chan_ready(late_r, 2));
    rig_close(&r);
}

/* ---- timeouts ---- */

/* A wait or acquire with a deadline in the past or 20 ms ahead returns
 * ADAG_ERR_TIMEOUT without data (CAP_RING); on a backend where nothing
 * blocks, a past deadline does not stop an iteration. */
CONFORMANCE(timeouts, 0)
{
    rig_t r;
    rig_open(&r, be, 2, 1, 64, 0);
    int64_t deadlines[2];
    if (be->caps & CAP_RING) {
        for (int k = 0; k < 3; k++) {
            deadlines[0] = adag__now_ns() - 1000;
            deadlines[1] = adag__deadline_ms(20);
            int64_t d = k == 2 ? 0 : deadlines[k];
            adag_slot_view_t v, untouched;
            memset(&v, 0x5a, sizeof(v));
            untouched = v;
            int64_t t0 = adag__now_ns();
            cr_assert_eq(adag__chan_wait(r.rd[0], 0, d, &v), ADAG_ERR_TIMEOUT, "%s", NAME);
            double ms = ms_since(t0);
            cr_assert_eq(memcmp(&v, &untouched, sizeof(v)), 0, "%s: a timeout gave data", NAME);
            cr_assert_lt(ms, PROMPT_MS);
            if (k == 1)
                cr_assert_geq(ms, 19.0, "%s: returned %.1f ms into a 20 ms wait", NAME, ms);
        }
        cr_assert_eq(value_put(r.w, 0, DEADLINE), ADAG_OK);
        cr_assert_eq(value_put(r.w, 1, DEADLINE), ADAG_OK);
        for (int k = 0; k < 2; k++) {
            void *buf = &r;
            int64_t d = k ? adag__deadline_ms(20) : adag__now_ns() - 1000;
            int64_t t0 = adag__now_ns();
            cr_assert_eq(adag__chan_acquire(r.w, 2, d, &buf), ADAG_ERR_TIMEOUT, "%s", NAME);
            cr_assert_eq(buf, (void *)&r, "%s: a timed-out acquire gave a buffer", NAME);
            cr_assert_lt(ms_since(t0), PROMPT_MS);
            if (k)
                cr_assert_geq(ms_since(t0), 19.0);
        }
        /* a published value is there whatever the deadline */
        adag_slot_view_t v;
        cr_assert_eq(adag__chan_wait(r.rd[0], 0, 0, &v), ADAG_OK);
        cr_assert_eq(value_check(&v, 0, value_size(0, 64)), 0);
    } else {
        for (uint64_t s = 0; s < 3; s++) {
            int64_t t0 = adag__now_ns();
            cr_assert_eq(value_put(r.w, s, adag__now_ns() - 1000), ADAG_OK, "%s", NAME);
            cr_assert_eq(value_get(r.rd[0], s, 0), 0, "%s", NAME);
            cr_assert_lt(ms_since(t0), PROMPT_MS);
        }
    }
    rig_close(&r);
}

/* ---- failures ---- */

static void publish_status(rig_t *r, uint64_t s, size_t size, adag_status_t st, const char *err)
{
    void *buf;
    cr_assert_eq(adag__chan_acquire(r->w, s, DEADLINE, &buf), ADAG_OK);
    value_fill(buf, s, size);
    cr_assert_eq(adag__chan_publish(r->w, s, size, NULL, st, err), ADAG_OK);
}

/* Every reader sees status want and error text err (and releases s). */
static void expect_status(rig_t *r, uint64_t s, adag_status_t want, const char *err)
{
    for (unsigned i = 0; i < r->nrd; i++) {
        adag_slot_view_t v;
        cr_assert_eq(adag__chan_wait(r->rd[i], s, DEADLINE, &v), ADAG_OK);
        cr_assert_eq(v.status, want, "%s seq %llu: status %s", r->ops->name,
                     (unsigned long long)s, adag_status_str(v.status));
        cr_assert(v.err, "%s: no error text", r->ops->name);
        cr_assert_str_eq(v.err, err, "%s seq %llu", r->ops->name, (unsigned long long)s);
        cr_assert_eq(v.err_len, strlen(err), "%s", r->ops->name);
        adag__chan_release(r->rd[i], s);
    }
}

/* A failure's status and message reach every reader; a long message is
 * cut, never overflows; an OK value after a failure carries no text. */
CONFORMANCE(failures_travel, 0)
{
    rig_t r;
    char longmsg[2000], cut[ADAG_SLOT_ERR_MAX];
    rig_open(&r, be, 2, 2, 64, 0);
    publish_status(&r, 0, 0, ADAG_ERR_METHOD, "actor a.m: broken");
    expect_status(&r, 0, ADAG_ERR_METHOD, "actor a.m: broken");
    memset(longmsg, 'x', sizeof(longmsg) - 1);
    longmsg[sizeof(longmsg) - 1] = '\0';
    memcpy(cut, longmsg, sizeof(cut) - 1);
    cut[sizeof(cut) - 1] = '\0';
    publish_status(&r, 1, 0, ADAG_ERR_METHOD, longmsg);
    expect_status(&r, 1, ADAG_ERR_METHOD, cut);
    /* an OK value in the slots that held the failures: text ignored and cleared */
    publish_status(&r, 2, value_size(2, 64), ADAG_OK, "ignored");
    expect_status(&r, 2, ADAG_OK, "");
    publish_status(&r, 3, value_size(3, 64), ADAG_OK, NULL);
    for (unsigned i = 0; i < r.nrd; i++)
        cr_assert_eq(value_get(r.rd[i], 3, DEADLINE), 0, "%s", NAME);
    publish_status(&r, 4, 0, ADAG_ERR_ACTOR_DIED, NULL);
    expect_status(&r, 4, ADAG_ERR_ACTOR_DIED, "");
    publish_status(&r, 5, 0, ADAG_ERR_METHOD, "");
    expect_status(&r, 5, ADAG_ERR_METHOD, "");
    rig_close(&r);
}

/* ---- ready ---- */

/* ready never blocks and is true only once seq is published. */
CONFORMANCE(ready_only_after_publish, 0)
{
    rig_t r;
    rig_open(&r, be, 3, 2, 64, 0);
    for (uint64_t s = 0; s < 10; s++) {
        void *buf;
        for (unsigned i = 0; i < r.nrd; i++)
            cr_assert(!adag__chan_ready(r.rd[i], s), "%s: seq %llu ready before acquire", NAME,
                      (unsigned long long)s);
        cr_assert_eq(adag__chan_acquire(r.w, s, DEADLINE, &buf), ADAG_OK);
        value_fill(buf, s, 8);
        for (unsigned i = 0; i < r.nrd; i++)
            cr_assert(!adag__chan_ready(r.rd[i], s), "%s: seq %llu ready before publish", NAME,
                      (unsigned long long)s);
        cr_assert_eq(adag__chan_publish(r.w, s, 8, NULL, ADAG_OK, NULL), ADAG_OK);
        for (unsigned i = 0; i < r.nrd; i++) {
            cr_assert(rig_ready(be, r.rd[i], s), "%s: seq %llu published, not ready", NAME,
                      (unsigned long long)s);
            cr_assert(!adag__chan_ready(r.rd[i], s + 1), "%s: seq %llu ready", NAME,
                      (unsigned long long)s + 1);
            adag_slot_view_t v;
            cr_assert_eq(adag__chan_wait(r.rd[i], s, DEADLINE, &v), ADAG_OK);
            cr_assert_eq(value_check(&v, s, 8), 0);
            adag__chan_release(r.rd[i], s);
        }
    }
    rig_close(&r);
}

/* ---- across processes ---- */

/* Readers in forked processes that import the domain themselves (dup'd
 * fds, a fresh context) see every value the parent writes. */
CONFORMANCE(readers_in_other_processes, CAP_FORK | CAP_RING)
{
    rig_t r;
    const uint64_t n = 50 * 4;
    rig_open(&r, be, 4, 2, 256, 0);
    cr_assert_null(r.ops->connect, "the children would need the peers' info");
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        adag_wbuf_t blob = {0};
        int fds[ADAG_CTL_MAX_FDS];
        unsigned nfds;
        rig_export(&r.drv, &blob, fds, &nfds);
        kids[k] = fork();
        cr_assert_geq(kids[k], 0);
        if (kids[k] == 0) {
            adag_dag_ctx_t ctx;
            adag_chan_t *rd;
            adag__ctx_init(&ctx);
            if (adag__ctx_import_domains(&ctx, (adag_blob_t){blob.data, blob.len}, fds, nfds))
                _exit(10);
            if (rig_endpoint(&r, &ctx, k, &rd))
                _exit(11);
            for (uint64_t s = 0; s < n; s++)
                if (value_get(rd, s, adag__deadline_ms(20000)))
                    _exit(12);
            adag__ctx_destroy(&ctx);
            _exit(0);
        }
        for (unsigned i = 0; i < nfds; i++)
            close(fds[i]);
        adag__wbuf_free(&blob);
    }
    for (uint64_t s = 0; s < n; s++)
        cr_assert_eq(value_put(r.w, s, adag__deadline_ms(20000)), ADAG_OK, "%s seq %llu", NAME,
                     (unsigned long long)s);
    for (int k = 0; k < 2; k++) {
        int status;
        cr_assert_eq(waitpid(kids[k], &status, 0), kids[k]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "%s: reader process %d: status 0x%x", NAME, k, status);
    }
    rig_close(&r);
}

/* ---- notify_fd ---- */

static int readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* readable at once, or within PROMPT_MS on a CAP_ASYNC backend */
static int readable_soon(const chan_backend_t *be, int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ms = be->caps & CAP_ASYNC ? (int)PROMPT_MS : 0;
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* A reader arms the fd; it becomes readable after the writer's next
 * publish, not before (and not for a publish before it was armed). */
CONFORMANCE(notify_fd_after_publish, CAP_NOTIFY_FD | CAP_RING)
{
    rig_t r;
    rig_open(&r, be, 4, 1, 64, 0);
    cr_assert_eq(value_put(r.w, 0, DEADLINE), ADAG_OK); /* not armed yet */
    cr_assert(rig_ready(be, r.rd[0], 0), "%s", NAME);
    int fd = r.ops->notify_fd(r.rd[0]);
    cr_assert_geq(fd, 0, "%s: no notify fd", NAME);
    cr_assert(!readable(fd), "%s: readable before any publish since it was armed", NAME);
    void *buf;
    cr_assert_eq(adag__chan_acquire(r.w, 1, DEADLINE, &buf), ADAG_OK);
    cr_assert(!readable(fd), "%s: readable after acquire, before publish", NAME);
    cr_assert_eq(adag__chan_publish(r.w, 1, 0, NULL, ADAG_OK, NULL), ADAG_OK);
    cr_assert(readable_soon(be, fd), "%s: not readable after a publish", NAME);
    uint64_t count;
    cr_assert_eq(read(fd, &count, sizeof(count)), (ssize_t)sizeof(count));
    cr_assert(!readable(fd));
    cr_assert_eq(value_put(r.w, 2, DEADLINE), ADAG_OK);
    cr_assert(readable_soon(be, fd), "%s: not readable after the second publish", NAME);
    rig_close(&r);
}

/* ---- descriptors ---- */

static adag_status_t open_with(rig_t *r, adag_blob_t desc, adag_chan_geom_t g, int reader)
{
    adag_chan_t *ch;
    adag_chan_device_t *dev = reader >= -1 && reader < (int)RIG_MAX_READERS
                                  ? &r->devs[reader + 1] : NULL;
    adag_chan_open_params_t p = {.name = "conf.bad[0]", .geom = g, .reader = reader,
                                 .desc = desc, .policy = RIG_POLICY,
                                 .device = dev && dev->dev ? dev : NULL};
    unsigned before = r->peer.neps;
    adag_status_t st = adag__ctx_open(&r->peer, r->be->kind, &p, NULL, &ch);
    if (st == ADAG_OK)
        return st;
    cr_assert_eq(r->peer.neps, before, "a failed open was recorded");
    cr_assert(strstr(adag_last_error(), "conf.bad[0]"), "message does not name the channel: %s",
              adag_last_error());
    return st;
}

/* A truncated or padded descriptor, a reader index out of range, and (for
 * a backend that checks it) a geometry that does not match the channel's
 * are ADAG_ERR_PROTOCOL at open. */
CONFORMANCE(open_validates_descriptor, 0)
{
    rig_t r;
    rig_open(&r, be, 4, 2, 128, 0);
    adag_blob_t d = {r.desc.data, r.desc.len};
    adag_chan_geom_t g = r.geom;
    int last = (int)g.nreaders - 1;
    cr_assert_eq(open_with(&r, d, g, -1), ADAG_OK, "%s: %s", NAME, adag_last_error());
    for (size_t len = 0; len < d.len; len++)
        cr_assert_eq(open_with(&r, (adag_blob_t){d.data, len}, g, last), ADAG_ERR_PROTOCOL,
                     "%s: a %zu-byte prefix", NAME, len);
    char padded[256] = {0};
    cr_assert_lt(d.len, sizeof(padded));
    if (d.len)
        memcpy(padded, d.data, d.len);
    padded[d.len] = 0x42;
    cr_assert_eq(open_with(&r, (adag_blob_t){padded, d.len + 1}, g, last), ADAG_ERR_PROTOCOL,
                 "%s: a trailing byte", NAME);
    cr_assert_eq(open_with(&r, d, g, (int)g.nreaders), ADAG_ERR_PROTOCOL, "%s", NAME);
    cr_assert_eq(open_with(&r, d, g, -2), ADAG_ERR_PROTOCOL, "%s", NAME);
    if (be->caps & CAP_GEOM_CHECKED) {
        adag_chan_geom_t bad[] = {
            {g.nslots + 1, g.nreaders, g.capacity, 0, 0}, {g.nslots, g.nreaders + 1, g.capacity, 0, 0},
            {g.nslots, g.nreaders, g.capacity + 1, 0, 0}, {g.nslots, g.nreaders, g.capacity + 64, 0, 0},
            {0, g.nreaders, g.capacity, 0, 0},            {g.nslots, g.nreaders - 1, g.capacity, 0, 0},
        };
        for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
            cr_assert_eq(open_with(&r, d, bad[i], -1), ADAG_ERR_PROTOCOL,
                         "%s: geometry %u accepted", NAME, i);
    }
    rig_close(&r);
}

/* ---- shm only: its descriptor is an offset into the domain's segment ---- */

static const chan_backend_t *shm_line(void)
{
    for (unsigned i = 0; i < chan_nbackends; i++)
        if (chan_backends[i].kind == CHAN_SHM)
            return &chan_backends[i];
    cr_assert_fail("no shm line");
    return NULL;
}

static adag_blob_t offset_desc(uint64_t *off)
{
    return (adag_blob_t){off, sizeof(*off)};
}

Test(shm, descriptor_offset_outside_segment_is_refused, .timeout = 30)
{
    rig_t r;
    rig_open(&r, shm_line(), 4, 2, 128, 0);
    uint64_t good;
    cr_assert_eq(r.desc.len, sizeof(good));
    memcpy(&good, r.desc.data, sizeof(good));
    uint64_t size = adag__ctx_domain_bytes(&r.drv);
    cr_assert_gt(size, good);
    uint64_t bad[] = {0, 32, good + 1, good + 64, good - 64, size - 64, size, size + 64,
                      UINT64_MAX & ~(uint64_t)63, (uint64_t)1 << 63, 0xdeadbeefcafebabeull};
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t off = bad[i];
        cr_assert_eq(open_with(&r, offset_desc(&off), r.geom, 0), ADAG_ERR_PROTOCOL,
                     "offset %llu (channel at %llu, segment %llu)", (unsigned long long)off,
                     (unsigned long long)good, (unsigned long long)size);
    }
    cr_assert_eq(open_with(&r, offset_desc(&good), r.geom, 0), ADAG_OK);
    rig_close(&r);
}

/* Two channels of different geometry: each descriptor opens only with its
 * own geometry. */
Test(shm, descriptor_of_another_channel_is_refused, .timeout = 30)
{
    adag_dag_ctx_t ctx;
    adag_chan_geom_t g[2] = {{4, 2, 128, 0, 0}, {2, 1, 4096, 0, 0}};
    uint32_t kinds[2] = {CHAN_SHM, CHAN_SHM};
    adag_wbuf_t descs[2] = {{0}, {0}};
    adag__ctx_init(&ctx);
    cr_assert_eq(adag__ctx_create_domains(&ctx, "two", kinds, g, NULL, 2, descs), ADAG_OK);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            adag_chan_t *ch;
            adag_chan_open_params_t p = {.name = "x", .geom = g[j], .reader = 0,
                                         .desc = {descs[i].data, descs[i].len}};
            cr_assert_eq(adag__ctx_open(&ctx, CHAN_SHM, &p, NULL, &ch),
                         i == j ? ADAG_OK : ADAG_ERR_PROTOCOL, "descriptor %d, geometry %d", i,
                         j);
        }
    adag__ctx_destroy(&ctx);
    adag__wbuf_free(&descs[0]);
    adag__wbuf_free(&descs[1]);
}

/* A capacity or slot count whose channel size would wrap around is refused
 * when the domain is laid out, and at open (a peer's program may claim it). */
Test(shm, geometry_that_wraps_is_refused, .timeout = 30)
{
    const size_t huge = SIZE_MAX - 10;
    cr_assert_eq(adag__shm_chan_size(4, 1, huge), SIZE_MAX);
    cr_assert_eq(adag__shm_chan_size(2, 1, ((size_t)1 << 63) + 512), SIZE_MAX);
    cr_assert_eq(adag__shm_chan_size(UINT32_MAX, UINT32_MAX, (size_t)1 << 40), SIZE_MAX);
    adag_chan_geom_t bad[] = {{4, 1, huge, 0, 0}, {2, 1, (size_t)1 << 63, 0, 0}, {UINT32_MAX, UINT32_MAX, (size_t)1 << 40, 0, 0}};
    for (unsigned i = 0; i < 3; i++) {
        adag_dag_ctx_t ctx;
        adag_wbuf_t desc = {0};
        uint32_t kind = CHAN_SHM;
        adag__ctx_init(&ctx);
        cr_assert_eq(adag__ctx_create_domains(&ctx, "wrap", &kind, &bad[i], NULL, 1, &desc),
                     ADAG_ERR_INVALID, "geometry %u", i);
        cr_assert_null(ctx.domains[CHAN_SHM]);
        adag__ctx_destroy(&ctx);
        adag__wbuf_free(&desc);
    }
    /* channels that fit one by one but not together */
    adag_chan_geom_t big[4] = {{3, 0, (size_t)1 << 62, 0, 0}, {3, 0, (size_t)1 << 62, 0, 0},
                               {3, 0, (size_t)1 << 62, 0, 0}, {3, 0, (size_t)1 << 62, 0, 0}};
    uint32_t kinds[4] = {CHAN_SHM, CHAN_SHM, CHAN_SHM, CHAN_SHM};
    adag_wbuf_t descs[4] = {{0}};
    adag_dag_ctx_t ctx;
    adag__ctx_init(&ctx);
    cr_assert_eq(adag__ctx_create_domains(&ctx, "sum", kinds, big, NULL, 4, descs),
                 ADAG_ERR_INVALID);
    adag__ctx_destroy(&ctx);
    for (int i = 0; i < 4; i++)
        adag__wbuf_free(&descs[i]);

    /* at open: a real channel's offset with a geometry that wraps */
    rig_t r;
    rig_open(&r, shm_line(), 4, 1, 128, 0);
    adag_blob_t d = {r.desc.data, r.desc.len};
    for (unsigned i = 0; i < 3; i++)
        cr_assert_eq(open_with(&r, d, bad[i], -1), ADAG_ERR_PROTOCOL, "geometry %u", i);
    rig_close(&r);
}

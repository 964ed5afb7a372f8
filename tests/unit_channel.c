/*
 * Channel conformance (suite "chan"): every test runs on every backend of
 * the table below that has the capabilities it needs, through the ops
 * table only (adag__chan_backend), with endpoints opened the real way
 * (tests/chan_rig.h: a domain created by the driver's context, exported and
 * imported into a worker's context). A new backend adds one line to
 * chan_backends[]; `chan.table_covers_every_backend` fails until it does.
 *
 * This file: the table, and values going through: order, fan-out,
 * wrap-around, slot reuse, oversize values, readiness, readers in other
 * processes, the notify fd. What goes wrong (abort, timeouts, failures,
 * descriptors refused; suite "shm"): tests/unit_channel_errors.c.
 */
#include "chan_rig.h"

#include "common/error.h"

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
    {CHAN_DEVICE, DEV_CAPS, "device dev0->dev0 (zero copy, value ops)", 0, 0},
    {CHAN_DEVICE, DEV_CAPS, "device dev0->dev1 (peer copy, value ops)", 0, 1},
    {CHAN_DEVICE, DEV_CAPS | CAP_IPC_EVENTS, "device dev0->dev0 (zero copy, IPC events)", 0, 0},
    {CHAN_DEVICE, DEV_CAPS | CAP_IPC_EVENTS, "device dev0->dev1 (peer copy, IPC events)", 0, 1},
    /* the same by the host communicator's send/recv */
    {CHAN_DEVICE, DEV_CAPS | CAP_BY_COMM, "device dev0->dev1 (communicator)", 0, 1},
    {CHAN_DEVICE, DEV_CAPS | CAP_BY_COMM, "device dev0->dev0 (communicator)", 0, 0},
};
const unsigned chan_nbackends = sizeof(chan_backends) / sizeof(chan_backends[0]);


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
                              (chan_backends[j].caps & (CAP_BY_COMM | CAP_IPC_EVENTS)) !=
                                  (line->caps & (CAP_BY_COMM | CAP_IPC_EVENTS)),
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

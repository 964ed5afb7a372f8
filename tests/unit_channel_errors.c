/*
 * Channel conformance (suite "chan", tests/unit_channel.c has the table of
 * backends): what goes wrong. An abort wakes every waiter, deadlines pass,
 * a writer's failure travels to its readers, a bad descriptor is refused
 * at open; on every backend that has the capabilities a test needs.
 *
 * Suite "shm": what only the shm backend's descriptor format allows to
 * check (offsets outside the segment, geometries whose size wraps).
 */
#include "chan_rig.h"

#include "common/error.h"
#include "transport/chan_shm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME (be->label)
#define DEADLINE adag__deadline_ms(10000)

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
        /* a published value is there whatever the deadline, once it has
         * landed (a message, or a copy on a device stream, may still be on
         * its way: a loaded machine once took longer than the publish) */
        adag_slot_view_t v;
        adag_status_t st;
        int64_t landed_by = adag__deadline_ms(5000);
        while ((st = adag__chan_wait(r.rd[0], 0, 0, &v)) == ADAG_ERR_TIMEOUT &&
               adag__now_ns() < landed_by)
            usleep(1000);
        cr_assert_eq(st, ADAG_OK, "%s: a published value is refused at deadline 0", NAME);
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

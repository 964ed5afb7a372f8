/*
 * Faults on the device path, at the channel level (suite "dev_faults"):
 * the device channel's watch names a communication op that does not
 * complete (a peer copy, a wait for a value on the same device, a copy in
 * from host memory, a copy out to host memory), waits on nothing, and
 * stays quiet for ops that complete; wake_all (the DAG's abort) abandons
 * the peers' events so that a stream waiting on a peer that will never
 * record drains at once. Each "peer" is stuck by a kernel that blocks its
 * stream until the test lets it go; the rig then checks that closing
 * leaves no memory, event or import behind on any device.
 */
#define RIG_NO_WRAP /* the raw ops: the rig's wrappers synchronize streams */
#include "chan_rig.h"

#include "common/clock.h"
#include "common/error.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* ---- a kernel that blocks its stream until released ---- */

static _Atomic int gate_open;

static void gate_kernel(void *arg)
{
    (void)arg;
    int64_t give_up = adag__deadline_ms(20000); /* a broken test must still end */
    while (!atomic_load(&gate_open) && adag__now_ns() < give_up) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void block_stream(adag_device_t *dev, adag_dev_stream_t *s)
{
    atomic_store(&gate_open, 0);
    cr_assert_eq(dev->ops->host_fn(s, gate_kernel, NULL), ADAG_OK);
}

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

#define HAS(needle)                                                                           \
    cr_assert(strstr(adag_last_error(), (needle)), "message \"%s\" lacks \"%s\"",              \
              adag_last_error(), (needle))

static const chan_backend_t peer_copy = {CHAN_DEVICE, CAP_RING, "emu:0 -> emu:1", 0, 1};
static const chan_backend_t same_device = {CHAN_DEVICE, CAP_RING, "emu:0 -> emu:0", 0, 0};
static const chan_backend_t peer_copy_events = {CHAN_DEVICE, CAP_RING | CAP_IPC_EVENTS,
                                                "emu:0 -> emu:1", 0, 1};
static const chan_backend_t same_device_events = {CHAN_DEVICE, CAP_RING | CAP_IPC_EVENTS,
                                                  "emu:0 -> emu:0", 0, 0};
static const chan_backend_t copy_in = {CHAN_DEVICE, CAP_RING, "host -> emu:1", -1, 1};
static const chan_backend_t copy_out = {CHAN_DEVICE, CAP_RING, "emu:0 -> host", 0, -1};

/* The writer publishes execution 0 with its compute stream blocked, so
 * the value is never ready; the reader waits for it. */
static void publish_stuck(rig_t *r)
{
    void *buf;
    cr_assert_eq(adag__chan_acquire(r->w, 0, adag__deadline_ms(5000), &buf), ADAG_OK, "%s",
                 adag_last_error());
    if (r->devs[0].dev)
        block_stream(r->devs[0].dev, r->devs[0].compute);
    memset(buf, 7, 64);
    cr_assert_eq(adag__chan_publish(r->w, 0, 64, NULL, ADAG_OK, NULL), ADAG_OK);
}

/* A reader endpoint's communication op that never completes is named by
 * watch once overdue (not before), and abandoning the peer's events (the
 * abort) lets the reader's streams drain while the writer is still stuck. */
static void stuck_reader(const chan_backend_t *be, const char *what)
{
    rig_t r;
    rig_open(&r, be, 2, 1, 4096, 0);
    adag_chan_t *rd = r.rd[0];
    cr_assert(rd->ops->watch, "the device channel has no watch op");
    publish_stuck(&r);
    if (!r.devs[0].dev) /* a host writer: the reader's own copy stream is stuck */
        block_stream(r.devs[1].dev, r.devs[1].comm);
    adag_slot_view_t v;
    cr_assert_eq(adag__chan_wait(rd, 0, adag__deadline_ms(5000), &v), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(watch(rd, 2000), ADAG_OK, "overdue before its time: %s", adag_last_error());
    sleep_ms(120);
    cr_assert_eq(watch(rd, 2000), ADAG_OK);
    cr_assert_eq(watch(rd, 50), ADAG_ERR_TIMEOUT, "a stuck op was not reported");
    HAS(what);
    HAS("for execution 0 did not complete within 50 ms");
    HAS("device channel conf");
    const adag_device_ops_t *o = r.devs[1].dev->ops;
    if (r.devs[0].dev) {
        /* the reader's streams wait on the writer ... */
        cr_assert_eq(o->stream_sync(r.devs[1].comm, adag__deadline_ms(100)) == ADAG_OK &&
                         o->stream_sync(r.devs[1].compute, adag__deadline_ms(100)) == ADAG_OK,
                     0, "the reader's streams did not wait for the stuck writer");
        /* ... until the DAG is aborted: then they give up on it */
        adag__ctx_abort(&r.peer, ADAG_ERR_TIMEOUT);
        cr_assert_eq(o->stream_sync(r.devs[1].comm, adag__deadline_ms(2000)), ADAG_OK,
                     "the reader's comm stream still waits on the aborted writer");
        cr_assert_eq(o->stream_sync(r.devs[1].compute, adag__deadline_ms(2000)), ADAG_OK,
                     "the reader's compute stream still waits on the aborted writer");
    }
    atomic_store(&gate_open, 1);
    rig_close(&r); /* asserts nothing is left on any device */
}

/* by value ops: the abort stores the abort value into the ring's words */
Test(dev_faults, watch_names_a_stuck_peer_copy, .timeout = 30)
{
    stuck_reader(&peer_copy, "the peer copy from writer (emu:0) after a stream memory op on "
                             "its word");
}

Test(dev_faults, watch_names_a_value_never_ready_on_the_same_device, .timeout = 30)
{
    stuck_reader(&same_device, "waiting for the value of writer (emu:0) by a stream memory op on "
                               "its word");
}

/* by IPC events: the abort abandons the imported events */
Test(dev_faults, watch_names_a_stuck_peer_copy_by_events, .timeout = 30)
{
    stuck_reader(&peer_copy_events, "the peer copy from writer (emu:0) after its IPC event");
}

Test(dev_faults, watch_names_a_value_never_ready_on_the_same_device_by_events, .timeout = 30)
{
    stuck_reader(&same_device_events, "waiting for the value of writer (emu:0) by its IPC event");
}

Test(dev_faults, watch_names_a_stuck_copy_in, .timeout = 30)
{
    stuck_reader(&copy_in, "the copy from host memory (written by writer)");
}

/* A device writer with a host reader: its copy out runs on its comm
 * stream after the value is ready; a value never ready is named on the
 * writer's side. */
Test(dev_faults, watch_names_a_stuck_copy_out, .timeout = 30)
{
    rig_t r;
    rig_open(&r, &copy_out, 2, 1, 4096, 0);
    publish_stuck(&r);
    cr_assert_eq(watch(r.w, 2000), ADAG_OK);
    sleep_ms(120);
    cr_assert_eq(watch(r.w, 50), ADAG_ERR_TIMEOUT, "a stuck copy out was not reported");
    HAS("the copy to host memory (read by reader)");
    HAS("for execution 0 did not complete within 50 ms");
    /* the host reader never saw it: its wait ends at its deadline */
    adag_slot_view_t v;
    cr_assert_eq(adag__chan_wait(r.rd[0], 0, adag__deadline_ms(50), &v), ADAG_ERR_TIMEOUT);
    atomic_store(&gate_open, 1);
    cr_assert_eq(adag__chan_wait(r.rd[0], 0, adag__deadline_ms(5000), &v), ADAG_OK);
    cr_assert_eq(v.size, 64);
    adag__chan_release(r.rd[0], 0);
    rig_close(&r);
}

/* Ops that complete are never reported, however small the timeout, and
 * a released slot is not watched any more. */
Test(dev_faults, completed_ops_are_quiet, .timeout = 30)
{
    const chan_backend_t *lines[] = {&peer_copy, &same_device, &copy_in, &copy_out};
    for (unsigned l = 0; l < 4; l++) {
        rig_t r;
        rig_open(&r, lines[l], 2, 1, 4096, 0);
        for (uint64_t seq = 0; seq < 6; seq++) {
            void *buf;
            adag_slot_view_t v;
            cr_assert_eq(adag__chan_acquire(r.w, seq, adag__deadline_ms(5000), &buf), ADAG_OK);
            memset(buf, 1, 16);
            cr_assert_eq(adag__chan_publish(r.w, seq, 16, NULL, ADAG_OK, NULL), ADAG_OK);
            cr_assert_eq(adag__chan_wait(r.rd[0], seq, adag__deadline_ms(5000), &v), ADAG_OK);
            for (unsigned d = 0; d < 2; d++)
                if (r.devs[d].dev) {
                    cr_assert_eq(r.devs[d].dev->ops->stream_sync(r.devs[d].comm,
                                                                 adag__deadline_ms(5000)),
                                 ADAG_OK);
                    cr_assert_eq(r.devs[d].dev->ops->stream_sync(r.devs[d].compute,
                                                                 adag__deadline_ms(5000)),
                                 ADAG_OK);
                }
            sleep_ms(2);
            cr_assert_eq(watch(r.w, 1), ADAG_OK, "%s: %s", lines[l]->label, adag_last_error());
            cr_assert_eq(watch(r.rd[0], 1), ADAG_OK, "%s: %s", lines[l]->label,
                         adag_last_error());
            adag__chan_release(r.rd[0], seq);
        }
        rig_close(&r);
    }
}

/* Abandoning concerns imported events only: the exporter's own event
 * keeps its meaning, and a wait on an abandoned import completes. */
Test(dev_faults, abandon_releases_waits_on_an_import_only, .timeout = 30)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *d0, *d1;
    adag_dev_stream_t *s0, *s1;
    adag_dev_event_t *ev, *imp;
    adag_dev_handle_t h;
    cr_assert_eq(o->open(0, &d0), ADAG_OK);
    cr_assert_eq(o->open(1, &d1), ADAG_OK);
    cr_assert_eq(o->stream_create(d0, &s0), ADAG_OK);
    cr_assert_eq(o->stream_create(d1, &s1), ADAG_OK);
    cr_assert_eq(o->event_create(d0, &ev), ADAG_OK);
    cr_assert_eq(o->event_export(d0, ev, &h), ADAG_OK);
    cr_assert_eq(o->event_import(d1, &h, &imp), ADAG_OK);
    atomic_store(&gate_open, 0);
    cr_assert_eq(o->host_fn(s0, gate_kernel, NULL), ADAG_OK);
    cr_assert_eq(o->event_record(ev, s0), ADAG_OK);
    cr_assert_eq(o->stream_wait_event(s1, imp), ADAG_OK);
    cr_assert_eq(o->event_query(imp), ADAG_ERR_AGAIN);
    cr_assert_eq(o->stream_sync(s1, adag__deadline_ms(50)), ADAG_ERR_TIMEOUT);
    o->event_abandon(ev); /* the exporter's own: nothing changes */
    cr_assert_eq(o->event_query(ev), ADAG_ERR_AGAIN);
    cr_assert_eq(o->stream_sync(s1, adag__deadline_ms(50)), ADAG_ERR_TIMEOUT);
    o->event_abandon(imp);
    cr_assert_eq(o->stream_sync(s1, adag__deadline_ms(2000)), ADAG_OK);
    cr_assert_eq(o->event_query(imp), ADAG_OK);
    cr_assert_eq(o->event_query(ev), ADAG_ERR_AGAIN, "abandoning an import moved the event");
    atomic_store(&gate_open, 1);
    cr_assert_eq(o->event_sync(ev, adag__deadline_ms(5000)), ADAG_OK);
    o->event_destroy(d1, imp);
    o->event_destroy(d0, ev);
    o->stream_destroy(d0, s0);
    o->stream_destroy(d1, s1);
    o->close(d0);
    o->close(d1);
    adag_device_counts_t c;
    o->counts(NULL, &c);
    cr_assert_eq(c.events + c.imported_events + c.streams + c.mem + c.imported_mem, 0,
                 "the process still holds emulated device objects");
}

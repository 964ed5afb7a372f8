/*
 * Suite "overlap": the device channel moves a value on the reader's
 * communication stream, so the transfer of execution k + 1 runs while the
 * reader's compute stream still works on execution k, proven from timed
 * events on the emulated device.
 *
 * The channel is the peer-copy arrangement of the conformance table (writer
 * on emu:0, reader on emu:1, two slots: double buffering), opened by the
 * rig (tests/chan_rig.h). One thread plays both actors' loops, for each
 * execution k:
 *
 *   writer   acquire k, a "kernel" on its compute stream fills the slot
 *            with k's pattern, publish k;
 *   reader   wait k (the channel enqueues the peer copy on the reader's
 *            comm stream), a 30 ms "kernel" on its compute stream checks
 *            every byte against k's pattern, release k.
 *
 * The devices' ADAG_EMU_COPY_MBPS makes the 1 MiB copy take at least 21 ms without
 * taking a CPU. Timed events bracket each copy on comm and each kernel on
 * compute. A copy's bracket would start early if comm reached it while
 * the copy still waited for its inputs, so comm first waits for what the
 * channel's copy waits for (the writer's fill of k and the end of the
 * kernel of k - 2, whose slot the copy overwrites): the bracket then opens
 * as the copy starts. Every bracket lasts at least size / bandwidth, which
 * shows it holds the copy; at most `length - size / bandwidth` of it is not
 * the copy, so a kernel that shares more than that with the bracket ran
 * while the copy itself did.
 *
 * The control runs the same loop with the reader's comm stream being its
 * compute stream: no copy can overlap any kernel, and none is measured to,
 * so the measurement can tell the two apart.
 */
#define RIG_NO_WRAP
#include "chan_rig.h"

#include "gpu/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NEXEC 12
#define NSLOTS 2
#define VALUE_BYTES ((size_t)1 << 20)
#define COPY_MBPS 50 /* 1 MiB: 20.97 ms */
#define KERNEL_MS 30
#define DEADLINE adag__deadline_ms(20000)

static _Atomic int kernels_run;
static _Atomic int mismatches;

static unsigned char pattern(uint64_t seq, size_t i)
{
    return (unsigned char)(seq * 29 + i * 3 + 7);
}

typedef struct {
    unsigned char *data;
    size_t size;
    uint64_t seq;
} kernel_args_t;

/* The writer's kernel: seq's value into its slot. */
static void fill_kernel(void *p)
{
    const kernel_args_t *a = p;
    for (size_t i = 0; i < a->size; i++)
        a->data[i] = pattern(a->seq, i);
}

/* The reader's slow kernel: 30 ms of "compute" over the value, then every
 * byte checked. */
static void check_kernel(void *p)
{
    const kernel_args_t *a = p;
    struct timespec ts = {0, KERNEL_MS * 1000000L};
    nanosleep(&ts, NULL);
    for (size_t i = 0; i < a->size; i++)
        if (a->data[i] != pattern(a->seq, i)) {
            atomic_fetch_add(&mismatches, 1);
            break;
        }
    atomic_fetch_add(&kernels_run, 1);
}

/* Stream time of each copy and kernel, in ns from the first copy's start. */
typedef struct {
    int64_t copy[NEXEC][2];
    int64_t kernel[NEXEC][2];
} timeline_t;

typedef struct {
    adag_dev_event_t *filled[NEXEC];                   /* writer's compute: slot k written */
    adag_dev_event_t *copy_start[NEXEC], *copy_end[NEXEC]; /* reader's comm */
    adag_dev_event_t *kern_start[NEXEC], *kern_end[NEXEC]; /* reader's compute */
} marks_t;

static const chan_backend_t *peer_copy_line(void)
{
    for (unsigned i = 0; i < chan_nbackends; i++)
        if (chan_backends[i].kind == CHAN_DEVICE && chan_backends[i].wdev == 0 &&
            chan_backends[i].rdev == 1)
            return &chan_backends[i];
    cr_assert_fail("the conformance table has no device line emu:0 -> emu:1");
    return NULL;
}

static int64_t since(const adag_device_ops_t *o, adag_dev_event_t *base, adag_dev_event_t *ev)
{
    int64_t ns = 0;
    cr_assert_eq(o->event_elapsed_ns(base, ev, &ns), ADAG_OK, "%s", adag_last_error());
    return ns;
}

/* Runs NEXEC executions through the channel (see the top of the file);
 * same_stream: the reader's comm stream is its compute stream. */
static void run_pipeline(int same_stream, timeline_t *t)
{
    rig_t r;
    rig_open(&r, peer_copy_line(), NSLOTS, 1, VALUE_BYTES, 0);
    adag_chan_device_t *wd = &r.devs[0], *rd = &r.devs[1];
    const adag_device_ops_t *o = wd->dev->ops;
    /* the devices' ADAG_EMU_COPY_MBPS (gpu/device.h: a runtime sets it
     * the same way), taken by each copy when it is enqueued */
    wd->dev->tuning.copy_mbps = rd->dev->tuning.copy_mbps = COPY_MBPS;
    /* the endpoint reads its streams from r.devs at every call */
    adag_dev_stream_t *own_comm = rd->comm;
    if (same_stream)
        rd->comm = rd->compute;
    marks_t m;
    for (int k = 0; k < NEXEC; k++) {
        cr_assert_eq(o->event_create(wd->dev, &m.filled[k]), ADAG_OK);
        cr_assert_eq(o->event_create_timed(rd->dev, &m.copy_start[k]), ADAG_OK);
        cr_assert_eq(o->event_create_timed(rd->dev, &m.copy_end[k]), ADAG_OK);
        cr_assert_eq(o->event_create_timed(rd->dev, &m.kern_start[k]), ADAG_OK);
        cr_assert_eq(o->event_create_timed(rd->dev, &m.kern_end[k]), ADAG_OK);
    }
    atomic_store(&kernels_run, 0);
    atomic_store(&mismatches, 0);
    for (int k = 0; k < NEXEC; k++) {
        void *buf;
        cr_assert_eq(adag__chan_acquire(r.w, (uint64_t)k, DEADLINE, &buf), ADAG_OK, "%s",
                     adag_last_error());
        kernel_args_t fill = {buf, VALUE_BYTES, (uint64_t)k};
        cr_assert_eq(o->launch_host(wd->compute, fill_kernel, &fill, sizeof fill), ADAG_OK);
        cr_assert_eq(o->event_record(m.filled[k], wd->compute), ADAG_OK);
        cr_assert_eq(adag__chan_publish(r.w, (uint64_t)k, VALUE_BYTES, NULL, ADAG_OK, NULL),
                     ADAG_OK, "%s", adag_last_error());

        /* the copy's inputs first, so that its bracket opens as it starts */
        cr_assert_eq(o->stream_wait_event(rd->comm, m.filled[k]), ADAG_OK);
        if (k >= NSLOTS)
            cr_assert_eq(o->stream_wait_event(rd->comm, m.kern_end[k - NSLOTS]), ADAG_OK);
        cr_assert_eq(o->event_record(m.copy_start[k], rd->comm), ADAG_OK);
        adag_slot_view_t v;
        cr_assert_eq(adag__chan_wait(r.rd[0], (uint64_t)k, DEADLINE, &v), ADAG_OK, "%s",
                     adag_last_error());
        cr_assert_eq(v.size, VALUE_BYTES);
        cr_assert_eq(v.device, ADAG_DEVICE(ADAG_DEV_EMULATED, 1),
                     "the reader's value is not on its device");
        cr_assert_eq(o->event_record(m.copy_end[k], rd->comm), ADAG_OK);

        cr_assert_eq(o->event_record(m.kern_start[k], rd->compute), ADAG_OK);
        kernel_args_t check = {(unsigned char *)v.data, v.size, (uint64_t)k};
        cr_assert_eq(o->launch_host(rd->compute, check_kernel, &check, sizeof check), ADAG_OK);
        cr_assert_eq(o->event_record(m.kern_end[k], rd->compute), ADAG_OK);
        adag__chan_release(r.rd[0], (uint64_t)k);
    }
    cr_assert_eq(o->stream_sync(rd->compute, DEADLINE), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(rd->comm, DEADLINE), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(o->stream_sync(wd->compute, DEADLINE), ADAG_OK, "%s", adag_last_error());
    for (int k = 0; k < NEXEC; k++) {
        t->copy[k][0] = since(o, m.copy_start[0], m.copy_start[k]);
        t->copy[k][1] = since(o, m.copy_start[0], m.copy_end[k]);
        t->kernel[k][0] = since(o, m.copy_start[0], m.kern_start[k]);
        t->kernel[k][1] = since(o, m.copy_start[0], m.kern_end[k]);
    }
    for (int k = 0; k < NEXEC; k++) {
        o->event_destroy(wd->dev, m.filled[k]);
        o->event_destroy(rd->dev, m.copy_start[k]);
        o->event_destroy(rd->dev, m.copy_end[k]);
        o->event_destroy(rd->dev, m.kern_start[k]);
        o->event_destroy(rd->dev, m.kern_end[k]);
    }
    rd->comm = own_comm;
    rig_close(&r);
    cr_assert_eq(atomic_load(&kernels_run), NEXEC);
    cr_assert_eq(atomic_load(&mismatches), 0,
                 "%d kernels read a value that was not their execution's",
                 atomic_load(&mismatches));
}

/* How long two intervals run at the same time (<= 0: they do not). */
static int64_t overlap_ns(const int64_t a[2], const int64_t b[2])
{
    int64_t lo = a[0] > b[0] ? a[0] : b[0];
    int64_t hi = a[1] < b[1] ? a[1] : b[1];
    return hi - lo;
}

/* The least time a copy takes. */
#define COPY_FLOOR_NS ((int64_t)(VALUE_BYTES * 1000 / COPY_MBPS))

/* Every bracket holds a whole copy: it lasts at least size / bandwidth. */
static void assert_brackets_hold_the_copies(const timeline_t *t)
{
    const int64_t floor_ns = COPY_FLOOR_NS;
    for (int k = 0; k < NEXEC; k++)
        cr_assert_geq(t->copy[k][1] - t->copy[k][0], floor_ns,
                      "copy %d: its bracket on the comm stream lasted %.1f ms, the copy alone "
                      "takes %.1f ms: the copy did not run on the comm stream",
                      k, (t->copy[k][1] - t->copy[k][0]) / 1e6, floor_ns / 1e6);
}

Test(overlap, copy_of_next_execution_overlaps_compute, .timeout = 60)
{
    timeline_t t;
    run_pipeline(0, &t);
    assert_brackets_hold_the_copies(&t);
    int overlapped = 0;
    int64_t total = 0;
    for (int k = 0; k + 1 < NEXEC; k++) {
        int64_t ns = overlap_ns(t.copy[k + 1], t.kernel[k]);
        int64_t not_copy = t.copy[k + 1][1] - t.copy[k + 1][0] - COPY_FLOOR_NS;
        if (ns > 0 && ns > not_copy) {
            overlapped++;
            total += ns;
        }
    }
    cr_log_info("overlap: the copy of k + 1 overlapped the kernel of k for %d of %d k, "
                "%.1f ms on average; %d executions took %.0f ms",
                overlapped, NEXEC - 1, overlapped ? total / 1e6 / overlapped : 0.0, NEXEC,
                t.kernel[NEXEC - 1][1] / 1e6);
    cr_assert_geq(overlapped, (NEXEC - 1) * 3 / 4,
                  "the copy of execution k + 1 overlapped the kernel of k for only %d of %d k",
                  overlapped, NEXEC - 1);
}

Test(overlap, control_one_stream_never_overlaps, .timeout = 60)
{
    timeline_t t;
    run_pipeline(1, &t);
    assert_brackets_hold_the_copies(&t);
    for (int j = 0; j < NEXEC; j++)
        for (int k = 0; k < NEXEC; k++)
            cr_assert_leq(overlap_ns(t.copy[j], t.kernel[k]), 0,
                          "one stream: copy %d measured overlapping kernel %d by %.3f ms", j, k,
                          overlap_ns(t.copy[j], t.kernel[k]) / 1e6);
    cr_log_info("overlap control: %d executions on one stream took %.0f ms", NEXEC,
                t.kernel[NEXEC - 1][1] / 1e6);
}

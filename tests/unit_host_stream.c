/* Unit tests (suite "host_stream"): helping on the emulated device's streams
 * (gpu/host_stream.c). A thread that waits for a stream (stream_sync, or
 * event_sync on an event the stream recorded) runs the stream's queued
 * work itself while the stream thread runs none, if that work is bounded
 * or keeps the waiter's deadline (copies, records, event waits and
 * launch_steps work); a step that reaches the deadline keeps its progress
 * and goes back to the stream thread. Opaque host functions only ever run
 * on the stream thread, and the stream's order holds whoever runs what.
 *
 * "The waiter ran it" is a race the waiter wins when the stream thread is
 * asleep (it was idle for milliseconds before the work came): the tests
 * repeat such rounds and ask for one win at least, which never happens
 * when waiters do not help. */
#include "common/clock.h"
#include "gpu/device.h"
#include "gpu/host_impl.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define ROUNDS 20

static const adag_device_ops_t *ops(void)
{
    return adag__device_backend(ADAG_DEV_EMULATED);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void open_stream(adag_device_t **dev, adag_dev_stream_t **s)
{
    cr_assert_eq(ops()->open(0, dev), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(ops()->stream_create(*dev, s), ADAG_OK, "%s", adag_last_error());
}

static void close_stream(adag_device_t *dev, adag_dev_stream_t *s)
{
    adag_device_counts_t c;
    ops()->stream_destroy(dev, s);
    ops()->counts(dev, &c);
    ops()->close(dev);
    cr_assert_eq(c.streams, 0);
    cr_assert_eq(c.events, 0);
}

/* ---- work that records who ran it ---- */

/* What every piece of work below reports, in the order it ran. */
static _Atomic int ran_seq;

typedef struct {
    _Atomic int *gate;      /* NULL, or wait for *gate != 0 (by the deadline) */
    _Atomic int calls;      /* calls of the step function */
    _Atomic int seq;        /* ran_seq when it finished */
    pthread_t last_thread;  /* who called it last */
    int64_t last_deadline;  /* with which deadline */
    _Atomic int finished;
} step_t;

/* launch_steps copies its arguments: the work gets a pointer to the
 * test's step_t. */
typedef struct {
    step_t *st;
} step_arg_t;

static adag_status_t step_fn(void *arg, int64_t deadline)
{
    step_t *st = ((step_arg_t *)arg)->st;
    atomic_fetch_add(&st->calls, 1);
    st->last_thread = pthread_self();
    st->last_deadline = deadline;
    while (st->gate && !atomic_load(st->gate)) {
        if (adag__now_ns() >= deadline)
            return ADAG_ERR_TIMEOUT;
        sched_yield();
    }
    atomic_store(&st->seq, atomic_fetch_add(&ran_seq, 1) + 1);
    atomic_store(&st->finished, 1);
    return ADAG_OK;
}

static void launch(adag_dev_stream_t *s, step_t *st)
{
    step_arg_t a = {st};
    cr_assert_eq(adag__host_launch_steps(s, step_fn, &a, sizeof(a)), ADAG_OK, "%s",
                 adag_last_error());
}

/* An opaque host function: waits (10 s at most) for its gate, notes its
 * thread and its place in the order. */
typedef struct {
    _Atomic int *gate;
    pthread_t thread;
    _Atomic int seq;
} host_work_t;

static void host_work(void *arg)
{
    host_work_t *w = arg;
    int64_t give_up = adag__deadline_ms(10000);
    while (w->gate && !atomic_load(w->gate) && adag__now_ns() < give_up)
        sched_yield();
    w->thread = pthread_self();
    atomic_store(&w->seq, atomic_fetch_add(&ran_seq, 1) + 1);
}

/* ---- the tests ---- */

/* After the stream thread idled, stream_sync runs the queued step on the
 * calling thread (in one round of 20 at least), and every step finishes
 * once whoever runs it. */
Test(host_stream, a_waiter_runs_queued_steps, .timeout = 60)
{
    adag_device_t *dev;
    adag_dev_stream_t *s;
    open_stream(&dev, &s);
    int by_waiter = 0;
    for (int i = 0; i < ROUNDS; i++) {
        step_t st = {0};
        sleep_ms(5); /* the stream thread stops spinning and sleeps */
        launch(s, &st);
        cr_assert_eq(ops()->stream_sync(s, adag__deadline_ms(10000)), ADAG_OK, "%s",
                     adag_last_error());
        cr_assert_eq(atomic_load(&st.finished), 1);
        cr_assert_eq(atomic_load(&st.calls), 1);
        by_waiter += pthread_equal(st.last_thread, pthread_self()) != 0;
    }
    cr_assert_gt(by_waiter, 0, "stream_sync never ran the queued step itself (%d rounds)",
                 ROUNDS);
    close_stream(dev, s);
}

/* A step that reaches the waiter's deadline keeps its progress and goes
 * back to the head of the queue: stream_sync says ADAG_ERR_TIMEOUT and the
 * copy queued after the step has not run. Once the gate opens, the stream
 * thread alone (deadline ADAG_FOREVER; nobody waits, the test only
 * queries an event recorded last) finishes the step, then the copy. */
Test(host_stream, a_step_past_the_deadline_goes_back_to_the_stream, .timeout = 60)
{
    adag_device_t *dev;
    adag_dev_stream_t *s;
    adag_dev_event_t *ev;
    adag_dev_mem_t src, dst;
    open_stream(&dev, &s);
    cr_assert_eq(ops()->event_create(dev, &ev), ADAG_OK);
    cr_assert_eq(ops()->mem_alloc(dev, 64, &src), ADAG_OK);
    cr_assert_eq(ops()->mem_alloc(dev, 64, &dst), ADAG_OK);
    memset(src.ptr, 7, 64);
    memset(dst.ptr, 0, 64);
    _Atomic int gate = 0;
    step_t st = {.gate = &gate};
    sleep_ms(5);
    launch(s, &st);
    cr_assert_eq(ops()->copy_async(s, dst.ptr, src.ptr, 64), ADAG_OK);
    cr_assert_eq(ops()->event_record(ev, s), ADAG_OK);
    int64_t t0 = adag__now_ns();
    cr_assert_eq(ops()->stream_sync(s, adag__deadline_ms(30)), ADAG_ERR_TIMEOUT);
    cr_assert_lt(adag__now_ns() - t0, (int64_t)5000 * 1000000, "the sync overstayed its deadline");
    cr_assert_eq(atomic_load(&st.finished), 0);
    cr_assert_eq(((unsigned char *)dst.ptr)[0], 0, "the copy ran before the step before it");
    cr_assert_geq(atomic_load(&st.calls), 1);
    atomic_store(&gate, 1);
    int64_t give_up = adag__deadline_ms(10000);
    while (ops()->event_query(ev) != ADAG_OK && adag__now_ns() < give_up)
        sleep_ms(1);
    cr_assert_eq(ops()->event_query(ev), ADAG_OK, "the stream thread did not go on");
    cr_assert_eq(atomic_load(&st.finished), 1);
    cr_assert_eq(st.last_deadline, ADAG_FOREVER);
    cr_assert(!pthread_equal(st.last_thread, pthread_self()));
    cr_assert_eq(((unsigned char *)dst.ptr)[63], 7);
    cr_assert_eq(ops()->stream_sync(s, adag__deadline_ms(10000)), ADAG_OK, "%s",
                 adag_last_error());
    ops()->event_destroy(dev, ev);
    ops()->mem_free(dev, &src);
    ops()->mem_free(dev, &dst);
    close_stream(dev, s);
}

/* An opaque host function stops the helping: the waiter never runs it,
 * nor what is queued after it before it ends. */
Test(host_stream, a_waiter_never_runs_a_host_function, .timeout = 60)
{
    adag_device_t *dev;
    adag_dev_stream_t *s;
    open_stream(&dev, &s);
    for (int i = 0; i < 5; i++) {
        _Atomic int gate = 0;
        host_work_t w = {.gate = &gate};
        step_t st = {0};
        sleep_ms(5);
        cr_assert_eq(ops()->host_fn(s, host_work, &w), ADAG_OK);
        launch(s, &st);
        cr_assert_eq(ops()->stream_sync(s, adag__deadline_ms(20)), ADAG_ERR_TIMEOUT);
        cr_assert_eq(atomic_load(&st.calls), 0, "the step ran before the host function ended");
        atomic_store(&gate, 1);
        cr_assert_eq(ops()->stream_sync(s, adag__deadline_ms(10000)), ADAG_OK, "%s",
                     adag_last_error());
        cr_assert(!pthread_equal(w.thread, pthread_self()), "the waiter ran a host function");
        cr_assert_lt(atomic_load(&w.seq), atomic_load(&st.seq), "the stream's order broke");
    }
    close_stream(dev, s);
}

/* event_sync helps the stream that recorded the event; the event keeps
 * that stream's memory alive, so waiting on it after the stream was
 * destroyed is safe (and complete). */
Test(host_stream, event_sync_helps_the_recording_stream, .timeout = 60)
{
    adag_device_t *dev;
    adag_dev_stream_t *s, *gone;
    adag_dev_event_t *ev;
    open_stream(&dev, &s);
    cr_assert_eq(ops()->event_create(dev, &ev), ADAG_OK);
    int by_waiter = 0;
    for (int i = 0; i < ROUNDS; i++) {
        step_t st = {0};
        sleep_ms(5);
        launch(s, &st);
        cr_assert_eq(ops()->event_record(ev, s), ADAG_OK);
        cr_assert_eq(ops()->event_sync(ev, adag__deadline_ms(10000)), ADAG_OK, "%s",
                     adag_last_error());
        cr_assert_eq(atomic_load(&st.finished), 1);
        by_waiter += pthread_equal(st.last_thread, pthread_self()) != 0;
    }
    cr_assert_gt(by_waiter, 0, "event_sync never ran the recording stream's step (%d rounds)",
                 ROUNDS);
    cr_assert_eq(ops()->stream_create(dev, &gone), ADAG_OK);
    step_t last = {0};
    launch(gone, &last);
    cr_assert_eq(ops()->event_record(ev, gone), ADAG_OK);
    ops()->stream_destroy(dev, gone); /* runs what it holds, then ends */
    cr_assert_eq(ops()->event_sync(ev, adag__deadline_ms(10000)), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(ops()->event_query(ev), ADAG_OK);
    cr_assert_eq(atomic_load(&last.finished), 1);
    ops()->event_destroy(dev, ev);
    close_stream(dev, s);
}

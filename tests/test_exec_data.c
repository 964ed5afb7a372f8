/*
 * Suite "exec", continued: the data path. The DAG's fd, large and empty
 * payloads, inputs copied by execute, results stable until released, several
 * driver threads on one DAG, zero-copy inputs (prepare / commit / cancel).
 */
#include "helpers.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The DAG's fd polls readable while a result is ready and not yet got. */
static void dag_fd(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "f", .method = "sleep_ms", .max_inflight = 4);
    int fd = -1, fd2 = -1;
    ASSERT_OK(adag_dag_fd(dag, &fd));
    cr_assert(fd >= 0);
    ASSERT_OK(adag_dag_fd(dag, &fd2));
    cr_assert_eq(fd, fd2, "adag_dag_fd gives a different fd each time");
    cr_assert(!h_fd_readable(fd, 0), "readable before any execute");

    for (int round = 0; round < 3; round++) {
        adag_ref_t ref = h_execute(dag, 50);
        cr_assert(!h_fd_readable(fd, 0), "readable while the method still sleeps");
        cr_assert(h_fd_readable(fd, 10000), "not readable after the result was ready");
        cr_assert(h_fd_readable(fd, 0), "the fd is not level-triggered");
        cr_assert_eq(h_get_i64(dag, ref, 0), 50);
        cr_assert(!h_fd_readable(fd, 0), "still readable after get (round %d)", round);
        ASSERT_OK(adag_dag_release(dag, ref));
        cr_assert(!h_fd_readable(fd, 0), "readable after release");
    }

    /* two in flight: readable until both are got */
    adag_ref_t r[2];
    r[0] = h_execute(dag, 1);
    r[1] = h_execute(dag, 60);
    adag_value_t out;
    cr_assert(h_fd_readable(fd, 10000));
    ASSERT_OK(adag_dag_get(dag, r[0], &out, 1, 10000));
    cr_assert(h_fd_readable(fd, 10000), "not readable with the second result ready");
    cr_assert_eq(h_get_i64(dag, r[1], 0), 60);
    cr_assert(!h_fd_readable(fd, 0), "readable after both results were got");
    ASSERT_OK(adag_dag_release(dag, r[1]));
    ASSERT_OK(adag_dag_release(dag, r[0]));

    /* a ready result released without get no longer makes the fd readable */
    adag_ref_t dropped = h_execute(dag, 1);
    cr_assert(h_fd_readable(fd, 10000));
    ASSERT_OK(adag_dag_release(dag, dropped));
    cr_assert(!h_fd_readable(fd, 0), "readable after the only ready ref was released unread");
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, dag_fd, 30)

/* 512 KiB through two actors, byte-exact. */
static void large_payload(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    /* default capacity: 1 MiB */
    adag_dag_h dag =
        H_DAG(rt, .pl = pl, .n = 2, .prefix = "e", .method = "echo", .max_inflight = 2);
    const size_t n = 512 * 1024;
    unsigned char *buf[2];
    adag_ref_t refs[2];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2; i++) {
            buf[i] = malloc(n);
            cr_assert_not_null(buf[i]);
            uint32_t s = (uint32_t)(round * 2 + i + 1) * 2654435761u;
            for (size_t k = 0; k < n; k++) {
                s = s * 1103515245u + 12345u;
                buf[i][k] = (unsigned char)(s >> 16);
            }
            adag_value_t v = {.data = buf[i], .size = n};
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[i]));
        }
        for (int i = 0; i < 2; i++) {
            adag_value_t out;
            ASSERT_OK(adag_dag_get(dag, refs[i], &out, 1, 10000));
            cr_assert_eq(out.size, n);
            cr_assert(memcmp(out.data, buf[i], n) == 0, "payload %d of round %d differs", i,
                      round);
            ASSERT_OK(adag_dag_release(dag, refs[i]));
            free(buf[i]);
        }
    }
    /* an empty value too */
    adag_value_t e = {.data = "", .size = 0}, out;
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &e, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
    cr_assert_eq(out.size, 0);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(exec, large_payload, 30)

/* execute() copies its inputs: changing the caller's buffer afterwards does
 * not change the execution. */
static void inputs_copied(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = pl, .n = 2, .prefix = "ic",
                           .methods = (const char *const[]){"sleep_ms", "add"}, .max_inflight = 4);
    int64_t buf = 30;
    adag_value_t v = h_i64v(&buf);
    adag_ref_t refs[3];
    for (int i = 0; i < 3; i++) {
        buf = 30 + i;
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[i]));
        buf = -1; /* sleep_ms(-1) would misbehave if it were read now */
    }
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(h_get_i64(dag, refs[i], 10000), 30 + i);
        ASSERT_OK(adag_dag_release(dag, refs[i]));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, inputs_copied, 30)

/* A result got with get() stays intact until its release, while later
 * executions (as many as the window leaves room for) run through the
 * other slots. */
static void results_stable_until_release(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    enum { W = 8 };
    adag_dag_h dag =
        H_DAG(rt, .pl = pl, .name = "st", .method = "echo", .max_inflight = W, .cap = 256);
    char msg[64];
    adag_value_t v = {.data = msg, .size = 0}, held, out;
    adag_ref_t first, ref;
    for (int round = 0; round < 3; round++) {
        snprintf(msg, sizeof(msg), "held result %d", round);
        v.size = strlen(msg) + 1;
        char want[64];
        memcpy(want, msg, sizeof(want));
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &first));
        ASSERT_OK(adag_dag_get(dag, first, &held, 1, 10000));
        cr_assert_str_eq((const char *)held.data, want);
        for (int i = 0; i < W - 1; i++) {
            snprintf(msg, sizeof(msg), "later result %d.%d", round, i);
            v.size = strlen(msg) + 1;
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
            ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
            cr_assert_str_eq((const char *)out.data, msg);
            cr_assert_neq(out.data, held.data, "two unreleased results share a buffer");
            ASSERT_OK(adag_dag_release(dag, ref));
            cr_assert_str_eq((const char *)held.data, want,
                             "a held result was overwritten by execution %d", i);
        }
        cr_assert_eq(held.size, strlen(want) + 1);
        ASSERT_OK(adag_dag_release(dag, first));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, results_stable_until_release, 30)

/* Several driver threads use one DAG at once (the API is thread-safe). */
struct driver_thread {
    adag_dag_h dag;
    int64_t base;
    int n;
    int bad;      /* executions with a wrong value */
    adag_status_t st;
    char msg[512];
};

static void *driver_thread_fn(void *arg)
{
    struct driver_thread *d = arg;
    for (int i = 0; i < d->n; i++) {
        int64_t x = d->base + i;
        adag_value_t v = {.data = &x, .size = sizeof(x)}, out;
        adag_ref_t ref;
        adag_status_t st = adag_dag_execute(d->dag, &v, 1, 0, &ref);
        if (st == ADAG_OK) {
            st = adag_dag_get(d->dag, ref, &out, 1, 10000);
            if (st == ADAG_OK) {
                int64_t r;
                if (out.size != sizeof(r))
                    d->bad++;
                else {
                    memcpy(&r, out.data, sizeof(r));
                    if (r != x + 11)
                        d->bad++;
                }
            }
            adag_status_t st2 = adag_dag_release(d->dag, ref);
            if (st == ADAG_OK)
                st = st2;
        }
        if (st != ADAG_OK) {
            d->st = st;
            snprintf(d->msg, sizeof(d->msg), "%s", adag_last_error());
            return NULL;
        }
    }
    return NULL;
}

static void concurrent_drivers(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    int64_t off[2] = {1, 10};
    adag_dag_h dag = H_DAG(rt, .pl = pl, .n = 2, .prefix = "cd", .offsets = off, .method = "add",
                           .max_inflight = 4);
    enum { T = 4 };
    struct driver_thread d[T];
    pthread_t t[T];
    for (int i = 0; i < T; i++) {
        memset(&d[i], 0, sizeof(d[i]));
        d[i].dag = dag;
        d[i].base = (int64_t)i * 1000000;
        d[i].n = 300;
        cr_assert_eq(pthread_create(&t[i], NULL, driver_thread_fn, &d[i]), 0);
    }
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < T; i++) {
        cr_assert_eq(d[i].st, ADAG_OK, "driver thread %d: %s (%s)", i, adag_status_str(d[i].st),
                     d[i].msg);
        cr_assert_eq(d[i].bad, 0, "driver thread %d got %d wrong values", i, d[i].bad);
    }
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.executed, T * 300);
    cr_assert_eq(st.completed, T * 300);
    cr_assert_eq(st.released, T * 300);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, concurrent_drivers, 60)

/* Zero-copy inputs: reserve hands out the input slot, commit starts the
 * execution, from any thread; cancel drops it; misuse is refused; a
 * too-large size keeps the execution reserved. */
typedef struct {
    adag_dag_h dag;
    adag_ref_t ref;
    const adag_input_view_t *view;
    adag_status_t commit;
} other_thread_t;

static void *commit_from_other_thread(void *p)
{
    other_thread_t *o = p;
    o->commit = h_commit_i64(o->dag, o->ref, o->view, 7);
    return NULL;
}

static void zero_copy_inputs(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "zc", .offset = 100, .method = "add",
                           .max_inflight = 2, .cap = 64);
    adag_input_view_t view;
    adag_ref_t ref;
    adag_value_t out;
    int64_t y;

    /* nothing reserved yet */
    ASSERT_ST(h_commit_i64(dag, 0, &(adag_input_view_t){.data = &y}, 1), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("not a reservation");
    ASSERT_ST(adag_dag_cancel(dag, 0), ADAG_ERR_INVALID);

    for (int round = 0; round < 5; round++) {
        ASSERT_OK(adag_dag_reserve(dag, 0, &view, 1, &ref));
        cr_assert_not_null(view.data);
        cr_assert_eq(ref, (adag_ref_t)round);
        ASSERT_OK(h_commit_i64(dag, ref, &view, round * 10)); /* written in the slot */
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
        memcpy(&y, out.data, sizeof y);
        cr_assert_eq(y, round * 10 + 100);
        ASSERT_OK(adag_dag_release(dag, ref));
    }

    /* too large: refused, still reserved; then committed by another thread */
    ASSERT_OK(adag_dag_reserve(dag, 0, &view, 1, &ref));
    adag_value_t huge = {.data = view.data, .size = 65};
    ASSERT_ST(adag_dag_commit(dag, ref, &huge, 1), ADAG_ERR_TOO_LARGE);
    ASSERT_MSG_HAS("65 bytes");
    other_thread_t o = {dag, ref, &view, ADAG_ERR_INTERNAL};
    pthread_t t;
    pthread_create(&t, NULL, commit_from_other_thread, &o);
    pthread_join(t, NULL);
    cr_assert_eq(o.commit, ADAG_OK, "a commit from another thread: %s", adag_status_str(o.commit));
    cr_assert_eq(ref, 5);
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
    memcpy(&y, out.data, sizeof y);
    cr_assert_eq(y, 107);
    ASSERT_OK(adag_dag_release(dag, ref));

    /* cancel: no execution starts, the next ref follows on */
    ASSERT_OK(adag_dag_reserve(dag, 0, &view, 1, &ref));
    ASSERT_OK(adag_dag_cancel(dag, ref));
    cr_assert_eq(h_roundtrip(dag, 1), 101);
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.executed, 7, "executed %llu", (unsigned long long)st.executed);

    /* destroying with an execution reserved by this thread drops it */
    ASSERT_OK(adag_dag_reserve(dag, 0, &view, 1, &ref));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(exec, zero_copy_inputs, 30)

/* Suite "reserve": concurrent reservations of zero-copy inputs
 * (adag_dag_reserve / commit / cancel) of bytes in host slots (tensors and
 * device inputs: tests/test_zero_copy_tensor.c): several executions reserved at
 * once by several threads, filled in parallel, committed or cancelled in
 * any order, started in ref order; and the abort of a DAG reaching other
 * workers by message. */
#include "helpers.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* counter "add" with offset 5: y = x + 5 */
static adag_dag_h add5_dag(adag_runtime_h rt, adag_placement_t pl, unsigned inflight)
{
    adag_actor_h a = h_counter(rt, pl, "r", 5);
    adag_compile_params_t cp = h_compile_params(inflight, 64, 2000, 0);
    return h_compile_with(h_chain_graph(rt, &a, 1, "add"), &cp);
}

static int64_t get_i64(adag_dag_h dag, adag_ref_t ref)
{
    adag_value_t out;
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 5000));
    int64_t y = h_val_i64(out);
    ASSERT_OK(adag_dag_release(dag, ref));
    return y;
}

#define NTHREADS 4

struct filler {
    adag_dag_h dag;
    pthread_barrier_t *reserved, *go;
    int index;
    adag_ref_t ref;
    adag_input_view_t view;
    adag_status_t st;
};

/* Reserves, waits until every thread reserved, then commits in reverse
 * order of the threads' indexes (the last reserver first). */
static void *fill(void *arg)
{
    struct filler *f = arg;
    f->st = adag_dag_reserve(f->dag, 0, &f->view, 1, &f->ref);
    pthread_barrier_wait(f->reserved);
    pthread_barrier_wait(f->go);
    if (f->st == ADAG_OK) {
        h_sleep_ms(20 * (NTHREADS - f->index));
        f->st = h_commit_i64(f->dag, f->ref, &f->view, 100 * (int64_t)f->ref);
    }
    return NULL;
}

static void parallel_fill(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = add5_dag(rt, pl, 8);
    pthread_barrier_t reserved, go;
    pthread_barrier_init(&reserved, NULL, NTHREADS + 1);
    pthread_barrier_init(&go, NULL, NTHREADS + 1);
    struct filler f[NTHREADS];
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        f[i] = (struct filler){.dag = dag, .reserved = &reserved, .go = &go, .index = i};
        cr_assert_eq(pthread_create(&t[i], NULL, fill, &f[i]), 0);
    }
    pthread_barrier_wait(&reserved);
    /* every thread holds a reservation at once: distinct refs 0..3 */
    unsigned seen = 0;
    for (int i = 0; i < NTHREADS; i++) {
        cr_assert_eq(f[i].st, ADAG_OK, "thread %d: %s", i, adag_status_str(f[i].st));
        cr_assert_lt(f[i].ref, NTHREADS);
        seen |= 1u << f[i].ref;
    }
    cr_assert_eq(seen, (1u << NTHREADS) - 1, "refs are not 0..%d", NTHREADS - 1);
    /* nothing has started: ref 0 is not committed */
    adag_value_t out;
    ASSERT_ST(adag_dag_get(dag, 0, &out, 1, 0), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("not committed");
    pthread_barrier_wait(&go);
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(f[i].st, ADAG_OK, "commit %d: %s", i, adag_status_str(f[i].st));
    }
    for (adag_ref_t r = 0; r < NTHREADS; r++)
        cr_assert_eq(get_i64(dag, r), 100 * (int64_t)r + 5);
    adag_dag_stats_t stats = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &stats));
    cr_assert_eq(stats.executed, NTHREADS);
    pthread_barrier_destroy(&reserved);
    pthread_barrier_destroy(&go);
    ASSERT_OK(adag_runtime_destroy(rt));
}
Test(reserve, parallel_fill_any_commit_order_thread, .timeout = 30)
{
    parallel_fill(ADAG_PLACEMENT_THREAD);
}
Test(reserve, parallel_fill_any_commit_order_process, .timeout = 30)
{
    parallel_fill(ADAG_PLACEMENT_PROCESS);
}

/* A later ref committed first starts only once the earlier one commits. */
Test(reserve, published_in_ref_order, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = add5_dag(rt, ADAG_PLACEMENT_PROCESS, 4);
    adag_input_view_t b0, b1;
    adag_ref_t r0, r1;
    ASSERT_OK(adag_dag_reserve(dag, 0, &b0, 1, &r0));
    ASSERT_OK(adag_dag_reserve(dag, 0, &b1, 1, &r1));
    cr_assert_eq(r1, r0 + 1);
    ASSERT_OK(h_commit_i64(dag, r1, &b1, 7));
    adag_value_t out;
    ASSERT_ST(adag_dag_get(dag, r1, &out, 1, 100), ADAG_ERR_TIMEOUT);
    ASSERT_OK(h_commit_i64(dag, r0, &b0, 3));
    cr_assert_eq(get_i64(dag, r1), 12);
    cr_assert_eq(get_i64(dag, r0), 8);
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* At most max_inflight reservations; misuse of refs is refused. */
Test(reserve, window_and_misuse, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = add5_dag(rt, ADAG_PLACEMENT_THREAD, 3);
    adag_input_view_t b[4];
    adag_ref_t r[4];
    for (int i = 0; i < 3; i++)
        ASSERT_OK(adag_dag_reserve(dag, 0, &b[i], 1, &r[i]));
    ASSERT_ST(adag_dag_reserve(dag, ADAG_EXECUTE_NONBLOCK, &b[3], 1, &r[3]), ADAG_ERR_AGAIN);
    ASSERT_MSG_HAS("not yet committed");
    cr_assert_eq(b[0].capacity, 64);
    cr_assert_eq(b[0].device, ADAG_DEVICE_HOST);
    cr_assert(!b[0].device_data && !b[0].stream && !b[0].flags, "a host bytes input");
    adag_value_t big = {.data = b[0].data, .size = 65};
    ASSERT_ST(adag_dag_commit(dag, r[0], &big, 1), ADAG_ERR_TOO_LARGE);
    ASSERT_MSG_HAS("65 bytes");
    adag_value_t elsewhere = {.data = b[1].data, .size = 8};
    ASSERT_ST(adag_dag_commit(dag, r[0], &elsewhere, 1), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("is not the view's data");
    ASSERT_OK(h_commit_i64(dag, r[0], &b[0], 1)); /* still reserved after both */
    adag_value_t eight = {.data = b[0].data, .size = 8};
    ASSERT_ST(adag_dag_commit(dag, r[0], &eight, 1), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_cancel(dag, r[0]), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_commit(dag, 99, &eight, 1), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_release(dag, r[1]), ADAG_ERR_INVALID); /* reserved, not committed */
    ASSERT_OK(adag_dag_cancel(dag, r[2]));
    ASSERT_OK(adag_dag_cancel(dag, r[1]));
    cr_assert_eq(get_i64(dag, r[0]), 6);
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* Cancelling the newest reservation gives its ref back; cancelling an older
 * one makes it a skipped execution nobody can get, and the window does not
 * leak: many rounds later everything still runs. */
static void cancel_middle(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = add5_dag(rt, pl, 4);
    adag_input_view_t b[3];
    adag_ref_t r[3], again;
    ASSERT_OK(adag_dag_reserve(dag, 0, &b[0], 1, &r[0]));
    ASSERT_OK(adag_dag_cancel(dag, r[0]));
    ASSERT_OK(adag_dag_reserve(dag, 0, &b[0], 1, &again));
    cr_assert_eq(again, r[0], "the newest cancelled ref was not given back");
    for (int i = 1; i < 3; i++)
        ASSERT_OK(adag_dag_reserve(dag, 0, &b[i], 1, &r[i]));
    ASSERT_OK(adag_dag_cancel(dag, r[1]));
    for (int i = 0; i < 3; i += 2)
        ASSERT_OK(h_commit_i64(dag, r[i], &b[i], 10 * i));
    adag_value_t out;
    ASSERT_ST(adag_dag_get(dag, r[1], &out, 1, 100), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("cancelled");
    ASSERT_ST(adag_dag_release(dag, r[1]), ADAG_ERR_INVALID);
    cr_assert_eq(get_i64(dag, r[2]), 25);
    cr_assert_eq(get_i64(dag, r[0]), 5);
    for (int i = 0; i < 40; i++)
        cr_assert_eq(h_roundtrip(dag, i), i + 5);
    ASSERT_OK(adag_runtime_destroy(rt));
}
Test(reserve, cancel_thread, .timeout = 30)
{
    cancel_middle(ADAG_PLACEMENT_THREAD);
}
Test(reserve, cancel_process, .timeout = 30)
{
    cancel_middle(ADAG_PLACEMENT_PROCESS);
}

/* A loader pool: threads reserve, fill and commit while a consumer gets
 * and releases every ref; every value comes back right. */
struct producer {
    adag_dag_h dag;
    int n;
    int bad;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    for (int i = 0; i < p->n; i++) {
        adag_input_view_t view;
        adag_ref_t ref;
        adag_status_t st;
        while ((st = adag_dag_reserve(p->dag, 0, &view, 1, &ref)) == ADAG_ERR_TIMEOUT) {
        }
        if (st != ADAG_OK) {
            p->bad++;
            return NULL;
        }
        if (h_commit_i64(p->dag, ref, &view, 1000 * (int64_t)ref) != ADAG_OK)
            p->bad++;
    }
    return NULL;
}

Test(reserve, loader_pool, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = add5_dag(rt, ADAG_PLACEMENT_PROCESS, 8);
    struct producer p[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        p[i] = (struct producer){.dag = dag, .n = 150};
        cr_assert_eq(pthread_create(&t[i], NULL, produce, &p[i]), 0);
    }
    for (adag_ref_t r = 0; r < 450; r++) {
        adag_value_t out;
        adag_status_t st;
        while ((st = adag_dag_get(dag, r, &out, 1, 5000)) == ADAG_ERR_INVALID)
            h_sleep_ms(1); /* not reserved or committed yet */
        cr_assert_eq(st, ADAG_OK, "ref %llu: %s", (unsigned long long)r, adag_last_error());
        cr_assert_eq(h_val_i64(out), 1000 * (int64_t)r + 5, "ref %llu", (unsigned long long)r);
        ASSERT_OK(adag_dag_release(dag, r));
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(p[i].bad, 0);
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---- aborting a DAG reaches the other workers by message ---- */

static int thread_count(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* a -> b, both workers. Killing b fails the DAG in the driver, which sends
 * ABORT_DAG to a: a's loop thread ends at once (nothing in a's memory is
 * shared with the driver's abort word), long before teardown. */
Test(reserve, abort_reaches_other_workers, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h ab[2];
    h_counters(rt, ADAG_PLACEMENT_PROCESS, "w", 2, NULL, ab);
    adag_dag_h dag = h_compile(h_chain_graph(rt, ab, 2, "add"), 4, 64);
    cr_assert_eq(h_roundtrip(dag, 1), 1);
    int a_pid = adag_actor_pid(ab[0]);
    int before = thread_count(a_pid);
    cr_assert_geq(before, 2, "worker a has no loop thread (%d threads)", before);
    kill(adag_actor_pid(ab[1]), SIGKILL);
    int64_t x = 1;
    adag_value_t v = h_i64v(&x), out;
    adag_ref_t ref;
    adag_status_t st = adag_dag_execute(dag, &v, 1, 0, &ref);
    if (st == ADAG_OK)
        ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 5000), ADAG_ERR_ACTOR_DIED);
    else
        ASSERT_ST(st, ADAG_ERR_ACTOR_DIED);
    int now = before;
    for (int i = 0; i < 200 && now >= before; i++) {
        h_sleep_ms(10);
        now = thread_count(a_pid);
    }
    cr_assert_lt(now, before, "worker a still runs %d threads 2 s after the DAG failed", now);
    ASSERT_OK(adag_runtime_destroy(rt));
}

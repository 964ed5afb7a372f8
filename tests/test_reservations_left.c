/* Suite "reservations_left": executions reserved and never committed. A
 * data source whose batch the DAG refuses cancels its reservation (the
 * caller's own executions then run, and destroy returns); destroy is
 * bounded whatever another thread left reserved; a commit that races a
 * destroy is cancelled with ADAG_ERR_CLOSED. */
#include <adag/data.h>

#include "helpers.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* input (declared i32, any shape) -> a.echo -> output */
static adag_dag_h i32_echo_dag(adag_runtime_h rt, adag_placement_t pl, int teardown_ms)
{
    adag_actor_h a = h_counter(rt, pl, "e", 0);
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0);
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE, .dtype = ADAG_DTYPE_I32};
    ASSERT_OK(adag_node_tensor(in, &tp));
    adag_node_h out = h_bind1(g, a, "echo", in);
    ASSERT_OK(adag_graph_output(g, &out, 1));
    adag_compile_params_t cp = h_compile_params(4, 4096, 2000, teardown_ms);
    adag_dag_h dag = h_compile_with(g, &cp);
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

/* A source of u8 samples [64] in batches of 32 feeding a DAG whose input
 * is declared i32: the feed is refused, and the reservation it took is
 * cancelled. */
static void refused_feed(adag_placement_t pl)
{
    char path[] = "/tmp/adag-refused-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unsigned char rec[64 * 64];
    memset(rec, 7, sizeof(rec));
    cr_assert_eq(write(fd, rec, sizeof(rec)), (ssize_t)sizeof(rec));
    close(fd);

    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = i32_echo_dag(rt, pl, 0);
    const char *shards[] = {path};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_THREADS |
                      ADAG_DATA_PARAM_TENSOR | ADAG_DATA_PARAM_DAG,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = 32,
        .record_size = 64,
        .threads = 2,
        .sample_dtype = ADAG_DTYPE_U8,
        .sample_ndim = 1,
        .sample_shape = {64},
        .dag = dag,
    };
    adag_data_source_h src;
    ASSERT_OK(adag_data_open(&p, &src));
    adag_ref_t ref;
    adag_data_batch_t bt;
    ASSERT_ST(adag_data_next_exec(src, &ref, &bt, 10000), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("declared i32");
    ASSERT_OK(adag_data_close(src));

    /* the caller's own executions run: the window is not held */
    for (int k = 0; k < 10; k++) {
        int32_t x[4] = {k, k + 1, k + 2, k + 3};
        adag_value_t v = {.kind = ADAG_VALUE_TENSOR, .data = x, .size = sizeof(x),
                          .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {4}};
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
        adag_value_t out;
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 5000));
        cr_assert_eq(out.size, sizeof(x));
        cr_assert_arr_eq(out.data, x, sizeof(x));
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    double t0 = now_ms();
    ASSERT_OK(adag_dag_destroy(dag));
    cr_assert_lt(now_ms() - t0, 5000, "destroy took %.0f ms", now_ms() - t0);
    ASSERT_OK(adag_runtime_destroy(rt));
    unlink(path);
}
H_BOTH(reservations_left, refused_feed, 60)

struct holder {
    adag_dag_h dag;
    pthread_barrier_t *reserved;
    int commit_after_ms; /* < 0: never commits (the thread just ends) */
    adag_status_t reserve_st, commit_st;
};

static void *hold(void *arg)
{
    struct holder *h = arg;
    adag_input_view_t view;
    adag_ref_t ref;
    h->reserve_st = adag_dag_reserve(h->dag, 0, &view, 1, &ref);
    pthread_barrier_wait(h->reserved);
    if (h->reserve_st != ADAG_OK || h->commit_after_ms < 0)
        return NULL;
    h_sleep_ms(h->commit_after_ms);
    h->commit_st = h_commit_i64(h->dag, ref, &view, 0x0101010101010101);
    return NULL;
}

/* input -> r.echo -> output (teardown timeout teardown_ms), and a thread
 * *t running hold(h) that has reserved an execution of it. */
static adag_dag_h echo_with_holder(adag_runtime_h rt, adag_placement_t pl, int teardown_ms,
                                   struct holder *h, pthread_t *t)
{
    adag_actor_h a = h_counter(rt, pl, "r", 0);
    adag_compile_params_t cp = h_compile_params(4, 64, 2000, teardown_ms);
    h->dag = h_compile_with(h_chain_graph(rt, &a, 1, "echo"), &cp);
    pthread_barrier_init(h->reserved, NULL, 2);
    cr_assert_eq(pthread_create(t, NULL, hold, h), 0);
    pthread_barrier_wait(h->reserved);
    ASSERT_OK(h->reserve_st);
    return h->dag;
}

/* A reservation another thread never ends: destroy drops it after the
 * teardown timeout and returns. */
static void destroy_drops_abandoned(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    pthread_barrier_t reserved;
    struct holder h = {.reserved = &reserved, .commit_after_ms = -1};
    pthread_t t;
    adag_dag_h dag = echo_with_holder(rt, pl, 500, &h, &t);
    pthread_join(t, NULL);
    double t0 = now_ms();
    ASSERT_OK(adag_dag_destroy(dag));
    double took = now_ms() - t0;
    cr_assert_lt(took, 4000, "destroy took %.0f ms with a 500 ms teardown timeout", took);
    ASSERT_OK(adag_runtime_destroy(rt));
    pthread_barrier_destroy(&reserved);
    h_assert_clean(&snap);
}
H_BOTH(reservations_left, destroy_drops_abandoned, 30)

struct destroyer {
    adag_dag_h dag;
    adag_status_t st;
    double took_ms;
};

static void *destroy_it(void *arg)
{
    struct destroyer *d = arg;
    double t0 = now_ms();
    d->st = adag_dag_destroy(d->dag);
    d->took_ms = now_ms() - t0;
    return NULL;
}

/* A thread commits while another destroys: its commit is cancelled with
 * ADAG_ERR_CLOSED, and destroy returns as soon as it did (well before the
 * teardown timeout). */
static void commit_races_destroy(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    pthread_barrier_t reserved;
    struct holder h = {.reserved = &reserved, .commit_after_ms = 1000};
    pthread_t t, d;
    adag_dag_h dag = echo_with_holder(rt, pl, 20000, &h, &t);
    struct destroyer ds = {.dag = dag};
    cr_assert_eq(pthread_create(&d, NULL, destroy_it, &ds), 0);
    pthread_join(t, NULL);
    pthread_join(d, NULL);
    cr_assert_eq(h.commit_st, ADAG_ERR_CLOSED, "the commit during destroy returned %s",
                 adag_status_str(h.commit_st));
    ASSERT_OK(ds.st);
    cr_assert_lt(ds.took_ms, 10000, "destroy waited %.0f ms for a commit made at 1 s",
                 ds.took_ms);
    ASSERT_OK(adag_runtime_destroy(rt));
    pthread_barrier_destroy(&reserved);
}
H_BOTH(reservations_left, commit_races_destroy, 60)

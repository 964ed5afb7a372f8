/*
 * Suite "data_dag": a data source feeding a compiled DAG (ADAG_DATA_PARAM_DAG):
 * batches written by the source's threads straight into the input slots of
 * a 2-stage process DAG, in order, equal to what the same source hands a
 * caller; backpressure from executions not released; refusals.
 */
#include <adag/data.h>

#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RS 48
#define NREC 2000
#define BATCH 16

static char path[64];

static void records_make(void)
{
    snprintf(path, sizeof(path), "/tmp/adag-data-dag-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unsigned char r[RS];
    for (uint64_t id = 0; id < NREC; id++) {
        for (unsigned i = 0; i < RS; i++)
            r[i] = (unsigned char)(id * 7 + i);
        memcpy(r, &id, 8);
        cr_assert_eq(write(fd, r, RS), RS);
    }
    close(fd);
}

static void records_remove(void)
{
    unlink(path);
}

TestSuite(data_dag, .init = records_make, .fini = records_remove, .timeout = 90);

static const char *shards[1];

static adag_data_params_t params(adag_dag_h dag)
{
    shards[0] = path;
    return (adag_data_params_t){
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_THREADS |
                      ADAG_DATA_PARAM_SHUFFLE | ADAG_DATA_PARAM_SEED |
                      (dag ? ADAG_DATA_PARAM_DAG : 0),
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = BATCH,
        .record_size = RS,
        .threads = 3,
        .shuffle_window = 64,
        .seed = 2024,
        .dag = dag,
    };
}

/* input -> a.echo -> b.echo -> output, both process actors */
static adag_dag_h echo_dag(adag_runtime_h rt, unsigned inflight, size_t cap)
{
    adag_actor_h a[2] = {h_counter(rt, ADAG_PLACEMENT_PROCESS, "load_a", 0),
                         h_counter(rt, ADAG_PLACEMENT_PROCESS, "load_b", 0)};
    adag_graph_h g = h_chain_graph(rt, a, 2, "echo");
    adag_dag_h dag = h_compile(g, inflight, cap);
    adag_graph_destroy(g);
    return dag;
}

/* The source's threads fill the DAG's input slots; executions come out in
 * batch order and each result is the batch the same source gives a caller
 * (the order does not depend on where batches go). */
Test(data_dag, feeds_a_two_stage_process_dag_in_order)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = echo_dag(rt, 4, BATCH * RS);
    enum { N = 300 }; /* more than two epochs of 125 batches */
    static unsigned char want[N][BATCH * RS];
    adag_data_params_t p = params(NULL);
    adag_data_source_h plain;
    cr_assert_eq(adag_data_open(&p, &plain), ADAG_OK, "%s", adag_last_error());
    for (unsigned b = 0; b < N; b++) {
        adag_data_batch_t bt;
        cr_assert_eq(adag_data_next(plain, &bt, 10000), ADAG_OK, "%s", adag_last_error());
        memcpy(want[b], bt.data, bt.size);
        adag_data_release(plain, &bt);
    }
    adag_data_close(plain);

    p = params(dag);
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    adag_ref_t prev = 0;
    for (unsigned b = 0; b < N; b++) {
        adag_ref_t ref;
        adag_data_batch_t bt;
        cr_assert_eq(adag_data_next_exec(src, &ref, &bt, 20000), ADAG_OK, "exec %u: %s", b,
                     adag_last_error());
        cr_assert_null(bt.data);
        cr_assert_eq(bt.size, BATCH * RS);
        cr_assert_eq(bt.epoch, b / 125);
        cr_assert_eq(bt.batch, b % 125);
        if (b)
            cr_assert_gt(ref, prev, "refs out of order");
        prev = ref;
        adag_value_t out;
        cr_assert_eq(adag_dag_get(dag, ref, &out, 1, 20000), ADAG_OK, "%s", adag_last_error());
        cr_assert_eq(out.size, BATCH * RS);
        cr_assert_arr_eq(out.data, want[b], BATCH * RS, "execution %u is not batch %u", b, b);
        cr_assert_eq(adag_dag_release(dag, ref), ADAG_OK);
    }
    adag_data_batch_t bt;
    cr_assert_eq(adag_data_next(src, &bt, 0), ADAG_ERR_INVALID, "next on a feeding source");
    cr_assert(strstr(adag_last_error(), "adag_data_next_exec"), "%s", adag_last_error());
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    cr_assert_eq(st.bytes_held, 0, "a feeding source holds no batch memory");
    cr_assert_eq(adag_data_close(src), ADAG_OK);
    cr_assert_eq(adag_dag_destroy(dag), ADAG_OK);
    adag_runtime_destroy(rt);
}

/* Executions the caller does not release hold the DAG's window: the source
 * starts max_inflight of them and then waits, and goes on once they are
 * released. */
Test(data_dag, unreleased_executions_hold_the_source)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = echo_dag(rt, 3, BATCH * RS);
    adag_data_params_t p = params(dag);
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    adag_ref_t refs[3];
    adag_data_batch_t bt;
    for (unsigned i = 0; i < 3; i++)
        cr_assert_eq(adag_data_next_exec(src, &refs[i], &bt, 20000), ADAG_OK, "%s",
                     adag_last_error());
    adag_ref_t more;
    cr_assert_eq(adag_data_next_exec(src, &more, &bt, 300), ADAG_ERR_TIMEOUT,
                 "a fourth execution started in a window of 3");
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    cr_assert_gt(st.blocked_s, 0.2, "the threads did not wait for room");
    for (unsigned i = 0; i < 3; i++) {
        adag_value_t out;
        cr_assert_eq(adag_dag_get(dag, refs[i], &out, 1, 20000), ADAG_OK);
        adag_dag_release(dag, refs[i]);
    }
    cr_assert_eq(adag_data_next_exec(src, &more, &bt, 20000), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(bt.batch, 3);
    adag_value_t out;
    cr_assert_eq(adag_dag_get(dag, more, &out, 1, 20000), ADAG_OK);
    adag_dag_release(dag, more);
    cr_assert_eq(adag_data_close(src), ADAG_OK);
    cr_assert_eq(adag_dag_destroy(dag), ADAG_OK);
    adag_runtime_destroy(rt);
}

/* A DAG whose slots cannot hold a batch, one with two inputs, and
 * adag_data_next_exec on a source that feeds nothing are refused. */
Test(data_dag, refusals)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h small = echo_dag(rt, 2, BATCH * RS - 1);
    adag_data_params_t p = params(small);
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "does not fit"), "%s", adag_last_error());
    adag_dag_destroy(small);

    adag_actor_h c = h_counter(rt, ADAG_PLACEMENT_THREAD, "two_in", 0);
    adag_graph_h g;
    cr_assert_eq(adag_graph_create(rt, &g), ADAG_OK);
    adag_node_h in[2] = {h_input(g, 0), h_input(g, 1)}, sum;
    cr_assert_eq(adag_graph_bind(g, c, "sum2", in, 2, &sum), ADAG_OK);
    cr_assert_eq(adag_graph_output(g, &sum, 1), ADAG_OK);
    adag_dag_h two = h_compile(g, 2, BATCH * RS);
    adag_graph_destroy(g);
    p = params(two);
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "2 input fields"), "%s", adag_last_error());
    adag_dag_destroy(two);

    p = params(NULL);
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK);
    adag_ref_t ref;
    adag_data_batch_t bt;
    cr_assert_eq(adag_data_next_exec(src, &ref, &bt, 0), ADAG_ERR_INVALID);
    adag_data_close(src);
    p = params(NULL);
    p.field_mask |= ADAG_DATA_PARAM_DAG;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    adag_runtime_destroy(rt);
}

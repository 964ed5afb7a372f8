/*
 * Suite "data_dag": a data source feeding a compiled DAG (ADAG_DATA_PARAM_DAG):
 * batches written by the source's threads straight into the input slots of
 * a 2-stage process DAG, in order, equal to what the same source hands a
 * caller; backpressure from executions not released; refusals.
 */
#include <adag/data.h>

#include "gpu_stage.h"
#include "helpers.h"
#include "probes.h"

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

/* ---- a device first stage: the DAG's pinned staging, copies in its stream ---- */

#define DN 64   /* floats a record */
#define DREC 512
#define DBATCH 8

/* f32 records: element i of record r is ((r * 7 + i) % 300) - 150 */
static void write_f32_records(char *fpath, size_t len)
{
    snprintf(fpath, len, "/tmp/adag-data-dev-XXXXXX");
    int fd = mkstemp(fpath);
    cr_assert_geq(fd, 0);
    for (unsigned r = 0; r < DREC; r++) {
        float rec[DN];
        for (unsigned i = 0; i < DN; i++)
            rec[i] = (float)((r * 7 + i) % 300) - 150.0f;
        cr_assert_eq(write(fd, rec, sizeof(rec)), (ssize_t)sizeof(rec));
    }
    close(fd);
}

/* input (on the driver's device emu:0) -> d1 (emu:0) -> d2 (emu:1): the
 * source's threads fill the DAG's pinned staging (the views of public
 * adag_dag_reserve) and each commit enqueues its copy without waiting for
 * it; with copies slowed down (ADAG_EMU_COPY_MBPS), a copy not ordered
 * before d1's read in the DAG's stream, or a staging buffer refilled
 * before its copy ran, would show in the results. Every output element is
 * checked against the C reference applied to the batch the same source
 * hands a caller; the batch arrives as the tensor [8, 64] f32. The
 * staging is the DAG's memory: the source's budget and bytes_held do not
 * count it, and its printed stats say whose it is. */
Test(data_dag, feeds_a_device_first_stage_through_pinned_staging)
{
    setenv("ADAG_EMU_COPY_MBPS", "300", 1);
    char fpath[64];
    write_f32_records(fpath, sizeof(fpath));
    const char *fshards[] = {fpath};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_THREADS |
                      ADAG_DATA_PARAM_SHUFFLE | ADAG_DATA_PARAM_SEED | ADAG_DATA_PARAM_TENSOR,
        .shards = fshards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = DBATCH,
        .record_size = DN * sizeof(float),
        .threads = 2,
        .shuffle_window = 64,
        .seed = 77,
        .sample_dtype = ADAG_DTYPE_F32,
        .sample_ndim = 1,
        .sample_shape = {DN},
    };
    enum { N = 150 }; /* more than two epochs of 64 batches */
    static float want[N][DBATCH * DN];
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    for (unsigned b = 0; b < N; b++) {
        adag_data_batch_t bt;
        cr_assert_eq(adag_data_next(src, &bt, 10000), ADAG_OK, "%s", adag_last_error());
        memcpy(want[b], bt.data, bt.size);
        adag_data_release(src, &bt);
    }
    adag_data_close(src);

    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2] = {h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "d1", "emu:0", 1, 0),
                         h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "d2", "emu:1", 2, 0)};
    adag_compile_params_t cp = h_compile_params(4, DBATCH * DN * sizeof(float), 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
    cp.driver_device = "emu:0";
    adag_dag_h dag = h_gpu_chain(rt, a, 2, &cp);

    p.field_mask |= ADAG_DATA_PARAM_DAG;
    p.dag = dag;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    cr_assert(st.bytes_held == 0 && st.budget == 0 && st.bytes_peak == 0,
              "the source holds %zu of a %zu budget (peak %zu): the staging is the DAG's",
              st.bytes_held, st.budget, st.bytes_peak);
    char text[4096];
    cr_assert_eq(adag_data_format_stats(src, text, sizeof(text), NULL), ADAG_OK, "%s",
                 adag_last_error());
    char staging[160];
    snprintf(staging, sizeof(staging), "pinned staging (4 x %.1f kB, the DAG's memory)",
             DBATCH * DN * sizeof(float) / 1e3);
    cr_assert(strstr(text, staging), "no '%s' in:\n%s", staging, text);
    for (unsigned b = 0; b < N; b++) {
        adag_ref_t ref;
        adag_data_batch_t bt;
        cr_assert_eq(adag_data_next_exec(src, &ref, &bt, 20000), ADAG_OK, "exec %u: %s", b,
                     adag_last_error());
        adag_value_t out[2];
        cr_assert_eq(adag_dag_get(dag, ref, out, 2, 20000), ADAG_OK, "%s", adag_last_error());
        cr_assert_eq(out[0].kind, ADAG_VALUE_TENSOR);
        cr_assert_eq(out[0].dtype, ADAG_DTYPE_F32);
        cr_assert_eq(out[0].ndim, 2);
        cr_assert(out[0].shape[0] == DBATCH && out[0].shape[1] == DN, "shape [%lld, %lld]",
                  (long long)out[0].shape[0], (long long)out[0].shape[1]);
        cr_assert_eq(out[0].device, ADAG_DEVICE(ADAG_DEV_EMULATED, 0));
        cr_assert_eq(adag_dag_stream_sync(dag, 20000), ADAG_OK);
        for (unsigned i = 0; i < DBATCH * DN; i++) {
            float x = want[b][i], y, z;
            stage_apply(ADAG_DTYPE_F32, 1, &x, &y);
            stage_apply(ADAG_DTYPE_F32, 2, &y, &z);
            cr_assert(memcmp(&z, (const char *)out[0].data + i * sizeof(float), sizeof(z)) == 0,
                      "batch %u element %u differs from the reference", b, i);
        }
        cr_assert_eq(adag_dag_release(dag, ref), ADAG_OK);
    }
    cr_assert_eq(adag_data_close(src), ADAG_OK);
    cr_assert_eq(adag_dag_destroy(dag), ADAG_OK);
    for (int s = 0; s < 2; s++)
        cr_assert_eq(adag_actor_destroy(a[s]), ADAG_OK);
    adag_runtime_destroy(rt);
    unlink(fpath);
    cr_assert_eq(probe_device_objects(getpid()), 0, "device objects left in the driver");
    h_assert_clean(&snap);
}

/* A source closed after a few executions has started more than it handed
 * out; close releases those, so a second source feeds the same DAG. */
Test(data_dag, close_releases_executions_never_handed_out)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = echo_dag(rt, 4, BATCH * RS);
    for (int round = 0; round < 3; round++) {
        adag_data_params_t p = params(dag);
        adag_data_source_h src;
        cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
        for (unsigned b = 0; b < 10; b++) {
            adag_ref_t ref;
            adag_data_batch_t bt;
            adag_value_t out;
            cr_assert_eq(adag_data_next_exec(src, &ref, &bt, 10000), ADAG_OK,
                         "round %d, batch %u: %s", round, b, adag_last_error());
            cr_assert_eq(bt.batch, b, "each source starts at batch 0");
            cr_assert_eq(adag_dag_get(dag, ref, &out, 1, 10000), ADAG_OK, "%s",
                         adag_last_error());
            cr_assert_eq(adag_dag_release(dag, ref), ADAG_OK);
        }
        usleep(50000); /* the threads start executions ahead, up to the window */
        adag_data_close(src);
    }
    adag_dag_destroy(dag);
    adag_runtime_destroy(rt);
}

/* out = the record (RS bytes); refuses sample *fail_at */
static adag_status_t refuse_at(void *arg, const adag_data_sample_t *s, uint64_t *rng, void *out,
                               size_t out_size)
{
    (void)rng;
    if (s->index == *(const uint64_t *)arg)
        return adag_data_fail(s, "refusing this one");
    usleep(300); /* the other threads reach the failing batch first */
    memcpy(out, s->data, out_size);
    return ADAG_OK;
}

/* Feeding a DAG, a failure comes after the executions of every batch
 * before it, in order; adag_data_release of such a batch says it is
 * released with adag_dag_release; the stats printed show the batches in
 * the DAG's slots, not "0.0 MB held of a 0.0 MB budget". */
Test(data_dag, a_feeding_source_fails_in_order_and_explains_its_batches)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = echo_dag(rt, 4, 2 * BATCH * RS);
    uint64_t fail_at = 6 * BATCH + 3; /* batch 6 (no shuffle) */
    adag_data_params_t p = params(dag);
    p.field_mask &= ~(uint64_t)(ADAG_DATA_PARAM_SHUFFLE | ADAG_DATA_PARAM_SEED);
    p.shuffle_window = 0; /* in order: fields without their bits stay zero */
    p.seed = 0;
    p.field_mask |= ADAG_DATA_PARAM_MAP;
    p.map = refuse_at;
    p.map_arg = &fail_at;
    p.sample_size = RS;
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    adag_ref_t ref;
    adag_data_batch_t bt;
    for (unsigned b = 0; b < 6; b++) {
        adag_status_t st = adag_data_next_exec(src, &ref, &bt, 20000);
        cr_assert_eq(st, ADAG_OK, "execution %u of the 6 before the failure: %s", b,
                     adag_last_error());
        cr_assert_eq(bt.batch, b);
        if (b == 0) {
            adag_data_batch_t copy = bt;
            cr_assert_eq(adag_data_release(src, &copy), ADAG_ERR_INVALID);
            cr_assert(strstr(adag_last_error(), "adag_dag_release") &&
                          strstr(adag_last_error(), "adag_data_next_exec"),
                      "%s", adag_last_error());
            h_text_t t = {0};
            ASSERT_OK(adag_data_print_stats(src, h_text_writer(&t)));
            char *text = t.text;
            cr_assert(!strstr(text, "0.0 MB held of a 0.0 MB budget"), "%s", text);
            char want[128];
            snprintf(want, sizeof(want), "batches of %u B in DAG", BATCH * RS);
            cr_assert(strstr(text, want) && strstr(text, "of its 4 executions"), "%s", text);
            free(text);
        }
        adag_value_t out;
        cr_assert_eq(adag_dag_get(dag, ref, &out, 1, 20000), ADAG_OK, "%s", adag_last_error());
        cr_assert_eq(out.size, BATCH * RS);
        uint64_t id;
        memcpy(&id, out.data, 8);
        cr_assert_eq(id, (uint64_t)b * BATCH, "execution %u holds record %llu first", b,
                     (unsigned long long)id);
        cr_assert_eq(adag_dag_release(dag, ref), ADAG_OK);
        usleep(20000); /* the window's next execution is started, batch 6 fails meanwhile */
    }
    cr_assert_eq(adag_data_next_exec(src, &ref, &bt, 20000), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "sample 99: refusing this one"), "%s", adag_last_error());
    cr_assert_eq(adag_data_close(src), ADAG_OK);
    cr_assert_eq(adag_dag_destroy(dag), ADAG_OK);
    adag_runtime_destroy(rt);
}

/*
 * Calls enqueued ahead of their inputs (dag/exec/loop_ahead.c): a
 * device-bound actor whose arguments are static tensors from device
 * writers runs its method as soon as its execution started, its work
 * ordered behind the writers' words on the device, and reads the inputs'
 * status on the ring afterwards.
 *
 * The chain: input f32[N] -> s1 (emu:0) -> s2 (emu:0, zero copy) -> s3
 * (emu:1, peer copy), each edge declared f32[N], the stages of
 * tests/modules/gpu_stage.c (each method's "kernel" on its compute stream).
 */
#include "builders.h"
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 512 };

/* A gpu_stage actor: its stage, each kernel's sleep, each method's sleep
 * on the host before its kernel. */
static adag_actor_h stage(adag_runtime_h rt, adag_placement_t pl, const char *name,
                          const char *dev, int st, int kernel_us, int host_us)
{
    if (pl == ADAG_PLACEMENT_THREAD)
        adag_class_register(rt, &test_gpu_stage_class); /* once; later calls say it exists */
    int init[3] = {st, kernel_us, host_us};
    adag_actor_params_t p = h_actor_params_init("gpu_stage", pl, name, init, sizeof(init));
    p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
    p.device = dev;
    adag_actor_h a;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    return a;
}

/* Destroys the DAG, the three stages and the runtime; nothing is left. */
static void teardown(adag_dag_h dag, adag_actor_h *a, adag_runtime_h rt, h_snapshot_t *snap)
{
    ASSERT_OK(adag_dag_destroy(dag));
    for (int s = 0; s < 3; s++)
        ASSERT_OK(adag_actor_destroy(a[s]));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(snap);
}

static void declare(adag_node_h v)
{
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                               .dtype = ADAG_DTYPE_F32,
                               .ndim = 1,
                               .shape = {N}};
    ASSERT_OK(adag_node_tensor(v, &tp));
}

/* A runtime whose hand-offs are by value ops (memops 1, the default) or by
 * IPC events (ADAG_DEVICE_MEMOPS=0: nothing runs ahead). */
static adag_runtime_h runtime_memops(int memops)
{
    setenv("ADAG_DEVICE_MEMOPS", memops ? "1" : "0", 1);
    adag_runtime_h rt = h_runtime();
    unsetenv("ADAG_DEVICE_MEMOPS");
    return rt;
}

static void input(float *x, uint64_t k)
{
    for (unsigned i = 0; i < N; i++)
        x[i] = (float)((k * 13 + i) % 997) - 400.0f;
}

static void check(const float *x, const adag_value_t *out, uint64_t k)
{
    cr_assert_eq(out->size, N * sizeof(float), "execution %llu: %zu bytes",
                 (unsigned long long)k, out->size);
    for (unsigned i = 0; i < N; i++) {
        float v = x[i], w;
        for (int s = 1; s <= 3; s++) {
            stage_apply(ADAG_DTYPE_F32, s, &v, &w);
            v = w;
        }
        cr_assert(memcmp(&v, (const char *)out->data + i * sizeof(float), sizeof(v)) == 0,
                  "execution %llu, element %u differs from the C reference",
                  (unsigned long long)k, i);
    }
}

/* s1's method spends 30 ms on the host before its kernel. Compiled with
 * run_ahead, s2 and s3 read ahead: their methods end before s1's does
 * (each stage's info says when its method ended), and every element is
 * right. Without run_ahead, or by IPC events, nothing runs ahead: each
 * method ends after its writer's. */
static void slow_host_side(adag_placement_t pl, int memops, int run_ahead)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = runtime_memops(memops);
    adag_actor_h a[3] = {stage(rt, pl, "s1", "emu:0", 1, 0, 30000),
                         stage(rt, pl, "s2", "emu:0", 2, 0, 0),
                         stage(rt, pl, "s3", "emu:1", 3, 0, 0)};
    adag_graph_h g;
    adag_node_h x, y, info[3];
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    declare(x);
    for (int s = 0; s < 3; s++) {
        adag_node_h call;
        ASSERT_OK(adag_graph_bind(g, a[s], "step", &x, 1, &call));
        ASSERT_OK(adag_node_output(call, 0, &y));
        ASSERT_OK(adag_node_output(call, 1, &info[s]));
        declare(y);
        x = y;
    }
    adag_node_h outs[4] = {y, info[0], info[1], info[2]};
    ASSERT_OK(adag_graph_output(g, outs, 4));
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_RUN_AHEAD,
                                .run_ahead = run_ahead};
    adag_dag_h dag;
    ASSERT_OK(adag_graph_compile(g, &cp, &dag));
    ASSERT_OK(adag_graph_destroy(g));
    int ahead = run_ahead && memops;
    static float xs[N];
    for (uint64_t k = 0; k < 12; k++) {
        input(xs, k);
        int64_t shape[1] = {N};
        adag_value_t in = adag_value_tensor(xs, ADAG_DTYPE_F32, 1, shape), out[4];
        adag_ref_t ref;
        ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
        ASSERT_OK(adag_dag_get(dag, ref, out, 4, 20000));
        check(xs, &out[0], k);
        stage_info_t si[3];
        for (int s = 0; s < 3; s++) {
            cr_assert_eq(out[1 + s].size, sizeof(si[s]));
            memcpy(&si[s], out[1 + s].data, sizeof(si[s]));
        }
        for (int s = 1; s < 3; s++) {
            double after_ms = (double)(si[s].method_ns - si[0].method_ns) / 1e6;
            if (ahead)
                cr_assert_lt(after_ms, 0.0, "execution %llu: s%d's method ended %.1f ms after "
                             "s1's: it did not run ahead", (unsigned long long)k, s + 1,
                             after_ms);
            else
                cr_assert_gt(after_ms, 0.0, "execution %llu: s%d's method ended %.1f ms before "
                             "s1's (memops %d, run_ahead %d)", (unsigned long long)k, s + 1,
                             -after_ms, memops, run_ahead);
        }
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    teardown(dag, a, rt, &snap);
}

static void slow_host_side_ahead(adag_placement_t pl)
{
    slow_host_side(pl, 1, 1);
}

H_BOTH(device_ahead, slow_host_side_ahead, 60)

Test(device_ahead, nothing_ahead_by_ipc_events, .timeout = 60)
{
    slow_host_side(ADAG_PLACEMENT_PROCESS, 0, 1);
}

Test(device_ahead, nothing_ahead_without_run_ahead, .timeout = 60)
{
    slow_host_side(ADAG_PLACEMENT_THREAD, 1, 0);
}

/* s2 fails every execution whose ref % 4 == 1; s3 reads ahead of it. Each
 * such execution fails with s2's message, every other one is right, with
 * three in flight. The last execution fails, and the DAG then idles past
 * its communication timeout: s3's stream must not be left waiting for a
 * value s2 never makes (the watchdog would fail the DAG), so the next
 * execution is right too. */
static void upstream_failures(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[3] = {stage(rt, pl, "s1", "emu:0", 1, 0, 0),
                         stage(rt, pl, "s2", "emu:0", 2, 0, 0),
                         stage(rt, pl, "s3", "emu:1", 3, 0, 0)};
    static const char *const methods[3] = {"apply", "apply_flaky", "apply"};
    adag_graph_h g;
    adag_node_h x, y;
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    declare(x);
    for (int s = 0; s < 3; s++) {
        ASSERT_OK(adag_graph_bind(g, a[s], methods[s], &x, 1, &y));
        declare(y);
        x = y;
    }
    ASSERT_OK(adag_graph_output(g, &y, 1));
    enum { INFLIGHT = 3 };
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_COMM_TIMEOUT |
                                              ADAG_COMPILE_PARAM_RUN_AHEAD,
                                .max_inflight = INFLIGHT,
                                .comm_timeout_ms = 300,
                                .run_ahead = 1};
    adag_dag_h dag;
    ASSERT_OK(adag_graph_compile(g, &cp, &dag));
    ASSERT_OK(adag_graph_destroy(g));
    static float xs[INFLIGHT][N];
    adag_ref_t refs[INFLIGHT];
    /* executions 0 .. last, where last % 4 == 1: the last one fails */
    const uint64_t last = 197;
    for (uint64_t k = 0; k <= last + INFLIGHT; k++) {
        unsigned i = (unsigned)(k % INFLIGHT);
        if (k >= INFLIGHT) {
            uint64_t j = k - INFLIGHT;
            adag_value_t out;
            adag_status_t st = adag_dag_get(dag, refs[i], &out, 1, 20000);
            if (j % 4 == 1) {
                cr_assert_eq(st, ADAG_ERR_METHOD, "execution %llu: %s (%s)",
                             (unsigned long long)j, adag_status_str(st), adag_last_error());
                cr_assert(strstr(adag_last_error(), "stage 2 fails execution"), "%s",
                          adag_last_error());
            } else {
                cr_assert_eq(st, ADAG_OK, "execution %llu: %s (%s)", (unsigned long long)j,
                             adag_status_str(st), adag_last_error());
                check(xs[i], &out, j);
            }
            ASSERT_OK(adag_dag_release(dag, refs[i]));
        }
        if (k <= last) {
            input(xs[i], k);
            int64_t shape[1] = {N};
            adag_value_t in = adag_value_tensor(xs[i], ADAG_DTYPE_F32, 1, shape);
            ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &refs[i]));
        }
    }
    usleep(1000 * 1000); /* idle past the 300 ms communication timeout */
    input(xs[0], last + 1); /* % 4 == 2: runs */
    int64_t shape[1] = {N};
    adag_value_t in = adag_value_tensor(xs[0], ADAG_DTYPE_F32, 1, shape), out;
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 20000));
    check(xs[0], &out, last + 1);
    ASSERT_OK(adag_dag_release(dag, ref));
    teardown(dag, a, rt, &snap);
}

H_BOTH(device_ahead, upstream_failures, 90)

/* A DAG that runs ahead has its device actors to itself: a second DAG
 * over one of them is refused (ADAG_ERR_BUSY, naming the actor and the
 * DAG) while it lives, whichever compiles first, and compiles once it is
 * gone. A bad run_ahead is refused too. */
static adag_status_t one_stage_dag(adag_runtime_h rt, adag_actor_h a, const char *name,
                                   int run_ahead, adag_dag_h *dag)
{
    adag_graph_h g;
    adag_node_h x, y;
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    declare(x);
    ASSERT_OK(adag_graph_bind(g, a, "apply", &x, 1, &y));
    declare(y);
    ASSERT_OK(adag_graph_output(g, &y, 1));
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_RUN_AHEAD | ADAG_COMPILE_PARAM_NAME,
                                .run_ahead = run_ahead,
                                .name = name};
    adag_status_t st = adag_graph_compile(g, &cp, dag);
    ASSERT_OK(adag_graph_destroy(g));
    return st;
}

static void exclusive_actors(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = stage(rt, pl, "s1", "emu:0", 1, 0, 0);
    adag_dag_h first, second;
    ASSERT_ST(one_stage_dag(rt, a, "bad", 2, &first), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "run_ahead 2"), "%s", adag_last_error());
    /* ahead first, then a plain DAG */
    ASSERT_OK(one_stage_dag(rt, a, "ahead", 1, &first));
    ASSERT_ST(one_stage_dag(rt, a, "plain", 0, &second), ADAG_ERR_BUSY);
    cr_assert(strstr(adag_last_error(), "actor s1 is in DAG ahead") &&
                  strstr(adag_last_error(), "runs ahead of its inputs"),
              "%s", adag_last_error());
    ASSERT_OK(adag_dag_destroy(first));
    /* a plain DAG first, then one that runs ahead */
    ASSERT_OK(one_stage_dag(rt, a, "plain", 0, &second));
    ASSERT_ST(one_stage_dag(rt, a, "ahead", 1, &first), ADAG_ERR_BUSY);
    cr_assert(strstr(adag_last_error(), "actor s1 is in DAG plain"), "%s", adag_last_error());
    /* two plain DAGs share it as ever */
    adag_dag_h third;
    ASSERT_OK(one_stage_dag(rt, a, "plain2", 0, &third));
    ASSERT_OK(adag_dag_destroy(third));
    ASSERT_OK(adag_dag_destroy(second));
    ASSERT_OK(one_stage_dag(rt, a, "ahead", 1, &first));
    ASSERT_OK(adag_dag_destroy(first));
    ASSERT_OK(adag_actor_destroy(a));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

H_BOTH(device_ahead, exclusive_actors, 60)

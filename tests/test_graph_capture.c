/* API tests (suite "graph_capture"): device graphs of capturable methods
 * (adag_compile_params_t.graphs, adag_class_def_t.capturable) through
 * real DAGs, with thread and process actors on the emulated device: a
 * method that enqueues 50 kernels per execution, replayed from its
 * graphs, gives every element the eager DAG and the C reference give,
 * execution after execution, while the method itself stops being called;
 * a method whose return is set from the host fails the execution it was
 * captured in, naming actor.method and why, and then runs uncaptured. */
#include "graph_actors.h"
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ADAG_TEST_DEVICE_MODULE
#error "ADAG_TEST_DEVICE_MODULE must be defined by the build"
#endif

static adag_actor_h graph_actor(adag_runtime_h rt, adag_placement_t pl, const char *device,
                                const char *name)
{
    adag_actor_params_t p = h_actor_params_init("graphactor", pl, name, NULL, 0);
    if (pl == ADAG_PLACEMENT_PROCESS)
        p.module_path = ADAG_TEST_DEVICE_MODULE;
    p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
    p.device = device;
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    return a;
}

/* input 0 -> a.method -> output, compiled with graphs on or off; f32
 * [GRAPH_ACTOR_N] tensor returns when tensor is set */
static adag_dag_h method_dag(adag_runtime_h rt, adag_actor_h a, const char *method, int tensor,
                             int graphs, unsigned inflight)
{
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h y = h_bind1(g, a, method, h_input(g, 0));
    if (tensor) {
        adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                                   .dtype = ADAG_DTYPE_F32, .ndim = 1, .shape = {GRAPH_ACTOR_N}};
        ASSERT_OK(adag_node_tensor(y, &tp));
    }
    ASSERT_OK(adag_graph_output(g, &y, 1));
    adag_compile_params_t cp = h_compile_params(inflight, 0, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_GRAPHS;
    cp.graphs = graphs;
    adag_dag_h dag = h_compile_with(g, &cp);
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

/* How many times the actor's methods ran (its "calls" method). */
static int64_t calls_of(adag_runtime_h rt, adag_actor_h a)
{
    adag_dag_h d = method_dag(rt, a, "calls", 0, 0, 1);
    int64_t n = h_roundtrip(d, 0);
    ASSERT_OK(adag_dag_destroy(d));
    return n;
}

static void replay_equals_eager(adag_placement_t pl)
{
    enum { N = 120, W = 4 };
    adag_runtime_h rt = h_runtime();
    ASSERT_OK(adag_class_register(rt, &test_graph_class));
    adag_actor_h cap = graph_actor(rt, pl, "emu:0", "captured");
    adag_actor_h eag = graph_actor(rt, pl, "emu:1", "eager");
    adag_dag_h dg = method_dag(rt, cap, "chain", 1, 1, W);
    adag_dag_h de = method_dag(rt, eag, "chain", 1, 0, W);
    static float want[GRAPH_ACTOR_N];
    adag_ref_t rg[W], re[W];
    int64_t xs[N];
    /* W executions in flight on each DAG, so replays overlap */
    for (int k = 0; k < N + W; k++) {
        if (k >= W) {
            int j = k - W;
            adag_value_t vg, ve;
            ASSERT_OK(adag_dag_get(dg, rg[j % W], &vg, 1, 10000));
            ASSERT_OK(adag_dag_get(de, re[j % W], &ve, 1, 10000));
            cr_assert_eq(vg.size, sizeof want, "execution %d: %zu bytes", j, vg.size);
            cr_assert(vg.dtype == ADAG_DTYPE_F32 && vg.ndim == 1 &&
                          vg.shape[0] == GRAPH_ACTOR_N,
                      "execution %d: the replayed return's shape is not the captured one", j);
            graph_actor_reference(xs[j], want);
            const float *g = vg.data, *e = ve.data;
            for (int i = 0; i < GRAPH_ACTOR_N; i++) {
                cr_assert(memcmp(&g[i], &want[i], sizeof(float)) == 0,
                          "%s actor, execution %d, element %d: captured DAG %.9g, reference %.9g",
                          h_pl_name(pl), j, i, (double)g[i], (double)want[i]);
                cr_assert(memcmp(&e[i], &want[i], sizeof(float)) == 0,
                          "execution %d, element %d: eager DAG %.9g, reference %.9g", j, i,
                          (double)e[i], (double)want[i]);
            }
            ASSERT_OK(adag_dag_release(dg, rg[j % W]));
            ASSERT_OK(adag_dag_release(de, re[j % W]));
        }
        if (k < N) {
            xs[k] = 1000 + 37 * k;
            adag_value_t in = h_i64v(&xs[k]);
            ASSERT_OK(adag_dag_execute(dg, &in, 1, 0, &rg[k % W]));
            ASSERT_OK(adag_dag_execute(de, &in, 1, 0, &re[k % W]));
        }
    }
    ASSERT_OK(adag_dag_destroy(dg));
    ASSERT_OK(adag_dag_destroy(de));
    int64_t nc = calls_of(rt, cap), ne = calls_of(rt, eag);
    cr_assert_eq(ne, N, "the eager actor's method ran %lld times, want %d", (long long)ne, N);
    /* a warm-up and a capture per slot pattern, then replays only */
    cr_assert(nc >= 2 && nc <= N / 2,
              "%s actor: the captured actor's method ran %lld times in %d executions: its "
              "graphs were not replayed",
              h_pl_name(pl), (long long)nc, N);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(graph_capture, replay_equals_eager, 120)

/* A runtime whose hand-offs are by value ops (memops 1) or by IPC events. */
static adag_runtime_h runtime_memops(int memops)
{
    setenv("ADAG_DEVICE_MEMOPS", memops ? "1" : "0", 1);
    adag_runtime_h rt = h_runtime();
    unsetenv("ADAG_DEVICE_MEMOPS");
    return rt;
}

/* What sum(t) gives: the elements added in order. */
static float sum_of(const float *t)
{
    float sum = 0;
    for (int i = 0; i < GRAPH_ACTOR_N; i++)
        sum += t[i];
    return sum;
}

static void tensor_of(adag_node_h y, int64_t n)
{
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                               .dtype = ADAG_DTYPE_F32, .ndim = 1, .shape = {n}};
    ASSERT_OK(adag_node_tensor(y, &tp));
}

/* One actor in two live DAGs: A replays its slow_chain from graphs; in B
 * (x -> w.chain -> cap.sum) the actor reads a device tensor another actor
 * of its device wrote. While A captures (20 ms of host work in the
 * method), B's loop on the same actor enqueues its channel's wait and
 * record on the actor's compute stream. Those belong to B's execution:
 * recorded into A's graph instead, every replay of A would wait again on
 * B's stale hand-off (by IPC events: the writer's latest record, which may
 * wait for B's release queued behind that replay, and neither runs). Both
 * DAGs' every value is checked, by value ops and by IPC events. */
static void another_dag_of_the_actor(adag_placement_t pl, int memops)
{
    enum { N = 80, W = 4 };
    adag_runtime_h rt = runtime_memops(memops);
    ASSERT_OK(adag_class_register(rt, &test_graph_class));
    adag_actor_h cap = graph_actor(rt, pl, "emu:0", "shared");
    adag_actor_h w = graph_actor(rt, pl, "emu:0", "writer");
    adag_dag_h da = method_dag(rt, cap, "slow_chain", 1, 1, W);
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h t = h_bind1(g, w, "chain", h_input(g, 0));
    tensor_of(t, GRAPH_ACTOR_N);
    adag_node_h y = h_bind1(g, cap, "sum", t);
    tensor_of(y, 1);
    ASSERT_OK(adag_graph_output(g, &y, 1));
    adag_compile_params_t cp = h_compile_params(W, 0, 0, 0);
    adag_dag_h db = h_compile_with(g, &cp);
    ASSERT_OK(adag_graph_destroy(g));
    static float want[GRAPH_ACTOR_N];
    adag_ref_t ra[W], rb[W];
    int64_t xs[N];
    for (int k = 0; k < N + W; k++) {
        if (k >= W) {
            int j = k - W;
            adag_value_t va, vb;
            ASSERT_OK(adag_dag_get(da, ra[j % W], &va, 1, 20000));
            ASSERT_OK(adag_dag_get(db, rb[j % W], &vb, 1, 20000));
            graph_actor_reference(xs[j], want);
            cr_assert(va.size == sizeof want && memcmp(va.data, want, sizeof want) == 0,
                      "%s actors, %s: DAG A's execution %d differs from the reference",
                      h_pl_name(pl), memops ? "value ops" : "IPC events", j);
            float sum = sum_of(want), got;
            cr_assert_eq(vb.size, sizeof got, "DAG B's execution %d: %zu bytes", j, vb.size);
            memcpy(&got, vb.data, sizeof got);
            cr_assert(memcmp(&got, &sum, sizeof got) == 0,
                      "%s actors, %s: DAG B's execution %d: sum %.9g, want %.9g", h_pl_name(pl),
                      memops ? "value ops" : "IPC events", j, (double)got, (double)sum);
            ASSERT_OK(adag_dag_release(da, ra[j % W]));
            ASSERT_OK(adag_dag_release(db, rb[j % W]));
        }
        if (k < N) {
            xs[k] = 3 * k - 50;
            adag_value_t in = h_i64v(&xs[k]);
            ASSERT_OK(adag_dag_execute(da, &in, 1, 0, &ra[k % W]));
            ASSERT_OK(adag_dag_execute(db, &in, 1, 0, &rb[k % W]));
        }
    }
    ASSERT_OK(adag_dag_destroy(da));
    ASSERT_OK(adag_dag_destroy(db));
    ASSERT_OK(adag_runtime_destroy(rt));
}

static void another_dag_by_value_ops(adag_placement_t pl)
{
    another_dag_of_the_actor(pl, 1);
}
H_BOTH(graph_capture, another_dag_by_value_ops, 90)

static void another_dag_by_ipc_events(adag_placement_t pl)
{
    another_dag_of_the_actor(pl, 0);
}
H_BOTH(graph_capture, another_dag_by_ipc_events, 90)

/* x -> a.chain -> b.scale -> c.sum, all on emu:0, with graphs: a's and
 * b's channels to the next stage are by value ops on one device, so their
 * graphs hold the channels' waits and value records too, replayed with
 * the values shifted to each execution (by IPC events they hold the
 * methods only). Every execution's sum equals the C reference, with 4 in
 * flight, and the captured methods stop being called. */
static void pipeline_on_one_device(adag_placement_t pl, int memops)
{
    enum { N = 100, W = 4 };
    adag_runtime_h rt = runtime_memops(memops);
    ASSERT_OK(adag_class_register(rt, &test_graph_class));
    adag_actor_h a = graph_actor(rt, pl, "emu:0", "a");
    adag_actor_h b = graph_actor(rt, pl, "emu:0", "b");
    adag_actor_h c = graph_actor(rt, pl, "emu:0", "c");
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h t = h_bind1(g, a, "chain", h_input(g, 0));
    tensor_of(t, GRAPH_ACTOR_N);
    adag_node_h u = h_bind1(g, b, "scale", t);
    tensor_of(u, GRAPH_ACTOR_N);
    adag_node_h y = h_bind1(g, c, "sum", u);
    tensor_of(y, 1);
    ASSERT_OK(adag_graph_output(g, &y, 1));
    adag_compile_params_t cp = h_compile_params(W, 0, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_GRAPHS;
    cp.graphs = 1;
    adag_dag_h d = h_compile_with(g, &cp);
    ASSERT_OK(adag_graph_destroy(g));
    static float x1[GRAPH_ACTOR_N], x2[GRAPH_ACTOR_N];
    adag_ref_t refs[W];
    int64_t xs[N];
    for (int k = 0; k < N + W; k++) {
        if (k >= W) {
            int j = k - W;
            adag_value_t v;
            ASSERT_OK(adag_dag_get(d, refs[j % W], &v, 1, 20000));
            graph_actor_reference(xs[j], x1);
            graph_actor_scale_reference(x1, x2);
            float sum = sum_of(x2), got;
            cr_assert_eq(v.size, sizeof got, "execution %d: %zu bytes", j, v.size);
            memcpy(&got, v.data, sizeof got);
            cr_assert(memcmp(&got, &sum, sizeof got) == 0,
                      "%s actors, %s: execution %d: sum %.9g, want %.9g", h_pl_name(pl),
                      memops ? "value ops" : "IPC events", j, (double)got, (double)sum);
            ASSERT_OK(adag_dag_release(d, refs[j % W]));
        }
        if (k < N) {
            xs[k] = 7 * k + 3;
            adag_value_t in = h_i64v(&xs[k]);
            ASSERT_OK(adag_dag_execute(d, &in, 1, 0, &refs[k % W]));
        }
    }
    ASSERT_OK(adag_dag_destroy(d));
    int64_t na = calls_of(rt, a), nb = calls_of(rt, b);
    cr_assert(na <= N / 2 && nb <= N / 2,
              "%s actors: a's method ran %lld times, b's %lld, in %d executions: not replayed",
              h_pl_name(pl), (long long)na, (long long)nb, N);
    ASSERT_OK(adag_runtime_destroy(rt));
}

static void pipeline_by_value_ops(adag_placement_t pl)
{
    pipeline_on_one_device(pl, 1);
}
H_BOTH(graph_capture, pipeline_by_value_ops, 90)

static void pipeline_by_ipc_events(adag_placement_t pl)
{
    pipeline_on_one_device(pl, 0);
}
H_BOTH(graph_capture, pipeline_by_ipc_events, 90)

static void host_return_fails_its_capture(adag_placement_t pl)
{
    enum { N = 30 };
    adag_runtime_h rt = h_runtime();
    ASSERT_OK(adag_class_register(rt, &test_graph_class));
    adag_actor_h a = graph_actor(rt, pl, "emu:0", "hosty");
    adag_dag_h d = method_dag(rt, a, "host_set", 0, 1, 1);
    int failed = 0, first = -1;
    for (int64_t k = 0; k < N; k++) {
        adag_ref_t ref;
        adag_value_t in = h_i64v(&k), out;
        ASSERT_OK(adag_dag_execute(d, &in, 1, 0, &ref));
        adag_status_t st = adag_dag_get(d, ref, &out, 1, 10000);
        if (st != ADAG_OK) {
            cr_assert_eq(st, ADAG_ERR_METHOD, "execution %lld: %s", (long long)k,
                         adag_status_str(st));
            const char *msg = adag_last_error();
            cr_assert(strstr(msg, "hosty.host_set") && strstr(msg, "adag_call_set_output") &&
                          strstr(msg, "graph capture"),
                      "the failure does not name actor.method and why: %s", msg);
            failed++;
            if (first < 0)
                first = (int)k;
        } else {
            cr_assert_eq(h_val_i64(out), k, "execution %lld returned %lld", (long long)k,
                         (long long)h_val_i64(out));
        }
        ASSERT_OK(adag_dag_release(d, ref));
    }
    cr_assert_eq(failed, 1, "%d executions failed; want the one captured", failed);
    cr_assert(first >= 1, "execution %d failed: the first one is a warm-up", first);
    ASSERT_OK(adag_dag_destroy(d));
    cr_assert_eq(calls_of(rt, a), N, "the method did not run uncaptured after its capture failed");
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(graph_capture, host_return_fails_its_capture, 60)

Test(graph_capture, capturable_names_a_method_of_the_class, .timeout = 30)
{
    static const adag_method_def_t m[] = {{"chain", (adag_method_fn)1, 1, 1}};
    static const char *const bad[] = {"chian", NULL};
    adag_class_def_t c = {.abi_version = ADAG_ABI_VERSION, .name = "typo", .methods = m,
                          .nmethods = 1, .capturable = bad};
    adag_runtime_h rt = h_runtime();
    ASSERT_ST(adag_class_register(rt, &c), ADAG_ERR_INVALID);
    cr_assert(strstr(h_msg(), "chian"), "the message does not name the method: %s", h_msg());
    /* graphs is 0 or 1 */
    ASSERT_OK(adag_class_register(rt, &test_graph_class));
    adag_actor_h a = graph_actor(rt, ADAG_PLACEMENT_THREAD, "emu:0", "x");
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h y = h_bind1(g, a, "calls", h_input(g, 0));
    ASSERT_OK(adag_graph_output(g, &y, 1));
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_GRAPHS, .graphs = 2};
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    cr_assert(strstr(h_msg(), "graphs is 2"), "%s", h_msg());
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* A replayed execution whose input is not the captured size fails naming
 * it (the method promised static shapes); the next ones replay again. */
Test(graph_capture, an_input_of_another_size_fails_the_replay, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    ASSERT_OK(adag_class_register(rt, &test_graph_class));
    adag_actor_h a = graph_actor(rt, ADAG_PLACEMENT_THREAD, "emu:0", "shaped");
    adag_dag_h d = method_dag(rt, a, "chain", 1, 1, 1);
    static float want[GRAPH_ACTOR_N];
    for (int k = 0; k < 12; k++) {
        int64_t x[2] = {5 + k, 0};
        adag_value_t in = {.data = x, .size = k == 8 ? sizeof x : sizeof x[0]}, out;
        adag_ref_t ref;
        ASSERT_OK(adag_dag_execute(d, &in, 1, 0, &ref));
        adag_status_t st = adag_dag_get(d, ref, &out, 1, 10000);
        if (k == 8) {
            cr_assert_eq(st, ADAG_ERR_METHOD, "16 bytes into a graph of 8: %s",
                         adag_status_str(st));
            cr_assert(strstr(adag_last_error(), "shaped.chain") &&
                          strstr(adag_last_error(), "argument 0") &&
                          strstr(adag_last_error(), "static shapes"),
                      "%s", adag_last_error());
        } else {
            ASSERT_OK(st);
            graph_actor_reference(x[0], want);
            cr_assert(memcmp(out.data, want, sizeof want) == 0, "execution %d differs", k);
        }
        ASSERT_OK(adag_dag_release(d, ref));
    }
    ASSERT_OK(adag_dag_destroy(d));
    cr_assert(calls_of(rt, a) < 12, "the method was called every time: nothing was replayed");
    ASSERT_OK(adag_runtime_destroy(rt));
}

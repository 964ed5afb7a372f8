/*
 * Communicator tensors (ADAG_TRANSPORT_COMM) that host endpoints read too
 * (suite "comm_host_readers"): the device readers get the value by the
 * communicator's send/recv, the driver (a graph output) and host actors by
 * the writer's async copy into host memory, every element checked against
 * the C reference, with thread and process actors; shapes the communicator
 * cannot serve are refused by the compiler with ADAG_ERR_INVALID naming the
 * tensor, never by an endpoint with ADAG_ERR_PROTOCOL.
 */
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ELEMS = 40, INFLIGHT = 4, EXECS = 300 };

static const adag_tensor_params_t comm_params = {.field_mask = ADAG_TENSOR_PARAM_TRANSPORT,
                                                 .transport = ADAG_TRANSPORT_COMM};

static void make_input(int32_t *x, uint64_t k)
{
    for (unsigned i = 0; i < ELEMS; i++)
        x[i] = (int32_t)(k * 17 + i * 5) - 300;
}

/* Asserts v is the i32 tensor of ELEMS elements that stages[0..n) make of in. */
static void check_value(const adag_value_t *v, const int32_t *in, const int *stages, unsigned n,
                        const char *what, uint64_t exec)
{
    cr_assert_eq(v->kind, ADAG_VALUE_TENSOR, "%s, execution %llu: not a tensor", what,
                 (unsigned long long)exec);
    cr_assert_eq(v->device, ADAG_DEVICE_HOST, "%s, execution %llu: device %d", what,
                 (unsigned long long)exec, v->device);
    cr_assert_eq(v->size, ELEMS * sizeof(int32_t), "%s, execution %llu: %zu bytes", what,
                 (unsigned long long)exec, v->size);
    for (unsigned i = 0; i < ELEMS; i++) {
        int32_t want = in[i], got;
        for (unsigned s = 0; s < n; s++)
            stage_apply(ADAG_DTYPE_I32, stages[s], &want, &want);
        memcpy(&got, (const char *)v->data + 4 * i, 4);
        cr_assert_eq(got, want, "%s, execution %llu, element %u: %d, want %d", what,
                     (unsigned long long)exec, i, got, want);
    }
}

/* The graph: x -> A.apply (emu:0) -> y, declared ADAG_TRANSPORT_COMM,
 * read by B.apply (emu:1), by the driver (y is an output) if `driver`, and
 * by the host actor h.apply if h is not NULL. Outputs: B's result, then y,
 * then h's result. */
static adag_dag_h build(adag_runtime_h rt, adag_actor_h a, adag_actor_h b, int driver,
                        adag_actor_h h, unsigned *nout)
{
    adag_graph_h g;
    adag_node_h x, y, outs[3];
    unsigned n = 0;
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    y = h_bind1(g, a, "apply", x);
    ASSERT_OK(adag_node_tensor(y, &comm_params));
    outs[n++] = h_bind1(g, b, "apply", y);
    if (driver)
        outs[n++] = y;
    if (h)
        outs[n++] = h_bind1(g, h, "apply", y);
    for (unsigned i = 0; i < n; i++)
        if (outs[i] != y)
            ASSERT_OK(adag_node_tensor(outs[i], NULL));
    ASSERT_OK(adag_graph_output(g, outs, n));
    adag_compile_params_t cp = h_compile_params(INFLIGHT, 4096, 0, 0);
    adag_dag_h dag = NULL;
    ASSERT_OK(adag_graph_compile(g, &cp, &dag));
    ASSERT_OK(adag_graph_destroy(g));
    *nout = n;
    return dag;
}

/* EXECS executions, INFLIGHT at a time; every output checked. */
static void run_checked(adag_dag_h dag, unsigned nout, int driver, int host_stage)
{
    static int32_t in[INFLIGHT][ELEMS];
    adag_ref_t refs[INFLIGHT];
    static const int b_path[2] = {1, 2}; /* A, then B */
    static const int y_path[1] = {1};    /* A */
    const int h_path[2] = {1, host_stage};
    for (uint64_t k = 0; k < EXECS + INFLIGHT; k++) {
        if (k >= INFLIGHT) {
            uint64_t j = k - INFLIGHT;
            const int32_t *x = in[j % INFLIGHT];
            adag_value_t out[3];
            unsigned o = 0;
            ASSERT_OK(adag_dag_get(dag, refs[j % INFLIGHT], out, nout, 30000));
            check_value(&out[o++], x, b_path, 2, "B's result (by recv)", j);
            if (driver)
                check_value(&out[o++], x, y_path, 1, "the driver's copy of y", j);
            if (host_stage)
                check_value(&out[o++], x, h_path, 2, "the host actor's result", j);
            ASSERT_OK(adag_dag_release(dag, refs[j % INFLIGHT]));
        }
        if (k < EXECS) {
            make_input(in[k % INFLIGHT], k);
            adag_value_t v = {.data = in[k % INFLIGHT], .size = sizeof(in[0]),
                              .kind = ADAG_VALUE_TENSOR, .dtype = ADAG_DTYPE_I32, .ndim = 1,
                              .shape = {ELEMS}};
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k % INFLIGHT]));
        }
    }
}

/* The driver reads y (a graph output) beside B's recv; twice, the second
 * DAG over the same actors reusing the communicator. */
static void driver_reads(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_gpu_stage(rt, pl, "A", "emu:0", 1, 0);
    adag_actor_h b = h_gpu_stage(rt, pl, "B", "emu:1", 2, 0);
    unsigned nout;
    for (int round = 0; round < 2; round++) {
        adag_dag_h dag = build(rt, a, b, 1, NULL, &nout);
        char *dot = h_dot(dag);
        cr_assert(strstr(dot, "host_comm send/recv emu:0 rank 0 -> emu:1 rank 1"),
                  "the DOT does not show the communicator edge:\n%s", dot);
        free(dot);
        run_checked(dag, nout, 1, 0);
        ASSERT_OK(adag_dag_destroy(dag));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(comm_host_readers, driver_reads, 120)

/* A host actor (no device) reads y beside B's recv; then the host actor
 * and the driver both do. */
static void host_actor_reads(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_gpu_stage(rt, pl, "A", "emu:0", 1, 0);
    adag_actor_h b = h_gpu_stage(rt, pl, "B", "emu:1", 2, 0);
    adag_actor_h h = h_gpu_stage(rt, pl, "H", NULL, 3, 0);
    unsigned nout;
    adag_dag_h dag = build(rt, a, b, 0, h, &nout);
    run_checked(dag, nout, 0, 3);
    ASSERT_OK(adag_dag_destroy(dag));
    dag = build(rt, a, b, 1, h, &nout);
    run_checked(dag, nout, 1, 3);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(comm_host_readers, host_actor_reads, 120)

/* Shapes the communicator cannot serve: ADAG_ERR_INVALID from the
 * compiler, naming the tensor and its endpoints. */
Test(comm_host_readers, refusals_name_the_edge, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "A", "emu:0", 1, 0);
    adag_actor_h b = h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "B", "emu:1", 2, 0);
    adag_graph_h g;
    adag_node_h x, y, z, outs[2];
    adag_dag_h dag = NULL;

    /* the driver reads y on its driver device: it is no rank */
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    y = h_bind1(g, a, "apply", x);
    ASSERT_OK(adag_node_tensor(y, &comm_params));
    z = h_bind1(g, b, "apply", y);
    ASSERT_OK(adag_node_tensor(z, NULL));
    outs[0] = y;
    outs[1] = z;
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_compile_params_t cp = h_compile_params(INFLIGHT, 4096, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
    cp.driver_device = "emu:2";
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("A.apply[0]");
    ASSERT_MSG_HAS("A -> the driver");
    ASSERT_MSG_HAS("ADAG_TRANSPORT_COMM");
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

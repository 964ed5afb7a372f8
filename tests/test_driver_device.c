/*
 * The driver's device (suite "driver_device"): with
 * adag_compile_params_t.driver_device, the graph's tensor inputs and
 * outputs live on that device (here the emulated emu:0). execute copies a
 * host tensor into the device slot (and a tensor on that device, in the
 * DAG's stream order); get returns device views, read after
 * adag_dag_stream_sync, every element checked against the C reference
 * (tests/modules/gpu_stage.h); misuse is refused with a clear message; no
 * device object stays behind.
 */
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_ELEMS 128
#define INFLIGHT 4

/* input -> s1 (emu:0) -> s2 (emu:1) -> (tensor, info) */
static adag_dag_h two_stages(adag_runtime_h rt, adag_actor_h *a, const char *driver_device,
                             adag_placement_t pl)
{
    a[0] = h_gpu_stage(rt, pl, "s1", "emu:0", 1, 200);
    a[1] = h_gpu_stage(rt, pl, "s2", "emu:1", 2, 0);
    adag_compile_params_t cp = h_compile_params(INFLIGHT, N_ELEMS * 8, 0, 0);
    if (driver_device) {
        cp.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
        cp.driver_device = driver_device;
    }
    return h_gpu_chain(rt, a, 2, &cp);
}

static void fill(float *x, uint64_t k)
{
    for (unsigned i = 0; i < N_ELEMS; i++)
        x[i] = (float)((k * 7 + i) % 300) - 150.0f;
}

static adag_value_t tensor(float *x, int32_t device)
{
    adag_value_t v = {.data = x, .size = N_ELEMS * sizeof(float), .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_F32, .ndim = 1, .shape = {N_ELEMS}, .device = device};
    return v;
}

static void check(const float *in, const adag_value_t *out, uint64_t k)
{
    for (unsigned i = 0; i < N_ELEMS; i++) {
        float a = in[i], b;
        stage_apply(ADAG_DTYPE_F32, 1, &a, &b);
        stage_apply(ADAG_DTYPE_F32, 2, &b, &a);
        cr_assert(memcmp(&a, (const char *)out->data + i * sizeof(float), sizeof(a)) == 0,
                  "execution %llu, element %u differs from the C reference",
                  (unsigned long long)k, i);
    }
}

/* 300 pipelined executions; every other input is a tensor on the driver's
 * device (read in the DAG's stream order: its buffer is reused only after
 * a sync), the rest host tensors. */
static void pipeline(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2];
    adag_dag_h dag = two_stages(rt, a, "emu:0", pl);
    char *dot = h_dot(dag);
    cr_assert(strstr(dot, "emu:0"), "the DOT does not show the driver's device:\n%s", dot);
    free(dot);
    void *stream = NULL;
    ASSERT_OK(adag_dag_stream(dag, &stream));
    cr_assert_not_null(stream);
    static float in[INFLIGHT][N_ELEMS];
    adag_ref_t refs[INFLIGHT];
    enum { N = 300 };
    for (uint64_t k = 0; k < N + INFLIGHT; k++) {
        if (k >= INFLIGHT) {
            uint64_t j = k - INFLIGHT;
            adag_value_t out[2];
            ASSERT_OK(adag_dag_get(dag, refs[j % INFLIGHT], out, 2, 20000));
            cr_assert_eq(out[0].kind, ADAG_VALUE_TENSOR);
            cr_assert_eq(out[0].device, ADAG_DEVICE(ADAG_DEV_EMULATED, 0), "output on device %d",
                         out[0].device);
            cr_assert_eq(out[1].device, ADAG_DEVICE_HOST, "bytes stay in host memory");
            ASSERT_OK(adag_dag_stream_sync(dag, 20000));
            check(in[j % INFLIGHT], &out[0], j);
            ASSERT_OK(adag_dag_release(dag, refs[j % INFLIGHT]));
        }
        if (k < N) {
            fill(in[k % INFLIGHT], k);
            adag_value_t v = tensor(in[k % INFLIGHT],
                                    k % 2 ? ADAG_DEVICE(ADAG_DEV_EMULATED, 0) : ADAG_DEVICE_HOST);
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k % INFLIGHT]));
        }
    }
    ASSERT_OK(adag_dag_destroy(dag));
    cr_assert_eq(probe_device_objects(getpid()), 0, "device objects left in the driver");
    for (int s = 0; s < 2; s++)
        ASSERT_OK(adag_actor_destroy(a[s]));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

H_BOTH(driver_device, pipeline, 90)

Test(driver_device, misuse_is_refused, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2], b[2];
    adag_dag_h dag = two_stages(rt, a, "emu:0", ADAG_PLACEMENT_THREAD);
    static float x[N_ELEMS];
    adag_value_t v = tensor(x, ADAG_DEVICE(ADAG_DEV_EMULATED, 1));
    adag_ref_t ref;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "the driver's device emu:0"), "%s", adag_last_error());
    /* a zero-copy commit names where it wrote: another device, or host
     * memory at the device slot, is refused and the ref stays reserved */
    adag_input_view_t view;
    ASSERT_OK(adag_dag_reserve(dag, 0, &view, 1, &ref));
    v = tensor(view.device_data, ADAG_DEVICE(ADAG_DEV_EMULATED, 1));
    ASSERT_ST(adag_dag_commit(dag, ref, &v, 1), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "the driver's device emu:0"), "%s", adag_last_error());
    v = tensor(view.device_data, ADAG_DEVICE_HOST);
    ASSERT_ST(adag_dag_commit(dag, ref, &v, 1), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "is not the view's data"), "%s", adag_last_error());
    ASSERT_OK(adag_dag_cancel(dag, ref));
    ASSERT_OK(adag_dag_destroy(dag));
    for (int s = 0; s < 2; s++)
        ASSERT_OK(adag_actor_destroy(a[s]));

    /* no driver device: device inputs and the stream are refused */
    dag = two_stages(rt, b, NULL, ADAG_PLACEMENT_THREAD);
    v = tensor(x, ADAG_DEVICE(ADAG_DEV_EMULATED, 0));
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "has no driver device"), "%s", adag_last_error());
    void *stream;
    ASSERT_ST(adag_dag_stream(dag, &stream), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_stream_sync(dag, 100), ADAG_ERR_INVALID);
    ASSERT_OK(adag_dag_destroy(dag));

    /* a device that is not here, an empty spec */
    adag_graph_h g;
    adag_node_h in, call, outs[2];
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &in));
    ASSERT_OK(adag_graph_bind(g, b[0], "step", &in, 1, &call));
    ASSERT_OK(adag_node_output(call, 0, &outs[0]));
    ASSERT_OK(adag_node_output(call, 1, &outs[1]));
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_DRIVER_DEVICE,
                                .driver_device = "emu:63"};
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_NOT_FOUND);
    cr_assert(strstr(adag_last_error(), "driver_device"), "%s", adag_last_error());
    cp.driver_device = "";
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "driver_device is set"), "%s", adag_last_error());
    ASSERT_OK(adag_graph_destroy(g));
    for (int s = 0; s < 2; s++)
        ASSERT_OK(adag_actor_destroy(b[s]));
    ASSERT_OK(adag_runtime_destroy(rt));
    cr_assert_eq(probe_device_objects(getpid()), 0, "device objects left in the driver");
}

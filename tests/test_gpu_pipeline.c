/*
 * Device pipelines on the emulated device (suite "gpu_pipeline"):
 * tensors travel driver -> device (async copy in), device -> device (zero
 * copy on one device, a peer copy between two), device -> driver (async
 * copy out), each stage's kernel runs on its actor's compute stream, and
 * every element is checked against the C reference (gpu_stage.h).
 */
#include "common/clock.h"
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const adag_dtype_t every_dtype[] = {
    ADAG_DTYPE_U8,  ADAG_DTYPE_I8,   ADAG_DTYPE_I16, ADAG_DTYPE_I32, ADAG_DTYPE_I64,
    ADAG_DTYPE_F16, ADAG_DTYPE_BF16, ADAG_DTYPE_F32, ADAG_DTYPE_F64, ADAG_DTYPE_BOOL,
};
#define NDTYPES (sizeof(every_dtype) / sizeof(every_dtype[0]))

/* The input of execution k: dtype, a shape of 1..4 dims (one with a 0
 * dim every 97 executions), elements a pattern of k. */
typedef struct {
    adag_dtype_t dtype;
    unsigned ndim;
    int64_t shape[ADAG_MAX_DIMS];
    size_t n, bytes;
    unsigned char data[4096];
} input_t;

static void make_input(input_t *in, uint64_t k)
{
    in->dtype = every_dtype[k % NDTYPES];
    in->ndim = 1 + (unsigned)(k % 4);
    in->n = 1;
    for (unsigned d = 0; d < in->ndim; d++) {
        in->shape[d] = (int64_t)(1 + (k * 7 + d * 3) % 5);
        in->n *= (size_t)in->shape[d];
    }
    if (k % 97 == 13) {
        in->shape[in->ndim - 1] = 0;
        in->n = 0;
    }
    size_t es = adag_dtype_size(in->dtype);
    in->bytes = in->n * es;
    for (size_t i = 0; i < in->bytes; i++)
        in->data[i] = (unsigned char)(k * 13 + i * 7);
    if (in->dtype == ADAG_DTYPE_BOOL)
        for (size_t i = 0; i < in->n; i++)
            in->data[i] &= 1;
    if (in->dtype == ADAG_DTYPE_F32 || in->dtype == ADAG_DTYPE_F64)
        for (size_t i = 0; i < in->n; i++) { /* finite, exact values */
            double v = (double)((k + i) % 1000) - 500.0;
            if (in->dtype == ADAG_DTYPE_F32) {
                float f = (float)v;
                memcpy(in->data + i * 4, &f, 4);
            } else {
                memcpy(in->data + i * 8, &v, 8);
            }
        }
}

static adag_value_t input_value(const input_t *in)
{
    adag_value_t v = {.data = in->data, .size = in->bytes, .kind = ADAG_VALUE_TENSOR,
                      .dtype = in->dtype, .ndim = in->ndim};
    memcpy(v.shape, in->shape, sizeof(v.shape));
    return v;
}

/* Checks the output of `stages` stages applied to in: shape reversed once
 * per stage, every element transformed by each stage in turn. */
static void check_output(const input_t *in, const adag_value_t *out, int first_stage,
                         int stages, uint64_t k)
{
    size_t es = adag_dtype_size(in->dtype);
    cr_assert_eq(out->kind, ADAG_VALUE_TENSOR, "execution %llu", (unsigned long long)k);
    cr_assert_eq(out->device, ADAG_DEVICE_HOST);
    cr_assert_eq(out->dtype, in->dtype, "execution %llu: dtype %d, want %d",
                 (unsigned long long)k, out->dtype, in->dtype);
    cr_assert_eq(out->ndim, in->ndim);
    for (unsigned d = 0; d < in->ndim; d++) {
        unsigned from = stages % 2 ? in->ndim - 1 - d : d;
        cr_assert_eq(out->shape[d], in->shape[from], "execution %llu: dim %u",
                     (unsigned long long)k, d);
    }
    cr_assert_eq(out->size, in->bytes);
    for (size_t i = 0; i < in->n; i++) {
        unsigned char a[8], b[8];
        memcpy(a, in->data + i * es, es);
        for (int s = 0; s < stages; s++) {
            stage_apply(in->dtype, first_stage + s, a, b);
            memcpy(a, b, es);
        }
        cr_assert(memcmp(a, (const char *)out->data + i * es, es) == 0,
                  "execution %llu (%s), element %zu differs from the C reference",
                  (unsigned long long)k, adag_dtype_name(in->dtype), i);
    }
}

/* input -> s1 (emu:0) -> s2 (emu:0, zero copy) -> s3 (emu:1, peer copy)
 * -> s4 (emu:2) -> output; every stage also returns host bytes (info),
 * the last stage's info is an output too. */
static adag_dag_h four_stages(adag_runtime_h rt, adag_placement_t pl, adag_actor_h *a,
                              unsigned inflight, uint64_t trace_spans)
{
    static const char *devs[4] = {"emu:0", "emu:0", "emu:1", "emu:2"};
    /* kernels that take time, so that work the runtime failed to order
     * (a reader before its writer's kernel, a writer over a slot a reader's
     * kernel still reads) shows as wrong elements */
    static const int kernel_us[4] = {100, 300, 0, 100};
    for (int s = 0; s < 4; s++) {
        char name[16];
        snprintf(name, sizeof(name), "s%d", s + 1);
        a[s] = h_gpu_stage(rt, pl, name, devs[s], s + 1, kernel_us[s]);
    }
    adag_compile_params_t cp = h_compile_params(inflight, 4096, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_TRACE;
    cp.trace_spans = trace_spans;
    return h_gpu_chain(rt, a, 4, &cp);
}

static void run_pipeline(adag_placement_t pl, unsigned executions, uint64_t trace_spans)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[4];
    enum { INFLIGHT = 4 };
    adag_dag_h dag = four_stages(rt, pl, a, INFLIGHT, trace_spans);
    char *dot = h_dot(dag);
    cr_assert(strstr(dot, "zero copy") && strstr(dot, "peer copy") && strstr(dot, "copy in") &&
                  strstr(dot, "copy out"),
              "the DOT does not show every device edge:\n%s", dot);
    free(dot);
    static input_t in[INFLIGHT];
    adag_ref_t refs[INFLIGHT];
    for (uint64_t k = 0; k < executions + INFLIGHT; k++) {
        if (k >= INFLIGHT) { /* the oldest in flight: check and release */
            uint64_t j = k - INFLIGHT;
            adag_value_t out[2];
            ASSERT_OK(adag_dag_get(dag, refs[j % INFLIGHT], out, 2, 30000));
            check_output(&in[j % INFLIGHT], &out[0], 1, 4, j);
            const stage_info_t *info = out[1].data;
            cr_assert_eq(out[1].kind, ADAG_VALUE_BYTES);
            cr_assert_eq(out[1].size, sizeof(*info));
            cr_assert_eq(info->ref, refs[j % INFLIGHT]);
            cr_assert_eq(info->elements, in[j % INFLIGHT].n);
            cr_assert_eq(info->device, ADAG_DEVICE(ADAG_DEV_EMULATED, 2), "s4 ran on device 0x%x",
                         (unsigned)info->device);
            ASSERT_OK(adag_dag_release(dag, refs[j % INFLIGHT]));
        }
        if (k < executions) {
            make_input(&in[k % INFLIGHT], k);
            adag_value_t v = input_value(&in[k % INFLIGHT]);
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k % INFLIGHT]));
        }
    }
    /* traced: the device channels' copies are spans inside the waits and
     * publishes of their loops */
    if (trace_spans) {
        h_trace_check(dag, "4 step backend", "ok ");
        /* each channel's writer counted every value (the tensors' device
         * channels, the info bytes' shm or self ones), and none is in use
         * once every ref was released */
        adag_stats_h s;
        ASSERT_OK(adag_dag_stats_take(dag, &s));
        unsigned ndevice = 0;
        for (unsigned i = 0; i < adag_stats_nchannels(s); i++) {
            adag_channel_stats_t c = ADAG_CHANNEL_STATS_INIT;
            ASSERT_OK(adag_stats_channel(s, i, &c));
            ndevice += strcmp(c.kind, "device") == 0;
            cr_assert_eq(c.values, executions, "%s: %llu values", c.name,
                         (unsigned long long)c.values);
            if (strcmp(c.kind, "self") != 0) /* a loop's own values: not counted */
                cr_assert_eq(c.in_use, 0, "%s (%s): %d in use", c.name, c.kind, c.in_use);
        }
        cr_assert_eq(ndevice, 5, "input, s1..s4's tensors: %u device channels", ndevice);
        adag_stats_free(s);
    }
    if (pl == ADAG_PLACEMENT_PROCESS) {
        /* every worker holds its device's objects while the DAG lives, and
         * none once it is destroyed */
        for (int s = 0; s < 4; s++)
            cr_assert_gt(probe_device_objects(adag_actor_pid(a[s])), 0, "s%d holds no device object",
                         s + 1);
        ASSERT_OK(adag_dag_destroy(dag));
        for (int s = 0; s < 4; s++)
            cr_assert_eq(probe_device_objects(adag_actor_pid(a[s])), 0,
                         "s%d still holds device objects after the DAG was destroyed", s + 1);
    } else {
        ASSERT_OK(adag_dag_destroy(dag));
        cr_assert_eq(probe_device_objects(getpid()), 0, "device objects left after destroy");
    }
    for (int s = 0; s < 4; s++)
        ASSERT_OK(adag_actor_destroy(a[s]));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* 10,000 pipelined executions through four process actors on three
 * emulated devices, every dtype, shapes changing each execution. */
Test(gpu_pipeline, four_process_stages_every_dtype, .timeout = 240)
{
    run_pipeline(ADAG_PLACEMENT_PROCESS, 10000, 0);
}

Test(gpu_pipeline, four_thread_stages_every_dtype, .timeout = 120)
{
    run_pipeline(ADAG_PLACEMENT_THREAD, 2000, 0);
}

/* Traced: every stage's spans checked (tests/trace_check.py), the device
 * copies between emulated devices among them. */
Test(gpu_pipeline, traced_thread_stages, .timeout = 120)
{
    run_pipeline(ADAG_PLACEMENT_THREAD, 200, 4096);
}

Test(gpu_pipeline, traced_process_stages, .timeout = 120)
{
    run_pipeline(ADAG_PLACEMENT_PROCESS, 200, 4096);
}

/* driver -> device -> driver, one stage, one return. */
Test(gpu_pipeline, driver_device_driver, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "one", "emu:3", 5, 0);
    adag_graph_h g;
    adag_node_h x, y;
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    ASSERT_OK(adag_graph_bind(g, a, "apply", &x, 1, &y));
    ASSERT_OK(adag_node_tensor(y, NULL));
    ASSERT_OK(adag_graph_output(g, &y, 1));
    adag_dag_h dag = h_compile(g, 2, 4096);
    for (uint64_t k = 0; k < 200; k++) {
        input_t in;
        make_input(&in, k);
        adag_value_t v = input_value(&in), out;
        adag_ref_t ref;
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
        check_output(&in, &out, 5, 1, k);
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* A device actor whose kernels are slow returns from its method at once:
 * the methods of 4 executions in flight all run before the first 150 ms
 * kernel is done (a loop thread that waited for its kernel would run them
 * 150 ms apart), and the kernels still run one after the other on the
 * compute stream (the last result comes >= 600 ms after the first call). */
Test(gpu_pipeline, slow_kernel_does_not_block_the_loop, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "slow", "emu:0", 1, 150000);
    adag_graph_h g;
    adag_node_h x, call, y, info;
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    ASSERT_OK(adag_graph_bind(g, a, "step", &x, 1, &call));
    ASSERT_OK(adag_node_output(call, 0, &y));
    ASSERT_OK(adag_node_output(call, 1, &info));
    ASSERT_OK(adag_node_tensor(y, NULL));
    adag_node_h outs[2] = {y, info};
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_dag_h dag = h_compile(g, 4, 4096);
    input_t in[4];
    adag_ref_t refs[4];
    int64_t t0 = adag__now_ns();
    for (int k = 0; k < 4; k++) {
        make_input(&in[k], (uint64_t)k + 1);
        adag_value_t v = input_value(&in[k]);
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k]));
    }
    int64_t method_ns[4];
    for (int k = 0; k < 4; k++) {
        adag_value_t out[2];
        ASSERT_OK(adag_dag_get(dag, refs[k], out, 2, 10000));
        check_output(&in[k], &out[0], 1, 1, (uint64_t)k + 1);
        method_ns[k] = ((const stage_info_t *)out[1].data)->method_ns;
    }
    double all_ms = (double)(adag__now_ns() - t0) / 1e6;
    double methods_ms = (double)(method_ns[3] - method_ns[0]) / 1e6;
    cr_assert_lt(methods_ms, 150.0,
                 "the 4th method ran %.1f ms after the 1st: the loop waited for a kernel",
                 methods_ms);
    cr_assert_geq(all_ms, 600.0, "4 kernels of 150 ms on one stream took %.1f ms", all_ms);
    for (int k = 0; k < 4; k++)
        ASSERT_OK(adag_dag_release(dag, refs[k]));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/*
 * Device channels under ThreadSanitizer (`make test-tsan`; the harness:
 * tests/stress.h): three thread actors of the gpu_stage class
 * (tests/modules/gpu_stage.c) on the emulated device, emu:0 -> emu:0 (zero
 * copy) -> emu:1 (peer copy), each stage's "kernel" on its compute stream.
 * The slots are plain memory: only the channel's hand-offs order a kernel's
 * reads after its writer's writes and a writer's next writes after them,
 * so a missing edge is a race TSan reports, and a wrong value fails the
 * element check. Run once by value ops on the ring's words (the default)
 * and once by IPC events (ADAG_DEVICE_MEMOPS=0); by value ops once more
 * with the tensors declared f32[ELEMS], so that the stages after the first
 * run ahead of their inputs; and once with those tensors and device graphs
 * (the stages' "apply" is capturable: s1's graph holds its channel's
 * hand-off, its credit wait and value write, replayed shifted).
 */
#include "gpu_stage.h"
#include "stress.h"

#include <adag.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STAGES = 3, ELEMS = 256, EXECS = 600, INFLIGHT = 3 };

static const char *const devices[STAGES] = {"emu:0", "emu:0", "emu:1"};

/* declared f32[ELEMS] (fixed: the stages after the first read ahead of
 * their inputs, dag/exec/loop_ahead.c) or a tensor per execution */
static adag_status_t build(adag_runtime_h rt, adag_actor_h *a, int fixed, int graphs,
                           adag_dag_h *dag)
{
    adag_graph_h g;
    adag_node_h x, y;
    adag_status_t st;
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                               .dtype = ADAG_DTYPE_F32,
                               .ndim = 1,
                               .shape = {ELEMS}};
    const adag_tensor_params_t *decl = fixed ? &tp : NULL;
    if ((st = adag_graph_create(rt, &g)) != ADAG_OK)
        return st;
    if ((st = adag_graph_input(g, 0, &x)) != ADAG_OK || (st = adag_node_tensor(x, decl)) != ADAG_OK)
        goto out;
    for (unsigned s = 0; s < STAGES; s++) {
        if ((st = adag_graph_bind(g, a[s], "apply", &x, 1, &y)) != ADAG_OK ||
            (st = adag_node_tensor(y, decl)) != ADAG_OK)
            goto out;
        x = y;
    }
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_RUN_AHEAD |
                                              ADAG_COMPILE_PARAM_GRAPHS,
                                .max_inflight = INFLIGHT,
                                .run_ahead = fixed && !graphs,
                                .graphs = graphs};
    if ((st = adag_graph_output(g, &y, 1)) == ADAG_OK)
        st = adag_graph_compile(g, &cp, dag);
out:
    adag_graph_destroy(g);
    return st;
}

static int check(const float *in, const adag_value_t *out, uint64_t k)
{
    if (out->size != ELEMS * sizeof(float)) {
        EXPECT(0, "execution %llu: %zu bytes", (unsigned long long)k, out->size);
        return 0;
    }
    for (unsigned i = 0; i < ELEMS; i++) {
        float v = in[i], w;
        for (int s = 1; s <= STAGES; s++) {
            stage_apply(ADAG_DTYPE_F32, s, &v, &w);
            v = w;
        }
        if (memcmp(&v, (const char *)out->data + i * sizeof(float), sizeof(v)) != 0) {
            EXPECT(0, "execution %llu, element %u differs from the C reference",
                   (unsigned long long)k, i);
            return 0;
        }
    }
    return 1;
}

static int pipeline(int fixed, int graphs)
{
    adag_runtime_h rt = NULL;
    adag_actor_h a[STAGES] = {0};
    adag_dag_h dag = NULL;
    static float x[INFLIGHT][ELEMS];
    adag_ref_t refs[INFLIGHT];
    int ok = 0;
    if (adag_runtime_create(NULL, &rt) != ADAG_OK ||
        adag_class_register(rt, &test_gpu_stage_class) != ADAG_OK)
        goto out;
    for (int s = 0; s < STAGES; s++) {
        int init[2] = {s + 1, 0};
        char name[8];
        snprintf(name, sizeof(name), "s%d", s + 1);
        adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME |
                                               ADAG_ACTOR_PARAM_PLACEMENT |
                                               ADAG_ACTOR_PARAM_INIT | ADAG_ACTOR_PARAM_DEVICE,
                                 .class_name = "gpu_stage",
                                 .name = name,
                                 .placement = ADAG_PLACEMENT_THREAD,
                                 .init_data = init,
                                 .init_size = sizeof(init),
                                 .device = devices[s]};
        if (adag_actor_create(rt, &p, &a[s]) != ADAG_OK)
            goto out;
    }
    if (build(rt, a, fixed, graphs, &dag) != ADAG_OK)
        goto out;
    for (uint64_t k = 0; k < EXECS + INFLIGHT; k++) {
        unsigned i = (unsigned)(k % INFLIGHT);
        if (k >= INFLIGHT) {
            adag_value_t out;
            if (adag_dag_get(dag, refs[i], &out, 1, 20000) != ADAG_OK)
                goto out;
            int good = check(x[i], &out, k - INFLIGHT);
            if (adag_dag_release(dag, refs[i]) != ADAG_OK || !good)
                goto out;
        }
        if (k >= EXECS)
            continue;
        for (unsigned e = 0; e < ELEMS; e++)
            x[i][e] = (float)((k * 7 + e) % 1000) - 500.0f;
        int64_t shape[1] = {ELEMS};
        adag_value_t in = adag_value_tensor(x[i], ADAG_DTYPE_F32, 1, shape);
        if (adag_dag_execute(dag, &in, 1, 0, &refs[i]) != ADAG_OK)
            goto out;
    }
    ok = 1;
out:
    if (dag)
        EXPECT(adag_dag_destroy(dag) == ADAG_OK, "destroy: %s", adag_last_error());
    for (int s = 0; s < STAGES; s++)
        if (a[s])
            adag_actor_destroy(a[s]);
    if (rt)
        adag_runtime_destroy(rt);
    return ok;
}

static int by_value_ops(void)
{
    setenv("ADAG_DEVICE_MEMOPS", "1", 1);
    return pipeline(0, 0);
}

static int ahead_by_value_ops(void)
{
    setenv("ADAG_DEVICE_MEMOPS", "1", 1);
    return pipeline(1, 0);
}

static int graphs_by_value_ops(void)
{
    setenv("ADAG_DEVICE_MEMOPS", "1", 1);
    return pipeline(1, 1);
}

static int by_ipc_events(void)
{
    setenv("ADAG_DEVICE_MEMOPS", "0", 1);
    int ok = pipeline(0, 0);
    unsetenv("ADAG_DEVICE_MEMOPS");
    return ok;
}

int main(void)
{
    static const stress_part_t parts[] = {
        {"3 thread stages on emu, by value ops", by_value_ops},
        {"3 thread stages on emu, static tensors read ahead", ahead_by_value_ops},
        {"3 thread stages on emu, by IPC events", by_ipc_events},
        {"3 thread stages on emu, static tensors, device graphs", graphs_by_value_ops},
    };
    return stress_run_parts("stress-device-dag", parts, sizeof(parts) / sizeof(parts[0]));
}

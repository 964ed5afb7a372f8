/*
 * test-cuda-dag: static shapes between device stages (tests/gpu/README.md),
 * so that every stage after the first runs ahead of its inputs
 * (docs/design/devices.md, "Calls enqueued ahead of their inputs"): its
 * kernels are queued behind the wait on its writer's word before the
 * writer's loop published, and follow the writer's kernels on the GPU.
 */
#include "cuda_dag.h"

#include <stdlib.h>
#include <string.h>

enum { ELEMS = 1024, STAGES = 4, INFLIGHT = 4, EXECS = 2000 };

/* f32[ELEMS], a pattern of k. */
static void fixed_input(cdag_input_t *in, uint64_t k)
{
    memset(in, 0, sizeof(*in));
    in->dtype = ADAG_DTYPE_F32;
    in->ndim = 1;
    in->shape[0] = ELEMS;
    in->n = ELEMS;
    in->bytes = ELEMS * sizeof(float);
    for (unsigned i = 0; i < ELEMS; i++) {
        float v = (float)((k * 31 + i) % 2003) - 1000.0f;
        memcpy(in->data + i * sizeof(float), &v, sizeof(v));
    }
}

/* execs executions of dag, INFLIGHT in flight, inputs fixed_input(k);
 * every element of output 0 (of nout) checked against stages 1..STAGES. */
static int run_checked(adag_dag_h dag, unsigned nout, uint64_t execs, const char *what)
{
    int rc = PASS;
    static cdag_input_t in[INFLIGHT];
    adag_ref_t refs[INFLIGHT];
    for (uint64_t k = 0; k < execs + INFLIGHT; k++) {
        unsigned s = (unsigned)(k % INFLIGHT);
        if (k >= INFLIGHT) {
            uint64_t j = k - INFLIGHT;
            adag_value_t out[2];
            CHECK_OK(adag_dag_get(dag, refs[s], out, nout, 30000));
            CHECK(cdag_check(&in[s], &out[0], out[0].data, 1, STAGES, j) == 0,
                  "%s, execution %llu: the output is wrong (above)", what, (unsigned long long)j);
            CHECK_OK(adag_dag_release(dag, refs[s]));
        }
        if (k < execs) {
            fixed_input(&in[s], k);
            adag_value_t v = cdag_input_value(&in[s]);
            CHECK_OK(adag_dag_execute(dag, &v, 1, 0, &refs[s]));
        }
    }
out:
    return rc;
}

/* input -> s1 -> s2 -> s3 -> s4 -> output, every tensor f32[1024]; s1..s3
 * on device 0 (zero copy), s4 on device 1 where there are two (a peer
 * copy), else on device 0; the first stage's kernels spin, so a stage
 * that read its input before its writer's kernels ended would read an
 * older execution's values. 2000 executions, 4 in flight, every element
 * checked. */
int cdag_test_ahead(void)
{
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    static const int spin_us[STAGES] = {200, 0, 50, 0};
    unsigned ndev = 0;
    adag_device_count(cdag_emulated ? "emu" : "cuda", &ndev);
    adag_runtime_h rt = NULL;
    adag_actor_h a[STAGES] = {0};
    adag_dag_h dag = NULL;
    CHECK_OK(cdag_runtime(&rt));
    for (int s = 0; s < STAGES; s++) {
        char name[8];
        snprintf(name, sizeof name, "s%d", s + 1);
        CHECK_OK(cdag_stage(rt, name, cdag_dev(s == STAGES - 1 && ndev > 1 ? 1 : 0), s + 1,
                            spin_us[s], &a[s]));
    }
    cdag_chain_t o = {.max_inflight = INFLIGHT, .fixed = ELEMS, .run_ahead = 1};
    CHECK_OK(cdag_chain(rt, a, STAGES, &o, &dag));
    rc = run_checked(dag, 2, EXECS, "run ahead");
out:
    if (dag)
        adag_dag_destroy(dag);
    for (int s = 0; s < STAGES; s++)
        if (a[s])
            adag_actor_destroy(a[s]);
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* input -> s1 -> s2 -> s3 -> s4 -> output on device 0, f32[1024] tensors,
 * compiled with graphs: each stage's "apply" (kernels only) is captured
 * with its channels' hand-offs (the wait on its writer's word, the wait on
 * its reader's credit, its value write: memory-operation nodes), and each
 * later execution launches the graph shifted to its own number
 * (cuGraphExecBatchMemOpNodeSetParams). 1000 executions, 4 in flight,
 * every element checked; then the same by IPC events (methods only). */
int cdag_test_graphs(void)
{
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    enum { GEXECS = 1000 };
    static const int spin_us[STAGES] = {100, 0, 20, 0};
    for (int memops = 1; memops >= 0 && rc == PASS; memops--) {
        adag_runtime_h rt = NULL;
        adag_actor_h a[STAGES] = {0};
        adag_dag_h dag = NULL;
        setenv("ADAG_DEVICE_MEMOPS", memops ? "1" : "0", 1);
        adag_status_t st = cdag_runtime(&rt);
        unsetenv("ADAG_DEVICE_MEMOPS");
        CHECK_OK(st);
        for (int s = 0; s < STAGES; s++) {
            char name[8];
            snprintf(name, sizeof name, "s%d", s + 1);
            CHECK_OK(cdag_stage(rt, name, cdag_dev(0), s + 1, spin_us[s], &a[s]));
        }
        cdag_chain_t o = {.max_inflight = INFLIGHT, .fixed = ELEMS, .apply = 1, .graphs = 1};
        CHECK_OK(cdag_chain(rt, a, STAGES, &o, &dag));
        rc = run_checked(dag, 1, GEXECS, memops ? "graphs, value ops" : "graphs, IPC events");
    out:
        if (dag)
            adag_dag_destroy(dag);
        for (int s = 0; s < STAGES; s++)
            if (a[s])
                adag_actor_destroy(a[s]);
        if (rt)
            adag_runtime_destroy(rt);
    }
    return rc;
}

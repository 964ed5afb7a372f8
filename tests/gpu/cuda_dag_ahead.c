/*
 * test-cuda-dag: static shapes between device stages (tests/gpu/README.md),
 * so that every stage after the first runs ahead of its inputs
 * (docs/design/devices.md, "Calls enqueued ahead of their inputs"): its
 * kernels are queued behind the wait on its writer's word before the
 * writer's loop published, and follow the writer's kernels on the GPU.
 */
#include "cuda_dag.h"

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
    static cdag_input_t in[INFLIGHT];
    adag_ref_t refs[INFLIGHT];
    CHECK_OK(cdag_runtime(&rt));
    for (int s = 0; s < STAGES; s++) {
        char name[8];
        snprintf(name, sizeof name, "s%d", s + 1);
        CHECK_OK(cdag_stage(rt, name, cdag_dev(s == STAGES - 1 && ndev > 1 ? 1 : 0), s + 1,
                            spin_us[s], &a[s]));
    }
    cdag_chain_t o = {.max_inflight = INFLIGHT, .fixed = ELEMS};
    CHECK_OK(cdag_chain(rt, a, STAGES, &o, &dag));
    for (uint64_t k = 0; k < EXECS + INFLIGHT; k++) {
        unsigned s = (unsigned)(k % INFLIGHT);
        if (k >= INFLIGHT) {
            uint64_t j = k - INFLIGHT;
            adag_value_t out[2];
            CHECK_OK(adag_dag_get(dag, refs[s], out, 2, 30000));
            CHECK(cdag_check(&in[s], &out[0], out[0].data, 1, STAGES, j) == 0,
                  "execution %llu: the output is wrong (above)", (unsigned long long)j);
            CHECK_OK(adag_dag_release(dag, refs[s]));
        }
        if (k < EXECS) {
            fixed_input(&in[s], k);
            adag_value_t v = cdag_input_value(&in[s]);
            CHECK_OK(adag_dag_execute(dag, &v, 1, 0, &refs[s]));
        }
    }
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

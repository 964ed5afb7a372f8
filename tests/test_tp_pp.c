/*
 * Tensor parallelism x pipeline parallelism through the public API (suite
 * "tp_pp"), with the example's shard class ("tp_mlp", examples/modules/
 * tp_mlp.c, loaded from build/examples/libtp_mlp.so: by adag-worker for
 * process actors, by dlopen and adag_class_register here for thread
 * actors) on the emulated devices:
 *
 *   x -> stage 0: shard t.up(x) for each t -> allreduce (SUM)
 *     -> stage 1: shard t.up(member t's sum) -> allreduce -> ... -> outputs
 *
 * Every execution is pipelined (several in flight), and every element of
 * every member's output of the last stage is compared with the C reference
 * of tp_mlp.h computing each whole block (every hidden unit, as one
 * unsharded actor would) in this thread: bit for bit, since the values are
 * integers whose sums of absolute values stay below 2^24 (checked), so f32
 * is exact in every order of summation.
 */
#include "examples/modules/tp_mlp.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TP_MLP_MODULE ADAG_TEST_BUILD_DIR "/examples/libtp_mlp.so"
#define SEED 0x7e57ab1e5eedull
#define B 8
#define D 32
#define H 128
#define POOL 5 /* distinct inputs, prime to the windows in flight */
#define MAX_TP 4
#define MAX_PP 2
#define HOST_DEVICES 4 /* ADAG_EMU_DEVICES' default */

typedef struct {
    unsigned tp, pp;
    adag_placement_t pl;
    int colocate;       /* shard t of every stage on host:t; else a device per actor, in turn */
    int with_whole;     /* also an unsharded tp_mlp actor (shards = 1) per stage, on emu:0 */
    unsigned execs, inflight;
} scenario_t;

/* ---- the reference ---- */

typedef struct {
    float in[POOL][B * D], expect[POOL][B * D];
} reference_t;

/* POOL inputs (integers in -2..2) and their outputs through pp whole
 * blocks; asserts that every sum stays where f32 is exact. */
static void reference_fill(reference_t *r, unsigned pp)
{
    static float w1[MAX_PP][D * H], w2[MAX_PP][H * D];
    float h[H], tmp[B * D], yrow[D];
    double largest = 0;
    for (unsigned s = 0; s < pp; s++)
        tp_mlp_fill_weights(SEED, (int32_t)s, D, 0, H, w1[s], w2[s]);
    for (unsigned k = 0; k < POOL; k++) {
        for (unsigned i = 0; i < B * D; i++)
            r->in[k][i] = (float)((int)(tp_mlp_mix(k * 1000003u + i) % 5) - 2);
        memcpy(tmp, r->in[k], sizeof tmp);
        for (unsigned s = 0; s < pp; s++) {
            tp_mlp_rows(tmp, r->expect[k], B, D, H, w1[s], w2[s], h);
            memcpy(tmp, r->expect[k], sizeof tmp);
        }
    }
    for (unsigned s = 0; s < pp; s++)
        for (unsigned i = 0; i < D * H; i++) {
            w1[s][i] = w1[s][i] < 0 ? -w1[s][i] : w1[s][i];
            w2[s][i] = w2[s][i] < 0 ? -w2[s][i] : w2[s][i];
        }
    for (unsigned k = 0; k < POOL; k++) {
        for (unsigned i = 0; i < B * D; i++)
            tmp[i] = r->in[k][i] < 0 ? -r->in[k][i] : r->in[k][i];
        for (unsigned s = 0; s < pp; s++) {
            double b = tp_mlp_bound(tmp, B, D, H, w1[s], w2[s], h, yrow);
            largest = b > largest ? b : largest;
        }
    }
    unsigned nonzero = 0;
    for (unsigned k = 0; k < POOL; k++)
        for (unsigned i = 0; i < B * D; i++)
            nonzero += r->expect[k][i] != 0.0f;
    /* a comparison that means something: the outputs are not mostly zeros */
    cr_assert(nonzero >= POOL * B * D * 3 / 4, "only %u of %u expected elements are nonzero",
              nonzero, POOL * B * D);
    cr_assert(largest < TP_MLP_EXACT_LIMIT, "a sum of absolute values reaches %.0f: f32 is not "
              "exact there, the comparison would not be bit for bit", largest);
}

/* ---- the graph ---- */

/* The class from the example's module, for thread actors; the module stays
 * loaded until the runtime is gone (*module, dlclose it then). */
static void register_from_module(adag_runtime_h rt, void **module)
{
    *module = dlopen(TP_MLP_MODULE, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(*module, "dlopen %s: %s (make builds it)", TP_MLP_MODULE, dlerror());
    const adag_class_def_t *const *classes = dlsym(*module, "adag_module_classes");
    cr_assert_not_null(classes, "%s has no adag_module_classes", TP_MLP_MODULE);
    cr_assert_not_null(classes[0]);
    cr_assert_str_eq(classes[0]->name, "tp_mlp");
    ASSERT_OK(adag_class_register(rt, classes[0]));
}

static adag_actor_h shard_actor(adag_runtime_h rt, const scenario_t *sc, unsigned s, unsigned t,
                                unsigned shards, const char *device)
{
    tp_mlp_init_t init = {(int32_t)s, (int32_t)t, (int32_t)shards, D, H, 0, SEED};
    char name[32];
    if (shards == 1)
        snprintf(name, sizeof name, "whole%u", s);
    else
        snprintf(name, sizeof name, "s%ut%u", s, t);
    adag_actor_params_t p = {
        .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME | ADAG_ACTOR_PARAM_PLACEMENT |
                      ADAG_ACTOR_PARAM_INIT | ADAG_ACTOR_PARAM_DEVICE,
        .class_name = "tp_mlp", .name = name, .placement = sc->pl, .init_data = &init,
        .init_size = sizeof init, .device = device};
    if (sc->pl == ADAG_PLACEMENT_PROCESS) {
        p.field_mask |= ADAG_ACTOR_PARAM_MODULE;
        p.module_path = TP_MLP_MODULE;
    }
    adag_actor_h a;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    return a;
}

/* outputs: the tp members' results of the last stage, then (with_whole)
 * the unsharded chain's result. */
static adag_dag_h build(adag_runtime_h rt, const scenario_t *sc)
{
    adag_tensor_params_t f32 = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                                .dtype = ADAG_DTYPE_F32, .ndim = 2, .shape = {B, D}};
    adag_graph_h g;
    adag_node_h x, whole, parts[MAX_TP], outs[MAX_TP + 1];
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, &f32));
    whole = x;
    for (unsigned t = 0; t < sc->tp; t++)
        outs[t] = x;
    for (unsigned s = 0; s < sc->pp; s++) {
        for (unsigned t = 0; t < sc->tp; t++) {
            char dev[16];
            snprintf(dev, sizeof dev, "emu:%u", (sc->colocate ? t : s * sc->tp + t) % HOST_DEVICES);
            adag_actor_h a = shard_actor(rt, sc, s, t, sc->tp, dev);
            ASSERT_OK(adag_graph_bind(g, a, "up", &outs[t], 1, &parts[t]));
            ASSERT_OK(adag_node_tensor(parts[t], &f32));
        }
        ASSERT_OK(adag_graph_allreduce(g, parts, sc->tp, ADAG_REDUCE_SUM, outs));
        if (sc->with_whole) {
            adag_actor_h a = shard_actor(rt, sc, s, 0, 1, "emu:0");
            ASSERT_OK(adag_graph_bind(g, a, "up", &whole, 1, &whole));
            ASSERT_OK(adag_node_tensor(whole, &f32));
        }
    }
    outs[sc->tp] = whole;
    ASSERT_OK(adag_graph_output(g, outs, sc->tp + (sc->with_whole ? 1 : 0)));
    adag_compile_params_t cp = h_compile_params(sc->inflight, B * D * sizeof(float), 0, 0);
    adag_dag_h dag = h_compile_with(g, &cp);
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

/* ---- the run ---- */

static void check_output(const adag_value_t *out, const float *want, unsigned exec, unsigned m)
{
    cr_assert_eq(out->kind, ADAG_VALUE_TENSOR, "execution %u, output %u", exec, m);
    cr_assert_eq(out->dtype, ADAG_DTYPE_F32);
    cr_assert_eq(out->device, ADAG_DEVICE_HOST);
    cr_assert_eq(out->ndim, 2);
    cr_assert(out->shape[0] == B && out->shape[1] == D, "execution %u, output %u: [%lld, %lld]",
              exec, m, (long long)out->shape[0], (long long)out->shape[1]);
    cr_assert_eq(out->size, B * D * sizeof(float));
    const float *got = out->data;
    for (unsigned i = 0; i < B * D; i++)
        cr_assert(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                  "execution %u, output %u, element [%u, %u]: %.9g, the reference says %.9g",
                  exec, m, i / D, i % D, (double)got[i], (double)want[i]);
}

static void run_scenario(const scenario_t *sc)
{
    static reference_t ref;
    h_snapshot_t snap;
    void *module = NULL;
    unsigned nout = sc->tp + (sc->with_whole ? 1 : 0);
    adag_ref_t refs[16];
    cr_assert(sc->inflight <= 16 && sc->tp <= MAX_TP && sc->pp <= MAX_PP);
    reference_fill(&ref, sc->pp);
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    if (sc->pl == ADAG_PLACEMENT_THREAD)
        register_from_module(rt, &module);
    adag_dag_h dag = build(rt, sc);

    /* the collectives are in the compiled graph: one per stage, tp members */
    char *dot = h_dot(dag), want[64];
    for (unsigned s = 0; s < sc->pp; s++) {
        snprintf(want, sizeof want, "allreduce#%u sum, member %u of group [", s, sc->tp - 1);
        cr_assert(strstr(dot, want), "the DOT graph lacks \"%s\":\n%s", want, dot);
    }
    free(dot);

    /* pipelined: execution k starts while k - 1 .. k - inflight + 1 run */
    for (unsigned k = 0; k < sc->execs + sc->inflight; k++) {
        if (k >= sc->inflight && k - sc->inflight < sc->execs) {
            unsigned j = k - sc->inflight;
            adag_value_t out[MAX_TP + 1];
            ASSERT_OK(adag_dag_get(dag, refs[j % sc->inflight], out, nout, 30000));
            for (unsigned m = 0; m < nout; m++)
                check_output(&out[m], ref.expect[j % POOL], j, m);
            ASSERT_OK(adag_dag_release(dag, refs[j % sc->inflight]));
        }
        if (k < sc->execs) {
            adag_value_t in = {.data = ref.in[k % POOL], .size = sizeof ref.in[0],
                               .kind = ADAG_VALUE_TENSOR, .dtype = ADAG_DTYPE_F32, .ndim = 2,
                               .shape = {B, D}};
            ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &refs[k % sc->inflight]));
        }
    }
    adag_dag_stats_t stats = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &stats));
    cr_assert_eq(stats.completed, sc->execs);
    cr_assert_eq(stats.failed, 0);
    ASSERT_OK(adag_runtime_destroy(rt));
    if (module)
        dlclose(module);
    h_assert_clean(&snap);
}

/* TP-2 x PP-2, four process actors on emu:0..3: stage 1's shards read
 * stage 0's sums by a peer copy from the device next door. */
Test(tp_pp, tp2_pp2_process, .timeout = 120)
{
    run_scenario(&(scenario_t){.tp = 2, .pp = 2, .pl = ADAG_PLACEMENT_PROCESS, .execs = 600,
                               .inflight = 4});
}

/* The same with thread actors. */
Test(tp_pp, tp2_pp2_thread, .timeout = 120)
{
    run_scenario(&(scenario_t){.tp = 2, .pp = 2, .pl = ADAG_PLACEMENT_THREAD, .execs = 600,
                               .inflight = 4});
}

/* Shard t of both stages on host:t: the sums are handed over in place. */
Test(tp_pp, tp2_pp2_colocated_process, .timeout = 120)
{
    run_scenario(&(scenario_t){.tp = 2, .pp = 2, .pl = ADAG_PLACEMENT_PROCESS, .colocate = 1,
                               .execs = 500, .inflight = 3});
}

Test(tp_pp, tp2_pp2_colocated_thread, .timeout = 120)
{
    run_scenario(&(scenario_t){.tp = 2, .pp = 2, .pl = ADAG_PLACEMENT_THREAD, .colocate = 1,
                               .execs = 500, .inflight = 3});
}

/* TP-4 x PP-1, and beside it one unsharded actor holding the whole block:
 * the four members' sums and its result all equal the reference. */
Test(tp_pp, tp4_pp1_process, .timeout = 120)
{
    run_scenario(&(scenario_t){.tp = 4, .pp = 1, .pl = ADAG_PLACEMENT_PROCESS, .with_whole = 1,
                               .execs = 500, .inflight = 4});
}

Test(tp_pp, tp4_pp1_thread, .timeout = 120)
{
    run_scenario(&(scenario_t){.tp = 4, .pp = 1, .pl = ADAG_PLACEMENT_THREAD, .with_whole = 1,
                               .execs = 500, .inflight = 4});
}

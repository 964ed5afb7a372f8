/*
 * Suite "tensor", continued: what is refused, and that only the execution
 * (or the execute call) concerned fails while the DAG keeps working. Static
 * dtypes and shapes (adag_node_tensor) on method returns and driver inputs,
 * per-execution shapes larger than the slot, malformed tensor inputs, and
 * adag_node_tensor's own checks.
 */
#include "tensor_ref.h"

#include <string.h>

/* input (a tensor_spec_t) -> a.emit -> output, the return declared with p
 * (NULL: no declaration). */
static adag_dag_h emit_dag(adag_runtime_h rt, adag_actor_h a, const adag_tensor_params_t *p,
                           int declare, size_t cap)
{
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h e = h_bind1(g, a, "emit", h_input(g, 0));
    if (declare)
        ASSERT_OK(adag_node_tensor(e, p));
    ASSERT_OK(adag_graph_output(g, &e, 1));
    return h_compile(g, 8, cap);
}

static adag_ref_t emit(adag_dag_h dag, tensor_spec_t spec)
{
    adag_value_t v = {.data = &spec, .size = sizeof(spec)};
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    return ref;
}

/* get of ref: want ADAG_OK (then the output is spec's type) or an error
 * whose message has every needle. */
static void expect(adag_dag_h dag, adag_ref_t ref, tensor_spec_t spec, adag_status_t want,
                   const char *const *needles)
{
    adag_value_t out;
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 20000), want);
    for (; needles && *needles; needles++)
        ASSERT_MSG_HAS(*needles);
    if (want == ADAG_OK && spec.dtype != ADAG_DTYPE_BYTES) {
        cr_assert_eq(out.kind, ADAG_VALUE_TENSOR);
        cr_assert_eq(out.dtype, (adag_dtype_t)spec.dtype);
        cr_assert_eq(out.ndim, spec.ndim);
        for (unsigned d = 0; d < spec.ndim; d++)
            cr_assert_eq(out.shape[d], spec.shape[d]);
        for (size_t i = 0; i < out.size; i++)
            cr_assert_eq(((const unsigned char *)out.data)[i], (unsigned char)(i * 7 + 1));
    }
    ASSERT_OK(adag_dag_release(dag, ref));
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A return declared f32[4,8]: any other type fails that execution with
 * ADAG_ERR_METHOD naming actor.method, the return, both types; also when the
 * method ignores the refusal; executions around it are fine. Then a
 * dtype-only and a shape-only declaration. */
static void static_output(adag_placement_t pl)
{
    adag_runtime_h rt = t_runtime();
    adag_actor_h a = t_actor(rt, pl, "a");
    const int64_t s48[2] = {4, 8}, s84[2] = {8, 4}, s4[1] = {4}, s8[1] = {8};
    adag_tensor_params_t p = t_params(ADAG_DTYPE_F32, 2, s48);
    adag_dag_h dag = emit_dag(rt, a, &p, 1, 0);
    tensor_spec_t specs[7] = {
        t_spec(ADAG_DTYPE_F32, 2, s48), t_spec(ADAG_DTYPE_I32, 2, s48),
        t_spec(ADAG_DTYPE_F32, 2, s84), t_spec(ADAG_DTYPE_F32, 1, s4),
        t_spec(ADAG_DTYPE_BYTES, 1, s8), t_spec(ADAG_DTYPE_I32, 2, s48),
        t_spec(ADAG_DTYPE_F32, 2, s48),
    };
    specs[5].fallback = 1; /* ignores the refusal, writes bytes, returns OK */
    adag_ref_t refs[7];
    for (unsigned k = 0; k < 7; k++) /* all in flight at once */
        refs[k] = emit(dag, specs[k]);
    expect(dag, refs[0], specs[0], ADAG_OK, NULL);
    expect(dag, refs[1], specs[1], ADAG_ERR_METHOD,
           NEEDLES("actor a.emit", "return 0", "declared f32[4,8], given i32[4,8]"));
    expect(dag, refs[2], specs[2], ADAG_ERR_METHOD, NEEDLES("declared f32[4,8], given f32[8,4]"));
    expect(dag, refs[3], specs[3], ADAG_ERR_METHOD, NEEDLES("declared f32[4,8], given f32[4]"));
    expect(dag, refs[4], specs[4], ADAG_ERR_METHOD,
           NEEDLES("adag_call_output", "declared f32[4,8], given bytes"));
    expect(dag, refs[5], specs[5], ADAG_ERR_METHOD, NEEDLES("declared f32[4,8], given i32[4,8]"));
    expect(dag, refs[6], specs[6], ADAG_OK, NULL);
    ASSERT_OK(adag_dag_destroy(dag));

    /* dtype only: any shape of i16 */
    p = t_params(ADAG_DTYPE_I16, -1, NULL);
    dag = emit_dag(rt, a, &p, 1, 0);
    const int64_t s222[3] = {2, 2, 2};
    tensor_spec_t d[4] = {t_spec(ADAG_DTYPE_I16, 1, s4), t_spec(ADAG_DTYPE_I16, 3, s222),
                          t_spec(ADAG_DTYPE_U8, 1, s4), t_spec(ADAG_DTYPE_BYTES, 1, s4)};
    for (unsigned k = 0; k < 4; k++)
        refs[k] = emit(dag, d[k]);
    expect(dag, refs[0], d[0], ADAG_OK, NULL);
    expect(dag, refs[1], d[1], ADAG_OK, NULL);
    expect(dag, refs[2], d[2], ADAG_ERR_METHOD, NEEDLES("declared i16[?], given u8[4]"));
    expect(dag, refs[3], d[3], ADAG_ERR_METHOD, NEEDLES("declared i16[?], given bytes"));
    ASSERT_OK(adag_dag_destroy(dag));

    /* shape only: any dtype of shape [2,3] */
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    p = t_params(ADAG_DTYPE_BYTES, 2, s23);
    dag = emit_dag(rt, a, &p, 1, 0);
    tensor_spec_t h[3] = {t_spec(ADAG_DTYPE_F64, 2, s23), t_spec(ADAG_DTYPE_BOOL, 2, s23),
                          t_spec(ADAG_DTYPE_F64, 2, s32)};
    for (unsigned k = 0; k < 3; k++)
        refs[k] = emit(dag, h[k]);
    expect(dag, refs[0], h[0], ADAG_OK, NULL);
    expect(dag, refs[1], h[1], ADAG_OK, NULL);
    expect(dag, refs[2], h[2], ADAG_ERR_METHOD, NEEDLES("declared ?[2,3], given f64[3,2]"));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(tensor, static_output, 60)

/* A per-execution shape larger than the slot fails that execution with
 * ADAG_ERR_TOO_LARGE (whatever the method then does); the next ones work.
 * A tensor input larger than the slot fails execute. */
static void too_large(adag_placement_t pl)
{
    adag_runtime_h rt = t_runtime();
    adag_actor_h a = t_actor(rt, pl, "a");
    adag_dag_h dag = emit_dag(rt, a, NULL, 0, 1024);
    const int64_t s100[1] = {100}, s200[1] = {200}, huge[2] = {1ll << 40, 1ll << 40},
                  s128[1] = {128}, s129[1] = {129};
    tensor_spec_t specs[6] = {t_spec(ADAG_DTYPE_F64, 1, s100), t_spec(ADAG_DTYPE_F64, 1, s200),
                              t_spec(ADAG_DTYPE_I64, 2, huge), t_spec(ADAG_DTYPE_F64, 1, s200),
                              t_spec(ADAG_DTYPE_F64, 1, s128), t_spec(ADAG_DTYPE_F64, 1, s129)};
    specs[3].fallback = 1;
    adag_ref_t refs[6];
    for (unsigned k = 0; k < 6; k++)
        refs[k] = emit(dag, specs[k]);
    expect(dag, refs[0], specs[0], ADAG_OK, NULL);
    expect(dag, refs[1], specs[1], ADAG_ERR_TOO_LARGE,
           NEEDLES("actor a.emit", "f64[200], 1600 bytes", "capacity of 1024 bytes"));
    expect(dag, refs[2], specs[2], ADAG_ERR_TOO_LARGE, NEEDLES("more bytes than a size_t"));
    expect(dag, refs[3], specs[3], ADAG_ERR_TOO_LARGE, NEEDLES("f64[200]"));
    expect(dag, refs[4], specs[4], ADAG_OK, NULL); /* exactly the capacity */
    expect(dag, refs[5], specs[5], ADAG_ERR_TOO_LARGE, NEEDLES("1032 bytes"));
    ASSERT_OK(adag_dag_destroy(dag));

    adag_actor_h c = h_counter(rt, pl, "c", 0);
    dag = h_compile(h_chain_graph(rt, &c, 1, "echo"), 2, 1024);
    static double big[129];
    adag_value_t v = t_tensor(ADAG_DTYPE_F64, 1, s129, big), out;
    adag_ref_t ref;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_TOO_LARGE);
    ASSERT_MSG_HAS("input 0");
    ASSERT_MSG_HAS("1032 bytes");
    v = t_tensor(ADAG_DTYPE_F64, 1, s128, big);
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    cr_assert_eq(ref, 0, "the refused execute took ref 0");
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 20000));
    cr_assert_eq(out.size, 1024);
    cr_assert_eq(out.kind, ADAG_VALUE_BYTES); /* echo writes bytes */
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(tensor, too_large, 60)

/* input 0 declared i32[2,3] and input 1 declared u8 (any shape): execute
 * refuses other types, naming the input and both types, and publishes
 * nothing; so does a zero-copy commit, which leaves the ref reserved. */
Test(tensor, static_input, .timeout = 30)
{
    adag_runtime_h rt = t_runtime();
    adag_actor_h a = t_actor(rt, ADAG_PLACEMENT_THREAD, "a");
    adag_actor_h b = t_actor(rt, ADAG_PLACEMENT_THREAD, "b");
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in0 = h_input(g, 0), in1 = h_input(g, 1);
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s5[1] = {5};
    adag_tensor_params_t p0 = t_params(ADAG_DTYPE_I32, 2, s23);
    adag_tensor_params_t p1 = t_params(ADAG_DTYPE_U8, -1, NULL);
    ASSERT_OK(adag_node_tensor(in0, &p0));
    ASSERT_OK(adag_node_tensor(in1, &p1));
    adag_node_h outs[2] = {h_bind1(g, a, "interleave", in0), h_bind1(g, b, "interleave", in1)};
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_dag_h dag = h_compile(g, 2, 0);

    int32_t i32[6] = {1, 2, 3, 4, 5, 6};
    float f32[6] = {0};
    uint8_t u8[5] = {1, 2, 3, 4, 5};
    adag_value_t good[2] = {t_tensor(ADAG_DTYPE_I32, 2, s23, i32),
                            t_tensor(ADAG_DTYPE_U8, 1, s5, u8)};
    adag_value_t v[2], out[2];
    adag_ref_t ref;
    struct {
        unsigned field;
        adag_value_t v;
        const char *needle;
    } bad[] = {
        {0, t_tensor(ADAG_DTYPE_F32, 2, s23, f32),
         "input 0 (channel input[0]) is declared i32[2,3], given f32[2,3]"},
        {0, t_tensor(ADAG_DTYPE_I32, 2, s32, i32), "declared i32[2,3], given i32[3,2]"},
        {0, t_tensor(ADAG_DTYPE_I32, 1, s23, i32), "given i32[2]"},
        {0, {.data = i32, .size = sizeof(i32)}, "declared i32[2,3], given bytes"},
        {1, t_tensor(ADAG_DTYPE_I8, 1, s5, u8),
         "input 1 (channel input[1]) is declared u8[?], given i8[5]"},
        {1, {.data = u8, .size = 5}, "declared u8[?], given bytes"},
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(v, good, sizeof(v));
        v[bad[i].field] = bad[i].v;
        ASSERT_ST(adag_dag_execute(dag, v, 2, 0, &ref), ADAG_ERR_INVALID);
        ASSERT_MSG_HAS(bad[i].needle);
    }
    for (unsigned k = 0; k < 3; k++) {
        memcpy(v, good, sizeof(v));
        int64_t sk[1] = {k};
        v[1] = t_tensor(ADAG_DTYPE_U8, k == 2 ? 0 : 1, sk, u8); /* u8[0], u8[1], u8[] */
        ASSERT_OK(adag_dag_execute(dag, v, 2, 0, &ref));
        cr_assert_eq(ref, k, "a refused execute took a ref");
        ASSERT_OK(adag_dag_get(dag, ref, out, 2, 20000));
        cr_assert_eq(out[0].shape[1], 6);
        cr_assert_eq(out[1].dtype, ADAG_DTYPE_U8);
        cr_assert_eq(out[1].size, 2 * t_count(v[1].ndim, v[1].shape));
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    adag_dag_stats_t stats = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &stats));
    cr_assert_eq(stats.executed, 3);

    /* the zero-copy views say what each field declares; a commit is
     * checked like execute, and a refused one leaves the ref reserved */
    adag_input_view_t views[2];
    ASSERT_OK(adag_dag_reserve(dag, 0, views, 2, &ref));
    cr_assert_eq(ref, 3);
    cr_assert_eq(views[0].flags,
                 ADAG_INPUT_TENSOR | ADAG_INPUT_STATIC_DTYPE | ADAG_INPUT_STATIC_SHAPE);
    cr_assert(views[0].dtype == ADAG_DTYPE_I32 && views[0].ndim == 2 &&
                  views[0].shape[0] == 2 && views[0].shape[1] == 3,
              "input 0 declared %s[%u dims]", adag_dtype_name(views[0].dtype), views[0].ndim);
    cr_assert_eq(views[1].flags, ADAG_INPUT_TENSOR | ADAG_INPUT_STATIC_DTYPE);
    cr_assert(views[1].dtype == ADAG_DTYPE_U8 && views[1].ndim == 0, "input 1");
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(v, good, sizeof(v));
        v[bad[i].field] = bad[i].v;
        for (unsigned f = 0; f < 2; f++)
            v[f].data = views[f].data;
        ASSERT_ST(adag_dag_commit(dag, ref, v, 2), ADAG_ERR_INVALID);
        ASSERT_MSG_HAS(bad[i].needle);
    }
    ASSERT_OK(adag_dag_cancel(dag, ref)); /* the newest: its ref is given back */
    memcpy(v, good, sizeof(v));
    ASSERT_OK(adag_dag_execute(dag, v, 2, 0, &ref)); /* nothing was left reserved */
    cr_assert_eq(ref, 3);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* Every malformed tensor input is refused by execute with a message naming
 * the input and what is wrong; nothing is published. */
Test(tensor, bad_inputs_refused, .timeout = 30)
{
    adag_runtime_h rt = t_runtime();
    adag_actor_h a = t_actor(rt, ADAG_PLACEMENT_THREAD, "a");
    adag_dag_h dag = h_compile(h_chain_graph(rt, &a, 1, "interleave"), 2, 0);
    const int64_t s23[2] = {2, 3}, s0[2] = {2, 0};
    int32_t data[6] = {0};
    adag_value_t good = t_tensor(ADAG_DTYPE_I32, 2, s23, data), v, out;
    adag_ref_t ref;
    const struct {
        const char *needle;
        int what;
    } cases[] = {
        {"input 0: a tensor on device emu:0", 0},
        {"input 0: a tensor whose dtype 0 (bytes) is not a tensor dtype", 1},
        {"dtype 11 (?) is not a tensor dtype", 2},
        {"input 0: ndim 9 exceeds ADAG_MAX_DIMS", 3},
        {"input 0: a tensor whose shape[1] is -3", 4},
        {"input 0: size is 20 bytes but a i32[2,3] tensor is 24 bytes", 5},
        {"more bytes than a size_t", 6},
        {"input 0: reserved[2]", 7},
        {"input 0: data is NULL but size is 24", 8},
        {"input 0: unknown value kind 5", 9},
        {"input 0: a tensor on device 0x05000000, which is neither ADAG_DEVICE_HOST nor", 10},
        {"input 0: a tensor on device 0x00000001, which is neither ADAG_DEVICE_HOST nor", 11},
    };
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        v = good;
        switch (cases[i].what) {
        case 0: v.device = ADAG_DEVICE(ADAG_DEV_EMULATED, 0); break;
        case 1: v.dtype = ADAG_DTYPE_BYTES; break;
        case 2: v.dtype = (adag_dtype_t)11; break;
        case 3: v.ndim = 9; break;
        case 4: v.shape[1] = -3; break;
        case 5: v.size = 20; break;
        case 6: v.shape[0] = v.shape[1] = 1ll << 40; break;
        case 7: v.reserved[2] = 1; break;
        case 8: v.data = NULL; break;
        case 9: v.kind = (adag_value_kind_t)5; break;
        case 10: v.device = ADAG_DEVICE(5, 0); break; /* no such kind */
        case 11: v.device = 1; break;                  /* host memory has no index */
        }
        ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
        ASSERT_MSG_HAS(cases[i].needle);
    }
    /* 0 elements need no data */
    v = t_tensor(ADAG_DTYPE_I32, 2, s0, NULL);
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    cr_assert_eq(ref, 0, "a refused input took a ref");
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 20000));
    cr_assert(out.kind == ADAG_VALUE_TENSOR && out.size == 0 && out.ndim == 2 &&
              out.shape[0] == 2 && out.shape[1] == 0);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* adag_node_tensor: which nodes, which params; before compile only; a
 * second call replaces the first. */
Test(tensor, node_tensor_validation, .timeout = 30)
{
    adag_runtime_h rt = t_runtime();
    adag_actor_h a = t_actor(rt, ADAG_PLACEMENT_THREAD, "a");
    adag_actor_h c = h_counter(rt, ADAG_PLACEMENT_THREAD, "c", 0);
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0), split = h_bind1(g, c, "split", in), r1, one;
    ASSERT_OK(adag_node_output(split, 1, &r1));
    adag_node_h x = h_bind1(g, a, "interleave", in);
    ASSERT_OK(adag_node_output(x, 0, &one));
    cr_assert_eq(one, x);

    ASSERT_ST(adag_node_tensor(NULL, NULL), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("node is NULL");
    ASSERT_ST(adag_node_tensor(split, NULL), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("node 1 (c.split) returns 3 values");
    ASSERT_OK(adag_node_tensor(r1, NULL));
    ASSERT_OK(adag_node_tensor(x, NULL));

    const int64_t neg[2] = {3, -1}, huge[2] = {1ll << 40, 1ll << 40}, ok[1] = {2};
    adag_tensor_params_t p = {.field_mask = 1u << 7};
    ASSERT_ST(adag_node_tensor(in, &p), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("unknown field_mask bit 0x80 in adag_tensor_params_t");
    p = t_params(ADAG_DTYPE_F32, -1, NULL);
    p.dtype = ADAG_DTYPE_BYTES;
    ASSERT_ST(adag_node_tensor(in, &p), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("node 0 (input field 0): dtype 0 (bytes) is not a tensor dtype");
    p.dtype = (adag_dtype_t)99;
    ASSERT_ST(adag_node_tensor(x, &p), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("a.interleave): dtype 99");
    p = (adag_tensor_params_t){.field_mask = ADAG_TENSOR_PARAM_SHAPE, .ndim = 9};
    ASSERT_ST(adag_node_tensor(in, &p), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("ndim 9 exceeds ADAG_MAX_DIMS");
    p = t_params(ADAG_DTYPE_BYTES, 2, neg);
    ASSERT_ST(adag_node_tensor(r1, &p), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("return 1 of c.split): shape[1] is -1");
    p = t_params(ADAG_DTYPE_F64, 2, huge);
    ASSERT_ST(adag_node_tensor(in, &p), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("more bytes than a size_t");
    p = (adag_tensor_params_t){.field_mask = ADAG_TENSOR_PARAM_TRANSPORT,
                               .transport = (adag_transport_t)4};
    ASSERT_ST(adag_node_tensor(in, &p), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("transport 4");
    p.transport = ADAG_TRANSPORT_HOST;
    ASSERT_OK(adag_node_tensor(in, &p));

    /* the second declaration replaces the first: i32, then u8[2] */
    p = t_params(ADAG_DTYPE_I32, -1, NULL);
    ASSERT_OK(adag_node_tensor(in, &p));
    p = t_params(ADAG_DTYPE_U8, 1, ok);
    ASSERT_OK(adag_node_tensor(in, &p));
    adag_node_h outs[2] = {x, r1};
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_dag_h dag = h_compile(g, 2, 0);
    ASSERT_ST(adag_node_tensor(in, NULL), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("adag_node_tensor: node 0 (input field 0): the graph was already compiled");

    int32_t i32[2] = {1, 2};
    uint8_t u8[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    adag_value_t v = t_tensor(ADAG_DTYPE_I32, 1, ok, i32), out[2];
    adag_ref_t ref;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("declared u8[2], given i32[2]");
    v = t_tensor(ADAG_DTYPE_U8, 1, ok, u8);
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    /* split reads 8 bytes: u8[2] is 2, so it fails; interleave is fine */
    ASSERT_ST(adag_dag_get(dag, ref, out, 2, 20000), ADAG_ERR_METHOD);
    ASSERT_MSG_HAS("split expects one int64");
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}

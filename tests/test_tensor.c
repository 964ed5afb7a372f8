/*
 * Suite "tensor": host tensors over the shm and self channels. Every dtype
 * through thread and process actors, element by element against the C
 * reference (tests/tensor_ref.c), pipelined, over shapes that change each
 * execution (a scalar, 0 elements, 8 dimensions); tensors next to bytes in
 * one DAG; the metadata get and adag_call_arg return; the DOT of declared
 * tensors; dtype names and sizes. The checks (static declarations, sizes,
 * bad inputs, adag_node_tensor) are in tests/test_tensor_checks.c.
 */
#include "tensor_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned ndim;
    int64_t shape[ADAG_MAX_DIMS];
} t_shape_t;

/* Input shapes, one per execution, in this order (then again). */
static const t_shape_t shapes[] = {
    {1, {5}},
    {2, {2, 3}},
    {0, {0}},                      /* a scalar */
    {2, {3, 0}},                   /* 0 elements */
    {8, {1, 2, 1, 2, 1, 2, 1, 3}}, /* 8 dimensions */
    {1, {0}},                      /* 0 elements, one dimension */
    {3, {4, 1, 3}},
    {8, {2, 1, 1, 1, 1, 1, 2, 1}},
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))
#define CHAIN 3 /* interleaves per execution */

/* The expected output of execution k for dtype dt: the input pattern put
 * through the reference CHAIN times. */
static void *expected(adag_dtype_t dt, unsigned k, unsigned *ndim, int64_t *shape)
{
    const t_shape_t *s = &shapes[k % NSHAPES];
    size_t n = t_count(s->ndim, s->shape) * t_elem(dt);
    char *a = calloc(1, (n << CHAIN) + 1), *b = calloc(1, (n << CHAIN) + 1);
    cr_assert(a && b);
    *ndim = s->ndim;
    memcpy(shape, s->shape, sizeof(s->shape));
    t_fill(dt, t_count(s->ndim, s->shape), k + 1, a);
    for (int i = 0; i < CHAIN; i++) {
        t_interleave(dt, ndim, shape, a, b);
        char *t = a;
        a = b;
        b = t;
    }
    free(b);
    return a;
}

static void check_output(adag_dag_h dag, adag_ref_t ref, adag_dtype_t dt, unsigned k)
{
    unsigned ndim;
    int64_t shape[ADAG_MAX_DIMS];
    void *want = expected(dt, k, &ndim, shape);
    adag_value_t out;
    memset(&out, 0xff, sizeof(out)); /* get must set every field */
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 20000));
    char what[64];
    snprintf(what, sizeof(what), "%s execution %u", adag_dtype_name(dt), k);
    t_assert_tensor(&out, dt, ndim, shape, want, what);
    ASSERT_OK(adag_dag_release(dag, ref));
    free(want);
}

/* input -> a.interleave -> a.interleave (a self channel) -> b.interleave
 * (shm) -> output, for every dtype: two rounds of every shape, four
 * executions in flight. */
static void every_dtype(adag_placement_t pl)
{
    adag_runtime_h rt = t_runtime();
    adag_actor_h a = t_actor(rt, pl, "a"), b = t_actor(rt, pl, "b");
    h_stage_t st[CHAIN] = {{a, "interleave"}, {a, "interleave"}, {b, "interleave"}};
    adag_compile_params_t cp = h_compile_params(4, 64 * 1024, 0, 0);
    adag_graph_h g;
    adag_dag_h dag;
    ASSERT_OK(h_try_chain(rt, st, CHAIN, &cp, &g, &dag, NULL));
    const unsigned rounds = 2 * NSHAPES, depth = 3;
    for (unsigned t = 0; t < T_NDTYPES; t++) {
        adag_dtype_t dt = t_dtypes[t];
        adag_ref_t refs[2 * NSHAPES];
        for (unsigned k = 0; k < rounds; k++) {
            const t_shape_t *s = &shapes[k % NSHAPES];
            size_t n = t_count(s->ndim, s->shape) * t_elem(dt);
            void *in = malloc(n + 1);
            t_fill(dt, t_count(s->ndim, s->shape), k + 1, in);
            adag_value_t v = t_tensor(dt, s->ndim, s->shape, in);
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k]));
            free(in); /* execute copied it */
            if (k >= depth)
                check_output(dag, refs[k - depth], dt, k - depth);
        }
        for (unsigned k = rounds - depth; k < rounds; k++)
            check_output(dag, refs[k], dt, k);
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(tensor, every_dtype, 90)

/* Tensors and bytes in one DAG: a.pair(tensor, bytes) -> (tensor declared
 * i32, bytes), then b.interleave of the tensor and c.add of the bytes; a
 * bytes value given to interleave fails that execution only. */
static void mixed_with_bytes(adag_placement_t pl)
{
    adag_runtime_h rt = t_runtime();
    adag_actor_h a = t_actor(rt, pl, "a"), b = t_actor(rt, pl, "b");
    adag_actor_h c = h_counter(rt, pl, "c", 10);
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in[2] = {h_input(g, 0), h_input(g, 1)}, p, r0, r1;
    p = h_bind(g, a, "pair", in, 2);
    ASSERT_OK(adag_node_output(p, 0, &r0));
    ASSERT_OK(adag_node_output(p, 1, &r1));
    adag_tensor_params_t tp = t_params(ADAG_DTYPE_I32, -1, NULL);
    ASSERT_OK(adag_node_tensor(r0, &tp));
    adag_node_h outs[3] = {h_bind1(g, b, "interleave", r0), h_bind1(g, c, "add", r1), r1};
    ASSERT_OK(adag_graph_output(g, outs, 3));
    adag_dag_h dag = h_compile(g, 4, 4096);

    const int64_t sh[4][2] = {{2, 3}, {1, 1}, {0, 4}, {5, 1}};
    adag_ref_t refs[4];
    int64_t xs[4];
    for (unsigned k = 0; k < 4; k++) {
        int32_t data[16];
        t_fill(ADAG_DTYPE_I32, t_count(2, sh[k]), k, data);
        xs[k] = 100 * (int64_t)k - 7;
        adag_value_t v[2] = {t_tensor(ADAG_DTYPE_I32, 2, sh[k], data), h_i64v(&xs[k])};
        ASSERT_OK(adag_dag_execute(dag, v, 2, 0, &refs[k]));
    }
    for (unsigned k = 0; k < 4; k++) {
        int32_t x[16], y[32], z[64];
        unsigned ndim = 2;
        int64_t shape[2] = {sh[k][0], sh[k][1]};
        t_fill(ADAG_DTYPE_I32, t_count(2, sh[k]), k, x);
        t_interleave(ADAG_DTYPE_I32, &ndim, shape, x, y);
        t_interleave(ADAG_DTYPE_I32, &ndim, shape, y, z);
        adag_value_t out[3];
        ASSERT_OK(adag_dag_get(dag, refs[k], out, 3, 20000));
        t_assert_tensor(&out[0], ADAG_DTYPE_I32, ndim, shape, z, "b.interleave");
        cr_assert_eq(out[1].kind, ADAG_VALUE_BYTES);
        cr_assert_eq(h_val_i64(out[1]), xs[k] + 10);
        cr_assert(out[2].kind == ADAG_VALUE_BYTES && out[2].dtype == ADAG_DTYPE_BYTES &&
                  out[2].ndim == 0 && out[2].device == ADAG_DEVICE_HOST);
        cr_assert_eq(h_val_i64(out[2]), xs[k]);
        ASSERT_OK(adag_dag_release(dag, refs[k]));
    }
    /* bytes where a tensor is expected: the method fails this execution */
    int64_t x = 1;
    adag_value_t v[2] = {h_i64v(&x), h_i64v(&x)}, out[3];
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, v, 2, 0, &ref));
    ASSERT_ST(adag_dag_get(dag, ref, out, 3, 20000), ADAG_ERR_METHOD);
    ASSERT_MSG_HAS("not a host tensor");
    ASSERT_OK(adag_dag_release(dag, ref));
    int32_t one = 5;
    v[0] = t_tensor(ADAG_DTYPE_I32, 0, NULL, &one);
    ASSERT_OK(adag_dag_execute(dag, v, 2, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, out, 3, 20000));
    cr_assert_eq(out[0].ndim, 1);
    cr_assert_eq(out[0].shape[0], 4);
    cr_assert_eq(h_val_i64(out[1]), 11);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(tensor, mixed_with_bytes, 60)

/* adag_call_arg gives a method the whole value: kind, dtype, ndim, shape,
 * device, size (the counter's arg_value returns what it saw). */
static void call_arg_has_metadata(adag_placement_t pl)
{
    adag_runtime_h rt = t_runtime();
    adag_actor_h c = h_counter(rt, pl, "c", 0);
    adag_dag_h dag = h_compile(h_chain_graph(rt, &c, 1, "arg_value"), 2, 0);
    for (unsigned t = 0; t < T_NDTYPES; t++) {
        adag_dtype_t dt = t_dtypes[t];
        const int64_t shape[3] = {2, (int64_t)t + 1, 3};
        unsigned char data[2 * 10 * 3 * 8];
        t_fill(dt, t_count(3, shape), t, data);
        adag_value_t v = t_tensor(dt, 3, shape, data), out, seen;
        adag_ref_t ref;
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 20000));
        cr_assert_eq(out.size, sizeof(seen));
        memcpy(&seen, out.data, sizeof(seen));
        cr_assert_eq(seen.kind, ADAG_VALUE_TENSOR, "%s", adag_dtype_name(dt));
        cr_assert_eq(seen.dtype, dt);
        cr_assert_eq(seen.ndim, 3);
        cr_assert_eq(seen.device, ADAG_DEVICE_HOST);
        cr_assert_eq(seen.size, v.size);
        for (unsigned d = 0; d < ADAG_MAX_DIMS; d++)
            cr_assert_eq(seen.shape[d], d < 3 ? shape[d] : 0, "shape[%u]", d);
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    /* and a bytes value after a tensor is bytes again */
    int64_t x = 3;
    adag_value_t v = h_i64v(&x), out, seen;
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 20000));
    memcpy(&seen, out.data, sizeof(seen));
    cr_assert(seen.kind == ADAG_VALUE_BYTES && seen.dtype == 0 && seen.ndim == 0 &&
              seen.shape[0] == 0 && seen.size == 8);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(tensor, call_arg_has_metadata, 60)

/* A method that writes bytes after a tensor on the same return (and one
 * declared a tensor with per-execution shapes that writes bytes): get
 * says bytes, not the stale tensor type. */
Test(tensor, bytes_after_tensor_is_bytes, .timeout = 30)
{
    adag_runtime_h rt = t_runtime();
    adag_actor_h a = t_actor(rt, ADAG_PLACEMENT_THREAD, "a");
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h e = h_bind1(g, a, "emit", h_input(g, 0));
    ASSERT_OK(adag_node_tensor(e, NULL)); /* per execution: bytes allowed */
    ASSERT_OK(adag_graph_output(g, &e, 1));
    adag_dag_h dag = h_compile(g, 2, 0);
    const int64_t sh[1] = {6};
    tensor_spec_t specs[3] = {t_spec(ADAG_DTYPE_F32, 1, sh), t_spec(ADAG_DTYPE_BYTES, 1, sh),
                              t_spec(ADAG_DTYPE_U8, 1, sh)};
    for (unsigned k = 0; k < 3; k++) {
        adag_value_t v = {.data = &specs[k], .size = sizeof(specs[k])}, out;
        adag_ref_t ref;
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 20000));
        if (specs[k].dtype == ADAG_DTYPE_BYTES) {
            cr_assert(out.kind == ADAG_VALUE_BYTES && out.dtype == 0 && out.ndim == 0 &&
                          out.shape[0] == 0,
                      "execution %u: bytes came back as kind %d dtype %d", k, (int)out.kind,
                      (int)out.dtype);
            cr_assert_eq(out.size, 6);
        } else {
            cr_assert_eq(out.kind, ADAG_VALUE_TENSOR);
            cr_assert_eq(out.dtype, (adag_dtype_t)specs[k].dtype);
            cr_assert_eq(out.size, 6 * t_elem(out.dtype));
        }
        for (size_t i = 0; i < out.size; i++)
            cr_assert_eq(((const unsigned char *)out.data)[i], (unsigned char)(i * 7 + 1));
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* DOT labels the edges of declared tensors with their type. */
Test(tensor, dot_shows_tensor_edges, .timeout = 30)
{
    adag_runtime_h rt = t_runtime();
    adag_actor_h a = t_actor(rt, ADAG_PLACEMENT_THREAD, "a");
    adag_actor_h b = t_actor(rt, ADAG_PLACEMENT_THREAD, "b");
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0);
    const int64_t sh[2] = {4, 8}, sh2[2] = {2, 3};
    adag_tensor_params_t full = t_params(ADAG_DTYPE_F32, 2, sh);
    adag_tensor_params_t dtype_only = t_params(ADAG_DTYPE_F32, -1, NULL);
    adag_tensor_params_t shape_only = t_params(ADAG_DTYPE_BYTES, 2, sh2);
    ASSERT_OK(adag_node_tensor(in, &full));
    adag_node_h x = h_bind1(g, a, "interleave", in);
    ASSERT_OK(adag_node_tensor(x, &dtype_only));
    adag_node_h y = h_bind1(g, b, "interleave", x);
    ASSERT_OK(adag_node_tensor(y, NULL));
    adag_node_h z = h_bind1(g, b, "emit", y); /* b -> b: a self channel */
    adag_node_h w = h_bind1(g, b, "interleave", z);
    ASSERT_OK(adag_node_tensor(z, &shape_only));
    ASSERT_OK(adag_graph_output(g, &w, 1));
    adag_dag_h dag = h_compile(g, 2, 0);
    char *dot = h_dot(dag);
    /* each edge ends with its channel's slots: a static tensor's are its bytes */
    cr_assert(strstr(dot, "input[0]\\nshm\\ntensor f32[4,8]\\n2 slots x 128 B\""), "%s", dot);
    cr_assert(strstr(dot, "a.interleave[0]\\nshm\\ntensor f32[?]\\n2 slots x 1048576 B\""),
              "%s", dot);
    cr_assert(strstr(dot, "b.interleave[0]\\nself\\ntensor\\n1 slot x 1048576 B\""), "%s", dot);
    cr_assert(strstr(dot, "b.emit[0]\\nself\\ntensor ?[2,3]\\n1 slot x 1048576 B\""), "%s",
              dot);
    /* an undeclared value's edge says nothing of tensors */
    cr_assert(strstr(dot, "b.interleave[0]\\nshm\\n2 slots x 1048576 B\"]"), "%s", dot);
    free(dot);
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(tensor, dtype_names_and_sizes, .timeout = 10)
{
    static const struct {
        adag_dtype_t dt;
        const char *name;
        size_t size;
    } want[] = {
        {ADAG_DTYPE_BYTES, "bytes", 1}, {ADAG_DTYPE_U8, "u8", 1},     {ADAG_DTYPE_I8, "i8", 1},
        {ADAG_DTYPE_I16, "i16", 2},     {ADAG_DTYPE_I32, "i32", 4},   {ADAG_DTYPE_I64, "i64", 8},
        {ADAG_DTYPE_F16, "f16", 2},     {ADAG_DTYPE_BF16, "bf16", 2}, {ADAG_DTYPE_F32, "f32", 4},
        {ADAG_DTYPE_F64, "f64", 8},     {ADAG_DTYPE_BOOL, "bool", 1},
    };
    for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        cr_assert_str_eq(adag_dtype_name(want[i].dt), want[i].name);
        cr_assert_eq(adag_dtype_size(want[i].dt), want[i].size, "%s", want[i].name);
    }
    cr_assert_str_eq(adag_dtype_name((adag_dtype_t)11), "?");
    cr_assert_str_eq(adag_dtype_name((adag_dtype_t)-1), "?");
    cr_assert_eq(adag_dtype_size((adag_dtype_t)11), 0);
    cr_assert_eq(adag_dtype_size((adag_dtype_t)-1), 0);
}

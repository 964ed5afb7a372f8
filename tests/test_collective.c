/*
 * Collective nodes through the public API on emulated devices (suite
 * "collective"): each member's tensor is its own stage of the input
 * (gpu_stage "apply": stage_apply(stage_i, x) elementwise), the collective
 * combines them, and every member's output is checked element by element
 * against a C reference that reduces in member order (the host
 * communicator's order: exact for every dtype).
 */
#include "common/clock.h"
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAXM = 4, MAXE = 64 };

static const adag_dtype_t every_dtype[] = {
    ADAG_DTYPE_U8,  ADAG_DTYPE_I8,   ADAG_DTYPE_I16, ADAG_DTYPE_I32, ADAG_DTYPE_I64,
    ADAG_DTYPE_F16, ADAG_DTYPE_BF16, ADAG_DTYPE_F32, ADAG_DTYPE_F64, ADAG_DTYPE_BOOL,
};
#define NDTYPES (sizeof(every_dtype) / sizeof(every_dtype[0]))

/* ---- the reference: f16/bf16 through f32, round to nearest even ---- */

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 0 && m == 0) {
        bits = sign;
    } else if (e == 0) { /* subnormal: normalize */
        e = 1;
        while (!(m & 1024)) {
            m <<= 1;
            e--;
        }
        bits = sign | ((e + 112) << 23) | ((m & 1023) << 13);
    } else if (e == 31) {
        bits = sign | 0x7f800000u | (m << 13);
    } else {
        bits = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Round to nearest, ties to even, by bits. */
static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (exp == 0xff)
        return sign | 0x7c00 | (mant ? 0x200 : 0);
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return sign | 0x7c00;
    if (e <= 0) {
        if (e < -10)
            return sign;
        mant |= 0x800000;
        unsigned shift = (unsigned)(14 - e);
        uint32_t half = 1u << (shift - 1), q = mant >> shift, rem = mant & ((1u << shift) - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        return sign | (uint16_t)q;
    }
    uint32_t q = mant >> 13, rem = mant & 0x1fff;
    uint16_t h = (uint16_t)(sign | (uint16_t)(e << 10) | (uint16_t)q);
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1)))
        h++; /* a carry moves into the exponent, as it should */
    return h;
}

static float bf16_to_f32(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* acc = acc op v for one element of dtype (acc and v point at elements). */
static void ref_combine(adag_dtype_t dt, adag_reduce_op_t op, void *acc, const void *v)
{
#define INT_OP(T)                                                                              \
    {                                                                                          \
        T a, b;                                                                                \
        memcpy(&a, acc, sizeof(T));                                                            \
        memcpy(&b, v, sizeof(T));                                                              \
        T r = op == ADAG_REDUCE_PROD ? (T)(a * b)                                              \
              : op == ADAG_REDUCE_MIN ? (a < b ? a : b)                                       \
              : op == ADAG_REDUCE_MAX ? (a > b ? a : b)                                       \
                                      : (T)(a + b);                                            \
        memcpy(acc, &r, sizeof(T));                                                            \
        return;                                                                                \
    }
    switch (dt) {
    case ADAG_DTYPE_U8: INT_OP(uint8_t)
    case ADAG_DTYPE_I8: INT_OP(int8_t)
    case ADAG_DTYPE_I16: INT_OP(int16_t)
    case ADAG_DTYPE_I32: INT_OP(int32_t)
    case ADAG_DTYPE_I64: INT_OP(int64_t)
    case ADAG_DTYPE_F32: INT_OP(float)
    case ADAG_DTYPE_F64: INT_OP(double)
    case ADAG_DTYPE_BOOL: {
        uint8_t a = *(uint8_t *)acc, b = *(const uint8_t *)v;
        *(uint8_t *)acc = (op == ADAG_REDUCE_PROD || op == ADAG_REDUCE_MIN) ? (a && b) : (a || b);
        return;
    }
    case ADAG_DTYPE_F16:
    case ADAG_DTYPE_BF16: {
        uint16_t a, b;
        memcpy(&a, acc, 2);
        memcpy(&b, v, 2);
        float x = dt == ADAG_DTYPE_F16 ? f16_to_f32(a) : bf16_to_f32(a);
        float y = dt == ADAG_DTYPE_F16 ? f16_to_f32(b) : bf16_to_f32(b);
        float r = op == ADAG_REDUCE_PROD ? x * y
                  : op == ADAG_REDUCE_MIN ? (x < y ? x : y)
                  : op == ADAG_REDUCE_MAX ? (x > y ? x : y)
                                          : x + y;
        uint16_t o = dt == ADAG_DTYPE_F16 ? f32_to_f16(r) : f32_to_bf16(r);
        memcpy(acc, &o, 2);
        return;
    }
    default:
        return;
    }
#undef INT_OP
}

/* AVG: the sum divided by n (integers toward zero; f16/bf16 in f32). */
static void ref_average(adag_dtype_t dt, void *acc, unsigned n)
{
#define DIV(T)                                                                                 \
    {                                                                                          \
        T a;                                                                                   \
        memcpy(&a, acc, sizeof(T));                                                            \
        a = (T)(a / (T)n);                                                                     \
        memcpy(acc, &a, sizeof(T));                                                            \
        return;                                                                                \
    }
    switch (dt) {
    case ADAG_DTYPE_U8: DIV(uint8_t)
    case ADAG_DTYPE_I8: DIV(int8_t)
    case ADAG_DTYPE_I16: DIV(int16_t)
    case ADAG_DTYPE_I32: DIV(int32_t)
    case ADAG_DTYPE_I64: DIV(int64_t)
    case ADAG_DTYPE_F32: DIV(float)
    case ADAG_DTYPE_F64: DIV(double)
    case ADAG_DTYPE_F16:
    case ADAG_DTYPE_BF16: {
        uint16_t a;
        memcpy(&a, acc, 2);
        float x = (dt == ADAG_DTYPE_F16 ? f16_to_f32(a) : bf16_to_f32(a)) / (float)n;
        a = dt == ADAG_DTYPE_F16 ? f32_to_f16(x) : f32_to_bf16(x);
        memcpy(acc, &a, 2);
        return;
    }
    default:
        return;
    }
#undef DIV
}

/* ---- inputs ---- */

typedef struct {
    adag_dtype_t dtype;
    unsigned n; /* elements */
    unsigned char x[MAXE * 8];
} input_t;

/* Small finite values every stage keeps finite (f16/bf16 bit flips stay
 * in the mantissa or a low exponent bit). */
static void make_input(input_t *in, adag_dtype_t dt, unsigned n, uint64_t k)
{
    in->dtype = dt;
    in->n = n;
    size_t es = adag_dtype_size(dt);
    for (unsigned i = 0; i < n; i++) {
        int v = (int)((k * 7 + i * 3) % 19) - 9;
        unsigned char *p = in->x + i * es;
        switch (dt) {
        case ADAG_DTYPE_F16: { uint16_t h = f32_to_f16((float)v * 0.25f); memcpy(p, &h, 2); break; }
        case ADAG_DTYPE_BF16: { uint16_t h = f32_to_bf16((float)v * 0.25f); memcpy(p, &h, 2); break; }
        case ADAG_DTYPE_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
        case ADAG_DTYPE_F64: { double f = (double)v; memcpy(p, &f, 8); break; }
        case ADAG_DTYPE_BOOL: *p = (unsigned char)(v & 1); break;
        default: {
            int64_t w = v;
            memcpy(p, &w, es); /* little-endian: the low bytes */
            break;
        }
        }
    }
}

static adag_actor_h members[MAXM];
static int stages[MAXM] = {1, 2, 3, 4};

/* n members on emu:0..3, or (on_host) host actors: host tensors */
static void make_members_on(adag_runtime_h rt, adag_placement_t pl, unsigned n, int on_host)
{
    for (unsigned m = 0; m < n; m++) {
        char name[16], dev[16];
        snprintf(name, sizeof(name), "tp%u", m);
        snprintf(dev, sizeof(dev), "emu:%u", m % 4);
        members[m] = h_gpu_stage(rt, pl, name, on_host ? NULL : dev, stages[m], 0);
    }
}

static void make_members(adag_runtime_h rt, adag_placement_t pl, unsigned n)
{
    make_members_on(rt, pl, n, 0);
}

typedef enum { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST } kind_t;

/* trace records per loop the DAGs compile_coll makes keep (0: untraced) */
static uint64_t coll_trace_spans;

/* input 0 -> member m: apply (its stage) -> the collective -> every output */
static adag_status_t compile_coll(adag_runtime_h rt, unsigned n, kind_t kind,
                                  adag_reduce_op_t op, unsigned root, adag_dag_h *dag)
{
    adag_graph_h g;
    adag_node_h x, parts[MAXM], outs[MAXM];
    (void)rt;
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    for (unsigned m = 0; m < n; m++) {
        ASSERT_OK(adag_graph_bind(g, members[m], "apply", &x, 1, &parts[m]));
        ASSERT_OK(adag_node_tensor(parts[m], NULL));
    }
    switch (kind) {
    case ALLREDUCE: ASSERT_OK(adag_graph_allreduce(g, parts, n, op, outs)); break;
    case ALLGATHER: ASSERT_OK(adag_graph_allgather(g, parts, n, outs)); break;
    case REDUCESCATTER: ASSERT_OK(adag_graph_reducescatter(g, parts, n, op, outs)); break;
    case BROADCAST: ASSERT_OK(adag_graph_broadcast(g, parts, n, root, outs)); break;
    }
    ASSERT_OK(adag_graph_output(g, outs, n));
    adag_compile_params_t cp = h_compile_params(2, 8192, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_TRACE;
    cp.trace_spans = coll_trace_spans;
    adag_status_t st = adag_graph_compile(g, &cp, dag);
    ASSERT_OK(adag_graph_destroy(g));
    return st;
}

/* What member m holds before the collective: its stage of the input. */
static void part_of(const input_t *in, unsigned m, unsigned char *out)
{
    size_t es = adag_dtype_size(in->dtype);
    for (unsigned i = 0; i < in->n; i++)
        stage_apply(in->dtype, stages[m], in->x + i * es, out + i * es);
}

/* The expected output of member m. */
static size_t expect(kind_t kind, adag_reduce_op_t op, unsigned root, unsigned n, unsigned m,
                     const input_t *in, unsigned char *out)
{
    size_t es = adag_dtype_size(in->dtype), bytes = in->n * es;
    unsigned char parts[MAXM][MAXE * 8];
    for (unsigned r = 0; r < n; r++)
        part_of(in, r, parts[r]);
    switch (kind) {
    case BROADCAST:
        memcpy(out, parts[root], bytes);
        return bytes;
    case ALLGATHER:
        for (unsigned r = 0; r < n; r++)
            memcpy(out + r * bytes, parts[r], bytes);
        return n * bytes;
    case ALLREDUCE:
    case REDUCESCATTER: {
        unsigned char acc[MAXE * 8];
        memcpy(acc, parts[0], bytes);
        for (unsigned r = 1; r < n; r++)
            for (unsigned i = 0; i < in->n; i++)
                ref_combine(in->dtype, op == ADAG_REDUCE_AVG ? ADAG_REDUCE_SUM : op, acc + i * es,
                            parts[r] + i * es);
        if (op == ADAG_REDUCE_AVG)
            for (unsigned i = 0; i < in->n; i++)
                ref_average(in->dtype, acc + i * es, n);
        if (kind == ALLREDUCE) {
            memcpy(out, acc, bytes);
            return bytes;
        }
        memcpy(out, acc + m * (bytes / n), bytes / n);
        return bytes / n;
    }
    }
    return 0;
}

/* Runs execs executions of every dtype through dag and checks each output. */
static void run_checked(adag_dag_h dag, kind_t kind, adag_reduce_op_t op, unsigned root,
                        unsigned n, unsigned execs)
{
    for (unsigned k = 0; k < execs; k++) {
        adag_dtype_t dt = every_dtype[k % NDTYPES];
        input_t in;
        unsigned elems = 4 * (1 + k % 5); /* a multiple of n = 4 and of 2 */
        make_input(&in, dt, elems, k);
        adag_value_t v = {.data = in.x, .size = elems * adag_dtype_size(dt),
                          .kind = ADAG_VALUE_TENSOR, .dtype = dt, .ndim = 1, .shape = {elems}};
        adag_ref_t ref;
        adag_value_t out[MAXM];
        ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
        adag_status_t st = adag_dag_get(dag, ref, out, n, 30000);
        if (dt == ADAG_DTYPE_BOOL && op == ADAG_REDUCE_AVG &&
            (kind == ALLREDUCE || kind == REDUCESCATTER)) {
            cr_assert_neq(st, ADAG_OK, "bool AVG was not refused");
            cr_assert(strstr(adag_last_error(), "bool"), "%s", adag_last_error());
            ASSERT_OK(adag_dag_release(dag, ref));
            continue;
        }
        cr_assert_eq(st, ADAG_OK, "execution %u (%s): %s", k, adag_dtype_name(dt),
                     adag_last_error());
        for (unsigned m = 0; m < n; m++) {
            unsigned char want[MAXM * MAXE * 8];
            size_t bytes = expect(kind, op, root, n, m, &in, want);
            cr_assert_eq(out[m].kind, ADAG_VALUE_TENSOR);
            cr_assert_eq(out[m].dtype, dt);
            cr_assert_eq(out[m].size, bytes, "execution %u, member %u: %zu bytes, want %zu", k,
                         m, out[m].size, bytes);
            cr_assert_eq(out[m].shape[0], (int64_t)(bytes / adag_dtype_size(dt)));
            size_t es = adag_dtype_size(dt);
            for (size_t i = 0; i < bytes / es; i++)
                cr_assert(memcmp((const char *)out[m].data + i * es, want + i * es, es) == 0,
                          "execution %u (%s, op %d), member %u, element %zu differs from the "
                          "C reference", k, adag_dtype_name(dt), (int)op, m, i);
        }
        ASSERT_OK(adag_dag_release(dag, ref));
    }
}

static void every_op_on(kind_t kind, adag_placement_t pl, int on_host)
{
    adag_runtime_h rt = h_runtime();
    make_members_on(rt, pl, 4, on_host);
    int nops = kind == ALLREDUCE || kind == REDUCESCATTER ? 5 : 1;
    for (int op = 0; op < nops; op++) {
        adag_dag_h dag;
        ASSERT_OK(compile_coll(rt, 4, kind, (adag_reduce_op_t)op, 2, &dag));
        if (op == 0) { /* the DOT shows each member's part and its group */
            char *dot = h_dot(dag);
            cr_assert(strstr(dot, "member 2 of group [tp0 tp1 tp2 tp3]"), "%s", dot);
            free(dot);
        }
        run_checked(dag, kind, (adag_reduce_op_t)op, 2, 4, 3 * NDTYPES);
        ASSERT_OK(adag_dag_destroy(dag));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}

static void every_op(kind_t kind, adag_placement_t pl)
{
    every_op_on(kind, pl, 0);
}

Test(collective, allreduce_every_op_and_dtype_process, .timeout = 240)
{
    every_op(ALLREDUCE, ADAG_PLACEMENT_PROCESS);
}

Test(collective, allreduce_every_op_and_dtype_thread, .timeout = 240)
{
    every_op(ALLREDUCE, ADAG_PLACEMENT_THREAD);
}

Test(collective, reducescatter_every_op_and_dtype, .timeout = 240)
{
    every_op(REDUCESCATTER, ADAG_PLACEMENT_PROCESS);
}

Test(collective, allgather_every_dtype, .timeout = 120)
{
    every_op(ALLGATHER, ADAG_PLACEMENT_PROCESS);
}

Test(collective, broadcast_every_dtype, .timeout = 120)
{
    every_op(BROADCAST, ADAG_PLACEMENT_THREAD);
}

/* Host actors (no device): their host tensors go through the host
 * communicator on each one's private emulated device. */
Test(collective, host_actors_allreduce_every_op_and_dtype_process, .timeout = 240)
{
    every_op_on(ALLREDUCE, ADAG_PLACEMENT_PROCESS, 1);
}

Test(collective, host_actors_reducescatter_allgather_broadcast_thread, .timeout = 240)
{
    every_op_on(REDUCESCATTER, ADAG_PLACEMENT_THREAD, 1);
    every_op_on(ALLGATHER, ADAG_PLACEMENT_THREAD, 1);
    every_op_on(BROADCAST, ADAG_PLACEMENT_PROCESS, 1);
}

/* Graphs the collective API refuses, each naming the node. */
Test(collective, invalid_graphs, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    make_members(rt, ADAG_PLACEMENT_THREAD, 2);
    adag_actor_h host = h_counter(rt, ADAG_PLACEMENT_THREAD, "plain", 0);
    adag_graph_h g;
    adag_node_h x, a, b, c, outs[3], two[2];
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    ASSERT_OK(adag_graph_bind(g, members[0], "apply", &x, 1, &a));
    ASSERT_OK(adag_graph_bind(g, members[1], "apply", &x, 1, &b));
    ASSERT_OK(adag_graph_bind(g, host, "add", &x, 1, &c));

    two[0] = a;
    two[1] = a;
    ASSERT_ST(adag_graph_allreduce(g, two, 2, ADAG_REDUCE_SUM, outs), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("are both written by tp0");
    two[1] = x;
    ASSERT_ST(adag_graph_allreduce(g, two, 2, ADAG_REDUCE_SUM, outs), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("input field 0");
    two[1] = c;
    ASSERT_ST(adag_graph_allgather(g, two, 2, outs), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("node 1 (");
    ASSERT_MSG_HAS("is in host memory (a host actor), node 0 in emu: the members of a "
                   "collective are all host actors or all on devices of one backend");
    two[1] = b;
    ASSERT_ST(adag_graph_allreduce(g, two, 1, ADAG_REDUCE_SUM, outs), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("2..64 members, not 1");
    ASSERT_ST(adag_graph_allreduce(g, two, 2, (adag_reduce_op_t)9, outs), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("op 9 is not an adag_reduce_op_t");
    ASSERT_ST(adag_graph_broadcast(g, two, 2, 2, outs), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("root 2 of 2 members");
    /* static dtypes that differ; a static shape reducescatter cannot split */
    adag_tensor_params_t f32 = {.field_mask = ADAG_TENSOR_PARAM_DTYPE, .dtype = ADAG_DTYPE_F32};
    adag_tensor_params_t i32 = {.field_mask = ADAG_TENSOR_PARAM_DTYPE, .dtype = ADAG_DTYPE_I32};
    ASSERT_OK(adag_node_tensor(a, &f32));
    ASSERT_OK(adag_node_tensor(b, &i32));
    ASSERT_ST(adag_graph_allreduce(g, two, 2, ADAG_REDUCE_SUM, outs), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("is declared i32, node 0 f32");
    adag_tensor_params_t s3 = {.field_mask = ADAG_TENSOR_PARAM_SHAPE, .ndim = 1, .shape = {3}};
    ASSERT_OK(adag_node_tensor(a, &s3));
    ASSERT_OK(adag_node_tensor(b, &s3));
    ASSERT_ST(adag_graph_reducescatter(g, two, 2, ADAG_REDUCE_SUM, outs), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("dim 0 is 3, not a multiple of the 2 members");
    /* what passes: the outputs are ordinary nodes with a derived shape */
    ASSERT_OK(adag_graph_allgather(g, two, 2, outs));
    ASSERT_OK(adag_graph_output(g, outs, 2));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* A tensor by communicator and a collective over the same two actors:
 * tp0 sends X to tp1, then joins the allreduce; if tp1 joins the allreduce
 * before it receives X, each waits for the other (one stream, one issue
 * order): refused, naming both. Bound the other way round, it runs. */
static adag_status_t send_then_collective(adag_runtime_h rt, int recv_first, adag_dag_h *dag)
{
    adag_graph_h g;
    adag_node_h x, sx, pa, pb, two[2], o[2], y;
    adag_tensor_params_t comm = {.field_mask = ADAG_TENSOR_PARAM_TRANSPORT,
                                 .transport = ADAG_TRANSPORT_COMM};
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    ASSERT_OK(adag_graph_bind(g, members[0], "apply", &x, 1, &sx));
    ASSERT_OK(adag_node_tensor(sx, &comm));
    ASSERT_OK(adag_graph_bind(g, members[0], "apply", &x, 1, &pa));
    ASSERT_OK(adag_graph_bind(g, members[1], "apply", &x, 1, &pb));
    if (recv_first)
        ASSERT_OK(adag_graph_bind(g, members[1], "apply", &sx, 1, &y));
    two[0] = pa;
    two[1] = pb;
    ASSERT_OK(adag_graph_allreduce(g, two, 2, ADAG_REDUCE_SUM, o));
    if (!recv_first)
        ASSERT_OK(adag_graph_bind(g, members[1], "apply", &sx, 1, &y));
    ASSERT_OK(adag_node_tensor(y, NULL));
    adag_node_h outs[3] = {o[0], o[1], y};
    ASSERT_OK(adag_graph_output(g, outs, 3));
    adag_status_t st = adag_graph_compile(g, NULL, dag);
    ASSERT_OK(adag_graph_destroy(g));
    return st;
}

Test(collective, inconsistent_order_is_rejected, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    make_members(rt, ADAG_PLACEMENT_THREAD, 2);
    adag_dag_h dag = NULL;
    ASSERT_ST(send_then_collective(rt, 0, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("would wait on each other");
    ASSERT_MSG_HAS("tp0.apply[0] (tp0 -> tp1)");
    ASSERT_MSG_HAS("allreduce#0 (2 members)");
    ASSERT_OK(send_then_collective(rt, 1, &dag));
    input_t in;
    make_input(&in, ADAG_DTYPE_I32, 8, 1);
    adag_value_t v = {.data = in.x, .size = 32, .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {8}};
    adag_ref_t ref;
    adag_value_t out[3];
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, out, 3, 30000));
    unsigned char want[MAXM * MAXE * 8];
    expect(ALLREDUCE, ADAG_REDUCE_SUM, 0, 2, 0, &in, want);
    cr_assert(memcmp(out[0].data, want, 32) == 0, "the allreduce differs from the reference");
    for (unsigned i = 0; i < 8; i++) { /* y = stage 2 of stage 1 of x */
        int32_t e, got;
        memcpy(&e, in.x + 4 * i, 4);
        stage_apply(ADAG_DTYPE_I32, stages[0], &e, &e);
        stage_apply(ADAG_DTYPE_I32, stages[1], &e, &e);
        memcpy(&got, (const char *)out[2].data + 4 * i, 4);
        cr_assert_eq(got, e, "element %u of the tensor sent by communicator", i);
    }
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* Traced: each member's allreduce is a "collective" span of its loop and an
 * op of its statistics named "allreduce", counted once per execution. */
Test(collective, traced_allreduce_spans_and_stats, .timeout = 120)
{
    enum { EXECS = 2 * NDTYPES };
    adag_runtime_h rt = h_runtime();
    make_members(rt, ADAG_PLACEMENT_THREAD, 2);
    coll_trace_spans = 4096;
    adag_dag_h dag;
    ASSERT_OK(compile_coll(rt, 2, ALLREDUCE, ADAG_REDUCE_SUM, 0, &dag));
    run_checked(dag, ALLREDUCE, ADAG_REDUCE_SUM, 0, 2, EXECS);
    h_text_t t = {0};
    ASSERT_OK(adag_dag_write_trace(dag, h_text_writer(&t)));
    char *text = t.text;
    unsigned spans = 0;
    for (const char *p = text; (p = strstr(p, "\"name\":\"collective\"")); p++)
        spans++;
    free(text);
    cr_assert_eq(spans, 2 * EXECS, "%u collective spans, want one per member and execution",
                 spans);
    adag_stats_h s;
    ASSERT_OK(adag_dag_stats_take(dag, &s));
    unsigned found = 0;
    for (unsigned i = 0; i < adag_stats_nops(s); i++) {
        adag_op_stats_t o = ADAG_OP_STATS_INIT;
        ASSERT_OK(adag_stats_op(s, i, &o));
        if (strcmp(o.name, "allreduce") != 0)
            continue;
        found++;
        cr_assert(o.count == EXECS && o.compute_ns > 0 && o.compute_p50_ns <= o.compute_max_ns,
                  "%s's allreduce: count %llu, %llu ns", o.actor, (unsigned long long)o.count,
                  (unsigned long long)o.compute_ns);
    }
    cr_assert_eq(found, 2, "an allreduce op per member");
    adag_stats_free(s);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/*
 * test-cuda-dag's collective scenarios (tests/gpu/README.md): the
 * tensor-parallel graphs of tests/test_collective.c and
 * tests/test_collective_faults.c with "cuda_stage" process actors, one per
 * CUDA device, cuda:0..n-1 with n = min(4, devices) (NCCL refuses two ranks
 * on one GPU: fewer than 2 devices skips). Emulated: emu:0..n-1 and the
 * host communicator.
 *
 * Member m's tensor is its stage of the DAG's input (apply: stage_apply of
 * stage m + 1, elementwise, the shape [c, r] reversed to [r, c]); every
 * member's output is checked element by element against a C reference:
 * integers (and every byte allgather and broadcast move) exactly; floats,
 * which NCCL reduces in an order of its own (not member order) and, for
 * AVG, by a premultiplication, within a relative tolerance of the
 * magnitudes involved (float_tolerance below), MIN and MAX exactly.
 */
#include "cuda_dag.h"

#include "gpu_stage.h" /* stage_apply: what each member contributes */

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAXM = 4, MAXE = 32768 };

typedef enum { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST } coll_kind_t;

static const char *const kind_names[] = {"allreduce", "allgather", "reducescatter", "broadcast"};
static const char *const op_names[] = {"SUM", "PROD", "MIN", "MAX", "AVG"};

/* ---- the group ---- */

/* SKIP unless 2 devices ("needs 2 CUDA devices (found 0): <the probe's
 * reason>" where there is none); else PASS and *n = min(4, devices). */
static int tp_size(unsigned *n)
{
    unsigned count = 0;
    if (adag_device_count(cdag_emulated ? "emu" : "cuda", &count) == ADAG_OK && count == 0) {
        snprintf(cdag_skip_reason, sizeof cdag_skip_reason, "needs 2 CUDA devices (found 0): %s",
                 adag_last_error());
        return SKIP;
    }
    int rc = cdag_require(2);
    if (rc != PASS)
        return rc;
    *n = count < MAXM ? count : MAXM;
    return PASS;
}

/* Members m0..m(n-1) on devices 0..n-1, stage m + 1; member 0's kernels
 * spin spin0_us. */
static adag_status_t make_members(adag_runtime_h rt, unsigned n, int spin0_us, adag_actor_h *a)
{
    for (unsigned m = 0; m < n; m++) {
        char name[8];
        snprintf(name, sizeof name, "m%u", m);
        adag_status_t st = cdag_stage(rt, name, cdag_dev(m), (int)m + 1, m == 0 ? spin0_us : 0,
                                      &a[m]);
        if (st != ADAG_OK)
            return st;
    }
    return ADAG_OK;
}

/* input 0 -> member m: method -> the collective -> the outputs: every
 * member's result (only: -1), or member `only`'s. */
static adag_status_t compile_coll(adag_runtime_h rt, const adag_actor_h *a, unsigned n,
                                  const char *method, coll_kind_t kind, adag_reduce_op_t op,
                                  unsigned root, int only, int comm_timeout_ms, adag_dag_h *dag)
{
    adag_graph_h g = NULL;
    adag_node_h x, parts[MAXM], outs[MAXM];
    adag_status_t st = adag_graph_create(rt, &g);
    if (st != ADAG_OK)
        return st;
    if ((st = adag_graph_input(g, 0, &x)) != ADAG_OK || (st = adag_node_tensor(x, NULL)) != ADAG_OK)
        goto out;
    for (unsigned m = 0; m < n; m++)
        if ((st = adag_graph_bind(g, a[m], method, &x, 1, &parts[m])) != ADAG_OK ||
            (st = adag_node_tensor(parts[m], NULL)) != ADAG_OK)
            goto out;
    switch (kind) {
    case ALLREDUCE: st = adag_graph_allreduce(g, parts, n, op, outs); break;
    case ALLGATHER: st = adag_graph_allgather(g, parts, n, outs); break;
    case REDUCESCATTER: st = adag_graph_reducescatter(g, parts, n, op, outs); break;
    case BROADCAST: st = adag_graph_broadcast(g, parts, n, root, outs); break;
    }
    if (st != ADAG_OK)
        goto out;
    if ((st = only < 0 ? adag_graph_output(g, outs, n) : adag_graph_output(g, &outs[only], 1)) !=
        ADAG_OK)
        goto out;
    /* the largest result: the allgather of MAXM large f64 parts */
    adag_compile_params_t cp = {
        .field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT | ADAG_COMPILE_PARAM_SLOT_CAPACITY,
        .max_inflight = 2,
        .slot_capacity = (size_t)MAXM * MAXE * 8,
    };
    if (comm_timeout_ms) {
        cp.field_mask |= ADAG_COMPILE_PARAM_COMM_TIMEOUT;
        cp.comm_timeout_ms = comm_timeout_ms;
    }
    st = adag_graph_compile(g, &cp, dag);
out:
    adag_graph_destroy(g);
    return st;
}

/* ---- inputs ---- */

typedef struct {
    adag_dtype_t dtype;
    int64_t cols, rows; /* the input's shape [cols, rows]; a part's [rows, cols] */
    size_t n;           /* elements */
    unsigned char x[MAXE * 8];
} coll_input_t;

/* An f32 value exactly representable as a normal f16 (the inputs' values). */
static uint16_t f16_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    int e = (int)((b >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(((b >> 16) & 0x8000) | ((uint32_t)e << 10) | ((b & 0x7fffff) >> 13));
}

/* The input of execution k of a dtype: n elements (a multiple of the
 * members, so reducescatter splits it); every third one large. Floats
 * are small nonzero values (f16/bf16 quarters), every stage keeps them
 * finite and normal; integers a byte pattern (wide values, both signs);
 * bools 0/1. */
static void make_input(coll_input_t *in, adag_dtype_t dt, unsigned n, uint64_t k)
{
    in->dtype = dt;
    in->rows = k % 3 == 2 ? (int64_t)n * 256 : (int64_t)n * (int64_t)(1 + k % 3);
    in->cols = k % 3 == 2 ? MAXE / (MAXM * 256) : (int64_t)(1 + k % 4);
    in->n = (size_t)(in->rows * in->cols);
    size_t es = adag_dtype_size(dt);
    for (size_t i = 0; i < in->n; i++) {
        unsigned char *p = in->x + i * es;
        int v = (int)((k * 7 + i * 3) % 19) - 9;
        v = v >= 0 ? v + 1 : v; /* -9..-1, 1..10: never 0 */
        switch (dt) {
        case ADAG_DTYPE_F16: { uint16_t h = f16_of((float)v * 0.25f); memcpy(p, &h, 2); break; }
        case ADAG_DTYPE_BF16: {
            float f = (float)v * 0.25f;
            uint32_t b;
            memcpy(&b, &f, 4);
            uint16_t h = (uint16_t)(b >> 16); /* exact: few mantissa bits */
            memcpy(p, &h, 2);
            break;
        }
        case ADAG_DTYPE_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
        case ADAG_DTYPE_F64: { double d = v; memcpy(p, &d, 8); break; }
        case ADAG_DTYPE_BOOL: *p = (unsigned char)((k + i / 3) & 1); break;
        default:
            for (size_t b = 0; b < es; b++)
                p[b] = (unsigned char)(k * 29 + i * 7 + b * 101);
            break;
        }
    }
}

/* ---- the C reference ---- */

static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h & 0x8000 ? -v : v;
}

static double bf16_value(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static int is_float(adag_dtype_t dt)
{
    return dt == ADAG_DTYPE_F16 || dt == ADAG_DTYPE_BF16 || dt == ADAG_DTYPE_F32 ||
           dt == ADAG_DTYPE_F64;
}

static double float_value(adag_dtype_t dt, const unsigned char *p)
{
    uint16_t h;
    float f;
    double d;
    switch (dt) {
    case ADAG_DTYPE_F16: memcpy(&h, p, 2); return f16_value(h);
    case ADAG_DTYPE_BF16: memcpy(&h, p, 2); return bf16_value(h);
    case ADAG_DTYPE_F32: memcpy(&f, p, 4); return f;
    default: memcpy(&d, p, 8); return d;
    }
}

/* How far a reduced float may be from the exact value, relative to the
 * magnitudes involved (the sum of the members' magnitudes; for PROD the
 * product's): NCCL's order and chunking differ from member order, each
 * step rounding to the dtype (a few ulps of the type, with room). */
static double float_tolerance(adag_dtype_t dt)
{
    switch (dt) {
    case ADAG_DTYPE_F16: return 0x1p-8;  /* 10-bit mantissa */
    case ADAG_DTYPE_BF16: return 0x1p-5; /* 7-bit mantissa */
    case ADAG_DTYPE_F32: return 0x1p-18;
    default: return 0x1p-44;
    }
}

/* An integer element (u8 zero-extended, the others sign-extended) and back
 * (truncated: the wrap at the dtype's width). */
static int64_t int_value(adag_dtype_t dt, const unsigned char *p)
{
    switch (dt) {
    case ADAG_DTYPE_U8: return p[0];
    case ADAG_DTYPE_BOOL: return p[0] != 0;
    case ADAG_DTYPE_I8: return (int8_t)p[0];
    case ADAG_DTYPE_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case ADAG_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
    }
}

static int64_t int_wrap(adag_dtype_t dt, uint64_t v)
{
    unsigned char b[8];
    memcpy(b, &v, 8); /* little-endian: the low bytes first */
    return int_value(dt, b);
}

/* 0 if got is element i of the reduction (op over parts[0..n)[i]); else
 * 1, saying how it differs. */
static int check_reduced(adag_dtype_t dt, adag_reduce_op_t op, unsigned n,
                         unsigned char (*parts)[MAXE * 8], size_t i, const unsigned char *got,
                         char *why, size_t len)
{
    size_t es = adag_dtype_size(dt);
    if (is_float(dt)) {
        double want = float_value(dt, parts[0] + i * es), scale = fabs(want);
        for (unsigned r = 1; r < n; r++) {
            double v = float_value(dt, parts[r] + i * es);
            want = op == ADAG_REDUCE_PROD  ? want * v
                   : op == ADAG_REDUCE_MIN ? fmin(want, v)
                   : op == ADAG_REDUCE_MAX ? fmax(want, v)
                                           : want + v;
            scale = op == ADAG_REDUCE_PROD ? scale * fabs(v) : scale + fabs(v);
        }
        if (op == ADAG_REDUCE_AVG) {
            want /= n;
            scale /= n;
        }
        double g = float_value(dt, got);
        double tol = op == ADAG_REDUCE_MIN || op == ADAG_REDUCE_MAX ? 0 : float_tolerance(dt) * scale;
        if (fabs(g - want) <= tol)
            return 0;
        snprintf(why, len, "%.9g, want %.9g within %.3g", g, want, tol);
        return 1;
    }
    int64_t acc = int_value(dt, parts[0] + i * es);
    for (unsigned r = 1; r < n; r++) {
        int64_t v = int_value(dt, parts[r] + i * es);
        if (dt == ADAG_DTYPE_BOOL) /* SUM and MAX are OR, PROD and MIN AND */
            acc = op == ADAG_REDUCE_PROD || op == ADAG_REDUCE_MIN ? (acc && v) : (acc || v);
        else if (op == ADAG_REDUCE_MIN || op == ADAG_REDUCE_MAX)
            acc = (op == ADAG_REDUCE_MIN) == (v < acc) ? v : acc;
        else /* wraps at the width, whatever the order */
            acc = int_wrap(dt, op == ADAG_REDUCE_PROD ? (uint64_t)acc * (uint64_t)v
                                                      : (uint64_t)acc + (uint64_t)v);
    }
    if (op == ADAG_REDUCE_AVG)
        acc /= (int64_t)n; /* the wrapped sum, truncated toward zero */
    int64_t g = int_value(dt, got);
    if (g == acc)
        return 0;
    snprintf(why, len, "%lld, want %lld", (long long)g, (long long)acc);
    return 1;
}

/* Why member results of dt/op must be refused (the dtype's name), or
 * NULL: bool AVG everywhere; on NCCL, which does not reduce them, every
 * reduction of i16 or bool. */
static const char *refused(coll_kind_t kind, adag_dtype_t dt, adag_reduce_op_t op)
{
    if (kind != ALLREDUCE && kind != REDUCESCATTER)
        return NULL;
    if (dt == ADAG_DTYPE_BOOL && op == ADAG_REDUCE_AVG)
        return "bool";
    if (!cdag_emulated && (dt == ADAG_DTYPE_I16 || dt == ADAG_DTYPE_BOOL))
        return adag_dtype_name(dt);
    return NULL;
}

/* 0 if out (member m's result of execution k) is the reference; else 1,
 * saying what differs and where. */
static int check_output(coll_kind_t kind, adag_reduce_op_t op, unsigned root, unsigned n,
                        unsigned m, const coll_input_t *in, const adag_value_t *out, uint64_t k)
{
    static unsigned char parts[MAXM][MAXE * 8];
    adag_dtype_t dt = in->dtype;
    size_t es = adag_dtype_size(dt), count = in->n; /* a part's elements */
    for (unsigned r = 0; r < n; r++)
        for (size_t i = 0; i < in->n; i++)
            stage_apply(dt, (int)r + 1, in->x + i * es, parts[r] + i * es);
    int64_t d0 = in->rows;
    size_t want_n = count, first = 0;
    if (kind == ALLGATHER) {
        d0 *= n;
        want_n *= n;
    } else if (kind == REDUCESCATTER) {
        d0 /= n;
        want_n /= n;
        first = m * want_n;
    }
    const char *what = kind_names[kind];
    if (out->kind != ADAG_VALUE_TENSOR || out->dtype != dt || out->ndim != 2 ||
        out->shape[0] != d0 || out->shape[1] != in->cols || out->size != want_n * es) {
        fprintf(stderr, "  %s execution %llu, member %u: got kind %d %s [%lld, %lld] (%u dims), "
                        "%zu bytes; want %s [%lld, %lld], %zu bytes\n",
                what, (unsigned long long)k, m, (int)out->kind, adag_dtype_name(out->dtype),
                (long long)out->shape[0], (long long)out->shape[1], out->ndim, out->size,
                adag_dtype_name(dt), (long long)d0, (long long)in->cols, want_n * es);
        return 1;
    }
    const unsigned char *got = out->data;
    for (size_t i = 0; i < want_n; i++) {
        char why[160] = "";
        int bad;
        if (kind == ALLGATHER)
            bad = memcmp(got + i * es, parts[i / count] + (i % count) * es, es) != 0;
        else if (kind == BROADCAST)
            bad = memcmp(got + i * es, parts[root] + i * es, es) != 0;
        else
            bad = check_reduced(dt, op, n, parts, first + i, got + i * es, why, sizeof why);
        if (bad) {
            fprintf(stderr, "  %s %s execution %llu (%s), member %u: element %zu differs from "
                            "the C reference%s%s\n",
                    what, kind == ALLREDUCE || kind == REDUCESCATTER ? op_names[op] : "",
                    (unsigned long long)k, adag_dtype_name(dt), m, i, why[0] ? ": " : "", why);
            return 1;
        }
    }
    return 0;
}

/* ---- the scenarios ---- */

enum { PER_DTYPE = 3 }; /* executions per dtype: two small, one large */

/* Every dtype PER_DTYPE times through dag (2 in flight), every member's
 * output checked, refused dtypes failing their execution by name. */
static int run_checked(adag_dag_h dag, coll_kind_t kind, adag_reduce_op_t op, unsigned root,
                       unsigned n)
{
    static coll_input_t in[2];
    adag_ref_t refs[2];
    const uint64_t execs = CDAG_NDTYPES * PER_DTYPE;
    int rc = PASS;
    for (uint64_t k = 0; k <= execs; k++) {
        if (k >= 1) {
            uint64_t j = k - 1;
            coll_input_t *c = &in[j % 2];
            adag_value_t out[MAXM];
            adag_status_t st = adag_dag_get(dag, refs[j % 2], out, n, 60000);
            const char *no = refused(kind, c->dtype, op);
            if (no) {
                CHECK(st != ADAG_OK, "%s %s of %s (execution %llu) was not refused",
                      kind_names[kind], op_names[op], no, (unsigned long long)j);
                CHECK(strstr(adag_last_error(), no), "the refusal does not name %s: %s", no,
                      adag_last_error());
            } else {
                CHECK(st == ADAG_OK, "%s %s execution %llu (%s): %s: %s", kind_names[kind],
                      op_names[op], (unsigned long long)j, adag_dtype_name(c->dtype),
                      adag_status_str(st), adag_last_error());
                for (unsigned m = 0; m < n; m++)
                    CHECK(check_output(kind, op, root, n, m, c, &out[m], j) == 0,
                          "the output is wrong (above)");
            }
            CHECK_OK(adag_dag_release(dag, refs[j % 2]));
        }
        if (k < execs) {
            coll_input_t *c = &in[k % 2];
            make_input(c, cdag_dtypes[(k / PER_DTYPE) % CDAG_NDTYPES], n, k % PER_DTYPE);
            adag_value_t v = {.data = c->x, .size = c->n * adag_dtype_size(c->dtype),
                              .kind = ADAG_VALUE_TENSOR, .dtype = c->dtype, .ndim = 2,
                              .shape = {c->cols, c->rows}};
            CHECK_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k % 2]));
        }
    }
out:
    return rc;
}

/* A DAG per op (one for the kinds that do not reduce) over one group. */
static int every_op(coll_kind_t kind)
{
    unsigned n = 0;
    int rc = tp_size(&n);
    if (rc != PASS)
        return rc;
    adag_runtime_h rt = NULL;
    adag_actor_h a[MAXM];
    adag_dag_h dag = NULL;
    char *dot = NULL;
    unsigned root = n - 1;
    int nops = kind == ALLREDUCE || kind == REDUCESCATTER ? 5 : 1;
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(make_members(rt, n, 0, a));
    for (int op = 0; op < nops; op++) {
        CHECK_OK(compile_coll(rt, a, n, "apply", kind, (adag_reduce_op_t)op, root, -1, 0, &dag));
        if (op == 0) { /* the DOT shows each member's part of the group */
            char want[64];
            snprintf(want, sizeof want, "member %u of group [m0 m1", n - 1);
            dot = cdag_dot(dag);
            CHECK(dot && strstr(dot, want), "the DOT shows no \"%s\":\n%s", want,
                  dot ? dot : "(none)");
        }
        if ((rc = run_checked(dag, kind, (adag_reduce_op_t)op, root, n)) != PASS)
            goto out;
        CHECK_OK(adag_dag_destroy(dag));
        dag = NULL;
    }
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    free(dot);
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

int cdag_test_coll_allreduce(void)
{
    return every_op(ALLREDUCE);
}

int cdag_test_coll_reducescatter(void)
{
    return every_op(REDUCESCATTER);
}

int cdag_test_coll_allgather(void)
{
    return every_op(ALLGATHER);
}

int cdag_test_coll_broadcast(void)
{
    return every_op(BROADCAST);
}

/* Member 1 (stage 2, apply_flaky) fails executions ref % 4 == 1: the
 * allreduce's output on every member fails with its message (a DAG per
 * member, each with that member's output only, over the one group), and
 * every other execution is right. */
int cdag_test_coll_method_error(void)
{
    unsigned n = 0;
    int rc = tp_size(&n);
    if (rc != PASS)
        return rc;
    adag_runtime_h rt = NULL;
    adag_actor_h a[MAXM];
    adag_dag_h dag = NULL;
    static coll_input_t in;
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(make_members(rt, n, 0, a));
    for (unsigned m = 0; m < n; m++) {
        CHECK_OK(compile_coll(rt, a, n, "apply_flaky", ALLREDUCE, ADAG_REDUCE_SUM, 0, (int)m, 0,
                              &dag));
        for (uint64_t k = 0; k < 8; k++) {
            adag_ref_t ref;
            adag_value_t out;
            make_input(&in, ADAG_DTYPE_I32, n, k);
            adag_value_t v = {.data = in.x, .size = in.n * 4, .kind = ADAG_VALUE_TENSOR,
                              .dtype = ADAG_DTYPE_I32, .ndim = 2, .shape = {in.cols, in.rows}};
            CHECK_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
            adag_status_t st = adag_dag_get(dag, ref, &out, 1, 60000);
            if (ref % 4 == 1) {
                CHECK(st == ADAG_ERR_METHOD, "member %u's output, execution %llu: %s: %s", m,
                      (unsigned long long)ref, adag_status_str(st), adag_last_error());
                CHECK(strstr(adag_last_error(), "stage 2 fails execution"),
                      "member %u's output does not carry the method's error: %s", m,
                      adag_last_error());
            } else {
                CHECK(st == ADAG_OK, "member %u's output, execution %llu: %s: %s", m,
                      (unsigned long long)ref, adag_status_str(st), adag_last_error());
                CHECK(check_output(ALLREDUCE, ADAG_REDUCE_SUM, 0, n, m, &in, &out, ref) == 0,
                      "the output is wrong (above)");
            }
            CHECK_OK(adag_dag_release(dag, ref));
        }
        CHECK_OK(adag_dag_destroy(dag));
        dag = NULL;
    }
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* Member 0's kernel spins 4 s, comm_timeout_ms 300: the other members'
 * allreduce waits on the device for it; the DAG fails with
 * ADAG_ERR_TIMEOUT in < 3.5 s naming the collective and the timeout, and
 * stays failed. */
int cdag_test_coll_stuck(void)
{
    unsigned n = 0;
    int rc = tp_size(&n);
    if (rc != PASS)
        return rc;
    adag_runtime_h rt = NULL;
    adag_actor_h a[MAXM];
    adag_dag_h dag = NULL;
    static coll_input_t in;
    char msg[1024];
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(make_members(rt, n, 4000000, a));
    CHECK_OK(compile_coll(rt, a, n, "apply", ALLREDUCE, ADAG_REDUCE_SUM, 0, -1, 300, &dag));
    make_input(&in, ADAG_DTYPE_F32, n, 0);
    adag_value_t v = {.data = in.x, .size = in.n * 4, .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_F32, .ndim = 2, .shape = {in.cols, in.rows}};
    adag_value_t out[MAXM];
    adag_ref_t ref;
    int64_t t0 = cdag_now_ns();
    CHECK_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    adag_status_t st = adag_dag_get(dag, ref, out, n, 60000);
    double ms = cdag_ms_since(t0);
    snprintf(msg, sizeof msg, "%s", adag_last_error());
    CHECK(st == ADAG_ERR_TIMEOUT, "get: %s: %s", adag_status_str(st), msg);
    CHECK(strstr(msg, "collective allreduce#0") && strstr(msg, "did not complete within 300 ms"),
          "the message names neither the collective nor the timeout: %s", msg);
    CHECK(ms < 3500, "the stuck collective failed after %.0f ms", ms);
    CHECK(adag_dag_execute(dag, &v, 1, 0, &ref) != ADAG_OK, "the failed DAG took an execution");
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

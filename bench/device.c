/*
 * The adag side of the device rows: actors of class "bench_dev"
 * (bench/modules/bench_device.c; processes, or threads for the thread
 * rows of device-hop) bound to devices, tensors declared with
 * adag_node_tensor so they stay in device memory, one execution in flight,
 * every result checked (stamps that change with every execution, at both
 * ends of the tensor, so a stale or half-moved slot fails).
 */
#include "bench.h"
#include "modules/bench_actors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int device_row_available(const char *backend, dev_path_t path, char *why, size_t len)
{
    static const char prefix[] = "adag_device_count: ";
    unsigned n = 0;
    if (adag_device_count(backend, &n) != ADAG_OK || n == 0) {
        const char *msg = adag_last_error()[0] ? adag_last_error() : "no device";
        if (!strncmp(msg, prefix, sizeof prefix - 1))
            msg += sizeof prefix - 1;
        snprintf(why, len, "%s", msg);
        return -1;
    }
    if (path == DEV_PATH_PEER && n < 2) {
        snprintf(why, len, "a peer copy needs 2 %s devices, %u here", backend, n);
        return -1;
    }
    return 0;
}

typedef struct {
    adag_runtime_h rt;
    adag_actor_h a, b;
} dev_fixture_t;

/* The nth actor (0, 1, ...) of a row, on device `index` of backend. */
static int dev_actor_placed(const bench_opts_t *o, adag_runtime_h rt, const char *backend,
                            adag_placement_t pl, unsigned nth, unsigned index, adag_actor_h *out)
{
    char device[32];
    int32_t cuda = !strcmp(backend, "cuda");
    snprintf(device, sizeof device, "%s:%u", backend, index);
    adag_actor_params_t p = {
        .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_PLACEMENT |
                      ADAG_ACTOR_PARAM_MODULE | ADAG_ACTOR_PARAM_INIT | ADAG_ACTOR_PARAM_DEVICE,
        .class_name = "bench_dev", .module_path = o->module,
        .placement = pl, .init_data = &cuda, .init_size = sizeof cuda,
        .device = device};
    return bench_actor_create(o, rt, nth, &p, out);
}

static int dev_actor(const bench_opts_t *o, adag_runtime_h rt, const char *backend,
                     unsigned nth, unsigned index, adag_actor_h *out)
{
    return dev_actor_placed(o, rt, backend, ADAG_PLACEMENT_PROCESS, nth, index, out);
}

/* A on device 0; B (when wanted) on device 0 or, for a peer copy, 1;
 * both placed pl, in a runtime whose ADAG_DEVICE_MEMOPS mech sets. */
static int dev_fixture(dev_fixture_t *f, const bench_opts_t *o, const char *backend,
                       int with_b, dev_path_t path, adag_placement_t pl, dev_mech_t mech)
{
    adag_config_h cfg = NULL;
    adag_runtime_params_t rp = {.field_mask = ADAG_RUNTIME_PARAM_WORKER_PATH,
                                .worker_path = bench_worker_path()};
    memset(f, 0, sizeof(*f));
    if (mech != DEV_MECH_DEFAULT) {
        TRY(adag_config_read(&cfg));
        TRY(adag_config_modify(cfg, "ADAG_DEVICE_MEMOPS", mech == DEV_MECH_MEMOPS ? "1" : "0"));
        rp.field_mask |= ADAG_RUNTIME_PARAM_CONFIG;
        rp.config = cfg;
    }
    TRY(adag_runtime_create(&rp, &f->rt));
    if (cfg)
        adag_config_release(cfg);
    cfg = NULL;
    if (pl == ADAG_PLACEMENT_THREAD) /* linked in, as the module's process actors load it */
        TRY(adag_class_register(f->rt, &bench_device_class));
    if (dev_actor_placed(o, f->rt, backend, pl, 0, 0, &f->a) ||
        (with_b &&
         dev_actor_placed(o, f->rt, backend, pl, 1, path == DEV_PATH_PEER ? 1 : 0, &f->b)))
        goto fail;
    return 0;
fail:
    if (cfg)
        adag_config_release(cfg);
    return -1;
}

static int tensor_node(adag_node_h node, adag_dtype_t dtype, int64_t n)
{
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                               .dtype = dtype, .ndim = 1, .shape = {n}};
    TRY(adag_node_tensor(node, &tp));
    return 0;
fail:
    return -1;
}

static adag_dag_h compile_inflight(adag_graph_h g, size_t cap, unsigned inflight)
{
    adag_dag_h dag = NULL;
    adag_compile_params_t cp = {
        .field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT | ADAG_COMPILE_PARAM_SLOT_CAPACITY,
        .max_inflight = inflight, .slot_capacity = cap};
    TRY(adag_graph_compile(g, &cp, &dag));
    return dag;
fail:
    return NULL;
}

static adag_dag_h compile_one(adag_graph_h g, size_t cap)
{
    return compile_inflight(g, cap, 1);
}

static uint64_t stamp_of(const bench_opts_t *o, long i)
{
    return (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull ^ o->seed;
}

/* The stamp as `times` members summed it in i32 lanes (1: as it is). */
static uint64_t stamp_summed(uint64_t stamp, unsigned times)
{
    uint32_t lo = (uint32_t)stamp * times, hi = (uint32_t)(stamp >> 32) * times;
    return times == 1 ? stamp : (uint64_t)hi << 32 | lo;
}

/* Gets execution i (*got: the time it came back), checks that its one
 * output is a host tensor of out_bytes whose first and last 8 bytes are
 * `want`, and releases it. 0, or -1 (printed). */
static int take_stamped(adag_dag_h dag, adag_ref_t ref, long i, uint64_t want, size_t out_bytes,
                        double *got)
{
    adag_value_t out;
    uint64_t head, tail;
    TRY(adag_dag_get(dag, ref, &out, 1, 60000));
    *got = bench_now_us();
    if (out.kind != ADAG_VALUE_TENSOR || out.device != ADAG_DEVICE_HOST ||
        out.size != out_bytes) {
        fprintf(stderr, "adag-bench: execution %ld: an output of kind %d, %zu bytes on device %d, "
                        "want a host tensor of %zu bytes\n",
                i, out.kind, out.size, out.device, out_bytes);
        adag_dag_release(dag, ref);
        return -1;
    }
    memcpy(&head, out.data, 8);
    memcpy(&tail, (const char *)out.data + out.size - 8, 8);
    TRY(adag_dag_release(dag, ref));
    if (head != want || tail != want) {
        fprintf(stderr, "adag-bench: execution %ld: stamps %llx / %llx back, want %llx\n", i,
                (unsigned long long)head, (unsigned long long)tail, (unsigned long long)want);
        return -1;
    }
    return 0;
fail:
    return -1;
}

/* Executes `warmup + iters` times with input(i) and checks the one output;
 * the input is a u8 tensor of `in_bytes` stamped at both ends, or, when
 * in_bytes is 0, host bytes {stamp, stamp_n} (the size "stamp" makes; with
 * `times` > 1, {stamp, stamp_n, i32}: an i32 tensor that `times` members
 * sum). The output must be a host tensor of out_bytes whose first and last
 * 8 bytes are the stamp (summed `times` times). */
static int drive_stamped_sum(const bench_opts_t *o, adag_dag_h dag, size_t in_bytes,
                             uint64_t stamp_n, size_t out_bytes, unsigned times, long iters,
                             measure_t *m)
{
    long warmup = iters / 10 < 3 ? 3 : iters / 10;
    double *lat = malloc((size_t)iters * sizeof(*lat)), t_start = 0;
    char *buf = malloc(in_bytes < 24 ? 24 : in_bytes);
    int rc = -1;
    if (!lat || !buf)
        goto fail;
    memset(buf, 0x5a, in_bytes < 24 ? 24 : in_bytes);
    for (long i = 0; i < warmup + iters; i++) {
        uint64_t stamp = stamp_of(o, i);
        uint64_t want = stamp_summed(stamp, times);
        adag_value_t in = {.data = buf, .size = times > 1 ? 24 : 16};
        adag_ref_t ref;
        if (in_bytes) {
            int64_t shape[1] = {(int64_t)in_bytes};
            in = adag_value_tensor(buf, ADAG_DTYPE_U8, 1, shape);
            memcpy(buf, &stamp, 8);
            memcpy(buf + in_bytes - 8, &stamp, 8);
        } else {
            uint64_t i32 = ADAG_DTYPE_I32;
            memcpy(buf, &stamp, 8);
            memcpy(buf + 8, &stamp_n, 8);
            memcpy(buf + 16, &i32, 8);
        }
        if (i == warmup)
            t_start = bench_now_us();
        double t0 = bench_now_us();
        TRY(adag_dag_execute(dag, &in, 1, 0, &ref));
        double t1;
        if (take_stamped(dag, ref, i, want, out_bytes, &t1))
            goto fail;
        if (i >= warmup)
            lat[i - warmup] = t1 - t0;
    }
    bench_summarize(lat, iters, (bench_now_us() - t_start) * 1e-6, m);
    rc = 0;
fail:
    free(lat);
    free(buf);
    return rc;
}

static int drive_stamped(const bench_opts_t *o, adag_dag_h dag, size_t in_bytes,
                         uint64_t stamp_n, size_t out_bytes, long iters, measure_t *m)
{
    return drive_stamped_sum(o, dag, in_bytes, stamp_n, out_bytes, 1, iters, m);
}

int run_device_hop(const bench_opts_t *o, const char *backend, dev_path_t path,
                   adag_placement_t pl, dev_mech_t mech, size_t bytes, long iters, measure_t *m)
{
    dev_fixture_t f = {0};
    adag_graph_h g;
    adag_node_h x, y, z;
    int rc = -1;
    if (bytes < 16 || dev_fixture(&f, o, backend, 1, path, pl, mech))
        goto fail;
    TRY(adag_graph_create(f.rt, &g));
    TRY(adag_graph_input(g, 0, &x));
    TRY(adag_graph_bind(g, f.a, "copy", &x, 1, &y));
    TRY(adag_graph_bind(g, f.b, "copy", &y, 1, &z));
    if (tensor_node(x, ADAG_DTYPE_U8, (int64_t)bytes) ||
        tensor_node(y, ADAG_DTYPE_U8, (int64_t)bytes) ||
        tensor_node(z, ADAG_DTYPE_U8, (int64_t)bytes))
        goto fail;
    TRY(adag_graph_output(g, &z, 1));
    adag_dag_h dag = compile_one(g, bytes);
    if (dag)
        rc = drive_stamped(o, dag, bytes, 0, bytes, iters, m);
fail:
    if (f.rt)
        adag_runtime_destroy(f.rt);
    return rc;
}

#define DEV_HOP_ROUNDS 3

/* The raw hop of one mechanism, the better of the two wait policies: 0,
 * 1 (why: the backend cannot), -1. */
static int raw_hop_best(const char *backend, dev_path_t path, size_t bytes, int threads,
                        dev_mech_t mech, long rounds, measure_t *m, char *why, size_t len)
{
    measure_t a, b;
    int rc = baseline_device_hop(backend, path, threads, mech, bytes, WAIT_SPIN, rounds, &a, why,
                                 len);
    if (rc == 0)
        rc = baseline_device_hop(backend, path, threads, mech, bytes, WAIT_FUTEX, rounds, &b,
                                 why, len);
    if (rc == 0)
        *m = a.median_us <= b.median_us ? a : b;
    return rc;
}

int run_device_hop_rounds(const bench_opts_t *o, const char *backend, dev_path_t path,
                          size_t bytes, adag_placement_t pl, measure_t adag[2], measure_t raw[2],
                          char why[2][160])
{
    int threads = pl == ADAG_PLACEMENT_THREAD, rounds = o->quick ? 1 : DEV_HOP_ROUNDS;
    long iters = o->quick ? 500 : 5000;
    measure_t am[2][DEV_HOP_ROUNDS], bm[2][DEV_HOP_ROUNDS];
    for (int k = 0; k < rounds; k++)
        for (int i = 0; i < 2; i++) {
            dev_mech_t mech = i ? DEV_MECH_MEMOPS : DEV_MECH_IPC_EVENT;
            if (why[i][0])
                continue;
            int rc = raw_hop_best(backend, path, bytes, threads, mech, iters, &bm[i][k], why[i],
                                  sizeof why[i]);
            if (rc == 0 && run_device_hop(o, backend, path, pl, mech, bytes, iters, &am[i][k]))
                rc = -1;
            if (rc < 0) {
                fprintf(stderr, "adag-bench: device-hop %s %s (%s, %s) failed\n", backend,
                        bench_path_name(path), threads ? "thread" : "process",
                        bench_mech_name(mech));
                return -1;
            }
            if (rc > 0)
                fprintf(stderr, "adag-bench: device-hop %s %s (%s, %s): skipped: %s\n", backend,
                        bench_path_name(path), threads ? "thread" : "process",
                        bench_mech_name(mech), why[i]);
        }
    for (int i = 0; i < 2; i++)
        if (!why[i][0]) {
            adag[i] = bench_median_round(METRIC_LATENCY, am[i], rounds);
            raw[i] = bench_median_round(METRIC_LATENCY, bm[i], rounds);
        }
    return 0;
}

/* Submits execution i of a bandwidth row: h2d, a u8 tensor of `bytes`
 * stamped at both ends, by execute (copied from buf) or, zero copy, written
 * in the reserved view (only the stamps: the tensor is produced in place);
 * d2h and peer, host bytes {stamp, bytes}. */
static int submit_stamped(adag_dag_h dag, dev_path_t path, char *buf, size_t bytes,
                          uint64_t stamp, adag_ref_t *ref)
{
    int64_t shape[1] = {(int64_t)bytes};
    if (path == DEV_PATH_H2D_ZC) {
        adag_input_view_t view;
        TRY(adag_dag_reserve(dag, 0, &view, 1, ref));
        memcpy(view.data, &stamp, 8);
        memcpy((char *)view.data + bytes - 8, &stamp, 8);
        adag_value_t written = adag_value_tensor(view.data, ADAG_DTYPE_U8, 1, shape);
        TRY(adag_dag_commit(dag, *ref, &written, 1));
        return 0;
    }
    adag_value_t in = {.data = buf, .size = 16};
    if (path == DEV_PATH_H2D) {
        in = adag_value_tensor(buf, ADAG_DTYPE_U8, 1, shape);
        memcpy(buf, &stamp, 8);
        memcpy(buf + bytes - 8, &stamp, 8);
    } else {
        uint64_t n = bytes;
        memcpy(buf, &stamp, 8);
        memcpy(buf + 8, &n, 8);
    }
    TRY(adag_dag_execute(dag, &in, 1, 0, ref));
    return 0;
fail:
    return -1;
}

/* A bandwidth row pipelined: execution i + inflight is submitted before
 * execution i is taken, so the driver's part of one (execute's copy, or
 * the zero-copy stamps) overlaps the device's copy of the one before. The
 * figure per execution is the time between two executions coming back
 * (its median: the steady state); warmup executions first. */
static int drive_pipelined(const bench_opts_t *o, adag_dag_h dag, dev_path_t path, size_t bytes,
                           unsigned inflight, long iters, measure_t *m)
{
    long warmup = iters / 10 < 3 ? 3 : iters / 10, total = warmup + iters;
    double *lat = malloc((size_t)iters * sizeof(*lat)), t_start = 0, t_prev = 0;
    char *buf = path == DEV_PATH_H2D ? malloc(bytes) : malloc(16);
    adag_ref_t refs[BENCH_DEV_INFLIGHT_MAX];
    int rc = -1;
    if (!lat || !buf || inflight > BENCH_DEV_INFLIGHT_MAX)
        goto fail;
    memset(buf, 0x5a, path == DEV_PATH_H2D ? bytes : 16);
    for (long i = 0; i < total + (long)inflight; i++) {
        if (i >= (long)inflight) {
            long j = i - inflight;
            double t;
            if (take_stamped(dag, refs[j % inflight], j, stamp_of(o, j),
                             path == DEV_PATH_D2H ? bytes : 16, &t))
                goto fail;
            if (j == warmup - 1)
                t_start = t;
            else if (j >= warmup)
                lat[j - warmup] = t - t_prev;
            t_prev = t;
        }
        if (i < total && submit_stamped(dag, path, buf, bytes, stamp_of(o, i), &refs[i % inflight]))
            goto fail;
    }
    bench_summarize(lat, iters, (bench_now_us() - t_start) * 1e-6, m);
    rc = 0;
fail:
    free(lat);
    free(buf);
    return rc;
}

int run_device_bandwidth(const bench_opts_t *o, const char *backend, dev_path_t path,
                         size_t bytes, unsigned inflight, long iters, measure_t *m)
{
    dev_fixture_t f = {0};
    adag_graph_h g;
    adag_node_h x, y, e;
    int rc = -1;
    if (bytes < 16 ||
        dev_fixture(&f, o, backend, path == DEV_PATH_PEER, path, ADAG_PLACEMENT_PROCESS,
                    DEV_MECH_DEFAULT))
        goto fail;
    TRY(adag_graph_create(f.rt, &g));
    TRY(adag_graph_input(g, 0, &x));
    switch (path) {
    case DEV_PATH_H2D: /* u8[bytes] in, i64[2] back */
    case DEV_PATH_H2D_ZC:
        TRY(adag_graph_bind(g, f.a, "ends", &x, 1, &e));
        if (tensor_node(x, ADAG_DTYPE_U8, (int64_t)bytes) || tensor_node(e, ADAG_DTYPE_I64, 2))
            goto fail;
        TRY(adag_graph_output(g, &e, 1));
        break;
    case DEV_PATH_D2H: /* 16 B in, u8[bytes] back */
        TRY(adag_graph_bind(g, f.a, "stamp", &x, 1, &y));
        if (tensor_node(y, ADAG_DTYPE_U8, (int64_t)bytes))
            goto fail;
        TRY(adag_graph_output(g, &y, 1));
        break;
    case DEV_PATH_PEER: /* 16 B in, u8[bytes] from device 0 to 1, i64[2] back */
        TRY(adag_graph_bind(g, f.a, "stamp", &x, 1, &y));
        TRY(adag_graph_bind(g, f.b, "ends", &y, 1, &e));
        if (tensor_node(y, ADAG_DTYPE_U8, (int64_t)bytes) || tensor_node(e, ADAG_DTYPE_I64, 2))
            goto fail;
        TRY(adag_graph_output(g, &e, 1));
        break;
    default:
        goto fail;
    }
    adag_dag_h dag = compile_inflight(g, bytes, inflight ? inflight : 1);
    if (dag && path == DEV_PATH_PEER && inflight <= 1)
        rc = drive_stamped(o, dag, 0, bytes, 16, iters, m);
    else if (dag)
        rc = drive_pipelined(o, dag, path, bytes, inflight ? inflight : 1, iters, m);
    if (rc == 0)
        m->gbps = bytes / (m->median_us * 1e3);
fail:
    if (f.rt)
        adag_runtime_destroy(f.rt);
    return rc;
}

/* The allreduce of `bytes` (i32) of nranks process actors on device:0..n-1
 * ("emu", "cuda")
 * through a compiled DAG: stamp -> allreduce SUM -> member 0's ends back
 * to the driver, one execution in flight; the result's ends must be the
 * stamp summed n times. */
int run_allreduce_dag(const bench_opts_t *o, const char *device, unsigned nranks, size_t bytes,
                      long iters, measure_t *m)
{
    adag_runtime_h rt = NULL;
    adag_actor_h a[8];
    adag_node_h x, parts[8], sums[8], e;
    adag_graph_h g;
    int rc = -1;
    adag_runtime_params_t rp = {.field_mask = ADAG_RUNTIME_PARAM_WORKER_PATH,
                                .worker_path = bench_worker_path()};
    if (nranks < 2 || nranks > 8 || bytes < 16 || bytes % 4)
        return -1;
    TRY(adag_runtime_create(&rp, &rt));
    for (unsigned r = 0; r < nranks; r++)
        if (dev_actor(o, rt, device, r, r, &a[r]))
            goto fail;
    TRY(adag_graph_create(rt, &g));
    TRY(adag_graph_input(g, 0, &x));
    for (unsigned r = 0; r < nranks; r++) {
        TRY(adag_graph_bind(g, a[r], "stamp", &x, 1, &parts[r]));
        if (tensor_node(parts[r], ADAG_DTYPE_I32, (int64_t)(bytes / 4)))
            goto fail;
    }
    TRY(adag_graph_allreduce(g, parts, nranks, ADAG_REDUCE_SUM, sums));
    TRY(adag_graph_bind(g, a[0], "ends", &sums[0], 1, &e));
    if (tensor_node(e, ADAG_DTYPE_I64, 2))
        goto fail;
    TRY(adag_graph_output(g, &e, 1));
    adag_dag_h dag = compile_one(g, bytes);
    if (dag)
        rc = drive_stamped_sum(o, dag, 0, bytes, 16, nranks, iters, m);
fail:
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/*
 * The graph rows (adag-bench --only graph): what a launching actor's thread
 * spends per execution to enqueue 50 small kernels, one by one ("eager")
 * against one graph_launch of the same 50 captured once ("graph"), on the
 * device ops table alone (gpu/device.h), device 0 of the row's backend.
 *
 * An execution enqueues its kernels (eager) or launches the graph, then
 * waits for its stream (stream_sync), as an actor whose next input needs
 * its output does. Per round of executions: the launching thread's CPU time
 * spent enqueueing (CLOCK_THREAD_CPUTIME_ID around the enqueue calls only,
 * not the wait), per execution, and executions per second of wall time.
 * Rounds alternate eager and graph; each figure is the median of its
 * variant's rounds.
 *
 * The kernel: on "emu" a launch_host function adding k to 256 floats of
 * host_alloc'd memory; on "cuda" the scale kernel of tests/gpu/scale.cu
 * (y = 0.5 x + k over 256 floats of device memory, launched on the
 * stream's cudaStream_t), loaded from ADAG_BENCH_SCALE_KERNEL when nvcc
 * built it, else the row says "skipped".
 *
 * Through a DAG (run_graph_dag, "emu" only): a thread actor on emu:0
 * whose method "k50" (no argument) enqueues the 50 kernels with
 * adag_call_enqueue and returns an f32 tensor, in a DAG compiled with graphs off, and another on
 * emu:1 in a DAG with graphs on (adag_compile_params_t.graphs: after a
 * warm-up and a capture per slot pattern the loop launches the graph
 * instead of calling the method). One execution at a time, the DAGs'
 * waits sleeping at once (spin_ns 0) so that the figure is the actor's
 * work, not its spinning: the CPU time of the actor's loop thread per
 * execution (its CPU clock, pthread_getcpuclockid, which the method hands
 * out through the actor's state) and executions/s.
 */
#include "bench.h"
#include "table.h"

#include "common/clock.h"
#include "gpu/device.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef ADAG_BENCH_SCALE_KERNEL
#define ADAG_BENCH_SCALE_KERNEL "" /* built without nvcc */
#endif

#define GRAPH_FLOATS 256
#define GRAPH_ROUNDS_MAX 16

typedef int (*scale_on_fn_t)(void *stream, float *y, const float *x, float a, float b, size_t n);

typedef struct {
    const adag_device_ops_t *o;
    adag_device_t *dev;
    adag_dev_stream_t *s;
    adag_dev_mem_t buf;
    scale_on_fn_t scale_on; /* cuda: the kernel; NULL: launch_host */
    void *mod;
} graph_rig_t;

typedef struct {
    float *x;
    float k;
} add_args_t;

static void add_kernel(void *arg)
{
    const add_args_t *a = arg;
    for (size_t i = 0; i < GRAPH_FLOATS; i++)
        a->x[i] += a->k;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The execution's kernels, one by one. */
static adag_status_t enqueue_kernels(graph_rig_t *r, unsigned kernels)
{
    for (unsigned k = 0; k < kernels; k++) {
        if (r->scale_on) {
            if (r->scale_on(r->o->stream_native(r->s), r->buf.ptr, r->buf.ptr, 0.5f, (float)k,
                            GRAPH_FLOATS) != 0)
                return adag_fail(ADAG_ERR_IO, "graph rows: a kernel launch failed");
            continue;
        }
        add_args_t a = {r->buf.ptr, (float)k};
        adag_status_t st = r->o->launch_host(r->s, add_kernel, &a, sizeof a);
        if (st != ADAG_OK)
            return st;
    }
    return ADAG_OK;
}

/* A round of executions; *cpu_us: launching CPU per execution, *per_s. */
static adag_status_t round_of(graph_rig_t *r, adag_dev_graph_t *g, unsigned kernels, long execs,
                              double *cpu_us, double *per_s)
{
    int64_t cpu = 0, t0 = adag__now_ns();
    adag_status_t st = ADAG_OK;
    for (long e = 0; e < execs && st == ADAG_OK; e++) {
        int64_t c0 = thread_cpu_ns();
        st = g ? r->o->graph_launch(g, r->s, 0) : enqueue_kernels(r, kernels);
        cpu += thread_cpu_ns() - c0;
        if (st == ADAG_OK)
            st = r->o->stream_sync(r->s, adag__deadline_ms(10000));
    }
    int64_t wall = adag__now_ns() - t0;
    *cpu_us = (double)cpu / 1e3 / (double)execs;
    *per_s = wall > 0 ? (double)execs * 1e9 / (double)wall : 0;
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The variants' medians of their rounds. */
static void medians(bench_graph_rounds_t *out, double cpu[2][GRAPH_ROUNDS_MAX],
                    double rate[2][GRAPH_ROUNDS_MAX], int rounds, long execs)
{
    for (int v = 0; v < 2; v++) {
        out->cpu_us[v] = median_of(cpu[v], rounds);
        out->per_s[v] = median_of(rate[v], rounds);
    }
    out->executions = execs * rounds;
}

/* Rounds per variant: --reps R (at most GRAPH_ROUNDS_MAX / 2), else 5. */
static int rounds_of(const bench_opts_t *o)
{
    return o->reps > 1 ? (o->reps > GRAPH_ROUNDS_MAX / 2 ? GRAPH_ROUNDS_MAX / 2 : o->reps) : 5;
}

int bench_graph_available(const char *backend, char *why, size_t len)
{
    if (!strcmp(backend, "cuda") && !ADAG_BENCH_SCALE_KERNEL[0]) {
        snprintf(why, len, "the CUDA kernel (tests/gpu/scale.cu) was not built: no nvcc");
        return -1;
    }
    return device_row_available(backend, DEV_PATH_NONE, why, len);
}

int run_graph(const bench_opts_t *o, const char *backend, unsigned kernels,
              bench_graph_rounds_t *out)
{
    graph_rig_t r = {0};
    adag_dev_graph_t *g = NULL;
    int rc = -1, rounds = rounds_of(o);
    long execs = o->quick ? 200 : 2000;
    double cpu[2][GRAPH_ROUNDS_MAX], rate[2][GRAPH_ROUNDS_MAX];
    adag_status_t st;
    if (!(r.o = adag__device_backend_named(backend))) {
        fprintf(stderr, "adag-bench: graph: no backend %s\n", backend);
        return -1;
    }
    if (!strcmp(backend, "cuda")) {
        if (!(r.mod = dlopen(ADAG_BENCH_SCALE_KERNEL, RTLD_NOW | RTLD_LOCAL)) ||
            !(r.scale_on = (scale_on_fn_t)dlsym(r.mod, "adag_test_scale_on"))) {
            fprintf(stderr, "adag-bench: graph: %s: %s\n", ADAG_BENCH_SCALE_KERNEL, dlerror());
            goto out;
        }
    }
    if ((st = r.o->open(0, &r.dev)) != ADAG_OK || (st = r.o->bind_thread(r.dev)) != ADAG_OK ||
        (st = r.o->stream_create(r.dev, &r.s)) != ADAG_OK ||
        (st = (r.scale_on ? r.o->mem_alloc : r.o->host_alloc)(r.dev, GRAPH_FLOATS * sizeof(float),
                                                               &r.buf)) != ADAG_OK)
        goto fail;
    if ((st = r.o->stream_capture_begin(r.s)) != ADAG_OK)
        goto fail;
    st = enqueue_kernels(&r, kernels);
    adag_status_t end = r.o->stream_capture_end(r.s, &g);
    if (st != ADAG_OK || (st = end) != ADAG_OK)
        goto fail;
    double c, p;
    /* a warm-up of each, then the rounds, alternating */
    if ((st = round_of(&r, NULL, kernels, execs / 10 + 1, &c, &p)) != ADAG_OK ||
        (st = round_of(&r, g, kernels, execs / 10 + 1, &c, &p)) != ADAG_OK)
        goto fail;
    for (int i = 0; i < rounds; i++) {
        if ((st = round_of(&r, NULL, kernels, execs, &cpu[0][i], &rate[0][i])) != ADAG_OK ||
            (st = round_of(&r, g, kernels, execs, &cpu[1][i], &rate[1][i])) != ADAG_OK)
            goto fail;
        fprintf(stderr, "adag-bench: graph %s round %d: eager %.2f us CPU/exec %.0f exec/s, "
                        "graph %.2f us CPU/exec %.0f exec/s\n",
                backend, i, cpu[0][i], rate[0][i], cpu[1][i], rate[1][i]);
    }
    medians(out, cpu, rate, rounds, execs);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "adag-bench: graph (%s): %s\n", backend, adag_last_error());
out:
    if (g)
        r.o->graph_destroy(r.dev, g);
    if (r.s)
        r.o->stream_destroy(r.dev, r.s);
    if (r.buf.ptr)
        (r.scale_on ? r.o->mem_free : r.o->host_free)(r.dev, &r.buf);
    if (r.dev)
        r.o->close(r.dev);
    if (r.mod)
        dlclose(r.mod);
    return rc;
}

/* ---- through a DAG ---- */

typedef struct {
    int64_t clock; /* the CPU clock of the loop thread that last called k50 */
} kdag_state_t;

static adag_status_t kdag_k50(void *state, adag_call_h call)
{
    kdag_state_t *s = state;
    clockid_t clk;
    if (pthread_getcpuclockid(pthread_self(), &clk) == 0)
        s->clock = clk;
    void *out;
    const int64_t shape[1] = {GRAPH_FLOATS};
    adag_status_t st = adag_call_output_tensor(call, 0, ADAG_DTYPE_F32, 1, shape, &out);
    for (unsigned k = 0; k < 50 && st == ADAG_OK; k++) {
        add_args_t a = {out, (float)k}; /* the kernel of the rows above */
        st = adag_call_enqueue(call, add_kernel, &a, sizeof a);
    }
    return st;
}

static adag_status_t kdag_clock(void *state, adag_call_h call)
{
    return adag_call_set_output(call, 0, &((kdag_state_t *)state)->clock, sizeof(int64_t));
}

/* takes the tensor (on its device: nothing waits for it) and returns 8
 * host bytes at once */
static adag_status_t kdag_sink(void *state, adag_call_h call)
{
    (void)state;
    const int64_t one = 1;
    return adag_call_set_output(call, 0, &one, sizeof one);
}

static const adag_method_def_t kdag_methods[] = {
    {"k50", kdag_k50, 0, 1},
    {"clock", kdag_clock, 1, 1},
    {"sink", kdag_sink, 1, 1},
};
static const char *const kdag_capturable[] = {"k50", NULL};
static const adag_class_def_t kdag_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "bench_graph",
    .state_size = sizeof(kdag_state_t),
    .methods = kdag_methods,
    .nmethods = 3,
    .capturable = kdag_capturable,
};

/* a.k50() -> y (f32 [GRAPH_FLOATS] on a's device) -> sink.sink(y) ->
 * output, or (clock) input 0 -> a.clock -> output. k50 has no host
 * argument and its tensor goes to a device actor that does not wait for
 * it, so a's loop never waits for its device work: its CPU time is its
 * own. */
static adag_status_t kdag_compile(adag_runtime_h rt, adag_actor_h a, adag_actor_h sink,
                                  int clock, int graphs, adag_dag_h *dag)
{
    adag_graph_h g;
    adag_node_h in, y, z;
    adag_status_t st = adag_graph_create(rt, &g);
    if (st != ADAG_OK)
        return st;
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                               .dtype = ADAG_DTYPE_F32, .ndim = 1, .shape = {GRAPH_FLOATS}};
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_SPIN | ADAG_COMPILE_PARAM_GRAPHS,
                                .max_inflight = 2, .spin_ns = 0, .graphs = graphs};
    if (clock) {
        if ((st = adag_graph_input(g, 0, &in)) == ADAG_OK &&
            (st = adag_graph_bind(g, a, "clock", &in, 1, &z)) == ADAG_OK &&
            (st = adag_graph_output(g, &z, 1)) == ADAG_OK)
            st = adag_graph_compile(g, &cp, dag);
    } else if ((st = adag_graph_bind(g, a, "k50", NULL, 0, &y)) == ADAG_OK &&
               (st = adag_node_tensor(y, &tp)) == ADAG_OK &&
               (st = adag_graph_bind(g, sink, "sink", &y, 1, &z)) == ADAG_OK &&
               (st = adag_graph_output(g, &z, 1)) == ADAG_OK) {
        st = adag_graph_compile(g, &cp, dag);
    }
    adag_graph_destroy(g);
    return st;
}

/* one execution; x: the input (k50 has none: NULL) */
static adag_status_t kdag_run(adag_dag_h dag, const int64_t *x, adag_value_t *out)
{
    adag_ref_t ref;
    adag_value_t in = {.data = x, .size = sizeof *x}, v;
    adag_status_t st = adag_dag_execute(dag, x ? &in : NULL, x ? 1 : 0, 0, &ref);
    if (st != ADAG_OK)
        return st;
    if ((st = adag_dag_get(dag, ref, &v, 1, 10000)) == ADAG_OK && out)
        *out = v;
    adag_status_t rst = adag_dag_release(dag, ref);
    return st != ADAG_OK ? st : rst;
}

static int64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int run_graph_dag(const bench_opts_t *o, bench_graph_rounds_t *out)
{
    adag_runtime_h rt = NULL;
    adag_actor_h a[2], sink[2];
    adag_dag_h dag[2] = {NULL, NULL};
    clockid_t clk[2];
    int rc = -1, rounds = rounds_of(o);
    long execs = o->quick ? 200 : 2000;
    double cpu[2][GRAPH_ROUNDS_MAX], rate[2][GRAPH_ROUNDS_MAX];
    adag_status_t st;
    if ((st = adag_runtime_create(NULL, &rt)) != ADAG_OK ||
        (st = adag_class_register(rt, &kdag_class)) != ADAG_OK)
        goto fail;
    for (int v = 0; v < 2; v++) {
        char dev[16], name[32];
        snprintf(dev, sizeof dev, "emu:%d", v);
        snprintf(name, sizeof name, "launcher-%s", v ? "graph" : "eager");
        adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME |
                                               ADAG_ACTOR_PARAM_DEVICE,
                                 .class_name = "bench_graph", .name = name, .device = dev};
        adag_dag_h cd = NULL;
        adag_value_t cv;
        if ((st = adag_actor_create(rt, &p, &a[v])) != ADAG_OK)
            goto fail;
        snprintf(name, sizeof name, "sink-%s", v ? "graph" : "eager");
        if ((st = adag_actor_create(rt, &p, &sink[v])) != ADAG_OK ||
            (st = kdag_compile(rt, a[v], sink[v], 0, v, &dag[v])) != ADAG_OK)
            goto fail;
        /* warm-up: the graphs' warm-up and capture executions */
        for (int k = 0; k < 20 && st == ADAG_OK; k++)
            st = kdag_run(dag[v], NULL, NULL);
        if (st != ADAG_OK || (st = kdag_compile(rt, a[v], NULL, 1, 0, &cd)) != ADAG_OK)
            goto fail;
        int64_t zero = 0;
        st = kdag_run(cd, &zero, &cv);
        int64_t c = 0;
        if (st == ADAG_OK)
            memcpy(&c, cv.data, sizeof c);
        adag_dag_destroy(cd);
        if (st != ADAG_OK)
            goto fail;
        clk[v] = (clockid_t)c;
    }
    for (int i = 0; i < rounds; i++)
        for (int v = 0; v < 2; v++) {
            int64_t c0 = clock_ns(clk[v]), t0 = adag__now_ns();
            for (long e = 0; e < execs; e++)
                if ((st = kdag_run(dag[v], NULL, NULL)) != ADAG_OK)
                    goto fail;
            int64_t wall = adag__now_ns() - t0;
            cpu[v][i] = (double)(clock_ns(clk[v]) - c0) / 1e3 / (double)execs;
            rate[v][i] = wall > 0 ? (double)execs * 1e9 / (double)wall : 0;
            if (v)
                fprintf(stderr, "adag-bench: graph dag emu round %d: eager %.2f us actor CPU/exec "
                                "%.0f exec/s, graph %.2f us actor CPU/exec %.0f exec/s\n",
                        i, cpu[0][i], rate[0][i], cpu[1][i], rate[1][i]);
        }
    medians(out, cpu, rate, rounds, execs);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "adag-bench: graph (dag, emu): %s\n", adag_last_error());
out:
    for (int v = 0; v < 2; v++)
        if (dag[v])
            adag_dag_destroy(dag[v]);
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

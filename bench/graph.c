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
 */
#include "bench.h"
#include "table.h"

#include "common/clock.h"
#include "gpu/device.h"

#include <dlfcn.h>
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
        st = g ? r->o->graph_launch(g, r->s) : enqueue_kernels(r, kernels);
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
    int rc = -1, rounds = o->reps > 1 ? (o->reps > GRAPH_ROUNDS_MAX / 2 ? GRAPH_ROUNDS_MAX / 2
                                                                         : o->reps)
                                      : 5;
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
    for (int v = 0; v < 2; v++) {
        out->cpu_us[v] = median_of(cpu[v], rounds);
        out->per_s[v] = median_of(rate[v], rounds);
    }
    out->executions = execs * rounds;
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

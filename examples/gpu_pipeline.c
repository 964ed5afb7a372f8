/*
 * gpu_pipeline: tensors through a pipeline of device-bound actors.
 *
 *     driver --x f32[shape]--> s0.forward --> s1.forward --> ... --> driver
 *
 * Each stage is an adag-worker process bound to a device ("emu:i", the
 * emulated device, or "cuda:i"), with a compute stream where its method
 * enqueues the work ("gpu_stage", examples/modules/gpu_stages.c: host code
 * in stream order on the emulated device, a CUDA kernel on cuda) and returns at
 * once. Every value between stages is declared a tensor (adag_node_tensor),
 * so it stays in device memory: the next stage on the same device reads it
 * in place (zero copy), one on another device gets one peer copy; the input
 * is copied in and the result copied out asynchronously. The DOT graph
 * (adag_dag_write_dot) labels each edge with how it travels.
 *
 * Every element of every result is compared with the driver's own C
 * computation of the same stages (gpu_stages.h), bit for bit.
 *
 * --trace FILE traces the DAG and writes the last executions' spans (each
 * stage's waits, compute and publish, its device copies, the driver's) as
 * Chrome trace JSON; --stats prints each actor's, op's and channel's figures.
 *
 * Usage: gpu_pipeline [--device emu|cuda] [--shape 64x1024] [--stages 4]
 *                     [--iters N] [--inflight K] [--dot FILE] [--trace FILE]
 *                     [--stats] [--module PATH]
 */
#include <adag.h>

#define EXAMPLE_NAME "gpu_pipeline"
#include "example_util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "modules/gpu_stages.h"

#ifndef ADAG_EXAMPLE_DIR
#define ADAG_EXAMPLE_DIR "."
#endif

#define MAX_STAGES 8
#define MAX_INFLIGHT 64
#define POOL 8 /* distinct inputs, used in turn */
#define GET_TIMEOUT_MS 30000

typedef struct {
    const char *device; /* "emu" or "cuda" */
    unsigned ndim;
    int64_t shape[ADAG_MAX_DIMS];
    unsigned stages, inflight;
    unsigned long iters;
    const char *dot, *module, *trace;
    bool stats;
} options_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpu_pipeline [options]\n"
            "  --device emu|cuda  the devices of the stages (default cuda where\n"
            "                      adag_device_count(\"cuda\") finds one and the CUDA module\n"
            "                      was built, else emu: the emulated device)\n"
            "  --shape AxBx...     the f32 tensor's shape (default 64x1024)\n"
            "  --stages N          stages, one actor each (default 4, at most %d)\n"
            "  --iters N           executions (default 500)\n"
            "  --inflight K        executions in flight (default 4, at most %d)\n"
            "  --dot FILE          where to write the DOT graph (default a new file in\n"
            "                      $TMPDIR or /tmp)\n"
            "  --trace FILE        trace the DAG; write its last spans as Chrome trace JSON\n"
            "  --stats             print each actor's, op's and channel's figures at the end\n"
            "  --module PATH       the stage module (default %s/libgpu_stages.so, or\n"
            "                      libgpu_stages_cuda.so for cuda)\n",
            MAX_STAGES, MAX_INFLIGHT, ADAG_EXAMPLE_DIR);
}

/* "64x1024": up to ADAG_MAX_DIMS dimensions, each 1..2^24, at most 2^28
 * elements in all. */
static bool parse_shape(const char *arg, options_t *o)
{
    const char *p = arg;
    uint64_t total = 1;
    o->ndim = 0;
    while (p && *p) {
        char *end;
        errno = 0;
        unsigned long long d = strtoull(p, &end, 10);
        if (errno || end == p || *p == '-' || d < 1 || d > (1u << 24) ||
            o->ndim == ADAG_MAX_DIMS || (*end && *end != 'x'))
            goto bad;
        o->shape[o->ndim++] = (int64_t)d;
        total *= d;
        if (total > (1u << 28))
            goto bad;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            goto bad;
    }
    if (o->ndim > 0)
        return true;
bad:
    fprintf(stderr, "gpu_pipeline: --shape %s: expected dimensions like 64x1024 (at most %d, "
                    "2^28 elements)\n", arg ? arg : "(missing)", ADAG_MAX_DIMS);
    return false;
}

/* 0 to go on, 1 on a bad command line, 2 after --help. */
static int parse_options(int argc, char **argv, options_t *o)
{
    unsigned long v;
    *o = (options_t){.ndim = 2, .shape = {64, 1024}, .stages = 4, .inflight = 4, .iters = 500};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *arg = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            usage(stdout);
            return 2;
        } else if (!strcmp(opt, "--stats")) {
            o->stats = true;
            continue; /* no value */
        } else if (!strcmp(opt, "--device") || !strcmp(opt, "--dot") ||
                   !strcmp(opt, "--module") || !strcmp(opt, "--trace")) {
            if (!arg) {
                fprintf(stderr, "gpu_pipeline: %s needs a value\n", opt);
                return 1;
            }
            if (!strcmp(opt, "--device") && strcmp(arg, "emu") && strcmp(arg, "cuda")) {
                fprintf(stderr, "gpu_pipeline: --device %s: expected emu or cuda\n", arg);
                return 1;
            }
            if (!strcmp(opt, "--device"))
                o->device = arg;
            else if (!strcmp(opt, "--dot"))
                o->dot = arg;
            else if (!strcmp(opt, "--trace"))
                o->trace = arg;
            else
                o->module = arg;
        } else if (!strcmp(opt, "--shape")) {
            if (!parse_shape(arg, o))
                return 1;
        } else if (!strcmp(opt, "--stages")) {
            if (!parse_count(opt, arg, 1, MAX_STAGES, &v))
                return 1;
            o->stages = (unsigned)v;
        } else if (!strcmp(opt, "--iters")) {
            if (!parse_count(opt, arg, 1, 100000000, &v))
                return 1;
            o->iters = v;
        } else if (!strcmp(opt, "--inflight")) {
            if (!parse_count(opt, arg, 1, MAX_INFLIGHT, &v))
                return 1;
            o->inflight = (unsigned)v;
        } else {
            fprintf(stderr, "gpu_pipeline: unknown option %s\n", opt);
            usage(stderr);
            return 1;
        }
        i++; /* the option's value */
    }
    return 0;
}

/* The device backend and module when not given: cuda where it has a device
 * and its module was built, else the emulated device. */
/* ---------------------------------------------------------------------- */

typedef struct {
    size_t n, rows, cols;
    float *in[POOL], *expect[POOL];
} pool_t;

static void pool_free(pool_t *p)
{
    for (int k = 0; k < POOL; k++) {
        free(p->in[k]);
        free(p->expect[k]);
    }
}

/* Distinct inputs in [-1, 1) and each one's output through every stage,
 * computed here with the stages' own function. */
static bool pool_fill(pool_t *p, const options_t *o)
{
    float *tmp = malloc(p->n * sizeof(float));
    uint64_t seed = 0x243f6a8885a308d3ull;
    bool good = tmp != NULL;
    for (int k = 0; k < POOL && good; k++) {
        p->in[k] = malloc(p->n * sizeof(float));
        p->expect[k] = malloc(p->n * sizeof(float));
        if (!p->in[k] || !p->expect[k]) {
            good = false;
            break;
        }
        for (size_t i = 0; i < p->n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            p->in[k][i] = (float)(int32_t)(seed >> 40) / (float)(1 << 23) - 1.0f;
        }
        const float *x = p->in[k];
        for (unsigned s = 0; s < o->stages; s++) {
            float *y = (s % 2 == o->stages % 2) ? tmp : p->expect[k]; /* ends in expect */
            gpu_stage_compute(x, y, p->rows, p->cols, (int32_t)s);
            x = y;
        }
    }
    if (!good)
        fprintf(stderr, "gpu_pipeline: out of memory for %d inputs of %zu floats\n", POOL, p->n);
    free(tmp);
    return good;
}

/* Compares a result with the reference; says where the first difference is. */
static bool check(const adag_value_t *out, const pool_t *p, int k, unsigned long exec,
                  const options_t *o)
{
    bool shape_ok = out->kind == ADAG_VALUE_TENSOR && out->dtype == ADAG_DTYPE_F32 &&
                    out->device == ADAG_DEVICE_HOST && out->ndim == o->ndim &&
                    out->size == p->n * sizeof(float) &&
                    !memcmp(out->shape, o->shape, o->ndim * sizeof(int64_t));
    if (!shape_ok) {
        fprintf(stderr, "gpu_pipeline: execution %lu: got kind %d dtype %s, %u dims, %zu bytes "
                        "on device %s:%u; want a host f32 tensor of %zu bytes\n",
                exec, out->kind, adag_dtype_name(out->dtype), out->ndim, out->size,
                adag_device_kind_name(ADAG_DEVICE_KIND(out->device)),
                ADAG_DEVICE_INDEX(out->device), p->n * sizeof(float));
        return false;
    }
    if (!memcmp(out->data, p->expect[k], out->size))
        return true;
    const float *got = out->data;
    for (size_t i = 0; i < p->n; i++)
        if (memcmp(&got[i], &p->expect[k][i], sizeof(float))) {
            fprintf(stderr, "gpu_pipeline: execution %lu: element %zu is %.9g, the C reference "
                            "says %.9g\n", exec, i, (double)got[i], (double)p->expect[k][i]);
            break;
        }
    return false;
}

/* ---------------------------------------------------------------------- */

/* Stage i's device: the stages split in order over up to 2 devices, so the
 * pipeline has both zero-copy and peer-copy edges where there are two. */
static unsigned stage_device(unsigned i, unsigned stages, unsigned ndevices)
{
    unsigned used = ndevices < 2 ? 1 : 2;
    return i * used / stages;
}

static bool build(adag_runtime_h rt, const options_t *o, adag_dag_h *dag, char devices[][32])
{
    adag_graph_h g = NULL;
    adag_node_h x;
    unsigned ndevices = 0;
    bool good = false;
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                               .dtype = ADAG_DTYPE_F32, .ndim = o->ndim};
    memcpy(tp.shape, o->shape, sizeof tp.shape);
    if (!ok(adag_device_count(o->device, &ndevices), "adag_device_count"))
        return false;
    if (ndevices == 0) {
        fprintf(stderr, "gpu_pipeline: no %s device here: %s\n", o->device, adag_last_error());
        return false;
    }
    if (!ok(adag_graph_create(rt, &g), "adag_graph_create") ||
        !ok(adag_graph_input(g, 0, &x), "adag_graph_input") ||
        !ok(adag_node_tensor(x, &tp), "adag_node_tensor (input)"))
        goto done;
    for (unsigned i = 0; i < o->stages; i++) {
        gpu_stage_init_t init = {(int32_t)i};
        adag_actor_h a;
        snprintf(devices[i], 32, "%s:%u", o->device, stage_device(i, o->stages, ndevices));
        adag_actor_params_t p = {
            .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_MODULE |
                          ADAG_ACTOR_PARAM_PLACEMENT | ADAG_ACTOR_PARAM_INIT |
                          ADAG_ACTOR_PARAM_DEVICE,
            .class_name = "gpu_stage", .module_path = o->module,
            .placement = ADAG_PLACEMENT_PROCESS, .init_data = &init, .init_size = sizeof init,
            .device = devices[i]};
        if (!ok(adag_actor_create(rt, &p, &a), "adag_actor_create") ||
            !ok(adag_graph_bind(g, a, "forward", &x, 1, &x), "adag_graph_bind") ||
            !ok(adag_node_tensor(x, &tp), "adag_node_tensor"))
            goto done;
    }
    /* every tensor is static: each channel's slots are its tensor's bytes */
    adag_compile_params_t cp = {
        .field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT | ADAG_COMPILE_PARAM_NAME |
                      ADAG_COMPILE_PARAM_TRACE,
        .max_inflight = o->inflight, .name = "gpu_pipeline",
        .trace_spans = o->trace ? 65536 : 0}; /* each loop's latest 64 Ki records */
    good = ok(adag_graph_output(g, &x, 1), "adag_graph_output") &&
           ok(adag_graph_compile(g, &cp, dag), "adag_graph_compile");
done:
    if (g)
        adag_graph_destroy(g);
    return good;
}

/* Runs the executions with up to inflight of them at once, checking each. */
static bool run(adag_dag_h dag, const options_t *o, const pool_t *p, double *seconds)
{
    adag_ref_t refs[MAX_INFLIGHT];
    unsigned long done = 0;
    double t0 = now_s();
    for (unsigned long i = 0; i < o->iters + o->inflight; i++) {
        if (i >= o->inflight) { /* the oldest in flight: get, check, release */
            unsigned long j = i - o->inflight;
            adag_value_t out;
            if (j >= o->iters)
                continue;
            adag_status_t s = adag_dag_get(dag, refs[j % o->inflight], &out, 1, GET_TIMEOUT_MS);
            bool good = ok(s, "adag_dag_get") && check(&out, p, (int)(j % POOL), j, o);
            if (!ok(adag_dag_release(dag, refs[j % o->inflight]), "adag_dag_release") || !good)
                return false;
            done++;
        }
        if (i < o->iters) {
            adag_value_t in = adag_value_tensor(p->in[i % POOL], ADAG_DTYPE_F32, o->ndim, o->shape);
            if (!ok(adag_dag_execute(dag, &in, 1, 0, &refs[i % o->inflight]), "adag_dag_execute"))
                return false;
        }
    }
    *seconds = now_s() - t0;
    return done == o->iters;
}

int main(int argc, char **argv)
{
    options_t o;
    pool_t pool = {0};
    adag_runtime_h rt = NULL;
    adag_dag_h dag = NULL;
    char devices[MAX_STAGES][32];
    double seconds = 0;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc == 2 ? 0 : 2;
    pick_backend(&o.device, &o.module, ADAG_EXAMPLE_DIR "/libgpu_stages_cuda.so",
                 ADAG_EXAMPLE_DIR "/libgpu_stages.so");
    pool.cols = (size_t)o.shape[o.ndim - 1];
    pool.n = 1;
    for (unsigned d = 0; d < o.ndim; d++)
        pool.n *= (size_t)o.shape[d];
    pool.rows = pool.n / pool.cols;
    rc = 1;
    if (!pool_fill(&pool, &o) || !ok(adag_runtime_create(NULL, &rt), "adag_runtime_create") ||
        !build(rt, &o, &dag, devices) || !write_dot_file(dag, o.dot) ||
        !run(dag, &o, &pool, &seconds) || !print_memory(dag))
        goto done;

    char shape[128] = "";
    for (unsigned d = 0; d < o.ndim; d++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "x" : "",
                 (long long)o.shape[d]);
    printf("gpu_pipeline: %u stages on", o.stages);
    for (unsigned i = 0; i < o.stages; i++)
        printf(" %s", devices[i]);
    printf(" (%s), f32[%s] = %.1f KiB\n", o.module, shape, pool.n * 4 / 1024.0);
    printf("gpu_pipeline: %lu executions, %u in flight, in %.3f s: %.0f executions/s, "
           "%.3f GB/s of input; every element matched the C reference\n",
           o.iters, o.inflight, seconds, (double)o.iters / seconds,
           (double)o.iters * (double)pool.n * 4 / seconds * 1e-9);
    if ((o.trace && !write_trace_file(dag, o.trace)) || (o.stats && !print_stats(dag)))
        goto done;
    rc = 0;
done:
    if (rt)
        adag_runtime_destroy(rt); /* the DAG and the actors with it */
    pool_free(&pool);
    return rc;
}

/*
 * pipeline_demo: a pipeline-parallel DAG, executed with and without
 * pipelining.
 *
 *     driver --batch--> stage0.forward --> stage1.forward --> ... --> driver
 *
 * Each stage is an actor of class "stage" (examples/modules/stages.c), by
 * default an adag-worker process of its own; stage i's output feeds stage
 * i+1 through a shared-memory channel and the last stage's output comes back
 * to the driver. The DAG is compiled once, then executed --iters times
 * keeping 1 execution in flight, and --iters times keeping K in flight: with
 * K executions in flight every stage works on a different batch at the same
 * time, so throughput approaches one batch per stage time.
 *
 * Every result is checked against the expected output computed here in the
 * driver by the same C function the stages run (examples/modules/stages.h).
 *
 * Usage: pipeline_demo [--stages N] [--batch BYTES] [--iters N]
 *                      [--inflight K] [--thread] [--dot FILE] [--trace FILE]
 *                      [--stats] [--module PATH]
 *
 * --trace FILE compiles the DAG with tracing and writes the spans of the
 * last executions (every stage's input waits, computes and publishes, and
 * the driver's) as Chrome trace JSON: open it in https://ui.perfetto.dev.
 * --stats prints the figures of every actor, op and channel at the end
 * (adag_stats_print; with --trace, their times and the bottleneck too).
 * With ADAG_LIVE=1 in the environment, `adag-info attach` shows them live.
 */
#include <adag.h>

#define EXAMPLE_NAME "pipeline_demo"
#include "example_util.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "modules/stages.h"

#ifndef ADAG_EXAMPLE_DIR
#define ADAG_EXAMPLE_DIR "."
#endif

#define MAX_STAGES 64
#define MAX_INFLIGHT 1024
#define GET_TIMEOUT_MS 30000
#define POOL_BYTES (64u << 20) /* at most this much for distinct inputs + expected outputs */

typedef struct {
    unsigned stages;
    size_t batch;
    unsigned long iters;
    unsigned inflight;
    bool thread;
    const char *dot;
    const char *trace;
    bool stats;
    const char *module;
} options_t;

/* Distinct input batches, used in turn, and the pipeline's expected output
 * for each. */
typedef struct {
    size_t nfloats;
    unsigned count;
    float *in;     /* count * nfloats */
    float *expect; /* count * nfloats */
} pool_t;

/* One timed run. */
typedef struct {
    unsigned long n;
    double seconds;
    double p50_us, p99_us;
} phase_result_t;

/* ---------------------------------------------------------------------- */

static float stage_scale(unsigned i)
{
    return 1.0f / (1.0f + 0.25f * (float)i);
}

/* ---------------------------------------------------------------------- */
/* Options                                                                 */
/* ---------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pipeline_demo [options]\n"
            "  --stages N      pipeline stages, one actor each (default 3, at most %d)\n"
            "  --batch BYTES   bytes per batch, a multiple of 4 (default 16384)\n"
            "  --iters N       executions per timed run (default 20000)\n"
            "  --inflight K    executions kept in flight in the pipelined run (default 8)\n"
            "  --thread        thread actors in this process instead of adag-worker processes\n"
            "  --dot FILE      write the compiled DAG in Graphviz DOT to FILE\n"
            "  --trace FILE    trace the DAG and write its last spans as Chrome trace JSON\n"
            "  --stats         print per actor, op and channel figures at the end (timed with "
            "--trace)\n"
            "                  (open in https://ui.perfetto.dev or chrome://tracing)\n"
            "  --module PATH   the stages module (default %s/libstages.so)\n",
            MAX_STAGES, ADAG_EXAMPLE_DIR);
}

static bool parse_number(const char *opt, const char *arg, unsigned long long min,
                         unsigned long long max, unsigned long long *out)
{
    char *end;
    unsigned long long v;

    if (arg == NULL) {
        fprintf(stderr, "pipeline_demo: %s needs a value\n", opt);
        return false;
    }
    errno = 0;
    v = strtoull(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' || v < min || v > max) {
        fprintf(stderr, "pipeline_demo: %s %s: expected a number in %llu..%llu\n", opt, arg, min,
                max);
        return false;
    }
    *out = v;
    return true;
}

/* Returns 0 to go on, 1 on a bad command line, 2 after --help. */
static int parse_options(int argc, char **argv, options_t *o)
{
    *o = (options_t){.stages = 3, .batch = 16384, .iters = 20000, .inflight = 8,
                     .module = ADAG_EXAMPLE_DIR "/libstages.so"};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        const char *arg = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long v;

        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
            usage(stdout);
            return 2;
        } else if (strcmp(opt, "--thread") == 0) {
            o->thread = true;
            continue;
        } else if (strcmp(opt, "--stats") == 0) {
            o->stats = true;
            continue;
        } else if (strcmp(opt, "--dot") == 0 || strcmp(opt, "--module") == 0 ||
                   strcmp(opt, "--trace") == 0) {
            if (arg == NULL) {
                fprintf(stderr, "pipeline_demo: %s needs a value\n", opt);
                return 1;
            }
            if (strcmp(opt, "--dot") == 0)
                o->dot = arg;
            else if (strcmp(opt, "--trace") == 0)
                o->trace = arg;
            else
                o->module = arg;
        } else if (strcmp(opt, "--stages") == 0) {
            if (!parse_number(opt, arg, 1, MAX_STAGES, &v))
                return 1;
            o->stages = (unsigned)v;
        } else if (strcmp(opt, "--batch") == 0) {
            if (!parse_number(opt, arg, 4, 1ull << 30, &v))
                return 1;
            if (v % sizeof(float) != 0) {
                fprintf(stderr, "pipeline_demo: --batch %llu: not a multiple of 4\n", v);
                return 1;
            }
            o->batch = (size_t)v;
        } else if (strcmp(opt, "--iters") == 0) {
            if (!parse_number(opt, arg, 1, 10000000, &v))
                return 1;
            o->iters = (unsigned long)v;
        } else if (strcmp(opt, "--inflight") == 0) {
            if (!parse_number(opt, arg, 1, MAX_INFLIGHT, &v))
                return 1;
            o->inflight = (unsigned)v;
        } else {
            fprintf(stderr, "pipeline_demo: unknown option %s\n", opt);
            usage(stderr);
            return 1;
        }
        i++; /* the option's value */
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Inputs and the reference                                                */
/* ---------------------------------------------------------------------- */

/* Fills the pool with distinct pseudo-random batches in [-2, 2) and computes
 * each one's expected output; returns the mean time of one stage on one
 * batch, in seconds. */
static double pool_fill(pool_t *pool, const options_t *o)
{
    double t = 0.0;

    for (unsigned p = 0; p < pool->count; p++) {
        float *in = pool->in + (size_t)p * pool->nfloats;
        float *out = pool->expect + (size_t)p * pool->nfloats;
        uint64_t x = 0x9e3779b97f4a7c15ull * (p + 1);

        for (size_t j = 0; j < pool->nfloats; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            in[j] = (float)(x >> 40) / (float)(1u << 24) * 4.0f - 2.0f;
        }
        double t0 = now_s();
        memcpy(out, in, pool->nfloats * sizeof(float));
        for (unsigned s = 0; s < o->stages; s++)
            stage_compute(out, out, pool->nfloats, (int32_t)s, stage_scale(s));
        t += now_s() - t0;
    }
    return t / ((double)pool->count * o->stages);
}

static bool pool_create(pool_t *pool, const options_t *o)
{
    size_t per = 2 * o->batch; /* one input + one expected output */
    size_t count = POOL_BYTES / per;

    /* A count that no in-flight window divides, so a result delivered for
     * the wrong execution cannot match by accident. */
    if (count > 17)
        count = 17;
    if (count < 3)
        count = 3;
    pool->nfloats = o->batch / sizeof(float);
    pool->count = (unsigned)count;
    pool->in = malloc(count * o->batch);
    pool->expect = malloc(count * o->batch);
    if (pool->in == NULL || pool->expect == NULL) {
        fprintf(stderr, "pipeline_demo: out of memory for %zu batches of %zu bytes\n", count,
                o->batch);
        return false;
    }
    return true;
}

static void pool_free(pool_t *pool)
{
    free(pool->in);
    free(pool->expect);
}

/* Compares a result with the expected output of execution `iter`. */
static bool verify(const pool_t *pool, unsigned long iter, const adag_value_t *out)
{
    const float *expect = pool->expect + (size_t)(iter % pool->count) * pool->nfloats;
    const float *got = out->data;

    if (out->size != pool->nfloats * sizeof(float)) {
        fprintf(stderr, "pipeline_demo: execution %lu: result of %zu bytes, expected %zu\n",
                iter, out->size, pool->nfloats * sizeof(float));
        return false;
    }
    for (size_t j = 0; j < pool->nfloats; j++) {
        float d = got[j] - expect[j];
        float e = expect[j] < 0 ? -expect[j] : expect[j];
        if (!(d <= 1e-5f + 1e-5f * e && -d <= 1e-5f + 1e-5f * e)) {
            fprintf(stderr,
                    "pipeline_demo: execution %lu: element %zu is %.9g, expected %.9g\n", iter,
                    j, (double)got[j], (double)expect[j]);
            return false;
        }
    }
    return true;
}

/* ---------------------------------------------------------------------- */
/* Running                                                                 */
/* ---------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Gets, checks and releases the result of one execution; records its
 * latency (execute to get returning) in *latency. */
static bool finish(adag_dag_h dag, const pool_t *pool, adag_ref_t ref, unsigned long iter,
                   double t_execute, double *latency)
{
    adag_value_t out;
    bool good;

    if (!ok(adag_dag_get(dag, ref, &out, 1, GET_TIMEOUT_MS), "adag_dag_get")) {
        adag_dag_release(dag, ref);
        return false;
    }
    *latency = now_s() - t_execute;
    good = verify(pool, iter, &out);
    return ok(adag_dag_release(dag, ref), "adag_dag_release") && good;
}

/* Executes the DAG `n` times, keeping up to `window` executions in flight:
 * execute; when `window` are in flight, get + release the oldest first.
 * Executions are numbered from *next_iter on (which picks their input). */
static bool run(adag_dag_h dag, const pool_t *pool, unsigned window, unsigned long n,
                unsigned long *next_iter, double *lat, phase_result_t *res)
{
    adag_ref_t refs[MAX_INFLIGHT];
    double t_exec[MAX_INFLIGHT];
    unsigned long iters[MAX_INFLIGHT];
    unsigned head = 0, count = 0;
    unsigned long done = 0;
    double start = now_s();

    for (unsigned long i = 0; i < n; i++) {
        if (count == window) {
            if (!finish(dag, pool, refs[head], iters[head], t_exec[head], &lat[done++]))
                return false;
            head = (head + 1) % window;
            count--;
        }
        unsigned slot = (head + count) % window;
        unsigned long iter = (*next_iter)++;
        adag_value_t in = {
            .data = pool->in + (size_t)(iter % pool->count) * pool->nfloats,
            .size = pool->nfloats * sizeof(float),
            .kind = ADAG_VALUE_BYTES,
        };
        iters[slot] = iter;
        t_exec[slot] = now_s();
        if (!ok(adag_dag_execute(dag, &in, 1, 0, &refs[slot]), "adag_dag_execute"))
            return false;
        count++;
    }
    while (count > 0) {
        if (!finish(dag, pool, refs[head], iters[head], t_exec[head], &lat[done++]))
            return false;
        head = (head + 1) % window;
        count--;
    }
    res->seconds = now_s() - start;
    res->n = n;
    qsort(lat, n, sizeof lat[0], cmp_double);
    res->p50_us = lat[(n - 1) / 2] * 1e6;
    res->p99_us = lat[(size_t)((double)(n - 1) * 0.99 + 0.5)] * 1e6;
    return true;
}

static void print_result(unsigned window, const phase_result_t *r)
{
    printf("  in-flight %-4u %8lu executions in %6.2f s  %9.0f exec/s   latency p50 %8.1f us"
           "  p99 %8.1f us\n",
           window, r->n, r->seconds, (double)r->n / r->seconds, r->p50_us, r->p99_us);
}

/* ---------------------------------------------------------------------- */
/* Setup                                                                   */
/* ---------------------------------------------------------------------- */

/* For thread actors: load the module into this process and register the
 * classes it exports (the same table adag-worker reads). */
static bool register_module_classes(adag_runtime_h rt, const char *path, void **handle)
{
    const adag_class_def_t *const *classes;

    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (*handle == NULL) {
        fprintf(stderr, "pipeline_demo: cannot load %s: %s\n", path, dlerror());
        return false;
    }
    /* a module records the ABI it was built for (ADAG_MODULE); check it
     * before reading its class table, as adag-worker does */
    const uint32_t *abi = dlsym(*handle, "adag_module_abi_version");
    if (abi == NULL || *abi != ADAG_ABI_VERSION) {
        fprintf(stderr, "pipeline_demo: %s was built for adag ABI %u, this program for %u\n",
                path, abi ? *abi : 0u, ADAG_ABI_VERSION);
        return false;
    }
    classes = (const adag_class_def_t *const *)dlsym(*handle, "adag_module_classes");
    if (classes == NULL) {
        fprintf(stderr, "pipeline_demo: %s exports no adag_module_classes\n", path);
        return false;
    }
    for (; *classes != NULL; classes++)
        if (!ok(adag_class_register(rt, *classes), "adag_class_register"))
            return false;
    return true;
}

/* Creates the stage actors and compiles input -> stage0 -> ... -> output. */
static bool build(adag_runtime_h rt, const options_t *o, adag_actor_h *actors, adag_dag_h *dag)
{
    adag_graph_h g = NULL;
    adag_node_h node;
    bool good = false;

    for (unsigned i = 0; i < o->stages; i++) {
        char name[32];
        stage_init_t init = {.index = (int32_t)i, .scale = stage_scale(i)};
        adag_actor_params_t ap = {
            .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME |
                          ADAG_ACTOR_PARAM_PLACEMENT | ADAG_ACTOR_PARAM_INIT,
            .class_name = "stage",
            .name = name,
            .placement = o->thread ? ADAG_PLACEMENT_THREAD : ADAG_PLACEMENT_PROCESS,
            .init_data = &init,
            .init_size = sizeof init,
        };
        if (!o->thread) {
            ap.field_mask |= ADAG_ACTOR_PARAM_MODULE;
            ap.module_path = o->module;
        }
        snprintf(name, sizeof name, "stage%u", i);
        if (!ok(adag_actor_create(rt, &ap, &actors[i]), "adag_actor_create"))
            return false;
    }

    if (!ok(adag_graph_create(rt, &g), "adag_graph_create"))
        return false;
    if (!ok(adag_graph_input(g, 0, &node), "adag_graph_input"))
        goto out;
    for (unsigned i = 0; i < o->stages; i++)
        if (!ok(adag_graph_bind(g, actors[i], "forward", &node, 1, &node), "adag_graph_bind"))
            goto out;
    if (!ok(adag_graph_output(g, &node, 1), "adag_graph_output"))
        goto out;

    adag_compile_params_t cp = {
        .field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT | ADAG_COMPILE_PARAM_SLOT_CAPACITY |
                      ADAG_COMPILE_PARAM_NAME | ADAG_COMPILE_PARAM_TRACE,
        .max_inflight = o->inflight,
        .slot_capacity = o->batch,
        .name = "pipeline",
        /* the latest 64 Ki spans of each loop: the end of the pipelined run */
        .trace_spans = o->trace ? 65536 : 0,
    };
    good = ok(adag_graph_compile(g, &cp, dag), "adag_graph_compile");
out:
    /* The compiled DAG does not need the graph. */
    good = ok(adag_graph_destroy(g), "adag_graph_destroy") && good;
    return good;
}

/* ---------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    options_t o;
    pool_t pool = {0};
    adag_runtime_h rt = NULL;
    adag_actor_h actors[MAX_STAGES] = {0};
    adag_dag_h dag = NULL;
    void *module = NULL;
    double *lat = NULL;
    unsigned long next_iter = 0, warmup;
    double stage_s, t0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    phase_result_t rw, r1, rk;
    adag_dag_stats_t st = {.struct_size = sizeof(st)};
    bool good = false;

    setvbuf(stdout, NULL, _IOLBF, 0); /* progress and errors in order, even when piped */
    switch (parse_options(argc, argv, &o)) {
    case 0: break;
    case 2: return 0;
    default: return 1;
    }
    warmup = o.iters / 10 < 1000 ? o.iters / 10 : 1000;
    if (warmup < 2u * o.inflight)
        warmup = 2u * o.inflight;

    if (!pool_create(&pool, &o))
        goto out;
    stage_s = pool_fill(&pool, &o);
    lat = malloc((o.iters > warmup ? o.iters : warmup) * sizeof *lat);
    if (lat == NULL) {
        fprintf(stderr, "pipeline_demo: out of memory\n");
        goto out;
    }

    printf("adag pipeline demo: %u stage%s, each a %s actor of class \"stage\"\n", o.stages,
           o.stages == 1 ? "" : "s", o.thread ? "thread" : "process (adag-worker)");
    printf("  module   %s\n", o.module);
    printf("  graph    driver");
    for (unsigned i = 0; i < o.stages; i++)
        if (o.stages <= 4 || i < 2 || i == o.stages - 1)
            printf(" -> stage%u.forward", i);
        else if (i == 2)
            printf(" -> ...");
    printf(" -> driver\n");
    printf("  batch    %zu bytes (%zu float32); one stage takes ~%.1f us on it "
           "(measured here)\n",
           o.batch, pool.nfloats, stage_s * 1e6);
    printf("  host     %ld CPU cores\n", ncpu);
    printf("  runs     %lu executions with 1 in flight, then with %u in flight\n", o.iters,
           o.inflight);

    if (!ok(adag_runtime_create(NULL, &rt), "adag_runtime_create"))
        goto out;
    if (o.thread && !register_module_classes(rt, o.module, &module))
        goto out;
    t0 = now_s();
    if (!build(rt, &o, actors, &dag))
        goto out;
    printf("  setup    actors created and DAG compiled in %.1f ms\n", (now_s() - t0) * 1e3);
    if (o.dot != NULL && !write_dot_file(dag, o.dot))
        goto out;

    if (!run(dag, &pool, o.inflight, warmup, &next_iter, lat, &rw))
        goto out;
    printf("warm-up: %lu executions\n", warmup);

    printf("results (every result checked against the C reference):\n");
    if (!run(dag, &pool, 1, o.iters, &next_iter, lat, &r1))
        goto out;
    print_result(1, &r1);
    if (o.inflight > 1) {
        if (!run(dag, &pool, o.inflight, o.iters, &next_iter, lat, &rk))
            goto out;
        print_result(o.inflight, &rk);
        /* What the stages' compute alone allows: one stage at a time, or
         * min(stages, in-flight, cores) stages at once. */
        unsigned par = o.inflight < o.stages ? o.inflight : o.stages;
        if (ncpu > 0 && (unsigned long)ncpu < par)
            par = (unsigned)ncpu;
        double serial = 1.0 / (stage_s * o.stages);
        printf("  pipelining: %.2fx the throughput of in-flight 1\n", r1.seconds / rk.seconds);
        printf("  (stage compute alone allows %.0f exec/s one stage at a time, %.0f exec/s with "
               "%u at once)\n",
               serial, serial * par, par);
    }

    if ((o.trace != NULL && !write_trace_file(dag, o.trace)) || (o.stats && !print_stats(dag)))
        goto out;
    if (!ok(adag_dag_stats(dag, &st), "adag_dag_stats"))
        goto out;
    printf("dag: %llu executed, %llu completed, %llu failed; %u channels, %zu KiB of shared "
           "memory, slot %zu bytes x %u\n",
           (unsigned long long)st.executed, (unsigned long long)st.completed,
           (unsigned long long)st.failed, st.nchannels, st.shm_bytes / 1024, st.slot_capacity,
           st.max_inflight);
    if (st.executed != next_iter || st.completed != next_iter || st.failed != 0) {
        fprintf(stderr, "pipeline_demo: stats disagree: %lu executions were run\n", next_iter);
        goto out;
    }
    good = true;

out:
    if (dag != NULL)
        good = ok(adag_dag_destroy(dag), "adag_dag_destroy") && good;
    for (unsigned i = 0; i < MAX_STAGES; i++)
        if (actors[i] != NULL)
            good = ok(adag_actor_destroy(actors[i]), "adag_actor_destroy") && good;
    if (rt != NULL)
        good = ok(adag_runtime_destroy(rt), "adag_runtime_destroy") && good;
    if (module != NULL)
        dlclose(module); /* after the runtime: it no longer calls into the module */
    free(lat);
    pool_free(&pool);
    if (good)
        printf("ok\n");
    return good ? 0 : 1;
}

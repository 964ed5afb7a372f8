/*
 * tp_pp: tensor parallelism x pipeline parallelism with collective nodes.
 *
 *                 +-> s0t0.up --+             +-> s1t0.up --+
 *     driver x ---|             |- allreduce -|             |- allreduce --> driver
 *                 +-> s0t1.up --+  (SUM)      +-> s1t1.up --+   (SUM)
 *
 * An MLP block per pipeline stage, y = relu(x . W1) . W2, split over TP
 * shards the Megatron way (examples/modules/tp_mlp.h): shard t holds a
 * slice of W1's columns and the same rows of W2, its "up" returns a
 * partial [B, D], and an allreduce (SUM) of the stage's partials gives
 * every shard the block's output. Shard t of the next stage reads member
 * t's copy of that output: on its own device when --colocate puts them
 * together (zero copy), else from the device next door (a peer copy). The
 * driver reads member 0's copy of the last stage's output.
 *
 * Each shard is an adag-worker process bound to a device ("emu:i", the
 * emulated device, or "cuda:i"); its method enqueues the work on its
 * compute stream and returns; every value between actors stays in device
 * memory. The executions are pipelined (--inflight of them at once), and
 * every element of every result is compared with a C reference that
 * computes the whole blocks (all H hidden units at once) in this thread.
 * The comparison is exact, bit for bit: weights and inputs are small
 * integers, so every sum is an integer, and the reference checks that
 * every sum of absolute values stays below 2^24, where f32 is exact in
 * any order of summation (the shards', the allreduce's, its own).
 *
 * Usage: tp_pp [--device emu|cuda] [--batch 16] [--dim 64] [--hidden 256]
 *              [--tp 2] [--pp 2] [--iters N] [--inflight K] [--colocate]
 *              [--dot FILE] [--module PATH]
 */
#include <adag.h>

#define EXAMPLE_NAME "tp_pp"
#include "example_util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "modules/tp_mlp.h"

#ifndef ADAG_EXAMPLE_DIR
#define ADAG_EXAMPLE_DIR "."
#endif

#define MAX_TP 8
#define MAX_PP 8
#define MAX_INFLIGHT 64
#define POOL 7 /* distinct inputs, used in turn */
#define SEED 0x5eed0fadcafeull
#define GET_TIMEOUT_MS 30000

typedef struct {
    const char *device; /* "emu" or "cuda" */
    unsigned batch, dim, hidden, tp, pp, inflight, iters;
    bool colocate;
    const char *dot, *module;
} options_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tp_pp [options]\n"
            "  --device emu|cuda  the shards' devices (default cuda where\n"
            "                      adag_device_count(\"cuda\") finds one and the CUDA module\n"
            "                      was built, else emu: the emulated device)\n"
            "  --batch B           rows of x (default 16)\n"
            "  --dim D             width of x and of each block's output (default 64)\n"
            "  --hidden H          hidden width of each block, a multiple of --tp (default 256)\n"
            "  --tp T              shards per stage, one actor and device each (default 2,\n"
            "                      2..%d)\n"
            "  --pp P              pipeline stages (default 2, 1..%d)\n"
            "  --iters N           executions (default 500)\n"
            "  --inflight K        executions in flight (default 4, at most %d)\n"
            "  --colocate          shard t of every stage on shard t's device (zero-copy\n"
            "                      hand-over between stages); default: a device per actor,\n"
            "                      in turn over the devices there are\n"
            "  --dot FILE          where to write the DOT graph (default a new file in\n"
            "                      $TMPDIR or /tmp)\n"
            "  --module PATH       the shard module (default %s/libtp_mlp.so, or\n"
            "                      libtp_mlp_cuda.so for cuda)\n",
            MAX_TP, MAX_PP, MAX_INFLIGHT, ADAG_EXAMPLE_DIR);
}

/* 0 to go on, 1 on a bad command line, 2 after --help. */
static int parse_options(int argc, char **argv, options_t *o)
{
    *o = (options_t){.batch = 16, .dim = 64, .hidden = 256, .tp = 2, .pp = 2, .inflight = 4,
                     .iters = 500};
    const struct {
        const char *name;
        unsigned long min, max;
        unsigned *field;
    } counts[] = {
        {"--batch", 1, 4096, &o->batch},     {"--dim", 1, 4096, &o->dim},
        {"--hidden", 1, 65536, &o->hidden},  {"--tp", 2, MAX_TP, &o->tp},
        {"--pp", 1, MAX_PP, &o->pp},         {"--iters", 1, 100000000, &o->iters},
        {"--inflight", 1, MAX_INFLIGHT, &o->inflight},
    };
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *arg = i + 1 < argc ? argv[i + 1] : NULL;
        size_t c = 0;
        while (c < sizeof counts / sizeof counts[0] && strcmp(opt, counts[c].name))
            c++;
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            usage(stdout);
            return 2;
        } else if (!strcmp(opt, "--colocate")) {
            o->colocate = true;
            continue; /* no value */
        } else if (c < sizeof counts / sizeof counts[0]) {
            unsigned long v;
            if (!parse_count(opt, arg, counts[c].min, counts[c].max, &v))
                return 1;
            *counts[c].field = (unsigned)v;
        } else if (!strcmp(opt, "--device") || !strcmp(opt, "--dot") ||
                   !strcmp(opt, "--module")) {
            if (!arg) {
                fprintf(stderr, "tp_pp: %s needs a value\n", opt);
                return 1;
            }
            if (!strcmp(opt, "--device") && strcmp(arg, "emu") && strcmp(arg, "cuda")) {
                fprintf(stderr, "tp_pp: --device %s: expected emu or cuda\n", arg);
                return 1;
            }
            if (!strcmp(opt, "--device"))
                o->device = arg;
            else if (!strcmp(opt, "--dot"))
                o->dot = arg;
            else
                o->module = arg;
        } else {
            fprintf(stderr, "tp_pp: unknown option %s\n", opt);
            usage(stderr);
            return 1;
        }
        i++; /* the option's value */
    }
    if (o->hidden % o->tp) {
        fprintf(stderr, "tp_pp: --hidden %u is not a multiple of --tp %u\n", o->hidden, o->tp);
        return 1;
    }
    return 0;
}

/* The device backend and module when not given: cuda where it has a device
 * and its module was built, else the emulated device. */
/* ---------------------------------------------------------------------- */

typedef struct {
    size_t n; /* batch * dim */
    float *in[POOL], *expect[POOL];
    double largest_sum; /* of absolute values, over every dot product */
} pool_t;

static void pool_free(pool_t *p)
{
    for (int k = 0; k < POOL; k++) {
        free(p->in[k]);
        free(p->expect[k]);
    }
}

/* Distinct inputs (integers in -2..2) and each one's output through every
 * stage's whole block, computed here in one thread; and the largest sum of
 * absolute values any of them forms (exactness, see the top). */
static bool pool_fill(pool_t *p, const options_t *o)
{
    size_t nw = (size_t)o->dim * o->hidden;
    float *w1 = malloc(o->pp * nw * sizeof(float)), *w2 = malloc(o->pp * nw * sizeof(float));
    float *h = malloc(o->hidden * sizeof(float)), *tmp = malloc(p->n * sizeof(float));
    float *bound = malloc(p->n * sizeof(float)), *yrow = malloc(o->dim * sizeof(float));
    uint64_t seed = 0x243f6a8885a308d3ull;
    bool good = w1 && w2 && h && tmp && bound && yrow;
    for (unsigned s = 0; s < o->pp && good; s++)
        tp_mlp_fill_weights(SEED, (int32_t)s, o->dim, 0, o->hidden, w1 + s * nw, w2 + s * nw);
    for (int k = 0; k < POOL && good; k++) {
        p->in[k] = malloc(p->n * sizeof(float));
        p->expect[k] = malloc(p->n * sizeof(float));
        if (!p->in[k] || !p->expect[k]) {
            good = false;
            break;
        }
        for (size_t i = 0; i < p->n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            p->in[k][i] = (float)((int)((seed >> 33) % 5) - 2);
        }
        const float *x = p->in[k];
        for (unsigned s = 0; s < o->pp; s++) {
            float *y = (s % 2 == o->pp % 2) ? tmp : p->expect[k]; /* ends in expect */
            tp_mlp_rows(x, y, o->batch, o->dim, o->hidden, w1 + s * nw, w2 + s * nw, h);
            x = y;
        }
    }
    /* the bound: the same blocks on |x| with |W1|, |W2| */
    for (size_t i = 0; good && i < o->pp * nw; i++) {
        w1[i] = w1[i] < 0 ? -w1[i] : w1[i];
        w2[i] = w2[i] < 0 ? -w2[i] : w2[i];
    }
    for (int k = 0; k < POOL && good; k++) {
        for (size_t i = 0; i < p->n; i++)
            bound[i] = p->in[k][i] < 0 ? -p->in[k][i] : p->in[k][i];
        for (unsigned s = 0; s < o->pp; s++) {
            double b = tp_mlp_bound(bound, o->batch, o->dim, o->hidden, w1 + s * nw,
                                    w2 + s * nw, h, yrow);
            p->largest_sum = b > p->largest_sum ? b : p->largest_sum;
        }
    }
    if (!good)
        fprintf(stderr, "tp_pp: out of memory for the reference (%u stages of %zu weights)\n",
                o->pp, 2 * nw);
    else if (p->largest_sum >= TP_MLP_EXACT_LIMIT) {
        fprintf(stderr, "tp_pp: a sum of absolute values reaches %.0f, past 2^24: f32 would "
                        "not be exact, so no bit-for-bit check; use a smaller --dim, --hidden "
                        "or --pp\n", p->largest_sum);
        good = false;
    }
    free(w1);
    free(w2);
    free(h);
    free(tmp);
    free(bound);
    free(yrow);
    return good;
}

/* Compares a result with the reference; says where the first difference is. */
static bool check(const adag_value_t *out, const pool_t *p, int k, unsigned long exec,
                  const options_t *o)
{
    bool shape_ok = out->kind == ADAG_VALUE_TENSOR && out->dtype == ADAG_DTYPE_F32 &&
                    out->device == ADAG_DEVICE_HOST && out->ndim == 2 &&
                    out->shape[0] == o->batch && out->shape[1] == o->dim &&
                    out->size == p->n * sizeof(float);
    if (!shape_ok) {
        fprintf(stderr, "tp_pp: execution %lu: got kind %d dtype %s, %u dims, %zu bytes on "
                        "device %s:%u; want a host f32 tensor [%u, %u]\n",
                exec, out->kind, adag_dtype_name(out->dtype), out->ndim, out->size,
                adag_device_kind_name(ADAG_DEVICE_KIND(out->device)),
                ADAG_DEVICE_INDEX(out->device), o->batch, o->dim);
        return false;
    }
    if (!memcmp(out->data, p->expect[k], out->size))
        return true;
    const float *got = out->data;
    for (size_t i = 0; i < p->n; i++)
        if (memcmp(&got[i], &p->expect[k][i], sizeof(float))) {
            fprintf(stderr, "tp_pp: execution %lu: element [%zu, %zu] is %.9g, the C reference "
                            "says %.9g\n", exec, i / o->dim, i % o->dim, (double)got[i],
                    (double)p->expect[k][i]);
            break;
        }
    return false;
}

/* ---------------------------------------------------------------------- */

/* The device of stage s's shard t: its own one in turn over the devices
 * (stage 0 on 0..tp-1, stage 1 on tp..2tp-1, ...), or shard t's with
 * --colocate. */
static unsigned shard_device(const options_t *o, unsigned s, unsigned t, unsigned ndevices)
{
    return (o->colocate ? t : s * o->tp + t) % ndevices;
}

static bool build(adag_runtime_h rt, const options_t *o, adag_dag_h *dag, char devices[][32])
{
    adag_graph_h g = NULL;
    adag_node_h x, parts[MAX_TP], outs[MAX_TP];
    unsigned ndevices = 0;
    bool good = false;
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                               .dtype = ADAG_DTYPE_F32, .ndim = 2,
                               .shape = {o->batch, o->dim}};
    if (!ok(adag_device_count(o->device, &ndevices), "adag_device_count"))
        return false;
    if (ndevices < o->tp) {
        fprintf(stderr, "tp_pp: --tp %u needs %u %s devices, a device per shard; there are "
                        "%u%s%s\n", o->tp, o->tp, o->device, ndevices,
                ndevices ? "" : ": ", ndevices ? "" : adag_last_error());
        return false;
    }
    if (!ok(adag_graph_create(rt, &g), "adag_graph_create") ||
        !ok(adag_graph_input(g, 0, &x), "adag_graph_input") ||
        !ok(adag_node_tensor(x, &tp), "adag_node_tensor (input)"))
        goto done;
    for (unsigned t = 0; t < o->tp; t++)
        outs[t] = x; /* every shard of stage 0 reads x */
    for (unsigned s = 0; s < o->pp; s++) {
        for (unsigned t = 0; t < o->tp; t++) {
            tp_mlp_init_t init = {(int32_t)s, (int32_t)t, (int32_t)o->tp, (int32_t)o->dim,
                                  (int32_t)o->hidden, 0, SEED};
            char name[32];
            char *dev = devices[s * o->tp + t];
            adag_actor_h a;
            snprintf(name, sizeof name, "s%ut%u", s, t);
            snprintf(dev, 32, "%s:%u", o->device, shard_device(o, s, t, ndevices));
            adag_actor_params_t p = {
                .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME |
                              ADAG_ACTOR_PARAM_MODULE | ADAG_ACTOR_PARAM_PLACEMENT |
                              ADAG_ACTOR_PARAM_INIT | ADAG_ACTOR_PARAM_DEVICE,
                .class_name = "tp_mlp", .name = name, .module_path = o->module,
                .placement = ADAG_PLACEMENT_PROCESS, .init_data = &init,
                .init_size = sizeof init, .device = dev};
            if (!ok(adag_actor_create(rt, &p, &a), "adag_actor_create") ||
                !ok(adag_graph_bind(g, a, "up", &outs[t], 1, &parts[t]), "adag_graph_bind") ||
                !ok(adag_node_tensor(parts[t], &tp), "adag_node_tensor"))
                goto done;
        }
        if (!ok(adag_graph_allreduce(g, parts, o->tp, ADAG_REDUCE_SUM, outs),
                "adag_graph_allreduce"))
            goto done;
    }
    /* every tensor is static: each channel's slots are its tensor's bytes */
    adag_compile_params_t cp = {
        .field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT | ADAG_COMPILE_PARAM_NAME,
        .max_inflight = o->inflight, .name = "tp_pp"};
    good = ok(adag_graph_output(g, &outs[0], 1), "adag_graph_output") &&
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
            int64_t shape[2] = {o->batch, o->dim};
            adag_value_t in = adag_value_tensor(p->in[i % POOL], ADAG_DTYPE_F32, 2, shape);
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
    char devices[MAX_TP * MAX_PP][32];
    double seconds = 0;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc == 2 ? 0 : 2;
    pick_backend(&o.device, &o.module, ADAG_EXAMPLE_DIR "/libtp_mlp_cuda.so",
                 ADAG_EXAMPLE_DIR "/libtp_mlp.so");
    pool.n = (size_t)o.batch * o.dim;
    rc = 1;
    if (!pool_fill(&pool, &o) || !ok(adag_runtime_create(NULL, &rt), "adag_runtime_create") ||
        !build(rt, &o, &dag, devices) || !write_dot_file(dag, o.dot) ||
        !run(dag, &o, &pool, &seconds) || !print_memory(dag))
        goto done;

    printf("tp_pp: TP-%u x PP-%u, %u shard actors (%s) on", o.tp, o.pp, o.tp * o.pp, o.module);
    for (unsigned i = 0; i < o.tp * o.pp; i++)
        printf(" %s", devices[i]);
    printf("\ntp_pp: x f32[%ux%u], hidden %u (%u per shard), an allreduce (SUM) per stage\n",
           o.batch, o.dim, o.hidden, o.hidden / o.tp);
    printf("tp_pp: %u executions, %u in flight, in %.3f s: %.0f executions/s; every element "
           "matched the C reference bit for bit (exact: integers in f32, every sum of absolute "
           "values <= %.0f < 2^24)\n",
           o.iters, o.inflight, seconds, (double)o.iters / seconds, pool.largest_sum);
    rc = 0;
done:
    if (rt)
        adag_runtime_destroy(rt); /* the DAG and the actors with it */
    pool_free(&pool);
    return rc;
}

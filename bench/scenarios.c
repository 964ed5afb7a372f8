/* The adag side of every scenario. Each builds its own runtime, checks
 * every result it gets (a benchmark of wrong answers is worthless) and
 * tears everything down. */
#include "bench.h"
#include "modules/bench_actors.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct {
    adag_runtime_h rt;
    adag_actor_h actors[64];
    unsigned n;
} fixture_t;

static int fixture_make(fixture_t *f, const bench_opts_t *o, adag_placement_t pl, unsigned n)
{
    adag_runtime_params_t rp = {.field_mask = ADAG_RUNTIME_PARAM_WORKER_PATH,
                                .worker_path = bench_worker_path()};
    memset(f, 0, sizeof(*f));
    TRY(adag_runtime_create(&rp, &f->rt));
    TRY(adag_class_register(f->rt, &bench_actor_class));
    for (unsigned i = 0; i < n; i++) {
        adag_actor_params_t p = {
            .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_PLACEMENT |
                          ADAG_ACTOR_PARAM_MODULE,
            .class_name = "bench", .module_path = o->module, .placement = pl};
        if (bench_actor_create(o, f->rt, i, &p, &f->actors[i]))
            goto fail;
        f->n++;
    }
    return 0;
fail:
    return -1;
}

static void fixture_free(fixture_t *f)
{
    if (f->rt)
        adag_runtime_destroy(f->rt);
    f->rt = NULL;
}

/* o: the scenario's options (o->trace_param: tracing, see bench_opts_t) */
static adag_dag_h compile(const bench_opts_t *o, adag_graph_h g, unsigned inflight, size_t cap,
                          int64_t spin_ns)
{
    adag_dag_h dag = NULL;
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT};
    cp.max_inflight = inflight;
    if (cap) {
        cp.field_mask |= ADAG_COMPILE_PARAM_SLOT_CAPACITY;
        cp.slot_capacity = cap;
    }
    if (spin_ns >= 0) {
        cp.field_mask |= ADAG_COMPILE_PARAM_SPIN;
        cp.spin_ns = spin_ns;
    }
    if (o->trace_param) {
        cp.field_mask |= ADAG_COMPILE_PARAM_TRACE;
        cp.trace_spans = o->trace_spans;
    }
    TRY(adag_graph_compile(g, &cp, &dag));
    return dag;
fail:
    return NULL;
}

/* Runs iters executions with up to `window` in flight; the input of
 * execution i is the int64 i, each output must be i (pass) or the sum of
 * its outputs must be n * i (several outputs). Latency: execute to get. */
static int drive(adag_dag_h dag, unsigned noutputs, unsigned window, long warmup, long iters,
                 measure_t *m)
{
    adag_ref_t refs[64];
    double t_exec[64];
    adag_value_t outs[64];
    double *lat = malloc((size_t)iters * sizeof(*lat)), t_start = 0;
    long total = warmup + iters;
    if (!lat || window > 64 || noutputs > 64)
        goto fail;
    for (long i = 0; i < total + window; i++) {
        if (i >= window) {
            long done = i - window;
            unsigned k = (unsigned)(done % 64);
            TRY(adag_dag_get(dag, refs[k], outs, noutputs, 60000));
            double t = bench_now_us();
            for (unsigned o = 0; o < noutputs; o++) {
                int64_t v;
                memcpy(&v, outs[o].data, sizeof v);
                if (outs[o].size != 8 || v != done) {
                    fprintf(stderr, "adag-bench: execution %ld returned %lld\n", done,
                            (long long)v);
                    goto fail;
                }
            }
            TRY(adag_dag_release(dag, refs[k]));
            if (done >= warmup)
                lat[done - warmup] = t - t_exec[k];
        }
        if (i < total) {
            unsigned k = (unsigned)(i % 64);
            int64_t x = i;
            adag_value_t in = {.data = &x, .size = sizeof x};
            if (i == warmup)
                t_start = bench_now_us();
            t_exec[k] = bench_now_us();
            TRY(adag_dag_execute(dag, &in, 1, 0, &refs[k]));
        }
    }
    bench_summarize(lat, iters, (bench_now_us() - t_start) * 1e-6, m);
    free(lat);
    return 0;
fail:
    free(lat);
    return -1;
}

static long warmup_of(long iters)
{
    return iters / 10 < 200 ? 200 : iters / 10;
}

int run_chain(const bench_opts_t *o, adag_placement_t pl, unsigned n, unsigned inflight,
              int64_t spin_ns, long iters, measure_t *m)
{
    fixture_t f;
    adag_graph_h g;
    adag_node_h x;
    int rc = -1;
    if (fixture_make(&f, o, pl, n))
        goto fail;
    TRY(adag_graph_create(f.rt, &g));
    TRY(adag_graph_input(g, 0, &x));
    for (unsigned i = 0; i < n; i++)
        TRY(adag_graph_bind(g, f.actors[i], "pass", &x, 1, &x));
    TRY(adag_graph_output(g, &x, 1));
    adag_dag_h dag = compile(o, g, inflight, 64, spin_ns);
    if (dag)
        rc = drive(dag, 1, inflight, warmup_of(iters), iters, m);
    if (rc == 0 && o->trace_seen) /* the tracing rows: the trace, after the executions */
        rc = bench_trace_write(dag, o->trace_seen);
    if (rc == 0 && o->print_stats && (!o->trace_param || o->trace_seen))
        rc = bench_print_stats(dag, n, inflight);
fail:
    fixture_free(&f);
    return rc;
}

int run_scatter_gather(const bench_opts_t *o, adag_placement_t pl, unsigned n, long iters,
                       measure_t *m)
{
    fixture_t f;
    adag_graph_h g;
    adag_node_h in, outs[64];
    int rc = -1;
    if (n > 64 || fixture_make(&f, o, pl, n))
        goto fail;
    TRY(adag_graph_create(f.rt, &g));
    TRY(adag_graph_input(g, 0, &in));
    for (unsigned i = 0; i < n; i++)
        TRY(adag_graph_bind(g, f.actors[i], "pass", &in, 1, &outs[i]));
    TRY(adag_graph_output(g, outs, n));
    adag_dag_h dag = compile(o, g, 1, 64, -1);
    if (dag)
        rc = drive(dag, n, 1, warmup_of(iters), iters, m);
fail:
    fixture_free(&f);
    return rc;
}

int run_payload(const bench_opts_t *o, adag_placement_t pl, size_t bytes, int zero_copy,
                long iters, measure_t *m)
{
    fixture_t f;
    adag_graph_h g;
    adag_node_h x;
    int rc = -1;
    long warmup = iters / 10 < 3 ? 3 : iters / 10;
    double *lat = malloc((size_t)iters * sizeof(*lat)), t_start = 0;
    char *buf = malloc(bytes < 8 ? 8 : bytes);
    if (bytes < 8)
        bytes = 8;
    if (!lat || !buf || fixture_make(&f, o, pl, 1))
        goto fail;
    for (size_t i = 0; i < bytes; i++)
        buf[i] = (char)(i * 131 + o->seed);
    TRY(adag_graph_create(f.rt, &g));
    TRY(adag_graph_input(g, 0, &x));
    TRY(adag_graph_bind(g, f.actors[0], "check", &x, 1, &x));
    TRY(adag_graph_output(g, &x, 1));
    adag_dag_h dag = compile(o, g, 1, bytes, -1); /* one slot, as the memcpy baseline reuses one buffer */
    if (!dag)
        goto fail;
    for (long i = 0; i < warmup + iters; i++) {
        uint64_t stamp = (uint64_t)i * 2654435761u + o->seed;
        adag_value_t in = {.data = buf, .size = bytes}, out;
        adag_ref_t ref;
        uint64_t back;
        if (i == warmup)
            t_start = bench_now_us();
        double t0 = bench_now_us();
        if (zero_copy) {
            /* the payload is produced in the slot: only the stamps change */
            adag_input_view_t view;
            TRY(adag_dag_reserve(dag, 0, &view, 1, &ref));
            memcpy(view.data, &stamp, 8);
            memcpy((char *)view.data + bytes - 8, &stamp, 8);
            adag_value_t written = {.data = view.data, .size = bytes};
            TRY(adag_dag_commit(dag, ref, &written, 1));
        } else {
            memcpy(buf, &stamp, 8);
            memcpy(buf + bytes - 8, &stamp, 8);
            TRY(adag_dag_execute(dag, &in, 1, 0, &ref));
        }
        TRY(adag_dag_get(dag, ref, &out, 1, 60000));
        memcpy(&back, out.data, 8);
        TRY(adag_dag_release(dag, ref));
        if (back != stamp) {
            fprintf(stderr, "adag-bench: payload %zu: wrong stamp back\n", bytes);
            goto fail;
        }
        if (i >= warmup)
            lat[i - warmup] = bench_now_us() - t0;
    }
    bench_summarize(lat, iters, (bench_now_us() - t_start) * 1e-6, m);
    m->gbps = bytes / (m->median_us * 1e3);
    rc = 0;
fail:
    fixture_free(&f);
    free(lat);
    free(buf);
    return rc;
}

/* CPU seconds used by every thread of process pid (from schedstat, in ns). */
static double process_cpu_s(int pid)
{
    char path[96];
    double total = 0;
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/schedstat", pid, e->d_name);
        FILE *fp = fopen(path, "r");
        unsigned long long ns = 0;
        if (fp && fscanf(fp, "%llu", &ns) == 1)
            total += ns * 1e-9;
        if (fp)
            fclose(fp);
    }
    closedir(d);
    return total;
}

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

int run_idle(const bench_opts_t *o, adag_placement_t pl, double seconds, measure_t *m)
{
    fixture_t f;
    adag_graph_h g;
    adag_node_h x;
    int rc = -1;
    measure_t warm;
    if (fixture_make(&f, o, pl, 4))
        goto fail;
    TRY(adag_graph_create(f.rt, &g));
    TRY(adag_graph_input(g, 0, &x));
    for (unsigned i = 0; i < 4; i++)
        TRY(adag_graph_bind(g, f.actors[i], "pass", &x, 1, &x));
    TRY(adag_graph_output(g, &x, 1));
    adag_dag_h dag = compile(o, g, 8, 64, -1);
    if (!dag || drive(dag, 1, 8, 0, 200, &warm)) /* busy, then idle */
        goto fail;
    double c0 = self_cpu_s(), t0 = bench_now_us();
    for (unsigned i = 0; i < 4; i++)
        c0 += process_cpu_s(adag_actor_pid(f.actors[i]));
    usleep((useconds_t)(seconds * 1e6));
    double c1 = self_cpu_s(), t1 = bench_now_us();
    for (unsigned i = 0; i < 4; i++)
        c1 += process_cpu_s(adag_actor_pid(f.actors[i]));
    memset(m, 0, sizeof(*m));
    m->cpu_pct = (c1 - c0) / ((t1 - t0) * 1e-6) * 100;
    m->iterations = 1;
    rc = 0;
fail:
    fixture_free(&f);
    return rc;
}

int run_compile(const bench_opts_t *o, adag_placement_t pl, unsigned n, int reps,
                measure_t *cm, measure_t *tm)
{
    fixture_t f;
    int rc = -1;
    double *ct = malloc((size_t)reps * sizeof(double)), *tt = malloc((size_t)reps * sizeof(double));
    if (!ct || !tt || fixture_make(&f, o, pl, n))
        goto fail;
    for (int r = 0; r < reps; r++) {
        adag_graph_h g;
        adag_node_h x;
        TRY(adag_graph_create(f.rt, &g));
        TRY(adag_graph_input(g, 0, &x));
        for (unsigned i = 0; i < n; i++)
            TRY(adag_graph_bind(g, f.actors[i], "pass", &x, 1, &x));
        TRY(adag_graph_output(g, &x, 1));
        double t0 = bench_now_us();
        adag_dag_h dag = compile(o, g, 8, 4096, -1);
        double t1 = bench_now_us();
        if (!dag)
            goto fail;
        measure_t one;
        if (drive(dag, 1, 1, 0, 10, &one)) /* it must work, not just compile */
            goto fail;
        double t2 = bench_now_us();
        TRY(adag_dag_destroy(dag));
        double t3 = bench_now_us();
        TRY(adag_graph_destroy(g));
        ct[r] = t1 - t0;
        tt[r] = t3 - t2;
    }
    bench_summarize(ct, reps, 0, cm);
    bench_summarize(tt, reps, 0, tm);
    rc = 0;
fail:
    fixture_free(&f);
    free(ct);
    free(tt);
    return rc;
}

/*
 * core_figures: the figures the core runtime is judged by, on this machine:
 *   - median / p99 round trip of a 1-actor process DAG with an 8-byte value;
 *   - executions/s of a 4-stage process chain with max in-flight 1 and 8;
 *   - CPU used by an idle compiled DAG (4 process actors) over 2 s.
 * Usage: build/bench/core_figures [iterations]   (the full harness with
 * baselines is build/adag-bench, issue "Microbenchmark harness").
 */
#include <adag.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                         \
    do {                                                                                    \
        adag_status_t s_ = (call);                                                          \
        if (s_ != ADAG_OK) {                                                                \
            fprintf(stderr, "%s: %s: %s\n", #call, adag_status_str(s_), adag_last_error()); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static adag_dag_h chain(adag_runtime_h rt, unsigned n, unsigned inflight, adag_actor_h *actors)
{
    adag_graph_h g;
    adag_node_h x;
    adag_dag_h dag;
    for (unsigned i = 0; i < n; i++) {
        int64_t off = 1;
        adag_actor_params_t p = {
            .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_MODULE |
                          ADAG_ACTOR_PARAM_PLACEMENT | ADAG_ACTOR_PARAM_INIT,
            .class_name = "counter", .module_path = ADAG_TEST_MODULE,
            .placement = ADAG_PLACEMENT_PROCESS, .init_data = &off, .init_size = sizeof off};
        CHECK(adag_actor_create(rt, &p, &actors[i]));
    }
    CHECK(adag_graph_create(rt, &g));
    CHECK(adag_graph_input(g, 0, &x));
    for (unsigned i = 0; i < n; i++)
        CHECK(adag_graph_bind(g, actors[i], "add", &x, 1, &x));
    CHECK(adag_graph_output(g, &x, 1));
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT,
                                .max_inflight = inflight};
    CHECK(adag_graph_compile(g, &cp, &dag));
    CHECK(adag_graph_destroy(g));
    return dag;
}

/* Runs iters executions keeping `window` in flight; fills lat (seconds) if given. */
static double run(adag_dag_h dag, unsigned n, int iters, int window, double *lat)
{
    adag_ref_t refs[64];
    double t_exec[64];
    int64_t vals[64];
    double t0 = now_s();
    for (int i = 0; i < iters + window; i++) {
        if (i >= window) {
            int k = (i - window) % 64;
            adag_value_t out;
            int64_t v;
            CHECK(adag_dag_get(dag, refs[k], &out, 1, 10000));
            memcpy(&v, out.data, sizeof v);
            if (v != vals[k] + (int64_t)n) {
                fprintf(stderr, "wrong result %lld for %lld\n", (long long)v, (long long)vals[k]);
                exit(1);
            }
            CHECK(adag_dag_release(dag, refs[k]));
            if (lat)
                lat[i - window] = now_s() - t_exec[k];
        }
        if (i < iters) {
            int k = i % 64;
            vals[k] = i;
            adag_value_t in = {.data = &vals[k], .size = sizeof vals[k]};
            t_exec[k] = now_s();
            CHECK(adag_dag_execute(dag, &in, 1, 0, &refs[k]));
        }
    }
    return iters / (now_s() - t0);
}

static double driver_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double proc_cpu(int pid)
{
    char path[64];
    unsigned long ut = 0, st = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    /* fields 14 and 15: utime, stime in clock ticks */
    if (fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        ut = st = 0;
    fclose(f);
    return (double)(ut + st) / sysconf(_SC_CLK_TCK);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 20000;
    adag_runtime_h rt;
    adag_actor_h actors[4];
    double *lat = malloc(iters * sizeof *lat);
    CHECK(adag_runtime_create(NULL, &rt));

    adag_dag_h one = chain(rt, 1, 8, actors);
    run(one, 1, 1000, 1, NULL);
    run(one, 1, iters, 1, lat);
    qsort(lat, iters, sizeof *lat, cmp_double);
    printf("1-actor process roundtrip, 8 B:     median %.1f us, p99 %.1f us\n",
           lat[iters / 2] * 1e6, lat[iters * 99 / 100] * 1e6);
    CHECK(adag_dag_destroy(one));
    CHECK(adag_actor_destroy(actors[0]));

    for (unsigned inflight = 1; inflight <= 8; inflight += 7) {
        adag_dag_h dag = chain(rt, 4, inflight, actors);
        run(dag, 4, 1000, (int)inflight, NULL);
        double rate = run(dag, 4, iters, (int)inflight, NULL);
        printf("4-stage process chain, in-flight %u: %.0f executions/s\n", inflight, rate);
        if (inflight == 8) {
            /* idle: nothing executes for 2 s; measure driver + workers CPU */
            double w0 = 0, w1 = 0, d0 = driver_cpu();
            for (int i = 0; i < 4; i++)
                w0 += proc_cpu(adag_actor_pid(actors[i]));
            usleep(2000000);
            for (int i = 0; i < 4; i++)
                w1 += proc_cpu(adag_actor_pid(actors[i]));
            double d1 = driver_cpu();
            printf("idle compiled DAG (4 process actors + driver), 2 s: %.2f%% of one core\n",
                   ((w1 - w0) + (d1 - d0)) / 2.0 * 100);
        }
        CHECK(adag_dag_destroy(dag));
        for (int i = 0; i < 4; i++)
            CHECK(adag_actor_destroy(actors[i]));
    }
    CHECK(adag_runtime_destroy(rt));
    free(lat);
    return 0;
}

/*
 * adag-bench: every overhead of the runtime measured against what the
 * machine can do (baselines measured in the same run) and, with --vs-ray,
 * against Ray Compiled Graphs. A scenario and its baseline are declared
 * together in one table (bench/main.c); later transports add rows.
 */
#ifndef ADAG_BENCH_H
#define ADAG_BENCH_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    METRIC_LATENCY,    /* median_us: lower is better; ratio = adag / baseline */
    METRIC_THROUGHPUT, /* per_s: higher is better; ratio = adag / baseline */
    METRIC_BANDWIDTH,  /* gbps: higher is better; ratio = adag / baseline */
    METRIC_CPU,        /* percent of one core: lower is better; ratio = adag / budget */
    METRIC_TIME,       /* median_us of a one-off operation: lower is better */
} metric_t;

typedef struct {
    double median_us, p99_us, per_s, gbps, cpu_pct;
    long iterations;
} measure_t;

typedef struct {
    char name[32];       /* roundtrip, chain, scatter-gather, payload, idle, compile, teardown */
    char placement[16];  /* thread, process */
    unsigned n, inflight;
    size_t bytes;
    int64_t spin_ns;     /* the DAG's wait policy */
    metric_t metric;
    measure_t m;
    char baseline[64];   /* what it is compared with */
    double baseline_value;
    double ratio;        /* adag / baseline for the metric */
    int has_ray;
    measure_t ray;
    double ray_ratio;    /* how many times adag beats Ray (> 1: adag faster) */
} result_t;

typedef struct {
    int quick;
    unsigned seed;
    long iters;          /* executions per latency measurement */
    unsigned n;          /* actors in chain and scatter-gather (--n, default 4) */
    int reps;            /* measurements per scenario; the median one is kept (--reps) */
    const char *module;  /* the bench actor module .so */
} bench_opts_t;

/* measurement helpers (bench/stats.c) */
double bench_now_us(void);
void bench_summarize(double *lat_us, long n, double total_s, measure_t *m);

/* baselines (bench/baselines.c): raw shared memory between processes */
typedef enum { WAIT_SPIN, WAIT_FUTEX } wait_policy_t;
/* A token passed around `parties` processes (2 = ping-pong); latency of one
 * full cycle. */
int baseline_relay(unsigned parties, wait_policy_t policy, long rounds, measure_t *m);
/* One word to n processes and n acknowledgements back. */
int baseline_fanout(unsigned n, wait_policy_t policy, long rounds, measure_t *m);
/* memcpy bandwidth for `bytes` between two buffers. */
int baseline_memcpy(size_t bytes, long reps, measure_t *m);
const char *wait_policy_name(wait_policy_t p);

/* adag scenarios (bench/scenarios.c) */
int run_chain(const bench_opts_t *o, adag_placement_t pl, unsigned n, unsigned inflight,
              int64_t spin_ns, long iters, measure_t *m);
int run_scatter_gather(const bench_opts_t *o, adag_placement_t pl, unsigned n, long iters,
                       measure_t *m);
/* zero_copy: inputs written in the slot (adag_dag_execute_prepare/commit) */
int run_payload(const bench_opts_t *o, adag_placement_t pl, size_t bytes, int zero_copy,
                long iters, measure_t *m);
int run_idle(const bench_opts_t *o, adag_placement_t pl, double seconds, measure_t *m);
int run_compile(const bench_opts_t *o, adag_placement_t pl, unsigned n, int reps,
                measure_t *compile, measure_t *teardown);

#endif

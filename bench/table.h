/*
 * adag-bench's scenario table (bench/table.c): each scenario declared with
 * the baseline it is judged against; bench/main.c runs the rows this run
 * selects (--quick, --only). A later transport adds its rows and baselines
 * there.
 */
#ifndef ADAG_BENCH_TABLE_H
#define ADAG_BENCH_TABLE_H

#include "bench.h"

#ifndef MiB
#define MiB ((size_t)1 << 20)
#endif

typedef enum {
    BASE_RELAY_SPIN,   /* raw token relay through n+1 processes, spinning */
    BASE_RELAY_FUTEX,  /* the same, sleeping on a futex */
    BASE_RELAY_BEST,   /* the better of the two (more processes than cores) */
    BASE_FANOUT_BEST,  /* raw one-to-n-and-back, the better wait policy */
    BASE_MEMCPY,       /* memcpy of the same bytes */
    BASE_INFLIGHT_ONE, /* the same chain with one execution in flight */
    BASE_BUDGET,       /* a budget: 1 % of a core, 100 ms */
    BASE_DEV_RAW_SAME_MECH, /* the same hand-offs on the device ops alone, by the same
                             * mechanism, the better wait policy, rounds alternating */
    BASE_DEV_COPY,     /* one copy_async of the same bytes, the same way */
    BASE_MPI_ALLREDUCE, /* Open MPI's MPI_Allreduce, the same ranks, size and op */
    BASE_ALLREDUCE_DIRECT, /* the host communicator's allreduce called directly */
    BASE_NCCL_ALLREDUCE_DIRECT, /* NCCL's allreduce through the nccl comm ops alone */
    BASE_TOKENS_MEMCPY, /* memcpy of the same token samples in the same order, one thread */
    BASE_IMAGES_IDEAL, /* the image map on one thread, times the source's threads */
    BASE_IMAGES_TORCH, /* torch's DataLoader + PIL (bench/peers/images_torch.py) */
    BASE_IMAGES_LOCAL, /* an open + one epoch of the same shards as local files */
    BASE_PLACE_OFF,    /* the same scenario with placement off, rounds alternating with it */
    BASE_TRACE_OFF,    /* the same scenario with tracing off, rounds alternating with it */
    BASE_LLM_SINGLE,   /* the same decode steps single-process (llm_ref_step), same tp */
    BASE_GRAPH_EAGER,  /* the same kernels enqueued one by one, rounds alternating */
} baseline_kind_t;

typedef enum {
    RUN_CHAIN,
    RUN_SCATTER,
    RUN_PAYLOAD,
    RUN_PAYLOAD_ZC,
    RUN_IDLE,
    RUN_COMPILE,
    RUN_DEV_HOP,
    RUN_DEV_BW,
    RUN_ALLREDUCE,
    RUN_ALLREDUCE_DAG,
    RUN_NCCL_ALLREDUCE_DAG,
    RUN_DATA_TOKENS,
    RUN_DATA_IMAGES,
    RUN_DATA_REMOTE_COLD,
    RUN_DATA_REMOTE_WARM,
    RUN_PLACE_CHAIN,   /* placement rows (bench/placement.c): a chain, */
    RUN_PLACE_PAYLOAD, /* a payload, */
    RUN_PLACE_DEV_HOP, /* a device hop, each with every bench_place_t */
    RUN_TRACE_CHAIN,   /* tracing rows (bench/tracing.c): a chain, traced and not */
    RUN_LLM,           /* the llm rows (bench/llm.c): every configuration in one run */
    RUN_GRAPH,         /* the graph rows (bench/graph.c): a graph's launch against eager */
} run_kind_t;

typedef struct {
    const char *name;
    run_kind_t run;
    int process_only;
    unsigned n, inflight;
    size_t bytes;
    int64_t spin_ns; /* -1: the default policy */
    metric_t metric;
    baseline_kind_t baseline;
    int quick;       /* part of --quick */
    const char *device; /* device rows: the backend ("emu", "cuda"), else NULL */
    dev_path_t path;    /* device rows: which way the bytes go */
} scenario_t;

/* The table, in the order the rows run and print. */
extern const scenario_t bench_scenarios[];
extern const unsigned bench_nscenarios;
/* At least bench_nscenarios (table.c checks): sizes main.c's arrays. */
#define BENCH_MAX_SCENARIOS 96

/* A placement row (bench/placement.c): scenario s with its actors placed
 * each way of bench_place_t, in rounds alternating the variants; out[v]:
 * variant v's round with the median figure. Prints on stderr where each
 * variant put the first actor. 0, or -1 (printed). */
int run_placement(const bench_opts_t *o, const scenario_t *s, measure_t out[3]);

/* A tracing row (bench/tracing.c): scenario s (a chain of process actors)
 * compiled with tracing on (BENCH_TRACE_SPANS spans) and off, in rounds
 * alternating on, off. Per variant (BENCH_TRACE_ON, BENCH_TRACE_OFF): the
 * round with the median figure; the cost of tracing in percent (latency:
 * on / off - 1; executions/s: off / on - 1) of the medians and of the best
 * rounds; spread: the wider spread (best / worst figure, >= 1; 0 unknown)
 * of either variant's rounds. The last on round writes its trace after
 * its executions (bench_trace_write); the rounds and what that write gave
 * go to stderr. 0, or -1 (printed). */
#ifndef BENCH_TRACE_SPANS
#define BENCH_TRACE_SPANS 65536
#endif
enum { BENCH_TRACE_ON = 0, BENCH_TRACE_OFF = 1 };
typedef struct {
    measure_t median[2];
    double cost_pct, best_cost_pct, spread;
    /* the median of the rounds' own costs (round r on against round r off,
     * run back to back on the same machine state): what the goal is
     * judged by, as it is less at the mercy of the machine's drift */
    double paired_cost_pct;
} bench_trace_rounds_t;
int run_tracing(const bench_opts_t *o, const scenario_t *s, bench_trace_rounds_t *out);

/* A graph row (bench/graph.c): `kernels` small kernels per execution on
 * device 0 of backend, enqueued one by one (BENCH_GRAPH_EAGER) against one
 * graph_launch of them (BENCH_GRAPH_LAUNCH), rounds alternating; per
 * variant the medians of the rounds' launching CPU time per execution (us)
 * and executions/s. 0, or -1 (printed). bench_graph_available: 0, or -1
 * and why the row cannot run here. */
enum { BENCH_GRAPH_EAGER = 0, BENCH_GRAPH_LAUNCH = 1 };
typedef struct {
    double cpu_us[2], per_s[2];
    long executions; /* per variant */
} bench_graph_rounds_t;
int run_graph(const bench_opts_t *o, const char *backend, unsigned kernels,
              bench_graph_rounds_t *out);
int bench_graph_available(const char *backend, char *why, size_t len);
/* The same through a DAG (bench/graph.c): a thread actor on emu whose
 * method enqueues the kernels, compiled with graphs off (BENCH_GRAPH_EAGER)
 * and on (BENCH_GRAPH_LAUNCH); cpu_us: the actor's loop thread's CPU time
 * per execution. 0, or -1 (printed). */
int run_graph_dag(const bench_opts_t *o, bench_graph_rounds_t *out);

/* The results of a run (bench/main.c): a new one for scenario s, and its
 * ratio to a baseline of the same run (label names it; its figure is the
 * row's metric: latency and time in us, throughput /s, bandwidth GB/s). */
result_t *bench_new_result(const scenario_t *s, adag_placement_t pl);
void bench_set_ratio(result_t *r, const char *label, double base);
/* Rows of one run that make several results, r the first (bench/rows.c):
 * the graph rows (eager against graph: CPU per execution and executions/s,
 * and through a DAG on emu), the llm rows (one per configuration). */
int bench_graph_rows(const bench_opts_t *o, const scenario_t *s, adag_placement_t pl,
                     result_t *r);
int bench_llm_rows(const bench_opts_t *o, const scenario_t *s, adag_placement_t pl,
                   result_t *r);

#endif

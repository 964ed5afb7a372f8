/*
 * adag-bench's rows that one run turns into several results (bench/main.c
 * runs the scenarios): the graph rows (bench/graph.c measures them) and
 * the llm rows (bench/llm.c).
 */
#include "bench.h"
#include "table.h"

#include <stdio.h>
#include <string.h>

/* A graph row: the graph's launch against the same kernels enqueued
 * eagerly; two results, the launching CPU time per execution (r) and
 * executions/s (after it). */
int bench_graph_rows(const bench_opts_t *o, const scenario_t *s, adag_placement_t pl,
                      result_t *r)
{
    bench_graph_rounds_t g, gd;
    if (run_graph(o, s->device, s->n, &g)) {
        fprintf(stderr, "adag-bench: %s (%s) failed\n", s->name, s->device);
        return -1;
    }
    /* through a DAG: the emulated device only (its kernels are host functions) */
    int dag_rows = !strcmp(s->device, "emu");
    if (dag_rows && run_graph_dag(o, &gd)) {
        fprintf(stderr, "adag-bench: %s (%s, dag) failed\n", s->name, s->device);
        return -1;
    }
    result_t *rows[4] = {r, bench_new_result(s, pl), NULL, NULL};
    if (dag_rows) {
        rows[2] = bench_new_result(s, pl);
        rows[3] = bench_new_result(s, pl);
    }
    for (int i = 0; i < 4 && rows[i]; i++) {
        result_t *q = rows[i];
        if (i >= 2) { /* the actor's loop thread: thread placement */
            g = gd;
            snprintf(q->placement, sizeof q->placement, "thread");
        }
        snprintf(q->scenario, sizeof q->scenario, "%s%s", i >= 2 ? "dag-" : "",
                 i % 2 ? "exec/s" : "cpu/exec");
        snprintf(q->variant, sizeof q->variant, "graph");
        q->metric = i % 2 ? METRIC_THROUGHPUT : METRIC_LATENCY;
        q->m.iterations = g.executions;
        if (i % 2) {
            q->m.per_s = g.per_s[BENCH_GRAPH_LAUNCH];
            q->m.median_us = q->m.per_s > 0 ? 1e6 / q->m.per_s : 0;
            q->m.p99_us = q->m.median_us;
            bench_set_ratio(q, "eager launches, same run", g.per_s[BENCH_GRAPH_EAGER]);
        } else {
            q->m.median_us = g.cpu_us[BENCH_GRAPH_LAUNCH];
            q->m.p99_us = q->m.median_us;
            q->m.per_s = g.per_s[BENCH_GRAPH_LAUNCH];
            bench_set_ratio(q, "eager launches, same run", g.cpu_us[BENCH_GRAPH_EAGER]);
        }
    }
    return 0;
}

/* The llm rows: every configuration, bucket and in flight of one run
 * (bench/llm.c), a result each after r. */
int bench_llm_rows(const bench_opts_t *o, const scenario_t *s, adag_placement_t pl,
                    result_t *r)
{
    static bench_llm_row_t rows[BENCH_LLM_MAX_ROWS];
    unsigned n = 0;
    int rc = run_llm(o, rows, &n, r->skipped, sizeof r->skipped);
    if (rc > 0) {
        fprintf(stderr, "adag-bench: %s: skipped: %s\n", s->name, r->skipped);
        return 0;
    }
    if (rc < 0 || n == 0) {
        fprintf(stderr, "adag-bench: %s (%s) failed\n", s->name, r->placement);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        const bench_llm_row_t *x = &rows[i];
        result_t *q = i ? bench_new_result(s, pl) : r;
        q->llm = 1;
        snprintf(q->llm_device, sizeof q->llm_device, "%s", x->device);
        q->tp = x->tp;
        q->pp = x->pp;
        q->bucket = x->bucket;
        q->d_model = x->d_model;
        q->n = (unsigned)(x->tp * x->pp);
        q->inflight = (unsigned)x->inflight;
        q->step_us = x->step_us;
        q->compute_us = x->compute_us;
        q->collective_us = x->collective_us;
        q->overhead_us = x->overhead_us;
        q->single_us = x->single_us;
        q->untraced_step_us = x->untraced_step_us;
        q->other_cpus = x->other_cpus;
        q->collective_dag_us = x->collective_dag_us;
        q->cpus = x->cpus;
        q->m.median_us = x->step_us;
        q->m.p99_us = x->step_us;
        q->m.iterations = x->steps;
        q->m.per_s = x->step_us > 0 ? x->bucket * 1e6 / x->step_us : 0; /* tokens/s */
        bench_set_ratio(q, "same steps single-process", x->single_us);
        if (x->tp == 2 && x->pp == 2) {
            snprintf(q->goal, sizeof q->goal, "overhead <= %.0f us at TP-2xPP-2",
                     BENCH_LLM_GOAL_US);
            q->goal_met = x->overhead_us <= BENCH_LLM_GOAL_US;
        }
    }
    return 0;
}


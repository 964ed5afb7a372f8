/*
 * The tracing rows: a scenario of process actors run two ways in the same
 * run, through the public compile parameters only:
 *   - on: ADAG_COMPILE_PARAM_TRACE with trace_spans = BENCH_TRACE_SPANS
 *     (every actor loop and the driver keep their spans in a ring);
 *   - off: ADAG_COMPILE_PARAM_TRACE with trace_spans = 0 (whatever
 *     ADAG_TRACE_SPANS says).
 * Rounds alternate the two (on, off, on, off, ...): 5, or --reps R of them
 * (at most 15); each variant's figure is the median of its rounds, and on
 * is reported against off; each variant's best round and the spread of its
 * rounds come with it, as noise shows there. A round runs the executions
 * of the roundtrip row (20000), or 30000 for the chain (~0.1 s here);
 * --quick a tenth. Longer rounds trip the adaptive spin more often: on a
 * loaded machine a round trip whose loops went to sleep takes ~110 us
 * instead of ~1, whatever the tracing, and its rounds spread ~100x.
 *
 * The last on round writes its DAG's trace after its executions (outside
 * the measured part): to /dev/null, timed, then to memory, where its bytes
 * and spans are counted; both must return ADAG_OK and the JSON hold a
 * span, so the on figures are those of a real trace. Each round's figures
 * and what the write gave go to stderr.
 */
#include "bench.h"
#include "table.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define TRACE_ROUNDS 11 /* rounds of each variant; more with --reps */
#define TRACE_MAX_ROUNDS 15

static const char *const variant_name[] = {"on", "off"};

/* Spans in a Chrome trace JSON: its complete events. */
static unsigned long count_spans(const char *json)
{
    static const char mark[] = "\"ph\":\"X\"";
    unsigned long n = 0;
    for (const char *p = json; (p = strstr(p, mark)); p += sizeof mark - 1)
        n++;
    return n;
}

/* The trace into a memory stream, to count its spans. */
static adag_status_t to_stream(void *f, const void *buf, size_t n)
{
    return fwrite(buf, 1, n, f) == n ? ADAG_OK : ADAG_ERR_NO_MEMORY;
}

int bench_trace_write(adag_dag_h dag, bench_trace_seen_t *seen)
{
    char *json = NULL;
    size_t len = 0;
    FILE *mem = NULL;
    int rc = -1;
    memset(seen, 0, sizeof(*seen));
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0) {
        perror("adag-bench: /dev/null");
        goto fail;
    }
    double t0 = bench_now_us();
    TRY(adag_dag_write_trace(dag, adag_writer_fd(null)));
    seen->write_us = bench_now_us() - t0;
    if (!(mem = open_memstream(&json, &len))) {
        perror("adag-bench: open_memstream");
        goto fail;
    }
    TRY(adag_dag_write_trace(dag, (adag_writer_t){to_stream, mem}));
    if (fclose(mem) != 0) {
        mem = NULL;
        perror("adag-bench: the trace in memory");
        goto fail;
    }
    mem = NULL;
    seen->bytes = len;
    seen->spans = count_spans(json);
    if (seen->spans == 0) {
        fprintf(stderr, "adag-bench: the trace (%zu bytes) holds no span\n", len);
        goto fail;
    }
    seen->written = 1;
    rc = 0;
fail:
    if (mem)
        fclose(mem);
    if (null >= 0)
        close(null);
    free(json);
    return rc;
}

int bench_print_stats(adag_dag_h dag, unsigned n, unsigned inflight)
{
    adag_stats_h s;
    TRY(adag_dag_stats_take(dag, &s));
    fprintf(stderr, "adag-bench: figures of the chain n=%u k=%u after its executions:\n", n,
            inflight);
    adag_status_t st = adag_stats_print(s, adag_writer_fd(STDERR_FILENO));
    adag_stats_free(s);
    TRY(st);
    return 0;
fail:
    return -1;
}

static long scaled(const bench_opts_t *o, long full)
{
    return o->quick ? full / 10 : full;
}

/* "roundtrip 8 B", "chain n=4 k=8" */
static void row_text(const scenario_t *s, char *buf, size_t len)
{
    if (s->n == 1 && s->inflight == 1)
        snprintf(buf, len, "roundtrip %zu B", s->bytes);
    else
        snprintf(buf, len, "chain n=%u k=%u", s->n, s->inflight);
}

/* Whether figure a is better than b: lower latency, more executions/s. */
static int better(metric_t metric, double a, double b)
{
    return metric == METRIC_THROUGHPUT ? a > b : a < b;
}

/* The rounds' median round, best round and spread (best / worst, >= 1). */
static void summarize_rounds(metric_t metric, const measure_t *m, int rounds, measure_t *median,
                             measure_t *best, double *spread)
{
    int pick = 0, hi = 0, lo = 0;
    for (int i = 0; i < rounds; i++) {
        double x = bench_primary(metric, &m[i]);
        int below = 0;
        for (int j = 0; j < rounds; j++)
            below += bench_primary(metric, &m[j]) < x;
        if (below == rounds / 2)
            pick = i;
        if (better(metric, x, bench_primary(metric, &m[hi])))
            hi = i;
        if (better(metric, bench_primary(metric, &m[lo]), x))
            lo = i;
    }
    double b = bench_primary(metric, &m[hi]), w = bench_primary(metric, &m[lo]);
    *median = m[pick];
    *best = m[hi];
    *spread = b <= 0 || w <= 0 ? 0 : b > w ? b / w : w / b;
}

/* Tracing's cost in percent: the loss of the figure with it on. */
static double cost_pct(metric_t metric, const measure_t *on, const measure_t *off)
{
    double a = bench_primary(metric, on), b = bench_primary(metric, off);
    if (a <= 0 || b <= 0)
        return 0;
    return (metric == METRIC_LATENCY ? a / b - 1 : b / a - 1) * 100;
}

/* One variant's rounds on stderr: "12.1 11.9 ... us" or "81234 ... /s". */
static void print_rounds(const char *row, int v, metric_t metric, const measure_t *m,
                         int rounds)
{
    char line[512];
    size_t used = 0;
    line[0] = '\0';
    for (int r = 0; r < rounds && used < sizeof line; r++) {
        int k = metric == METRIC_THROUGHPUT
                    ? snprintf(line + used, sizeof line - used, " %.0f", m[r].per_s)
                    : snprintf(line + used, sizeof line - used, " %.2f", m[r].median_us);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    fprintf(stderr, "adag-bench: tracing %s, %-3s rounds:%s %s\n", row, variant_name[v], line,
            metric == METRIC_THROUGHPUT ? "executions/s" : "us (median)");
}

/* What one read of each clock tracing may use costs here (ns, the mean of
 * a million back to back): a traced round trip reads the span clock 6
 * times, 3 of them on its path (the stage's inputs in and method done,
 * the driver's get), so on a 0.6 us round trip a 10 ns read is 5 %. */
static void report_clock_costs(void)
{
    enum { READS = 1000000 };
    struct timespec ts;
    volatile uint64_t sink = 0;
    double t0 = bench_now_us();
    for (int i = 0; i < READS; i++) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sink += (uint64_t)ts.tv_nsec;
    }
    double gettime_ns = (bench_now_us() - t0) * 1e3 / READS;
#if defined(__x86_64__)
    t0 = bench_now_us();
    for (int i = 0; i < READS; i++)
        sink += __rdtsc();
    double tsc_ns = (bench_now_us() - t0) * 1e3 / READS;
    fprintf(stderr,
            "adag-bench: tracing: a clock read here costs %.1f ns (rdtsc) or %.1f ns "
            "(clock_gettime); the span clock is the TSC where the CPU says it is invariant "
            "or the kernel keeps time with it; a traced round trip reads it 3 times on its "
            "path\n",
            tsc_ns, gettime_ns);
#else
    fprintf(stderr, "adag-bench: tracing: a clock read here costs %.1f ns (clock_gettime)\n",
            gettime_ns);
#endif
    (void)sink;
}

int run_tracing(const bench_opts_t *o, const scenario_t *s, bench_trace_rounds_t *out)
{
    static int clocks_reported;
    if (!clocks_reported++)
        report_clock_costs();
    measure_t m[2][TRACE_MAX_ROUNDS];
    bench_trace_seen_t seen;
    char row[64];
    int rounds = o->reps > TRACE_MAX_ROUNDS ? TRACE_MAX_ROUNDS
                 : o->reps > TRACE_ROUNDS   ? o->reps
                                            : TRACE_ROUNDS;
    long iters = scaled(o, s->n > 1 ? 30000 : 20000);
    if (s->run != RUN_TRACE_CHAIN)
        return -1;
    row_text(s, row, sizeof row);
    memset(&seen, 0, sizeof seen);
    for (int r = 0; r < rounds; r++) {
        for (int v = 0; v < 2; v++) {
            bench_opts_t vo = *o;
            vo.trace_param = 1;
            vo.trace_spans = v == BENCH_TRACE_ON ? BENCH_TRACE_SPANS : 0;
            vo.trace_seen = v == BENCH_TRACE_ON && r == rounds - 1 ? &seen : NULL;
            if (run_chain(&vo, ADAG_PLACEMENT_PROCESS, s->n, s->inflight, s->spin_ns, iters,
                          &m[v][r])) {
                fprintf(stderr, "adag-bench: tracing %s, %s, round %d failed\n", row,
                        variant_name[v], r + 1);
                return -1;
            }
        }
    }
    measure_t best[2];
    double spread[2];
    for (int v = 0; v < 2; v++) {
        print_rounds(row, v, s->metric, m[v], rounds);
        summarize_rounds(s->metric, m[v], rounds, &out->median[v], &best[v], &spread[v]);
    }
    out->cost_pct =
        cost_pct(s->metric, &out->median[BENCH_TRACE_ON], &out->median[BENCH_TRACE_OFF]);
    double paired[TRACE_MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        double c = cost_pct(s->metric, &m[BENCH_TRACE_ON][r], &m[BENCH_TRACE_OFF][r]);
        int k = r;
        for (; k > 0 && paired[k - 1] > c; k--) /* insertion: sorted */
            paired[k] = paired[k - 1];
        paired[k] = c;
    }
    out->paired_cost_pct = paired[rounds / 2];
    out->best_cost_pct = cost_pct(s->metric, &best[BENCH_TRACE_ON], &best[BENCH_TRACE_OFF]);
    out->spread = spread[0] == 0 || spread[1] == 0 ? 0
                  : spread[0] > spread[1]          ? spread[0]
                                                   : spread[1];
    fprintf(stderr,
            "adag-bench: tracing %s: the last on round's trace (%d spans a loop): "
            "adag_dag_write_trace ADAG_OK, %.1f ms to /dev/null, %zu bytes, %lu spans\n",
            row, BENCH_TRACE_SPANS, seen.write_us * 1e-3, seen.bytes, seen.spans);
    return 0;
}

/*
 * adag-bench: scenarios, each with the baseline it is judged against,
 * measured side by side in one run; --vs-ray adds Ray Compiled Graphs.
 *
 *   adag-bench [--quick] [--json] [--vs-ray] [--only NAME] [--seed N]
 *
 * The scenario table (bench_scenarios[], bench/table.c) declares each
 * scenario together with its baseline; this file runs the rows it selects.
 */
#include "bench.h"
#include "table.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef ADAG_BENCH_PEERS
#define ADAG_BENCH_PEERS "bench/peers"
#endif

static result_t results[3 * BENCH_MAX_SCENARIOS];
static unsigned nresults;

/* Copies of the bytes a device-bandwidth row's runtime path makes: an input
 * is copied into its ring slot by execute, then to the device; a zero-copy
 * input is written in its slot by the caller, so only the device's copy
 * counts; an output is copied into the driver's ring slot and read there. */
static unsigned path_copies(dev_path_t p)
{
    return p == DEV_PATH_H2D ? 2 : 1;
}

/* Whether a scenario is part of this run (--quick, --only). */
static int selected(const bench_opts_t *o, const scenario_t *s)
{
    return !(o->quick && !s->quick) && !(o->only && strcmp(o->only, s->name));
}

/* ---- baselines, each measured once per run ---- */

typedef struct {
    baseline_kind_t kind;
    unsigned n;
    size_t bytes;
    const char *device;
    dev_path_t path;
    measure_t m;
    char label[64];
} base_cache_t;

static base_cache_t cache[64];
static unsigned ncache;

static long scaled(const bench_opts_t *o, long full)
{
    return o->quick ? full / 10 : full;
}

static long device_bw_reps(const bench_opts_t *o, size_t bytes)
{
    long reps = (long)((256 * MiB) / bytes);
    reps = reps > 2000 ? 2000 : reps < 10 ? 10 : reps;
    return o->quick ? (reps + 9) / 10 : reps;
}

/* device: the backend of a device row (NULL otherwise), path its path */
static const base_cache_t *baseline(const bench_opts_t *o, baseline_kind_t kind, unsigned n,
                                    size_t bytes, const char *device, dev_path_t path)
{
    for (unsigned i = 0; i < ncache; i++)
        if (cache[i].kind == kind && cache[i].n == n && cache[i].bytes == bytes &&
            cache[i].path == path &&
            (cache[i].device == device || (device && cache[i].device &&
                                           !strcmp(cache[i].device, device))))
            return &cache[i];
    base_cache_t *c = &cache[ncache];
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->n = n;
    c->bytes = bytes;
    c->device = device;
    c->path = path;
    long rounds = scaled(o, 20000);
    measure_t a = {0}, b = {0};
    int rc = 0;
    switch (kind) {
    case BASE_RELAY_SPIN:
    case BASE_RELAY_FUTEX:
        rc = baseline_relay(n + 1, kind == BASE_RELAY_SPIN ? WAIT_SPIN : WAIT_FUTEX, rounds,
                            &c->m);
        snprintf(c->label, sizeof c->label, "shm relay %u procs (%s)", n + 1,
                 kind == BASE_RELAY_SPIN ? "spin" : "futex");
        break;
    case BASE_RELAY_BEST:
        rc = baseline_relay(n + 1, WAIT_SPIN, rounds, &a) |
             baseline_relay(n + 1, WAIT_FUTEX, rounds, &b);
        c->m = a.median_us <= b.median_us ? a : b;
        snprintf(c->label, sizeof c->label, "shm relay %u procs (%s)", n + 1,
                 a.median_us <= b.median_us ? "spin" : "futex");
        break;
    case BASE_FANOUT_BEST:
        rc = baseline_fanout(n, WAIT_SPIN, rounds, &a) | baseline_fanout(n, WAIT_FUTEX, rounds, &b);
        c->m = a.median_us <= b.median_us ? a : b;
        snprintf(c->label, sizeof c->label, "shm fan-out 1->%u->1 (%s)", n,
                 a.median_us <= b.median_us ? "spin" : "futex");
        break;
    case BASE_MEMCPY: {
        long reps = (long)((256 * MiB) / (bytes ? bytes : 1));
        reps = reps > 20000 ? 20000 : reps < 10 ? 10 : reps;
        rc = baseline_memcpy(bytes, o->quick ? (reps + 9) / 10 : reps, &c->m);
        snprintf(c->label, sizeof c->label, "memcpy %zu B", bytes);
        break;
    }
    case BASE_DEV_COPY:
        rc = baseline_device_copy(device, path, bytes, device_bw_reps(o, bytes), &c->m);
        snprintf(c->label, sizeof c->label, "raw copy_async %s (1 copy)", bench_path_name(path));
        break;
    case BASE_ALLREDUCE_DIRECT:
        rc = run_allreduce(o, n, bytes, &c->m);
        snprintf(c->label, sizeof c->label, "host comm allreduce called directly, %u procs", n);
        break;
    case BASE_NCCL_ALLREDUCE_DIRECT:
        rc = run_nccl_allreduce_direct(o, bytes, &c->m);
        snprintf(c->label, sizeof c->label, "NCCL allreduce via the comm ops, a proc per GPU");
        break;
    case BASE_TOKENS_MEMCPY:
        rc = baseline_tokens_memcpy(o, &c->m);
        snprintf(c->label, sizeof c->label, "memcpy of the same samples, 1 thread");
        break;
    case BASE_IMAGES_IDEAL:
        rc = baseline_images_ideal(o, &c->m);
        snprintf(c->label, sizeof c->label, "ideal: image map on 1 thread x threads");
        break;
    case BASE_IMAGES_TORCH: {
        char why[160];
        rc = run_images_peer(o, "torch", &c->m, why, sizeof why) ? -1 : 0;
        snprintf(c->label, sizeof c->label, "torch DataLoader + PIL, same workers");
        break;
    }
    case BASE_IMAGES_LOCAL:
        rc = run_data_remote(o, 0, &c->m);
        snprintf(c->label, sizeof c->label, "open + epoch of local files, same rounds");
        break;
    case BASE_MPI_ALLREDUCE: { /* one MPI run for every allreduce size of this run */
        size_t sizes[BENCH_MAX_SCENARIOS];
        unsigned nsizes = 0;
        for (unsigned i = 0; i < bench_nscenarios; i++)
            if (bench_scenarios[i].baseline == BASE_MPI_ALLREDUCE &&
                bench_scenarios[i].n == n && selected(o, &bench_scenarios[i]))
                sizes[nsizes++] = bench_scenarios[i].bytes;
        rc = baseline_mpi_allreduce(o, n, bytes, sizes, nsizes, &c->m);
        snprintf(c->label, sizeof c->label, "Open MPI %u procs (vader)", n);
        break;
    }
    default:
        return NULL;
    }
    if (rc) {
        fprintf(stderr, "adag-bench: baseline %s failed\n", c->label);
        return NULL;
    }
    ncache++;
    return c;
}

/* ---- running one scenario ---- */

result_t *bench_new_result(const scenario_t *s, adag_placement_t pl)
{
    result_t *r = &results[nresults++];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof r->name, "%s", s->name);
    snprintf(r->placement, sizeof r->placement, "%s",
             pl == ADAG_PLACEMENT_THREAD ? "thread" : "process");
    r->n = s->n;
    r->inflight = s->inflight;
    r->bytes = s->bytes;
    r->spin_ns = s->spin_ns;
    r->metric = s->metric;
    if (s->device) {
        snprintf(r->device, sizeof r->device, "%s", s->device);
        r->path = s->path;
        r->hops = s->run == RUN_DEV_HOP ? 3 : 0;
        r->copies = s->run == RUN_DEV_BW ? path_copies(s->path) : 0;
    }
    if (s->baseline == BASE_PLACE_OFF) /* the variant: placement_rows */
        snprintf(r->scenario, sizeof r->scenario, "%s",
                 s->run == RUN_PLACE_CHAIN     ? "chain"
                 : s->run == RUN_PLACE_PAYLOAD ? "payload"
                                               : "device-hop");
    if (s->baseline == BASE_GRAPH_EAGER) /* the figure: graph_rows */
        snprintf(r->scenario, sizeof r->scenario, "cpu/exec");
    if (s->baseline == BASE_TRACE_OFF) /* the variant: tracing_rows */
        snprintf(r->scenario, sizeof r->scenario, "%s",
                 s->n == 1 && s->inflight == 1 ? "roundtrip" : "chain");
    return r;
}

static result_t *find_result(const char *name, const char *placement, unsigned n,
                             unsigned inflight, size_t bytes, int64_t spin_ns)
{
    for (unsigned i = 0; i < nresults; i++) {
        result_t *r = &results[i];
        if (!strcmp(r->name, name) && !strcmp(r->placement, placement) && r->n == n &&
            r->inflight == inflight && r->bytes == bytes && r->spin_ns == spin_ns)
            return r;
    }
    return NULL;
}

void bench_set_ratio(result_t *r, const char *label, double base)
{
    snprintf(r->baseline, sizeof r->baseline, "%s", label);
    r->baseline_value = base;
    double v = r->metric == METRIC_LATENCY || r->metric == METRIC_TIME ? r->m.median_us
               : r->metric == METRIC_THROUGHPUT                        ? r->m.per_s
               : r->metric == METRIC_BANDWIDTH                         ? r->m.gbps
                                                                       : r->m.cpu_pct;
    r->ratio = base > 0 ? v / base : 0;
}

/* A placement row: on against off, and pinned against off (a second
 * result after r), the medians of rounds alternating the three. */
static int placement_rows(const bench_opts_t *o, const scenario_t *s, adag_placement_t pl,
                          result_t *r)
{
    measure_t m[3];
    if (run_placement(o, s, m)) {
        fprintf(stderr, "adag-bench: %s (%s) failed\n", s->name, r->placement);
        return -1;
    }
    result_t *rows[2] = {r, bench_new_result(s, pl)};
    for (int i = 0; i < 2; i++) {
        snprintf(rows[i]->variant, sizeof rows[i]->variant, "%s", i ? "pinned" : "on");
        rows[i]->m = m[i ? BENCH_PLACE_PINNED : BENCH_PLACE_ON];
        bench_set_ratio(rows[i], "placement off, same run",
                  bench_primary(s->metric, &m[BENCH_PLACE_OFF]));
    }
    return 0;
}

/* A device-hop row: for each mechanism (ipc-event, then memops, a result
 * after r), adag's hop against the raw hop of the same mechanism, measured
 * in alternating rounds (run_device_hop_rounds); a mechanism the raw hop
 * cannot run here (no value ops) is a skipped row. */
static int dev_hop_rows(const bench_opts_t *o, const scenario_t *s, adag_placement_t pl,
                        result_t *r)
{
    measure_t am[2], bm[2];
    char why[2][160] = {"", ""};
    result_t *rows[2] = {r, bench_new_result(s, pl)};
    if (run_device_hop_rounds(o, s->device, s->path, s->bytes, pl, am, bm, why))
        return -1;
    for (int i = 0; i < 2; i++) {
        dev_mech_t mech = i ? DEV_MECH_MEMOPS : DEV_MECH_IPC_EVENT;
        char label[64];
        snprintf(rows[i]->mechanism, sizeof rows[i]->mechanism, "%s", bench_mech_name(mech));
        if (why[i][0]) {
            snprintf(rows[i]->skipped, sizeof rows[i]->skipped, "%s", why[i]);
            continue;
        }
        rows[i]->m = am[i];
        snprintf(label, sizeof label, "raw device ops, %s, %s, same run",
                 pl == ADAG_PLACEMENT_THREAD ? "2 threads" : "3 procs", bench_mech_name(mech));
        bench_set_ratio(rows[i], label, bm[i].median_us);
    }
    return 0;
}

/* A tracing row: on against off, the medians of rounds alternating the
 * two. Rounds that spread over 3x say noise (a round trip whose loops
 * slept in some rounds): the goal is then not judged. */
static int tracing_rows(const bench_opts_t *o, const scenario_t *s, result_t *r)
{
    bench_trace_rounds_t t;
    if (run_tracing(o, s, &t)) {
        fprintf(stderr, "adag-bench: %s (%s) failed\n", s->name, r->placement);
        return -1;
    }
    snprintf(r->variant, sizeof r->variant, "on");
    r->m = t.median[BENCH_TRACE_ON];
    bench_set_ratio(r, "tracing off, same run", bench_primary(s->metric, &t.median[BENCH_TRACE_OFF]));
    r->has_cost = 1;
    r->cost_pct = t.cost_pct;
    r->best_cost_pct = t.best_cost_pct;
    r->spread = t.spread;
    r->noisy = t.spread == 0 || t.spread > 3.0;
    snprintf(r->goal, sizeof r->goal, "cost <= 5 %%");
    r->paired_cost_pct = t.paired_cost_pct;
    r->goal_met = !r->noisy && r->paired_cost_pct <= 5.0;
    return 0;
}

static int measure_once(const bench_opts_t *o, const scenario_t *s, adag_placement_t pl,
                        measure_t *m, measure_t *teardown)
{
    long iters = scaled(o, s->n > 1 ? 10000 : 20000);
    switch (s->run) {
    case RUN_CHAIN:
        return run_chain(o, pl, s->n, s->inflight, s->spin_ns, iters, m);
    case RUN_SCATTER:
        return run_scatter_gather(o, pl, s->n, iters, m);
    case RUN_PAYLOAD:
    case RUN_PAYLOAD_ZC: {
        long reps = (long)((512 * MiB) / s->bytes);
        reps = reps > 20000 ? 20000 : reps < 20 ? 20 : reps;
        return run_payload(o, pl, s->bytes, s->run == RUN_PAYLOAD_ZC,
                           o->quick ? (reps + 9) / 10 : reps, m);
    }
    case RUN_IDLE:
        return run_idle(o, pl, 2.0, m);
    case RUN_COMPILE:
        return run_compile(o, pl, s->n, o->quick ? 3 : 9, m, teardown);
    case RUN_DEV_HOP: /* rounds of its own: dev_hop_rows */
        break;
    case RUN_DEV_BW:
        return run_device_bandwidth(o, s->device, s->path, s->bytes, s->inflight,
                                    device_bw_reps(o, s->bytes), m);
    case RUN_ALLREDUCE:
        return run_allreduce(o, s->n, s->bytes, m);
    case RUN_ALLREDUCE_DAG:
        return run_allreduce_dag(o, "emu", s->n, s->bytes, scaled(o, s->bytes >= MiB ? 200 : 2000),
                                 m);
    case RUN_NCCL_ALLREDUCE_DAG:
        return run_nccl_allreduce_dag(o, s->bytes, scaled(o, s->bytes >= MiB ? 200 : 2000), m);
    case RUN_DATA_TOKENS:
        (void)pl;
        return run_data_tokens(o, m);
    case RUN_DATA_IMAGES:
        return run_data_images(o, m);
    case RUN_DATA_REMOTE_COLD:
    case RUN_DATA_REMOTE_WARM:
        return run_data_remote(o, s->run == RUN_DATA_REMOTE_COLD ? 1 : 2, m);
    case RUN_PLACE_CHAIN: /* rounds of their own: placement_rows */
    case RUN_PLACE_PAYLOAD:
    case RUN_PLACE_DEV_HOP:
    case RUN_TRACE_CHAIN: /* the same: tracing_rows */
    case RUN_LLM:         /* and llm_rows */
    case RUN_GRAPH:       /* and graph_rows */
        break;
    }
    return -1;
}

static int run_scenario(const bench_opts_t *o, const scenario_t *scenario, adag_placement_t pl)
{
    scenario_t sc = *scenario;
    const scenario_t *s = &sc;
    if ((sc.run == RUN_CHAIN || sc.run == RUN_SCATTER) && sc.n == 4)
        sc.n = o->n;
    if (sc.run == RUN_DEV_BW && o->quick)
        sc.bytes /= 4;
    result_t *r = bench_new_result(s, pl), *r2;
    if (s->run == RUN_GRAPH && bench_graph_available(s->device, r->skipped, sizeof r->skipped)) {
        fprintf(stderr, "adag-bench: %s (%s): skipped: %s\n", s->name, s->device, r->skipped);
        return 0;
    }
    if (s->device && device_row_available(s->device, s->path, r->skipped, sizeof r->skipped)) {
        fprintf(stderr, "adag-bench: %s (%s %s): skipped: %s\n", s->name, s->device,
                bench_path_name(s->path), r->skipped);
        return 0;
    }
    if ((s->run == RUN_ALLREDUCE || s->run == RUN_ALLREDUCE_DAG) && allreduce_row_available(s->n, r->skipped, sizeof r->skipped)) {
        fprintf(stderr, "adag-bench: %s (%u ranks): skipped: %s\n", s->name, s->n, r->skipped);
        return 0;
    }
    if (s->baseline == BASE_IMAGES_TORCH &&
        images_peer_available("torch", r->skipped, sizeof r->skipped)) {
        fprintf(stderr, "adag-bench: %s vs torch: skipped: %s\n", s->name, r->skipped);
        return 0;
    }
    unsigned nccl_ranks;
    if (s->run == RUN_NCCL_ALLREDUCE_DAG &&
        nccl_allreduce_row_available(&nccl_ranks, r->skipped, sizeof r->skipped)) {
        fprintf(stderr, "adag-bench: %s: skipped: %s\n", s->name, r->skipped);
        return 0;
    }
    if (s->baseline == BASE_PLACE_OFF)
        return placement_rows(o, s, pl, r);
    if (s->baseline == BASE_TRACE_OFF)
        return tracing_rows(o, s, r);
    if (s->run == RUN_LLM)
        return bench_llm_rows(o, s, pl, r);
    if (s->run == RUN_DEV_HOP)
        return dev_hop_rows(o, s, pl, r);
    if (s->run == RUN_GRAPH)
        return bench_graph_rows(o, s, pl, r);
    const base_cache_t *b = NULL;
    measure_t teardown, ms[16], tds[16];
    int rc = 0, reps = o->reps < 1 ? 1 : o->reps > 16 ? 16 : o->reps;

    /* repetitions: keep the one whose primary figure is the median */
    for (int i = 0; i < reps && rc == 0; i++)
        rc = measure_once(o, s, pl, &ms[i], &tds[i]);
    if (rc == 0) {
        int best = 0;
        for (int i = 0; i < reps; i++) {
            int below = 0;
            for (int j = 0; j < reps; j++)
                below += bench_primary(s->metric, &ms[j]) < bench_primary(s->metric, &ms[i]);
            if (below == reps / 2)
                best = i;
        }
        r->m = ms[best];
        teardown = tds[best];
    }
    if (rc) {
        fprintf(stderr, "adag-bench: %s (%s) failed\n", s->name, r->placement);
        return -1;
    }
    switch (s->baseline) {
    case BASE_RELAY_SPIN:
    case BASE_RELAY_FUTEX:
    case BASE_RELAY_BEST:
        if (!(b = baseline(o, s->baseline, s->n, 0, NULL, DEV_PATH_NONE)))
            return -1;
        bench_set_ratio(r, b->label, b->m.median_us);
        break;
    case BASE_FANOUT_BEST:
        if (!(b = baseline(o, s->baseline, s->n, 0, NULL, DEV_PATH_NONE)))
            return -1;
        bench_set_ratio(r, b->label, b->m.median_us);
        break;
    case BASE_MEMCPY:
        if (!(b = baseline(o, s->baseline, 0, s->bytes, NULL, DEV_PATH_NONE)))
            return -1;
        bench_set_ratio(r, b->label, b->m.gbps);
        break;
    case BASE_DEV_COPY: /* zero-copy h2d: against the same raw h2d copy, measured once */
        if (!(b = baseline(o, s->baseline, s->n, s->bytes, s->device,
                           s->path == DEV_PATH_H2D_ZC ? DEV_PATH_H2D : s->path)))
            return -1;
        bench_set_ratio(r, b->label, b->m.gbps);
        break;
    case BASE_MPI_ALLREDUCE:
        if (!(b = baseline(o, s->baseline, s->n, s->bytes, NULL, DEV_PATH_NONE)))
            return -1;
        bench_set_ratio(r, b->label, b->m.median_us);
        r->baseline_gbps = b->m.gbps;
        if (s->bytes >= MiB) {
            snprintf(r->goal, sizeof r->goal, "bus bandwidth >= MPI's (from 1 MiB)");
            r->goal_met = r->m.gbps >= b->m.gbps;
        } else {
            snprintf(r->goal, sizeof r->goal, "time <= 2x MPI's (below 1 MiB)");
            r->goal_met = r->ratio <= 2.0;
        }
        break;
    case BASE_ALLREDUCE_DIRECT:
    case BASE_NCCL_ALLREDUCE_DIRECT:
        if (!(b = baseline(o, s->baseline, s->n, s->bytes, NULL, DEV_PATH_NONE)))
            return -1;
        bench_set_ratio(r, b->label, b->m.median_us);
        r->per_collective = 1;
        break;
    case BASE_TOKENS_MEMCPY:
        if (!(b = baseline(o, s->baseline, 0, s->bytes, NULL, DEV_PATH_NONE)))
            return -1;
        bench_set_ratio(r, b->label, b->m.gbps);
        snprintf(r->goal, sizeof r->goal, ">= 0.8x memcpy");
        r->goal_met = r->ratio >= 0.8;
        break;
    case BASE_IMAGES_IDEAL: {
        if (!(b = baseline(o, s->baseline, 0, 0, NULL, DEV_PATH_NONE)))
            return -1;
        bench_set_ratio(r, b->label, b->m.per_s);
        /* Ray Data, the same workload, in the "ray" column */
        char why[160];
        measure_t ray;
        int peer = images_peer_available("ray", why, sizeof why)
                       ? 1
                       : run_images_peer(o, "ray", &ray, why, sizeof why);
        if (peer == 0) {
            r->has_ray = 1;
            r->ray = ray;
            r->ray_ratio = r->m.per_s / ray.per_s;
        } else {
            fprintf(stderr, "adag-bench: %s vs Ray Data: %s%s\n", s->name,
                    peer > 0 ? "skipped: " : "failed", peer > 0 ? why : "");
        }
        snprintf(r->goal, sizeof r->goal, ">= 0.9x ideal, >= 2x Ray Data");
        r->goal_met = r->ratio >= 0.9 && (!r->has_ray || r->ray_ratio >= 2);
        break;
    }
    case BASE_IMAGES_TORCH:
        if (!(b = baseline(o, s->baseline, 0, 0, NULL, DEV_PATH_NONE)))
            return -1;
        bench_set_ratio(r, b->label, b->m.per_s);
        break;
    case BASE_IMAGES_LOCAL: /* n: the row's own local rounds (cold 1, warm 2) */
        if (!(b = baseline(o, s->baseline, s->n, 0, NULL, DEV_PATH_NONE)))
            return -1;
        bench_set_ratio(r, b->label, b->m.per_s);
        if (s->run == RUN_DATA_REMOTE_WARM) {
            snprintf(r->goal, sizeof r->goal, "warm >= 0.95x local");
            r->goal_met = r->ratio >= 0.95;
        }
        break;
    case BASE_INFLIGHT_ONE:
        r2 = find_result(s->name, r->placement, s->n, 1, s->bytes, s->spin_ns);
        if (r2)
            bench_set_ratio(r, "same chain, in-flight 1", r2->m.per_s);
        break;
    case BASE_BUDGET:
        if (s->run == RUN_IDLE) {
            bench_set_ratio(r, "budget: 1% of a core", 1.0);
        } else {
            bench_set_ratio(r, "budget: 100 ms", 100000);
            /* teardown is its own row, against the same budget */
            result_t *t = bench_new_result(s, pl);
            snprintf(t->name, sizeof t->name, "teardown");
            t->m = teardown;
            bench_set_ratio(t, "budget: 100 ms", 100000);
        }
        break;
    case BASE_DEV_RAW_SAME_MECH: /* measured with the row: dev_hop_rows */
    case BASE_PLACE_OFF: /* and placement_rows */
    case BASE_TRACE_OFF: /* and tracing_rows */
    case BASE_LLM_SINGLE: /* and llm_rows */
    case BASE_GRAPH_EAGER: /* and graph_rows */
        break;
    }
    return 0;
}

/* ---- Ray Compiled Graphs, side by side ---- */

static double json_number(const char *obj, const char *key)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(obj, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    return strncmp(p, "null", 4) == 0 ? -1 : strtod(p, NULL);
}

static void json_string(const char *obj, const char *key, char *out, size_t n)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(obj, pat);
    out[0] = '\0';
    if (!p || !(p = strchr(p + strlen(pat), '"')))
        return;
    const char *e = strchr(p + 1, '"');
    if (e && (size_t)(e - p - 1) < n) {
        memcpy(out, p + 1, (size_t)(e - p - 1));
        out[e - p - 1] = '\0';
    }
}

static int run_ray(const bench_opts_t *o)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "python3 %s/ray_cgraph.py --json%s --seed %u", ADAG_BENCH_PEERS,
             o->quick ? " --quick" : "", o->seed);
    fprintf(stderr, "adag-bench: running the Ray peer: %s\n", cmd);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    for (size_t k; text && (k = fread(text + len, 1, cap - len - 1, p)) > 0;) {
        len += k;
        if (len + 1 == cap) {
            char *t = realloc(text, cap *= 2);
            if (!t)
                break;
            text = t;
        }
    }
    int status = pclose(p);
    if (!text)
        return -1;
    text[len] = '\0';
    if (WEXITSTATUS(status) == 3) {
        fprintf(stderr, "adag-bench: Ray is not installed (pip install ray): Ray peer skipped\n");
        free(text);
        return 1;
    }
    if (status != 0) {
        fprintf(stderr, "adag-bench: the Ray peer failed (status %d)\n", status);
        free(text);
        return -1;
    }
    /* one object per result: {"name": ..., "params": {...}, ...} */
    unsigned matched = 0;
    for (char *obj = strchr(text, '{'); obj; obj = strchr(obj + 1, '{')) {
        int depth = 0;
        char *end = obj;
        for (; *end; end++) {
            depth += *end == '{';
            depth -= *end == '}';
            if (depth == 0)
                break;
        }
        if (!*end)
            break;
        char save = end[1];
        end[1] = '\0';
        char name[32];
        json_string(obj, "name", name, sizeof name);
        unsigned n = (unsigned)json_number(obj, "n"), inflight = (unsigned)json_number(obj, "inflight");
        size_t bytes = (size_t)json_number(obj, "bytes");
        result_t *r = find_result(name, "process", n, inflight, bytes, -1);
        if (r) {
            r->has_ray = 1;
            r->ray.median_us = json_number(obj, "median_us");
            r->ray.p99_us = json_number(obj, "p99_us");
            r->ray.per_s = json_number(obj, "per_s");
            r->ray.gbps = json_number(obj, "gbps");
            r->ray_ratio = r->metric == METRIC_LATENCY ? r->ray.median_us / r->m.median_us
                           : r->metric == METRIC_THROUGHPUT ? r->m.per_s / r->ray.per_s
                                                            : r->m.gbps / r->ray.gbps;
            matched++;
        }
        end[1] = save;
        obj = end;
    }
    free(text);
    fprintf(stderr, "adag-bench: %u Ray results matched\n", matched);
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: adag-bench [--quick] [--json] [--vs-ray] [--only NAME] [--n N] [--reps R] "
            "[--seed N] [--stats] [--llm-model small|default] [--llm-device emu|host]\n"
            "       [--module PATH]\n"
            "  --quick    fewer iterations and sizes (under 60 s)\n"
            "  --json     one JSON object per result instead of the table\n"
            "  --vs-ray   also run bench/peers/ray_cgraph.py (Ray Compiled Graphs)\n"
            "  --only     run only scenarios with this name (roundtrip, chain, ...,\n"
            "             device-hop, device-bandwidth, allreduce, placement,\n"
            "             tracing, llm, graph)\n"
            "  --n N      actors in chain and scatter-gather (default 4, at most 63)\n"
            "  --reps R   measure each scenario R times (at most 16), keep the median one\n"
            "  --seed N   seed of the payload bytes (default 42)\n"
            "  --stats    print each chain's figures (adag_stats_print) after it runs; the\n"
            "             tracing rows' are timed and name the bottleneck\n"
            "  --llm-model the llm rows' model: small (d_model 128, default) or default\n"
            "  --llm-device the llm rows' actors: emu (emulated devices, default) or host\n"
            "             (llm_config_default, d_model 256: about 4x the compute)\n");
}

int main(int argc, char **argv)
{
    bench_opts_t o = {.quick = 0, .seed = 42, .n = 4, .reps = 1};
    int json = 0, vs_ray = 0;
    static char module[PATH_MAX + 64];

    if (argc > 1 && !strcmp(argv[1], "--raw-peer")) /* a process of a raw device baseline */
        return device_raw_peer_main(argc, argv);
    if (argc == 4 && !strcmp(argv[1], "--coll-rank")) /* a rank of a raw allreduce on CUDA */
        return bench_coll_rank_main(argv[2], argv[3]);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            o.quick = 1;
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--vs-ray"))
            vs_ray = 1;
        else if (!strcmp(argv[i], "--stats"))
            o.print_stats = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            o.only = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            o.seed = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            o.n = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            o.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--llm-model") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "default") || !strcmp(argv[i + 1], "small")))
            o.llm_default_model = !strcmp(argv[++i], "default");
        else if (!strcmp(argv[i], "--llm-device") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "emu") || !strcmp(argv[i + 1], "host")))
            o.llm_device = argv[++i];
        else if (!strcmp(argv[i], "--module") && i + 1 < argc)
            o.module = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!o.module) {
        /* next to the executable: <dir>/bench/libbench_actors.so */
        char dir[PATH_MAX];
        bench_exe_dir(dir, sizeof dir);
        snprintf(module, sizeof module, "%s/bench/libbench_actors.so", dir);
        o.module = module;
    }
    if (o.n < 1 || o.n > 63) {
        fprintf(stderr, "adag-bench: --n must be 1..63\n");
        return 2;
    }
    srand(o.seed);
    double t0 = bench_now_us();
    int failed = 0;
    for (unsigned i = 0; i < bench_nscenarios; i++) {
        const scenario_t *s = &bench_scenarios[i];
        if (!selected(&o, s))
            continue;
        for (int p = 0; p < 2; p++) {
            adag_placement_t pl = p ? ADAG_PLACEMENT_PROCESS : ADAG_PLACEMENT_THREAD;
            if (s->process_only && pl == ADAG_PLACEMENT_THREAD)
                continue;
            char what[64] = "";
            if (s->device)
                snprintf(what, sizeof what, " %s %s", s->device, bench_path_name(s->path));
            if (!json)
                fprintf(stderr, "adag-bench: %s n=%u k=%u %zu B%s (%s)\n", s->name, s->n,
                        s->inflight, s->bytes, what, p ? "process" : "thread");
            failed |= run_scenario(&o, s, pl) != 0;
        }
    }
    if (vs_ray && run_ray(&o) < 0)
        failed = 1;
    if (json)
        bench_print_json(stdout, &o, results, nresults);
    else
        bench_print_table(stdout, results, nresults);
    unsigned skipped = 0;
    for (unsigned i = 0; i < nresults; i++)
        skipped += results[i].skipped[0] != 0;
    fprintf(stderr, "adag-bench: %u results, %u skipped (not counted), in %.1f s%s\n",
            nresults - skipped, skipped, (bench_now_us() - t0) * 1e-6,
            failed ? " (some FAILED)" : "");
    return failed ? 1 : 0;
}

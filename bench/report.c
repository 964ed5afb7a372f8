/*
 * adag-bench's output: the table (one line per result, with a second line
 * for the hop and collective rows) and --json (one object per result).
 */
#include "bench.h"

#include <stdio.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

static const char *metric_name(metric_t m)
{
    static const char *names[] = {"latency", "throughput", "bandwidth", "cpu", "time"};
    return names[m];
}

const char *bench_mech_name(dev_mech_t m)
{
    return m == DEV_MECH_IPC_EVENT ? "ipc-event" : m == DEV_MECH_MEMOPS ? "memops" : "";
}

const char *bench_path_name(dev_path_t p)
{
    static const char *names[] = {"", "zero-copy", "peer", "h2d", "d2h", "h2d-zero-copy"};
    return names[p];
}

static void size_text(size_t bytes, char *buf, size_t n)
{
    if (bytes >= MiB && bytes % MiB == 0)
        snprintf(buf, n, "%zu MiB", bytes / MiB);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(buf, n, "%zu KiB", bytes / 1024);
    else
        snprintf(buf, n, "%zu B", bytes);
}

static void params_text(const result_t *r, char *buf, size_t n)
{
    char spin[32] = "", size[32];
    if (r->spin_ns >= 0)
        snprintf(spin, sizeof spin, " spin=%lld", (long long)r->spin_ns);
    size_text(r->bytes, size, sizeof size);
    /* placement rows: "chain n=4 k=8 pinned", "device-hop host on", "payload 1 MiB on"
     * (no variant when skipped) */
    if (r->llm) /* "tp=2 pp=2 b=8 k=2 emu": bucket, in flight, device */
        snprintf(buf, n, "tp=%d pp=%d b=%d k=%u %s", r->tp, r->pp, r->bucket, r->inflight,
                 r->llm_device);
    else if (r->scenario[0] && !strcmp(r->scenario, "chain"))
        snprintf(buf, n, "chain n=%u k=%u %s", r->n, r->inflight, r->variant);
    else if (r->scenario[0] && r->device[0])
        snprintf(buf, n, "%s %s %s", r->scenario, r->device, r->variant);
    else if (r->scenario[0])
        snprintf(buf, n, "%s %s %s", r->scenario, size, r->variant);
    else if (!strcmp(r->name, "allreduce")) /* "4 ranks f32 sum 4 KiB" */
        snprintf(buf, n, "%u ranks f32 sum %s", r->n, size);
    else if (!strcmp(r->name, "allreduce-dag") || !strcmp(r->name, "allreduce-nccl-dag"))
        snprintf(buf, n, "%u members i32 sum %s", r->n, size);
    else if (r->device[0] && r->hops) /* "emu 0->0 zero-copy 64 B memops" */
        snprintf(buf, n, "%s 0->%d %s %s%s%s", r->device, r->path == DEV_PATH_PEER,
                 bench_path_name(r->path), size, r->mechanism[0] ? " " : "", r->mechanism);
    else if (r->device[0] && r->path == DEV_PATH_PEER)
        snprintf(buf, n, "%s 0->1 peer %s", r->device, size);
    else if (r->device[0]) /* "emu h2d 16 MiB x2 k=2": copies of the bytes, in flight */
        snprintf(buf, n, "%s %s %s x%u k=%u", r->device, bench_path_name(r->path), size,
                 r->copies, r->inflight);
    else if (!strncmp(r->name, "payload", 7))
        snprintf(buf, n, "%zu B", r->bytes);
    else if (!strcmp(r->name, "compile") || !strcmp(r->name, "teardown") ||
             !strcmp(r->name, "idle"))
        snprintf(buf, n, "n=%u", r->n);
    else
        snprintf(buf, n, "n=%u k=%u%s", r->n, r->inflight, spin);
}

void bench_print_table(FILE *out, const result_t *results, unsigned nresults)
{
    fprintf(out, "%-16s %-7s %-26s %10s %10s %11s %8s  %-30s %11s %7s %11s %8s\n", "scenario",
            "actors", "params", "median_us", "p99_us", "per_s", "GB/s", "baseline", "base", "ratio",
            "ray", "vs ray");
    for (unsigned i = 0; i < nresults; i++) {
        const result_t *r = &results[i];
        char params[64], value[64] = "", ray[32] = "-", vsray[32] = "-";
        params_text(r, params, sizeof params);
        if (r->skipped[0]) {
            fprintf(out, "%-16s %-7s %-26s skipped: %s\n", r->name, r->placement, params,
                    r->skipped);
            continue;
        }
        if (r->metric == METRIC_CPU) {
            fprintf(out, "%-16s %-7s %-26s %10s %10s %11s %8s  %-30s %10.2f%% %6.3fx %11s %8s\n",
                    r->name, r->placement, params, "-", "-", "-", "-", r->baseline,
                    r->baseline_value, r->ratio, "-", "-");
            fprintf(out, "%-16s %-7s %-26s   cpu use: %.3f%% of one core\n", "", "", "",
                    r->m.cpu_pct);
            continue;
        }
        if (r->metric == METRIC_BANDWIDTH)
            snprintf(value, sizeof value, "%.2f GB/s", r->baseline_value);
        else if (r->metric == METRIC_THROUGHPUT)
            snprintf(value, sizeof value, "%.0f/s", r->baseline_value);
        else
            snprintf(value, sizeof value, "%.2f us", r->baseline_value);
        if (r->has_ray) {
            if (r->metric == METRIC_THROUGHPUT)
                snprintf(ray, sizeof ray, "%.0f/s", r->ray.per_s);
            else if (r->metric == METRIC_BANDWIDTH)
                snprintf(ray, sizeof ray, "%.3f GB/s", r->ray.gbps);
            else
                snprintf(ray, sizeof ray, "%.1f us", r->ray.median_us);
            snprintf(vsray, sizeof vsray, "%.1fx", r->ray_ratio);
        }
        char gbps[16] = "-";
        if (r->m.gbps > 0)
            snprintf(gbps, sizeof gbps, "%.3f", r->m.gbps);
        fprintf(out, "%-16s %-7s %-26s %10.2f %10.2f %11.0f %8s  %-30s %11s %6.2fx %11s %8s\n",
                r->name, r->placement, params, r->m.median_us, r->m.p99_us, r->m.per_s, gbps,
                r->baseline, value, r->ratio, ray, vsray);
        if (r->hops && r->baseline_value > 0)
            fprintf(out, "%-16s %-7s %-26s   per hop (%u hops): adag %.2f us, raw %.2f us, "
                         "overhead %.2f us\n",
                    "", "", "", r->hops, r->m.median_us / r->hops, r->baseline_value / r->hops,
                    (r->m.median_us - r->baseline_value) / r->hops);
        if (r->per_collective && r->baseline_value > 0)
            fprintf(out, "%-16s %-7s %-26s   the DAG's cost per collective: %.1f us\n", "", "",
                    "", r->m.median_us - r->baseline_value);
        if (r->llm) {
            char untraced[64] = "";
            if (r->untraced_step_us > 0)
                snprintf(untraced, sizeof untraced, "; untraced step %.1f us (tracing %+.1f %%)",
                         r->untraced_step_us, (r->step_us / r->untraced_step_us - 1) * 100);
            fprintf(out, "%-16s %-7s %-26s   compute %.1f us, collective %.1f us (in the DAG "
                         "%.1f us), overhead %.1f us; other work took %.2f of %d CPUs%s\n",
                    "", "", "", r->compute_us, r->collective_us, r->collective_dag_us,
                    r->overhead_us, r->other_cpus, r->cpus, untraced);
        }
        if (r->has_cost) /* tracing rows */
            fprintf(out, "%-16s %-7s %-26s   cost of tracing: %+.1f %% (median of the rounds' "
                         "%s), medians %+.1f %%, best rounds %+.1f %%, rounds spread %.1fx; "
                         "goal %s: %s\n",
                    "", "", "", r->paired_cost_pct,
                    r->metric == METRIC_LATENCY ? "on / off - 1" : "executions/s off / on - 1",
                    r->cost_pct, r->best_cost_pct, r->spread, r->goal,
                    r->noisy ? "not judged (noise)" : r->goal_met ? "met" : "NOT met");
        else if (r->goal[0] && r->baseline_gbps > 0)
            fprintf(out, "%-16s %-7s %-26s   bus bandwidth: adag %.3f GB/s, MPI %.3f GB/s; "
                         "goal %s: %s\n",
                    "", "", "", r->m.gbps, r->baseline_gbps, r->goal,
                    r->goal_met ? "met" : "NOT met");
        else if (r->goal[0])
            fprintf(out, "%-16s %-7s %-26s   goal %s: %s\n", "", "", "", r->goal,
                    r->goal_met ? "met" : "NOT met");
    }
}

/* s as the body of a JSON string (quotes, backslashes and controls escaped) */
static void json_escaped(FILE *out, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
}

static void print_measure_json(FILE *out, const measure_t *m)
{
    fprintf(out, "\"median_us\": %.3f, \"p99_us\": %.3f, \"per_s\": %.1f, \"gbps\": ", m->median_us,
            m->p99_us, m->per_s);
    if (m->gbps > 0)
        fprintf(out, "%.4f", m->gbps);
    else
        fprintf(out, "null");
}

void bench_print_json(FILE *out, const bench_opts_t *o, const result_t *results,
                      unsigned nresults)
{
    fprintf(out, "[\n");
    for (unsigned i = 0; i < nresults; i++) {
        const result_t *r = &results[i];
        fprintf(out,
                "  {\"name\": \"%s\", \"placement\": \"%s\", \"params\": {\"n\": %u, "
                "\"inflight\": %u, \"bytes\": %zu, \"spin_ns\": %lld, \"seed\": %u",
                r->name, r->placement, r->n, r->inflight, r->bytes, (long long)r->spin_ns, o->seed);
        if (r->device[0])
            fprintf(out, ", \"device\": \"%s\", \"path\": \"%s\", \"hops\": %u, \"copies\": %u",
                    r->device, bench_path_name(r->path), r->hops, r->copies);
        if (r->mechanism[0])
            fprintf(out, ", \"mechanism\": \"%s\"", r->mechanism);
        if (r->llm)
            fprintf(out, ", \"tp\": %d, \"pp\": %d, \"bucket\": %d, \"d_model\": %d, \"cpus\": %d, "
                         "\"device\": \"%s\"",
                    r->tp, r->pp, r->bucket, r->d_model, r->cpus, r->llm_device);
        if (r->scenario[0]) /* placement and tracing rows; variant "" when skipped */
            fprintf(out, ", \"scenario\": \"%s\", \"variant\": \"%s\"", r->scenario,
                    r->variant);
        fprintf(out, "}, \"metric\": \"%s\", \"skipped\": ", metric_name(r->metric));
        if (r->skipped[0]) { /* not run: no figures */
            fprintf(out, "\"");
            json_escaped(out, r->skipped);
            fprintf(out, "\"}%s\n", i + 1 < nresults ? "," : "");
            continue;
        }
        fprintf(out, "null, ");
        print_measure_json(out, &r->m);
        fprintf(out, ", \"cpu_pct\": ");
        if (r->metric == METRIC_CPU)
            fprintf(out, "%.4f", r->m.cpu_pct);
        else
            fprintf(out, "null");
        fprintf(out, ", \"iterations\": %ld, \"baseline\": \"%s\", \"baseline_value\": %.4f, "
                     "\"ratio\": %.4f, ",
                r->m.iterations, r->baseline, r->baseline_value, r->ratio);
        if (r->hops && r->baseline_value > 0)
            fprintf(out, "\"overhead_per_hop_us\": %.3f, ",
                    (r->m.median_us - r->baseline_value) / r->hops);
        if (r->per_collective && r->baseline_value > 0)
            fprintf(out, "\"dag_cost_per_collective_us\": %.3f, ",
                    r->m.median_us - r->baseline_value);
        if (r->llm) {
            fprintf(out, "\"step_us\": %.3f, \"compute_us\": %.3f, \"collective_us\": %.3f, "
                         "\"overhead_us\": %.3f, \"single_us\": %.3f, \"other_cpus\": %.3f, "
                         "\"collective_dag_us\": %.3f, "
                         "\"untraced_step_us\": ",
                    r->step_us, r->compute_us, r->collective_us, r->overhead_us, r->single_us,
                    r->other_cpus, r->collective_dag_us);
            if (r->untraced_step_us > 0)
                fprintf(out, "%.3f, ", r->untraced_step_us);
            else
                fprintf(out, "null, ");
        }
        if (r->has_cost) /* goal_met null: not judged, the rounds too spread */
            fprintf(out, "\"cost_pct\": %.3f, \"paired_cost_pct\": %.3f, \"best_cost_pct\": %.3f, "
                         "\"rounds_spread\": %.3f, ",
                    r->cost_pct, r->paired_cost_pct, r->best_cost_pct, r->spread);
        if (r->goal[0])
            fprintf(out, "\"baseline_gbps\": %.4f, \"goal\": \"%s\", \"goal_met\": %s, ",
                    r->baseline_gbps, r->goal,
                    r->has_cost && r->noisy ? "null" : r->goal_met ? "true" : "false");
        fprintf(out, "\"ray\": ");
        if (r->has_ray) {
            fprintf(out, "{");
            print_measure_json(out, &r->ray);
            fprintf(out, "}, \"vs_ray\": %.3f}", r->ray_ratio);
        } else {
            fprintf(out, "null, \"vs_ray\": null}");
        }
        fprintf(out, "%s\n", i + 1 < nresults ? "," : "");
    }
    fprintf(out, "]\n");
}

/*
 * The placement rows: a scenario of process actors run three ways in the
 * same run, through the public placement parameters only:
 *   - on: no placement parameter, adag's placement decides (by default an
 *     actor bound to a GPU runs on the CPUs of its GPU's NUMA node, its
 *     memory preferring that node; an actor without one is not bound);
 *   - off: cpus = every CPU this process may use (sched_getaffinity), numa
 *     -1, nic "": nothing bound;
 *   - pinned: actor i on the i-th of those CPUs (round robin), numa -1,
 *     nic "": what binding does on this machine.
 * Rounds alternate the three (on, off, pinned, on, ...) so that each sees
 * the same machine: 3, or --reps R of them (at most 15); each variant's
 * figure is the median of its rounds. On
 * and pinned are reported against off. Where each variant put the first
 * actor (adag_actor_placement) goes to stderr.
 */
#include "bench.h"
#include "table.h"

#include "common/cpuset.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#define PLACE_ROUNDS 3      /* rounds of each variant; more with --reps */
#define PLACE_MAX_ROUNDS 15

static const char *const variant_name[] = {"on", "off", "pinned"};

/* The nth CPU of set, counting round robin. */
static int nth_cpu(const cpu_set_t *set, unsigned nth)
{
    unsigned want = nth % (unsigned)CPU_COUNT(set);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set) && want-- == 0)
            return c;
    return -1;
}

int bench_actor_create(const bench_opts_t *o, adag_runtime_h rt, unsigned nth,
                       const adag_actor_params_t *params, adag_actor_h *out)
{
    char cpus[ADAG_CPULIST_MAX];
    adag_actor_params_t q = *params, *p = &q;
    if (o->place != BENCH_PLACE_ON) {
        cpu_set_t set;
        adag__cpus_allowed(&set); /* the CPU list text of the library (common/cpuset.h) */
        if (o->place == BENCH_PLACE_PINNED)
            snprintf(cpus, sizeof cpus, "%d", nth_cpu(&set, nth));
        else
            adag__cpulist_format(&set, cpus, sizeof cpus);
        p->field_mask |= ADAG_ACTOR_PARAM_CPUS | ADAG_ACTOR_PARAM_NUMA | ADAG_ACTOR_PARAM_NIC;
        p->cpus = cpus;
        p->numa = -1;
        p->nic = "";
    }
    TRY(adag_actor_create(rt, p, out));
    if (nth == 0 && o->place_seen) {
        *o->place_seen = (adag_actor_placement_t)ADAG_ACTOR_PLACEMENT_INIT;
        TRY(adag_actor_placement(*out, o->place_seen));
    }
    return 0;
fail:
    return -1;
}

static long scaled(const bench_opts_t *o, long full)
{
    return o->quick ? full / 10 : full;
}

/* One run of the row's scenario, its actors placed as o->place says. */
static int measure(const bench_opts_t *o, const scenario_t *s, measure_t *m)
{
    switch (s->run) {
    case RUN_PLACE_CHAIN:
        return run_chain(o, ADAG_PLACEMENT_PROCESS, s->n, s->inflight, s->spin_ns,
                         scaled(o, s->n > 1 ? 10000 : 20000), m);
    case RUN_PLACE_PAYLOAD: {
        long reps = (long)((512 * MiB) / s->bytes);
        reps = reps > 20000 ? 20000 : reps < 20 ? 20 : reps;
        return run_payload(o, ADAG_PLACEMENT_PROCESS, s->bytes, 0,
                           o->quick ? (reps + 9) / 10 : reps, m);
    }
    case RUN_PLACE_DEV_HOP:
        return run_device_hop(o, s->device, s->path, ADAG_PLACEMENT_PROCESS, DEV_MECH_DEFAULT,
                              s->bytes, scaled(o, 5000), m);
    default:
        return -1;
    }
}

/* "chain n=4 k=1", "payload 1 MiB", "device-hop host 64 B" */
static void row_text(const scenario_t *s, char *buf, size_t len)
{
    if (s->run == RUN_PLACE_CHAIN)
        snprintf(buf, len, "chain n=%u k=%u", s->n, s->inflight);
    else if (s->run == RUN_PLACE_PAYLOAD && s->bytes % MiB == 0)
        snprintf(buf, len, "payload %zu MiB", s->bytes / MiB);
    else if (s->run == RUN_PLACE_PAYLOAD)
        snprintf(buf, len, "payload %zu B", s->bytes);
    else
        snprintf(buf, len, "device-hop %s %zu B", s->device ? s->device : "?", s->bytes);
}

static void print_seen(const char *row, int variant, const adag_actor_placement_t *p)
{
    if (p->struct_size == 0) {
        fprintf(stderr, "adag-bench: placement %s, %s: actor 0's placement unknown\n", row,
                variant_name[variant]);
        return;
    }
    fprintf(stderr,
            "adag-bench: placement %s, %-6s: actor 0 on CPUs %s (%s), numa %d, gpu %s, "
            "nic %s%s\n",
            row, variant_name[variant], p->cpus, p->bound ? "bound" : "not bound", p->numa,
            p->gpu[0] ? p->gpu : "-", p->nic[0] ? p->nic : "UCX's choice",
            p->this_machine ? "" : " (placed on another machine's topology)");
}

measure_t bench_median_round(metric_t metric, const measure_t *m, int rounds)
{
    int pick = 0;
    for (int i = 0; i < rounds; i++) {
        int below = 0;
        for (int j = 0; j < rounds; j++)
            below += bench_primary(metric, &m[j]) < bench_primary(metric, &m[i]);
        if (below == rounds / 2)
            pick = i;
    }
    return m[pick];
}

int run_placement(const bench_opts_t *o, const scenario_t *s, measure_t out[3])
{
    measure_t m[3][PLACE_MAX_ROUNDS];
    adag_actor_placement_t seen[3];
    char row[64];
    int rounds = o->reps > PLACE_MAX_ROUNDS ? PLACE_MAX_ROUNDS
                 : o->reps > PLACE_ROUNDS   ? o->reps
                                            : PLACE_ROUNDS;
    row_text(s, row, sizeof row);
    memset(seen, 0, sizeof seen);
    for (int r = 0; r < rounds; r++) {
        for (int v = 0; v < 3; v++) {
            bench_opts_t vo = *o;
            vo.place = (bench_place_t)v;
            vo.place_seen = r == 0 ? &seen[v] : NULL;
            if (measure(&vo, s, &m[v][r])) {
                fprintf(stderr, "adag-bench: placement %s, %s, round %d failed\n", row,
                        variant_name[v], r + 1);
                return -1;
            }
        }
        if (r == 0)
            for (int v = 0; v < 3; v++)
                print_seen(row, v, &seen[v]);
    }
    for (int v = 0; v < 3; v++)
        out[v] = bench_median_round(s->metric, m[v], rounds);
    return 0;
}

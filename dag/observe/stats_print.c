/*
 * adag_stats_print: a snapshot (dag/observe/stats.c) as text tables, for people:
 * the DAG's counts, the bottleneck, then per actor (shares of its time),
 * per op (counts and times per run) and per channel.
 */
#include "common/out.h"
#include "dag/driver/dag.h"
#include "dag/observe/observe.h"

#include <stdio.h>

/* reaches the snapshot's arrays through the public accessors only */

static double us(uint64_t ns)
{
    return (double)ns / 1e3;
}

static double share(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0;
}

static void print_actors(adag_stats_h s, adag_out_t *out)
{
    int timed = adag_stats_timed(s);
    adag__out_printf(out, "%-20s %-16s %-8s %10s", "actor", "placement", "device", "executions");
    if (timed)
        adag__out_printf(out, " %8s %10s %10s %10s %15s  %s", "busy", "on input", "on room",
                        "since s", "last op, s ago", "now");
    adag__out_putc(out, '\n');
    for (unsigned i = 0; i < adag_stats_nactors(s); i++) {
        adag_actor_stats_t a = ADAG_ACTOR_STATS_INIT;
        if (adag_stats_actor(s, i, &a) != ADAG_OK)
            continue;
        char dev[ADAG_DEVICE_NAME_MAX];
        adag__device_name(a.device, dev);
        if (a.unanswered) { /* no figures: say why, in their place */
            adag__out_printf(out, "%-20s %-16s %-8s %10s  no answer: %s\n", a.name, a.placement,
                            dev, "?", a.unanswered);
            continue;
        }
        adag__out_printf(out, "%-20s %-16s %-8s %10llu", a.name, a.placement, dev,
                        (unsigned long long)a.count);
        if (timed)
            adag__out_printf(out, " %7.1f%% %9.1f%% %9.1f%% %10.1f %15.3f  %s", 100.0 * a.busy,
                            share(a.wait_input_ns, a.elapsed_ns),
                            share(a.wait_room_ns, a.elapsed_ns), (double)a.elapsed_ns / 1e9,
                            (double)a.idle_ns / 1e9, a.doing);
        adag__out_putc(out, '\n');
    }
}

static void print_ops(adag_stats_h s, adag_out_t *out)
{
    int timed = adag_stats_timed(s);
    adag__out_printf(out, "%-20s %3s %-16s %10s", "op of actor", "#", "method", "count");
    if (timed)
        adag__out_printf(out, " %9s %9s %9s %9s %11s %11s", "mean us", "p50 us", "p99 us", "max us",
                        "input us/run", "room us/run");
    adag__out_putc(out, '\n');
    for (unsigned i = 0; i < adag_stats_nops(s); i++) {
        adag_op_stats_t o = ADAG_OP_STATS_INIT;
        if (adag_stats_op(s, i, &o) != ADAG_OK)
            continue;
        adag__out_printf(out, "%-20s %3u %-16s %10llu", o.actor, o.index, o.name,
                        (unsigned long long)o.count);
        if (timed) {
            uint64_t n = o.count ? o.count : 1;
            adag__out_printf(out, " %9.2f %9.2f %9.2f %9.2f %11.2f %11.2f", us(o.compute_mean_ns),
                            us(o.compute_p50_ns), us(o.compute_p99_ns), us(o.compute_max_ns),
                            us(o.wait_input_ns / n), us(o.wait_room_ns / n));
        }
        adag__out_putc(out, '\n');
    }
}

static void print_channels(adag_stats_h s, adag_out_t *out)
{
    adag__out_printf(out, "%-28s %-8s %-20s %10s %14s %6s %12s %7s %12s %12s\n", "channel",
                    "kind", "writer", "values", "bytes", "slots", "slot bytes", "in use",
                    "host memory", "dev memory");
    for (unsigned i = 0; i < adag_stats_nchannels(s); i++) {
        adag_channel_stats_t c = ADAG_CHANNEL_STATS_INIT;
        if (adag_stats_channel(s, i, &c) != ADAG_OK)
            continue;
        char used[16] = "?";
        if (c.in_use >= 0)
            snprintf(used, sizeof(used), "%d", c.in_use);
        adag__out_printf(out, "%-28s %-8s %-20s %10llu %14llu %6u %12zu %7s %12zu %12zu\n",
                        c.name, c.kind, c.writer, (unsigned long long)c.values,
                        (unsigned long long)c.bytes, c.slots, c.slot_bytes, used, c.host_bytes,
                        c.device_bytes);
    }
}

static adag_status_t print_stats(void *arg, adag_out_t *out)
{
    adag_stats_h s = arg;
    const adag_dag_stats_t *c = adag__stats_counts(s);
    adag__out_printf(
        out, "DAG %s: %llu executed, %llu completed, %llu failed, %u in flight at most\n",
        adag__stats_dag_name(s), (unsigned long long)c->executed, (unsigned long long)c->completed,
        (unsigned long long)c->failed, c->max_inflight);
    double busy;
    const char *b = adag_stats_bottleneck(s, &busy);
    unsigned silent = 0;
    for (unsigned i = 0; i < adag_stats_nactors(s); i++) {
        adag_actor_stats_t a = ADAG_ACTOR_STATS_INIT;
        silent += adag_stats_actor(s, i, &a) == ADAG_OK && a.unanswered;
    }
    if (silent)
        adag__out_printf(out,
                        "%u actor%s did not answer (below): their figures are missing and the "
                        "bottleneck is not known\n",
                        silent, silent == 1 ? "" : "s");
    else if (!adag_stats_timed(s))
        adag__out_printf(
            out, "times not measured: compile the DAG with tracing (ADAG_COMPILE_PARAM_TRACE "
                 "or ADAG_TRACE_SPANS) to see them and the bottleneck\n");
    else if (b)
        adag__out_printf(out,
                        "bottleneck: actor %s, busy %.1f%% of its time (the busiest stage: the "
                        "others wait for it)\n",
                        b, 100.0 * busy);
    else
        adag__out_printf(out, "bottleneck: none yet (nothing ran)\n");
    print_actors(s, out);
    print_ops(s, out);
    print_channels(s, out);
    return ADAG_OK;
}

adag_status_t adag_stats_print(adag_stats_h s, adag_writer_t out)
{
    return adag__out_run("adag_stats_print", "stats", s, out, print_stats);
}

adag_status_t adag_stats_format(adag_stats_h s, char *buf, size_t len, size_t *needed)
{
    return adag__out_run_buffer("adag_stats_format", "stats", s, buf, len, needed, print_stats);
}

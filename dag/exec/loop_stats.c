/*
 * An actor loop's figures (dag/exec/loop_stats.h): read from its counters
 * while it runs.
 */
#include "dag/exec/loop.h"

#include "common/error.h"

#include <stdlib.h>
#include <string.h>

adag_status_t adag__loop_trace_copy(adag_loop_t *loop, adag_trace_rec_t **recs, uint64_t *n,
                                   uint64_t *lost)
{
    adag_trace_ring_t *r = loop->trace;
    *recs = NULL;
    *n = *lost = 0;
    if (!r)
        return adag__error(ADAG_ERR_INVALID, "actor %s: DAG %s was compiled without tracing",
                          loop->actor_name, loop->prog.dag_name);
    if (!(*recs = malloc((r->mask + 1) * sizeof(**recs))))
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: a copy of %llu trace records",
                          loop->actor_name, (unsigned long long)(r->mask + 1));
    *n = adag__trace_ring_copy(r, *recs, lost);
    adag__trace_to_ns(*recs, *n);
    return ADAG_OK;
}

/* One op's figures, its durations converted by one ratio (so p50 <= p99
 * <= max hold in ns as in ticks). */
static void op_figures(const adag_op_counters_t *c, uint64_t *hist, double ns_per_tick,
                       adag_op_figures_t *f)
{
#define NS(ticks) ((uint64_t)((double)(ticks) * ns_per_tick))
    f->count = atomic_load_explicit(&c->count, memory_order_relaxed);
    f->wait_input_ns = NS(atomic_load_explicit(&c->wait_input, memory_order_relaxed));
    f->wait_room_ns = NS(atomic_load_explicit(&c->wait_room, memory_order_relaxed));
    f->compute_ns = NS(atomic_load_explicit(&c->compute, memory_order_relaxed));
    f->publish_ns = NS(atomic_load_explicit(&c->publish, memory_order_relaxed));
    uint64_t max = atomic_load_explicit(&c->compute_max, memory_order_relaxed);
    f->compute_max_ns = NS(max);
    adag__hist_copy(&c->compute_hist, hist);
    f->compute_p50_ns = NS(adag__hist_quantile(hist, 0.5, max));
    f->compute_p99_ns = NS(adag__hist_quantile(hist, 0.99, max));
#undef NS
}

adag_status_t adag__loop_figures(adag_loop_t *loop, adag_loop_figures_t *out)
{
    const adag_program_t *p = &loop->prog;
    uint64_t *hist = NULL;
    memset(out, 0, sizeof(*out));
    out->ops = calloc(p->nops + 1, sizeof(*out->ops));
    out->chans = calloc(p->nchans + 1, sizeof(*out->chans));
    hist = malloc(ADAG_HIST_BUCKETS * sizeof(*hist));
    if (!out->ops || !out->chans || !hist) {
        free(hist);
        adag__loop_figures_free(out);
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: the figures of DAG %s",
                          loop->actor_name, p->dag_name);
    }
    out->timed = loop->trace != NULL;
    out->nops = p->nops;
    double ns_per_tick = adag__trace_ns_per_tick();
    for (uint32_t i = 0; i < p->nops; i++)
        op_figures(&loop->op_counters[i], hist, ns_per_tick, &out->ops[i]);
    free(hist);
    if (out->timed && loop->started) {
        uint64_t t0 = loop->t_started, now = adag__trace_clock();
        uint64_t last = atomic_load_explicit(&loop->t_last, memory_order_relaxed);
        out->elapsed_ns = t0 && now > t0 ? adag__trace_ticks_to_ns(now - t0) : 0;
        out->idle_ns = last && now > last ? adag__trace_ticks_to_ns(now - last) : 0;
        out->doing = atomic_load_explicit(&loop->doing, memory_order_relaxed);
    }
    for (uint32_t i = 0; i < p->nchans; i++) {
        if (p->chans[i].reader >= 0 || !loop->chans[i])
            continue;
        adag_chan_figures_t *f = &out->chans[out->nchans++];
        f->chan = i;
        f->values = atomic_load_explicit(&loop->chan_counters[i].values, memory_order_relaxed);
        f->bytes = atomic_load_explicit(&loop->chan_counters[i].bytes, memory_order_relaxed);
        f->in_use = adag__chan_in_use(loop->chans[i]);
    }
    return ADAG_OK;
}

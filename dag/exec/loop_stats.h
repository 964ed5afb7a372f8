/*
 * What an actor loop counts (dag/exec/loop.c) and the figures read from it
 * (adag_dag_stats_take, the worker's STATS_DAG answer). Counts of ops,
 * values and bytes are kept always (one add each); times only when the
 * DAG is traced (a span clock read at every boundary of an op, which the
 * trace ring's record shares). The loop thread is the only writer:
 * relaxed loads and stores, no locked instruction; any thread reads.
 */
#ifndef ADAG_DAG_LOOP_STATS_H
#define ADAG_DAG_LOOP_STATS_H

#include "common/figures.h"
#include "common/hist.h"

#include <adag.h>
#include <stdatomic.h>
#include <stdint.h>

/* One op's counters. Times in span-clock ticks. */
typedef struct {
    _Atomic uint64_t count;
    _Atomic uint64_t wait_input, wait_room, compute, publish, compute_max;
    adag_hist_t compute_hist;
} adag_op_counters_t;

/* A channel's, counted by its writer. */
typedef struct {
    _Atomic uint64_t values, bytes;
} adag_chan_counters_t;

/* Adds to a counter of this thread's own. */
static inline void adag__counter_add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          memory_order_relaxed);
}


#endif

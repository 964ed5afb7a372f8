/*
 * The figures of an actor loop (dag/exec/loop_stats.h counts them): what a
 * worker sends in its STATS_DAG reply and what adag_dag_stats_take reads
 * (include/adag/stats.h).
 */
#ifndef ADAG_COMMON_FIGURES_H
#define ADAG_COMMON_FIGURES_H

#include <stdint.h>
#include <stdlib.h>

/* What a loop does now (adag_loop_figures_t.doing & 0xff; the op is
 * doing >> 8). */
enum {
    ADAG_DOING_UNKNOWN = 0, /* not traced */
    ADAG_DOING_INPUT = 1,   /* waiting for an input */
    ADAG_DOING_ROOM = 2,    /* waiting for room in an output */
    ADAG_DOING_COMPUTE = 3, /* running the op's method (or collective) */
    ADAG_DOING_PUBLISH = 4, /* publishing its outputs */
};

/* One op's figures (ns). */
typedef struct {
    uint64_t count, wait_input_ns, wait_room_ns, compute_ns, publish_ns;
    uint64_t compute_max_ns, compute_p50_ns, compute_p99_ns;
} adag_op_figures_t;

/* A channel a loop (or the driver) writes. in_use: its slots published
 * and not yet released by every reader, now (UINT32_MAX: its backend
 * cannot tell). */
typedef struct {
    uint32_t chan; /* the program's channel index (the driver: its channel) */
    uint32_t in_use;
    uint64_t values, bytes;
} adag_chan_figures_t;

/* A loop's figures: per op of its program, per channel it writes. */
typedef struct {
    uint32_t timed;      /* times measured (the DAG is traced) */
    uint64_t elapsed_ns; /* since the loop started (timed loops) */
    uint64_t idle_ns;    /* since its last op ended: waiting, or in an op, now (timed) */
    uint32_t doing;      /* ADAG_DOING_* | op << 8, now (timed) */
    uint32_t nops, nchans;
    adag_op_figures_t *ops;
    adag_chan_figures_t *chans;
} adag_loop_figures_t;

static inline void adag__loop_figures_free(adag_loop_figures_t *f)
{
    free(f->ops);
    free(f->chans);
    f->ops = NULL;
    f->chans = NULL;
    f->nops = f->nchans = 0;
}

#endif

/*
 * Device graphs of a device-bound actor's capturable methods
 * (adag_compile_params_t.graphs, adag_class_def_t.capturable; gpu/device.h's
 * stream capture). A call op of such a method has a pattern per slot
 * index: the execution's number modulo the least common multiple of the
 * slot counts of the op's channels, which is what decides the buffers the
 * method sees (its input slots, its return slots). Per pattern:
 *
 *   WARM     the first execution calls the method as usual (lazy set-up,
 *            first allocations), then
 *   CAPTURE  the next calls it with the compute stream capturing, ends
 *            the capture and launches what was recorded (the execution's
 *            work, which the capture did not run); what the call gave its
 *            returns (which were written, their sizes and shapes) and the
 *            buffers of its inputs and returns are kept; then
 *   REPLAY   every later execution launches the pattern's graph instead
 *            of calling the method, with those returns, after checking
 *            that its inputs have the captured sizes, dtypes and shapes
 *            (else it fails, naming the input) and lie where they did, as
 *            its return slots (else the method runs as usual: a channel
 *            that does not keep its values in fixed slots).
 *
 * A capture that fails (an illegal operation in the method, a return set
 * with adag_call_set_output, whose bytes come from the host) fails that
 * execution with ADAG_ERR_METHOD naming actor.method and what, destroys
 * the op's graphs and leaves the op uncaptured from then on. Everything
 * here runs on the loop thread, under the actor's call lock.
 */
#include "common/error.h"
#include "common/log.h"
#include "dag/exec/loop.h"
#include "gpu/device.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRAPH_PATTERNS_MAX 256

enum { PAT_WARM = 0, PAT_CAPTURE, PAT_REPLAY };

typedef struct {
    int state;
    adag_dev_graph_t *g;
    uint32_t written, handed;
    size_t sizes[ADAG_MAX_RETURNS];
    adag_tensor_meta_t metas[ADAG_MAX_RETURNS];
    void *bufs[ADAG_MAX_RETURNS];
    const void *arg_data[ADAG_MAX_ARGS];
    size_t arg_size[ADAG_MAX_ARGS];
    adag_tensor_meta_t arg_meta[ADAG_MAX_ARGS];
} pattern_t;

struct adag_loop_graph {
    uint32_t period; /* 0: the op is not captured */
    pattern_t *pats;
};

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The op's pattern count, or 0 past GRAPH_PATTERNS_MAX. */
static uint32_t period_of(const adag_loop_t *loop, const adag_prog_op_t *op)
{
    uint64_t l = 1;
    for (uint32_t i = 0; i < op->nargs + op->nrets; i++) {
        uint32_t c = i < op->nargs ? op->args[i] : op->rets[i - op->nargs];
        uint64_t n = loop->prog.chans[c].nslots ? loop->prog.chans[c].nslots : 1;
        l = l / gcd64(l, n) * n;
        if (l > GRAPH_PATTERNS_MAX)
            return 0;
    }
    return (uint32_t)l;
}

adag_status_t adag__loop_graphs_open(adag_loop_t *loop)
{
    if (!loop->prog.graphs || !loop->actor.device)
        return ADAG_OK;
    loop->graphs = calloc(loop->prog.nops, sizeof(*loop->graphs));
    if (!loop->graphs)
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: device graphs of %u operations",
                           loop->actor_name, loop->prog.nops);
    for (uint32_t i = 0; i < loop->prog.nops; i++) {
        const adag_prog_op_t *op = &loop->prog.ops[i];
        if (op->kind != ADAG_OP_CALL || !loop->methods[op->method].capturable)
            continue;
        uint32_t period = period_of(loop, op);
        if (!period) {
            ADAG_LOG_WARN("actor %s.%s: not captured into device graphs: its channels' slot "
                          "counts make more than %d slot patterns",
                          loop->actor_name, loop->methods[op->method].name, GRAPH_PATTERNS_MAX);
            continue;
        }
        if (!(loop->graphs[i].pats = calloc(period, sizeof(pattern_t)))) {
            adag__loop_graphs_close(loop);
            return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: device graphs of %u patterns",
                               loop->actor_name, period);
        }
        loop->graphs[i].period = period;
    }
    return ADAG_OK;
}

/* Destroys an op's graphs (their launches may still run: the backend
 * frees each once they did). */
static void drop_op(adag_loop_t *loop, adag_loop_graph_t *og)
{
    const adag_chan_device_t *d = loop->actor.device;
    for (uint32_t k = 0; og->pats && k < og->period; k++)
        if (og->pats[k].g)
            d->dev->ops->graph_destroy(d->dev, og->pats[k].g);
    free(og->pats);
    og->pats = NULL;
    og->period = 0;
}

void adag__loop_graphs_close(adag_loop_t *loop)
{
    if (!loop->graphs)
        return;
    for (uint32_t i = 0; i < loop->prog.nops; i++)
        drop_op(loop, &loop->graphs[i]);
    free(loop->graphs);
    loop->graphs = NULL;
}

/* Fails the call's execution with ADAG_ERR_METHOD and "actor A.m: ...". */
static adag_status_t fail_call(adag_loop_t *loop, struct adag_call *call, const char *fmt, ...)
    ADAG_PRINTF(3, 4);
static adag_status_t fail_call(adag_loop_t *loop, struct adag_call *call, const char *fmt, ...)
{
    char what[ADAG_SLOT_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (call->fail_status == ADAG_OK) {
        snprintf(call->msg, sizeof(call->msg), "actor %s.%s: %s", loop->actor_name,
                 adag__call_method_name(call), what);
        call->fail_status = ADAG_ERR_METHOD;
    }
    return ADAG_OK;
}

static int same_meta(const adag_tensor_meta_t *a, const adag_tensor_meta_t *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return 0;
    for (uint32_t d = 0; d < a->ndim && d < ADAG_MAX_DIMS; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

static adag_status_t capture(adag_loop_t *loop, adag_loop_graph_t *og, pattern_t *p,
                             const adag_prog_op_t *op, struct adag_call *call)
{
    const adag_chan_device_t *d = loop->actor.device;
    const adag_device_ops_t *o = d->dev->ops;
    const adag_method_info_t *m = &loop->methods[op->method];
    adag_dev_graph_t *g = NULL;
    adag_status_t st = o->stream_capture_begin(d->compute);
    if (st != ADAG_OK) {
        fail_call(loop, call, "graph capture: %s", adag_last_error());
        drop_op(loop, og);
        return ADAG_OK;
    }
    adag_status_t mst = m->fn(loop->state, call);
    st = o->stream_capture_end(d->compute, &g);
    if (mst != ADAG_OK || call->fail_status != ADAG_OK) {
        /* the method's own failure, reported as usual; captured again next time */
        if (g)
            o->graph_destroy(d->dev, g);
        return mst;
    }
    if (st != ADAG_OK) {
        fail_call(loop, call, "graph capture (adag_compile_params_t.graphs) of a method "
                  "declared capturable: %s; the method runs uncaptured from now on",
                  adag_last_error());
        drop_op(loop, og);
        return ADAG_OK;
    }
    uint32_t host_set = call->written & ~call->handed;
    if (host_set) {
        unsigned r = 0;
        while (!(host_set >> r & 1))
            r++;
        o->graph_destroy(d->dev, g);
        fail_call(loop, call, "graph capture (adag_compile_params_t.graphs): return %u was set "
                  "with adag_call_set_output, whose bytes come from the host, not from the "
                  "device work a graph replays; the method runs uncaptured from now on", r);
        drop_op(loop, og);
        return ADAG_OK;
    }
    /* the capture recorded this execution's work without running it */
    if ((st = o->graph_launch(g, d->compute)) != ADAG_OK) {
        o->graph_destroy(d->dev, g);
        fail_call(loop, call, "launching its captured graph: %s", adag_last_error());
        drop_op(loop, og);
        return ADAG_OK;
    }
    call->used_stream = 1;
    p->g = g;
    p->written = call->written;
    p->handed = call->handed;
    for (uint32_t r = 0; r < op->nrets; r++) {
        p->sizes[r] = call->sizes[r];
        p->metas[r] = call->metas[r];
        p->bufs[r] = call->bufs[r];
    }
    for (uint32_t a = 0; a < op->nargs; a++) {
        p->arg_data[a] = call->args[a].data;
        p->arg_size[a] = call->args[a].size;
        p->arg_meta[a] = call->args[a].meta;
    }
    p->state = PAT_REPLAY;
    return ADAG_OK;
}

static adag_status_t replay(adag_loop_t *loop, pattern_t *p, const adag_prog_op_t *op,
                            struct adag_call *call)
{
    const adag_chan_device_t *d = loop->actor.device;
    int moved = 0;
    for (uint32_t a = 0; a < op->nargs; a++) {
        const adag_slot_view_t *v = &call->args[a];
        if (v->size != p->arg_size[a] || !same_meta(&v->meta, &p->arg_meta[a]))
            return fail_call(loop, call,
                             "argument %u (channel %s) is %zu bytes, its captured graph was "
                             "recorded with %zu bytes of the same dtype and shape: a method "
                             "replayed from a device graph needs static shapes",
                             a, loop->prog.chans[op->args[a]].name, v->size, p->arg_size[a]);
        moved |= v->data != p->arg_data[a];
    }
    for (uint32_t r = 0; r < op->nrets; r++)
        moved |= call->bufs[r] != p->bufs[r];
    /* a channel that does not keep its values in fixed slots: the graph's
     * addresses are not this execution's, so the method runs as usual */
    if (moved)
        return loop->methods[op->method].fn(loop->state, call);
    adag_status_t st = d->dev->ops->graph_launch(p->g, d->compute);
    if (st != ADAG_OK)
        return fail_call(loop, call, "launching its captured graph: %s", adag_last_error());
    call->written = p->written;
    call->handed = p->handed;
    for (uint32_t r = 0; r < op->nrets; r++) {
        call->sizes[r] = p->sizes[r];
        call->metas[r] = p->metas[r];
    }
    call->used_stream = 1;
    return ADAG_OK;
}

adag_status_t adag__loop_graph_call(adag_loop_t *loop, const adag_prog_op_t *op,
                                    struct adag_call *call)
{
    adag_loop_graph_t *og = &loop->graphs[op - loop->prog.ops];
    const adag_method_info_t *m = &loop->methods[op->method];
    if (!og->period)
        return m->fn(loop->state, call);
    pattern_t *p = &og->pats[call->seq % og->period];
    switch (p->state) {
    case PAT_WARM: {
        adag_status_t st = m->fn(loop->state, call);
        if (st == ADAG_OK && call->fail_status == ADAG_OK)
            p->state = PAT_CAPTURE;
        return st;
    }
    case PAT_CAPTURE:
        return capture(loop, og, p, op, call);
    }
    return replay(loop, p, op, call);
}

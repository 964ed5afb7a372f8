/*
 * The emulated device's graphs (gpu/device.h, stream_capture_begin): a
 * capture keeps the operations enqueued on its stream (gpu/host_stream.c
 * hands each to capture_take, its capture hook, instead of queueing it),
 * and a graph's launch is ONE operation, step work (OP_STEPS, run_step)
 * that runs them in order on the stream it was launched on: what the
 * launch costs the launching thread is one enqueue plus a ticket per event
 * node, whatever the graph's length. host_stream.c never calls this file
 * (the hook is a pointer it loads; a launch carries its step and release
 * functions), so calls between the two go one way.
 *
 * Per launch (the operation's arguments, graph_run_t): the shift added to
 * the value ops' values, the tickets of the graph's event nodes, taken at the launch as event_record
 * and stream_wait_event take theirs at the call, and where a node is run
 * up to, so that a helper (stream_sync) that runs the launch up to its
 * deadline leaves it for the stream thread to go on. Each node runs on a
 * copy of its recorded arguments (launch_host's bytes, launch_steps'
 * progress), so every launch starts from what was recorded. A helper may
 * run a launch only if it may run every node of the graph.
 *
 * Memory ordering: the hook is stored with release by the first capture
 * and loaded with acquire by every enqueue; the graph is immutable once
 * stream_capture_end returns it; a launch reaches the stream thread through the queue's mutex, and
 * its references (`refs`, acq_rel on the last drop) keep the graph until
 * its last launch ran.
 */
#include "common/error.h"
#include "gpu/capture.h"
#include "gpu/host_impl.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    stream_op_t *op;  /* as enqueued, arguments copied after it */
    size_t args_size; /* those bytes (launch_host, launch_steps) */
    size_t slot;      /* OP_RECORD, OP_WAIT: its ticket in a launch */
} graph_node_t;

/* What a capture records (adag_capture_t.impl). */
typedef struct {
    graph_node_t *nodes;
    size_t n, cap;
} capture_work_t;

struct adag_dev_graph {
    host_dev_t *dev;
    graph_node_t *nodes;
    size_t n;
    size_t *events; /* the nodes that record or wait on an event */
    size_t nevents;
    int helpable;  /* a helper may run every node */
    int has_steps; /* a launch keeps an OP_STEPS node's progress */
    _Atomic int refs; /* the owner and every launch not yet run */
};

typedef struct {
    adag_dev_graph_t *g;
    uint64_t shift; /* added to the value of each value op */
    size_t next;  /* the node to run */
    int started;  /* it began (its arguments are in the scratch) */
    uint64_t tickets[]; /* nevents, then (has_steps) the scratch */
} graph_run_t;

static size_t scratch_offset(const adag_dev_graph_t *g)
{
    size_t off = sizeof(graph_run_t) + g->nevents * sizeof(uint64_t);
    return (off + 15) & ~(size_t)15;
}

static size_t run_size(const adag_dev_graph_t *g)
{
    return g->has_steps ? scratch_offset(g) + ADAG_DEVICE_ARGS_MAX : scratch_offset(g);
}

static const char *op_name(op_kind_t k)
{
    switch (k) {
    case OP_COPY:
        return "copy_async";
    case OP_HOST_FN:
        return "host_fn";
    case OP_STEPS:
        return "launch_steps";
    case OP_RECORD:
        return "event_record";
    case OP_WAIT:
        return "stream_wait_event";
    case OP_WRITE_VALUE:
        return "stream_write_value64";
    case OP_WAIT_VALUE:
        return "stream_wait_value64";
    case OP_STOP:
        break;
    }
    return "stream_destroy";
}

static void free_nodes(graph_node_t *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        adag__host_op_free(nodes[i].op);
    free(nodes);
}

static adag_status_t run_step(void *arg, int64_t deadline);

static int capture_take(adag_dev_stream_t *s, stream_op_t *op, size_t size, adag_status_t *st)
{
    if (!adag__capture_any() || op->kind == OP_STOP)
        return 0;
    adag__capture_lock();
    adag_capture_t *c = adag__capture_of_locked(s);
    if (!c) {
        adag__capture_unlock();
        return 0;
    }
    capture_work_t *w = c->impl;
    *st = ADAG_OK;
    if (c->illegal[0])
        *st = adag__capture_invalidated_locked(c, op_name(op->kind));
    else if (op->kind == OP_STEPS && op->step == run_step)
        *st = adag__capture_illegal_locked(c, "graph_launch on the capturing stream");
    else if (op->kind == OP_RECORD)
        *st = adag__capture_note_event(c, op->ev);
    if (*st == ADAG_OK && w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        graph_node_t *nodes = realloc(w->nodes, cap * sizeof(*nodes));
        if (!nodes)
            *st = adag__error(ADAG_ERR_NO_MEMORY, "%s: %s in a capture: out of memory", c->who,
                              op_name(op->kind));
        else {
            w->nodes = nodes;
            w->cap = cap;
        }
    }
    if (*st == ADAG_OK)
        w->nodes[w->n++] = (graph_node_t){op, op->arg == op->args ? size : 0, 0};
    adag__capture_unlock();
    if (*st != ADAG_OK)
        adag__host_op_free(op);
    return 1;
}

/* A launch, as step work: ADAG_ERR_TIMEOUT if a node kept to the
 * deadline without finishing (the run goes on from it), else ADAG_OK. */
static adag_status_t run_step(void *arg, int64_t deadline)
{
    graph_run_t *run = arg;
    const adag_dev_graph_t *g = run->g;
    unsigned char *scratch = g->has_steps ? (unsigned char *)run + scratch_offset(g) : NULL;
    for (; run->next < g->n; run->next++, run->started = 0) {
        const graph_node_t *nd = &g->nodes[run->next];
        stream_op_t one = *nd->op; /* the fixed part: the arguments are placed below */
        alignas(16) unsigned char args[ADAG_DEVICE_ARGS_MAX];
        if (one.kind == OP_RECORD || one.kind == OP_WAIT)
            one.ticket = run->tickets[nd->slot];
        else if (one.kind == OP_WRITE_VALUE || one.kind == OP_WAIT_VALUE)
            one.ticket += run->shift; /* the value (mod 2^64) */
        if (nd->args_size && one.kind == OP_STEPS) {
            if (!run->started) /* a fresh copy; later calls go on with its progress */
                memcpy(scratch, nd->op->args, nd->args_size);
            one.arg = scratch;
        } else if (nd->args_size) {
            memcpy(args, nd->op->args, nd->args_size);
            one.arg = args;
        }
        run->started = 1;
        if (!adag__host_op_run(&one, deadline))
            return ADAG_ERR_TIMEOUT;
    }
    return ADAG_OK;
}

static void graph_unref(adag_dev_graph_t *g)
{
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
        return;
    free_nodes(g->nodes, g->n);
    free(g->events);
    COUNT(g->dev, graphs, -1);
    free(g);
}

/* A launch's operation is freed: its reference goes. */
static void run_release(void *arg)
{
    graph_unref(((graph_run_t *)arg)->g);
}

adag_status_t adag__host_stream_capture_begin(adag_dev_stream_t *s)
{
    char who[48];
    snprintf(who, sizeof who, "device emu:%u", adag__host_stream_dev(s)->base.index);
    capture_work_t *w = calloc(1, sizeof(*w));
    if (!w)
        return adag__error(ADAG_ERR_NO_MEMORY, "%s: stream_capture_begin: out of memory", who);
    adag_capture_t *c;
    adag_status_t st = adag__capture_begin(s, who, &c);
    if (st != ADAG_OK) {
        free(w);
        return st;
    }
    c->impl = w; /* before any enqueue of this thread can look: it is this thread's stream */
    /* release: a stream thread that loads the hook may call it */
    atomic_store_explicit(&adag__host_capture_hook, capture_take, memory_order_release);
    return ADAG_OK;
}

adag_status_t adag__host_stream_capture_end(adag_dev_stream_t *s, adag_dev_graph_t **out)
{
    host_dev_t *dev = adag__host_stream_dev(s);
    *out = NULL;
    adag_capture_t *c = adag__capture_of(s);
    if (!c)
        return adag__error(ADAG_ERR_INVALID,
                           "device emu:%u: stream_capture_end of a stream that does not capture",
                           dev->base.index);
    capture_work_t *w = c->impl;
    adag_status_t st = adag__capture_end(c);
    adag_dev_graph_t *g = NULL;
    if (st == ADAG_OK && !(g = calloc(1, sizeof(*g))))
        st = adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: stream_capture_end: out of memory",
                         dev->base.index);
    size_t nev = 0;
    for (size_t i = 0; i < w->n; i++)
        nev += w->nodes[i].op->kind == OP_RECORD || w->nodes[i].op->kind == OP_WAIT;
    if (st == ADAG_OK && nev && !(g->events = malloc(nev * sizeof(size_t))))
        st = adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: stream_capture_end: out of memory",
                         dev->base.index);
    if (st != ADAG_OK) {
        free_nodes(w->nodes, w->n);
        free(w);
        free(g);
        return st;
    }
    g->dev = dev;
    g->nodes = w->nodes;
    g->n = w->n;
    g->helpable = 1;
    for (size_t i = 0; i < g->n; i++) {
        graph_node_t *nd = &g->nodes[i];
        g->helpable &= adag__host_op_helpable(nd->op);
        g->has_steps |= nd->op->kind == OP_STEPS;
        if (nd->op->kind == OP_RECORD || nd->op->kind == OP_WAIT) {
            nd->slot = g->nevents;
            g->events[g->nevents++] = i;
        }
    }
    free(w);
    atomic_init(&g->refs, 1);
    COUNT(dev, graphs, 1);
    *out = g;
    return ADAG_OK;
}

adag_status_t adag__host_graph_launch(adag_dev_graph_t *g, adag_dev_stream_t *s, uint64_t shift)
{
    host_dev_t *dev = adag__host_stream_dev(s);
    if (dev != g->dev)
        return adag__error(ADAG_ERR_INVALID,
                           "device emu:%u: graph_launch of a graph of device emu:%u",
                           dev->base.index, g->dev->base.index);
    size_t size = run_size(g);
    alignas(16) unsigned char small[1024];
    graph_run_t *run = size <= sizeof small ? (graph_run_t *)(void *)small : malloc(size);
    if (!run)
        return adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: graph_launch: out of memory",
                           dev->base.index);
    run->g = g;
    run->shift = shift;
    run->next = 0;
    run->started = 0;
    /* the tickets, in node order: a wait after a record of the same event
     * in the graph waits for that record, as it would enqueued one by one */
    for (size_t k = 0; k < g->nevents; k++) {
        const stream_op_t *op = g->nodes[g->events[k]].op;
        run->tickets[k] = adag__host_event_ticket(op->ev, op->kind == OP_RECORD);
    }
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    adag_status_t st = adag__host_enqueue(s, (stream_op_t){.kind = OP_STEPS, .step = run_step,
                                                           .unhelped = !g->helpable,
                                                           .release = run_release},
                                          run, size);
    for (size_t k = 0; k < g->nevents; k++) {
        const stream_op_t *op = g->nodes[g->events[k]].op;
        if (op->kind != OP_RECORD)
            continue;
        if (st == ADAG_OK)
            adag__host_event_recorded_on(op->ev, s);
        else
            adag__host_event_complete(op->ev, run->tickets[k]); /* nobody will reach it */
    }
    if (st != ADAG_OK)
        graph_unref(g);
    if ((void *)run != (void *)small)
        free(run);
    return st;
}

void adag__host_graph_destroy(adag_device_t *d, adag_dev_graph_t *g)
{
    (void)d;
    if (g)
        graph_unref(g);
}

/* ---- the ops a capture changes ---- */

adag_status_t adag__host_graph_copy_async(adag_dev_stream_t *s, void *dst, const void *src,
                                          size_t size)
{
    adag_capture_t *c = adag__capture_of(s);
    if (c && size && (!adag__host_ranges_cover(dst, size) || !adag__host_ranges_cover(src, size)))
        return adag__capture_illegal(c, "copy_async with pageable host memory (%p <- %p, %zu "
                                        "bytes)", dst, src, size);
    return adag__host_copy_async(s, dst, src, size);
}

/* In a capture, records and waits take their tickets at each launch. */
adag_status_t adag__host_graph_event_record(adag_dev_event_t *ev, adag_dev_stream_t *s)
{
    if (!adag__capture_of(s))
        return adag__host_event_record(ev, s);
    return adag__host_enqueue(s, (stream_op_t){.kind = OP_RECORD, .ev = ev}, NULL, 0);
}

adag_status_t adag__host_graph_stream_wait_event(adag_dev_stream_t *s, adag_dev_event_t *ev)
{
    if (!adag__capture_of(s))
        return adag__host_stream_wait_event(s, ev);
    return adag__host_enqueue(s, (stream_op_t){.kind = OP_WAIT, .ev = ev}, NULL, 0);
}

adag_status_t adag__host_graph_stream_sync(adag_dev_stream_t *s, int64_t deadline)
{
    adag_capture_t *c = adag__capture_of(s);
    if (c)
        return adag__capture_illegal(c, "stream_sync of the capturing stream");
    return adag__host_stream_sync(s, deadline);
}

adag_status_t adag__host_graph_event_query(adag_dev_event_t *ev)
{
    adag_status_t st = adag__capture_check_event(ev, "event_query");
    return st != ADAG_OK ? st : adag__host_event_query(ev);
}

adag_status_t adag__host_graph_event_sync(adag_dev_event_t *ev, int64_t deadline)
{
    adag_status_t st = adag__capture_check_event(ev, "event_sync");
    return st != ADAG_OK ? st : adag__host_event_sync(ev, deadline);
}

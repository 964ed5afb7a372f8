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
 *   CAPTURE  the next calls it with the loop's capture stream capturing
 *            (the stream the method is given, adag_call_stream), ends the
 *            capture and launches what was recorded on the compute stream
 *            (the execution's work, which the capture did not run). The
 *            capture stream is the loop's alone: the compute stream is the
 *            actor's, shared with its other DAGs' loops, whose enqueues
 *            there must never land in this DAG's graphs. What the call
 *            gave its returns (which were written, their sizes and shapes)
 *            and the buffers of its inputs and returns are kept; then
 *   REPLAY   every later execution launches the pattern's graph instead
 *            of calling the method, with those returns, after checking
 *            that its inputs have the captured sizes, dtypes and shapes
 *            (else it fails, naming the input) and lie where they did, as
 *            its return slots (else the method runs as usual: a channel
 *            that does not keep its values in fixed slots).
 *
 * With its channels: when every device channel of the op can have its
 * per-execution device work in a graph (adag_chan_ops_t.graphable: a
 * reader on the writer's device and a writer whose readers are all such,
 * by value ops; the op does not run ahead), the graph holds that work too:
 * the inputs' waits for their writers, the returns' waits for their
 * readers' credits, the method's work, then the returns' value records.
 * Their values follow the execution's number, so a replay launches the
 * graph shifted by (seq - the capture's seq). For each such execution of a
 * captured or capturing pattern the loop defers the channels' device work
 * (adag_chan_ops_t.defer) while it reads and acquires on the host; the
 * execution then either captures or replays it, or (an upstream failure,
 * an input of another size, slots that moved) enqueues it on the compute
 * stream as usual (pay_eagerly) and goes on without the graph. A capture
 * whose channel work the device refuses (the value ops cannot be
 * captured there) drops the channels: the op's next captures hold the
 * method alone, this execution's channel work is enqueued as usual.
 *
 * A capture that fails (an illegal operation in the method, a return set
 * with adag_call_set_output, whose bytes come from the host) fails that
 * execution with ADAG_ERR_METHOD naming actor.method and what, destroys
 * the op's graphs and leaves the op uncaptured from then on. Everything
 * here runs on the loop thread; adag__loop_graph_call under the actor's
 * call lock (defer, undefer and pay around the reads, outside it).
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
    uint64_t seq0; /* the execution it was captured in (the value ops' shift) */
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
    int with_chans;        /* its channels' device work is captured too */
    uint64_t deferred_seq; /* seq + 1 of the execution whose channel work is deferred */
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

/* Whether op i's channels may have their device work in its graphs: it
 * has some, every endpoint that hands device memory can (host channels do
 * no device work), and the op does not run ahead. */
static int chans_graphable(const adag_loop_t *loop, uint32_t i)
{
    const adag_prog_op_t *op = &loop->prog.ops[i];
    if (loop->op_ahead && loop->op_ahead[i])
        return 0;
    int some = 0;
    for (uint32_t k = 0; k < op->nargs + op->nrets; k++) {
        adag_chan_t *ch = loop->chans[k < op->nargs ? op->args[k] : op->rets[k - op->nargs]];
        if (!ch->on_device)
            continue;
        if (!adag__chan_graphable(ch))
            return 0;
        some = 1;
    }
    return some;
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
        loop->graphs[i].with_chans = chans_graphable(loop, i);
        if (!(loop->graphs[i].pats = calloc(period, sizeof(pattern_t)))) {
            adag__loop_graphs_close(loop);
            return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: device graphs of %u patterns",
                               loop->actor_name, period);
        }
        loop->graphs[i].period = period;
        if (!loop->capture_stream) {
            const adag_chan_device_t *d = loop->actor.device;
            adag_status_t st = d->dev->ops->stream_create(d->dev, &loop->capture_stream);
            if (st != ADAG_OK) {
                loop->capture_stream = NULL;
                adag__loop_graphs_close(loop);
                adag__error_prefix("actor %s: the stream of its device graphs' captures",
                                   loop->actor_name);
                return st;
            }
        }
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
    /* only ever captured on: no work of its own to wait for */
    if (loop->capture_stream)
        loop->actor.device->dev->ops->stream_destroy(loop->actor.device->dev,
                                                      loop->capture_stream);
    loop->capture_stream = NULL;
}

/* The op's device channels, each once per argument or return. */
#define FOR_DEVICE_CHANS(loop, op, k, ch)                                                     \
    for (uint32_t k = 0; k < (op)->nargs + (op)->nrets; k++)                                   \
        for (adag_chan_t *ch =                                                                 \
                 (loop)->chans[k < (op)->nargs ? (op)->args[k] : (op)->rets[k - (op)->nargs]]; \
             ch && ch->on_device; ch = NULL)

int adag__loop_graph_defer(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq)
{
    adag_loop_graph_t *og = &loop->graphs[op - loop->prog.ops];
    if (!og->period || !og->with_chans || og->pats[seq % og->period].state == PAT_WARM)
        return 0;
    FOR_DEVICE_CHANS(loop, op, k, ch)
        adag__chan_defer(ch, 1);
    og->deferred_seq = seq + 1;
    return 1;
}

void adag__loop_graph_undefer(adag_loop_t *loop, const adag_prog_op_t *op)
{
    FOR_DEVICE_CHANS(loop, op, k, ch)
        adag__chan_defer(ch, 0);
}

/* Enqueues the execution's deferred channel work on s (the inputs that
 * came in OK: a failed one has none), or (s NULL) says it runs in the
 * launched graph. */
static adag_status_t chans_before(adag_loop_t *loop, const adag_prog_op_t *op,
                                  const struct adag_call *call, uint64_t seq,
                                  adag_dev_stream_t *s)
{
    adag_status_t st = ADAG_OK;
    /* an argument's reader endpoint (not the loop's own writer of an
     * earlier op's return, whose work is that op's), a return's writer */
    FOR_DEVICE_CHANS(loop, op, k, ch)
        if (st == ADAG_OK && (k < op->nargs) == (ch->reader >= 0) &&
            (k >= op->nargs || call->args[k].status == ADAG_OK))
            st = adag__chan_device_before(ch, seq, s);
    return st;
}

static adag_status_t chans_after(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                                 adag_dev_stream_t *s)
{
    adag_status_t st = ADAG_OK;
    for (uint32_t r = 0; r < op->nrets && st == ADAG_OK; r++)
        if (loop->chans[op->rets[r]]->on_device)
            st = adag__chan_device_after(loop->chans[op->rets[r]], seq, s);
    return st;
}

/* The deferred channel work of an execution that is not captured nor
 * replayed, enqueued on the compute stream as without graphs. */
static adag_status_t pay_eagerly(adag_loop_t *loop, adag_loop_graph_t *og,
                                 const adag_prog_op_t *op, const struct adag_call *call,
                                 uint64_t seq)
{
    if (og->deferred_seq != seq + 1)
        return ADAG_OK;
    og->deferred_seq = 0;
    return chans_before(loop, op, call, seq, loop->actor.device->compute);
}

adag_status_t adag__loop_graph_pay(adag_loop_t *loop, const adag_prog_op_t *op,
                                   const struct adag_call *call, uint64_t seq)
{
    return pay_eagerly(loop, &loop->graphs[op - loop->prog.ops], op, call, seq);
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

/* The op's channels' device work goes out of its graphs: the graphs
 * captured with it are destroyed, their patterns captured again (their
 * warm-up was done). */
static void drop_chans(adag_loop_t *loop, adag_loop_graph_t *og, const char *why)
{
    const adag_chan_device_t *d = loop->actor.device;
    og->with_chans = 0;
    for (uint32_t k = 0; k < og->period; k++) {
        pattern_t *q = &og->pats[k];
        if (q->g)
            d->dev->ops->graph_destroy(d->dev, q->g);
        q->g = NULL;
        if (q->state == PAT_REPLAY)
            q->state = PAT_CAPTURE;
    }
    ADAG_LOG_WARN("actor %s: device graphs hold its methods' work only, not its channels': %s",
                  loop->actor_name, why);
}

/* The launched graph runs the deferred channel work: the readers' waits
 * are watched, the returns' values are recorded. */
static adag_status_t chans_launched(adag_loop_t *loop, adag_loop_graph_t *og,
                                    const adag_prog_op_t *op, const struct adag_call *call)
{
    if (og->deferred_seq != call->seq + 1)
        return ADAG_OK;
    og->deferred_seq = 0;
    adag_status_t st = chans_before(loop, op, call, call->seq, NULL);
    return st != ADAG_OK ? st : chans_after(loop, op, call->seq, NULL);
}

/* A capture that did not give a graph: the channel work is enqueued as
 * usual, the execution fails with what (ADAG_ERR_METHOD), the op is
 * called from now on. Returns a channel failure (fatal), else ADAG_OK. */
static adag_status_t capture_failed(adag_loop_t *loop, adag_loop_graph_t *og,
                                    const adag_prog_op_t *op, struct adag_call *call,
                                    const char *what)
{
    adag_status_t st = pay_eagerly(loop, og, op, call, call->seq);
    fail_call(loop, call, "%s", what);
    drop_op(loop, og);
    return st;
}

static adag_status_t capture(adag_loop_t *loop, adag_loop_graph_t *og, pattern_t *p,
                             const adag_prog_op_t *op, struct adag_call *call)
{
    const adag_chan_device_t *d = loop->actor.device;
    const adag_device_ops_t *o = d->dev->ops;
    const adag_method_info_t *m = &loop->methods[op->method];
    adag_dev_stream_t *cs = loop->capture_stream;
    adag_dev_graph_t *g = NULL;
    char what[ADAG_SLOT_ERR_MAX];
    int chans = og->deferred_seq == call->seq + 1;
    /* captured on the loop's own stream, launched on the compute stream:
     * another DAG's loop on this actor may enqueue on the compute stream
     * meanwhile (its channels' waits and records), and that work must run
     * now, once, not be recorded into this graph and replayed */
    adag_status_t st = o->stream_capture_begin(cs);
    if (st != ADAG_OK) {
        snprintf(what, sizeof what, "graph capture: %s", adag_last_error());
        return capture_failed(loop, og, op, call, what);
    }
    if (chans && (st = chans_before(loop, op, call, call->seq, cs)) != ADAG_OK) {
        /* the device keeps value ops out of its graphs: the method alone */
        snprintf(what, sizeof what, "%s", adag_last_error());
        if (o->stream_capture_end(cs, &g) == ADAG_OK && g)
            o->graph_destroy(d->dev, g);
        g = NULL;
        drop_chans(loop, og, what);
        chans = 0;
        if ((st = pay_eagerly(loop, og, op, call, call->seq)) != ADAG_OK)
            return st;
        if ((st = o->stream_capture_begin(cs)) != ADAG_OK) {
            snprintf(what, sizeof what, "graph capture: %s", adag_last_error());
            return capture_failed(loop, og, op, call, what);
        }
    }
    call->stream = cs;
    adag_status_t mst = m->fn(loop->state, call);
    call->stream = d->compute;
    adag_status_t ast = ADAG_OK;
    if (chans && mst == ADAG_OK && call->fail_status == ADAG_OK)
        ast = chans_after(loop, op, call->seq, cs);
    if (ast != ADAG_OK)
        snprintf(what, sizeof what, "%s", adag_last_error());
    st = o->stream_capture_end(cs, &g);
    if (mst != ADAG_OK || call->fail_status != ADAG_OK) {
        /* the method's own failure, reported as usual; captured again next time */
        if (g)
            o->graph_destroy(d->dev, g);
        adag_status_t pst = pay_eagerly(loop, og, op, call, call->seq);
        return pst != ADAG_OK ? pst : mst;
    }
    if (ast != ADAG_OK) {
        if (g)
            o->graph_destroy(d->dev, g);
        drop_chans(loop, og, what);
        adag_status_t pst = pay_eagerly(loop, og, op, call, call->seq);
        fail_call(loop, call, "graph capture (adag_compile_params_t.graphs) of its channels' "
                  "value records: %s; captured without them from now on", what);
        return pst;
    }
    if (st != ADAG_OK) {
        snprintf(what, sizeof what, "graph capture (adag_compile_params_t.graphs) of a method "
                 "declared capturable: %s; the method runs uncaptured from now on",
                 adag_last_error());
        return capture_failed(loop, og, op, call, what);
    }
    uint32_t host_set = call->written & ~call->handed;
    if (host_set) {
        unsigned r = 0;
        while (!(host_set >> r & 1))
            r++;
        o->graph_destroy(d->dev, g);
        snprintf(what, sizeof what, "graph capture (adag_compile_params_t.graphs): return %u "
                 "was set with adag_call_set_output, whose bytes come from the host, not from "
                 "the device work a graph replays; the method runs uncaptured from now on", r);
        return capture_failed(loop, og, op, call, what);
    }
    /* the capture recorded this execution's work without running it */
    if ((st = o->graph_launch(g, d->compute, 0)) != ADAG_OK) {
        o->graph_destroy(d->dev, g);
        snprintf(what, sizeof what, "launching its captured graph: %s", adag_last_error());
        return capture_failed(loop, og, op, call, what);
    }
    call->used_stream = 1;
    p->g = g;
    p->seq0 = call->seq;
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
    return chans_launched(loop, og, op, call);
}

static adag_status_t replay(adag_loop_t *loop, adag_loop_graph_t *og, pattern_t *p,
                            const adag_prog_op_t *op, struct adag_call *call)
{
    const adag_chan_device_t *d = loop->actor.device;
    adag_status_t st;
    int moved = 0;
    for (uint32_t a = 0; a < op->nargs; a++) {
        const adag_slot_view_t *v = &call->args[a];
        if (v->size != p->arg_size[a] || !same_meta(&v->meta, &p->arg_meta[a])) {
            if ((st = pay_eagerly(loop, og, op, call, call->seq)) != ADAG_OK)
                return st;
            return fail_call(loop, call,
                             "argument %u (channel %s) is %zu bytes, its captured graph was "
                             "recorded with %zu bytes of the same dtype and shape: a method "
                             "replayed from a device graph needs static shapes",
                             a, loop->prog.chans[op->args[a]].name, v->size, p->arg_size[a]);
        }
        moved |= v->data != p->arg_data[a];
    }
    for (uint32_t r = 0; r < op->nrets; r++)
        moved |= call->bufs[r] != p->bufs[r];
    /* a channel that does not keep its values in fixed slots: the graph's
     * addresses are not this execution's, so the method runs as usual */
    if (moved) {
        if ((st = pay_eagerly(loop, og, op, call, call->seq)) != ADAG_OK)
            return st;
        return loop->methods[op->method].fn(loop->state, call);
    }
    /* its value ops name the capture's execution: shifted to this one */
    st = d->dev->ops->graph_launch(p->g, d->compute, call->seq - p->seq0);
    if (st != ADAG_OK) {
        char what[ADAG_SLOT_ERR_MAX];
        snprintf(what, sizeof what, "%s", adag_last_error());
        if ((st = pay_eagerly(loop, og, op, call, call->seq)) != ADAG_OK)
            return st;
        return fail_call(loop, call, "launching its captured graph: %s", what);
    }
    call->written = p->written;
    call->handed = p->handed;
    for (uint32_t r = 0; r < op->nrets; r++) {
        call->sizes[r] = p->sizes[r];
        call->metas[r] = p->metas[r];
    }
    call->used_stream = 1;
    return chans_launched(loop, og, op, call);
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
    return replay(loop, og, p, op, call);
}

#include "dag/exec/loop.h"
#include "dag/exec/loop_collective.h"
#include "dag/exec/watchdog.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/value.h"
#include "transport/slot_value.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- the loop ---- */

/* The span clock, read only when the loop is traced (0 otherwise). */
static inline uint64_t trace_clock(const adag_loop_t *loop)
{
    return loop->trace ? adag__trace_clock() : 0;
}

/* How many waits of ch waited, so far (backends that count them; else
 * UINT64_MAX: a wait whose time cannot be skipped). */
static inline uint64_t waits_of(const adag_chan_t *ch)
{
    return ch->ops->counts_waits ? atomic_load_explicit(&ch->spin.waited, memory_order_relaxed)
                                 : UINT64_MAX;
}

/* What the loop does now (traced): op index oi, ADAG_DOING_*. */
static inline void doing(adag_loop_t *loop, uint32_t oi, unsigned what)
{
    if (loop->trace)
        atomic_store_explicit(&loop->doing, oi << 8 | what, memory_order_relaxed);
}

/* An op's five stamps (common/trace.h: wait start, inputs in, room got,
 * computed, published), the input it waited for longest, its parts. */
typedef struct {
    uint64_t t[5];
    uint32_t in_chan;
    uint32_t oi; /* the op's index in the program */
    unsigned flags;
} op_times_t;

/* A method's (or collective's) time d into its op's counters. */
static void compute_timed(adag_op_counters_t *c, uint64_t d)
{
    adag__counter_add(&c->compute, d);
    if (d > atomic_load_explicit(&c->compute_max, memory_order_relaxed))
        atomic_store_explicit(&c->compute_max, d, memory_order_relaxed);
    adag__hist_add(&c->compute_hist, d);
}

/* A traced op published: its times into its counters (after its values
 * went, off the path to its readers; its count went before). */
static void op_timed(adag_loop_t *loop, const op_times_t *ot)
{
    adag_op_counters_t *c = &loop->op_counters[ot->oi];
    const uint64_t *t = ot->t;
    adag__counter_add(&c->wait_input, t[1] - t[0]);
    adag__counter_add(&c->wait_room, t[2] - t[1]);
    if (ot->flags & ADAG_OP_COMPUTED)
        compute_timed(c, t[3] - t[2]);
}

/* A traced op published: its record, its publish time; the next wait
 * begins where it ended. */
static void op_done(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq, op_times_t *ot)
{
    uint32_t oi = ot->oi;
    const uint64_t *t = ot->t;
    adag__trace_add_op(loop->trace, oi, ot->flags, ot->in_chan, op->nrets ? op->rets[0] : 0, seq,
                      t);
    op_timed(loop, ot);
    adag__counter_add(&loop->op_counters[oi].publish, t[4] - t[3]);
    atomic_store_explicit(&loop->t_last, t[4], memory_order_relaxed);
}

/* Publishes the op's returns; a channel that cannot take the value fails
 * the loop (the DAG then fails). Traced: ot's last two stamps (the
 * method's end, here if it did not run, and the publish's). */
static adag_status_t publish_all(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                                 const struct adag_call *call, adag_status_t status,
                                 const char *err, op_times_t *ot)
{
    if (loop->trace && !(ot->flags & ADAG_OP_COMPUTED))
        ot->t[3] = ot->t[2];
    /* counted before its values go: a caller that got the result reads it
     * counted */
    adag__counter_add(&loop->op_counters[ot->oi].count, 1);
    doing(loop, ot->oi, ADAG_DOING_PUBLISH);
    adag_status_t st = ADAG_OK;
    for (uint32_t r = 0; r < op->nrets && st == ADAG_OK; r++) {
        const adag_tensor_meta_t *meta =
            status == ADAG_OK && call->metas[r].dtype != ADAG_DTYPE_BYTES ? &call->metas[r] : NULL;
        size_t size = status == ADAG_OK ? call->sizes[r] : 0;
        adag_chan_counters_t *cc = &loop->chan_counters[op->rets[r]];
        adag__counter_add(&cc->values, 1);
        adag__counter_add(&cc->bytes, size);
        st = adag__chan_publish(loop->chans[op->rets[r]], seq, size, meta, status, err);
    }
    if (loop->trace) {
        ot->t[4] = op->nrets ? adag__trace_clock() : ot->t[3];
        op_done(loop, op, seq, ot);
    }
    return st;
}

/* READ: each input of op's execution seq from its ring, checked; the
 * first failure upstream in *upstream (with several inputs, the one waited
 * for longest is named in the trace). The clock is read after every wait,
 * even one that did not wait: its value may have come after the last op
 * ended, and the trace must not show it taken before it was published. */
static adag_status_t read_args(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                               struct adag_call *call, op_times_t *ot, adag_status_t *upstream,
                               const char **upstream_err)
{
    uint64_t longest = 0;
    for (uint32_t a = 0; a < op->nargs; a++) {
        adag_status_t st =
            adag__chan_wait(loop->chans[op->args[a]], seq, ADAG_FOREVER, &call->args[a]);
        if (st != ADAG_OK)
            return st;
        if (loop->trace) {
            uint64_t now = adag__trace_clock();
            if (a == 0 || now - ot->t[1] > longest) {
                longest = now - ot->t[1];
                ot->in_chan = op->args[a];
            }
            ot->t[1] = now;
        }
        /* the slot's metadata is in memory other processes write: checked here */
        st = adag__value_check_slot(&call->args[a], loop->chans[op->args[a]]->name);
        if (st != ADAG_OK)
            return st;
        if (call->args[a].status != ADAG_OK && *upstream == ADAG_OK) {
            *upstream = call->args[a].status;
            *upstream_err = call->args[a].err;
        }
    }
    return ADAG_OK;
}

/* Runs one CALL of execution seq. Returns ADAG_ERR_CLOSED when the DAG is
 * aborted, another error on a fatal failure. Traced, each boundary of the
 * op costs one clock read (the wait begins where the last op ended). */
static adag_status_t run_call(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                              struct adag_call *call)
{
    adag_status_t st, upstream = ADAG_OK;
    const char *upstream_err = NULL;
    op_times_t ot;
    ot.t[0] = ot.t[1] = atomic_load_explicit(&loop->t_last, memory_order_relaxed);
    ot.in_chan = 0;
    ot.oi = (uint32_t)(op - loop->prog.ops);
    ot.flags = (op->nargs ? ADAG_OP_HAS_INPUT : 0) | (op->nrets ? ADAG_OP_HAS_OUTPUT : 0);
    doing(loop, ot.oi, ADAG_DOING_INPUT);

    /* READ, or (ahead) only the views and waits of the inputs, their ring
     * read after the method */
    int ahead = loop->op_ahead && loop->op_ahead[ot.oi] && loop->start_status == ADAG_OK;
    /* (a graph that holds the channels' device work: read and acquire on
     * the host only; dag/exec/loop_graph.c) */
    int deferred = loop->graphs && adag__loop_graph_defer(loop, op, seq);
    st = ahead ? adag__loop_ahead_args(loop, op, seq, call)
               : read_args(loop, op, seq, call, &ot, &upstream, &upstream_err);
    if (st != ADAG_OK)
        return st;
    /* a method of no argument runs as its execution's start says */
    if (op->nargs == 0 && loop->start_status != ADAG_OK) {
        upstream = loop->start_status;
        upstream_err = loop->start_err;
    }
    doing(loop, ot.oi, ADAG_DOING_ROOM);
    /* acquire the return slots (zero-copy writes go straight into them);
     * traced, an acquire that did not wait reads no clock: the method's
     * span begins where the inputs came */
    int waited = 0;
    for (uint32_t r = 0; r < op->nrets; r++) {
        adag_chan_t *ch = loop->chans[op->rets[r]];
        uint64_t waits = loop->trace ? waits_of(ch) : 0;
        st = adag__chan_acquire(ch, seq, ADAG_FOREVER, &call->bufs[r]);
        if (st != ADAG_OK)
            return st;
        waited |= loop->trace && (waits != waits_of(ch) || waits == UINT64_MAX);
        call->sizes[r] = 0;
    }
    ot.t[2] = waited ? adag__trace_clock() : ot.t[1];
    if (deferred) {
        adag__loop_graph_undefer(loop, op);
        if (upstream != ADAG_OK && (st = adag__loop_graph_pay(loop, op, call, seq)) != ADAG_OK)
            return st;
    }
    if (upstream != ADAG_OK)
        return publish_all(loop, op, seq, call, upstream, upstream_err, &ot);
    /* the last op of a host actor is done with every input once its method
     * returns: released before its outputs go, a ucx credit rides with them
     * (a device actor's enqueued work may still read its inputs; an
     * upstream failure's message above is read from an input slot) */
    int release_early = op == &loop->prog.ops[loop->prog.nops - 1] && !loop->actor.device;
    /* COMPUTE */
    call->op = op;
    call->seq = seq;
    call->written = 0;
    call->handed = 0;
    call->fail_status = ADAG_OK;
    call->msg[0] = '\0';
    call->call_err[0] = '\0';
    const adag_method_info_t *m = &loop->methods[op->method];
    /* the actor's lock, contended only by another DAG's call on this
     * actor, is in the compute span */
    doing(loop, ot.oi, ADAG_DOING_COMPUTE);
    call->used_stream = 0;
    call->stream = loop->actor.device ? loop->actor.device->compute : NULL;
    pthread_mutex_lock(loop->call_lock);
    st = loop->graphs ? adag__loop_graph_call(loop, op, call) : m->fn(loop->state, call);
    pthread_mutex_unlock(loop->call_lock);
    if (call->used_stream) {
        loop->stream_dirty = 1;
        adag_status_t sst = adag__loop_settle_returns(loop, op, call);
        if (sst != ADAG_OK)
            return sst; /* aborted */
    }
    ot.t[3] = trace_clock(loop);
    ot.flags |= ADAG_OP_COMPUTED;
    /* WRITE. A method's own failure always reaches the caller as
     * ADAG_ERR_METHOD: the code it returned (a TIMEOUT that would invite
     * retries, a positive value that would look like success) goes in the
     * message. Sizes refused by adag_call_output stay ADAG_ERR_TOO_LARGE. */
    if (call->fail_status != ADAG_OK) {
        st = call->fail_status;
    } else if (st != ADAG_OK) {
        if (call->call_err[0])
            snprintf(call->msg, sizeof(call->msg), "%s", call->call_err);
        else if (st < ADAG_OK && st >= ADAG_ERR_INTERNAL)
            snprintf(call->msg, sizeof(call->msg), "actor %s.%s: returned %s (%d)",
                     loop->actor_name, m->name, adag_status_str(st), (int)st);
        else
            snprintf(call->msg, sizeof(call->msg),
                     "actor %s.%s: returned %d, which is not an adag status (ADAG_OK or an "
                     "ADAG_ERR_* code)",
                     loop->actor_name, m->name, (int)st);
        st = ADAG_ERR_METHOD;
    } else {
        for (uint32_t r = 0; r < op->nrets; r++) {
            if (!(call->written & (1u << r))) {
                st = ADAG_ERR_METHOD;
                snprintf(call->msg, sizeof(call->msg),
                         "actor %s.%s: returned without writing return %u", loop->actor_name,
                         m->name, r);
                break;
            }
        }
    }
    if (ahead) {
        /* the device returns go to readers ahead of the ring; then the
         * inputs' statuses: a failure upstream is what the execution
         * publishes */
        adag_status_t fst;
        if ((st == ADAG_OK && (fst = adag__loop_ahead_publish(loop, op, seq)) != ADAG_OK) ||
            (fst = read_args(loop, op, seq, call, &ot, &upstream, &upstream_err)) != ADAG_OK)
            return fst;
        if (upstream != ADAG_OK)
            return publish_all(loop, op, seq, call, upstream, upstream_err, &ot);
    }
    if (!release_early)
        return publish_all(loop, op, seq, call, st, call->msg, &ot);
    for (unsigned i = 0; i < loop->nreads; i++)
        adag__chan_release_held(loop->chans[loop->reads[i]], seq);
    loop->released = seq + 1;
    st = publish_all(loop, op, seq, call, st, call->msg, &ot);
    for (unsigned i = 0; i < loop->nreads; i++)
        adag__chan_flush(loop->chans[loop->reads[i]]);
    return st;
}

/* A collective op: one span; its time counts as the op's compute. Counted
 * before it runs (it publishes its result), as a call is before its
 * publish. */
static adag_status_t run_collective(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq)
{
    uint32_t oi = (uint32_t)(op - loop->prog.ops);
    adag_op_counters_t *c = &loop->op_counters[oi];
    doing(loop, oi, ADAG_DOING_COMPUTE);
    adag__counter_add(&c->count, 1);
    adag_status_t st = adag__loop_coll_run(loop, op, seq);
    if (loop->trace) {
        uint64_t t0 = atomic_load_explicit(&loop->t_last, memory_order_relaxed);
        uint64_t t1 = adag__trace_clock();
        adag__trace_add(loop->trace, ADAG_SPAN_COLLECTIVE, oi, 0, seq, t0, t1);
        compute_timed(c, t1 - t0);
        atomic_store_explicit(&loop->t_last, t1, memory_order_relaxed);
    }
    return st;
}

static adag_status_t run_op(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                            struct adag_call *call)
{
    switch ((adag_op_kind_t)op->kind) {
    case ADAG_OP_CALL:
        return run_call(loop, op, seq, call);
    case ADAG_OP_COLLECTIVE:
        return run_collective(loop, op, seq);
    }
    return adag__error(ADAG_ERR_INTERNAL, "actor %s: operation of unknown kind %u",
                      loop->actor_name, op->kind);
}

/* A device-bound actor's loop ends after the work its methods enqueued:
 * that work may read the slots of this DAG, which are unmapped once the
 * loop is gone. Bounded by the teardown timeout; past it, said. */
static void drain_device(adag_loop_t *loop)
{
    const adag_chan_device_t *d = loop->actor.device;
    if (!d)
        return;
    int64_t deadline = adag__deadline_ms(loop->actor.settings->teardown_timeout_ms);
    adag_dev_stream_t *streams[2] = {d->compute, d->comm};
    for (unsigned i = 0; i < 2; i++) {
        if (d->dev->ops->stream_sync(streams[i], deadline) != ADAG_OK) {
            ADAG_LOG_ERROR("actor %s: loop of DAG %s ends with device work still running: %s",
                           loop->actor_name, loop->prog.dag_name, adag_last_error());
            return;
        }
    }
}

static void *loop_main(void *arg)
{
    adag_loop_t *loop = arg;
    struct adag_call call;
    adag_slot_view_t start;
    adag_status_t st = ADAG_OK;
    memset(&call, 0, sizeof(call));
    call.loop = loop;
    if (loop->actor.device) {
        const adag_chan_device_t *d = loop->actor.device;
        st = d->dev->ops->bind_thread(d->dev);
        if (st != ADAG_OK) {
            adag__error_prefix("actor %s: loop of DAG %s", loop->actor_name, loop->prog.dag_name);
            adag__loop_fail_dag(loop, st, adag_last_error());
            return NULL;
        }
    }
    if (st == ADAG_OK && ((st = adag__loop_hold_open(loop)) != ADAG_OK ||
                          (st = adag__loop_graphs_open(loop)) != ADAG_OK)) {
        adag__error_prefix("actor %s: loop of DAG %s", loop->actor_name, loop->prog.dag_name);
        adag__loop_fail_dag(loop, st, adag_last_error());
        goto out;
    }
    for (uint64_t seq = 0; st == ADAG_OK; seq++) {
        /* an aborted DAG abandons executions already queued in its channels */
        if (adag__ctx_aborted(loop->ctx))
            goto out;
        /* executions whose host inputs were held for device work: those
         * done, and those whose slots seq's writers need */
        if (loop->held_to > loop->held_from && (st = adag__loop_release_held(loop, seq)) != ADAG_OK)
            break;
        if (loop->prog.start_chan != ADAG_PROG_NO_CHAN) {
            adag_chan_t *sc = loop->chans[loop->prog.start_chan];
            st = adag__chan_wait(sc, seq, ADAG_FOREVER, &start);
            if (st == ADAG_OK)
                st = adag__value_check_slot(&start, sc->name);
            /* a cancelled execution's start carries its status */
            loop->start_status = st == ADAG_OK ? start.status : ADAG_OK;
            loop->start_err = st == ADAG_OK ? start.err : NULL;
        }
        for (uint32_t i = 0; i < loop->prog.nops && st == ADAG_OK; i++)
            st = run_op(loop, &loop->prog.ops[i], seq, &call);
        if (st == ADAG_OK && loop->released <= seq)
            st = adag__loop_end_reads(loop, seq);
    }
    /* Whatever the loop meets (a channel that lost its peer, a malformed
     * slot, a protocol error) fails this DAG only, with the message: the
     * process and its other DAGs go on. ADAG_ERR_CLOSED: the DAG was
     * aborted, by its driver or by this failure elsewhere. */
    if (st != ADAG_ERR_CLOSED) {
        if (st != ADAG_ERR_IO) /* a lost peer's message names the channel and host */
            adag__error_prefix("actor %s: loop of DAG %s", loop->actor_name,
                              loop->prog.dag_name);
        adag__loop_fail_dag(loop, st, adag_last_error());
    }
out:
    adag__loop_turns_end(loop);
    drain_device(loop);
    adag__loop_graphs_close(loop);
    adag__loop_hold_close(loop);
    return NULL;
}

/* The join's deadline: the control timeout (each install step's), and
 * the DAG's communication timeout if shorter. */
static int64_t join_deadline(const adag_loop_t *loop)
{
    int64_t ms = loop->actor.settings->control_timeout_ms;
    if (loop->prog.comm_timeout_ms > 0 && loop->prog.comm_timeout_ms < ms)
        ms = loop->prog.comm_timeout_ms;
    return adag__deadline_ms(ms);
}

static adag_status_t begin_comms(adag_loop_t *loop)
{
    uint32_t n = loop->prog.ncomms;
    if (n == 0)
        return ADAG_OK;
    if (!loop->actor.comms)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "actor %s: DAG %s makes it a communicator rank, but it has no "
                          "table of communicators", loop->actor_name, loop->prog.dag_name);
    loop->comm_device = loop->actor.device;
    adag_status_t st;
    if (!loop->comm_device && (st = adag__actor_comms_host_device(
                                   loop->actor.comms, loop->actor_name, &loop->comm_device)) !=
                                  ADAG_OK)
        return st;
    loop->comm_entries = calloc(n, sizeof(*loop->comm_entries));
    loop->chan_comms = calloc(n, sizeof(*loop->chan_comms));
    if (!loop->comm_entries || !loop->chan_comms)
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", loop->actor_name);
    int64_t deadline = join_deadline(loop);
    for (uint32_t i = 0; i < n; i++) {
        adag_actor_comm_t *e;
        st = adag__actor_comm_begin(loop->actor.comms, &loop->prog.comms[i], loop->comm_device,
                                   loop->actor_name, deadline, &e);
        if (st != ADAG_OK)
            return st;
        if ((st = adag__ctx_hold_comm(loop->ctx, e)) != ADAG_OK)
            return st;
        loop->comm_entries[i] = e;
        loop->chan_comms[i].key = loop->prog.comms[i].key;
    }
    return ADAG_OK;
}

adag_status_t adag__loop_prepare(adag_loop_t *loop, adag_dag_ctx_t *ctx, adag_program_t *prog,
                                const adag_loop_actor_t *actor, adag_wbuf_t *infos)
{
    adag_status_t st;
    uint32_t i;
    const char *actor_name = actor->name;

    memset(loop, 0, sizeof(*loop));
    loop->prog = *prog;
    memset(prog, 0, sizeof(*prog));
    loop->ctx = ctx;
    loop->actor = *actor;
    loop->state = actor->state;
    loop->call_lock = actor->call_lock;
    loop->methods = actor->methods;
    loop->nmethods = actor->nmethods;
    loop->actor_name = actor_name;
    if (loop->prog.trace_spans) {
        loop->trace = calloc(1, sizeof(*loop->trace));
        if (!loop->trace ||
            adag__trace_ring_init(loop->trace, loop->prog.trace_spans, 0) != ADAG_OK) {
            free(loop->trace);
            loop->trace = NULL;
            st = adag__error(ADAG_ERR_NO_MEMORY, "actor %s: trace ring of %llu records",
                            actor_name, (unsigned long long)loop->prog.trace_spans);
            goto fail;
        }
    }
    loop->op_counters = aligned_alloc(64, ((loop->prog.nops * sizeof(adag_op_counters_t) + 63) |
                                           63) + 1);
    loop->chan_counters = calloc(loop->prog.nchans + 1, sizeof(*loop->chan_counters));
    if (!loop->op_counters || !loop->chan_counters) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "actor %s: counters of %u ops", actor_name,
                        loop->prog.nops);
        goto fail;
    }
    memset(loop->op_counters, 0, loop->prog.nops * sizeof(adag_op_counters_t));
    loop->chans = calloc(loop->prog.nchans + 1, sizeof(*loop->chans));
    loop->reads = calloc(loop->prog.nchans + 1, sizeof(*loop->reads));
    if (!loop->chans || !loop->reads) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "actor %s: loop of %u channels", actor_name,
                        loop->prog.nchans);
        goto fail;
    }
    if ((st = begin_comms(loop)) != ADAG_OK)
        goto fail;
    adag_wait_policy_t policy = {loop->prog.spin_ns, (int)loop->prog.spin_yield};
    adag__wbuf_u32(infos, loop->prog.nchans);
    for (i = 0; i < loop->prog.nchans; i++) {
        const adag_prog_chan_t *pc = &loop->prog.chans[i];
        adag_chan_open_params_t op = {
            .name = pc->name,
            .geom = {pc->nslots, pc->nreaders, pc->capacity, pc->comm_key, 0},
            .reader = pc->reader,
            .desc = adag__program_desc(&loop->prog, i),
            .policy = policy,
            .device = actor->device,
            .comms = loop->chan_comms,
            .ncomms = loop->prog.ncomms,
            .has_numa = actor->has_numa,
            .numa = actor->numa,
        };
        adag_wbuf_t info = {0};
        st = adag__ctx_open(ctx, pc->backend, &op, &info, &loop->chans[i]);
        adag__wbuf_bytes(infos, info.data, info.len);
        adag__wbuf_free(&info);
        if (st != ADAG_OK) {
            adag__error_prefix("actor %s", actor_name);
            goto fail;
        }
        if (pc->reader >= 0)
            loop->reads[loop->nreads++] = i;
    }
    if (infos->failed) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", actor_name);
        goto fail;
    }
    if ((st = adag__loop_coll_prepare(loop)) != ADAG_OK ||
        (st = adag__loop_turns_prepare(loop)) != ADAG_OK)
        goto fail;
    return ADAG_OK;
fail:
    /* a DAG that does not install leaves no communicator it named behind:
     * the driver drops them too */
    for (i = 0; loop->comm_entries && i < loop->prog.ncomms; i++)
        if (loop->comm_entries[i])
            adag__actor_comm_drop(loop->actor.comms, loop->prog.comms[i].key);
    adag__loop_close(loop);
    return st;
}

adag_status_t adag__loop_connect(adag_loop_t *loop, adag_blob_t peers)
{
    adag_rbuf_t rb = {peers.data, peers.len, 0, 0};
    adag_blob_t *infos = NULL;
    adag_status_t st = ADAG_OK;
    int64_t deadline = join_deadline(loop);
    for (uint32_t i = 0; i < loop->prog.ncomms; i++)
        if ((st = adag__actor_comm_finish(loop->comm_entries[i], deadline,
                                         &loop->chan_comms[i])) != ADAG_OK)
            return st;
    uint32_t n = adag__rbuf_u32(&rb);
    if (rb.failed || n != loop->prog.nchans)
        return adag__error(ADAG_ERR_PROTOCOL, "actor %s: peers for %u channels, expected %u",
                          loop->actor_name, n, loop->prog.nchans);
    for (uint32_t i = 0; i < n && st == ADAG_OK; i++) {
        adag_chan_t *ch = loop->chans[i];
        uint32_t np = adag__rbuf_u32(&rb);
        if (rb.failed || (np && np != 1 + loop->prog.chans[i].nreaders)) {
            st = adag__error(ADAG_ERR_PROTOCOL, "actor %s, channel %s: %u peers, expected %u",
                            loop->actor_name, ch->name, np, 1 + loop->prog.chans[i].nreaders);
            break;
        }
        if (np == 0)
            continue;
        free(infos);
        if (!(infos = calloc(np, sizeof(*infos)))) {
            st = adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", loop->actor_name);
            break;
        }
        for (uint32_t j = 0; j < np; j++)
            infos[j].data = adag__rbuf_bytes(&rb, &infos[j].len);
        if (rb.failed)
            st = adag__error(ADAG_ERR_PROTOCOL, "actor %s, channel %s: malformed peers",
                            loop->actor_name, ch->name);
        else if (ch->ops->connect && (st = ch->ops->connect(ch, infos, np)) != ADAG_OK)
            adag__error_prefix("actor %s", loop->actor_name);
    }
    free(infos);
    if (st == ADAG_OK && rb.pos != rb.len)
        st = adag__error(ADAG_ERR_PROTOCOL, "actor %s: %zu trailing bytes after the peers",
                        loop->actor_name, rb.len - rb.pos);
    return st;
}

adag_status_t adag__loop_start(adag_loop_t *loop)
{
    if (loop->actor.device || loop->ncolls) {
        adag_status_t st = adag__watchdog_start(
            loop->chans, loop->prog.nchans, loop->ncolls ? adag__loop_coll_watch : NULL, loop,
            loop->prog.comm_timeout_ms, &loop->ctx->abort,
            loop->on_fail ? loop->on_fail : loop->on_fatal,
            loop->on_fail ? loop->fail_ctx : loop->fatal_ctx, loop->actor_name, &loop->watchdog);
        if (st != ADAG_OK)
            return st;
    }
    adag_status_t st = adag__loop_turns_start(loop);
    if (st == ADAG_OK)
        st = adag__loop_ahead_init(loop);
    int err = 0;
    pthread_attr_t attr;
    if (st == ADAG_OK && (err = pthread_attr_init(&attr)) != 0)
        st = adag__error_errno(err, "actor %s: loop thread attributes", loop->actor_name);
    if (st == ADAG_OK) {
        /* a thread actor placed on some CPUs: its loop starts there */
        if (loop->actor.cpus &&
            (err = pthread_attr_setaffinity_np(&attr, sizeof(*loop->actor.cpus), loop->actor.cpus)))
            st = adag__error_errno(err, "actor %s: loop thread CPUs", loop->actor_name);
        /* set before the thread: readers of t_started see it after START;
         * the endpoints add their backends' spans to the loop's ring */
        if (loop->trace) {
            loop->t_started = adag__trace_clock();
            atomic_store_explicit(&loop->t_last, loop->t_started, memory_order_relaxed);
            for (uint32_t i = 0; i < loop->prog.nchans; i++)
                if (loop->chans[i]) {
                    loop->chans[i]->trace = loop->trace;
                    loop->chans[i]->trace_chan = i;
                }
        }
        if (st == ADAG_OK && (err = pthread_create(&loop->thread, &attr, loop_main, loop)) != 0)
            st = adag__error_errno(err, "actor %s: cannot start loop thread", loop->actor_name);
        pthread_attr_destroy(&attr);
    }
    if (st != ADAG_OK) {
        adag__loop_ahead_close(loop);
        adag__loop_turns_close(loop);
        adag__watchdog_stop(loop->watchdog);
        loop->watchdog = NULL;
        return st;
    }
    loop->started = 1;
    return ADAG_OK;
}

void adag__loop_join(adag_loop_t *loop)
{
    if (loop->started) {
        pthread_join(loop->thread, NULL);
        loop->started = 0;
    }
    adag__loop_turns_close(loop);
    adag__watchdog_stop(loop->watchdog);
    loop->watchdog = NULL;
}

void adag__loop_close(adag_loop_t *loop)
{
    adag__loop_join(loop);
    adag__loop_ahead_close(loop);
    adag__loop_coll_close(loop);
    free(loop->chans);
    free(loop->reads);
    free(loop->comm_entries);
    free(loop->chan_comms);
    free(loop->op_counters);
    free(loop->chan_counters);
    loop->op_counters = NULL;
    loop->chan_counters = NULL;
    if (loop->trace) {
        adag__trace_ring_free(loop->trace);
        free(loop->trace);
        loop->trace = NULL;
    }
    loop->chans = NULL;
    loop->reads = NULL;
    loop->comm_entries = NULL;
    loop->chan_comms = NULL;
    adag__program_free(&loop->prog);
}

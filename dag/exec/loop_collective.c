/*
 * One member's part of a collective in its loop (ADAG_OP_COLLECTIVE),
 * per execution seq:
 *
 *   1. its tensor: the value this actor wrote (args[0]), waited for on the
 *      host (the device orders the data);
 *   2. agreement, on the host: it publishes its status channel (its
 *      tensor's status, dtype and shape) and reads every other member's,
 *      by the DAG's comm timeout. Every member then decides alike: a
 *      member whose tensor failed fails every output (the lowest such
 *      member's error), tensors that differ fail them naming both members
 *      (compared with member 0's), and only if all is well does any member
 *      enqueue the collective, so no member ever waits on the device for
 *      a peer that will not come;
 *   3. the collective, on the communicator's stream: it waits for the
 *      compute stream's `issued` event (the tensor written, the result's
 *      slot free), runs, records `done`, which the compute stream waits
 *      for before the result is published (its `ready` comes after).
 *
 * The watchdog checks each slot's `done` the way endpoints are watched. A
 * member that does not reach the agreement in time fails the DAG through
 * the loop's on_fail, naming itself and the member it waited for.
 *
 * A host actor (no device; its tensors in host memory) runs its
 * collectives on its communicators' emulated device (loop->comm_device): its
 * tensor is complete when its method returns, so step 3 enqueues at once,
 * and the loop waits for `done` before it publishes the result, which
 * lives in the output's host slot. A member that never comes is the
 * watchdog's again: the DAG fails, its communicators are aborted and the
 * collective, and so the wait, ends.
 */

/*
 * Turns on shared communicators (dag/exec/actor_comm.h, "turns"):
 * several live DAGs over the same actors run their collectives on one
 * communicator, each execution within the turn of the ticket the driver
 * published for it on the communicator's ticket channel.
 *
 * Per execution seq and shared communicator, the loop takes the turn at
 * its first collective on it and ends it after the last one (the
 * program's ncolls), once each is issued (host tensors: completed).
 *
 * When the DAG fails, a shared communicator stays usable for the other
 * DAGs unless this one was inside a collective on it: holding a turn (a
 * member did not come to the agreement), or with a collective issued on a
 * device stream and not yet completed (a peer may never issue its side).
 * Then it is aborted, with the reason the loop that failed recorded first
 * (adag__loop_turn_blame), and every loop of every other DAG on it fails
 * its DAG with that reason: from its watchdog (adag__loop_turns_watch), so
 * within a period wherever the loop waits, or at its next turn or
 * collective, whichever comes first. A loop that ends gives
 * up the tickets it did not run, also those the driver publishes after
 * it ended (the communicator's entry reads its ticket channel from then
 * on): no rank runs them, since no rank runs a collective before every
 * member published its status for it, which this one never does.
 */
#include "dag/exec/loop_collective.h"
#include "dag/exec/watchdog.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/value.h"
#include "transport/slot_value.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A slot's latest collective: seq1 = seq + 1 (0: none), enqueued at
 * `since`; the loop thread stores since (relaxed) then seq1 (seq_cst), the
 * watchdog loads seq1, since, queries `done`, and loads seq1 again
 * (unchanged: the event it queried was that collective's). */
typedef struct {
    _Atomic uint64_t seq1;
    _Atomic int64_t since;
} coll_watch_t;

/* What a member publishes on its status channel. */
typedef struct {
    uint32_t dtype, ndim;
    int64_t shape[ADAG_MAX_DIMS];
} member_meta_t;

_Static_assert(sizeof(member_meta_t) == ADAG_COLL_STATUS_BYTES, "status channel slot size");

struct adag_loop_coll {
    const adag_prog_op_t *op;
    const adag_chan_comm_t *comm;  /* the loop's: key, communicator, stream */
    adag_dev_event_t **issued;     /* per slot, on compute */
    adag_dev_event_t **done;       /* per slot, on the communicator's stream */
    coll_watch_t *watch;           /* per slot: the collective of seq1 - 1 */
    char name[64];                 /* "allreduce#0" */
};

static const char *kind_name(uint32_t k)
{
    static const char *const names[] = {"allreduce", "allgather", "reducescatter", "broadcast"};
    return k < 4 ? names[k] : "?";
}

static adag_loop_coll_t *coll_of(adag_loop_t *loop, const adag_prog_op_t *op)
{
    for (unsigned i = 0; i < loop->ncolls; i++)
        if (loop->colls[i].op == op)
            return &loop->colls[i];
    return NULL;
}

static void events_free(const adag_chan_device_t *d, adag_dev_event_t **evs, unsigned n)
{
    for (unsigned i = 0; evs && i < n; i++)
        if (evs[i])
            d->dev->ops->event_destroy(d->dev, evs[i]);
    free(evs);
}

void adag__loop_coll_close(adag_loop_t *loop)
{
    const adag_chan_device_t *d = loop->comm_device;
    for (unsigned i = 0; i < loop->ncolls; i++) {
        adag_loop_coll_t *c = &loop->colls[i];
        events_free(d, c->issued, loop->prog.max_inflight);
        events_free(d, c->done, loop->prog.max_inflight);
        free(c->watch);
    }
    free(loop->colls);
    loop->colls = NULL;
    loop->ncolls = 0;
}

adag_status_t adag__loop_coll_prepare(adag_loop_t *loop)
{
    unsigned n = 0, ns = loop->prog.max_inflight;
    const adag_chan_device_t *d = loop->comm_device;
    for (uint32_t i = 0; i < loop->prog.nops; i++)
        n += loop->prog.ops[i].kind == ADAG_OP_COLLECTIVE;
    if (n == 0)
        return ADAG_OK;
    if (!d)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "actor %s: DAG %s makes it a collective member, but it joined no "
                          "communicator", loop->actor_name, loop->prog.dag_name);
    if (!(loop->colls = calloc(n, sizeof(*loop->colls))))
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", loop->actor_name);
    for (uint32_t i = 0; i < loop->prog.nops; i++) {
        const adag_prog_op_t *op = &loop->prog.ops[i];
        if (op->kind != ADAG_OP_COLLECTIVE)
            continue;
        adag_loop_coll_t *c = &loop->colls[loop->ncolls++];
        c->op = op;
        c->comm = &loop->chan_comms[op->comm];
        snprintf(c->name, sizeof(c->name), "%s#%u", kind_name(op->coll_kind), op->coll_id);
        c->issued = calloc(ns, sizeof(*c->issued));
        c->done = calloc(ns, sizeof(*c->done));
        c->watch = calloc(ns, sizeof(*c->watch));
        if (!c->issued || !c->done || !c->watch)
            return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", loop->actor_name);
        for (unsigned s = 0; s < ns; s++) {
            adag_status_t st = d->dev->ops->event_create(d->dev, &c->issued[s]);
            if (st == ADAG_OK)
                st = d->dev->ops->event_create(d->dev, &c->done[s]);
            if (st != ADAG_OK) {
                adag__error_prefix("actor %s: collective %s", loop->actor_name, c->name);
                return st;
            }
        }
    }
    return ADAG_OK;
}

static size_t elements(const member_meta_t *m)
{
    size_t n = 1;
    for (uint32_t d = 0; d < m->ndim; d++)
        n *= (size_t)m->shape[d];
    return n;
}

static void format_meta(char *buf, size_t len, const member_meta_t *m)
{
    int k = snprintf(buf, len, "%s[", adag_dtype_name((adag_dtype_t)m->dtype));
    for (uint32_t d = 0; d < m->ndim && k > 0 && (size_t)k < len; d++)
        k += snprintf(buf + k, len - (size_t)k, "%s%lld", d ? "," : "", (long long)m->shape[d]);
    if (k > 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, "]");
}

static int same_meta(const member_meta_t *a, const member_meta_t *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return 0;
    for (uint32_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

/* Every member's status and tensor for seq (metas[m]); the first
 * failure (lowest member) in *fail / msg. ADAG_ERR_CLOSED when aborted;
 * ADAG_ERR_TIMEOUT when a member does not come in time (msg says who). */
static adag_status_t agree(adag_loop_t *loop, adag_loop_coll_t *c, uint64_t seq,
                           const adag_slot_view_t *in, member_meta_t *metas,
                           adag_status_t *fail, char *msg, size_t len)
{
    const adag_prog_op_t *op = c->op;
    adag_chan_t *mine = loop->chans[op->status_first + op->member];
    void *buf;
    adag_status_t st = adag__chan_acquire(mine, seq, ADAG_FOREVER, &buf);
    if (st != ADAG_OK)
        return st;
    member_meta_t me = {in->meta.dtype, in->meta.ndim, {0}};
    memcpy(me.shape, in->meta.shape, me.ndim * sizeof(me.shape[0]));
    if (in->status == ADAG_OK)
        memcpy(buf, &me, sizeof(me));
    st = adag__chan_publish(mine, seq, in->status == ADAG_OK ? sizeof(me) : 0, NULL, in->status,
                           in->status == ADAG_OK ? NULL : in->err);
    if (st != ADAG_OK)
        return st;
    int64_t deadline = loop->prog.comm_timeout_ms > 0
                           ? adag__deadline_ms(loop->prog.comm_timeout_ms) : ADAG_FOREVER;
    *fail = ADAG_OK;
    for (uint32_t m = 0; m < op->nmembers; m++) {
        adag_slot_view_t v;
        if (m == op->member) {
            metas[m] = me;
            v = *in;
        } else {
            adag_chan_t *ch = loop->chans[op->status_first + m];
            st = adag__chan_wait(ch, seq, deadline, &v);
            if (st == ADAG_ERR_TIMEOUT) {
                snprintf(msg, len,
                         "actor %s: collective %s: execution %llu: %s did not reach it within "
                         "%lld ms",
                         loop->actor_name, c->name, (unsigned long long)seq, ch->name,
                         (long long)loop->prog.comm_timeout_ms);
                return st;
            }
            if (st != ADAG_OK)
                return st;
            if (v.status == ADAG_OK && v.size != sizeof(member_meta_t))
                return adag__error(ADAG_ERR_PROTOCOL, "actor %s: collective %s: %s carries %zu "
                                  "bytes", loop->actor_name, c->name, ch->name, v.size);
            if (v.status == ADAG_OK)
                memcpy(&metas[m], v.data, sizeof(metas[m]));
        }
        if (v.status != ADAG_OK && *fail == ADAG_OK) {
            *fail = v.status;
            snprintf(msg, len, "%.*s", (int)v.err_len, v.err ? v.err : "");
        }
    }
    if (*fail != ADAG_OK)
        return ADAG_OK;
    for (uint32_t m = 1; m < op->nmembers; m++) {
        if (metas[m].ndim > ADAG_MAX_DIMS || !adag_dtype_size((adag_dtype_t)metas[m].dtype))
            return adag__error(ADAG_ERR_PROTOCOL, "actor %s: collective %s: member %u's tensor "
                              "description is malformed", loop->actor_name, c->name, m);
        if (!same_meta(&metas[m], &metas[0])) {
            char a[160], b[160];
            format_meta(a, sizeof(a), &metas[0]);
            format_meta(b, sizeof(b), &metas[m]);
            *fail = ADAG_ERR_INVALID;
            snprintf(msg, len,
                     "collective %s: execution %llu: member %u's tensor is %s, member 0's %s: "
                     "the tensors of a collective have one dtype and shape",
                     c->name, (unsigned long long)seq, m, b, a);
            return ADAG_OK;
        }
    }
    return ADAG_OK;
}

/* The result's shape and the count (elements per rank) the communicator
 * takes, from the members' common tensor; nonzero if it cannot be. */
static int result_of(adag_loop_coll_t *c, const member_meta_t *in, adag_tensor_meta_t *out,
                     size_t *count, char *msg, size_t len)
{
    const adag_prog_op_t *op = c->op;
    size_t n = elements(in);
    out->dtype = in->dtype;
    out->ndim = in->ndim;
    memcpy(out->shape, in->shape, sizeof(out->shape));
    *count = n;
    if (op->coll_kind != ADAG_COLL_ALLGATHER && op->coll_kind != ADAG_COLL_REDUCESCATTER)
        return 0;
    if (in->ndim == 0) {
        snprintf(msg, len, "collective %s: a 0-dim tensor: %s works along dim 0", c->name,
                 kind_name(op->coll_kind));
        return -1;
    }
    if (op->coll_kind == ADAG_COLL_ALLGATHER) {
        out->shape[0] = in->shape[0] * op->nmembers;
        return 0;
    }
    if (in->shape[0] % op->nmembers) {
        snprintf(msg, len, "collective %s: dim 0 is %lld, not a multiple of its %u members",
                 c->name, (long long)in->shape[0], op->nmembers);
        return -1;
    }
    out->shape[0] = in->shape[0] / op->nmembers;
    *count = n / op->nmembers;
    return 0;
}

static adag_status_t enqueue(adag_loop_t *loop, adag_loop_coll_t *c, uint64_t seq,
                             const void *src, void *dst, size_t count, uint32_t dtype)
{
    const adag_prog_op_t *op = c->op;
    const adag_chan_device_t *d = loop->comm_device;
    const adag_device_ops_t *dev = d->dev->ops;
    adag_comm_t *comm = c->comm->comm;
    adag_dev_stream_t *s = c->comm->stream;
    unsigned slot = (unsigned)(seq % loop->prog.max_inflight);
    int host = !loop->actor.device; /* host tensors: nothing to wait for on a device */
    adag_status_t st;
    if (!host && ((st = dev->event_record(c->issued[slot], d->compute)) != ADAG_OK ||
                  (st = dev->stream_wait_event(s, c->issued[slot])) != ADAG_OK))
        return st;
    switch ((adag_coll_kind_t)op->coll_kind) {
    case ADAG_COLL_ALLREDUCE:
        st = comm->ops->allreduce(comm, src, dst, count, (adag_dtype_t)dtype,
                                  (adag_reduce_op_t)op->reduce_op, s);
        break;
    case ADAG_COLL_ALLGATHER:
        st = comm->ops->allgather(comm, src, dst, count, (adag_dtype_t)dtype, s);
        break;
    case ADAG_COLL_REDUCESCATTER:
        st = comm->ops->reducescatter(comm, src, dst, count, (adag_dtype_t)dtype,
                                      (adag_reduce_op_t)op->reduce_op, s);
        break;
    case ADAG_COLL_BROADCAST:
        st = comm->ops->broadcast(comm, src, dst, count, (adag_dtype_t)dtype, op->root, s);
        break;
    }
    if (st != ADAG_OK)
        return st;
    /* watched from here: since, then seq1 (seq_cst), as endpoints do */
    atomic_store_explicit(&c->watch[slot].since, adag__now_ns(), memory_order_relaxed);
    atomic_store_explicit(&c->watch[slot].seq1, seq + 1, memory_order_seq_cst);
    if ((st = dev->event_record(c->done[slot], s)) != ADAG_OK)
        return st;
    if (host) { /* the result is in host memory once done: the watchdog bounds the wait */
        if ((st = dev->event_sync(c->done[slot], ADAG_FOREVER)) != ADAG_OK)
            return st;
        return comm->ops->status(comm); /* aborted: it did not run */
    }
    return dev->stream_wait_event(d->compute, c->done[slot]);
}

/* A peer rank aborted the communicator, and only that peer's process
 * knows why: it reports its DAG's failure before it aborts (the
 * communicator's blame, dag/exec/actor_comm.h), and the DAGs sharing the
 * communicator fail from its watchdog within a period. Waits up to two
 * periods and a second (the report's way through the driver and back on
 * a loaded host) for this DAG to be aborted by that report; 1 when it was
 * (nothing to add), 0: this loop reports the symptom itself. Polled: a
 * failure path, bounded. */
static int peer_reported(adag_loop_t *loop)
{
    int64_t ms = loop->prog.comm_timeout_ms > 0 ? loop->prog.comm_timeout_ms : 0;
    int64_t deadline = adag__now_ns() + 2 * adag__watchdog_period_ns(ms) + 1000000000;
    while (!adag__ctx_aborted(loop->ctx) && adag__now_ns() < deadline) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return adag__ctx_aborted(loop->ctx);
}

adag_status_t adag__loop_coll_run(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq)
{
    adag_loop_coll_t *c = coll_of(loop, op);
    adag_chan_t *in_ch = loop->chans[op->args[0]], *out_ch = loop->chans[op->rets[0]];
    adag_slot_view_t in;
    member_meta_t metas[ADAG_COMM_MAX_RANKS];
    char msg[ADAG_SLOT_ERR_MAX] = "";
    adag_status_t fail = ADAG_OK, st;
    void *out;
    if (!c)
        return adag__error(ADAG_ERR_INTERNAL, "actor %s: collective without state",
                           loop->actor_name);
    if ((st = adag__chan_wait(in_ch, seq, ADAG_FOREVER, &in)) != ADAG_OK ||
        (st = adag__value_check_slot(&in, in_ch->name)) != ADAG_OK)
        return st;
    if (in.status == ADAG_OK && in.meta.dtype == ADAG_DTYPE_BYTES) {
        in.status = ADAG_ERR_INVALID;
        in.err = "the tensor of a collective is plain bytes";
        in.err_len = strlen(in.err);
    }
    /* a shared communicator: this execution's turn on it */
    if ((st = adag__loop_turn_begin(loop, op, seq, c->name)) != ADAG_OK)
        return st;
    st = agree(loop, c, seq, &in, metas, &fail, msg, sizeof(msg));
    if (st == ADAG_ERR_TIMEOUT) {
        /* a member never came: no member issues it; the DAG fails (never
         * a hang), and so does every DAG sharing the communicator (the
         * member they wait for, or that holds their inputs' slots, is
         * the same) */
        adag__loop_turn_blame(loop, op, c->name, st, msg);
        adag__loop_fail_dag(loop, st, msg); /* its hook aborts the shared one: turn held */
        adag__loop_turn_give_up(loop, op, seq);
        return ADAG_ERR_CLOSED;
    }
    if (st != ADAG_OK)
        return st;
    if ((st = adag__chan_acquire(out_ch, seq, ADAG_FOREVER, &out)) != ADAG_OK)
        return st;
    adag_tensor_meta_t meta;
    size_t count = 0;
    if (fail == ADAG_OK && result_of(c, &metas[0], &meta, &count, msg, sizeof(msg)) != 0)
        fail = ADAG_ERR_INVALID;
    size_t es = adag_dtype_size((adag_dtype_t)meta.dtype);
    size_t bytes = 0;
    if (fail == ADAG_OK) {
        bytes = count * es * (op->coll_kind == ADAG_COLL_ALLGATHER ? op->nmembers : 1);
        if (bytes > out_ch->capacity) {
            fail = ADAG_ERR_TOO_LARGE;
            snprintf(msg, sizeof(msg), "collective %s: its result of %zu bytes does not fit "
                     "the slot (%zu bytes)", c->name, bytes, out_ch->capacity);
        }
    }
    if (fail == ADAG_OK && count > 0 &&
        (st = enqueue(loop, c, seq, in.data, out, count, meta.dtype)) != ADAG_OK &&
        c->comm->comm->ops->status(c->comm->comm) != ADAG_OK) {
        /* the communicator was aborted (a member died or stopped, or a DAG
         * sharing it failed inside a collective): this DAG fails too */
        char why[ADAG_ERROR_MAX];
        int peer;
        st = adag__actor_comm_why(loop->comm_entries[op->comm], why, sizeof(why), &peer);
        if (peer && peer_reported(loop))
            return ADAG_ERR_CLOSED;
        snprintf(msg, sizeof(msg), "actor %s: collective %s of DAG %s, execution %llu: its "
                 "communicator was aborted: %s", loop->actor_name, c->name,
                 loop->prog.dag_name, (unsigned long long)seq, why);
        adag__loop_fail_dag(loop, st, msg);
        return ADAG_ERR_CLOSED;
    }
    if (st != ADAG_OK) {
        /* refused at enqueue (a dtype the backend cannot reduce): the same
         * on every member, so none of them waits for it */
        fail = st;
        snprintf(msg, sizeof(msg), "actor %s: collective %s: %s", loop->actor_name, c->name,
                 adag_last_error());
    }
    adag__loop_turn_op_done(loop, op, seq);
    adag_chan_counters_t *cc = &loop->chan_counters[op->rets[0]];
    adag__counter_add(&cc->values, 1);
    adag__counter_add(&cc->bytes, fail == ADAG_OK ? bytes : 0);
    if (fail != ADAG_OK)
        return adag__chan_publish(out_ch, seq, 0, NULL, fail, msg);
    return adag__chan_publish(out_ch, seq, bytes, &meta, ADAG_OK, NULL);
}

adag_status_t adag__loop_coll_watch(void *ctx, int64_t now, int64_t timeout_ns, int64_t *since)
{
    adag_loop_t *loop = ctx;
    const adag_device_ops_t *dev = loop->comm_device->dev->ops;
    int64_t oldest = INT64_MAX;
    /* a shared communicator another DAG broke: the cause to name */
    adag_status_t broken = adag__loop_turns_watch(loop);
    if (broken != ADAG_OK)
        return broken;
    const adag_loop_coll_t *which = NULL;
    uint64_t which_seq1 = 0;
    for (unsigned i = 0; i < loop->ncolls; i++) {
        adag_loop_coll_t *c = &loop->colls[i];
        for (unsigned s = 0; s < loop->prog.max_inflight; s++) {
            uint64_t seq1 = atomic_load_explicit(&c->watch[s].seq1, memory_order_seq_cst);
            if (!seq1)
                continue;
            int64_t t = atomic_load_explicit(&c->watch[s].since, memory_order_relaxed);
            if (now - t <= timeout_ns || t >= oldest || dev->event_query(c->done[s]) == ADAG_OK)
                continue;
            if (atomic_load_explicit(&c->watch[s].seq1, memory_order_seq_cst) != seq1)
                continue; /* the slot moved on: the event queried was not its op's */
            oldest = t;
            which = c;
            which_seq1 = seq1;
        }
    }
    if (!which)
        return ADAG_OK;
    *since = oldest;
    /* who it waits for, where the backend can tell: "(waiting for m2)",
     * each member named after its status channel "<collective>.<actor>" */
    char late[160] = "";
    adag_comm_t *comm = which->comm->comm;
    uint64_t bits = 0;
    if (comm->ops->laggards && comm->ops->laggards(comm, &bits)) {
        size_t k = (size_t)snprintf(late, sizeof(late), " (waiting for");
        for (uint32_t m = 0; m < which->op->nmembers && k < sizeof(late); m++) {
            if (!(bits >> m & 1))
                continue;
            const char *name = strchr(loop->chans[which->op->status_first + m]->name, '.');
            k += (size_t)snprintf(late + k, sizeof(late) - k, " %s", name ? name + 1 : "?");
        }
        if (k < sizeof(late))
            snprintf(late + k, sizeof(late) - k, ")");
    }
    char msg[ADAG_ERROR_MAX];
    snprintf(msg, sizeof(msg), "collective %s (member %u of %u) for execution %llu did not "
             "complete within %lld ms%s", which->name, which->op->member, which->op->nmembers,
             (unsigned long long)(which_seq1 - 1), (long long)(timeout_ns / 1000000), late);
    if (timeout_ns > 0) { /* reported: the DAG fails, and so do those sharing the communicator */
        char why[ADAG_ERROR_MAX];
        snprintf(why, sizeof(why), "actor %s: %s", loop->actor_name, msg);
        adag__loop_turn_blame(loop, which->op, which->name, ADAG_ERR_TIMEOUT, why);
    }
    return adag__error(ADAG_ERR_TIMEOUT, "%s", msg);
}

/* ---- turns on shared communicators ---- */

struct adag_loop_turn {
    uint64_t held_seq1; /* seq + 1 of the execution holding the turn; 0: none */
    uint64_t ticket;    /* its ticket */
    uint32_t ndone;     /* its collectives issued so far */
    uint64_t next_seq;  /* the first execution whose ticket is not taken */
    uint32_t ncolls;    /* 0: not shared, or no collective of this DAG on it */
};

static int64_t comm_deadline(const adag_loop_t *loop)
{
    return loop->prog.comm_timeout_ms > 0 ? adag__deadline_ms(loop->prog.comm_timeout_ms)
                                          : ADAG_FOREVER;
}

adag_status_t adag__loop_turns_prepare(adag_loop_t *loop)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < loop->prog.ncomms; i++)
        n += loop->prog.comms[i].shared && loop->prog.comms[i].ncolls;
    if (n == 0)
        return ADAG_OK;
    if (!(loop->turns = calloc(loop->prog.ncomms, sizeof(*loop->turns))))
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", loop->actor_name);
    for (uint32_t i = 0; i < loop->prog.ncomms; i++)
        if (loop->prog.comms[i].shared)
            loop->turns[i].ncolls = loop->prog.comms[i].ncolls;
    return ADAG_OK;
}

adag_status_t adag__loop_turn_begin(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                                   const char *coll)
{
    struct adag_loop_turn *t = loop->turns ? &loop->turns[op->comm] : NULL;
    if (!t || !t->ncolls || t->held_seq1 == seq + 1)
        return ADAG_OK;
    const adag_comm_spec_t *spec = &loop->prog.comms[op->comm];
    adag_actor_comm_t *e = loop->comm_entries[op->comm];
    adag_slot_view_t v;
    uint64_t ticket;
    adag_status_t st = adag__chan_wait(loop->chans[spec->order_chan], seq, ADAG_FOREVER, &v);
    if (st != ADAG_OK)
        return st;
    if (v.status != ADAG_OK || v.size != sizeof(ticket))
        return adag__error(ADAG_ERR_PROTOCOL, "actor %s: %s: execution %llu has no ticket on "
                          "%s", loop->actor_name, coll, (unsigned long long)seq,
                          loop->chans[spec->order_chan]->name);
    memcpy(&ticket, v.data, sizeof(ticket));
    st = adag__actor_comm_turn_take(e, ticket, loop, loop->prog.dag_name, &loop->ctx->abort,
                                    comm_deadline(loop));
    if (st == ADAG_OK) {
        t->held_seq1 = seq + 1;
        t->ticket = ticket;
        t->ndone = 0;
        return ADAG_OK;
    }
    char msg[ADAG_ERROR_MAX + 256];
    if (st == ADAG_ERR_TIMEOUT) {
        snprintf(msg, sizeof(msg), "%s: %s of DAG %s, execution %llu, waited %lld ms for its "
                 "turn on the communicator it shares with other DAGs",
                 adag_last_error(), coll, loop->prog.dag_name, (unsigned long long)seq,
                 (long long)loop->prog.comm_timeout_ms);
    } else if (st == ADAG_ERR_CLOSED && !adag__ctx_aborted(loop->ctx)) {
        char why[ADAG_ERROR_MAX];
        st = adag__actor_comm_why(e, why, sizeof(why), NULL);
        snprintf(msg, sizeof(msg), "actor %s: %s of DAG %s: its communicator %llu, shared "
                 "with other DAGs, was aborted: %s", loop->actor_name, coll,
                 loop->prog.dag_name, (unsigned long long)spec->key, why);
    } else {
        return st;
    }
    adag__loop_fail_dag(loop, st, msg);
    return ADAG_ERR_CLOSED;
}

/* Ends seq's turn on op's communicator if held: after its last
 * collective (last_only), or now. */
static void end_turn(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq, int last_only)
{
    struct adag_loop_turn *t = loop->turns ? &loop->turns[op->comm] : NULL;
    if (!t || t->held_seq1 != seq + 1 || (last_only && ++t->ndone < t->ncolls))
        return;
    adag__actor_comm_turn_end(loop->comm_entries[op->comm], t->ticket);
    t->held_seq1 = 0;
    t->next_seq = seq + 1;
}

void adag__loop_turn_op_done(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq)
{
    end_turn(loop, op, seq, 1);
}

void adag__loop_turn_give_up(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq)
{
    end_turn(loop, op, seq, 0);
}

/* The entry of the loop's communicator i if shared with other DAGs
 * (collectives only), else NULL. From the program and the entries, which
 * outlive the watchdog (loop->turns does not: freed before it stops). */
static adag_actor_comm_t *shared_entry(const adag_loop_t *loop, uint32_t i)
{
    const adag_comm_spec_t *spec = &loop->prog.comms[i];
    return spec->shared && spec->ncolls && loop->comm_entries ? loop->comm_entries[i] : NULL;
}

void adag__loop_turn_blame(adag_loop_t *loop, const adag_prog_op_t *op, const char *coll,
                          adag_status_t st, const char *msg)
{
    adag_actor_comm_t *e = shared_entry(loop, op->comm);
    if (!e)
        return;
    char why[ADAG_ERROR_MAX];
    snprintf(why, sizeof(why), "DAG %s failed in its collective %s on it: %s",
             loop->prog.dag_name, coll, msg);
    adag__actor_comm_blame(e, st, why, loop);
}

adag_status_t adag__loop_turns_watch(adag_loop_t *loop)
{
    for (uint32_t i = 0; i < loop->prog.ncomms; i++) {
        adag_actor_comm_t *e = shared_entry(loop, i);
        if (!e)
            continue;
        char why[ADAG_ERROR_MAX];
        adag_status_t st = adag__actor_comm_broken(e, loop, why, sizeof(why));
        if (st != ADAG_OK)
            return adag__error(st, "DAG %s: its communicator %llu, shared with other DAGs, was "
                              "aborted: %s", loop->prog.dag_name,
                              (unsigned long long)loop->prog.comms[i].key, why);
    }
    return ADAG_OK;
}

/* The DAG was aborted in this process (adag__ctx_abort, under the
 * context's lock, any thread). */
/* Whether a collective of the loop on communicator comm (an index into
 * the program's) was issued and has not completed (any thread). */
static int coll_pending(adag_loop_t *loop, uint32_t comm)
{
    const adag_device_ops_t *dev = loop->comm_device->dev->ops;
    for (unsigned i = 0; i < loop->ncolls; i++) {
        adag_loop_coll_t *c = &loop->colls[i];
        for (unsigned s = 0; c->op->comm == comm && s < loop->prog.max_inflight; s++)
            if (atomic_load_explicit(&c->watch[s].seq1, memory_order_seq_cst) &&
                dev->event_query(c->done[s]) != ADAG_OK)
                return 1;
    }
    return 0;
}

static void on_abort(void *arg, int failed)
{
    adag_loop_t *loop = arg;
    if (!failed)
        return;
    for (uint32_t i = 0; i < loop->prog.ncomms; i++) {
        if (!loop->turns[i].ncolls)
            continue;
        adag_actor_comm_t *e = loop->comm_entries[i];
        if (!adag__actor_comm_turn_held_by(e, loop) && !coll_pending(loop, i)) {
            adag__actor_comm_unblame(e, loop); /* its collective completed after all */
            continue;
        }
        /* the abort word holds -status (seq_cst, stored before the hooks run) */
        adag_status_t st =
            -(adag_status_t)atomic_load_explicit(&loop->ctx->abort, memory_order_seq_cst);
        char why[ADAG_ERROR_MAX];
        snprintf(why, sizeof(why), "DAG %s failed (%s) inside a collective on it (actor %s)",
                 loop->prog.dag_name, adag_status_str(st), loop->actor_name);
        adag__actor_comm_abort_why(e, st, why, loop);
    }
}

adag_status_t adag__loop_turns_start(adag_loop_t *loop)
{
    return loop->turns ? adag__ctx_add_abort_hook(loop->ctx, on_abort, loop) : ADAG_OK;
}

void adag__loop_turns_end(adag_loop_t *loop)
{
    for (uint32_t i = 0; loop->turns && i < loop->prog.ncomms; i++) {
        struct adag_loop_turn *t = &loop->turns[i];
        if (!t->ncolls)
            continue;
        adag_actor_comm_t *e = loop->comm_entries[i];
        adag_chan_t *order = loop->chans[loop->prog.comms[i].order_chan];
        uint64_t next = t->next_seq;
        if (t->held_seq1) {
            /* it stops inside a collective: a peer may wait for it */
            char why[ADAG_ERROR_MAX];
            snprintf(why, sizeof(why), "the loop of actor %s for DAG %s ended inside a "
                     "collective on it (execution %llu)", loop->actor_name,
                     loop->prog.dag_name, (unsigned long long)(t->held_seq1 - 1));
            adag__actor_comm_abort_why(e, ADAG_ERR_CLOSED, why, loop);
            adag__actor_comm_turn_end(e, t->ticket);
            adag__chan_release(order, t->held_seq1 - 1);
            next = t->held_seq1;
            t->held_seq1 = 0;
        }
        adag__actor_comm_retire(e, order, next, loop);
    }
}

void adag__loop_turns_close(adag_loop_t *loop)
{
    if (!loop->turns)
        return;
    adag__ctx_remove_abort_hook(loop->ctx, loop);
    for (uint32_t i = 0; i < loop->prog.ncomms; i++)
        if (loop->turns[i].ncolls && loop->comm_entries && loop->comm_entries[i])
            adag__actor_comm_unretire(loop->comm_entries[i], loop);
    free(loop->turns);
    loop->turns = NULL;
}

/*
 * Starting executions. An execution is reserved (its ref and, per input
 * field, a buffer inside its input slot), filled, then committed; its
 * inputs are published in ref order, so an execution committed while an
 * earlier one is still being filled starts as soon as that one is committed
 * or cancelled. Up to max_inflight executions may be reserved at once, by
 * any threads, and committed or cancelled in any order, by any thread.
 *
 * Taking the next ref (room in the window: ref - max_inflight released by
 * the caller; then every input slot, before anything is published, so a
 * timeout leaves nothing half-sent) is done by one thread at a time
 * (`acquiring`), within that caller's deadline; no lock is held across any
 * wait. A cancelled ref that is the newest one is given back; an older one
 * cannot be skipped by the actors' loops (every loop runs every ref), so it
 * is published as a failed execution ("cancelled") that nobody can get and
 * whose slots come back once it has passed through.
 *
 * Tensor inputs come only through adag_dag_execute (their metadata is kept
 * per slot with the sizes and published with them); zero-copy inputs are
 * bytes, refused for a field declared with a static dtype or shape.
 *
 * adag_dag_execute reserves, copies and commits. The thread-bound
 * adag_dag_execute_prepare / _commit / _cancel sit on top: one such
 * reservation per thread.
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/value.h"
#include "dag/internal.h"

#include <stdlib.h>
#include <string.h>

static void **slot_bufs(adag_dag_h dag, uint64_t ref)
{
    return &dag->slot_bufs[(ref % dag->max_inflight) * dag->ninputs];
}

static size_t *slot_sizes(adag_dag_h dag, uint64_t ref)
{
    return &dag->slot_sizes[(ref % dag->max_inflight) * dag->ninputs];
}

static adag_tensor_meta_t *slot_metas(adag_dag_h dag, uint64_t ref)
{
    return &dag->slot_metas[(ref % dag->max_inflight) * dag->ninputs];
}

/* Notes when an execution began to wait for room (span clock; *at 0: it
 * did not), for its traced execute span: read only at a wait, so that an
 * execute that does not wait reads the clock once, after its inputs went. */
static inline void note_blocked(adag_dag_h dag, uint64_t *at)
{
    if (dag->trace && !*at)
        *at = adag_trace_clock();
}

/* Waits (under dag->lock) until ref `seq` fits in the window. */
static adag_status_t wait_for_room(adag_dag_h dag, uint64_t seq, int nonblock, int64_t deadline,
                                   const char *fn, uint64_t *blocked_at)
{
    while (seq >= dag->next_release + dag->max_inflight) {
        if (dag->abort_status != ADAG_OK)
            return adag_dag_abort_error(dag, fn);
        note_blocked(dag, blocked_at);
        uint64_t oldest = dag->next_release;
        uint8_t f = dag->ref_flags[oldest % dag->max_inflight];
        if ((f & REF_RELEASED) && oldest < dag->next_publish) {
            /* released early: its slots come back once it completes */
            adag_status_t st = ADAG_OK;
            pthread_mutex_unlock(&dag->lock);
            for (unsigned e = 0; e < dag->nouts && st == ADAG_OK; e++) {
                adag_slot_view_t view;
                st = adag_chan_wait(dag->outs[e], oldest, nonblock ? 0 : deadline, &view);
            }
            if (st == ADAG_ERR_CLOSED)
                st = adag_dag_wait_error(dag, st, fn);
            pthread_mutex_lock(&dag->lock);
            if (st == ADAG_ERR_TIMEOUT)
                return nonblock ? adag_error(ADAG_ERR_AGAIN,
                                             "%s: ref %llu (released) is still running", fn,
                                             (unsigned long long)oldest)
                                : adag_error(ADAG_ERR_TIMEOUT,
                                             "%s: no room after %d ms: ref %llu is still running",
                                             fn, dag->execute_timeout_ms,
                                             (unsigned long long)oldest);
            if (st != ADAG_OK)
                return st;
            adag_dag_advance_releases(dag);
            continue;
        }
        const char *why = (f & REF_RESERVED) && !(f & REF_COMMITTED)
                              ? "is reserved and not yet committed"
                              : "is not released";
        if (nonblock)
            return adag_error(ADAG_ERR_AGAIN,
                              "%s: ref %llu %s and ref %llu reuses its slots (max_inflight %u)",
                              fn, (unsigned long long)oldest, why, (unsigned long long)seq,
                              dag->max_inflight);
        if (deadline != ADAG_FOREVER && adag_now_ns() >= deadline)
            return adag_error(ADAG_ERR_TIMEOUT,
                              "%s: no room after %d ms: ref %llu %s and ref %llu reuses its "
                              "slots (max_inflight %u); release ref %llu with adag_dag_release",
                              fn, dag->execute_timeout_ms, (unsigned long long)oldest, why,
                              (unsigned long long)seq, dag->max_inflight,
                              (unsigned long long)oldest);
        adag_dag_cond_wait(dag, deadline);
    }
    return ADAG_OK;
}

/* Leaves the API (under dag->lock): the counterpart of the count taken by
 * reserve, when its call ends. */
static void leave_locked(adag_dag_h dag)
{
    if (--dag->api_users == 0 && dag->closing)
        pthread_cond_broadcast(&dag->cond);
}

/* A reservation ended, committed or cancelled (under dag->lock): destroy
 * may be waiting for it. */
static void reservation_ended_locked(adag_dag_h dag)
{
    if (--dag->nreserved == 0 && dag->closing)
        pthread_cond_broadcast(&dag->cond);
}

static void publish_ready(adag_dag_h dag);

/* Ref seq's tickets on the DAG's shared communicators, drawn for all of
 * them at once (dag/comm_lease.c: one global order), then published. */
static adag_status_t publish_tickets(adag_dag_h dag, uint64_t seq)
{
    adag_status_t st = ADAG_OK;
    void **bufs = &dag->order_bufs[(seq % dag->max_inflight) * dag->norders];
    pthread_mutex_lock(&dag->rt->order_lock);
    for (unsigned i = 0; i < dag->norders && st == ADAG_OK; i++) {
        uint64_t ticket = adag_comm_lease_next_ticket(dag->order_leases[i]);
        memcpy(bufs[i], &ticket, sizeof(ticket));
        st = adag_chan_publish(dag->orders[i], seq, sizeof(ticket), NULL, ADAG_OK, NULL);
    }
    pthread_mutex_unlock(&dag->rt->order_lock);
    return st;
}

/* Reserves the next ref. With `commit_now` (adag_dag_execute) it also
 * copies `inputs` (NULL for a DAG without inputs) into their slots and
 * commits, in the same pass. Otherwise the reservation stays open (counted
 * in dag->nreserved) until the ref is committed or cancelled.
 * legacy: reserved by adag_dag_execute_prepare; refuse_if_prepared: a
 * thread holding such a reservation is refused (it would wait for itself).
 * Two short critical sections; none held across a wait. */
static adag_status_t reserve(adag_dag_h dag, unsigned flags, const char *fn, int legacy,
                             int refuse_if_prepared, int commit_now, const adag_value_t *inputs,
                             uint64_t *ref, uint64_t *blocked_at)
{
    adag_status_t st = ADAG_OK;
    uint64_t own_blocked_at = 0;
    if (!blocked_at)
        blocked_at = &own_blocked_at;
    if (flags & ~(unsigned)ADAG_EXECUTE_NONBLOCK)
        return adag_error(ADAG_ERR_INVALID, "%s: unknown flags 0x%x", fn, flags);
    int nonblock = (flags & ADAG_EXECUTE_NONBLOCK) != 0;
    int64_t deadline = nonblock ? 0 : adag_deadline_ms(dag->execute_timeout_ms);

    pthread_mutex_lock(&dag->lock);
    if (dag->closing) {
        pthread_mutex_unlock(&dag->lock);
        return adag_error(ADAG_ERR_CLOSED, "%s: DAG %s is being destroyed", fn, dag->name);
    }
    dag->api_users++;
    /* the thread-bound API: a thread holding a prepared execution would
     * wait for itself (its later refs start only after it commits) */
    for (uint64_t r = dag->next_publish;
         refuse_if_prepared && dag->nlegacy && r < dag->next_reserve; r++) {
        unsigned s = (unsigned)(r % dag->max_inflight);
        if (dag->slot_legacy[s] && (dag->ref_flags[s] & REF_RESERVED) &&
            !(dag->ref_flags[s] & (REF_COMMITTED | REF_CANCELLED)) &&
            pthread_equal(dag->slot_owner[s], pthread_self())) {
            st = adag_error(ADAG_ERR_INVALID,
                            "%s: this thread holds ref %llu of DAG %s, prepared with "
                            "adag_dag_execute_prepare: commit or cancel it first",
                            fn, (unsigned long long)r, dag->name);
            goto fail_locked;
        }
    }
    while (dag->acquiring) {
        if (dag->abort_status != ADAG_OK) {
            st = adag_dag_abort_error(dag, fn);
            goto fail_locked;
        }
        if (nonblock || (deadline != ADAG_FOREVER && adag_now_ns() >= deadline)) {
            st = nonblock ? adag_error(ADAG_ERR_AGAIN,
                                       "%s: another thread is taking ref %llu of DAG %s", fn,
                                       (unsigned long long)dag->next_reserve, dag->name)
                          : adag_error(ADAG_ERR_TIMEOUT,
                                       "%s: no room after %d ms: another thread is taking ref "
                                       "%llu of DAG %s",
                                       fn, dag->execute_timeout_ms,
                                       (unsigned long long)dag->next_reserve, dag->name);
            goto fail_locked;
        }
        note_blocked(dag, blocked_at);
        adag_dag_cond_wait(dag, deadline);
    }
    if (dag->abort_status != ADAG_OK) {
        st = adag_dag_abort_error(dag, fn);
        goto fail_locked;
    }
    dag->acquiring = 1;
    uint64_t seq = dag->next_reserve;
    /* its get's record (2 seq + 1 of the indexed ring), begun before its
     * inputs can go: the get, on the path to the caller's next execute,
     * writes only its stamps (a get on another thread sees this through
     * the values it waited for) */
    if (dag->trace)
        adag_trace_begin(dag->trace, 2 * seq + 1, ADAG_SPAN_GET, seq);
    st = wait_for_room(dag, seq, nonblock, deadline, fn, blocked_at);
    pthread_mutex_unlock(&dag->lock);
    void **bufs = slot_bufs(dag, seq);
    for (unsigned i = 0; i < dag->ninputs && st == ADAG_OK; i++) {
        st = adag_chan_acquire(dag->inputs[i], seq, deadline, &bufs[i]);
        if (st == ADAG_ERR_TIMEOUT)
            st = nonblock ? adag_error(ADAG_ERR_AGAIN, "%s: actors still read input %u of ref %llu",
                                       fn, i, (unsigned long long)(seq - dag->max_inflight))
                          : adag_error(ADAG_ERR_TIMEOUT,
                                       "%s: no room after %d ms: actors still read input %u of "
                                       "ref %llu",
                                       fn, dag->execute_timeout_ms, i,
                                       (unsigned long long)(seq - dag->max_inflight));
        else if (st != ADAG_OK)
            st = adag_dag_wait_error(dag, st, fn);
    }
    /* the start channel (read by actors with a method of no argument) is
     * written like an input: its slot for seq is free once every such
     * actor released seq - max_inflight, which may be after the DAG's
     * outputs of that ref came back */
    if (dag->start && st == ADAG_OK) {
        void *start_buf;
        st = adag_chan_acquire(dag->start, seq, deadline, &start_buf);
        if (st == ADAG_ERR_TIMEOUT)
            st = adag_error(nonblock ? ADAG_ERR_AGAIN : ADAG_ERR_TIMEOUT,
                            "%s: %s: actors still run ref %llu (channel %s)", fn,
                            nonblock ? "no room now" : "no room in time",
                            (unsigned long long)(seq - dag->max_inflight), dag->start->name);
        else if (st != ADAG_OK)
            st = adag_dag_wait_error(dag, st, fn);
    }
    for (unsigned i = 0; i < dag->norders && st == ADAG_OK; i++) {
        st = adag_chan_acquire(dag->orders[i], seq, deadline,
                               &dag->order_bufs[(seq % dag->max_inflight) * dag->norders + i]);
        if (st == ADAG_ERR_TIMEOUT)
            st = adag_error(nonblock ? ADAG_ERR_AGAIN : ADAG_ERR_TIMEOUT,
                            "%s: %s: actors still run the collectives of ref %llu (channel %s)",
                            fn, nonblock ? "no room now" : "no room in time",
                            (unsigned long long)(seq - dag->max_inflight),
                            dag->orders[i]->name);
        else if (st != ADAG_OK)
            st = adag_dag_wait_error(dag, st, fn);
    }
    /* the slots are this caller's alone until the ref is published */
    for (unsigned i = 0; commit_now && st == ADAG_OK && i < dag->ninputs; i++)
        if (inputs[i].size && !adag_dag_input_on_device(dag, i))
            memcpy(bufs[i], inputs[i].data, inputs[i].size);
    if (commit_now && st == ADAG_OK && dag->driver_dev)
        st = adag_dag_copy_device_inputs(dag, bufs, inputs, deadline);
    pthread_mutex_lock(&dag->lock);
    dag->acquiring = 0;
    adag_dag_wake(dag);
    if (st != ADAG_OK)
        goto fail_locked;
    unsigned s = (unsigned)(seq % dag->max_inflight);
    dag->ref_flags[s] = REF_RESERVED;
    dag->slot_owner[s] = pthread_self();
    dag->slot_legacy[s] = (uint8_t)legacy;
    dag->nlegacy += (unsigned)legacy;
    dag->next_reserve = seq + 1;
    if (commit_now) {
        size_t *sizes = slot_sizes(dag, seq);
        adag_tensor_meta_t *metas = slot_metas(dag, seq);
        for (unsigned i = 0; i < dag->ninputs; i++) {
            sizes[i] = inputs[i].size;
            metas[i].dtype = inputs[i].kind == ADAG_VALUE_TENSOR ? (uint32_t)inputs[i].dtype : 0;
            metas[i].ndim = inputs[i].kind == ADAG_VALUE_TENSOR ? inputs[i].ndim : 0;
            for (unsigned d = 0; d < metas[i].ndim; d++)
                metas[i].shape[d] = inputs[i].shape[d];
        }
        dag->ref_flags[s] |= REF_COMMITTED;
        dag->stats.executed++;
        publish_ready(dag);
    } else {
        dag->nreserved++;
        /* the zero-copy API: its execute record runs from the reserve (its
         * wait for room, if any) to the commit, which ends it */
        if (dag->trace)
            adag_trace_begin_at(dag->trace, 2 * seq, ADAG_SPAN_EXECUTE, seq,
                                *blocked_at ? *blocked_at : adag_trace_clock());
    }
    leave_locked(dag);
    pthread_mutex_unlock(&dag->lock);
    *ref = seq;
    return ADAG_OK;
fail_locked:
    leave_locked(dag);
    pthread_mutex_unlock(&dag->lock);
    return st;
}

/* Publishes, in ref order, every ref from next_publish on that is
 * committed or cancelled. Under dag->lock. */
static void publish_ready(adag_dag_h dag)
{
    int moved = 0;
    while (dag->next_publish < dag->next_reserve && dag->abort_status == ADAG_OK) {
        uint64_t seq = dag->next_publish;
        uint8_t f = dag->ref_flags[seq % dag->max_inflight];
        if (!(f & (REF_COMMITTED | REF_CANCELLED)))
            break;
        const size_t *sizes = slot_sizes(dag, seq);
        const adag_tensor_meta_t *metas = slot_metas(dag, seq);
        adag_status_t st = ADAG_OK, status = f & REF_CANCELLED ? ADAG_ERR_CLOSED : ADAG_OK;
        for (unsigned i = 0; i < dag->ninputs && st == ADAG_OK; i++) {
            size_t size = status == ADAG_OK ? sizes[i] : 0;
            st = adag_chan_publish(dag->inputs[i], seq, size,
                                   metas[i].dtype != ADAG_DTYPE_BYTES ? &metas[i] : NULL, status,
                                   "the execution was cancelled");
            dag->input_counts[i][0]++;
            dag->input_counts[i][1] += size;
        }
        /* a cancelled ref gets its tickets too: its loops run it */
        if (st == ADAG_OK && dag->norders)
            st = publish_tickets(dag, seq);
        /* a cancelled ref's start carries its status: methods of no
         * argument are skipped like those whose inputs failed */
        if (st == ADAG_OK && dag->start)
            st = adag_chan_publish(dag->start, seq, 0, NULL, status,
                                   "the execution was cancelled");
        if (st != ADAG_OK) {
            adag_dag_fail_locked(dag, st, adag_last_error());
            break;
        }
        dag->next_publish = seq + 1;
        moved = 1;
    }
    if (!moved)
        return;
    /* the loops may have finished a ref already, before it counted as live
     * for the monitor's recomputation of the fd */
    if (atomic_load_explicit(&dag->fd_armed, memory_order_relaxed))
        adag_dag_update_fd(dag);
    adag_dag_advance_releases(dag); /* cancelled refs count as released */
    adag_dag_wake(dag);
}

/* The reservation `ref` of this DAG, still open. Under dag->lock. */
static adag_status_t check_reserved(adag_dag_h dag, uint64_t ref, const char *fn)
{
    uint8_t f = ref < dag->next_reserve && ref >= dag->next_publish
                    ? dag->ref_flags[ref % dag->max_inflight]
                    : 0;
    if (!(f & REF_RESERVED) || (f & (REF_COMMITTED | REF_CANCELLED)))
        return adag_error(ADAG_ERR_INVALID,
                          "%s: ref %llu of DAG %s is not a reservation waiting for its commit",
                          fn, (unsigned long long)ref, dag->name);
    return ADAG_OK;
}

static adag_status_t check_sizes(adag_dag_h dag, const char *fn, const size_t *sizes, unsigned n)
{
    if (n != dag->ninputs)
        return adag_error(ADAG_ERR_INVALID, "%s: DAG %s takes %u inputs, %u given", fn, dag->name,
                          dag->ninputs, n);
    for (unsigned i = 0; i < n; i++)
        if (sizes[i] > dag->inputs[i]->capacity)
            return adag_error(ADAG_ERR_TOO_LARGE,
                              "%s: input %u (channel input[%u]) is %zu bytes, larger than the "
                              "slot capacity of %zu bytes",
                              fn, i, i, sizes[i], dag->inputs[i]->capacity);
    return ADAG_OK;
}

static void cancel_locked(adag_dag_h dag, uint64_t ref);

/* Commits reservation ref with its sizes (checked by the caller), unless
 * it ended meanwhile (another thread cancelled it, or destroy dropped it)
 * or the DAG is being destroyed (then it is cancelled: ADAG_ERR_CLOSED).
 * metas: each input's tensor description (NULL: bytes, as zero-copy inputs
 * of the API are). Nothing of the DAG is touched after its lock is let go:
 * destroy may free it once the reservation ended. */
static adag_status_t commit(adag_dag_h dag, uint64_t ref, const size_t *sizes,
                            const adag_tensor_meta_t *given, const char *fn)
{
    pthread_mutex_lock(&dag->lock);
    adag_status_t st = check_reserved(dag, ref, fn);
    if (st == ADAG_OK && dag->closing) {
        cancel_locked(dag, ref);
        st = adag_error(ADAG_ERR_CLOSED, "%s: DAG %s is being destroyed: ref %llu was cancelled",
                        fn, dag->name, (unsigned long long)ref);
    }
    if (st != ADAG_OK) {
        pthread_mutex_unlock(&dag->lock);
        return st;
    }
    unsigned s = (unsigned)(ref % dag->max_inflight);
    if (dag->ninputs) /* sizes may be NULL for a DAG without inputs */
        memcpy(slot_sizes(dag, ref), sizes, dag->ninputs * sizeof(*sizes));
    adag_tensor_meta_t *metas = slot_metas(dag, ref);
    for (unsigned i = 0; i < dag->ninputs; i++) {
        if (given)
            metas[i] = given[i];
        else
            metas[i].dtype = metas[i].ndim = 0;
    }
    dag->ref_flags[s] |= REF_COMMITTED;
    dag->nlegacy -= dag->slot_legacy[s];
    dag->stats.executed++;
    publish_ready(dag);
    /* traced: its execute record (2 ref of the indexed ring), begun at the
     * reserve, ends here (its inputs were written in place meanwhile) */
    if (dag->trace)
        adag_trace_end_begun(dag->trace, 2 * ref, ADAG_SPAN_EXECUTE, ref, adag_trace_clock());
    reservation_ended_locked(dag);
    pthread_mutex_unlock(&dag->lock);
    return ADAG_OK;
}

/* Cancels reservation ref (under dag->lock). */
static void cancel_locked(adag_dag_h dag, uint64_t ref)
{
    unsigned s = (unsigned)(ref % dag->max_inflight);
    dag->nlegacy -= dag->slot_legacy[s];
    dag->slot_legacy[s] = 0;
    if (ref + 1 == dag->next_reserve && !dag->acquiring) {
        dag->ref_flags[s] = 0; /* the newest: given back */
        dag->next_reserve = ref;
    } else {
        dag->ref_flags[s] |= REF_CANCELLED | REF_RELEASED;
        publish_ready(dag);
    }
    adag_dag_wake(dag);
    reservation_ended_locked(dag);
}

unsigned adag_dag_drop_reservations(adag_dag_h dag, int own_only)
{
    unsigned n = 0;
    for (uint64_t r = dag->next_reserve; r-- > dag->next_publish;) {
        unsigned s = (unsigned)(r % dag->max_inflight);
        uint8_t f = dag->ref_flags[s];
        if ((f & REF_RESERVED) && !(f & (REF_COMMITTED | REF_CANCELLED)) &&
            (!own_only || pthread_equal(dag->slot_owner[s], pthread_self()))) {
            cancel_locked(dag, r);
            n++;
        }
    }
    return n;
}

/* Input i against a static dtype/shape declared for its field. */
static adag_status_t check_declared(adag_dag_h dag, const char *fn, unsigned i,
                                    const adag_value_t *v)
{
    const adag_dag_chan_t *c = &dag->chans[dag->input_chan[i]];
    int tensor = v->kind == ADAG_VALUE_TENSOR;
    if (adag_tensor_decl_allows(&c->tensor, tensor ? (uint32_t)v->dtype : 0, v->ndim, v->shape))
        return ADAG_OK;
    char want[160], got[160];
    adag_tensor_decl_format(want, sizeof(want), &c->tensor);
    adag_tensor_format(got, sizeof(got), tensor ? (uint32_t)v->dtype : 0, v->ndim, v->shape);
    return adag_error(ADAG_ERR_INVALID, "%s: input %u (channel %s) is declared %s, given %s", fn,
                      i, c->name, want, got);
}

/* Zero-copy inputs carry bytes: refused for a field declared with a static
 * dtype or shape (before anything is reserved). */
static adag_status_t check_bytes_inputs(adag_dag_h dag, const char *fn)
{
    for (unsigned i = 0; i < dag->ninputs; i++) {
        const adag_dag_chan_t *c = &dag->chans[dag->input_chan[i]];
        if (adag_dag_input_on_device(dag, i))
            return adag_error(ADAG_ERR_INVALID,
                              "%s: input %u (channel %s) lives on the driver's device, and "
                              "zero-copy inputs are host bytes: send it with adag_dag_execute",
                              fn, i, c->name);
        if (c->tensor.flags & (ADAG_TENSOR_STATIC_DTYPE | ADAG_TENSOR_STATIC_SHAPE)) {
            char want[160];
            adag_tensor_decl_format(want, sizeof(want), &c->tensor);
            return adag_error(ADAG_ERR_INVALID,
                              "%s: input %u (channel %s) is declared %s, and zero-copy inputs "
                              "are bytes: send it with adag_dag_execute",
                              fn, i, c->name, want);
        }
    }
    return ADAG_OK;
}

/* ---- the API ---- */

adag_status_t adag_dag_execute(adag_dag_h dag, const adag_value_t *inputs, unsigned n,
                               unsigned flags, adag_ref_t *ref)
{
    static const char *fn = "adag_dag_execute";
    adag_status_t st;

    if (!dag || !ref || (n && !inputs))
        return adag_error(ADAG_ERR_INVALID, "%s: dag, inputs and ref must not be NULL", fn);
    if (n != dag->ninputs)
        return adag_error(ADAG_ERR_INVALID, "%s: DAG %s takes %u inputs, %u given", fn, dag->name,
                          dag->ninputs, n);
    for (unsigned i = 0; i < n; i++) {
        if ((st = adag_value_check_input(&inputs[i], fn, i)) != ADAG_OK ||
            (st = adag_dag_check_device_input(dag, fn, i, &inputs[i])) != ADAG_OK ||
            (st = check_declared(dag, fn, i, &inputs[i])) != ADAG_OK)
            return st;
        if (inputs[i].size > dag->inputs[i]->capacity)
            return adag_error(ADAG_ERR_TOO_LARGE,
                              "%s: input %u (channel input[%u]) is %zu bytes, larger than the "
                              "slot capacity of %zu bytes",
                              fn, i, i, inputs[i].size, dag->inputs[i]->capacity);
    }
    uint64_t blocked_at = 0;
    st = reserve(dag, flags, fn, 0, 1, 1, inputs, ref, &blocked_at);
    /* the driver's ring is indexed: ref's execute is record 2 ref. Its
     * span: from when it began to wait for room (if it did) to when its
     * inputs were published; the clock is read after they went, off the
     * path to the first stage */
    if (dag->trace && st == ADAG_OK) {
        uint64_t t1 = adag_trace_clock();
        adag_trace_put(dag->trace, 2 * *ref, ADAG_SPAN_EXECUTE, *ref, blocked_at ? blocked_at : t1,
                       t1);
    }
    return st;
}

adag_status_t adag_dag_reserve(adag_dag_h dag, unsigned flags, void **buffers, unsigned n,
                               adag_ref_t *ref)
{
    static const char *fn = "adag_dag_reserve";
    adag_status_t st;
    uint64_t seq;
    if (!dag || !ref || (n && !buffers))
        return adag_error(ADAG_ERR_INVALID, "%s: dag, buffers and ref must not be NULL", fn);
    if (n != dag->ninputs)
        return adag_error(ADAG_ERR_INVALID, "%s: DAG %s takes %u inputs, %u given", fn, dag->name,
                          dag->ninputs, n);
    if ((st = check_bytes_inputs(dag, fn)) != ADAG_OK ||
        (st = reserve(dag, flags, fn, 0, 0, 0, NULL, &seq, NULL)) != ADAG_OK)
        return st;
    if (n) /* buffers may be NULL for a DAG without inputs */
        memcpy(buffers, slot_bufs(dag, seq), n * sizeof(*buffers));
    *ref = seq;
    return ADAG_OK;
}

adag_status_t adag_dag_commit(adag_dag_h dag, adag_ref_t ref, const size_t *sizes, unsigned n)
{
    static const char *fn = "adag_dag_commit";
    adag_status_t st;
    if (!dag || (n && !sizes))
        return adag_error(ADAG_ERR_INVALID, "%s: dag and sizes must not be NULL", fn);
    pthread_mutex_lock(&dag->lock);
    st = check_reserved(dag, ref, fn);
    if (st == ADAG_OK && dag->slot_legacy[ref % dag->max_inflight])
        st = adag_error(ADAG_ERR_INVALID,
                        "%s: ref %llu was prepared with adag_dag_execute_prepare: commit it with "
                        "adag_dag_execute_commit",
                        fn, (unsigned long long)ref);
    pthread_mutex_unlock(&dag->lock);
    if (st != ADAG_OK || (st = check_sizes(dag, fn, sizes, n)) != ADAG_OK)
        return st; /* a size error leaves it reserved: fix the size, or cancel */
    return commit(dag, ref, sizes, NULL, fn);
}

adag_status_t adag_dag_cancel(adag_dag_h dag, adag_ref_t ref)
{
    static const char *fn = "adag_dag_cancel";
    if (!dag)
        return adag_error(ADAG_ERR_INVALID, "%s: dag is NULL", fn);
    pthread_mutex_lock(&dag->lock);
    adag_status_t st = check_reserved(dag, ref, fn);
    if (st == ADAG_OK)
        cancel_locked(dag, ref);
    pthread_mutex_unlock(&dag->lock);
    return st;
}

/* ---- the thread-bound API ---- */

/* This thread's prepared execution, or ADAG_ERR_INVALID. Under dag->lock. */
static adag_status_t find_prepared(adag_dag_h dag, const char *fn, uint64_t *ref)
{
    for (uint64_t r = dag->next_publish; r < dag->next_reserve; r++) {
        unsigned s = (unsigned)(r % dag->max_inflight);
        if (dag->slot_legacy[s] && check_reserved(dag, r, fn) == ADAG_OK &&
            pthread_equal(dag->slot_owner[s], pthread_self())) {
            *ref = r;
            return ADAG_OK;
        }
    }
    return adag_error(ADAG_ERR_INVALID,
                      "%s: this thread has no execution prepared with adag_dag_execute_prepare "
                      "on DAG %s",
                      fn, dag->name);
}

adag_status_t adag_dag_execute_prepare(adag_dag_h dag, unsigned flags, void **buffers, unsigned n)
{
    static const char *fn = "adag_dag_execute_prepare";
    adag_status_t st;
    uint64_t seq;
    if (!dag || (n && !buffers))
        return adag_error(ADAG_ERR_INVALID, "%s: dag and buffers must not be NULL", fn);
    if (n != dag->ninputs)
        return adag_error(ADAG_ERR_INVALID, "%s: DAG %s takes %u inputs, %u given", fn, dag->name,
                          dag->ninputs, n);
    if ((st = check_bytes_inputs(dag, fn)) != ADAG_OK ||
        (st = reserve(dag, flags, fn, 1, 1, 0, NULL, &seq, NULL)) != ADAG_OK)
        return st;
    if (n) /* buffers may be NULL for a DAG without inputs */
        memcpy(buffers, slot_bufs(dag, seq), n * sizeof(*buffers));
    return ADAG_OK;
}

adag_status_t adag_dag_execute_commit(adag_dag_h dag, const size_t *sizes, unsigned n,
                                      adag_ref_t *ref)
{
    static const char *fn = "adag_dag_execute_commit";
    adag_status_t st;
    uint64_t seq;
    if (!dag || !ref || (n && !sizes))
        return adag_error(ADAG_ERR_INVALID, "%s: dag, sizes and ref must not be NULL", fn);
    pthread_mutex_lock(&dag->lock);
    st = find_prepared(dag, fn, &seq);
    pthread_mutex_unlock(&dag->lock);
    if (st != ADAG_OK || (st = check_sizes(dag, fn, sizes, n)) != ADAG_OK)
        return st; /* still prepared: fix the size, or cancel */
    /* only this thread (or destroy) ends its reservation */
    if ((st = commit(dag, seq, sizes, NULL, fn)) != ADAG_OK)
        return st;
    *ref = seq;
    return ADAG_OK;
}

adag_status_t adag_dag_execute_cancel(adag_dag_h dag)
{
    static const char *fn = "adag_dag_execute_cancel";
    uint64_t seq;
    if (!dag)
        return adag_error(ADAG_ERR_INVALID, "%s: dag is NULL", fn);
    pthread_mutex_lock(&dag->lock);
    adag_status_t st = find_prepared(dag, fn, &seq);
    if (st == ADAG_OK)
        cancel_locked(dag, seq);
    pthread_mutex_unlock(&dag->lock);
    return st;
}

/* ---- the data stage's feeding (dag/internal.h) ---- */

adag_status_t adag_dag_reserve_feed(adag_dag_h dag, unsigned flags, void **buffers,
                                    uint64_t *ref)
{
    static const char *fn = "adag_dag_reserve (data source)";
    uint64_t seq;
    adag_status_t st = reserve(dag, flags, fn, 0, 0, 0, NULL, &seq, NULL);
    if (st != ADAG_OK)
        return st;
    if (dag->ninputs)
        memcpy(buffers, slot_bufs(dag, seq), dag->ninputs * sizeof(*buffers));
    *ref = seq;
    return ADAG_OK;
}

adag_status_t adag_dag_commit_feed(adag_dag_h dag, uint64_t ref, const size_t *sizes,
                                   const adag_tensor_meta_t *metas)
{
    static const char *fn = "adag_dag_commit (data source)";
    pthread_mutex_lock(&dag->lock);
    adag_status_t st = check_reserved(dag, ref, fn);
    pthread_mutex_unlock(&dag->lock);
    if (st != ADAG_OK || (st = check_sizes(dag, fn, sizes, dag->ninputs)) != ADAG_OK)
        return st;
    for (unsigned i = 0; metas && i < dag->ninputs; i++) {
        adag_value_t v = {.size = sizes[i],
                          .kind = metas[i].dtype ? ADAG_VALUE_TENSOR : ADAG_VALUE_BYTES,
                          .dtype = (adag_dtype_t)metas[i].dtype,
                          .ndim = metas[i].ndim};
        memcpy(v.shape, metas[i].shape, sizeof(v.shape));
        if ((st = check_declared(dag, fn, i, &v)) != ADAG_OK)
            return st; /* still reserved: the source cancels it */
    }
    return commit(dag, ref, sizes, metas, fn);
}

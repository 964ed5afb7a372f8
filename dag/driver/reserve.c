/*
 * Starting executions. An execution is reserved (its ref and, per input
 * field, a view of where to write it: the input slot, or for an input on
 * the driver's device its device slot and a pinned staging buffer of that
 * slot), filled, then committed with each input's size or tensor
 * description and where it was written; its inputs are published in ref
 * order, so an execution committed while an earlier one is still being
 * filled starts as soon as that one is committed or cancelled. Up to
 * max_inflight executions may be reserved at once, by any threads, and
 * committed or cancelled in any order, by any thread.
 *
 * Taking the next ref (room in the window: ref - max_inflight released by
 * the caller; then every input slot, the start and ticket channels' slots
 * and the input staging's last copy, before anything is published, so a
 * timeout leaves nothing half-sent) is done by one thread at a time
 * (`acquiring`), within that caller's deadline; no lock is held across any
 * wait. A cancelled ref that is the newest one is given back; an older one
 * cannot be skipped by the actors' loops (every loop runs every ref), so it
 * is published as a failed execution ("cancelled") that nobody can get and
 * whose slots come back once it has passed through.
 *
 * A commit checks its inputs (sizes, tensor metadata against the field's
 * static declaration, the pointers against the views) and, under the lock,
 * enqueues the device inputs' copies (dag/driver/driver_device.c), keeps each
 * input's size and metadata per slot and publishes what is ready. A
 * refused commit leaves the reservation open.
 *
 * adag_dag_execute is the same path with a copy: it checks its inputs
 * before anything is reserved, reserves, copies each host input into its
 * view (the slot, or the staging of a device input) and commits. An input
 * of ADAG_COPY_SPLIT_MIN bytes or more is copied by the runtime's copy
 * pool, split over up to ADAG_COPY_THREADS_MAX threads; a smaller one on
 * the caller's thread.
 */
#include "common/clock.h"
#include "common/copy_pool.h"
#include "common/error.h"
#include "common/settings.h"
#include "common/value.h"
#include "dag/driver/dag.h"

#include <stdlib.h>
#include <string.h>

static void **slot_bufs(adag_dag_h dag, uint64_t ref)
{
    return &dag->resv.slot_bufs[(ref % dag->plan.max_inflight) * dag->plan.ninputs];
}

static size_t *slot_sizes(adag_dag_h dag, uint64_t ref)
{
    return &dag->resv.slot_sizes[(ref % dag->plan.max_inflight) * dag->plan.ninputs];
}

static adag_tensor_meta_t *slot_metas(adag_dag_h dag, uint64_t ref)
{
    return &dag->resv.slot_metas[(ref % dag->plan.max_inflight) * dag->plan.ninputs];
}

/* Notes when an execution began to wait for room (span clock; *at 0: it
 * did not), for its traced execute span: read only at a wait, so that an
 * execute that does not wait reads the clock once, after its inputs went. */
static inline void note_blocked(adag_dag_h dag, uint64_t *at)
{
    if (dag->trace && !*at)
        *at = adag__trace_clock();
}

/* Waits (under dag->lock) until ref `seq` fits in the window. */
static adag_status_t wait_for_room(adag_dag_h dag, uint64_t seq, int nonblock, int64_t deadline,
                                   const char *fn, uint64_t *blocked_at)
{
    while (seq >= dag->next_release + dag->plan.max_inflight) {
        if (dag->abort_status != ADAG_OK)
            return adag__dag_abort_error(dag, fn);
        note_blocked(dag, blocked_at);
        uint64_t oldest = dag->next_release;
        uint8_t f = dag->ref_flags[oldest % dag->plan.max_inflight];
        if ((f & REF_RELEASED) && oldest < dag->resv.next_publish) {
            /* released early: its slots come back once it completes */
            adag_status_t st = ADAG_OK;
            pthread_mutex_unlock(&dag->lock);
            for (unsigned e = 0; e < dag->ends.nouts && st == ADAG_OK; e++) {
                adag_slot_view_t view;
                st = adag__chan_wait(dag->ends.outs[e], oldest, nonblock ? 0 : deadline, &view);
            }
            if (st == ADAG_ERR_CLOSED)
                st = adag__dag_wait_error(dag, st, fn);
            pthread_mutex_lock(&dag->lock);
            if (st == ADAG_ERR_TIMEOUT)
                return nonblock ? adag__error(ADAG_ERR_AGAIN,
                                             "%s: ref %llu (released) is still running", fn,
                                             (unsigned long long)oldest)
                                : adag__error(ADAG_ERR_TIMEOUT,
                                             "%s: no room after %d ms: ref %llu is still running",
                                             fn, dag->execute_timeout_ms,
                                             (unsigned long long)oldest);
            if (st != ADAG_OK)
                return st;
            adag__dag_advance_releases(dag);
            continue;
        }
        const char *why = (f & REF_RESERVED) && !(f & REF_COMMITTED)
                              ? "is reserved and not yet committed"
                              : "is not released";
        if (nonblock)
            return adag__error(ADAG_ERR_AGAIN,
                              "%s: ref %llu %s and ref %llu reuses its slots (max_inflight %u)",
                              fn, (unsigned long long)oldest, why, (unsigned long long)seq,
                              dag->plan.max_inflight);
        if (deadline != ADAG_FOREVER && adag__now_ns() >= deadline)
            return adag__error(ADAG_ERR_TIMEOUT,
                              "%s: no room after %d ms: ref %llu %s and ref %llu reuses its "
                              "slots (max_inflight %u); release ref %llu with adag_dag_release",
                              fn, dag->execute_timeout_ms, (unsigned long long)oldest, why,
                              (unsigned long long)seq, dag->plan.max_inflight,
                              (unsigned long long)oldest);
        adag__dag_cond_wait(dag, deadline);
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
    if (--dag->resv.nreserved == 0 && dag->closing)
        pthread_cond_broadcast(&dag->cond);
}

static void publish_ready(adag_dag_h dag);

/* Ref seq's tickets on the DAG's shared communicators, drawn for all of
 * them at once (dag/proc/comm_lease.c: one global order), then published. */
static adag_status_t publish_tickets(adag_dag_h dag, uint64_t seq)
{
    adag_status_t st = ADAG_OK;
    void **bufs = &dag->ends.order_bufs[(seq % dag->plan.max_inflight) * dag->plan.norders];
    pthread_mutex_lock(&dag->run.rt->order_lock);
    for (unsigned i = 0; i < dag->plan.norders && st == ADAG_OK; i++) {
        uint64_t ticket = adag__comm_lease_next_ticket(dag->ends.order_leases[i]);
        memcpy(bufs[i], &ticket, sizeof(ticket));
        st = adag__chan_publish(dag->ends.orders[i], seq, sizeof(ticket), NULL, ADAG_OK, NULL);
    }
    pthread_mutex_unlock(&dag->run.rt->order_lock);
    return st;
}

static void *host_view(adag_dag_h dag, uint64_t ref, unsigned i);
static adag_status_t commit_locked(adag_dag_h dag, uint64_t ref, const adag_value_t *inputs,
                                   int zero_copy, const char *fn);
static void cancel_locked(adag_dag_h dag, uint64_t ref);

/* Takes the next ref: room in the window, then every slot it writes (and
 * the last copy out of its input staging). The reservation stays open
 * (counted in dag->resv.nreserved) until the ref is committed or cancelled.
 * zero_copy: the public reserve, whose execute record runs to the commit.
 * commit_now (execute): the host inputs are copied into their views as
 * soon as the slots are taken, and the ref is committed in the second
 * critical section, so that execute costs two lock round trips, like a
 * reserve alone; the caller stays counted in api_users throughout.
 * Two short critical sections; none held across a wait. */
static adag_status_t take_ref(adag_dag_h dag, unsigned flags, const char *fn, int zero_copy,
                              int commit_now, const adag_value_t *inputs, uint64_t *ref,
                              uint64_t *blocked_at)
{
    adag_status_t st = ADAG_OK;
    uint64_t own_blocked_at = 0;
    if (!blocked_at)
        blocked_at = &own_blocked_at;
    if (flags & ~(unsigned)ADAG_EXECUTE_NONBLOCK)
        return adag__error(ADAG_ERR_INVALID, "%s: unknown flags 0x%x", fn, flags);
    int nonblock = (flags & ADAG_EXECUTE_NONBLOCK) != 0;
    int64_t deadline = nonblock ? 0 : adag__deadline_ms(dag->execute_timeout_ms);

    pthread_mutex_lock(&dag->lock);
    if (dag->closing) {
        pthread_mutex_unlock(&dag->lock);
        return adag__error(ADAG_ERR_CLOSED, "%s: DAG %s is being destroyed", fn, dag->run.name);
    }
    dag->api_users++;
    while (dag->resv.acquiring) {
        if (dag->abort_status != ADAG_OK) {
            st = adag__dag_abort_error(dag, fn);
            goto fail_locked;
        }
        if (nonblock || (deadline != ADAG_FOREVER && adag__now_ns() >= deadline)) {
            st = nonblock ? adag__error(ADAG_ERR_AGAIN,
                                       "%s: another thread is taking ref %llu of DAG %s", fn,
                                       (unsigned long long)dag->resv.next_reserve, dag->run.name)
                          : adag__error(ADAG_ERR_TIMEOUT,
                                       "%s: no room after %d ms: another thread is taking ref "
                                       "%llu of DAG %s",
                                       fn, dag->execute_timeout_ms,
                                       (unsigned long long)dag->resv.next_reserve, dag->run.name);
            goto fail_locked;
        }
        note_blocked(dag, blocked_at);
        adag__dag_cond_wait(dag, deadline);
    }
    if (dag->abort_status != ADAG_OK) {
        st = adag__dag_abort_error(dag, fn);
        goto fail_locked;
    }
    dag->resv.acquiring = 1;
    uint64_t seq = dag->resv.next_reserve;
    /* its get's record (2 seq + 1 of the indexed ring), begun before its
     * inputs can go: the get, on the path to the caller's next execute,
     * writes only its stamps (a get on another thread sees this through
     * the values it waited for) */
    if (dag->trace)
        adag__trace_begin(dag->trace, 2 * seq + 1, ADAG_SPAN_GET, seq);
    st = wait_for_room(dag, seq, nonblock, deadline, fn, blocked_at);
    pthread_mutex_unlock(&dag->lock);
    void **bufs = slot_bufs(dag, seq);
    for (unsigned i = 0; i < dag->plan.ninputs && st == ADAG_OK; i++) {
        st = adag__chan_acquire(dag->ends.inputs[i], seq, deadline, &bufs[i]);
        if (st == ADAG_ERR_TIMEOUT)
            st = nonblock
                     ? adag__error(ADAG_ERR_AGAIN, "%s: actors still read input %u of ref %llu", fn,
                                   i, (unsigned long long)(seq - dag->plan.max_inflight))
                     : adag__error(ADAG_ERR_TIMEOUT,
                                   "%s: no room after %d ms: actors still read input %u of "
                                   "ref %llu",
                                   fn, dag->execute_timeout_ms, i,
                                   (unsigned long long)(seq - dag->plan.max_inflight));
        else if (st != ADAG_OK)
            st = adag__dag_wait_error(dag, st, fn);
    }
    /* the start channel (read by actors with a method of no argument) is
     * written like an input: its slot for seq is free once every such
     * actor released seq - max_inflight, which may be after the DAG's
     * outputs of that ref came back */
    if (dag->ends.start && st == ADAG_OK) {
        void *start_buf;
        st = adag__chan_acquire(dag->ends.start, seq, deadline, &start_buf);
        if (st == ADAG_ERR_TIMEOUT)
            st = adag__error(nonblock ? ADAG_ERR_AGAIN : ADAG_ERR_TIMEOUT,
                            "%s: %s: actors still run ref %llu (channel %s)", fn,
                            nonblock ? "no room now" : "no room in time",
                            (unsigned long long)(seq - dag->plan.max_inflight), dag->ends.start->name);
        else if (st != ADAG_OK)
            st = adag__dag_wait_error(dag, st, fn);
    }
    for (unsigned i = 0; i < dag->plan.norders && st == ADAG_OK; i++) {
        st = adag__chan_acquire(dag->ends.orders[i], seq, deadline,
                               &dag->ends.order_bufs[(seq % dag->plan.max_inflight) * dag->plan.norders + i]);
        if (st == ADAG_ERR_TIMEOUT)
            st = adag__error(nonblock ? ADAG_ERR_AGAIN : ADAG_ERR_TIMEOUT,
                            "%s: %s: actors still run the collectives of ref %llu (channel %s)",
                            fn, nonblock ? "no room now" : "no room in time",
                            (unsigned long long)(seq - dag->plan.max_inflight),
                            dag->ends.orders[i]->name);
        else if (st != ADAG_OK)
            st = adag__dag_wait_error(dag, st, fn);
    }
    /* the staging of a device input is handed out again once the copy out
     * of it (ref seq - max_inflight's, committed before that ref could be
     * released: the lock orders its staged_pending) is done */
    if (st == ADAG_OK)
        st = adag__dag_staging_wait(dag, seq, nonblock, deadline, fn);
    /* execute: the views are this caller's alone until the ref is
     * published; a device tensor is copied by the commit, in the stream's
     * order. A large host input is copied by the runtime's copy pool
     * (common/copy_pool.h), split over its threads; it returns once every
     * chunk is written, joined under the pool's lock (acquire/release), so
     * the bytes happen-before the publish below (dag->lock, then the
     * channel's release store, which the readers acquire). */
    for (unsigned i = 0; commit_now && st == ADAG_OK && i < dag->plan.ninputs; i++)
        if (inputs[i].size && inputs[i].device == ADAG_DEVICE_HOST)
            adag__copy_pool_memcpy(&dag->run.rt->copy_pool, host_view(dag, seq, i),
                                   inputs[i].data, inputs[i].size);
    pthread_mutex_lock(&dag->lock);
    dag->resv.acquiring = 0;
    adag__dag_wake(dag);
    if (st != ADAG_OK)
        goto fail_locked;
    unsigned s = (unsigned)(seq % dag->plan.max_inflight);
    dag->ref_flags[s] = REF_RESERVED;
    dag->resv.slot_owner[s] = pthread_self();
    dag->resv.next_reserve = seq + 1;
    dag->resv.nreserved++;
    /* the zero-copy API: its execute record runs from the reserve (its
     * wait for room, if any) to the commit, which ends it */
    if (zero_copy && dag->trace)
        adag__trace_begin_at(dag->trace, 2 * seq, ADAG_SPAN_EXECUTE, seq,
                            *blocked_at ? *blocked_at : adag__trace_clock());
    if (commit_now) {
        if (dag->closing) {
            cancel_locked(dag, seq);
            st = adag__error(ADAG_ERR_CLOSED, "%s: DAG %s is being destroyed", fn, dag->run.name);
        } else {
            st = commit_locked(dag, seq, inputs, 0, fn);
        }
        if (st != ADAG_OK)
            goto fail_locked;
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
    while (dag->resv.next_publish < dag->resv.next_reserve && dag->abort_status == ADAG_OK) {
        uint64_t seq = dag->resv.next_publish;
        uint8_t f = dag->ref_flags[seq % dag->plan.max_inflight];
        if (!(f & (REF_COMMITTED | REF_CANCELLED)))
            break;
        const size_t *sizes = slot_sizes(dag, seq);
        const adag_tensor_meta_t *metas = slot_metas(dag, seq);
        adag_status_t st = ADAG_OK, status = f & REF_CANCELLED ? ADAG_ERR_CLOSED : ADAG_OK;
        for (unsigned i = 0; i < dag->plan.ninputs && st == ADAG_OK; i++) {
            size_t size = status == ADAG_OK ? sizes[i] : 0;
            st = adag__chan_publish(dag->ends.inputs[i], seq, size,
                                   metas[i].dtype != ADAG_DTYPE_BYTES ? &metas[i] : NULL, status,
                                   "the execution was cancelled");
            dag->ends.input_counts[i][0]++;
            dag->ends.input_counts[i][1] += size;
        }
        /* a cancelled ref gets its tickets too: its loops run it */
        if (st == ADAG_OK && dag->plan.norders)
            st = publish_tickets(dag, seq);
        /* a cancelled ref's start carries its status: methods of no
         * argument are skipped like those whose inputs failed */
        if (st == ADAG_OK && dag->ends.start)
            st = adag__chan_publish(dag->ends.start, seq, 0, NULL, status,
                                   "the execution was cancelled");
        if (st != ADAG_OK) {
            adag__dag_fail_locked(dag, st, adag_last_error());
            break;
        }
        dag->resv.next_publish = seq + 1;
        moved = 1;
    }
    if (!moved)
        return;
    /* the loops may have finished a ref already, before it counted as live
     * for the monitor's recomputation of the fd */
    if (atomic_load_explicit(&dag->run.fd_armed, memory_order_relaxed))
        adag__dag_update_fd(dag);
    adag__dag_advance_releases(dag); /* cancelled refs count as released */
    adag__dag_wake(dag);
}

/* The reservation `ref` of this DAG, still open. Under dag->lock. */
static adag_status_t check_reserved(adag_dag_h dag, uint64_t ref, const char *fn)
{
    uint8_t f = ref < dag->resv.next_reserve && ref >= dag->resv.next_publish
                    ? dag->ref_flags[ref % dag->plan.max_inflight]
                    : 0;
    if (!(f & REF_RESERVED) || (f & (REF_COMMITTED | REF_CANCELLED)))
        return adag__error(ADAG_ERR_INVALID,
                          "%s: ref %llu of DAG %s is not a reservation waiting for its commit",
                          fn, (unsigned long long)ref, dag->run.name);
    return ADAG_OK;
}

/* Commits reservation ref (checked open by the caller under dag->lock,
 * still held) with inputs (checked too): the device inputs' copies are
 * enqueued, each input's size and metadata kept for its publish. A copy
 * that cannot be enqueued cancels the ref. zero_copy: its execute record
 * (begun at the reserve) ends here. */
static adag_status_t commit_locked(adag_dag_h dag, uint64_t ref, const adag_value_t *inputs,
                                   int zero_copy, const char *fn)
{
    adag_status_t st = adag__dag_copy_device_inputs(dag, ref, slot_bufs(dag, ref), inputs, fn);
    if (st != ADAG_OK) {
        char why[ADAG_ERROR_MAX];
        snprintf(why, sizeof(why), "%s", adag_last_error());
        cancel_locked(dag, ref);
        return adag__error(st, "%s; ref %llu was cancelled", why, (unsigned long long)ref);
    }
    size_t *sizes = slot_sizes(dag, ref);
    adag_tensor_meta_t *metas = slot_metas(dag, ref);
    for (unsigned i = 0; i < dag->plan.ninputs; i++) {
        int tensor = inputs[i].kind == ADAG_VALUE_TENSOR;
        sizes[i] = inputs[i].size;
        metas[i].dtype = tensor ? (uint32_t)inputs[i].dtype : 0;
        metas[i].ndim = tensor ? inputs[i].ndim : 0;
        for (unsigned d = 0; d < metas[i].ndim; d++)
            metas[i].shape[d] = inputs[i].shape[d];
    }
    dag->ref_flags[ref % dag->plan.max_inflight] |= REF_COMMITTED;
    dag->stats.executed++;
    publish_ready(dag);
    /* traced: its execute record (2 ref of the indexed ring), begun at the
     * reserve, ends here (its inputs were written in place meanwhile) */
    if (zero_copy && dag->trace)
        adag__trace_end_begun(dag->trace, 2 * ref, ADAG_SPAN_EXECUTE, ref, adag__trace_clock());
    reservation_ended_locked(dag);
    return ADAG_OK;
}

/* Cancels reservation ref (under dag->lock). */
static void cancel_locked(adag_dag_h dag, uint64_t ref)
{
    unsigned s = (unsigned)(ref % dag->plan.max_inflight);
    if (ref + 1 == dag->resv.next_reserve && !dag->resv.acquiring) {
        dag->ref_flags[s] = 0; /* the newest: given back */
        dag->resv.next_reserve = ref;
    } else {
        dag->ref_flags[s] |= REF_CANCELLED | REF_RELEASED;
        publish_ready(dag);
    }
    adag__dag_wake(dag);
    reservation_ended_locked(dag);
}

unsigned adag__dag_drop_reservations(adag_dag_h dag, int own_only)
{
    unsigned n = 0;
    for (uint64_t r = dag->resv.next_reserve; r-- > dag->resv.next_publish;) {
        unsigned s = (unsigned)(r % dag->plan.max_inflight);
        uint8_t f = dag->ref_flags[s];
        if ((f & REF_RESERVED) && !(f & (REF_COMMITTED | REF_CANCELLED)) &&
            (!own_only || pthread_equal(dag->resv.slot_owner[s], pthread_self()))) {
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
    const adag_dag_chan_t *c = &dag->plan.chans[dag->ends.input_chan[i]];
    int tensor = v->kind == ADAG_VALUE_TENSOR;
    if (adag__tensor_decl_allows(&c->tensor, tensor ? (uint32_t)v->dtype : 0, v->ndim, v->shape))
        return ADAG_OK;
    char want[160], got[160];
    adag__tensor_decl_format(want, sizeof(want), &c->tensor);
    adag__tensor_format(got, sizeof(got), tensor ? (uint32_t)v->dtype : 0, v->ndim, v->shape);
    return adag__error(ADAG_ERR_INVALID, "%s: input %u (channel %s) is declared %s, given %s", fn,
                      i, c->name, want, got);
}

/* The inputs of an execution: n of them, each a value this library
 * accepts (adag__value_check_input), in memory its field may take, of its
 * declared type, fitting its slot. */
static adag_status_t check_inputs(adag_dag_h dag, const char *fn, const adag_value_t *inputs,
                                  unsigned n)
{
    adag_status_t st;
    if (n != dag->plan.ninputs)
        return adag__error(ADAG_ERR_INVALID, "%s: DAG %s takes %u inputs, %u given", fn, dag->run.name,
                          dag->plan.ninputs, n);
    for (unsigned i = 0; i < n; i++) {
        if ((st = adag__value_check_input(&inputs[i], fn, i)) != ADAG_OK ||
            (st = adag__dag_check_device_input(dag, fn, i, &inputs[i])) != ADAG_OK ||
            (st = check_declared(dag, fn, i, &inputs[i])) != ADAG_OK)
            return st;
        if (inputs[i].size > dag->ends.inputs[i]->capacity)
            return adag__error(ADAG_ERR_TOO_LARGE,
                              "%s: input %u (channel %s) is %zu bytes, larger than the slot "
                              "capacity of %zu bytes",
                              fn, i, dag->plan.chans[dag->ends.input_chan[i]].name, inputs[i].size,
                              dag->ends.inputs[i]->capacity);
    }
    return ADAG_OK;
}

/* What adag_dag_inputs says of input i (no pointers). */
static void describe_input(adag_dag_h dag, unsigned i, adag_input_view_t *v)
{
    const adag_tensor_decl_t *t = &dag->plan.chans[dag->ends.input_chan[i]].tensor;
    memset(v, 0, sizeof(*v));
    v->capacity = dag->ends.inputs[i]->capacity;
    v->device = adag__dag_input_on_device(dag, i)
                    ? ADAG_DEVICE(dag->plan.driver_dev_kind, dag->plan.driver_dev_index)
                    : ADAG_DEVICE_HOST;
    v->flags = (t->flags & ADAG_TENSOR_DECLARED ? ADAG_INPUT_TENSOR : 0) |
               (t->flags & ADAG_TENSOR_STATIC_DTYPE ? ADAG_INPUT_STATIC_DTYPE : 0) |
               (t->flags & ADAG_TENSOR_STATIC_SHAPE ? ADAG_INPUT_STATIC_SHAPE : 0);
    v->dtype = (adag_dtype_t)t->dtype;
    v->ndim = t->ndim;
    for (unsigned d = 0; d < t->ndim && d < ADAG_MAX_DIMS; d++)
        v->shape[d] = t->shape[d];
}

/* Where reserved ref's input i is written from the host: its slot, or
 * the staging of a device input. */
static void *host_view(adag_dag_h dag, uint64_t ref, unsigned i)
{
    return adag__dag_input_on_device(dag, i) ? adag__dag_staging_buf(dag, ref, i)
                                            : slot_bufs(dag, ref)[i];
}

/* A commit's inputs are where ref's views have them. */
static adag_status_t check_written(adag_dag_h dag, uint64_t ref, const char *fn,
                                   const adag_value_t *inputs)
{
    for (unsigned i = 0; i < dag->plan.ninputs; i++) {
        const adag_value_t *v = &inputs[i];
        int host = v->device == ADAG_DEVICE_HOST;
        void *want = host ? host_view(dag, ref, i) : slot_bufs(dag, ref)[i];
        if (v->data == want || (!v->data && !v->size))
            continue;
        return adag__error(ADAG_ERR_INVALID,
                          "%s: input %u (channel %s) of ref %llu: data %p is not the view's %s "
                          "(%p); a commit names the memory its inputs were written in",
                          fn, i, dag->plan.chans[dag->ends.input_chan[i]].name, (unsigned long long)ref,
                          v->data, host ? "data" : "device_data", want);
    }
    return ADAG_OK;
}

/* ---- the API ---- */

adag_status_t adag_dag_execute(adag_dag_h dag, const adag_value_t *inputs, unsigned n,
                               unsigned flags, adag_ref_t *ref)
{
    static const char *fn = "adag_dag_execute";
    adag_status_t st;
    uint64_t seq, blocked_at = 0;

    if (!dag || !ref || (n && !inputs))
        return adag__error(ADAG_ERR_INVALID, "%s: dag, inputs and ref must not be NULL", fn);
    if ((st = check_inputs(dag, fn, inputs, n)) != ADAG_OK)
        return st; /* before anything is reserved */
    if ((st = take_ref(dag, flags, fn, 0, 1, inputs, &seq, &blocked_at)) != ADAG_OK)
        return st;
    *ref = seq;
    /* the driver's ring is indexed: ref's execute is record 2 ref. Its
     * span: from when it began to wait for room (if it did) to when its
     * inputs were published; the clock is read after they went, off the
     * path to the first stage */
    if (dag->trace) {
        uint64_t t1 = adag__trace_clock();
        adag__trace_put(dag->trace, 2 * seq, ADAG_SPAN_EXECUTE, seq, blocked_at ? blocked_at : t1,
                       t1);
    }
    return ADAG_OK;
}

adag_status_t adag_dag_reserve(adag_dag_h dag, unsigned flags, adag_input_view_t *views,
                               unsigned n, adag_ref_t *ref)
{
    static const char *fn = "adag_dag_reserve";
    adag_status_t st;
    uint64_t seq;
    if (!dag || !ref || (n && !views))
        return adag__error(ADAG_ERR_INVALID, "%s: dag, views and ref must not be NULL", fn);
    if (n != dag->plan.ninputs)
        return adag__error(ADAG_ERR_INVALID, "%s: DAG %s takes %u inputs, %u views given", fn,
                          dag->run.name, dag->plan.ninputs, n);
    if ((st = take_ref(dag, flags, fn, 1, 0, NULL, &seq, NULL)) != ADAG_OK)
        return st;
    /* the views of a reserved ref are stable: its slots' buffers and
     * staging do not move */
    for (unsigned i = 0; i < n; i++) {
        describe_input(dag, i, &views[i]);
        views[i].data = host_view(dag, seq, i);
        if (adag__dag_input_on_device(dag, i)) {
            const adag_chan_device_t *d = &dag->ends.driver_dev->chan;
            views[i].device_data = slot_bufs(dag, seq)[i];
            views[i].stream = d->dev->ops->stream_native(d->compute);
        }
    }
    *ref = seq;
    return ADAG_OK;
}

adag_status_t adag_dag_commit(adag_dag_h dag, adag_ref_t ref, const adag_value_t *inputs,
                              unsigned n)
{
    static const char *fn = "adag_dag_commit";
    if (!dag || (n && !inputs))
        return adag__error(ADAG_ERR_INVALID, "%s: dag and inputs must not be NULL", fn);
    /* under the lock throughout: the checks read the reservation's slots,
     * and nothing of the DAG is touched after the lock is let go (destroy
     * may free it once the reservation ended) */
    pthread_mutex_lock(&dag->lock);
    adag_status_t st = check_reserved(dag, ref, fn);
    if (st == ADAG_OK && dag->closing) {
        cancel_locked(dag, ref);
        st = adag__error(ADAG_ERR_CLOSED, "%s: DAG %s is being destroyed: ref %llu was cancelled",
                        fn, dag->run.name, (unsigned long long)ref);
    }
    /* a refused input leaves it reserved: fix it and commit, or cancel */
    if (st == ADAG_OK && (st = check_inputs(dag, fn, inputs, n)) == ADAG_OK &&
        (st = check_written(dag, ref, fn, inputs)) == ADAG_OK)
        st = commit_locked(dag, ref, inputs, 1, fn);
    pthread_mutex_unlock(&dag->lock);
    return st;
}

adag_status_t adag_dag_cancel(adag_dag_h dag, adag_ref_t ref)
{
    static const char *fn = "adag_dag_cancel";
    if (!dag)
        return adag__error(ADAG_ERR_INVALID, "%s: dag is NULL", fn);
    pthread_mutex_lock(&dag->lock);
    adag_status_t st = check_reserved(dag, ref, fn);
    if (st == ADAG_OK)
        cancel_locked(dag, ref);
    pthread_mutex_unlock(&dag->lock);
    return st;
}

adag_status_t adag_dag_inputs(adag_dag_h dag, adag_input_view_t *views, unsigned n,
                              unsigned *ninputs)
{
    if (!dag || !ninputs || (n && !views))
        return adag__error(ADAG_ERR_INVALID,
                          "adag_dag_inputs: dag, views and ninputs must not be NULL");
    for (unsigned i = 0; i < n && i < dag->plan.ninputs; i++)
        describe_input(dag, i, &views[i]);
    *ninputs = dag->plan.ninputs;
    return ADAG_OK;
}

const char *adag_dag_name(adag_dag_h dag)
{
    return dag ? dag->run.name : "(null)";
}

adag_status_t adag_dag_config(adag_dag_h dag, adag_config_h *config)
{
    if (!dag || !config)
        return adag__error(ADAG_ERR_INVALID, "adag_dag_config: dag and config must not be NULL");
    *config = NULL;
    adag_config_h c = calloc(1, sizeof(*c));
    if (!c)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_dag_config: out of memory");
    adag_status_t st = adag__settings_copy(&c->settings, &dag->run.rt->settings);
    if (st != ADAG_OK) {
        free(c);
        adag__error_prefix("adag_dag_config: DAG %s", dag->run.name);
        return st;
    }
    *config = c;
    return ADAG_OK;
}

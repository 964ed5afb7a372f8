/*
 * The driver side of a compiled DAG: execute writes the inputs of ref
 * `submitted` into the input channels; get waits on the output channels;
 * release gives output slots back in ref order (a ref released early is
 * given back once it completes). Refs in [next_release, submitted) are live;
 * ref_flags[ref % max_inflight] records GOTTEN / RELEASED for each.
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/value.h"
#include "dag/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ref_complete(adag_dag_h dag, uint64_t ref);

void adag_dag_update_fd(adag_dag_h dag)
{
    /* unarmed: nobody polls it, and adag_dag_fd recomputes when it arms */
    if (dag->user_fd < 0 || !atomic_load_explicit(&dag->fd_armed, memory_order_relaxed))
        return;
    int ready = dag->abort_status != ADAG_OK;
    for (uint64_t r = dag->next_release; r < dag->submitted && !ready; r++)
        ready = !(dag->ref_flags[r % dag->max_inflight] & (REF_GOTTEN | REF_RELEASED)) &&
                ref_complete(dag, r);
    if (ready == dag->user_fd_ready)
        return;
    uint64_t v = 1;
    if (ready) {
        while (write(dag->user_fd, &v, sizeof(v)) < 0 && errno == EINTR) {
        }
    } else {
        while (read(dag->user_fd, &v, sizeof(v)) < 0 && errno == EINTR) {
        }
    }
    dag->user_fd_ready = ready;
}

static void fail_locked(adag_dag_h dag, adag_status_t status, const char *msg)
{
    if (dag->abort_status == ADAG_OK) {
        dag->abort_status = status;
        snprintf(dag->abort_msg, sizeof(dag->abort_msg), "%s", msg);
        /* every wait of the driver and its thread actors ends ... */
        adag_ctx_abort(&dag->ctx, status);
        /* ... and every other actor's, by a message that never blocks */
        for (unsigned i = 0; i < dag->nactors; i++) {
            adag_actor_h a = dag->actors[i].actor;
            if (dag->actors[i].prepared && a->ops->abort_dag)
                a->ops->abort_dag(a, dag, status);
        }
        adag_dag_update_fd(dag);
        pthread_cond_broadcast(&dag->cond);
    }
}

void adag_dag_fail(adag_dag_h dag, adag_status_t status, const char *msg)
{
    pthread_mutex_lock(&dag->lock);
    fail_locked(dag, status, msg);
    pthread_mutex_unlock(&dag->lock);
}

int adag_dag_uses_actor(adag_dag_h dag, adag_actor_h a)
{
    for (unsigned i = 0; i < dag->nactors; i++)
        if (dag->actors[i].actor == a)
            return 1;
    return 0;
}

/* The DAG's failure as this call's error. Under dag->lock. */
static adag_status_t abort_error(adag_dag_h dag, const char *fn)
{
    return adag_error(dag->abort_status, "%s: DAG %s: %s", fn, dag->name, dag->abort_msg);
}

static adag_status_t api_enter(adag_dag_h dag, const char *fn)
{
    pthread_mutex_lock(&dag->lock);
    if (dag->closing) {
        pthread_mutex_unlock(&dag->lock);
        return adag_error(ADAG_ERR_CLOSED, "%s: DAG %s is being destroyed", fn, dag->name);
    }
    dag->api_users++;
    pthread_mutex_unlock(&dag->lock);
    return ADAG_OK;
}

static void api_leave(adag_dag_h dag)
{
    pthread_mutex_lock(&dag->lock);
    if (--dag->api_users == 0 && dag->closing)
        pthread_cond_broadcast(&dag->cond);
    pthread_mutex_unlock(&dag->lock);
}

/* A wait on a channel ended without data: the DAG failed or is closing. */
static adag_status_t wait_error(adag_dag_h dag, adag_status_t st, const char *fn)
{
    if (st != ADAG_ERR_CLOSED)
        return st; /* reported where detected */
    pthread_mutex_lock(&dag->lock);
    st = abort_error(dag, fn);
    pthread_mutex_unlock(&dag->lock);
    return st;
}

static int ref_complete(adag_dag_h dag, uint64_t ref)
{
    for (unsigned e = 0; e < dag->nouts; e++)
        if (!adag_chan_ready(dag->outs[e], ref))
            return 0;
    return 1;
}

/* Gives back, in ref order, the slots of refs released and complete. Under dag->lock. */
static void advance_releases(adag_dag_h dag)
{
    int moved = 0;
    while (dag->next_release < dag->submitted) {
        uint64_t ref = dag->next_release;
        uint8_t *flags = &dag->ref_flags[ref % dag->max_inflight];
        if (!(*flags & REF_RELEASED) || !ref_complete(dag, ref))
            break;
        for (unsigned e = 0; e < dag->nouts; e++)
            adag_chan_release(dag->outs[e], ref);
        *flags = 0;
        dag->next_release++;
        moved = 1;
    }
    if (moved)
        pthread_cond_broadcast(&dag->cond);
}

static void abs_timespec(int64_t deadline, struct timespec *ts)
{
    ts->tv_sec = deadline / 1000000000;
    ts->tv_nsec = deadline % 1000000000;
}

/* Waits on dag->cond (dag->lock held) until woken or the deadline. */
static void cond_wait_until(adag_dag_h dag, int64_t deadline)
{
    if (deadline == ADAG_FOREVER) {
        pthread_cond_wait(&dag->cond, &dag->lock);
    } else {
        struct timespec ts;
        abs_timespec(deadline, &ts);
        pthread_cond_timedwait(&dag->cond, &dag->lock, &ts);
    }
}

/* Waits (under dag->lock) until ref `seq` fits in the window. */
static adag_status_t wait_for_room(adag_dag_h dag, uint64_t seq, int nonblock, int64_t deadline)
{
    static const char *fn = "adag_dag_execute";
    while (seq >= dag->next_release + dag->max_inflight) {
        if (dag->abort_status != ADAG_OK)
            return abort_error(dag, fn);
        uint64_t oldest = dag->next_release;
        if (dag->ref_flags[oldest % dag->max_inflight] & REF_RELEASED) {
            /* released early: its slots come back once it completes */
            adag_status_t st = ADAG_OK;
            pthread_mutex_unlock(&dag->lock);
            for (unsigned e = 0; e < dag->nouts && st == ADAG_OK; e++) {
                adag_slot_view_t view;
                st = adag_chan_wait(dag->outs[e], oldest, nonblock ? 0 : deadline, &view);
            }
            if (st == ADAG_ERR_CLOSED)
                st = wait_error(dag, st, fn);
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
            advance_releases(dag);
            continue;
        }
        if (nonblock)
            return adag_error(ADAG_ERR_AGAIN,
                              "%s: ref %llu is not released and ref %llu reuses its slots "
                              "(max_inflight %u)",
                              fn, (unsigned long long)oldest, (unsigned long long)seq,
                              dag->max_inflight);
        if (deadline != ADAG_FOREVER && adag_now_ns() >= deadline)
            return adag_error(ADAG_ERR_TIMEOUT,
                              "%s: no room after %d ms: ref %llu is not released and ref %llu "
                              "reuses its slots (max_inflight %u); release ref %llu with "
                              "adag_dag_release",
                              fn, dag->execute_timeout_ms, (unsigned long long)oldest,
                              (unsigned long long)seq, dag->max_inflight,
                              (unsigned long long)oldest);
        cond_wait_until(dag, deadline);
    }
    return ADAG_OK;
}

/* Ends this thread's reservation (under dag->lock). */
static void end_reservation(adag_dag_h dag)
{
    dag->reserving = 0;
    dag->prepared = 0;
    pthread_cond_broadcast(&dag->cond);
}

/* Takes the reservation of the next execution (under dag->lock): one thread
 * at a time, since inputs are published in ref order. Waiting for another
 * thread's reservation honours NONBLOCK and the deadline; a thread that
 * already holds one (prepared, not committed) is told so. */
static adag_status_t take_reservation(adag_dag_h dag, const char *fn, int nonblock,
                                      int64_t deadline)
{
    if (dag->reserving && pthread_equal(dag->reserver, pthread_self()))
        return adag_error(ADAG_ERR_INVALID,
                          "%s: this thread holds ref %llu of DAG %s, prepared with "
                          "adag_dag_execute_prepare: commit or cancel it first",
                          fn, (unsigned long long)dag->reserved_seq, dag->name);
    while (dag->reserving) {
        if (dag->abort_status != ADAG_OK)
            return abort_error(dag, fn);
        if (nonblock)
            return adag_error(ADAG_ERR_AGAIN,
                              "%s: another thread is starting ref %llu of DAG %s%s", fn,
                              (unsigned long long)dag->reserved_seq, dag->name,
                              dag->prepared ? " (prepared, not yet committed)" : "");
        if (deadline != ADAG_FOREVER && adag_now_ns() >= deadline)
            return adag_error(ADAG_ERR_TIMEOUT,
                              "%s: no room after %d ms: another thread holds ref %llu of DAG "
                              "%s%s",
                              fn, dag->execute_timeout_ms, (unsigned long long)dag->reserved_seq,
                              dag->name, dag->prepared ? " (prepared, not yet committed)" : "");
        cond_wait_until(dag, deadline);
    }
    if (dag->abort_status != ADAG_OK)
        return abort_error(dag, fn);
    dag->reserving = 1;
    dag->prepared = 0;
    dag->reserver = pthread_self();
    dag->reserved_seq = dag->submitted;
    return ADAG_OK;
}

/* Reserves the next execution: the reservation, room in the window and
 * every input slot (taken before any is published, so a timeout leaves
 * nothing half-sent). No lock is held across any of these waits. On success
 * the caller holds the reservation and counts as an API user until
 * start_execution or unreserve. */
static adag_status_t reserve(adag_dag_h dag, unsigned flags, const char *fn, uint64_t *seq_out)
{
    adag_status_t st;
    if (flags & ~(unsigned)ADAG_EXECUTE_NONBLOCK)
        return adag_error(ADAG_ERR_INVALID, "%s: unknown flags 0x%x", fn, flags);
    if ((st = api_enter(dag, fn)) != ADAG_OK)
        return st;
    int nonblock = (flags & ADAG_EXECUTE_NONBLOCK) != 0;
    int64_t deadline = nonblock ? 0 : adag_deadline_ms(dag->execute_timeout_ms);

    pthread_mutex_lock(&dag->lock);
    st = take_reservation(dag, fn, nonblock, deadline);
    if (st != ADAG_OK) {
        pthread_mutex_unlock(&dag->lock);
        api_leave(dag);
        return st;
    }
    uint64_t seq = dag->reserved_seq;
    st = wait_for_room(dag, seq, nonblock, deadline);
    pthread_mutex_unlock(&dag->lock);
    for (unsigned i = 0; i < dag->ninputs && st == ADAG_OK; i++) {
        st = adag_chan_acquire(dag->inputs[i], seq, deadline, &dag->input_slots[i]);
        if (st == ADAG_ERR_TIMEOUT)
            st = nonblock ? adag_error(ADAG_ERR_AGAIN, "%s: actors still read input %u of ref %llu",
                                       fn, i, (unsigned long long)(seq - dag->max_inflight))
                          : adag_error(ADAG_ERR_TIMEOUT,
                                       "%s: no room after %d ms: actors still read input %u of "
                                       "ref %llu",
                                       fn, dag->execute_timeout_ms, i,
                                       (unsigned long long)(seq - dag->max_inflight));
        else if (st != ADAG_OK)
            st = wait_error(dag, st, fn);
    }
    if (st != ADAG_OK) {
        pthread_mutex_lock(&dag->lock);
        end_reservation(dag);
        pthread_mutex_unlock(&dag->lock);
        api_leave(dag);
        return st;
    }
    *seq_out = seq;
    return ADAG_OK;
}

static void unreserve(adag_dag_h dag)
{
    pthread_mutex_lock(&dag->lock);
    end_reservation(dag);
    pthread_mutex_unlock(&dag->lock);
    api_leave(dag);
}

/* Publishes the reserved execution's inputs (already in their slots), then
 * its start. A channel that cannot take them fails the DAG. */
static void start_execution(adag_dag_h dag, uint64_t seq, const size_t *sizes)
{
    adag_status_t st = ADAG_OK;
    for (unsigned i = 0; i < dag->ninputs && st == ADAG_OK; i++)
        st = adag_chan_publish(dag->inputs[i], seq, sizes[i], ADAG_OK, NULL);
    if (st == ADAG_OK && dag->start)
        st = adag_chan_publish(dag->start, seq, 0, ADAG_OK, NULL);
    if (st != ADAG_OK)
        adag_dag_fail(dag, st, adag_last_error());
    pthread_mutex_lock(&dag->lock);
    dag->ref_flags[seq % dag->max_inflight] = 0;
    dag->submitted = seq + 1;
    dag->stats.executed++;
    /* the loops may have finished it already, before it counted as live
     * for the monitor's recomputation of the fd */
    if (atomic_load_explicit(&dag->fd_armed, memory_order_relaxed))
        adag_dag_update_fd(dag);
    end_reservation(dag);
    pthread_mutex_unlock(&dag->lock);
    api_leave(dag);
}

static adag_status_t check_input_size(adag_dag_h dag, const char *fn, unsigned i, size_t size)
{
    if (size > dag->capacity)
        return adag_error(ADAG_ERR_TOO_LARGE,
                          "%s: input %u (channel input[%u]) is %zu bytes, larger than the slot "
                          "capacity of %zu bytes",
                          fn, i, i, size, dag->capacity);
    return ADAG_OK;
}

adag_status_t adag_dag_execute(adag_dag_h dag, const adag_value_t *inputs, unsigned n,
                               unsigned flags, adag_ref_t *ref)
{
    static const char *fn = "adag_dag_execute";
    adag_status_t st;
    uint64_t seq;

    if (!dag || !ref || (n && !inputs))
        return adag_error(ADAG_ERR_INVALID, "%s: dag, inputs and ref must not be NULL", fn);
    if (n != dag->ninputs)
        return adag_error(ADAG_ERR_INVALID, "%s: DAG %s takes %u inputs, %u given", fn, dag->name,
                          dag->ninputs, n);
    for (unsigned i = 0; i < n; i++) {
        if ((st = adag_value_check_input(&inputs[i], fn, i)) != ADAG_OK)
            return st;
        if ((st = check_input_size(dag, fn, i, inputs[i].size)) != ADAG_OK)
            return st;
    }
    if ((st = reserve(dag, flags, fn, &seq)) != ADAG_OK)
        return st;
    for (unsigned i = 0; i < n; i++) {
        if (inputs[i].size)
            memcpy(dag->input_slots[i], inputs[i].data, inputs[i].size);
        dag->input_sizes[i] = inputs[i].size;
    }
    start_execution(dag, seq, dag->input_sizes);
    *ref = seq;
    return ADAG_OK;
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
    if ((st = reserve(dag, flags, fn, &seq)) != ADAG_OK)
        return st;
    memcpy(buffers, dag->input_slots, n * sizeof(*buffers));
    pthread_mutex_lock(&dag->lock);
    dag->prepared = 1;
    pthread_mutex_unlock(&dag->lock);
    return ADAG_OK;
}

/* This thread's prepared execution, or ADAG_ERR_INVALID. */
static adag_status_t check_prepared(adag_dag_h dag, const char *fn)
{
    pthread_mutex_lock(&dag->lock);
    int mine = dag->reserving && dag->prepared && pthread_equal(dag->reserver, pthread_self());
    pthread_mutex_unlock(&dag->lock);
    if (!mine)
        return adag_error(ADAG_ERR_INVALID,
                          "%s: this thread has no execution prepared with "
                          "adag_dag_execute_prepare on DAG %s",
                          fn, dag->name);
    return ADAG_OK;
}

adag_status_t adag_dag_execute_commit(adag_dag_h dag, const size_t *sizes, unsigned n,
                                      adag_ref_t *ref)
{
    static const char *fn = "adag_dag_execute_commit";
    adag_status_t st;
    if (!dag || !ref || (n && !sizes))
        return adag_error(ADAG_ERR_INVALID, "%s: dag, sizes and ref must not be NULL", fn);
    if ((st = check_prepared(dag, fn)) != ADAG_OK)
        return st;
    if (n != dag->ninputs)
        return adag_error(ADAG_ERR_INVALID, "%s: DAG %s takes %u inputs, %u given", fn, dag->name,
                          dag->ninputs, n);
    for (unsigned i = 0; i < n; i++)
        if ((st = check_input_size(dag, fn, i, sizes[i])) != ADAG_OK)
            return st; /* still prepared: fix the size, or cancel */
    /* only this thread ends its reservation: reserved_seq is stable */
    uint64_t seq = dag->reserved_seq;
    start_execution(dag, seq, sizes);
    *ref = seq;
    return ADAG_OK;
}

adag_status_t adag_dag_execute_cancel(adag_dag_h dag)
{
    static const char *fn = "adag_dag_execute_cancel";
    adag_status_t st;
    if (!dag)
        return adag_error(ADAG_ERR_INVALID, "%s: dag is NULL", fn);
    if ((st = check_prepared(dag, fn)) != ADAG_OK)
        return st;
    unreserve(dag);
    return ADAG_OK;
}

/* Checks that ref is live. Under dag->lock. */
static adag_status_t check_ref(adag_dag_h dag, adag_ref_t ref, const char *fn)
{
    if (ref >= dag->submitted)
        return adag_error(ADAG_ERR_INVALID, "%s: ref %llu of DAG %s was never issued", fn,
                          (unsigned long long)ref, dag->name);
    if (ref < dag->next_release || (dag->ref_flags[ref % dag->max_inflight] & REF_RELEASED))
        return adag_error(ADAG_ERR_INVALID, "%s: ref %llu of DAG %s was already released", fn,
                          (unsigned long long)ref, dag->name);
    return ADAG_OK;
}

adag_status_t adag_dag_get(adag_dag_h dag, adag_ref_t ref, adag_value_t *outputs, unsigned n,
                           int timeout_ms)
{
    static const char *fn = "adag_dag_get";
    adag_status_t st, result = ADAG_OK;
    const char *err = "";
    size_t err_len = 0;

    if (!dag || (n && !outputs))
        return adag_error(ADAG_ERR_INVALID, "%s: dag and outputs must not be NULL", fn);
    if (n != dag->noutputs)
        return adag_error(ADAG_ERR_INVALID, "%s: DAG %s has %u outputs, %u requested", fn,
                          dag->name, dag->noutputs, n);
    if (timeout_ms < -1)
        return adag_error(ADAG_ERR_INVALID,
                          "%s: timeout_ms %d is negative; use -1 to wait forever, 0 to poll", fn,
                          timeout_ms);
    if ((st = api_enter(dag, fn)) != ADAG_OK)
        return st;
    pthread_mutex_lock(&dag->lock);
    st = check_ref(dag, ref, fn);
    if (st == ADAG_OK && dag->abort_status != ADAG_OK)
        st = abort_error(dag, fn);
    pthread_mutex_unlock(&dag->lock);
    if (st != ADAG_OK)
        goto out;
    int64_t deadline = adag_deadline_ms(timeout_ms);
    for (unsigned o = 0; o < n; o++) {
        adag_slot_view_t view;
        st = adag_chan_wait(dag->outs[dag->output_of[o]], ref, deadline, &view);
        if (st == ADAG_ERR_TIMEOUT) {
            st = adag_error(ADAG_ERR_TIMEOUT, "%s: ref %llu of DAG %s not ready within %d ms", fn,
                            (unsigned long long)ref, dag->name, timeout_ms);
            goto out;
        }
        if (st != ADAG_OK) {
            st = wait_error(dag, st, fn);
            goto out;
        }
        outputs[o] = adag_value_bytes(view.data, view.size);
        if (view.status != ADAG_OK && result == ADAG_OK) {
            result = view.status;
            err = view.err;
            err_len = view.err_len;
        }
    }
    pthread_mutex_lock(&dag->lock);
    if (dag->abort_status != ADAG_OK) {
        st = abort_error(dag, fn);
    } else if ((st = check_ref(dag, ref, fn)) == ADAG_OK) {
        uint8_t *flags = &dag->ref_flags[ref % dag->max_inflight];
        if (!(*flags & REF_GOTTEN)) {
            *flags |= REF_GOTTEN;
            if (result == ADAG_OK)
                dag->stats.completed++;
            else
                dag->stats.failed++;
        }
        adag_dag_update_fd(dag);
    }
    pthread_mutex_unlock(&dag->lock);
    if (st == ADAG_OK && result != ADAG_OK)
        st = err_len ? adag_error(result, "%.*s", (int)err_len, err)
                     : adag_error(result, "%s", adag_status_str(result));
out:
    api_leave(dag);
    return st;
}

adag_status_t adag_dag_release(adag_dag_h dag, adag_ref_t ref)
{
    static const char *fn = "adag_dag_release";
    adag_status_t st;
    if (!dag)
        return adag_error(ADAG_ERR_INVALID, "%s: dag is NULL", fn);
    if ((st = api_enter(dag, fn)) != ADAG_OK)
        return st;
    pthread_mutex_lock(&dag->lock);
    if ((st = check_ref(dag, ref, fn)) == ADAG_OK) {
        dag->ref_flags[ref % dag->max_inflight] |= REF_RELEASED;
        dag->stats.released++;
        advance_releases(dag);
        adag_dag_update_fd(dag); /* a ref released unread no longer makes it readable */
        pthread_cond_broadcast(&dag->cond);
    }
    pthread_mutex_unlock(&dag->lock);
    api_leave(dag);
    return st;
}

adag_status_t adag_dag_fd(adag_dag_h dag, int *fd)
{
    if (!dag || !fd)
        return adag_error(ADAG_ERR_INVALID, "adag_dag_fd: dag and fd must not be NULL");
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&dag->lock);
    if (!atomic_load_explicit(&dag->fd_armed, memory_order_relaxed)) {
        /* each backend arms its writers' signal (seq_cst there: either a
         * writer sees it armed and signals, or the update below sees its
         * publish); the monitor watches the distinct fds */
        int *fds = calloc(dag->nouts + 1, sizeof(*fds));
        unsigned n = 0;
        if (!fds)
            st = adag_error(ADAG_ERR_NO_MEMORY, "adag_dag_fd: out of memory");
        for (unsigned e = 0; e < dag->nouts && st == ADAG_OK; e++) {
            adag_chan_t *ch = dag->outs[e];
            int nfd = ch->ops->notify_fd ? ch->ops->notify_fd(ch) : -1;
            if (nfd < 0) {
                st = adag_error(ADAG_ERR_INVALID,
                                "adag_dag_fd: output channel %s (%s) of DAG %s cannot signal "
                                "an fd",
                                ch->name, ch->ops->name, dag->name);
                break;
            }
            unsigned k = 0;
            while (k < n && fds[k] != nfd)
                k++;
            if (k == n)
                fds[n++] = nfd;
        }
        if (st == ADAG_OK) {
            dag->notify_fds = fds;
            dag->nnotify = n;
            atomic_store_explicit(&dag->fd_armed, 1, memory_order_seq_cst);
        } else {
            free(fds);
        }
    }
    pthread_mutex_unlock(&dag->lock);
    if (st != ADAG_OK)
        return st;
    adag_monitor_poke(dag->rt); /* it now watches the notify fds */
    pthread_mutex_lock(&dag->lock);
    adag_dag_update_fd(dag);
    pthread_mutex_unlock(&dag->lock);
    *fd = dag->user_fd;
    return ADAG_OK;
}

/* adag_dag_stats_t as first versioned: struct_size up to shm_bytes. */
#define ADAG_DAG_STATS_V1_SIZE (offsetof(adag_dag_stats_t, shm_bytes) + sizeof(size_t))

adag_status_t adag_dag_stats(adag_dag_h dag, adag_dag_stats_t *stats)
{
    if (!dag || !stats)
        return adag_error(ADAG_ERR_INVALID, "adag_dag_stats: dag and stats must not be NULL");
    if (stats->struct_size < ADAG_DAG_STATS_V1_SIZE)
        return adag_error(ADAG_ERR_INVALID,
                          "adag_dag_stats: stats->struct_size is %zu; set it to "
                          "sizeof(adag_dag_stats_t) (at least %zu)",
                          stats->struct_size, (size_t)ADAG_DAG_STATS_V1_SIZE);
    size_t n = stats->struct_size < sizeof(*stats) ? stats->struct_size : sizeof(*stats);
    pthread_mutex_lock(&dag->lock);
    adag_dag_stats_t s = dag->stats;
    pthread_mutex_unlock(&dag->lock);
    s.struct_size = n;
    memcpy(stats, &s, n);
    return ADAG_OK;
}

void adag_dag_free(adag_dag_h dag)
{
    adag_ctx_destroy(&dag->ctx);
    for (unsigned i = 0; i < dag->nactors; i++) {
        adag_program_free(&dag->actors[i].prog);
        adag_wbuf_free(&dag->actors[i].infos);
        adag_wbuf_free(&dag->actors[i].peers);
        adag_actor_drop(dag->actors[i].actor);
    }
    for (unsigned c = 0; c < dag->nchans; c++) {
        free(dag->chans[c].readers);
        adag_wbuf_free(&dag->chans[c].desc);
        adag_wbuf_free(&dag->chans[c].driver_info);
    }
    free(dag->notify_fds);
    if (dag->user_fd >= 0)
        close(dag->user_fd);
    free(dag->actors);
    free(dag->chans);
    free(dag->node_labels);
    free(dag->inputs);
    free(dag->input_slots);
    free(dag->input_sizes);
    free(dag->input_chan);
    free(dag->outs);
    free(dag->out_chan);
    free(dag->output_of);
    free(dag->ref_flags);
    pthread_cond_destroy(&dag->cond);
    pthread_mutex_destroy(&dag->lock);
    free(dag);
}

/* Stops the DAG on its actors: first every actor that answers later (a
 * worker), all at once, each with the whole teardown timeout, killing only
 * one that does not answer in time (a method stuck); then the ones that
 * stop at once (thread actors: their loops are joined). */
static void stop_actors(adag_dag_h dag)
{
    unsigned *ais = calloc(dag->nactors + 1, sizeof(*ais));
    adag_status_t *st = calloc(dag->nactors + 1, sizeof(*st));
    char (*why)[ADAG_ERROR_MAX] = calloc(dag->nactors + 1, sizeof(*why));
    int64_t deadline = adag_deadline_ms(dag->teardown_timeout_ms);
    if (!ais || !st || !why) {
        /* no memory to do it politely: the workers cannot keep the DAG */
        for (unsigned i = 0; i < dag->nactors; i++)
            if (dag->actors[i].prepared && dag->actors[i].actor->ops->kill)
                dag->actors[i].actor->ops->kill(dag->actors[i].actor,
                                                "out of memory while stopping a DAG");
        goto out;
    }
    for (int remote = 1; remote >= 0; remote--) {
        unsigned n = 0;
        for (unsigned i = 0; i < dag->nactors; i++)
            if (dag->actors[i].prepared && (dag->actors[i].actor->ops->step_fd != NULL) == remote)
                ais[n++] = i;
        adag_actors_step(dag, ais, n, ADAG_STEP_STOP, deadline, st, why);
        for (unsigned k = 0; k < n; k++) {
            adag_actor_h a = dag->actors[ais[k]].actor;
            dag->actors[ais[k]].prepared = 0;
            if (st[k] == ADAG_OK || st[k] == ADAG_ERR_ACTOR_DIED || !a->ops->kill)
                continue;
            ADAG_LOG_WARN("DAG %s: %s; killing the worker", dag->name, why[k]);
            a->ops->kill(a, "it did not stop its DAG within the teardown timeout");
        }
    }
out:
    free(ais);
    free(st);
    free(why);
}

adag_status_t adag_dag_destroy(adag_dag_h dag)
{
    if (!dag)
        return adag_error(ADAG_ERR_INVALID, "adag_dag_destroy: dag is NULL");
    adag_runtime_h rt = dag->rt;
    /* out of the runtime's list first: the monitor no longer touches it */
    pthread_mutex_lock(&rt->lock);
    adag_list_remove(&dag->link);
    pthread_mutex_unlock(&rt->lock);
    adag_monitor_poke(rt);

    pthread_mutex_lock(&dag->lock);
    /* an execution this thread prepared and never committed is dropped */
    if (dag->reserving && dag->prepared && pthread_equal(dag->reserver, pthread_self())) {
        end_reservation(dag);
        dag->api_users--;
    }
    dag->closing = 1;
    pthread_mutex_unlock(&dag->lock);
    adag_dag_fail(dag, ADAG_ERR_CLOSED, "the DAG was destroyed");
    pthread_mutex_lock(&dag->lock);
    while (dag->api_users > 0)
        pthread_cond_wait(&dag->cond, &dag->lock);
    pthread_mutex_unlock(&dag->lock);

    stop_actors(dag);
    adag_dag_free(dag);
    return ADAG_OK;
}

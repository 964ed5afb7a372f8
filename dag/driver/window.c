/*
 * The ref window of a compiled DAG, under its lock: refs in
 * [next_release, next_reserve) exist; ref_flags[ref % max_inflight]
 * records RESERVED / COMMITTED / CANCELLED / GOTTEN / RELEASED for each.
 * Failing the DAG (every waiter wakes with its status), the DAG fd's
 * readiness, waiting on the DAG's condition, the checks every API call
 * makes and the release accounting: what execute/reserve
 * (dag/driver/reserve.c) and get/release/destroy (dag/driver/driver.c)
 * share. Calls nothing above it.
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "dag/driver/dag.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void adag__dag_update_fd(adag_dag_h dag)
{
    /* unarmed: nobody polls it, and adag_dag_fd recomputes when it arms */
    if (dag->user_fd < 0 || !atomic_load_explicit(&dag->run.fd_armed, memory_order_relaxed))
        return;
    int ready = dag->abort_status != ADAG_OK;
    for (uint64_t r = dag->next_release; r < dag->resv.next_publish && !ready; r++)
        ready = !(dag->ref_flags[r % dag->plan.max_inflight] & (REF_GOTTEN | REF_RELEASED)) &&
                adag__dag_ref_complete(dag, r);
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

void adag__dag_fail_locked(adag_dag_h dag, adag_status_t status, const char *msg)
{
    if (dag->abort_status == ADAG_ERR_IO && status == ADAG_ERR_ACTOR_DIED) {
        /* a channel lost its peer (the symptom) before the monitor saw the
         * peer's actor die (the cause): the cause is what callers get */
        dag->abort_status = status;
        snprintf(dag->abort_msg, sizeof(dag->abort_msg), "%s", msg);
        adag__dag_wake(dag);
        return;
    }
    if (dag->abort_status == ADAG_OK) {
        dag->abort_status = status;
        snprintf(dag->abort_msg, sizeof(dag->abort_msg), "%s", msg);
        /* every wait of the driver and its thread actors ends ... */
        adag__ctx_abort(&dag->run.ctx, status);
        /* ... and every other actor's, by a message that never blocks */
        for (unsigned i = 0; i < dag->run.nactors; i++) {
            adag_actor_h a = dag->run.actors[i].actor;
            if (dag->run.actors[i].prepared && a->ops->abort_dag)
                a->ops->abort_dag(a, &dag->run, status);
        }
        adag__dag_update_fd(dag);
        adag__dag_wake(dag);
    }
}

void adag__dag_fail(adag_dag_h dag, adag_status_t status, const char *msg)
{
    pthread_mutex_lock(&dag->lock);
    adag__dag_fail_locked(dag, status, msg);
    pthread_mutex_unlock(&dag->lock);
}

/* Adds actor b's placement to the union `u` (first: nb == 0). */
/* A ucx channel lost its peer (ADAG_ERR_IO, from the channel or as the
 * DAG's failure): when an actor's death is behind it, the monitor learns so
 * from the actor's own connection (at once for a process that died; by
 * keepalive within ADAG_REMOTE_TIMEOUT_MS of the last answer for a link
 * cut, which a channel's endpoint may have timed out up to that long
 * before, or by the worker closing it when only the way to it is cut).
 * Waits twice that long for the cause; 1 when it came (dag->abort_status).
 * Under dag->lock. */
static int await_cause_locked(adag_dag_h dag)
{
    int64_t deadline = adag__deadline_ms(2 * (int)dag->run.rt->settings.remote_timeout_ms);
    while (dag->abort_status != ADAG_ERR_ACTOR_DIED && !dag->closing &&
           adag__now_ns() < deadline)
        adag__dag_cond_wait(dag, deadline);
    return dag->abort_status == ADAG_ERR_ACTOR_DIED;
}

/* The DAG's failure as this call's error (behind a lost peer, the actor
 * death that caused it, when one comes). Under dag->lock. */
adag_status_t adag__dag_abort_error(adag_dag_h dag, const char *fn)
{
    if (dag->abort_status == ADAG_ERR_IO)
        await_cause_locked(dag);
    return adag__error(dag->abort_status, "%s: DAG %s: %s", fn, dag->run.name, dag->abort_msg);
}

/* A wait on a channel ended without data: the DAG failed or is closing. */
adag_status_t adag__dag_wait_error(adag_dag_h dag, adag_status_t st, const char *fn)
{
    if (st == ADAG_ERR_IO) { /* reported where detected, unless a death explains it */
        pthread_mutex_lock(&dag->lock);
        if (await_cause_locked(dag))
            st = adag__dag_abort_error(dag, fn);
        pthread_mutex_unlock(&dag->lock);
        return st;
    }
    if (st != ADAG_ERR_CLOSED)
        return st; /* reported where detected */
    pthread_mutex_lock(&dag->lock);
    st = adag__dag_abort_error(dag, fn);
    pthread_mutex_unlock(&dag->lock);
    return st;
}

int adag__dag_ref_complete(adag_dag_h dag, uint64_t ref)
{
    for (unsigned e = 0; e < dag->ends.nouts; e++)
        if (!adag__chan_ready(dag->ends.outs[e], ref))
            return 0;
    return 1;
}

/* Gives back, in ref order, the slots of refs released and complete. Under dag->lock. */
void adag__dag_advance_releases(adag_dag_h dag)
{
    int moved = 0;
    while (dag->next_release < dag->resv.next_publish) {
        uint64_t ref = dag->next_release;
        uint8_t *flags = &dag->ref_flags[ref % dag->plan.max_inflight];
        if (!(*flags & REF_RELEASED) || !adag__dag_ref_complete(dag, ref))
            break;
        for (unsigned e = 0; e < dag->ends.nouts; e++)
            adag__chan_release(dag->ends.outs[e], ref);
        *flags = 0;
        dag->next_release++;
        moved = 1;
    }
    if (moved)
        adag__dag_wake(dag);
}

/* Waits on dag->cond (dag->lock held) until woken or the deadline. */
void adag__dag_cond_wait(adag_dag_h dag, int64_t deadline)
{
    dag->cond_waiters++;
    if (deadline == ADAG_FOREVER) {
        pthread_cond_wait(&dag->cond, &dag->lock);
    } else {
        struct timespec ts = adag__timespec_at(deadline);
        pthread_cond_timedwait(&dag->cond, &dag->lock, &ts);
    }
    dag->cond_waiters--;
}

/* Checks that ref is live (committed, neither released nor cancelled).
 * Under dag->lock. */
adag_status_t adag__dag_check_ref(adag_dag_h dag, adag_ref_t ref, const char *fn)
{
    if (ref >= dag->resv.next_reserve)
        return adag__error(ADAG_ERR_INVALID, "%s: ref %llu of DAG %s was never issued", fn,
                          (unsigned long long)ref, dag->run.name);
    uint8_t f = ref < dag->next_release ? REF_RELEASED : dag->ref_flags[ref % dag->plan.max_inflight];
    if (f & REF_CANCELLED)
        return adag__error(ADAG_ERR_INVALID, "%s: ref %llu of DAG %s was cancelled", fn,
                          (unsigned long long)ref, dag->run.name);
    if (f & REF_RELEASED)
        return adag__error(ADAG_ERR_INVALID, "%s: ref %llu of DAG %s was already released", fn,
                          (unsigned long long)ref, dag->run.name);
    if (!(f & REF_COMMITTED))
        return adag__error(ADAG_ERR_INVALID,
                          "%s: ref %llu of DAG %s is reserved but not committed "
                          "(adag_dag_commit)",
                          fn, (unsigned long long)ref, dag->run.name);
    return ADAG_OK;
}


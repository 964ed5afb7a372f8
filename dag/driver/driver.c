/*
 * The driver side of a compiled DAG: get waits on the output channels;
 * release gives output slots back in ref order (a ref released early is
 * given back once it completes); the fd, destroy. Executions are
 * reserved, committed and published in dag/driver/reserve.c; both keep
 * the ref window through dag/driver/window.c.
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/value.h"
#include "transport/slot_value.h"
#include "dag/driver/dag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void place_union(adag_place_t *u, unsigned nb, const adag_place_t *b)
{
    if (nb == 0) {
        *u = *b;
        return;
    }
    CPU_OR(&u->cpus, &u->cpus, &b->cpus);
    u->bound = u->bound || b->bound;
    if (u->numa != b->numa)
        u->numa = -1;
    if (strcmp(u->gpu_bus_id, b->gpu_bus_id) != 0)
        u->gpu_bus_id[0] = '\0';
    if (strcmp(u->nic, b->nic) != 0)
        u->nic[0] = '\0';
    u->this_system = u->this_system && b->this_system;
}

adag_status_t adag_dag_input_placement(adag_dag_h dag, adag_actor_placement_t *out)
{
    const char *fn = "adag_dag_input_placement";
    if (!dag || !out)
        return adag__error(ADAG_ERR_INVALID, "%s: dag and out must not be NULL", fn);
    adag_status_t st = adag__placement_check_out(fn, out);
    if (st != ADAG_OK)
        return st;
    adag_place_t u;
    unsigned n = 0;
    adag__place_none(&u);
    for (unsigned i = 0; i < dag->plan.ninputs; i++) {
        const adag_dag_chan_t *c = &dag->plan.chans[dag->ends.input_chan[i]];
        for (unsigned r = 0; r < c->nreaders; r++) {
            adag_actor_h a = c->readers[r] >= 0 ? dag->run.actors[c->readers[r]].actor : NULL;
            if (a && !a->node[0]) /* an actor on another host: not this machine's CPUs */
                place_union(&u, n++, &a->place);
        }
    }
    cpu_set_t mine;
    adag__cpus_allowed(&mine);
    if (n == 0)
        adag__place_none(&u);
    u.bound = u.bound && CPU_COUNT(&u.cpus) > 0 && !CPU_EQUAL(&u.cpus, &mine);
    adag__placement_report(&u, out);
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
        return adag__error(ADAG_ERR_INVALID, "%s: dag and outputs must not be NULL", fn);
    if (n != dag->ends.noutputs)
        return adag__error(ADAG_ERR_INVALID, "%s: DAG %s has %u outputs, %u requested", fn,
                          dag->run.name, dag->ends.noutputs, n);
    if (timeout_ms < -1)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: timeout_ms %d is negative; use -1 to wait forever, 0 to poll", fn,
                          timeout_ms);
    if ((st = adag__dag_api_enter(dag, fn)) != ADAG_OK)
        return st;
    pthread_mutex_lock(&dag->lock);
    st = adag__dag_check_ref(dag, ref, fn);
    if (st == ADAG_OK && dag->abort_status != ADAG_OK)
        st = adag__dag_abort_error(dag, fn);
    pthread_mutex_unlock(&dag->lock);
    if (st != ADAG_OK)
        goto out;
    int64_t deadline = adag__deadline_ms(timeout_ms);
    uint64_t t0 = dag->trace ? adag__trace_clock() : 0;
    int first_get = 0;
    for (unsigned o = 0; o < n; o++) {
        adag_slot_view_t view;
        st = adag__chan_wait(dag->ends.outs[dag->ends.output_of[o]], ref, deadline, &view);
        if (st == ADAG_ERR_TIMEOUT) {
            st = adag__error(ADAG_ERR_TIMEOUT, "%s: ref %llu of DAG %s not ready within %d ms", fn,
                            (unsigned long long)ref, dag->run.name, timeout_ms);
            goto out;
        }
        if (st != ADAG_OK) {
            st = adag__dag_wait_error(dag, st, fn);
            goto out;
        }
        /* the slot's metadata is in memory other processes write: checked here */
        st = adag__value_check_slot(&view, dag->ends.outs[dag->ends.output_of[o]]->name);
        if (st != ADAG_OK)
            goto out;
        outputs[o] = adag__value_from_view(&view);
        if (view.status != ADAG_OK && result == ADAG_OK) {
            result = view.status;
            err = view.err;
            err_len = view.err_len;
        }
    }
    pthread_mutex_lock(&dag->lock);
    if (dag->abort_status != ADAG_OK) {
        st = adag__dag_abort_error(dag, fn);
    } else if ((st = adag__dag_check_ref(dag, ref, fn)) == ADAG_OK) {
        uint8_t *flags = &dag->ref_flags[ref % dag->plan.max_inflight];
        if (!(*flags & REF_GOTTEN)) {
            *flags |= REF_GOTTEN;
            first_get = 1;
            if (result == ADAG_OK)
                dag->stats.completed++;
            else
                dag->stats.failed++;
        }
        adag__dag_update_fd(dag);
    }
    pthread_mutex_unlock(&dag->lock);
    /* record 2 ref + 1 of the indexed ring, written by the first get only
     * (begun by its execute) */
    if (dag->trace && st == ADAG_OK && first_get)
        adag__trace_put_begun(dag->trace, 2 * ref + 1, ADAG_SPAN_GET, ref, t0, adag__trace_clock());
    if (st == ADAG_OK && result != ADAG_OK)
        st = err_len ? adag__error(result, "%.*s", (int)err_len, err)
                     : adag__error(result, "%s", adag_status_str(result));
out:
    adag__dag_api_leave(dag);
    return st;
}

adag_status_t adag_dag_release(adag_dag_h dag, adag_ref_t ref)
{
    static const char *fn = "adag_dag_release";
    adag_status_t st;
    if (!dag)
        return adag__error(ADAG_ERR_INVALID, "%s: dag is NULL", fn);
    if ((st = adag__dag_api_enter(dag, fn)) != ADAG_OK)
        return st;
    pthread_mutex_lock(&dag->lock);
    if ((st = adag__dag_check_ref(dag, ref, fn)) == ADAG_OK) {
        dag->ref_flags[ref % dag->plan.max_inflight] |= REF_RELEASED;
        dag->stats.released++;
        adag__dag_advance_releases(dag);
        adag__dag_update_fd(dag); /* a ref released unread no longer makes it readable */
        adag__dag_wake(dag);
    }
    pthread_mutex_unlock(&dag->lock);
    adag__dag_api_leave(dag);
    return st;
}

adag_status_t adag_dag_fd(adag_dag_h dag, int *fd)
{
    if (!dag || !fd)
        return adag__error(ADAG_ERR_INVALID, "adag_dag_fd: dag and fd must not be NULL");
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&dag->lock);
    if (!atomic_load_explicit(&dag->run.fd_armed, memory_order_relaxed)) {
        /* each backend arms its writers' signal (seq_cst there: either a
         * writer sees it armed and signals, or the update below sees its
         * publish); the monitor watches the distinct fds */
        int *fds = calloc(dag->ends.nouts + 1, sizeof(*fds));
        unsigned n = 0;
        if (!fds)
            st = adag__error(ADAG_ERR_NO_MEMORY, "adag_dag_fd: out of memory");
        for (unsigned e = 0; e < dag->ends.nouts && st == ADAG_OK; e++) {
            adag_chan_t *ch = dag->ends.outs[e];
            int nfd = ch->ops->notify_fd ? ch->ops->notify_fd(ch) : -1;
            if (nfd < 0) {
                st = adag__error(ADAG_ERR_INVALID,
                                "adag_dag_fd: output channel %s (%s) of DAG %s cannot signal "
                                "an fd",
                                ch->name, ch->ops->name, dag->run.name);
                break;
            }
            unsigned k = 0;
            while (k < n && fds[k] != nfd)
                k++;
            if (k == n)
                fds[n++] = nfd;
        }
        if (st == ADAG_OK) {
            dag->run.notify_fds = fds;
            dag->run.nnotify = n;
            atomic_store_explicit(&dag->run.fd_armed, 1, memory_order_seq_cst);
        } else {
            free(fds);
        }
    }
    pthread_mutex_unlock(&dag->lock);
    if (st != ADAG_OK)
        return st;
    adag__monitor_poke(dag->run.rt); /* it now watches the notify fds */
    pthread_mutex_lock(&dag->lock);
    adag__dag_update_fd(dag);
    pthread_mutex_unlock(&dag->lock);
    *fd = dag->user_fd;
    return ADAG_OK;
}

void adag__dag_leave_leases(adag_dag_h dag)
{
    for (unsigned i = 0; i < dag->plan.ncomm_leases; i++)
        if (adag__comm_lease_leave(dag->run.rt, dag->plan.comm_leases[i], dag->comm_keep))
            dag->comm_gone |= 1ull << i;
    dag->comm_left = 1;
    /* what each actor drops at STOP: its communicators whose lease is gone */
    for (unsigned ai = 0; ai < dag->run.nactors; ai++) {
        adag_dag_actor_t *da = &dag->run.actors[ai];
        da->comm_drop = 0;
        for (uint32_t j = 0; j < da->prog.ncomms && j < 64; j++)
            for (unsigned i = 0; i < dag->plan.ncomm_leases; i++)
                if ((dag->comm_gone >> i & 1) &&
                    adag__comm_lease_key(dag->plan.comm_leases[i]) == da->prog.comms[j].key)
                    da->comm_drop |= 1ull << j;
    }
}

/* The run record's upcalls (dag/proc/proc.h): the monitor and the loops
 * of thread actors fail the DAG and refresh its fd through them. */
static void run_fail(adag_dag_run_t *run, adag_status_t status, const char *msg)
{
    adag__dag_fail(ADAG_CONTAINER(run, struct adag_dag, run), status, msg);
}

static void run_notified(adag_dag_run_t *run)
{
    adag_dag_h dag = ADAG_CONTAINER(run, struct adag_dag, run);
    pthread_mutex_lock(&dag->lock);
    adag__dag_update_fd(dag);
    pthread_mutex_unlock(&dag->lock);
}

const adag_dag_run_ops_t adag__dag_run_ops = {run_fail, run_notified};

void adag__dag_free(adag_dag_h dag)
{
    if (dag->trace) {
        adag__trace_ring_free(dag->trace);
        free(dag->trace);
    }
    adag__ctx_destroy(&dag->run.ctx);
    adag__dag_driver_device_close(dag);
    /* before the actors may stop (which forgets their communicators) */
    if (!dag->comm_left)
        adag__dag_leave_leases(dag);
    for (unsigned i = 0; i < dag->plan.ncomm_leases; i++)
        if (dag->comm_gone >> i & 1)
            adag__comm_lease_free(dag->plan.comm_leases[i]);
    free(dag->plan.comm_leases);
    free(dag->plan.lease_order_chan);
    free(dag->ends.orders);
    free(dag->ends.order_leases);
    free(dag->ends.order_bufs);
    free(dag->plan.coll_keys);
    for (unsigned i = 0; i < dag->run.nactors; i++) {
        adag__program_free(&dag->run.actors[i].prog);
        adag__wbuf_free(&dag->run.actors[i].infos);
        adag__wbuf_free(&dag->run.actors[i].peers);
        adag__actor_drop(dag->run.actors[i].actor);
    }
    for (unsigned c = 0; c < dag->plan.nchans; c++) {
        free(dag->plan.chans[c].readers);
        free(dag->plan.chans[c].places);
        adag__wbuf_free(&dag->plan.chans[c].desc);
        adag__wbuf_free(&dag->plan.chans[c].driver_info);
    }
    free(dag->run.notify_fds);
    if (dag->user_fd >= 0)
        close(dag->user_fd);
    free(dag->run.actors);
    free(dag->plan.chans);
    free(dag->plan.node_labels);
    free(dag->ends.inputs);
    free(dag->ends.input_counts);
    free(dag->resv.slot_bufs);
    free(dag->resv.slot_sizes);
    free(dag->resv.slot_metas);
    free(dag->resv.slot_owner);
    free(dag->ends.input_chan);
    free(dag->ends.outs);
    free(dag->ends.out_chan);
    free(dag->ends.output_of);
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
    unsigned *ais = calloc(dag->run.nactors + 1, sizeof(*ais));
    adag_status_t *st = calloc(dag->run.nactors + 1, sizeof(*st));
    char (*why)[ADAG_ERROR_MAX] = calloc(dag->run.nactors + 1, sizeof(*why));
    int64_t deadline = adag__deadline_ms(dag->teardown_timeout_ms);
    if (!ais || !st || !why) {
        /* no memory to do it politely: the workers cannot keep the DAG */
        for (unsigned i = 0; i < dag->run.nactors; i++)
            if (dag->run.actors[i].prepared && dag->run.actors[i].actor->ops->kill)
                dag->run.actors[i].actor->ops->kill(dag->run.actors[i].actor,
                                                "out of memory while stopping a DAG");
        goto out;
    }
    for (int remote = 1; remote >= 0; remote--) {
        unsigned n = 0;
        for (unsigned i = 0; i < dag->run.nactors; i++)
            if (dag->run.actors[i].prepared && (dag->run.actors[i].actor->ops->step_fd != NULL) == remote)
                ais[n++] = i;
        adag__actors_step(&dag->run, ais, n, ADAG_STEP_STOP, deadline, st, why);
        for (unsigned k = 0; k < n; k++) {
            adag_actor_h a = dag->run.actors[ais[k]].actor;
            dag->run.actors[ais[k]].prepared = 0;
            if (st[k] == ADAG_OK || st[k] == ADAG_ERR_ACTOR_DIED || !a->ops->kill)
                continue;
            ADAG_LOG_WARN("DAG %s: %s; killing the worker", dag->run.name, why[k]);
            a->ops->kill(a, "it did not stop its DAG within the teardown timeout");
        }
    }
out:
    free(ais);
    free(st);
    free(why);
}

/* Every rank consumed the tickets of refs up to `last` (released them):
 * nothing of this DAG is left to run on a shared communicator. */
static int tickets_consumed(adag_dag_h dag, uint64_t last, int64_t deadline)
{
    for (unsigned i = 0; i < dag->plan.norders; i++) {
        void *buf;
        if (adag__chan_acquire(dag->ends.orders[i], last + dag->plan.max_inflight, deadline, &buf) !=
            ADAG_OK) {
            ADAG_LOG_WARN("DAG %s: its collectives of execution %llu did not end within the "
                          "teardown timeout (%d ms) of its destroy; its communicators are "
                          "closed to new DAGs", dag->run.name, (unsigned long long)last,
                          dag->teardown_timeout_ms);
            return 0;
        }
    }
    return 1;
}

/* A DAG with a communicator gives it back for the next DAG only if no
 * send or recv of it is left half done: every execution published must
 * complete first, and every rank must have run its collectives (by the
 * teardown timeout). Returns nonzero if they did and the DAG has not
 * failed. */
static int settle_executions(adag_dag_h dag)
{
    int64_t deadline = adag__deadline_ms(dag->teardown_timeout_ms);
    for (;;) {
        pthread_mutex_lock(&dag->lock);
        int failed = dag->abort_status != ADAG_OK;
        int done = dag->resv.next_publish == dag->next_release ||
                   adag__dag_ref_complete(dag, dag->resv.next_publish - 1);
        uint64_t last = dag->resv.next_publish;
        pthread_mutex_unlock(&dag->lock);
        if (failed)
            return 0;
        if (done)
            return last == 0 || tickets_consumed(dag, last - 1, deadline);
        if (adag__now_ns() >= deadline) {
            ADAG_LOG_WARN("DAG %s: execution %llu did not complete within the teardown timeout "
                          "(%d ms) of its destroy; its communicator is dropped",
                          dag->run.name, (unsigned long long)(last - 1), dag->teardown_timeout_ms);
            return 0;
        }
        usleep(200);
    }
}

adag_status_t adag_dag_destroy(adag_dag_h dag)
{
    if (!dag)
        return adag__error(ADAG_ERR_INVALID, "adag_dag_destroy: dag is NULL");
    adag_runtime_h rt = dag->run.rt;
    /* out of the runtime's list first: the monitor no longer touches it */
    pthread_mutex_lock(&rt->lock);
    adag__list_remove(&dag->run.link);
    pthread_mutex_unlock(&rt->lock);
    adag__monitor_poke(rt);

    pthread_mutex_lock(&dag->lock);
    /* executions this thread reserved and never committed are dropped */
    adag__dag_drop_reservations(dag, 1);
    dag->closing = 1;
    pthread_mutex_unlock(&dag->lock);
    if (dag->plan.ncomm_leases)
        dag->comm_keep = settle_executions(dag);
    adag__dag_fail(dag, ADAG_ERR_CLOSED, "the DAG was destroyed");
    /* Calls in progress end at once (the failure woke their waits).
     * Reservations of other threads end when those threads commit or
     * cancel them (a commit now cancels: ADAG_ERR_CLOSED); one still open
     * after the teardown timeout (its thread gone or stuck) is dropped
     * here, so destroy is bounded whatever a client left reserved. */
    pthread_mutex_lock(&dag->lock);
    int64_t deadline = adag__deadline_ms(dag->teardown_timeout_ms);
    while (dag->api_users > 0 || dag->resv.nreserved > 0) {
        if (dag->api_users == 0 && adag__now_ns() >= deadline) {
            unsigned n = adag__dag_drop_reservations(dag, 0);
            ADAG_LOG_WARN("DAG %s: destroy dropped %u execution%s that other threads reserved "
                          "and neither committed nor cancelled within the teardown timeout "
                          "(%d ms)",
                          dag->run.name, n, n == 1 ? "" : "s", dag->teardown_timeout_ms);
            break;
        }
        adag__dag_cond_wait(dag, dag->api_users > 0 ? ADAG_FOREVER : deadline);
    }
    pthread_mutex_unlock(&dag->lock);
    /* which communicators go is known before STOP tells the actors */
    adag__dag_leave_leases(dag);

    stop_actors(dag);
    adag__dag_free(dag);
    return ADAG_OK;
}

/*
 * adag_graph_compile, in the driver: reads the compile params, opens the
 * driver's device, takes the graph's actors, runs the compiler's passes
 * (dag/graph/compile_plan.c: the channel plan, then each actor's program),
 * has each backend lay its channels out in the DAG's context (their
 * domains), opens the driver's endpoints and installs the programs on
 * every actor at once (dag/driver/install.c: PREPARE -> CONNECT -> START
 * through the actors' placements).
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/fd.h"
#include "common/params.h"
#include "common/settings.h"
#include "dag/driver/dag.h"
#include "transport/wire.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define COMPILE_FIELD(m, bit) ADAG_PARAM_FIELD(adag_compile_params_t, m, bit)
static const adag_param_field_t compile_fields[] = {
    COMPILE_FIELD(max_inflight, ADAG_COMPILE_PARAM_MAX_INFLIGHT),
    COMPILE_FIELD(slot_capacity, ADAG_COMPILE_PARAM_SLOT_CAPACITY),
    COMPILE_FIELD(execute_timeout_ms, ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT),
    COMPILE_FIELD(teardown_timeout_ms, ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT),
    COMPILE_FIELD(name, ADAG_COMPILE_PARAM_NAME),
    COMPILE_FIELD(spin_ns, ADAG_COMPILE_PARAM_SPIN),
    COMPILE_FIELD(comm_timeout_ms, ADAG_COMPILE_PARAM_COMM_TIMEOUT),
    COMPILE_FIELD(driver_device, ADAG_COMPILE_PARAM_DRIVER_DEVICE),
    COMPILE_FIELD(trace_spans, ADAG_COMPILE_PARAM_TRACE),
    COMPILE_FIELD(run_ahead, ADAG_COMPILE_PARAM_RUN_AHEAD),
    COMPILE_FIELD(graphs, ADAG_COMPILE_PARAM_GRAPHS),
};

/* A DAG that runs ahead (adag_compile_params_t.run_ahead) leaves waits on
 * its device actors' streams for work their writers have not queued yet:
 * another DAG's work queued behind them on one of those streams could wait
 * for work of this DAG's queued behind its own, and neither would run. So
 * such a DAG's device-bound actors are in no other live DAG, and a DAG that
 * does not run ahead shares none with one that does. Under rt->lock, before
 * the DAG joins rt->dags. */
static adag_status_t check_run_ahead(adag_runtime_h rt, const adag_dag_run_t *mine)
{
    for (adag_list_t *l = rt->dags.next; l != &rt->dags; l = l->next) {
        const adag_dag_run_t *other = (const adag_dag_run_t *)l;
        if (!mine->run_ahead && !other->run_ahead)
            continue;
        for (unsigned i = 0; i < mine->nactors; i++) {
            adag_actor_h a = mine->actors[i].actor;
            if (a->device_kind < 0)
                continue;
            for (unsigned j = 0; j < other->nactors; j++)
                if (other->actors[j].actor == a)
                    return adag__error(ADAG_ERR_BUSY,
                                      "adag_graph_compile: actor %s is in DAG %s, which %s; a "
                                      "DAG that runs ahead of its inputs (run_ahead) has its "
                                      "device actors to itself",
                                      a->name, other->name,
                                      other->run_ahead ? "runs ahead of its inputs"
                                                       : "is still alive");
        }
    }
    return ADAG_OK;
}

static adag_status_t read_params(const adag_compile_params_t *p, adag_dag_h dag)
{
    const adag_settings_t *s = &dag->run.rt->settings;
    uint64_t mask = p ? p->field_mask : 0;
    adag_status_t st = adag__params_check("adag_graph_compile", "adag_compile_params_t", p, mask,
                                         compile_fields, ADAG_PARAM_COUNT(compile_fields));
    if (st != ADAG_OK)
        return st;
    if ((mask & ADAG_COMPILE_PARAM_DRIVER_DEVICE) && (!p->driver_device || !*p->driver_device))
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: driver_device is set "
                          "(ADAG_COMPILE_PARAM_DRIVER_DEVICE) but %s",
                          p->driver_device ? "empty" : "NULL");
    if ((mask & ADAG_COMPILE_PARAM_NAME) && (!p->name || !*p->name))
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: name is set (ADAG_COMPILE_PARAM_NAME) but %s",
                          p->name ? "empty" : "NULL");
    dag->plan.max_inflight = (mask & ADAG_COMPILE_PARAM_MAX_INFLIGHT) ? p->max_inflight
                                                                  : (unsigned)s->max_inflight;
    dag->plan.default_capacity = (mask & ADAG_COMPILE_PARAM_SLOT_CAPACITY)
                                ? p->slot_capacity
                                : (size_t)s->slot_capacity;
    dag->execute_timeout_ms = (mask & ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT)
                                  ? p->execute_timeout_ms
                                  : (int)s->execute_timeout_ms;
    dag->teardown_timeout_ms = (mask & ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT)
                                   ? p->teardown_timeout_ms
                                   : (int)s->teardown_timeout_ms;
    dag->plan.comm_timeout_ms = (mask & ADAG_COMPILE_PARAM_COMM_TIMEOUT) ? p->comm_timeout_ms
                                                                     : (int)s->comm_timeout_ms;
    dag->wait.spin_ns = (mask & ADAG_COMPILE_PARAM_SPIN) ? p->spin_ns : -1; /* -1: choose_spin */
    dag->plan.trace_spans = (mask & ADAG_COMPILE_PARAM_TRACE) ? p->trace_spans
                                                          : (uint64_t)s->trace_spans;
    if (dag->plan.trace_spans > ADAG_TRACE_MAX_SPANS)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: trace_spans %llu is not in "
                          "0..%llu", (unsigned long long)dag->plan.trace_spans,
                          (unsigned long long)ADAG_TRACE_MAX_SPANS);
    if ((mask & ADAG_COMPILE_PARAM_RUN_AHEAD) && p->run_ahead != 0 && p->run_ahead != 1)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: run_ahead %d is not 0 or 1",
                          p->run_ahead);
    dag->plan.run_ahead = (mask & ADAG_COMPILE_PARAM_RUN_AHEAD) ? p->run_ahead : 0;
    dag->run.run_ahead = dag->plan.run_ahead;
    if ((mask & ADAG_COMPILE_PARAM_GRAPHS) && p->graphs != 0 && p->graphs != 1)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: graphs is %d: 0 (off) or 1 (on)",
                           p->graphs);
    dag->plan.graphs = (mask & ADAG_COMPILE_PARAM_GRAPHS) && p->graphs;
    if (mask & ADAG_COMPILE_PARAM_NAME)
        snprintf(dag->run.name, sizeof(dag->run.name), "%s", p->name);
    if (dag->plan.max_inflight < 1 || dag->plan.max_inflight > ADAG_PROG_MAX_INFLIGHT)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: max_inflight %u is not in 1..%u",
                          dag->plan.max_inflight, ADAG_PROG_MAX_INFLIGHT);
    if (dag->plan.default_capacity < 1 || dag->plan.default_capacity > ADAG_PROG_MAX_CAPACITY)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: slot_capacity %zu is not in 1..2^40",
                          dag->plan.default_capacity);
    if ((mask & ADAG_COMPILE_PARAM_SPIN) &&
        (dag->wait.spin_ns < 0 || dag->wait.spin_ns > 1000000000))
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: spin_ns %lld is not in 0..1e9",
                          (long long)dag->wait.spin_ns);
    if (dag->teardown_timeout_ms < 0)
        return adag__error(ADAG_ERR_INVALID,
                           "adag_graph_compile: teardown_timeout_ms %d is negative",
                           dag->teardown_timeout_ms);
    if (dag->plan.comm_timeout_ms < -1)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: comm_timeout_ms %d is negative; use 0 or -1 for "
                          "no timeout",
                          dag->plan.comm_timeout_ms);
    if (dag->execute_timeout_ms < -1)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: execute_timeout_ms %d is negative; use -1 to wait "
                          "forever",
                          dag->execute_timeout_ms);
    return ADAG_OK;
}

/* How many of the DAG's loops may run on the CPUs of actor `self` (-1:
 * the driver): itself, each actor on its host whose CPUs meet its own,
 * and the driver if its CPUs do (dag/proc/actor_place.h). */
static unsigned loops_sharing(adag_dag_h dag, int self, const adag_place_t *mine,
                              const char *host)
{
    adag_place_t driver;
    adag__place_none(&driver); /* the driver's own CPUs */
    unsigned n = self < 0 || adag__place_share(mine, host, &driver, "") ? 1 : 0;
    for (unsigned j = 0; j < dag->run.nactors; j++) {
        adag_actor_h b = dag->run.actors[j].actor;
        if ((int)j == self || adag__place_share(mine, host, &b->place, b->node))
            n++;
    }
    return n;
}

/* The wait policy of actor `ai`'s loop (-1: the driver's). While the
 * loops that may run on its CPUs (its own, the driver's, other actors'
 * of this DAG placed on CPUs that meet them) fit those CPUs, waiters spin
 * (pausing) up to ADAG_SPIN_NS. With more of them than CPUs, a spinner
 * would hold the core its producer needs, so waiters spin up to
 * ADAG_SPIN_NS_CROWDED calling sched_yield between probes (measured on 2
 * cores: a 4-stage chain runs several times faster than with short spins
 * or futex sleeps, and keeps working when other processes load the
 * machine). An explicit spin_ns replaces the maximum only. Each actor's
 * CPUs are those its host placed it on (adag_actor_placement). */
adag_wait_policy_t adag__dag_policy(adag_dag_h dag, int ai)
{
    adag_wait_policy_t p;
    adag_place_t driver;
    const adag_place_t *mine = &driver;
    const char *host = "";
    if (ai >= 0) {
        mine = &dag->run.actors[ai].actor->place;
        host = dag->run.actors[ai].actor->node;
    } else {
        adag__place_none(&driver);
    }
    unsigned ncpus = (unsigned)CPU_COUNT(&mine->cpus);
    int crowded = loops_sharing(dag, ai, mine, host) > (ncpus ? ncpus : 1);
    p.yield = crowded;
    p.spin_ns = dag->wait.spin_ns >= 0 ? dag->wait.spin_ns
                : crowded            ? dag->run.rt->settings.spin_ns_crowded
                                     : dag->run.rt->settings.spin_ns;
    return p;
}

/* Creates every backend's domain for the DAG (the shm segment) and gets
 * each channel's descriptor, each channel with its own geometry. */
static adag_status_t make_domains(adag_dag_h dag)
{
    uint32_t *kinds = calloc(dag->plan.nchans + 1, sizeof(*kinds));
    adag_chan_geom_t *geoms = calloc(dag->plan.nchans + 1, sizeof(*geoms));
    const adag_chan_place_t **places = calloc(dag->plan.nchans + 1, sizeof(*places));
    adag_wbuf_t *descs = calloc(dag->plan.nchans + 1, sizeof(*descs));
    adag_status_t st;
    if (!kinds || !geoms || !places || !descs) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        goto out;
    }
    adag__compile_finish_geometry(&dag->plan);
    for (unsigned c = 0; c < dag->plan.nchans; c++) {
        kinds[c] = dag->plan.chans[c].backend;
        geoms[c] = dag->plan.chans[c].geom;
        places[c] = dag->plan.chans[c].places;
    }
    st = adag__ctx_create_domains(&dag->run.ctx, dag->run.name, kinds, geoms, places, dag->plan.nchans, descs);
    for (unsigned c = 0; c < dag->plan.nchans; c++) {
        if (st == ADAG_OK && descs[c].failed)
            st = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        dag->plan.chans[c].desc = descs[c];
    }
    if (st != ADAG_OK)
        adag__error_prefix("adag_graph_compile");
out:
    free(kinds);
    free(geoms);
    free(places);
    free(descs);
    return st;
}

/* Opens one of the driver's endpoints of channel c (reader -1: the writer). */
static adag_status_t open_driver_endpoint(adag_dag_h dag, unsigned c, int reader,
                                          adag_chan_t **out)
{
    adag_dag_chan_t *dc = &dag->plan.chans[c];
    adag_chan_open_params_t p = {
        .name = dc->name,
        /* the channel's whole geometry: a host endpoint of a channel by
         * communicator (the driver is never a rank) agrees on its key too */
        .geom = dc->geom,
        .reader = reader,
        .desc = {dc->desc.data, dc->desc.len},
        .policy = dag->wait,
        .device = dag->ends.driver_dev ? &dag->ends.driver_dev->chan : NULL,
    };
    adag_status_t st = adag__ctx_open(&dag->run.ctx, dc->backend, &p, &dc->driver_info, out);
    if (st != ADAG_OK)
        adag__error_prefix("adag_graph_compile: the driver's endpoint");
    return st;
}

static adag_status_t open_driver_endpoints(adag_compiler_t *cx, adag_dag_h dag)
{
    adag_graph_h g = cx->g;
    adag_status_t st;

    dag->ends.inputs = calloc(dag->plan.ninputs + 1, sizeof(*dag->ends.inputs));
    dag->ends.input_chan = calloc(dag->plan.ninputs + 1, sizeof(*dag->ends.input_chan));
    dag->ends.input_counts = calloc(dag->plan.ninputs + 1, sizeof(*dag->ends.input_counts));
    size_t per_ref = (size_t)dag->plan.max_inflight * (dag->plan.ninputs + 1);
    dag->resv.slot_bufs = calloc(per_ref, sizeof(*dag->resv.slot_bufs));
    dag->resv.slot_sizes = calloc(per_ref, sizeof(*dag->resv.slot_sizes));
    dag->resv.slot_metas = calloc(per_ref, sizeof(*dag->resv.slot_metas));
    dag->resv.slot_owner = calloc(dag->plan.max_inflight, sizeof(*dag->resv.slot_owner));
    dag->ends.outs = calloc(g->noutputs, sizeof(*dag->ends.outs));
    dag->ends.out_chan = calloc(g->noutputs, sizeof(*dag->ends.out_chan));
    dag->ends.output_of = calloc(g->noutputs, sizeof(*dag->ends.output_of));
    dag->ref_flags = calloc(dag->plan.max_inflight, 1);
    if (!dag->ends.inputs || !dag->ends.input_chan || !dag->ends.input_counts || !dag->resv.slot_bufs || !dag->resv.slot_sizes ||
        !dag->resv.slot_metas || !dag->resv.slot_owner ||
        !dag->ends.outs || !dag->ends.out_chan || !dag->ends.output_of || !dag->ref_flags)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    dag->ends.noutputs = g->noutputs;
    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h nd = g->nodes[i];
        if (nd->kind != NODE_INPUT)
            continue;
        unsigned c = cx->chan_of[i];
        dag->ends.input_chan[nd->field] = c;
        if ((st = open_driver_endpoint(dag, c, -1, &dag->ends.inputs[nd->field])) != ADAG_OK)
            return st;
    }
    for (unsigned o = 0; o < g->noutputs; o++) {
        unsigned c = adag__compile_value_chan(cx, g->outputs[o]), e;
        for (e = 0; e < dag->ends.nouts; e++)
            if (dag->ends.out_chan[e] == c)
                break;
        if (e == dag->ends.nouts) {
            st = open_driver_endpoint(dag, c, adag__plan_reader_index(&dag->plan.chans[c], -1), &dag->ends.outs[e]);
            if (st != ADAG_OK)
                return st;
            dag->ends.out_chan[e] = c;
            dag->ends.nouts++;
        }
        dag->ends.output_of[o] = e;
    }
    if (dag->plan.norders) {
        dag->ends.orders = calloc(dag->plan.norders, sizeof(*dag->ends.orders));
        dag->ends.order_leases = calloc(dag->plan.norders, sizeof(*dag->ends.order_leases));
        dag->ends.order_bufs = calloc((size_t)dag->plan.max_inflight * dag->plan.norders,
                                 sizeof(*dag->ends.order_bufs));
        if (!dag->ends.orders || !dag->ends.order_leases || !dag->ends.order_bufs)
            return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        unsigned k = 0;
        for (unsigned i = 0; i < dag->plan.ncomm_leases; i++) {
            if (dag->plan.lease_order_chan[i] == ADAG_PROG_NO_CHAN)
                continue;
            dag->ends.order_leases[k] = dag->plan.comm_leases[i];
            if ((st = open_driver_endpoint(dag, dag->plan.lease_order_chan[i], -1,
                                           &dag->ends.orders[k])) != ADAG_OK)
                return st;
            k++;
        }
    }
    if (dag->plan.start_chan != ADAG_PROG_NO_CHAN)
        return open_driver_endpoint(dag, dag->plan.start_chan, -1, &dag->ends.start);
    return ADAG_OK;
}

adag_status_t adag_graph_compile(adag_graph_h g, const adag_compile_params_t *params,
                                 adag_dag_h *out)
{
    adag_compiler_t cx = {0};
    adag_dag_h dag = NULL;
    adag_status_t st;

    if (!g || !out)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: graph and dag must not be NULL");
    *out = NULL;
    pthread_mutex_lock(&g->lock);
    if ((st = adag__compile_validate(g)) != ADAG_OK)
        goto fail_unlock;
    dag = calloc(1, sizeof(*dag));
    if (!dag) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        goto fail;
    }
    dag->run.rt = g->rt;
    dag->run.ops = &adag__dag_run_ops;
    dag->plan.driver_dev_kind = -1; /* none until adag__dag_driver_device_open */
    dag->user_fd = -1;
    dag->plan.start_chan = ADAG_PROG_NO_CHAN;
    adag__ctx_init(&dag->run.ctx);
    adag__list_init(&dag->run.link);
    pthread_mutex_init(&dag->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&dag->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&g->rt->lock);
    dag->run.id = g->rt->next_dag_id++;
    pthread_mutex_unlock(&g->rt->lock);
    snprintf(dag->run.name, sizeof(dag->run.name), "dag%u", dag->run.id);
    if ((st = read_params(params, dag)) != ADAG_OK)
        goto fail;
    /* the driver's ring is indexed by ref (two records each): it holds at
     * least twice the executions in flight, so a ref's records are reused
     * only long after it was released */
    uint64_t driver_records = dag->plan.trace_spans > 4ull * dag->plan.max_inflight
                                  ? dag->plan.trace_spans
                                  : 4ull * dag->plan.max_inflight;
    if (dag->plan.trace_spans &&
        (!(dag->trace = calloc(1, sizeof(*dag->trace))) ||
         adag__trace_ring_init(dag->trace, driver_records, 1) != ADAG_OK)) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: the driver's trace ring");
        goto fail;
    }
    if (params && (params->field_mask & ADAG_COMPILE_PARAM_DRIVER_DEVICE) &&
        (st = adag__dag_driver_device_open(dag, params->driver_device)) != ADAG_OK)
        goto fail;

    /* actors, in the order the graph first bound them; the DAG holds a reference on each */
    dag->run.actors = calloc(g->nactors + 1, sizeof(*dag->run.actors));
    if (!dag->run.actors) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        goto fail;
    }
    pthread_mutex_lock(&g->rt->lock);
    for (unsigned i = 0; i < g->nactors; i++) {
        adag__actor_hold(g->actors[i]);
        dag->run.actors[dag->run.nactors++].actor = g->actors[i];
    }
    pthread_mutex_unlock(&g->rt->lock);
    dag->wait = adag__dag_policy(dag, -1);
    if ((st = adag__compiler_init(&cx, g, &dag->plan, &dag->run)) != ADAG_OK ||
        (st = adag__compile_channels(&cx)) != ADAG_OK || (st = make_domains(dag)) != ADAG_OK)
        goto fail;
    dag->user_fd = adag__fd_above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (dag->user_fd < 0) {
        st = adag__error_errno(errno, "adag_graph_compile: eventfd");
        goto fail;
    }
    for (unsigned ai = 0; ai < dag->run.nactors; ai++)
        if ((st = adag__compile_program(&cx, ai, adag__dag_policy(dag, (int)ai),
                                        &dag->run.actors[ai].prog)) != ADAG_OK)
            goto fail;
    if ((st = adag__compile_comm_check_order(&dag->plan, &dag->run)) != ADAG_OK)
        goto fail;
    if ((st = open_driver_endpoints(&cx, dag)) != ADAG_OK ||
        (st = adag__dag_staging_open(dag)) != ADAG_OK)
        goto fail;
    dag->plan.node_labels = calloc(g->nnodes + 1, sizeof(*dag->plan.node_labels));
    if (!dag->plan.node_labels) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        goto fail;
    }
    dag->plan.nnodes = g->nnodes;
    for (unsigned i = 0; i < g->nnodes; i++)
        adag__node_describe(g->nodes[i], dag->plan.node_labels[i], sizeof(dag->plan.node_labels[i]));

    /* register before installing, so a worker death during install fails
     * it; a DAG that runs ahead has its device actors to itself */
    pthread_mutex_lock(&g->rt->lock);
    st = check_run_ahead(g->rt, &dag->run);
    if (st == ADAG_OK)
        adag__list_push(&g->rt->dags, &dag->run.link);
    pthread_mutex_unlock(&g->rt->lock);
    if (st != ADAG_OK)
        goto fail;
    if ((st = adag__dag_install(dag)) != ADAG_OK) {
        /* adag_dag_destroy stops what was installed; keep this failure's message */
        char msg[ADAG_ERROR_MAX];
        snprintf(msg, sizeof(msg), "%s", adag_last_error());
        adag__compiler_free(&cx);
        pthread_mutex_unlock(&g->lock);
        adag_dag_destroy(dag);
        return adag__error(st, "%s", msg);
    }
    g->compiled = 1;
    dag->stats.max_inflight = dag->plan.max_inflight;
    dag->stats.slot_capacity = dag->plan.default_capacity;
    dag->stats.nchannels = dag->plan.nchans - (dag->plan.start_chan != ADAG_PROG_NO_CHAN) - dag->plan.norders;
    dag->stats.shm_bytes = adag__ctx_domain_bytes(&dag->run.ctx);
    for (unsigned c = 0; c < dag->plan.nchans; c++)
        dag->stats.device_bytes += dag->plan.chans[c].device_bytes;
    adag__compiler_free(&cx);
    pthread_mutex_unlock(&g->lock);
    *out = dag;
    return ADAG_OK;

fail:
    adag__compiler_free(&cx);
    if (dag)
        adag__dag_free(dag);
fail_unlock:
    pthread_mutex_unlock(&g->lock);
    return st;
}

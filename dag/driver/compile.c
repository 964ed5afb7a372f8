/*
 * The compiler: validates a graph, gives every produced value one channel
 * with all its readers and picks its backend (dag/graph/compile_place.c), plans the
 * communicator of ADAG_TRANSPORT_COMM tensors (dag/graph/compile_comm.c), has each
 * backend lay its channels out (their domains), builds each actor's program
 * (its bind-ordered schedule) and installs it on every actor at once
 * (dag/driver/install.c):
 * PREPARE -> CONNECT -> START through the actors' placements.
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/fd.h"
#include "common/params.h"
#include "common/settings.h"
#include "dag/driver/dag.h"
#include "dag/exec/loop_collective.h"
#include "transport/wire.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct {
    adag_graph_h g;
    adag_dag_h dag;
    unsigned *chan_of;   /* node id -> channel (value nodes), call -> first return's channel */
    unsigned *coll_status; /* per graph collective: its first status channel */
    int *actor_index;    /* node id (calls) -> DAG actor index */
} compile_ctx_t;

static int dag_actor_index(adag_dag_h dag, adag_actor_h a)
{
    for (unsigned i = 0; i < dag->run.nactors; i++)
        if (dag->run.actors[i].actor == a)
            return (int)i;
    return -1;
}

/* The channel carrying value node n. */
static unsigned value_chan(compile_ctx_t *cx, adag_node_h n)
{
    if (n->kind == NODE_RETURN)
        return cx->chan_of[n->call->id] + n->ret;
    return cx->chan_of[n->id];
}

static adag_status_t validate(adag_graph_h g)
{
    unsigned ncalls = 0, max_field = 0;
    int have_input = 0;
    char d[160];

    if (g->compiled)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: the graph was already compiled");
    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h n = g->nodes[i];
        if (n->kind == NODE_CALL)
            ncalls++;
        if (n->kind == NODE_INPUT) {
            have_input = 1;
            if (n->field > max_field)
                max_field = n->field;
        }
    }
    if (ncalls == 0)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: empty graph: no method is bound");
    if (!g->has_outputs)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: the graph has no outputs (adag_graph_output)");
    for (unsigned f = 0; have_input && f <= max_field; f++) {
        adag_node_h in = NULL;
        for (unsigned i = 0; i < g->nnodes; i++)
            if (g->nodes[i]->kind == NODE_INPUT && g->nodes[i]->field == f)
                in = g->nodes[i];
        if (!in)
            return adag__error(ADAG_ERR_INVALID,
                              "adag_graph_compile: input field %u is not used (fields must be "
                              "0..%u, each read by a method)",
                              f, max_field);
        if (!in->used)
            return adag__error(ADAG_ERR_INVALID,
                              "adag_graph_compile: input field %u (node %u) is not used by any "
                              "method",
                              f, in->id);
    }
    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h n = g->nodes[i];
        if (n->kind != NODE_CALL)
            continue;
        pthread_mutex_lock(&g->rt->lock);
        int destroyed = n->actor->user_destroyed, dead = n->actor->dead;
        pthread_mutex_unlock(&g->rt->lock);
        adag__node_describe(n, d, sizeof(d));
        if (destroyed)
            return adag__error(ADAG_ERR_INVALID,
                              "adag_graph_compile: %s: actor %s was destroyed", d, n->actor->name);
        if (dead)
            return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: %s: %s", d, n->actor->death);
    }
    return ADAG_OK;
}

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
};

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
    dag->comm_timeout_ms = (mask & ADAG_COMPILE_PARAM_COMM_TIMEOUT) ? p->comm_timeout_ms
                                                                     : (int)s->comm_timeout_ms;
    dag->wait.spin_ns = (mask & ADAG_COMPILE_PARAM_SPIN) ? p->spin_ns : -1; /* -1: choose_spin */
    dag->trace_spans = (mask & ADAG_COMPILE_PARAM_TRACE) ? p->trace_spans
                                                          : (uint64_t)s->trace_spans;
    if (dag->trace_spans > ADAG_TRACE_MAX_SPANS)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: trace_spans %llu is not in "
                          "0..%llu", (unsigned long long)dag->trace_spans,
                          (unsigned long long)ADAG_TRACE_MAX_SPANS);
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
    if (dag->comm_timeout_ms < -1)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: comm_timeout_ms %d is negative; use 0 or -1 for "
                          "no timeout",
                          dag->comm_timeout_ms);
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

static adag_status_t add_reader(adag_dag_chan_t *c, int who)
{
    if (c->writer == who && who >= 0)
        return ADAG_OK; /* the writer reads its own slot: no registration */
    for (unsigned i = 0; i < c->nreaders; i++)
        if (c->readers[i] == who)
            return ADAG_OK;
    int *r = realloc(c->readers, (c->nreaders + 1) * sizeof(*r));
    if (!r)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    c->readers = r;
    c->readers[c->nreaders++] = who;
    return ADAG_OK;
}

static int reader_index(const adag_dag_chan_t *c, int who)
{
    for (unsigned i = 0; i < c->nreaders; i++)
        if (c->readers[i] == who)
            return (int)i;
    return -1;
}

/* Per shared communicator (dag/proc/comm_lease.c) the DAG's collectives use:
 * the channel by which the driver hands each execution its ticket, read
 * by every rank ("<communicator>.order", in host memory). */
static adag_status_t plan_order_channels(adag_dag_h dag)
{
    adag_status_t st;
    if (!dag->plan.ncomm_leases)
        return ADAG_OK;
    if (!(dag->lease_order_chan = calloc(dag->plan.ncomm_leases, sizeof(*dag->lease_order_chan))))
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    for (unsigned i = 0; i < dag->plan.ncomm_leases; i++) {
        const adag_comm_lease_t *l = dag->plan.comm_leases[i];
        dag->lease_order_chan[i] = ADAG_PROG_NO_CHAN;
        if (!adag__comm_lease_shared(l))
            continue;
        adag_dag_chan_t *chans = realloc(dag->plan.chans, (dag->plan.nchans + 1) * sizeof(*chans));
        if (!chans)
            return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        dag->plan.chans = chans;
        adag_dag_chan_t *c = &dag->plan.chans[dag->plan.nchans];
        memset(c, 0, sizeof(*c));
        dag->lease_order_chan[i] = dag->plan.nchans++;
        dag->norders++;
        c->writer = -1;
        c->producer_node = UINT32_MAX;
        c->geom = (adag_chan_geom_t){dag->plan.max_inflight, 0, sizeof(uint64_t), 0, 0}; /* a ticket */
        snprintf(c->name, sizeof(c->name), "comm%llu.order",
                 (unsigned long long)adag__comm_lease_key(l));
        for (unsigned ai = 0; ai < dag->run.nactors; ai++)
            if (adag__comm_lease_rank(l, dag->run.actors[ai].actor->id) >= 0 &&
                (st = add_reader(c, (int)ai)) != ADAG_OK)
                return st;
        if ((st = adag__compile_place_channel(&dag->plan, &dag->run, c)) != ADAG_OK)
            return st;
    }
    return ADAG_OK;
}

/* Channels: one per input field, one per return of every call and, if some
 * method takes no argument, the start channel. */
static adag_status_t plan_channels(compile_ctx_t *cx)
{
    adag_graph_h g = cx->g;
    adag_dag_h dag = cx->dag;
    unsigned n = 0;
    adag_status_t st = adag__compile_check_collective_hosts(g);
    if (st != ADAG_OK)
        return st;

    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h nd = g->nodes[i];
        if (nd->kind == NODE_INPUT) {
            cx->chan_of[i] = n++;
            if (nd->field + 1 > dag->ninputs)
                dag->ninputs = nd->field + 1;
        } else if (nd->kind == NODE_CALL) {
            cx->chan_of[i] = n;
            n += nd->nreturns;
        }
    }
    /* each collective's status channels: one per member, read by the others */
    unsigned nstatus = 0;
    cx->coll_status = calloc(g->ncolls + 1, sizeof(*cx->coll_status));
    if (!cx->coll_status)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    for (unsigned k = 0; k < g->ncolls; k++) {
        cx->coll_status[k] = n + nstatus;
        nstatus += g->colls[k]->n;
    }
    dag->plan.chans = calloc(n + nstatus + 1, sizeof(*dag->plan.chans)); /* + the start channel */
    if (!dag->plan.chans)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    dag->plan.nchans = n + nstatus;
    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h nd = g->nodes[i];
        if (nd->kind == NODE_INPUT) {
            adag_dag_chan_t *c = &dag->plan.chans[cx->chan_of[i]];
            c->writer = -1;
            c->producer_node = i;
            c->tensor = adag__node_value_tensor(nd, 0);
            snprintf(c->name, sizeof(c->name), "input[%u]", nd->field);
            if ((st = adag__compile_value_geometry(&dag->plan, nd, c)) != ADAG_OK)
                return st;
        } else if (nd->kind == NODE_CALL) {
            for (unsigned r = 0; r < nd->nreturns; r++) {
                adag_dag_chan_t *c = &dag->plan.chans[cx->chan_of[i] + r];
                c->writer = cx->actor_index[i];
                c->producer_node = i;
                c->tensor = adag__node_value_tensor(nd, r);
                if (nd->coll)
                    snprintf(c->name, sizeof(c->name), "%s.%s#%u[%u]", nd->actor->name,
                             adag__coll_kind_name(nd->coll->kind), nd->coll->id, r);
                else
                    snprintf(c->name, sizeof(c->name), "%s.%s[%u]", nd->actor->name,
                             nd->actor->methods[nd->method].name, r);
                if ((st = adag__compile_value_geometry(&dag->plan, adag__node_value(nd, r), c)) !=
                    ADAG_OK)
                    return st;
            }
        }
    }
    for (unsigned k = 0; k < g->ncolls; k++) {
        const adag_collective_t *col = g->colls[k];
        for (unsigned m = 0; m < col->n; m++) {
            adag_dag_chan_t *c = &dag->plan.chans[cx->coll_status[k] + m];
            adag_node_h out = col->outputs[m];
            c->writer = cx->actor_index[out->id];
            c->producer_node = out->id;
            snprintf(c->name, sizeof(c->name), "%s#%u.%s", adag__coll_kind_name(col->kind),
                     col->id, out->actor->name);
            c->geom = (adag_chan_geom_t){dag->plan.max_inflight, 0, ADAG_COLL_STATUS_BYTES, 0, 0};
            for (unsigned o = 0; o < col->n; o++)
                if (o != m && (st = add_reader(c, cx->actor_index[col->outputs[o]->id])) !=
                                  ADAG_OK)
                    return st;
        }
    }
    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h nd = g->nodes[i];
        if (nd->kind != NODE_CALL)
            continue;
        for (unsigned a = 0; a < nd->nargs; a++)
            if ((st = add_reader(&dag->plan.chans[value_chan(cx, nd->args[a])], cx->actor_index[i])) !=
                ADAG_OK)
                return st;
    }
    for (unsigned o = 0; o < g->noutputs; o++)
        if ((st = add_reader(&dag->plan.chans[value_chan(cx, g->outputs[o])], -1)) != ADAG_OK)
            return st;
    /* the start channel: actors with a method that takes no argument read it */
    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h nd = g->nodes[i];
        if (nd->kind != NODE_CALL || nd->nargs != 0)
            continue;
        if (dag->start_chan == ADAG_PROG_NO_CHAN) {
            dag->start_chan = dag->plan.nchans++;
            adag_dag_chan_t *c = &dag->plan.chans[dag->start_chan];
            c->writer = -1;
            c->producer_node = UINT32_MAX;
            c->geom = (adag_chan_geom_t){dag->plan.max_inflight, 0, 0, 0, 0}; /* carries nothing */
            snprintf(c->name, sizeof(c->name), "start");
        }
        if ((st = add_reader(&dag->plan.chans[dag->start_chan], cx->actor_index[i])) != ADAG_OK)
            return st;
    }
    if ((st = adag__compile_check_slots(&dag->plan, g)) != ADAG_OK)
        return st;
    for (unsigned c = 0; c < dag->plan.nchans; c++) {
        if ((st = adag__compile_place_channel(&dag->plan, &dag->run, &dag->plan.chans[c])) != ADAG_OK)
            return st;
    }
    if ((st = adag__compile_comm_plan(&dag->plan, &dag->run, (const adag_collective_t *const *)g->colls, g->ncolls,
                                     cx->actor_index)) != ADAG_OK)
        return st;
    /* communicator tensors (ADAG_TRANSPORT_COMM) are the host communicator's
     * shared memory or NCCL on one host: not on another host either */
    for (unsigned i = 0; i < dag->plan.ncomm_leases; i++)
        for (unsigned ai = 0; ai < dag->run.nactors; ai++) {
            adag_actor_h a = dag->run.actors[ai].actor;
            if (a->node[0] && adag__comm_lease_rank(dag->plan.comm_leases[i], a->id) >= 0)
                return adag__error(ADAG_ERR_INVALID,
                                  "adag_graph_compile: actor %s (node %s) has a communicator "
                                  "tensor (ADAG_TRANSPORT_COMM); those run within the driver's "
                                  "host for now",
                                  a->name, a->node);
        }
    return plan_order_channels(dag);
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

/* A member's COLLECTIVE operation: its collective, rank and status
 * channels (local numbers: a member touches all of them, in order). */
static void coll_op(compile_ctx_t *cx, adag_node_h nd, const int *local, const adag_program_t *p,
                    adag_prog_op_t *op)
{
    const adag_collective_t *col = nd->coll;
    unsigned k = 0;
    while (cx->g->colls[k] != col)
        k++;
    op->coll_kind = (uint32_t)col->kind;
    op->coll_id = col->id;
    op->reduce_op = (uint32_t)col->op;
    op->root = col->root;
    op->member = nd->member;
    op->nmembers = col->n;
    op->status_first = (uint32_t)local[cx->coll_status[k]];
    op->comm = 0;
    while (op->comm < p->ncomms && p->comms[op->comm].key != cx->dag->plan.coll_keys[k])
        op->comm++;
}

static adag_status_t build_program(compile_ctx_t *cx, unsigned ai, adag_program_t *p)
{
    adag_dag_h dag = cx->dag;
    adag_graph_h g = cx->g;
    int *local = malloc(dag->plan.nchans * sizeof(*local));
    if (!local)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    memset(p, 0, sizeof(*p));
    p->dag_id = dag->run.id;
    snprintf(p->dag_name, sizeof(p->dag_name), "%s", dag->run.name);
    adag_wait_policy_t policy = adag__dag_policy(dag, (int)ai);
    adag_wbuf_t descs = {0};
    p->max_inflight = dag->plan.max_inflight;
    p->spin_ns = policy.spin_ns;
    p->spin_yield = (uint32_t)policy.yield;
    p->trace_spans = dag->trace_spans;
    p->comm_timeout_ms = dag->comm_timeout_ms;
    p->start_chan = ADAG_PROG_NO_CHAN;
    p->chans = calloc(dag->plan.nchans + 1, sizeof(*p->chans));
    p->ops = calloc(g->nnodes + 1, sizeof(*p->ops));
    adag_status_t st = ADAG_OK;
    if (!p->chans || !p->ops || (st = adag__compile_comm_program(&dag->plan, &dag->run, ai, p)) != ADAG_OK) {
        free(local);
        adag__program_free(p);
        return st != ADAG_OK ? st : adag__error(ADAG_ERR_NO_MEMORY,
                                               "adag_graph_compile: out of memory");
    }
    for (unsigned c = 0; c < dag->plan.nchans; c++) {
        const adag_dag_chan_t *dc = &dag->plan.chans[c];
        int writes = dc->writer == (int)ai, reader = reader_index(dc, (int)ai);
        local[c] = -1;
        if (!writes && reader < 0)
            continue;
        adag_prog_chan_t *pc = &p->chans[p->nchans];
        snprintf(pc->name, sizeof(pc->name), "%s", dc->name);
        pc->id = c;
        pc->backend = dc->backend;
        pc->nreaders = dc->nreaders;
        pc->reader = writes ? -1 : reader;
        pc->nslots = dc->geom.nslots;
        pc->capacity = dc->geom.capacity;
        pc->desc_off = (uint32_t)descs.len;
        pc->desc_len = (uint32_t)dc->desc.len;
        pc->tensor = dc->tensor;
        pc->comm_key = dc->comm_key;
        adag__wbuf_raw(&descs, dc->desc.data, dc->desc.len);
        if (c == dag->start_chan)
            p->start_chan = p->nchans;
        local[c] = (int)p->nchans++;
    }
    /* a shared communicator's ticket channel, by its local number */
    for (uint32_t j = 0; j < p->ncomms; j++)
        for (unsigned i = 0; p->comms[j].shared && i < dag->plan.ncomm_leases; i++)
            if (adag__comm_lease_key(dag->plan.comm_leases[i]) == p->comms[j].key)
                p->comms[j].order_chan = (uint32_t)local[dag->lease_order_chan[i]];
    p->descs = descs.data; /* the program owns it now */
    p->descs_len = (uint32_t)descs.len;
    if (descs.failed || descs.len > UINT32_MAX) {
        free(local);
        adag__program_free(p);
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    }
    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h nd = g->nodes[i];
        if (nd->kind != NODE_CALL || cx->actor_index[i] != (int)ai)
            continue;
        adag_prog_op_t *op = &p->ops[p->nops++];
        op->kind = nd->coll ? ADAG_OP_COLLECTIVE : ADAG_OP_CALL;
        op->method = nd->coll ? 0 : nd->method;
        op->node = i;
        op->nargs = nd->nargs;
        op->nrets = nd->nreturns;
        for (unsigned a = 0; a < nd->nargs; a++)
            op->args[a] = (uint32_t)local[value_chan(cx, nd->args[a])];
        for (unsigned r = 0; r < nd->nreturns; r++)
            op->rets[r] = (uint32_t)local[cx->chan_of[i] + r];
        if (nd->coll)
            coll_op(cx, nd, local, p, op);
    }
    free(local);
    return ADAG_OK;
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
        .device = dag->driver_dev ? &dag->driver_dev->chan : NULL,
    };
    adag_status_t st = adag__ctx_open(&dag->run.ctx, dc->backend, &p, &dc->driver_info, out);
    if (st != ADAG_OK)
        adag__error_prefix("adag_graph_compile: the driver's endpoint");
    return st;
}

static adag_status_t open_driver_endpoints(compile_ctx_t *cx)
{
    adag_dag_h dag = cx->dag;
    adag_graph_h g = cx->g;
    adag_status_t st;

    dag->inputs = calloc(dag->ninputs + 1, sizeof(*dag->inputs));
    dag->input_chan = calloc(dag->ninputs + 1, sizeof(*dag->input_chan));
    dag->input_counts = calloc(dag->ninputs + 1, sizeof(*dag->input_counts));
    size_t per_ref = (size_t)dag->plan.max_inflight * (dag->ninputs + 1);
    dag->slot_bufs = calloc(per_ref, sizeof(*dag->slot_bufs));
    dag->slot_sizes = calloc(per_ref, sizeof(*dag->slot_sizes));
    dag->slot_metas = calloc(per_ref, sizeof(*dag->slot_metas));
    dag->slot_owner = calloc(dag->plan.max_inflight, sizeof(*dag->slot_owner));
    dag->outs = calloc(g->noutputs, sizeof(*dag->outs));
    dag->out_chan = calloc(g->noutputs, sizeof(*dag->out_chan));
    dag->output_of = calloc(g->noutputs, sizeof(*dag->output_of));
    dag->ref_flags = calloc(dag->plan.max_inflight, 1);
    if (!dag->inputs || !dag->input_chan || !dag->input_counts || !dag->slot_bufs || !dag->slot_sizes ||
        !dag->slot_metas || !dag->slot_owner ||
        !dag->outs || !dag->out_chan || !dag->output_of || !dag->ref_flags)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    dag->noutputs = g->noutputs;
    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h nd = g->nodes[i];
        if (nd->kind != NODE_INPUT)
            continue;
        unsigned c = cx->chan_of[i];
        dag->input_chan[nd->field] = c;
        if ((st = open_driver_endpoint(dag, c, -1, &dag->inputs[nd->field])) != ADAG_OK)
            return st;
    }
    for (unsigned o = 0; o < g->noutputs; o++) {
        unsigned c = value_chan(cx, g->outputs[o]), e;
        for (e = 0; e < dag->nouts; e++)
            if (dag->out_chan[e] == c)
                break;
        if (e == dag->nouts) {
            st = open_driver_endpoint(dag, c, reader_index(&dag->plan.chans[c], -1), &dag->outs[e]);
            if (st != ADAG_OK)
                return st;
            dag->out_chan[e] = c;
            dag->nouts++;
        }
        dag->output_of[o] = e;
    }
    if (dag->norders) {
        dag->orders = calloc(dag->norders, sizeof(*dag->orders));
        dag->order_leases = calloc(dag->norders, sizeof(*dag->order_leases));
        dag->order_bufs = calloc((size_t)dag->plan.max_inflight * dag->norders,
                                 sizeof(*dag->order_bufs));
        if (!dag->orders || !dag->order_leases || !dag->order_bufs)
            return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        unsigned k = 0;
        for (unsigned i = 0; i < dag->plan.ncomm_leases; i++) {
            if (dag->lease_order_chan[i] == ADAG_PROG_NO_CHAN)
                continue;
            dag->order_leases[k] = dag->plan.comm_leases[i];
            if ((st = open_driver_endpoint(dag, dag->lease_order_chan[i], -1,
                                           &dag->orders[k])) != ADAG_OK)
                return st;
            k++;
        }
    }
    if (dag->start_chan != ADAG_PROG_NO_CHAN)
        return open_driver_endpoint(dag, dag->start_chan, -1, &dag->start);
    return ADAG_OK;
}

adag_status_t adag_graph_compile(adag_graph_h g, const adag_compile_params_t *params,
                                 adag_dag_h *out)
{
    compile_ctx_t cx = {0};
    adag_dag_h dag = NULL;
    adag_status_t st;

    if (!g || !out)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: graph and dag must not be NULL");
    *out = NULL;
    pthread_mutex_lock(&g->lock);
    if ((st = validate(g)) != ADAG_OK)
        goto fail_unlock;
    dag = calloc(1, sizeof(*dag));
    cx.chan_of = calloc(g->nnodes, sizeof(*cx.chan_of));
    cx.actor_index = calloc(g->nnodes, sizeof(*cx.actor_index));
    if (!dag || !cx.chan_of || !cx.actor_index) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        goto fail;
    }
    cx.g = g;
    cx.dag = dag;
    dag->run.rt = g->rt;
    dag->run.ops = &adag__dag_run_ops;
    dag->plan.driver_dev_kind = -1; /* none until adag__dag_driver_device_open */
    dag->user_fd = -1;
    dag->start_chan = ADAG_PROG_NO_CHAN;
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
    uint64_t driver_records = dag->trace_spans > 4ull * dag->plan.max_inflight
                                  ? dag->trace_spans
                                  : 4ull * dag->plan.max_inflight;
    if (dag->trace_spans &&
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
    for (unsigned i = 0; i < g->nnodes; i++)
        cx.actor_index[i] = g->nodes[i]->kind == NODE_CALL ? dag_actor_index(dag, g->nodes[i]->actor)
                                                           : -1;
    if ((st = plan_channels(&cx)) != ADAG_OK || (st = make_domains(dag)) != ADAG_OK)
        goto fail;
    dag->user_fd = adag__fd_above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (dag->user_fd < 0) {
        st = adag__error_errno(errno, "adag_graph_compile: eventfd");
        goto fail;
    }
    for (unsigned ai = 0; ai < dag->run.nactors; ai++)
        if ((st = build_program(&cx, ai, &dag->run.actors[ai].prog)) != ADAG_OK)
            goto fail;
    if ((st = adag__compile_comm_check_order(&dag->plan, &dag->run)) != ADAG_OK)
        goto fail;
    if ((st = open_driver_endpoints(&cx)) != ADAG_OK ||
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

    /* register before installing, so a worker death during install fails it */
    pthread_mutex_lock(&g->rt->lock);
    adag__list_push(&g->rt->dags, &dag->run.link);
    pthread_mutex_unlock(&g->rt->lock);
    if ((st = adag__dag_install(dag)) != ADAG_OK) {
        /* adag_dag_destroy stops what was installed; keep this failure's message */
        char msg[ADAG_ERROR_MAX];
        snprintf(msg, sizeof(msg), "%s", adag_last_error());
        free(cx.chan_of);
        free(cx.actor_index);
        free(cx.coll_status);
        pthread_mutex_unlock(&g->lock);
        adag_dag_destroy(dag);
        return adag__error(st, "%s", msg);
    }
    g->compiled = 1;
    dag->stats.max_inflight = dag->plan.max_inflight;
    dag->stats.slot_capacity = dag->plan.default_capacity;
    dag->stats.nchannels = dag->plan.nchans - (dag->start_chan != ADAG_PROG_NO_CHAN) - dag->norders;
    dag->stats.shm_bytes = adag__ctx_domain_bytes(&dag->run.ctx);
    for (unsigned c = 0; c < dag->plan.nchans; c++)
        dag->stats.device_bytes += dag->plan.chans[c].device_bytes;
    free(cx.chan_of);
    free(cx.actor_index);
    free(cx.coll_status);
    pthread_mutex_unlock(&g->lock);
    *out = dag;
    return ADAG_OK;

fail:
    free(cx.chan_of);
    free(cx.actor_index);
    free(cx.coll_status);
    if (dag)
        adag__dag_free(dag);
fail_unlock:
    pthread_mutex_unlock(&g->lock);
    return st;
}

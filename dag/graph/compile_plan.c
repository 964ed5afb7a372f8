/*
 * The compiler proper: a graph in, the channel plan and each actor's
 * program out. adag__compile_validate checks the graph; 
 * adag__compile_channels gives every produced value one channel with all
 * its readers (plus each collective's status channels, the start channel
 * and the ticket channels of shared communicators), and has each placed
 * (compile_place.c), sized (compile_geom.c) and its communicator planned
 * (compile_comm.c); adag__compile_program builds an actor's program: its
 * channels by local number and its operations in bind order. No processes
 * and no I/O: the driver (dag/driver/compile.c) lays the channels out,
 * opens its own endpoints and installs the programs.
 */
#include "common/error.h"
#include "dag/exec/loop_collective.h"
#include "dag/graph/plan.h"
#include "transport/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run_actor_index(const adag_dag_run_t *run, adag_actor_h a)
{
    for (unsigned i = 0; i < run->nactors; i++)
        if (run->actors[i].actor == a)
            return (int)i;
    return -1;
}

/* The channel carrying value node n. */
unsigned adag__compile_value_chan(const adag_compiler_t *cx, adag_node_h n)
{
    if (n->kind == NODE_RETURN)
        return cx->chan_of[n->call->id] + n->ret;
    return cx->chan_of[n->id];
}

adag_status_t adag__compile_validate(adag_graph_h g)
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

int adag__plan_reader_index(const adag_dag_chan_t *c, int who)
{
    for (unsigned i = 0; i < c->nreaders; i++)
        if (c->readers[i] == who)
            return (int)i;
    return -1;
}

/* Per shared communicator (dag/proc/comm_lease.c) the DAG's collectives use:
 * the channel by which the driver hands each execution its ticket, read
 * by every rank ("<communicator>.order", in host memory). */
static adag_status_t plan_order_channels(adag_plan_t *plan, const adag_dag_run_t *run)
{
    adag_status_t st;
    if (!plan->ncomm_leases)
        return ADAG_OK;
    if (!(plan->lease_order_chan = calloc(plan->ncomm_leases, sizeof(*plan->lease_order_chan))))
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    for (unsigned i = 0; i < plan->ncomm_leases; i++) {
        const adag_comm_lease_t *l = plan->comm_leases[i];
        plan->lease_order_chan[i] = ADAG_PROG_NO_CHAN;
        if (!adag__comm_lease_shared(l))
            continue;
        adag_dag_chan_t *chans = realloc(plan->chans, (plan->nchans + 1) * sizeof(*chans));
        if (!chans)
            return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        plan->chans = chans;
        adag_dag_chan_t *c = &plan->chans[plan->nchans];
        memset(c, 0, sizeof(*c));
        plan->lease_order_chan[i] = plan->nchans++;
        plan->norders++;
        c->writer = -1;
        c->producer_node = UINT32_MAX;
        c->geom = (adag_chan_geom_t){plan->max_inflight, 0, sizeof(uint64_t), 0, 0}; /* a ticket */
        snprintf(c->name, sizeof(c->name), "comm%llu.order",
                 (unsigned long long)adag__comm_lease_key(l));
        for (unsigned ai = 0; ai < run->nactors; ai++)
            if (adag__comm_lease_rank(l, run->actors[ai].actor->id) >= 0 &&
                (st = add_reader(c, (int)ai)) != ADAG_OK)
                return st;
        if ((st = adag__compile_place_channel(plan, run, c)) != ADAG_OK)
            return st;
    }
    return ADAG_OK;
}

/* Whether a call may run ahead of its inputs (dag/exec/loop_ahead.c): a
 * method of a device-bound actor whose every argument is a static tensor
 * (dtype and shape declared) written by an actor on a device of the same
 * backend, moved by the device channel (not ADAG_TRANSPORT_HOST or COMM),
 * in a DAG compiled with run_ahead, in a runtime whose hand-offs are by
 * value ops. Its actor then reads the
 * start channel: it waits for its execution to start, and each endpoint
 * says at connect whether it can read ahead (the loop asks). */
static int may_run_ahead(const adag_compiler_t *cx, adag_node_h nd)
{
    if (!cx->plan->run_ahead || nd->coll || nd->actor->device_kind < 0 ||
        !cx->run->rt->settings.device_memops)
        return 0;
    for (unsigned a = 0; a < nd->nargs; a++) {
        const adag_dag_chan_t *c = &cx->plan->chans[adag__compile_value_chan(cx, nd->args[a])];
        if (c->writer < 0 ||
            cx->run->actors[c->writer].actor->device_kind != nd->actor->device_kind ||
            (c->tensor.flags & ADAG_TENSOR_DECL_KNOWN) != ADAG_TENSOR_DECL_KNOWN ||
            c->tensor.transport == ADAG_TRANSPORT_HOST || c->tensor.transport == ADAG_TRANSPORT_COMM)
            return 0;
    }
    return 1;
}

/* Channels: one per input field, one per return of every call and, if some
 * method takes no argument or may run ahead, the start channel. */
adag_status_t adag__compile_channels(adag_compiler_t *cx)
{
    adag_graph_h g = cx->g;
    adag_plan_t *plan = cx->plan;
    const adag_dag_run_t *run = cx->run;
    unsigned n = 0;
    adag_status_t st = adag__compile_check_collective_hosts(g);
    if (st != ADAG_OK)
        return st;

    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h nd = g->nodes[i];
        if (nd->kind == NODE_INPUT) {
            cx->chan_of[i] = n++;
            if (nd->field + 1 > plan->ninputs)
                plan->ninputs = nd->field + 1;
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
    plan->chans = calloc(n + nstatus + 1, sizeof(*plan->chans)); /* + the start channel */
    if (!plan->chans)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    plan->nchans = n + nstatus;
    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h nd = g->nodes[i];
        if (nd->kind == NODE_INPUT) {
            adag_dag_chan_t *c = &plan->chans[cx->chan_of[i]];
            c->writer = -1;
            c->producer_node = i;
            c->tensor = adag__node_value_tensor(nd, 0);
            snprintf(c->name, sizeof(c->name), "input[%u]", nd->field);
            if ((st = adag__compile_value_geometry(plan, nd, c)) != ADAG_OK)
                return st;
        } else if (nd->kind == NODE_CALL) {
            for (unsigned r = 0; r < nd->nreturns; r++) {
                adag_dag_chan_t *c = &plan->chans[cx->chan_of[i] + r];
                c->writer = cx->actor_index[i];
                c->producer_node = i;
                c->tensor = adag__node_value_tensor(nd, r);
                if (nd->coll)
                    snprintf(c->name, sizeof(c->name), "%s.%s#%u[%u]", nd->actor->name,
                             adag__coll_kind_name(nd->coll->kind), nd->coll->id, r);
                else
                    snprintf(c->name, sizeof(c->name), "%s.%s[%u]", nd->actor->name,
                             nd->actor->methods[nd->method].name, r);
                if ((st = adag__compile_value_geometry(plan, adag__node_value(nd, r), c)) !=
                    ADAG_OK)
                    return st;
            }
        }
    }
    for (unsigned k = 0; k < g->ncolls; k++) {
        const adag_collective_t *col = g->colls[k];
        for (unsigned m = 0; m < col->n; m++) {
            adag_dag_chan_t *c = &plan->chans[cx->coll_status[k] + m];
            adag_node_h out = col->outputs[m];
            c->writer = cx->actor_index[out->id];
            c->producer_node = out->id;
            snprintf(c->name, sizeof(c->name), "%s#%u.%s", adag__coll_kind_name(col->kind),
                     col->id, out->actor->name);
            c->geom = (adag_chan_geom_t){plan->max_inflight, 0, ADAG_COLL_STATUS_BYTES, 0, 0};
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
            if ((st = add_reader(&plan->chans[adag__compile_value_chan(cx, nd->args[a])], cx->actor_index[i])) !=
                ADAG_OK)
                return st;
    }
    for (unsigned o = 0; o < g->noutputs; o++)
        if ((st = add_reader(&plan->chans[adag__compile_value_chan(cx, g->outputs[o])], -1)) != ADAG_OK)
            return st;
    /* the start channel: actors with a method that takes no argument read
     * it, and those whose method may run ahead of its inputs */
    for (unsigned i = 0; i < g->nnodes; i++) {
        adag_node_h nd = g->nodes[i];
        if (nd->kind != NODE_CALL || (nd->nargs != 0 && !may_run_ahead(cx, nd)))
            continue;
        if (plan->start_chan == ADAG_PROG_NO_CHAN) {
            plan->start_chan = plan->nchans++;
            adag_dag_chan_t *c = &plan->chans[plan->start_chan];
            c->writer = -1;
            c->producer_node = UINT32_MAX;
            c->geom = (adag_chan_geom_t){plan->max_inflight, 0, 0, 0, 0}; /* carries nothing */
            snprintf(c->name, sizeof(c->name), "start");
        }
        if ((st = add_reader(&plan->chans[plan->start_chan], cx->actor_index[i])) != ADAG_OK)
            return st;
    }
    if ((st = adag__compile_check_slots(plan, g)) != ADAG_OK)
        return st;
    for (unsigned c = 0; c < plan->nchans; c++) {
        if ((st = adag__compile_place_channel(plan, run, &plan->chans[c])) != ADAG_OK)
            return st;
    }
    if ((st = adag__compile_comm_plan(plan, run, (const adag_collective_t *const *)g->colls, g->ncolls,
                                     cx->actor_index)) != ADAG_OK)
        return st;
    /* communicator tensors (ADAG_TRANSPORT_COMM) are the host communicator's
     * shared memory or NCCL on one host: not on another host either */
    for (unsigned i = 0; i < plan->ncomm_leases; i++)
        for (unsigned ai = 0; ai < run->nactors; ai++) {
            adag_actor_h a = run->actors[ai].actor;
            if (a->node[0] && adag__comm_lease_rank(plan->comm_leases[i], a->id) >= 0)
                return adag__error(ADAG_ERR_INVALID,
                                  "adag_graph_compile: actor %s (node %s) has a communicator "
                                  "tensor (ADAG_TRANSPORT_COMM); those run within the driver's "
                                  "host for now",
                                  a->name, a->node);
        }
    return plan_order_channels(plan, run);
}


/* A member's COLLECTIVE operation: its collective, rank and status
 * channels (local numbers: a member touches all of them, in order). */
static void coll_op(const adag_compiler_t *cx, adag_node_h nd, const int *local, const adag_program_t *p,
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
    while (op->comm < p->ncomms && p->comms[op->comm].key != cx->plan->coll_keys[k])
        op->comm++;
}

adag_status_t adag__compile_program(const adag_compiler_t *cx, unsigned ai,
                                   adag_wait_policy_t policy, adag_program_t *p)
{
    adag_plan_t *plan = cx->plan;
    const adag_dag_run_t *run = cx->run;
    adag_graph_h g = cx->g;
    int *local = malloc(plan->nchans * sizeof(*local));
    if (!local)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    memset(p, 0, sizeof(*p));
    p->dag_id = run->id;
    snprintf(p->dag_name, sizeof(p->dag_name), "%s", run->name);
    adag_wbuf_t descs = {0};
    p->max_inflight = plan->max_inflight;
    p->spin_ns = policy.spin_ns;
    p->spin_yield = (uint32_t)policy.yield;
    p->trace_spans = plan->trace_spans;
    p->graphs = plan->graphs != 0;
    p->comm_timeout_ms = plan->comm_timeout_ms;
    p->start_chan = ADAG_PROG_NO_CHAN;
    p->chans = calloc(plan->nchans + 1, sizeof(*p->chans));
    p->ops = calloc(g->nnodes + 1, sizeof(*p->ops));
    adag_status_t st = ADAG_OK;
    if (!p->chans || !p->ops || (st = adag__compile_comm_program(plan, run, ai, p)) != ADAG_OK) {
        free(local);
        adag__program_free(p);
        return st != ADAG_OK ? st : adag__error(ADAG_ERR_NO_MEMORY,
                                               "adag_graph_compile: out of memory");
    }
    for (unsigned c = 0; c < plan->nchans; c++) {
        const adag_dag_chan_t *dc = &plan->chans[c];
        int writes = dc->writer == (int)ai, reader = adag__plan_reader_index(dc, (int)ai);
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
        if (c == plan->start_chan)
            p->start_chan = p->nchans;
        local[c] = (int)p->nchans++;
    }
    /* a shared communicator's ticket channel, by its local number */
    for (uint32_t j = 0; j < p->ncomms; j++)
        for (unsigned i = 0; p->comms[j].shared && i < plan->ncomm_leases; i++)
            if (adag__comm_lease_key(plan->comm_leases[i]) == p->comms[j].key)
                p->comms[j].order_chan = (uint32_t)local[plan->lease_order_chan[i]];
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
            op->args[a] = (uint32_t)local[adag__compile_value_chan(cx, nd->args[a])];
        for (unsigned r = 0; r < nd->nreturns; r++)
            op->rets[r] = (uint32_t)local[cx->chan_of[i] + r];
        if (nd->coll)
            coll_op(cx, nd, local, p, op);
    }
    free(local);
    return ADAG_OK;
}

adag_status_t adag__compiler_init(adag_compiler_t *cx, adag_graph_h g, adag_plan_t *plan,
                                 const adag_dag_run_t *run)
{
    memset(cx, 0, sizeof(*cx));
    cx->g = g;
    cx->plan = plan;
    cx->run = run;
    cx->chan_of = calloc(g->nnodes + 1, sizeof(*cx->chan_of));
    cx->actor_index = calloc(g->nnodes + 1, sizeof(*cx->actor_index));
    if (!cx->chan_of || !cx->actor_index) {
        adag__compiler_free(cx);
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    }
    for (unsigned i = 0; i < g->nnodes; i++)
        cx->actor_index[i] =
            g->nodes[i]->kind == NODE_CALL ? run_actor_index(run, g->nodes[i]->actor) : -1;
    return ADAG_OK;
}

void adag__compiler_free(adag_compiler_t *cx)
{
    free(cx->chan_of);
    free(cx->actor_index);
    free(cx->coll_status);
    cx->chan_of = cx->coll_status = NULL;
    cx->actor_index = NULL;
}

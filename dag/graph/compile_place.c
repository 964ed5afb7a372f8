/*
 * Where a channel's endpoints keep its values, and its backend: the one
 * decision of a channel's backend (part of the compiler, dag/driver/compile.c).
 *   places   a declared tensor lives on the device of a device-bound
 *            endpoint (unless its transport is HOST); everything else in
 *            host memory; one channel cannot join two device backends;
 *   backend  the cheapest that can carry it: the compiler describes
 *            every endpoint (actor, process, node: an actor's agent's
 *            address, the driver's ""; where it keeps the value) and the
 *            tensor's transport, and asks each backend of the registry
 *            (transport/channel.c, adag__chan_choose); dag/ knows no
 *            backend by name.
 */
#include "common/error.h"
#include "dag/graph/plan.h"

#include <stdlib.h>

/* Endpoint `who`: a DAG actor index, -1 the driver. */
static const char *endpoint_name(const adag_dag_run_t *run, int who)
{
    return who < 0 ? "the driver" : run->actors[who].actor->name;
}

/* Where endpoint `who` keeps channel c's values. */
static adag_chan_place_t place_of(const adag_plan_t *plan, const adag_dag_run_t *run, const adag_dag_chan_t *c, int who)
{
    adag_chan_place_t host = {-1, 0, endpoint_name(run, who), 0};
    if (!(c->tensor.flags & ADAG_TENSOR_DECLARED) || c->tensor.transport == ADAG_TRANSPORT_HOST)
        return host;
    if (who < 0) /* the driver's tensors live on its device, if it has one */
        return plan->driver_dev_kind >= 0 ? (adag_chan_place_t){plan->driver_dev_kind,
                                                     plan->driver_dev_index, host.who, 0}
                               : host;
    adag_actor_h a = run->actors[who].actor;
    if (a->device_kind < 0)
        return host;
    return (adag_chan_place_t){a->device_kind, a->device_index, host.who, 0};
}

/* The places of c's writer (places[0]) and readers (1 + r). */
static adag_status_t place_channel(const adag_plan_t *plan, const adag_dag_run_t *run, adag_dag_chan_t *c)
{
    c->places = calloc(1 + c->nreaders, sizeof(*c->places));
    if (!c->places)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    c->places[0] = place_of(plan, run, c, c->writer);
    int dev = c->places[0].kind >= 0 ? 0 : -1; /* an endpoint on a device */
    for (unsigned r = 0; r < c->nreaders; r++) {
        adag_chan_place_t p = place_of(plan, run, c, c->readers[r]);
        c->places[1 + r] = p;
        if (p.kind < 0)
            continue;
        if (dev < 0)
            dev = (int)(1 + r);
        else if (c->places[dev].kind != p.kind)
            return adag__error(ADAG_ERR_INVALID,
                              "adag_graph_compile: tensor %s goes from %s (%s:%u) to %s (%s:%u): "
                              "a tensor cannot move between device backends; declare it with "
                              "transport ADAG_TRANSPORT_HOST",
                              c->name, endpoint_name(run, dev ? c->readers[dev - 1] : c->writer),
                              adag_device_kind_name((uint32_t)c->places[dev].kind),
                              c->places[dev].index, endpoint_name(run, c->readers[r]),
                              adag_device_kind_name((uint32_t)p.kind), p.index);
    }
    if (dev < 0 && (c->tensor.flags & ADAG_TENSOR_DECLARED) &&
        c->tensor.transport == ADAG_TRANSPORT_IPC)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: tensor %s is declared with transport "
                          "ADAG_TRANSPORT_IPC, but neither its writer (%s) nor a reader is a "
                          "device-bound actor",
                          c->name, endpoint_name(run, c->writer));
    return ADAG_OK;
}

/* The node of a DAG actor (-1: the driver): its agent's address, "" for
 * the driver's node. */
static const char *host_of(const adag_dag_run_t *run, int who)
{
    return who < 0 ? "" : run->actors[who].actor->node;
}

/* The process of a DAG actor (-1: the driver): 0 for the driver's own (the
 * driver, thread actors), else a number of the actor's own. */
static uint32_t process_of(const adag_dag_run_t *run, int who)
{
    return who < 0 || run->actors[who].actor->ops == &adag_placement_thread
               ? 0
               : 1 + (uint32_t)who;
}

/* The one decision of a channel's backend: every registered backend is
 * asked (adag__chan_choose) and the cheapest that can carry it wins. */
static adag_status_t choose_backend(const adag_dag_run_t *run, adag_dag_chan_t *c)
{
    adag_chan_end_t *ends = calloc(1 + c->nreaders, sizeof(*ends));
    if (!ends)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    for (unsigned i = 0; i <= c->nreaders; i++) {
        int who = i ? c->readers[i - 1] : c->writer;
        ends[i] = (adag_chan_end_t){who, process_of(run, who), host_of(run, who), c->places[i]};
    }
    adag_chan_edge_t e = {c->name, ends, c->nreaders,
                          c->tensor.flags & ADAG_TENSOR_DECLARED ? c->tensor.transport
                                                                 : ADAG_TRANSPORT_AUTO};
    adag_status_t st = adag__chan_choose(&e, &c->backend);
    free(ends);
    if (st != ADAG_OK)
        adag__error_prefix("adag_graph_compile");
    return st;
}

adag_status_t adag__compile_check_collective_hosts(adag_graph_h g)
{
    for (unsigned k = 0; k < g->ncolls; k++) {
        const adag_collective_t *col = g->colls[k];
        for (unsigned m = 0; m < col->n; m++) {
            adag_actor_h a = col->inputs[m]->actor;
            if (a && a->node[0])
                return adag__error(ADAG_ERR_INVALID,
                                  "adag_graph_compile: collective %s#%u has member %s on node "
                                  "%s; collectives run within the driver's host for now",
                                  adag__coll_kind_name(col->kind), col->id, a->name, a->node);
        }
    }
    return ADAG_OK;
}

adag_status_t adag__compile_place_channel(const adag_plan_t *plan, const adag_dag_run_t *run, adag_dag_chan_t *c)
{
    adag_status_t st = place_channel(plan, run, c);
    return st != ADAG_OK ? st : choose_backend(run, c);
}

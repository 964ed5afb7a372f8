/*
 * Where a channel's endpoints keep its values, and its backend: the one
 * decision of a channel's kind (part of the compiler, dag/compile.c).
 *   places   a declared tensor lives on the device of a device-bound
 *            endpoint (unless its transport is HOST); everything else in
 *            host memory; one channel cannot join two device backends;
 *   kind     ucx when its endpoints are on more than one host (an actor's
 *            host is its agent's address, the driver's host ""), and for
 *            a channel within another host (no segment of ours reaches
 *            there); device when an endpoint keeps it in device memory (a
 *            device tensor cannot cross hosts yet); self when only its
 *            writer reads it; shm otherwise.
 */
#include "common/error.h"
#include "dag/internal.h"

#include <stdlib.h>
#include <string.h>

/* Endpoint `who`: a DAG actor index, -1 the driver. */
static const char *endpoint_name(adag_dag_h dag, int who)
{
    return who < 0 ? "the driver" : dag->actors[who].actor->name;
}

/* Where endpoint `who` keeps channel c's values. */
static adag_chan_place_t place_of(adag_dag_h dag, const adag_dag_chan_t *c, int who)
{
    adag_chan_place_t host = {-1, 0, endpoint_name(dag, who), 0};
    if (!(c->tensor.flags & ADAG_TENSOR_DECLARED) || c->tensor.transport == ADAG_TRANSPORT_HOST)
        return host;
    if (who < 0) /* the driver's tensors live on its device, if it has one */
        return dag->driver_dev ? (adag_chan_place_t){dag->driver_dev_kind,
                                                     dag->driver_dev_index, host.who, 0}
                               : host;
    adag_actor_h a = dag->actors[who].actor;
    if (a->device_kind < 0)
        return host;
    return (adag_chan_place_t){a->device_kind, a->device_index, host.who, 0};
}

/* The places of c's writer (places[0]) and readers (1 + r). */
static adag_status_t place_channel(adag_dag_h dag, adag_dag_chan_t *c)
{
    c->places = calloc(1 + c->nreaders, sizeof(*c->places));
    if (!c->places)
        return adag_error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    c->places[0] = place_of(dag, c, c->writer);
    int dev = c->places[0].kind >= 0 ? 0 : -1; /* an endpoint on a device */
    for (unsigned r = 0; r < c->nreaders; r++) {
        adag_chan_place_t p = place_of(dag, c, c->readers[r]);
        c->places[1 + r] = p;
        if (p.kind < 0)
            continue;
        if (dev < 0)
            dev = (int)(1 + r);
        else if (c->places[dev].kind != p.kind)
            return adag_error(ADAG_ERR_INVALID,
                              "adag_graph_compile: tensor %s goes from %s (%s:%u) to %s (%s:%u): "
                              "a tensor cannot move between device backends; declare it with "
                              "transport ADAG_TRANSPORT_HOST",
                              c->name, endpoint_name(dag, dev ? c->readers[dev - 1] : c->writer),
                              adag_device_kind_name((uint32_t)c->places[dev].kind),
                              c->places[dev].index, endpoint_name(dag, c->readers[r]),
                              adag_device_kind_name((uint32_t)p.kind), p.index);
    }
    if (dev < 0 && (c->tensor.flags & ADAG_TENSOR_DECLARED) &&
        c->tensor.transport == ADAG_TRANSPORT_IPC)
        return adag_error(ADAG_ERR_INVALID,
                          "adag_graph_compile: tensor %s is declared with transport "
                          "ADAG_TRANSPORT_IPC, but neither its writer (%s) nor a reader is a "
                          "device-bound actor",
                          c->name, endpoint_name(dag, c->writer));
    return ADAG_OK;
}

/* The host of a DAG actor (-1: the driver): its agent's address, "" for
 * the driver's host. */
static const char *host_of(adag_dag_h dag, int who)
{
    return who < 0 ? "" : dag->actors[who].actor->node;
}

/* The one decision of a channel's backend: ucx when its endpoints are on
 * more than one host (a device tensor cannot cross hosts yet), else device
 * when an endpoint keeps it in device memory, self when only its writer
 * reads it, shm otherwise. */
static adag_status_t choose_kind(adag_dag_h dag, adag_dag_chan_t *c)
{
    const char *h0 = host_of(dag, c->writer);
    int away = -1; /* a reader on another host than the writer's */
    for (unsigned r = 0; r < c->nreaders && away < 0; r++)
        if (strcmp(h0, host_of(dag, c->readers[r])) != 0)
            away = (int)r;
    for (unsigned i = 0; i <= c->nreaders; i++)
        if (c->places[i].kind >= 0) {
            if (away >= 0) {
                const char *h1 = host_of(dag, c->readers[away]);
                return adag_error(ADAG_ERR_INVALID,
                                  "adag_graph_compile: %s is a device tensor that crosses hosts "
                                  "(%s on %s -> %s on %s); declare it in host memory "
                                  "(ADAG_TRANSPORT_HOST) for readers that take host tensors",
                                  c->name, endpoint_name(dag, c->writer),
                                  *h0 ? h0 : "the driver's host",
                                  endpoint_name(dag, c->readers[away]),
                                  *h1 ? h1 : "the driver's host");
            }
            c->kind = ADAG_CHAN_DEVICE;
            return ADAG_OK;
        }
    if (away >= 0 || (*h0 && c->nreaders))
        c->kind = ADAG_CHAN_UCX; /* across hosts; or within another: no segment of ours there */
    else
        c->kind = c->writer >= 0 && c->nreaders == 0 ? ADAG_CHAN_SELF : ADAG_CHAN_SHM;
    return ADAG_OK;
}

adag_status_t adag_compile_check_collective_hosts(adag_graph_h g)
{
    for (unsigned k = 0; k < g->ncolls; k++) {
        const adag_collective_t *col = g->colls[k];
        for (unsigned m = 0; m < col->n; m++) {
            adag_actor_h a = col->inputs[m]->actor;
            if (a && a->node[0])
                return adag_error(ADAG_ERR_INVALID,
                                  "adag_graph_compile: collective %s#%u has member %s on node "
                                  "%s; collectives run within the driver's host for now",
                                  adag_coll_kind_name(col->kind), col->id, a->name, a->node);
        }
    }
    return ADAG_OK;
}

adag_status_t adag_compile_place_channel(adag_dag_h dag, adag_dag_chan_t *c)
{
    adag_status_t st = place_channel(dag, c);
    return st != ADAG_OK ? st : choose_kind(dag, c);
}

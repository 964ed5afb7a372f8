/*
 * Every channel's geometry, part of the compiler (dag/driver/compile.c): its slot
 * size and slot count, each channel its own, so an edge moving 4-byte
 * token ids does not take the slots of one moving megabytes of logits.
 *
 *   slot size   adag_node_channel's max_bytes; else, for a tensor declared
 *               with a static dtype and shape, its exact bytes; else the
 *               DAG's default (adag_compile_params_t.slot_capacity). The
 *               channels of no value node carry what the runtime puts
 *               there: the start channel nothing, a collective member's
 *               status channel its tensor's description
 *               (ADAG_COLL_STATUS_BYTES), a shared communicator's order
 *               channel an 8-byte ticket.
 *   slots       max_inflight, or as many (1..max_inflight) as
 *               adag_node_channel asks where that cannot deadlock (below);
 *               a channel read only by its writer is one buffer.
 *
 * Fewer slots. A writer fills slot seq % k of a channel of k slots once
 * every reader released execution seq - k. Every actor loop runs the
 * executions in order, each one's ops in bind order (a topological order:
 * a method binds only values made before it), and releases an execution's
 * input slots once it finished all its ops of that execution (a
 * device-bound actor whose stream still reads host inputs releases them
 * when that work is done, and waits for it before it waits for execution
 * seq's inputs when seq - k is held, k the fewest slots it reads:
 * dag/exec/loop_host_values.c). Order every op of every execution by
 * (execution, bind order): the lowest op not yet done always runs. Its
 * inputs come from lower ops, all done; a slot it writes waits for
 * readers to finish execution seq - k, whose ops are all lower and done;
 * and a collective's members meet at ops adjacent in bind order. So
 * between actors any k >= 1 makes progress, and fewer slots only bound how
 * far a writer runs ahead. The driver is the exception: it may keep
 * max_inflight results unreleased (adag_dag_get in any order, released
 * when the caller likes) and hands out max_inflight input slots at once
 * (adag_dag_reserve), so a channel it reads or writes keeps max_inflight
 * slots; asking fewer there is refused at compile time.
 */
#include "common/error.h"
#include "common/value.h"
#include "dag/graph/plan.h"
#include "dag/exec/loop_collective.h"

#include <stdio.h>

/* 1 and *bytes if decl fixes the value's dtype and shape, else 0. */
static int static_bytes(const adag_tensor_decl_t *decl, size_t *bytes)
{
    const uint32_t both = ADAG_TENSOR_STATIC_DTYPE | ADAG_TENSOR_STATIC_SHAPE;
    char why[200];
    return (decl->flags & both) == both &&
           adag__tensor_bytes(decl->dtype, decl->ndim, decl->shape, bytes, why, sizeof(why)) ==
               ADAG_TENSOR_OK;
}

adag_status_t adag__compile_value_geometry(const adag_plan_t *plan, adag_node_h v, adag_dag_chan_t *c)
{
    char d[160];
    size_t exact = 0;
    c->geom.nslots = plan->max_inflight;
    c->geom.capacity = plan->default_capacity;
    c->asked_slots = 0;
    if (!v)
        return ADAG_OK;
    adag__node_describe(v, d, sizeof(d));
    int fixed = static_bytes(&v->tensor, &exact);
    if (fixed)
        c->geom.capacity = exact;
    if (v->chan_mask & ADAG_CHANNEL_PARAM_MAX_BYTES) {
        if (fixed && v->chan_max_bytes < exact)
            return adag__error(ADAG_ERR_INVALID,
                              "adag_graph_compile: %s (channel %s): max_bytes %zu "
                              "(adag_node_channel) is less than its static tensor's %zu bytes",
                              d, c->name, v->chan_max_bytes, exact);
        c->geom.capacity = v->chan_max_bytes;
    }
    if (c->geom.capacity > ADAG_PROG_MAX_CAPACITY)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: %s (channel %s): its static tensor is %zu bytes, "
                          "more than a slot can hold (2^40)",
                          d, c->name, c->geom.capacity);
    if (v->chan_mask & ADAG_CHANNEL_PARAM_SLOTS) {
        if (v->chan_slots > plan->max_inflight)
            return adag__error(ADAG_ERR_INVALID,
                              "adag_graph_compile: %s (channel %s): slots %u (adag_node_channel) "
                              "is more than the DAG's max_inflight (%u)",
                              d, c->name, v->chan_slots, plan->max_inflight);
        c->geom.nslots = v->chan_slots;
        c->asked_slots = 1;
    }
    return ADAG_OK;
}

adag_status_t adag__compile_check_slots(const adag_plan_t *plan, adag_graph_h g)
{
    for (unsigned i = 0; i < plan->nchans; i++) {
        const adag_dag_chan_t *c = &plan->chans[i];
        if (!c->asked_slots || c->geom.nslots >= plan->max_inflight)
            continue;
        int driver_reads = 0;
        for (unsigned r = 0; r < c->nreaders; r++)
            driver_reads |= c->readers[r] < 0;
        if (c->writer >= 0 && !driver_reads)
            continue;
        char d[160] = "a node";
        if (c->producer_node < g->nnodes)
            adag__node_describe(g->nodes[c->producer_node], d, sizeof(d));
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: %s (channel %s) asks for %u slots "
                          "(adag_node_channel), fewer than max_inflight (%u), but %s: a channel "
                          "of the driver keeps max_inflight slots (%s)",
                          d, c->name, c->geom.nslots, plan->max_inflight,
                          c->writer < 0 ? "it is an input field" : "it is a graph output",
                          c->writer < 0 ? "adag_dag_reserve hands out max_inflight input slots "
                                          "at once"
                                        : "the caller may keep max_inflight results unreleased");
    }
    return ADAG_OK;
}

void adag__compile_finish_geometry(adag_plan_t *plan)
{
    for (unsigned i = 0; i < plan->nchans; i++) {
        adag_dag_chan_t *c = &plan->chans[i];
        c->geom.nreaders = c->nreaders;
        c->geom.comm_key = c->comm_key;
        c->geom.headers_only = 0; /* the backend decides for rings of its own */
        const adag_chan_ops_t *ops = adag__chan_backend(c->backend);
        if (ops && ops->one_slot)
            c->geom.nslots = 1; /* produced and read within one iteration */
        c->host_bytes = c->device_bytes = 0;
        if (ops && ops->memory)
            ops->memory(&c->geom, c->places, &c->host_bytes, &c->device_bytes);
    }
}

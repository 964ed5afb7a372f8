/*
 * The channel plan of a compiled DAG (dag/graph/compile_*.c): per channel
 * its writer and readers, places, backend, geometry and communicator, and
 * the communicators the DAG leases. The driver's compile (dag/driver/
 * compile.c) fills it in this order: a channel per value
 * (adag__compile_value_geometry), its places and backend
 * (adag__compile_place_channel), the communicators (adag__compile_comm_*),
 * then the rest of each geometry (adag__compile_finish_geometry). Each
 * function reads the DAG's actors through its run record (dag/proc/).
 */
#ifndef ADAG_DAG_PLAN_H
#define ADAG_DAG_PLAN_H

#include "dag/graph/graph.h"
#include "dag/proc/proc.h"
#include "transport/channel.h"

/* A channel of a compiled DAG, as the driver knows it. */
typedef struct {
    char name[96];
    uint32_t backend;          /* its backend: an index of the registry (transport/channel.c) */
    int writer;                /* DAG actor index, -1 for the driver */
    unsigned nreaders;         /* registered readers */
    int *readers;              /* DAG actor index per reader, -1 for the driver */
    adag_wbuf_t desc;          /* the backend's descriptor */
    adag_wbuf_t driver_info;   /* peer info of the driver's endpoint, if it has one */
    unsigned producer_node;    /* node that produces it (for DOT); start: none */
    adag_tensor_decl_t tensor; /* what adag_node_tensor declared of its value */
    adag_chan_place_t *places; /* where the writer (0) and reader r (1 + r) keep values */
    uint64_t comm_key;         /* ADAG_TRANSPORT_COMM: its communicator; 0: none */
    /* its geometry (dag/graph/compile_geom.c): slots, bytes per slot, readers,
     * communicator; asked_slots: adag_node_channel gave its slot count */
    adag_chan_geom_t geom;
    int asked_slots;
    /* the memory it holds, every endpoint together (its backend's
     * `memory`): host (its ring in the shm segment, or each endpoint's
     * own) and device */
    size_t host_bytes, device_bytes;
} adag_dag_chan_t;

/* The channel plan of a DAG: part of struct adag_dag (dag->plan), filled
 * at compile, read-only once the DAG is installed. */
typedef struct adag_plan {
    unsigned max_inflight;     /* executions in flight: every channel's default slot count */
    int run_ahead;             /* adag_compile_params_t.run_ahead */
    /* the slot size of a channel whose value asks for none
     * (adag_compile_params_t.slot_capacity); each channel's own is in its
     * geom, and the driver's endpoints know theirs (inputs[i]->capacity) */
    size_t default_capacity;
    adag_dag_chan_t *chans;
    unsigned nchans;
    char (*node_labels)[160];  /* per graph node, for DOT */
    unsigned nnodes;
    /* the driver's device (adag_compile_params_t.driver_device): its
     * backend (-1: none) and index, where a driver endpoint keeps values */
    int32_t driver_dev_kind;
    unsigned driver_dev_index;
    /* the communicators of its ADAG_TRANSPORT_COMM tensors and
     * collectives (dag/proc/comm_lease.c), and per graph collective its
     * communicator's key */
    struct adag_comm_lease **comm_leases;
    unsigned ncomm_leases;
    uint64_t *coll_keys;
    unsigned ncolls;
    /* The turns on shared communicators: per lease, the channel by which
     * the driver hands each execution its ticket (8 bytes, read by every
     * rank), or ADAG_PROG_NO_CHAN (an exclusive lease); norders of them */
    unsigned *lease_order_chan;
    unsigned norders;
    /* the channel published as each execution starts (read by the actors
     * with a method of no argument), or ADAG_PROG_NO_CHAN */
    unsigned start_chan;
    unsigned ninputs;          /* input fields: the highest field + 1 */
    /* what every program carries (adag_compile_params_t) */
    int comm_timeout_ms;       /* <= 0: device communication ops are not watched */
    uint64_t trace_spans;      /* per loop and the driver; 0: tracing off */
    int graphs;                /* device graphs of capturable methods (adag_compile_params_t) */
} adag_plan_t;

/* compile_place.c: a channel's places (c->places: writer, then readers)
 * and its backend (c->backend); ADAG_ERR_INVALID for a channel no backend
 * can carry. */
adag_status_t adag__compile_place_channel(const adag_plan_t *plan, const adag_dag_run_t *run,
                                         adag_dag_chan_t *c);
/* ADAG_ERR_INVALID when a collective has a member on another host (the
 * communicators are one host's). */
adag_status_t adag__compile_check_collective_hosts(adag_graph_h g);

/* compile_geom.c: every channel's geometry. value_geometry: the slot size
 * and count channel c of value node `value` asks for (NULL: a channel of
 * no value node; the DAG's default size), checked against a static
 * tensor's bytes and max_inflight. check_slots: after every reader was
 * added, refuses fewer slots than max_inflight on a channel the driver
 * writes or reads. finish_geometry: after placement and communicators,
 * the rest of each geometry and the memory each channel holds. */
adag_status_t adag__compile_value_geometry(const adag_plan_t *plan, adag_node_h value, adag_dag_chan_t *c);
adag_status_t adag__compile_check_slots(const adag_plan_t *plan, adag_graph_h g);
void adag__compile_finish_geometry(adag_plan_t *plan);

/* compile_comm.c: tensors with ADAG_TRANSPORT_COMM */
/* After every channel was placed: checks the ADAG_TRANSPORT_COMM tensors
 * and leases their communicator (each such channel gets its key, its
 * device endpoints their ranks), then one per collective's member list
 * (ranks in member order; identical lists share one); actor_index: graph
 * node -> DAG actor. */
adag_status_t adag__compile_comm_plan(adag_plan_t *plan, const adag_dag_run_t *run, const adag_collective_t *const *colls,
                                     unsigned ncolls, const int *actor_index);
/* Adds the DAG's communicator to actor ai's program if it is a rank. */
adag_status_t adag__compile_comm_program(const adag_plan_t *plan, const adag_dag_run_t *run,
                                        unsigned ai, adag_program_t *p);
/* After every program was built: the ranks' send/recv orders must be
 * consistent (else ADAG_ERR_INVALID naming two transfers). */
adag_status_t adag__compile_comm_check_order(const adag_plan_t *plan, const adag_dag_run_t *run);

/* compile_plan.c: the compiler's passes over graph g (under its lock),
 * filling plan for the DAG whose actors are run's (every actor of the
 * graph, in bind order). */
typedef struct adag_compiler {
    adag_graph_h g;
    adag_plan_t *plan;
    const adag_dag_run_t *run;
    unsigned *chan_of;         /* node id -> channel (value nodes), call -> first return's */
    unsigned *coll_status;     /* per graph collective: its first status channel */
    int *actor_index;          /* node id (calls) -> DAG actor index */
} adag_compiler_t;

/* ADAG_ERR_INVALID naming the node when the graph cannot be compiled. */
adag_status_t adag__compile_validate(adag_graph_h g);
adag_status_t adag__compiler_init(adag_compiler_t *cx, adag_graph_h g, adag_plan_t *plan,
                                 const adag_dag_run_t *run);
void adag__compiler_free(adag_compiler_t *cx);
/* Every channel, placed, sized, with its communicator (plan->max_inflight
 * and default_capacity set before). */
adag_status_t adag__compile_channels(adag_compiler_t *cx);
/* Actor ai's program, whose loop waits by policy (after the channels'
 * descriptors exist: they travel in it). */
adag_status_t adag__compile_program(const adag_compiler_t *cx, unsigned ai,
                                   adag_wait_policy_t policy, adag_program_t *p);
/* The channel carrying value node n. */
unsigned adag__compile_value_chan(const adag_compiler_t *cx, adag_node_h n);
/* Reader who's index in channel c (-1: the driver), -1 if it does not read it. */
int adag__plan_reader_index(const adag_dag_chan_t *c, int who);

#endif

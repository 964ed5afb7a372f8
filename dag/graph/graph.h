/*
 * dag/graph/: graphs as the user builds them (nodes, binds, collectives,
 * outputs, tensor and channel declarations) and their validation
 * (graph.c, graph_collective.c). The channel plan of a compiled DAG
 * (plan.h) is built from a graph here too. No processes and no I/O: the
 * driver (dag/driver/) compiles and installs. Below: dag/proc/ (an
 * actor's methods, node and device), dag/exec/, transport/, common/.
 */
#ifndef ADAG_DAG_GRAPH_H
#define ADAG_DAG_GRAPH_H

#include "dag/proc/proc.h"

#include <adag.h>

typedef enum { NODE_INPUT, NODE_CALL, NODE_RETURN } adag_node_kind_t;

/* A collective of a graph (dag/graph/graph_collective.c): its member i runs on
 * the actor of inputs[i] and yields outputs[i] (a one-return CALL node
 * whose coll points here). */
typedef struct adag_collective {
    unsigned id;               /* per graph: "allreduce#0" */
    adag_coll_kind_t kind;
    adag_reduce_op_t op;       /* ALLREDUCE, REDUCESCATTER */
    unsigned root;             /* BROADCAST */
    unsigned n;
    adag_node_h *inputs, *outputs;
} adag_collective_t;

struct adag_node {
    adag_graph_h graph;
    unsigned id;
    adag_node_kind_t kind;
    unsigned field;            /* INPUT */
    adag_actor_h actor;        /* CALL */
    unsigned method;
    unsigned nargs, nreturns;
    adag_node_h args[ADAG_MAX_ARGS];
    adag_node_h call;          /* RETURN: the call it comes from */
    unsigned ret;              /* RETURN: which return */
    adag_node_h *returns;      /* CALL with nreturns > 1: RETURN nodes made so far */
    int used;                  /* INPUT: read by a call */
    adag_tensor_decl_t tensor; /* adag_node_tensor (INPUT, one-return CALL, RETURN) */
    /* adag_node_channel (the same nodes): the ADAG_CHANNEL_PARAM_* bits
     * given and their values */
    uint64_t chan_mask;
    size_t chan_max_bytes;
    unsigned chan_slots;
    adag_collective_t *coll;   /* CALL: member `member` of this collective, not a method */
    unsigned member;
};

struct adag_graph {
    adag_list_t link;
    adag_runtime_h rt;
    pthread_mutex_t lock;
    adag_node_h *nodes;
    unsigned nnodes, cap;
    adag_node_h *outputs;
    unsigned noutputs;
    int has_outputs;
    int compiled;
    adag_actor_h *actors;      /* actors bound (one reference each) */
    unsigned nactors;
    adag_collective_t **colls; /* its collectives, in the order they were made */
    unsigned ncolls;
};

/* graph.c, for graph_collective.c (under g->lock) */
adag_status_t adag__graph_add_node(adag_graph_h g, adag_node_h *out);
adag_status_t adag__graph_check_open(adag_graph_h g, const char *fn);
adag_status_t adag__graph_check_value(adag_graph_h g, adag_node_h n, const char *fn,
                                     const char *role, unsigned index);
/* "allreduce", "allgather", "reducescatter", "broadcast" */
const char *adag__coll_kind_name(adag_coll_kind_t kind);

/* graph.c */
void adag__graph_free(adag_graph_h graph);
/* "node 3 (stage1.forward)" */
void adag__node_describe(adag_node_h node, char *buf, size_t len);
/* What adag_node_tensor declared of return r of call node `call` (all zero
 * if nothing); for an INPUT node (r 0), its own. Under the graph's lock. */
adag_tensor_decl_t adag__node_value_tensor(adag_node_h call, unsigned r);
/* The node that stands for return r of `call` (itself for one return, an
 * INPUT node for r 0; NULL for a return never taken with adag_node_output). */
adag_node_h adag__node_value(adag_node_h call, unsigned r);




#endif

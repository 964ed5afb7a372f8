/*
 * Graphs: inputs, methods bound into nodes, tensors and channels of a
 * node, collectives, outputs, and compiling a graph into a DAG.
 *
 * A part of <adag.h>, which programs and modules include (it includes
 * every part, in order; this one includes the parts it builds on).
 */
#ifndef ADAG_GRAPH_H
#define ADAG_GRAPH_H

#include "actor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Graphs                                                              */
/* ------------------------------------------------------------------ */

ADAG_API adag_status_t adag_graph_create(adag_runtime_h runtime, adag_graph_h *graph);

/* Frees the graph and its nodes (a DAG compiled from it stays valid). */
ADAG_API adag_status_t adag_graph_destroy(adag_graph_h graph);

/* The node for field `field` of execute()'s inputs (the same node each time
 * for the same field). Fields must be numbered 0..n-1, each used. */
ADAG_API adag_status_t adag_graph_input(adag_graph_h graph, unsigned field, adag_node_h *node);

/* Binds a call of `method` on `actor` taking the values `args` (input nodes
 * or results of earlier binds of the same graph). Checks that the method
 * exists and takes nargs arguments. For a method with one return the node
 * is its value; for several, take each with adag_node_output(). */
ADAG_API adag_status_t adag_graph_bind(adag_graph_h graph, adag_actor_h actor, const char *method,
                                       const adag_node_h *args, unsigned nargs, adag_node_h *node);

/* The i-th return value of a bound call node. */
ADAG_API adag_status_t adag_node_output(adag_node_h call_node, unsigned i, adag_node_h *value);

/* How a tensor travels. AUTO picks: device memory to device memory of one
 * host over IPC (zero copies on one device, one peer copy between two),
 * host memory to a device by an async copy on the reader's communication
 * stream, a device to host memory by an async copy on the writer's. */
typedef enum {
    ADAG_TRANSPORT_AUTO = 0,
    ADAG_TRANSPORT_HOST = 1, /* host memory (shm), even between device actors */
    ADAG_TRANSPORT_IPC = 2,  /* device memory over IPC; an error where it cannot run */
    /* Device memory to device memory by a communicator's send/recv: NCCL
     * between CUDA devices, the host communicator between emulated ones.
     * The writer and every device reader are ranks of one communicator per
     * DAG over the actors that use it, created at compile time and reused
     * by the next DAG over the same actors. Host readers (host actors,
     * and the driver when the tensor is an output) still get the value in
     * host memory by the writer's async copy; the driver cannot read it
     * on a driver device (ADAG_ERR_INVALID naming the tensor and its
     * edge). The path across hosts; here, a choice. */
    ADAG_TRANSPORT_COMM = 3,
} adag_transport_t;

enum {
    ADAG_TENSOR_PARAM_DTYPE = 1u << 0,
    ADAG_TENSOR_PARAM_SHAPE = 1u << 1,
    ADAG_TENSOR_PARAM_TRANSPORT = 1u << 2,
};

typedef struct {
    uint64_t field_mask;          /* ADAG_TENSOR_PARAM_* bits */
    adag_dtype_t dtype;           /* static dtype (not BYTES); default: per execution */
    unsigned ndim;                /* with SHAPE: static ndim and shape; default: */
    int64_t shape[ADAG_MAX_DIMS]; /*   per execution, bounded by the slot size */
    adag_transport_t transport;   /* default ADAG_TRANSPORT_AUTO */
} adag_tensor_params_t;

/* Declares that the value of `node` (an input field, or a call's return:
 * a one-return call node or a node from adag_node_output) is a tensor
 * (params may be NULL: dtype and shape per execution, AUTO transport).
 * Written by a device-bound actor, it stays in that device's memory; each
 * reader gets it in its own memory: a device-bound actor on its device, a
 * host actor and the driver in host memory. An undeclared value is host
 * memory (a device actor's adag_call_output then gives a host buffer).
 * A static dtype/shape is checked where the value is written (the method's
 * adag_call_output_tensor, the driver's execute); with both static, the
 * value's slots are its exact bytes (adag_node_channel), and a per-node
 * maximum below them fails adag_graph_compile. Call before compile. */
ADAG_API adag_status_t adag_node_tensor(adag_node_h node, const adag_tensor_params_t *params);

/* The channel of a value: every value (an input field, a call's return)
 * travels in a channel of its own, a ring of slots, one value each; the
 * channel's writer fills slot after slot while its readers read them.
 * Each channel has its own slot size and slot count (see them per channel
 * in adag_channel_stats_t and on each edge of adag_dag_write_dot):
 *
 *   slot size   max_bytes when given; else a tensor declared with a
 *               static dtype and shape (adag_node_tensor) takes its exact
 *               bytes; else the DAG's default, adag_compile_params_t.
 *               slot_capacity. A value larger than its slot fails with
 *               ADAG_ERR_TOO_LARGE naming the channel and both sizes; a
 *               max_bytes below a static tensor's bytes fails compile
 *               (ADAG_ERR_INVALID naming the node and both sizes).
 *   slots       max_inflight (the DAG's) by default: the writer may run up
 *               to max_inflight executions ahead of the slowest reader.
 *               Fewer (1..max_inflight) hold less memory and bound how far
 *               the writer runs ahead: with k slots it writes execution r
 *               only once every reader finished execution r - k (1: the
 *               two stages take turns; 2: the writer fills one slot while
 *               the reader reads the other). Allowed on a value the driver
 *               neither writes nor reads: refused at compile
 *               (ADAG_ERR_INVALID naming the node and the rule) on an
 *               input field (adag_dag_reserve hands out max_inflight input
 *               slots at once) and on a graph output (the caller may keep
 *               max_inflight results unreleased). Between actors it cannot
 *               deadlock: every actor runs the executions in order and each
 *               execution's methods in bind order, and gives an
 *               execution's input slots back once it finished that
 *               execution, so the writer waiting for slot r always waits
 *               for work of an earlier execution, which needs nothing of
 *               execution r. A channel read only by its writer has one
 *               buffer whatever is asked.
 */
enum {
    ADAG_CHANNEL_PARAM_MAX_BYTES = 1u << 0,
    ADAG_CHANNEL_PARAM_SLOTS = 1u << 1,
};

typedef struct {
    uint64_t field_mask; /* ADAG_CHANNEL_PARAM_* bits */
    size_t max_bytes;    /* the largest value, 0..2^40: its slot size */
    unsigned slots;      /* 1..max_inflight; default max_inflight */
} adag_channel_params_t;

/* Sizes the channel of `node`'s value (an input field, or a call's
 * return: a one-return call node or a node from adag_node_output);
 * params NULL: defaults. A second call replaces the first. Call before
 * compile. */
ADAG_API adag_status_t adag_node_channel(adag_node_h node, const adag_channel_params_t *params);

/* Collectives (tensor parallelism). The members are the actors that wrote
 * nodes[0..n) (one node each, each from a distinct device-bound actor, 2
 * to 64 of them, on devices of one backend: CUDA devices use NCCL, emu:N
 * devices the host communicator); every node is a tensor (declared by
 * adag_node_tensor, or declared here with a per-execution dtype and
 * shape). outs[i] is the result on member i's device: an ordinary node
 * that later methods of any actor may bind and the driver may read. All
 * the members' tensors of one execution have one dtype and shape, checked
 * at compile time where declared static and at each execution otherwise
 * (a mismatch fails that execution, naming both members). The DAG's
 * actors that share a set of members share one communicator, made at
 * compile time and reused by the next DAG over the same actors. A failure
 * upstream of any member fails every output of the collective for that
 * execution; the next execution runs. Errors: ADAG_ERR_INVALID naming the
 * node (a node of another graph or actor set, a host actor, two nodes of
 * one actor, mismatched static dtypes or shapes, bool with AVG).
 *
 *   allreduce      outs[i] = op over the members of nodes[*], elementwise;
 *   allgather      outs[i] = the nodes concatenated along dim 0 (member
 *                  order): shape [n * d0, d1, ...];
 *   reducescatter  outs[i] = block i of dim 0 of the reduction: shape
 *                  [d0 / n, d1, ...] (d0 a multiple of n);
 *   broadcast      outs[i] = nodes[root]. */
ADAG_API adag_status_t adag_graph_allreduce(adag_graph_h graph, const adag_node_h *nodes,
                                            unsigned n, adag_reduce_op_t op, adag_node_h *outs);
ADAG_API adag_status_t adag_graph_allgather(adag_graph_h graph, const adag_node_h *nodes,
                                            unsigned n, adag_node_h *outs);
ADAG_API adag_status_t adag_graph_reducescatter(adag_graph_h graph, const adag_node_h *nodes,
                                                unsigned n, adag_reduce_op_t op,
                                                adag_node_h *outs);
ADAG_API adag_status_t adag_graph_broadcast(adag_graph_h graph, const adag_node_h *nodes,
                                            unsigned n, unsigned root, adag_node_h *outs);

/* Declares the graph's outputs (in order); get() returns them in that order.
 * May be called once per graph. */
ADAG_API adag_status_t adag_graph_output(adag_graph_h graph, const adag_node_h *nodes, unsigned n);

enum {
    ADAG_COMPILE_PARAM_MAX_INFLIGHT = 1u << 0,
    ADAG_COMPILE_PARAM_SLOT_CAPACITY = 1u << 1,
    ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT = 1u << 2,
    ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT = 1u << 3,
    ADAG_COMPILE_PARAM_NAME = 1u << 4,
    ADAG_COMPILE_PARAM_SPIN = 1u << 5,
    ADAG_COMPILE_PARAM_COMM_TIMEOUT = 1u << 6,
    ADAG_COMPILE_PARAM_DRIVER_DEVICE = 1u << 7,
    ADAG_COMPILE_PARAM_TRACE = 1u << 8,
    ADAG_COMPILE_PARAM_RUN_AHEAD = 1u << 9,
    ADAG_COMPILE_PARAM_GRAPHS = 1u << 10,
};

/* Every default below is a setting of the graph's runtime (see
 * "Configuration"); the numbers are the settings' own defaults. */
typedef struct {
    uint64_t field_mask;       /* ADAG_COMPILE_PARAM_* bits */
    unsigned max_inflight;     /* executions in flight; default ADAG_MAX_INFLIGHT (8) */
    /* the slot size of a value whose channel has none of its own (neither
     * a static tensor nor adag_node_channel's max_bytes), 1..2^40;
     * default ADAG_SLOT_CAPACITY (1 MiB) */
    size_t slot_capacity;
    int execute_timeout_ms;    /* how long a blocking execute waits for room (and for
                                  other threads' executes); -1 forever, else >= 0;
                                  default ADAG_EXECUTE_TIMEOUT_MS (60000) */
    int teardown_timeout_ms;   /* >= 0; how long each worker may take to stop its loop
                                  at teardown before it is killed (all workers at once);
                                  default ADAG_TEARDOWN_TIMEOUT_MS (5000) */
    const char *name;          /* for messages and DOT; default "dag<n>" */
    /* wait policy of every channel wait of this DAG: spin at most this many ns
     * before sleeping on a futex (0: sleep at once; each wait adapts below
     * it); default ADAG_SPIN_NS, or ADAG_SPIN_NS_CROWDED when the DAG has
     * more actors + 1 than the CPUs this process may run on */
    int64_t spin_ns;
    /* how long a device communication op of the DAG (a copy between
     * devices or to/from host memory, a stream's wait for a peer's value)
     * may take: past it the DAG fails with ADAG_ERR_TIMEOUT naming the op,
     * the execution and the peer, and its streams stop waiting on peers;
     * 0 or -1: not watched; default ADAG_COMM_TIMEOUT_MS (60000) */
    int comm_timeout_ms;
    /* the driver's device, "<backend>:<index>" ("cuda:0", "emu:1"): the
     * DAG opens it in this process, and the graph's tensor inputs and
     * outputs (adag_node_tensor, transport not HOST) live on it: execute
     * copies each tensor input into its device slot (from host memory,
     * or from a tensor on that device, ADAG_DEVICE(kind, index)), and get
     * returns device views (device ADAG_DEVICE(kind, index)), ready in the
     * order of the DAG's stream (adag_dag_stream); default none: tensors
     * reach the driver in host memory */
    const char *driver_device;
    /* tracing (adag_dag_write_trace): the records each actor loop and the
     * driver keep, in memory, the oldest overwritten (one per op: its four
     * spans; rounded up to a power of two, 16 .. 2^20; 64 bytes each; 0:
     * off, and tracing then costs nothing); a traced DAG also times its
     * statistics (adag/stats.h); default ADAG_TRACE_SPANS (0) */
    uint64_t trace_spans;
    /* 1: a method of a device-bound actor whose every argument is a tensor
     * of static dtype and shape written by another device-bound actor runs
     * as soon as its execution starts, its device work queued behind its
     * writers' on the device rather than after their loops published (the
     * host leaves the data path between device actors; results and
     * failures are the same). Its device actors' streams then hold waits
     * for work not yet queued, so they must serve this DAG alone: compile
     * fails with ADAG_ERR_BUSY, naming the actor and the DAG, if one of
     * them is in another live DAG, and so does a later compile that would
     * share one while this DAG lives. Needs stream memory operations
     * (ADAG_DEVICE_MEMOPS 1 and a device that has them); elsewhere the
     * DAG runs as with 0. Default 0. */
    int run_ahead;
    /* device graphs: 1 to capture the work of every capturable method
     * (adag_class_def_t.capturable) of a device-bound actor and replay it. Per call of such a
     * method, the first execution of each slot pattern (the execution's
     * number modulo the least common multiple of the slot counts of the
     * call's channels) runs the method as usual (a warm-up), the next
     * runs it with its compute stream capturing (then launches what was
     * recorded), and every later one launches the graph of its pattern
     * instead of calling the method: one launch, whatever the method
     * enqueues, its returns' sizes and shapes those of the capture. A
     * method whose work cannot be captured (a host wait on the device, a
     * copy with pageable memory, a return set with adag_call_set_output)
     * fails the execution it was captured in with ADAG_ERR_METHOD naming
     * actor.method and the operation, and runs uncaptured from then on;
     * an execution whose inputs differ from the capture's in size, dtype
     * or shape fails naming the input (one whose buffers moved calls the
     * method as usual). 0: off (the default) */
    int graphs;
} adag_compile_params_t;

/* Validates the graph and compiles it into channels and per-actor schedules,
 * then starts every actor's loop. A graph compiles once. A graph the
 * compiler cannot run (empty, no outputs, an unused input field, an actor
 * destroyed or dead, a channel its endpoints cannot have) is
 * ADAG_ERR_INVALID naming the node, actor or tensor; a backend that cannot
 * run here (no libnccl) ADAG_ERR_NOT_FOUND; a value declared with a static
 * dtype and shape (adag_node_tensor) whose bytes exceed its slot capacity
 * ADAG_ERR_TOO_LARGE naming the node, its channel and both sizes (it could
 * never be written). */
ADAG_API adag_status_t adag_graph_compile(adag_graph_h graph, const adag_compile_params_t *params,
                                          adag_dag_h *dag);

#ifdef __cplusplus
}
#endif
#endif /* ADAG_GRAPH_H */

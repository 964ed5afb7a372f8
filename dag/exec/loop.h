/*
 * dag/exec/: what runs an actor's part of a compiled DAG, in any process
 * (the driver for thread actors, adag-worker for the others): this loop,
 * the program it interprets (program.h), the call a method gets (call.c,
 * call_device.c), its collectives and turns on shared communicators
 * (loop_collective.h), host values and device work (loop_host_values.c),
 * its figures (loop_stats.h), the watchdog (watchdog.h), the DAG's context
 * in a process (context.h: abort word, domains), an actor's communicators
 * and device (actor_comm.h, actor_device.h) and class registry (class.h).
 * It knows nothing of actors' processes, graphs or the driver: its host
 * fills adag_loop_actor_t and the on_fail/on_fatal hooks. Below:
 * transport/, gpu/, common/.
 *
 * The execution loop of one actor in one compiled DAG. For execution
 * seq = 0, 1, 2, ... it runs the actor's schedule: for each operation,
 * READ (wait for the args' slots), acquire the return slots, COMPUTE (call
 * the method under the actor's call lock, so methods of one actor never run
 * concurrently even across DAGs), WRITE (publish the returns); then it
 * releases every slot it read. A failed input skips the method and passes
 * the failure on. An actor with a method that takes no argument first
 * waits for the execution's start (the program's start channel). The loop
 * ends when the DAG is aborted in this process.
 */
#ifndef ADAG_DAG_LOOP_H
#define ADAG_DAG_LOOP_H

#include "dag/exec/actor_comm.h"
#include "dag/exec/context.h"
#include "dag/exec/loop_stats.h"
#include "common/trace.h"
#include "dag/exec/program.h"
#include "transport/channel.h"

#include <adag.h>
#include <pthread.h>
#include <sched.h>

typedef struct {
    char name[ADAG_MAX_NAME];
    adag_method_fn fn; /* NULL on the driver side of a process actor */
    unsigned nargs, nreturns;
    int capturable; /* named in its class's capturable list */
} adag_method_info_t;

typedef struct adag_loop adag_loop_t;
typedef struct adag_loop_coll adag_loop_coll_t;

/* What a loop needs of its actor (the actor owns all of it). */
typedef struct {
    void *state;
    pthread_mutex_t *call_lock;           /* methods of one actor never run at once */
    const adag_method_info_t *methods;
    unsigned nmethods;
    const char *name;
    const adag_chan_device_t *device;     /* NULL: not bound to a device */
    adag_actor_comms_t *comms;            /* its communicators */
    const cpu_set_t *cpus;                /* the loop thread's CPUs; NULL: its starter's */
    int has_numa, numa;                   /* its NUMA node: the slots it writes prefer it */
    /* its runtime's settings (a worker's: those CREATE_ACTOR carried):
     * ADAG_TEARDOWN_TIMEOUT_MS bounds the drain of its device work at the
     * end, ADAG_CONTROL_TIMEOUT_MS a communicator's join */
    const adag_settings_t *settings;
} adag_loop_actor_t;

/* One method call in progress: what the adag_call_* functions see. */
struct adag_call {
    adag_loop_t *loop;
    const adag_prog_op_t *op;
    uint64_t seq;
    adag_slot_view_t args[ADAG_MAX_ARGS];
    void *bufs[ADAG_MAX_RETURNS];
    size_t sizes[ADAG_MAX_RETURNS];
    adag_tensor_meta_t metas[ADAG_MAX_RETURNS]; /* dtype 0: bytes */
    uint32_t written; /* bit i: return i was given a buffer */
    uint32_t handed;  /* bit i: ... that the method (or its device work) fills
                         itself (adag_call_output/_tensor, not set_output) */
    int used_stream;  /* the method took its compute stream or enqueued on it */
    /* the stream the method is given (adag_call_stream, adag_call_enqueue):
     * the actor's compute stream, or the loop's capture stream while its
     * work is captured (dag/exec/loop_graph.c); NULL: a host actor */
    adag_dev_stream_t *stream;
    adag_status_t fail_status; /* set: the execution fails whatever the method returns */
    char msg[ADAG_SLOT_ERR_MAX];
    char call_err[ADAG_SLOT_ERR_MAX]; /* the last failing adag_call_* (reported if the
                                         method then returns an error) */
};

/* A failing adag_call_* on a valid call (dag/exec/loop.c, dag/exec/call_device.c):
 * records the message in call->call_err, so that a method that passes the
 * status on reports it rather than just the code, and as this thread's
 * last error. Returns st. */
adag_status_t adag__call_error(adag_call_h call, adag_status_t st, const char *fmt, ...)
    ADAG_PRINTF(3, 4);
/* The name of the method the call runs. */
const char *adag__call_method_name(adag_call_h call);
/* (both in call.c, with the adag_call_* functions) */

/* Called (from the loop thread) when the loop meets a failure it cannot pass
 * on in a slot; the loop then stops. */
typedef void (*adag_loop_fatal_fn)(void *ctx, adag_status_t status, const char *msg);

struct adag_loop {
    adag_program_t prog;
    /* its spans (common/trace.h) when prog.trace_spans > 0, else NULL: the
     * loop thread writes, adag_dag_write_trace (thread actors) or the
     * worker's TRACE_DAG answer (process actors) copies */
    adag_trace_ring_t *trace;
    /* its counters (dag/exec/loop_stats.h): per op and per program channel;
     * times too when trace is set */
    adag_op_counters_t *op_counters;
    adag_chan_counters_t *chan_counters;
    uint64_t t_started; /* span clock: when the loop began (traced) */
    /* span clock: where its next wait begins (traced; the loop thread
     * stores, relaxed; figures read how long ago) */
    _Atomic uint64_t t_last;
    /* what it does now (traced): op << 8 | ADAG_DOING_* (the loop thread
     * stores, relaxed; figures read it) */
    _Atomic uint32_t doing;
    adag_dag_ctx_t *ctx;      /* the DAG in this process: abort word, endpoints */
    adag_chan_t **chans;      /* one endpoint per prog.chans entry (the context owns them) */
    uint32_t *reads;          /* channels this actor reads (released per execution) */
    unsigned nreads;
    uint64_t released;        /* executions below this released already (loop thread) */
    /* the current execution's start (loop thread): not ADAG_OK for a
     * cancelled one, whose methods of no argument are then skipped; the
     * text lies in the start slot, held until the execution's reads are
     * released */
    adag_status_t start_status;
    const char *start_err;
    /* per op, nonzero: its call runs ahead of its inputs once its
     * execution started (dag/exec/loop_ahead.c); NULL: no op does */
    uint8_t *op_ahead;
    /* Host values of a device-bound actor (dag/exec/loop_host_values.c; loop
     * thread only): a method used the compute stream since the loop last
     * knew it idle (stream_dirty); its methods take arguments in host
     * memory (host_args); executions [held_from, held_to) whose reads are
     * held until the event recorded after their work (held_ev[seq %
     * max_inflight]) completed, at most held_slots of them (the fewest
     * slots of a channel it reads). */
    int stream_dirty;
    int host_args;
    unsigned held_slots;
    uint64_t held_from, held_to;
    struct adag_dev_event **held_ev;
    adag_loop_actor_t actor;
    void *state;              /* = actor.state, ... (the names the loop uses) */
    pthread_mutex_t *call_lock;
    const adag_method_info_t *methods;
    unsigned nmethods;
    const char *actor_name;
    adag_loop_fatal_fn on_fatal;
    void *fatal_ctx;
    /* Fails this DAG only, from the loop's watchdog thread (a device
     * communication op past the DAG's comm timeout): the process and its
     * other DAGs go on. NULL: on_fatal. */
    adag_loop_fatal_fn on_fail;
    void *fail_ctx;
    struct adag_watchdog *watchdog; /* NULL: nothing to watch */
    /* the program's communicators: joining since PREPARE (the context
     * holds their references), found by the endpoints at CONNECT */
    adag_actor_comm_t **comm_entries;
    adag_chan_comm_t *chan_comms;
    /* the device they run on: the actor's, or for a host actor (host
     * tensors in a collective) its table's emulated device; NULL: none */
    const adag_chan_device_t *comm_device;
    /* the program's collective operations (dag/exec/loop_collective.c) */
    struct adag_loop_coll *colls;
    unsigned ncolls;
    /* per program communicator: its turns if shared (dag/exec/loop_collective.c);
     * NULL: none */
    struct adag_loop_turn *turns;
    /* per op, its device graphs (dag/exec/loop_graph.c); NULL: off */
    struct adag_loop_graph *graphs;
    /* the stream captures run on (graphs on): the loop's own, so that work
     * other DAGs' loops enqueue on the actor's compute stream meanwhile is
     * never recorded into this DAG's graphs */
    adag_dev_stream_t *capture_stream;
    pthread_t thread;
    int started;
};

/* A copy of the loop's trace records (taken while it runs; stamps in
 * this process's ns): *recs malloc'd, *lost the records overwritten.
 * ADAG_ERR_INVALID for a loop not traced. */
adag_status_t adag__loop_trace_copy(adag_loop_t *loop, adag_trace_rec_t **recs, uint64_t *n,
                                   uint64_t *lost);
/* The loop's figures now (any thread; its counters are read while it
 * runs). */
adag_status_t adag__loop_figures(adag_loop_t *loop, adag_loop_figures_t *out);

/* Whether channel c carries the tickets of a shared communicator: read by
 * the loop itself (adag__loop_turn_begin), never by a method or its device
 * work. */
static inline int adag__loop_is_order_chan(const adag_loop_t *loop, uint32_t c)
{
    for (uint32_t i = 0; i < loop->prog.ncomms; i++)
        if (loop->prog.comms[i].shared && loop->prog.comms[i].order_chan == c)
            return 1;
    return 0;
}

/* Releases the slots execution seq read here (the loop thread): every one
 * (ADAG_READS_ALL), the ticket channels' only (ADAG_READS_ORDERS) or all
 * but those (ADAG_READS_HELD). Each channel's slots go back in order. */
enum { ADAG_READS_ALL, ADAG_READS_ORDERS, ADAG_READS_HELD };
static inline void adag__loop_release_reads(adag_loop_t *loop, uint64_t seq, int which)
{
    for (unsigned i = 0; i < loop->nreads; i++) {
        int order = which != ADAG_READS_ALL && adag__loop_is_order_chan(loop, loop->reads[i]);
        if (which == ADAG_READS_ALL || order == (which == ADAG_READS_ORDERS))
            adag__chan_release(loop->chans[loop->reads[i]], seq);
    }
}

/* Host values and device work (dag/exec/loop_host_values.c), loop thread only.
 * hold_open: at the loop's start (its thread bound to the device), notes
 * whether its methods take host arguments and, if so, makes the events
 * that hold their release; hold_close frees them. settle_returns: before
 * op's returns are published, waits for the device work of a call that
 * used the stream when one of them is a host buffer the method was handed
 * (a failed stream fails the execution; ADAG_ERR_CLOSED: aborted).
 * end_reads: execution seq's reads released now, or held behind an event
 * when device work may still read its host arguments. release_held: before
 * execution seq waits, releases held executions whose work is done, and
 * (waiting for it) those whose slots seq's writers need (their channels'
 * slot counts say which). */
adag_status_t adag__loop_hold_open(adag_loop_t *loop);
void adag__loop_hold_close(adag_loop_t *loop);

/* Device graphs (dag/exec/loop_graph.c): graphs_open makes loop->graphs
 * when the program captures (adag_compile_params_t.graphs) and the actor
 * has a device; graph_call then runs a call op's method: called,
 * captured, or its graph replayed (under the call lock; the method's
 * status, or ADAG_OK with the call's fail_status set); graphs_close
 * destroys them (after the device work is drained). */
typedef struct adag_loop_graph adag_loop_graph_t;
adag_status_t adag__loop_graphs_open(adag_loop_t *loop);
void adag__loop_graphs_close(adag_loop_t *loop);
adag_status_t adag__loop_graph_call(adag_loop_t *loop, const adag_prog_op_t *op,
                                    struct adag_call *call);
/* graph_defer: before execution seq's op reads and acquires, defers its
 * channels' device work when its graph will hold it (1; then undefer once
 * they are read and acquired), else 0. graph_pay enqueues the deferred
 * work on the compute stream for an execution that does not reach
 * graph_call (an upstream failure). */
int adag__loop_graph_defer(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq);
void adag__loop_graph_undefer(adag_loop_t *loop, const adag_prog_op_t *op);
adag_status_t adag__loop_graph_pay(adag_loop_t *loop, const adag_prog_op_t *op,
                                   const struct adag_call *call, uint64_t seq);
adag_status_t adag__loop_settle_returns(adag_loop_t *loop, const adag_prog_op_t *op,
                                       struct adag_call *call);
adag_status_t adag__loop_end_reads(adag_loop_t *loop, uint64_t seq);
adag_status_t adag__loop_release_held(adag_loop_t *loop, uint64_t seq);

/* Fails this DAG from the loop thread (on_fail, else on_fatal): never a
 * hang; the loop then stops (its waits return ADAG_ERR_CLOSED). */
static inline void adag__loop_fail_dag(adag_loop_t *loop, adag_status_t st, const char *msg)
{
    if (loop->on_fail)
        loop->on_fail(loop->fail_ctx, st, msg);
    else if (loop->on_fatal)
        loop->on_fatal(loop->fatal_ctx, st, msg);
}

/* PREPARE: starts joining the program's communicators (every rank at
 * once: a thread each), opens the loop's channel endpoints in ctx and
 * appends, per program channel, the endpoint's peer info to infos (u32
 * count, then one byte run each). Takes ownership of *prog's arrays (also
 * on failure). */
adag_status_t adag__loop_prepare(adag_loop_t *loop, adag_dag_ctx_t *ctx, adag_program_t *prog,
                                const adag_loop_actor_t *actor, adag_wbuf_t *infos);
/* CONNECT: waits until the communicators are joined (by the control
 * timeout), then connects the endpoints. peers holds, per program channel, u32 npeers then npeers byte
 * runs (the writer's info, then each reader's); channels whose backend has
 * nothing to connect get npeers 0. */
adag_status_t adag__loop_connect(adag_loop_t *loop, adag_blob_t peers);
/* START: runs the loop in a thread of its own (bound to the actor's device)
 * and, for a device-bound actor with watchable endpoints, its watchdog. */
adag_status_t adag__loop_start(adag_loop_t *loop);
/* Waits for the loop thread to end (after the DAG was aborted in this
 * process) and stops the watchdog. */
void adag__loop_join(adag_loop_t *loop);
/* Joins, then frees the program (the context closes the endpoints). */
void adag__loop_close(adag_loop_t *loop);

/* Calls ahead of their inputs (dag/exec/loop_ahead.c): which ops may, once
 * the channels are connected; the arguments' views and waits (the
 * channels' wait_ahead); the device returns made visible to readers that
 * read ahead (publish_ahead). */
adag_status_t adag__loop_ahead_init(adag_loop_t *loop);
void adag__loop_ahead_close(adag_loop_t *loop);
adag_status_t adag__loop_ahead_args(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                                   struct adag_call *call);
adag_status_t adag__loop_ahead_publish(adag_loop_t *loop, const adag_prog_op_t *op,
                                      uint64_t seq);

#endif

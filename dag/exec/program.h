/*
 * An actor's program for one compiled DAG: the channels it touches and its
 * schedule of operations, in bind order. Thread actors run it in the
 * driver; process actors get it serialized in the PREPARE_DAG control
 * message. Every channel entry names its backend (by name) and carries the
 * backend's descriptor, which only the backend decodes.
 */
#ifndef ADAG_DAG_PROGRAM_H
#define ADAG_DAG_PROGRAM_H

#include "common/event.h"
#include "common/value.h"
#include "gpu/comm.h"
#include "transport/channel.h"
#include "transport/wire.h"

#include <adag.h>
#include <stdint.h>

/* Operation kinds; the encoder, decoder and loop dispatch on the kind. */
typedef enum {
    ADAG_OP_CALL = 1,       /* READ args -> COMPUTE method -> WRITE returns */
    ADAG_OP_COLLECTIVE = 2, /* one member's part of a collective (dag/exec/loop_collective.c) */
} adag_op_kind_t;

typedef enum {
    ADAG_COLL_ALLREDUCE,
    ADAG_COLL_ALLGATHER,
    ADAG_COLL_REDUCESCATTER,
    ADAG_COLL_BROADCAST,
} adag_coll_kind_t;

#define ADAG_PROG_NO_CHAN UINT32_MAX
/* Most executions in flight (adag_compile_params_t.max_inflight) and the
 * largest slot of a channel: the compiler's limits, which the decoder
 * holds a peer's program to. */
#define ADAG_PROG_MAX_INFLIGHT 4096u
#define ADAG_PROG_MAX_CAPACITY ((uint64_t)1 << 40)

typedef struct {
    char name[96];      /* e.g. "stage1.forward[0]" or "input[0]" */
    uint32_t id;        /* the channel's number in the DAG */
    uint32_t backend;   /* its backend: an index of this build's registry; named on the wire */
    uint32_t nreaders;  /* registered readers */
    int32_t reader;     /* this actor's reader index, -1 if it is the writer */
    /* its geometry (adag_chan_geom_t): slots 1..max_inflight, bytes per
     * slot 0..ADAG_PROG_MAX_CAPACITY */
    uint32_t nslots;
    uint64_t capacity;
    uint32_t desc_off;  /* the backend's descriptor: desc_len bytes at */
    uint32_t desc_len;  /*   program.descs + desc_off */
    /* what adag_node_tensor declared of the value (all zero: nothing); its
     * writer checks a static dtype/shape (adag_call_output_tensor) */
    adag_tensor_decl_t tensor;
    /* a device channel whose value moves by a communicator's send/recv:
     * that communicator's key (adag_chan_geom_t.comm_key); 0: none */
    uint64_t comm_key;
} adag_prog_chan_t;

/* A communicator this actor joins for the DAG (dag/exec/actor_comm.h). */
typedef struct {
    uint64_t key;     /* the driver's number for it, nonzero */
    uint32_t kind;    /* adag_comm_kind_t */
    uint32_t nranks;  /* 2..ADAG_COMM_MAX_RANKS */
    uint32_t rank;    /* this actor's */
    adag_comm_id_t id;
    /* Shared by the DAGs whose collectives use it (dag/proc/comm_lease.c): this
     * DAG's executions take turns on it, each with the ticket the driver
     * publishes on order_chan (8 bytes; this actor reads it), running its
     * ncolls collectives on it per execution within the turn. Not shared
     * (ADAG_TRANSPORT_COMM tensors; one DAG): order_chan is
     * ADAG_PROG_NO_CHAN. */
    uint32_t shared;
    uint32_t ncolls;
    uint32_t order_chan;
} adag_comm_spec_t;

typedef struct {
    uint32_t kind;      /* adag_op_kind_t */
    /* ADAG_OP_CALL */
    uint32_t method;    /* index into the actor's method table */
    uint32_t node;      /* the graph node it came from (for messages) */
    uint32_t nargs, nrets;
    uint32_t args[ADAG_MAX_ARGS];    /* indexes into chans */
    uint32_t rets[ADAG_MAX_RETURNS]; /* indexes into chans */
    /* ADAG_OP_COLLECTIVE (nargs = nrets = 1: args[0] the member's tensor,
     * written by this actor; rets[0] its result): */
    uint32_t coll_kind;    /* adag_coll_kind_t */
    uint32_t coll_id;      /* the graph's number for it: "allreduce#3" */
    uint32_t reduce_op;    /* adag_reduce_op_t */
    uint32_t root;         /* broadcast: the root member */
    uint32_t member, nmembers;
    uint32_t comm;         /* index into the program's comms: rank `member` of nmembers */
    /* chans[status_first + m] is member m's status channel: this member
     * writes its own (its tensor's status, dtype and shape each
     * execution) and reads every other's */
    uint32_t status_first;
} adag_prog_op_t;

typedef struct {
    uint32_t dag_id;
    char dag_name[64];
    /* executions in flight at most, 1..ADAG_PROG_MAX_INFLIGHT: the
     * loop's own per-execution rings (held inputs, collectives' events) */
    uint32_t max_inflight;
    int64_t spin_ns;    /* this actor's wait policy */
    uint32_t spin_yield;
    uint64_t trace_spans; /* spans of the loop's trace ring; 0: tracing off */
    uint32_t graphs;      /* capture capturable methods into device graphs (dag/exec/loop_graph.c) */
    /* a device communication op of this actor not done in this many ms
     * fails the DAG (dag/exec/watchdog.h); <= 0: not watched */
    int64_t comm_timeout_ms;
    /* the channel the driver publishes as each execution starts, read by an
     * actor with a method that takes no argument (so it runs in its
     * execution's turn), or ADAG_PROG_NO_CHAN */
    uint32_t start_chan;
    uint32_t nchans;
    adag_prog_chan_t *chans;
    uint32_t nops;
    adag_prog_op_t *ops;
    char *descs;        /* every channel's descriptor bytes */
    uint32_t descs_len;
    /* the communicators this actor joins (the comm_key of every channel
     * it writes, and of every channel it reads on its device, is one of
     * them; a host reader of a channel by communicator joins none) */
    uint32_t ncomms;
    adag_comm_spec_t *comms;
} adag_program_t;

void adag__program_encode(const adag_program_t *prog, adag_wbuf_t *out);
/* Decodes and checks a program against the number of methods of the actor.
 * On success prog owns malloc'd arrays (adag__program_free). */
adag_status_t adag__program_decode(adag_rbuf_t *in, unsigned nmethods, adag_program_t *prog);
void adag__program_free(adag_program_t *prog);
/* A deep copy of src into dst. */
adag_status_t adag__program_copy(adag_program_t *dst, const adag_program_t *src);
/* Channel i's descriptor. */
static inline adag_blob_t adag__program_desc(const adag_program_t *p, uint32_t i)
{
    adag_blob_t b = {p->descs + p->chans[i].desc_off, p->chans[i].desc_len};
    return b;
}

#endif

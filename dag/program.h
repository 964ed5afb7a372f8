/*
 * An actor's program for one compiled DAG: the channels it touches and its
 * schedule of operations (READ args -> COMPUTE method -> WRITE returns), in
 * bind order. Thread actors run it in the driver; process actors get it
 * serialized in the INSTALL control message.
 */
#ifndef ADAG_DAG_PROGRAM_H
#define ADAG_DAG_PROGRAM_H

#include "common/event.h"
#include "transport/channel.h"
#include "transport/wire.h"

#include <adag.h>
#include <stdatomic.h>
#include <stdint.h>

/* The head of a DAG's shared-memory segment; channels follow. */
typedef struct {
    uint64_t magic;
    uint64_t size;
    _Alignas(64) _Atomic uint32_t abort;   /* 0 while running, else -status of the failure */
    _Atomic uint32_t fd_armed;             /* nonzero once the driver handed out adag_dag_fd */
    /* executions started by the driver; a loop with a method that takes no
     * argument waits here, so that method runs in its execution's turn */
    _Alignas(64) _Atomic uint64_t started;
    adag_event_t start_ev;
} adag_segment_hdr_t;

#define ADAG_SEGMENT_MAGIC 0x6164616773656732ull /* "adagseg2" */
#define ADAG_SEGMENT_HDR_SIZE 192
_Static_assert(sizeof(adag_segment_hdr_t) <= ADAG_SEGMENT_HDR_SIZE, "segment header too large");

typedef struct {
    char name[96];      /* e.g. "stage1.forward[0]" or "input[0]" */
    uint32_t id;        /* the channel's number in the DAG */
    uint32_t kind;      /* adag_chan_kind_t */
    uint32_t nreaders;  /* shm: registered readers */
    int32_t reader;     /* this actor's reader index, -1 if it is the writer */
    uint32_t writes;    /* this actor writes the channel */
    uint32_t to_driver; /* the driver reads it: signal the DAG's fd when armed */
    uint64_t offset;    /* shm: where the channel lies in the segment */
} adag_prog_chan_t;

typedef struct {
    uint32_t method;    /* index into the actor's method table */
    uint32_t node;      /* the graph node it came from (for messages) */
    uint32_t nargs, nrets;
    uint32_t args[ADAG_MAX_ARGS];    /* indexes into chans */
    uint32_t rets[ADAG_MAX_RETURNS]; /* indexes into chans */
} adag_prog_op_t;

typedef struct {
    uint32_t dag_id;
    char dag_name[64];
    uint64_t segment_size;
    uint32_t nslots;    /* max in-flight executions */
    uint64_t capacity;  /* bytes per slot */
    int64_t spin_ns;
    uint32_t spin_yield;
    uint32_t nchans;
    adag_prog_chan_t *chans;
    uint32_t nops;
    adag_prog_op_t *ops;
} adag_program_t;

void adag_program_encode(const adag_program_t *prog, adag_wbuf_t *out);
/* Decodes and checks a program against the number of methods of the actor.
 * On success prog owns malloc'd arrays (adag_program_free). */
adag_status_t adag_program_decode(adag_rbuf_t *in, unsigned nmethods, adag_program_t *prog);
void adag_program_free(adag_program_t *prog);
/* A deep copy of src into dst. */
adag_status_t adag_program_copy(adag_program_t *dst, const adag_program_t *src);

#endif

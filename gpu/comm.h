/*
 * Communicators: a fixed set of ranks 0..n-1 (one per device-bound actor,
 * each in its own thread or process) that move device memory between them
 * with operations enqueued on the ranks' device streams. One ops table per
 * backend, the way devices and channels have theirs:
 *
 *   nccl   NCCL (libnccl.so.2 loaded with dlopen, like the CUDA runtime),
 *          ranks on CUDA devices;
 *   host   the emulated device's twin: ranks on emulated devices of one host,
 *          talking through a shared memory segment.
 *
 * A communicator's life:
 *   the driver     id_create once per communicator: an id (bytes) that
 *                  names it, and an owner that keeps what the id names
 *                  alive (the host backend's segment) until id_destroy;
 *   every rank     init(id, nranks, rank, device): joins; returns once
 *                  every rank joined (or the deadline passed). init is
 *                  collective, like ncclCommInitRank: the ranks must call
 *                  it concurrently;
 *   use            send/recv enqueue on a stream of the rank's device. A
 *                  send to peer p is matched by the next recv from this
 *                  rank on p, in the order each rank enqueued them (the
 *                  compiler makes both ends enqueue in one order). Like an
 *                  NCCL kernel, an operation occupies its stream until its
 *                  peer's matching operation has moved the bytes: a send
 *                  with no matching recv never completes;
 *   abort          from any thread: every operation queued or in flight on
 *                  the communicator gives up at once (its bytes are
 *                  undefined; its stream goes on), later ones too, and
 *                  status reports ADAG_ERR_CLOSED. The watchdog that sees
 *                  an operation past its deadline aborts the communicator
 *                  (ncclCommAbort on NCCL), so no stream waits forever on a
 *                  rank that stopped or died;
 *   destroy        after the streams that used it drained (or after abort).
 *
 * Every backend counts live communicators and ids (tests check that
 * teardown returns them to zero).
 */
#ifndef ADAG_GPU_COMM_H
#define ADAG_GPU_COMM_H

#include "gpu/device.h"

#include <adag.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    ADAG_COMM_KIND_HOST = 0, /* ranks on emulated devices (gpu/comm_host.c) */
    ADAG_COMM_KIND_NCCL = 1, /* ranks on CUDA devices (gpu/comm_nccl.c) */
    ADAG_COMM_KIND_COUNT
} adag_comm_kind_t;

/* ncclUniqueId is 128 bytes; the host backend's id is smaller. */
#define ADAG_COMM_ID_BYTES 128
/* Most ranks of one communicator. */
#define ADAG_COMM_MAX_RANKS 64

typedef struct {
    uint8_t bytes[ADAG_COMM_ID_BYTES];
    uint32_t len;
} adag_comm_id_t;

typedef struct adag_comm_ops adag_comm_ops_t;

/* One rank's communicator (backends embed it first). */
typedef struct {
    const adag_comm_ops_t *ops;
    unsigned nranks, rank;
    adag_device_t *dev;
    /* How long enqueueing one operation may take (NCCL's non-blocking
     * calls; <= 0: unbounded): ADAG_COMM_TIMEOUT_MS, from the environment
     * at init, then the runtime's, set by whoever joined it
     * (dag/exec/actor_comm.c) before any operation. */
    int64_t timeout_ms;
} adag_comm_t;

typedef struct {
    uint64_t comms; /* communicators initialized and not destroyed (every rank counts) */
    uint64_t ids;   /* ids created and not destroyed */
} adag_comm_counts_t;

struct adag_comm_ops {
    const char *name;               /* "host", "nccl" */
    adag_comm_kind_t kind;
    adag_device_kind_t device_kind; /* the devices its ranks are on */
    /* Nonzero if usable here; else 0 and why not ("libnccl.so.2: cannot
     * open shared object file", "no CUDA device"). */
    int (*probe)(char *why, size_t len);
    /* The driver: an id for a new communicator of nranks ranks
     * (1..ADAG_COMM_MAX_RANKS); *owner keeps it valid until id_destroy,
     * which may come as soon as every rank's init returned. */
    adag_status_t (*id_create)(unsigned nranks, adag_comm_id_t *id, void **owner);
    void (*id_destroy)(void *owner);
    /* Joins communicator `id` as `rank` on device dev (the calling thread
     * is bound to it). Collective: returns once all nranks ranks joined,
     * ADAG_ERR_TIMEOUT at the deadline, ADAG_ERR_PROTOCOL for an id that
     * is malformed or for other parameters (nranks differs). */
    adag_status_t (*init)(const adag_comm_id_t *id, unsigned nranks, unsigned rank,
                          adag_device_t *dev, int64_t deadline, adag_comm_t **out);
    /* Enqueue on s (a stream of the rank's device): send size bytes at buf
     * (device memory of the rank's device) to rank peer, or receive them
     * into buf from peer. A send and its matching recv have the same size
     * (a mismatch fails both: status reports it). */
    adag_status_t (*send)(adag_comm_t *c, const void *buf, size_t size, unsigned peer,
                          adag_dev_stream_t *s);
    adag_status_t (*recv)(adag_comm_t *c, void *buf, size_t size, unsigned peer,
                          adag_dev_stream_t *s);
    /* Collectives, enqueued on s like send/recv: every rank calls the same
     * collective with the same count, dtype, op and root, in one order (the
     * n-th collective of a rank is matched with the n-th of every other
     * rank; p2p and collectives share that one order on a communicator).
     * A rank's call holds its stream until every rank's call has run; a
     * mismatch (another collective, count, dtype, op or root) breaks the
     * communicator (status: ADAG_ERR_PROTOCOL naming both ranks' calls).
     * Buffers are device memory of the rank's device; send == recv (in
     * place) is allowed; counts are elements of dtype (a tensor dtype, not
     * ADAG_DTYPE_BYTES). A backend refuses at enqueue (ADAG_ERR_INVALID,
     * naming it) a dtype/op it cannot reduce (bool AVG; NCCL: i16, bool).
     * The host backend is deterministic: each element is reduced in rank
     * order (((x0 op x1) op x2) ...), whatever the group size and chunking,
     * so a C reference that does the same matches bit for bit.
     *   allreduce      recv[i] = op over ranks of send[i], i < count;
     *   allgather      recv[r * count + i] = rank r's send[i] (recv holds
     *                  nranks * count elements);
     *   reducescatter  recv[i] = op over ranks of send[rank * count + i]
     *                  (send holds nranks * count elements);
     *   broadcast      recv[i] = root's send[i] (send is read on the root
     *                  only). */
    adag_status_t (*allreduce)(adag_comm_t *c, const void *send, void *recv, size_t count,
                               adag_dtype_t dtype, adag_reduce_op_t op, adag_dev_stream_t *s);
    adag_status_t (*allgather)(adag_comm_t *c, const void *send, void *recv, size_t count,
                               adag_dtype_t dtype, adag_dev_stream_t *s);
    adag_status_t (*reducescatter)(adag_comm_t *c, const void *send, void *recv, size_t count,
                                   adag_dtype_t dtype, adag_reduce_op_t op,
                                   adag_dev_stream_t *s);
    adag_status_t (*broadcast)(adag_comm_t *c, const void *send, void *recv, size_t count,
                               adag_dtype_t dtype, unsigned root, adag_dev_stream_t *s);
    /* Optional (NULL where the backend cannot tell, as NCCL): the ranks the
     * collectives wait for now, those behind the furthest rank, as bits of
     * *ranks (bit r: rank r); returns how many. Any thread, never blocks
     * (for a watchdog's message). */
    unsigned (*laggards)(adag_comm_t *c, uint64_t *ranks);
    /* Any thread, any time, idempotent: see "abort" above. */
    void (*abort)(adag_comm_t *c);
    /* ADAG_OK, or the error that broke the communicator (abort:
     * ADAG_ERR_CLOSED; a size mismatch: ADAG_ERR_PROTOCOL; NCCL's async
     * errors), with its message. Never blocks. */
    adag_status_t (*status)(adag_comm_t *c);
    /* Frees the rank's communicator. Its operations must have completed
     * (their streams drained) or the communicator been aborted. */
    void (*destroy)(adag_comm_t *c);
    void (*counts)(adag_comm_counts_t *c); /* this process's */
};

/* The backend of a kind (NULL if unknown), by name ("host", "nccl"), and
 * the backend whose ranks are on devices of `device_kind` (NULL if none). */
const adag_comm_ops_t *adag__comm_backend(uint32_t kind);
const adag_comm_ops_t *adag__comm_backend_named(const char *name);
const adag_comm_ops_t *adag__comm_backend_for_device(adag_device_kind_t device_kind);

#endif

/*
 * The host communicator's segment and a rank's communicator, shared by its
 * files (gpu/comm_host_seg.c: the layout, the error record, references;
 * gpu/comm_host.c: ids, init, send/recv and the ops table;
 * gpu/comm_host_coll.c: the collectives; gpu/comm_host_peers.c: the
 * peers' buffers mapped). Calls go one way: comm_host.c -> comm_host_coll.c
 * -> comm_host_seg.c -> comm_host_peers.c.
 */
#ifndef ADAG_GPU_COMM_HOST_SEG_H
#define ADAG_GPU_COMM_HOST_SEG_H

#include "common/error.h"
#include "common/event.h"
#include "gpu/comm.h"
#include "gpu/comm_host.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#define ADAG_COMM_HOST_PAGE 4096u
/* A stream thread spins this long (yielding) before it sleeps: the peer is
 * another stream thread that usually answers within microseconds. */
#define ADAG_COMM_HOST_SPIN_NS 20000
#define ADAG_COMM_HOST_ERROR_TEXT 400
/* The largest ring chunk (gpu/comm_host_seg.c: adag__comm_host_chunk_bytes). */
#define ADAG_COMM_HOST_CHUNK_MAX ((uint64_t)256 << 10)

/* The segment's header (the first page). */
typedef struct {
    uint32_t magic, version, nranks, ring_chunks;
    uint64_t chunk_bytes; /* payload bytes per ring chunk */
    uint64_t boxes_bytes; /* a rank area's mailboxes, page-rounded */
    uint64_t area_bytes;  /* a rank area: mailboxes, then chunk bytes */
    uint64_t coll_offset; /* the collective area: one coll_rank_t per rank, page-rounded, */
    uint64_t slot_bytes;  /* then ADAG_COMM_HOST_COLL_SLOTS slots of this size per rank */
    uint64_t size;        /* the whole segment */
    alignas(64) _Atomic uint32_t abort;
    _Atomic int32_t error_code;   /* 0, or the status that broke the communicator */
    _Atomic uint32_t error_ready; /* error_text is complete */
    char error_text[ADAG_COMM_HOST_ERROR_TEXT];
    alignas(64) _Atomic uint32_t joined[ADAG_COMM_MAX_RANKS];
    adag_event_t join_wake;
    alignas(64) adag_event_t coll_wake; /* a rank arrived at a collective barrier */
} seg_header_t;

/* A mailbox ring chunk's header (gpu/comm_host.c, send and recv). */
typedef struct {
    uint64_t msg_seq;  /* which message of the pair */
    uint64_t msg_size; /* the whole message's bytes */
    uint64_t offset;   /* of this chunk's bytes in the message */
    uint64_t len;      /* bytes in this chunk */
} chunk_head_t;

/* One peer's mailbox in a rank's area. */
typedef struct {
    /* the sending rank's side */
    alignas(64) _Atomic uint64_t head; /* chunks published */
    _Atomic uint64_t send_turn;        /* messages its sends finished writing */
    adag_event_t recv_wake;            /* receivers sleep here */
    /* the receiving rank's side */
    alignas(64) _Atomic uint64_t tail; /* chunks consumed */
    _Atomic uint64_t recv_turn;        /* messages its recvs finished */
    adag_event_t send_wake;            /* senders sleep here */
    alignas(64) chunk_head_t heads[ADAG_COMM_HOST_RING_CHUNKS];
} mailbox_t;

#define ADAG_COMM_HOST_HEADER_BYTES                                                          \
    (((sizeof(seg_header_t) + ADAG_COMM_HOST_PAGE - 1) / ADAG_COMM_HOST_PAGE) * ADAG_COMM_HOST_PAGE)

/* One collective call as its rank posted it (gpu/comm_host_coll.c). */
typedef struct {
    uint64_t seq;   /* the rank's collective number */
    uint64_t count; /* elements */
    uint32_t kind, dtype, op, root;
} coll_desc_t;

/* Where a rank's buffers of one collective are, for peers that read them
 * in place (gpu/comm_host_coll.c, "direct"): posted with its call. */
typedef struct {
    uint32_t offered; /* 1: send and recv lie in memfds, named below */
    uint32_t failed;  /* 1: the rank could not map a peer's buffer */
    adag_memfd_ref_t send, recv;
    uint64_t send_off, recv_off; /* where the buffers begin in their memfds */
} coll_bufs_t;

/* A rank's collective state, in the collective area. */
typedef struct {
    alignas(64) _Atomic uint64_t arrived; /* barriers this rank arrived at */
    alignas(64) _Atomic uint64_t turn;    /* its collectives that finished */
    adag_event_t turn_wake;               /* its streams wait for their turn here */
    coll_desc_t desc[2];                  /* collective seq is posted in desc[seq % 2] */
    coll_bufs_t bufs[2];                  /* and its buffers in bufs[seq % 2] */
} coll_rank_t;

/* A peer's memfd mapped into this process (gpu/comm_host_peers.c). */
typedef struct {
    adag_memfd_ref_t ref;
    void *base; /* NULL: a free entry */
    size_t size;
    uint64_t used; /* the peer clock at its last use */
} peer_map_t;


/* A rank's view of a mapped segment. The geometry is this process's copy,
 * checked against the header once at init: every address is computed from
 * it, never from memory another process can write. */
typedef struct {
    seg_header_t *h;
    size_t size;
    unsigned nranks;
    uint64_t chunk_bytes, boxes_bytes, area_bytes, coll_offset, slot_bytes;
} seg_t;

/* One rank's communicator. */
typedef struct {
    adag_comm_t base;
    seg_t seg;
    char who[48]; /* "host communicator (rank 1 of 4)" */
    /* Numbering and enqueueing are one step, so each stream runs a peer's
     * operations (and the collectives) in the order of their numbers. */
    pthread_mutex_t enqueue_lock;
    uint64_t send_seq[ADAG_COMM_MAX_RANKS], recv_seq[ADAG_COMM_MAX_RANKS];
    uint64_t coll_seq;
    /* the rank and every queued operation; the last drop unmaps */
    _Atomic int refs;
    /* Used by the collective holding the rank's turn only: the peers'
     * buffers it mapped, and whether this rank gave up reading them in
     * place (a peer's buffer could not be mapped). */
    peer_map_t peer_maps[ADAG_COMM_MAX_RANKS][ADAG_COMM_HOST_PEER_MAPS];
    uint64_t peer_clock;
    int direct_off;
} host_comm_t;

/* The geometry of a communicator of n ranks, in a header (the id's maker
 * writes it; every rank checks the segment's against it). */
void adag__comm_host_seg_layout(unsigned n, seg_header_t *g);

/* dst's inbox from src (src != dst), and its ring's chunk bytes. */
static inline size_t adag__comm_host_inbox_index(unsigned src, unsigned dst)
{
    return src < dst ? src : src - 1;
}

static inline mailbox_t *adag__comm_host_mailbox(const seg_t *g, unsigned src, unsigned dst)
{
    char *area = (char *)g->h + ADAG_COMM_HOST_HEADER_BYTES + (size_t)dst * g->area_bytes;
    return (mailbox_t *)area + adag__comm_host_inbox_index(src, dst);
}

static inline unsigned char *adag__comm_host_ring_bytes(const seg_t *g, unsigned src,
                                                        unsigned dst)
{
    char *area = (char *)g->h + ADAG_COMM_HOST_HEADER_BYTES + (size_t)dst * g->area_bytes;
    return (unsigned char *)area + g->boxes_bytes +
           adag__comm_host_inbox_index(src, dst) * ADAG_COMM_HOST_RING_CHUNKS * g->chunk_bytes;
}

/* Breaks the communicator: the first failure's status and text are kept
 * (later ones wait until its text is complete, then abort), then every
 * waiter of every rank gives up. */
void adag__comm_host_fail(const seg_t *g, adag_status_t code, const char *fmt, ...)
    ADAG_PRINTF(3, 4);
/* ADAG_OK, or the record's status with its text as this thread's error
 * ("<who>: <text>"). Never blocks. */
adag_status_t adag__comm_host_seg_status(seg_header_t *h, const char *who);
/* Drops a reference to c; the last frees it (acq_rel: every use of the
 * communicator by a dropper happens-before the unmap). */
void adag__comm_host_unref(host_comm_t *c);
/* Ranks' communicators not freed yet (adag_comm_counts_t.comms): init
 * counts one up, the last unref down. */
extern _Atomic uint64_t adag__comm_host_live_comms;

/* Bytes [off, off + len) of the memfd ref names, which rank posted: mapped
 * (once, then from the peer maps), or NULL with the error recorded. */
unsigned char *adag__comm_host_peer_bytes(host_comm_t *c, unsigned rank,
                                         const adag_memfd_ref_t *ref, uint64_t off, uint64_t len);
/* Unmaps every peer buffer (the communicator's last reference). */
void adag__comm_host_peer_maps_release(host_comm_t *c);

/* The collective area (gpu/comm_host_coll.c uses it): its per-rank state,
 * page-rounded (the slots follow), and rank's. */
uint64_t adag__comm_host_coll_ctl_bytes(unsigned nranks);
coll_rank_t *adag__comm_host_coll_rank(const seg_t *g, unsigned rank);
/* The collectives (gpu/comm_host_coll.c), as the ops table calls them (laggards: the ranks behind
 * the furthest one at the collective barriers). */
unsigned adag__comm_host_laggards(adag_comm_t *c, uint64_t *ranks);
adag_status_t adag__comm_host_allreduce(adag_comm_t *c, const void *send, void *recv,
                                       size_t count, adag_dtype_t dtype, adag_reduce_op_t op,
                                       adag_dev_stream_t *s);
adag_status_t adag__comm_host_allgather(adag_comm_t *c, const void *send, void *recv,
                                       size_t count, adag_dtype_t dtype, adag_dev_stream_t *s);
adag_status_t adag__comm_host_reducescatter(adag_comm_t *c, const void *send, void *recv,
                                           size_t count, adag_dtype_t dtype,
                                           adag_reduce_op_t op, adag_dev_stream_t *s);
adag_status_t adag__comm_host_broadcast(adag_comm_t *c, const void *send, void *recv,
                                       size_t count, adag_dtype_t dtype, unsigned root,
                                       adag_dev_stream_t *s);

#endif

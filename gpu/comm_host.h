/*
 * The host communicator's id (gpu/comm_host.c) and ring geometry
 * (gpu/comm_host_seg.c), for the tests that forge ids and size messages
 * against the ring.
 */
#ifndef ADAG_GPU_COMM_HOST_H
#define ADAG_GPU_COMM_HOST_H

#include "gpu/comm.h"
#include "gpu/memfd_handle.h"

#include <stdint.h>

#define ADAG_COMM_HOST_ID_MAGIC 0x63676461u /* "adgc" */
#define ADAG_COMM_HOST_VERSION 3

/* What adag_comm_id_t.bytes hold (len = sizeof): the segment, named like
 * a emulated device handle, and the number of ranks it was laid out for. */
typedef struct {
    uint32_t magic;   /* ADAG_COMM_HOST_ID_MAGIC */
    uint32_t version; /* ADAG_COMM_HOST_VERSION */
    uint32_t nranks;
    uint32_t pad;
    adag_memfd_ref_t segment;
} adag_comm_host_id_t;

/* Chunks per mailbox ring, and the bytes of one chunk in a communicator of
 * nranks ranks (so a ring holds ADAG_COMM_HOST_RING_CHUNKS times that). */
#define ADAG_COMM_HOST_RING_CHUNKS 4
uint64_t adag__comm_host_chunk_bytes(unsigned nranks);

/* Staging slots per rank in the collective area, and the bytes of one slot
 * in a communicator of nranks ranks: a collective larger than a slot runs
 * in several chunks. */
#define ADAG_COMM_HOST_COLL_SLOTS 3
uint64_t adag__comm_host_slot_bytes(unsigned nranks);

/* Peers' buffers a rank of the host communicator keeps mapped (allreduce
 * reads them in place: gpu/comm_host_peers.c), at most this many per
 * peer; and how many it holds now, for tests, with no collective
 * running. */
#define ADAG_COMM_HOST_PEER_MAPS 8
unsigned adag__comm_host_peer_maps_live(const adag_comm_t *c);

#endif

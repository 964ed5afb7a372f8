/*
 * The shared-memory ring: a channel laid out inside a segment that every
 * process of a DAG maps. Layout of one channel (all 64-byte aligned):
 *
 *   header       written counter + data event (readers sleep here),
 *                space event (the writer sleeps here), geometry
 *   cursors      nreaders x 64 bytes: released counter of each reader
 *   slots        nslots x (slot header + capacity rounded up to 64)
 *
 * Counters are 64-bit and never wrap in practice. The writer may fill slot
 * seq % nslots once min(released) >= seq - nslots + 1; a reader may read it
 * once written >= seq + 1.
 */
#ifndef ADAG_TRANSPORT_SHM_RING_H
#define ADAG_TRANSPORT_SHM_RING_H

#include "transport/channel.h"

#include <stddef.h>
#include <stdint.h>

/* Bytes a channel with this geometry takes in a segment (64-aligned);
 * SIZE_MAX if that does not fit in a size_t. */
size_t adag_shm_chan_size(unsigned nslots, unsigned nreaders, size_t capacity);

/* Writes a fresh channel header at base (zeroed memory of adag_shm_chan_size bytes). */
void adag_shm_chan_init(void *base, unsigned nslots, unsigned nreaders, size_t capacity);

/* Opens an endpoint on the channel at base: reader index in [0, nreaders)
 * or -1 for the writer. Checks the header against the expected geometry. */
adag_status_t adag_shm_chan_open(adag_chan_t *ch, void *base, size_t avail, int reader,
                                 unsigned nslots, unsigned nreaders, size_t capacity,
                                 const _Atomic uint32_t *abort, adag_wait_policy_t policy);

/* Wakes every process sleeping on this channel (after the abort word is set). */
void adag_shm_chan_wake_all(void *base);

/* A shared-memory segment: a memfd mapped MAP_SHARED, size rounded up to
 * pages. The fd is close-on-exec and passed to workers with SCM_RIGHTS. */
typedef struct {
    int fd;
    void *base;
    size_t size;
} adag_shm_segment_t;

adag_status_t adag_shm_segment_create(adag_shm_segment_t *seg, const char *name, size_t size);
/* Maps an existing segment fd (taking ownership of fd) and checks its size. */
adag_status_t adag_shm_segment_map(adag_shm_segment_t *seg, int fd, size_t size);
void adag_shm_segment_destroy(adag_shm_segment_t *seg);

#endif

/* What the shm backend (transport/chan_shm.c) offers beyond its ops table:
 * sizes and memfd segments, for its own tests and the fuzzers. */
#ifndef ADAG_TRANSPORT_CHAN_SHM_H
#define ADAG_TRANSPORT_CHAN_SHM_H

#include "transport/channel.h"

#include <stdatomic.h>

#include <stddef.h>

/* Bytes a channel of nslots slots keeping slot_bytes bytes of value each
 * (its capacity; 0 for a headers-only ring) takes in a segment
 * (64-aligned); SIZE_MAX if that does not fit in a size_t. */
size_t adag__shm_chan_size(unsigned nslots, unsigned nreaders, size_t slot_bytes);

/* What a channel of geometry g takes of its segment: whole pages, so no
 * two channels share one (SIZE_MAX: too large). */
size_t adag__shm_chan_span(const adag_chan_geom_t *g);

/* The memory of an open shm channel: its header, cursors and slots. */
void adag__shm_chan_memory(adag_chan_t *ch, void **base, size_t *size);
/* The device word of an open shm channel's writer (reader -1) or reader r:
 * a 64-byte cell in its memory, zeroed at init, that only device channels
 * use (gpu/device.h, adag_dev_word_t). */
_Atomic uint64_t *adag__shm_chan_word(adag_chan_t *ch, int reader);

/* A shared-memory segment: a memfd mapped MAP_SHARED, size rounded up to
 * pages. The fd is close-on-exec and passed to workers with SCM_RIGHTS. */
typedef struct {
    int fd;
    void *base;
    size_t size;
} adag_shm_segment_t;

adag_status_t adag__shm_segment_create(adag_shm_segment_t *seg, const char *name, size_t size);
/* Maps an existing segment fd (taking ownership of fd) and checks its size. */
adag_status_t adag__shm_segment_map(adag_shm_segment_t *seg, int fd, size_t size);
void adag__shm_segment_destroy(adag_shm_segment_t *seg);

#endif

/*
 * Channels: one produced value -> all its readers, a ring of slots with one
 * slot per in-flight execution. Execution `seq` uses slot seq % nslots.
 *
 * Every backend fills the same ops table; the DAG layer only calls these:
 *   writer: acquire(seq) waits until every reader released seq - nslots and
 *           returns the slot's buffer; publish(seq) makes it readable;
 *   reader: wait(seq) returns a view of the slot once published;
 *           release(seq) gives seq (and everything before it) back.
 * A writer publishes seqs in order; a reader releases in order.
 * Waits return ADAG_ERR_CLOSED once the DAG's abort word is set and
 * ADAG_ERR_TIMEOUT at the deadline, so nothing waits forever on a dead peer.
 *
 * Backends: "shm" (a ring in a memfd segment shared by processes) and
 * "local" (writer and readers are the same actor in the same loop iteration:
 * one buffer, no copy, no synchronization). UCX and NCCL come later.
 */
#ifndef ADAG_TRANSPORT_CHANNEL_H
#define ADAG_TRANSPORT_CHANNEL_H

#include "common/event.h"

#include <adag.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    ADAG_CHAN_LOCAL = 0,
    ADAG_CHAN_SHM = 1,
} adag_chan_kind_t;

const char *adag_chan_kind_name(adag_chan_kind_t kind);

/* Bytes of error text a slot carries for a failed execution. */
#define ADAG_SLOT_ERR_MAX 448

typedef struct {
    const void *data;
    size_t size;
    adag_status_t status; /* ADAG_OK, or why the execution failed upstream */
    const char *err;      /* message when status != ADAG_OK (NUL-terminated) */
    size_t err_len;       /* < ADAG_SLOT_ERR_MAX */
} adag_slot_view_t;

typedef struct adag_chan adag_chan_t;

typedef struct {
    const char *name;
    adag_status_t (*acquire)(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf);
    void (*publish)(adag_chan_t *ch, uint64_t seq, size_t size, adag_status_t status,
                    const char *err);
    adag_status_t (*wait)(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                          adag_slot_view_t *view);
    void (*release)(adag_chan_t *ch, uint64_t seq);
    /* nonzero if seq is published (never blocks) */
    int (*ready)(adag_chan_t *ch, uint64_t seq);
} adag_chan_ops_t;

/* One process's endpoint of a channel. */
struct adag_chan {
    const adag_chan_ops_t *ops;
    adag_chan_kind_t kind;
    size_t capacity;   /* bytes per slot */
    unsigned nslots;
    int reader;        /* this endpoint's reader index, -1 for the writer */
    const _Atomic uint32_t *abort; /* the DAG's abort word */
    adag_spin_t spin;  /* this endpoint's adaptive wait policy */
    union {
        struct {
            struct adag_shm_chan_hdr *hdr;
            char *slots;
        } shm;
        struct {
            void *buf;
            size_t size;
            adag_status_t status;
            char err[ADAG_SLOT_ERR_MAX];
        } local;
    } u;
};

static inline adag_status_t adag_chan_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                                              void **buf)
{
    return ch->ops->acquire(ch, seq, deadline, buf);
}
static inline void adag_chan_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                                     adag_status_t status, const char *err)
{
    ch->ops->publish(ch, seq, size, status, err);
}
static inline adag_status_t adag_chan_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                                           adag_slot_view_t *view)
{
    return ch->ops->wait(ch, seq, deadline, view);
}
static inline void adag_chan_release(adag_chan_t *ch, uint64_t seq)
{
    ch->ops->release(ch, seq);
}
static inline int adag_chan_ready(adag_chan_t *ch, uint64_t seq)
{
    return ch->ops->ready(ch, seq);
}

/* local: a private buffer of `capacity` bytes (allocated here). */
adag_status_t adag_local_chan_open(adag_chan_t *ch, size_t capacity);
void adag_local_chan_close(adag_chan_t *ch);

#endif

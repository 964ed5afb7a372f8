/*
 * The device channel (transport/chan_dev.c: descriptor, endpoints,
 * watch; transport/chan_dev_path.c: the hot path): a tensor whose writer or readers live on a device,
 * between processes of one host. It is built from two lower pieces:
 *
 *   - a *ring*: an shm channel (through its ops table) that carries every
 *     slot's metadata (seq, size, tensor meta, status, error text), the
 *     readers' releases and, where a host endpoint needs them, the bytes
 *     (host payload; a ring without payload never touches its slots'
 *     bytes, so their pages are never allocated);
 *   - the device ops table (gpu/device.h) for device memory, copies on the
 *     actors' streams, and events, exported as handles (bytes) in the
 *     endpoints' peer info and imported at CONNECT.
 *
 * Where each endpoint keeps the value (its place: host or device k) gives
 * its role, fixed at compile time in the descriptor:
 *
 *   writer on a device   the method writes slot `seq % nslots` of the
 *                        writer's device memory on its compute stream;
 *                        publish records the slot's `ready` event there.
 *                        With host readers (payload), the communication
 *                        stream waits for `ready`, copies the slot into the
 *                        ring's host slot, records `copied` and publishes
 *                        the ring from that stream (a host function), so no
 *                        host thread waits for the device.
 *   writer in host memory  the ring as is (the driver, a host actor).
 *   reader, same device  zero copies: the reader's compute stream waits for
 *                        the writer's `ready` and reads the writer's slot
 *                        (imported memory); release records its `consumed`
 *                        event, which the writer's compute stream waits for
 *                        before it writes that slot again.
 *   reader, another device  one peer copy on the reader's communication
 *                        stream into its own slot (after `ready`), then
 *                        `consumed` (the writer's slot is free again) and
 *                        `local_ready`, which the compute stream waits for.
 *   reader on a device, writer in host memory  an async host-to-device copy
 *                        of the ring's slot on the communication stream; the
 *                        ring slot is released from that stream after the
 *                        copy (a host function).
 *   reader in host memory  the ring as is (host payload).
 *
 * A reader's own slot (copies) is reused only after the compute stream's
 * `local_free` event of its previous use. The host-level ring keeps the
 * window (a writer never runs more than nslots ahead); the events order the
 * device work inside it. Memory ordering: the ring's seq_cst counters
 * (transport/chan_shm.c); an event is recorded before the ring store that
 * makes it visible (publish, release), and waited for after the ring load
 * that saw that store, so the wait always covers the record.
 */
#ifndef ADAG_TRANSPORT_CHAN_DEV_H
#define ADAG_TRANSPORT_CHAN_DEV_H

#include "common/clock.h"
#include "transport/channel.h"

#include <stdatomic.h>

extern const adag_chan_ops_t adag_chan_dev_ops;

typedef enum {
    ROLE_HOST_WRITER,  /* the ring as is */
    ROLE_DEV_WRITER,
    ROLE_HOST_READER,  /* the ring as is */
    ROLE_SAME_DEVICE,  /* zero copies */
    ROLE_PEER_COPY,    /* from another device */
    ROLE_H2D,          /* from host memory */
} role_t;

/* A slot's latest communication operation: seq1 = seq + 1 (0: none yet),
 * enqueued at `since` (adag_now_ns); it is done when its event is (an
 * event of this endpoint, recorded once the op finished on its stream, and
 * recorded again only by the slot's next op, which re-arms the slot first:
 * the loop may release a slot while its op still runs). The loop thread
 * stores since (relaxed) then seq1 (seq_cst); the watchdog loads seq1
 * (seq_cst), since, queries the event, and loads seq1 again: unchanged,
 * the event it queried was still that op's. */
typedef struct {
    _Atomic uint64_t seq1;
    _Atomic int64_t since;
} chan_watch_t;

/* A publish or release run later on a stream (host function). */
typedef struct {
    struct dev_chan *ch;
    uint64_t seq;
    size_t size;
    adag_tensor_meta_t meta;
    int has_meta;
    adag_status_t status;
    char err[ADAG_SLOT_ERR_MAX];
} deferred_t;

typedef struct dev_chan {
    adag_chan_t base;
    adag_chan_t *ring;
    role_t role;
    int payload;                 /* the ring carries the bytes */
    unsigned nplaces;
    adag_chan_place_t *places;   /* writer, then each reader */
    const adag_chan_device_t *device; /* NULL for host roles */
    const adag_device_ops_t *ops;
    size_t stride;               /* bytes per device slot */
    /* writer on a device */
    adag_dev_mem_t slots;        /* nslots * stride */
    adag_dev_event_t **ready;    /* per slot, exported */
    adag_dev_event_t **copied;   /* per slot: the payload copy read the slot */
    adag_dev_event_t **consumed; /* [reader * nslots + slot], imported (device readers) */
    void **ring_bufs;            /* per slot: the ring's host slot (payload) */
    /* per slot: what was published (the writer reads its own value from
     * here), and the ring publish that runs on comm when there is payload */
    deferred_t *pending;
    /* reader on a device */
    adag_dev_mem_t peer;         /* the writer's slots, imported */
    adag_dev_event_t **peer_ready;
    adag_dev_event_t **my_consumed; /* per slot, exported */
    adag_dev_mem_t local;        /* own slots (copies) */
    adag_dev_event_t **local_ready, **local_free;
    adag_dev_event_t **arrived;  /* same device: the compute stream's wait for `ready` ended */
    deferred_t *releases;        /* per slot: the ring release to run on comm (H2D) */
    /* the communication operation in flight per slot (roles that have
     * them: see dev_watch), and each endpoint's actor for messages */
    chan_watch_t *watch;
    char (*who)[ADAG_MAX_NAME];  /* per place */
    /* connect finished (release); wake_all reads the imported events after
     * an acquire load of it */
    _Atomic int connected;
} dev_chan_t;

static inline dev_chan_t *dev_of(adag_chan_t *ch)
{
    return (dev_chan_t *)ch;
}

static inline unsigned slot_index(const dev_chan_t *c, uint64_t seq)
{
    return (unsigned)(seq % c->base.nslots);
}

static inline void watch_arm(dev_chan_t *c, unsigned s, uint64_t seq)
{
    if (!c->watch)
        return;
    atomic_store_explicit(&c->watch[s].since, adag_now_ns(), memory_order_relaxed);
    atomic_store_explicit(&c->watch[s].seq1, seq + 1, memory_order_seq_cst);
}

/* The hot path (transport/chan_dev_path.c). */
adag_status_t adag_chan_dev_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf);
adag_status_t adag_chan_dev_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                                    const adag_tensor_meta_t *meta, adag_status_t status,
                                    const char *err);
adag_status_t adag_chan_dev_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                                 adag_slot_view_t *view);
void adag_chan_dev_release(adag_chan_t *ch, uint64_t seq);
int adag_chan_dev_ready(adag_chan_t *ch, uint64_t seq);

#endif

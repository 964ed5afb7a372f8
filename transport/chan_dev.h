/*
 * The device channel (transport/chan_dev.c: descriptor, endpoints,
 * watch; transport/chan_dev_path.c: the hot path; transport/chan_dev_comm.c:
 * the communicator roles' hot path): a tensor whose writer or readers live on a device,
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
 * Between a device writer and a zero-copy or peer-copy reader the
 * cross-process waits above (`ready`, `consumed`) are by value ops on
 * words of the ring instead, where both endpoints can
 * (transport/chan_dev_words.c): the writer's word says which value is
 * ready, each reader's which slot it gave back; the events stay for the
 * pairs that cannot and for waits within one process.
 *
 * A channel whose geometry names a communicator (comm_key != 0,
 * ADAG_TRANSPORT_COMM) moves the value from the writer's device to every
 * device reader by the communicator's send/recv instead (host readers still
 * read the ring's payload). Every device endpoint has a rank (its place's
 * comm_rank) and finds its communicator at connect in its actor's table
 * (open params `comms`); its sends and recvs go on that entry's stream,
 * which only the communicator uses. Nothing is exported or imported:
 *
 *   writer on a device, communicator readers  publish records `ready` on
 *                        compute (and copies out as above for host
 *                        readers), then the communicator's stream waits for
 *                        `ready`, sends the slot to each device reader in
 *                        reader order and records the slot's `sent`, which
 *                        acquire makes the compute stream wait for before it
 *                        writes the slot again. Without payload the ring is
 *                        published on the host after the sends were enqueued.
 *                        A failed execution or a 0-byte value sends nothing.
 *   reader by communicator (ROLE_COMM_RECV)  after the ring's wait says an
 *                        OK value of size > 0, the communicator's stream
 *                        waits for `local_free`, receives into the reader's
 *                        own slot and records `local_ready`, which the
 *                        compute stream waits for. One recv per seq: the
 *                        loop may wait for a seq twice (`received`).
 *
 * A send to a reader is matched by that reader's next recv from the writer
 * (the communicator's issue order), and both ends decide from the ring's
 * size and status alone whether an execution moves bytes, so they agree.
 * A send holds the writer's communicator stream until its reader received:
 * the readers of one channel move together. When the DAG fails (abort word
 * set, not ADAG_ERR_CLOSED), wake_all aborts the communicator so that a
 * send or recv whose peer stopped gives up and the streams drain; a plain
 * destroy (ADAG_ERR_CLOSED) leaves it working for the next DAG.
 *
 * A reader's own slot (copies) is reused only after the compute stream's
 * `local_free` event of its previous use. The host-level ring keeps the
 * window (a writer never runs more than nslots ahead); the events order the
 * device work inside it. Memory ordering: the ring's seq_cst counters
 * (transport/chan_shm.c); an event is recorded before the ring store that
 * makes it visible (publish, release), and waited for after the ring load
 * that saw that store, so the wait always covers the record.
 * By communicator: the writer enqueues its sends before the ring store of
 * the publish (on the host, or from its communication stream after the
 * copy out, which may run first: a recv enqueued before its send just waits
 * for it, since both ends number their operations at enqueue), and the
 * reader enqueues its recv after the ring load that saw it; the bytes are
 * ordered by the communicator (gpu/comm.h). connect stores the
 * communicator and its stream before `connected` (release); wake_all reads
 * them after loading it (acquire), and the abort word seq_cst.
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
    ROLE_COMM_RECV,    /* by the communicator's recv */
} role_t;

/* A slot's latest communication operation: seq1 = seq + 1 (0: none yet),
 * enqueued at `since` (adag__now_ns); it is done when its event is (an
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

typedef struct chan_pin chan_pin_t;

typedef struct dev_chan {
    adag_chan_t base;
    adag_chan_t *ring;
    chan_pin_t *pin;             /* the ring's memory page-locked (chan_dev_pin.c), or NULL */
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
    /* by communicator (comm_key != 0): the actor's communicators (from
     * open), and at connect the one of this channel with its stream */
    uint64_t comm_key;
    const adag_chan_comm_t *comms;
    unsigned ncomms;
    adag_comm_t *comm;
    adag_dev_stream_t *comm_stream;
    unsigned comm_readers;       /* writer: device readers it sends to */
    adag_dev_event_t **sent;     /* writer, per slot: its sends are done */
    uint64_t *received;          /* reader, per slot: seq + 1 of the last recv (0: none) */
    /* the communication operation in flight per slot (roles that have
     * them: see dev_watch; a writer's sends have their own), and each
     * endpoint's actor for messages */
    chan_watch_t *watch;
    chan_watch_t *send_watch;
    char (*who)[ADAG_MAX_NAME];  /* per place */
    /* value ops (transport/chan_dev_words.c): memops, this endpoint can
     * use them; ready_by_word, a reader waits for the writer's word / the
     * writer stores it for some reader; done_words, a writer's per reader
     * (host NULL: that reader by events), a reader's own at [0]; done_max,
     * the highest value a reader's streams were given to store there */
    int memops;
    int ready_by_word;
    /* per slot: seq + 1 of the execution whose device part this endpoint
     * enqueued ahead of the ring (wait_ahead, publish_ahead), or 0; and a
     * reader's size of it */
    uint64_t *ahead;
    size_t *ahead_size;
    adag_dev_word_t ready_word;
    adag_dev_word_t *done_words;
    uint64_t done_max;
    /* the loop's (adag_chan_ops_t.defer): wait and acquire enqueue nothing */
    int deferred;
    /* connect finished (release); wake_all reads the imported events after
     * an acquire load of it */
    _Atomic int connected;
} dev_chan_t;

static inline dev_chan_t *dev_of(adag_chan_t *ch)
{
    return (dev_chan_t *)ch;
}

/* A place on a device (not host memory). */
static inline int is_dev(adag_chan_place_t p)
{
    return p.kind >= 0;
}

static inline unsigned slot_index(const dev_chan_t *c, uint64_t seq)
{
    return (unsigned)(seq % c->base.nslots);
}

static inline void watch_arm(chan_watch_t *w, unsigned s, uint64_t seq)
{
    if (!w)
        return;
    atomic_store_explicit(&w[s].since, adag__now_ns(), memory_order_relaxed);
    atomic_store_explicit(&w[s].seq1, seq + 1, memory_order_seq_cst);
}

/* The communicator roles (transport/chan_dev_comm.c). */
/* Bytes of a watched op's description ("the send to a (communicator rank 1), ..."). */
#define ADAG_CHAN_DEV_WHAT_MAX 640
/* Nonzero if a channel by communicator may have these places (writer
 * first; NULL: all in host memory); else 0 and why not. */
int adag__chan_dev_comm_places_ok(const adag_chan_place_t *pl, unsigned nplaces, char *why,
                                 size_t len);
/* connect: finds the channel's communicator among the actor's (the
 * endpoint is place `me`). */
adag_status_t adag__chan_dev_comm_connect(dev_chan_t *c, unsigned me);
/* The writer's sends of slot s (seq, size > 0) on the communicator's stream. */
adag_status_t adag__chan_dev_comm_send(dev_chan_t *c, unsigned s, uint64_t seq, size_t size);
/* ROLE_COMM_RECV's wait once the ring gave an OK view: the recv (once per
 * seq), the compute stream's wait for it, the view of the own slot. */
adag_status_t adag__chan_dev_comm_recv(dev_chan_t *c, uint64_t seq, adag_slot_view_t *view);
/* The watched op by communicator: the writer's sends, or the reader's recv. */
void adag__chan_dev_comm_describe(const dev_chan_t *c, char *what, size_t len);

/* Hand-offs by value ops (transport/chan_dev_words.c). */
/* open: whether this endpoint can use words (pins the ring for them), its
 * own word mapped (a reader), and that said in its peer info. */
adag_status_t adag__chan_dev_words_open(dev_chan_t *c, adag_wbuf_t *peer_info);
/* connect: reads a peer's word (the writer's, or reader r's for the
 * writer) and decides the pair's mechanism. */
adag_status_t adag__chan_dev_words_connect(dev_chan_t *c, adag_rbuf_t *rb, unsigned r);
/* A reader's streams are done with the writer's slot of seq: s stores
 * seq + 1 into its word (once; never lower). */
adag_status_t adag__chan_dev_word_done(dev_chan_t *c, adag_dev_stream_t *s, uint64_t seq);
/* wake_all: ADAG_DEV_WORD_ABORT into every word of the channel. */
void adag__chan_dev_words_abort(dev_chan_t *c);

/* The hot path (transport/chan_dev_path.c). */
/* Page-locks the ring's memory for this endpoint's copies with it (the
 * process's registration, shared by its endpoints), and lets it go. */
adag_status_t adag__chan_dev_pin(dev_chan_t *c);
void adag__chan_dev_unpin(dev_chan_t *c);

adag_status_t adag__chan_dev_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf);
adag_status_t adag__chan_dev_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                                    const adag_tensor_meta_t *meta, adag_status_t status,
                                    const char *err);
adag_status_t adag__chan_dev_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                                 adag_slot_view_t *view);
void adag__chan_dev_release(adag_chan_t *ch, uint64_t seq);
int adag__chan_dev_ready(adag_chan_t *ch, uint64_t seq);
int adag__chan_dev_ahead(adag_chan_t *ch);
adag_status_t adag__chan_dev_wait_ahead(adag_chan_t *ch, uint64_t seq, size_t size,
                                       const adag_tensor_meta_t *meta, adag_slot_view_t *view);
adag_status_t adag__chan_dev_publish_ahead(adag_chan_t *ch, uint64_t seq);
/* Device work in a graph (adag_chan_ops_t.graphable ...). */
int adag__chan_dev_graphable(adag_chan_t *ch);
void adag__chan_dev_defer(adag_chan_t *ch, int on);
adag_status_t adag__chan_dev_device_before(adag_chan_t *ch, uint64_t seq, adag_dev_stream_t *s);
adag_status_t adag__chan_dev_device_after(adag_chan_t *ch, uint64_t seq, adag_dev_stream_t *s);

#endif

/*
 * Channels: one produced value -> all its readers, a ring of slots with one
 * slot per in-flight execution. Execution `seq` uses slot seq % nslots.
 *
 * Every backend fills one ops table (adag_chan_ops_t); the DAG layer never
 * asks which backend it has. A channel's life, in every process that has
 * an endpoint of it:
 *
 *   compile (the driver)   domain_create lays out every channel of this backend
 *                          for one DAG and writes, per channel, an opaque
 *                          descriptor that the program carries;
 *                          domain_export gives what other processes need to
 *                          attach the domain (bytes + fds);
 *   other processes        domain_import attaches it;
 *   PREPARE                open: one endpoint (the writer, or reader r) from
 *                          the descriptor; it may write "peer info" (bytes a
 *                          peer needs to reach this endpoint);
 *   CONNECT                connect: every endpoint gets the peer info of the
 *                          channel's writer (index 0) and readers (1 + r);
 *   use                    writer: acquire(seq) waits until every reader
 *                          released seq - nslots and returns the slot's
 *                          buffer; publish(seq) makes it readable.
 *                          reader: wait(seq) returns a view of the slot once
 *                          published; release(seq) gives seq (and everything
 *                          before it) back; ready(seq) never blocks.
 *                          A writer publishes seqs in order; a reader
 *                          releases in order.
 *   abort                  wake_all wakes every waiter of the endpoint's
 *                          channel; waits return ADAG_ERR_CLOSED once the
 *                          DAG's abort word (one per process, in the DAG
 *                          context) is set and ADAG_ERR_TIMEOUT at the
 *                          deadline, so nothing waits forever on a dead peer.
 *   close                  frees the endpoint; domain_destroy the domain.
 *
 * Optional operations are NULL: domain_* (a backend with no per-DAG state),
 * connect (nothing to exchange), notify_fd (no pollable fd).
 *
 * Backends are registered by name in one table (transport/channel.c) and
 * chosen by what they can do: the compiler describes a channel's endpoints
 * (adag_chan_edge_t: which actor, process and node each is, where it keeps
 * values, the tensor's transport hint), asks every backend's `query`, and
 * takes the cheapest cost class that answered (adag__chan_choose). The
 * program names each channel's backend on the wire by its name. Built in:
 * "self" (writer and readers are one actor in one loop iteration: one
 * buffer, no copy, no synchronization), "shm" (a ring in a memfd segment
 * shared by the processes of the driver's node), "device" (device memory
 * over IPC and async copies within one node, transport/chan_dev.c) and
 * "ucx" (UCP active messages between processes that share no memory;
 * device values staged through host memory, transport/chan_ucx.c). A new
 * backend is one file with its ops table plus one line in the table.
 */
#ifndef ADAG_TRANSPORT_CHANNEL_H
#define ADAG_TRANSPORT_CHANNEL_H

#include "common/event.h"
#include "common/trace.h"
#include "gpu/comm.h"
#include "gpu/device.h"
#include "transport/wire.h"

#include <adag.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Most backends the registry (transport/channel.c) may hold: the DAG
 * context keeps a domain per backend. */
#define ADAG_CHAN_MAX_BACKENDS 16
/* Bytes a backend's name may take on the wire, its NUL included. */
#define ADAG_CHAN_BACKEND_NAME_MAX 32

/* Bytes of error text a slot carries for a failed execution. */
#define ADAG_SLOT_ERR_MAX 448
/* Most fds a domain export may carry. */
#define ADAG_CHAN_DOMAIN_MAX_FDS 4

/* What a slot says of its value beyond its bytes: dtype ADAG_DTYPE_BYTES
 * (0) and ndim 0 for plain bytes, else a tensor's dtype and shape. */
typedef struct {
    uint32_t dtype;  /* adag_dtype_t */
    uint32_t ndim;   /* 0..ADAG_MAX_DIMS */
    int64_t shape[ADAG_MAX_DIMS];
} adag_tensor_meta_t;

/* What a host ring keeps per slot besides the value (shm, ucx): which
 * execution, its size, status, tensor metadata and error text. */
typedef struct {
    uint64_t seq;
    uint64_t size;
    int32_t status;
    uint32_t err_len;
    adag_tensor_meta_t meta;
    char err[ADAG_SLOT_ERR_MAX];
} adag_slot_hdr_t;

typedef struct {
    const void *data;     /* in host memory, or in the reader's device memory */
    size_t size;
    adag_tensor_meta_t meta;
    int32_t device;       /* ADAG_DEVICE_HOST, or ADAG_DEVICE(kind, i): where data is */
    adag_status_t status; /* ADAG_OK, or why the execution failed upstream */
    const char *err;      /* message when status != ADAG_OK (NUL-terminated) */
    size_t err_len;       /* < ADAG_SLOT_ERR_MAX */
} adag_slot_view_t;

/* Where an endpoint keeps the channel's values: host memory (kind -1) or
 * device `index` of device backend `kind` (adag_device_kind_t); `who` is
 * the endpoint's actor ("the driver"), for messages (NULL: unnamed; only
 * read during domain_create). `comm_rank`: in a channel with a
 * communicator (adag_chan_geom_t.comm_key), a device endpoint's rank in it
 * (ignored otherwise). */
typedef struct {
    int32_t kind;
    uint32_t index;
    const char *who;
    uint32_t comm_rank;
} adag_chan_place_t;

#define ADAG_CHAN_PLACE_HOST ((adag_chan_place_t){-1, 0, NULL, 0})

/* What every endpoint of a channel agrees on. Each channel has its own:
 * the compiler sizes every channel for its value (dag/graph/compile_geom.c). */
typedef struct {
    unsigned nslots;   /* its ring's slots: values in flight at once, 1.. */
    unsigned nreaders; /* registered readers (the writer reading its own slot is not one) */
    size_t capacity;   /* bytes per slot: the largest value it carries */
    /* Device channel: nonzero, the communicator (the driver's number for
     * it, dag/exec/actor_comm.h) by whose send/recv the value moves from the
     * writer's device to every device reader (ADAG_TRANSPORT_COMM); 0:
     * IPC and copies. */
    uint64_t comm_key;
    /* shm: the slots keep no bytes, only their headers (size, status,
     * tensor meta, error text): the ring of a device channel whose
     * endpoints all keep the value on devices. capacity still bounds the
     * sizes it carries. */
    int headers_only;
} adag_chan_geom_t;

/* A communicator an actor joined, as its endpoints see it: the endpoint
 * of a channel whose geom.comm_key is `key` sends or receives with `comm`
 * on `stream` (a stream of the actor's device that only this
 * communicator's operations use: those of two DAGs never queue behind
 * each other). Filled in before connect. */
typedef struct {
    uint64_t key;
    adag_comm_t *comm;
    adag_dev_stream_t *stream;
} adag_chan_comm_t;

typedef struct {
    const void *data;
    size_t len;
} adag_blob_t;

typedef struct adag_chan adag_chan_t;
typedef struct adag_chan_ops adag_chan_ops_t;

/* A device-bound actor's device and streams, as its endpoints see them:
 * its methods enqueue on `compute`; transfers go on `comm`. */
typedef struct {
    adag_device_t *dev;
    adag_device_kind_t kind;
    adag_dev_stream_t *compute;
    adag_dev_stream_t *comm;
} adag_chan_device_t;

/* A backend's per-DAG state in one process (the shm segment); backends
 * embed this first in their own struct. */
typedef struct adag_chan_domain {
    const adag_chan_ops_t *ops;
} adag_chan_domain_t;

typedef struct {
    const char *name;               /* e.g. "stage1.forward[0]", for messages */
    adag_chan_geom_t geom;
    int reader;                     /* this endpoint's reader index, -1 for the writer */
    adag_blob_t desc;               /* the channel's descriptor from domain_create */
    const _Atomic uint32_t *abort;  /* the DAG's abort word in this process */
    adag_wait_policy_t policy;      /* how this endpoint waits */
    /* The device of the actor that owns this endpoint and its streams
     * (NULL: a host endpoint: the driver, a host actor). A backend that
     * moves device memory orders its work on these streams. */
    const adag_chan_device_t *device;
    /* The communicators of the endpoint's actor in this DAG (NULL, 0:
     * none). The array outlives the endpoint's connect, which looks up its
     * channel's geom.comm_key there (the communicator then outlives the
     * endpoint). */
    const adag_chan_comm_t *comms;
    unsigned ncomms;
    /* has_numa: the endpoint's actor was placed on NUMA node `numa`; a
     * writer's slots then prefer that node (the pages are written there;
     * readers on other nodes read them across once) */
    int has_numa, numa;
} adag_chan_open_params_t;

/* One process's endpoint of a channel: what every backend shares. Backends
 * embed it first in their own struct and own everything else. */
struct adag_chan {
    const adag_chan_ops_t *ops;
    size_t capacity;   /* bytes per slot */
    unsigned nslots;
    int reader;        /* this endpoint's reader index, -1 for the writer */
    /* set by open: this endpoint hands values in device memory (acquire's
     * buffer, a view's data) on its actor's device, ordered on its
     * streams; 0: in host memory */
    int on_device;
    const _Atomic uint32_t *abort;
    adag_spin_t spin;  /* this endpoint's adaptive wait policy */
    /* The trace ring of the loop that uses this endpoint (NULL: not traced,
     * or the driver's endpoint) and the channel's index in its program: a
     * backend adds spans of its own there, from the loop's thread only
     * (adag__trace_add, op ADAG_SPAN_NO_OP, arg trace_chan). */
    struct adag_trace_ring *trace;
    uint32_t trace_chan;
    char name[96];
};

/* The span kinds the backends record on an endpoint's `trace` (from
 * ADAG_SPAN_BACKEND up: common/trace.h leaves them to this layer), and
 * the name of any kind in an exported trace: theirs, else common's
 * (adag__span_kind_name). */
enum {
    ADAG_SPAN_UCX_SEND = ADAG_SPAN_BACKEND,        /* "ucx send": posting a value's sends to
                                                   * its readers */
    ADAG_SPAN_DEVICE_COPY = ADAG_SPAN_BACKEND + 1, /* "device copy": enqueuing a value's
                                                   * device copy */
};
const char *adag__chan_span_name(unsigned kind);

/* How dear a backend carries a channel: the compiler takes the cheapest
 * class that a backend answered (ties: the first in the table). */
typedef enum {
    ADAG_CHAN_CANNOT = 0,         /* it cannot carry this channel */
    ADAG_CHAN_COST_PROCESS = 1,   /* within one process, no copy */
    ADAG_CHAN_COST_SHM = 2,       /* host memory shared by the processes of a node */
    ADAG_CHAN_COST_DEVICE = 3,    /* device memory: peer copies, IPC, communicators */
    ADAG_CHAN_COST_NETWORK = 4,   /* between nodes */
} adag_chan_cost_t;

/* One endpoint of a channel as the compiler places it. */
typedef struct {
    int32_t actor;       /* the DAG's actor index; -1: the driver */
    uint32_t process;    /* 0: the driver's process (the driver, thread actors);
                          * an actor in a process of its own: a number of its own */
    const char *node;    /* the node it runs on: its agent's address, "" the driver's */
    adag_chan_place_t place; /* host memory, or a device kind and index */
} adag_chan_end_t;

/* A channel as a backend's query sees it: its writer (ends[0]) and
 * readers (ends[1 + r]) and the transport its tensor was declared with
 * (adag_transport_t: AUTO, HOST, IPC, COMM), a constraint. */
typedef struct {
    const char *name;            /* the channel, for messages */
    const adag_chan_end_t *ends; /* 1 + nreaders */
    unsigned nreaders;           /* registered readers (not the writer reading its own slot) */
    uint32_t transport;
} adag_chan_edge_t;

struct adag_chan_ops {
    const char *name;   /* its name in the registry and on the wire */
    /* The cost class at which it can carry edge e, or ADAG_CHAN_CANNOT
     * with a short reason in why[0..why_len) ("its endpoints are on two
     * nodes"). Pure: no state, no allocation. */
    adag_chan_cost_t (*query)(const adag_chan_edge_t *e, char *why, size_t why_len);
    /* Its channels hold one value, written and read within one loop
     * iteration: the compiler gives them one slot. */
    int one_slot;
    /* Optional (DOT): how a channel of geometry g whose endpoints keep
     * values at places reaches reader r, into buf ("emu_ipc peer copy
     * emu:0 -> emu:1"); "" or no label: nothing to say. */
    void (*label)(const adag_chan_geom_t *g, const adag_chan_place_t *places, unsigned r,
                  char *buf, size_t len);
    /* its acquire and wait count every wait that waited in the endpoint's
     * spin.waited (a wait that did not is not timed by a traced loop) */
    int counts_waits;

    /* ---- per DAG and process (optional) ---- */
    /* The driver: lays out n channels of this backend for DAG `dag_name` and
     * appends channel i's descriptor to descs[i]. places[i] (places may be
     * NULL, and so may places[i]: all in host memory) says where channel
     * i's writer (places[i][0]) and reader r (places[i][1 + r]) keep values. */
    adag_status_t (*domain_create)(const char *dag_name, const adag_chan_geom_t *geoms,
                                   const adag_chan_place_t *const *places, unsigned n,
                                   adag_wbuf_t *descs, adag_chan_domain_t **out);
    /* What another process needs to attach: bytes into blob, fds (still
     * owned by the domain) into fds[0..*nfds) (at most ADAG_CHAN_DOMAIN_MAX_FDS). */
    adag_status_t (*domain_export)(adag_chan_domain_t *d, adag_wbuf_t *blob, int *fds,
                                   unsigned *nfds);
    /* Attaches an exported domain; takes every fd (also on failure). */
    adag_status_t (*domain_import)(adag_blob_t blob, const int *fds, unsigned nfds,
                                   adag_chan_domain_t **out);
    void (*domain_destroy)(adag_chan_domain_t *d);
    /* Bytes of memory the domain holds (for statistics). */
    size_t (*domain_bytes)(const adag_chan_domain_t *d);
    /* Optional (statistics; the driver, at compile time): the memory a
     * channel of geometry g whose writer and readers keep values at
     * places (NULL: all in host memory) holds, every endpoint in every
     * process together: host memory (its ring in the DAG's segment, or
     * each endpoint's own ring) into *host, device memory into *device. */
    void (*memory)(const adag_chan_geom_t *g, const adag_chan_place_t *places, size_t *host,
                   size_t *device);

    /* ---- endpoints ---- */
    /* Opens an endpoint (d is NULL for a backend without domains); may
     * append bytes a peer needs to reach it to peer_info. Checks the
     * descriptor against the geometry: a bad one is ADAG_ERR_PROTOCOL. */
    adag_status_t (*open)(adag_chan_domain_t *d, const adag_chan_open_params_t *p,
                          adag_wbuf_t *peer_info, adag_chan_t **out);
    /* Optional: peers[0] is the writer's info, peers[1 + r] reader r's. */
    adag_status_t (*connect)(adag_chan_t *ch, const adag_blob_t *peers, unsigned npeers);
    void (*close)(adag_chan_t *ch);
    /* Wakes every waiter of the channel (after the abort word was set).
     * A backend that orders device streams on a peer's events also
     * abandons them (device ops event_abandon), so that no stream of this
     * process waits forever on a peer that died or stopped. Any thread. */
    void (*wake_all)(adag_chan_t *ch);
    /* Optional: the endpoint's communication operations in flight on
     * device streams (copies, waits for a peer's value) are checked, never
     * waited for: ADAG_ERR_TIMEOUT, with a message naming the operation,
     * the execution and the peer, if one was enqueued more than timeout_ns
     * before `now` (adag__now_ns) and has not completed (*since: when the
     * oldest such was enqueued); else ADAG_OK. Runs on a watchdog thread
     * while the endpoint's loop uses it. */
    adag_status_t (*watch)(adag_chan_t *ch, int64_t now, int64_t timeout_ns, int64_t *since);
    /* Optional, readers: arms and returns an fd that the writer signals
     * (readable) after each publish from now on; -1 if it cannot. */
    int (*notify_fd)(adag_chan_t *ch);

    /* ---- the hot path ---- */
    adag_status_t (*acquire)(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf);
    /* Publishes seq: size bytes described by meta (NULL: plain bytes) or,
     * status != ADAG_OK, the failure and its message (size then says
     * nothing). A value larger than the slot (size > capacity, status
     * ADAG_OK) is ADAG_ERR_TOO_LARGE naming the channel, the execution and
     * both sizes (adag__chan_publish_fits), and nothing is published: no
     * reader sees seq until it is published again. Any failure here means
     * the value could not be sent: the caller fails the DAG. */
    adag_status_t (*publish)(adag_chan_t *ch, uint64_t seq, size_t size,
                             const adag_tensor_meta_t *meta, adag_status_t status,
                             const char *err);
    adag_status_t (*wait)(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                          adag_slot_view_t *view);
    void (*release)(adag_chan_t *ch, uint64_t seq);
    /* Optional: release(seq) by a thread whose next steps are publishes
     * and then flush: what the release owes the writer's process (a ucx
     * credit) may wait for them, riding with a value that goes its way.
     * Without it, release. */
    void (*release_held)(adag_chan_t *ch, uint64_t seq);
    /* Optional: sends what release_held kept back and no publish took. */
    void (*flush)(adag_chan_t *ch);
    /* nonzero if seq is published (never blocks) */
    int (*ready)(adag_chan_t *ch, uint64_t seq);
    /* Optional, the writer: its slots published and not yet released by
     * every reader, now (statistics; any thread). */
    uint32_t (*in_use)(adag_chan_t *ch);

    /* ---- ahead of the ring (optional: device channels) ----
     * A device reader whose streams order themselves after the writer's
     * on the device (transport/chan_dev_words.c) may take execution seq's
     * value before the writer's loop published it. ahead: nonzero if this
     * connected endpoint can (a reader: wait_ahead; a writer:
     * publish_ahead). wait_ahead fills the view of a value of `size` bytes
     * described by meta (the channel's static declaration) and enqueues
     * the waits and copies that make the reader's streams see it, without
     * waiting on the host; the loop's wait(seq) later still says the
     * value's status, and enqueues nothing again. publish_ahead, a writer
     * on a device: what publish(seq) enqueues to make an OK value visible
     * to such readers, now; the ring's publish comes later, with the
     * status. */
    int (*ahead)(adag_chan_t *ch);
    adag_status_t (*wait_ahead)(adag_chan_t *ch, uint64_t seq, size_t size,
                                const adag_tensor_meta_t *meta, adag_slot_view_t *view);
    adag_status_t (*publish_ahead)(adag_chan_t *ch, uint64_t seq);

    /* ---- device work in a graph (optional: device channels) ----
     * graphable: nonzero if all the device work this connected endpoint
     * does for an execution is on its actor's compute stream, by value ops
     * and the events of the execution's slot (transport/chan_dev_words.c),
     * with values that follow the execution's number, so that a device
     * graph may hold it and replay it for a later execution with its value
     * ops shifted (dag/exec/loop_graph.c). defer(ch, 1): from then on wait
     * (a reader) and acquire (the writer) do their host part only (the
     * ring, the reader's view of the slot) and enqueue nothing, until
     * defer(ch, 0). device_before(seq, s): what those left out for seq (a
     * reader of an OK value: its wait for the writer's value; the writer:
     * its wait for the readers' credits), enqueued on s; device_after(seq,
     * s): the writer: what publish(seq) enqueues for the value, enqueued
     * on s. With s NULL, each says that this work now runs in a launched
     * graph: the reader's watchdog starts watching it, and the writer's
     * publish(seq) no longer enqueues it (only publishes the ring). An
     * endpoint's watchdog also starts at device_before on its compute
     * stream (work enqueued there runs as is, not captured). */
    int (*graphable)(adag_chan_t *ch);
    void (*defer)(adag_chan_t *ch, int on);
    adag_status_t (*device_before)(adag_chan_t *ch, uint64_t seq, adag_dev_stream_t *s);
    adag_status_t (*device_after)(adag_chan_t *ch, uint64_t seq, adag_dev_stream_t *s);
};

/* Copies meta into a slot's (NULL: plain bytes); copies only the used dims. */
static inline void adag__tensor_meta_store(adag_tensor_meta_t *dst, const adag_tensor_meta_t *meta)
{
    if (!meta) {
        dst->dtype = 0;
        dst->ndim = 0;
        return;
    }
    dst->dtype = meta->dtype;
    dst->ndim = meta->ndim <= ADAG_MAX_DIMS ? meta->ndim : 0;
    for (uint32_t d = 0; d < dst->ndim; d++)
        dst->shape[d] = meta->shape[d];
}
/* Reads a slot's meta (whose ndim the caller checked is <= ADAG_MAX_DIMS). */
static inline void adag__tensor_meta_load(adag_tensor_meta_t *dst, const adag_tensor_meta_t *src)
{
    adag__tensor_meta_store(dst, src);
}

/* The registry (transport/channel.c): backends by index 0..n-1, the index
 * being valid only within this build (the wire names backends). */
unsigned adag__chan_nbackends(void);
const adag_chan_ops_t *adag__chan_backend(uint32_t index); /* NULL out of range */
const char *adag__chan_backend_name(uint32_t index);       /* "?" out of range */
/* The index of backend `name`, -1 if this build has none by that name. */
int adag__chan_backend_find(const char *name);
/* ADAG_ERR_PROTOCOL "channel <chan>: backend '<name>' is not in this
 * build (have: self, shm, device, ucx)" */
adag_status_t adag__chan_backend_unknown(const char *chan, const char *name);

/* Asks every backend for edge e and sets *index to the cheapest that can
 * carry it; ADAG_ERR_INVALID if none can, naming the channel, its
 * endpoints and each backend's reason. */
adag_status_t adag__chan_choose(const adag_chan_edge_t *e, uint32_t *index);
/* Appends "<who> (<where>)" for endpoint e to buf: "stage1 (emu:0 on 10.0.0.2:7000)". */
void adag__chan_end_describe(const adag_chan_end_t *e, char *buf, size_t len);

/* What the queries ask of an edge: whether an endpoint keeps the value in
 * device memory ... */
static inline int adag__chan_edge_device(const adag_chan_edge_t *e)
{
    for (unsigned i = 0; i <= e->nreaders; i++)
        if (e->ends[i].place.kind >= 0)
            return 1;
    return 0;
}
/* ... the first reader (1 + r) on another node than the writer's, 0 if none ... */
static inline unsigned adag__chan_edge_away(const adag_chan_edge_t *e)
{
    for (unsigned i = 1; i <= e->nreaders; i++)
        if (strcmp(e->ends[i].node, e->ends[0].node) != 0)
            return i;
    return 0;
}
/* ... and whether every endpoint is in the writer's process. */
static inline int adag__chan_edge_one_process(const adag_chan_edge_t *e)
{
    for (unsigned i = 1; i <= e->nreaders; i++)
        if (e->ends[i].process != e->ends[0].process)
            return 0;
    return 1;
}

/* Fills the shared part of an endpoint (backends call it from open). */
void adag__chan_init_common(adag_chan_t *ch, const adag_chan_ops_t *ops,
                           const adag_chan_open_params_t *p);

/* ADAG_ERR_TOO_LARGE for seq's value of `size` bytes on ch: "channel <name>:
 * execution <seq>'s value is <size> bytes, larger than the slot capacity of
 * <capacity> bytes". */
adag_status_t adag__chan_too_large(const adag_chan_t *ch, uint64_t seq, size_t size);

/* The publish contract every backend checks first: an OK value fits the
 * slot (else ADAG_ERR_TOO_LARGE, nothing published); a failure's size is
 * not looked at. */
static inline adag_status_t adag__chan_publish_fits(const adag_chan_t *ch, uint64_t seq,
                                                   size_t size, adag_status_t status)
{
    return status != ADAG_OK || size <= ch->capacity ? ADAG_OK
                                                     : adag__chan_too_large(ch, seq, size);
}

static inline adag_status_t adag__chan_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                                              void **buf)
{
    return ch->ops->acquire(ch, seq, deadline, buf);
}
static inline adag_status_t adag__chan_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                                              const adag_tensor_meta_t *meta,
                                              adag_status_t status, const char *err)
{
    return ch->ops->publish(ch, seq, size, meta, status, err);
}
static inline adag_status_t adag__chan_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                                           adag_slot_view_t *view)
{
    return ch->ops->wait(ch, seq, deadline, view);
}
static inline int adag__chan_ahead(adag_chan_t *ch)
{
    return ch->ops->ahead && ch->ops->ahead(ch);
}
static inline int adag__chan_graphable(adag_chan_t *ch)
{
    return ch->ops->graphable && ch->ops->graphable(ch);
}
/* (the three below: only on an endpoint that is graphable) */
static inline void adag__chan_defer(adag_chan_t *ch, int on)
{
    ch->ops->defer(ch, on);
}
static inline adag_status_t adag__chan_device_before(adag_chan_t *ch, uint64_t seq,
                                                    adag_dev_stream_t *s)
{
    return ch->ops->device_before(ch, seq, s);
}
static inline adag_status_t adag__chan_device_after(adag_chan_t *ch, uint64_t seq,
                                                   adag_dev_stream_t *s)
{
    return ch->ops->device_after(ch, seq, s);
}
static inline void adag__chan_release(adag_chan_t *ch, uint64_t seq)
{
    ch->ops->release(ch, seq);
}
static inline void adag__chan_release_held(adag_chan_t *ch, uint64_t seq)
{
    if (ch->ops->release_held)
        ch->ops->release_held(ch, seq);
    else
        ch->ops->release(ch, seq);
}
static inline void adag__chan_flush(adag_chan_t *ch)
{
    if (ch->ops->flush)
        ch->ops->flush(ch);
}
/* UINT32_MAX where the backend cannot tell. */
static inline uint32_t adag__chan_in_use(adag_chan_t *ch)
{
    return ch->reader < 0 && ch->ops->in_use ? ch->ops->in_use(ch) : UINT32_MAX;
}
static inline int adag__chan_ready(adag_chan_t *ch, uint64_t seq)
{
    return ch->ops->ready(ch, seq);
}

#endif

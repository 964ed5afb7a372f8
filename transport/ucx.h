/*
 * The UCX channel's per-DAG state in one process (transport/ucx_domain.c),
 * shared with its endpoints (transport/chan_ucx.c: their ops;
 * transport/chan_ucx_msg.c: their messages).
 *
 * A domain is one UCP worker: every UCX endpoint of one DAG in one process
 * sends and receives through it, with one UCP endpoint ("connection") per
 * peer worker, made at CONNECT from the peer's worker address (the peer
 * info of open) and shared by every channel to that peer.
 *
 * Progress: UCX only moves data inside ucp_worker_progress, so somebody
 * must call it for as long as anything is in flight, also when no thread
 * of this process waits on a UCX channel (a loop may sleep on an shm
 * channel while a large value still streams out of it, or in). So:
 *   - a waiter on a UCX channel progresses the worker itself while it
 *     spins (a try-lock: one thread progresses at a time), so a value that
 *     lands while it spins is seen at once; it spins until spin->max
 *     passed without an event (1 ms while requests are in flight), so a
 *     large value streaming in or out keeps its waiter progressing, and
 *     only an idle wait sleeps;
 *   - the domain's progress thread sleeps on the worker's event fd
 *     (ucp_worker_arm + poll) and progresses whatever arrives when nobody
 *     spins: waiters that stopped spinning sleep on their endpoint's event,
 *     which the receive callbacks notify. An idle DAG uses no CPU.
 *   - while a waiter spins, or one left with its value less than PARK_NS
 *     ago (it will be back: the next execution), and none sleeps, the
 *     progress thread stands aside, parked: the spinners see every event
 *     first, and a message costs no wake-up of a second thread (on a busy
 *     host that wake-up, a context switch per message on each side, was
 *     most of a round trip). A waiter that goes to sleep wakes it.
 * `lock` serializes every call on the worker (it is created single-
 * threaded) and guards the endpoint list and the connections; the AM
 * callbacks run inside progress, so under it.
 */
#ifndef ADAG_TRANSPORT_UCX_H
#define ADAG_TRANSPORT_UCX_H

#include "common/event.h"
#include "transport/channel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <ucp/api/ucp.h>

/* Active message ids of the UCX channel. */
#define ADAG_UCX_AM_DATA 21   /* writer -> reader: a value (or a failure) */
#define ADAG_UCX_AM_CREDIT 22 /* reader -> writer: released up to a seq */

/* Longest worker address accepted from a peer. */
#define ADAG_UCX_MAX_ADDR 8192

typedef struct adag_ucx_domain adag_ucx_domain_t;
typedef struct adag_ucx_chan adag_ucx_chan_t;

/* One UCP endpoint to a peer worker. `status` is ADAG_OK until UCX
 * reports the peer failed (set once, seq_cst, after `why`). `inflight`
 * counts this domain's UCX requests on it whose callback has not run
 * (sends, credits, rendezvous receives; under d->lock): the domain closes
 * a connection gracefully only when none is left (see conns_close in
 * ucx_domain.c). `flush` and `close` are the connection's flush and
 * close requests while the domain closes it (`flush_failed`: its flush
 * could not start). */
typedef struct adag_ucx_conn {
    struct adag_ucx_conn *next;
    adag_ucx_domain_t *d;
    ucp_ep_h ep;
    void *addr;
    size_t addr_len;
    _Atomic int32_t status;
    unsigned inflight;
    void *flush, *close;
    int flush_failed;
    char why[192];
} adag_ucx_conn_t;

struct adag_ucx_domain {
    adag_chan_domain_t base;
    char what[96];       /* "DAG name", for messages */
    pthread_mutex_t lock;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr; /* this worker's address (peer info) */
    size_t addr_len;
    int efd;             /* the worker's event fd */
    int stop_fd;         /* eventfd: the progress thread exits */
    int notify_fd;       /* eventfd: readers' notify_fd */
    int thread_started;
    pthread_t progress;
    /* Who progresses (adag__ucx_wait): waiters spinning (they progress the
     * worker themselves), waiters asleep (they need the progress thread),
     * when a spinner last left with its value (ns; it will be back soon),
     * and the word the progress thread parks on (bumped, then woken if
     * `parked`, by a waiter that goes to sleep and by destroy). */
    _Atomic uint32_t spinners;
    _Atomic uint32_t sleepers;
    _Atomic int64_t last_found;
    _Atomic uint32_t park_seq;
    _Atomic uint32_t parked;
    _Atomic uint32_t stopping;
    /* readers whose credit is due (changed under lock; read without it
     * only as a hint: whoever flushes looks again under the lock) */
    _Atomic uint32_t credits_due;
    /* UCX requests in flight (sends and receives not yet completed) */
    _Atomic uint32_t requests;
    adag_ucx_conn_t *conns;
    /* endpoints opened here, and closed ones whose UCX requests are still
     * in flight (freed when the domain goes, after every request ended) */
    adag_ucx_chan_t **eps;
    unsigned neps, cap;
    adag_ucx_chan_t *zombies;
};

/* The slot header every UCX endpoint keeps per slot: what was published
 * (the writer stages an error text here; a reader's lands here). */
typedef adag_slot_hdr_t adag_ucx_slot_t;

/* AM headers. A value's: which channel and reader, which execution, and
 * what the slot says of it; its bytes (or, for a failure, its message)
 * are the AM's data; `ncredits` credits follow the header (credits of
 * this process's readers whose writer is where the value goes, carried
 * along instead of sent on their own). A credit's: reader r of channel
 * `chan` released every seq below `released`. */
typedef struct {
    uint32_t chan;
    uint32_t reader;
    uint64_t seq;
    uint64_t size;
    int32_t status;
    uint32_t ncredits;
    adag_tensor_meta_t meta;
} adag_ucx_data_hdr_t;

typedef struct {
    uint32_t chan;
    uint32_t reader;
    uint64_t released;
} adag_ucx_credit_hdr_t;

/* Most credits one value carries. */
#define ADAG_UCX_MAX_CARRIED 4

/* A value's AM header as sent: the header and the credits it carries. */
typedef struct {
    adag_ucx_data_hdr_t h;
    adag_ucx_credit_hdr_t credits[ADAG_UCX_MAX_CARRIED];
} adag_ucx_data_msg_t;

/* What a request's callback needs: its endpoint, slot and connection
 * (`reader` r: the writer's connection to reader r; -1: a reader's to the
 * writer). */
typedef struct {
    adag_ucx_chan_t *ch;
    unsigned slot;
    int reader;
} adag_ucx_req_ctx_t;

struct adag_ucx_chan {
    adag_chan_t base;
    adag_ucx_domain_t *d;
    uint32_t index;       /* the channel's index in its DAG */
    unsigned nreaders;
    adag_ucx_slot_t *slots; /* per slot: what was published / landed there */
    size_t stride;        /* bytes per slot's value (adag__ucx_slot_stride) */
    char *mem;            /* nslots slots' values, registered with UCX */
    size_t mem_len;
    ucp_mem_h memh;
    adag_event_t ev;      /* readers: a value landed; the writer: a credit or a send completed */
    /* requests in flight that point at this endpoint (under d->lock) */
    _Atomic unsigned pending;
    adag_ucx_req_ctx_t *req_ctx;   /* the writer's per slot and reader; a reader's per slot */
    /* set once, seq_cst, after `why`: the endpoint cannot go on */
    _Atomic int32_t status;
    char why[320];
    /* the writer: connection to each reader, each reader's released count
     * (credits), sends of each slot still in flight, the AM headers */
    adag_ucx_conn_t **to_reader;
    _Atomic uint64_t *credit;
    _Atomic unsigned *slot_sends;
    adag_ucx_data_msg_t *hdrs; /* [slot * nreaders + r] */
    /* a reader: connection to the writer, seqs landed (contiguous),
     * per slot the seq + 1 that landed there, what it released and what
     * its last credit said (under d->lock; a credit is due while they
     * differ), credits in flight */
    adag_ucx_conn_t *to_writer;
    _Atomic uint64_t written;
    uint64_t *landed;
    uint64_t released;
    uint64_t credited;
    adag_ucx_credit_hdr_t *credits; /* per slot */
    _Atomic unsigned *slot_credits;
    _Atomic uint32_t notify_armed;
    adag_ucx_chan_t *next_zombie;
    /* an endpoint whose actor keeps the value on its device (NULL: in host
     * memory): its device and streams, and a device slot per ring slot
     * (transport/chan_ucx_dev.c) */
    const adag_chan_device_t *device;
    adag_dev_mem_t dev_slots;
};

/* Sends every due credit on its own (chan_ucx_msg.c; the _locked one under
 * d->lock). Credits wait for a value going the same way while the
 * progress thread is parked (it flushes them when it wakes): see
 * "Credits" in chan_ucx.c. */
void adag__ucx_credits_flush(adag_ucx_domain_t *d);
void adag__ucx_credits_flush_locked(adag_ucx_domain_t *d);
/* Progresses the worker if no other thread does (never blocks); how many
 * events it handled. */
unsigned adag__ucx_try_progress(adag_ucx_domain_t *d);
/* A waiter on one of the domain's endpoints: until `ready(arg)`, the
 * abort word or the deadline, spins up to spin->max progressing the worker
 * itself (the progress thread stands aside), then sleeps on ev, which the
 * receive callbacks notify, while the progress thread progresses. ready
 * only looks; it never progresses. */
adag_status_t adag__ucx_wait(adag_ucx_domain_t *d, adag_event_t *ev, adag_cond_fn ready,
                            const void *arg, const _Atomic uint32_t *abort, int64_t deadline,
                            adag_spin_t *spin);
/* Under d->lock: the connection to the worker at addr (made on first use).
 * `who` names the endpoint for messages. */
adag_status_t adag__ucx_conn_get(adag_ucx_domain_t *d, const void *addr, size_t len,
                                const char *who, adag_ucx_conn_t **out);
/* Under d->lock: lists / unlists an endpoint for the AM callbacks. */
adag_status_t adag__ucx_domain_add(adag_ucx_domain_t *d, adag_ucx_chan_t *ch);
void adag__ucx_domain_remove(adag_ucx_domain_t *d, adag_ucx_chan_t *ch);
/* Under d->lock: the endpoint of channel `index` in this process (reader
 * r, or the writer for r < 0), NULL if none. */
static inline adag_ucx_chan_t *adag__ucx_domain_find(adag_ucx_domain_t *d, uint32_t index,
                                                    int reader)
{
    for (unsigned i = 0; i < d->neps; i++)
        if (d->eps[i]->index == index && d->eps[i]->base.reader == reader)
            return d->eps[i];
    return NULL;
}

/* The domain operations of adag_chan_ucx_ops. */
adag_status_t adag__ucx_domain_create(const char *dag_name, const adag_chan_geom_t *geoms,
                                     const adag_chan_place_t *const *places, unsigned n,
                                     adag_wbuf_t *descs, adag_chan_domain_t **out);
adag_status_t adag__ucx_domain_export(adag_chan_domain_t *d, adag_wbuf_t *blob, int *fds,
                                     unsigned *nfds);
adag_status_t adag__ucx_domain_import(adag_blob_t blob, const int *fds, unsigned nfds,
                                     adag_chan_domain_t **out);
void adag__ucx_domain_destroy(adag_chan_domain_t *d);

/* Prints the UCP configuration this process's context is made with (UCX's
 * defaults and UCX_* variables, then adag's choices: ucp_config_print),
 * for tests. */
adag_status_t adag__ucx_config_print(FILE *f);

/* Bytes between two slots' values in an endpoint's registered ring of
 * slots of `capacity` bytes: a slot of a page or more starts on a page. A
 * copy into a slot then keeps the distance from its source that a
 * page-aligned buffer has: UCX's TCP fragments are copied from their
 * receive segment at a page offset of ~530 (UCX 1.13), and with the slot's
 * bytes 43 bytes after that offset (behind a 576-byte header, as before)
 * the copy ran at a third of its speed here (docs/design.md, "UCX
 * channels"). Smaller slots stay packed. */
size_t adag__ucx_slot_stride(size_t capacity);
/* adag_chan_ucx_ops.memory: every endpoint (the writer and each reader)
 * keeps a ring of nslots strides of its own. */
void adag__ucx_memory(const adag_chan_geom_t *g, const adag_chan_place_t *places, size_t *host,
                     size_t *device);

/* Slot seq's header and its value's bytes in an endpoint's ring. */
static inline adag_ucx_slot_t *adag__ucx_slot_of(adag_ucx_chan_t *c, uint64_t seq)
{
    return &c->slots[seq % c->base.nslots];
}

static inline char *adag__ucx_slot_data(adag_ucx_chan_t *c, uint64_t seq)
{
    return c->mem + (size_t)(seq % c->base.nslots) * c->stride;
}

/* The channel's messages (chan_ucx_msg.c), for the endpoint's ops
 * (chan_ucx.c), under d->lock where they touch credits or requests:
 * chan_fail fails the endpoint (the first reason stays) and wakes its
 * waiters; chan_error reports its failure (once, there) as the caller's
 * error; sent is a value's send callback; request_started counts a
 * request UCX did not finish in the call (its callback will run);
 * credit_taken marks the reader's due credit on its way (or lost with the
 * endpoint); credit_send sends it on its own; credits_carry takes the due
 * credits whose writer is at the other end of `to` into `out` (at most
 * ADAG_UCX_MAX_CARRIED) and says how many. */
void adag__ucx_chan_fail(adag_ucx_chan_t *c, adag_status_t st, const char *fmt, ...)
    ADAG_PRINTF(3, 4);
adag_status_t adag__ucx_chan_error(adag_ucx_chan_t *c);
void adag__ucx_sent(void *req, ucs_status_t us, void *arg);
void adag__ucx_request_started(const adag_ucx_req_ctx_t *x);
void adag__ucx_credit_taken(adag_ucx_chan_t *c);
void adag__ucx_credit_send(adag_ucx_chan_t *c);
uint32_t adag__ucx_credits_carry(adag_ucx_domain_t *d, const adag_ucx_conn_t *to,
                                adag_ucx_credit_hdr_t *out);

/* A reader's credit is due: it released more than its last credit said. */
static inline int adag__ucx_credit_is_due(const adag_ucx_chan_t *c)
{
    return c->base.reader >= 0 && c->released > c->credited;
}

/* chan_ucx_msg.c: the AM handlers (registered by the domain) and what a
 * connection's failure does to an endpoint; chan_ucx.c: freeing a closed
 * endpoint. */
ucs_status_t adag__ucx_on_data(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param);
ucs_status_t adag__ucx_on_credit(void *arg, const void *header, size_t header_length,
                                void *data, size_t length, const ucp_am_recv_param_t *param);
/* 1 when the endpoint used that connection (now failed) */
int adag__ucx_chan_peer_failed(adag_ucx_chan_t *ch, const adag_ucx_conn_t *c);
void adag__ucx_chan_free(adag_ucx_chan_t *ch);

/* Device endpoints, staged through the host ring (chan_ucx_dev.c):
 * read_places reads the descriptor's places (none: all in host memory)
 * and gives endpoint `reader`'s (0: malformed); open
 * checks the actor's device against the endpoint's place `me` and
 * allocates the device slots (nothing for a place in host memory); the
 * device slot of seq; stage_out copies a device writer's value to its
 * host slot, stage_in a landed value into the device reader's slot; both
 * wait for the copy (ADAG_ERR_CLOSED if the DAG was aborted meanwhile). */
int adag__ucx_dev_read_places(adag_rbuf_t *rb, uint32_t nreaders, int reader,
                             adag_chan_place_t *me);
adag_status_t adag__ucx_dev_open(adag_ucx_chan_t *c, const adag_chan_open_params_t *p,
                                adag_chan_place_t me);
void adag__ucx_dev_close(adag_ucx_chan_t *c);
void *adag__ucx_dev_slot(const adag_ucx_chan_t *c, uint64_t seq);
adag_status_t adag__ucx_dev_stage_out(adag_ucx_chan_t *c, uint64_t seq, void *host, size_t size);
adag_status_t adag__ucx_dev_stage_in(adag_ucx_chan_t *c, uint64_t seq, const void *host,
                                    size_t size);
/* A device endpoint's view of seq (view->data: its host slot, size bytes
 * landed there) turned into its device slot's. */
adag_status_t adag__ucx_dev_view(adag_ucx_chan_t *c, uint64_t seq, size_t size,
                                adag_slot_view_t *view);

#endif

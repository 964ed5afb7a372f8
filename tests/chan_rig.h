/*
 * The channel conformance table and the rig that opens channels the real
 * way, shared by the unit suites "chan" (tests/unit_channel.c), "shm" and
 * "ctx" (tests/unit_context.c).
 *
 * Every backend of transport/channel.c has one line in chan_backends[]
 * (tests/unit_channel.c): its kind and what it can do. A conformance test
 * names the capabilities it needs and runs on every backend that has them,
 * through the ops table only; a test that does not apply to a backend never
 * runs on it. Adding a backend (ucx, cuda_ipc) = one line in the table.
 *
 * The rig lays out a channel as the driver does (adag__ctx_create_domains),
 * opens the writer in the driver's context, exports the domains, imports a
 * copy (dup'd fds) into a second context as a worker would and opens the
 * readers there, then connects every endpoint if the backend connects.
 */
#ifndef ADAG_TESTS_CHAN_RIG_H
#define ADAG_TESTS_CHAN_RIG_H

#include "common/clock.h"
#include "dag/exec/context.h"
#include "tests/chan_index.h"
#include "transport/channel.h"
#include "transport/control.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* What a backend can do (the conformance tests select on these). */
enum {
    /* Separate reader endpoints (reader r of nreaders) and nslots values in
     * flight; wait and acquire block until data / space arrive, the
     * deadline passes or the DAG aborts. Without it (self) the only
     * endpoint is the writer, which reads its own one slot in the same
     * iteration, and nothing ever blocks. */
    CAP_RING = 1u << 0,
    /* open checks the geometry against what the descriptor points at */
    CAP_GEOM_CHECKED = 1u << 1,
    /* notify_fd: a pollable fd signalled after each publish */
    CAP_NOTIFY_FD = 1u << 2,
    /* an exported domain imported in another (forked) process works */
    CAP_FORK = 1u << 3,
    /* Not a capability but an arrangement: the device endpoints move the
     * value by a communicator (geom.comm_key; the rig makes one, a rank per
     * device endpoint). Its readers move together: a send holds the
     * writer's stream until its reader received, so a test's single thread
     * takes each value from every reader before the next one. */
    CAP_BY_COMM = 1u << 4,
    /* Endpoints share no memory (another host): a publish reaches the
     * readers a little later, not by the time it returns (ready turns true,
     * a notify fd readable, shortly after), and an endpoint opened late
     * has a ring of its own that nothing was sent to. */
    CAP_ASYNC = 1u << 5,
    /* An arrangement too: the devices' hand-offs are by IPC events
     * (tuning.memops 0, as ADAG_DEVICE_MEMOPS=0) instead of value ops. */
    CAP_IPC_EVENTS = 1u << 6,
};

/* A line: a backend, and where its writer and readers keep values (-1
 * host memory, else that emulated device). A backend whose behaviour
 * depends on the places (device) has a line per arrangement. */
typedef struct {
    uint32_t kind; /* its backend: CHAN_* (tests/chan_index.h) */
    unsigned caps;
    char label[48]; /* an array: Criterion copies a line into the test's process */
    int wdev, rdev;
} chan_backend_t;

extern const chan_backend_t chan_backends[];
extern const unsigned chan_nbackends;

/* The lines that have every capability in `needs`, as Criterion's
 * parameters (tests/unit_chan_rig.c). */
struct criterion_test_params chan_backends_with(unsigned needs);

/* A conformance test of suite "chan": runs once per line with the
 * capabilities `needs`, `be` its line (tests/unit_channel.c,
 * tests/unit_channel_errors.c). */
#define CONFORMANCE(name, needs)                                                             \
    ParameterizedTestParameters(chan, name)                                                  \
    {                                                                                        \
        return chan_backends_with(needs);                                                    \
    }                                                                                        \
    ParameterizedTest(const chan_backend_t *be, chan, name, .timeout = 60)

#define RIG_MAX_READERS 8
/* The rig's communicator (CAP_BY_COMM), as the driver numbers them. */
#define RIG_COMM_KEY 0x7e57c0deull

/* The waits of tests: spin briefly, then sleep. */
static const adag_wait_policy_t RIG_POLICY = {2000, 0};

typedef struct {
    const chan_backend_t *be;
    const adag_chan_ops_t *ops;
    adag_dag_ctx_t drv;  /* the driver: the domain is created here, the writer opened here */
    adag_dag_ctx_t peer; /* a worker: imported from drv's export, readers opened here */
    int one_ctx;         /* readers opened in drv as well (thread actors of the driver) */
    adag_chan_geom_t geom;
    adag_wbuf_t desc;    /* the channel's descriptor */
    adag_chan_t *w;
    /* reader r; for a backend without CAP_RING, rd[0] is the writer itself */
    adag_chan_t *rd[RIG_MAX_READERS];
    unsigned nrd;
    adag_chan_place_t places[1 + RIG_MAX_READERS];
    /* the device and streams of the writer (0) and reader r (1 + r): an
     * actor each, as in a DAG (dev NULL for a host endpoint) */
    adag_chan_device_t devs[1 + RIG_MAX_READERS];
    /* CAP_BY_COMM: each device endpoint's communicator (rank = its place's
     * comm_rank, the writer 0, then the device readers in order) on a
     * stream of its own, as its actor joined it (comm NULL: none) */
    adag_chan_comm_t comms[1 + RIG_MAX_READERS];
} rig_t;

#define RIG_ONE_CTX 1

/* Opens one channel with nreaders readers (0 for a backend without
 * CAP_RING) on backend be; asserts every step. */
void rig_open(rig_t *r, const chan_backend_t *be, unsigned nslots, unsigned nreaders,
              size_t capacity, int flags);
/* The same with reader i on emulated device rdevs[i] (-1: host memory)
 * instead of be->rdev. */
void rig_open_at(rig_t *r, const chan_backend_t *be, unsigned nslots, unsigned nreaders,
                 size_t capacity, int flags, const int *rdevs);
/* Closes the channel (its endpoints close without any abort: every value
 * sent must have been received) and asserts the devices hold nothing of
 * it; then opens a new channel of the same endpoints and places, on the
 * same devices, streams and communicator (an actor's next DAG). */
void rig_reopen(rig_t *r, unsigned nslots, size_t capacity);
/* Closes everything; a communicator is aborted first (a test may leave
 * values unread, whose sends would hold the writer's stream) and every
 * device, communicator and id count must be back to zero. */
void rig_close(rig_t *r);
/* Another endpoint of the rig's channel in ctx (reader -1 = a writer). */
adag_status_t rig_endpoint(rig_t *r, adag_dag_ctx_t *ctx, int reader, adag_chan_t **out);
/* The driver's domains exported, with dup'd fds (the caller owns them). */
void rig_export(adag_dag_ctx_t *drv, adag_wbuf_t *blob, int *fds, unsigned *nfds);

/* Values: seq's bytes are a pattern of seq; its size varies with seq. */
size_t value_size(uint64_t seq, size_t capacity);
void value_fill(void *buf, uint64_t seq, size_t size);
/* 0 if v holds seq's value of `size` bytes with status OK; else a code. */
int value_check(const adag_slot_view_t *v, uint64_t seq, size_t size);
/* acquire + fill + publish seq (size value_size); the acquire's status */
adag_status_t value_put(adag_chan_t *w, uint64_t seq, int64_t deadline);
/* wait + check + release seq: 0, or a code (negative: the wait's status) */
int value_get(adag_chan_t *rd, uint64_t seq, int64_t deadline);

/* A call that may block, run in a thread: acquire (the writer) or wait. */
typedef struct {
    adag_chan_t *ch;
    int acquire;
    uint64_t seq;
    int64_t deadline;
    _Atomic int *done; /* incremented when the call returned */
    adag_status_t st;
    double ms;         /* how long it took */
    pthread_t th;
} blocked_t;

void blocked_start(blocked_t *b, adag_chan_t *ch, int acquire, uint64_t seq, int64_t deadline,
                   _Atomic int *done);
void blocked_join(blocked_t *b);

/* The waits of the tests, for every line: a device endpoint's compute
 * stream is synchronized after the wait (the data has arrived) and after
 * acquire (the readers are done with the slot) before the test's host
 * thread touches the bytes, the way a kernel enqueued there would run
 * only then. The tests call adag__chan_wait/acquire; these are what runs. */
adag_status_t rig_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline, adag_slot_view_t *v);
adag_status_t rig_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf);
/* A device writer publishes from its streams (after its copy to host
 * memory): the tests that check what a publish made visible look once it
 * took effect, which the rig waits for (the comm stream synchronized).
 * Sends by communicator are on the communicator's own stream, which is not
 * synchronized: a send lasts until its reader received. */
adag_status_t rig_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                          const adag_tensor_meta_t *meta, adag_status_t status, const char *err);
#ifndef RIG_NO_WRAP
#define adag__chan_wait rig_wait
#define adag__chan_acquire rig_acquire
#define adag__chan_publish rig_publish
#endif

/* ready(seq), at once, or within PROMPT_MS on a CAP_ASYNC backend. */
int rig_ready(const chan_backend_t *be, adag_chan_t *ch, uint64_t seq);

/* milliseconds since t0 (adag__now_ns) */
static inline double ms_since(int64_t t0)
{
    return (double)(adag__now_ns() - t0) / 1e6;
}

/* "Promptly", on 2 shared cores. */
#define PROMPT_MS 2000.0

#endif

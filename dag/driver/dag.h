/*
 * dag/driver/: a compiled DAG in the driver. Compiling (compile.c: the
 * compiler's passes of dag/graph/, the channels' domains and the driver's
 * endpoints) and installing it on its actors (install.c); the ref
 * window, execute/get/release and the DAG fd (driver.c); reservations,
 * the zero-copy inputs (reserve.c); the driver's own device
 * (driver_device.c). struct adag_dag is made of the parts each folder
 * owns: `run` (dag/proc/: its actors, their programs and loops, the
 * context), `plan` (dag/graph/: channels, geometry, communicators) and the
 * driver's fields below them. Below: dag/graph/, dag/proc/, dag/exec/.
 * Above: dag/observe/ (statistics, trace export, DOT, live view) and
 * dag/runtime.c.
 */
#ifndef ADAG_DAG_DRIVER_H
#define ADAG_DAG_DRIVER_H

#include "common/error.h"
#include "common/trace.h"
#include "dag/exec/actor_device.h"
#include "dag/graph/graph.h"
#include "dag/graph/plan.h"
#include "dag/proc/proc.h"
#include "transport/channel.h"

#include <adag.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

enum {
    REF_GOTTEN = 1,     /* get returned it */
    REF_RELEASED = 2,   /* released (or cancelled): its slots go back once it completes */
    REF_RESERVED = 4,   /* reserved, being filled */
    REF_COMMITTED = 8,  /* committed: a ref the caller may get */
    REF_CANCELLED = 16, /* cancelled: published as a skipped execution */
};

/* The driver's endpoints of a DAG (opened by dag/driver/compile.c, closed
 * by adag__dag_free): one writer per input field, the start and ticket
 * channels' writers, one reader per distinct output channel. */
typedef struct {
    adag_chan_t **inputs;      /* writer endpoint per input field */
    unsigned *input_chan;      /* channel id per input field */
    uint64_t (*input_counts)[2]; /* per input field: values, bytes published (under lock) */
    adag_chan_t *start;        /* the writer endpoint of plan.start_chan */
    /* The turns on shared communicators (plan.lease_order_chan): the
     * writer endpoints of the ticket channels, their leases and reserved
     * slots ([ref % max_inflight][i]), plan.norders of each */
    adag_chan_t **orders;
    struct adag_comm_lease **order_leases;
    void **order_bufs;
    adag_chan_t **outs;        /* reader endpoints, one per distinct output channel */
    unsigned nouts;
    unsigned *out_chan;        /* channel id per out endpoint */
    unsigned *output_of;       /* out endpoint per graph output */
    unsigned noutputs;
    /* the driver's device (adag_compile_params_t.driver_device), opened
     * here; NULL: none (dag/driver/driver_device.c) */
    adag_actor_device_t *driver_dev;
} adag_dag_ends_t;

/* Reservations (dag/driver/reserve.c): refs [next_publish, next_reserve)
 * are reserved, filled by any threads and committed or cancelled in any
 * order; they are published in ref order. One thread at a time takes the
 * next ref (`acquiring`: room in the window, then every input slot),
 * never holding the lock across a wait. Under the DAG's lock. */
typedef struct {
    int acquiring;
    uint64_t next_reserve;     /* refs below it were handed out */
    uint64_t next_publish;     /* refs below it are published */
    void **slot_bufs;          /* [ref % max_inflight][input]: the acquired input slots (a
                                * device slot for an input on the driver's device) */
    size_t *slot_sizes;        /* [ref % max_inflight][input]: the committed sizes */
    adag_tensor_meta_t *slot_metas; /* [ref % max_inflight][input]: dtype 0: bytes */
    pthread_t *slot_owner;     /* [ref % max_inflight]: the thread that reserved it */
    unsigned nreserved;        /* reservations not yet committed or cancelled (destroy
                                * waits for them, up to the teardown timeout) */
    /* The pinned staging of the inputs on the driver's device
     * (dag/driver/driver_device.c), [ref % max_inflight][input]: a buffer
     * of the input's capacity (ptr NULL for a host input), the event
     * recorded after the commit's copy out of it, and whether that copy
     * may still run (set by the commit under lock; waited for and cleared
     * by the next reservation of the slot, in the acquiring thread). NULL:
     * no input on the device. */
    adag_dev_mem_t *staging;
    adag_dev_event_t **staged;
    uint8_t *staged_pending;
} adag_dag_resv_t;

/* A compiled DAG in the driver: the parts of the folders below it, the
 * driver's endpoints and reservations, and the ref window (driver.c,
 * window.c) with what its lock guards. */
struct adag_dag {
    adag_dag_run_t run;        /* its actors' side (dag/proc/proc.h): id, name, actors,
                                  the driver's context, the DAG fd's notify fds */
    adag_plan_t plan;          /* its channels and communicators (dag/graph/plan.h) */
    adag_dag_ends_t ends;      /* the driver's endpoints */
    adag_dag_resv_t resv;      /* reservations, under lock */
    int execute_timeout_ms, teardown_timeout_ms;
    adag_wait_policy_t wait;   /* spin_ns -1 until choose_spin */
    adag_trace_ring_t *trace;  /* the driver's spans (execute, get); NULL: off */

    /* The ref window */
    pthread_mutex_t lock;      /* the ref window, reservations, abort state, fd, stats */
    pthread_cond_t cond;       /* a ref was released / a ref was taken / the DAG failed */
    int cond_waiters;          /* threads in adag__dag_cond_wait (wakes cost nothing without) */
    uint64_t next_release;     /* refs below it are released */
    uint8_t *ref_flags;        /* REF_* per slot */
    adag_status_t abort_status;
    char abort_msg[256];
    int closing;
    int api_users;             /* threads inside execute/get/release */
    adag_dag_stats_t stats;
    /* adag_dag_fd hands out user_fd, which only the driver writes, under
     * lock: readable exactly while a ref is ready and not got. Once it is
     * armed the output endpoints' writers signal run.notify_fds, and the
     * monitor calls back adag__dag_update_fd through the run's ops. */
    int user_fd;
    int user_fd_ready;         /* user_fd holds a token; under lock */

    /* comm_keep: its communicators (plan.comm_leases) are given back for
     * the next DAG (it ended cleanly) */
    int comm_keep;
    /* set once the DAG left its leases (adag_dag_destroy, before STOP):
     * bit i of comm_gone, lease i is gone (its actors drop it) */
    int comm_left;
    uint64_t comm_gone;
};

/* The DAG's answers to its run record's upcalls (fail, notified). */
extern const adag_dag_run_ops_t adag__dag_run_ops;
/* The DAG leaves its leases (keeping them if comm_keep); sets comm_gone
 * and what each actor drops at STOP (run.actors[ai].comm_drop). */
void adag__dag_leave_leases(adag_dag_h dag);

/* install.c: PREPARE -> CONNECT -> START of a compiled DAG, each on every
 * actor at once; the first failure (in actor order) is the result. */
adag_status_t adag__dag_install(adag_dag_h dag);

/* driver.c */
/* Fails the DAG: every waiter wakes and gets `status` with `msg`. */
void adag__dag_fail(adag_dag_h dag, adag_status_t status, const char *msg);

/* The driver's device (dag/driver/driver_device.c). open: from the compile
 * param's spec; close: after the endpoints. */
adag_status_t adag__dag_driver_device_open(adag_dag_h dag, const char *spec);
void adag__dag_driver_device_close(adag_dag_h dag);
/* Whether input field i's slot is on the driver's device. */
int adag__dag_input_on_device(adag_dag_h dag, unsigned i);
/* A device tensor given to execute for input i is allowed (on the
 * driver's device, for a field that lives there). */
adag_status_t adag__dag_check_device_input(adag_dag_h dag, const char *fn, unsigned i,
                                          const adag_value_t *v);
/* The pinned staging of the inputs on the driver's device: allocated at
 * compile (after the driver's endpoints), freed by
 * adag__dag_driver_device_close once the stream drained. */
adag_status_t adag__dag_staging_open(adag_dag_h dag);
/* Input i's staging buffer for ref (NULL: a host input). */
void *adag__dag_staging_buf(adag_dag_h dag, uint64_t ref, unsigned i);
/* The reservation of ref, before its views go out: the copies out of its
 * slot's staging (ref - max_inflight's) are done; ADAG_ERR_AGAIN at once
 * (nonblock) or ADAG_ERR_TIMEOUT at the deadline if not. */
adag_status_t adag__dag_staging_wait(adag_dag_h dag, uint64_t ref, int nonblock, int64_t deadline,
                                    const char *fn);
/* The commit of ref (under lock): enqueues on the compute stream the copy
 * of each device input not written in its slot (bufs: the acquired slots):
 * from its staging (device ADAG_DEVICE_HOST; the event recorded after it)
 * or, device to device, from inputs[i].data. */
adag_status_t adag__dag_copy_device_inputs(adag_dag_h dag, uint64_t ref, void *const *bufs,
                                          const adag_value_t *inputs, const char *fn);
/* The wait policy of actor ai's loop in this DAG (-1: the driver's). */
adag_wait_policy_t adag__dag_policy(adag_dag_h dag, int ai);
/* Makes user_fd readable exactly while some live ref is ready and not got
 * (or the DAG failed). Under dag->lock. */
void adag__dag_update_fd(adag_dag_h dag);
/* The ref window's primitives (dag/driver/window.c), shared by driver.c,
 * reserve.c and dag/observe/. */
adag_status_t adag__dag_abort_error(adag_dag_h dag, const char *fn); /* under lock */
adag_status_t adag__dag_wait_error(adag_dag_h dag, adag_status_t st, const char *fn);
int adag__dag_ref_complete(adag_dag_h dag, uint64_t ref);
void adag__dag_advance_releases(adag_dag_h dag);                 /* under lock */
void adag__dag_cond_wait(adag_dag_h dag, int64_t deadline);     /* under lock */
/* Wakes the threads in adag__dag_cond_wait, if any (under lock). */
static inline void adag__dag_wake(adag_dag_h dag)
{
    if (dag->cond_waiters)
        pthread_cond_broadcast(&dag->cond);
}
/* Every API call on a DAG enters (ADAG_ERR_CLOSED once destroy began) and
 * leaves; destroy waits until no thread is inside. Inline: on the hot
 * path of execute, get and release. */
static inline adag_status_t adag__dag_api_enter(adag_dag_h dag, const char *fn)
{
    pthread_mutex_lock(&dag->lock);
    if (dag->closing) {
        pthread_mutex_unlock(&dag->lock);
        return adag__error(ADAG_ERR_CLOSED, "%s: DAG %s is being destroyed", fn, dag->run.name);
    }
    dag->api_users++;
    pthread_mutex_unlock(&dag->lock);
    return ADAG_OK;
}

static inline void adag__dag_api_leave(adag_dag_h dag)
{
    pthread_mutex_lock(&dag->lock);
    if (--dag->api_users == 0 && dag->closing)
        adag__dag_wake(dag);
    pthread_mutex_unlock(&dag->lock);
}
void adag__dag_fail_locked(adag_dag_h dag, adag_status_t status, const char *msg);
adag_status_t adag__dag_check_ref(adag_dag_h dag, adag_ref_t ref, const char *fn); /* under lock */
/* reserve.c: cancels the open reservations of the calling thread
 * (own_only) or of every thread (destroy); returns how many. Under lock. */
unsigned adag__dag_drop_reservations(adag_dag_h dag, int own_only);
/* Frees a DAG whose loops have stopped (or never started). */
void adag__dag_free(adag_dag_h dag);


#endif

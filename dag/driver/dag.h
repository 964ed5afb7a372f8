/* Driver-side objects: runtime, actors, graphs, nodes and compiled DAGs. */
#ifndef ADAG_DAG_INTERNAL_H
#define ADAG_DAG_INTERNAL_H

#include "common/error.h"
#include "common/names.h"
#include "common/settings.h"
#include "common/value.h"
#include "dag/actor_device.h"
#include "dag/actor_place.h"
#include "dag/context.h"
#include "dag/loop.h"
#include "dag/program.h"
#include "transport/channel.h"
#include "transport/protocol.h"
#include "transport/tcp.h"

#include <adag.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

typedef struct adag_class_entry {
    adag_class_def_t def;         /* names point into the copies below */
    char name[ADAG_MAX_NAME];
    adag_method_info_t *methods;
    struct adag_class_entry *next;
} adag_class_entry_t;

typedef struct adag_list {
    struct adag_list *prev, *next;
} adag_list_t;

struct adag_runtime {
    pthread_mutex_t lock;      /* lists, ids, actor death/reap state */
    pthread_cond_t cond;       /* signalled when a worker is reaped */
    /* its settings (common/settings.h): its config's or the environment's
     * at creation; read-only afterwards, read without a lock */
    adag_settings_t settings;
    char *worker_path;
    adag_class_entry_t *classes;
    adag_list_t actors, graphs, dags;
    /* its live view (dag/live_view.c), NULL: closed; under live_lock */
    struct adag_live_view *live;
    pthread_mutex_t live_lock;
    unsigned next_actor_id, next_dag_id;
    /* the monitor thread (dag/monitor.c): spawns workers, watches their
     * pidfds and reaps them, keeps armed DAG fds exact */
    pthread_t monitor;
    int monitor_wake;          /* eventfd: the actor or DAG set changed / a spawn / stop */
    int monitor_stop;
    struct adag_spawn_req *spawn_reqs; /* spawns waiting for the monitor; under lock */
    /* communicators made for DAGs (dag/comm_lease.c); under lock */
    struct adag_comm_lease *comm_leases;
    uint64_t next_comm_key;
    /* the tickets of shared communicators (dag/comm_lease.c): taken for
     * all communicators of one execution at once, so every communicator's
     * turns follow one order (after a DAG's own lock, never before it) */
    pthread_mutex_t order_lock;
};

/* The steps of installing and removing a DAG on an actor. */
typedef enum {
    ADAG_STEP_PREPARE, /* open the actor's channel endpoints; collect their peer info */
    ADAG_STEP_CONNECT, /* hand every endpoint its peers' info */
    ADAG_STEP_START,   /* start the actor's loop */
    ADAG_STEP_STOP,    /* stop the loop (the DAG is aborted) and free the actor's part */
} adag_step_t;

/* What an observation asks each actor of a DAG (adag__actors_ask). */
typedef enum {
    ADAG_ASK_FIGURES, /* its loop's figures (dag/loop_stats.h) */
    ADAG_ASK_TRACE,   /* a copy of its loop's trace records */
} adag_ask_t;

/* An actor's answer: figures (ADAG_ASK_FIGURES), or trace records
 * (ADAG_ASK_TRACE: recs malloc'd, NULL if none, stamps in its process's
 * ns; lost: the records overwritten; offset_ns maps its clock to the
 * driver's). adag__answer_free frees either. */
typedef struct {
    adag_loop_figures_t figures;
    adag_trace_rec_t *recs;
    uint64_t nrecs, lost;
    int64_t offset_ns;
} adag_answer_t;

void adag__answer_free(adag_answer_t *ans);

/*
 * Where an actor runs: a thread of the driver (dag/placement_thread.c) or
 * an adag-worker process (dag/placement_process.c); an actor on another
 * host is one more table. Everything in dag/ goes through these.
 *
 * DAG steps run on all of a DAG's actors at once (adag__actors_step): lock
 * (optional) is taken in actor-id order; step_begin either completes the
 * step at once (*pending 0) or sends it, and then step_fd polls readable
 * when the answer is there and step_end takes it; unlock ends the step.
 */
typedef struct adag_placement_ops {
    const char *name; /* "thread", "process" */
    /* Creates the actor's state (and worker); fills methods/nmethods and place. */
    adag_status_t (*create)(adag_actor_h a, const adag_actor_params_t *p, adag_blob_t init);
    void (*lock)(adag_actor_h a);
    void (*unlock)(adag_actor_h a);
    adag_status_t (*step_begin)(adag_actor_h a, adag_dag_h dag, unsigned ai, adag_step_t step,
                                int *pending);
    int (*step_fd)(adag_actor_h a);
    adag_status_t (*step_end)(adag_actor_h a, adag_dag_h dag, unsigned ai, adag_step_t step,
                              int64_t deadline);
    /* Aborts the DAG on the actor now; never blocks, takes no lock but leaf
     * ones (called with rt->lock and dag->lock held). NULL: the actor shares
     * the driver's DAG context. */
    void (*abort_dag)(adag_actor_h a, adag_dag_h dag, adag_status_t status);
    /* Runs fini / shuts the worker down (once nothing holds the actor). */
    void (*stop)(adag_actor_h a);
    /* Kills it and waits (bounded) until the monitor collected it; NULL: cannot. */
    void (*kill)(adag_actor_h a, const char *why);
    /* What the monitor polls; readable once the actor died (-1: it cannot die alone). */
    int (*liveness_fd)(adag_actor_h a);
    /* Collects a dead actor: 1 and how it ended, 0 if it has not exited. Under rt->lock. */
    int (*reap)(adag_actor_h a, char *how, size_t len);
    /* The socket the worker reports DAG failures on (DAG_FAILED), which
     * the monitor reads; -1 (or NULL): none. events_close closes it (the
     * worker hung up or sent garbage). Both under rt->lock. */
    int (*events_fd)(adag_actor_h a);
    void (*events_close)(adag_actor_h a);
    int (*pid)(adag_actor_h a);
    /* Observation (statistics, the trace, the live view): what the
     * actor's loop of DAG `dag` (actor index ai) says now, asked of every
     * actor at once by one deadline (adag__actors_ask), so that one that
     * does not answer costs the others nothing. ask_begin answers at once
     * (*pending 0, out filled), fails, or sends the request (*pending 1):
     * step_fd then polls readable once an answer begins; ask_end takes it
     * (by the deadline), or ask_cancel leaves it unanswered at the
     * deadline (dropped when it comes). Every ask_begin that left
     * *pending 1 is followed by exactly one of the two. */
    adag_status_t (*ask_begin)(adag_actor_h a, adag_dag_h dag, unsigned ai, adag_ask_t what,
                               int64_t deadline, int *pending, adag_answer_t *out);
    adag_status_t (*ask_end)(adag_actor_h a, adag_dag_h dag, unsigned ai, adag_ask_t what,
                             int64_t deadline, adag_answer_t *out);
    void (*ask_cancel)(adag_actor_h a);
    void (*free)(adag_actor_h a);
} adag_placement_ops_t;

extern const adag_placement_ops_t adag_placement_thread;
extern const adag_placement_ops_t adag_placement_process;

struct adag_actor {
    adag_list_t link;
    adag_runtime_h rt;
    const adag_placement_ops_t *ops;
    void *impl;                /* the placement's state */
    unsigned id;
    char name[ADAG_MAX_NAME];
    char class_name[ADAG_MAX_NAME];
    adag_method_info_t *methods;
    unsigned nmethods;
    adag_place_t place;        /* where it runs (dag/actor_place.h), as its host decided;
                                * its CPUs decide its loops' wait policy */
    /* Its device (adag_actor_params_t.device) as the driver knows it: the
     * backend (adag_device_kind_t), -1 for a host actor, and the index. The
     * device is opened where the actor's code runs (the placement's). */
    int32_t device_kind;
    unsigned device_index;
    int refs;                  /* memory: user handle + graphs + DAGs; under rt->lock */
    int live;                  /* running: user handle + DAGs; under rt->lock */
    int user_destroyed;        /* the user gave up the handle */
    int stopped;               /* fini ran / the worker was shut down */
    int creating;              /* adag_actor_create has not returned yet: the name is taken */
    int dead;                  /* under rt->lock */
    int reaped;                /* under rt->lock */
    char death[160];           /* why it died; under rt->lock */
    /* ADAG_PLACEMENT_REMOTE: its node, the agent's "address:port" (for the
     * compiler: actors with the same node share a machine); "" on the
     * driver's node */
    char node[ADAG_HOSTPORT_MAX];
};

typedef enum { NODE_INPUT, NODE_CALL, NODE_RETURN } adag_node_kind_t;

/* A collective of a graph (dag/graph_collective.c): its member i runs on
 * the actor of inputs[i] and yields outputs[i] (a one-return CALL node
 * whose coll points here). */
typedef struct adag_collective {
    unsigned id;               /* per graph: "allreduce#0" */
    adag_coll_kind_t kind;
    adag_reduce_op_t op;       /* ALLREDUCE, REDUCESCATTER */
    unsigned root;             /* BROADCAST */
    unsigned n;
    adag_node_h *inputs, *outputs;
} adag_collective_t;

struct adag_node {
    adag_graph_h graph;
    unsigned id;
    adag_node_kind_t kind;
    unsigned field;            /* INPUT */
    adag_actor_h actor;        /* CALL */
    unsigned method;
    unsigned nargs, nreturns;
    adag_node_h args[ADAG_MAX_ARGS];
    adag_node_h call;          /* RETURN: the call it comes from */
    unsigned ret;              /* RETURN: which return */
    adag_node_h *returns;      /* CALL with nreturns > 1: RETURN nodes made so far */
    int used;                  /* INPUT: read by a call */
    adag_tensor_decl_t tensor; /* adag_node_tensor (INPUT, one-return CALL, RETURN) */
    /* adag_node_channel (the same nodes): the ADAG_CHANNEL_PARAM_* bits
     * given and their values */
    uint64_t chan_mask;
    size_t chan_max_bytes;
    unsigned chan_slots;
    adag_collective_t *coll;   /* CALL: member `member` of this collective, not a method */
    unsigned member;
};

struct adag_graph {
    adag_list_t link;
    adag_runtime_h rt;
    pthread_mutex_t lock;
    adag_node_h *nodes;
    unsigned nnodes, cap;
    adag_node_h *outputs;
    unsigned noutputs;
    int has_outputs;
    int compiled;
    adag_actor_h *actors;      /* actors bound (one reference each) */
    unsigned nactors;
    adag_collective_t **colls; /* its collectives, in the order they were made */
    unsigned ncolls;
};

/* graph.c, for graph_collective.c (under g->lock) */
adag_status_t adag__graph_add_node(adag_graph_h g, adag_node_h *out);
adag_status_t adag__graph_check_open(adag_graph_h g, const char *fn);
adag_status_t adag__graph_check_value(adag_graph_h g, adag_node_h n, const char *fn,
                                     const char *role, unsigned index);
/* "allreduce", "allgather", "reducescatter", "broadcast" */
const char *adag__coll_kind_name(adag_coll_kind_t kind);

/* A channel of a compiled DAG, as the driver knows it. */
typedef struct {
    char name[96];
    uint32_t backend;          /* its backend: an index of the registry (transport/channel.c) */
    int writer;                /* DAG actor index, -1 for the driver */
    unsigned nreaders;         /* registered readers */
    int *readers;              /* DAG actor index per reader, -1 for the driver */
    adag_wbuf_t desc;          /* the backend's descriptor */
    adag_wbuf_t driver_info;   /* peer info of the driver's endpoint, if it has one */
    unsigned producer_node;    /* node that produces it (for DOT); start: none */
    adag_tensor_decl_t tensor; /* what adag_node_tensor declared of its value */
    adag_chan_place_t *places; /* where the writer (0) and reader r (1 + r) keep values */
    uint64_t comm_key;         /* ADAG_TRANSPORT_COMM: its communicator; 0: none */
    /* its geometry (dag/compile_geom.c): slots, bytes per slot, readers,
     * communicator; asked_slots: adag_node_channel gave its slot count */
    adag_chan_geom_t geom;
    int asked_slots;
    /* the memory it holds, every endpoint together (its backend's
     * `memory`): host (its ring in the shm segment, or each endpoint's
     * own) and device */
    size_t host_bytes, device_bytes;
} adag_dag_chan_t;

typedef struct {
    adag_actor_h actor;
    adag_program_t prog;       /* kept for DOT (process actors get a copy) */
    adag_loop_t loop;          /* thread actors */
    adag_wbuf_t infos;         /* PREPARE's answer: peer info per program channel */
    adag_wbuf_t peers;         /* CONNECT's payload */
    _Atomic int prepared;      /* PREPARE was sent: STOP must follow (read by adag__dag_fail) */
} adag_dag_actor_t;

enum {
    REF_GOTTEN = 1,     /* get returned it */
    REF_RELEASED = 2,   /* released (or cancelled): its slots go back once it completes */
    REF_RESERVED = 4,   /* reserved, being filled */
    REF_COMMITTED = 8,  /* committed: a ref the caller may get */
    REF_CANCELLED = 16, /* cancelled: published as a skipped execution */
};

struct adag_dag {
    adag_list_t link;
    adag_runtime_h rt;
    unsigned id;
    char name[64];
    unsigned max_inflight;
    /* the slot size of a channel whose value asks for none
     * (adag_compile_params_t.slot_capacity); each channel's own is in its
     * geom, and the driver's endpoints know theirs (inputs[i]->capacity) */
    size_t default_capacity;
    int execute_timeout_ms, teardown_timeout_ms;
    int comm_timeout_ms; /* <= 0: device communication ops are not watched */
    adag_wait_policy_t wait;   /* spin_ns -1 until choose_spin */
    uint64_t trace_spans;      /* per loop and the driver; 0: tracing off */
    adag_trace_ring_t *trace;  /* the driver's spans (execute, get); NULL: off */

    adag_dag_actor_t *actors;
    unsigned nactors;
    adag_dag_chan_t *chans;
    unsigned nchans;
    char (*node_labels)[160];  /* per graph node, for DOT */
    unsigned nnodes;

    adag_dag_ctx_t ctx;        /* the DAG in the driver's process: abort word, domains,
                                  every endpoint of the driver and its thread actors */
    unsigned start_chan;       /* channel published as each execution starts, or
                                  ADAG_PROG_NO_CHAN */
    adag_chan_t *start;        /* its writer endpoint */
    /* The turns on shared communicators: per DAG lease, the channel by
     * which the driver hands each execution its ticket (8 bytes, read by
     * every rank), or ADAG_PROG_NO_CHAN (an exclusive lease); the writer
     * endpoints, their leases and reserved slots ([ref % max_inflight][i]) */
    unsigned *lease_order_chan;
    adag_chan_t **orders;
    struct adag_comm_lease **order_leases;
    void **order_bufs;
    unsigned norders;
    /* Once adag_dag_fd armed the output endpoints, their writers signal
     * notify_fds (the backends' pollable fds, distinct) after publishing;
     * the monitor then recomputes the state of user_fd, the fd adag_dag_fd
     * hands out, which only the driver writes, under lock: readable exactly
     * while a ref is ready and not got. */
    _Atomic int fd_armed;
    int *notify_fds;
    unsigned nnotify;
    int user_fd;
    int user_fd_ready;         /* user_fd holds a token; under lock */

    /* driver endpoints */
    adag_chan_t **inputs;      /* writer endpoint per input field */
    uint64_t (*input_counts)[2]; /* per input field: values, bytes published (under lock) */
    /* the driver's device (driver_device), opened here; NULL: none
     * (dag/driver_device.c) */
    adag_actor_device_t *driver_dev;
    int32_t driver_dev_kind;
    unsigned driver_dev_index;
    /* Reservations (dag/reserve.c): refs [next_publish, next_reserve) are
     * reserved, filled by any threads and committed or cancelled in any
     * order; they are published in ref order. One thread at a time takes
     * the next ref (`acquiring`: room in the window, then every input
     * slot), never holding the lock across a wait. Under lock. */
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
     * (dag/driver_device.c), [ref % max_inflight][input]: a buffer of the
     * input's capacity (ptr NULL for a host input), the event recorded
     * after the commit's copy out of it, and whether that copy may still
     * run (set by the commit under lock; waited for and cleared by the
     * next reservation of the slot, in the acquiring thread). NULL: no
     * input on the device. */
    adag_dev_mem_t *staging;
    adag_dev_event_t **staged;
    uint8_t *staged_pending;
    unsigned ninputs;
    unsigned *input_chan;      /* channel id per input field */
    adag_chan_t **outs;        /* reader endpoints, one per distinct output channel */
    unsigned nouts;
    unsigned *out_chan;        /* channel id per out endpoint */
    unsigned *output_of;       /* out endpoint per graph output */
    unsigned noutputs;

    pthread_mutex_t lock;      /* the ref window, reservation, abort state, fd, stats */
    pthread_cond_t cond;       /* a ref was released / a ref was taken / the DAG failed */
    int cond_waiters;          /* threads in adag__dag_cond_wait (wakes cost nothing without) */
    uint64_t next_release;     /* refs below it are released */
    uint8_t *ref_flags;        /* REF_* per slot */
    adag_status_t abort_status;
    char abort_msg[256];
    int closing;
    int api_users;             /* threads inside execute/get/release */
    adag_dag_stats_t stats;
    /* the communicator of its ADAG_TRANSPORT_COMM tensors (NULL: none);
     * comm_keep: given back for the next DAG (it ended cleanly) */
    struct adag_comm_lease **comm_leases;
    unsigned ncomm_leases;
    uint64_t *coll_keys;       /* per graph collective: its communicator's key */
    unsigned ncolls;
    int comm_keep;
    /* set once the DAG left its leases (adag_dag_destroy, before STOP):
     * bit i of comm_gone, lease i is gone (its actors drop it) */
    int comm_left;
    uint64_t comm_gone;
};

/* Bit i set: the actor whose program is prog drops prog->comms[i] at STOP
 * (its lease is gone). */
uint64_t adag__dag_comm_drop_mask(adag_dag_h dag, const adag_program_t *prog);
/* The DAG leaves its leases (keeping them if comm_keep); sets comm_gone. */
void adag__dag_leave_leases(adag_dag_h dag);

/* install.c: PREPARE -> CONNECT -> START of a compiled DAG, each on every
 * actor at once; the first failure (in actor order) is the result. */
adag_status_t adag__dag_install(adag_dag_h dag);

/* comm_lease.c: the driver's communicators, shared by the DAGs whose
 * collectives use them or leased to one DAG (ADAG_TRANSPORT_COMM tensors) */
typedef struct adag_comm_lease adag_comm_lease_t;
/* A communicator of backend ops over the actors actor_ids[0..n) (rank r =
 * actor_ids[r]): an open one over that list (shared, unless exclusive or
 * exclusively held), or a new one. */
adag_status_t adag__comm_lease_take(adag_runtime_h rt, const adag_comm_ops_t *ops,
                                   const unsigned *actor_ids, unsigned n, int exclusive,
                                   adag_comm_lease_t **out);
/* A DAG leaves it. keep: it ended cleanly (every rank keeps it for the next
 * DAG); else it is closed to new DAGs. Nonzero: it is gone (no DAG holds
 * it and it was closed): the DAG tells its actors to drop it, then frees it
 * with adag__comm_lease_free. */
int adag__comm_lease_leave(adag_runtime_h rt, adag_comm_lease_t *l, int keep);
void adag__comm_lease_free(adag_comm_lease_t *l);
/* The DAGs holding it now. */
unsigned adag__comm_lease_users(adag_runtime_h rt, const adag_comm_lease_t *l);
/* Nonzero if DAGs may share it (collectives only): its users take turns. */
int adag__comm_lease_shared(const adag_comm_lease_t *l);
/* The ticket of the next execution over it (under rt->order_lock). */
uint64_t adag__comm_lease_next_ticket(adag_comm_lease_t *l);
/* An actor stopped: the communicators it was a rank of go. */
void adag__comm_leases_forget_actor(adag_runtime_h rt, unsigned actor_id);
unsigned adag__comm_leases_count(adag_runtime_h rt);
uint64_t adag__comm_lease_key(const adag_comm_lease_t *l);
const adag_comm_ops_t *adag__comm_lease_ops(const adag_comm_lease_t *l);
const adag_comm_id_t *adag__comm_lease_id(const adag_comm_lease_t *l);
unsigned adag__comm_lease_nranks(const adag_comm_lease_t *l);
int adag__comm_lease_rank(const adag_comm_lease_t *l, unsigned actor_id); /* -1: not one */

/* compile_place.c: a channel's places (c->places: writer, then readers)
 * and its backend (c->backend); ADAG_ERR_INVALID for a channel no backend
 * can carry. */
adag_status_t adag__compile_place_channel(adag_dag_h dag, adag_dag_chan_t *c);
/* ADAG_ERR_INVALID when a collective has a member on another host (the
 * communicators are one host's). */
adag_status_t adag__compile_check_collective_hosts(adag_graph_h g);

/* compile_geom.c: every channel's geometry. value_geometry: the slot size
 * and count channel c of value node `value` asks for (NULL: a channel of
 * no value node; the DAG's default size), checked against a static
 * tensor's bytes and max_inflight. check_slots: after every reader was
 * added, refuses fewer slots than max_inflight on a channel the driver
 * writes or reads. finish_geometry: after placement and communicators,
 * the rest of each geometry and the memory each channel holds. */
adag_status_t adag__compile_value_geometry(adag_dag_h dag, adag_node_h value, adag_dag_chan_t *c);
adag_status_t adag__compile_check_slots(adag_dag_h dag, adag_graph_h g);
void adag__compile_finish_geometry(adag_dag_h dag);

/* compile_comm.c: tensors with ADAG_TRANSPORT_COMM */
/* After every channel was placed: checks the ADAG_TRANSPORT_COMM tensors
 * and leases their communicator (each such channel gets its key, its
 * device endpoints their ranks), then one per collective's member list
 * (ranks in member order; identical lists share one); actor_index: graph
 * node -> DAG actor. */
adag_status_t adag__compile_comm_plan(adag_dag_h dag, const adag_collective_t *const *colls,
                                     unsigned ncolls, const int *actor_index);
/* Adds the DAG's communicator to actor ai's program if it is a rank. */
adag_status_t adag__compile_comm_program(adag_dag_h dag, unsigned ai, adag_program_t *p);
/* After every program was built: the ranks' send/recv orders must be
 * consistent (else ADAG_ERR_INVALID naming two transfers). */
adag_status_t adag__compile_comm_check_order(adag_dag_h dag);

/* lists */
void adag__list_init(adag_list_t *l);
void adag__list_push(adag_list_t *l, adag_list_t *item);
void adag__list_remove(adag_list_t *item);
#define ADAG_CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* runtime.c / actor.c */
/* Graphs keep an actor's memory (adag__actor_ref/unref); the user handle and
 * compiled DAGs also keep it running (adag__actor_hold/drop): once nothing
 * holds it, fini runs / the worker is shut down. */
void adag__actor_ref(adag_actor_h actor);        /* under rt->lock */
void adag__actor_hold(adag_actor_h actor);       /* under rt->lock */
void adag__actor_unref(adag_actor_h actor);      /* takes rt->lock */
void adag__actor_drop(adag_actor_h actor);       /* takes rt->lock */
int adag__actor_method(adag_actor_h actor, const char *name);
/* Runs `step` on the DAG's actors ais[0..n) at once, all by one deadline:
 * a slow actor costs the others nothing. st[i] and why[i] (the message of
 * a failure, "" on success) per actor. */
void adag__actors_step(adag_dag_h dag, const unsigned *ais, unsigned n, adag_step_t step,
                      int64_t deadline, adag_status_t *st, char (*why)[ADAG_ERROR_MAX]);
/* observe.c: asks every actor of dag for `what` at once, waiting for
 * the answers at most timeout_ms. Per actor ai of the n: st[ai] ADAG_OK
 * and ans[ai] filled, else why[ai] says why not ("actor s1 (pid 4242,
 * stopped) did not answer within 1000 ms"). ADAG_ERR_NO_MEMORY (nothing
 * asked, *out empty) if the arrays cannot be made; adag__answers_free
 * frees them and every answer. */
typedef struct {
    adag_answer_t *ans;
    adag_status_t *st;
    char (*why)[ADAG_ERROR_MAX];
    unsigned n;
} adag_answers_t;

adag_status_t adag__actors_ask(adag_dag_h dag, adag_ask_t what, int64_t timeout_ms,
                              adag_answers_t *out);
void adag__answers_free(adag_answers_t *as);
/* Waits until the monitor collected the actor; 0 if not by the deadline. */
int adag__actor_wait_reaped(adag_actor_h a, int64_t deadline);
/* Marks a live actor dead with `why` (under rt->lock). */
void adag__actor_mark_dead_locked(adag_actor_h a, const char *fmt, ...) ADAG_PRINTF(2, 3);

/* monitor.c */
void adag__monitor_poke(adag_runtime_h rt);
adag_status_t adag__monitor_start(adag_runtime_h rt);
void adag__monitor_stop(adag_runtime_h rt);
/* Spawns a worker from the monitor thread (see transport/spawn.h: the
 * worker dies with the thread that spawned it). */
adag_status_t adag__monitor_spawn(adag_runtime_h rt, int *pid, int *pidfd, int *sock);

/* driver.c */
/* Fails the DAG: every waiter wakes and gets `status` with `msg`. */
void adag__dag_fail(adag_dag_h dag, adag_status_t status, const char *msg);

/* The driver's device (dag/driver_device.c). open: from the compile
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
int adag__dag_uses_actor(adag_dag_h dag, adag_actor_h actor);
/* Makes user_fd readable exactly while some live ref is ready and not got
 * (or the DAG failed). Under dag->lock. */
void adag__dag_update_fd(adag_dag_h dag);
/* Shared by driver.c and reserve.c. */
adag_status_t adag__dag_api_enter(adag_dag_h dag, const char *fn); /* not closing: count a user */
/* adag_dag_stats_t's version-3 fields: the bottleneck of a snapshot
 * (dag/stats.c). */
void adag__dag_stats_bottleneck(adag_dag_h dag, adag_dag_stats_t *out);
/* A snapshot's DAG counts and name (for dag/stats_print.c). */
const adag_dag_stats_t *adag__stats_counts(adag_stats_h s);
const char *adag__stats_dag_name(adag_stats_h s);
void adag__dag_api_leave(adag_dag_h dag);
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
void adag__dag_fail_locked(adag_dag_h dag, adag_status_t status, const char *msg);
adag_status_t adag__dag_check_ref(adag_dag_h dag, adag_ref_t ref, const char *fn); /* under lock */
/* reserve.c: cancels the open reservations of the calling thread
 * (own_only) or of every thread (destroy); returns how many. Under lock. */
unsigned adag__dag_drop_reservations(adag_dag_h dag, int own_only);
/* Frees a DAG whose loops have stopped (or never started). */
void adag__dag_free(adag_dag_h dag);

/* graph.c */
void adag__graph_free(adag_graph_h graph);
/* "node 3 (stage1.forward)" */
void adag__node_describe(adag_node_h node, char *buf, size_t len);
/* What adag_node_tensor declared of return r of call node `call` (all zero
 * if nothing); for an INPUT node (r 0), its own. Under the graph's lock. */
adag_tensor_decl_t adag__node_value_tensor(adag_node_h call, unsigned r);
/* The node that stands for return r of `call` (itself for one return, an
 * INPUT node for r 0; NULL for a return never taken with adag_node_output). */
adag_node_h adag__node_value(adag_node_h call, unsigned r);



#endif

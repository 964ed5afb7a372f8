/*
 * dag/proc/: actors and where they run. An actor is a thread of the driver
 * (placement_thread.c), an adag-worker process (placement_process.c) or a
 * process on another node reached through its agent (remote_link.c,
 * agent.c); the monitor thread (monitor.c) spawns workers, watches their
 * pidfds and reaps them. Everything above (the compiler, the driver,
 * observation) reaches an actor through the placement ops below, and a
 * compiled DAG through its run record (adag_dag_run_t): the part of a DAG
 * its actors' side owns. The communicators the runtime leases to DAGs
 * (comm_lease.c) live here too: an actor's death takes its ranks with it.
 * Below: dag/exec/ (the loop an actor runs), transport/, gpu/, common/.
 * Nothing here includes a header of dag/graph/, dag/driver/ or
 * dag/observe/; the driver answers the run record's upcalls (ops).
 */
#ifndef ADAG_DAG_PROC_H
#define ADAG_DAG_PROC_H

#include "common/copy_pool.h"
#include "common/error.h"
#include "common/list.h"
#include "common/names.h"
#include "common/settings.h"
#include "common/value.h"
#include "dag/exec/actor_device.h"
#include "dag/exec/context.h"
#include "dag/exec/loop.h"
#include "dag/exec/program.h"
#include "dag/proc/actor_place.h"
#include "gpu/comm.h"
#include "transport/channel.h"
#include "transport/protocol.h"
#include "transport/tcp.h"

#include <adag.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

typedef struct adag_dag_run adag_dag_run_t; /* below */

typedef struct adag_class_entry {
    adag_class_def_t def;         /* names point into the copies below */
    char name[ADAG_MAX_NAME];
    adag_method_info_t *methods;
    struct adag_class_entry *next;
} adag_class_entry_t;

struct adag_runtime {
    pthread_mutex_t lock;      /* lists, ids, actor death/reap state */
    pthread_cond_t cond;       /* signalled when a worker is reaped */
    /* its settings (common/settings.h): its config's or the environment's
     * at creation; read-only afterwards, read without a lock */
    adag_settings_t settings;
    char *worker_path;
    adag_class_entry_t *classes;
    adag_list_t actors, graphs, dags;
    /* its live view (dag/observe/live_view.c), NULL: closed; under live_lock */
    struct adag_live_view *live;
    pthread_mutex_t live_lock;
    unsigned next_actor_id, next_dag_id;
    /* the monitor thread (dag/proc/monitor.c): spawns workers, watches their
     * pidfds and reaps them, keeps armed DAG fds exact */
    pthread_t monitor;
    int monitor_wake;          /* eventfd: the actor or DAG set changed / a spawn / stop */
    int monitor_stop;
    struct adag_spawn_req *spawn_reqs; /* spawns waiting for the monitor; under lock */
    /* communicators made for DAGs (dag/proc/comm_lease.c); under lock */
    struct adag_comm_lease *comm_leases;
    uint64_t next_comm_key;
    /* the tickets of shared communicators (dag/proc/comm_lease.c): taken for
     * all communicators of one execution at once, so every communicator's
     * turns follow one order (after a DAG's own lock, never before it) */
    pthread_mutex_t order_lock;
    /* the split copy of large inputs by execute (common/copy_pool.h):
     * its helpers start at the first large input, stop at destroy */
    adag_copy_pool_t copy_pool;
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
    ADAG_ASK_FIGURES, /* its loop's figures (dag/exec/loop_stats.h) */
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
 * Where an actor runs: a thread of the driver (dag/proc/placement_thread.c) or
 * an adag-worker process (dag/proc/placement_process.c); an actor on another
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
    adag_status_t (*step_begin)(adag_actor_h a, adag_dag_run_t *run, unsigned ai, adag_step_t step,
                                int *pending);
    int (*step_fd)(adag_actor_h a);
    adag_status_t (*step_end)(adag_actor_h a, adag_dag_run_t *run, unsigned ai, adag_step_t step,
                              int64_t deadline);
    /* Aborts the DAG on the actor now; never blocks, takes no lock but leaf
     * ones (called with rt->lock and dag->lock held). NULL: the actor shares
     * the driver's DAG context. */
    void (*abort_dag)(adag_actor_h a, adag_dag_run_t *run, adag_status_t status);
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
    adag_status_t (*ask_begin)(adag_actor_h a, adag_dag_run_t *run, unsigned ai, adag_ask_t what,
                               int64_t deadline, int *pending, adag_answer_t *out);
    adag_status_t (*ask_end)(adag_actor_h a, adag_dag_run_t *run, unsigned ai, adag_ask_t what,
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
    adag_place_t place;        /* where it runs (dag/proc/actor_place.h), as its host decided;
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

typedef struct {
    adag_actor_h actor;
    adag_program_t prog;       /* kept for DOT (process actors get a copy) */
    adag_loop_t loop;          /* thread actors */
    adag_wbuf_t infos;         /* PREPARE's answer: peer info per program channel */
    adag_wbuf_t peers;         /* CONNECT's payload */
    _Atomic int prepared;      /* PREPARE was sent: STOP must follow (read by adag__dag_fail) */
    /* bit i: at STOP the actor drops prog.comms[i], whose lease is gone
     * (set by the driver when the DAG leaves its leases, before STOP) */
    uint64_t comm_drop;
} adag_dag_actor_t;

/* A compiled DAG as its actors' side sees it: part of struct adag_dag
 * (dag->run), filled by the driver at compile. The placements install,
 * stop, abort and observe the DAG on each actor through it; the monitor
 * fails it when one of its actors dies and keeps its fd exact through
 * ops, which the driver implements. */

typedef struct adag_dag_run_ops {
    /* Fails the DAG: every waiter wakes and gets status with msg. Takes
     * the DAG's lock (callable with rt->lock held: lock order rt->lock,
     * then the DAG's). */
    void (*fail)(adag_dag_run_t *run, adag_status_t status, const char *msg);
    /* An output endpoint signalled a notify fd (the monitor drained it):
     * recompute the DAG fd's state. */
    void (*notified)(adag_dag_run_t *run);
} adag_dag_run_ops_t;

struct adag_dag_run {
    adag_list_t link;          /* in rt->dags, under rt->lock */
    adag_runtime_h rt;
    const adag_dag_run_ops_t *ops;
    unsigned id;
    char name[64];
    adag_dag_actor_t *actors;
    unsigned nactors;
    int run_ahead;             /* adag_compile_params_t.run_ahead (compile.c: check_run_ahead) */
    adag_dag_ctx_t ctx;        /* the DAG in the driver's process: abort word, domains,
                                  every endpoint of the driver and its thread actors */
    /* Once adag_dag_fd armed the output endpoints, their writers signal
     * notify_fds (the backends' pollable fds, distinct) after publishing;
     * the monitor polls them and calls ops->notified. fd_armed: set once
     * (seq_cst: the monitor reads nnotify only after seeing it). */
    _Atomic int fd_armed;
    int *notify_fds;
    unsigned nnotify;
};

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
void adag__actors_step(adag_dag_run_t *run, const unsigned *ais, unsigned n, adag_step_t step,
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

adag_status_t adag__actors_ask(adag_dag_run_t *run, adag_ask_t what, int64_t timeout_ms,
                              adag_answers_t *out);
void adag__answers_free(adag_answers_t *as);
/* adag_actor_placement's checks and report, for the union of several
 * actors' placements too (adag_dag_input_placement). */
adag_status_t adag__placement_check_out(const char *fn, const adag_actor_placement_t *out);
void adag__placement_report(const adag_place_t *p, adag_actor_placement_t *out);
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

#endif

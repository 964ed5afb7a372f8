/* Driver-side objects: runtime, actors, graphs, nodes and compiled DAGs. */
#ifndef ADAG_DAG_INTERNAL_H
#define ADAG_DAG_INTERNAL_H

#include "common/error.h"
#include "dag/loop.h"
#include "dag/program.h"
#include "transport/channel.h"
#include "transport/control.h"
#include "transport/shm_ring.h"

#include <adag.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* Control messages between the driver and adag-worker. */
enum {
    ADAG_MSG_CREATE_ACTOR = 1, /* module, class, actor name, init bytes */
    ADAG_MSG_INSTALL_DAG,      /* program + fds {segment, eventfd} */
    ADAG_MSG_STOP_DAG,         /* dag id */
    ADAG_MSG_SHUTDOWN,         /* run fini and exit */
    ADAG_MSG_REPLY,            /* i32 status, message, [method table] */
};

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
    char *worker_path;
    adag_class_entry_t *classes;
    adag_list_t actors, graphs, dags;
    unsigned next_actor_id, next_dag_id;
    /* the monitor thread (dag/monitor.c): spawns workers, watches their
     * pidfds and reaps them, keeps armed DAG fds exact */
    pthread_t monitor;
    int monitor_wake;          /* eventfd: the actor or DAG set changed / a spawn / stop */
    int monitor_stop;
    struct adag_spawn_req *spawn_reqs; /* spawns waiting for the monitor; under lock */
};

struct adag_actor {
    adag_list_t link;
    adag_runtime_h rt;
    unsigned id;
    char name[ADAG_MAX_NAME];
    char class_name[ADAG_MAX_NAME];
    adag_placement_t placement;
    adag_method_info_t *methods;
    unsigned nmethods;
    int refs;                  /* memory: user handle + graphs + DAGs; under rt->lock */
    int live;                  /* running: user handle + DAGs; under rt->lock */
    int user_destroyed;        /* the user gave up the handle */
    int stopped;               /* fini ran / the worker was shut down */
    int creating;              /* adag_actor_create has not returned yet: the name is taken */
    pthread_mutex_t call_lock; /* serializes method calls across DAGs (thread actors) */
    /* thread actors */
    const adag_class_def_t *def;
    void *state;
    /* process actors */
    int pid, pidfd, ctl;
    pthread_mutex_t ctl_lock;  /* one control request at a time */
    int dead;                  /* under rt->lock */
    int reaped;                /* under rt->lock */
    char death[160];           /* why it died */
};

typedef enum { NODE_INPUT, NODE_CALL, NODE_RETURN } adag_node_kind_t;

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
};

/* A channel of a compiled DAG, as the driver knows it. */
typedef struct {
    char name[96];
    adag_chan_kind_t kind;
    int writer;                /* DAG actor index, -1 for the driver */
    unsigned nreaders;         /* registered shm readers */
    int *readers;              /* DAG actor index per reader, -1 for the driver */
    uint64_t offset;
    unsigned producer_node;    /* node that produces it (for DOT) */
} adag_dag_chan_t;

typedef struct {
    adag_actor_h actor;
    adag_program_t prog;       /* kept for DOT (process actors get a copy) */
    adag_loop_t loop;          /* thread actors */
    int installed;
} adag_dag_actor_t;

enum { REF_GOTTEN = 1, REF_RELEASED = 2 };

struct adag_dag {
    adag_list_t link;
    adag_runtime_h rt;
    unsigned id;
    char name[64];
    unsigned max_inflight;
    size_t capacity;
    int execute_timeout_ms, teardown_timeout_ms;
    adag_wait_policy_t wait;   /* spin_ns -1 until choose_spin */

    adag_dag_actor_t *actors;
    unsigned nactors;
    adag_dag_chan_t *chans;
    unsigned nchans;
    char (*node_labels)[160];  /* per graph node, for DOT */
    unsigned nnodes;

    adag_shm_segment_t seg;
    adag_segment_hdr_t *hdr;
    /* Loops write notify_fd after publishing a value the driver reads (once
     * adag_dag_fd armed it); the monitor then recomputes the state of
     * user_fd, the fd adag_dag_fd hands out, which only the driver writes,
     * under lock: readable exactly while a ref is ready and not got. */
    int notify_fd;
    int user_fd;
    int user_fd_ready;         /* user_fd holds a token; under lock */

    /* driver endpoints */
    adag_chan_t *inputs;       /* writer endpoint per input field */
    void **input_slots;        /* the reserved execution's input buffers */
    size_t *input_sizes;
    /* The next execution is reserved by one thread at a time (its inputs
     * are published in ref order); others wait on cond, within their own
     * deadline, never on a lock held across a wait. Under lock. */
    int reserving;             /* a thread holds the reservation */
    int prepared;              /* ... and returned it from adag_dag_execute_prepare */
    pthread_t reserver;
    uint64_t reserved_seq;
    unsigned ninputs;
    unsigned *input_chan;      /* channel id per input field */
    adag_chan_t *outs;         /* reader endpoints, one per distinct output channel */
    unsigned nouts;
    unsigned *out_chan;        /* channel id per out endpoint */
    unsigned *output_of;       /* out endpoint per graph output */
    unsigned noutputs;

    pthread_mutex_t lock;      /* the ref window, reservation, abort state, fd, stats */
    pthread_cond_t cond;       /* a ref was released / the reservation ended / the DAG failed */
    uint64_t submitted;        /* refs handed out */
    uint64_t next_release;     /* refs below it are released */
    uint8_t *ref_flags;        /* REF_* per slot */
    adag_status_t abort_status;
    char abort_msg[256];
    int closing;
    int api_users;             /* threads inside execute/get/release */
    adag_dag_stats_t stats;
};

/* lists */
void adag_list_init(adag_list_t *l);
void adag_list_push(adag_list_t *l, adag_list_t *item);
void adag_list_remove(adag_list_t *item);
#define ADAG_CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* a name of 1..ADAG_MAX_NAME-1 bytes */
static inline int adag_valid_name(const char *s)
{
    return s && *s && strnlen(s, ADAG_MAX_NAME) < ADAG_MAX_NAME;
}

/* runtime.c / actor.c */
/* Graphs keep an actor's memory (adag_actor_ref/unref); the user handle and
 * compiled DAGs also keep it running (adag_actor_hold/drop): once nothing
 * holds it, fini runs / the worker is shut down. */
void adag_actor_ref(adag_actor_h actor);        /* under rt->lock */
void adag_actor_hold(adag_actor_h actor);       /* under rt->lock */
void adag_actor_unref(adag_actor_h actor);      /* takes rt->lock */
void adag_actor_drop(adag_actor_h actor);       /* takes rt->lock */
int adag_actor_method(adag_actor_h actor, const char *name);
/* Sends a control request to a process actor and waits for its reply;
 * a died worker gives ADAG_ERR_ACTOR_DIED naming it. */
adag_status_t adag_actor_request(adag_actor_h actor, uint32_t type, const void *payload,
                                 size_t len, const int *fds, unsigned nfds, int64_t deadline,
                                 adag_ctl_msg_t *reply_out);
/* Sends one request to several process actors at once and takes each reply
 * as it comes, all by one deadline: a stuck worker costs the others nothing.
 * st[i] and why[i] (the message of a failure) per actor. */
void adag_actor_request_all(adag_actor_h *actors, unsigned n, uint32_t type, const void *payload,
                            size_t len, int64_t deadline, adag_status_t *st,
                            char (*why)[ADAG_ERROR_MAX]);
/* Kills a process actor's worker and waits (bounded) until it is reaped. */
void adag_actor_kill(adag_actor_h actor, const char *why);

/* monitor.c */
void adag_monitor_poke(adag_runtime_h rt);
adag_status_t adag_monitor_start(adag_runtime_h rt);
void adag_monitor_stop(adag_runtime_h rt);
/* Spawns a worker from the monitor thread (see transport/spawn.h: the
 * worker dies with the thread that spawned it). */
adag_status_t adag_monitor_spawn(adag_runtime_h rt, int *pid, int *pidfd, int *sock);

/* driver.c */
/* Fails the DAG: every waiter wakes and gets `status` with `msg`. */
void adag_dag_fail(adag_dag_h dag, adag_status_t status, const char *msg);
int adag_dag_uses_actor(adag_dag_h dag, adag_actor_h actor);
/* Makes user_fd readable exactly while some live ref is ready and not got
 * (or the DAG failed). Under dag->lock. */
void adag_dag_update_fd(adag_dag_h dag);
/* Frees a DAG whose loops have stopped (or never started). */
void adag_dag_free(adag_dag_h dag);

/* graph.c */
void adag_graph_free(adag_graph_h graph);
/* "node 3 (stage1.forward)" */
void adag_node_describe(adag_node_h node, char *buf, size_t len);



#endif

/*
 * The runtime (the handles of everything it makes, classes registered)
 * and its actors: where they run, where they were placed, how many
 * devices a backend has.
 *
 * A part of <adag.h>, which programs and modules include (it includes
 * every part, in order; this one includes the parts it builds on).
 */
#ifndef ADAG_ACTOR_H
#define ADAG_ACTOR_H

#include "class.h"
#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Runtime                                                             */
/* ------------------------------------------------------------------ */

typedef struct adag_runtime *adag_runtime_h;
typedef struct adag_actor *adag_actor_h;
typedef struct adag_graph *adag_graph_h;
typedef struct adag_node *adag_node_h;
typedef struct adag_dag *adag_dag_h;

enum {
    ADAG_RUNTIME_PARAM_WORKER_PATH = 1u << 0,
    ADAG_RUNTIME_PARAM_CONFIG = 1u << 1,
};
/* Like every params struct (see "Conventions" at the top): a set field
 * needs its bit, a bit needs a known field. */

typedef struct {
    uint64_t field_mask;     /* ADAG_RUNTIME_PARAM_* bits of the fields set */
    /* adag-worker executable for process actors. Default: the setting
     * ADAG_WORKER_PATH, else "adag-worker" next to libadag (or in its
     * adag/ subfolder). */
    const char *worker_path;
    /* The runtime's settings (see "Configuration"), copied at creation:
     * the config may be modified or released afterwards without changing
     * the runtime. Default: the environment's values when the runtime is
     * created. */
    adag_config_h config;
} adag_runtime_params_t;

/* Creates a runtime (params may be NULL). Use the adag_runtime_create macro,
 * which passes the header's version so a mismatched library is caught:
 * the major must be the library's, and the minor at most the library's;
 * while the major is 0 every minor may change struct layouts, so the minor
 * must be the library's too (ADAG_ERR_INVALID naming both versions). */
ADAG_API adag_status_t adag_runtime_create_version(unsigned major, unsigned minor,
                                                   const adag_runtime_params_t *params,
                                                   adag_runtime_h *runtime);
#define adag_runtime_create(params, runtime)                                  \
    adag_runtime_create_version(ADAG_VERSION_MAJOR, ADAG_VERSION_MINOR, (params), (runtime))

/* Destroys every DAG, graph and actor still alive, stops all workers
 * (killing those that do not stop within its ADAG_TEARDOWN_TIMEOUT_MS) and
 * frees the runtime. Handles of the runtime's objects become invalid. */
ADAG_API adag_status_t adag_runtime_destroy(adag_runtime_h runtime);

/* Registers a class for thread actors. The definition is copied (names and
 * method table); the function pointers must stay valid. Its abi_version
 * must be ADAG_ABI_VERSION (see adag_class_def_t). A name already
 * registered in this runtime is ADAG_ERR_INVALID. */
ADAG_API adag_status_t adag_class_register(adag_runtime_h runtime, const adag_class_def_t *def);

/* ------------------------------------------------------------------ */
/* Actors                                                              */
/* ------------------------------------------------------------------ */

typedef enum {
    ADAG_PLACEMENT_THREAD = 0,  /* state and loops live in the driver process */
    ADAG_PLACEMENT_PROCESS = 1, /* an adag-worker process of its own */
    /* an adag-worker on another host, started by the agent named in
     * adag_actor_params_t.node (adag-worker --agent); its values travel
     * over UCX */
    ADAG_PLACEMENT_REMOTE = 2,
} adag_placement_t;

enum {
    ADAG_ACTOR_PARAM_CLASS = 1u << 0,
    ADAG_ACTOR_PARAM_NAME = 1u << 1,
    ADAG_ACTOR_PARAM_MODULE = 1u << 2,
    ADAG_ACTOR_PARAM_PLACEMENT = 1u << 3,
    ADAG_ACTOR_PARAM_INIT = 1u << 4,
    ADAG_ACTOR_PARAM_DEVICE = 1u << 5,
    ADAG_ACTOR_PARAM_NODE = 1u << 6,
    ADAG_ACTOR_PARAM_CPUS = 1u << 7,
    ADAG_ACTOR_PARAM_NUMA = 1u << 8,
    ADAG_ACTOR_PARAM_NIC = 1u << 9,
};

typedef struct {
    uint64_t field_mask;        /* ADAG_ACTOR_PARAM_* bits */
    const char *class_name;     /* required */
    const char *name;           /* default "<class>#<n>"; must be unique */
    const char *module_path;    /* the module .so; required for process actors */
    adag_placement_t placement; /* default ADAG_PLACEMENT_THREAD */
    const void *init_data;      /* bytes given to the class's init */
    size_t init_size;           /* at most 16 MiB */
    /* The device the actor is bound to: "<backend>:<index>", where backend
     * is "cuda" or "emu" (the emulated device, ADAG_EMU_DEVICES of them),
     * e.g. "cuda:1" (its id ADAG_DEVICE(ADAG_DEV_CUDA, 1)), "emu:0"; the
     * index is decimal, 0..ADAG_DEVICE_INDEX_MAX. Actors of one runtime may
     * be on devices of different backends. Every thread that runs the
     * actor's code (init, each DAG's loop) is bound to it, and the actor
     * gets a compute stream and a communication stream. Default: none (a
     * host actor). */
    const char *device;
    /* ADAG_PLACEMENT_REMOTE: the node the actor runs on, "<address>:<port>"
     * of the agent that starts its worker there (adag-worker --agent
     * <address>:<port> on that node), or a name of the runtime's
     * ADAG_HOSTS; the driver presents the token of the runtime's
     * ADAG_TOKEN_FILE or ADAG_TOKEN. module_path is a path on that node.
     * Actors naming the same agent share a node: the compiler gives UCX
     * channels to every value that crosses nodes and keeps shared memory
     * within the driver's node. */
    const char *node;
    /* Placement (docs: README "Placement"). By default (ADAG_PLACEMENT=1)
     * an actor with a GPU runs on the CPUs of its GPU's NUMA node, its
     * memory prefers that node, and its worker's UCX uses the nearest RDMA
     * NIC with an active port; an actor without one is not bound. Each of
     * these overrides its part, for process and remote actors (decided on
     * their host) and thread actors (their DAG loop threads):
     * cpus: a CPU list, "0-7,16" (every CPU must be one the process may
     * use); numa: a NUMA node's number (its memory, and its CPUs unless
     * cpus is given), -1 for none (memory where the kernel puts it); nic: an RDMA device "mlx5_0" (or "mlx5_0:1" for a
     * port) or a network interface for UCX_NET_DEVICES, "" for UCX's own
     * choice. A request that cannot be met fails adag_actor_create. */
    const char *cpus;
    int numa;
    const char *nic;
} adag_actor_params_t;

/* Where an actor was placed (adag_actor_placement). Set struct_size to
 * sizeof(adag_actor_placement_t) first (ADAG_ACTOR_PLACEMENT_INIT): as
 * with adag_dag_stats_t, later versions only append fields. */
typedef struct {
    size_t struct_size;    /* in: the caller's sizeof; out: bytes filled */
    char cpus[512];        /* the CPUs its loops run on, as a list ("0-15,32-47") */
    int bound;             /* 1: bound to them; 0: runs wherever its process may */
    int numa;              /* the NUMA node its memory prefers; -1: none */
    char gpu[16];          /* its GPU's PCI bus id in the topology; "" */
    char nic[40];          /* what its UCX was told (UCX_NET_DEVICES); "": UCX's choice */
    char nic_distance[24]; /* from its GPU (or node) to that NIC: "same PCI switch", "same PCI
                            * root", "same NUMA node", "same socket", "across sockets"; "" */
    int this_machine;      /* 0: placed on an XML topology of another machine (nothing bound) */
} adag_actor_placement_t;

#define ADAG_ACTOR_PLACEMENT_INIT {.struct_size = sizeof(adag_actor_placement_t)}

/* Creates an actor: for a process actor, spawns adag-worker, loads the module
 * and runs the class's init there. A worker dies with its driver, whatever
 * kills the driver (it gets SIGKILL from the kernel when the runtime's
 * monitor thread ends), even when stopped or stuck in a method; it starts
 * with fds 0-2 open (on /dev/null where the driver's are closed). Names are
 * unique per runtime, also between threads creating actors at once. A
 * worker that dies in its class's init fails this call with
 * ADAG_ERR_ACTOR_DIED saying how it died (signal or exit status).
 * Refusals, each with its one status and a message naming what failed:
 *   ADAG_ERR_INVALID    params that break their rules (a field without its
 *                       bit, a name taken or not 1..63 bytes, a process
 *                       actor without module_path, a placement request
 *                       the machine cannot meet), and a class's init that
 *                       failed, with its adag_init_fail message (see
 *                       adag_class_def_t.init);
 *   ADAG_ERR_NOT_FOUND  a class not registered (thread actor) or not in its
 *                       module, a module that cannot be loaded;
 *   ADAG_ERR_TOO_LARGE  init bytes over 16 MiB;
 *   ADAG_ERR_IO         an adag-worker that cannot be started (the worker
 *                       path is not executable). */
ADAG_API adag_status_t adag_actor_create(adag_runtime_h runtime, const adag_actor_params_t *params,
                                         adag_actor_h *actor);

/* The actor's name (never NULL). */
ADAG_API const char *adag_actor_name(adag_actor_h actor);

/* The worker's process id for a process actor (for a remote actor, its pid
 * on its host), 0 for a thread actor. */
ADAG_API int adag_actor_pid(adag_actor_h actor);

/* Where the actor runs: decided when it was created, on its own host.
 * ADAG_ERR_INVALID if out->struct_size is below the first version's. */
ADAG_API adag_status_t adag_actor_placement(adag_actor_h actor, adag_actor_placement_t *out);

/* How many devices the backend "cuda" or "emu" has here (0, with the
 * reason in adag_last_error(), when it has none); ADAG_ERR_NOT_FOUND for
 * another name. */
ADAG_API adag_status_t adag_device_count(const char *backend, unsigned *count);

/* Gives up the caller's handle. The actor is stopped (fini runs, the worker
 * exits) once no compiled DAG uses it; graphs not yet compiled that bind it
 * then fail to compile. */
ADAG_API adag_status_t adag_actor_destroy(adag_actor_h actor);

#ifdef __cplusplus
}
#endif
#endif /* ADAG_ACTOR_H */

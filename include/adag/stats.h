/*
 * adag statistics: what each actor of a compiled DAG does, in figures.
 *
 * adag_dag_stats_take copies them while the DAG runs (from every actor's
 * loop: a thread actor's directly, a process or remote actor's over its
 * control connection, all asked at once) into a snapshot the caller reads
 * and frees; it waits at most ADAG_STATS_TIMEOUT_MS (1000 ms) for the
 * answers, and an actor that has not answered by then (stopped, busy with
 * a long control request) is named with why (adag_actor_stats_t's
 * `unanswered`) while the others' figures are given:
 *   - per actor: the time it was busy (its methods and publishing) and
 *     blocked (waiting for an input; for room in an output channel),
 *     against the time since its loop started;
 *   - per op of each actor's schedule (a method call or a collective): how
 *     often it ran, its compute time (mean, p50, p99, max), the time it
 *     was blocked on input and on output room;
 *   - per channel: values and bytes its writer published, its slots (how
 *     many, of how many bytes: each channel its own, adag_node_channel),
 *     the memory they take and how many hold a value not yet released by
 *     every reader now.
 * Counts are kept always (an add each). Times are measured only in a DAG
 * compiled with tracing (ADAG_COMPILE_PARAM_TRACE or ADAG_TRACE_SPANS:
 * one clock read at each boundary of an op, shared with its trace
 * record); without it they are 0 and adag_stats_timed says so.
 *
 * The busiest actor is the pipeline's bottleneck: in a chain every stage
 * runs at the rate of the slowest, so the others wait for it (on input
 * before it, on room after it) while it is never idle.
 *
 * Each element struct starts with struct_size, set by the caller (the
 * library fills min(struct_size, its own size) bytes and sets it to that
 * count): a program built against a newer header still works. Strings
 * stay valid until adag_stats_free.
 */
#ifndef ADAG_STATS_H
#define ADAG_STATS_H

#include <adag.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The DAG's own counts. */
/* Set struct_size to sizeof(adag_dag_stats_t) before the call (or
 * initialize with ADAG_DAG_STATS_INIT). The library fills the first
 * min(struct_size, its own size) bytes and sets struct_size to that count,
 * so a program built against a newer header (a larger struct) still works
 * with this library: fields past the returned struct_size were not filled.
 * A struct_size of 0, or below the size of the first version of this
 * struct (the fields up to shm_bytes), is ADAG_ERR_INVALID. */
typedef struct {
    size_t struct_size;   /* in: the caller's sizeof; out: bytes filled */
    uint64_t executed;    /* refs handed out by execute */
    uint64_t completed;   /* refs got successfully */
    uint64_t failed;      /* refs whose get reported a method/size error */
    uint64_t released;    /* refs released */
    unsigned max_inflight;
    size_t slot_capacity; /* the default slot size (adag_compile_params_t.slot_capacity);
                             each channel's own: adag_channel_stats_t.slot_bytes */
    unsigned nchannels;   /* channels carrying values (every backend: shm, self, ...) */
    size_t shm_bytes;     /* the DAG's shared-memory segment (shm rings, device channels'
                             rings), the size of its memfd mapping */
    /* newer fields (struct_size says whether they were filled): */
    unsigned communicators;        /* communicators its collectives and tensors use */
    unsigned shared_communicators; /* of them, used by other live DAGs too (now) */
    /* version 3: the busiest actor of a traced DAG (its busy share;
     * "" and 0 when the DAG is not traced or nothing ran yet); filling
     * them takes a snapshot (adag_dag_stats_take) */
    int timed;
    double bottleneck_busy;
    char bottleneck[ADAG_MAX_NAME];
    /* version 4: the device memory of its channels' slots, every endpoint
     * on every device together (a device writer's slots, a reader's copy
     * of them) */
    size_t device_bytes;
} adag_dag_stats_t;

#define ADAG_DAG_STATS_INIT {.struct_size = sizeof(adag_dag_stats_t)}

ADAG_API adag_status_t adag_dag_stats(adag_dag_h dag, adag_dag_stats_t *stats);

typedef struct adag_stats *adag_stats_h;

typedef struct {
    size_t struct_size;
    const char *name;       /* the actor's */
    const char *placement;  /* "thread", "process", "remote node N" */
    unsigned nops;          /* ops in its schedule for this DAG */
    uint64_t count;         /* executions its loop finished (its last op's count) */
    uint64_t busy_ns;       /* computing and publishing */
    uint64_t wait_input_ns; /* blocked on an input */
    uint64_t wait_room_ns;  /* blocked on room in an output channel */
    uint64_t elapsed_ns;    /* since its loop started */
    double busy;            /* busy_ns / elapsed_ns, 0..1 */
    /* since its last op ended: the time it has been waiting for an input
     * (or running an op) now; a stuck stage's grows */
    uint64_t idle_ns;
    /* what it does now (traced DAGs; "" otherwise): "waiting for input",
     * "waiting for room", "computing", "publishing", with the op's method
     * ("computing forward") */
    const char *doing;
    /* newer fields (struct_size says whether they were filled): */
    /* NULL: its figures are in the snapshot. Else why they are not: it did
     * not answer within ADAG_STATS_TIMEOUT_MS ("actor s1 (pid 4242,
     * stopped) did not answer within 1000 ms"), or it could not (it died);
     * its figures above are then 0, its ops are left out of the op list
     * and the channels it writes show 0 values and in_use -1. */
    const char *unanswered;
    /* the device it is bound to (adag_actor_params_t.device), as an id:
     * ADAG_DEVICE(ADAG_DEV_EMULATED, 1) for "emu:1"; ADAG_DEVICE_HOST for
     * an actor without one */
    int32_t device;
} adag_actor_stats_t;

typedef struct {
    size_t struct_size;
    const char *actor;
    const char *name;  /* the method's, or "allreduce", "allgather", ... */
    unsigned index;    /* the op's place in its actor's schedule */
    uint64_t count;    /* times it ran */
    uint64_t compute_ns, compute_mean_ns, compute_p50_ns, compute_p99_ns, compute_max_ns;
    uint64_t wait_input_ns, wait_room_ns, publish_ns; /* totals */
} adag_op_stats_t;

typedef struct {
    size_t struct_size;
    const char *name;   /* "stage1.forward[0]", "input[0]" */
    const char *kind;   /* its backend: "shm", "ucx", "device", ... */
    const char *writer; /* its writer: an actor, or "driver" */
    uint64_t values;    /* published by its writer */
    uint64_t bytes;
    unsigned slots;     /* its slots (1 for a channel read only by its writer) */
    int in_use;         /* slots holding a value not yet released by every reader; -1: unknown */
    /* newer fields (struct_size says whether they were filled): */
    size_t slot_bytes;  /* bytes per slot: the largest value it carries */
    /* the memory its slots take, every endpoint together: host memory
     * (its ring in the DAG's segment, or each UCX endpoint's own ring)
     * and device memory */
    size_t host_bytes;
    size_t device_bytes;
} adag_channel_stats_t;

#define ADAG_ACTOR_STATS_INIT {.struct_size = sizeof(adag_actor_stats_t)}
#define ADAG_OP_STATS_INIT {.struct_size = sizeof(adag_op_stats_t)}
#define ADAG_CHANNEL_STATS_INIT {.struct_size = sizeof(adag_channel_stats_t)}

/* A snapshot of the DAG's figures now (its executions go on), within
 * about ADAG_STATS_TIMEOUT_MS whatever the actors do: ADAG_OK also when
 * some did not answer (their `unanswered` says why). */
ADAG_API adag_status_t adag_dag_stats_take(adag_dag_h dag, adag_stats_h *out);
ADAG_API void adag_stats_free(adag_stats_h stats);

/* 1 if times were measured (the DAG is traced), else 0. */
ADAG_API int adag_stats_timed(adag_stats_h stats);
ADAG_API unsigned adag_stats_nactors(adag_stats_h stats);
ADAG_API unsigned adag_stats_nops(adag_stats_h stats);
ADAG_API unsigned adag_stats_nchannels(adag_stats_h stats);
/* Element i; ADAG_ERR_INVALID for an index out of range or a struct_size
 * below the first version's. */
ADAG_API adag_status_t adag_stats_actor(adag_stats_h stats, unsigned i, adag_actor_stats_t *out);
ADAG_API adag_status_t adag_stats_op(adag_stats_h stats, unsigned i, adag_op_stats_t *out);
ADAG_API adag_status_t adag_stats_channel(adag_stats_h stats, unsigned i,
                                          adag_channel_stats_t *out);
/* The busiest actor (the bottleneck) and its busy share; NULL if the
 * snapshot is not timed, nothing ran, or an actor did not answer (a stuck
 * one may be it). */
ADAG_API const char *adag_stats_bottleneck(adag_stats_h stats, double *busy);
/* The snapshot as tables (DAG line, actors, ops, channels), the
 * bottleneck named, to out (adag.h, "Writers"); adag_stats_format: into
 * buf[0..len) (a snapshot gives the same text each time). */
ADAG_API adag_status_t adag_stats_print(adag_stats_h stats, adag_writer_t out);
ADAG_API adag_status_t adag_stats_format(adag_stats_h stats, char *buf, size_t len,
                                         size_t *needed);

/* The live view: a unix socket (mode 0600, in a 0700 directory:
 * $XDG_RUNTIME_DIR/adag, else /tmp/adag-<uid>; named <pid>.sock; path
 * NULL) from which `adag-info attach` reads the figures of every DAG of
 * this runtime, refreshing, so an operator sees a stuck or slow stage
 * without restarting the program. Opened only when asked: this call, or
 * ADAG_LIVE=1 at adag_runtime_create. Only this user may connect (the
 * peer's uid is checked). Closed by adag_runtime_live_close or
 * adag_runtime_destroy. ADAG_ERR_BUSY if it is open already. */
ADAG_API adag_status_t adag_runtime_live_open(adag_runtime_h rt, const char *path);
/* Its socket's path, NULL when closed (valid until it closes). */
ADAG_API const char *adag_runtime_live_path(adag_runtime_h rt);
ADAG_API adag_status_t adag_runtime_live_close(adag_runtime_h rt);

#ifdef __cplusplus
}
#endif
#endif /* ADAG_STATS_H */

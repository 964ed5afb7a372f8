/*
 * The control protocol between a driver and its workers, in one place: the
 * message table (type, name, what it asks, whether it is answered, how many
 * fds it may carry) and a typed encoder and decoder for every message.
 * Frames travel over transport/control.h; every length is bounded before
 * use and a message that is unknown, carries too many fds or does not
 * decode exactly is ADAG_ERR_PROTOCOL naming the message.
 *
 * A session: the driver sends HELLO {magic, version, token} first and the
 * worker answers with its version, pid and CPU count (a worker speaking
 * another version refuses and exits). Then CREATE_ACTOR once (module,
 * class, actor name, device, init bytes, placement, and the runtime's
 * settings: the worker takes those, not its environment's, then opens the
 * device and runs init on a thread bound to it), and per DAG
 * PREPARE_DAG (program + the channel domains to attach, with their fds;
 * the reply carries each endpoint's peer info; a device actor starts
 * joining the program's communicators) -> CONNECT_DAG (every peer info of
 * every channel; the communicators joined first) -> START_DAG, each sent
 * to all of the DAG's workers at once. ABORT_DAG is one-way (nothing
 * answers it): it aborts the DAG in the worker at once, from any thread of
 * the driver. STOP_DAG stops and frees a DAG; a nonzero status in it drops
 * the DAG's communicators (else the worker keeps them for the next DAG
 * over the same actors); SHUTDOWN runs fini and ends the worker. Every other
 * message is answered by one REPLY {status, message, body}.
 *
 * The other way, on the event socket (a second socket whose worker end
 * CREATE_ACTOR carries; the runtime's monitor thread reads the driver's
 * end), the worker sends DAG_FAILED {dag id, status, message}, one-way,
 * when something fails one DAG without ending the worker (a device
 * communication op past the DAG's comm timeout): the driver fails that
 * DAG, its other DAGs go on.
 */
#ifndef ADAG_TRANSPORT_PROTOCOL_H
#define ADAG_TRANSPORT_PROTOCOL_H

#include "common/error.h"
#include "common/settings.h"
#include "transport/channel.h"
#include "transport/control.h"
#include "transport/wire.h"

#include "common/figures.h"
#include "common/trace.h"

#include <adag.h>
#include <limits.h>
#include <stdint.h>

#define ADAG_PROTOCOL_MAGIC 0x67616461u /* "adag" */
/* 3: CREATE_ACTOR carries the actor's device; 4: and the worker's end of
 * the event socket, which carries DAG_FAILED; 5-10: docs/design.md; 11:
 * CREATE_ACTOR carries the runtime's settings */
#define ADAG_PROTOCOL_VERSION 12u
#define ADAG_TOKEN_MAX 256

typedef enum {
    ADAG_MSG_HELLO = 1,
    ADAG_MSG_CREATE_ACTOR,
    ADAG_MSG_PREPARE_DAG,
    ADAG_MSG_CONNECT_DAG,
    ADAG_MSG_START_DAG,
    ADAG_MSG_ABORT_DAG,
    ADAG_MSG_STOP_DAG,
    ADAG_MSG_SHUTDOWN,
    ADAG_MSG_REPLY,
    ADAG_MSG_DAG_FAILED,
    ADAG_MSG_TRACE_DAG,
    ADAG_MSG_STATS_DAG,
    ADAG_MSG_CLOCK,
    ADAG_MSG_END
} adag_msg_type_t;

typedef struct {
    const char *name;    /* "PREPARE_DAG" */
    const char *purpose; /* "prepare a DAG", for "did not <purpose> in time" */
    int one_way;         /* nothing answers it */
    unsigned max_fds;
} adag_msg_info_t;

/* The table entry of a message type; NULL for a type this build does not know. */
const adag_msg_info_t *adag__msg_info(uint32_t type);
/* Its name, or "message <type>". */
const char *adag__msg_name(uint32_t type, char *buf, size_t len);

/* Checks a received frame against the table (known type, fds). */
adag_status_t adag__msg_check(const adag_ctl_msg_t *msg);
/* Receives one frame and checks it (adag__msg_check; the frame is freed on failure). */
adag_status_t adag__msg_recv(int sock, int64_t deadline, adag_ctl_msg_t *msg);

/* ---- typed messages: decoders fill views into msg's payload ---- */

typedef struct {
    uint32_t magic, version;
    adag_blob_t token; /* room for the multi-host bootstrap's auth token */
} adag_msg_hello_t;

typedef struct {
    uint32_t version, pid, ncpus; /* the worker's */
} adag_msg_hello_reply_t;

/* An actor's placement on the wire: what the driver asks for in
 * CREATE_ACTOR, and what the worker did, after the method table of its
 * reply (dag/proc/actor_place.c turns it into a gpu/place.h placement). */
enum {
    ADAG_MSG_PLACE_CPUS = 1u << 0,        /* request: cpus given */
    ADAG_MSG_PLACE_NIC = 1u << 1,         /* request: nic given ("" = none) */
    ADAG_MSG_PLACE_AUTOMATIC = 1u << 2,   /* request: choose the rest (ADAG_PLACEMENT) */
    ADAG_MSG_PLACE_BOUND = 1u << 3,       /* reply: its CPUs were bound */
    ADAG_MSG_PLACE_THIS_SYSTEM = 1u << 4, /* reply: placed on a map of its machine */
    ADAG_MSG_PLACE_NUMA_GIVEN = 1u << 5,  /* the NUMA node is the user's (-1: none) */
    ADAG_MSG_PLACE_ALL = (1u << 6) - 1,
};
#define ADAG_MSG_CPUS_MAX 512
#define ADAG_MSG_NIC_MAX 40

typedef struct {
    uint32_t flags;              /* ADAG_MSG_PLACE_* */
    int32_t numa;                /* -1: none */
    char cpus[ADAG_MSG_CPUS_MAX]; /* CPU list; "" */
    char nic[ADAG_MSG_NIC_MAX];  /* "mlx5_0:1"; "" */
    char gpu[16];                /* reply: its GPU's bus id; "" */
    uint32_t nic_dist;           /* reply: gpu/topo.h adag_topo_dist_t; 0 */
} adag_msg_place_t;

/* CREATE_ACTOR's settings: the runtime's (common/settings.h), each but the
 * secret token as a pair of strings {name, value as its environment
 * variable would hold it ("" for an unset string)}, after their count;
 * at most ADAG_MSG_SETTINGS_MAX pairs, a name 1 to ADAG_SETTING_NAME_MAX -
 * 1 bytes, a value at most ADAG_SETTING_TEXT_MAX, neither with a NUL. */
#define ADAG_MSG_SETTINGS_MAX 64

typedef struct {
    char module[PATH_MAX];
    char class_name[ADAG_MAX_NAME];
    char actor[ADAG_MAX_NAME];
    char device[ADAG_DEVICE_SPEC_MAX]; /* "<backend>:<index>", "" for none */
    adag_blob_t init;
    adag_msg_place_t place;
    adag_blob_t settings; /* the encoded pairs (adag__msg_apply_settings) */
} adag_msg_create_t;

typedef struct {
    char name[ADAG_MAX_NAME];
    uint32_t nargs, nreturns;
} adag_msg_method_t;

typedef struct {
    uint32_t dag_id;
    adag_blob_t program; /* dag/exec/program.h encoding */
    adag_blob_t domains; /* dag/exec/context.h adag__ctx_export_domains */
} adag_msg_prepare_t;

typedef struct {
    uint32_t dag_id;
    adag_blob_t peers;   /* dag/exec/loop.h adag__loop_connect */
} adag_msg_connect_t;

typedef struct {
    uint32_t dag_id;
    int32_t status;      /* ABORT_DAG: why (an ADAG_ERR_* code) */
    /* STOP_DAG: bit i set, the worker drops the program's communicator i
     * (the driver let it go: dag/proc/comm_lease.c) before the loop stops */
    uint64_t drop;
} adag_msg_dag_t;        /* START_DAG, ABORT_DAG, STOP_DAG, TRACE_DAG */

typedef struct {
    int32_t status;
    char msg[ADAG_ERROR_MAX];
    adag_blob_t body;
} adag_msg_reply_t;

typedef struct {
    uint32_t dag_id;
    int32_t status;      /* an ADAG_ERR_* code */
    char msg[ADAG_ERROR_MAX];
} adag_msg_failed_t;     /* DAG_FAILED */

void adag__msg_encode_hello(adag_wbuf_t *b, const adag_msg_hello_t *m);
void adag__msg_encode_hello_reply(adag_wbuf_t *b, const adag_msg_hello_reply_t *m);
/* device: "<backend>:<index>", or NULL / "" for none; settings: what
 * adag__msg_encode_settings wrote (empty: none, a count of 0) */
void adag__msg_encode_create(adag_wbuf_t *b, const char *module, const char *class_name,
                            const char *actor, const char *device, adag_blob_t init,
                            const adag_msg_place_t *place, adag_blob_t settings);
/* A runtime's settings, as CREATE_ACTOR carries them. */
void adag__msg_encode_settings(adag_wbuf_t *b, const adag_settings_t *s);
/* Sets each of CREATE_ACTOR's settings (already decoded) in s, checked by
 * the settings table: a name it does not know or a value it refuses is
 * ADAG_ERR_PROTOCOL naming the setting (s then partly set). */
adag_status_t adag__msg_apply_settings(adag_blob_t settings, adag_settings_t *s);
/* CREATE_ACTOR's reply: the method table, then the placement */
void adag__msg_encode_methods(adag_wbuf_t *b, const adag_msg_method_t *m, unsigned n,
                             const adag_msg_place_t *place);
void adag__msg_encode_prepare(adag_wbuf_t *b, const adag_msg_prepare_t *m);
void adag__msg_encode_connect(adag_wbuf_t *b, const adag_msg_connect_t *m);
void adag__msg_encode_dag(adag_wbuf_t *b, const adag_msg_dag_t *m);
void adag__msg_encode_reply(adag_wbuf_t *b, adag_status_t status, const char *msg,
                           adag_blob_t body);
void adag__msg_encode_failed(adag_wbuf_t *b, const adag_msg_failed_t *m);

/* Each decoder checks the type and that the payload is exactly one such
 * message; ADAG_ERR_PROTOCOL ("malformed <NAME> message") otherwise. */
adag_status_t adag__msg_decode_hello(const adag_ctl_msg_t *msg, adag_msg_hello_t *m);
adag_status_t adag__msg_decode_create(const adag_ctl_msg_t *msg, adag_msg_create_t *m);
adag_status_t adag__msg_decode_prepare(const adag_ctl_msg_t *msg, adag_msg_prepare_t *m);
adag_status_t adag__msg_decode_connect(const adag_ctl_msg_t *msg, adag_msg_connect_t *m);
adag_status_t adag__msg_decode_dag(const adag_ctl_msg_t *msg, adag_msg_dag_t *m);
adag_status_t adag__msg_decode_reply(const adag_ctl_msg_t *msg, adag_msg_reply_t *m);
adag_status_t adag__msg_decode_failed(const adag_ctl_msg_t *msg, adag_msg_failed_t *m);
/* Reply bodies. */
adag_status_t adag__msg_decode_hello_reply(adag_blob_t body, adag_msg_hello_reply_t *m);
/* TRACE_DAG's reply (transport/protocol_trace.c): the worker's clock
 * when it copied, the records it lost (overwritten), and the records,
 * oldest first, stamps in its ns (at most ADAG_TRACE_MAX_SPANS; decode:
 * *recs malloc'd, NULL when n is 0). */
void adag__msg_encode_trace(adag_wbuf_t *b, uint64_t now_ns, uint64_t lost,
                           const adag_trace_rec_t *recs, uint64_t n);
adag_status_t adag__msg_decode_trace(adag_blob_t body, uint64_t *now_ns, uint64_t *lost,
                                    adag_trace_rec_t **recs, uint64_t *n);
/* STATS_DAG's reply: a loop's figures (common/figures.h), at most
 * ADAG_MSG_FIGURES_MAX ops and channels (decode: arrays malloc'd). */
#define ADAG_MSG_FIGURES_MAX 65536
/* CLOCK (no body)'s reply: the worker's CLOCK_MONOTONIC and boot id
 * (common/trace.h: adag__clock_offset). */
void adag__msg_encode_clock(adag_wbuf_t *b, uint64_t now_ns, const char *boot_id);
adag_status_t adag__msg_decode_clock(adag_blob_t body, uint64_t *now_ns,
                                    char boot_id[ADAG_BOOT_ID_MAX]);
void adag__msg_encode_figures(adag_wbuf_t *b, const adag_loop_figures_t *f);
adag_status_t adag__msg_decode_figures(adag_blob_t body, adag_loop_figures_t *f);
/* The method table: *out is malloc'd (n in 1..ADAG_MAX_METHODS). */
adag_status_t adag__msg_decode_methods(adag_blob_t body, adag_msg_method_t **out, unsigned *n,
                                      adag_msg_place_t *place);

#endif

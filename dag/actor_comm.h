/*
 * The communicators an actor joined (gpu/comm.h), in the process where its
 * code runs: the driver for a thread actor, its adag-worker for a process
 * actor. A communicator is made for the device actors of a DAG whose
 * tensors travel by ADAG_TRANSPORT_COMM; the driver leases it to one DAG
 * at a time (dag/comm_lease.c) and the next DAG over the same actors gets
 * it again, already joined. Its `key` (the driver's number for it, unique
 * in the runtime) names it in programs and channel geometries.
 *
 * An entry's life in an actor:
 *   PREPARE    adag_actor_comm_begin: a known key is reused; a new one
 *              starts joining at once, on a thread of its own bound to the
 *              actor's device (init is collective: every rank, in its own
 *              thread or process, joins at the same time), and makes the
 *              entry's stream (the one its send/recv go on: two DAGs'
 *              operations never queue behind each other);
 *   CONNECT    adag_actor_comm_finish: waits for the join (by the
 *              deadline); the endpoints then find it by key;
 *   use        the DAG's endpoints send/recv; a failed DAG aborts it;
 *   STOP       kept for the next DAG, or dropped (the driver says which:
 *              after a failure its state is undefined) -- aborted, out of
 *              the table, freed once the last DAG context holding it closed
 *              its endpoints (adag_actor_comm_put).
 *
 * References: the table holds one on each entry it lists; every begin
 * gives the caller one (the DAG context keeps it until its endpoints are
 * closed); the last one joins the joining thread (it uses the entry and the
 * device until it returns, by the join's deadline) and frees the entry.
 */
#ifndef ADAG_DAG_ACTOR_COMM_H
#define ADAG_DAG_ACTOR_COMM_H

#include "dag/actor_device.h"
#include "dag/program.h"
#include "gpu/comm.h"
#include "transport/channel.h"

#include <adag.h>
#include <pthread.h>
#include <stdint.h>

typedef struct adag_actor_comm adag_actor_comm_t;

typedef struct {
    pthread_mutex_t lock;
    adag_actor_comm_t *list;
    /* A host actor (no device) that is a collective member runs its
     * communicators on host device 0, opened here at its first one and
     * closed with the table (under lock). */
    adag_actor_device_t *host_device;
} adag_actor_comms_t;

void adag_actor_comms_init(adag_actor_comms_t *t);
/* The actor stops (after every DAG context it had was destroyed): every
 * entry is dropped, then the host device (if opened) closes. Before the
 * actor's own device closes. */
void adag_actor_comms_destroy(adag_actor_comms_t *t);
/* The device a host actor's communicators run on (host:0, opened at the
 * first call; its streams carry the collectives of host tensors). */
adag_status_t adag_actor_comms_host_device(adag_actor_comms_t *t, const char *actor,
                                           const adag_chan_device_t **out);

/* Joins (or finds) communicator spec->key as `actor` on device dev (the
 * actor's; chan->dev), joining by `deadline`. ADAG_ERR_INVALID for a spec
 * that does not fit the device (another kind of device) or a key known
 * with other parameters; ADAG_ERR_CLOSED for a key that was aborted. The
 * join's own failure comes from finish. */
adag_status_t adag_actor_comm_begin(adag_actor_comms_t *t, const adag_comm_spec_t *spec,
                                    const adag_chan_device_t *dev, const char *actor,
                                    int64_t deadline, adag_actor_comm_t **out);
/* Waits until the join ended (or the deadline: ADAG_ERR_TIMEOUT) and
 * fills *out (key, communicator, stream) for the endpoints. */
adag_status_t adag_actor_comm_finish(adag_actor_comm_t *e, int64_t deadline,
                                     adag_chan_comm_t *out);
/* Aborts it (any thread; idempotent): see gpu/comm.h "abort". */
void adag_actor_comm_abort(adag_actor_comm_t *e);
/* Aborts entry `key` (if listed) and takes it out of the table. */
void adag_actor_comm_drop(adag_actor_comms_t *t, uint64_t key);
/* Gives back a reference from begin; the last one frees the entry (its
 * stream synchronized first, bounded by the teardown timeout). */
void adag_actor_comm_put(adag_actor_comm_t *e);

/* Live entries in this process (every table), for leak checks in tests. */
unsigned adag_actor_comm_live(void);

#endif

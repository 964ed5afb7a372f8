/*
 * The communicators an actor joined (gpu/comm.h), in the process where its
 * code runs: the driver for a thread actor, its adag-worker for a process
 * actor. A communicator is made for the actors of a DAG whose tensors
 * travel by ADAG_TRANSPORT_COMM (leased to one DAG at a time) or for the
 * members of its collectives (shared by the live DAGs over them, which take
 * turns on it); the next DAG over the same actors gets it again, already
 * joined (dag/proc/comm_lease.c). Its `key` (the driver's number for it, unique
 * in the runtime) names it in programs and channel geometries.
 *
 * An entry's life in an actor:
 *   PREPARE    adag__actor_comm_begin: a known key is reused; a new one
 *              starts joining at once, on a thread of its own bound to the
 *              actor's device (init is collective: every rank, in its own
 *              thread or process, joins at the same time), and makes the
 *              entry's stream (the one its send/recv go on: two DAGs'
 *              operations never queue behind each other);
 *   CONNECT    adag__actor_comm_finish: waits for the join (by the
 *              deadline); the endpoints then find it by key;
 *   use        the DAG's endpoints send/recv, its loops run collectives
 *              (shared: in turns); a failed DAG aborts one it does not
 *              share (adag__actor_comm_dag_aborted);
 *   STOP       kept for the next DAG, or dropped (the driver says which:
 *              the last DAG over it left and one of them failed) --
 *              aborted, out of the table, freed once the last DAG context
 *              holding it closed its endpoints (adag__actor_comm_put).
 *
 * References: the table holds one on each entry it lists; every begin
 * gives the caller one (the DAG context keeps it until its endpoints are
 * closed); the last one joins the joining thread (it uses the entry and the
 * device until it returns, by the join's deadline) and frees the entry.
 */
#ifndef ADAG_DAG_ACTOR_COMM_H
#define ADAG_DAG_ACTOR_COMM_H

#include "common/settings.h"
#include "dag/exec/actor_device.h"
#include "dag/exec/program.h"
#include "gpu/comm.h"
#include "transport/channel.h"

#include <adag.h>
#include <pthread.h>
#include <stdint.h>

typedef struct adag_actor_comm adag_actor_comm_t;

typedef struct {
    pthread_mutex_t lock;
    /* its actor's runtime's (a worker's: the ones CREATE_ACTOR carried);
     * they outlive the table */
    const adag_settings_t *settings;
    adag_actor_comm_t *list;
    /* A host actor (no device) that is a collective member runs its
     * communicators on emulated device 0, opened here at its first one and
     * closed with the table (under lock). */
    adag_actor_device_t *host_device;
} adag_actor_comms_t;

void adag__actor_comms_init(adag_actor_comms_t *t, const adag_settings_t *settings);
/* The actor stops (after every DAG context it had was destroyed): every
 * entry is dropped, then the emulated device (if opened) closes. Before the
 * actor's own device closes. */
void adag__actor_comms_destroy(adag_actor_comms_t *t);
/* The device a host actor's communicators run on (emu:0, opened at the
 * first call; its streams carry the collectives of host tensors). */
adag_status_t adag__actor_comms_host_device(adag_actor_comms_t *t, const char *actor,
                                           const adag_chan_device_t **out);

/* Joins (or finds) communicator spec->key as `actor` on device dev (the
 * actor's; chan->dev), joining by `deadline`. ADAG_ERR_INVALID for a spec
 * that does not fit the device (another kind of device) or a key known
 * with other parameters; ADAG_ERR_CLOSED for a key that was aborted. The
 * join's own failure comes from finish. */
adag_status_t adag__actor_comm_begin(adag_actor_comms_t *t, const adag_comm_spec_t *spec,
                                    const adag_chan_device_t *dev, const char *actor,
                                    int64_t deadline, adag_actor_comm_t **out);
/* Waits until the join ended (or the deadline: ADAG_ERR_TIMEOUT) and
 * fills *out (key, communicator, stream) for the endpoints. */
adag_status_t adag__actor_comm_finish(adag_actor_comm_t *e, int64_t deadline,
                                     adag_chan_comm_t *out);
/* Aborts it (any thread; idempotent): see gpu/comm.h "abort". */
void adag__actor_comm_abort(adag_actor_comm_t *e);
/* Aborts it, recording why and with what status (the first reason wins):
 * what the loops of the other DAGs that share it report when they find it
 * aborted. `by` is the loop that gives the reason (it fails its own DAG
 * itself; NULL: none). */
void adag__actor_comm_abort_why(adag_actor_comm_t *e, adag_status_t status, const char *why,
                               const void *by);
/* A DAG holding it was aborted in this process (failed: not a plain
 * destroy): one it does not share is aborted (a send/recv may be half
 * done); a shared one is left to the DAG's loops (dag/exec/loop_collective.c:
 * aborted only if the DAG was inside a collective on it). Wakes its turn
 * waits either way. */
void adag__actor_comm_dag_aborted(adag_actor_comm_t *e, int failed);
int adag__actor_comm_shared(const adag_actor_comm_t *e);
/* Records why it is about to be aborted, and with what status, without
 * aborting it yet (the first reason wins; `by` as for abort_why): a loop
 * whose DAG fails in a collective first reports its failure, then its
 * abort (the DAG's hook, dag/exec/loop_collective.c) carries this reason, so the
 * peers that the abort stops report after the cause. */
void adag__actor_comm_blame(adag_actor_comm_t *e, adag_status_t status, const char *why,
                           const void *by);
/* Forgets the reason `by` recorded if the communicator was not aborted
 * after all (its collective completed). */
void adag__actor_comm_unblame(adag_actor_comm_t *e, const void *by);
/* Why it was aborted ("it was aborted" if no reason was given) and the
 * status its reason carries (ADAG_ERR_CLOSED if none). *peer (may be NULL)
 * is set when the only sign is a peer rank's abort: the reason is known in
 * that peer's process, which reports it. */
adag_status_t adag__actor_comm_why(adag_actor_comm_t *e, char *buf, size_t len, int *peer);
/* ADAG_OK while it can be used; else the status and reason of its abort
 * (or of its own failure), except an abort whose reason loop `by` gave
 * (that loop fails its DAG itself) and a peer rank's abort (that peer's
 * process reports it, with the reason). What every loop of a DAG sharing
 * it checks, from its watchdog, so that each of them fails within a
 * watchdog period of the abort wherever its loop waits (any thread). */
adag_status_t adag__actor_comm_broken(adag_actor_comm_t *e, const void *by, char *buf,
                                     size_t len);

/*
 * Turns, on a shared communicator (spec.shared): the driver hands each
 * execution of each DAG over it a ticket (dag/proc/comm_lease.c), 0, 1, 2, ...
 * in one global order; a loop runs the collectives of its execution on it
 * only while holding that ticket's turn, which comes once every earlier
 * ticket's turn ended or was given up. Every rank runs the same tickets
 * in the same order, so the DAGs' collectives match on every rank.
 */
/* Waits for the turn of `ticket` (by deadline: ADAG_ERR_TIMEOUT, naming
 * it and the DAG whose loop holds the turn before it), then holds it for
 * `holder` (the loop) of DAG `dag`. ADAG_ERR_CLOSED once *abort is set or
 * the communicator was aborted (adag__actor_comm_why). */
adag_status_t adag__actor_comm_turn_take(adag_actor_comm_t *e, uint64_t ticket,
                                        const void *holder, const char *dag,
                                        const _Atomic uint32_t *abort, int64_t deadline);
/* Ends the held turn of `ticket`: its collectives were issued (or none of
 * them can have been issued by any rank). */
void adag__actor_comm_turn_end(adag_actor_comm_t *e, uint64_t ticket);
int adag__actor_comm_turn_held_by(adag_actor_comm_t *e, const void *holder);
/* A loop ended (owner): the tickets the driver publishes on its ticket
 * channel `order` from next_seq on are given up as they come, until
 * adag__actor_comm_unretire (before the endpoint closes). */
void adag__actor_comm_retire(adag_actor_comm_t *e, adag_chan_t *order, uint64_t next_seq,
                            const void *owner);
void adag__actor_comm_unretire(adag_actor_comm_t *e, const void *owner);

/* Aborts entry `key` (if listed) and takes it out of the table. */
void adag__actor_comm_drop(adag_actor_comms_t *t, uint64_t key);
/* Gives back a reference from begin; the last one frees the entry (its
 * stream synchronized first, bounded by the teardown timeout). */
void adag__actor_comm_put(adag_actor_comm_t *e);

/* Live entries in this process (every table), for leak checks in tests. */
unsigned adag__actor_comm_live(void);

#endif

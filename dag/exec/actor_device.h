/*
 * The device of a device-bound actor (adag_actor_params_t.device), in the
 * process where the actor's code runs: the driver for a thread actor, its
 * adag-worker for a process actor. Opening it checks the index against the
 * backend's probe, binds the calling thread (the one that runs init) and
 * creates the actor's two streams: `compute`, where its methods enqueue
 * their work (adag_call_stream, adag_call_enqueue), and `comm`, where
 * channels move its values. Every DAG loop of the actor gets `chan` (its
 * adag_loop_actor_t.device) and binds its own thread to the device.
 *
 * Teardown order: the DAG loops end (each waits for the work it enqueued),
 * then adag__actor_device_stop: both streams drain, the class's fini runs
 * on a thread bound to the device, the streams and the device close.
 */
#ifndef ADAG_DAG_ACTOR_DEVICE_H
#define ADAG_DAG_ACTOR_DEVICE_H

#include "common/settings.h"
#include "gpu/device.h"
#include "transport/channel.h"

#include <adag.h>
#include <stdint.h>

typedef struct {
    adag_chan_device_t chan; /* device, kind, compute and comm streams */
} adag_actor_device_t;

/* Opens device `index` of backend `kind` for a runtime whose settings are
 * `settings` (its tuning: gpu/device.h), binds the calling thread to it
 * and creates the two streams. ADAG_ERR_NOT_FOUND when the backend has no
 * such device here ("device cuda:3 does not exist here (cuda: 0 devices:
 * <why>)"). Messages do not name the actor: the caller prefixes them. */
adag_status_t adag__actor_device_open(adag_device_kind_t kind, unsigned index,
                                     const adag_settings_t *settings, adag_actor_device_t **out);

/* Binds the calling thread to the device (before init, fini, a loop). */
adag_status_t adag__actor_device_bind(adag_actor_device_t *d);

/* Waits until the work enqueued so far on both streams is done, or the
 * deadline (ADAG_ERR_TIMEOUT). */
adag_status_t adag__actor_device_sync(adag_actor_device_t *d, int64_t deadline);

/* Syncs both streams by the deadline, then destroys them and closes the
 * device (d may be NULL). If work is still running at the deadline it logs
 * that, naming `actor`, and leaks the streams and the device rather than
 * free memory the work may still use; returns ADAG_ERR_TIMEOUT. */
adag_status_t adag__actor_device_close(adag_actor_device_t *d, const char *actor,
                                      int64_t deadline);

/* The actor stops, in this order: the calling thread is bound to the
 * device, the work on both streams finishes (by the deadline), fini(state)
 * runs (if given), then adag__actor_device_close. d NULL: fini only. If the
 * work does not finish in time, fini does not run, nothing is freed, it is
 * logged once and ADAG_ERR_TIMEOUT returned: the caller must then leave
 * the state allocated too (that work may use it). */
adag_status_t adag__actor_device_stop(adag_actor_device_t *d, const char *actor, int64_t deadline,
                                     void (*fini)(void *state), void *state);

#endif

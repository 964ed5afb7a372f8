/* Where an actor runs (gpu/place.h applied to actors): the request its
 * params make, the decision made where its code runs (the worker for
 * process and remote actors, the driver for thread actors), and the
 * record the driver keeps and reports (adag_actor_placement). */
#ifndef ADAG_DAG_ACTOR_PLACE_H
#define ADAG_DAG_ACTOR_PLACE_H

#include "gpu/place.h"
#include "transport/protocol.h"

#include <adag.h>

/* The request of an actor's params (ADAG_ACTOR_PARAM_CPUS/NUMA/NIC), and
 * `automatic` (its runtime's ADAG_PLACEMENT) for the rest. */
void adag__actor_place_request(const adag_actor_params_t *p, int automatic,
                              adag_msg_place_t *req);

/* Checks the request's text (a CPU list, a node number, a NIC name);
 * whether this machine has them is known where the actor is placed. */
adag_status_t adag__actor_place_check(const adag_actor_params_t *p, const char *fn);

/* Decides the placement of an actor with that device (kind -1: none) on
 * this machine. The topology is loaded only when the request or a device
 * needs it: other actors get adag__place_none at no cost. */
adag_status_t adag__actor_place_decide(const char *who, int32_t device_kind, unsigned device_index,
                                      const adag_msg_place_t *req, adag_place_t *out);

void adag__place_to_msg(const adag_place_t *p, adag_msg_place_t *m);
/* A worker's report; ADAG_ERR_PROTOCOL if its CPU list does not parse. */
adag_status_t adag__place_from_msg(const adag_msg_place_t *m, adag_place_t *p);

/* Whether two actors' loops may share CPUs: same host, CPU sets meet. */
int adag__place_share(const adag_place_t *a, const char *host_a, const adag_place_t *b,
                     const char *host_b);

#endif

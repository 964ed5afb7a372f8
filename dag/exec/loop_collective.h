/*
 * A loop's collectives (ADAG_OP_COLLECTIVE): dag/loop_collective.c says how
 * one member runs its part of each execution.
 */
#ifndef ADAG_DAG_LOOP_COLLECTIVE_H
#define ADAG_DAG_LOOP_COLLECTIVE_H

#include "dag/loop.h"

/* Bytes a member publishes on its status channel per execution (its
 * tensor's dtype, ndim and shape): that channel's slot size. */
#define ADAG_COLL_STATUS_BYTES (2 * 4 + ADAG_MAX_DIMS * 8)

/* After the endpoints are open: the events of every collective operation
 * of the program (none: nothing). */
adag_status_t adag__loop_coll_prepare(adag_loop_t *loop);
/* Runs op for execution seq (ADAG_ERR_CLOSED once the DAG is aborted). */
adag_status_t adag__loop_coll_run(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq);
/* The watchdog's check of the loop's collectives (adag_watch_fn; ctx: the loop). */
adag_status_t adag__loop_coll_watch(void *ctx, int64_t now, int64_t timeout_ns, int64_t *since);
/* Nonzero if a collective of the loop on its communicator `comm` (an
 * index into the program's) was issued and has not completed (any
 * thread). */
int adag__loop_coll_pending(adag_loop_t *loop, uint32_t comm);
/* After the loop's streams drained. */
void adag__loop_coll_close(adag_loop_t *loop);

#endif

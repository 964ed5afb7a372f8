/*
 * A loop's collectives (ADAG_OP_COLLECTIVE) and its turns on the shared
 * communicators they run on: dag/exec/loop_collective.c says how one
 * member runs its part of each execution, and how executions of several
 * DAGs take turns on one communicator.
 */
#ifndef ADAG_DAG_LOOP_COLLECTIVE_H
#define ADAG_DAG_LOOP_COLLECTIVE_H

#include "dag/exec/loop.h"

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
/* After the loop's streams drained. */
void adag__loop_coll_close(adag_loop_t *loop);

/* ---- turns on shared communicators ---- */

/* PREPARE: the turn state of each shared communicator with collectives. */
adag_status_t adag__loop_turns_prepare(adag_loop_t *loop);
/* START (before the loop thread): the hook that decides, if the DAG
 * fails, whether it leaves a shared communicator broken. */
adag_status_t adag__loop_turns_start(adag_loop_t *loop);
/* Before the collective op (named coll) of execution seq: takes the turn
 * of seq's ticket on op's communicator if shared and not held yet. Not
 * ADAG_OK: the loop stops (ADAG_ERR_CLOSED: the DAG was aborted or was
 * just failed, by a turn that did not come or an aborted communicator). */
adag_status_t adag__loop_turn_begin(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                                   const char *coll);
/* After op was issued (or failed alike on every member): the turn ends
 * with the execution's last collective on the communicator. */
void adag__loop_turn_op_done(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq);
/* A member never came to op: no rank issues it, the turn ends now. */
void adag__loop_turn_give_up(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq);
/* The DAG is about to fail in op (named coll) with st, msg in a way its
 * peers cannot go past (a member did not come to it, or it did not
 * complete): records that reason on a shared communicator, which the
 * DAG's abort (its hook, with the turn held or the collective pending)
 * then aborts, failing every other DAG sharing it. Call before the
 * failure is reported (any thread of the loop). */
void adag__loop_turn_blame(adag_loop_t *loop, const adag_prog_op_t *op, const char *coll,
                          adag_status_t st, const char *msg);
/* The watchdog's check (any thread): ADAG_OK, or the status of a shared
 * communicator of the loop that another DAG's failure (or its own)
 * aborted, with the message set: this DAG then fails too. */
adag_status_t adag__loop_turns_watch(adag_loop_t *loop);
/* The loop thread ends: a held turn aborts its communicator; later
 * tickets are given up. */
void adag__loop_turns_end(adag_loop_t *loop);
/* After the loop thread was joined, before the endpoints close. */
void adag__loop_turns_close(adag_loop_t *loop);

#endif

/*
 * A loop's turns on shared communicators (dag/actor_comm.h, "turns"):
 * several live DAGs over the same actors run their collectives on one
 * communicator, each execution within the turn of the ticket the driver
 * published for it on the communicator's ticket channel.
 *
 * Per execution seq and shared communicator, the loop takes the turn at
 * its first collective on it and ends it after the last one (the
 * program's ncolls), once each is issued (host tensors: completed).
 *
 * When the DAG fails, a shared communicator stays usable for the other
 * DAGs unless this one was inside a collective on it: holding a turn (a
 * member did not come to the agreement), or with a collective issued on a
 * device stream and not yet completed (a peer may never issue its side).
 * Then it is aborted, with the reason the loop that failed recorded first
 * (adag__loop_turn_blame), and every loop of every other DAG on it fails
 * its DAG with that reason: from its watchdog (adag__loop_turns_watch), so
 * within a period wherever the loop waits, or at its next turn or
 * collective, whichever comes first. A loop that ends gives
 * up the tickets it did not run, also those the driver publishes after
 * it ended (the communicator's entry reads its ticket channel from then
 * on): no rank runs them, since no rank runs a collective before every
 * member published its status for it, which this one never does.
 */
#include "dag/loop_turns.h"

#include "common/clock.h"
#include "common/error.h"
#include "dag/loop_collective.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct adag_loop_turn {
    uint64_t held_seq1; /* seq + 1 of the execution holding the turn; 0: none */
    uint64_t ticket;    /* its ticket */
    uint32_t ndone;     /* its collectives issued so far */
    uint64_t next_seq;  /* the first execution whose ticket is not taken */
    uint32_t ncolls;    /* 0: not shared, or no collective of this DAG on it */
};

static int64_t comm_deadline(const adag_loop_t *loop)
{
    return loop->prog.comm_timeout_ms > 0 ? adag__deadline_ms(loop->prog.comm_timeout_ms)
                                          : ADAG_FOREVER;
}

adag_status_t adag__loop_turns_prepare(adag_loop_t *loop)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < loop->prog.ncomms; i++)
        n += loop->prog.comms[i].shared && loop->prog.comms[i].ncolls;
    if (n == 0)
        return ADAG_OK;
    if (!(loop->turns = calloc(loop->prog.ncomms, sizeof(*loop->turns))))
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", loop->actor_name);
    for (uint32_t i = 0; i < loop->prog.ncomms; i++)
        if (loop->prog.comms[i].shared)
            loop->turns[i].ncolls = loop->prog.comms[i].ncolls;
    return ADAG_OK;
}

adag_status_t adag__loop_turn_begin(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                                   const char *coll)
{
    struct adag_loop_turn *t = loop->turns ? &loop->turns[op->comm] : NULL;
    if (!t || !t->ncolls || t->held_seq1 == seq + 1)
        return ADAG_OK;
    const adag_comm_spec_t *spec = &loop->prog.comms[op->comm];
    adag_actor_comm_t *e = loop->comm_entries[op->comm];
    adag_slot_view_t v;
    uint64_t ticket;
    adag_status_t st = adag__chan_wait(loop->chans[spec->order_chan], seq, ADAG_FOREVER, &v);
    if (st != ADAG_OK)
        return st;
    if (v.status != ADAG_OK || v.size != sizeof(ticket))
        return adag__error(ADAG_ERR_PROTOCOL, "actor %s: %s: execution %llu has no ticket on "
                          "%s", loop->actor_name, coll, (unsigned long long)seq,
                          loop->chans[spec->order_chan]->name);
    memcpy(&ticket, v.data, sizeof(ticket));
    st = adag__actor_comm_turn_take(e, ticket, loop, loop->prog.dag_name, &loop->ctx->abort,
                                    comm_deadline(loop));
    if (st == ADAG_OK) {
        t->held_seq1 = seq + 1;
        t->ticket = ticket;
        t->ndone = 0;
        return ADAG_OK;
    }
    char msg[ADAG_ERROR_MAX + 256];
    if (st == ADAG_ERR_TIMEOUT) {
        snprintf(msg, sizeof(msg), "%s: %s of DAG %s, execution %llu, waited %lld ms for its "
                 "turn on the communicator it shares with other DAGs",
                 adag_last_error(), coll, loop->prog.dag_name, (unsigned long long)seq,
                 (long long)loop->prog.comm_timeout_ms);
    } else if (st == ADAG_ERR_CLOSED && !adag__ctx_aborted(loop->ctx)) {
        char why[ADAG_ERROR_MAX];
        st = adag__actor_comm_why(e, why, sizeof(why), NULL);
        snprintf(msg, sizeof(msg), "actor %s: %s of DAG %s: its communicator %llu, shared "
                 "with other DAGs, was aborted: %s", loop->actor_name, coll,
                 loop->prog.dag_name, (unsigned long long)spec->key, why);
    } else {
        return st;
    }
    adag__loop_fail_dag(loop, st, msg);
    return ADAG_ERR_CLOSED;
}

/* Ends seq's turn on op's communicator if held: after its last
 * collective (last_only), or now. */
static void end_turn(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq, int last_only)
{
    struct adag_loop_turn *t = loop->turns ? &loop->turns[op->comm] : NULL;
    if (!t || t->held_seq1 != seq + 1 || (last_only && ++t->ndone < t->ncolls))
        return;
    adag__actor_comm_turn_end(loop->comm_entries[op->comm], t->ticket);
    t->held_seq1 = 0;
    t->next_seq = seq + 1;
}

void adag__loop_turn_op_done(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq)
{
    end_turn(loop, op, seq, 1);
}

void adag__loop_turn_give_up(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq)
{
    end_turn(loop, op, seq, 0);
}

/* The entry of the loop's communicator i if shared with other DAGs
 * (collectives only), else NULL. From the program and the entries, which
 * outlive the watchdog (loop->turns does not: freed before it stops). */
static adag_actor_comm_t *shared_entry(const adag_loop_t *loop, uint32_t i)
{
    const adag_comm_spec_t *spec = &loop->prog.comms[i];
    return spec->shared && spec->ncolls && loop->comm_entries ? loop->comm_entries[i] : NULL;
}

void adag__loop_turn_blame(adag_loop_t *loop, const adag_prog_op_t *op, const char *coll,
                          adag_status_t st, const char *msg)
{
    adag_actor_comm_t *e = shared_entry(loop, op->comm);
    if (!e)
        return;
    char why[ADAG_ERROR_MAX];
    snprintf(why, sizeof(why), "DAG %s failed in its collective %s on it: %s",
             loop->prog.dag_name, coll, msg);
    adag__actor_comm_blame(e, st, why, loop);
}

adag_status_t adag__loop_turns_watch(adag_loop_t *loop)
{
    for (uint32_t i = 0; i < loop->prog.ncomms; i++) {
        adag_actor_comm_t *e = shared_entry(loop, i);
        if (!e)
            continue;
        char why[ADAG_ERROR_MAX];
        adag_status_t st = adag__actor_comm_broken(e, loop, why, sizeof(why));
        if (st != ADAG_OK)
            return adag__error(st, "DAG %s: its communicator %llu, shared with other DAGs, was "
                              "aborted: %s", loop->prog.dag_name,
                              (unsigned long long)loop->prog.comms[i].key, why);
    }
    return ADAG_OK;
}

/* The DAG was aborted in this process (adag__ctx_abort, under the
 * context's lock, any thread). */
static void on_abort(void *arg, int failed)
{
    adag_loop_t *loop = arg;
    if (!failed)
        return;
    for (uint32_t i = 0; i < loop->prog.ncomms; i++) {
        if (!loop->turns[i].ncolls)
            continue;
        adag_actor_comm_t *e = loop->comm_entries[i];
        if (!adag__actor_comm_turn_held_by(e, loop) && !adag__loop_coll_pending(loop, i)) {
            adag__actor_comm_unblame(e, loop); /* its collective completed after all */
            continue;
        }
        /* the abort word holds -status (seq_cst, stored before the hooks run) */
        adag_status_t st =
            -(adag_status_t)atomic_load_explicit(&loop->ctx->abort, memory_order_seq_cst);
        char why[ADAG_ERROR_MAX];
        snprintf(why, sizeof(why), "DAG %s failed (%s) inside a collective on it (actor %s)",
                 loop->prog.dag_name, adag_status_str(st), loop->actor_name);
        adag__actor_comm_abort_why(e, st, why, loop);
    }
}

adag_status_t adag__loop_turns_start(adag_loop_t *loop)
{
    return loop->turns ? adag__ctx_add_abort_hook(loop->ctx, on_abort, loop) : ADAG_OK;
}

void adag__loop_turns_end(adag_loop_t *loop)
{
    for (uint32_t i = 0; loop->turns && i < loop->prog.ncomms; i++) {
        struct adag_loop_turn *t = &loop->turns[i];
        if (!t->ncolls)
            continue;
        adag_actor_comm_t *e = loop->comm_entries[i];
        adag_chan_t *order = loop->chans[loop->prog.comms[i].order_chan];
        uint64_t next = t->next_seq;
        if (t->held_seq1) {
            /* it stops inside a collective: a peer may wait for it */
            char why[ADAG_ERROR_MAX];
            snprintf(why, sizeof(why), "the loop of actor %s for DAG %s ended inside a "
                     "collective on it (execution %llu)", loop->actor_name,
                     loop->prog.dag_name, (unsigned long long)(t->held_seq1 - 1));
            adag__actor_comm_abort_why(e, ADAG_ERR_CLOSED, why, loop);
            adag__actor_comm_turn_end(e, t->ticket);
            adag__chan_release(order, t->held_seq1 - 1);
            next = t->held_seq1;
            t->held_seq1 = 0;
        }
        adag__actor_comm_retire(e, order, next, loop);
    }
}

void adag__loop_turns_close(adag_loop_t *loop)
{
    if (!loop->turns)
        return;
    adag__ctx_remove_abort_hook(loop->ctx, loop);
    for (uint32_t i = 0; i < loop->prog.ncomms; i++)
        if (loop->turns[i].ncolls && loop->comm_entries && loop->comm_entries[i])
            adag__actor_comm_unretire(loop->comm_entries[i], loop);
    free(loop->turns);
    loop->turns = NULL;
}

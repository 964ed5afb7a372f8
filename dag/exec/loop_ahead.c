/*
 * Calls enqueued ahead of their inputs (dag/exec/loop.h, "ahead"): a
 * device-bound actor's method whose every argument is a tensor of static
 * dtype and shape that a device writer hands to it by value ops
 * (transport/chan_dev_words.c) runs as soon as its execution started (the
 * driver published it on the start channel) instead of once each writer's
 * loop published its value: the method's work is enqueued behind the
 * waits on the writers' words, so when a writer's kernel ends the reader's
 * follows on the device with no host thread between them. The loop then
 * waits for the inputs on the ring as usual, for their status: an
 * execution that failed upstream publishes that failure (what the streams
 * computed from it is never read), one that did not publishes the
 * method's results.
 *
 * Its device returns are made visible to such readers downstream right
 * after the method (the channel's publish_ahead: the `ready` record and
 * the word), so a chain of such actors runs on the devices while their
 * loops trail behind, checking statuses. Only executions the driver
 * started are enqueued: an idle DAG leaves no wait on an actor's streams,
 * which other DAGs of the actor share.
 */
#include "common/error.h"
#include "common/log.h"
#include "dag/exec/loop.h"

#include <stdlib.h>

/* Whether op may run ahead: a call on a device of which every argument is
 * a static tensor that its endpoint can read ahead. */
static int op_may_run_ahead(adag_loop_t *loop, const adag_prog_op_t *op)
{
    if (op->kind != ADAG_OP_CALL || op->nargs == 0)
        return 0;
    for (uint32_t a = 0; a < op->nargs; a++) {
        const adag_prog_chan_t *pc = &loop->prog.chans[op->args[a]];
        if ((pc->tensor.flags & ADAG_TENSOR_DECL_KNOWN) != ADAG_TENSOR_DECL_KNOWN ||
            !adag__chan_ahead(loop->chans[op->args[a]]))
            return 0;
    }
    return 1;
}

adag_status_t adag__loop_ahead_init(adag_loop_t *loop)
{
    loop->op_ahead = NULL;
    if (!loop->actor.device || loop->prog.start_chan == ADAG_PROG_NO_CHAN)
        return ADAG_OK;
    uint8_t *ahead = calloc(loop->prog.nops ? loop->prog.nops : 1, sizeof(*ahead));
    if (!ahead)
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", loop->actor_name);
    unsigned any = 0;
    for (uint32_t i = 0; i < loop->prog.nops; i++)
        any += ahead[i] = (uint8_t)op_may_run_ahead(loop, &loop->prog.ops[i]);
    if (!any) {
        free(ahead);
        return ADAG_OK;
    }
    ADAG_LOG_INFO("actor %s: %u of the %u operations of DAG %s run ahead of their inputs",
                  loop->actor_name, any, loop->prog.nops, loop->prog.dag_name);
    loop->op_ahead = ahead;
    return ADAG_OK;
}

void adag__loop_ahead_close(adag_loop_t *loop)
{
    free(loop->op_ahead);
    loop->op_ahead = NULL;
}

adag_status_t adag__loop_ahead_args(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                                   struct adag_call *call)
{
    for (uint32_t a = 0; a < op->nargs; a++) {
        const adag_tensor_decl_t *d = &loop->prog.chans[op->args[a]].tensor;
        adag_tensor_meta_t meta = {.dtype = d->dtype, .ndim = d->ndim};
        for (uint32_t k = 0; k < d->ndim; k++)
            meta.shape[k] = d->shape[k];
        size_t size;
        if (adag__tensor_bytes(d->dtype, d->ndim, d->shape, &size, NULL, 0) != ADAG_TENSOR_OK)
            return adag__error(ADAG_ERR_PROTOCOL, "actor %s: channel %s declares a tensor of "
                                                 "no size", loop->actor_name,
                              loop->chans[op->args[a]]->name);
        adag_chan_t *ch = loop->chans[op->args[a]];
        adag_status_t st = ch->ops->wait_ahead(ch, seq, size, &meta, &call->args[a]);
        if (st != ADAG_OK)
            return st;
    }
    return ADAG_OK;
}

adag_status_t adag__loop_ahead_publish(adag_loop_t *loop, const adag_prog_op_t *op,
                                      uint64_t seq)
{
    for (uint32_t r = 0; r < op->nrets; r++) {
        adag_chan_t *ch = loop->chans[op->rets[r]];
        adag_status_t st = adag__chan_ahead(ch) ? ch->ops->publish_ahead(ch, seq) : ADAG_OK;
        if (st != ADAG_OK)
            return st;
    }
    return ADAG_OK;
}

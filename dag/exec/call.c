/*
 * The call a method gets (adag_call_h): its inputs, its outputs written in
 * place or copied, its failure, its ref and actor; the device side of it
 * (adag_call_device, adag_call_stream, adag_call_enqueue) is in
 * call_device.c. The loop (loop.c) fills struct adag_call for each CALL
 * op and reads what the method left in it.
 */
#include "common/error.h"
#include "common/value.h"
#include "dag/exec/loop.h"
#include "transport/slot_value.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

adag_status_t adag__call_error(adag_call_h call, adag_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(call->call_err, sizeof(call->call_err), fmt, ap);
    va_end(ap);
    return adag__error(st, "%s", call->call_err);
}

const char *adag__call_method_name(adag_call_h call)
{
    return call->loop->methods[call->op->method].name;
}

/* ---- the API a method uses ---- */

adag_status_t adag_call_arg(adag_call_h call, unsigned i, adag_value_t *value)
{
    if (!call || !value)
        return adag__error(ADAG_ERR_INVALID, "adag_call_arg: call and value must not be NULL");
    if (i >= call->op->nargs)
        return adag__call_error(call, ADAG_ERR_INVALID,
                               "actor %s.%s: adag_call_arg: argument %u does not exist (the "
                               "method takes %u)",
                               call->loop->actor_name, adag__call_method_name(call), i,
                               call->op->nargs);
    *value = adag__value_from_view(&call->args[i]);
    return ADAG_OK;
}

/* The value of return i refused by its channel's static declaration: the
 * call fails, and so does the execution whatever the method does next. */
static adag_status_t refuse_undeclared(adag_call_h call, const char *fn, unsigned i,
                                       const adag_prog_chan_t *pc, uint32_t dtype, uint32_t ndim,
                                       const int64_t *shape)
{
    char want[160], got[160];
    adag__tensor_decl_format(want, sizeof(want), &pc->tensor);
    adag__tensor_format(got, sizeof(got), dtype, ndim, shape);
    adag_status_t st = adag__call_error(call, ADAG_ERR_INVALID,
                                       "actor %s.%s: %s: return %u (channel %s) is declared "
                                       "%s, given %s",
                                       call->loop->actor_name, adag__call_method_name(call), fn,
                                       i, pc->name, want, got);
    if (call->fail_status == ADAG_OK) {
        snprintf(call->msg, sizeof(call->msg), "%s", call->call_err);
        call->fail_status = ADAG_ERR_METHOD;
    }
    return st;
}

/* Gives return i a buffer of `size` bytes if the slot has room; `what`
 * describes the value for the message ("" for bytes). */
static adag_status_t give_output(adag_call_h call, unsigned i, size_t size, const char *what,
                                 void **buf)
{
    const adag_prog_chan_t *pc = &call->loop->prog.chans[call->op->rets[i]];
    size_t cap = call->loop->chans[call->op->rets[i]]->capacity;
    if (size > cap) {
        snprintf(call->msg, sizeof(call->msg),
                 "actor %s.%s: return %u (channel %s) is %s%zu bytes, larger than the slot "
                 "capacity of %zu bytes",
                 call->loop->actor_name, adag__call_method_name(call), i, pc->name, what, size,
                 cap);
        call->fail_status = ADAG_ERR_TOO_LARGE;
        *buf = NULL;
        return adag__error(ADAG_ERR_TOO_LARGE, "%s", call->msg);
    }
    call->sizes[i] = size;
    call->written |= 1u << i;
    call->handed |= 1u << i;
    *buf = call->bufs[i];
    return ADAG_OK;
}

adag_status_t adag_call_output(adag_call_h call, unsigned i, size_t size, void **buf)
{
    if (!call || !buf)
        return adag__error(ADAG_ERR_INVALID, "adag_call_output: call and buf must not be NULL");
    if (i >= call->op->nrets)
        return adag__call_error(call, ADAG_ERR_INVALID,
                               "actor %s.%s: adag_call_output: return %u does not exist (the "
                               "method has %u)",
                               call->loop->actor_name, adag__call_method_name(call), i,
                               call->op->nrets);
    const adag_prog_chan_t *pc = &call->loop->prog.chans[call->op->rets[i]];
    if (pc->tensor.flags & (ADAG_TENSOR_STATIC_DTYPE | ADAG_TENSOR_STATIC_SHAPE)) {
        *buf = NULL;
        return refuse_undeclared(call, "adag_call_output", i, pc, ADAG_DTYPE_BYTES, 0, NULL);
    }
    call->metas[i].dtype = ADAG_DTYPE_BYTES;
    call->metas[i].ndim = 0;
    return give_output(call, i, size, "", buf);
}

adag_status_t adag_call_output_tensor(adag_call_h call, unsigned i, adag_dtype_t dtype,
                                      unsigned ndim, const int64_t *shape, void **buf)
{
    static const char *fn = "adag_call_output_tensor";
    char why[200], what[200];
    size_t size = 0;
    if (!call || !buf || (ndim && !shape))
        return adag__error(ADAG_ERR_INVALID, "%s: call, shape and buf must not be NULL", fn);
    *buf = NULL;
    if (i >= call->op->nrets)
        return adag__call_error(call, ADAG_ERR_INVALID,
                               "actor %s.%s: %s: return %u does not exist (the method has %u)",
                               call->loop->actor_name, adag__call_method_name(call), fn, i,
                               call->op->nrets);
    const adag_prog_chan_t *pc = &call->loop->prog.chans[call->op->rets[i]];
    adag_tensor_check_t c = adag__tensor_bytes((uint32_t)dtype, ndim, shape, &size, why,
                                              sizeof(why));
    if (c == ADAG_TENSOR_BAD)
        return adag__call_error(call, ADAG_ERR_INVALID,
                               "actor %s.%s: %s: return %u (channel %s): %s",
                               call->loop->actor_name, adag__call_method_name(call), fn, i,
                               pc->name, why);
    if (!adag__tensor_decl_allows(&pc->tensor, (uint32_t)dtype, ndim, shape))
        return refuse_undeclared(call, fn, i, pc, (uint32_t)dtype, ndim, shape);
    adag__tensor_format(what, sizeof(what) - 2, (uint32_t)dtype, ndim, shape);
    strcat(what, ", ");
    if (c == ADAG_TENSOR_OVERFLOW) {
        snprintf(call->msg, sizeof(call->msg),
                 "actor %s.%s: return %u (channel %s): %s, far larger than the slot "
                 "capacity of %zu bytes",
                 call->loop->actor_name, adag__call_method_name(call), i, pc->name, why,
                 call->loop->chans[call->op->rets[i]]->capacity);
        call->fail_status = ADAG_ERR_TOO_LARGE;
        return adag__error(ADAG_ERR_TOO_LARGE, "%s", call->msg);
    }
    adag_status_t st = give_output(call, i, size, what, buf);
    if (st != ADAG_OK)
        return st;
    adag_tensor_meta_t *m = &call->metas[i];
    m->dtype = (uint32_t)dtype;
    m->ndim = ndim;
    for (unsigned d = 0; d < ndim; d++)
        m->shape[d] = shape[d];
    return ADAG_OK;
}

adag_status_t adag_call_set_output(adag_call_h call, unsigned i, const void *data, size_t size)
{
    void *buf;
    if (size && call && !data)
        return adag__call_error(call, ADAG_ERR_INVALID,
                               "actor %s.%s: adag_call_set_output: data is NULL for %zu bytes",
                               call->loop->actor_name, adag__call_method_name(call), size);
    adag_status_t st = adag_call_output(call, i, size, &buf);
    if (st == ADAG_OK && size)
        memcpy(buf, data, size);
    if (st == ADAG_OK) /* its bytes are final now: no device work writes them */
        call->handed &= ~(1u << i);
    return st;
}

adag_status_t adag_call_fail(adag_call_h call, const char *fmt, ...)
{
    if (!call)
        return adag__error(ADAG_ERR_INVALID, "adag_call_fail: call is NULL");
    char text[ADAG_SLOT_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt ? fmt : "(no message)", ap);
    va_end(ap);
    if (call->fail_status == ADAG_OK) {
        snprintf(call->msg, sizeof(call->msg), "actor %s.%s: %s", call->loop->actor_name,
                 adag__call_method_name(call), text);
        call->fail_status = ADAG_ERR_METHOD;
    }
    return ADAG_ERR_METHOD;
}

uint64_t adag_call_ref(adag_call_h call)
{
    return call ? call->seq : 0;
}

const char *adag_call_actor_name(adag_call_h call)
{
    return call ? call->loop->actor_name : "";
}

#include "dag/loop.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/value.h"
#include "transport/shm_ring.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct adag_call {
    adag_loop_t *loop;
    const adag_prog_op_t *op;
    uint64_t seq;
    adag_slot_view_t args[ADAG_MAX_ARGS];
    void *bufs[ADAG_MAX_RETURNS];
    size_t sizes[ADAG_MAX_RETURNS];
    uint32_t written; /* bit i: return i was given a buffer */
    adag_status_t fail_status; /* set: the execution fails whatever the method returns */
    char msg[ADAG_SLOT_ERR_MAX];
    char call_err[ADAG_SLOT_ERR_MAX]; /* the last failing adag_call_* (reported if the
                                         method then returns an error) */
};

/* A failing adag_call_* on a valid call: remembered so that a method that
 * passes the status on reports this message, not just the code. */
static adag_status_t call_error(adag_call_h call, adag_status_t st, const char *fmt, ...)
    ADAG_PRINTF(3, 4);
static adag_status_t call_error(adag_call_h call, adag_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(call->call_err, sizeof(call->call_err), fmt, ap);
    va_end(ap);
    return adag_error(st, "%s", call->call_err);
}

static const char *method_name(const adag_call_h call)
{
    return call->loop->methods[call->op->method].name;
}

/* ---- the API a method uses ---- */

adag_status_t adag_call_arg(adag_call_h call, unsigned i, adag_value_t *value)
{
    if (!call || !value)
        return adag_error(ADAG_ERR_INVALID, "adag_call_arg: call and value must not be NULL");
    if (i >= call->op->nargs)
        return call_error(call, ADAG_ERR_INVALID,
                          "actor %s.%s: adag_call_arg: argument %u does not exist (the method "
                          "takes %u)",
                          call->loop->actor_name, method_name(call), i, call->op->nargs);
    *value = adag_value_bytes(call->args[i].data, call->args[i].size);
    return ADAG_OK;
}

adag_status_t adag_call_output(adag_call_h call, unsigned i, size_t size, void **buf)
{
    if (!call || !buf)
        return adag_error(ADAG_ERR_INVALID, "adag_call_output: call and buf must not be NULL");
    if (i >= call->op->nrets)
        return call_error(call, ADAG_ERR_INVALID,
                          "actor %s.%s: adag_call_output: return %u does not exist (the method "
                          "has %u)",
                          call->loop->actor_name, method_name(call), i, call->op->nrets);
    const adag_prog_chan_t *pc = &call->loop->prog.chans[call->op->rets[i]];
    size_t cap = call->loop->chans[call->op->rets[i]].capacity;
    if (size > cap) {
        snprintf(call->msg, sizeof(call->msg),
                 "actor %s.%s: return %u (channel %s) is %zu bytes, larger than the slot "
                 "capacity of %zu bytes",
                 call->loop->actor_name, method_name(call), i, pc->name, size, cap);
        call->fail_status = ADAG_ERR_TOO_LARGE;
        *buf = NULL;
        return adag_error(ADAG_ERR_TOO_LARGE, "%s", call->msg);
    }
    call->sizes[i] = size;
    call->written |= 1u << i;
    *buf = call->bufs[i];
    return ADAG_OK;
}

adag_status_t adag_call_set_output(adag_call_h call, unsigned i, const void *data, size_t size)
{
    void *buf;
    if (size && call && !data)
        return call_error(call, ADAG_ERR_INVALID,
                          "actor %s.%s: adag_call_set_output: data is NULL for %zu bytes",
                          call->loop->actor_name, method_name(call), size);
    adag_status_t st = adag_call_output(call, i, size, &buf);
    if (st == ADAG_OK && size)
        memcpy(buf, data, size);
    return st;
}

adag_status_t adag_call_fail(adag_call_h call, const char *fmt, ...)
{
    if (!call)
        return adag_error(ADAG_ERR_INVALID, "adag_call_fail: call is NULL");
    char text[ADAG_SLOT_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt ? fmt : "(no message)", ap);
    va_end(ap);
    if (call->fail_status == ADAG_OK) {
        snprintf(call->msg, sizeof(call->msg), "actor %s.%s: %s", call->loop->actor_name,
                 method_name(call), text);
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

/* ---- the loop ---- */

static void notify_driver(adag_loop_t *loop, const adag_prog_chan_t *pc)
{
    if (!pc->to_driver || loop->notify_fd < 0 ||
        !atomic_load_explicit(&loop->hdr->fd_armed, memory_order_seq_cst))
        return;
    uint64_t one = 1;
    while (write(loop->notify_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
}

static void publish_all(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                        const size_t *sizes, adag_status_t status, const char *err)
{
    for (uint32_t r = 0; r < op->nrets; r++) {
        uint32_t c = op->rets[r];
        adag_chan_publish(&loop->chans[c], seq, status == ADAG_OK ? sizes[r] : 0, status, err);
        notify_driver(loop, &loop->prog.chans[c]);
    }
}

/* Runs one operation of execution seq. Returns ADAG_ERR_CLOSED when the DAG
 * is aborted, another error on a fatal failure. */
static adag_status_t run_op(adag_loop_t *loop, const adag_prog_op_t *op, uint64_t seq,
                            struct adag_call *call)
{
    adag_status_t st, upstream = ADAG_OK;
    const char *upstream_err = NULL;

    /* READ */
    for (uint32_t a = 0; a < op->nargs; a++) {
        st = adag_chan_wait(&loop->chans[op->args[a]], seq, ADAG_FOREVER, &call->args[a]);
        if (st != ADAG_OK)
            return st;
        if (call->args[a].status != ADAG_OK && upstream == ADAG_OK) {
            upstream = call->args[a].status;
            upstream_err = call->args[a].err;
        }
    }
    /* acquire the return slots (zero-copy writes go straight into them) */
    for (uint32_t r = 0; r < op->nrets; r++) {
        st = adag_chan_acquire(&loop->chans[op->rets[r]], seq, ADAG_FOREVER, &call->bufs[r]);
        if (st != ADAG_OK)
            return st;
        call->sizes[r] = 0;
    }
    if (upstream != ADAG_OK) {
        publish_all(loop, op, seq, call->sizes, upstream, upstream_err);
        return ADAG_OK;
    }
    /* COMPUTE */
    call->op = op;
    call->seq = seq;
    call->written = 0;
    call->fail_status = ADAG_OK;
    call->msg[0] = '\0';
    call->call_err[0] = '\0';
    const adag_method_info_t *m = &loop->methods[op->method];
    pthread_mutex_lock(loop->call_lock);
    st = m->fn(loop->state, call);
    pthread_mutex_unlock(loop->call_lock);
    /* WRITE. A method's own failure always reaches the caller as
     * ADAG_ERR_METHOD: the code it returned (a TIMEOUT that would invite
     * retries, a positive value that would look like success) goes in the
     * message. Sizes refused by adag_call_output stay ADAG_ERR_TOO_LARGE. */
    if (call->fail_status != ADAG_OK) {
        st = call->fail_status;
    } else if (st != ADAG_OK) {
        if (call->call_err[0])
            snprintf(call->msg, sizeof(call->msg), "%s", call->call_err);
        else if (st < ADAG_OK && st >= ADAG_ERR_INTERNAL)
            snprintf(call->msg, sizeof(call->msg), "actor %s.%s: returned %s (%d)",
                     loop->actor_name, m->name, adag_status_str(st), (int)st);
        else
            snprintf(call->msg, sizeof(call->msg),
                     "actor %s.%s: returned %d, which is not an adag status (ADAG_OK or an "
                     "ADAG_ERR_* code)",
                     loop->actor_name, m->name, (int)st);
        st = ADAG_ERR_METHOD;
    } else {
        for (uint32_t r = 0; r < op->nrets; r++) {
            if (!(call->written & (1u << r))) {
                st = ADAG_ERR_METHOD;
                snprintf(call->msg, sizeof(call->msg),
                         "actor %s.%s: returned without writing return %u", loop->actor_name,
                         m->name, r);
                break;
            }
        }
    }
    publish_all(loop, op, seq, call->sizes, st, call->msg);
    return ADAG_OK;
}

typedef struct {
    const adag_segment_hdr_t *hdr;
    uint64_t seq;
} started_arg_t;

static int execution_started(const void *p)
{
    const started_arg_t *a = p;
    return atomic_load_explicit(&a->hdr->started, memory_order_seq_cst) > a->seq;
}

static void *loop_main(void *arg)
{
    adag_loop_t *loop = arg;
    struct adag_call call;
    memset(&call, 0, sizeof(call));
    call.loop = loop;
    for (uint64_t seq = 0;; seq++) {
        /* an aborted DAG abandons executions already queued in its channels */
        if (atomic_load_explicit(&loop->hdr->abort, memory_order_seq_cst) != 0)
            return NULL;
        if (loop->waits_start) {
            started_arg_t sa = {loop->hdr, seq};
            if (adag_event_wait(&loop->hdr->start_ev, execution_started, &sa, &loop->hdr->abort,
                                ADAG_FOREVER, &loop->start_spin) != ADAG_OK)
                return NULL;
        }
        for (uint32_t i = 0; i < loop->prog.nops; i++) {
            adag_status_t st = run_op(loop, &loop->prog.ops[i], seq, &call);
            if (st == ADAG_ERR_CLOSED)
                return NULL;
            if (st != ADAG_OK) {
                if (loop->on_fatal)
                    loop->on_fatal(loop->fatal_ctx, st, adag_last_error());
                return NULL;
            }
        }
        for (unsigned i = 0; i < loop->nreads; i++)
            adag_chan_release(&loop->chans[loop->reads[i]], seq);
    }
}

adag_status_t adag_loop_open(adag_loop_t *loop, adag_program_t *prog, void *segment,
                             void *state, pthread_mutex_t *call_lock,
                             const adag_method_info_t *methods, unsigned nmethods,
                             const char *actor_name, int notify_fd)
{
    adag_status_t st;
    uint32_t i;

    memset(loop, 0, sizeof(*loop));
    loop->prog = *prog;
    memset(prog, 0, sizeof(*prog));
    loop->hdr = segment;
    loop->state = state;
    loop->call_lock = call_lock;
    loop->methods = methods;
    loop->nmethods = nmethods;
    loop->actor_name = actor_name;
    loop->notify_fd = notify_fd;
    loop->chans = calloc(loop->prog.nchans + 1, sizeof(*loop->chans));
    loop->reads = calloc(loop->prog.nchans + 1, sizeof(*loop->reads));
    if (!loop->chans || !loop->reads) {
        st = adag_error(ADAG_ERR_NO_MEMORY, "actor %s: loop of %u channels", actor_name,
                        loop->prog.nchans);
        goto fail;
    }
    adag_wait_policy_t policy = {loop->prog.spin_ns, (int)loop->prog.spin_yield};
    for (i = 0; i < loop->prog.nchans; i++) {
        const adag_prog_chan_t *pc = &loop->prog.chans[i];
        if (pc->kind == ADAG_CHAN_LOCAL)
            st = adag_local_chan_open(&loop->chans[i], loop->prog.capacity);
        else
            st = adag_shm_chan_open(&loop->chans[i], (char *)segment + pc->offset,
                                    loop->prog.segment_size - pc->offset, pc->reader,
                                    loop->prog.nslots, pc->nreaders, loop->prog.capacity,
                                    &loop->hdr->abort, policy);
        if (st != ADAG_OK) {
            adag_error_prefix("actor %s, channel %s", actor_name, pc->name);
            goto fail;
        }
        if (pc->kind == ADAG_CHAN_SHM && pc->reader >= 0)
            loop->reads[loop->nreads++] = i;
    }
    for (i = 0; i < loop->prog.nops; i++)
        loop->waits_start |= loop->prog.ops[i].nargs == 0;
    adag_spin_init(&loop->start_spin, policy);
    return ADAG_OK;
fail:
    adag_loop_close(loop);
    return st;
}

adag_status_t adag_loop_start(adag_loop_t *loop)
{
    int err = pthread_create(&loop->thread, NULL, loop_main, loop);
    if (err)
        return adag_error_errno(err, "actor %s: cannot start loop thread", loop->actor_name);
    loop->started = 1;
    return ADAG_OK;
}

void adag_loop_join(adag_loop_t *loop)
{
    if (loop->started) {
        pthread_join(loop->thread, NULL);
        loop->started = 0;
    }
}

void adag_loop_close(adag_loop_t *loop)
{
    adag_loop_join(loop);
    if (loop->chans)
        for (uint32_t i = 0; i < loop->prog.nchans; i++)
            adag_local_chan_close(&loop->chans[i]);
    free(loop->chans);
    free(loop->reads);
    loop->chans = NULL;
    loop->reads = NULL;
    adag_program_free(&loop->prog);
}

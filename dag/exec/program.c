#include "dag/exec/program.h"

#include "common/trace.h"

#include "common/error.h"

#include <stdlib.h>
#include <string.h>

static void encode_op(const adag_prog_op_t *op, adag_wbuf_t *b)
{
    adag__wbuf_u32(b, op->kind);
    switch ((adag_op_kind_t)op->kind) {
    case ADAG_OP_CALL:
        adag__wbuf_u32(b, op->method);
        adag__wbuf_u32(b, op->node);
        adag__wbuf_u32(b, op->nargs);
        adag__wbuf_u32(b, op->nrets);
        for (uint32_t a = 0; a < op->nargs; a++)
            adag__wbuf_u32(b, op->args[a]);
        for (uint32_t r = 0; r < op->nrets; r++)
            adag__wbuf_u32(b, op->rets[r]);
        break;
    case ADAG_OP_COLLECTIVE:
        adag__wbuf_u32(b, op->node);
        adag__wbuf_u32(b, op->args[0]);
        adag__wbuf_u32(b, op->rets[0]);
        adag__wbuf_u32(b, op->coll_kind);
        adag__wbuf_u32(b, op->coll_id);
        adag__wbuf_u32(b, op->reduce_op);
        adag__wbuf_u32(b, op->root);
        adag__wbuf_u32(b, op->member);
        adag__wbuf_u32(b, op->nmembers);
        adag__wbuf_u32(b, op->comm);
        adag__wbuf_u32(b, op->status_first);
        break;
    }
}

void adag__program_encode(const adag_program_t *p, adag_wbuf_t *b)
{
    adag__wbuf_u32(b, p->dag_id);
    adag__wbuf_str(b, p->dag_name);
    adag__wbuf_u32(b, p->max_inflight);
    adag__wbuf_u64(b, (uint64_t)p->spin_ns);
    adag__wbuf_u32(b, p->spin_yield);
    adag__wbuf_u64(b, p->trace_spans);
    adag__wbuf_u32(b, p->graphs);
    adag__wbuf_u64(b, (uint64_t)p->comm_timeout_ms);
    adag__wbuf_u32(b, p->start_chan);
    adag__wbuf_bytes(b, p->descs, p->descs_len);
    adag__wbuf_u32(b, p->nchans);
    for (uint32_t i = 0; i < p->nchans; i++) {
        const adag_prog_chan_t *c = &p->chans[i];
        adag__wbuf_str(b, c->name);
        adag__wbuf_u32(b, c->id);
        adag__wbuf_str(b, adag__chan_backend_name(c->backend));
        adag__wbuf_u32(b, c->nreaders);
        adag__wbuf_u32(b, (uint32_t)c->reader);
        adag__wbuf_u32(b, c->nslots);
        adag__wbuf_u64(b, c->capacity);
        adag__wbuf_u32(b, c->desc_off);
        adag__wbuf_u32(b, c->desc_len);
        adag__wbuf_u32(b, c->tensor.flags);
        adag__wbuf_u32(b, c->tensor.dtype);
        adag__wbuf_u32(b, c->tensor.transport);
        adag__wbuf_u32(b, c->tensor.ndim);
        for (uint32_t d = 0; d < c->tensor.ndim && d < ADAG_MAX_DIMS; d++)
            adag__wbuf_u64(b, (uint64_t)c->tensor.shape[d]);
        adag__wbuf_u64(b, c->comm_key);
    }
    adag__wbuf_u32(b, p->ncomms);
    for (uint32_t i = 0; i < p->ncomms; i++) {
        const adag_comm_spec_t *s = &p->comms[i];
        adag__wbuf_u64(b, s->key);
        adag__wbuf_u32(b, s->kind);
        adag__wbuf_u32(b, s->nranks);
        adag__wbuf_u32(b, s->rank);
        adag__wbuf_bytes(b, s->id.bytes, s->id.len);
        adag__wbuf_u32(b, s->shared);
        adag__wbuf_u32(b, s->ncolls);
        adag__wbuf_u32(b, s->order_chan);
    }
    adag__wbuf_u32(b, p->nops);
    for (uint32_t i = 0; i < p->nops; i++)
        encode_op(&p->ops[i], b);
}

#define MAX_PROGRAM_ITEMS (1u << 20)
/* The fewest bytes one channel / one operation takes encoded: counts that
 * the rest of the message cannot hold are refused before allocating. */
#define MIN_CHAN_BYTES (8 + 11 * 4 + 2 * 8) /* the strings empty */
#define MIN_OP_BYTES 4
#define MIN_COMM_BYTES (8 + 7 * 4)
/* Most communicators one actor joins for one DAG. */
#define MAX_PROGRAM_COMMS 64

/* Decodes one communicator spec; 0 if it is malformed. */
static int decode_comm(adag_rbuf_t *b, adag_comm_spec_t *s)
{
    size_t len;
    s->key = adag__rbuf_u64(b);
    s->kind = adag__rbuf_u32(b);
    s->nranks = adag__rbuf_u32(b);
    s->rank = adag__rbuf_u32(b);
    const void *id = adag__rbuf_bytes(b, &len);
    if (b->failed || s->key == 0 || !adag__comm_backend(s->kind) || s->nranks < 2 ||
        s->nranks > ADAG_COMM_MAX_RANKS || s->rank >= s->nranks || len == 0 ||
        len > ADAG_COMM_ID_BYTES)
        return 0;
    memcpy(s->id.bytes, id, len);
    s->id.len = (uint32_t)len;
    s->shared = adag__rbuf_u32(b);
    s->ncolls = adag__rbuf_u32(b);
    s->order_chan = adag__rbuf_u32(b);
    return !b->failed && s->shared <= 1 && (s->order_chan == ADAG_PROG_NO_CHAN) == !s->shared;
}

/* Decodes one operation; 0 if it is malformed. */
static int decode_op(adag_rbuf_t *b, const adag_program_t *p, unsigned nmethods,
                     adag_prog_op_t *op)
{
    op->kind = adag__rbuf_u32(b);
    if (b->failed)
        return 0;
    switch ((adag_op_kind_t)op->kind) {
    case ADAG_OP_CALL:
        op->method = adag__rbuf_u32(b);
        op->node = adag__rbuf_u32(b);
        op->nargs = adag__rbuf_u32(b);
        op->nrets = adag__rbuf_u32(b);
        if (b->failed || op->method >= nmethods || op->nargs > ADAG_MAX_ARGS ||
            op->nrets > ADAG_MAX_RETURNS)
            return 0;
        for (uint32_t a = 0; a < op->nargs; a++)
            if ((op->args[a] = adag__rbuf_u32(b)) >= p->nchans)
                return 0;
        for (uint32_t r = 0; r < op->nrets; r++)
            if ((op->rets[r] = adag__rbuf_u32(b)) >= p->nchans ||
                p->chans[op->rets[r]].reader != -1)
                return 0;
        return !b->failed;
    case ADAG_OP_COLLECTIVE:
        op->node = adag__rbuf_u32(b);
        op->nargs = op->nrets = 1;
        op->args[0] = adag__rbuf_u32(b);
        op->rets[0] = adag__rbuf_u32(b);
        op->coll_kind = adag__rbuf_u32(b);
        op->coll_id = adag__rbuf_u32(b);
        op->reduce_op = adag__rbuf_u32(b);
        op->root = adag__rbuf_u32(b);
        op->member = adag__rbuf_u32(b);
        op->nmembers = adag__rbuf_u32(b);
        op->comm = adag__rbuf_u32(b);
        op->status_first = adag__rbuf_u32(b);
        /* the member's tensor and result are its own; its rank in the
         * communicator is its member index; the status channels are its
         * own (written) and the others' (read) */
        if (b->failed || op->args[0] >= p->nchans || p->chans[op->args[0]].reader != -1 ||
            op->rets[0] >= p->nchans || p->chans[op->rets[0]].reader != -1 ||
            op->coll_kind > ADAG_COLL_BROADCAST || op->reduce_op > ADAG_REDUCE_AVG ||
            op->nmembers < 2 || op->nmembers > ADAG_COMM_MAX_RANKS ||
            op->member >= op->nmembers || op->root >= op->nmembers || op->comm >= p->ncomms ||
            p->comms[op->comm].nranks != op->nmembers || p->comms[op->comm].rank != op->member ||
            op->status_first > p->nchans || op->nmembers > p->nchans - op->status_first)
            return 0;
        for (uint32_t m = 0; m < op->nmembers; m++)
            if ((p->chans[op->status_first + m].reader == -1) != (m == op->member))
                return 0;
        return 1;
    }
    return 0; /* an operation kind this build does not know */
}

adag_status_t adag__program_decode(adag_rbuf_t *b, unsigned nmethods, adag_program_t *p)
{
    size_t descs_len;
    const void *descs;
    memset(p, 0, sizeof(*p));
    p->dag_id = adag__rbuf_u32(b);
    adag__rbuf_str(b, p->dag_name, sizeof(p->dag_name));
    p->max_inflight = adag__rbuf_u32(b);
    p->spin_ns = (int64_t)adag__rbuf_u64(b);
    p->spin_yield = adag__rbuf_u32(b) != 0;
    p->trace_spans = adag__rbuf_u64(b);
    p->graphs = adag__rbuf_u32(b) != 0;
    p->comm_timeout_ms = (int64_t)adag__rbuf_u64(b);
    p->start_chan = adag__rbuf_u32(b);
    descs = adag__rbuf_bytes(b, &descs_len);
    p->nchans = adag__rbuf_u32(b);
    if (b->failed || p->nchans > MAX_PROGRAM_ITEMS || p->max_inflight == 0 ||
        p->max_inflight > ADAG_PROG_MAX_INFLIGHT ||
        p->trace_spans > ADAG_TRACE_MAX_SPANS ||
        descs_len > UINT32_MAX || p->nchans > (b->len - b->pos) / MIN_CHAN_BYTES ||
        (p->start_chan != ADAG_PROG_NO_CHAN && p->start_chan >= p->nchans))
        goto bad;
    p->descs_len = (uint32_t)descs_len;
    p->descs = malloc(descs_len + 1);
    p->chans = calloc(p->nchans ? p->nchans : 1, sizeof(*p->chans));
    if (!p->chans || !p->descs) {
        adag__program_free(p);
        return adag__error(ADAG_ERR_NO_MEMORY, "program of %u channels", p->nchans);
    }
    if (descs_len)
        memcpy(p->descs, descs, descs_len);
    for (uint32_t i = 0; i < p->nchans; i++) {
        adag_prog_chan_t *c = &p->chans[i];
        adag__rbuf_str(b, c->name, sizeof(c->name));
        c->id = adag__rbuf_u32(b);
        char backend[ADAG_CHAN_BACKEND_NAME_MAX];
        adag__rbuf_str(b, backend, sizeof(backend));
        int bi = b->failed ? -1 : adag__chan_backend_find(backend);
        if (!b->failed && bi < 0) {
            /* a program from another build: say which backend, not "malformed" */
            adag_status_t st = adag__chan_backend_unknown(c->name, backend);
            adag__program_free(p);
            return st;
        }
        c->backend = (uint32_t)bi;
        c->nreaders = adag__rbuf_u32(b);
        c->reader = (int32_t)adag__rbuf_u32(b);
        c->nslots = adag__rbuf_u32(b);
        c->capacity = adag__rbuf_u64(b);
        c->desc_off = adag__rbuf_u32(b);
        c->desc_len = adag__rbuf_u32(b);
        c->tensor.flags = adag__rbuf_u32(b);
        c->tensor.dtype = adag__rbuf_u32(b);
        c->tensor.transport = adag__rbuf_u32(b);
        c->tensor.ndim = adag__rbuf_u32(b);
        if (b->failed || c->tensor.ndim > ADAG_MAX_DIMS)
            goto bad;
        for (uint32_t d = 0; d < c->tensor.ndim; d++)
            c->tensor.shape[d] = (int64_t)adag__rbuf_u64(b);
        c->comm_key = adag__rbuf_u64(b);
        /* a dtype, shape or transport this build does not know is refused */
        if (b->failed || !adag__tensor_decl_valid(&c->tensor) ||
            c->reader < -1 ||
            (c->reader >= 0 && (uint32_t)c->reader >= c->nreaders) ||
            c->nreaders > MAX_PROGRAM_ITEMS || c->nslots == 0 ||
            c->nslots > p->max_inflight || c->capacity > ADAG_PROG_MAX_CAPACITY ||
            c->desc_off > p->descs_len ||
            c->desc_len > p->descs_len - c->desc_off)
            goto bad;
    }
    if (p->start_chan != ADAG_PROG_NO_CHAN && p->chans[p->start_chan].reader < 0)
        goto bad;
    p->ncomms = adag__rbuf_u32(b);
    if (b->failed || p->ncomms > MAX_PROGRAM_COMMS ||
        p->ncomms > (b->len - b->pos) / MIN_COMM_BYTES)
        goto bad;
    p->comms = calloc(p->ncomms + 1, sizeof(*p->comms));
    if (!p->comms) {
        adag__program_free(p);
        return adag__error(ADAG_ERR_NO_MEMORY, "program of %u communicators", p->ncomms);
    }
    for (uint32_t i = 0; i < p->ncomms; i++) {
        if (!decode_comm(b, &p->comms[i]))
            goto bad;
        for (uint32_t j = 0; j < i; j++)
            if (p->comms[j].key == p->comms[i].key)
                goto bad;
        /* a shared one's tickets come on a channel this actor reads */
        if (p->comms[i].shared &&
            (p->comms[i].order_chan >= p->nchans || p->chans[p->comms[i].order_chan].reader < 0))
            goto bad;
    }
    /* the communicator of every channel this actor writes is one of the
     * program's (a writer by communicator is always a rank); a channel it
     * reads may name one it does not join: it reads the value in host
     * memory (the device channel checks at connect that a device reader's
     * communicator is its actor's) */
    for (uint32_t i = 0; i < p->nchans; i++) {
        uint32_t j = 0;
        if (!p->chans[i].comm_key || p->chans[i].reader >= 0)
            continue;
        while (j < p->ncomms && p->comms[j].key != p->chans[i].comm_key)
            j++;
        if (j == p->ncomms)
            goto bad;
    }
    p->nops = adag__rbuf_u32(b);
    if (b->failed || p->nops > MAX_PROGRAM_ITEMS || p->nops > (b->len - b->pos) / MIN_OP_BYTES)
        goto bad;
    p->ops = calloc(p->nops ? p->nops : 1, sizeof(*p->ops));
    if (!p->ops) {
        adag__program_free(p);
        return adag__error(ADAG_ERR_NO_MEMORY, "program of %u operations", p->nops);
    }
    for (uint32_t i = 0; i < p->nops; i++)
        if (!decode_op(b, p, nmethods, &p->ops[i]))
            goto bad;
    if (b->failed || b->pos != b->len)
        goto bad;
    /* a communicator's turn ends after its ncolls collectives */
    for (uint32_t c = 0; c < p->ncomms; c++) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < p->nops; i++)
            n += p->ops[i].kind == ADAG_OP_COLLECTIVE && p->ops[i].comm == c;
        if (n != p->comms[c].ncolls)
            goto bad;
    }
    return ADAG_OK;
bad:
    adag__program_free(p);
    return adag__error(ADAG_ERR_PROTOCOL, "malformed DAG program (at byte %zu of %zu)", b->pos,
                      b->len);
}

void adag__program_free(adag_program_t *p)
{
    free(p->chans);
    free(p->ops);
    free(p->descs);
    free(p->comms);
    p->chans = NULL;
    p->ops = NULL;
    p->descs = NULL;
    p->comms = NULL;
}

adag_status_t adag__program_copy(adag_program_t *dst, const adag_program_t *src)
{
    *dst = *src;
    dst->chans = malloc((src->nchans + 1) * sizeof(*dst->chans));
    dst->ops = malloc((src->nops + 1) * sizeof(*dst->ops));
    dst->descs = malloc(src->descs_len + 1);
    dst->comms = malloc((src->ncomms + 1) * sizeof(*dst->comms));
    if (!dst->chans || !dst->ops || !dst->descs || !dst->comms) {
        adag__program_free(dst);
        return adag__error(ADAG_ERR_NO_MEMORY, "program copy");
    }
    memcpy(dst->chans, src->chans, src->nchans * sizeof(*dst->chans));
    memcpy(dst->ops, src->ops, src->nops * sizeof(*dst->ops));
    if (src->descs_len)
        memcpy(dst->descs, src->descs, src->descs_len);
    if (src->ncomms)
        memcpy(dst->comms, src->comms, src->ncomms * sizeof(*dst->comms));
    return ADAG_OK;
}

#include "dag/program.h"

#include "common/error.h"
#include "transport/shm_ring.h"

#include <stdlib.h>
#include <string.h>

void adag_program_encode(const adag_program_t *p, adag_wbuf_t *b)
{
    adag_wbuf_u32(b, p->dag_id);
    adag_wbuf_str(b, p->dag_name);
    adag_wbuf_u64(b, p->segment_size);
    adag_wbuf_u32(b, p->nslots);
    adag_wbuf_u64(b, p->capacity);
    adag_wbuf_u64(b, (uint64_t)p->spin_ns);
    adag_wbuf_u32(b, p->spin_yield);
    adag_wbuf_u32(b, p->nchans);
    for (uint32_t i = 0; i < p->nchans; i++) {
        const adag_prog_chan_t *c = &p->chans[i];
        adag_wbuf_str(b, c->name);
        adag_wbuf_u32(b, c->id);
        adag_wbuf_u32(b, c->kind);
        adag_wbuf_u32(b, c->nreaders);
        adag_wbuf_u32(b, (uint32_t)c->reader);
        adag_wbuf_u32(b, c->writes);
        adag_wbuf_u32(b, c->to_driver);
        adag_wbuf_u64(b, c->offset);
    }
    adag_wbuf_u32(b, p->nops);
    for (uint32_t i = 0; i < p->nops; i++) {
        const adag_prog_op_t *op = &p->ops[i];
        adag_wbuf_u32(b, op->method);
        adag_wbuf_u32(b, op->node);
        adag_wbuf_u32(b, op->nargs);
        adag_wbuf_u32(b, op->nrets);
        for (uint32_t a = 0; a < op->nargs; a++)
            adag_wbuf_u32(b, op->args[a]);
        for (uint32_t r = 0; r < op->nrets; r++)
            adag_wbuf_u32(b, op->rets[r]);
    }
}

#define MAX_PROGRAM_ITEMS (1u << 20)
/* The fewest bytes one channel / one operation takes encoded: counts that
 * the rest of the message cannot hold are refused before allocating. */
#define MIN_CHAN_BYTES (8 + 6 * 4 + 8)
#define MIN_OP_BYTES (4 * 4)

adag_status_t adag_program_decode(adag_rbuf_t *b, unsigned nmethods, adag_program_t *p)
{
    memset(p, 0, sizeof(*p));
    p->dag_id = adag_rbuf_u32(b);
    adag_rbuf_str(b, p->dag_name, sizeof(p->dag_name));
    p->segment_size = adag_rbuf_u64(b);
    p->nslots = adag_rbuf_u32(b);
    p->capacity = adag_rbuf_u64(b);
    p->spin_ns = (int64_t)adag_rbuf_u64(b);
    p->spin_yield = adag_rbuf_u32(b) != 0;
    p->nchans = adag_rbuf_u32(b);
    if (b->failed || p->nchans > MAX_PROGRAM_ITEMS || p->nslots == 0 ||
        p->nchans > (b->len - b->pos) / MIN_CHAN_BYTES ||
        p->segment_size < ADAG_SEGMENT_HDR_SIZE)
        goto bad;
    p->chans = calloc(p->nchans ? p->nchans : 1, sizeof(*p->chans));
    if (!p->chans)
        return adag_error(ADAG_ERR_NO_MEMORY, "program of %u channels", p->nchans);
    for (uint32_t i = 0; i < p->nchans; i++) {
        adag_prog_chan_t *c = &p->chans[i];
        adag_rbuf_str(b, c->name, sizeof(c->name));
        c->id = adag_rbuf_u32(b);
        c->kind = adag_rbuf_u32(b);
        c->nreaders = adag_rbuf_u32(b);
        c->reader = (int32_t)adag_rbuf_u32(b);
        c->writes = adag_rbuf_u32(b);
        c->to_driver = adag_rbuf_u32(b);
        c->offset = adag_rbuf_u64(b);
        if (b->failed || c->kind > ADAG_CHAN_SHM || c->reader < -1 ||
            (c->reader >= 0 && (uint32_t)c->reader >= c->nreaders) ||
            c->nreaders > MAX_PROGRAM_ITEMS)
            goto bad;
        if (c->kind == ADAG_CHAN_SHM &&
            (c->offset < ADAG_SEGMENT_HDR_SIZE || c->offset > p->segment_size ||
             adag_shm_chan_size(p->nslots, c->nreaders, p->capacity) >
                 p->segment_size - c->offset))
            goto bad;
    }
    p->nops = adag_rbuf_u32(b);
    if (b->failed || p->nops > MAX_PROGRAM_ITEMS || p->nops > (b->len - b->pos) / MIN_OP_BYTES)
        goto bad;
    p->ops = calloc(p->nops ? p->nops : 1, sizeof(*p->ops));
    if (!p->ops) {
        adag_program_free(p);
        return adag_error(ADAG_ERR_NO_MEMORY, "program of %u operations", p->nops);
    }
    for (uint32_t i = 0; i < p->nops; i++) {
        adag_prog_op_t *op = &p->ops[i];
        op->method = adag_rbuf_u32(b);
        op->node = adag_rbuf_u32(b);
        op->nargs = adag_rbuf_u32(b);
        op->nrets = adag_rbuf_u32(b);
        if (b->failed || op->method >= nmethods || op->nargs > ADAG_MAX_ARGS ||
            op->nrets > ADAG_MAX_RETURNS)
            goto bad;
        for (uint32_t a = 0; a < op->nargs; a++)
            if ((op->args[a] = adag_rbuf_u32(b)) >= p->nchans)
                goto bad;
        for (uint32_t r = 0; r < op->nrets; r++)
            if ((op->rets[r] = adag_rbuf_u32(b)) >= p->nchans || !p->chans[op->rets[r]].writes)
                goto bad;
    }
    if (b->failed || b->pos != b->len)
        goto bad;
    return ADAG_OK;
bad:
    adag_program_free(p);
    return adag_error(ADAG_ERR_PROTOCOL, "malformed DAG program (at byte %zu of %zu)", b->pos,
                      b->len);
}

void adag_program_free(adag_program_t *p)
{
    free(p->chans);
    free(p->ops);
    p->chans = NULL;
    p->ops = NULL;
}

adag_status_t adag_program_copy(adag_program_t *dst, const adag_program_t *src)
{
    *dst = *src;
    dst->chans = malloc((src->nchans + 1) * sizeof(*dst->chans));
    dst->ops = malloc((src->nops + 1) * sizeof(*dst->ops));
    if (!dst->chans || !dst->ops) {
        adag_program_free(dst);
        return adag_error(ADAG_ERR_NO_MEMORY, "program copy");
    }
    memcpy(dst->chans, src->chans, src->nchans * sizeof(*dst->chans));
    memcpy(dst->ops, src->ops, src->nops * sizeof(*dst->ops));
    return ADAG_OK;
}

/*
 * The replies to TRACE_DAG (a loop's trace records) and STATS_DAG (its
 * figures). Every count is bounded by its limit and by the bytes there
 * are before anything is allocated.
 */
#include "transport/protocol.h"

#include "common/error.h"

#include <stdlib.h>
#include <string.h>

/* a record on the wire: seq, five stamps, packed */
#define REC_WIRE_BYTES (7 * 8)

void adag__msg_encode_trace(adag_wbuf_t *b, uint64_t now_ns, uint64_t lost,
                           const adag_trace_rec_t *recs, uint64_t n)
{
    adag__wbuf_u64(b, now_ns);
    adag__wbuf_u64(b, lost);
    adag__wbuf_u64(b, n);
    for (uint64_t i = 0; i < n; i++) {
        adag__wbuf_u64(b, recs[i].seq);
        for (unsigned j = 0; j < 5; j++)
            adag__wbuf_u64(b, recs[i].t[j]);
        adag__wbuf_u64(b, recs[i].packed);
    }
}

adag_status_t adag__msg_decode_trace(adag_blob_t body, uint64_t *now_ns, uint64_t *lost,
                                    adag_trace_rec_t **recs, uint64_t *n)
{
    adag_rbuf_t rb = {body.data, body.len, 0, 0};
    adag_trace_rec_t *r = NULL;
    *recs = NULL;
    *now_ns = adag__rbuf_u64(&rb);
    *lost = adag__rbuf_u64(&rb);
    uint64_t count = adag__rbuf_u64(&rb);
    if (rb.failed || count > ADAG_TRACE_MAX_SPANS || count != (rb.len - rb.pos) / REC_WIRE_BYTES ||
        (rb.len - rb.pos) % REC_WIRE_BYTES)
        goto bad;
    if (count && !(r = malloc(count * sizeof(*r))))
        return adag__error(ADAG_ERR_NO_MEMORY, "a trace of %llu records",
                          (unsigned long long)count);
    for (uint64_t i = 0; i < count; i++) {
        r[i].seq = adag__rbuf_u64(&rb);
        for (unsigned j = 0; j < 5; j++)
            r[i].t[j] = adag__rbuf_u64(&rb);
        r[i].packed = adag__rbuf_u64(&rb);
    }
    if (rb.failed || rb.pos != rb.len)
        goto bad;
    *recs = r;
    *n = count;
    return ADAG_OK;
bad:
    free(r);
    return adag__error(ADAG_ERR_PROTOCOL, "malformed reply to TRACE_DAG");
}

#define OP_WIRE_BYTES (8 * 8)
#define CHAN_WIRE_BYTES (2 * 4 + 2 * 8)

void adag__msg_encode_figures(adag_wbuf_t *b, const adag_loop_figures_t *f)
{
    adag__wbuf_u32(b, f->timed);
    adag__wbuf_u64(b, f->elapsed_ns);
    adag__wbuf_u64(b, f->idle_ns);
    adag__wbuf_u32(b, f->doing);
    adag__wbuf_u32(b, f->nops);
    adag__wbuf_u32(b, f->nchans);
    for (uint32_t i = 0; i < f->nops; i++) {
        const adag_op_figures_t *o = &f->ops[i];
        const uint64_t v[8] = {o->count,      o->wait_input_ns,  o->wait_room_ns,
                               o->compute_ns, o->publish_ns,     o->compute_max_ns,
                               o->compute_p50_ns, o->compute_p99_ns};
        for (unsigned j = 0; j < 8; j++)
            adag__wbuf_u64(b, v[j]);
    }
    for (uint32_t i = 0; i < f->nchans; i++) {
        adag__wbuf_u32(b, f->chans[i].chan);
        adag__wbuf_u32(b, f->chans[i].in_use);
        adag__wbuf_u64(b, f->chans[i].values);
        adag__wbuf_u64(b, f->chans[i].bytes);
    }
}

adag_status_t adag__msg_decode_figures(adag_blob_t body, adag_loop_figures_t *f)
{
    adag_rbuf_t rb = {body.data, body.len, 0, 0};
    memset(f, 0, sizeof(*f));
    uint32_t timed = adag__rbuf_u32(&rb);
    uint64_t elapsed = adag__rbuf_u64(&rb), idle = adag__rbuf_u64(&rb);
    uint32_t doing = adag__rbuf_u32(&rb);
    uint32_t nops = adag__rbuf_u32(&rb), nchans = adag__rbuf_u32(&rb);
    if (rb.failed || timed > 1 || (doing & 0xff) > ADAG_DOING_PUBLISH || nops > ADAG_MSG_FIGURES_MAX || nchans > ADAG_MSG_FIGURES_MAX ||
        rb.len - rb.pos != (size_t)nops * OP_WIRE_BYTES + (size_t)nchans * CHAN_WIRE_BYTES)
        goto bad;
    f->ops = calloc(nops + 1, sizeof(*f->ops));
    f->chans = calloc(nchans + 1, sizeof(*f->chans));
    if (!f->ops || !f->chans) {
        adag__loop_figures_free(f);
        return adag__error(ADAG_ERR_NO_MEMORY, "figures of %u ops", nops);
    }
    f->timed = timed;
    f->elapsed_ns = elapsed;
    f->idle_ns = idle;
    f->doing = doing;
    f->nops = nops;
    f->nchans = nchans;
    for (uint32_t i = 0; i < nops; i++) {
        adag_op_figures_t *o = &f->ops[i];
        uint64_t *v[8] = {&o->count,      &o->wait_input_ns,  &o->wait_room_ns,
                          &o->compute_ns, &o->publish_ns,     &o->compute_max_ns,
                          &o->compute_p50_ns, &o->compute_p99_ns};
        for (unsigned j = 0; j < 8; j++)
            *v[j] = adag__rbuf_u64(&rb);
    }
    for (uint32_t i = 0; i < nchans; i++) {
        f->chans[i].chan = adag__rbuf_u32(&rb);
        f->chans[i].in_use = adag__rbuf_u32(&rb);
        f->chans[i].values = adag__rbuf_u64(&rb);
        f->chans[i].bytes = adag__rbuf_u64(&rb);
    }
    if (rb.failed || rb.pos != rb.len) {
        adag__loop_figures_free(f);
        goto bad;
    }
    return ADAG_OK;
bad:
    return adag__error(ADAG_ERR_PROTOCOL, "malformed reply to STATS_DAG");
}

void adag__msg_encode_clock(adag_wbuf_t *b, uint64_t now_ns, const char *boot_id)
{
    adag__wbuf_u64(b, now_ns);
    adag__wbuf_str(b, boot_id);
}

adag_status_t adag__msg_decode_clock(adag_blob_t body, uint64_t *now_ns,
                                    char boot_id[ADAG_BOOT_ID_MAX])
{
    adag_rbuf_t rb = {body.data, body.len, 0, 0};
    *now_ns = adag__rbuf_u64(&rb);
    adag__rbuf_str(&rb, boot_id, ADAG_BOOT_ID_MAX);
    if (rb.failed || rb.pos != rb.len)
        return adag__error(ADAG_ERR_PROTOCOL, "malformed reply to CLOCK");
    return ADAG_OK;
}

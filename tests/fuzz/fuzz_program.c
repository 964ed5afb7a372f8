/*
 * libFuzzer target: adag__program_decode, the worker's decoder of the DAG
 * program carried by PREPARE_DAG, and the backends' descriptor checks that
 * the worker's loop then runs on every channel of it.
 *
 * Input: byte 0 = the actor's number of methods (0..255), the rest = the
 * encoded program. A rejected program must simply fail (no leak: the decoder
 * frees what it allocated). An accepted one must satisfy every promise the
 * loop relies on, checked here independently of the decoder's own code:
 *   - the whole input is consumed; max_inflight in 1..ADAG_PROG_MAX_INFLIGHT;
 *   - names are NUL-terminated inside their arrays; spin_yield is 0 or 1;
 *   - the start channel is ADAG_PROG_NO_CHAN or a channel this actor reads;
 *   - every channel: its kind has a backend; reader is -1 or < nreaders;
 *     its geometry: 1..max_inflight slots of at most ADAG_PROG_MAX_CAPACITY
 *     bytes;
 *     its descriptor (desc_off, desc_len) lies inside the descriptors blob,
 *     computed without wrap-around; its tensor declaration is one
 *     adag_node_tensor makes (known flags, a static dtype a tensor dtype,
 *     ndim <= 8 and dimensions >= 0 only with a static shape, unused
 *     fields zero, a known transport);
 *   - every op: its kind is known (CALL); method < nmethods; nargs/nrets
 *     within ADAG_MAX_*; args and rets index channels; every ret is a
 *     channel this actor writes.
 * Then the round trip: encode -> decode must succeed and give the same
 * program (descriptors included), encoding that again gives the same bytes
 * (a canonical form), and adag__program_copy gives the same program too.
 *
 * Finally every shm channel is opened, through the ops table, on a real
 * domain (tests/fuzz/fuzz_domain.h; the seeds' descriptors point into it)
 * with the program's geometry and descriptor: the open must succeed or be
 * ADAG_ERR_PROTOCOL; an endpoint that opened must lie inside the segment
 * (its descriptor is its offset; offset + its true size, computed without
 * wrap-around, <= the segment size) and be usable over its whole slot
 * (acquire, fill its own `capacity` bytes, publish, wait, release).
 */
#include "tests/chan_index.h"
#include "dag/exec/program.h"
#include "fuzz_domain.h"
#include "transport/chan_shm.h"
#include "transport/channel.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz_program: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                              \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static void check_program(const adag_program_t *p, unsigned nmethods)
{
    CHECK(p->max_inflight >= 1 && p->max_inflight <= ADAG_PROG_MAX_INFLIGHT);
    CHECK(memchr(p->dag_name, '\0', sizeof(p->dag_name)));
    CHECK(p->spin_yield <= 1);
    CHECK(p->chans && p->ops && p->descs);
    CHECK(p->start_chan == ADAG_PROG_NO_CHAN ||
          (p->start_chan < p->nchans && p->chans[p->start_chan].reader >= 0));
    for (uint32_t i = 0; i < p->nchans; i++) {
        const adag_prog_chan_t *c = &p->chans[i];
        CHECK(memchr(c->name, '\0', sizeof(c->name)));
        CHECK(adag__chan_backend(c->backend) != NULL);
        CHECK(c->reader >= -1);
        CHECK(c->reader < 0 || (uint32_t)c->reader < c->nreaders);
        CHECK(c->nslots >= 1 && c->nslots <= p->max_inflight);
        CHECK(c->capacity <= ADAG_PROG_MAX_CAPACITY);
        CHECK((uint64_t)c->desc_off + c->desc_len <= p->descs_len);
        const adag_tensor_decl_t *t = &c->tensor;
        CHECK((t->flags & ~(uint32_t)ADAG_TENSOR_DECL_KNOWN) == 0);
        CHECK(t->flags == 0 || (t->flags & ADAG_TENSOR_DECLARED));
        CHECK(t->transport <= ADAG_TRANSPORT_COMM);
        CHECK((t->flags & ADAG_TENSOR_STATIC_DTYPE)
                  ? (t->dtype >= ADAG_DTYPE_U8 && t->dtype <= ADAG_DTYPE_BOOL)
                  : t->dtype == 0);
        CHECK(t->ndim <= ADAG_MAX_DIMS);
        CHECK((t->flags & ADAG_TENSOR_STATIC_SHAPE) || t->ndim == 0);
        for (uint32_t d = 0; d < ADAG_MAX_DIMS; d++)
            CHECK(d < t->ndim ? t->shape[d] >= 0 : t->shape[d] == 0);
        adag_blob_t d = adag__program_desc(p, i);
        CHECK((const char *)d.data >= p->descs &&
              (const char *)d.data + d.len <= p->descs + p->descs_len);
    }
    for (uint32_t i = 0; i < p->nops; i++) {
        const adag_prog_op_t *op = &p->ops[i];
        CHECK(op->kind == ADAG_OP_CALL || op->kind == ADAG_OP_COLLECTIVE);
        if (op->kind == ADAG_OP_COLLECTIVE) {
            /* one member of a collective: its own tensor and result, its rank
             * in a communicator of the program, every member's status channel */
            CHECK(op->nargs == 1 && op->nrets == 1);
            CHECK(p->chans[op->args[0]].reader == -1 && p->chans[op->rets[0]].reader == -1);
            CHECK(op->nmembers >= 2 && op->member < op->nmembers && op->root < op->nmembers);
            CHECK(op->comm < p->ncomms && p->comms[op->comm].rank == op->member &&
                  p->comms[op->comm].nranks == op->nmembers);
            CHECK((uint64_t)op->status_first + op->nmembers <= p->nchans);
            for (uint32_t m = 0; m < op->nmembers; m++)
                CHECK((p->chans[op->status_first + m].reader == -1) == (m == op->member));
        }
        CHECK(op->method < nmethods || op->kind == ADAG_OP_COLLECTIVE);
        CHECK(op->nargs <= ADAG_MAX_ARGS && op->nrets <= ADAG_MAX_RETURNS);
        for (uint32_t a = 0; a < op->nargs; a++)
            CHECK(op->args[a] < p->nchans);
        for (uint32_t r = 0; r < op->nrets; r++)
            CHECK(op->rets[r] < p->nchans && p->chans[op->rets[r]].reader == -1);
    }
}

/* Field-by-field equality; arrays are compared whole (the decoder zeroes them
 * before filling, so unused name bytes and arg slots compare equal too). */
static int same_program(const adag_program_t *a, const adag_program_t *b)
{
    return a->dag_id == b->dag_id && memcmp(a->dag_name, b->dag_name, sizeof(a->dag_name)) == 0 &&
           a->max_inflight == b->max_inflight && a->spin_ns == b->spin_ns &&
           a->spin_yield == b->spin_yield && a->start_chan == b->start_chan &&
           a->nchans == b->nchans && a->nops == b->nops && a->descs_len == b->descs_len &&
           memcmp(a->chans, b->chans, a->nchans * sizeof(*a->chans)) == 0 &&
           memcmp(a->ops, b->ops, a->nops * sizeof(*a->ops)) == 0 &&
           memcmp(a->descs, b->descs, a->descs_len) == 0;
}

typedef unsigned __int128 u128;

/* The true size of a shm channel, from the backend's own size function
 * applied to tiny geometries (so its private header/cursor/slot sizes are
 * not copied here) and scaled up without overflow. */
static u128 true_chan_size(uint64_t nslots, uint64_t nreaders, uint64_t capacity)
{
    u128 hdr = adag__shm_chan_size(0, 0, 0);
    u128 cursor = adag__shm_chan_size(0, 1, 0) - hdr;
    u128 slot_hdr = adag__shm_chan_size(1, 0, 0) - hdr;
    u128 slot = slot_hdr + (((u128)capacity + 63) & ~(u128)63);
    return hdr + (u128)nreaders * cursor + (u128)nslots * slot;
}

static adag_dag_ctx_t domain;
static _Atomic uint32_t never_aborted;

/* Opens every shm channel of p on the fuzz domain, as the loop would. */
static void open_channels(const adag_program_t *p)
{
    static int ready;
    if (!ready) {
        adag_wbuf_t descs[FUZZ_NCHANS];
        fuzz_domain_create(&domain, descs);
        for (unsigned i = 0; i < FUZZ_NCHANS; i++)
            adag__wbuf_free(&descs[i]);
        ready = 1;
    }
    const adag_chan_ops_t *ops = adag__chan_backend(CHAN_SHM);
    for (uint32_t i = 0; i < p->nchans; i++) {
        const adag_prog_chan_t *c = &p->chans[i];
        if (c->backend != CHAN_SHM)
            continue; /* self allocates `capacity` bytes: nothing to check against */
        adag_chan_open_params_t op = {
            .name = c->name,
            .geom = {c->nslots, c->nreaders, c->capacity, c->comm_key, 0},
            .reader = c->reader,
            .desc = adag__program_desc(p, i),
            .abort = &never_aborted,
            .policy = {0, 0},
        };
        adag_wbuf_t info = {0};
        adag_chan_t *ch = NULL;
        adag_status_t st = ops->open(domain.domains[CHAN_SHM], &op, &info, &ch);
        adag__wbuf_free(&info);
        CHECK(st == ADAG_OK || st == ADAG_ERR_PROTOCOL);
        if (st != ADAG_OK)
            continue;
        CHECK(ch && ch->capacity == c->capacity && ch->nslots == c->nslots);
        /* a shm descriptor is the channel's offset in the segment: the
         * channel, at its true size, lies inside it */
        uint64_t off;
        CHECK(op.desc.len == sizeof(off));
        memcpy(&off, op.desc.data, sizeof(off));
        CHECK((u128)off + true_chan_size(c->nslots, c->nreaders, c->capacity) <=
              (u128)adag__ctx_domain_bytes(&domain));
        /* the whole slot of one execution is ours; the domain is shared by
         * every input, so use a fresh writer's view: a slot another input
         * left unreleased times out at once */
        for (uint64_t s = 0; s < c->nslots && s < 4; s++) {
            void *buf;
            if (c->reader < 0) {
                if (ops->acquire(ch, s, 0, &buf) != ADAG_OK)
                    break;
                memset(buf, 0xa5, c->capacity);
                CHECK(ops->publish(ch, s, c->capacity, NULL, ADAG_OK, NULL) == ADAG_OK);
            } else {
                adag_slot_view_t v;
                if (ops->wait(ch, s, 0, &v) == ADAG_OK && v.status == ADAG_OK) {
                    CHECK(v.size <= c->capacity);
                    volatile const char *b = v.data;
                    for (size_t k = 0; k < v.size; k += 64)
                        (void)b[k];
                }
                ops->release(ch, s);
            }
        }
        ops->close(ch);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned nmethods = data[0];
    adag_rbuf_t in = {(const char *)data + 1, size - 1, 0, 0};
    adag_program_t p, q;

    if (adag__program_decode(&in, nmethods, &p) != ADAG_OK) {
        CHECK(p.chans == NULL && p.ops == NULL && p.descs == NULL); /* freed on failure */
        return 0;
    }
    CHECK(in.pos == in.len && !in.failed);
    check_program(&p, nmethods);

    /* round trip */
    adag_wbuf_t w1 = {0}, w2 = {0};
    adag__program_encode(&p, &w1);
    CHECK(!w1.failed);
    adag_rbuf_t r1 = {w1.data, w1.len, 0, 0};
    CHECK(adag__program_decode(&r1, nmethods, &q) == ADAG_OK);
    CHECK(same_program(&p, &q));
    adag__program_encode(&q, &w2);
    CHECK(!w2.failed && w1.len == w2.len && memcmp(w1.data, w2.data, w1.len) == 0);

    adag_program_t c;
    CHECK(adag__program_copy(&c, &p) == ADAG_OK);
    CHECK(same_program(&p, &c));

    open_channels(&p);

    adag__wbuf_free(&w1);
    adag__wbuf_free(&w2);
    adag__program_free(&p);
    adag__program_free(&q);
    adag__program_free(&c);
    return 0;
}

/*
 * libFuzzer target: adag_program_decode, the worker's decoder of the DAG
 * program carried by INSTALL_DAG.
 *
 * Input: byte 0 = the actor's number of methods (0..255), the rest = the
 * encoded program. A rejected program must simply fail (no leak: the decoder
 * frees what it allocated). An accepted one must satisfy every promise the
 * worker relies on, checked here independently of the decoder's own code:
 *   - the whole input is consumed; nslots >= 1; the segment holds its header;
 *   - names are NUL-terminated inside their arrays; spin_yield is 0 or 1;
 *   - every channel: kind is LOCAL or SHM; reader is -1 or < nreaders;
 *     a shm channel lies inside the segment: offset >= the segment header and
 *     offset + its real size <= segment_size, the size computed here without
 *     any wrap-around (128-bit arithmetic);
 *   - every op: method < nmethods; nargs/nrets within ADAG_MAX_*; args and
 *     rets index channels; every ret is a channel this actor writes.
 * Then the round trip: encode -> decode must succeed and give the same
 * program, and encoding that again gives the same bytes (a canonical form);
 * adag_program_copy gives the same program too.
 */
#include "dag/program.h"
#include "transport/shm_ring.h"

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

typedef unsigned __int128 u128;

/* The true size of a shm channel, from the ring's own size function applied to
 * tiny geometries (so the private header/cursor/slot sizes are not copied
 * here) and then scaled up without overflow. */
static u128 true_chan_size(uint64_t nslots, uint64_t nreaders, uint64_t capacity)
{
    u128 hdr = adag_shm_chan_size(0, 0, 0);
    u128 cursor = adag_shm_chan_size(0, 1, 0) - hdr;
    u128 slot_hdr = adag_shm_chan_size(1, 0, 0) - hdr;
    u128 slot = slot_hdr + (((u128)capacity + 63) & ~(u128)63);
    return hdr + (u128)nreaders * cursor + (u128)nslots * slot;
}

static void check_program(const adag_program_t *p, unsigned nmethods)
{
    CHECK(p->nslots >= 1);
    CHECK(p->segment_size >= ADAG_SEGMENT_HDR_SIZE);
    CHECK(memchr(p->dag_name, '\0', sizeof(p->dag_name)));
    CHECK(p->spin_yield <= 1);
    CHECK(p->chans && p->ops);
    for (uint32_t i = 0; i < p->nchans; i++) {
        const adag_prog_chan_t *c = &p->chans[i];
        CHECK(memchr(c->name, '\0', sizeof(c->name)));
        CHECK(c->kind == ADAG_CHAN_LOCAL || c->kind == ADAG_CHAN_SHM);
        CHECK(c->reader >= -1);
        CHECK(c->reader < 0 || (uint32_t)c->reader < c->nreaders);
        if (c->kind == ADAG_CHAN_SHM) {
            CHECK(c->offset >= ADAG_SEGMENT_HDR_SIZE);
            CHECK((u128)c->offset + true_chan_size(p->nslots, c->nreaders, p->capacity) <=
                  (u128)p->segment_size);
        }
    }
    for (uint32_t i = 0; i < p->nops; i++) {
        const adag_prog_op_t *op = &p->ops[i];
        CHECK(op->method < nmethods);
        CHECK(op->nargs <= ADAG_MAX_ARGS && op->nrets <= ADAG_MAX_RETURNS);
        for (uint32_t a = 0; a < op->nargs; a++)
            CHECK(op->args[a] < p->nchans);
        for (uint32_t r = 0; r < op->nrets; r++)
            CHECK(op->rets[r] < p->nchans && p->chans[op->rets[r]].writes);
    }
}

/* Field-by-field equality; arrays are compared whole (the decoder zeroes them
 * before filling, so unused name bytes and arg slots compare equal too). */
static int same_program(const adag_program_t *a, const adag_program_t *b)
{
    return a->dag_id == b->dag_id && memcmp(a->dag_name, b->dag_name, sizeof(a->dag_name)) == 0 &&
           a->segment_size == b->segment_size && a->nslots == b->nslots &&
           a->capacity == b->capacity && a->spin_ns == b->spin_ns &&
           a->spin_yield == b->spin_yield && a->nchans == b->nchans && a->nops == b->nops &&
           memcmp(a->chans, b->chans, a->nchans * sizeof(*a->chans)) == 0 &&
           memcmp(a->ops, b->ops, a->nops * sizeof(*a->ops)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned nmethods = data[0];
    adag_rbuf_t in = {(const char *)data + 1, size - 1, 0, 0};
    adag_program_t p, q;

    if (adag_program_decode(&in, nmethods, &p) != ADAG_OK) {
        CHECK(p.chans == NULL && p.ops == NULL); /* freed on failure */
        return 0;
    }
    CHECK(in.pos == in.len && !in.failed);
    check_program(&p, nmethods);

    /* round trip */
    adag_wbuf_t w1 = {0}, w2 = {0};
    adag_program_encode(&p, &w1);
    CHECK(!w1.failed);
    adag_rbuf_t r1 = {w1.data, w1.len, 0, 0};
    CHECK(adag_program_decode(&r1, nmethods, &q) == ADAG_OK);
    CHECK(same_program(&p, &q));
    adag_program_encode(&q, &w2);
    CHECK(!w2.failed && w1.len == w2.len && memcmp(w1.data, w2.data, w1.len) == 0);

    adag_program_t c;
    CHECK(adag_program_copy(&c, &p) == ADAG_OK);
    CHECK(same_program(&p, &c));

    adag_wbuf_free(&w1);
    adag_wbuf_free(&w2);
    adag_program_free(&p);
    adag_program_free(&q);
    adag_program_free(&c);
    return 0;
}

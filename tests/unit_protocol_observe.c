/*
 * The control protocol's replies that observe a running DAG (suite
 * "protocol", transport/protocol.c, transport/protocol_trace.c): TRACE_DAG's
 * records (and the spans they expand to), CLOCK's reading and STATS_DAG's
 * figures round trip; every prefix and every count the bytes do not hold
 * is ADAG_ERR_PROTOCOL naming the message. The message table itself:
 * tests/unit_protocol.c.
 */
#include "common/clock.h"
#include "common/error.h"
#include "transport/protocol.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TRACE_DAG's reply: records round trip; every prefix, a count the bytes
 * do not hold and a count past the ring's limit are refused. */
Test(protocol, trace_records)
{
    adag_trace_rec_t recs[3] = {
        {.seq = 1, .t = {10, 20, 30, 95, 99}, .packed = ADAG_SPAN_OP | 7u << 8 | 2u << 16},
        {.seq = 2, .t = {20, 95}, .packed = ADAG_SPAN_COLLECTIVE | 1u << 16},
        {.seq = 1, .t = {95, 99}, .packed = (ADAG_SPAN_BACKEND + 3) | 0xffffull << 16 |
                                               0xfffffffeull << 32},
    }, *out;
    uint64_t now, lost, n;
    adag_wbuf_t b = {0};
    adag__msg_encode_trace(&b, 12345, 6, recs, 3);
    cr_assert_eq(adag__msg_decode_trace((adag_blob_t){b.data, b.len}, &now, &lost, &out, &n),
                 ADAG_OK, "%s", adag_last_error());
    cr_assert(now == 12345 && lost == 6 && n == 3);
    cr_assert_eq(memcmp(out, recs, sizeof(recs)), 0);
    free(out);
    for (size_t len = 0; len < b.len; len++)
        cr_assert_eq(adag__msg_decode_trace((adag_blob_t){b.data, len}, &now, &lost, &out, &n),
                     ADAG_ERR_PROTOCOL, "prefix %zu", len);
    adag__wbuf_free(&b);
    /* no records */
    adag__msg_encode_trace(&b, 1, 0, NULL, 0);
    cr_assert_eq(adag__msg_decode_trace((adag_blob_t){b.data, b.len}, &now, &lost, &out, &n),
                 ADAG_OK);
    cr_assert(n == 0 && out == NULL);
    adag__wbuf_free(&b);
    /* counts that lie */
    const uint64_t counts[] = {2, 4, ADAG_TRACE_MAX_SPANS + 1, UINT64_MAX};
    for (unsigned i = 0; i < 4; i++) {
        adag__wbuf_u64(&b, 1);
        adag__wbuf_u64(&b, 0);
        adag__wbuf_u64(&b, counts[i]);
        for (int k = 0; k < 3 * 7; k++)
            adag__wbuf_u64(&b, (uint64_t)k);
        cr_assert_eq(adag__msg_decode_trace((adag_blob_t){b.data, b.len}, &now, &lost, &out, &n),
                     ADAG_ERR_PROTOCOL, "count %llu", (unsigned long long)counts[i]);
        cr_assert(strstr(adag_last_error(), "TRACE_DAG"), "%s", adag_last_error());
        adag__wbuf_free(&b);
    }
}

/* An op record expands to its wait, room, compute and publish spans (as
 * its flags say); a plain record to one span. */
Test(protocol, trace_expand)
{
    adag_trace_rec_t recs[3] = {
        {.seq = 4, .t = {10, 20, 30, 95, 99},
         .packed = ADAG_SPAN_OP | 7u << 8 | 2u << 16 | 5ull << 32 | 9ull << 48},
        {.seq = 5, .t = {100, 110, 110, 110, 120}, /* an upstream failure: no compute */
         .packed = ADAG_SPAN_OP | 3u << 8 | 2u << 16 | 5ull << 32 | 9ull << 48},
        {.seq = 5, .t = {120, 130}, .packed = ADAG_SPAN_COLLECTIVE | 1u << 16},
    };
    adag_span_t sp[12];
    cr_assert_eq(adag__trace_expand(recs, 3, sp), 8);
    const unsigned kinds[8] = {ADAG_SPAN_WAIT_INPUT, ADAG_SPAN_WAIT_ROOM, ADAG_SPAN_COMPUTE,
                               ADAG_SPAN_PUBLISH,    ADAG_SPAN_WAIT_INPUT, ADAG_SPAN_WAIT_ROOM,
                               ADAG_SPAN_PUBLISH,    ADAG_SPAN_COLLECTIVE};
    const uint64_t starts[8] = {10, 20, 30, 95, 100, 110, 110, 120};
    const uint64_t ends[8] = {20, 30, 95, 99, 110, 110, 120, 130};
    const uint32_t args[8] = {5, 9, 0, 9, 5, 9, 9, 0};
    for (int i = 0; i < 8; i++)
        cr_assert(sp[i].kind == kinds[i] && sp[i].start_ns == starts[i] &&
                      sp[i].end_ns == ends[i] && sp[i].arg == args[i] &&
                      sp[i].op == (i == 7 ? 1 : 2) && sp[i].seq == (i < 4 ? 4u : 5u),
                  "span %d: kind %u [%llu, %llu] arg %u op %u", i, sp[i].kind,
                  (unsigned long long)sp[i].start_ns, (unsigned long long)sp[i].end_ns,
                  sp[i].arg, sp[i].op);
}

/* CLOCK's reply round trips; prefixes and a boot id too long are refused. */
Test(protocol, clock)
{
    adag_wbuf_t b = {0};
    uint64_t now;
    char boot[ADAG_BOOT_ID_MAX];
    adag__msg_encode_clock(&b, 987654321, "0f1e2d3c-aaaa-bbbb-cccc-0123456789ab");
    cr_assert_eq(adag__msg_decode_clock((adag_blob_t){b.data, b.len}, &now, boot), ADAG_OK);
    cr_assert(now == 987654321 && strcmp(boot, "0f1e2d3c-aaaa-bbbb-cccc-0123456789ab") == 0);
    for (size_t len = 0; len < b.len; len++)
        cr_assert_eq(adag__msg_decode_clock((adag_blob_t){b.data, len}, &now, boot),
                     ADAG_ERR_PROTOCOL, "prefix %zu", len);
    adag__wbuf_free(&b);
    char long_id[100];
    memset(long_id, 'x', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    adag__msg_encode_clock(&b, 1, long_id);
    cr_assert_eq(adag__msg_decode_clock((adag_blob_t){b.data, b.len}, &now, boot),
                 ADAG_ERR_PROTOCOL);
    cr_assert(strstr(adag_last_error(), "CLOCK"), "%s", adag_last_error());
    adag__wbuf_free(&b);
}

/* STATS_DAG's reply: figures round trip; prefixes and lying counts are
 * refused. */
Test(protocol, stats_figures)
{
    adag_op_figures_t ops[2] = {{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 13, 14, 15, 16}};
    adag_chan_figures_t chans[1] = {{.chan = 3, .in_use = 2, .values = 40, .bytes = 320}};
    adag_loop_figures_t f = {.timed = 1, .elapsed_ns = 777, .idle_ns = 55, .doing = 3 << 8 | 2, .nops = 2, .nchans = 1,
                             .ops = ops, .chans = chans}, got;
    adag_wbuf_t b = {0};
    adag__msg_encode_figures(&b, &f);
    cr_assert_eq(adag__msg_decode_figures((adag_blob_t){b.data, b.len}, &got), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert(got.timed == 1 && got.elapsed_ns == 777 && got.idle_ns == 55 && got.doing == (3 << 8 | 2) && got.nops == 2 &&
              got.nchans == 1);
    cr_assert_eq(memcmp(got.ops, ops, sizeof(ops)), 0);
    cr_assert_eq(memcmp(got.chans, chans, sizeof(chans)), 0);
    adag__loop_figures_free(&got);
    for (size_t len = 0; len < b.len; len++)
        cr_assert_eq(adag__msg_decode_figures((adag_blob_t){b.data, len}, &got),
                     ADAG_ERR_PROTOCOL, "prefix %zu", len);
    adag__wbuf_free(&b);
    f.nops = ADAG_MSG_FIGURES_MAX + 1; /* encoded as is: a count the bytes do not hold */
    adag__wbuf_u32(&b, 1);
    adag__wbuf_u64(&b, 1);
    adag__wbuf_u64(&b, 1);
    adag__wbuf_u32(&b, 0);
    adag__wbuf_u32(&b, UINT32_MAX);
    adag__wbuf_u32(&b, 0);
    cr_assert_eq(adag__msg_decode_figures((adag_blob_t){b.data, b.len}, &got), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(adag_last_error(), "STATS_DAG"), "%s", adag_last_error());
    adag__wbuf_free(&b);
}

/* Unit tests of control-message framing, fd passing and program decoding
 * (suite "wire"): every malformed input is rejected, never trusted. */
#include "tests/chan_index.h"
#include "common/clock.h"
#include "dag/exec/program.h"
#include "transport/control.h"
#include "transport/chan_shm.h"
#include "transport/wire.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char sample_descs[8] = {0, 1, 0, 0, 0, 0, 0, 0}; /* shm offset 256 */

static void sample_program(adag_program_t *p, adag_prog_chan_t *chans, adag_prog_op_t *ops)
{
    memset(p, 0, sizeof(*p));
    memset(chans, 0, 2 * sizeof(*chans));
    memset(ops, 0, sizeof(*ops));
    p->dag_id = 7;
    snprintf(p->dag_name, sizeof(p->dag_name), "dag7");
    p->max_inflight = 4;
    p->start_chan = ADAG_PROG_NO_CHAN;
    p->descs = sample_descs;
    p->descs_len = sizeof(sample_descs);
    p->nchans = 2;
    p->chans = chans;
    snprintf(chans[0].name, sizeof(chans[0].name), "input[0]");
    chans[0].backend = CHAN_SHM;
    chans[0].nreaders = 1;
    chans[0].reader = 0;
    chans[0].nslots = 4;
    chans[0].capacity = 1024;
    chans[0].desc_off = 0;
    chans[0].desc_len = 8;
    snprintf(chans[1].name, sizeof(chans[1].name), "a.m[0]");
    chans[1].backend = CHAN_SELF;
    chans[1].reader = -1;
    chans[1].nslots = 1;
    chans[1].capacity = 256;
    chans[1].tensor = (adag_tensor_decl_t){
        .flags = ADAG_TENSOR_DECL_KNOWN, .dtype = ADAG_DTYPE_BF16, .ndim = 2,
        .transport = ADAG_TRANSPORT_HOST, .shape = {4, 8}};
    p->nops = 1;
    p->ops = ops;
    ops[0].kind = ADAG_OP_CALL;
    ops[0].nargs = 1;
    ops[0].nrets = 1;
    ops[0].args[0] = 0;
    ops[0].rets[0] = 1;
}

Test(wire, program_roundtrip, .timeout = 30)
{
    adag_program_t p, q;
    adag_prog_chan_t chans[2];
    adag_prog_op_t ops[1];
    adag_wbuf_t wb = {0};
    sample_program(&p, chans, ops);
    adag__program_encode(&p, &wb);
    cr_assert(!wb.failed);
    adag_rbuf_t rb = {wb.data, wb.len, 0, 0};
    cr_assert_eq(adag__program_decode(&rb, 1, &q), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(q.dag_id, 7);
    cr_assert_str_eq(q.chans[1].name, "a.m[0]");
    cr_assert_eq(q.chans[0].desc_len, 8);
    adag_blob_t d = adag__program_desc(&q, 0);
    cr_assert_eq(memcmp(d.data, sample_descs, 8), 0);
    cr_assert_eq(q.ops[0].kind, ADAG_OP_CALL);
    cr_assert_eq(q.ops[0].rets[0], 1);
    cr_assert_eq(memcmp(&q.chans[1].tensor, &chans[1].tensor, sizeof(chans[1].tensor)), 0,
                 "the tensor declaration changed on the way");
    cr_assert_eq(q.chans[0].tensor.flags, 0);
    adag_program_t c;
    cr_assert_eq(adag__program_copy(&c, &q), ADAG_OK);
    cr_assert_eq(memcmp(&c.chans[1].tensor, &chans[1].tensor, sizeof(chans[1].tensor)), 0);
    adag__program_free(&c);
    adag__program_free(&q);
    adag__wbuf_free(&wb);
}

/* Every channel carries its own geometry: slots and bytes per slot
 * survive the trip; a channel of no slot, of more slots than the
 * program's executions in flight, or of a slot over 2^40 bytes is
 * malformed, and so is a program of 0 or more than 4096 executions in
 * flight (the loop sizes its own rings by it). */
Test(wire, program_channel_geometry, .timeout = 30)
{
    adag_program_t p, q;
    adag_prog_chan_t chans[2];
    adag_prog_op_t ops[1];
    for (int i = 0; i < 8; i++) {
        sample_program(&p, chans, ops);
        chans[0].nslots = 3;
        chans[0].capacity = 4;
        chans[1].capacity = (uint64_t)4 << 20;
        switch (i) {
        case 1: chans[0].nslots = 0; break;
        case 2: chans[0].nslots = 5; break; /* max_inflight 4 */
        case 3: chans[1].capacity = ((uint64_t)1 << 40) + 1; break;
        case 4: p.max_inflight = 0; chans[0].nslots = chans[1].nslots = 0; break;
        case 5: p.max_inflight = 4097; break;
        case 6: p.max_inflight = 4096; chans[0].nslots = 4096; break;
        case 7: chans[1].capacity = (uint64_t)1 << 40; chans[0].capacity = 0; break;
        }
        adag_wbuf_t wb = {0};
        adag__program_encode(&p, &wb);
        adag_rbuf_t rb = {wb.data, wb.len, 0, 0};
        adag_status_t st = adag__program_decode(&rb, 1, &q);
        adag__wbuf_free(&wb);
        if (i >= 1 && i <= 5) {
            cr_assert_eq(st, ADAG_ERR_PROTOCOL, "case %d accepted", i);
            continue;
        }
        cr_assert_eq(st, ADAG_OK, "case %d: %s", i, adag_last_error());
        cr_assert_eq(q.max_inflight, p.max_inflight);
        for (int c = 0; c < 2; c++)
            cr_assert(q.chans[c].nslots == chans[c].nslots &&
                          q.chans[c].capacity == chans[c].capacity,
                      "case %d, channel %d: %u slots of %llu bytes, sent %u of %llu", i, c,
                      q.chans[c].nslots, (unsigned long long)q.chans[c].capacity,
                      chans[c].nslots, (unsigned long long)chans[c].capacity);
        adag__program_free(&q);
    }
}

/* The communicators of a program and the channels' keys survive the trip;
 * a channel it reads may name a communicator it does not join (a host
 * reader of a tensor by communicator); a written channel's key that no
 * communicator has, a rank outside the communicator, an unknown
 * backend, an empty id or two communicators with one key are malformed; so
 * is a shared one without a ticket channel this actor reads, an unshared
 * one with one, or a count of collectives the operations do not have. */
Test(wire, program_communicators, .timeout = 30)
{
    adag_program_t p, q;
    adag_prog_chan_t chans[2];
    adag_prog_op_t ops[1];
    adag_comm_spec_t specs[2] = {
        {.key = 5, .kind = ADAG_COMM_KIND_HOST, .nranks = 3, .rank = 2, .id = {{1, 2, 3}, 3},
         .shared = 1, .order_chan = 0},
        {.key = 9, .kind = ADAG_COMM_KIND_NCCL, .nranks = 2, .rank = 0, .id = {{7}, 128},
         .order_chan = ADAG_PROG_NO_CHAN},
    };
    for (int i = 0; i < 13; i++) {
        sample_program(&p, chans, ops);
        adag_comm_spec_t s[2] = {specs[0], specs[1]};
        p.comms = s;
        p.ncomms = 2;
        chans[0].comm_key = i == 12 ? 6 : 5; /* 12: read in host memory, by a host reader */
        switch (i) {
        case 1: chans[1].comm_key = 6; break; /* the channel it writes */
        case 2: s[0].rank = 3; break;
        case 3: s[1].kind = ADAG_COMM_KIND_COUNT; break;
        case 4: s[0].id.len = 0; break;
        case 5: s[1].key = 5; break;
        case 6: s[0].key = 0; chans[0].comm_key = 0; break;
        case 7: s[1].nranks = 1; s[1].rank = 0; break;
        case 8: s[0].order_chan = ADAG_PROG_NO_CHAN; break;
        case 9: s[0].order_chan = 1; break; /* a channel this actor writes */
        case 10: s[1].order_chan = 0; break;
        case 11: s[1].ncolls = 1; break;
        }
        adag_wbuf_t wb = {0};
        adag__program_encode(&p, &wb);
        adag_rbuf_t rb = {wb.data, wb.len, 0, 0};
        adag_status_t st = adag__program_decode(&rb, 1, &q);
        if (i > 0 && i < 12) {
            cr_assert_eq(st, ADAG_ERR_PROTOCOL, "case %d accepted", i);
            adag__wbuf_free(&wb);
            continue;
        }
        cr_assert_eq(st, ADAG_OK, "case %d: %s", i, adag_last_error());
        cr_assert_eq(q.ncomms, 2);
        cr_assert_eq(q.chans[0].comm_key, i == 12 ? 6u : 5u);
        cr_assert_eq(q.chans[1].comm_key, 0);
        cr_assert_eq(q.comms[0].key, 5);
        cr_assert_eq(q.comms[0].rank, 2);
        cr_assert_eq(q.comms[0].nranks, 3);
        cr_assert_eq(q.comms[0].id.len, 3);
        cr_assert_eq(memcmp(q.comms[0].id.bytes, specs[0].id.bytes, 3), 0);
        cr_assert_eq(q.comms[1].kind, ADAG_COMM_KIND_NCCL);
        cr_assert_eq(q.comms[1].id.len, 128);
        cr_assert_eq(q.comms[0].shared, 1);
        cr_assert_eq(q.comms[0].order_chan, 0);
        cr_assert_eq(q.comms[1].order_chan, ADAG_PROG_NO_CHAN);
        adag_program_t c;
        cr_assert_eq(adag__program_copy(&c, &q), ADAG_OK);
        cr_assert_eq(c.comms[1].key, 9);
        adag__program_free(&c);
        adag__program_free(&q);
        adag__wbuf_free(&wb);
    }
}

/* A tensor declaration a peer sends is checked like adag_node_tensor's:
 * unknown flags, dtypes, transports, ndim > 8, negative dimensions and
 * fields set without their flag are malformed. */
Test(wire, program_rejects_bad_tensor_declarations, .timeout = 30)
{
    adag_program_t p, q;
    adag_prog_chan_t chans[2];
    adag_prog_op_t ops[1];
    for (int i = 0; i < 8; i++) {
        sample_program(&p, chans, ops);
        adag_tensor_decl_t *t = &chans[1].tensor;
        switch (i) {
        case 0: t->flags |= 1u << 5; break;
        case 1: t->dtype = ADAG_DTYPE_BYTES; break;
        case 2: t->dtype = 11; break;
        case 3: t->transport = 4; break;
        case 4: t->ndim = 9; break;
        case 5: t->shape[1] = -8; break;
        case 6: t->flags = ADAG_TENSOR_DECLARED; break; /* a dtype and shape, not static */
        case 7: t->flags &= ~(uint32_t)ADAG_TENSOR_DECLARED; break;
        }
        adag_wbuf_t wb = {0};
        adag__program_encode(&p, &wb);
        adag_rbuf_t rb = {wb.data, wb.len, 0, 0};
        cr_assert_eq(adag__program_decode(&rb, 1, &q), ADAG_ERR_PROTOCOL, "case %d accepted", i);
        adag__wbuf_free(&wb);
    }
}

Test(wire, program_decode_rejects_every_truncation_and_corruption, .timeout = 60)
{
    adag_program_t p, q;
    adag_prog_chan_t chans[2];
    adag_prog_op_t ops[1];
    adag_wbuf_t wb = {0};
    sample_program(&p, chans, ops);
    adag__program_encode(&p, &wb);
    /* every strict prefix is malformed */
    for (size_t len = 0; len < wb.len; len++) {
        adag_rbuf_t rb = {wb.data, len, 0, 0};
        cr_assert_eq(adag__program_decode(&rb, 1, &q), ADAG_ERR_PROTOCOL, "prefix %zu accepted",
                     len);
    }
    /* a method index beyond the actor's table */
    adag_rbuf_t rb = {wb.data, wb.len, 0, 0};
    cr_assert_eq(adag__program_decode(&rb, 0, &q), ADAG_ERR_PROTOCOL);
    /* random byte flips: decode either fails cleanly or yields in-bounds indexes */
    srand(1234);
    char *copy = malloc(wb.len);
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(copy, wb.data, wb.len);
        for (int k = 0; k < 3; k++)
            copy[rand() % wb.len] = (char)rand();
        adag_rbuf_t fb = {copy, wb.len, 0, 0};
        if (adag__program_decode(&fb, 1, &q) == ADAG_OK) {
            for (uint32_t i = 0; i < q.nops; i++) {
                for (uint32_t a = 0; a < q.ops[i].nargs; a++)
                    cr_assert_lt(q.ops[i].args[a], q.nchans);
                for (uint32_t r = 0; r < q.ops[i].nrets; r++)
                    cr_assert_lt(q.ops[i].rets[r], q.nchans);
            }
            for (uint32_t c = 0; c < q.nchans; c++) {
                cr_assert_leq(q.chans[c].desc_off + (uint64_t)q.chans[c].desc_len, q.descs_len);
                cr_assert(adag__chan_backend(q.chans[c].backend) != NULL);
                cr_assert(adag__tensor_decl_valid(&q.chans[c].tensor));
            }
            for (uint32_t i = 0; i < q.nops; i++)
                cr_assert_eq(q.ops[i].kind, ADAG_OP_CALL);
            adag__program_free(&q);
        }
    }
    free(copy);
    adag__wbuf_free(&wb);
}

Test(wire, control_frames_carry_payload_and_fds, .timeout = 30)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    size_t big = 1 << 20; /* larger than the socket buffer: sent in pieces */
    char *payload = malloc(big);
    for (size_t i = 0; i < big; i++)
        payload[i] = (char)(i * 7);
    pid_t kid = fork();
    if (kid == 0) {
        adag_status_t st = adag__ctl_send(sv[0], 42, payload, big, fds, 2);
        _exit(st == ADAG_OK ? 0 : 1);
    }
    adag_ctl_msg_t msg;
    cr_assert_eq(adag__ctl_recv(sv[1], adag__deadline_ms(10000), &msg), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(msg.type, 42);
    cr_assert_eq(msg.len, big);
    cr_assert_eq(memcmp(msg.payload, payload, big), 0);
    cr_assert_eq(msg.nfds, 2);
    struct stat a, b;
    fstat(msg.fds[0], &a);
    fstat(fds[0], &b);
    cr_assert_eq(a.st_ino, b.st_ino, "the passed fd is the same pipe");
    adag__ctl_msg_free(&msg);
    int status;
    waitpid(kid, &status, 0);
    cr_assert_eq(status, 0);
    free(payload);
}

Test(wire, control_recv_reports_closed_peer_and_oversized_frames, .timeout = 30)
{
    int sv[2];
    adag_ctl_msg_t msg;
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    /* a frame header claiming 1 TiB */
    uint32_t hdr[4] = {1, 0, 0, 256};
    cr_assert_eq(write(sv[0], hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
    cr_assert_eq(adag__ctl_recv(sv[1], adag__deadline_ms(1000), &msg), ADAG_ERR_PROTOCOL);
    /* nothing more: a timeout */
    cr_assert_eq(adag__ctl_recv(sv[1], adag__deadline_ms(50), &msg), ADAG_ERR_TIMEOUT);
    /* a truncated frame, then EOF */
    uint32_t part[2] = {1, 0};
    cr_assert_eq(write(sv[0], part, sizeof(part)), (ssize_t)sizeof(part));
    close(sv[0]);
    cr_assert_eq(adag__ctl_recv(sv[1], adag__deadline_ms(1000), &msg), ADAG_ERR_CLOSED);
    close(sv[1]);
}

Test(wire, strings_are_bounded, .timeout = 30)
{
    adag_wbuf_t wb = {0};
    char out[8];
    adag__wbuf_str(&wb, "short");
    adag__wbuf_str(&wb, "much too long for eight");
    adag_rbuf_t rb = {wb.data, wb.len, 0, 0};
    adag__rbuf_str(&rb, out, sizeof(out));
    cr_assert(!rb.failed);
    cr_assert_str_eq(out, "short");
    adag__rbuf_str(&rb, out, sizeof(out));
    cr_assert(rb.failed, "an over-long string must fail, not truncate silently");
    adag__wbuf_free(&wb);
}

/* A channel's size from peer-given geometry cannot wrap around: a capacity
 * near 2^64 or a slot count times slot size past 2^64 reads as "does not
 * fit" (SIZE_MAX), so a program claiming such a channel is refused. */
Test(wire, channel_size_does_not_wrap, .timeout = 30)
{
    cr_assert_eq(adag__shm_chan_size(4, 1, (size_t)-256), SIZE_MAX);
    cr_assert_eq(adag__shm_chan_size(2, 1, ((size_t)1 << 63) + 512), SIZE_MAX);
    cr_assert_eq(adag__shm_chan_size(UINT32_MAX, UINT32_MAX, (size_t)1 << 40), SIZE_MAX);
    cr_assert(adag__shm_chan_size(4, 2, 1024) < 8192);

}

/* An operation of a kind this build does not know is refused. */
Test(wire, program_rejects_unknown_op_kind, .timeout = 30)
{
    adag_program_t p, q;
    adag_prog_chan_t chans[2];
    adag_prog_op_t ops[1];
    adag_wbuf_t wb = {0};
    sample_program(&p, chans, ops);
    ops[0].kind = 77;
    adag__program_encode(&p, &wb);
    adag_rbuf_t rb = {wb.data, wb.len, 0, 0};
    cr_assert_eq(adag__program_decode(&rb, 1, &q), ADAG_ERR_PROTOCOL);
    adag__wbuf_free(&wb);
    /* and a channel of a backend this build does not have too */
    sample_program(&p, chans, ops);
    chans[1].backend = adag__chan_nbackends(); /* encoded as "?" */
    adag__program_encode(&p, &wb);
    adag_rbuf_t rb2 = {wb.data, wb.len, 0, 0};
    cr_assert_eq(adag__program_decode(&rb2, 1, &q), ADAG_ERR_PROTOCOL);
    adag__wbuf_free(&wb);
}

/* A count larger than what the rest of the message can hold is refused
 * before anything is allocated for it. */
Test(wire, program_counts_bounded_by_message, .timeout = 30)
{
    adag_wbuf_t wb = {0};
    adag__wbuf_u32(&wb, 1);               /* dag id */
    adag__wbuf_str(&wb, "d");             /* name */
    adag__wbuf_u32(&wb, 4);               /* max_inflight */
    adag__wbuf_u64(&wb, 0);               /* spin */
    adag__wbuf_u32(&wb, 0);               /* yield */
    adag__wbuf_u64(&wb, 0);               /* trace spans */
    adag__wbuf_u64(&wb, 0);               /* comm timeout */
    adag__wbuf_u32(&wb, ADAG_PROG_NO_CHAN); /* start channel */
    adag__wbuf_bytes(&wb, NULL, 0);       /* descriptors */
    adag__wbuf_u32(&wb, 1u << 20);        /* a million channels, in 4 bytes */
    adag_program_t q;
    adag_rbuf_t rb = {wb.data, wb.len, 0, 0};
    cr_assert_eq(adag__program_decode(&rb, 1, &q), ADAG_ERR_PROTOCOL);
    adag__wbuf_free(&wb);
}

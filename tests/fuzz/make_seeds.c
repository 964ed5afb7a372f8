/*
 * Writes the seed corpora of the fuzz targets with the real encoders
 * (adag__program_encode, adag_msg_encode_*, frames from adag__ctl_send) and
 * the real shm domain of tests/fuzz/fuzz_domain.h (descriptors, domain list):
 *   make_seeds DIR  ->  files in DIR/wire, DIR/program and DIR/control
 * (`make fuzz-seeds` runs it on tests/fuzz/corpus). Each seed is small and
 * valid, so the fuzzers start from inputs that get past the first checks;
 * the layouts are the ones described at the top of each fuzz_*.c.
 */
#include "tests/chan_index.h"
#include "dag/exec/program.h"
#include "fuzz_domain.h"
#include "transport/control.h"
#include "transport/protocol.h"
#include "transport/wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <turbojpeg.h>

static const char *outdir;

static void die(const char *what)
{
    fprintf(stderr, "make_seeds: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* DIR/target/name = prefix (plen bytes) + body */
static void save(const char *target, const char *name, const void *prefix, size_t plen,
                 const void *body, size_t blen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", outdir, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        die(path);
    snprintf(path, sizeof(path), "%s/%s/%s", outdir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(prefix, 1, plen, f) != plen || (blen && fwrite(body, 1, blen, f) != blen) ||
        fclose(f) != 0)
        die(path);
}

/* ---- fuzz_wire: [k][k opcodes][buffer] ---- */

static void wire_seeds(void)
{
    adag_wbuf_t b = {0};
    adag__wbuf_u32(&b, 7);
    adag__wbuf_u64(&b, 1ull << 40);
    adag__wbuf_bytes(&b, "abc", 3);
    adag__wbuf_str(&b, "input[0]");  /* str into 64 bytes */
    adag__wbuf_str(&b, "");          /* str into 1 byte */
    const uint8_t all[] = {5, 0, 1, 2, 3 | (4 << 2), 3 | (0 << 2)};
    save("wire", "u32-u64-bytes-str", all, sizeof(all), b.data, b.len);
    const uint8_t strs[] = {1, 3 | (5 << 2)}; /* str into 96 bytes, repeated */
    adag__wbuf_free(&b);
    adag__wbuf_str(&b, "stage1.forward[0]");
    adag__wbuf_str(&b, "a.m[0]");
    save("wire", "strings", strs, sizeof(strs), b.data, b.len);
    adag__wbuf_free(&b);
}

/* ---- fuzz_program: [nmethods][program] ---- */

/* The fuzz domain, laid out as the fuzzers lay it out: its descriptors
 * open there. */
static adag_dag_ctx_t domain;
static adag_wbuf_t descs[FUZZ_NCHANS];

/* p->descs = the given domain channels' descriptors, one after the other;
 * chans[i] of the program takes descriptor which[i] (-1: none, self) */
static void set_descs(adag_program_t *p, const int *which)
{
    static char blob[256];
    uint32_t len = 0, off[FUZZ_NCHANS];
    for (unsigned i = 0; i < FUZZ_NCHANS; i++) {
        off[i] = len;
        memcpy(blob + len, descs[i].data, descs[i].len);
        len += (uint32_t)descs[i].len;
    }
    p->descs = blob;
    p->descs_len = len;
    for (uint32_t c = 0; c < p->nchans; c++)
        if (which[c] >= 0) {
            p->chans[c].desc_off = off[which[c]];
            p->chans[c].desc_len = (uint32_t)descs[which[c]].len;
        }
}

/* The program of unit_wire.c on the fuzz domain: one shm input (domain
 * channel 0) read, one self return. */
static void sample_program(adag_program_t *p, adag_prog_chan_t *chans, adag_prog_op_t *ops)
{
    static const int which[2] = {0, -1};
    memset(p, 0, sizeof(*p));
    memset(chans, 0, 2 * sizeof(*chans));
    memset(ops, 0, sizeof(*ops));
    p->dag_id = 7;
    snprintf(p->dag_name, sizeof(p->dag_name), "dag7");
    p->max_inflight = fuzz_geoms[0].nslots;
    p->start_chan = ADAG_PROG_NO_CHAN;
    p->nchans = 2;
    p->chans = chans;
    snprintf(chans[0].name, sizeof(chans[0].name), "input[0]");
    chans[0].backend = CHAN_SHM;
    chans[0].nreaders = fuzz_geoms[0].nreaders;
    chans[0].reader = 0;
    chans[0].nslots = fuzz_geoms[0].nslots;
    chans[0].capacity = fuzz_geoms[0].capacity;
    snprintf(chans[1].name, sizeof(chans[1].name), "a.m[0]");
    chans[1].backend = CHAN_SELF;
    chans[1].reader = -1;
    chans[1].nslots = 1;
    chans[1].capacity = 256;
    set_descs(p, which);
    p->nops = 1;
    p->ops = ops;
    ops[0].kind = ADAG_OP_CALL;
    ops[0].nargs = 1;
    ops[0].nrets = 1;
    ops[0].args[0] = 0;
    ops[0].rets[0] = 1;
}

/* A middle stage on domain channel 1: reads it (reader 1), writes a self
 * channel it reads back in a second op, and writes channel 1 again as its
 * writer. */
static void chain_program(adag_program_t *p, adag_prog_chan_t *chans, adag_prog_op_t *ops)
{
    static const int which[3] = {1, -1, 1};
    memset(p, 0, sizeof(*p));
    memset(chans, 0, 3 * sizeof(*chans));
    memset(ops, 0, 2 * sizeof(*ops));
    p->dag_id = 3;
    snprintf(p->dag_name, sizeof(p->dag_name), "chain");
    /* more executions in flight than its shm channel has slots: each
     * channel has its own geometry */
    p->max_inflight = 2 * fuzz_geoms[1].nslots;
    p->spin_ns = 20000;
    p->spin_yield = 1;
    p->start_chan = ADAG_PROG_NO_CHAN;
    p->nchans = 3;
    p->chans = chans;
    chans[0] = (adag_prog_chan_t){.id = 0, .backend = CHAN_SHM, .nreaders = 2, .reader = 1,
                                  .nslots = fuzz_geoms[1].nslots,
                                  .capacity = fuzz_geoms[1].capacity};
    snprintf(chans[0].name, sizeof(chans[0].name), "input[0]");
    /* declared tensors (adag_node_tensor): per execution, and f32[4,8] */
    chans[1] = (adag_prog_chan_t){.id = 1, .backend = CHAN_SELF, .reader = -1, .nslots = 1,
                                  .capacity = 128, .tensor = {.flags = ADAG_TENSOR_DECLARED}};
    snprintf(chans[1].name, sizeof(chans[1].name), "s1.f[0]");
    chans[2] = (adag_prog_chan_t){
        .id = 2, .backend = CHAN_SHM, .nreaders = 2, .reader = -1,
        .nslots = fuzz_geoms[1].nslots, .capacity = fuzz_geoms[1].capacity,
        .tensor = {.flags = ADAG_TENSOR_DECL_KNOWN, .dtype = ADAG_DTYPE_F32, .ndim = 2,
                   .transport = ADAG_TRANSPORT_HOST, .shape = {4, 8}}};
    snprintf(chans[2].name, sizeof(chans[2].name), "s1.g[0]");
    set_descs(p, which);
    p->nops = 2;
    p->ops = ops;
    ops[0] = (adag_prog_op_t){.kind = ADAG_OP_CALL, .method = 0, .node = 1, .nargs = 1,
                              .nrets = 1};
    ops[0].args[0] = 0;
    ops[0].rets[0] = 1;
    ops[1] = (adag_prog_op_t){.kind = ADAG_OP_CALL, .method = 1, .node = 2, .nargs = 2,
                              .nrets = 1};
    ops[1].args[0] = 1;
    ops[1].args[1] = 0;
    ops[1].rets[0] = 2;
}

static void save_program(const char *name, const char *nmethods, const adag_program_t *p)
{
    adag_wbuf_t b = {0};
    adag__program_encode(p, &b);
    save("program", name, nmethods, 1, b.data, b.len);
    adag__wbuf_free(&b);
}

static void program_seeds(adag_wbuf_t *sample)
{
    adag_program_t p;
    adag_prog_chan_t chans[3];
    adag_prog_op_t ops[2];

    sample_program(&p, chans, ops);
    adag__program_encode(&p, sample);
    save("program", "sample-1-method", "\x01", 1, sample->data, sample->len);

    chain_program(&p, chans, ops);
    save_program("chain-2-methods", "\x02", &p);

    /* a method without arguments, run in turn by the start channel */
    sample_program(&p, chans, ops);
    p.start_chan = 0;
    ops[0].nargs = 0;
    save_program("start-channel", "\x01", &p);

    /* regression seeds: geometries whose channel size used to wrap around
     * and "fit" the segment; the decoder refuses a slot over 2^40 bytes */
    sample_program(&p, chans, ops);
    chans[0].capacity = 0xffffffffffffff00ull; /* slot stride wrapped to 256 */
    save_program("reject-capacity-wraps", "\x01", &p);
    chans[0].nslots = 2;
    chans[0].capacity = 1ull << 63; /* 2 x (2^63 + 512) wrapped to 1024 */
    save_program("reject-slots-wrap", "\x01", &p);

    /* a tensor declared with every dimension (8) and one with a shape only */
    sample_program(&p, chans, ops);
    chans[0].tensor = (adag_tensor_decl_t){.flags = ADAG_TENSOR_DECLARED |
                                                    ADAG_TENSOR_STATIC_SHAPE,
                                           .ndim = 8, .shape = {1, 2, 3, 4, 5, 6, 7, 0}};
    chans[1].tensor = (adag_tensor_decl_t){.flags = ADAG_TENSOR_DECL_KNOWN,
                                           .dtype = ADAG_DTYPE_BOOL, .ndim = 0,
                                           .transport = ADAG_TRANSPORT_IPC};
    save_program("tensor-declarations", "\x01", &p);

    /* a tensor by communicator: the program joins two communicators */
    sample_program(&p, chans, ops);
    adag_comm_spec_t comms[2] = {
        {.key = 3, .kind = ADAG_COMM_KIND_HOST, .nranks = 2, .rank = 1, .id = {{1, 2, 3, 4}, 4}},
        {.key = 8, .kind = ADAG_COMM_KIND_NCCL, .nranks = 4, .rank = 0, .id = {{9}, 128}},
    };
    chans[0].tensor = (adag_tensor_decl_t){.flags = ADAG_TENSOR_DECLARED,
                                           .transport = ADAG_TRANSPORT_COMM};
    chans[0].comm_key = 3;
    p.comms = comms;
    p.ncomms = 2;
    save_program("communicators", "\x01", &p);

    /* member 0 of a 2-member allreduce: its tensor, its result, its status
     * channel and member 1's (read on domain channel 0) */
    {
        static const int which[4] = {-1, -1, -1, 0};
        adag_prog_chan_t cc[4];
        adag_prog_op_t cop[1];
        memset(&p, 0, sizeof(p));
        memset(cc, 0, sizeof(cc));
        memset(cop, 0, sizeof(cop));
        p.dag_id = 9;
        snprintf(p.dag_name, sizeof(p.dag_name), "dag9");
        p.max_inflight = fuzz_geoms[0].nslots;
        p.start_chan = ADAG_PROG_NO_CHAN;
        p.nchans = 4;
        p.chans = cc;
        static const char *names[4] = {"tp0.f[0]", "tp0.allreduce#0[0]", "allreduce#0.tp0",
                                       "allreduce#0.tp1"};
        for (int i = 0; i < 4; i++) {
            snprintf(cc[i].name, sizeof(cc[i].name), "%s", names[i]);
            cc[i].id = (uint32_t)i;
            cc[i].backend = i == 3 ? CHAN_SHM : CHAN_SELF;
            cc[i].reader = i == 3 ? 0 : -1;
            cc[i].nreaders = i == 3 ? fuzz_geoms[0].nreaders : 0;
            /* the member's status channels carry a tensor's description */
            cc[i].nslots = i == 3 ? fuzz_geoms[0].nslots : 1;
            cc[i].capacity = i == 3 ? fuzz_geoms[0].capacity : i == 2 ? 72 : 256;
        }
        cc[0].tensor = (adag_tensor_decl_t){.flags = ADAG_TENSOR_DECLARED};
        cc[1].tensor = (adag_tensor_decl_t){.flags = ADAG_TENSOR_DECLARED};
        set_descs(&p, which);
        adag_comm_spec_t spec = {.key = 2, .kind = ADAG_COMM_KIND_HOST, .nranks = 2, .rank = 0,
                                 .id = {{5, 6, 7}, 3}};
        p.comms = &spec;
        p.ncomms = 1;
        p.nops = 1;
        p.ops = cop;
        cop[0] = (adag_prog_op_t){.kind = ADAG_OP_COLLECTIVE, .node = 3, .nargs = 1, .nrets = 1,
                                  .coll_kind = ADAG_COLL_ALLREDUCE, .reduce_op = ADAG_REDUCE_SUM,
                                  .member = 0, .nmembers = 2, .comm = 0, .status_first = 2};
        cop[0].args[0] = 0;
        cop[0].rets[0] = 1;
        save_program("collective-member", "\x01", &p);
    }

    /* no channels, no ops: the smallest valid program */
    memset(&p, 0, sizeof(p));
    p.max_inflight = 1;
    p.start_chan = ADAG_PROG_NO_CHAN;
    save_program("empty", "\x00", &p);
}

/* ---- fuzz_control: [mode][first write][frames] or [1][payload] ---- */

/* Frames built by adag__ctl_send itself, read back raw from a socketpair. */
typedef struct {
    int sv[2];
} framer_t;

static void framer_open(framer_t *f)
{
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, f->sv) != 0)
        die("socketpair");
}

static void frame(framer_t *f, uint32_t type, const adag_wbuf_t *b)
{
    if (adag__ctl_send(f->sv[0], type, b ? b->data : NULL, b ? b->len : 0, NULL, 0) != ADAG_OK)
        die("adag__ctl_send");
}

/* Closes the framer and returns the bytes sent (malloc'd). */
static char *framer_take(framer_t *f, size_t *len)
{
    static char buf[1 << 16];
    close(f->sv[0]);
    *len = 0;
    ssize_t n;
    while ((n = read(f->sv[1], buf + *len, sizeof(buf) - *len)) > 0)
        *len += (size_t)n;
    close(f->sv[1]);
    char *out = malloc(*len ? *len : 1);
    memcpy(out, buf, *len);
    return out;
}

static void control_seeds(const adag_wbuf_t *program)
{
    adag_wbuf_t hello = {0}, hello_reply = {0}, create = {0}, methods = {0}, reply = {0},
                fail = {0}, prepare = {0}, connect = {0}, start = {0}, abort_dag = {0},
                stop = {0}, domains = {0}, ok = {0}, failed = {0};
    int fds[ADAG_CTL_MAX_FDS];
    fuzz_domain_export(&domain, &domains, fds);

    adag__msg_encode_hello(&hello, &(adag_msg_hello_t){ADAG_PROTOCOL_MAGIC, ADAG_PROTOCOL_VERSION,
                                                      {"token", 5}});
    adag__msg_encode_hello_reply(&hello_reply,
                                &(adag_msg_hello_reply_t){ADAG_PROTOCOL_VERSION, 4242, 2});
    adag_settings_t defaults;
    adag_wbuf_t settings = {0};
    if (adag__settings_defaults(&defaults) != ADAG_OK)
        abort();
    adag__msg_encode_settings(&settings, &defaults);
    adag__settings_free(&defaults);
    adag__msg_encode_create(&create, "/usr/lib/adag/libstages.so", "Stage", "stage1", "cuda:0",
                           (adag_blob_t){"\x01\x02\x03\x04", 4},
                           &(adag_msg_place_t){.flags = ADAG_MSG_PLACE_AUTOMATIC |
                                                        ADAG_MSG_PLACE_CPUS,
                                               .numa = 1, .cpus = "0-3"},
                           (adag_blob_t){settings.data, settings.len});
    adag__wbuf_free(&settings);
    const adag_msg_method_t ms[2] = {{"forward", 1, 1}, {"stats", 0, 2}};
    adag__msg_encode_methods(&methods, ms, 2,
                            &(adag_msg_place_t){.flags = ADAG_MSG_PLACE_BOUND, .numa = 0,
                                                .cpus = "0-3", .nic = "mlx5_0:1",
                                                .gpu = "0000:07:00.0", .nic_dist = 1});
    adag__msg_encode_reply(&reply, ADAG_OK, NULL, (adag_blob_t){methods.data, methods.len});
    adag__msg_encode_reply(&fail, ADAG_ERR_NOT_FOUND, "module x has no class Y",
                          (adag_blob_t){NULL, 0});
    adag__msg_encode_reply(&ok, ADAG_OK, NULL, (adag_blob_t){hello_reply.data, hello_reply.len});
    adag__msg_encode_prepare(&prepare, &(adag_msg_prepare_t){7, {program->data, program->len},
                                                            {domains.data, domains.len}});
    adag__msg_encode_connect(&connect, &(adag_msg_connect_t){7, {"\0\0\0\0", 4}});
    adag__msg_encode_dag(&start, &(adag_msg_dag_t){7, ADAG_OK, 0});
    adag__msg_encode_dag(&abort_dag, &(adag_msg_dag_t){7, ADAG_ERR_ACTOR_DIED, 0});
    adag__msg_encode_dag(&stop, &(adag_msg_dag_t){7, ADAG_OK, 0});
    adag__msg_encode_failed(&failed, &(adag_msg_failed_t){7, ADAG_ERR_TIMEOUT,
                                                        "actor s2: device channel s1.step[0]: "
                                                        "the peer copy from s1 (emu:0) for "
                                                        "execution 3 did not complete within "
                                                        "300 ms"});

    /* payload mode */
    save("control", "payload-hello", "\x01", 1, hello.data, hello.len);
    /* a token of ADAG_TOKEN_MAX bytes and one byte more (refused as a
     * trailing byte; one more in the length and it is a token too long) */
    static char token[ADAG_TOKEN_MAX + 1];
    adag_wbuf_t longtok = {0};
    memset(token, 't', sizeof(token));
    adag__msg_encode_hello(&longtok, &(adag_msg_hello_t){ADAG_PROTOCOL_MAGIC,
                                                        ADAG_PROTOCOL_VERSION,
                                                        {token, ADAG_TOKEN_MAX}});
    adag__wbuf_raw(&longtok, "t", 1);
    save("control", "reject-hello-token-plus-1", "\x01", 1, longtok.data, longtok.len);
    adag__wbuf_free(&longtok);
    save("control", "payload-create-actor", "\x01", 1, create.data, create.len);
    save("control", "payload-prepare-dag", "\x01", 1, prepare.data, prepare.len);
    save("control", "payload-connect-dag", "\x01", 1, connect.data, connect.len);
    save("control", "payload-abort-dag", "\x01", 1, abort_dag.data, abort_dag.len);
    save("control", "payload-stop-dag", "\x01", 1, stop.data, stop.len);
    save("control", "payload-reply-methods", "\x01", 1, reply.data, reply.len);
    save("control", "payload-reply-hello", "\x01", 1, ok.data, ok.len);
    save("control", "payload-reply-error", "\x01", 1, fail.data, fail.len);
    save("control", "payload-dag-failed", "\x01", 1, failed.data, failed.len);
    /* TRACE_DAG and its reply: an op record and a span; STATS_DAG's and
     * CLOCK's replies */
    adag_wbuf_t recs = {0}, recs_reply = {0}, figs = {0}, figs_reply = {0}, clk = {0},
                clk_reply = {0};
    const adag_trace_rec_t two[2] = {
        {.seq = 3, .t = {100, 250, 260, 900, 950},
         .packed = ADAG_SPAN_OP | 7u << 8 | 1ull << 32 | 2ull << 48},
        {.seq = 3, .t = {300, 400}, .packed = ADAG_SPAN_COLLECTIVE | 1u << 16}};
    adag__msg_encode_trace(&recs, 123456789, 0, two, 2);
    adag__msg_encode_reply(&recs_reply, ADAG_OK, NULL, (adag_blob_t){recs.data, recs.len});
    adag_op_figures_t ops[1] = {{10, 1000, 20, 500, 30, 90, 50, 80}};
    adag_chan_figures_t chans[1] = {{.chan = 1, .in_use = 2, .values = 10, .bytes = 80}};
    adag_loop_figures_t fig = {.timed = 1, .elapsed_ns = 5000, .idle_ns = 40,
                               .doing = 1u << 8 | ADAG_DOING_INPUT, .nops = 1, .nchans = 1,
                               .ops = ops, .chans = chans};
    adag__msg_encode_figures(&figs, &fig);
    adag__msg_encode_reply(&figs_reply, ADAG_OK, NULL, (adag_blob_t){figs.data, figs.len});
    adag__msg_encode_clock(&clk, 987654321, "0f1e2d3c-aaaa-bbbb-cccc-0123456789ab");
    adag__msg_encode_reply(&clk_reply, ADAG_OK, NULL, (adag_blob_t){clk.data, clk.len});
    save("control", "payload-trace-dag", "\x01", 1, stop.data, stop.len);
    save("control", "payload-reply-spans", "\x01", 1, recs_reply.data, recs_reply.len);
    save("control", "payload-reply-figures", "\x01", 1, figs_reply.data, figs_reply.len);
    save("control", "payload-reply-clock", "\x01", 1, clk_reply.data, clk_reply.len);
    adag_wbuf_t *tmp[6] = {&recs, &recs_reply, &figs, &figs_reply, &clk, &clk_reply};
    for (int i = 0; i < 6; i++)
        adag__wbuf_free(tmp[i]);

    /* stream mode: a worker's whole session, no fds */
    framer_t f;
    size_t len;
    char *s;
    framer_open(&f);
    frame(&f, ADAG_MSG_HELLO, &hello);
    frame(&f, ADAG_MSG_REPLY, &ok);
    frame(&f, ADAG_MSG_CREATE_ACTOR, &create);
    frame(&f, ADAG_MSG_REPLY, &reply);
    frame(&f, ADAG_MSG_PREPARE_DAG, &prepare);
    frame(&f, ADAG_MSG_CONNECT_DAG, &connect);
    frame(&f, ADAG_MSG_START_DAG, &start);
    frame(&f, ADAG_MSG_ABORT_DAG, &abort_dag);
    frame(&f, ADAG_MSG_STOP_DAG, &stop);
    frame(&f, ADAG_MSG_REPLY, &fail);
    frame(&f, ADAG_MSG_SHUTDOWN, NULL);
    s = framer_take(&f, &len);
    save("control", "stream-conversation", "\x00\x00", 2, s, len);
    free(s);

    /* PREPARE_DAG with its two fds on the first 20 bytes (header + a bit):
     * one chunk (bits 4-7) of 2 fds (bits 1-3), chunk size 0x14 */
    framer_open(&f);
    frame(&f, ADAG_MSG_PREPARE_DAG, &prepare);
    frame(&f, ADAG_MSG_REPLY, &fail);
    s = framer_take(&f, &len);
    save("control", "stream-prepare-2-fds", "\x14\x14", 2, s, len);
    free(s);

    framer_open(&f);
    frame(&f, ADAG_MSG_SHUTDOWN, NULL);
    frame(&f, ADAG_MSG_STOP_DAG, &stop);
    s = framer_take(&f, &len);
    /* six fds in one read (more than SHUTDOWN may carry) with a header-only message */
    save("control", "stream-6-fds", "\x1c\x10", 2, s, len);
    /* three chunks of 5 bytes with 3 fds each: 9 fds gathered by one header */
    save("control", "stream-3x3-fds", "\x36\x05", 2, s, len);

    /* the same frames cut short in the second payload */
    save("control", "stream-truncated", "\x00\x00", 2, s, len - 2);
    free(s);

    /* a type nobody knows (refused), then a good frame */
    framer_open(&f);
    frame(&f, 999, &stop);
    frame(&f, ADAG_MSG_STOP_DAG, &stop);
    s = framer_take(&f, &len);
    save("control", "stream-unknown-type", "\x00\x00", 2, s, len);
    free(s);

    /* an oversized length: {u32 type, u32 reserved, u64 ADAG_CTL_MAX_PAYLOAD + 1} */
    uint32_t hdr[4] = {ADAG_MSG_REPLY, 0, ADAG_CTL_MAX_PAYLOAD + 1, 0}; /* little-endian */
    save("control", "stream-oversized", "\x00\x00", 2, hdr, sizeof(hdr));

    adag_wbuf_t *all[] = {&hello, &hello_reply, &create, &methods, &reply, &fail, &prepare,
                          &connect, &start, &abort_dag, &stop, &domains, &ok, &failed};
    for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        adag__wbuf_free(all[i]);
}

/* ---- fuzz_jpeg: [options][8 rng bytes][JPEG] ---- */

static void jpeg_seed(const char *name, int w, int h, int pf, int samp, int flags, uint8_t opt)
{
    int ch = pf == TJPF_GRAY ? 1 : 3;
    unsigned char *px = malloc((size_t)w * h * ch), *jpeg = NULL;
    unsigned long len = 0;
    tjhandle t = tjInitCompress();
    if (!px || !t)
        die("jpeg seed");
    for (int i = 0; i < w * h * ch; i++)
        px[i] = (unsigned char)(i * 7 + i / (w * ch) * 13);
    if (tjCompress2(t, px, w, 0, h, pf, &jpeg, &len, samp, 90, flags) != 0)
        die(tjGetErrorStr2(t));
    uint8_t prefix[9] = {opt, 1, 2, 3, 4, 5, 6, 7, 8};
    save("jpeg", name, prefix, sizeof(prefix), jpeg, len);
    tjFree(jpeg);
    tjDestroy(t);
    free(px);
}

static void jpeg_seeds(void)
{
    jpeg_seed("rgb-444", 24, 16, TJPF_RGB, TJSAMP_444, 0, 0);
    jpeg_seed("rgb-420-f16", 40, 40, TJPF_RGB, TJSAMP_420, 0, 1 | 4);
    jpeg_seed("rgb-422-bf16-flip", 33, 17, TJPF_RGB, TJSAMP_422, 0, 2 | 8);
    jpeg_seed("gray", 16, 16, TJPF_GRAY, TJSAMP_GRAY, 0, 0);
    jpeg_seed("progressive", 64, 48, TJPF_RGB, TJSAMP_420, TJFLAG_PROGRESSIVE, 4);
    jpeg_seed("large-scaled", 300, 200, TJPF_RGB, TJSAMP_420, 0, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    outdir = argv[1];
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST)
        die(outdir);
    adag_wbuf_t program = {0};
    fuzz_domain_create(&domain, descs);
    wire_seeds();
    program_seeds(&program);
    control_seeds(&program);
    jpeg_seeds();
    adag__wbuf_free(&program);
    for (unsigned i = 0; i < FUZZ_NCHANS; i++)
        adag__wbuf_free(&descs[i]);
    adag__ctx_destroy(&domain);
    return 0;
}

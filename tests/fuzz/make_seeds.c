/*
 * Writes the seed corpora of the fuzz targets with the real encoders:
 *   make_seeds DIR  ->  files in DIR/wire, DIR/program and DIR/control
 * (`make fuzz-seeds` runs it on tests/fuzz/corpus). Each seed is small and
 * valid, so the fuzzers start from inputs that get past the first checks;
 * the layouts are the ones described at the top of each fuzz_*.c.
 */
#include "dag/internal.h"
#include "dag/program.h"
#include "transport/control.h"
#include "transport/wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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
    adag_wbuf_u32(&b, 7);
    adag_wbuf_u64(&b, 1ull << 40);
    adag_wbuf_bytes(&b, "abc", 3);
    adag_wbuf_str(&b, "input[0]");  /* str into 64 bytes */
    adag_wbuf_str(&b, "");          /* str into 1 byte */
    const uint8_t all[] = {5, 0, 1, 2, 3 | (4 << 2), 3 | (0 << 2)};
    save("wire", "u32-u64-bytes-str", all, sizeof(all), b.data, b.len);
    const uint8_t strs[] = {1, 3 | (5 << 2)}; /* str into 96 bytes, repeated */
    adag_wbuf_free(&b);
    adag_wbuf_str(&b, "stage1.forward[0]");
    adag_wbuf_str(&b, "a.m[0]");
    save("wire", "strings", strs, sizeof(strs), b.data, b.len);
    adag_wbuf_free(&b);
}

/* ---- fuzz_program: [nmethods][program] ---- */

/* The program of unit_wire.c: one shm input read, one local return. */
static void sample_program(adag_program_t *p, adag_prog_chan_t *chans, adag_prog_op_t *ops)
{
    memset(p, 0, sizeof(*p));
    memset(chans, 0, 2 * sizeof(*chans));
    memset(ops, 0, sizeof(*ops));
    p->dag_id = 7;
    snprintf(p->dag_name, sizeof(p->dag_name), "dag7");
    p->segment_size = 1 << 20;
    p->nslots = 4;
    p->capacity = 1024;
    p->nchans = 2;
    p->chans = chans;
    snprintf(chans[0].name, sizeof(chans[0].name), "input[0]");
    chans[0].kind = ADAG_CHAN_SHM;
    chans[0].nreaders = 1;
    chans[0].reader = 0;
    chans[0].offset = 256;
    snprintf(chans[1].name, sizeof(chans[1].name), "a.m[0]");
    chans[1].kind = ADAG_CHAN_LOCAL;
    chans[1].reader = -1;
    chans[1].writes = 1;
    p->nops = 1;
    p->ops = ops;
    ops[0].nargs = 1;
    ops[0].nrets = 1;
    ops[0].args[0] = 0;
    ops[0].rets[0] = 1;
}

/* A middle stage: reads a shm channel, writes a shm channel to the driver and
 * a local one it reads back in a second op. */
static void chain_program(adag_program_t *p, adag_prog_chan_t *chans, adag_prog_op_t *ops)
{
    memset(p, 0, sizeof(*p));
    memset(chans, 0, 3 * sizeof(*chans));
    memset(ops, 0, 2 * sizeof(*ops));
    p->dag_id = 3;
    snprintf(p->dag_name, sizeof(p->dag_name), "chain");
    p->segment_size = 64 << 10;
    p->nslots = 2;
    p->capacity = 4096;
    p->spin_ns = 20000;
    p->spin_yield = 1;
    p->nchans = 3;
    p->chans = chans;
    size_t sz = adag_shm_chan_size(p->nslots, 2, p->capacity);
    chans[0] = (adag_prog_chan_t){.id = 0, .kind = ADAG_CHAN_SHM, .nreaders = 2, .reader = 1,
                                  .offset = ADAG_SEGMENT_HDR_SIZE};
    snprintf(chans[0].name, sizeof(chans[0].name), "input[0]");
    chans[1] = (adag_prog_chan_t){.id = 1, .kind = ADAG_CHAN_LOCAL, .reader = -1, .writes = 1};
    snprintf(chans[1].name, sizeof(chans[1].name), "s1.f[0]");
    chans[2] = (adag_prog_chan_t){.id = 2, .kind = ADAG_CHAN_SHM, .nreaders = 2, .reader = -1,
                                  .writes = 1, .to_driver = 1,
                                  .offset = ADAG_SEGMENT_HDR_SIZE + sz};
    snprintf(chans[2].name, sizeof(chans[2].name), "s1.g[0]");
    p->nops = 2;
    p->ops = ops;
    ops[0] = (adag_prog_op_t){.method = 0, .node = 1, .nargs = 1, .nrets = 1};
    ops[0].args[0] = 0;
    ops[0].rets[0] = 1;
    ops[1] = (adag_prog_op_t){.method = 1, .node = 2, .nargs = 2, .nrets = 1};
    ops[1].args[0] = 1;
    ops[1].args[1] = 0;
    ops[1].rets[0] = 2;
}

static void program_seeds(adag_wbuf_t *sample)
{
    adag_program_t p;
    adag_prog_chan_t chans[3];
    adag_prog_op_t ops[2];
    adag_wbuf_t b = {0};

    sample_program(&p, chans, ops);
    adag_program_encode(&p, sample);
    save("program", "sample-1-method", "\x01", 1, sample->data, sample->len);

    chain_program(&p, chans, ops);
    adag_program_encode(&p, &b);
    save("program", "chain-2-methods", "\x02", 1, b.data, b.len);
    adag_wbuf_free(&b);

    /* regression seeds (rejected since shm_ring.c saturates the channel size):
     * geometries whose size used to wrap around and "fit" in 1 MiB */
    sample_program(&p, chans, ops);
    p.capacity = 0xffffffffffffff00ull; /* slot stride wrapped to 256 */
    adag_program_encode(&p, &b);
    save("program", "reject-capacity-wraps", "\x01", 1, b.data, b.len);
    adag_wbuf_free(&b);
    p.nslots = 2;
    p.capacity = 1ull << 63; /* 2 x (2^63 + 512) wrapped to 1024 */
    adag_program_encode(&p, &b);
    save("program", "reject-slots-wrap", "\x01", 1, b.data, b.len);
    adag_wbuf_free(&b);

    /* no channels, no ops: the smallest valid program */
    memset(&p, 0, sizeof(p));
    p.segment_size = ADAG_SEGMENT_HDR_SIZE;
    p.nslots = 1;
    adag_program_encode(&p, &b);
    save("program", "empty", "\x00", 1, b.data, b.len);
    adag_wbuf_free(&b);
}

/* ---- fuzz_control: [mode][first write][frames] or [1][payload] ---- */

/* Frames built by adag_ctl_send itself, read back raw from a socketpair. */
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
    if (adag_ctl_send(f->sv[0], type, b ? b->data : NULL, b ? b->len : 0, NULL, 0) != ADAG_OK)
        die("adag_ctl_send");
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
    adag_wbuf_t create = {0}, reply = {0}, fail = {0}, stop = {0};
    adag_wbuf_str(&create, "/usr/lib/adag/libstages.so");
    adag_wbuf_str(&create, "Stage");
    adag_wbuf_str(&create, "stage1");
    adag_wbuf_bytes(&create, "\x01\x02\x03\x04", 4);
    adag_wbuf_u32(&reply, ADAG_OK);
    adag_wbuf_str(&reply, "");
    adag_wbuf_u32(&reply, 2);
    adag_wbuf_str(&reply, "forward");
    adag_wbuf_u32(&reply, 1);
    adag_wbuf_u32(&reply, 1);
    adag_wbuf_str(&reply, "stats");
    adag_wbuf_u32(&reply, 0);
    adag_wbuf_u32(&reply, 2);
    adag_wbuf_u32(&fail, (uint32_t)ADAG_ERR_NOT_FOUND);
    adag_wbuf_str(&fail, "module x has no class Y");
    adag_wbuf_u32(&stop, 3);

    /* payload mode */
    save("control", "payload-create-actor", "\x01", 1, create.data, create.len);
    save("control", "payload-reply-methods", "\x01", 1, reply.data, reply.len);
    save("control", "payload-reply-error", "\x01", 1, fail.data, fail.len);
    save("control", "payload-stop-dag", "\x01", 1, stop.data, stop.len);

    /* stream mode: a worker's whole conversation, no fds */
    framer_t f;
    size_t len;
    char *s;
    framer_open(&f);
    frame(&f, ADAG_MSG_CREATE_ACTOR, &create);
    frame(&f, ADAG_MSG_REPLY, &reply);
    frame(&f, ADAG_MSG_STOP_DAG, &stop);
    frame(&f, ADAG_MSG_REPLY, &fail);
    frame(&f, ADAG_MSG_SHUTDOWN, NULL);
    s = framer_take(&f, &len);
    save("control", "stream-conversation", "\x00\x00", 2, s, len);
    free(s);

    /* INSTALL_DAG with its two fds on the first 20 bytes (header + a bit):
     * one chunk (bits 4-7) of 2 fds (bits 1-3), chunk size 0x14 */
    framer_open(&f);
    frame(&f, ADAG_MSG_INSTALL_DAG, program);
    frame(&f, ADAG_MSG_REPLY, &fail);
    s = framer_take(&f, &len);
    save("control", "stream-install-2-fds", "\x14\x14", 2, s, len);
    free(s);

    framer_open(&f);
    frame(&f, ADAG_MSG_SHUTDOWN, NULL);
    frame(&f, ADAG_MSG_STOP_DAG, &stop);
    s = framer_take(&f, &len);
    /* six fds in one read (more than ADAG_CTL_MAX_FDS) with a header-only message */
    save("control", "stream-6-fds", "\x1c\x10", 2, s, len);
    /* three chunks of 5 bytes with 3 fds each: 9 fds gathered by one header */
    save("control", "stream-3x3-fds", "\x36\x05", 2, s, len);

    /* the same frames cut short in the second payload */
    save("control", "stream-truncated", "\x00\x00", 2, s, len - 2);
    free(s);

    /* an oversized length: {u32 type, u32 reserved, u64 ADAG_CTL_MAX_PAYLOAD + 1} */
    uint32_t hdr[4] = {ADAG_MSG_REPLY, 0, ADAG_CTL_MAX_PAYLOAD + 1, 0}; /* little-endian */
    save("control", "stream-oversized", "\x00\x00", 2, hdr, sizeof(hdr));

    adag_wbuf_free(&create);
    adag_wbuf_free(&reply);
    adag_wbuf_free(&fail);
    adag_wbuf_free(&stop);
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
    wire_seeds();
    program_seeds(&program);
    control_seeds(&program);
    adag_wbuf_free(&program);
    return 0;
}

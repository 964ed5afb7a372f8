/*
 * libFuzzer target: the control plane's receiving side, through the real
 * decoders of transport/protocol.c (no parser is duplicated here).
 *
 * Byte 0 selects the mode:
 *
 * bit 0 = 0, stream mode: the rest of the input, from byte 2 on (at most
 *   MAX_STREAM bytes), is written into one end of a socketpair, which is then
 *   closed, and adag__msg_recv reads messages from the other end until it
 *   fails at the end of the stream. The stream goes in up to 15 writes of
 *   byte 1 bytes (bits 4-7 of byte 0), each carrying 0..7 fds (bits 1-3)
 *   with SCM_RIGHTS, then the rest in one write: so fds land at chosen
 *   points, a message can collect fds from several reads, and more than
 *   ADAG_CTL_MAX_FDS can arrive (the extras must be closed). Every frame is
 *   checked against a reference parse of the same bytes: a whole frame is
 *   received as it was sent (type, len <= ADAG_CTL_MAX_PAYLOAD, payload), or
 *   refused with ADAG_ERR_PROTOCOL if its type is unknown or it carries more
 *   fds than its type may (then the next frame is read); received fds are
 *   open, close-on-exec and the pipe that was sent; the failure at the end is
 *   CLOSED at a frame boundary, PROTOCOL for an oversized length, CLOSED or
 *   PROTOCOL for a truncated frame, never a timeout. Each message received
 *   goes to its decoder as the worker and the driver dispatch it (a
 *   PREPARE_DAG's program is decoded and its domain list imported with the
 *   message's fds, as dag/proc/worker.c does). No fd may leak: /proc/self/fd is
 *   counted before and after.
 *
 * bit 0 = 1, payload mode: the rest of the input is one payload, given to
 *   every decoder (with each decoder's message type) and to both reply-body
 *   decoders; a PREPARE_DAG that decodes has its domain list imported with
 *   copies of a real shm domain's fds (tests/fuzz/fuzz_domain.h), so a list
 *   that names that segment's true size attaches it for real.
 *
 * What a decoder accepts must be well-formed (NUL-terminated names in their
 * arrays, counts and sizes within their limits, views inside the payload,
 * ABORT_DAG with an error status) and canonical: encoding the decoded
 * message gives back the same bytes.
 */
#include "tests/chan_index.h"
#include "common/clock.h"
#include "common/error.h"
#include "dag/exec/context.h"
#include "dag/exec/program.h"
#include "fuzz_domain.h"
#include "transport/control.h"
#include "transport/protocol.h"
#include "transport/wire.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz_control: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                              \
            abort();                                                                     \
        }                                                                                \
    } while (0)

/* Well below the socket buffer, so both writes complete without a reader. */
#define MAX_STREAM (64u << 10)

static int terminated(const char *s, size_t max)
{
    return memchr(s, '\0', max) != NULL;
}

static int inside(adag_blob_t b, const adag_ctl_msg_t *msg)
{
    const char *p = msg->payload;
    return b.len <= msg->len &&
           (b.len == 0 || ((const char *)b.data >= p && (const char *)b.data + b.len <= p + msg->len));
}

/* The payload equals what enc wrote (then frees enc). */
static void check_canonical(const adag_ctl_msg_t *msg, adag_wbuf_t *enc)
{
    CHECK(!enc->failed && enc->len == msg->len);
    CHECK(msg->len == 0 || memcmp(enc->data, msg->payload, msg->len) == 0);
    adag__wbuf_free(enc);
}

/* ---- the decoders ---- */

static void reply_bodies(adag_blob_t body)
{
    adag_msg_hello_reply_t hr;
    if (adag__msg_decode_hello_reply(body, &hr) == ADAG_OK) {
        adag_wbuf_t b = {0};
        CHECK(hr.ncpus > 0);
        adag__msg_encode_hello_reply(&b, &hr);
        CHECK(b.len == body.len && memcmp(b.data, body.data, b.len) == 0);
        adag__wbuf_free(&b);
    }
    adag_trace_rec_t *recs;
    uint64_t now, lost, nrecs;
    if (adag__msg_decode_trace(body, &now, &lost, &recs, &nrecs) == ADAG_OK) {
        adag_wbuf_t b = {0};
        CHECK(nrecs <= ADAG_TRACE_MAX_SPANS && (nrecs == 0) == (recs == NULL));
        adag__msg_encode_trace(&b, now, lost, recs, nrecs);
        CHECK(b.len == body.len && memcmp(b.data, body.data, b.len) == 0);
        adag__wbuf_free(&b);
        /* whatever the records say, expanding them stays in bounds */
        adag_span_t *spans = malloc((nrecs * ADAG_TRACE_SPANS_PER_REC + 1) * sizeof(*spans));
        CHECK(spans && adag__trace_expand(recs, nrecs, spans) <= nrecs * ADAG_TRACE_SPANS_PER_REC);
        free(spans);
        free(recs);
    }
    adag_loop_figures_t fig;
    if (adag__msg_decode_figures(body, &fig) == ADAG_OK) {
        adag_wbuf_t b = {0};
        CHECK(fig.nops <= ADAG_MSG_FIGURES_MAX && fig.nchans <= ADAG_MSG_FIGURES_MAX);
        adag__msg_encode_figures(&b, &fig);
        CHECK(b.len == body.len && memcmp(b.data, body.data, b.len) == 0);
        adag__wbuf_free(&b);
        adag__loop_figures_free(&fig);
    }
    char boot[ADAG_BOOT_ID_MAX];
    if (adag__msg_decode_clock(body, &now, boot) == ADAG_OK) {
        adag_wbuf_t b = {0};
        CHECK(terminated(boot, sizeof(boot)));
        adag__msg_encode_clock(&b, now, boot);
        CHECK(b.len == body.len && memcmp(b.data, body.data, b.len) == 0);
        adag__wbuf_free(&b);
    }
    adag_msg_method_t *m;
    adag_msg_place_t place;
    unsigned n;
    if (adag__msg_decode_methods(body, &m, &n, &place) == ADAG_OK) {
        adag_wbuf_t b = {0};
        CHECK(n >= 1 && n <= 4096);
        for (unsigned i = 0; i < n; i++) {
            CHECK(terminated(m[i].name, sizeof(m[i].name)) && m[i].name[0]);
            CHECK(m[i].nargs <= ADAG_MAX_ARGS);
            CHECK(m[i].nreturns >= 1 && m[i].nreturns <= ADAG_MAX_RETURNS);
        }
        CHECK(terminated(place.cpus, sizeof(place.cpus)) && terminated(place.nic, sizeof(place.nic)));
        CHECK(place.numa >= -1 && !(place.flags & ~(uint32_t)ADAG_MSG_PLACE_ALL));
        adag__msg_encode_methods(&b, m, n, &place);
        CHECK(b.len == body.len && memcmp(b.data, body.data, b.len) == 0);
        adag__wbuf_free(&b);
        free(m);
    }
}

/* Imports a PREPARE_DAG's domain list as the worker does; takes fds. */
static void import_domains(adag_blob_t domains, int *fds, unsigned nfds)
{
    adag_dag_ctx_t ctx;
    adag__ctx_init(&ctx);
    adag_status_t st = adag__ctx_import_domains(&ctx, domains, fds, nfds);
    CHECK(st == ADAG_OK || st == ADAG_ERR_PROTOCOL || st == ADAG_ERR_IO ||
          st == ADAG_ERR_NO_MEMORY);
    if (st != ADAG_OK)
        for (unsigned k = 0; k < adag__chan_nbackends(); k++)
            CHECK(ctx.domains[k] == NULL);
    adag__ctx_destroy(&ctx);
}

/* Decodes msg as a message of its type, as the worker / driver would.
 * fds: the message's (taken by a PREPARE_DAG's import), or NULL. */
static void dispatch(adag_ctl_msg_t *msg, int *fds, unsigned *nfds)
{
    adag_wbuf_t b = {0};
    switch (msg->type) {
    case ADAG_MSG_HELLO: {
        adag_msg_hello_t m;
        if (adag__msg_decode_hello(msg, &m) != ADAG_OK)
            return;
        CHECK(m.token.len <= ADAG_TOKEN_MAX && inside(m.token, msg));
        adag__msg_encode_hello(&b, &m);
        check_canonical(msg, &b);
        return;
    }
    case ADAG_MSG_CREATE_ACTOR: {
        adag_msg_create_t m;
        if (adag__msg_decode_create(msg, &m) != ADAG_OK)
            return;
        CHECK(terminated(m.module, sizeof(m.module)));
        CHECK(terminated(m.class_name, sizeof(m.class_name)));
        CHECK(terminated(m.actor, sizeof(m.actor)) && inside(m.init, msg));
        CHECK(terminated(m.device, sizeof(m.device)));
        CHECK(terminated(m.place.cpus, sizeof(m.place.cpus)));
        CHECK(inside(m.settings, msg) && m.settings.len >= 4);
        /* the worker takes them over the table's defaults (dag/proc/worker.c) */
        adag_settings_t s;
        if (adag__settings_defaults(&s) == ADAG_OK) {
            (void)adag__msg_apply_settings(m.settings, &s);
            adag__settings_free(&s);
        }
        adag__msg_encode_create(&b, m.module, m.class_name, m.actor, m.device, m.init, &m.place,
                               m.settings);
        check_canonical(msg, &b);
        return;
    }
    case ADAG_MSG_PREPARE_DAG: {
        adag_msg_prepare_t m;
        if (adag__msg_decode_prepare(msg, &m) != ADAG_OK)
            return;
        CHECK(inside(m.program, msg) && inside(m.domains, msg));
        adag__msg_encode_prepare(&b, &m);
        check_canonical(msg, &b);
        adag_rbuf_t rb = {m.program.data, m.program.len, 0, 0};
        adag_program_t prog;
        if (adag__program_decode(&rb, 4, &prog) == ADAG_OK)
            adag__program_free(&prog);
        import_domains(m.domains, fds, *nfds);
        *nfds = 0; /* taken, even on failure */
        return;
    }
    case ADAG_MSG_CONNECT_DAG: {
        adag_msg_connect_t m;
        if (adag__msg_decode_connect(msg, &m) != ADAG_OK)
            return;
        CHECK(inside(m.peers, msg));
        adag__msg_encode_connect(&b, &m);
        check_canonical(msg, &b);
        return;
    }
    case ADAG_MSG_START_DAG:
    case ADAG_MSG_ABORT_DAG:
    case ADAG_MSG_STOP_DAG:
    case ADAG_MSG_TRACE_DAG:
    case ADAG_MSG_STATS_DAG: {
        adag_msg_dag_t m;
        if (adag__msg_decode_dag(msg, &m) != ADAG_OK)
            return;
        if (msg->type == ADAG_MSG_ABORT_DAG)
            CHECK(m.status < 0 && m.status >= ADAG_ERR_INTERNAL);
        adag__msg_encode_dag(&b, &m);
        check_canonical(msg, &b);
        return;
    }
    case ADAG_MSG_REPLY: {
        adag_msg_reply_t m;
        if (adag__msg_decode_reply(msg, &m) != ADAG_OK)
            return;
        CHECK(terminated(m.msg, sizeof(m.msg)) && inside(m.body, msg));
        adag__msg_encode_reply(&b, m.status, m.msg, m.body);
        if (m.status != ADAG_OK || !m.msg[0]) /* an OK reply's text is not sent */
            check_canonical(msg, &b);
        adag__wbuf_free(&b);
        reply_bodies(m.body);
        return;
    }
    case ADAG_MSG_DAG_FAILED: {
        adag_msg_failed_t m;
        if (adag__msg_decode_failed(msg, &m) != ADAG_OK)
            return;
        CHECK(terminated(m.msg, sizeof(m.msg)) && m.status < 0 && m.status >= ADAG_ERR_INTERNAL);
        adag__msg_encode_failed(&b, &m);
        check_canonical(msg, &b);
        return;
    }
    default:
        return;
    }
}

/* ---- payload mode ---- */

/* The real domain whose fds payload mode imports (created once, before
 * fds are counted). */
static adag_dag_ctx_t domain;
static int domain_fds[ADAG_CTL_MAX_FDS];
static unsigned domain_nfds;

static void setup_domain(void)
{
    static int ready;
    if (ready)
        return;
    adag_wbuf_t descs[FUZZ_NCHANS], blob = {0};
    fuzz_domain_create(&domain, descs);
    domain_nfds = fuzz_domain_export(&domain, &blob, domain_fds);
    for (unsigned i = 0; i < FUZZ_NCHANS; i++)
        adag__wbuf_free(&descs[i]);
    adag__wbuf_free(&blob);
    ready = 1;
}

static void run_payload(const uint8_t *data, size_t len)
{
    static const uint32_t types[] = {ADAG_MSG_HELLO,     ADAG_MSG_CREATE_ACTOR,
                                     ADAG_MSG_PREPARE_DAG, ADAG_MSG_CONNECT_DAG,
                                     ADAG_MSG_START_DAG, ADAG_MSG_ABORT_DAG,
                                     ADAG_MSG_STOP_DAG,  ADAG_MSG_REPLY,
                                     ADAG_MSG_DAG_FAILED, ADAG_MSG_TRACE_DAG,
                                     ADAG_MSG_STATS_DAG, ADAG_MSG_CLOCK};
    for (unsigned t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        adag_ctl_msg_t msg;
        int fds[ADAG_CTL_MAX_FDS];
        unsigned nfds = domain_nfds;
        memset(&msg, 0, sizeof(msg));
        msg.type = types[t];
        msg.payload = (void *)data;
        msg.len = len;
        for (unsigned i = 0; i < nfds; i++)
            CHECK((fds[i] = fcntl(domain_fds[i], F_DUPFD_CLOEXEC, 3)) >= 0);
        dispatch(&msg, fds, &nfds);
        for (unsigned i = 0; i < nfds; i++)
            close(fds[i]);
    }
    reply_bodies((adag_blob_t){data, len});
}

/* ---- stream mode ---- */

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* The pipe whose read end is passed as SCM_RIGHTS; made once, kept open. */
static int pass_fd = -1;
static struct stat pass_st;

static void setup_pass_fd(void)
{
    int p[2];
    if (pass_fd >= 0)
        return;
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    close(p[1]);
    pass_fd = p[0];
    CHECK(fstat(pass_fd, &pass_st) == 0);
}

/* Writes up to len bytes without blocking (plus nfds copies of pass_fd with
 * the first byte); returns how many went in. */
static size_t send_some(int sock, const uint8_t *buf, size_t len, unsigned nfds)
{
    char cbuf[CMSG_SPACE(sizeof(int) * 8)];
    struct iovec iov = {(void *)buf, len};
    struct msghdr mh = {0};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (nfds) {
        memset(cbuf, 0, sizeof(cbuf));
        mh.msg_control = cbuf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        for (unsigned i = 0; i < nfds; i++)
            memcpy(CMSG_DATA(cm) + i * sizeof(int), &pass_fd, sizeof(int));
    }
    ssize_t n;
    do
        n = sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    CHECK(n >= 0 || errno == EAGAIN);
    return n > 0 ? (size_t)n : 0;
}

typedef struct {
    uint32_t type, reserved;
    uint64_t len;
} frame_hdr_t; /* as in transport/control.c */

static void run_stream(const uint8_t *data, size_t size)
{
    unsigned nfds = (data[0] >> 1) & 7, nchunks = data[0] >> 4;
    size_t chunk = data[1];
    const uint8_t *stream = data + 2;
    size_t len = size - 2 < MAX_STREAM ? size - 2 : MAX_STREAM;

    setup_pass_fd();
    int fds_before = count_fds();
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    int sndbuf = 1 << 20; /* the kernel caps it at wmem_max; the default already fits */
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));

    /* the chunks with fds (a zero-byte stream write carries none), then the
     * rest; a short write (full buffer) ends the stream there */
    size_t written = 0, n = 1;
    for (unsigned c = 0; c < nchunks && nfds && chunk && n && written < len; c++) {
        size_t want = len - written < chunk ? len - written : chunk;
        n = send_some(sv[0], stream + written, want, nfds);
        written += n;
        if (n < want)
            n = 0;
    }
    if (n && written < len)
        written += send_some(sv[0], stream + written, len - written, 0);
    close(sv[0]);

    size_t off = 0;
    unsigned fds_got = 0;
    for (;;) {
        adag_ctl_msg_t msg;
        adag_status_t st = adag__msg_recv(sv[1], adag__deadline_ms(0), &msg);
        size_t left = written - off;
        frame_hdr_t hdr = {0, 0, 0};
        if (left >= sizeof(hdr))
            memcpy(&hdr, stream + off, sizeof(hdr));
        int whole = left >= sizeof(hdr) && hdr.len <= ADAG_CTL_MAX_PAYLOAD &&
                    hdr.len <= left - sizeof(hdr);
        if (st != ADAG_OK) {
            CHECK(msg.payload == NULL && msg.nfds == 0); /* freed on failure */
            if (whole) {
                /* refused by the table: an unknown type, or fds it may not carry */
                const adag_msg_info_t *info = adag__msg_info(hdr.type);
                CHECK(st == ADAG_ERR_PROTOCOL);
                CHECK(!info || nfds * nchunks > info->max_fds);
                off += sizeof(hdr) + hdr.len;
                continue;
            }
            if (left == 0)
                CHECK(st == ADAG_ERR_CLOSED);
            else if (left >= sizeof(hdr) && hdr.len > ADAG_CTL_MAX_PAYLOAD)
                CHECK(st == ADAG_ERR_PROTOCOL);
            else
                CHECK(st == ADAG_ERR_CLOSED || st == ADAG_ERR_PROTOCOL);
            break;
        }
        /* a whole frame was there, and it is what was received */
        CHECK(whole);
        CHECK(msg.type == hdr.type && msg.len == hdr.len);
        CHECK(adag__msg_info(msg.type) && msg.nfds <= adag__msg_info(msg.type)->max_fds);
        CHECK((msg.len == 0) == (msg.payload == NULL));
        if (msg.len)
            CHECK(memcmp(msg.payload, stream + off + sizeof(hdr), msg.len) == 0);
        CHECK(msg.nfds <= ADAG_CTL_MAX_FDS);
        for (unsigned i = 0; i < msg.nfds; i++) {
            struct stat st_fd;
            CHECK(fcntl(msg.fds[i], F_GETFD) == FD_CLOEXEC);
            CHECK(fstat(msg.fds[i], &st_fd) == 0);
            CHECK(st_fd.st_dev == pass_st.st_dev && st_fd.st_ino == pass_st.st_ino);
        }
        fds_got += msg.nfds;
        CHECK(fds_got <= nfds * nchunks);
        dispatch(&msg, msg.fds, &msg.nfds);
        off += sizeof(hdr) + msg.len;
        adag__ctl_msg_free(&msg);
        CHECK(msg.payload == NULL && msg.nfds == 0);
    }
    close(sv[1]);
    CHECK(count_fds() == fds_before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    setup_domain();
    if (data[0] & 1) {
        int before = count_fds();
        run_payload(data + 1, size - 1);
        CHECK(count_fds() == before);
    } else if (size >= 2)
        run_stream(data, size);
    return 0;
}

/*
 * libFuzzer target: the control plane's receiving side.
 *
 * Byte 0 selects the mode:
 *
 * bit 0 = 0, stream mode: the rest of the input, from byte 2 on (at most
 *   MAX_STREAM bytes), is written into one end of a socketpair, which is then
 *   closed, and adag_ctl_recv reads messages from the other end until it
 *   fails. The stream goes in up to 15 writes of byte 1 bytes (bits 4-7 of
 *   byte 0), each carrying 0..7 fds (bits 1-3) with SCM_RIGHTS, then the rest
 *   in one write: so fds land at chosen points, a message can collect fds
 *   from several reads, and more than ADAG_CTL_MAX_FDS can arrive (the
 *   extras must be closed). Every message received must match the frame a reference
 *   parse of the same bytes finds (type, len <= ADAG_CTL_MAX_PAYLOAD,
 *   payload); its fds must be open, close-on-exec and the pipe that was sent;
 *   the failure at the end must be CLOSED at a frame boundary, PROTOCOL for an
 *   oversized length, CLOSED or PROTOCOL for a truncated frame, never a
 *   timeout. No fd may leak: /proc/self/fd is counted before and after.
 *   Each received payload also goes through the payload parsers below.
 *
 * bit 0 = 1, payload mode: the rest of the input is one message payload,
 *   given to the payload parsers directly.
 *
 * The payload parsers mirror, bound for bound, how the real code reads a peer:
 *   parse_reply:        the driver reading a REPLY (dag/actor.c parse_reply
 *                       and the method table in create_process_actor);
 *   parse_create_actor: the worker reading CREATE_ACTOR (dag/worker.c);
 *   parse_stop_dag:     the worker reading STOP_DAG.
 * What they accept must be well-formed (NUL-terminated names in their
 * arrays, counts within their limits, views inside the payload).
 */
#include "common/clock.h"
#include "common/error.h"
#include "dag/internal.h"
#include "transport/control.h"
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

/* The same sizes as the real readers' destination arrays. */
#define WORKER_MODULE_MAX 4096 /* worker.c create_actor: char module[4096] */
#define DRIVER_MAX_METHODS 4096 /* actor.c create_process_actor */

static int terminated(const char *s, size_t max)
{
    return memchr(s, '\0', max) != NULL;
}

/* ---- payload parsers ---- */

static void parse_reply(const void *payload, size_t len)
{
    adag_rbuf_t rb = {payload, len, 0, 0};
    char text[ADAG_ERROR_MAX];
    (void)adag_rbuf_u32(&rb); /* status */
    adag_rbuf_str(&rb, text, sizeof(text));
    if (rb.failed)
        return;
    CHECK(terminated(text, sizeof(text)));

    /* the method table, as create_process_actor reads it */
    unsigned nmethods = adag_rbuf_u32(&rb);
    if (rb.failed || nmethods == 0 || nmethods > DRIVER_MAX_METHODS)
        return;
    adag_method_info_t *m = calloc(nmethods, sizeof(*m));
    CHECK(m);
    for (unsigned i = 0; i < nmethods; i++) {
        adag_rbuf_str(&rb, m[i].name, sizeof(m[i].name));
        m[i].nargs = adag_rbuf_u32(&rb);
        m[i].nreturns = adag_rbuf_u32(&rb);
        if (m[i].nargs > ADAG_MAX_ARGS || m[i].nreturns == 0 ||
            m[i].nreturns > ADAG_MAX_RETURNS)
            rb.failed = 1;
    }
    if (!rb.failed) {
        CHECK(rb.pos <= rb.len);
        for (unsigned i = 0; i < nmethods; i++) {
            CHECK(terminated(m[i].name, sizeof(m[i].name)));
            CHECK(m[i].nargs <= ADAG_MAX_ARGS);
            CHECK(m[i].nreturns >= 1 && m[i].nreturns <= ADAG_MAX_RETURNS);
        }
    }
    free(m);
}

static void parse_create_actor(const void *payload, size_t len)
{
    adag_rbuf_t rb = {payload, len, 0, 0};
    char module[WORKER_MODULE_MAX], class_name[ADAG_MAX_NAME], name[ADAG_MAX_NAME];
    size_t init_size;
    adag_rbuf_str(&rb, module, sizeof(module));
    adag_rbuf_str(&rb, class_name, sizeof(class_name));
    adag_rbuf_str(&rb, name, sizeof(name));
    const char *init = adag_rbuf_bytes(&rb, &init_size);
    if (rb.failed || rb.pos != rb.len)
        return;
    CHECK(terminated(module, sizeof(module)));
    CHECK(terminated(class_name, sizeof(class_name)));
    CHECK(terminated(name, sizeof(name)));
    CHECK(init && init >= (const char *)payload &&
          init + init_size == (const char *)payload + len);
}

static void parse_stop_dag(const void *payload, size_t len)
{
    adag_rbuf_t rb = {payload, len, 0, 0};
    (void)adag_rbuf_u32(&rb);
    CHECK(rb.failed == (len < 4));
}

static void parse_payload(const void *payload, size_t len)
{
    parse_reply(payload, len);
    parse_create_actor(payload, len);
    parse_stop_dag(payload, len);
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
        adag_status_t st = adag_ctl_recv(sv[1], adag_deadline_ms(0), &msg);
        size_t left = written - off;
        frame_hdr_t hdr = {0, 0, 0};
        if (left >= sizeof(hdr))
            memcpy(&hdr, stream + off, sizeof(hdr));
        if (st != ADAG_OK) {
            CHECK(msg.payload == NULL && msg.nfds == 0); /* freed on failure */
            if (left == 0)
                CHECK(st == ADAG_ERR_CLOSED);
            else if (left >= sizeof(hdr) && hdr.len > ADAG_CTL_MAX_PAYLOAD)
                CHECK(st == ADAG_ERR_PROTOCOL);
            else
                CHECK(st == ADAG_ERR_CLOSED || st == ADAG_ERR_PROTOCOL);
            break;
        }
        /* a whole frame was there, and it is what was received */
        CHECK(left >= sizeof(hdr) && hdr.len <= ADAG_CTL_MAX_PAYLOAD);
        CHECK(hdr.len <= left - sizeof(hdr));
        CHECK(msg.type == hdr.type && msg.len == hdr.len);
        CHECK(msg.len <= ADAG_CTL_MAX_PAYLOAD);
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
        parse_payload(msg.payload, msg.len);
        off += sizeof(hdr) + msg.len;
        adag_ctl_msg_free(&msg);
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
    if (data[0] & 1)
        parse_payload(data + 1, size - 1);
    else if (size >= 2)
        run_stream(data, size);
    return 0;
}

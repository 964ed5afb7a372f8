#include "transport/control.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/fd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

typedef struct {
    uint32_t type;
    uint32_t reserved;
    uint64_t len;
} frame_hdr_t;

adag_status_t adag__ctl_send(int sock, uint32_t type, const void *payload, size_t len,
                            const int *fds, unsigned nfds)
{
    frame_hdr_t hdr = {type, 0, len};
    char cbuf[CMSG_SPACE(sizeof(int) * ADAG_CTL_MAX_FDS)];
    struct iovec iov[2] = {{&hdr, sizeof(hdr)}, {(void *)payload, len}};
    struct msghdr mh = {0};
    size_t total = sizeof(hdr) + len, sent = 0;

    if (nfds > ADAG_CTL_MAX_FDS || len > ADAG_CTL_MAX_PAYLOAD)
        return adag__error(ADAG_ERR_INVALID, "control message of %zu bytes, %u fds is too large",
                          len, nfds);
    mh.msg_iov = iov;
    mh.msg_iovlen = len ? 2 : 1;
    if (nfds) {
        memset(cbuf, 0, sizeof(cbuf));
        mh.msg_control = cbuf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
    }
    while (sent < total) {
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EPIPE || errno == ECONNRESET)
                return adag__error(ADAG_ERR_CLOSED, "peer closed the control socket");
            return adag__error_errno(errno, "sendmsg on control socket");
        }
        sent += (size_t)n;
        /* fds went with the first byte; advance the iovecs past what was sent */
        mh.msg_control = NULL;
        mh.msg_controllen = 0;
        size_t skip = (size_t)n;
        while (skip && mh.msg_iovlen) {
            if (skip >= mh.msg_iov[0].iov_len) {
                skip -= mh.msg_iov[0].iov_len;
                mh.msg_iov++;
                mh.msg_iovlen--;
            } else {
                mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + skip;
                mh.msg_iov[0].iov_len -= skip;
                skip = 0;
            }
        }
    }
    return ADAG_OK;
}

adag_status_t adag__ctl_send_nowait(int sock, uint32_t type, const void *payload, size_t len)
{
    struct pollfd pfd = {sock, POLLOUT, 0};
    int r;
    while ((r = poll(&pfd, 1, 0)) < 0 && errno == EINTR) {
    }
    if (r <= 0 || !(pfd.revents & POLLOUT))
        return adag__error(ADAG_ERR_AGAIN, "control socket has no room");
    return adag__ctl_send(sock, type, payload, len, NULL, 0);
}

/* Reads exactly len bytes, collecting any passed fds into msg. */
static adag_status_t recv_exact(int sock, void *buf, size_t len, int64_t deadline,
                                adag_ctl_msg_t *msg)
{
    size_t got = 0;
    while (got < len) {
        struct pollfd pfd = {sock, POLLIN, 0};
        int pr = poll(&pfd, 1, adag__ms_left(deadline));
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            return adag__error_errno(errno, "poll on control socket");
        }
        if (pr == 0)
            return adag__error(ADAG_ERR_TIMEOUT, "no control reply by the deadline");
        char cbuf[CMSG_SPACE(sizeof(int) * ADAG_CTL_MAX_FDS)];
        struct iovec iov = {(char *)buf + got, len - got};
        struct msghdr mh = {0};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof(cbuf);
        ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            if (errno == ECONNRESET)
                return adag__error(ADAG_ERR_CLOSED, "peer closed the control socket");
            return adag__error_errno(errno, "recvmsg on control socket");
        }
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                continue;
            unsigned k = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int *fds = (int *)CMSG_DATA(cm);
            for (unsigned i = 0; i < k; i++) {
                int fd = fds[i];
                if (msg->nfds < ADAG_CTL_MAX_FDS && (fd = adag__fd_above_stdio(fd)) >= 0)
                    msg->fds[msg->nfds++] = fd;
                else if (fd >= 0)
                    close(fd);
            }
        }
        if (n == 0)
            return adag__error(ADAG_ERR_CLOSED, "peer closed the control socket");
        got += (size_t)n;
    }
    return ADAG_OK;
}

adag_status_t adag__ctl_recv(int sock, int64_t deadline, adag_ctl_msg_t *msg)
{
    frame_hdr_t hdr;
    adag_status_t st;
    memset(msg, 0, sizeof(*msg));
    st = recv_exact(sock, &hdr, sizeof(hdr), deadline, msg);
    if (st != ADAG_OK)
        goto fail;
    if (hdr.len > ADAG_CTL_MAX_PAYLOAD) {
        st = adag__error(ADAG_ERR_PROTOCOL, "control frame of %llu bytes exceeds %u",
                        (unsigned long long)hdr.len, ADAG_CTL_MAX_PAYLOAD);
        goto fail;
    }
    msg->type = hdr.type;
    msg->len = hdr.len;
    if (hdr.len) {
        msg->payload = malloc(hdr.len);
        if (!msg->payload) {
            st = adag__error(ADAG_ERR_NO_MEMORY, "control frame of %llu bytes",
                            (unsigned long long)hdr.len);
            goto fail;
        }
        st = recv_exact(sock, msg->payload, hdr.len, deadline, msg);
        if (st != ADAG_OK)
            goto fail;
    }
    return ADAG_OK;
fail:
    adag__ctl_msg_free(msg);
    return st;
}

void adag__ctl_msg_free(adag_ctl_msg_t *msg)
{
    free(msg->payload);
    for (unsigned i = 0; i < msg->nfds; i++)
        close(msg->fds[i]);
    memset(msg, 0, sizeof(*msg));
}

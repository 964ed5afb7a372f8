/* The live view's client side: adag__live_connect and adag__live_request
 * (protocol: common/live.h; the server is common/live.c). */
#include "common/live.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/fd.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>


adag_status_t adag__live_connect(const char *path, int *fd)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(sa.sun_path))
        return adag__error(ADAG_ERR_INVALID,
                          "live view socket path \"%s\" is %zu bytes (1 to %zu fit)", path, n,
                          sizeof(sa.sun_path) - 1);
    memcpy(sa.sun_path, path, n + 1);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0 || (s = adag__fd_above_stdio(s)) < 0)
        return adag__error_errno(errno, "live view %s: socket", path);
    if (connect(s, (const struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int err = errno;
        close(s);
        if (err == EAGAIN)
            return adag__error(ADAG_ERR_IO, "live view %s: the driver accepts no more connections "
                              "(its backlog is full)", path);
        if (err == ECONNREFUSED)
            return adag__error(ADAG_ERR_IO,
                              "live view %s: nobody listens on it (the driver is gone)", path);
        return adag__error_errno(err, "live view %s: connect", path);
    }
    *fd = s;
    return ADAG_OK;
}

/* Sends or receives exactly n bytes before deadline. 0, or an errno value:
 * EPIPE for EOF (*done says how many bytes came), ETIMEDOUT. */
static int xfer(int fd, char *p, size_t n, int64_t deadline, int sending, size_t *done)
{
    size_t off = 0;
    int err = 0;
    while (off < n) {
        ssize_t k = sending ? send(fd, p + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : recv(fd, p + off, n - off, MSG_DONTWAIT);
        if (k > 0) {
            off += (size_t)k;
            continue;
        }
        if (k == 0) {
            err = EPIPE;
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            err = errno == ECONNRESET ? EPIPE : errno;
            break;
        }
        struct pollfd pf = {.fd = fd, .events = sending ? POLLOUT : POLLIN};
        int r = poll(&pf, 1, adag__ms_left(deadline));
        if (r < 0 && errno != EINTR) {
            err = errno;
            break;
        }
        if (r == 0) {
            err = ETIMEDOUT;
            break;
        }
    }
    if (done)
        *done = off;
    return err;
}

/* s with every byte outside printable ASCII as '?', at most cap - 1 bytes */
static void printable(char *dst, size_t cap, const char *s, size_t n)
{
    size_t i;
    for (i = 0; i < n && i + 1 < cap; i++)
        dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    dst[i] = '\0';
}

/* "ADAG-LIVE 1 OK <len>" / "ADAG-LIVE 1 ERR <len>" (h without its '\n'):
 * 0 with *ok and *len, -1 if malformed or len is above the cap. */
static int parse_head(const char *h, size_t n, int *ok, size_t *len)
{
    static const char prefix[] = "ADAG-LIVE 1 ";
    size_t i = sizeof(prefix) - 1;
    if (n < i || memcmp(h, prefix, i) != 0)
        return -1;
    if (n - i >= 3 && memcmp(h + i, "OK ", 3) == 0) {
        *ok = 1;
        i += 3;
    } else if (n - i >= 4 && memcmp(h + i, "ERR ", 4) == 0) {
        *ok = 0;
        i += 4;
    } else {
        return -1;
    }
    if (i == n || n - i > 7) /* 4194304: 7 digits */
        return -1;
    size_t v = 0;
    for (; i < n; i++) {
        if (h[i] < '0' || h[i] > '9')
            return -1;
        v = v * 10 + (size_t)(h[i] - '0');
    }
    if (v > ADAG_LIVE_REPLY_MAX)
        return -1;
    *len = v;
    return 0;
}

adag_status_t adag__live_request(int fd, FILE *out, int timeout_ms)
{
    /* the driver's path, for messages: a client socket's peer name is the
     * path the server bound */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
    struct sockaddr_un sa;
    socklen_t sl = sizeof(sa);
    memset(&sa, 0, sizeof(sa));
    if (getpeername(fd, (struct sockaddr *)&sa, &sl) == 0 && sa.sun_family == AF_UNIX &&
        sa.sun_path[0])
        printable(path, sizeof(path), sa.sun_path, strnlen(sa.sun_path, sizeof(sa.sun_path)));
    else
        snprintf(path, sizeof(path), "on fd %d", fd);
    int64_t deadline = adag__deadline_ms(timeout_ms);
    char req[] = "stats\n";
    /* on EPIPE the reply is read all the same: a driver that refuses a
     * client answers before it reads anything, then closes */
    int err = xfer(fd, req, sizeof(req) - 1, deadline, 1, NULL);
    if (err == ETIMEDOUT)
        return adag__error(ADAG_ERR_TIMEOUT, "live view %s: the request was not taken within %d ms",
                          path, timeout_ms);
    if (err && err != EPIPE)
        return adag__error_errno(err, "live view %s: sending the request", path);

    /* the header, a byte at a time: nothing past it is read */
    char head[ADAG_LIVE_HEAD_MAX];
    size_t n = 0;
    for (;;) {
        if (n == sizeof(head)) {
            char shown[ADAG_LIVE_HEAD_MAX + 1];
            printable(shown, sizeof(shown), head, n);
            return adag__error(ADAG_ERR_PROTOCOL, "live view %s: no reply header in the first %zu "
                              "bytes (\"%s\")", path, n, shown);
        }
        err = xfer(fd, head + n, 1, deadline, 0, NULL);
        if (err == EPIPE && n == 0)
            return adag__error(ADAG_ERR_CLOSED, "live view %s: the driver closed the connection",
                              path);
        if (err == EPIPE)
            return adag__error(ADAG_ERR_PROTOCOL, "live view %s: the reply header ends after %zu "
                              "bytes", path, n);
        if (err == ETIMEDOUT)
            return adag__error(ADAG_ERR_TIMEOUT, "live view %s: no reply within %d ms", path,
                              timeout_ms);
        if (err)
            return adag__error_errno(err, "live view %s: reading the reply", path);
        if (head[n++] == '\n')
            break;
    }
    int ok = 0;
    size_t len = 0;
    if (parse_head(head, n - 1, &ok, &len) != 0) {
        char shown[ADAG_LIVE_HEAD_MAX + 1];
        printable(shown, sizeof(shown), head, n - 1);
        return adag__error(ADAG_ERR_PROTOCOL, "live view %s: malformed reply header \"%s\" "
                          "(expected \"ADAG-LIVE 1 OK|ERR <len>\", len at most %u)", path, shown,
                          ADAG_LIVE_REPLY_MAX);
    }
    adag_status_t st = ADAG_OK;
    char *body = malloc(len + 1);
    if (!body)
        return adag__error(ADAG_ERR_NO_MEMORY, "live view %s: no memory for a %zu-byte reply", path,
                          len);
    size_t got = 0;
    err = xfer(fd, body, len, deadline, 0, &got);
    if (err == EPIPE)
        st = adag__error(ADAG_ERR_PROTOCOL,
                        "live view %s: the reply ends after %zu of its %zu bytes", path, got, len);
    else if (err == ETIMEDOUT)
        st = adag__error(ADAG_ERR_TIMEOUT, "live view %s: %zu of the reply's %zu bytes came within "
                        "%d ms", path, got, len, timeout_ms);
    else if (err)
        st = adag__error_errno(err, "live view %s: reading the reply", path);
    else if (!ok) {
        char shown[400];
        printable(shown, sizeof(shown), body, len);
        st = adag__error(ADAG_ERR_PROTOCOL, "live view %s: the driver answered: %s", path, shown);
    } else if (len && (fwrite(body, 1, len, out) != len || fflush(out) != 0))
        st = adag__error_errno(errno, "live view %s: writing the view", path);
    free(body);
    return st;
}

/* TCP sockets and the shared token of the control plane between hosts. */
#include "transport/tcp.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/fd.h"
#include "common/settings.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Splits "host:port" (the last colon) and resolves it (IPv4). */
static adag_status_t resolve(const char *addr, int passive, struct sockaddr_in *out)
{
    char host[ADAG_HOSTPORT_MAX];
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof(host) || !colon[1])
        return adag__error(ADAG_ERR_INVALID, "address \"%s\" is not host:port", addr ? addr : "");
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535 || (!passive && port == 0))
        return adag__error(ADAG_ERR_INVALID, "address \"%s\": bad port", addr);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res)
        return adag__error(ADAG_ERR_NOT_FOUND, "address \"%s\": cannot resolve %s: %s", addr, host,
                          gai_strerror(rc));
    *out = *(struct sockaddr_in *)res->ai_addr;
    out->sin_port = htons((uint16_t)port);
    freeaddrinfo(res);
    return ADAG_OK;
}

static void name_of(const struct sockaddr_in *sa, char *out, size_t len)
{
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip));
    snprintf(out, len, "%s:%u", ip, (unsigned)ntohs(sa->sin_port));
}

adag_status_t adag__tcp_listen(const char *addr, int *fd, char *bound, size_t bound_len)
{
    struct sockaddr_in sa;
    adag_status_t st = resolve(addr, 1, &sa);
    if (st != ADAG_OK)
        return st;
    int s = adag__fd_above_stdio(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s < 0)
        return adag__error_errno(errno, "socket for %s", addr);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    socklen_t sl = sizeof(sa);
    if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 64) != 0 ||
        getsockname(s, (struct sockaddr *)&sa, &sl) != 0) {
        st = adag__error_errno(errno, "listening on %s", addr);
        close(s);
        return st;
    }
    name_of(&sa, bound, bound_len);
    *fd = s;
    return ADAG_OK;
}

adag_status_t adag__tcp_connect(const char *addr, int64_t deadline, int *fd)
{
    struct sockaddr_in sa;
    adag_status_t st = resolve(addr, 0, &sa);
    if (st != ADAG_OK)
        return st;
    int s = adag__fd_above_stdio(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (s < 0)
        return adag__error_errno(errno, "socket for %s", addr);
    if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
        st = adag__error_errno(errno, "connecting to %s", addr);
        goto fail;
    }
    for (;;) {
        struct pollfd p = {.fd = s, .events = POLLOUT};
        int64_t left = deadline == ADAG_FOREVER ? -1 : (deadline - adag__now_ns()) / 1000000;
        if (deadline != ADAG_FOREVER && left <= 0) {
            st = adag__error(ADAG_ERR_TIMEOUT, "connecting to %s: timed out", addr);
            goto fail;
        }
        int n = poll(&p, 1, left > 1000 ? 1000 : (int)left);
        if (n < 0 && errno != EINTR) {
            st = adag__error_errno(errno, "connecting to %s", addr);
            goto fail;
        }
        if (n > 0)
            break;
    }
    int err = 0;
    socklen_t el = sizeof(err);
    getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
        st = adag__error_errno(err, "connecting to %s", addr);
        goto fail;
    }
    if (fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK) != 0) {
        st = adag__error_errno(errno, "connecting to %s", addr);
        goto fail;
    }
    *fd = s;
    return ADAG_OK;
fail:
    close(s);
    return st;
}

adag_status_t adag__tcp_tune(int fd, int64_t timeout_ms)
{
    int one = 1, idle = 1, intvl = 1;
    int cnt = (int)(timeout_ms / 1000) - 1;
    unsigned user_timeout = (unsigned)timeout_ms;
    if (cnt < 1)
        cnt = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout)) != 0)
        return adag__error_errno(errno, "setting keepalive on a control connection");
    return ADAG_OK;
}

void adag__tcp_peer_name(int fd, char *out, size_t len)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    if (getpeername(fd, (struct sockaddr *)&sa, &sl) != 0 || sa.sin_family != AF_INET)
        snprintf(out, len, "?");
    else
        name_of(&sa, out, len);
}

/* ---- the token ---- */

static adag_status_t token_from_file(const char *path, char *out, size_t *len)
{
    adag_status_t st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return adag__error_errno(errno, "ADAG_TOKEN_FILE %s", path);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = adag__error_errno(errno, "ADAG_TOKEN_FILE %s", path);
        goto out;
    }
    if (!S_ISREG(sb.st_mode) || (sb.st_mode & 077) || sb.st_uid != geteuid()) {
        st = adag__error(ADAG_ERR_INVALID,
                        "ADAG_TOKEN_FILE %s: must be a regular file of this user that nobody "
                        "else can read (chmod 600); it is mode %03o, owner %u",
                        path, (unsigned)(sb.st_mode & 0777), (unsigned)sb.st_uid);
        goto out;
    }
    char buf[ADAG_TOKEN_MAX + 2];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
        st = adag__error_errno(errno, "ADAG_TOKEN_FILE %s", path);
        goto out;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (n == 0 || n > ADAG_TOKEN_MAX) {
        st = adag__error(ADAG_ERR_INVALID, "ADAG_TOKEN_FILE %s: the token must be 1 to %d bytes",
                        path, ADAG_TOKEN_MAX);
        goto out;
    }
    memcpy(out, buf, (size_t)n);
    *len = (size_t)n;
    st = ADAG_OK;
out:
    close(fd);
    return st;
}

adag_status_t adag__token_load(const adag_settings_t *s, char *out, size_t *len)
{
    if (s->token_file)
        return token_from_file(s->token_file, out, len);
    if (!s->token)
        return adag__error(ADAG_ERR_NOT_FOUND,
                          "no token: set ADAG_TOKEN_FILE to a file only you can read (chmod "
                          "600), or ADAG_TOKEN");
    size_t n = strlen(s->token);
    if (n > ADAG_TOKEN_MAX)
        return adag__error(ADAG_ERR_INVALID, "ADAG_TOKEN: longer than %d bytes", ADAG_TOKEN_MAX);
    memcpy(out, s->token, n);
    *len = n;
    return ADAG_OK;
}

int adag__token_equal(const void *a, size_t alen, const void *b, size_t blen)
{
    const unsigned char *x = a, *y = b;
    unsigned diff = alen != blen;
    for (size_t i = 0; i < ADAG_TOKEN_MAX; i++) {
        unsigned char cx = i < alen ? x[i] : 0, cy = i < blen ? y[i] : 0;
        diff |= (unsigned)(cx ^ cy);
    }
    return diff == 0 && alen <= ADAG_TOKEN_MAX && blen <= ADAG_TOKEN_MAX;
}

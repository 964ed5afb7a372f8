/*
 * adag-worker --agent HOST:PORT: how a driver gets process actors on a host
 * that has no launcher of its own (a container, a machine reached by ssh).
 *
 * The agent listens on TCP and hands each connection to a child of its own
 * (at most 64 authenticating at once: a silent client holds up nobody). A
 * driver sends HELLO {magic, version, token}; the child reads it within
 * AUTH_TIMEOUT_MS with the
 * protocol's bounded decoder, checks the version and compares the token
 * with its own (ADAG_TOKEN_FILE or ADAG_TOKEN; constant time). A driver
 * that fails any check gets a REPLY with the reason and the connection is
 * closed; the agent logs it on stderr with the peer's address. One that
 * passes gets a worker: the child execs `adag-worker --remote-fd 3` with
 * the connection as its control socket, and that worker answers the HELLO
 * and serves one actor (dag/worker.c), with its events on the same socket.
 * The agent keeps nothing of it but the child to reap: a driver that dies
 * or whose host becomes unreachable makes the worker's control socket fail
 * (EOF, or the keepalive of ADAG_REMOTE_TIMEOUT_MS), and the worker exits.
 */
#include "dag/worker.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/fd.h"
#include "common/settings.h"
#include "transport/control.h"
#include "transport/protocol.h"
#include "transport/tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define AUTH_TIMEOUT_MS 5000

static void refuse(int c, const char *peer, const char *bound, const char *why)
{
    adag_wbuf_t wb = {0};
    char msg[256];
    snprintf(msg, sizeof(msg), "the agent at %s refused this driver: %s", bound, why);
    adag_msg_encode_reply(&wb, ADAG_ERR_INVALID, msg, (adag_blob_t){NULL, 0});
    if (!wb.failed)
        (void)adag_ctl_send(c, ADAG_MSG_REPLY, wb.data, wb.len, NULL, 0);
    adag_wbuf_free(&wb);
    fprintf(stderr, "adag-worker agent %s: refused %s: %s\n", bound, peer, why);
}

/* Checks one connection's HELLO: NULL if it may have a worker, else why not. */
static const char *authenticate(int c, const char *token, size_t token_len, char *why,
                                size_t why_len)
{
    adag_ctl_msg_t msg;
    adag_msg_hello_t h;
    adag_status_t st = adag_ctl_recv(c, adag_deadline_ms(AUTH_TIMEOUT_MS), &msg);
    if (st != ADAG_OK) {
        snprintf(why, why_len, "no HELLO: %s", adag_last_error());
        return why;
    }
    if (msg.type != ADAG_MSG_HELLO || msg.nfds || adag_msg_decode_hello(&msg, &h) != ADAG_OK) {
        snprintf(why, why_len, "the first message is not a well-formed HELLO");
    } else if (h.magic != ADAG_PROTOCOL_MAGIC || h.version != ADAG_PROTOCOL_VERSION) {
        snprintf(why, why_len, "it speaks control protocol %u (magic 0x%x), this agent %u",
                 h.version, h.magic, ADAG_PROTOCOL_VERSION);
    } else if (h.token.len == 0) {
        snprintf(why, why_len, "no token (set ADAG_TOKEN_FILE or ADAG_TOKEN for the driver)");
    } else if (!adag_token_equal(h.token.data, h.token.len, token, token_len)) {
        snprintf(why, why_len, "wrong token");
    } else {
        why = NULL;
    }
    adag_ctl_msg_free(&msg);
    return why;
}

/* A worker for an authenticated connection: this executable again, with
 * the connection at fd 3 (in the child that authenticated it). */
static void exec_worker(int c, const char *self)
{
    if (dup2(c, 3) < 0)
        _exit(127);
    fcntl(3, F_SETFD, 0);
    signal(SIGPIPE, SIG_DFL);
    char *argv[] = {(char *)self, "--remote-fd", "3", NULL};
    execv(self, argv);
    _exit(127);
}

/* Connections being authenticated (each in a child of its own, which
 * execs a worker or exits within AUTH_TIMEOUT_MS): a slow or silent client
 * holds up no other, and at most MAX_AUTHENTICATING wait at once. */
#define MAX_AUTHENTICATING 64
static int64_t auth_started[MAX_AUTHENTICATING];

static int auth_slot(void)
{
    int64_t now = adag_now_ns();
    for (int i = 0; i < MAX_AUTHENTICATING; i++)
        if (now - auth_started[i] > (int64_t)AUTH_TIMEOUT_MS * 1000000) {
            auth_started[i] = now;
            return i;
        }
    return -1;
}

/* One accepted connection: authenticated and served in a child. */
static void serve(int c, const char *peer, const char *bound, const char *self,
                  const char *token, size_t token_len)
{
    if (auth_slot() < 0) {
        refuse(c, peer, bound, "too many connections are authenticating; try again");
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        refuse(c, peer, bound, "fork failed");
        return;
    }
    if (pid > 0)
        return;
    char why[256];
    const char *refused = adag_tcp_tune(c, adag_settings()->remote_timeout_ms) != ADAG_OK
                              ? adag_last_error()
                              : authenticate(c, token, token_len, why, sizeof(why));
    if (refused) {
        refuse(c, peer, bound, refused);
        _exit(0);
    }
    fprintf(stderr, "adag-worker agent %s: worker pid %d serves %s\n", bound, (int)getpid(),
            peer);
    exec_worker(c, self);
}

static int write_port_file(const char *path, const char *bound)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    size_t len = strlen(bound);
    int ok = write(fd, bound, len) == (ssize_t)len && write(fd, "\n", 1) == 1;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int adag_agent_serve(int lfd, const char *bound, const char *token, size_t token_len,
                     int stop_fd)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "adag-worker agent %s: cannot find its own executable: %s\n", bound,
                strerror(errno));
        return 2;
    }
    self[n] = '\0';
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "adag-worker agent: listening on %s (pid %d)\n", bound, (int)getpid());
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
        if (poll(p, stop_fd >= 0 ? 2 : 1, 1000) <= 0)
            continue;
        if (stop_fd >= 0 && p[1].revents)
            return 0;
        int c = adag_fd_above_stdio(accept4(lfd, NULL, NULL, SOCK_CLOEXEC));
        if (c < 0)
            continue;
        char peer[ADAG_HOSTPORT_MAX];
        adag_tcp_peer_name(c, peer, sizeof(peer));
        serve(c, peer, bound, self, token, token_len);
        close(c);
    }
}

int adag_agent_main(const char *addr, const char *port_file)
{
    char token[ADAG_TOKEN_MAX], bound[ADAG_HOSTPORT_MAX];
    size_t token_len;
    int lfd;
    if (adag_token_load(token, &token_len) != ADAG_OK ||
        adag_tcp_listen(addr, &lfd, bound, sizeof(bound)) != ADAG_OK) {
        fprintf(stderr, "adag-worker --agent %s: %s\n", addr, adag_last_error());
        return 2;
    }
    if (port_file && write_port_file(port_file, bound) != 0) {
        fprintf(stderr, "adag-worker --agent: cannot write %s: %s\n", port_file, strerror(errno));
        return 2;
    }
    return adag_agent_serve(lfd, bound, token, token_len, -1);
}

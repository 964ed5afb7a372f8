/*
 * adag-worker --agent HOST:PORT: how a driver gets process actors on a host
 * that has no launcher of its own (a container, a machine reached by ssh).
 *
 * The agent listens on TCP and hands each connection to a child of its own
 * that authenticates it. A driver sends HELLO {magic, version, token}; the
 * child reads it within ADAG_AGENT_AUTH_TIMEOUT_MS with the protocol's
 * bounded decoder, checks the version and compares the token with its own
 * (ADAG_TOKEN_FILE or ADAG_TOKEN; constant time). One that passes gets a
 * worker: the child execs `adag-worker --remote-fd 3` with the connection
 * as its control socket, and that worker answers the HELLO and serves one
 * actor (dag/proc/worker.c), with its events on the same socket. The agent
 * keeps nothing of it but the child to reap: a driver that dies or whose
 * host becomes unreachable makes the worker's control socket fail (EOF, or
 * the keepalive of ADAG_REMOTE_TIMEOUT_MS: the agent's own until the
 * worker receives the driver's runtime's in CREATE_ACTOR), and the worker
 * exits.
 *
 * Settings: the agent has no runtime. It reads ADAG_AGENT_AUTH_TIMEOUT_MS
 * (process-wide), ADAG_REMOTE_TIMEOUT_MS and its token from its own
 * environment; the workers it starts use the settings of the runtime that
 * created their actor, which CREATE_ACTOR carries.
 *
 * Slots: at most MAX_AUTHENTICATING children authenticate at once, so a
 * silent client holds up nobody and a flood forks no more than that. A
 * slot is freed the moment its child execs the worker or exits (its gate
 * pipe hangs up), not by time; a child still there LINGER_MS +
 * KILL_SLACK_MS past its deadline is killed. A connection that finds no
 * slot free is refused by the agent itself.
 *
 * Refusals: a REPLY with ADAG_ERR_INVALID and the reason ("the agent at H
 * refused this driver: why"), logged on stderr with the peer's address.
 * Then the connection's sending side is shut (the peer reads the refusal,
 * then EOF) and what the peer still sends is read and dropped until it
 * closes, for at most LINGER_MS: closing with its HELLO unread would reset
 * the connection, and a reset can destroy the refusal on its way.
 */
#include "dag/proc/worker.h"

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

/* Connections authenticated at once, each in a child of its own. */
#define MAX_AUTHENTICATING 64
/* Connections the agent refuses itself (no slot free, no fork) and lingers
 * over at once; the oldest is closed to make room. */
#define MAX_LINGERING 64
/* How long a refused connection is kept, its sending side shut, for the
 * peer to read the refusal and close: closing it while the peer's bytes
 * are unread (a HELLO sent before the refusal arrived) resets it, and a
 * reset destroys a refusal still in flight. */
#define LINGER_MS 1000
/* An authenticating child still there this long after its HELLO deadline
 * and LINGER_MS (stopped, starved) is killed. */
#define KILL_SLACK_MS 1000

typedef struct {
    pid_t pid; /* 0: free */
    /* the read end of a pipe whose write end only the child holds,
     * close-on-exec: it polls POLLHUP once the child execs a worker or
     * exits, which frees the slot */
    int gate;
    int64_t since;
    char peer[ADAG_HOSTPORT_MAX];
} auth_slot_t;

typedef struct {
    int fd; /* -1: free */
    int64_t until;
} lingering_t;

typedef struct {
    int lfd, stop_fd;
    const char *bound, *token;
    size_t token_len;
    int64_t auth_ms;   /* ADAG_AGENT_AUTH_TIMEOUT_MS */
    int64_t remote_ms; /* its ADAG_REMOTE_TIMEOUT_MS (the environment's) */
    char self[PATH_MAX];
    auth_slot_t auth[MAX_AUTHENTICATING];
    lingering_t linger[MAX_LINGERING];
} agent_t;

/* Sends the refusal (a REPLY with the reason) and logs it. */
static void send_refusal(int c, const char *peer, const char *bound, const char *why)
{
    adag_wbuf_t wb = {0};
    char msg[256];
    snprintf(msg, sizeof(msg), "the agent at %s refused this driver: %s", bound, why);
    adag__msg_encode_reply(&wb, ADAG_ERR_INVALID, msg, (adag_blob_t){NULL, 0});
    if (!wb.failed)
        (void)adag__ctl_send(c, ADAG_MSG_REPLY, wb.data, wb.len, NULL, 0);
    adag__wbuf_free(&wb);
    fprintf(stderr, "adag-worker agent %s: refused %s: %s\n", bound, peer, why);
}

/* Reads and drops what the peer of c sends, c non-blocking: 1 once it
 * closed (EOF or an error), 0 when nothing more is there now. At most
 * 64 KiB a call, so a peer that streams bytes cannot hold the agent. */
static int drop_input(int c)
{
    char buf[4096];
    for (int i = 0; i < 16; i++) {
        ssize_t n = recv(c, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return 1;
        if (n < 0 && errno != EINTR)
            return 0;
    }
    return 0;
}

/* Checks one connection's HELLO: NULL if it may have a worker, else why not. */
static const char *authenticate(const agent_t *ag, int c, char *why, size_t why_len)
{
    adag_ctl_msg_t msg;
    adag_msg_hello_t h;
    adag_status_t st = adag__ctl_recv(c, adag__deadline_ms(ag->auth_ms), &msg);
    if (st == ADAG_ERR_TIMEOUT) {
        snprintf(why, why_len, "no HELLO within ADAG_AGENT_AUTH_TIMEOUT_MS=%lld ms",
                 (long long)ag->auth_ms);
        return why;
    }
    if (st != ADAG_OK) {
        snprintf(why, why_len, "no HELLO: %s", adag_last_error());
        return why;
    }
    if (msg.type != ADAG_MSG_HELLO || msg.nfds || adag__msg_decode_hello(&msg, &h) != ADAG_OK) {
        snprintf(why, why_len, "the first message is not a well-formed HELLO");
    } else if (h.magic != ADAG_PROTOCOL_MAGIC || h.version != ADAG_PROTOCOL_VERSION) {
        snprintf(why, why_len, "it speaks control protocol %u (magic 0x%x), this agent %u",
                 h.version, h.magic, ADAG_PROTOCOL_VERSION);
    } else if (h.token.len == 0) {
        snprintf(why, why_len, "no token (set ADAG_TOKEN_FILE or ADAG_TOKEN for the driver)");
    } else if (!adag__token_equal(h.token.data, h.token.len, ag->token, ag->token_len)) {
        snprintf(why, why_len, "wrong token");
    } else {
        why = NULL;
    }
    adag__ctl_msg_free(&msg);
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

/* The child of one connection: refuses it, or becomes its worker. It holds
 * only the connection and its gate's write end; a refusal is followed by
 * EOF (the sending side shut) and what the peer still sends is read until
 * it closes or LINGER_MS pass, so the peer reads the refusal. */
static void child_serve(const agent_t *ag, int c, const char *peer)
{
    close(ag->lfd);
    if (ag->stop_fd >= 0)
        close(ag->stop_fd);
    for (int i = 0; i < MAX_AUTHENTICATING; i++)
        if (ag->auth[i].gate >= 0)
            close(ag->auth[i].gate);
    for (int i = 0; i < MAX_LINGERING; i++)
        if (ag->linger[i].fd >= 0)
            close(ag->linger[i].fd);
    char why[256];
    const char *refused = adag__tcp_tune(c, ag->remote_ms) != ADAG_OK
                              ? adag_last_error()
                              : authenticate(ag, c, why, sizeof(why));
    if (!refused) {
        fprintf(stderr, "adag-worker agent %s: worker pid %d serves %s\n", ag->bound,
                (int)getpid(), peer);
        exec_worker(c, ag->self);
    }
    send_refusal(c, peer, ag->bound, refused);
    shutdown(c, SHUT_WR);
    int64_t until = adag__deadline_ms(LINGER_MS);
    for (;;) {
        struct pollfd p = {.fd = c, .events = POLLIN};
        if (adag__now_ns() >= until)
            break;
        int n = poll(&p, 1, adag__ms_left(until));
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0 && drop_input(c))
            break;
    }
    _exit(0);
}

/* Refuses c in the agent itself: the refusal now, then c lingers (its
 * sending side shut, non-blocking, its input dropped) until the peer
 * closes or LINGER_MS pass. Takes c. */
static void refuse_here(agent_t *ag, int c, const char *peer, const char *why)
{
    send_refusal(c, peer, ag->bound, why);
    shutdown(c, SHUT_WR);
    int flags = fcntl(c, F_GETFL);
    if (flags < 0 || fcntl(c, F_SETFL, flags | O_NONBLOCK) != 0) {
        close(c);
        return;
    }
    lingering_t *l = &ag->linger[0];
    for (int i = 0; i < MAX_LINGERING && l->fd >= 0; i++)
        if (ag->linger[i].fd < 0 || ag->linger[i].until < l->until)
            l = &ag->linger[i];
    if (l->fd >= 0)
        close(l->fd); /* the oldest: its refusal has had the longest */
    l->fd = c;
    l->until = adag__deadline_ms(LINGER_MS);
}

static void slot_free(auth_slot_t *s)
{
    close(s->gate);
    s->gate = -1;
    s->pid = 0;
}

/* One accepted connection: authenticated in a child holding a slot, or
 * refused at once when no slot is free. Takes c. */
static void serve(agent_t *ag, int c, const char *peer)
{
    auth_slot_t *s = NULL;
    for (int i = 0; i < MAX_AUTHENTICATING && !s; i++)
        if (!ag->auth[i].pid)
            s = &ag->auth[i];
    if (!s) {
        refuse_here(ag, c, peer, "too many connections are authenticating; try again");
        return;
    }
    int gate[2];
    if (pipe2(gate, O_CLOEXEC) != 0) {
        char why[128];
        snprintf(why, sizeof(why), "no pipe for its child: %s", strerror(errno));
        refuse_here(ag, c, peer, why);
        return;
    }
    gate[0] = adag__fd_above_stdio(gate[0]);
    gate[1] = adag__fd_above_stdio(gate[1]);
    pid_t pid = gate[0] >= 0 && gate[1] >= 0 ? fork() : -1;
    if (pid == 0) {
        close(gate[0]);
        child_serve(ag, c, peer);
    }
    int err = errno;
    if (gate[1] >= 0)
        close(gate[1]);
    if (pid < 0) {
        char why[128];
        snprintf(why, sizeof(why), "no child to authenticate it: %s", strerror(err));
        if (gate[0] >= 0)
            close(gate[0]);
        refuse_here(ag, c, peer, why);
        return;
    }
    close(c);
    s->pid = pid;
    s->gate = gate[0];
    s->since = adag__now_ns();
    snprintf(s->peer, sizeof(s->peer), "%s", peer);
}

/* Closes lingering connections past their time and kills children past
 * theirs; returns the ms until the next such deadline, at most 1000 (the
 * agent reaps its workers at least that often). */
static int expire(agent_t *ag)
{
    int64_t now = adag__now_ns(), next = now + 1000000000;
    int64_t life = (ag->auth_ms + LINGER_MS + KILL_SLACK_MS) * 1000000;
    for (int i = 0; i < MAX_LINGERING; i++) {
        lingering_t *l = &ag->linger[i];
        if (l->fd >= 0 && l->until <= now) {
            close(l->fd);
            l->fd = -1;
        } else if (l->fd >= 0 && l->until < next) {
            next = l->until;
        }
    }
    for (int i = 0; i < MAX_AUTHENTICATING; i++) {
        auth_slot_t *s = &ag->auth[i];
        if (!s->pid)
            continue;
        if (s->since + life > now) {
            next = s->since + life < next ? s->since + life : next;
            continue;
        }
        struct pollfd p = {.fd = s->gate};
        if (poll(&p, 1, 0) == 0) { /* neither exec'd nor exited: unreaped, still ours */
            kill(s->pid, SIGKILL);
            fprintf(stderr,
                    "adag-worker agent %s: killed pid %d authenticating %s: still there %lld "
                    "ms past its deadline (ADAG_AGENT_AUTH_TIMEOUT_MS=%lld)\n",
                    ag->bound, (int)s->pid, s->peer, (long long)(LINGER_MS + KILL_SLACK_MS),
                    (long long)ag->auth_ms);
        }
        slot_free(s);
    }
    return (int)((next - now + 999999) / 1000000);
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

int adag__agent_serve(int lfd, const char *bound, const char *token, size_t token_len,
                     int stop_fd)
{
    agent_t *ag = calloc(1, sizeof(*ag));
    if (!ag) {
        fprintf(stderr, "adag-worker agent %s: out of memory\n", bound);
        return 2;
    }
    ssize_t n = readlink("/proc/self/exe", ag->self, sizeof(ag->self) - 1);
    if (n <= 0) {
        fprintf(stderr, "adag-worker agent %s: cannot find its own executable: %s\n", bound,
                strerror(errno));
        free(ag);
        return 2;
    }
    ag->self[n] = '\0';
    ag->lfd = lfd;
    ag->stop_fd = stop_fd;
    ag->bound = bound;
    ag->token = token;
    ag->token_len = token_len;
    ag->auth_ms = adag__process_settings()->agent_auth_timeout_ms;
    ag->remote_ms = adag__settings_env_int("ADAG_REMOTE_TIMEOUT_MS");
    for (int i = 0; i < MAX_AUTHENTICATING; i++)
        ag->auth[i].gate = -1;
    for (int i = 0; i < MAX_LINGERING; i++)
        ag->linger[i].fd = -1;
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "adag-worker agent: listening on %s (pid %d)\n", bound, (int)getpid());
    /* p[0] the listener, p[1] stop_fd, then each slot's gate and each
     * lingering connection (-1 where unused: poll skips it) */
    enum { GATES = 2, LINGERS = GATES + MAX_AUTHENTICATING, NP = LINGERS + MAX_LINGERING };
    struct pollfd p[NP];
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        int timeout = expire(ag);
        p[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = stop_fd, .events = POLLIN};
        for (int i = 0; i < MAX_AUTHENTICATING; i++)
            p[GATES + i] = (struct pollfd){.fd = ag->auth[i].gate, .events = POLLIN};
        for (int i = 0; i < MAX_LINGERING; i++)
            p[LINGERS + i] = (struct pollfd){.fd = ag->linger[i].fd, .events = POLLIN};
        if (poll(p, NP, timeout) <= 0)
            continue;
        if (p[1].revents)
            break;
        for (int i = 0; i < MAX_AUTHENTICATING; i++)
            if (p[GATES + i].revents) /* the child exec'd its worker or exited */
                slot_free(&ag->auth[i]);
        for (int i = 0; i < MAX_LINGERING; i++)
            if (p[LINGERS + i].revents && drop_input(ag->linger[i].fd)) {
                close(ag->linger[i].fd);
                ag->linger[i].fd = -1;
            }
        if (!p[0].revents)
            continue;
        int c = adag__fd_above_stdio(accept4(lfd, NULL, NULL, SOCK_CLOEXEC));
        if (c < 0)
            continue;
        char peer[ADAG_HOSTPORT_MAX];
        adag__tcp_peer_name(c, peer, sizeof(peer));
        serve(ag, c, peer);
    }
    for (int i = 0; i < MAX_AUTHENTICATING; i++)
        if (ag->auth[i].gate >= 0)
            close(ag->auth[i].gate); /* its child ends by its own deadline */
    for (int i = 0; i < MAX_LINGERING; i++)
        if (ag->linger[i].fd >= 0)
            close(ag->linger[i].fd);
    free(ag);
    return 0;
}

int adag__agent_main(const char *addr, const char *port_file)
{
    char token[ADAG_TOKEN_MAX], bound[ADAG_HOSTPORT_MAX];
    size_t token_len;
    int lfd;
    adag_settings_t env;
    if (adag__settings_from_env(&env) != ADAG_OK) {
        fprintf(stderr, "adag-worker --agent %s: %s\n", addr, adag_last_error());
        return 2;
    }
    adag_status_t st = adag__token_load(&env, token, &token_len);
    adag__settings_free(&env);
    if (st != ADAG_OK || adag__tcp_listen(addr, &lfd, bound, sizeof(bound)) != ADAG_OK) {
        fprintf(stderr, "adag-worker --agent %s: %s\n", addr, adag_last_error());
        return 2;
    }
    if (port_file && write_port_file(port_file, bound) != 0) {
        fprintf(stderr, "adag-worker --agent: cannot write %s: %s\n", port_file, strerror(errno));
        return 2;
    }
    return adag__agent_serve(lfd, bound, token, token_len, -1);
}

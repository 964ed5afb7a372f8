/* The relay between a remote worker's TCP connection and the driver's
 * local control and event sockets (dag/proc/remote_link.h). */
#include "dag/proc/remote_link.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/fd.h"
#include "common/log.h"
#include "transport/control.h"
#include "transport/protocol.h"
#include "transport/tcp.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long the relay gives the rest of a frame whose header arrived. */
#define FRAME_TIMEOUT_MS 30000

struct adag_remote_link {
    char host[ADAG_HOSTPORT_MAX];
    int64_t timeout_ms; /* its ADAG_REMOTE_TIMEOUT_MS */
    int tcp;
    int local;    /* the relay's end of the control socketpair */
    int events;   /* the actor's event socket (from CREATE_ACTOR), -1 until then */
    int dead_fd;  /* eventfd: written once the link is down */
    int stop_fd;  /* eventfd: the relay exits */
    pthread_t relay;
    int started;
    /* set once by the relay (before dead_fd is written), read after */
    _Atomic int down;
    char why[200];
};

static void link_down(adag_remote_link_t *l, const char *fmt, ...) ADAG_PRINTF(2, 3);
static void link_down(adag_remote_link_t *l, const char *fmt, ...)
{
    if (atomic_load_explicit(&l->down, memory_order_acquire))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->why, sizeof(l->why), fmt, ap);
    va_end(ap);
    /* release: a reader that sees down sees why */
    atomic_store_explicit(&l->down, 1, memory_order_release);
    shutdown(l->tcp, SHUT_RDWR);
    shutdown(l->local, SHUT_RDWR); /* a request in flight reads EOF */
    if (l->events >= 0)
        shutdown(l->events, SHUT_RDWR);
    uint64_t one = 1;
    while (write(l->dead_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
}

/* A frame from the driver's side: out to the worker. */
static int relay_out(adag_remote_link_t *l)
{
    adag_ctl_msg_t msg;
    adag_status_t st = adag__ctl_recv(l->local, adag__deadline_ms(FRAME_TIMEOUT_MS), &msg);
    if (st != ADAG_OK)
        return 0; /* the actor is being freed (its control socket closed) */
    if (msg.type == ADAG_MSG_CREATE_ACTOR && msg.nfds == 1 && l->events < 0) {
        l->events = msg.fds[0]; /* DAG_FAILED frames go here */
        msg.nfds = 0;
    }
    if (msg.nfds) {
        link_down(l, "a %s message with %u fds cannot be sent to another host",
                  adag__msg_info(msg.type) ? adag__msg_info(msg.type)->name : "?", msg.nfds);
        adag__ctl_msg_free(&msg);
        return 0;
    }
    st = adag__ctl_send(l->tcp, msg.type, msg.payload, msg.len, NULL, 0);
    adag__ctl_msg_free(&msg);
    if (st != ADAG_OK) {
        link_down(l, "sending to node %s: %s", l->host, adag_last_error());
        return 0;
    }
    return 1;
}

/* A frame from the worker: to the event or the control socket. */
static int relay_in(adag_remote_link_t *l)
{
    adag_ctl_msg_t msg;
    adag_status_t st = adag__ctl_recv(l->tcp, adag__deadline_ms(FRAME_TIMEOUT_MS), &msg);
    if (st == ADAG_ERR_CLOSED) {
        link_down(l, "the connection to node %s closed (the worker exited or was killed)",
                  l->host);
        return 0;
    }
    if (st != ADAG_OK && errno == ETIMEDOUT) { /* the keepalive gave up */
        link_down(l,
                  "node %s is unreachable: no answer within ADAG_REMOTE_TIMEOUT_MS=%lld ms "
                  "(a link or the node is down)",
                  l->host, (long long)l->timeout_ms);
        return 0;
    }
    if (st != ADAG_OK) {
        link_down(l, "the connection to node %s failed: %s", l->host, adag_last_error());
        return 0;
    }
    int to = msg.type == ADAG_MSG_DAG_FAILED ? l->events : l->local;
    if (to >= 0)
        (void)adag__ctl_send(to, msg.type, msg.payload, msg.len, NULL, 0);
    adag__ctl_msg_free(&msg);
    return 1;
}

static void *relay_main(void *arg)
{
    adag_remote_link_t *l = arg;
    for (;;) {
        struct pollfd p[3] = {{.fd = l->local, .events = POLLIN},
                              {.fd = l->tcp, .events = POLLIN},
                              {.fd = l->stop_fd, .events = POLLIN}};
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            link_down(l, "poll: %s", strerror(errno));
            return NULL;
        }
        if (p[2].revents)
            return NULL;
        if (atomic_load_explicit(&l->down, memory_order_acquire))
            return NULL;
        if (p[1].revents && !relay_in(l))
            return NULL;
        if (p[0].revents && !relay_out(l))
            return NULL;
    }
}

adag_status_t adag__remote_open(const char *host, int64_t deadline, int64_t timeout_ms, int *ctl,
                               adag_remote_link_t **out)
{
    adag_status_t st;
    int sv[2] = {-1, -1};
    adag_remote_link_t *l = calloc(1, sizeof(*l));
    if (!l)
        return adag__error(ADAG_ERR_NO_MEMORY, "remote actor: out of memory");
    snprintf(l->host, sizeof(l->host), "%s", host);
    l->timeout_ms = timeout_ms;
    l->tcp = l->local = l->events = l->dead_fd = l->stop_fd = -1;
    if ((st = adag__tcp_connect(host, deadline, &l->tcp)) != ADAG_OK ||
        (st = adag__tcp_tune(l->tcp, timeout_ms)) != ADAG_OK)
        goto fail;
    l->dead_fd = adag__fd_above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    l->stop_fd = adag__fd_above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (l->dead_fd < 0 || l->stop_fd < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
        (sv[0] = adag__fd_above_stdio(sv[0])) < 0 || (sv[1] = adag__fd_above_stdio(sv[1])) < 0) {
        st = adag__error_errno(errno, "remote actor on %s: local sockets", host);
        goto fail;
    }
    l->local = sv[1];
    int rc = pthread_create(&l->relay, NULL, relay_main, l);
    if (rc != 0) {
        st = adag__error_errno(rc, "remote actor on %s: relay thread", host);
        goto fail;
    }
    l->started = 1;
    *ctl = sv[0];
    *out = l;
    return ADAG_OK;
fail:
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0 && l->local != sv[1])
        close(sv[1]);
    adag__remote_close(l);
    return st;
}

int adag__remote_dead_fd(const adag_remote_link_t *l)
{
    return l ? l->dead_fd : -1;
}

int adag__remote_reap(adag_remote_link_t *l, char *how, size_t len)
{
    if (!atomic_load_explicit(&l->down, memory_order_acquire))
        return 0;
    snprintf(how, len, "%s", l->why);
    return 1;
}

void adag__remote_kill(adag_remote_link_t *l)
{
    shutdown(l->tcp, SHUT_RDWR); /* the relay reads EOF and marks it down */
}

const char *adag__remote_host(const adag_remote_link_t *l)
{
    return l->host;
}

void adag__remote_close(adag_remote_link_t *l)
{
    if (!l)
        return;
    if (l->started) {
        uint64_t one = 1;
        while (write(l->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
        }
        pthread_join(l->relay, NULL);
    }
    int *fds[] = {&l->tcp, &l->local, &l->events, &l->dead_fd, &l->stop_fd};
    for (unsigned i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (*fds[i] >= 0)
            close(*fds[i]);
    free(l);
}

/* The live view's server (one listener thread per view, poll() over the
 * wake eventfd, the listening socket and up to ADAG_LIVE_MAX_CLIENTS
 * clients) and its client calls. Protocol and rules: common/live.h. */
#include "common/live.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/fd.h"
#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define LIVE_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)
#define LIVE_SLOTS 64          /* default paths per process: <pid>.sock ... <pid>-64.sock */
#define LIVE_BACKLOG 16
#define LIVE_DRAIN_MAX 65536   /* unread request bytes discarded before a close */
#define LIVE_ACCEPT_PAUSE_MS 100 /* out of fds: stop accepting this long */

typedef struct {
    int fd;
    size_t len; /* bytes of a request line in buf so far */
    char buf[ADAG_LIVE_REQUEST_MAX];
} live_client_t;

struct adag_live {
    int lfd;  /* the listening socket */
    int wake; /* eventfd: adag__live_close writes it to stop the listener */
    pthread_t thread;
    adag_live_render_fn render;
    void *arg;
    unsigned slot;  /* default path n (1: <pid>.sock); 0: a path given */
    dev_t dev;      /* the socket file bound, so close unlinks only it */
    ino_t ino;
    unsigned nclients; /* owned by the listener thread */
    live_client_t clients[ADAG_LIVE_MAX_CLIENTS];
    char path[LIVE_PATH_MAX];
};

/* The default paths this process has open (bit n-1: slot n). */
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t slots_used;

/* ---- the directory ---- */

adag_status_t adag__live_dir(char *buf, size_t len)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n = xdg && xdg[0] == '/' ? snprintf(buf, len, "%s/adag", xdg)
                                 : snprintf(buf, len, "/tmp/adag-%u", (unsigned)geteuid());
    if (n < 0 || (size_t)n >= len)
        return adag__error(ADAG_ERR_INVALID,
                          "live view directory: the path is longer than %zu bytes",
                          len ? len - 1 : 0);
    if (mkdir(buf, 0700) == 0) {
        /* a umask may have taken owner bits away */
        if (chmod(buf, 0700) != 0)
            return adag__error_errno(errno, "live view directory %s: chmod 0700", buf);
    } else if (errno != EEXIST) {
        return adag__error_errno(errno, "live view directory %s: cannot create it", buf);
    }
    struct stat st;
    if (lstat(buf, &st) != 0)
        return adag__error_errno(errno, "live view directory %s", buf);
    if (!S_ISDIR(st.st_mode))
        return adag__error(ADAG_ERR_INVALID, "live view directory %s exists and is not a directory "
                          "(refusing to use it)", buf);
    if (st.st_uid != geteuid())
        return adag__error(ADAG_ERR_INVALID, "live view directory %s is owned by uid %u, not by "
                          "this process's uid %u (refusing to use it)", buf, (unsigned)st.st_uid,
                          (unsigned)geteuid());
    if (st.st_mode & 077)
        return adag__error(ADAG_ERR_INVALID,
                           "live view directory %s has mode %04o: group or others "
                           "can enter it (refusing to use it; it must be 0700)",
                           buf, (unsigned)(st.st_mode & 07777));
    return ADAG_OK;
}

/* ---- opening ---- */

static adag_status_t sockaddr_of(const char *path, struct sockaddr_un *sa)
{
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(sa->sun_path))
        return adag__error(ADAG_ERR_INVALID,
                          "live view socket path \"%s\" is %zu bytes (1 to %zu fit)", path, n,
                          sizeof(sa->sun_path) - 1);
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, path, n + 1);
    return ADAG_OK;
}

static int unix_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    return fd < 0 ? fd : adag__fd_above_stdio(fd);
}

/* Something is at path (bind said EADDRINUSE): a socket nobody listens on
 * is removed (ADAG_OK); a live one is ADAG_ERR_BUSY; anything else stays. */
static adag_status_t remove_stale(const char *path, const struct sockaddr_un *sa)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? ADAG_OK
                               : adag__error_errno(errno, "live view socket %s: lstat", path);
    if (!S_ISSOCK(st.st_mode))
        return adag__error(ADAG_ERR_INVALID, "live view socket %s: a file that is no socket is "
                          "there (not removing it)", path);
    int probe = unix_socket();
    if (probe < 0)
        return adag__error_errno(errno, "live view socket %s: socket", path);
    int rc = connect(probe, (const struct sockaddr *)sa, sizeof(*sa));
    int err = errno;
    close(probe);
    if (rc == 0 || err == EAGAIN)
        return adag__error(ADAG_ERR_BUSY, "live view socket %s: another live view listens on it",
                          path);
    if (err != ECONNREFUSED)
        return adag__error_errno(err, "live view socket %s: probing the socket there", path);
    if (unlink(path) != 0 && errno != ENOENT)
        return adag__error_errno(errno, "live view socket %s: removing the stale socket", path);
    ADAG_LOG_INFO("live view socket %s: replaced a stale socket nobody listened on", path);
    return ADAG_OK;
}

/* Binds l->lfd at path (into l->path), mode 0600, and listens. */
static adag_status_t bind_listen(adag_live_t *l, const char *path)
{
    struct sockaddr_un sa;
    adag_status_t st = sockaddr_of(path, &sa);
    if (st != ADAG_OK)
        return st;
    memcpy(l->path, sa.sun_path, sizeof(l->path));
    l->lfd = unix_socket();
    if (l->lfd < 0)
        return adag__error_errno(errno, "live view socket %s: socket", l->path);
    int rc = bind(l->lfd, (const struct sockaddr *)&sa, sizeof(sa));
    if (rc != 0 && errno == EADDRINUSE) {
        if ((st = remove_stale(l->path, &sa)) != ADAG_OK)
            goto err_close;
        rc = bind(l->lfd, (const struct sockaddr *)&sa, sizeof(sa));
        if (rc != 0 && errno == EADDRINUSE) {
            st = adag__error(ADAG_ERR_BUSY,
                             "live view socket %s: another process bound it just now", l->path);
            goto err_close;
        }
    }
    if (rc != 0) {
        st = adag__error_errno(errno, "live view socket %s: bind", l->path);
        goto err_close;
    }
    /* nobody can connect before listen(), so the mode is 0600 before anyone can */
    struct stat sb;
    if (chmod(l->path, 0600) != 0 || stat(l->path, &sb) != 0) {
        st = adag__error_errno(errno, "live view socket %s: chmod 0600", l->path);
        goto err_unlink;
    }
    l->dev = sb.st_dev;
    l->ino = sb.st_ino;
    if (listen(l->lfd, LIVE_BACKLOG) != 0) {
        st = adag__error_errno(errno, "live view socket %s: listen", l->path);
        goto err_unlink;
    }
    return ADAG_OK;
err_unlink:
    unlink(l->path);
err_close:
    close(l->lfd);
    l->lfd = -1;
    return st;
}

/* The first free default path of this process that binds. */
static adag_status_t bind_default(adag_live_t *l)
{
    char dir[LIVE_PATH_MAX], path[LIVE_PATH_MAX + 1]; /* one more: too long is refused */
    adag_status_t st = adag__live_dir(dir, sizeof(dir));
    if (st != ADAG_OK)
        return st;
    pthread_mutex_lock(&slots_lock);
    st = adag__error(ADAG_ERR_BUSY, "live view directory %s: this process has %d live views open",
                    dir, LIVE_SLOTS);
    for (unsigned n = 1; n <= LIVE_SLOTS; n++) {
        if (slots_used & (1ull << (n - 1)))
            continue;
        if (n == 1)
            snprintf(path, sizeof(path), "%s/%d.sock", dir, (int)getpid());
        else
            snprintf(path, sizeof(path), "%s/%d-%u.sock", dir, (int)getpid(), n);
        st = bind_listen(l, path);
        if (st == ADAG_OK) {
            slots_used |= 1ull << (n - 1);
            l->slot = n;
            break;
        }
        if (st != ADAG_ERR_BUSY) /* busy: another pid namespace's process of our pid */
            break;
    }
    pthread_mutex_unlock(&slots_lock);
    return st;
}

static void release_slot(unsigned slot)
{
    if (!slot)
        return;
    pthread_mutex_lock(&slots_lock);
    slots_used &= ~(1ull << (slot - 1));
    pthread_mutex_unlock(&slots_lock);
}

/* ---- the listener ---- */

/* Sends n bytes within deadline. 0, or -1 (the client is to be dropped). */
static int send_all(adag_live_t *l, int fd, const char *p, size_t n, int64_t deadline)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            ADAG_LOG_DEBUG("live view %s: send to a client: %s", l->path, strerror(errno));
            return -1;
        }
        struct pollfd pf[2] = {{.fd = fd, .events = POLLOUT}, {.fd = l->wake, .events = POLLIN}};
        int r = poll(pf, 2, adag__ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || pf[1].revents)
            return -1;
        if (r == 0) {
            ADAG_LOG_WARN("live view %s: dropped a client that read no reply for %d ms", l->path,
                          ADAG_LIVE_SEND_TIMEOUT_MS);
            return -1;
        }
    }
    return 0;
}

static int reply(adag_live_t *l, int fd, const char *kind, const char *body, size_t n)
{
    char head[ADAG_LIVE_HEAD_MAX];
    int h = snprintf(head, sizeof(head), "ADAG-LIVE 1 %s %zu\n", kind, n);
    int64_t deadline = adag__deadline_ms(ADAG_LIVE_SEND_TIMEOUT_MS);
    if (send_all(l, fd, head, (size_t)h, deadline) != 0)
        return -1;
    return send_all(l, fd, body, n, deadline);
}

static int reply_err(adag_live_t *l, int fd, const char *fmt, ...) ADAG_PRINTF(3, 4);
static int reply_err(adag_live_t *l, int fd, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    return reply(l, fd, "ERR", msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}

/* Discards what the client sent and is unread (so its side sees EOF after
 * our last reply, not a reset), then closes it. */
static void drop_fd(int fd)
{
    char sink[4096];
    size_t total = 0;
    ssize_t k;
    while (total < LIVE_DRAIN_MAX && (k = recv(fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
        total += (size_t)k;
    close(fd);
}

/* Answers "stats". 0, or -1 (the client is to be dropped). */
static int serve_stats(adag_live_t *l, int fd)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return reply_err(l, fd, "the driver cannot render the view: open_memstream: %s",
                         strerror(errno));
    int rc = l->render(l->arg, f);
    if (fclose(f) != 0 && rc == 0) {
        ADAG_LOG_WARN("live view %s: the view's memstream: %s", l->path, strerror(errno));
        rc = -1;
    }
    if (rc != 0)
        rc = reply_err(l, fd, "the driver could not render the view");
    else if (size > ADAG_LIVE_REPLY_MAX)
        rc = reply_err(l, fd, "the view is %zu bytes, more than the %u bytes a reply may carry",
                       size, ADAG_LIVE_REPLY_MAX);
    else
        rc = reply(l, fd, "OK", text ? text : "", size);
    free(text);
    return rc;
}

/* Reads what client c sent and answers each request line in it. 0, or -1
 * (the client is to be dropped). */
static int client_input(adag_live_t *l, live_client_t *c)
{
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);
    if (n == 0)
        return -1;
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    c->len += (size_t)n;
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (!nl) {
            if (c->len < sizeof(c->buf))
                return 0;
            reply_err(l, c->fd, "request line longer than %d bytes", ADAG_LIVE_REQUEST_MAX);
            return -1;
        }
        size_t line = (size_t)(nl - c->buf);
        if (line != 5 || memcmp(c->buf, "stats", 5) != 0) {
            char shown[ADAG_LIVE_REQUEST_MAX];
            for (size_t i = 0; i < line; i++)
                shown[i] = c->buf[i] >= 0x20 && c->buf[i] < 0x7f ? c->buf[i] : '?';
            reply_err(l, c->fd, "unknown request \"%.*s\" (the only request is \"stats\")",
                      (int)line, shown);
            return -1;
        }
        if (serve_stats(l, c->fd) != 0)
            return -1;
        c->len -= line + 1;
        memmove(c->buf, nl + 1, c->len);
    }
}

/* Accepts one client. 0, or -1 when out of descriptors (pause accepting). */
static int accept_client(adag_live_t *l)
{
    int fd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            ADAG_LOG_WARN("live view %s: accept: %s (pausing %d ms)", l->path, strerror(errno),
                          LIVE_ACCEPT_PAUSE_MS);
            return -1;
        }
        return 0; /* EAGAIN, ECONNABORTED, ...: nothing to do */
    }
    if ((fd = adag__fd_above_stdio(fd)) < 0) {
        ADAG_LOG_WARN("live view %s: moving a client above fd 2: %s", l->path, strerror(errno));
        return -1;
    }
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    unsigned me = (unsigned)geteuid();
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
        ADAG_LOG_WARN("live view %s: SO_PEERCRED of a client: %s (closed it)", l->path,
                      strerror(errno));
        close(fd);
        return 0;
    }
    if ((unsigned)cr.uid != me) {
        ADAG_LOG_WARN("live view %s: refused pid %d: uid %u is not this driver's uid %u", l->path,
                      (int)cr.pid, (unsigned)cr.uid, me);
        reply_err(l, fd, "refused: uid %u is not this driver's uid %u", (unsigned)cr.uid, me);
        drop_fd(fd);
        return 0;
    }
    if (l->nclients == ADAG_LIVE_MAX_CLIENTS) {
        ADAG_LOG_WARN("live view %s: refused pid %d: %d clients are attached already", l->path,
                      (int)cr.pid, ADAG_LIVE_MAX_CLIENTS);
        reply_err(l, fd, "too many clients: %d are attached already", ADAG_LIVE_MAX_CLIENTS);
        drop_fd(fd);
        return 0;
    }
    l->clients[l->nclients++] = (live_client_t){.fd = fd};
    return 0;
}

static void *listener_main(void *arg)
{
    adag_live_t *l = arg;
    int64_t paused_until = 0;
    for (;;) {
        struct pollfd pf[2 + ADAG_LIVE_MAX_CLIENTS];
        int paused = paused_until > adag__now_ns();
        pf[0] = (struct pollfd){.fd = l->wake, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = paused ? -1 : l->lfd, .events = POLLIN};
        for (unsigned i = 0; i < l->nclients; i++)
            pf[2 + i] = (struct pollfd){.fd = l->clients[i].fd, .events = POLLIN};
        int r = poll(pf, 2 + l->nclients, paused ? adag__ms_left(paused_until) : -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            ADAG_LOG_ERROR("live view %s: poll: %s (the view stops serving)", l->path,
                           strerror(errno));
            break;
        }
        if (pf[0].revents)
            break;
        unsigned kept = 0;
        for (unsigned i = 0; i < l->nclients; i++) {
            if (pf[2 + i].revents && client_input(l, &l->clients[i]) != 0)
                drop_fd(l->clients[i].fd);
            else
                l->clients[kept++] = l->clients[i];
        }
        l->nclients = kept;
        if ((pf[1].revents & POLLIN) && accept_client(l) != 0)
            paused_until = adag__deadline_ms(LIVE_ACCEPT_PAUSE_MS);
    }
    return NULL;
}

adag_status_t adag__live_open(const char *path, adag_live_render_fn render, void *arg,
                             adag_live_t **out)
{
    if (!render || !out)
        return adag__error(ADAG_ERR_INVALID, "adag__live_open: render and out must not be NULL");
    adag_live_t *l = calloc(1, sizeof(*l));
    if (!l)
        return adag__error(ADAG_ERR_NO_MEMORY, "live view: out of memory");
    l->render = render;
    l->arg = arg;
    l->lfd = -1;
    adag_status_t st;
    l->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->wake < 0 || (l->wake = adag__fd_above_stdio(l->wake)) < 0) {
        st = adag__error_errno(errno, "live view %s: eventfd", path ? path : "(default path)");
        goto err_free;
    }
    st = path ? bind_listen(l, path) : bind_default(l);
    if (st != ADAG_OK)
        goto err_wake;
    /* the listener takes no signal the application relies on */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&l->thread, NULL, listener_main, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        st = adag__error_errno(err, "live view %s: cannot start the listener thread", l->path);
        goto err_socket;
    }
    *out = l;
    return ADAG_OK;
err_socket:
    unlink(l->path);
    close(l->lfd);
    release_slot(l->slot);
err_wake:
    close(l->wake);
err_free:
    free(l);
    return st;
}

const char *adag__live_path(const adag_live_t *l)
{
    return l->path;
}

void adag__live_close(adag_live_t *l)
{
    if (!l)
        return;
    uint64_t one = 1;
    while (write(l->wake, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
    pthread_join(l->thread, NULL);
    for (unsigned i = 0; i < l->nclients; i++)
        close(l->clients[i].fd);
    /* unlink first: no moment with a socket file nobody listens on */
    struct stat st;
    if (lstat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
        unlink(l->path);
    close(l->lfd);
    close(l->wake);
    release_slot(l->slot);
    free(l);
}

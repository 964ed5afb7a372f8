#include "common/fd.h"

#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

int adag__fd_above_stdio(int fd)
{
    if (fd < 0 || fd > 2)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int err = errno;
    close(fd);
    errno = err;
    return moved;
}

/* ---- adag_write_fd (include/adag.h) ---- */

/* Waits until fd takes bytes again (a non-blocking fd that said EAGAIN):
 * as long as a blocking write would have waited. */
static void wait_writable(int fd)
{
    struct pollfd pfd = {fd, POLLOUT, 0};
    while (poll(&pfd, 1, -1) < 0 && errno == EINTR) {
    }
}

adag_status_t adag_write_fd(void *ctx, const void *buf, size_t n)
{
    int fd = (int)(intptr_t)ctx;
    const char *p = buf;
    adag_status_t st = ADAG_OK;
    /* A pipe or socket whose reader is gone raises SIGPIPE, which would end
     * the program: it is blocked while this thread writes, and one that a
     * write here raised (it was not pending before) is taken back, so the
     * failure is an ADAG_ERR_IO for the caller (EPIPE) and nothing else. */
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w > 0) { /* a short write goes on with the rest */
            p += w;
            n -= (size_t)w;
            continue;
        }
        int err = w < 0 ? errno : EIO; /* 0 bytes of n > 0: nothing will move */
        if (err == EINTR)
            continue;
        if (err == EAGAIN || err == EWOULDBLOCK) {
            wait_writable(fd);
            continue;
        }
        if (err == EPIPE && !was_pending) {
            const struct timespec zero = {0, 0};
            while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
            }
        }
        st = adag__error_errno(err, "write to fd %d (%zu bytes left)", fd, n);
        break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return st;
}

#include "transport/spawn.h"

#include "common/error.h"
#include "common/fd.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define CHILD_STACK_SIZE (64 * 1024)
#define WORKER_CONTROL_FD 3

/* What the child needs; shared with the (suspended) parent through
 * CLONE_VM. The child writes `err` and `step` only when it fails. */
typedef struct {
    const char *path;
    char *const *argv;
    char *const *envp;
    int ctl_fd;      /* the child's end of the socket, >= 10 */
    long parent_pid; /* the driver: the child leaves if it is not its parent */
    int err;         /* errno of the step that failed */
    const char *step;
} spawn_args_t;

/* The kernel's struct sigaction (x86-64 and arm64 lay it out the same). */
struct kernel_sigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
};

#define CHILD_FAIL(a, what, e)                                                                 \
    do {                                                                                       \
        (a)->err = (int)(e);                                                                   \
        (a)->step = (what);                                                                    \
        syscall(SYS_exit_group, 127);                                                          \
    } while (0)

/*
 * Runs in the child, on its own stack, sharing the parent's memory (the
 * parent thread is suspended until execve). Only raw system calls here: no
 * libc state may be touched (a sanitizer's interceptors or another thread's
 * lock could be caught half-way), hence no instrumentation either. Every
 * signal is blocked on entry (the parent blocked them before clone), so no
 * handler of the driver can run here before the dispositions are reset.
 */
__attribute__((no_sanitize("address", "thread", "undefined"), noinline))
static int spawn_child(void *arg)
{
    spawn_args_t *a = arg;
    long r;

    /* default dispositions for every signal the kernel lets us set */
    struct kernel_sigaction dfl = {0};
    for (long sig = 1; sig < 65; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
    /* fds 0-2 open across exec: a closed one, or one of the driver's own
     * close-on-exec descriptors that landed there, becomes /dev/null */
    for (long fd = 0; fd <= 2; fd++) {
        r = syscall(SYS_fcntl, fd, F_GETFD);
        if (r >= 0 && !(r & FD_CLOEXEC))
            continue;
        long null_fd = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR);
        if (null_fd < 0)
            CHILD_FAIL(a, "open /dev/null for fds 0-2", errno);
        if (null_fd != fd) {
            if (syscall(SYS_dup3, null_fd, fd, 0L) < 0)
                CHILD_FAIL(a, "dup3 of /dev/null onto fds 0-2", errno);
            syscall(SYS_close, null_fd);
        }
    }
    /* the control socket at fd 3 (dup3 clears close-on-exec) */
    if (syscall(SYS_dup3, (long)a->ctl_fd, (long)WORKER_CONTROL_FD, 0L) < 0)
        CHILD_FAIL(a, "dup3 of the control socket", errno);
    /* die with the spawning thread; if the driver is already gone (it
     * cannot be: it waits in clone; this is the usual race check), leave */
    if (syscall(SYS_prctl, (long)PR_SET_PDEATHSIG, (long)SIGKILL, 0L, 0L, 0L) < 0)
        CHILD_FAIL(a, "prctl(PR_SET_PDEATHSIG)", errno);
    if (syscall(SYS_getppid) != a->parent_pid)
        CHILD_FAIL(a, "parent check", ESRCH);
    uint64_t none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none));
    syscall(SYS_execve, a->path, a->argv, a->envp);
    CHILD_FAIL(a, "execve", errno);
    return 127;
}

adag_status_t adag__spawn_worker(const char *path, int *pid_out, int *pidfd_out, int *sock_out)
{
    int sv[2] = {-1, -1}, child_fd = -1, pidfd = -1;
    char fdarg[16];
    adag_status_t st;
    void *stack;

    if (access(path, X_OK) != 0)
        return adag__error_errno(errno, "adag-worker '%s' is not executable (set ADAG_WORKER_PATH)",
                                path);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return adag__error_errno(errno, "socketpair for worker control");
    /* the child's end well clear of 0-9, so dup3 onto 3 never collides */
    child_fd = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    if (child_fd < 0) {
        st = adag__error_errno(errno, "fcntl(F_DUPFD_CLOEXEC)");
        goto fail_socks;
    }
    if ((sv[0] = adag__fd_above_stdio(sv[0])) < 0) {
        st = adag__error_errno(errno, "moving the control socket above fd 2");
        goto fail_child_fd;
    }
    stack = mmap(NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        st = adag__error_errno(errno, "mmap of the spawn stack");
        goto fail_child_fd;
    }
    snprintf(fdarg, sizeof(fdarg), "%d", WORKER_CONTROL_FD);
    char *argv[] = {(char *)path, (char *)"--control-fd", fdarg, NULL};
    spawn_args_t args = {.path = path, .argv = argv, .envp = environ, .ctl_fd = child_fd,
                         .parent_pid = (long)getpid(), .err = 0, .step = NULL};

    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int pid = clone(spawn_child, (char *)stack + CHILD_STACK_SIZE,
                    CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &args, &pidfd);
    int clone_err = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    munmap(stack, CHILD_STACK_SIZE);
    if (pid < 0) {
        st = adag__error_errno(clone_err, "clone for %s", path);
        goto fail_child_fd;
    }
    if (args.step) {
        /* the child failed before or in execve and has exited: collect it */
        char how[96];
        adag__reap(pidfd, 0, how, sizeof(how));
        close(pidfd);
        st = adag__error_errno(args.err, "starting %s: %s", path, args.step);
        goto fail_child_fd;
    }
    if ((pidfd = adag__fd_above_stdio(pidfd)) < 0) {
        /* cannot watch it: do not let it run unwatched */
        st = adag__error_errno(errno, "moving the pidfd of %s above fd 2", path);
        kill(pid, SIGKILL);
        siginfo_t si;
        while (waitid(P_PID, (id_t)pid, &si, WEXITED | __WALL) < 0 && errno == EINTR) {
        }
        goto fail_child_fd;
    }
    fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    close(child_fd);
    close(sv[1]);
    *pid_out = pid;
    *pidfd_out = pidfd;
    *sock_out = sv[0];
    return ADAG_OK;

fail_child_fd:
    close(child_fd);
fail_socks:
    if (sv[0] >= 0)
        close(sv[0]);
    close(sv[1]);
    return st;
}

static void describe_end(int exited, int code, int dumped, char *how, size_t len)
{
    if (exited) {
        snprintf(how, len, "exited with status %d", code);
    } else {
        const char *abbrev = sigabbrev_np(code);
        snprintf(how, len, "killed by signal %d (SIG%s)%s", code, abbrev ? abbrev : "?",
                 dumped ? ", core dumped" : "");
    }
}

/* The pidfd's record of how its process ended, kept by the kernel (6.15 and
 * later) even after another wait collected it. Declared here because the
 * system headers may predate it; the kernel takes any size >= 64 bytes. */
struct pidfd_exit_info {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code; /* a wait status */
};
#define PIDFD_INFO_EXIT_BIT (1ull << 3)
#define PIDFD_GET_INFO_CMD _IOWR(0xFF, 11, struct pidfd_exit_info)
_Static_assert(sizeof(struct pidfd_exit_info) == 64, "PIDFD_INFO_SIZE_VER0");

int adag__reap(int pidfd, int nohang, char *how, size_t len)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    for (;;) {
        if (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL | (nohang ? WNOHANG : 0)) == 0)
            break;
        if (errno == EINTR)
            continue;
        /* ECHILD: the host program collected it first (SIGCHLD set to
         * SIG_IGN, or a handler that reaps every child). It is dead all the
         * same; the kernel may still know how it ended. */
        struct pidfd_exit_info info;
        int known = 0;
        /* a process reaped by the host a moment ago may not have its record
         * yet (the kernel writes it as the reap completes): ask again for up
         * to 100 ms; a kernel without records (before 6.15) refuses the
         * ioctl at once */
        for (int tries = 0; tries < 100 && !known; tries++) {
            memset(&info, 0, sizeof(info));
            info.mask = PIDFD_INFO_EXIT_BIT;
            if (ioctl(pidfd, PIDFD_GET_INFO_CMD, &info) != 0)
                break;
            known = (info.mask & PIDFD_INFO_EXIT_BIT) != 0;
            if (!known)
                usleep(1000);
        }
        if (known)
            describe_end(WIFEXITED(info.exit_code),
                         WIFEXITED(info.exit_code) ? WEXITSTATUS(info.exit_code)
                                                   : WTERMSIG(info.exit_code),
                         WCOREDUMP(info.exit_code), how, len);
        else
            snprintf(how, len, "exited (its exit status was collected elsewhere in the driver)");
        return 1;
    }
    if (si.si_pid == 0)
        return 0; /* still running (WNOHANG) */
    describe_end(si.si_code == CLD_EXITED, si.si_status, si.si_code == CLD_DUMPED, how, len);
    return 1;
}

int adag__pidfd_kill(int pidfd, int sig)
{
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

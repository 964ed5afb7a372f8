/*
 * Fault matrix: a plain program (not Criterion: it forks drivers and kills
 * them) that runs many seeded rounds. Each round forks a child "driver" that
 * creates a runtime, 1-4 process actors of class "counter" (and maybe a
 * thread actor), builds a random chain or fan-out graph, compiles it and
 * executes it; the parent, the "checker", injects one fault at one phase:
 *
 *   faults: driver-kill        SIGKILL the driver
 *           driver-stop-kill   SIGSTOP the driver, then SIGKILL it
 *           worker-kill        SIGKILL a worker
 *           worker-stop-kill   SIGSTOP a worker, then SIGKILL it
 *           worker-exit        a worker calls exit(7) inside a method (die_if 7)
 *           worker-segv        a worker segfaults inside a method (die_if 11)
 *           worker-stop+driver-kill  SIGSTOP a worker, then SIGKILL the driver
 *   phases: create   (adag_actor_create in progress; worker-exit/-segv: a
 *                     "crashy" actor whose init calls exit / segfaults)
 *           compile  (adag_graph_compile in progress; worker-exit/-segv: the
 *                     poison runs on a small DAG over the same actor while
 *                     the main graph compiles)
 *           execute  (executions and gets in flight)
 *           teardown (adag_dag_destroy / adag_runtime_destroy with long
 *                     methods in flight)
 *
 * What is checked (see the failure codes below, printed with their meaning):
 *   - a worker died: the driver keeps running; every call it makes after the
 *     death returns within 2 s of it; gets return ADAG_ERR_ACTOR_DIED naming
 *     the actor, or ADAG_OK with the exact expected values (never for an
 *     execution started after the death, never for the poison); no get takes
 *     more than its timeout + 1 s; then adag_runtime_destroy finishes in a
 *     few seconds and leaves no child, no fd, no memfd mapping in the driver;
 *   - the driver died: every worker is gone within 2 s (the checker is a
 *     child subreaper, so orphaned workers become its children);
 *   - after every round: no process of the round left, no new file in
 *     /dev/shm, the checker's fd count unchanged; a driver that does not
 *     finish within the round limit is killed and reported as a HANG.
 *
 * Usage: fault-matrix [SEED] [--seed N] [--rounds N] [--seconds S] [--start I]
 *                     [--fault a,b] [--phase a,b] [--round-limit S] [-v]
 * Round i of seed S is reproduced by: fault-matrix --seed S --start i --rounds 1
 * (with the same --fault/--phase filters). The last line is
 * "fault-matrix: N passed, M failed[, K skipped]"; the exit status is 1 if
 * any round failed.
 */
#include <adag.h>

#include "test_actors.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef ADAG_TEST_MODULE
#error "ADAG_TEST_MODULE must be defined by the build"
#endif

/* ------------------------------------------------------------------ */
/* Small utilities                                                     */
/* ------------------------------------------------------------------ */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double ms_of(int64_t ns)
{
    return (double)ns / 1e6;
}

static void sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, n) (n > 0) */
static unsigned rnd(uint64_t *s, unsigned n)
{
    return (unsigned)(splitmix64(s) % n);
}

static int pidfd_open_(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_signal(int pidfd, int sig)
{
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* 1 if the process behind pidfd has exited (zombie or reaped). */
static int pidfd_exited(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

/* Reads ppid and state of /proc/<pid>/stat; 0 on success. */
static int proc_stat(pid_t pid, pid_t *ppid, char *state)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    int pp;
    char st;
    if (sscanf(p + 1, " %c %d", &st, &pp) != 2)
        return -1;
    if (ppid)
        *ppid = pp;
    if (state)
        *state = st;
    return 0;
}

/* "state S (sleeping), wchan do_wait, cmd ..." for a report; the /proc view
 * that `ps -o pid,stat,wchan,cmd` shows. */
static void proc_describe(pid_t pid, char *out, size_t n)
{
    char path[64], wchan[64] = "?", cmd[160] = "?";
    pid_t ppid = 0;
    char st = '?';
    if (proc_stat(pid, &ppid, &st) != 0) {
        snprintf(out, n, "no /proc entry (gone)");
        return;
    }
    snprintf(path, sizeof(path), "/proc/%d/wchan", (int)pid);
    FILE *f = fopen(path, "re");
    if (f) {
        size_t k = fread(wchan, 1, sizeof(wchan) - 1, f);
        wchan[k] = '\0';
        fclose(f);
    }
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    f = fopen(path, "re");
    if (f) {
        size_t k = fread(cmd, 1, sizeof(cmd) - 1, f);
        cmd[k] = '\0';
        for (size_t i = 0; i + 1 < k; i++)
            if (cmd[i] == '\0')
                cmd[i] = ' ';
        fclose(f);
    }
    /* every thread's wait channel: the main thread alone hides a method
     * thread stuck in a sleep or a loop */
    char threads[200] = "";
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        size_t used = 0;
        while ((e = readdir(d)) != NULL && used + 40 < sizeof(threads)) {
            if (!isdigit((unsigned char)e->d_name[0]))
                continue;
            char tp[96], tw[40] = "?", ts = '?';
            snprintf(tp, sizeof(tp), "/proc/%d/task/%s/wchan", (int)pid, e->d_name);
            FILE *tf = fopen(tp, "re");
            if (tf) {
                size_t k = fread(tw, 1, sizeof(tw) - 1, tf);
                tw[k] = '\0';
                fclose(tf);
            }
            snprintf(tp, sizeof(tp), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
            tf = fopen(tp, "re");
            if (tf) {
                char b[512];
                size_t k = fread(b, 1, sizeof(b) - 1, tf);
                b[k] = '\0';
                fclose(tf);
                char *q = strrchr(b, ')');
                if (q && q[1] == ' ')
                    ts = q[2];
            }
            used += (size_t)snprintf(threads + used, sizeof(threads) - used, "%s%s:%c:%s",
                                     used ? " " : "", e->d_name, ts, tw);
        }
        closedir(d);
    }
    const char *what = st == 'T' ? "stopped" : st == 't' ? "traced" : st == 'Z' ? "zombie"
                     : st == 'R' ? "running" : st == 'S' ? "sleeping" : st == 'D' ? "disk sleep"
                                                                                 : "?";
    snprintf(out, n, "/proc/%d/stat state %c (%s), ppid %d, wchan %s, threads (tid:state:wchan) %s, "
             "cmd: %s",
             (int)pid, st, what, (int)ppid, wchan, threads, cmd);
}

/* Children of `parent` (by ppid in /proc/<pid>/stat), up to max. */
static int children_of(pid_t parent, pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name), ppid;
        char st;
        if (proc_stat(pid, &ppid, &st) != 0 || ppid != parent)
            continue;
        if (out && n < max)
            out[n] = pid;
        n++;
    }
    closedir(d);
    return n;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

static int count_memfd_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, "memfd:"))
            n++;
    fclose(f);
    return n;
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The matrix                                                          */
/* ------------------------------------------------------------------ */

typedef enum {
    F_DKILL,
    F_DSTOP,
    F_WKILL,
    F_WSTOP,
    F_WEXIT,
    F_WSEGV,
    F_WSTOP_DKILL,
    NFAULTS
} fault_t;

static const char *const fault_names[NFAULTS] = {
    "driver-kill", "driver-stop-kill", "worker-kill", "worker-stop-kill",
    "worker-exit", "worker-segv",      "worker-stop+driver-kill",
};

typedef enum { PH_CREATE, PH_COMPILE, PH_EXECUTE, PH_TEARDOWN, PH_DONE, NPHASES = PH_DONE } phase_t;

static const char *const phase_names[] = {"create", "compile", "execute", "teardown", "done"};

static const char *phase_name(int ph)
{
    return ph >= 0 && ph <= PH_DONE ? phase_names[ph] : "start";
}

static int fault_kills_driver(fault_t f)
{
    return f == F_DKILL || f == F_DSTOP || f == F_WSTOP_DKILL;
}

/* a worker dies and the driver lives on */
static int fault_kills_worker(fault_t f)
{
    return f == F_WKILL || f == F_WSTOP || f == F_WEXIT || f == F_WSEGV;
}

static int fault_in_method(fault_t f)
{
    return f == F_WEXIT || f == F_WSEGV;
}

static int fault_external_worker(fault_t f)
{
    return f == F_WKILL || f == F_WSTOP || f == F_WSTOP_DKILL;
}

#define MAXP 4             /* process actors */
#define GET_TIMEOUT_MS 5000
#define PROMPT_MS 2000     /* calls after a death, workers after a driver death */
#define RT_TEARDOWN_MS 2000 /* ADAG_TEARDOWN_TIMEOUT_MS given to the drivers */
#define TEARDOWN_SLACK_MS 1500

typedef struct {
    uint64_t seed; /* the round's seed */
    unsigned round;
    fault_t fault;
    phase_t phase;
    unsigned nproc;      /* process actors, 1..4 */
    int thread_actor;    /* plus one thread actor "fmT" */
    unsigned thread_pos; /* created before process actor thread_pos (== nproc: last) */
    int fanout;          /* else a chain */
    unsigned order[MAXP + 1]; /* chain / output order: 0..nproc-1 process, nproc thread */
    unsigned norder;
    int64_t offset[MAXP + 1];
    unsigned victim;   /* process actor that dies / is stopped; for create: the one being created */
    unsigned sleeper;  /* process actor running the sleep branch */
    int spin;          /* the sleep branch busy-loops (spin_ms) */
    unsigned max_inflight;
    int dag_teardown_ms;
    int64_t delay_us;  /* checker: from "go" to the fault */
    int stop_ms;       /* SIGSTOP lasts this long before the SIGKILL */
    unsigned poison_after; /* executions before the poison (in-method, execute phase) */
    int long_ms;       /* teardown: methods in flight sleep this long */
    unsigned nlong;
    int exec_ms;       /* execute phase length when no death must be awaited */
    int chld;          /* the driver's SIGCHLD disposition (CHLD_*) */
} config_t;

/* How the driver program treats SIGCHLD: the runtime must notice deaths
 * whatever the application does with it. */
enum { CHLD_DEFAULT, CHLD_IGNORE, CHLD_REAP, CHLD_EINTR, NCHLD };
static const char *const chld_names[NCHLD] = {"default", "ignore", "reap", "eintr"};

static void make_config(config_t *c, uint64_t seed, unsigned round, fault_t f, phase_t ph,
                        const int *chld_mask)
{
    uint64_t s = seed;
    memset(c, 0, sizeof(*c));
    c->seed = seed;
    c->round = round;
    c->fault = f;
    c->phase = ph;
    c->nproc = 1 + rnd(&s, MAXP);
    c->thread_actor = rnd(&s, 3) == 0;
    c->thread_pos = rnd(&s, c->nproc + 1);
    c->fanout = rnd(&s, 3) == 0;
    c->norder = 0;
    for (unsigned i = 0; i < c->nproc; i++)
        c->order[c->norder++] = i;
    if (c->thread_actor)
        c->order[c->norder++] = c->nproc;
    for (unsigned i = c->norder; i > 1; i--) {
        unsigned j = rnd(&s, i), t = c->order[i - 1];
        c->order[i - 1] = c->order[j];
        c->order[j] = t;
    }
    for (unsigned i = 0; i <= MAXP; i++)
        c->offset[i] = rnd(&s, 4);
    c->victim = rnd(&s, c->nproc);
    c->sleeper = rnd(&s, c->nproc);
    c->spin = ph == PH_TEARDOWN && rnd(&s, 5) == 0;
    c->max_inflight = 1 + rnd(&s, 8);
    c->dag_teardown_ms = 300 + (int)rnd(&s, 1201);
    c->stop_ms = 50 + (int)rnd(&s, 551);
    switch (ph) {
    case PH_CREATE:
        /* a worker: from the moment it appears; the driver: while the
         * actors left (from victim on, ~1 ms each) are created */
        c->delay_us = fault_external_worker(f) ? rnd(&s, 600)
                                               : rnd(&s, 1000 * (c->nproc - c->victim));
        break;
    case PH_COMPILE:
        c->delay_us = rnd(&s, 400); /* compiling takes 0.2-0.7 ms here */
        break;
    case PH_EXECUTE:
        c->delay_us = rnd(&s, 100000);
        break;
    default: {
        int cap = c->dag_teardown_ms - 100 < 400 ? c->dag_teardown_ms - 100 : 400;
        c->delay_us = rnd(&s, (unsigned)cap * 1000u);
    }
    }
    c->poison_after = rnd(&s, 20);
    c->long_ms = 2500 + (int)rnd(&s, 1501);
    c->nlong = 1 + rnd(&s, c->max_inflight);
    c->exec_ms = (int)(c->delay_us / 1000) + (f == F_DSTOP || f == F_WSTOP_DKILL ? c->stop_ms : 0) +
                 150 + (int)rnd(&s, 200);
    /* SIGCHLD: the default half of the time, else one of the others */
    int w[NCHLD] = {3, 1, 1, 1}, total = 0;
    for (int i = 0; i < NCHLD; i++)
        total += chld_mask[i] ? w[i] : 0;
    int pick = (int)rnd(&s, (unsigned)total);
    for (int i = 0; i < NCHLD; i++) {
        if (!chld_mask[i])
            continue;
        if (pick < w[i]) {
            c->chld = i;
            break;
        }
        pick -= w[i];
    }
}

/* Shared between checker and driver (an anonymous shared mapping made before
 * fork). */
typedef struct {
    _Atomic int phase;        /* the driver's phase (-1 before create) */
    _Atomic int64_t kill_ns;  /* checker: just before the SIGKILL of the victim worker */
    _Atomic int killed_pid;
    char activity[160];       /* what the driver is doing (for HANG reports) */
} shared_t;

/* Driver exit codes (and "E <code> <text>" lines). */
enum {
    XC_OK = 0,
    XC_SETUP = 10,
    XC_BAD_DATA = 11,
    XC_LATE = 12,
    XC_GET_SLOW = 13,
    XC_STATUS = 14,
    XC_NAME = 15,
    XC_TEARDOWN_SLOW = 16,
    XC_TEARDOWN_ERR = 17,
    XC_CHILDREN = 18,
    XC_FDS = 19,
    XC_MEMFD = 20,
    XC_UNREPORTED = 21,
    XC_HEALTHY = 22,
    XC_HEALTHY_KILLED = 23,
    XC_AFTER = 24,
    XC_NOT_DELIVERED = 25,
};

static const char *code_meaning(int code)
{
    switch (code) {
    case XC_OK: return "ok";
    case XC_SETUP: return "setup failed before any fault";
    case XC_BAD_DATA: return "adag_dag_get returned ADAG_OK with wrong or missing data";
    case XC_LATE: return "a call returned more than 2 s after the worker died (or hung until it died)";
    case XC_GET_SLOW: return "adag_dag_get took longer than its timeout + 1 s";
    case XC_STATUS: return "a call returned an unexpected status";
    case XC_NAME: return "the error message does not name the dead actor";
    case XC_TEARDOWN_SLOW: return "teardown too slow";
    case XC_TEARDOWN_ERR: return "teardown returned an error";
    case XC_CHILDREN: return "a child process is left after adag_runtime_destroy";
    case XC_FDS: return "fds leaked in the driver";
    case XC_MEMFD: return "memfd mapping left in the driver";
    case XC_UNREPORTED: return "the worker died but no call reported ADAG_ERR_ACTOR_DIED";
    case XC_HEALTHY: return "ADAG_ERR_ACTOR_DIED for a healthy actor or before the fault";
    case XC_HEALTHY_KILLED: return "a healthy worker died in adag_dag_destroy (its actor handle is held)";
    case XC_AFTER: return "the runtime could not run a new DAG over the surviving actors";
    case XC_NOT_DELIVERED: return "the fault was not delivered (checker could not inject it)";
    default: return "unknown exit code";
    }
}

/* ------------------------------------------------------------------ */
/* The driver (forked child)                                           */
/* ------------------------------------------------------------------ */

static const config_t *D_cfg;
static shared_t *D_sh;
static int D_wfd = -1, D_gofd = -1;
static int D_code;
static int64_t D_t_go;

static void drv_line(const char *fmt, ...) ADAG_PRINTF(1, 2);
static void drv_line(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    for (int i = 0; i < n; i++)
        if (buf[i] == '\n')
            buf[i] = ' ';
    buf[n++] = '\n';
    (void)write_all(D_wfd, buf, (size_t)n); /* < PIPE_BUF: one atomic write */
}

static void drv_fail(int code, const char *fmt, ...) ADAG_PRINTF(2, 3);
static void drv_fail(int code, const char *fmt, ...)
{
    char buf[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (!D_code)
        D_code = code;
    drv_line("E %d %s", code, buf);
}

static void drv_activity(const char *fmt, ...) ADAG_PRINTF(1, 2);
static void drv_activity(const char *fmt, ...)
{
    char buf[sizeof(D_sh->activity)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    memcpy(D_sh->activity, buf, sizeof(buf));
}

/* Announces a phase; at the round's target phase, waits for the checker's go. */
static void drv_announce(phase_t ph)
{
    static int64_t last;
    int64_t t = now_ns();
    if (last)
        drv_line("V phase %s took %.2f ms", phase_name(atomic_load(&D_sh->phase)), ms_of(t - last));
    last = t;
    atomic_store(&D_sh->phase, (int)ph);
    drv_line("P %d", (int)ph);
    if (ph != D_cfg->phase)
        return;
    struct pollfd p = {.fd = D_gofd, .events = POLLIN};
    char g = 0;
    int r;
    while ((r = poll(&p, 1, 5000)) < 0 && errno == EINTR) {
    }
    if (r <= 0 || read(D_gofd, &g, 1) != 1 || g != 'G')
        drv_fail(XC_SETUP, "no go from the checker at phase %s", phase_name(ph));
    D_t_go = now_ns();
}

/* ---- the watcher: a thread that notes when each worker exits (pidfd) ---- */

static struct {
    _Atomic int pidfd[MAXP];
    _Atomic int64_t death_ns[MAXP];
    atomic_int stop;
    pthread_t th;
    int started;
} W;

static void *watch_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&W.stop)) {
        struct pollfd p[MAXP];
        int idx[MAXP], n = 0;
        for (int i = 0; i < MAXP; i++) {
            int fd = atomic_load(&W.pidfd[i]);
            if (fd >= 0 && atomic_load(&W.death_ns[i]) == 0) {
                p[n].fd = fd;
                p[n].events = POLLIN;
                idx[n++] = i;
            }
        }
        int r = poll(p, (nfds_t)n, 2);
        if (r <= 0)
            continue;
        int64_t t = now_ns();
        for (int k = 0; k < n; k++)
            if (p[k].revents)
                atomic_store(&W.death_ns[idx[k]], t);
    }
    return NULL;
}

static void watch_add(unsigned i, pid_t pid)
{
    int fd = pidfd_open_(pid);
    if (fd < 0) {
        /* gone already (the runtime reaped it): died no later than now */
        atomic_store(&W.death_ns[i], now_ns());
        return;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    atomic_store(&W.pidfd[i], fd);
}

static void watch_stop(void)
{
    if (W.started) {
        atomic_store(&W.stop, 1);
        pthread_join(W.th, NULL);
        W.started = 0;
    }
    for (int i = 0; i < MAXP; i++) {
        int fd = atomic_exchange(&W.pidfd[i], -1);
        if (fd >= 0)
            close(fd);
    }
}

/* ---- call records ---- */

typedef enum { K_CREATE, K_GRAPH, K_COMPILE, K_EXECUTE, K_GET, K_DAG_DESTROY, K_RT_DESTROY } kind_t;

typedef struct {
    kind_t kind;
    adag_status_t st;
    int64_t t0, t1;
    int64_t exec_t0;  /* get: when its execute started */
    int poison;       /* get/execute of the poison input */
    int fault_call;   /* the create of the victim / crashy actor (may fail) */
    int pre;          /* on the compile-phase poison DAG */
    int bad;          /* get OK but values wrong */
    uint64_t ref;
    char what[48];
    char msg[200];
    char bad_txt[160];
} rec_t;

#define MAXREC 12000
static rec_t *R;
static unsigned NR;
static int R_full;

static rec_t *rec_add(kind_t k, const char *what, adag_status_t st, int64_t t0, int64_t t1)
{
    static rec_t dummy;
    if (NR >= MAXREC) {
        R_full = 1;
        memset(&dummy, 0, sizeof(dummy));
        return &dummy;
    }
    rec_t *r = &R[NR++];
    memset(r, 0, sizeof(*r));
    r->kind = k;
    r->st = st;
    r->t0 = t0;
    r->t1 = t1;
    snprintf(r->what, sizeof(r->what), "%s", what);
    if (st != ADAG_OK)
        snprintf(r->msg, sizeof(r->msg), "%s", adag_last_error());
    return r;
}

/* ---- the driver's run ---- */

typedef struct {
    adag_ref_t ref;
    int64_t t0;
    int poison;
    int64_t expect[MAXP + 2];
} pending_t;

typedef struct {
    adag_runtime_h rt;
    adag_actor_h actor[MAXP + 1]; /* 0..nproc-1 process, nproc thread; NULL: not created */
    char name[MAXP + 1][16];
    pid_t pid[MAXP];
    adag_graph_h g, pre_g;
    adag_dag_h dag, pre_dag;
    unsigned nouts;
    int has_sleep;
    unsigned sleeper;
    int victim_in_dag;
    int64_t prefix; /* value at die_if = input + prefix */
    int die_bound;
    char victim_name[16];
    int death_seen;      /* some call reported ADAG_ERR_ACTOR_DIED */
    int64_t fault_t0;    /* in-method: when the poison (or crashy create) started */
    int long_in_flight;  /* teardown with long methods in flight */
    int stuck;           /* a get timed out */
    uint64_t rng;
} drv_t;

static int64_t offset_of(const config_t *c, unsigned a)
{
    return c->offset[a];
}

/* Expected outputs of input v, sleep s. */
static void expected(const config_t *c, const drv_t *d, int64_t v, int64_t s, int64_t *out)
{
    unsigned k = 0;
    if (c->fanout) {
        for (unsigned i = 0; i < c->norder; i++)
            if (d->actor[c->order[i]])
                out[k++] = v + offset_of(c, c->order[i]);
    } else {
        int64_t x = v;
        for (unsigned i = 0; i < c->norder; i++)
            if (d->actor[c->order[i]])
                x += offset_of(c, c->order[i]);
        out[k++] = x;
    }
    if (d->has_sleep)
        out[k++] = s;
}

static int build_graph(const config_t *c, drv_t *d)
{
    adag_status_t st;
    int64_t t0 = now_ns();
    adag_node_h in0 = NULL, in1 = NULL, outs[MAXP + 2];
    unsigned n = 0;
    drv_activity("building the graph");
    if ((st = adag_graph_create(d->rt, &d->g)) != ADAG_OK ||
        (st = adag_graph_input(d->g, 0, &in0)) != ADAG_OK)
        goto fail;
    int want_die = fault_in_method(c->fault) && (c->phase == PH_EXECUTE || c->phase == PH_TEARDOWN);
    adag_node_h cur = in0;
    int64_t sum = 0;
    for (unsigned i = 0; i < c->norder; i++) {
        unsigned a = c->order[i];
        if (!d->actor[a])
            continue;
        adag_node_h x = NULL;
        adag_node_h arg = c->fanout ? in0 : cur;
        if ((st = adag_graph_bind(d->g, d->actor[a], "add", &arg, 1, &x)) != ADAG_OK)
            goto fail;
        sum += offset_of(c, a);
        if (a < c->nproc && a == c->victim &&
            !(c->phase == PH_CREATE && fault_in_method(c->fault))) {
            d->victim_in_dag = 1;
            if (want_die) {
                d->prefix = c->fanout ? offset_of(c, a) : sum;
                if ((st = adag_graph_bind(d->g, d->actor[a], "die_if", &x, 1, &x)) != ADAG_OK)
                    goto fail;
                d->die_bound = 1;
            }
        }
        if (c->fanout)
            outs[n++] = x;
        else
            cur = x;
    }
    if (!c->fanout)
        outs[n++] = cur;
    if (d->has_sleep) {
        adag_node_h s = NULL;
        if ((st = adag_graph_input(d->g, 1, &in1)) != ADAG_OK ||
            (st = adag_graph_bind(d->g, d->actor[d->sleeper], c->spin ? "spin_ms" : "sleep_ms",
                                  &in1, 1, &s)) != ADAG_OK)
            goto fail;
        outs[n++] = s;
    }
    if ((st = adag_graph_output(d->g, outs, n)) != ADAG_OK)
        goto fail;
    d->nouts = n;
    return 0;
fail:
    rec_add(K_GRAPH, "graph building", st, t0, now_ns());
    return -1;
}

static int dag_failed(const drv_t *d)
{
    return d->death_seen;
}

/* One batch: up to max_inflight executions, then their gets in random order. */
static void run_batch(const config_t *c, drv_t *d, unsigned *count, int poison_due)
{
    pending_t p[8];
    unsigned np = 0, b = 1 + rnd(&d->rng, c->max_inflight);
    for (unsigned k = 0; k < b; k++) {
        /* unique per execution, so stale data in a slot cannot pass for a
         * result; >= 100 at die_if, so only the poison triggers it */
        int64_t v = 100 + *count, s = rnd(&d->rng, 2);
        int poison = 0;
        if (poison_due && *count == c->poison_after) {
            v = (c->fault == F_WEXIT ? 7 : 11) - d->prefix;
            s = 0;
            poison = 1;
        }
        (*count)++;
        adag_value_t in[2] = {{.data = &v, .size = sizeof(v)}, {.data = &s, .size = sizeof(s)}};
        adag_ref_t ref = 0;
        drv_activity("adag_dag_execute (execution %u)", *count);
        int64_t t0 = now_ns();
        adag_status_t st = adag_dag_execute(d->dag, in, d->has_sleep ? 2 : 1, 0, &ref);
        rec_t *r = rec_add(K_EXECUTE, poison ? "adag_dag_execute (poison)" : "adag_dag_execute", st,
                           t0, now_ns());
        r->poison = poison;
        if (poison)
            d->fault_t0 = t0;
        if (st == ADAG_OK) {
            p[np].ref = ref;
            p[np].t0 = t0;
            p[np].poison = poison;
            expected(c, d, v, s, p[np].expect);
            np++;
        } else if (st == ADAG_ERR_ACTOR_DIED) {
            d->death_seen = 1;
        }
    }
    for (unsigned i = np; i > 1; i--) {
        unsigned j = rnd(&d->rng, i);
        pending_t t = p[i - 1];
        p[i - 1] = p[j];
        p[j] = t;
    }
    for (unsigned i = 0; i < np; i++) {
        adag_value_t out[MAXP + 2];
        memset(out, 0, sizeof(out));
        drv_activity("adag_dag_get ref %" PRIu64 " (timeout %d ms)", (uint64_t)p[i].ref,
                     GET_TIMEOUT_MS);
        int64_t t0 = now_ns();
        adag_status_t st = adag_dag_get(d->dag, p[i].ref, out, d->nouts, GET_TIMEOUT_MS);
        int64_t t1 = now_ns();
        rec_t *r = rec_add(K_GET, p[i].poison ? "adag_dag_get (poison)" : "adag_dag_get", st, t0, t1);
        r->exec_t0 = p[i].t0;
        r->poison = p[i].poison;
        r->ref = p[i].ref;
        if (st == ADAG_OK) {
            for (unsigned k = 0; k < d->nouts; k++) {
                int64_t x = 0;
                if (out[k].size != sizeof(int64_t) || !out[k].data) {
                    r->bad = 1;
                    snprintf(r->bad_txt, sizeof(r->bad_txt), "output %u has %zu bytes at %p", k,
                             out[k].size, out[k].data);
                    break;
                }
                memcpy(&x, out[k].data, sizeof(x));
                if (x != p[i].expect[k]) {
                    r->bad = 1;
                    snprintf(r->bad_txt, sizeof(r->bad_txt),
                             "output %u is %" PRId64 ", expected %" PRId64, k, x, p[i].expect[k]);
                    break;
                }
            }
        } else if (st == ADAG_ERR_ACTOR_DIED) {
            d->death_seen = 1;
        } else if (st == ADAG_ERR_TIMEOUT) {
            /* the DAG is stuck (a failure, reported by evaluate); waiting
             * GET_TIMEOUT_MS for each pending ref would only hit the round limit */
            d->stuck = 1;
            for (unsigned j = i; j < np; j++)
                (void)adag_dag_release(d->dag, p[j].ref);
            return;
        }
        (void)adag_dag_release(d->dag, p[i].ref);
    }
}

static int64_t victim_death_ns(const config_t *c, const drv_t *d, int *from_watcher)
{
    int64_t dw = 0, dk = atomic_load(&D_sh->kill_ns);
    if (c->phase != PH_CREATE || !fault_in_method(c->fault))
        dw = atomic_load(&W.death_ns[c->victim]);
    if (from_watcher)
        *from_watcher = dw != 0;
    int64_t best = 0;
    if (dw)
        best = dw;
    if (dk && (!best || dk < best))
        best = dk;
    if (!best && d->fault_t0 && fault_in_method(c->fault))
        best = d->fault_t0;
    return best;
}

/* Checks every call record once the death time is known. */
static void evaluate(const config_t *c, const drv_t *d, double *detect_ms)
{
    int allowed = fault_kills_worker(c->fault);
    int dw_known = 0;
    int64_t D = victim_death_ns(c, d, &dw_known);
    int64_t Dw = atomic_load(&W.death_ns[c->victim]);
    if (c->phase == PH_CREATE && fault_in_method(c->fault))
        Dw = 0;
    /* the earliest moment a death may be reported */
    int64_t floor_ns = 0;
    if (fault_external_worker(c->fault))
        floor_ns = atomic_load(&D_sh->kill_ns);
    else if (fault_in_method(c->fault))
        floor_ns = d->fault_t0;
    int reported = 0;
    *detect_ms = -1;
    for (unsigned i = 0; i < NR; i++) {
        const rec_t *r = &R[i];
        const char *what = r->what;
        double took = ms_of(r->t1 - r->t0);
        int is_td = r->kind == K_DAG_DESTROY || r->kind == K_RT_DESTROY;
        if (r->st == ADAG_ERR_ACTOR_DIED) {
            if (!allowed)
                drv_fail(XC_HEALTHY, "%s returned ADAG_ERR_ACTOR_DIED but no worker was faulted "
                                    "(fault %s): \"%s\"",
                         what, fault_names[c->fault], r->msg);
            else if (!floor_ns || r->t1 < floor_ns)
                drv_fail(XC_HEALTHY, "%s returned ADAG_ERR_ACTOR_DIED %s the fault was injected: \"%s\"",
                         what, floor_ns ? "before" : "but never", r->msg);
            else if (!strstr(r->msg, d->victim_name))
                drv_fail(XC_NAME, "%s returned ADAG_ERR_ACTOR_DIED with \"%s\", which does not name "
                                 "the dead actor %s",
                         what, r->msg, d->victim_name);
            if (allowed && D && *detect_ms < 0 && r->t1 >= D)
                *detect_ms = ms_of(r->t1 - D);
            if (allowed && D && *detect_ms < 0 && r->t1 < D)
                *detect_ms = 0;
            if (!r->pre)
                reported = 1;
        } else if (r->st != ADAG_OK && !r->pre && strstr(r->msg, d->victim_name)) {
            reported = 1;
        }
        /* promptness after the death (teardown has its own bounds) */
        if (allowed && D && !is_td && r->t1 > D) {
            int64_t from = r->t0 > D ? r->t0 : D;
            double late = ms_of(r->t1 - from);
            if (late > PROMPT_MS)
                drv_fail(XC_LATE, "%s returned %s %.0f ms after the death of %s (call took %.0f ms)",
                         what, adag_status_str(r->st), late, d->victim_name, took);
        }
        if (took > 500)
            drv_line("N %s took %.0f ms (%s)", what, took, adag_status_str(r->st));
        switch (r->kind) {
        case K_GET:
            if (took > GET_TIMEOUT_MS + 1000)
                drv_fail(XC_GET_SLOW, "%s took %.0f ms with timeout %d ms (%s)", what, took,
                         GET_TIMEOUT_MS, adag_status_str(r->st));
            if (r->st == ADAG_OK) {
                if (r->bad)
                    drv_fail(XC_BAD_DATA, "%s ref %" PRIu64 " returned ADAG_OK but %s", what,
                             r->ref, r->bad_txt);
                if (r->poison)
                    drv_fail(XC_BAD_DATA, "%s ref %" PRIu64 " returned ADAG_OK although its "
                                         "worker died running it",
                             what, r->ref);
                else if (allowed && Dw && r->exec_t0 > Dw && d->victim_in_dag && !r->pre)
                    drv_fail(XC_BAD_DATA, "%s ref %" PRIu64 " returned ADAG_OK for an execution "
                                         "started %.1f ms after %s died",
                             what, r->ref, ms_of(r->exec_t0 - Dw), d->victim_name);
            } else if (r->st != ADAG_ERR_ACTOR_DIED) {
                drv_fail(XC_STATUS, "%s ref %" PRIu64 " returned %s after %.0f ms: \"%s\"", what,
                         r->ref, adag_status_str(r->st), took, r->msg);
            }
            break;
        case K_EXECUTE:
            if (r->st != ADAG_OK && r->st != ADAG_ERR_ACTOR_DIED)
                drv_fail(XC_STATUS, "%s returned %s after %.0f ms: \"%s\"", what,
                         adag_status_str(r->st), took, r->msg);
            break;
        case K_CREATE:
        case K_GRAPH:
        case K_COMPILE:
            if (r->kind == K_CREATE && r->fault_call && fault_in_method(c->fault)) {
                if (r->st == ADAG_OK)
                    drv_fail(XC_STATUS, "%s of the crashy actor (init %s) returned ADAG_OK", what,
                             c->fault == F_WEXIT ? "exit" : "segv");
                else if (!strstr(r->msg, d->victim_name))
                    drv_fail(XC_NAME, "%s failed with \"%s\", which does not name %s", what, r->msg,
                             d->victim_name);
                if (took > PROMPT_MS)
                    drv_fail(XC_LATE, "%s of the crashy actor took %.0f ms", what, took);
            } else if (r->st != ADAG_OK && r->st != ADAG_ERR_ACTOR_DIED) {
                /* an error other than ACTOR_DIED is fine only for the faulted actor */
                if (!allowed || !strstr(r->msg, d->victim_name))
                    drv_fail(XC_STATUS, "%s returned %s: \"%s\"", what, adag_status_str(r->st),
                             r->msg);
                else
                    drv_line("N %s failed with %s (not ADAG_ERR_ACTOR_DIED): \"%s\"", what,
                             adag_status_str(r->st), r->msg);
            }
            break;
        case K_DAG_DESTROY:
        case K_RT_DESTROY: {
            int budget = r->kind == K_DAG_DESTROY ? c->dag_teardown_ms : RT_TEARDOWN_MS;
            if (r->st != ADAG_OK)
                drv_fail(XC_TEARDOWN_ERR, "%s returned %s: \"%s\"", what, adag_status_str(r->st),
                         r->msg);
            if (took > budget + TEARDOWN_SLACK_MS)
                drv_fail(XC_TEARDOWN_SLOW, "%s took %.0f ms (teardown timeout %d ms)", what, took,
                         budget);
            /* with no method running, teardown has no reason to wait for the
             * timeout: it did only if it could not stop a healthy worker */
            int stopped_victim = c->phase == PH_TEARDOWN &&
                                 (c->fault == F_WSTOP || c->fault == F_WSTOP_DKILL);
            if (!d->long_in_flight && !stopped_victim && took >= budget &&
                took <= budget + TEARDOWN_SLACK_MS)
                drv_fail(XC_TEARDOWN_SLOW, "%s took %.0f ms, the teardown timeout (%d ms), with "
                                          "no method running: a worker was not stopped cleanly",
                         what, took, budget);
            break;
        }
        }
    }
    /* a worker that died while the DAG ran must have been reported */
    if (allowed && d->victim_in_dag && c->phase <= PH_EXECUTE && !reported) {
        if (Dw)
            drv_fail(XC_UNREPORTED, "%s died (pid gone at +%.0f ms after go) but no call "
                                   "reported ADAG_ERR_ACTOR_DIED",
                     d->victim_name, ms_of(Dw - D_t_go));
        else
            drv_fail(XC_NOT_DELIVERED, "%s never died (fault %s at %s)", d->victim_name,
                     fault_names[c->fault], phase_name(c->phase));
    }
}

static void on_chld_reap(int sig)
{
    (void)sig;
    int e = errno;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = e;
}

static void on_chld_nothing(int sig)
{
    (void)sig;
}

/* After adag_dag_destroy: the actors whose handles are held stay alive (but
 * the faulted one and a worker whose method overran the teardown timeout),
 * and a new DAG over them works. */
static void check_survivors(const config_t *c, drv_t *d)
{
    sleep_us(10000); /* the watcher polls every 2 ms */
    adag_actor_h alive[MAXP + 1];
    unsigned n = 0;
    int64_t sum = 0;
    for (unsigned a = 0; a <= c->nproc; a++) {
        if (!d->actor[a])
            continue;
        if (a < c->nproc) {
            int faulted = (fault_kills_worker(c->fault) || c->fault == F_WSTOP_DKILL) &&
                          a == c->victim && !(c->phase == PH_CREATE && fault_in_method(c->fault));
            int overran = d->long_in_flight && a == d->sleeper;
            int64_t dead = atomic_load(&W.death_ns[a]);
            if (faulted || overran)
                continue;
            if (dead) {
                drv_fail(XC_HEALTHY_KILLED, "worker %s (pid %d) is dead after adag_dag_destroy; it "
                                            "was not faulted and had no method running",
                         d->name[a], (int)d->pid[a]);
                continue;
            }
        }
        alive[n++] = d->actor[a];
        sum += offset_of(c, a);
    }
    if (!n)
        return;
    drv_activity("a new DAG over the surviving actors");
    adag_graph_h g = NULL;
    adag_node_h cur = NULL;
    adag_dag_h dag = NULL;
    adag_status_t st;
    const char *step = "adag_graph_create";
    int64_t t0 = now_ns();
    if ((st = adag_graph_create(d->rt, &g)) != ADAG_OK)
        goto fail;
    step = "adag_graph_input";
    if ((st = adag_graph_input(g, 0, &cur)) != ADAG_OK)
        goto fail;
    step = "adag_graph_bind";
    for (unsigned i = 0; i < n; i++)
        if ((st = adag_graph_bind(g, alive[i], "add", &cur, 1, &cur)) != ADAG_OK)
            goto fail;
    step = "adag_graph_output";
    if ((st = adag_graph_output(g, &cur, 1)) != ADAG_OK)
        goto fail;
    adag_compile_params_t cp;
    memset(&cp, 0, sizeof(cp));
    cp.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT | ADAG_COMPILE_PARAM_SLOT_CAPACITY |
                    ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT;
    cp.max_inflight = 2;
    cp.slot_capacity = 64;
    cp.teardown_timeout_ms = 1000;
    step = "adag_graph_compile";
    if ((st = adag_graph_compile(g, &cp, &dag)) != ADAG_OK)
        goto fail;
    for (int64_t i = 0; i < 3; i++) {
        int64_t v = 5000 + i;
        adag_value_t in = {.data = &v, .size = sizeof(v)}, out;
        adag_ref_t ref;
        step = "adag_dag_execute";
        if ((st = adag_dag_execute(dag, &in, 1, 0, &ref)) != ADAG_OK)
            goto fail;
        step = "adag_dag_get";
        if ((st = adag_dag_get(dag, ref, &out, 1, GET_TIMEOUT_MS)) != ADAG_OK)
            goto fail;
        int64_t x = 0;
        if (out.size == sizeof(x))
            memcpy(&x, out.data, sizeof(x));
        if (out.size != sizeof(x) || x != v + sum) {
            drv_fail(XC_AFTER, "new DAG over %u surviving actors: got %" PRId64 " (%zu bytes), "
                               "expected %" PRId64,
                     n, x, out.size, v + sum);
            break;
        }
        (void)adag_dag_release(dag, ref);
    }
    step = "adag_dag_destroy";
    if ((st = adag_dag_destroy(dag)) != ADAG_OK)
        goto fail;
    dag = NULL;
    if (ms_of(now_ns() - t0) > PROMPT_MS)
        drv_fail(XC_AFTER, "a new DAG over %u surviving actors took %.0f ms", n,
                 ms_of(now_ns() - t0));
    return;
fail:
    drv_fail(XC_AFTER, "new DAG over %u surviving actors: %s returned %s: \"%s\"", n, step,
             adag_status_str(st), adag_last_error());
}

static int driver_main(const config_t *c, shared_t *sh, int wfd, int gofd)
{
    drv_t dd, *d = &dd;
    memset(d, 0, sizeof(*d));
    D_cfg = c;
    D_sh = sh;
    D_wfd = wfd;
    D_gofd = gofd;
    d->rng = c->seed ^ 0x5eed5eed5eedull;
    for (int i = 0; i < MAXP; i++)
        atomic_store(&W.pidfd[i], -1);
    R = calloc(MAXREC, sizeof(*R));
    if (!R) {
        drv_fail(XC_SETUP, "out of memory");
        return D_code;
    }

    if (c->chld != CHLD_DEFAULT) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sigemptyset(&sa.sa_mask);
        if (c->chld == CHLD_IGNORE) {
            sa.sa_handler = SIG_IGN; /* children are reaped by the kernel */
        } else if (c->chld == CHLD_REAP) {
            sa.sa_handler = on_chld_reap; /* the application reaps every child */
            sa.sa_flags = SA_RESTART;
        } else {
            sa.sa_handler = on_chld_nothing; /* no SA_RESTART: system calls see EINTR */
        }
        sigaction(SIGCHLD, &sa, NULL);
    }
    int fds0 = count_fds(), maps0 = count_memfd_maps();
    if (pthread_create(&W.th, NULL, watch_main, NULL) != 0) {
        drv_fail(XC_SETUP, "pthread_create (watcher)");
        return D_code;
    }
    W.started = 1;

    if (fault_in_method(c->fault) && c->phase == PH_CREATE)
        snprintf(d->victim_name, sizeof(d->victim_name), "fmCrash");
    else
        snprintf(d->victim_name, sizeof(d->victim_name), "fmP%u", c->victim);

    /* ---- create ---- */
    int announced = 0;
    if (c->phase != PH_CREATE) {
        drv_announce(PH_CREATE);
        announced = 1;
    }
    adag_status_t st;
    drv_activity("adag_runtime_create");
    if ((st = adag_runtime_create(NULL, &d->rt)) != ADAG_OK ||
        (st = adag_class_register(d->rt, &test_counter_class)) != ADAG_OK) {
        drv_fail(XC_SETUP, "adag_runtime_create: %s", adag_last_error());
        watch_stop();
        return D_code;
    }
    for (unsigned i = 0; i <= c->nproc; i++) {
        if (c->thread_actor && c->thread_pos == i) {
            adag_actor_params_t p;
            memset(&p, 0, sizeof(p));
            p.field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME |
                           ADAG_ACTOR_PARAM_PLACEMENT | ADAG_ACTOR_PARAM_INIT;
            p.class_name = "counter";
            p.name = "fmT";
            p.placement = ADAG_PLACEMENT_THREAD;
            p.init_data = &c->offset[c->nproc];
            p.init_size = sizeof(int64_t);
            snprintf(d->name[c->nproc], sizeof(d->name[0]), "fmT");
            drv_activity("adag_actor_create fmT (thread)");
            int64_t t0 = now_ns();
            st = adag_actor_create(d->rt, &p, &d->actor[c->nproc]);
            rec_add(K_CREATE, "adag_actor_create fmT", st, t0, now_ns());
            if (st != ADAG_OK)
                d->actor[c->nproc] = NULL;
        }
        if (i == c->nproc)
            break;
        int fault_here = 0;
        if (!announced && i == c->victim) {
            drv_announce(PH_CREATE);
            announced = 1;
            fault_here = 1;
            if (fault_in_method(c->fault)) {
                /* the analog of a method fault at creation: init crashes */
                const char *how = c->fault == F_WEXIT ? "exit" : "segv";
                adag_actor_params_t p;
                memset(&p, 0, sizeof(p));
                p.field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME |
                               ADAG_ACTOR_PARAM_PLACEMENT | ADAG_ACTOR_PARAM_MODULE |
                               ADAG_ACTOR_PARAM_INIT;
                p.class_name = "crashy";
                p.name = "fmCrash";
                p.placement = ADAG_PLACEMENT_PROCESS;
                p.module_path = ADAG_TEST_MODULE;
                p.init_data = how;
                p.init_size = 4;
                adag_actor_h crashy = NULL;
                drv_activity("adag_actor_create fmCrash (init %s)", how);
                int64_t t0 = now_ns();
                d->fault_t0 = t0;
                st = adag_actor_create(d->rt, &p, &crashy);
                rec_t *r = rec_add(K_CREATE, "adag_actor_create fmCrash", st, t0, now_ns());
                r->fault_call = 1;
                if (st == ADAG_OK)
                    drv_line("W 9 %d fmCrash", adag_actor_pid(crashy));
            }
        }
        adag_actor_params_t p;
        memset(&p, 0, sizeof(p));
        snprintf(d->name[i], sizeof(d->name[0]), "fmP%u", i);
        p.field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME | ADAG_ACTOR_PARAM_PLACEMENT |
                       ADAG_ACTOR_PARAM_MODULE | ADAG_ACTOR_PARAM_INIT;
        p.class_name = "counter";
        p.name = d->name[i];
        p.placement = ADAG_PLACEMENT_PROCESS;
        p.module_path = ADAG_TEST_MODULE;
        p.init_data = &c->offset[i];
        p.init_size = sizeof(int64_t);
        drv_activity("adag_actor_create %s", d->name[i]);
        int64_t t0 = now_ns();
        st = adag_actor_create(d->rt, &p, &d->actor[i]);
        char what[48];
        snprintf(what, sizeof(what), "adag_actor_create %s", d->name[i]);
        rec_t *r = rec_add(K_CREATE, what, st, t0, now_ns());
        r->fault_call = fault_here && fault_external_worker(c->fault);
        if (st != ADAG_OK) {
            d->actor[i] = NULL;
            continue;
        }
        d->pid[i] = adag_actor_pid(d->actor[i]);
        watch_add(i, d->pid[i]);
        drv_line("W %u %d %s", i, (int)d->pid[i], d->name[i]);
    }

    /* ---- compile ---- */
    d->sleeper = c->sleeper;
    if (!d->actor[d->sleeper]) {
        for (unsigned i = 0; i < c->nproc; i++)
            if (d->actor[i]) {
                d->sleeper = i;
                break;
            }
    }
    d->has_sleep = d->actor[d->sleeper] != NULL;
    int any = 0;
    for (unsigned i = 0; i <= c->nproc; i++)
        any |= d->actor[i] != NULL;
    int graph_ok = any && build_graph(c, d) == 0;
    adag_compile_params_t cp;
    memset(&cp, 0, sizeof(cp));
    cp.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT | ADAG_COMPILE_PARAM_SLOT_CAPACITY |
                    ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT | ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT;
    cp.max_inflight = c->max_inflight;
    cp.slot_capacity = 64;
    cp.execute_timeout_ms = GET_TIMEOUT_MS;
    cp.teardown_timeout_ms = c->dag_teardown_ms;
    int pre_poison = fault_in_method(c->fault) && c->phase == PH_COMPILE && d->actor[c->victim];
    adag_ref_t pre_ref = 0;
    int pre_sent = 0;
    int64_t pre_t0 = 0;
    if (pre_poison) {
        /* a small DAG over the victim: the poison runs there while the main
         * graph compiles */
        adag_node_h in = NULL, x = NULL;
        int64_t t0 = now_ns();
        if ((st = adag_graph_create(d->rt, &d->pre_g)) != ADAG_OK ||
            (st = adag_graph_input(d->pre_g, 0, &in)) != ADAG_OK ||
            (st = adag_graph_bind(d->pre_g, d->actor[c->victim], "die_if", &in, 1, &x)) != ADAG_OK ||
            (st = adag_graph_output(d->pre_g, &x, 1)) != ADAG_OK ||
            (st = adag_graph_compile(d->pre_g, &cp, &d->pre_dag)) != ADAG_OK) {
            rec_add(K_COMPILE, "compile of the poison DAG", st, t0, now_ns())->pre = 1;
            d->pre_dag = NULL;
        }
    }
    drv_announce(PH_COMPILE);
    if (pre_poison && d->pre_dag) {
        int64_t v = c->fault == F_WEXIT ? 7 : 11;
        adag_value_t in = {.data = &v, .size = sizeof(v)};
        pre_t0 = now_ns();
        d->fault_t0 = pre_t0;
        st = adag_dag_execute(d->pre_dag, &in, 1, 0, &pre_ref);
        rec_t *r = rec_add(K_EXECUTE, "adag_dag_execute (poison, small DAG)", st, pre_t0, now_ns());
        r->poison = 1;
        r->pre = 1;
        pre_sent = st == ADAG_OK;
    }
    if (graph_ok) {
        drv_activity("adag_graph_compile");
        int64_t t0 = now_ns();
        st = adag_graph_compile(d->g, &cp, &d->dag);
        rec_add(K_COMPILE, "adag_graph_compile", st, t0, now_ns());
        if (st != ADAG_OK) {
            d->dag = NULL;
            if (st == ADAG_ERR_ACTOR_DIED)
                d->death_seen = 1;
        }
    }
    if (pre_sent) {
        adag_value_t out;
        drv_activity("adag_dag_get (poison, small DAG)");
        int64_t t0 = now_ns();
        st = adag_dag_get(d->pre_dag, pre_ref, &out, 1, GET_TIMEOUT_MS);
        rec_t *r = rec_add(K_GET, "adag_dag_get (poison, small DAG)", st, t0, now_ns());
        r->poison = 1;
        r->pre = 1;
        r->exec_t0 = pre_t0;
        r->ref = pre_ref;
        (void)adag_dag_release(d->pre_dag, pre_ref);
    }

    /* ---- execute ---- */
    drv_announce(PH_EXECUTE);
    if (d->dag) {
        int need_death = fault_kills_worker(c->fault) && d->victim_in_dag &&
                         c->phase <= PH_EXECUTE;
        int poison_due = d->die_bound && c->phase == PH_EXECUTE;
        int64_t start = now_ns();
        int64_t from = D_t_go && c->phase <= PH_EXECUTE ? D_t_go : start;
        int64_t hard = from + (c->delay_us + (int64_t)c->stop_ms * 1000 + 4000000) * 1000;
        int64_t plain = start + (int64_t)(c->phase == PH_EXECUTE ? c->exec_ms : 30) * 1000000;
        unsigned count = 0, batches = 0, after_death = 0;
        while (!R_full && !d->stuck) {
            run_batch(c, d, &count, poison_due);
            batches++;
            int64_t t = now_ns();
            if (dag_failed(d) && ++after_death > 3)
                break;
            if (need_death) {
                if (!dag_failed(d) && t > hard)
                    break;
            } else if (batches >= 3 && t > plain && !dag_failed(d)) {
                break;
            }
            sleep_us(rnd(&d->rng, 1000));
        }
    }

    /* ---- teardown ---- */
    int td_fault = c->phase == PH_TEARDOWN && d->dag && !dag_failed(d);
    if (td_fault && !d->die_bound && d->has_sleep) {
        /* long methods in flight, so the teardown is under way when the fault lands */
        for (unsigned k = 0; k < c->nlong && k < c->max_inflight; k++) {
            int64_t v = 20, s = c->long_ms;
            adag_value_t in[2] = {{.data = &v, .size = sizeof(v)},
                                  {.data = &s, .size = sizeof(s)}};
            adag_ref_t ref;
            int64_t t0 = now_ns();
            st = adag_dag_execute(d->dag, in, 2, 0, &ref);
            rec_add(K_EXECUTE, "adag_dag_execute (long method before teardown)", st, t0, now_ns());
        }
        d->long_in_flight = 1;
        sleep_us(20000); /* let the first one start */
    }
    drv_announce(PH_TEARDOWN);
    if (td_fault && d->die_bound) {
        /* the poison, then teardown at once: the worker dies while it runs */
        int64_t v = (c->fault == F_WEXIT ? 7 : 11) - d->prefix, s = 0;
        adag_value_t in[2] = {{.data = &v, .size = sizeof(v)}, {.data = &s, .size = sizeof(s)}};
        adag_ref_t ref;
        int64_t t0 = now_ns();
        d->fault_t0 = t0;
        st = adag_dag_execute(d->dag, in, d->has_sleep ? 2 : 1, 0, &ref);
        rec_add(K_EXECUTE, "adag_dag_execute (poison, then teardown)", st, t0, now_ns())->poison = 1;
        sleep_us(rnd(&d->rng, 2000));
    }
    if (d->dag) {
        drv_activity("adag_dag_destroy");
        int64_t t0 = now_ns();
        st = adag_dag_destroy(d->dag);
        rec_add(K_DAG_DESTROY, "adag_dag_destroy", st, t0, now_ns());
    }
    if (d->pre_dag) {
        drv_activity("adag_dag_destroy (poison DAG)");
        int64_t t0 = now_ns();
        st = adag_dag_destroy(d->pre_dag);
        rec_add(K_DAG_DESTROY, "adag_dag_destroy (poison DAG)", st, t0, now_ns());
    }
    check_survivors(c, d);
    drv_activity("adag_runtime_destroy");
    int64_t t0 = now_ns();
    st = adag_runtime_destroy(d->rt);
    rec_add(K_RT_DESTROY, "adag_runtime_destroy", st, t0, now_ns());
    atomic_store(&sh->phase, PH_DONE);
    drv_activity("checks after teardown");

    /* ---- what is left ---- */
    watch_stop();
    pid_t kids[8];
    int64_t t_end = now_ns() + 1000000000;
    int nk;
    while ((nk = children_of(getpid(), kids, 8)) > 0 && now_ns() < t_end)
        sleep_us(10000);
    if (nk > 0) {
        char desc[600];
        proc_describe(kids[0], desc, sizeof(desc));
        drv_fail(XC_CHILDREN, "%d child process(es) left 1 s after adag_runtime_destroy, first: %s",
                 nk, desc);
    }
    int fds1 = count_fds(), maps1 = count_memfd_maps();
    if (fds1 != fds0)
        drv_fail(XC_FDS, "%d fds open after teardown, %d before adag_runtime_create", fds1, fds0);
    if (maps1 != maps0)
        drv_fail(XC_MEMFD, "%d memfd mappings after teardown, %d before", maps1, maps0);

    double detect = -1;
    evaluate(c, d, &detect);
    if (detect >= 0)
        drv_line("D %.1f", detect);
    if (R_full)
        drv_line("N call record full (%d calls)", MAXREC);
    free(R);

    if (fault_kills_driver(c->fault)) {
        /* the checker kills us; if it does not, it could not deliver the fault */
        drv_activity("waiting to be killed");
        sleep_us(10000000);
        drv_fail(XC_NOT_DELIVERED, "the driver was not killed");
    }
    return D_code;
}

/* ------------------------------------------------------------------ */
/* The checker                                                         */
/* ------------------------------------------------------------------ */

typedef struct {
    pid_t pid;
    int pidfd;
    int gone;
    char name[32];
} wk_t;

#define MAXW 32
#define MAXREASONS 24

typedef enum { R_PASS, R_FAIL, R_SKIP } verdict_t;

typedef struct {
    verdict_t v;
    char reasons[MAXREASONS][600];
    unsigned nreasons;
    char notes[16][400];
    unsigned nnotes;
    char skip_why[200];
    double detect_ms;
    double secs;
    const char *landed;
    int driver_code;
} result_t;

static void reason(result_t *res, const char *fmt, ...) ADAG_PRINTF(2, 3);
static void reason(result_t *res, const char *fmt, ...)
{
    res->v = R_FAIL;
    if (res->nreasons >= MAXREASONS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->reasons[res->nreasons++], sizeof(res->reasons[0]), fmt, ap);
    va_end(ap);
}

static void note(result_t *res, const char *fmt, ...) ADAG_PRINTF(2, 3);
static void note(result_t *res, const char *fmt, ...)
{
    if (res->nnotes >= 16)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->notes[res->nnotes++], sizeof(res->notes[0]), fmt, ap);
    va_end(ap);
}

typedef struct {
    char names[64][128];
    int n;
} shm_list_t;

static void shm_snapshot(shm_list_t *l)
{
    l->n = 0;
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && l->n < 64) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", e->d_name);
    }
    closedir(d);
}

typedef struct {
    shared_t *sh;
    pid_t child;
    int goff;
    wk_t w[MAXW];
    int nw;
    int victim_pidfd;
    pid_t victim_pid;
    int delivered;     /* 1: fault injected; -1: could not be */
    char undelivered[200];
    int64_t t_dkill;   /* when the driver got its SIGKILL */
    const char *landed;
    char errbuf[16384];
    size_t errlen;
    char lines[8192];
    size_t linelen;
    result_t *res;
    int driver_code_lines;
    int verbose;
} chk_t;

static wk_t *track(chk_t *k, pid_t pid, const char *name, pid_t expect_ppid)
{
    for (int i = 0; i < k->nw; i++)
        if (k->w[i].pid == pid)
            return &k->w[i];
    if (k->nw >= MAXW)
        return NULL;
    wk_t *w = &k->w[k->nw];
    memset(w, 0, sizeof(*w));
    w->pid = pid;
    snprintf(w->name, sizeof(w->name), "%s", name);
    w->pidfd = pidfd_open_(pid);
    if (w->pidfd < 0) {
        w->gone = 1;
    } else {
        fcntl(w->pidfd, F_SETFD, FD_CLOEXEC);
        pid_t ppid;
        char st;
        /* guard against a recycled pid: it must still be the driver's child
         * (or ours, once orphaned) */
        if (proc_stat(pid, &ppid, &st) != 0 || (ppid != expect_ppid && ppid != getpid())) {
            if (pidfd_exited(w->pidfd) || proc_stat(pid, &ppid, &st) != 0) {
                w->gone = 1;
            } else {
                close(w->pidfd);
                w->pidfd = -1;
                w->gone = 1;
            }
        }
    }
    k->nw++;
    return w;
}

/* The worker the fault targets: a known one, or at the create phase the
 * first new child of the driver (the actor being created). */
static int find_victim(chk_t *k, const config_t *c)
{
    if (c->phase != PH_CREATE) {
        char name[16];
        snprintf(name, sizeof(name), "fmP%u", c->victim);
        for (int i = 0; i < k->nw; i++)
            if (strcmp(k->w[i].name, name) == 0 && k->w[i].pidfd >= 0) {
                k->victim_pid = k->w[i].pid;
                k->victim_pidfd = k->w[i].pidfd;
                return 0;
            }
        snprintf(k->undelivered, sizeof(k->undelivered), "worker %s was not reported", name);
        return -1;
    }
    int64_t end = now_ns() + 3000000000LL;
    while (now_ns() < end) {
        pid_t kids[16];
        int n = children_of(k->child, kids, 16);
        for (int i = 0; i < n && i < 16; i++) {
            int known = 0;
            for (int j = 0; j < k->nw; j++)
                known |= k->w[j].pid == kids[i];
            if (known)
                continue;
            char name[16];
            snprintf(name, sizeof(name), "fmP%u", c->victim);
            wk_t *w = track(k, kids[i], name, k->child);
            if (!w || w->pidfd < 0)
                continue;
            k->victim_pid = w->pid;
            k->victim_pidfd = w->pidfd;
            return 0;
        }
        sleep_us(200);
    }
    snprintf(k->undelivered, sizeof(k->undelivered),
             "no new worker of the driver appeared within 3 s of the create phase");
    return -1;
}

static void inject(chk_t *k, const config_t *c)
{
    char g = 'G';
    if (write_all(k->goff, &g, 1) != 0) {
        k->delivered = -1;
        snprintf(k->undelivered, sizeof(k->undelivered), "the driver is gone before the go");
        return;
    }
    if (fault_in_method(c->fault)) {
        k->delivered = 1; /* the driver sends the poison itself, at once */
        return;
    }
    if (fault_external_worker(c->fault) && find_victim(k, c) != 0) {
        k->delivered = -1;
        return;
    }
    sleep_us(c->delay_us);
    k->landed = phase_name(atomic_load(&k->sh->phase));
    switch (c->fault) {
    case F_DKILL:
        k->t_dkill = now_ns();
        kill(k->child, SIGKILL);
        k->delivered = 1;
        break;
    case F_DSTOP:
        kill(k->child, SIGSTOP);
        sleep_us((int64_t)c->stop_ms * 1000);
        k->t_dkill = now_ns();
        kill(k->child, SIGKILL);
        k->delivered = 1;
        break;
    case F_WKILL:
        atomic_store(&k->sh->killed_pid, k->victim_pid);
        atomic_store(&k->sh->kill_ns, now_ns());
        if (pidfd_signal(k->victim_pidfd, SIGKILL) == 0) {
            k->delivered = 1;
        } else {
            k->delivered = -1;
            snprintf(k->undelivered, sizeof(k->undelivered), "SIGKILL of worker %d: %s",
                     (int)k->victim_pid, strerror(errno));
        }
        break;
    case F_WSTOP:
        if (pidfd_signal(k->victim_pidfd, SIGSTOP) != 0) {
            k->delivered = -1;
            snprintf(k->undelivered, sizeof(k->undelivered), "SIGSTOP of worker %d: %s",
                     (int)k->victim_pid, strerror(errno));
            break;
        }
        sleep_us((int64_t)c->stop_ms * 1000);
        atomic_store(&k->sh->killed_pid, k->victim_pid);
        atomic_store(&k->sh->kill_ns, now_ns());
        if (pidfd_signal(k->victim_pidfd, SIGKILL) == 0) {
            k->delivered = 1;
        } else {
            /* the runtime killed the stopped worker first (teardown timeout):
             * the fault was still delivered */
            k->delivered = 1;
            note(k->res, "the stopped worker %d was gone before the checker's SIGKILL",
                 (int)k->victim_pid);
        }
        break;
    case F_WSTOP_DKILL:
        if (pidfd_signal(k->victim_pidfd, SIGSTOP) != 0) {
            k->delivered = -1;
            snprintf(k->undelivered, sizeof(k->undelivered), "SIGSTOP of worker %d: %s",
                     (int)k->victim_pid, strerror(errno));
            break;
        }
        sleep_us((int64_t)c->stop_ms * 1000);
        k->t_dkill = now_ns();
        kill(k->child, SIGKILL);
        k->delivered = 1;
        break;
    case F_WEXIT:
    case F_WSEGV:
        k->delivered = 1; /* the driver sends the poison itself */
        break;
    default:
        break;
    }
}

static void handle_line(chk_t *k, const config_t *c, char *line)
{
    if (line[0] == 'W') {
        unsigned idx;
        int pid;
        char name[32] = "";
        if (sscanf(line, "W %u %d %31s", &idx, &pid, name) >= 2 && pid > 0)
            track(k, pid, name, k->child);
    } else if (line[0] == 'P') {
        int ph = atoi(line + 2);
        if (ph == (int)c->phase && !k->delivered)
            inject(k, c);
    } else if (line[0] == 'E') {
        int code = atoi(line + 2);
        const char *text = strchr(line + 2, ' ');
        reason(k->res, "[driver code %d: %s] %s", code, code_meaning(code), text ? text + 1 : "");
        k->driver_code_lines++;
    } else if (line[0] == 'D') {
        k->res->detect_ms = atof(line + 2);
    } else if (line[0] == 'N') {
        note(k->res, "%s", line + 2);
    } else if (line[0] == 'V' && k->verbose) {
        note(k->res, "%s", line + 2);
    }
}

static void drain_lines(chk_t *k, const config_t *c, int fd, int *open_)
{
    for (;;) {
        if (k->linelen >= sizeof(k->lines) - 1)
            k->linelen = 0; /* a line this long is garbage */
        ssize_t n = read(fd, k->lines + k->linelen, sizeof(k->lines) - 1 - k->linelen);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                *open_ = 0;
            return;
        }
        k->linelen += (size_t)n;
        char *start = k->lines, *nl;
        while ((nl = memchr(start, '\n', k->linelen - (size_t)(start - k->lines))) != NULL) {
            *nl = '\0';
            handle_line(k, c, start);
            start = nl + 1;
        }
        size_t rest = k->linelen - (size_t)(start - k->lines);
        memmove(k->lines, start, rest);
        k->linelen = rest;
    }
}

static void drain_err(chk_t *k, int fd, int *open_)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                *open_ = 0;
            return;
        }
        size_t room = sizeof(k->errbuf) - 1 - k->errlen;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(k->errbuf + k->errlen, buf, take);
        k->errlen += take;
        k->errbuf[k->errlen] = '\0';
    }
}

/* Reaps every exited child of ours except `keep`; returns how many it reaped. */
static int reap_children(pid_t keep)
{
    int n = 0;
    pid_t kids[64];
    int nk = children_of(getpid(), kids, 64);
    for (int i = 0; i < nk && i < 64; i++) {
        if (kids[i] == keep)
            continue;
        if (waitpid(kids[i], NULL, WNOHANG) == kids[i])
            n++;
    }
    return n;
}

/* After the driver is gone: every worker must be gone within `wait_ms` of
 * `since`. Orphans are our children now (subreaper): track them too. Returns
 * the time the last one went (ns) or 0. Survivors are reported and killed. */
static int64_t check_workers_gone(chk_t *k, int64_t since, int wait_ms, const char *why)
{
    pid_t kids[64];
    int nk = children_of(getpid(), kids, 64);
    for (int i = 0; i < nk && i < 64; i++)
        track(k, kids[i], "(unreported worker)", getpid());
    int64_t deadline = since + (int64_t)wait_ms * 1000000, last = 0;
    for (;;) {
        int alive = 0;
        reap_children(0);
        for (int i = 0; i < k->nw; i++) {
            wk_t *w = &k->w[i];
            if (w->gone)
                continue;
            if (w->pidfd < 0 || pidfd_exited(w->pidfd)) {
                w->gone = 1;
                last = now_ns();
            } else {
                alive++;
            }
        }
        if (!alive || now_ns() > deadline)
            break;
        sleep_us(2000);
    }
    for (int i = 0; i < k->nw; i++) {
        wk_t *w = &k->w[i];
        if (w->gone)
            continue;
        char desc[600];
        proc_describe(w->pid, desc, sizeof(desc));
        reason(k->res, "worker %s pid %d still alive %.1f s after %s: %s", w->name, (int)w->pid,
               ms_of(now_ns() - since) / 1000.0, why, desc);
        pidfd_signal(w->pidfd, SIGKILL);
    }
    /* the ones we killed: wait for them (they are ours, or the driver's if it lives) */
    int64_t end = now_ns() + 5000000000LL;
    for (int i = 0; i < k->nw; i++) {
        wk_t *w = &k->w[i];
        while (!w->gone && now_ns() < end) {
            reap_children(0);
            if (pidfd_exited(w->pidfd))
                w->gone = 1;
            else
                sleep_us(2000);
        }
        if (!w->gone)
            reason(k->res, "worker %d survived SIGKILL for 5 s", (int)w->pid);
    }
    reap_children(0);
    return last;
}

static void run_round(const config_t *c, int round_limit_ms, int verbose, shared_t *sh,
                      result_t *res)
{
    memset(res, 0, sizeof(*res));
    res->v = R_PASS;
    res->detect_ms = -1;
    res->landed = phase_name(c->phase);
    int64_t t_start = now_ns();
    int fds0 = count_fds();
    static shm_list_t shm0, shm1;
    shm_snapshot(&shm0);

    memset(sh, 0, sizeof(*sh));
    atomic_store(&sh->phase, -1);
    int prog[2], gop[2], errp[2];
    if (pipe2(prog, O_CLOEXEC) || pipe2(gop, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
        reason(res, "checker: pipe2: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        reason(res, "checker: fork: %s", strerror(errno));
        return;
    }
    if (child == 0) {
        signal(SIGPIPE, SIG_DFL);
        close(prog[0]);
        close(gop[1]);
        close(errp[0]);
        dup2(errp[1], 2); /* the driver's (and its workers') stderr comes to the checker */
        close(errp[1]);
        _exit(driver_main(c, sh, prog[1], gop[0]));
    }
    close(prog[1]);
    close(gop[0]);
    close(errp[1]);
    fcntl(prog[0], F_SETFL, O_NONBLOCK);
    fcntl(errp[0], F_SETFL, O_NONBLOCK);

    static chk_t kk;
    chk_t *k = &kk;
    memset(k, 0, sizeof(*k));
    k->sh = sh;
    k->child = child;
    k->goff = gop[1];
    k->victim_pidfd = -1;
    k->res = res;
    k->landed = NULL;
    k->verbose = verbose;
    int dpfd = pidfd_open_(child);
    int prog_open = 1, err_open = 1, hang = 0, exited = 0;
    int64_t deadline = t_start + (int64_t)round_limit_ms * 1000000;
    while (!exited) {
        struct pollfd p[3];
        nfds_t n = 0;
        int ip = -1, ie = -1, id = -1;
        if (prog_open) {
            p[n].fd = prog[0];
            p[n].events = POLLIN;
            ip = (int)n++;
        }
        if (err_open) {
            p[n].fd = errp[0];
            p[n].events = POLLIN;
            ie = (int)n++;
        }
        if (dpfd >= 0) {
            p[n].fd = dpfd;
            p[n].events = POLLIN;
            id = (int)n++;
        }
        int r = poll(p, n, 50);
        if (r < 0 && errno != EINTR)
            break;
        if (ip >= 0 && p[ip].revents)
            drain_lines(k, c, prog[0], &prog_open);
        if (ie >= 0 && p[ie].revents)
            drain_err(k, errp[0], &err_open);
        if ((id >= 0 && p[id].revents) || (dpfd < 0 && !prog_open))
            exited = 1;
        if (!exited && now_ns() > deadline && !hang) {
            hang = 1;
            char act[sizeof(sh->activity)];
            memcpy(act, sh->activity, sizeof(act));
            act[sizeof(act) - 1] = '\0';
            reason(res, "HANG: the driver did not finish within %d s (phase %s, doing: %s)",
                   round_limit_ms / 1000, phase_name(atomic_load(&sh->phase)), act);
            k->t_dkill = now_ns();
            kill(child, SIGKILL);
        }
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (dpfd >= 0)
        close(dpfd);
    /* what the driver wrote before it ended (not "until EOF": a worker
     * stopped between fork and exec still holds the pipe) */
    if (prog_open)
        drain_lines(k, c, prog[0], &prog_open);
    drain_err(k, errp[0], &err_open);

    if (k->landed)
        res->landed = k->landed;
    int killed_by_us = k->t_dkill != 0;
    if (killed_by_us) {
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
            reason(res, "the driver ended with status 0x%x before the checker's SIGKILL", status);
        unsigned before = res->nreasons;
        int64_t last = check_workers_gone(k, k->t_dkill, PROMPT_MS,
                                          hang ? "the hung driver was killed"
                                               : "their driver was killed");
        if (!hang && res->nreasons == before)
            res->detect_ms = last ? ms_of(last - k->t_dkill) : 0;
    } else {
        if (WIFSIGNALED(status)) {
            reason(res, "the driver died of signal %d (%s)", WTERMSIG(status),
                   strsignal(WTERMSIG(status)));
        } else if (WIFEXITED(status)) {
            res->driver_code = WEXITSTATUS(status);
            if (res->driver_code == XC_NOT_DELIVERED && res->nreasons <= 1) {
                res->v = R_SKIP;
                res->nreasons = 0;
                snprintf(res->skip_why, sizeof(res->skip_why), "%s", code_meaning(XC_NOT_DELIVERED));
            } else if (res->driver_code != 0) {
                if (!k->driver_code_lines)
                    reason(res, "the driver exited with code %d (%s)", res->driver_code,
                           code_meaning(res->driver_code));
            } else if (k->driver_code_lines) {
                reason(res, "the driver reported failures but exited 0");
            }
        }
        /* the driver is gone: nothing of the round may remain */
        int before = res->nreasons;
        check_workers_gone(k, now_ns(), 0, "their driver exited");
        for (unsigned i = (unsigned)before; i < res->nreasons; i++) {
            char tmp[600];
            snprintf(tmp, sizeof(tmp), "process left after the round: %s", res->reasons[i]);
            snprintf(res->reasons[i], sizeof(res->reasons[i]), "%s", tmp);
        }
    }
    if (k->delivered <= 0 && res->v == R_PASS) {
        res->v = R_SKIP;
        snprintf(res->skip_why, sizeof(res->skip_why), "fault not delivered: %s",
                 k->delivered < 0 ? k->undelivered : "the driver never reached the phase");
    }
    /* hygiene of the round */
    int nk = children_of(getpid(), NULL, 0);
    if (nk) {
        reason(res, "%d child process(es) of the checker left after the round", nk);
        pid_t kids[64];
        nk = children_of(getpid(), kids, 64);
        for (int i = 0; i < nk && i < 64; i++) {
            kill(kids[i], SIGKILL);
            waitpid(kids[i], NULL, 0);
        }
    }
    for (int i = 0; i < k->nw; i++)
        if (k->w[i].pidfd >= 0)
            close(k->w[i].pidfd);
    close(prog[0]);
    close(gop[1]);
    close(errp[0]);
    int fds1 = count_fds();
    if (fds1 != fds0)
        reason(res, "the checker has %d fds after the round, %d before", fds1, fds0);
    shm_snapshot(&shm1);
    for (int i = 0; i < shm1.n; i++) {
        int old = 0;
        for (int j = 0; j < shm0.n; j++)
            old |= strcmp(shm1.names[i], shm0.names[j]) == 0;
        if (!old)
            reason(res, "new file left in /dev/shm: %s", shm1.names[i]);
    }
    if (res->v == R_FAIL && k->errlen) {
        /* the library's log (ADAG_LOG_LEVEL=2) helps to read a failure: its
         * last lines */
        char *lines[6];
        int nl = 0;
        for (char *q = k->errbuf + k->errlen; q > k->errbuf && nl < 6;) {
            while (q > k->errbuf && (q[-1] == '\n' || q[-1] == '\0'))
                *--q = '\0';
            char *b = q;
            while (b > k->errbuf && b[-1] != '\n')
                b--;
            if (b == q)
                break;
            lines[nl++] = b;
            q = b;
        }
        for (int i = nl - 1; i >= 0; i--)
            note(res, "driver stderr: %.300s", lines[i]);
    }
    res->secs = ms_of(now_ns() - t_start) / 1000.0;
}

/* ------------------------------------------------------------------ */
/* main                                                                */
/* ------------------------------------------------------------------ */

static int parse_list(const char *arg, const char *const *names, int n, int *mask)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(tok, names[i]) == 0) {
                mask[i] = 1;
                found = 1;
            }
        if (!found) {
            fprintf(stderr, "fault-matrix: unknown name '%s'; one of:", tok);
            for (int i = 0; i < n; i++)
                fprintf(stderr, " %s", names[i]);
            fprintf(stderr, "\n");
            return -1;
        }
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: fault-matrix [SEED] [--seed N] [--rounds N] [--seconds S] [--start I]\n"
            "                    [--fault a,b] [--phase a,b] [--sigchld a,b] [--round-limit S] [-v]\n"
            "  --seconds S: start no new round after S seconds (default 50; 0: no limit)\n"
            "  --rounds N: at most N rounds (default: as many as the time allows)\n"
            "  --start I: first round index (reproduce round I: --start I --rounds 1)\n");
}

int main(int argc, char **argv)
{
    uint64_t seed = 20261122;
    long rounds = -1, start = 0;
    double seconds = 50;
    int round_limit_s = 15, verbose = 0;
    int fmask[NFAULTS] = {0}, pmask[NPHASES] = {0}, fset = 0, pset = 0;
    int cmask[NCHLD] = {1, 1, 1, 1};
    char filters[300] = "";

    /* one line per round as it ends, also into a file or a pipe (CI) */
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--seed") == 0 && v) {
            seed = strtoull(v, NULL, 0);
            i++;
        } else if (strcmp(a, "--rounds") == 0 && v) {
            rounds = atol(v);
            i++;
        } else if (strcmp(a, "--seconds") == 0 && v) {
            seconds = atof(v);
            i++;
        } else if (strcmp(a, "--start") == 0 && v) {
            start = atol(v);
            i++;
        } else if (strcmp(a, "--round-limit") == 0 && v) {
            round_limit_s = atoi(v);
            i++;
        } else if (strcmp(a, "--fault") == 0 && v) {
            if (parse_list(v, fault_names, NFAULTS, fmask))
                return 2;
            fset = 1;
            snprintf(filters + strlen(filters), sizeof(filters) - strlen(filters), " --fault %s", v);
            i++;
        } else if (strcmp(a, "--phase") == 0 && v) {
            if (parse_list(v, phase_names, NPHASES, pmask))
                return 2;
            pset = 1;
            snprintf(filters + strlen(filters), sizeof(filters) - strlen(filters), " --phase %s", v);
            i++;
        } else if (strcmp(a, "--sigchld") == 0 && v) {
            memset(cmask, 0, sizeof(cmask));
            if (parse_list(v, chld_names, NCHLD, cmask))
                return 2;
            snprintf(filters + strlen(filters), sizeof(filters) - strlen(filters), " --sigchld %s",
                     v);
            i++;
        } else if (strcmp(a, "-v") == 0) {
            verbose = 1;
        } else if (isdigit((unsigned char)a[0])) {
            seed = strtoull(a, NULL, 0);
        } else {
            usage();
            return 2;
        }
    }
    if (round_limit_s < 5)
        round_limit_s = 5;

    /* combos */
    int combos[NFAULTS * NPHASES][2], ncombos = 0;
    for (int f = 0; f < NFAULTS; f++)
        for (int p = 0; p < NPHASES; p++)
            if ((!fset || fmask[f]) && (!pset || pmask[p])) {
                combos[ncombos][0] = f;
                combos[ncombos][1] = p;
                ncombos++;
            }
    if (!ncombos) {
        fprintf(stderr, "fault-matrix: no fault/phase combination selected\n");
        return 2;
    }

    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        fprintf(stderr, "fault-matrix: prctl(PR_SET_CHILD_SUBREAPER): %s\n", strerror(errno));
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    /* the drivers log the runtime's warnings (collected with their stderr)
     * and wait ADAG_TEARDOWN_TIMEOUT_MS for a worker in adag_runtime_destroy */
    setenv("ADAG_LOG_LEVEL", "2", 0);
    char td[16];
    snprintf(td, sizeof(td), "%d", RT_TEARDOWN_MS);
    setenv("ADAG_TEARDOWN_TIMEOUT_MS", td, 1);

    shared_t *sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    if (sh == MAP_FAILED) {
        fprintf(stderr, "fault-matrix: mmap: %s\n", strerror(errno));
        return 2;
    }

    printf("fault-matrix: seed %" PRIu64 ", %d fault/phase combinations, budget %.0f s%s%s\n", seed,
           ncombos, seconds, filters[0] ? ", filters:" : "", filters);
    fflush(stdout);

    int passed = 0, failed = 0, skipped = 0, ran = 0;
    int tally[NFAULTS][NPHASES][3];
    memset(tally, 0, sizeof(tally));
    int64_t t0 = now_ns();
    double worst = 0;
    static result_t res;
    for (long i = start; rounds < 0 || i < start + rounds; i++) {
        if (seconds > 0 && ms_of(now_ns() - t0) / 1000.0 >= seconds)
            break;
        /* every cycle of ncombos rounds runs each combination once, in a
         * seeded order */
        long cycle = i / ncombos, pos = i % ncombos;
        int perm[NFAULTS * NPHASES];
        for (int j = 0; j < ncombos; j++)
            perm[j] = j;
        uint64_t ps = seed * 0x2545f4914f6cdd1dull + (uint64_t)cycle;
        for (int j = ncombos; j > 1; j--) {
            int r = (int)rnd(&ps, (unsigned)j), t = perm[j - 1];
            perm[j - 1] = perm[r];
            perm[r] = t;
        }
        int f = combos[perm[pos]][0], p = combos[perm[pos]][1];
        uint64_t rs = seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
        uint64_t rs2 = rs;
        rs = splitmix64(&rs2);
        config_t c;
        make_config(&c, rs, (unsigned)i, (fault_t)f, (phase_t)p, cmask);
        run_round(&c, round_limit_s * 1000, verbose, sh, &res);
        ran++;
        if (res.secs > worst)
            worst = res.secs;
        char shape[64];
        snprintf(shape, sizeof(shape), "%u%s %s k=%u%s%s", c.nproc, c.thread_actor ? "+T" : "",
                 c.fanout ? "fanout" : "chain", c.max_inflight,
                 c.chld != CHLD_DEFAULT ? " chld=" : "", c.chld != CHLD_DEFAULT ? chld_names[c.chld] : "");
        char det[32] = "-";
        if (res.detect_ms >= 0)
            snprintf(det, sizeof(det), "%.1fms", res.detect_ms);
        char landed[40] = "";
        if (strcmp(res.landed, phase_name(c.phase)) != 0)
            snprintf(landed, sizeof(landed), " (landed: %s)", res.landed);
        const char *verdict = res.v == R_PASS ? "PASS" : res.v == R_FAIL ? "FAIL" : "SKIP";
        printf("[%4ld] seed=%016" PRIx64 " %-23s %-8s%s  %-30s %s  detect=%s  %.2fs\n", i, c.seed,
               fault_names[f], phase_name(p), landed, shape, verdict, det, res.secs);
        if (res.v == R_SKIP)
            printf("       skipped: %s\n", res.skip_why);
        if (res.v == R_FAIL) {
            for (unsigned j = 0; j < res.nreasons; j++)
                printf("       - %s\n", res.reasons[j]);
            if (res.nreasons >= MAXREASONS)
                printf("       - (more not shown)\n");
        }
        if (res.v == R_FAIL || verbose)
            for (unsigned j = 0; j < res.nnotes; j++)
                printf("       note: %s\n", res.notes[j]);
        if (res.v == R_FAIL)
            printf("       reproduce: %s --seed %" PRIu64 " --start %ld --rounds 1%s\n", argv[0],
                   seed, i, filters);
        fflush(stdout);
        tally[f][p][res.v]++;
        if (res.v == R_PASS)
            passed++;
        else if (res.v == R_FAIL)
            failed++;
        else
            skipped++;
    }
    double total = ms_of(now_ns() - t0) / 1000.0;
    printf("\nper combination (passed/failed/skipped):\n%-24s", "");
    for (int p = 0; p < NPHASES; p++)
        printf(" %-12s", phase_name(p));
    printf("\n");
    for (int f = 0; f < NFAULTS; f++) {
        printf("%-24s", fault_names[f]);
        for (int p = 0; p < NPHASES; p++) {
            char cell[24];
            snprintf(cell, sizeof(cell), "%d/%d/%d", tally[f][p][R_PASS], tally[f][p][R_FAIL],
                     tally[f][p][R_SKIP]);
            printf(" %-12s", cell);
        }
        printf("\n");
    }
    printf("ran %d rounds in %.1f s (%.2f s per round, slowest %.2f s), seed %" PRIu64 "\n", ran,
           total, ran ? total / ran : 0.0, worst, seed);
    if (skipped)
        printf("fault-matrix: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("fault-matrix: %d passed, %d failed\n", passed, failed);
    munmap(sh, sizeof(shared_t));
    return failed ? 1 : 0;
}

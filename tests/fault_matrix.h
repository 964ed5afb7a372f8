/*
 * The fault matrix (what it does and how to run it: fault_matrix.c):
 * declarations shared by its files.
 *   fault_matrix.c          main: options, the rounds in a seeded order, the summary
 *   fault_matrix_config.c   faults, phases, a round's seeded configuration, exit codes
 *   fault_matrix_driver.c   the driver (a forked child): builds, runs and tears down
 *   fault_matrix_eval.c     the driver's checks of its call records and survivors
 *   fault_matrix_checker.c  the checker: injects the fault, reads the driver's
 *                           report, checks what is left after the round
 */
#ifndef ADAG_TESTS_FAULT_MATRIX_H
#define ADAG_TESTS_FAULT_MATRIX_H

#include <adag.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "probes.h"

/* ------------------------------------------------------------------ */
/* Small utilities                                                     */
/* ------------------------------------------------------------------ */

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double ms_of(int64_t ns)
{
    return (double)ns / 1e6;
}

static inline void sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static inline uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, n) (n > 0) */
static inline unsigned rnd(uint64_t *s, unsigned n)
{
    return (unsigned)(splitmix64(s) % n);
}

static inline int pidfd_open_(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static inline int pidfd_signal(int pidfd, int sig)
{
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* 1 if the process behind pidfd has exited (zombie or reaped). */
static inline int pidfd_exited(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

/* Children of `parent` (by ppid in /proc/<pid>/stat), up to max (0 if /proc
 * cannot be read). */
static inline int children_of(pid_t parent, pid_t *out, int max)
{
    int n = probe_children(parent, out, max, NULL);
    return n < 0 ? 0 : n;
}

static inline int write_all(int fd, const char *buf, size_t len)
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
/* The matrix (fault_matrix_config.c)                                  */
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

extern const char *const fault_names[NFAULTS];

typedef enum { PH_CREATE, PH_COMPILE, PH_EXECUTE, PH_TEARDOWN, PH_DONE, NPHASES = PH_DONE } phase_t;

/* "create" ... "done"; phase_name(-1) is "start" */
extern const char *const phase_names[PH_DONE + 1];
const char *phase_name(int ph);

/* the driver dies (is killed) */
int fault_kills_driver(fault_t f);
/* a worker dies and the driver lives on */
int fault_kills_worker(fault_t f);
/* the worker dies inside a method (exit, segfault) */
int fault_in_method(fault_t f);
/* the checker signals a worker */
int fault_external_worker(fault_t f);

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
    /* a method of no argument ("base", reading the DAG's start channel) on
     * actor zero_actor, one more output (drawn last: earlier fields of a
     * seed are what they were before it existed) */
    int zero_arg;
    unsigned zero_actor;
} config_t;

/* How the driver program treats SIGCHLD: the runtime must notice deaths
 * whatever the application does with it. */
enum { CHLD_DEFAULT, CHLD_IGNORE, CHLD_REAP, CHLD_EINTR, NCHLD };
extern const char *const chld_names[NCHLD];

/* The configuration of round `round` of seed `seed` for fault f at phase ph
 * (chld_mask: the SIGCHLD dispositions allowed). */
void make_config(config_t *c, uint64_t seed, unsigned round, fault_t f, phase_t ph,
                 const int *chld_mask);

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

const char *code_meaning(int code);

/* ------------------------------------------------------------------ */
/* The driver (fault_matrix_driver.c) and the checker                  */
/* ------------------------------------------------------------------ */

/* The driver's whole run in the forked child: reports on wfd, waits for the
 * checker's go on gofd at the round's phase; returns its exit code (XC_*). */
int driver_main(const config_t *c, shared_t *sh, int wfd, int gofd);

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

/* Runs one round: forks the driver, injects the fault, checks what is left. */
void run_round(const config_t *c, int round_limit_ms, int verbose, shared_t *sh,
               result_t *res);

#endif

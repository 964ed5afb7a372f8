/*
 * The allreduce rows: adag's host communicator (gpu/comm.h) against Open
 * MPI, 4 ranks on this host, SUM over f32 elements, out of place (separate
 * send and receive buffers) on both sides, the same sizes in the same run.
 *
 * adag side (run_allreduce): the driver creates the communicator's id and
 * forks one process per rank (plain fork: the emulated device needs no fresh
 * context). Rank r opens emulated device r (emu:0..3, one device per rank as
 * one GPU per rank would be: the host backend's allreduce costs the same
 * on one device or several, but distinct devices are the layout the rows
 * stand for), a stream, device memory for both buffers, joins the
 * communicator and, per call, enqueues the allreduce and synchronizes the
 * stream: a call's time runs from before the enqueue until stream_sync
 * returns, the completion MPI_Allreduce's return means. The time of call i
 * is the max over ranks; median and p99 are over calls.
 *
 * MPI side (baseline_mpi_allreduce): bench/peers/mpi_allreduce.c, built
 * with mpicc next to adag-bench (bench/mpi-allreduce), run once per
 * adag-bench run for every size of the run under
 *   mpirun -np 4 --oversubscribe [--allow-run-as-root]
 *          --mca pml ob1 --mca btl self,vader
 * (shared memory on one host: Open MPI 4.1's vader BTL, with its default
 * single-copy mechanism, CMA, for large messages), timed the same way.
 *
 * Both sides: warm-up calls, timed, pick the number of timed calls (enough
 * for about 0.2 s, 0.02 s with --quick; the slowest rank's figure, so every
 * rank makes the same calls); the result is checked after the timed calls.
 *
 * Memory ordering (the adag side's shared control page): `arrived` and
 * `abort` are seq_cst atomics. A rank writes warm_us[rank] and its
 * latencies before its seq_cst fetch_add on `arrived` (or before it exits,
 * which the driver's waitpid orders); a rank reads the others' warm_us
 * after its seq_cst load saw their increments.
 */
#include "bench.h"

#include "common/clock.h"
#include "gpu/comm.h"
#include "gpu/device.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define COLL_MAX_RANKS 8
#define COLL_MAX_ITERS 20000
#define COLL_SETUP_MS 60000 /* init, barriers, one call: generous, not timed */
#define COLL_RUN_MS 300000  /* a whole adag run, then its ranks are killed */

double allreduce_bus_gbps(unsigned nranks, size_t bytes, double us)
{
    /* nccl-tests' bus bandwidth: algorithm bandwidth times 2 (n - 1) / n,
     * the bytes each rank's link carries in a ring allreduce */
    return us > 0 ? bytes / (us * 1e3) * 2.0 * (nranks - 1) / nranks : 0;
}

static double coll_seconds(const bench_opts_t *o)
{
    return o->quick ? 0.02 : 0.2;
}

static int coll_warmup(const bench_opts_t *o)
{
    return o->quick ? 3 : 10;
}

/* rank r's element i, and the sum over n ranks: small integers, exact in
 * f32 whatever the order of summation */
static float coll_element(unsigned rank, size_t i)
{
    return (float)((int)(i % 7) + (int)rank + 1);
}

static float coll_expected(unsigned nranks, size_t i)
{
    return (float)((int)nranks * (int)(i % 7) + (int)(nranks * (nranks + 1) / 2));
}

/* ---- where the MPI side is ---- */

static void mpi_peer_path(char *path, size_t len)
{
    char dir[PATH_MAX];
    bench_exe_dir(dir, sizeof dir);
    snprintf(path, len, "%s/bench/mpi-allreduce", dir);
}

/* Whether `name` is an executable in a folder of PATH. */
static int on_path(const char *name)
{
    const char *path = getenv("PATH");
    char buf[PATH_MAX];
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        if (n > 0 && n + strlen(name) + 2 < sizeof buf) {
            snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, name);
            if (access(buf, X_OK) == 0)
                return 1;
        }
        path = end ? end + 1 : NULL;
    }
    return 0;
}

int allreduce_row_available(unsigned nranks, char *why, size_t len)
{
    const adag_comm_ops_t *comm = adag__comm_backend_named("host");
    const adag_device_ops_t *dev = adag__device_backend_named("emu");
    char peer[PATH_MAX + 32], dev_why[160] = "";
    unsigned ndev = dev ? dev->probe(dev_why, sizeof dev_why) : 0;
    mpi_peer_path(peer, sizeof peer);
    if (nranks < 2 || nranks > COLL_MAX_RANKS)
        snprintf(why, len, "%u ranks: the rows run 2..%d", nranks, COLL_MAX_RANKS);
    else if (!comm || !comm->allreduce)
        snprintf(why, len, "the host communicator has no allreduce in this build");
    else if (ndev < nranks)
        snprintf(why, len, "%u ranks need %u emulated devices, %u here (ADAG_EMU_DEVICES)%s%s",
                 nranks, nranks, ndev, dev_why[0] ? ": " : "", ndev ? "" : dev_why);
    else if (access(peer, X_OK) != 0)
        snprintf(why, len, "mpicc not found (%s was not built)", peer);
    else if (!on_path("mpirun"))
        snprintf(why, len, "mpirun not found (Debian: apt-get install openmpi-bin)");
    else
        return 0;
    return -1;
}

/* ---- the adag side ---- */

typedef struct {
    char device[8], comm[8]; /* the backends: "emu" and "host", or "cuda" and "nccl" */
    unsigned nranks;
    size_t bytes;
    double seconds;
    int warmup;
    adag_comm_id_t id;
    _Atomic uint32_t arrived, abort;
    _Atomic uint32_t error_claimed;
    char error[256];
    double warm_us[COLL_MAX_RANKS];
    long iters;                      /* timed calls (every rank computes the same) */
    double lat[COLL_MAX_RANKS][COLL_MAX_ITERS];
} coll_ctl_t;

/* The first failure's text wins; every rank sees abort. */
static int ADAG_PRINTF(2, 3) coll_fail(coll_ctl_t *c, const char *fmt, ...)
{
    uint32_t was = 0;
    if (atomic_compare_exchange_strong(&c->error_claimed, &was, 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->error, sizeof c->error, fmt, ap);
        va_end(ap);
    }
    atomic_store(&c->abort, 1);
    return -1;
}

/* The k-th barrier (k = 1, 2, ...): every rank has arrived k times. */
static int coll_barrier(coll_ctl_t *c, unsigned rank, uint32_t k)
{
    int64_t deadline = adag__deadline_ms(COLL_SETUP_MS);
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < k * c->nranks) {
        if (atomic_load(&c->abort))
            return -1;
        if (adag__now_ns() > deadline)
            return coll_fail(c, "allreduce rank %u: barrier %u not reached by every rank within "
                             "%d ms", rank, k, COLL_SETUP_MS);
        sched_yield();
    }
    return 0;
}

#define RANK_TRY(c, call, ...)                                                              \
    do {                                                                                    \
        if ((call) != ADAG_OK) {                                                            \
            char what_[160];                                                                \
            snprintf(what_, sizeof what_, __VA_ARGS__);                                     \
            coll_fail((c), "allreduce rank %u: %s: %s", rank, what_, adag_last_error());    \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

/* One rank, in its own process: 0 on success. */
static int coll_rank(coll_ctl_t *c, unsigned rank)
{
    const adag_device_ops_t *ops = adag__device_backend_named(c->device);
    const adag_comm_ops_t *cops = adag__comm_backend_named(c->comm);
    adag_device_t *dev = NULL;
    adag_dev_stream_t *s = NULL;
    adag_dev_mem_t send = {0}, recv = {0};
    adag_comm_t *comm = NULL;
    size_t count = c->bytes / sizeof(float);
    float *host = malloc(c->bytes);
    int rc = -1;
    if (!host || !ops || !cops) {
        coll_fail(c, "allreduce rank %u: out of memory for %zu bytes, or no %s/%s backend", rank,
                  c->bytes, c->device, c->comm);
        goto fail;
    }
    RANK_TRY(c, ops->open(rank, &dev), "opening %s:%u", c->device, rank);
    RANK_TRY(c, ops->bind_thread(dev), "binding to %s:%u", c->device, rank);
    RANK_TRY(c, ops->stream_create(dev, &s), "a stream on %s:%u", c->device, rank);
    RANK_TRY(c, ops->mem_alloc(dev, c->bytes, &send), "%zu bytes on %s:%u", c->bytes, c->device,
             rank);
    RANK_TRY(c, ops->mem_alloc(dev, c->bytes, &recv), "%zu bytes on %s:%u", c->bytes, c->device,
             rank);
    for (size_t i = 0; i < count; i++)
        host[i] = coll_element(rank, i);
    RANK_TRY(c, ops->copy_async(s, send.ptr, host, c->bytes), "filling the send buffer");
    RANK_TRY(c, ops->stream_sync(s, adag__deadline_ms(COLL_SETUP_MS)), "filling the send buffer");
    RANK_TRY(c, cops->init(&c->id, c->nranks, rank, dev, adag__deadline_ms(COLL_SETUP_MS), &comm),
             "joining the communicator");

    double t0 = bench_now_us();
    for (int i = 0; i < c->warmup; i++) {
        RANK_TRY(c, cops->allreduce(comm, send.ptr, recv.ptr, count, ADAG_DTYPE_F32,
                                    ADAG_REDUCE_SUM, s), "warm-up allreduce %d", i);
        RANK_TRY(c, ops->stream_sync(s, adag__deadline_ms(COLL_SETUP_MS)), "warm-up allreduce %d",
                 i);
    }
    c->warm_us[rank] = (bench_now_us() - t0) / (c->warmup > 0 ? c->warmup : 1);
    if (coll_barrier(c, rank, 1))
        goto fail;
    double warm = 0;
    for (unsigned r = 0; r < c->nranks; r++)
        warm = c->warm_us[r] > warm ? c->warm_us[r] : warm;
    long iters = warm > 0 ? (long)(c->seconds * 1e6 / warm) : COLL_MAX_ITERS;
    iters = iters < 5 ? 5 : iters > COLL_MAX_ITERS ? COLL_MAX_ITERS : iters;
    if (rank == 0)
        c->iters = iters;
    if (coll_barrier(c, rank, 2)) /* start together, as MPI_Barrier does on the other side */
        goto fail;
    for (long i = 0; i < iters; i++) {
        double a = bench_now_us();
        RANK_TRY(c, cops->allreduce(comm, send.ptr, recv.ptr, count, ADAG_DTYPE_F32,
                                    ADAG_REDUCE_SUM, s), "allreduce %ld", i);
        RANK_TRY(c, ops->stream_sync(s, adag__deadline_ms(COLL_SETUP_MS)), "allreduce %ld", i);
        c->lat[rank][i] = bench_now_us() - a;
    }
    RANK_TRY(c, ops->copy_async(s, host, recv.ptr, c->bytes), "reading the result back");
    RANK_TRY(c, ops->stream_sync(s, adag__deadline_ms(COLL_SETUP_MS)), "reading the result back");
    for (size_t k = 0; k < 3; k++) { /* first, middle and last element */
        size_t i = k == 0 ? 0 : k == 1 ? count / 2 : count - 1;
        if (host[i] != coll_expected(c->nranks, i)) {
            coll_fail(c, "allreduce rank %u, %zu bytes: element %zu is %g, want %g", rank,
                      c->bytes, i, (double)host[i], (double)coll_expected(c->nranks, i));
            goto fail;
        }
    }
    rc = 0;
fail:
    if (comm) {
        if (rc)
            cops->abort(comm);
        if (s)
            ops->stream_sync(s, adag__deadline_ms(COLL_SETUP_MS));
        cops->destroy(comm);
    }
    if (s)
        ops->stream_destroy(dev, s);
    if (send.ptr)
        ops->mem_free(dev, &send);
    if (recv.ptr)
        ops->mem_free(dev, &recv);
    if (dev)
        ops->close(dev);
    free(host);
    return rc;
}

/* Waits for the ranks (by pid: other children of adag-bench are not ours
 * to reap); once one failed, or past the run's deadline, kills the rest.
 * 0 if every rank exited 0. */
static int coll_reap(coll_ctl_t *c, pid_t *pids, unsigned n)
{
    int64_t deadline = adag__deadline_ms(COLL_RUN_MS);
    unsigned left = n;
    int failed = 0;
    while (left > 0) {
        for (unsigned i = 0; i < n; i++) {
            int status;
            if (pids[i] <= 0 || waitpid(pids[i], &status, WNOHANG) != pids[i])
                continue;
            pids[i] = -1;
            left--;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                if (!failed && !atomic_load(&c->abort))
                    coll_fail(c, "allreduce rank %u %s %d", i,
                              WIFEXITED(status) ? "exited with" : "was killed by signal",
                              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                failed = 1;
            }
        }
        if (left == 0)
            break;
        if (!failed && adag__now_ns() > deadline)
            failed = coll_fail(c, "allreduce: the ranks did not finish within %d ms",
                               COLL_RUN_MS);
        if (failed || atomic_load(&c->abort))
            for (unsigned i = 0; i < n; i++)
                if (pids[i] > 0)
                    kill(pids[i], SIGKILL);
        usleep(1000);
    }
    return failed || atomic_load(&c->abort) ? -1 : 0;
}

/* A rank in a fresh copy of adag-bench (CUDA cannot be used in a child
 * forked from a process that initialized it): `adag-bench --coll-rank
 * <fd> <rank>`, the control page the memfd fd; pid or -1. */
static pid_t coll_spawn(coll_ctl_t *c, int fd, unsigned rank)
{
    char fds[16], ranks[16];
    snprintf(fds, sizeof fds, "%d", fd);
    snprintf(ranks, sizeof ranks, "%u", rank);
    char *argv[] = {"adag-bench", "--coll-rank", fds, ranks, NULL};
    pid_t pid;
    int err = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ);
    if (err) {
        coll_fail(c, "allreduce: spawning rank %u: %s", rank, strerror(err));
        return -1;
    }
    return pid;
}

int bench_coll_rank_main(const char *fd_arg, const char *rank_arg)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = atoi(fd_arg);
    unsigned rank = (unsigned)atoi(rank_arg);
    coll_ctl_t *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c == MAP_FAILED) {
        perror("adag-bench --coll-rank: mmap");
        return 3;
    }
    close(fd);
    return coll_rank(c, rank) ? 1 : 0;
}

int run_allreduce_on(const bench_opts_t *o, const char *device, const char *comm,
                     unsigned nranks, size_t bytes, measure_t *m)
{
    const adag_comm_ops_t *cops = adag__comm_backend_named(comm);
    int spawned = strcmp(device, "emu") != 0; /* fork for the emulated device */
    pid_t pids[COLL_MAX_RANKS];
    void *owner = NULL;
    double *lat = NULL;
    int rc = -1;
    unsigned started = 0;
    coll_ctl_t *c = MAP_FAILED;
    int fd = memfd_create("adag-bench-allreduce", 0); /* the ranks inherit it, across exec too */
    if (fd < 0 || ftruncate(fd, sizeof(*c)) != 0 ||
        (c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        perror("adag-bench: allreduce: the control page");
        goto done;
    }
    if (!cops || !cops->allreduce || nranks < 2 || nranks > COLL_MAX_RANKS || bytes < 4 ||
        bytes % sizeof(float)) {
        fprintf(stderr, "adag-bench: allreduce: %u ranks, %zu bytes on %s: cannot run\n", nranks,
                bytes, comm);
        goto done;
    }
    snprintf(c->device, sizeof c->device, "%s", device);
    snprintf(c->comm, sizeof c->comm, "%s", comm);
    c->nranks = nranks;
    c->bytes = bytes;
    c->seconds = coll_seconds(o);
    c->warmup = coll_warmup(o);
    if (cops->id_create(nranks, &c->id, &owner) != ADAG_OK) {
        fprintf(stderr, "adag-bench: allreduce: a communicator id: %s\n", adag_last_error());
        goto done;
    }
    fflush(NULL); /* the ranks exit with _exit: nothing of ours is printed twice */
    pid_t parent = getpid();
    for (; started < nranks; started++) {
        pids[started] = spawned ? coll_spawn(c, fd, started) : fork();
        if (pids[started] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(3);
            _exit(coll_rank(c, started) ? 1 : 0);
        }
        if (pids[started] < 0) {
            if (!spawned)
                coll_fail(c, "allreduce: fork of rank %u: %s", started, strerror(errno));
            break;
        }
    }
    int reaped = coll_reap(c, pids, started);
    cops->id_destroy(owner);
    if (reaped || started < nranks) {
        fprintf(stderr, "adag-bench: %s\n", c->error[0] ? c->error : "allreduce failed");
        goto done;
    }
    if (!(lat = malloc((size_t)c->iters * sizeof(*lat))))
        goto done;
    double total = 0;
    for (long i = 0; i < c->iters; i++) {
        lat[i] = 0;
        for (unsigned r = 0; r < nranks; r++)
            lat[i] = c->lat[r][i] > lat[i] ? c->lat[r][i] : lat[i];
        total += lat[i];
    }
    bench_summarize(lat, c->iters, total * 1e-6, m);
    m->gbps = allreduce_bus_gbps(nranks, bytes, m->median_us);
    rc = 0;
done:
    free(lat);
    if (c != MAP_FAILED)
        munmap(c, sizeof(*c));
    if (fd >= 0)
        close(fd);
    return rc;
}

int run_allreduce(const bench_opts_t *o, unsigned nranks, size_t bytes, measure_t *m)
{
    return run_allreduce_on(o, "emu", "host", nranks, bytes, m);
}

/* ---- the MPI side ---- */

#define MPI_MAX_SIZES 32

static struct {
    int failed; /* the peer failed once: not run again in this adag-bench run */
    unsigned nranks, n;
    size_t bytes[MPI_MAX_SIZES];
    measure_t m[MPI_MAX_SIZES];
} mpi_cache;

/* Runs the MPI peer once for every size of `sizes` not measured yet. */
static int mpi_run(const bench_opts_t *o, unsigned nranks, const size_t *sizes, unsigned nsizes)
{
    char peer[PATH_MAX + 32], cmd[2 * PATH_MAX + 512], line[512];
    size_t len;
    unsigned asked = 0;
    mpi_peer_path(peer, sizeof peer);
    len = (size_t)snprintf(cmd, sizeof cmd,
                           "mpirun -np %u --oversubscribe%s --mca pml ob1 --mca btl self,vader "
                           "%s --seconds %g --warmup %d",
                           nranks, geteuid() == 0 ? " --allow-run-as-root" : "", peer,
                           coll_seconds(o), coll_warmup(o));
    for (unsigned i = 0; i < nsizes && len < sizeof cmd - 32; i++) {
        int known = 0;
        for (unsigned k = 0; k < mpi_cache.n; k++)
            known |= mpi_cache.bytes[k] == sizes[i];
        if (!known) {
            len += (size_t)snprintf(cmd + len, sizeof cmd - len, " %zu", sizes[i]);
            asked++;
        }
    }
    if (asked == 0)
        return 0;
    if (mpi_cache.failed)
        return -1;
    fprintf(stderr, "adag-bench: running the MPI peer: %s\n", cmd);
    fflush(NULL);
    FILE *p = popen(cmd, "r");
    if (!p) {
        fprintf(stderr, "adag-bench: allreduce: popen of mpirun: %s\n", strerror(errno));
        return -1;
    }
    mpi_cache.nranks = nranks;
    while (fgets(line, sizeof line, p)) {
        size_t bytes, count;
        long iters;
        double median, p99, mean;
        int end = 0; /* set only if the line goes on to its end, "check=ok" included */
        if (sscanf(line, "allreduce bytes=%zu count=%zu iters=%ld median_us=%lf p99_us=%lf "
                         "mean_us=%lf check=ok%n", &bytes, &count, &iters, &median, &p99,
                   &mean, &end) != 6 || end == 0 || mpi_cache.n >= MPI_MAX_SIZES)
            continue;
        measure_t *m = &mpi_cache.m[mpi_cache.n];
        memset(m, 0, sizeof(*m));
        m->median_us = median;
        m->p99_us = p99;
        m->per_s = mean > 0 ? 1e6 / mean : 0;
        m->iterations = iters;
        m->gbps = allreduce_bus_gbps(nranks, bytes, median);
        mpi_cache.bytes[mpi_cache.n++] = bytes;
    }
    int status = pclose(p);
    if (status != 0) {
        mpi_cache.failed = 1;
        fprintf(stderr, "adag-bench: allreduce: the MPI peer failed (%s %d): %s\n",
                WIFEXITED(status) ? "exit status" : "wait status",
                WIFEXITED(status) ? WEXITSTATUS(status) : status, cmd);
        return -1;
    }
    return 0;
}

int baseline_mpi_allreduce(const bench_opts_t *o, unsigned nranks, size_t bytes,
                           const size_t *sizes, unsigned nsizes, measure_t *m)
{
    if (mpi_cache.n > 0 && mpi_cache.nranks != nranks)
        mpi_cache.n = 0;
    if (mpi_run(o, nranks, sizes, nsizes))
        return -1;
    for (unsigned k = 0; k < mpi_cache.n; k++)
        if (mpi_cache.bytes[k] == bytes) {
            *m = mpi_cache.m[k];
            return 0;
        }
    fprintf(stderr, "adag-bench: allreduce: the MPI peer printed no checked result for %zu "
                    "bytes\n", bytes);
    mpi_cache.failed = 1;
    return -1;
}

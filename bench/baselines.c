/*
 * Baselines: what the machine does with no runtime at all. Processes share
 * an anonymous MAP_SHARED mapping and pass a token through 32-bit words,
 * waiting either by spinning (with a yield every 64 spins, so more
 * processes than cores still progress) or on a futex at once. Every access
 * is seq_cst (the same sleeper-count handshake as common/event.h; see
 * bench_cell_t in bench.h).
 */
#include "bench.h"

#include <linux/futex.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

const char *wait_policy_name(wait_policy_t p)
{
    return p == WAIT_SPIN ? "spin" : "futex";
}

/* Sleeps on the word while it is `seen`, at most 100 ms with an abort flag. */
static void futex_wait(bench_cell_t *c, uint32_t seen, const _Atomic uint32_t *abort)
{
    struct timespec limit = {0, 100 * 1000 * 1000};
    syscall(SYS_futex, (uint32_t *)&c->word, FUTEX_WAIT, seen, abort ? &limit : NULL, NULL, 0);
}

int bench_cell_wait(bench_cell_t *c, uint32_t want, wait_policy_t policy,
                    const _Atomic uint32_t *abort)
{
    if (policy == WAIT_SPIN) {
        for (unsigned i = 1; atomic_load(&c->word) != want; i++) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            if ((i & 63) == 0) {
                sched_yield();
                if (abort && atomic_load(abort))
                    return -1;
            }
        }
        return 0;
    }
    for (;;) {
        uint32_t seen = atomic_load(&c->word);
        if (seen == want)
            return 0;
        if (abort && atomic_load(abort))
            return -1;
        atomic_fetch_add(&c->sleepers, 1);
        if (atomic_load(&c->word) == seen)
            futex_wait(c, seen, abort);
        atomic_fetch_sub(&c->sleepers, 1);
    }
}

void bench_cell_set(bench_cell_t *c, uint32_t v)
{
    atomic_store(&c->word, v);
    if (atomic_load(&c->sleepers))
        syscall(SYS_futex, (uint32_t *)&c->word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static bench_cell_t *cells_map(unsigned n)
{
    void *p = mmap(NULL, n * sizeof(bench_cell_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int reap(pid_t *kids, unsigned n)
{
    int ok = 1;
    for (unsigned i = 0; i < n; i++) {
        int status;
        if (waitpid(kids[i], &status, 0) != kids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            ok = 0;
    }
    return ok ? 0 : -1;
}

#define WARMUP 500

int baseline_relay(unsigned parties, wait_policy_t policy, long rounds, measure_t *m)
{
    bench_cell_t *c = cells_map(parties);
    pid_t kids[64];
    double *lat = malloc((size_t)rounds * sizeof(*lat));
    long total = rounds + WARMUP;
    if (!c || !lat || parties < 2 || parties > 64)
        return -1;
    for (unsigned i = 1; i < parties; i++) {
        kids[i - 1] = fork();
        if (kids[i - 1] == 0) {
            for (long r = 1; r <= total; r++) {
                bench_cell_wait(&c[i], (uint32_t)r, policy, NULL);
                bench_cell_set(&c[(i + 1) % parties], (uint32_t)r);
            }
            _exit(0);
        }
    }
    double t_start = 0;
    for (long r = 1; r <= total; r++) {
        if (r == WARMUP + 1)
            t_start = bench_now_us();
        double t0 = bench_now_us();
        bench_cell_set(&c[1], (uint32_t)r);
        bench_cell_wait(&c[0], (uint32_t)r, policy, NULL);
        if (r > WARMUP)
            lat[r - WARMUP - 1] = bench_now_us() - t0;
    }
    double total_s = (bench_now_us() - t_start) * 1e-6;
    int rc = reap(kids, parties - 1);
    bench_summarize(lat, rounds, total_s, m);
    free(lat);
    munmap(c, parties * sizeof(bench_cell_t));
    return rc;
}

int baseline_fanout(unsigned n, wait_policy_t policy, long rounds, measure_t *m)
{
    bench_cell_t *c = cells_map(n + 1); /* c[0]: go, c[1..n]: acks */
    pid_t kids[64];
    double *lat = malloc((size_t)rounds * sizeof(*lat));
    long total = rounds + WARMUP;
    if (!c || !lat || n < 1 || n > 63)
        return -1;
    for (unsigned i = 1; i <= n; i++) {
        kids[i - 1] = fork();
        if (kids[i - 1] == 0) {
            for (long r = 1; r <= total; r++) {
                bench_cell_wait(&c[0], (uint32_t)r, policy, NULL);
                bench_cell_set(&c[i], (uint32_t)r);
            }
            _exit(0);
        }
    }
    double t_start = 0;
    for (long r = 1; r <= total; r++) {
        if (r == WARMUP + 1)
            t_start = bench_now_us();
        double t0 = bench_now_us();
        bench_cell_set(&c[0], (uint32_t)r);
        for (unsigned i = 1; i <= n; i++)
            bench_cell_wait(&c[i], (uint32_t)r, policy, NULL);
        if (r > WARMUP)
            lat[r - WARMUP - 1] = bench_now_us() - t0;
    }
    double total_s = (bench_now_us() - t_start) * 1e-6;
    int rc = reap(kids, n);
    bench_summarize(lat, rounds, total_s, m);
    free(lat);
    munmap(c, (n + 1) * sizeof(bench_cell_t));
    return rc;
}

int baseline_memcpy(size_t bytes, long reps, measure_t *m)
{
    /* small copies are timed in batches, so the clock does not dominate */
    long batch = bytes >= (1 << 20) ? 1 : (long)((1 << 20) / (bytes ? bytes : 1));
    char *a = malloc(bytes), *b = malloc(bytes);
    double *lat = malloc((size_t)reps * sizeof(*lat));
    if (!a || !b || !lat)
        return -1;
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (long r = 0; r < 3; r++)
        memcpy(b, a, bytes);
    double t_start = bench_now_us();
    for (long r = 0; r < reps; r++) {
        double t0 = bench_now_us();
        for (long k = 0; k < batch; k++) {
            a[0] = (char)(r + k); /* each copy is observable: not folded away */
            memcpy(b, a, bytes);
            __asm__ __volatile__("" : : "r"(b) : "memory");
        }
        lat[r] = (bench_now_us() - t0) / (double)batch;
    }
    bench_summarize(lat, reps, (bench_now_us() - t_start) * 1e-6, m);
    m->per_s *= (double)batch;
    m->gbps = m->median_us > 0 ? bytes / (m->median_us * 1e3) : 0;
    free(lat);
    free(a);
    free(b);
    return 0;
}

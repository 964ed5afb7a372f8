#include "common/event.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void adag__futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t deadline)
{
    struct timespec ts, *tsp = NULL;
    if (deadline != ADAG_FOREVER) {
        int64_t left = deadline - adag__now_ns();
        if (left <= 0)
            return;
        ts.tv_sec = left / 1000000000;
        ts.tv_nsec = left % 1000000000;
        tsp = &ts;
    }
    /* Not FUTEX_PRIVATE: the word may live in memory shared by processes.
     * EINTR, EAGAIN and ETIMEDOUT all send the caller back to re-check. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, tsp, NULL, 0);
}

void adag__futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static inline int aborted(const _Atomic uint32_t *abort)
{
    return abort && atomic_load_explicit(abort, memory_order_seq_cst) != 0;
}

adag_status_t adag__event_wait_slow(adag_event_t *ev, adag_cond_fn cond, const void *arg,
                                   const _Atomic uint32_t *abort, int64_t deadline,
                                   adag_spin_t *spin)
{
    /* a hint: a plain increment (one loop thread per endpoint counts it) */
    atomic_store_explicit(&spin->waited, atomic_load_explicit(&spin->waited, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    int64_t budget = atomic_load_explicit(&spin->budget, memory_order_relaxed);
    int64_t start = adag__now_ns();
    if (budget < ADAG_SPIN_PROBE_NS)
        budget = spin->max < ADAG_SPIN_PROBE_NS ? spin->max : ADAG_SPIN_PROBE_NS;
    if (budget > 0) {
        int64_t spin_until = start + budget;
        for (;;) {
            if (spin->yield)
                sched_yield();
            for (int i = 0; i < 64; i++) {
                adag__cpu_relax();
                if (cond(arg)) {
                    int64_t grown = budget * 2 < spin->max ? budget * 2 : spin->max;
                    atomic_store_explicit(&spin->budget, grown, memory_order_relaxed);
                    return ADAG_OK;
                }
            }
            if (aborted(abort))
                return ADAG_ERR_CLOSED;
            int64_t now = adag__now_ns();
            if (now >= deadline)
                return ADAG_ERR_TIMEOUT;
            if (now >= spin_until)
                break;
        }
    }
    adag_status_t st;
    for (;;) {
        uint32_t seen = atomic_load_explicit(&ev->seq, memory_order_acquire);
        atomic_fetch_add_explicit(&ev->sleepers, 1, memory_order_seq_cst);
        int ready = cond(arg);
        int stop = aborted(abort);
        if (!ready && !stop)
            adag__futex_wait(&ev->seq, seen, deadline);
        atomic_fetch_sub_explicit(&ev->sleepers, 1, memory_order_relaxed);
        if (ready || cond(arg)) {
            st = ADAG_OK;
            break;
        }
        if (stop || aborted(abort))
            return ADAG_ERR_CLOSED;
        if (deadline != ADAG_FOREVER && adag__now_ns() >= deadline)
            return ADAG_ERR_TIMEOUT;
    }
    /* Slept: had the whole wait fit in the spin maximum, spinning would have
     * caught it (and saved two context switches): spin fully next time. A
     * longer wait means the peer was busy or off-core: spin half as long. */
    if (adag__now_ns() - start <= spin->max)
        atomic_store_explicit(&spin->budget, spin->max, memory_order_relaxed);
    else
        atomic_store_explicit(&spin->budget, budget / 2, memory_order_relaxed);
    return st;
}

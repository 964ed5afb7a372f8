/*
 * A wait/notify primitive that lives in shared memory: waiters spin for a
 * while, then sleep on a (process-shared) futex; notifiers only make the
 * futex system call when somebody sleeps.
 *
 * Memory ordering (the "sleeper count" handshake, a Dekker pattern):
 *   waiter:   s = load(seq); sleepers += 1; check condition; futex_wait(&seq, s)
 *   notifier: make the condition true; seq += 1; if (load(sleepers)) futex_wake
 * Every one of these accesses is seq_cst (the condition's store and loads
 * too: callers must use memory_order_seq_cst for them; on x86 a seq_cst load
 * costs what an acquire load does). In the single total order of seq_cst
 * operations either the waiter's check comes after the condition store (it
 * sees it) or the notifier's read of sleepers comes after "sleepers += 1"
 * (it wakes the waiter). A notify between the waiter's read of seq and its
 * futex_wait changes seq, so the futex_wait returns at once. No fences, so
 * ThreadSanitizer understands all of it.
 */
#ifndef ADAG_COMMON_EVENT_H
#define ADAG_COMMON_EVENT_H

#include "common/clock.h"

#include <adag.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    _Atomic uint32_t seq;      /* the futex word, bumped by every notify */
    _Atomic uint32_t sleepers; /* waiters inside (or about to enter) futex_wait */
} adag_event_t;

/* Returns nonzero once the awaited condition holds. */
typedef int (*adag_cond_fn)(const void *arg);

static inline void adag_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void adag_futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t deadline);
void adag_futex_wake_all(_Atomic uint32_t *word);

/* Wakes every waiter of ev (after the caller made its condition true). */
static inline void adag_event_notify(adag_event_t *ev)
{
    atomic_fetch_add_explicit(&ev->seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&ev->sleepers, memory_order_seq_cst) != 0)
        adag_futex_wake_all(&ev->seq);
}

/* Waits until cond(arg) holds (ADAG_OK), *abort becomes nonzero
 * (ADAG_ERR_CLOSED) or the deadline passes (ADAG_ERR_TIMEOUT). Spins up to
 * spin_ns first. abort may be NULL. */
adag_status_t adag_event_wait_slow(adag_event_t *ev, adag_cond_fn cond, const void *arg,
                                   const _Atomic uint32_t *abort, int64_t deadline,
                                   int64_t spin_ns);

static inline adag_status_t adag_event_wait(adag_event_t *ev, adag_cond_fn cond, const void *arg,
                                            const _Atomic uint32_t *abort, int64_t deadline,
                                            int64_t spin_ns)
{
    if (cond(arg))
        return ADAG_OK;
    return adag_event_wait_slow(ev, cond, arg, abort, deadline, spin_ns);
}

#endif

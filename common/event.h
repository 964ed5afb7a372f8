/*
 * A wait/notify primitive that lives in shared memory: waiters spin for a
 * while, then sleep on a (process-shared) futex; notifiers only make the
 * futex system call when somebody sleeps.
 *
 * Memory ordering (the "sleeper count" handshake, a Dekker pattern):
 *   waiter:   s = load(seq); sleepers += 1; fence(seq_cst); check condition;
 *             futex_wait(&seq, s)
 *   notifier: make the condition true (release store); fence(seq_cst);
 *             seq += 1; if (load(sleepers)) futex_wake(&seq)
 * The two seq_cst fences order "sleepers += 1" before the waiter's check and
 * the condition store before the notifier's read of sleepers, so either the
 * waiter sees the condition or the notifier sees the sleeper (and wakes it).
 * A notify between the waiter's read of seq and its futex_wait changes seq,
 * so the futex_wait returns at once. Conditions are read with acquire.
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
    atomic_thread_fence(memory_order_seq_cst);
    atomic_fetch_add_explicit(&ev->seq, 1, memory_order_relaxed);
    if (atomic_load_explicit(&ev->sleepers, memory_order_relaxed) != 0)
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

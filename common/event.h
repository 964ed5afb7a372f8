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

/* The spin-then-sleep policy of one waiter, adaptive: a waiter spins for up
 * to `budget` ns before it sleeps. A wait that ends while spinning doubles
 * the budget (up to max, the ADAG_SPIN_NS setting or the DAG's spin_ns); a
 * wait that had to sleep longer than max halves it (down to a 1 us probe). So a peer that
 * answers within microseconds (a process on another core) is met spinning,
 * while on an oversubscribed machine (more busy processes than cores, where
 * spinning only steals the producer's core) waiters soon sleep at once. A
 * wait that slept but ended within max resets the budget to max: a longer
 * spin would have caught it, so the two sides cannot settle into both
 * sleeping when spinning would serve them. With `yield` (a DAG with more
 * loops than CPUs) the spin calls sched_yield between probes: the producer
 * may need this very core, and a waiter that yields instead of sleeping
 * hands it over without a futex wake-up. */
/* How a DAG's waiters wait: spin up to spin_ns (adapting below it), with
 * sched_yield between probes when `yield`, then sleep. */
typedef struct {
    int64_t spin_ns;
    int yield;
} adag_wait_policy_t;

typedef struct {
    int64_t max;
    int yield;              /* crowded: give the core away between probes */
    _Atomic int64_t budget; /* relaxed: a hint, shared by threads using one endpoint */
    /* waits that did not find their condition true at once (relaxed: a
     * loop's tracing reads its own endpoints' to skip a clock read after
     * a wait that did not wait) */
    _Atomic uint64_t waited;
} adag_spin_t;

#define ADAG_SPIN_PROBE_NS 1000

static inline void adag__spin_init(adag_spin_t *spin, adag_wait_policy_t policy)
{
    spin->max = policy.spin_ns;
    spin->yield = policy.yield;
    atomic_store_explicit(&spin->budget, policy.spin_ns, memory_order_relaxed);
    atomic_store_explicit(&spin->waited, 0, memory_order_relaxed);
}

/* Returns nonzero once the awaited condition holds. */
typedef int (*adag_cond_fn)(const void *arg);

static inline void adag__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void adag__futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t deadline);
void adag__futex_wake_all(_Atomic uint32_t *word);

/* Wakes every waiter of ev (after the caller made its condition true). */
static inline void adag__event_notify(adag_event_t *ev)
{
    atomic_fetch_add_explicit(&ev->seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&ev->sleepers, memory_order_seq_cst) != 0)
        adag__futex_wake_all(&ev->seq);
}

/* Waits until cond(arg) holds (ADAG_OK), *abort becomes nonzero
 * (ADAG_ERR_CLOSED) or the deadline passes (ADAG_ERR_TIMEOUT). Spins first
 * as the policy says (and adapts it). abort may be NULL. */
adag_status_t adag__event_wait_slow(adag_event_t *ev, adag_cond_fn cond, const void *arg,
                                   const _Atomic uint32_t *abort, int64_t deadline,
                                   adag_spin_t *spin);

static inline adag_status_t adag__event_wait(adag_event_t *ev, adag_cond_fn cond, const void *arg,
                                            const _Atomic uint32_t *abort, int64_t deadline,
                                            adag_spin_t *spin)
{
    if (cond(arg))
        return ADAG_OK;
    return adag__event_wait_slow(ev, cond, arg, abort, deadline, spin);
}

#endif

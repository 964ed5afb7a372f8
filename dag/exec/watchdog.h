/*
 * The communication watchdog of one loop (one actor in one DAG): a thread
 * that checks, a few times per timeout, every endpoint of the loop that
 * can be watched (the channel op `watch`: device copies and waits for a
 * peer's value on the actor's streams). The first time one is overdue it
 * reports the oldest overdue operation of the loop once, through `fail`
 * (the DAG then fails with ADAG_ERR_TIMEOUT and is aborted, which makes
 * the endpoints abandon their peers' events), and stops checking. It never
 * waits for device work: a stuck stream cannot stop it.
 */
#ifndef ADAG_DAG_WATCHDOG_H
#define ADAG_DAG_WATCHDOG_H

#include "transport/channel.h"

#include <adag.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct adag_watchdog adag_watchdog_t;

typedef void (*adag_watchdog_fail_fn)(void *ctx, adag_status_t status, const char *msg);

/* Operations of the loop itself (its collectives), checked like an
 * endpoint's `watch`: ADAG_ERR_TIMEOUT with the message set and *since the
 * oldest overdue one's enqueue time, else ADAG_OK. Another status (with
 * the message set) is a failure found otherwise (a shared communicator
 * another DAG broke): reported at once, like an overdue operation. */
typedef adag_status_t (*adag_watch_fn)(void *ctx, int64_t now, int64_t timeout_ns,
                                       int64_t *since);

/* Starts watching chans[0..n), and `extra` (NULL: none) with extra_ctx,
 * with timeout_ms (> 0) until stopped or the abort word is set. *out is
 * NULL (and nothing starts) when nothing can be watched or timeout_ms <= 0. */
adag_status_t adag__watchdog_start(adag_chan_t *const *chans, unsigned n, adag_watch_fn extra,
                                  void *extra_ctx, int64_t timeout_ms,
                                  const _Atomic uint32_t *abort, adag_watchdog_fail_fn fail,
                                  void *ctx, const char *who, adag_watchdog_t **out);
/* Stops and joins the thread (NULL: nothing). */
void adag__watchdog_stop(adag_watchdog_t *w);

/* How often a watchdog with this timeout checks (ns). */
int64_t adag__watchdog_period_ns(int64_t timeout_ms);

#endif

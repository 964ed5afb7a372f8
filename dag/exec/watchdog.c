#include "dag/exec/watchdog.h"

#include "common/clock.h"
#include "common/error.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct adag_watchdog {
    adag_chan_t **chans; /* the watchable endpoints (the context owns them) */
    unsigned n;
    adag_watch_fn extra; /* the loop's own operations (NULL: none) */
    void *extra_ctx;
    int64_t timeout_ns, period_ns;
    const _Atomic uint32_t *abort;
    adag_watchdog_fail_fn fail;
    void *ctx;
    char who[96];
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* stop */
    int stop;            /* under lock */
};

int64_t adag__watchdog_period_ns(int64_t timeout_ms)
{
    /* a few checks per timeout: an op is reported between timeout and
     * timeout + period; between 5 ms and 250 ms, so an idle loop wakes at
     * most a few times per second */
    int64_t p = timeout_ms * 1000000 / 8;
    if (p < 5000000)
        p = 5000000;
    if (p > 250000000)
        p = 250000000;
    return p;
}

/* One pass: the loop's own overdue operation (a collective), else the
 * oldest overdue operation of its endpoints, or ADAG_OK. A collective is
 * the cause to name: the device work queued after it on its streams (an
 * endpoint's copy of its result) waits for it, so while one is pending an
 * endpoint's overdue operation is not reported; the collective is, once
 * overdue itself (at most a timeout later). */
static adag_status_t check(adag_watchdog_t *w, char *msg, size_t len)
{
    int64_t now = adag__now_ns(), oldest = INT64_MAX, since = INT64_MAX;
    adag_status_t st = w->extra ? w->extra(w->extra_ctx, now, w->timeout_ns, &since) : ADAG_OK;
    if (st != ADAG_OK) {
        snprintf(msg, len, "%s", adag_last_error());
        return st;
    }
    for (unsigned i = 0; i < w->n; i++) {
        adag_chan_t *ch = w->chans[i];
        since = INT64_MAX;
        if (ch->ops->watch(ch, now, w->timeout_ns, &since) == ADAG_ERR_TIMEOUT &&
            since < oldest) {
            oldest = since;
            snprintf(msg, len, "%s", adag_last_error());
        }
    }
    /* timeout 0: any collective still pending counts */
    if (oldest != INT64_MAX && w->extra &&
        w->extra(w->extra_ctx, now, 0, &since) == ADAG_ERR_TIMEOUT)
        return ADAG_OK;
    return oldest == INT64_MAX ? ADAG_OK : ADAG_ERR_TIMEOUT;
}

static void *watchdog_main(void *arg)
{
    adag_watchdog_t *w = arg;
    char msg[ADAG_ERROR_MAX];
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        int64_t deadline = adag__now_ns() + w->period_ns;
        struct timespec ts = adag__timespec_at(deadline);
        while (!w->stop && pthread_cond_timedwait(&w->cond, &w->lock, &ts) != ETIMEDOUT) {
        }
        if (w->stop || atomic_load_explicit(w->abort, memory_order_seq_cst))
            break;
        pthread_mutex_unlock(&w->lock);
        adag_status_t st = check(w, msg, sizeof(msg));
        if (st != ADAG_OK) {
            char full[ADAG_ERROR_MAX];
            snprintf(full, sizeof(full), "actor %s: %s", w->who, msg);
            w->fail(w->ctx, st, full);
            pthread_mutex_lock(&w->lock);
            break; /* reported once: the DAG fails */
        }
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

adag_status_t adag__watchdog_start(adag_chan_t *const *chans, unsigned n, adag_watch_fn extra,
                                  void *extra_ctx, int64_t timeout_ms,
                                  const _Atomic uint32_t *abort, adag_watchdog_fail_fn fail,
                                  void *ctx, const char *who, adag_watchdog_t **out)
{
    *out = NULL;
    if (timeout_ms <= 0)
        return ADAG_OK;
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++)
        m += chans[i]->ops->watch != NULL;
    if (m == 0 && !extra)
        return ADAG_OK;
    adag_watchdog_t *w = calloc(1, sizeof(*w));
    if (!w || !(w->chans = calloc(m + 1, sizeof(*w->chans)))) {
        free(w);
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: watchdog: out of memory", who);
    }
    for (unsigned i = 0; i < n; i++)
        if (chans[i]->ops->watch)
            w->chans[w->n++] = chans[i];
    w->extra = extra;
    w->extra_ctx = extra_ctx;
    w->timeout_ns = timeout_ms * 1000000;
    w->period_ns = adag__watchdog_period_ns(timeout_ms);
    w->abort = abort;
    w->fail = fail;
    w->ctx = ctx;
    snprintf(w->who, sizeof(w->who), "%s", who);
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    int err = pthread_create(&w->thread, NULL, watchdog_main, w);
    if (err) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w->chans);
        free(w);
        return adag__error_errno(err, "actor %s: cannot start the watchdog thread", who);
    }
    *out = w;
    return ADAG_OK;
}

void adag__watchdog_stop(adag_watchdog_t *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w->chans);
    free(w);
}

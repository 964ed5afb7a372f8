/*
 * The UCX channel's domain (transport/ucx.h): the process's UCP context,
 * one worker per DAG, its progress thread, and the connections to peers.
 */
#include "transport/ucx.h"
#include "transport/chan_ucx_query.h"

#include "common/error.h"
#include "common/fd.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

extern const adag_chan_ops_t adag_chan_ucx_ops;

#define DOMAIN_MAGIC 0x61647563u /* "aduc" */
/* How long closing the connections lets what is in flight finish, and
 * how long the forced closes then have to end every request (see
 * conns_close). */
#define CLOSE_FLUSH_NS 1000000000LL
#define CLOSE_FORCE_NS 2000000000LL
/* How long after a spinner left with its value the progress thread still
 * stands aside (the spinner's next wait usually comes sooner; transfers
 * nobody waits for move again after this). */
#define PARK_NS 1000000LL
/* How long a waiter goes on spinning without an event while transfers of
 * its domain are in flight (spin_until). */
#define TRANSFER_SPIN_NS 1000000LL

/* ---- the process's UCP context: made by the first domain, shared ---- */

/* UCX settings adag chooses for its context where the user set none
 * (a UCX_* variable of that name, with or without the transport's
 * prefix, wins). RX_SEG_SIZE (TCP's): the largest fragment a value moves
 * in over TCP; UCX's 64 KiB makes a 1 MiB tensor 17 sends and receives.
 * Under UCP_ERR_HANDLING_MODE_PEER (which adag needs: a peer's death must
 * fail a channel, not the process) UCX moves rendezvous data in such
 * fragments instead of one zero-copy put, so their size sets the
 * bandwidth (docs/design.md, "UCX channels"). 512 KiB of data plus 64
 * bytes: each fragment also carries UCX's 16-byte rendezvous header, so
 * with exactly 512 KiB a 1 MiB tensor (any power of two from 1 MiB)
 * needed one more fragment for its last 32 bytes, a send and a receive
 * of its own (~16 us of the sender's time per MiB on the 2-core VM).
 * The cost: receive buffers of that size, a few per worker.
 * (ucp_config_modify applies a transport's setting by its name without
 * the prefix.) */
static const struct {
    const char *name, *env[2], *value;
} ucx_defaults[] = {
    {"RX_SEG_SIZE", {"UCX_TCP_RX_SEG_SIZE", "UCX_RX_SEG_SIZE"}, "524352"},
};

static struct {
    pthread_mutex_t lock;
    ucp_context_h ctx;
    unsigned refs;
    pid_t pid; /* a forked child must not touch its parent's (UCX does not
                * survive fork: workers are exec'd; this only keeps it from
                * using the parent's context) */
    char net_device[64]; /* adag__ucx_use_net_device's; "": UCX's choice */
} context = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, ""};

/* Under context.lock. */
static void tune_config(ucp_config_t *config)
{
    for (size_t i = 0; i < sizeof(ucx_defaults) / sizeof(ucx_defaults[0]); i++) {
        if (getenv(ucx_defaults[i].env[0]) || getenv(ucx_defaults[i].env[1]))
            continue;
        ucs_status_t us = ucp_config_modify(config, ucx_defaults[i].name, ucx_defaults[i].value);
        if (us != UCS_OK) /* a UCX without it: its default stays */
            ADAG_LOG_DEBUG("ucx: %s=%s not applied: %s", ucx_defaults[i].env[0],
                           ucx_defaults[i].value, ucs_status_string(us));
    }
    /* the placement's NIC, unless the user chose (an empty
     * UCX_NET_DEVICES is no choice) */
    const char *set = getenv("UCX_NET_DEVICES");
    if (context.net_device[0] && !(set && *set)) {
        ucs_status_t us = ucp_config_modify(config, "NET_DEVICES", context.net_device);
        if (us != UCS_OK)
            ADAG_LOG_WARN("ucx: NET_DEVICES=%s not applied: %s (UCX chooses the device)",
                          context.net_device, ucs_status_string(us));
    }
}

void adag__ucx_use_net_device(const char *nic)
{
    pthread_mutex_lock(&context.lock);
    snprintf(context.net_device, sizeof(context.net_device), "%s", nic ? nic : "");
    pthread_mutex_unlock(&context.lock);
}

/* The configuration the context is made with: UCX's (its defaults, the
 * UCX_* environment), then adag's choices. Under context.lock. */
static ucs_status_t config_make(ucp_config_t **out)
{
    ucs_status_t us = ucp_config_read(NULL, NULL, out);
    if (us == UCS_OK)
        tune_config(*out);
    return us;
}

adag_status_t adag__ucx_config_print(FILE *f)
{
    ucp_config_t *config;
    pthread_mutex_lock(&context.lock);
    ucs_status_t us = config_make(&config);
    pthread_mutex_unlock(&context.lock);
    if (us != UCS_OK)
        return adag__error(ADAG_ERR_NOT_FOUND, "UCX: ucp_config_read: %s", ucs_status_string(us));
    ucp_config_print(config, f, NULL, UCS_CONFIG_PRINT_CONFIG);
    ucp_config_release(config);
    return ADAG_OK;
}

static adag_status_t context_get(ucp_context_h *out)
{
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&context.lock);
    if (context.ctx && context.pid != getpid()) {
        context.ctx = NULL; /* the parent's; never touched here */
        context.refs = 0;
    }
    if (!context.ctx) {
        ucp_config_t *config;
        ucs_status_t us = config_make(&config);
        if (us == UCS_OK) {
            ucp_params_t p = {
                .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                              UCP_PARAM_FIELD_NAME,
                .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
                .mt_workers_shared = 1, /* the workers of several DAGs, each used by its threads */
                .name = "adag",
            };
            us = ucp_init(&p, config, &context.ctx);
            ucp_config_release(config);
        }
        if (us != UCS_OK) {
            context.ctx = NULL;
            st = adag__error(ADAG_ERR_NOT_FOUND, "UCX: ucp_init: %s (check the UCX_* settings)",
                            ucs_status_string(us));
            goto out;
        }
        context.pid = getpid();
    }
    context.refs++;
    *out = context.ctx;
out:
    pthread_mutex_unlock(&context.lock);
    return st;
}

static void context_put(void)
{
    pthread_mutex_lock(&context.lock);
    if (context.ctx && context.pid == getpid() && --context.refs == 0) {
        ucp_cleanup(context.ctx);
        context.ctx = NULL;
    }
    pthread_mutex_unlock(&context.lock);
}

/* ---- progress ---- */

unsigned adag__ucx_try_progress(adag_ucx_domain_t *d)
{
    if (pthread_mutex_trylock(&d->lock) != 0)
        return 0;
    /* once: a spinner looks at its condition between calls (each is a
     * poll of the sockets over TCP: a syscall on the round trip) */
    unsigned n = ucp_worker_progress(d->worker);
    pthread_mutex_unlock(&d->lock);
    return n;
}

/* When a spinning waiter stops: spin->max after the last event its
 * progress handled, or TRANSFER_SPIN_NS while requests of the domain are
 * in flight (a large value streaming in or out: the gaps between its
 * fragments' events are short, and a waiter that slept would hand every
 * one to the progress thread, a wake-up each); never past the deadline.
 * An idle wait (nothing in flight, no event) sleeps after spin->max. */
static int64_t spin_until(adag_ucx_domain_t *d, const adag_spin_t *spin, int64_t last_event,
                          int64_t deadline)
{
    int64_t window = spin->max;
    if (window < TRANSFER_SPIN_NS && atomic_load_explicit(&d->requests, memory_order_relaxed))
        window = TRANSFER_SPIN_NS;
    int64_t until = last_event + window;
    return deadline != ADAG_FOREVER && until > deadline ? deadline : until;
}

adag_status_t adag__ucx_wait(adag_ucx_domain_t *d, adag_event_t *ev, adag_cond_fn ready,
                            const void *arg, const _Atomic uint32_t *abort, int64_t deadline,
                            adag_spin_t *spin)
{
    if (ready(arg))
        return ADAG_OK;
    atomic_store_explicit(&spin->waited, atomic_load_explicit(&spin->waited, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    /* what this process owes its peers goes before it waits on them */
    adag__ucx_credits_flush(d);
    if (spin->max > 0) {
        /* seq_cst throughout with the progress thread's checks: either it
         * sees this waiter (spinning, or asleep) or this waiter sees it
         * parked and wakes it */
        atomic_fetch_add_explicit(&d->spinners, 1, memory_order_seq_cst);
        int64_t now = adag__now_ns(), last_event = now;
        int found = 0;
        while (!(found = ready(arg)) && now < spin_until(d, spin, last_event, deadline) &&
               !(abort && atomic_load_explicit(abort, memory_order_acquire))) {
            unsigned events = adag__ucx_try_progress(d);
            if ((found = ready(arg)))
                break;
            if (spin->yield)
                sched_yield();
            else
                adag__cpu_relax();
            now = adag__now_ns();
            if (events)
                last_event = now;
        }
        if (found) {
            atomic_store_explicit(&d->last_found, adag__now_ns(), memory_order_seq_cst);
            atomic_fetch_sub_explicit(&d->spinners, 1, memory_order_seq_cst);
            return ADAG_OK;
        }
        atomic_fetch_sub_explicit(&d->spinners, 1, memory_order_seq_cst);
    }
    /* asleep on the endpoint's event; the progress thread has the worker */
    atomic_fetch_add_explicit(&d->sleepers, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&d->park_seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&d->parked, memory_order_seq_cst))
        adag__futex_wake_all(&d->park_seq);
    static adag_spin_t no_spin; /* max 0: sleep at once (never written) */
    adag_status_t st = adag__event_wait(ev, ready, arg, abort, deadline, &no_spin);
    atomic_fetch_sub_explicit(&d->sleepers, 1, memory_order_seq_cst);
    return st;
}

/* Whether the progress thread may stand aside: a waiter spins, or one
 * left with its value less than PARK_NS ago, and nobody sleeps. */
static int others_progress(adag_ucx_domain_t *d)
{
    if (atomic_load_explicit(&d->sleepers, memory_order_seq_cst))
        return 0;
    return atomic_load_explicit(&d->spinners, memory_order_seq_cst) ||
           adag__now_ns() - atomic_load_explicit(&d->last_found, memory_order_seq_cst) < PARK_NS;
}

/* Sleeps on the worker's event fd whenever there is nothing to progress,
 * and stands aside (parked on park_seq) while waiters progress. */
static void *progress_main(void *arg)
{
    adag_ucx_domain_t *d = arg;
    struct pollfd fds[2] = {{.fd = d->efd, .events = POLLIN}, {.fd = d->stop_fd, .events = POLLIN}};
    for (;;) {
        if (atomic_load_explicit(&d->stopping, memory_order_acquire))
            return NULL;
        uint32_t seen = atomic_load_explicit(&d->park_seq, memory_order_seq_cst);
        if (others_progress(d)) {
            atomic_store_explicit(&d->parked, 1, memory_order_seq_cst);
            /* a waiter that went to sleep after `seen` bumped the word:
             * no sleep here. Else back within PARK_NS to look again */
            if (others_progress(d))
                adag__futex_wait(&d->park_seq, seen, adag__now_ns() + PARK_NS);
            atomic_store_explicit(&d->parked, 0, memory_order_seq_cst);
            /* credits left due while parked (none followed them) go now */
            adag__ucx_credits_flush(d);
            continue;
        }
        pthread_mutex_lock(&d->lock);
        adag__ucx_credits_flush_locked(d);
        while (ucp_worker_progress(d->worker)) {
        }
        ucs_status_t us = ucp_worker_arm(d->worker);
        pthread_mutex_unlock(&d->lock);
        if (us == UCS_ERR_BUSY)
            continue; /* events came in meanwhile */
        if (us != UCS_OK) {
            ADAG_LOG_WARN("ucx: ucp_worker_arm: %s; progress thread polls",
                     ucs_status_string(us));
            usleep(1000);
        } else if (poll(fds, 2, -1) < 0 && errno != EINTR) {
            ADAG_LOG_WARN("ucx: poll on the worker's event fd: %s", strerror(errno));
            usleep(1000);
        }
        if (fds[1].revents & POLLIN)
            return NULL;
    }
}

/* ---- connections ---- */

static void conn_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    adag_ucx_conn_t *c = arg;
    adag_ucx_domain_t *d = c->d;
    (void)ep;
    if (atomic_load_explicit(&c->status, memory_order_seq_cst) != ADAG_OK)
        return;
    snprintf(c->why, sizeof(c->why), "%s", ucs_status_string(status));
    /* seq_cst: every endpoint that sees the status sees `why` */
    atomic_store_explicit(&c->status, ADAG_ERR_IO, memory_order_seq_cst);
    unsigned hit = 0;
    for (unsigned i = 0; i < d->neps; i++) /* under d->lock: inside progress */
        hit += (unsigned)adag__ucx_chan_peer_failed(d->eps[i], c);
    /* a peer that goes when no open channel needs it (a DAG torn down, its
     * workers exiting) is no news */
    if (hit)
        ADAG_LOG_WARN("ucx: a peer of this process failed (%u channel endpoints lost): %s",
                      hit, c->why);
    else
        ADAG_LOG_DEBUG("ucx: a peer no channel uses went: %s", c->why);
}

adag_status_t adag__ucx_conn_get(adag_ucx_domain_t *d, const void *addr, size_t len,
                                const char *who, adag_ucx_conn_t **out)
{
    for (adag_ucx_conn_t *c = d->conns; c; c = c->next)
        if (c->addr_len == len && !memcmp(c->addr, addr, len)) {
            *out = c;
            return ADAG_OK;
        }
    adag_ucx_conn_t *c = calloc(1, sizeof(*c));
    if (!c || !(c->addr = malloc(len))) {
        free(c);
        return adag__error(ADAG_ERR_NO_MEMORY, "ucx channel %s: out of memory", who);
    }
    memcpy(c->addr, addr, len);
    c->addr_len = len;
    c->d = d;
    atomic_init(&c->status, ADAG_OK);
    ucp_ep_params_t p = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = c->addr,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = conn_failed, .arg = c},
    };
    ucs_status_t us = ucp_ep_create(d->worker, &p, &c->ep);
    if (us != UCS_OK) {
        free(c->addr);
        free(c);
        return adag__error(ADAG_ERR_IO, "ucx channel %s: cannot reach its peer: ucp_ep_create: %s",
                          who, ucs_status_string(us));
    }
    c->next = d->conns;
    d->conns = c;
    *out = c;
    return ADAG_OK;
}

/* Closing the connections (when the domain goes, every endpoint closed).
 *
 * UCX (1.13) keeps a request that waits on its peer (a rendezvous send
 * waiting for the ready-to-receive, a rendezvous receive waiting for its
 * data) on its UCP endpoint, and destroying a worker whose endpoint still
 * holds one aborts the process (ucp_ep_destroy_base asserts the list is
 * empty). A flush does not wait for such requests, and a peer that is
 * unreachable (a cut link, a one-way partition) never answers them, nor
 * does UCX always notice within the close; ucp_request_cancel only
 * cancels tag receives. What ends them is a forced close: UCX discards
 * the endpoint's transport endpoints and completes each of its requests
 * with UCS_ERR_CANCELED (their callbacks run, in progress). So:
 *   1. every connection UCX has not failed is flushed (ucp_ep_flush_nbx);
 *      the worker is progressed until each such connection flushed and
 *      has no request of this domain in flight, at most CLOSE_FLUSH_NS;
 *   2. a connection that did (nothing of this domain left on it) closes
 *      gracefully (flush mode); one that UCX failed, that did not flush,
 *      or that still has requests in flight (its peer is gone or stuck)
 *      closes forced, which UCX requires of a failed endpoint anyway;
 *   3. the worker is progressed until every flush and close request
 *      ended and every request's callback ran, at most CLOSE_FORCE_NS.
 * 0 when everything ended; -1 when something did not (then the worker
 * cannot be destroyed without aborting: the caller leaves it). It runs
 * alone on the worker: the progress thread has stopped and every endpoint
 * is closed, so the callbacks it progresses and the counters it reads
 * (`inflight`, `requests`) are this thread's. */
static int conns_settled(const adag_ucx_domain_t *d)
{
    for (const adag_ucx_conn_t *c = d->conns; c; c = c->next)
        if (atomic_load_explicit(&c->status, memory_order_seq_cst) == ADAG_OK &&
            (c->inflight ||
             (c->flush && ucp_request_check_status(c->flush) == UCS_INPROGRESS)))
            return 0;
    return 1;
}

static unsigned conns_unfinished(const adag_ucx_domain_t *d)
{
    unsigned n = 0;
    for (const adag_ucx_conn_t *c = d->conns; c; c = c->next) {
        n += c->flush && ucp_request_check_status(c->flush) == UCS_INPROGRESS;
        n += c->close && ucp_request_check_status(c->close) == UCS_INPROGRESS;
    }
    return n;
}

/* Progresses the worker until done(d) or the deadline; done(d) at the end. */
static int progress_until(adag_ucx_domain_t *d, int (*done)(const adag_ucx_domain_t *),
                          int64_t deadline)
{
    while (!done(d) && adag__now_ns() < deadline)
        ucp_worker_progress(d->worker);
    return done(d);
}

static int conns_ended(const adag_ucx_domain_t *d)
{
    return conns_unfinished(d) == 0 &&
           atomic_load_explicit(&d->requests, memory_order_relaxed) == 0;
}

static int conns_close(adag_ucx_domain_t *d)
{
    const char *what = d->what;
    static const ucp_request_param_t no_params = {0};
    unsigned forced = 0, nconns = 0;
    int64_t t0 = adag__now_ns();
    for (adag_ucx_conn_t *c = d->conns; c; c = c->next, nconns++) {
        if (atomic_load_explicit(&c->status, memory_order_seq_cst) != ADAG_OK)
            continue;
        void *r = ucp_ep_flush_nbx(c->ep, &no_params);
        if (UCS_PTR_IS_PTR(r))
            c->flush = r;
        c->flush_failed = UCS_PTR_IS_ERR(r);
    }
    if (!progress_until(d, conns_settled, adag__now_ns() + CLOSE_FLUSH_NS))
        ADAG_LOG_DEBUG("ucx: %s: a peer did not take what was in flight within %lld ms",
                       what, CLOSE_FLUSH_NS / 1000000);
    for (adag_ucx_conn_t *c = d->conns; c; c = c->next) {
        int force = atomic_load_explicit(&c->status, memory_order_seq_cst) != ADAG_OK ||
                    c->inflight || c->flush_failed ||
                    (c->flush && ucp_request_check_status(c->flush) == UCS_INPROGRESS);
        ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
        void *r = ucp_ep_close_nbx(c->ep, &p);
        if (UCS_PTR_IS_PTR(r))
            c->close = r;
        forced += (unsigned)force;
    }
    int ended = progress_until(d, conns_ended, adag__now_ns() + CLOSE_FORCE_NS);
    if (forced)
        ADAG_LOG_DEBUG("ucx: %s: %u of %u connections closed forced (failed, or requests "
                       "in flight), in %lld ms", what, forced, nconns,
                       (long long)((adag__now_ns() - t0) / 1000000));
    if (!ended) {
        ADAG_LOG_WARN("ucx: %s: %u UCX requests and %u connection flushes or closes did not "
                      "end within %lld ms of a forced close; the UCP worker is left as it is "
                      "(destroying it with them would abort the process)",
                      what, atomic_load_explicit(&d->requests, memory_order_relaxed),
                      conns_unfinished(d), CLOSE_FORCE_NS / 1000000);
        return -1;
    }
    while (d->conns) {
        adag_ucx_conn_t *c = d->conns;
        d->conns = c->next;
        if (c->flush)
            ucp_request_free(c->flush);
        if (c->close)
            ucp_request_free(c->close);
        free(c->addr);
        free(c);
    }
    return 0;
}

/* ---- the endpoint list ---- */

adag_status_t adag__ucx_domain_add(adag_ucx_domain_t *d, adag_ucx_chan_t *ch)
{
    if (d->neps == d->cap) {
        unsigned cap = d->cap ? 2 * d->cap : 16;
        adag_ucx_chan_t **eps = realloc(d->eps, cap * sizeof(*eps));
        if (!eps)
            return adag__error(ADAG_ERR_NO_MEMORY, "ucx domain: out of memory");
        d->eps = eps;
        d->cap = cap;
    }
    d->eps[d->neps++] = ch;
    return ADAG_OK;
}

void adag__ucx_domain_remove(adag_ucx_domain_t *d, adag_ucx_chan_t *ch)
{
    for (unsigned i = 0; i < d->neps; i++)
        if (d->eps[i] == ch) {
            d->eps[i] = d->eps[--d->neps];
            break;
        }
    if (atomic_load_explicit(&ch->pending, memory_order_relaxed)) {
        /* its requests' callbacks still point at it */
        ch->next_zombie = d->zombies;
        d->zombies = ch;
    } else {
        adag__ucx_chan_free(ch);
    }
}

/* ---- the domain's lifetime ---- */

void adag__ucx_domain_destroy(adag_chan_domain_t *dom)
{
    adag_ucx_domain_t *d = (adag_ucx_domain_t *)dom;
    if (!d)
        return;
    if (d->thread_started) {
        uint64_t one = 1;
        atomic_store_explicit(&d->stopping, 1, memory_order_release);
        atomic_fetch_add_explicit(&d->park_seq, 1, memory_order_seq_cst);
        adag__futex_wake_all(&d->park_seq);
        while (write(d->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
        }
        pthread_join(d->progress, NULL);
    }
    if (d->worker && conns_close(d) != 0) {
        /* requests still point at its connections and zombie endpoints,
         * and the AM handlers at it: all of them stay (never progressed
         * again); only what UCX does not know of goes */
        if (d->stop_fd >= 0)
            close(d->stop_fd);
        if (d->notify_fd >= 0)
            close(d->notify_fd);
        d->stop_fd = d->notify_fd = -1;
        return;
    }
    if (d->worker) {
        while (d->zombies) {
            adag_ucx_chan_t *z = d->zombies;
            d->zombies = z->next_zombie;
            adag__ucx_chan_free(z);
        }
        if (d->addr)
            ucp_worker_release_address(d->worker, d->addr);
        ucp_worker_destroy(d->worker);
    }
    if (d->ctx)
        context_put();
    /* the worker owns its event fd */
    if (d->stop_fd >= 0)
        close(d->stop_fd);
    if (d->notify_fd >= 0)
        close(d->notify_fd);
    free(d->eps);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static adag_status_t domain_new(const char *what, adag_chan_domain_t **out)
{
    adag_status_t st;
    ucs_status_t us;
    adag_ucx_domain_t *d = calloc(1, sizeof(*d));
    if (!d)
        return adag__error(ADAG_ERR_NO_MEMORY, "ucx domain of %s: out of memory", what);
    d->base.ops = &adag_chan_ucx_ops;
    d->efd = d->stop_fd = d->notify_fd = -1;
    snprintf(d->what, sizeof(d->what), "%s", what);
    pthread_mutex_init(&d->lock, NULL);
    if ((st = context_get(&d->ctx)) != ADAG_OK) {
        d->ctx = NULL;
        goto fail;
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE |
                                            UCP_WORKER_PARAM_FIELD_EVENTS,
                              .thread_mode = UCS_THREAD_MODE_SINGLE, /* d->lock serializes */
                              .events = UCP_WAKEUP_TX | UCP_WAKEUP_RX};
    if ((us = ucp_worker_create(d->ctx, &wp, &d->worker)) != UCS_OK) {
        d->worker = NULL;
        st = adag__error(ADAG_ERR_IO, "ucx domain of %s: ucp_worker_create: %s", what,
                        ucs_status_string(us));
        goto fail;
    }
    if ((us = ucp_worker_get_address(d->worker, &d->addr, &d->addr_len)) != UCS_OK ||
        (us = ucp_worker_get_efd(d->worker, &d->efd)) != UCS_OK) {
        d->addr = NULL;
        st = adag__error(ADAG_ERR_IO, "ucx domain of %s: worker address or event fd: %s", what,
                        ucs_status_string(us));
        goto fail;
    }
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .arg = d,
    };
    hp.id = ADAG_UCX_AM_DATA;
    hp.cb = adag__ucx_on_data;
    if ((us = ucp_worker_set_am_recv_handler(d->worker, &hp)) == UCS_OK) {
        hp.id = ADAG_UCX_AM_CREDIT;
        hp.cb = adag__ucx_on_credit;
        us = ucp_worker_set_am_recv_handler(d->worker, &hp);
    }
    if (us != UCS_OK) {
        st = adag__error(ADAG_ERR_IO, "ucx domain of %s: AM handlers: %s", what,
                        ucs_status_string(us));
        goto fail;
    }
    d->stop_fd = adag__fd_above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    d->notify_fd = adag__fd_above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (d->stop_fd < 0 || d->notify_fd < 0) {
        st = adag__error_errno(errno, "ucx domain of %s: eventfd", what);
        goto fail;
    }
    int rc = pthread_create(&d->progress, NULL, progress_main, d);
    if (rc != 0) {
        st = adag__error_errno(rc, "ucx domain of %s: progress thread", what);
        goto fail;
    }
    d->thread_started = 1;
    *out = &d->base;
    return ADAG_OK;
fail:
    adag__ucx_domain_destroy(&d->base);
    return st;
}

adag_status_t adag__ucx_domain_create(const char *dag_name, const adag_chan_geom_t *geoms,
                                   const adag_chan_place_t *const *places, unsigned n,
                                   adag_wbuf_t *descs, adag_chan_domain_t **out)
{
    char what[96];
    snprintf(what, sizeof(what), "DAG %s", dag_name);
    /* a channel's descriptor: its index in the DAG (what the AM headers
     * name), its geometry, which every endpoint checks, and where each
     * endpoint keeps the value (a device endpoint stages it through its
     * host ring: chan_ucx_dev.c) */
    for (unsigned i = 0; i < n; i++) {
        if (geoms[i].nslots == 0 || geoms[i].capacity > (size_t)1 << 40)
            return adag__error(ADAG_ERR_INVALID, "DAG %s: ucx channel %u: %u slots of %zu bytes",
                              dag_name, i, geoms[i].nslots, geoms[i].capacity);
        adag__wbuf_u32(&descs[i], i);
        adag__wbuf_u32(&descs[i], geoms[i].nslots);
        adag__wbuf_u32(&descs[i], geoms[i].nreaders);
        adag__wbuf_u64(&descs[i], geoms[i].capacity);
        const adag_chan_place_t *pl = places ? places[i] : NULL;
        adag__wbuf_u32(&descs[i], pl ? 1 + geoms[i].nreaders : 0);
        for (unsigned j = 0; pl && j <= geoms[i].nreaders; j++) {
            adag__wbuf_u32(&descs[i], (uint32_t)pl[j].kind);
            adag__wbuf_u32(&descs[i], pl[j].index);
        }
    }
    return domain_new(what, out);
}

size_t adag__ucx_slot_stride(size_t capacity)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (capacity >= page)
        return (capacity + page - 1) / page * page;
    return capacity ? (capacity + 63) & ~(size_t)63 : 64;
}

void adag__ucx_memory(const adag_chan_geom_t *g, const adag_chan_place_t *places, size_t *host,
                     size_t *device)
{
    size_t ring = g->nslots * adag__ucx_slot_stride(g->capacity);
    *host = (size_t)(1 + g->nreaders) * ring;
    *device = 0;
    for (unsigned j = 0; places && j <= g->nreaders; j++)
        if (places[j].kind >= 0)
            *device += ring; /* its device slots (chan_ucx_dev.c) */
}

adag_status_t adag__ucx_domain_export(adag_chan_domain_t *d, adag_wbuf_t *blob, int *fds,
                                   unsigned *nfds)
{
    (void)d;
    (void)fds;
    adag__wbuf_u32(blob, DOMAIN_MAGIC);
    *nfds = 0;
    return ADAG_OK;
}

adag_status_t adag__ucx_domain_import(adag_blob_t blob, const int *fds, unsigned nfds,
                                   adag_chan_domain_t **out)
{
    adag_rbuf_t rb = {blob.data, blob.len, 0, 0};
    uint32_t magic = adag__rbuf_u32(&rb);
    for (unsigned i = 0; i < nfds; i++)
        close(fds[i]);
    if (rb.failed || rb.pos != rb.len || magic != DOMAIN_MAGIC || nfds)
        return adag__error(ADAG_ERR_PROTOCOL, "ucx domain: malformed (%zu bytes, %u fds)",
                          blob.len, nfds);
    return domain_new("an imported DAG", out);
}


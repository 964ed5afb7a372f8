/* The communicators an actor joined: see dag/exec/actor_comm.h. */
#include "dag/exec/actor_comm.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { JOINING, JOINED, FAILED } join_state_t;

struct adag_actor_comm {
    adag_actor_comm_t *next;      /* in the table, under its lock */
    adag_comm_spec_t spec;
    const adag_comm_ops_t *ops;
    const adag_chan_device_t *dev;
    char actor[ADAG_MAX_NAME];
    int64_t deadline;             /* of the join */
    /* its table's ADAG_TEARDOWN_TIMEOUT_MS and ADAG_COMM_TIMEOUT_MS */
    int64_t teardown_ms, comm_timeout_ms;
    pthread_mutex_t lock;         /* state, comm, why, aborted, refs */
    pthread_cond_t cond;          /* the join ended */
    join_state_t state;
    adag_status_t join_status;
    char why[ADAG_ERROR_MAX];
    adag_status_t why_status;     /* the status the abort's reason carries */
    const void *why_by;           /* the loop that gave the reason (NULL: none) */
    adag_comm_t *comm;            /* JOINED */
    adag_dev_stream_t *stream;    /* its send/recv; made before the join starts */
    int aborted;
    int refs;
    pthread_t joiner;             /* the joining thread (joined by entry_free) */
    int joiner_started;
    /* turns (spec.shared), under lock: the ticket that runs next, the
     * loop holding the turn, tickets given up before their turn, and
     * the ticket channels of loops that ended (their tickets given up as
     * the driver publishes them) */
    pthread_cond_t turn_cond;
    uint64_t next_turn;
    const void *holder;
    char holder_dag[ADAG_MAX_NAME]; /* the DAG of the loop holding it */
    uint64_t *skipped;
    unsigned nskipped, capskipped;
    struct retired { adag_chan_t *order; uint64_t next_seq; const void *owner; } *retired;
    unsigned nretired;
};

/* Live entries in this process; relaxed: a count for tests, nothing is
 * ordered by it. */
static _Atomic unsigned live_entries;

unsigned adag__actor_comm_live(void)
{
    return atomic_load_explicit(&live_entries, memory_order_relaxed);
}

void adag__actor_comms_init(adag_actor_comms_t *t, const adag_settings_t *settings)
{
    pthread_mutex_init(&t->lock, NULL);
    t->settings = settings;
    t->list = NULL;
    t->host_device = NULL;
}

adag_status_t adag__actor_comms_host_device(adag_actor_comms_t *t, const char *actor,
                                           const adag_chan_device_t **out)
{
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&t->lock);
    if (!t->host_device &&
        (st = adag__actor_device_open(ADAG_DEV_EMULATED, 0, t->settings, &t->host_device)) !=
            ADAG_OK)
        adag__error_prefix("actor %s: the emulated device of its communicators (a host actor in a "
                          "collective)", actor);
    *out = t->host_device ? &t->host_device->chan : NULL;
    pthread_mutex_unlock(&t->lock);
    return st;
}

static void entry_free(adag_actor_comm_t *e)
{
    /* the joining thread uses the entry and the device until it returns
     * (bounded by the join's deadline) */
    if (e->joiner_started)
        pthread_join(e->joiner, NULL);
    adag_device_t *dev = e->dev->dev;
    const adag_device_ops_t *dops = dev->ops;
    int drained = 1;
    if (e->stream) {
        int64_t deadline = adag__deadline_ms(e->teardown_ms);
        if (dops->stream_sync(e->stream, deadline) != ADAG_OK) {
            /* an operation still runs: it may touch the communicator */
            ADAG_LOG_ERROR("actor %s: communicator %llu: its stream did not drain (%s); it and "
                           "the communicator are left allocated",
                           e->actor, (unsigned long long)e->spec.key, adag_last_error());
            drained = 0;
        }
    }
    if (drained) {
        if (e->comm)
            e->ops->destroy(e->comm);
        if (e->stream)
            dops->stream_destroy(dev, e->stream);
    }
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    pthread_cond_destroy(&e->turn_cond);
    free(e->skipped);
    free(e->retired);
    free(e);
    atomic_fetch_sub_explicit(&live_entries, 1, memory_order_relaxed);
}

void adag__actor_comm_put(adag_actor_comm_t *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    int last = --e->refs == 0;
    pthread_mutex_unlock(&e->lock);
    if (last)
        entry_free(e);
}

/* Under e->lock: the first reason is kept. */
static void blame_locked(adag_actor_comm_t *e, adag_status_t status, const char *why,
                         const void *by)
{
    if (e->why[0] || !why || !why[0])
        return;
    snprintf(e->why, sizeof(e->why), "%s", why);
    e->why_status = status;
    e->why_by = by;
}

/* Under e->lock. */
static void abort_locked(adag_actor_comm_t *e, adag_status_t status, const char *why,
                         const void *by)
{
    if (!e->aborted)
        blame_locked(e, status, why, by);
    e->aborted = 1;
    if (e->comm)
        e->ops->abort(e->comm);
    pthread_cond_broadcast(&e->turn_cond);
}

void adag__actor_comm_abort(adag_actor_comm_t *e)
{
    pthread_mutex_lock(&e->lock);
    abort_locked(e, ADAG_ERR_CLOSED, NULL, NULL);
    pthread_mutex_unlock(&e->lock);
}

void adag__actor_comm_abort_why(adag_actor_comm_t *e, adag_status_t status, const char *why,
                               const void *by)
{
    pthread_mutex_lock(&e->lock);
    int first = !e->aborted;
    abort_locked(e, status, why, by);
    if (first)
        ADAG_LOG_WARN("actor %s: communicator %llu is aborted: %s", e->actor,
                      (unsigned long long)e->spec.key, e->why);
    pthread_mutex_unlock(&e->lock);
}

void adag__actor_comm_blame(adag_actor_comm_t *e, adag_status_t status, const char *why,
                           const void *by)
{
    pthread_mutex_lock(&e->lock);
    if (!e->aborted)
        blame_locked(e, status, why, by);
    pthread_mutex_unlock(&e->lock);
}

void adag__actor_comm_unblame(adag_actor_comm_t *e, const void *by)
{
    pthread_mutex_lock(&e->lock);
    if (!e->aborted && e->why[0] && e->why_by == by)
        e->why[0] = '\0';
    pthread_mutex_unlock(&e->lock);
}

void adag__actor_comm_dag_aborted(adag_actor_comm_t *e, int failed)
{
    pthread_mutex_lock(&e->lock);
    if (failed && !e->spec.shared)
        abort_locked(e, ADAG_ERR_CLOSED, NULL, NULL);
    pthread_cond_broadcast(&e->turn_cond); /* its loops' turn waits see the abort word */
    pthread_mutex_unlock(&e->lock);
}

int adag__actor_comm_shared(const adag_actor_comm_t *e)
{
    return (int)e->spec.shared;
}

/* ---- turns ---- */

/* next_turn moves past tickets given up (under lock; every remembered
 * one is ahead of next_turn: skip_locked keeps no older one). */
static void advance_locked(adag_actor_comm_t *e)
{
    for (unsigned i = 0; i < e->nskipped; i++)
        if (e->skipped[i] == e->next_turn) {
            e->skipped[i] = e->skipped[--e->nskipped];
            e->next_turn++;
            i = (unsigned)-1; /* the next one may be anywhere */
        }
}

static void skip_locked(adag_actor_comm_t *e, uint64_t ticket)
{
    if (ticket < e->next_turn)
        return;
    if (ticket == e->next_turn) {
        e->next_turn++;
        advance_locked(e);
        pthread_cond_broadcast(&e->turn_cond);
        return;
    }
    if (e->nskipped == e->capskipped) {
        unsigned cap = e->capskipped ? 2 * e->capskipped : 16;
        uint64_t *s = realloc(e->skipped, cap * sizeof(*s));
        if (!s) { /* cannot remember it: the turns cannot be kept */
            abort_locked(e, ADAG_ERR_NO_MEMORY, "out of memory while giving up a turn", NULL);
            return;
        }
        e->skipped = s;
        e->capskipped = cap;
    }
    e->skipped[e->nskipped++] = ticket;
}

/* The tickets the driver published to loops that ended: given up. */
static void sweep_locked(adag_actor_comm_t *e)
{
    for (unsigned i = 0; i < e->nretired; i++) {
        struct retired *r = &e->retired[i];
        adag_slot_view_t v;
        while (adag__chan_ready(r->order, r->next_seq) &&
               adag__chan_wait(r->order, r->next_seq, 0, &v) == ADAG_OK) {
            uint64_t ticket;
            if (v.status == ADAG_OK && v.size == sizeof(ticket)) {
                memcpy(&ticket, v.data, sizeof(ticket));
                skip_locked(e, ticket);
            }
            adag__chan_release(r->order, r->next_seq);
            r->next_seq++;
        }
    }
}

adag_status_t adag__actor_comm_turn_take(adag_actor_comm_t *e, uint64_t ticket,
                                        const void *holder, const char *dag,
                                        const _Atomic uint32_t *abort, int64_t deadline)
{
    adag_status_t st;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        sweep_locked(e);
        if (e->aborted) {
            st = ADAG_ERR_CLOSED;
            break;
        }
        /* seq_cst: the abort word's store comes before the broadcast that
         * woke us (common/event.h) */
        if (atomic_load_explicit(abort, memory_order_seq_cst)) {
            st = ADAG_ERR_CLOSED;
            break;
        }
        if (e->next_turn == ticket) {
            e->holder = holder;
            snprintf(e->holder_dag, sizeof(e->holder_dag), "%s", dag);
            st = ADAG_OK;
            break;
        }
        if (e->next_turn > ticket) {
            st = adag__error(ADAG_ERR_PROTOCOL, "actor %s: communicator %llu: ticket %llu came "
                            "after its turn (%llu runs next)", e->actor,
                            (unsigned long long)e->spec.key, (unsigned long long)ticket,
                            (unsigned long long)e->next_turn);
            break;
        }
        int64_t now = adag__now_ns();
        if (deadline != ADAG_FOREVER && now >= deadline) {
            st = adag__error(ADAG_ERR_TIMEOUT, "actor %s: communicator %llu: the turn of ticket "
                            "%llu did not come: ticket %llu runs first, %s%s%s", e->actor,
                            (unsigned long long)e->spec.key, (unsigned long long)ticket,
                            (unsigned long long)e->next_turn,
                            e->holder ? "held by the loop of DAG " : "not yet taken by a loop "
                            "of this actor", e->holder ? e->holder_dag : "",
                            e->holder ? " (in a collective)" : "");
            break;
        }
        /* loops that ended may be handed tickets at any time: looked at
         * every millisecond while any is retired */
        int64_t until = e->nretired ? now + 1000000 : deadline;
        if (deadline != ADAG_FOREVER && until > deadline)
            until = deadline;
        if (until == ADAG_FOREVER) {
            pthread_cond_wait(&e->turn_cond, &e->lock);
        } else {
            struct timespec ts = adag__timespec_at(until);
            pthread_cond_timedwait(&e->turn_cond, &e->lock, &ts);
        }
    }
    pthread_mutex_unlock(&e->lock);
    return st;
}

void adag__actor_comm_turn_end(adag_actor_comm_t *e, uint64_t ticket)
{
    pthread_mutex_lock(&e->lock);
    e->holder = NULL;
    skip_locked(e, ticket);
    pthread_mutex_unlock(&e->lock);
}

int adag__actor_comm_turn_held_by(adag_actor_comm_t *e, const void *holder)
{
    pthread_mutex_lock(&e->lock);
    int held = e->holder == holder;
    pthread_mutex_unlock(&e->lock);
    return held;
}

/* Under e->lock: why it cannot be used (ADAG_OK: it can); *peer set when
 * the only sign is a peer rank's abort (the communicator's status
 * ADAG_ERR_CLOSED, no reason recorded here). */
static adag_status_t why_locked(adag_actor_comm_t *e, char *buf, size_t len, int *peer)
{
    adag_status_t st;
    *peer = 0;
    if (e->aborted && e->why[0]) {
        snprintf(buf, len, "%s", e->why);
        return e->why_status;
    }
    if (e->comm && (st = e->ops->status(e->comm)) != ADAG_OK) { /* it broke itself */
        snprintf(buf, len, "%s", adag_last_error());
        *peer = !e->aborted && st == ADAG_ERR_CLOSED;
        return st;
    }
    snprintf(buf, len, "it was aborted");
    return e->aborted ? ADAG_ERR_CLOSED : ADAG_OK;
}

adag_status_t adag__actor_comm_why(adag_actor_comm_t *e, char *buf, size_t len, int *peer)
{
    int p;
    pthread_mutex_lock(&e->lock);
    adag_status_t st = why_locked(e, buf, len, &p);
    pthread_mutex_unlock(&e->lock);
    if (peer)
        *peer = p;
    return st == ADAG_OK ? ADAG_ERR_CLOSED : st;
}

adag_status_t adag__actor_comm_broken(adag_actor_comm_t *e, const void *by, char *buf,
                                     size_t len)
{
    int peer = 0;
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&e->lock);
    if (e->state == JOINED && (!e->aborted || !e->why[0] || e->why_by != by))
        st = why_locked(e, buf, len, &peer);
    pthread_mutex_unlock(&e->lock);
    return peer ? ADAG_OK : st;
}

void adag__actor_comm_retire(adag_actor_comm_t *e, adag_chan_t *order, uint64_t next_seq,
                            const void *owner)
{
    pthread_mutex_lock(&e->lock);
    struct retired *r = realloc(e->retired, (e->nretired + 1) * sizeof(*r));
    if (r) {
        e->retired = r;
        e->retired[e->nretired++] = (struct retired){order, next_seq, owner};
        sweep_locked(e);
    } else {
        abort_locked(e, ADAG_ERR_NO_MEMORY, "out of memory while a loop ended", NULL);
    }
    pthread_cond_broadcast(&e->turn_cond);
    pthread_mutex_unlock(&e->lock);
}

void adag__actor_comm_unretire(adag_actor_comm_t *e, const void *owner)
{
    pthread_mutex_lock(&e->lock);
    sweep_locked(e);
    for (unsigned i = 0; i < e->nretired; i++)
        if (e->retired[i].owner == owner)
            e->retired[i--] = e->retired[--e->nretired];
    pthread_mutex_unlock(&e->lock);
}

/* The joining thread: bound to the actor's device, it joins (collective:
 * every rank at once) and publishes the result under the entry's lock. */
static void *join_main(void *arg)
{
    adag_actor_comm_t *e = arg;
    adag_comm_t *comm = NULL;
    adag_status_t st = e->dev->dev->ops->bind_thread(e->dev->dev);
    if (st == ADAG_OK)
        st = e->ops->init(&e->spec.id, e->spec.nranks, e->spec.rank, e->dev->dev, e->deadline,
                          &comm);
    pthread_mutex_lock(&e->lock);
    e->join_status = st;
    if (st == ADAG_OK) {
        comm->timeout_ms = e->comm_timeout_ms; /* before any operation: they follow JOINED */
        e->comm = comm;
        e->state = JOINED;
        /* an abort that came while joining applies now */
        if (e->aborted)
            e->ops->abort(comm);
    } else {
        snprintf(e->why, sizeof(e->why), "%s", adag_last_error());
        e->state = FAILED;
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static adag_actor_comm_t *find(adag_actor_comms_t *t, uint64_t key)
{
    for (adag_actor_comm_t *e = t->list; e; e = e->next)
        if (e->spec.key == key)
            return e;
    return NULL;
}

adag_status_t adag__actor_comm_begin(adag_actor_comms_t *t, const adag_comm_spec_t *spec,
                                    const adag_chan_device_t *dev, const char *actor,
                                    int64_t deadline, adag_actor_comm_t **out)
{
    const adag_comm_ops_t *ops = adag__comm_backend(spec->kind);
    adag_actor_comm_t *e = NULL;
    adag_status_t st;
    *out = NULL;
    if (!ops || !dev || ops->device_kind != dev->kind)
        return adag__error(ADAG_ERR_INVALID,
                          "actor %s: communicator %llu (%s) needs an actor on a %s device",
                          actor, (unsigned long long)spec->key, ops ? ops->name : "?",
                          ops ? adag_device_kind_name(ops->device_kind) : "?");
    pthread_mutex_lock(&t->lock);
    if ((e = find(t, spec->key))) {
        st = ADAG_OK;
        pthread_mutex_lock(&e->lock);
        if (e->spec.rank != spec->rank || e->spec.nranks != spec->nranks ||
            e->spec.kind != spec->kind)
            st = adag__error(ADAG_ERR_INVALID,
                            "actor %s: communicator %llu was joined as rank %u of %u, now asked "
                            "as rank %u of %u", actor, (unsigned long long)spec->key,
                            e->spec.rank, e->spec.nranks, spec->rank, spec->nranks);
        else if (e->aborted)
            st = adag__error(ADAG_ERR_CLOSED, "actor %s: communicator %llu was aborted",
                            actor, (unsigned long long)spec->key);
        else
            e->refs++;
        pthread_mutex_unlock(&e->lock);
        pthread_mutex_unlock(&t->lock);
        if (st == ADAG_OK)
            *out = e;
        return st;
    }
    if (!(e = calloc(1, sizeof(*e)))) {
        pthread_mutex_unlock(&t->lock);
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: communicator: out of memory", actor);
    }
    atomic_fetch_add_explicit(&live_entries, 1, memory_order_relaxed);
    e->spec = *spec;
    e->ops = ops;
    e->dev = dev;
    e->deadline = deadline;
    e->teardown_ms = t->settings->teardown_timeout_ms;
    e->comm_timeout_ms = t->settings->comm_timeout_ms;
    snprintf(e->actor, sizeof(e->actor), "%s", actor);
    pthread_mutex_init(&e->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cond, &ca);
    pthread_cond_init(&e->turn_cond, &ca);
    pthread_condattr_destroy(&ca);
    e->state = JOINING;
    e->refs = 2; /* the table and the caller */
    if ((st = dev->dev->ops->stream_create(dev->dev, &e->stream)) != ADAG_OK) {
        adag__error_prefix("actor %s: communicator %llu: its stream", actor,
                          (unsigned long long)spec->key);
        goto fail;
    }
    int rc = pthread_create(&e->joiner, NULL, join_main, e);
    if (rc != 0) {
        st = adag__error_errno(rc, "actor %s: communicator %llu: pthread_create", actor,
                              (unsigned long long)spec->key);
        goto fail;
    }
    e->joiner_started = 1;
    e->next = t->list;
    t->list = e;
    pthread_mutex_unlock(&t->lock);
    *out = e;
    return ADAG_OK;
fail:
    pthread_mutex_unlock(&t->lock);
    e->refs = 1;
    adag__actor_comm_put(e);
    return st;
}

adag_status_t adag__actor_comm_finish(adag_actor_comm_t *e, int64_t deadline,
                                     adag_chan_comm_t *out)
{
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&e->lock);
    while (e->state == JOINING) {
        if (deadline == ADAG_FOREVER) {
            pthread_cond_wait(&e->cond, &e->lock);
            continue;
        }
        if (adag__now_ns() >= deadline)
            break;
        struct timespec ts = adag__timespec_at(deadline);
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
    }
    if (e->state == JOINING)
        st = adag__error(ADAG_ERR_TIMEOUT,
                        "actor %s: communicator %llu (%s, rank %u of %u) was not joined by "
                        "every rank in time", e->actor, (unsigned long long)e->spec.key,
                        e->ops->name, e->spec.rank, e->spec.nranks);
    else if (e->state == FAILED)
        st = adag__error(e->join_status, "actor %s: communicator %llu (%s, rank %u of %u): %s",
                        e->actor, (unsigned long long)e->spec.key, e->ops->name, e->spec.rank,
                        e->spec.nranks, e->why);
    else if (e->aborted)
        st = adag__error(ADAG_ERR_CLOSED, "actor %s: communicator %llu was aborted", e->actor,
                        (unsigned long long)e->spec.key);
    else
        *out = (adag_chan_comm_t){e->spec.key, e->comm, e->stream};
    pthread_mutex_unlock(&e->lock);
    return st;
}

void adag__actor_comm_drop(adag_actor_comms_t *t, uint64_t key)
{
    pthread_mutex_lock(&t->lock);
    adag_actor_comm_t **p = &t->list;
    while (*p && (*p)->spec.key != key)
        p = &(*p)->next;
    adag_actor_comm_t *e = *p;
    if (e)
        *p = e->next;
    pthread_mutex_unlock(&t->lock);
    if (!e)
        return;
    adag__actor_comm_abort(e);
    adag__actor_comm_put(e);
}

/* Waits until e's join ended (bounded by its own deadline and a second):
 * the joining thread uses the actor's device, which closes after this. */
static void wait_join(adag_actor_comm_t *e)
{
    int64_t deadline = e->deadline == ADAG_FOREVER ? adag__deadline_ms(60000)
                                                   : e->deadline + 1000000000;
    pthread_mutex_lock(&e->lock);
    while (e->state == JOINING && adag__now_ns() < deadline) {
        struct timespec ts = adag__timespec_at(deadline);
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
    }
    if (e->state == JOINING)
        ADAG_LOG_ERROR("actor %s: communicator %llu: still joining as the actor stops",
                       e->actor, (unsigned long long)e->spec.key);
    pthread_mutex_unlock(&e->lock);
}

void adag__actor_comms_destroy(adag_actor_comms_t *t)
{
    pthread_mutex_lock(&t->lock);
    for (adag_actor_comm_t *e = t->list; e; e = e->next)
        wait_join(e);
    pthread_mutex_unlock(&t->lock);
    for (;;) {
        pthread_mutex_lock(&t->lock);
        adag_actor_comm_t *e = t->list;
        uint64_t key = e ? e->spec.key : 0;
        pthread_mutex_unlock(&t->lock);
        if (!e)
            break;
        adag__actor_comm_drop(t, key);
    }
    /* the entries' streams were on it: each was freed by its last put,
     * which the DAG contexts (all destroyed) and the drops above gave */
    adag__actor_device_close(t->host_device, "(a host actor's communicators)",
                            adag__deadline_ms(t->settings->teardown_timeout_ms));
    t->host_device = NULL;
    pthread_mutex_destroy(&t->lock);
}

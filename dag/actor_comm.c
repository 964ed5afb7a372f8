/* The communicators an actor joined: see dag/actor_comm.h. */
#include "dag/actor_comm.h"

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
    pthread_mutex_t lock;         /* state, comm, why, aborted, refs */
    pthread_cond_t cond;          /* the join ended */
    join_state_t state;
    adag_status_t join_status;
    char why[ADAG_ERROR_MAX];
    adag_comm_t *comm;            /* JOINED */
    adag_dev_stream_t *stream;    /* its send/recv; made before the join starts */
    int aborted;
    int refs;
    pthread_t joiner;             /* the joining thread (joined by entry_free) */
    int joiner_started;
};

/* Live entries in this process; relaxed: a count for tests, nothing is
 * ordered by it. */
static _Atomic unsigned live_entries;

unsigned adag_actor_comm_live(void)
{
    return atomic_load_explicit(&live_entries, memory_order_relaxed);
}

void adag_actor_comms_init(adag_actor_comms_t *t)
{
    pthread_mutex_init(&t->lock, NULL);
    t->list = NULL;
    t->host_device = NULL;
}

adag_status_t adag_actor_comms_host_device(adag_actor_comms_t *t, const char *actor,
                                           const adag_chan_device_t **out)
{
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&t->lock);
    if (!t->host_device &&
        (st = adag_actor_device_open(ADAG_DEVICE_KIND_HOST, 0, &t->host_device)) != ADAG_OK)
        adag_error_prefix("actor %s: the host device of its communicators (a host actor in a "
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
        int64_t deadline = adag_deadline_ms(adag_settings()->teardown_timeout_ms);
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
    free(e);
    atomic_fetch_sub_explicit(&live_entries, 1, memory_order_relaxed);
}

void adag_actor_comm_put(adag_actor_comm_t *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    int last = --e->refs == 0;
    pthread_mutex_unlock(&e->lock);
    if (last)
        entry_free(e);
}

void adag_actor_comm_abort(adag_actor_comm_t *e)
{
    pthread_mutex_lock(&e->lock);
    e->aborted = 1;
    if (e->comm)
        e->ops->abort(e->comm);
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

adag_status_t adag_actor_comm_begin(adag_actor_comms_t *t, const adag_comm_spec_t *spec,
                                    const adag_chan_device_t *dev, const char *actor,
                                    int64_t deadline, adag_actor_comm_t **out)
{
    const adag_comm_ops_t *ops = adag_comm_backend(spec->kind);
    adag_actor_comm_t *e = NULL;
    adag_status_t st;
    *out = NULL;
    if (!ops || !dev || ops->device_kind != dev->kind)
        return adag_error(ADAG_ERR_INVALID,
                          "actor %s: communicator %llu (%s) needs an actor on a %s device",
                          actor, (unsigned long long)spec->key, ops ? ops->name : "?",
                          ops ? adag_device_kind_name(ops->device_kind) : "?");
    pthread_mutex_lock(&t->lock);
    if ((e = find(t, spec->key))) {
        st = ADAG_OK;
        pthread_mutex_lock(&e->lock);
        if (e->spec.rank != spec->rank || e->spec.nranks != spec->nranks ||
            e->spec.kind != spec->kind)
            st = adag_error(ADAG_ERR_INVALID,
                            "actor %s: communicator %llu was joined as rank %u of %u, now asked "
                            "as rank %u of %u", actor, (unsigned long long)spec->key,
                            e->spec.rank, e->spec.nranks, spec->rank, spec->nranks);
        else if (e->aborted)
            st = adag_error(ADAG_ERR_CLOSED, "actor %s: communicator %llu was aborted",
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
        return adag_error(ADAG_ERR_NO_MEMORY, "actor %s: communicator: out of memory", actor);
    }
    atomic_fetch_add_explicit(&live_entries, 1, memory_order_relaxed);
    e->spec = *spec;
    e->ops = ops;
    e->dev = dev;
    e->deadline = deadline;
    snprintf(e->actor, sizeof(e->actor), "%s", actor);
    pthread_mutex_init(&e->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cond, &ca);
    pthread_condattr_destroy(&ca);
    e->state = JOINING;
    e->refs = 2; /* the table and the caller */
    if ((st = dev->dev->ops->stream_create(dev->dev, &e->stream)) != ADAG_OK) {
        adag_error_prefix("actor %s: communicator %llu: its stream", actor,
                          (unsigned long long)spec->key);
        goto fail;
    }
    int rc = pthread_create(&e->joiner, NULL, join_main, e);
    if (rc != 0) {
        st = adag_error_errno(rc, "actor %s: communicator %llu: pthread_create", actor,
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
    adag_actor_comm_put(e);
    return st;
}

adag_status_t adag_actor_comm_finish(adag_actor_comm_t *e, int64_t deadline,
                                     adag_chan_comm_t *out)
{
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&e->lock);
    while (e->state == JOINING) {
        if (deadline == ADAG_FOREVER) {
            pthread_cond_wait(&e->cond, &e->lock);
            continue;
        }
        if (adag_now_ns() >= deadline)
            break;
        struct timespec ts = adag_timespec_at(deadline);
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
    }
    if (e->state == JOINING)
        st = adag_error(ADAG_ERR_TIMEOUT,
                        "actor %s: communicator %llu (%s, rank %u of %u) was not joined by "
                        "every rank in time", e->actor, (unsigned long long)e->spec.key,
                        e->ops->name, e->spec.rank, e->spec.nranks);
    else if (e->state == FAILED)
        st = adag_error(e->join_status, "actor %s: communicator %llu (%s, rank %u of %u): %s",
                        e->actor, (unsigned long long)e->spec.key, e->ops->name, e->spec.rank,
                        e->spec.nranks, e->why);
    else if (e->aborted)
        st = adag_error(ADAG_ERR_CLOSED, "actor %s: communicator %llu was aborted", e->actor,
                        (unsigned long long)e->spec.key);
    else
        *out = (adag_chan_comm_t){e->spec.key, e->comm, e->stream};
    pthread_mutex_unlock(&e->lock);
    return st;
}

void adag_actor_comm_drop(adag_actor_comms_t *t, uint64_t key)
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
    adag_actor_comm_abort(e);
    adag_actor_comm_put(e);
}

/* Waits until e's join ended (bounded by its own deadline and a second):
 * the joining thread uses the actor's device, which closes after this. */
static void wait_join(adag_actor_comm_t *e)
{
    int64_t deadline = e->deadline == ADAG_FOREVER ? adag_deadline_ms(60000)
                                                   : e->deadline + 1000000000;
    pthread_mutex_lock(&e->lock);
    while (e->state == JOINING && adag_now_ns() < deadline) {
        struct timespec ts = adag_timespec_at(deadline);
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
    }
    if (e->state == JOINING)
        ADAG_LOG_ERROR("actor %s: communicator %llu: still joining as the actor stops",
                       e->actor, (unsigned long long)e->spec.key);
    pthread_mutex_unlock(&e->lock);
}

void adag_actor_comms_destroy(adag_actor_comms_t *t)
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
        adag_actor_comm_drop(t, key);
    }
    /* the entries' streams were on it: each was freed by its last put,
     * which the DAG contexts (all destroyed) and the drops above gave */
    adag_actor_device_close(t->host_device, "(a host actor's communicators)",
                            adag_deadline_ms(adag_settings()->teardown_timeout_ms));
    t->host_device = NULL;
    pthread_mutex_destroy(&t->lock);
}

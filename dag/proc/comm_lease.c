/*
 * The driver's communicators (dag/exec/actor_comm.h): one record per
 * communicator made for a set of actors and a backend.
 *
 * Shared: a communicator that only collectives use is shared by every
 * live DAG over the same actors (prefill and decode). Their executions
 * take turns on it: each published execution of each such DAG draws the
 * communicator's next ticket (adag__comm_lease_next_ticket, under
 * rt->order_lock, for all of its communicators at once, so the turns of
 * every communicator follow one global order and no two can wait on each
 * other), and every rank runs the collectives of ticket t only after
 * those of t - 1 (dag/exec/actor_comm.h, "turns").
 *
 * Exclusive: one that carries ADAG_TRANSPORT_COMM tensors is leased to one
 * DAG at a time: send/recv are issued by each rank's loop as values come,
 * outside any turn, and operations of one communicator match in issue
 * order on each pair of ranks, so sharing one would pair one DAG's send
 * with the other's recv.
 *
 * A DAG that leaves cleanly keeps the communicator for the next DAG over
 * the same actors (its actors find it joined: no new init). One that
 * failed closes it to newcomers (the next DAG gets a new one); the DAGs
 * still on it go on, unless the failure broke it (a collective on it that
 * a member did not come to or did not complete: every DAG on it fails
 * then, dag/exec/loop_collective.c). The last DAG to leave a closed communicator drops it
 * (its actors are told to). A record also goes when one of its actors
 * stops. Under rt->lock; tickets under rt->order_lock.
 */
#include "common/error.h"
#include "dag/proc/proc.h"

#include <stdlib.h>
#include <string.h>

struct adag_comm_lease {
    adag_comm_lease_t *next;
    uint64_t key;
    const adag_comm_ops_t *ops;
    unsigned nranks;
    unsigned actor_ids[ADAG_COMM_MAX_RANKS]; /* rank r is actor_ids[r] (ascending) */
    adag_comm_id_t id;
    void *owner;
    unsigned users;        /* DAGs holding it */
    int exclusive;         /* leased to one DAG (ADAG_TRANSPORT_COMM tensors) */
    int closed;            /* a DAG over it failed: no new users */
    uint64_t next_ticket;  /* under rt->order_lock */
};

static void lease_free(adag_comm_lease_t *l)
{
    l->ops->id_destroy(l->owner);
    free(l);
}

adag_status_t adag__comm_lease_take(adag_runtime_h rt, const adag_comm_ops_t *ops,
                                   const unsigned *actor_ids, unsigned n, int exclusive,
                                   adag_comm_lease_t **out)
{
    adag_comm_lease_t *l;
    *out = NULL;
    if (n < 2 || n > ADAG_COMM_MAX_RANKS)
        return adag__error(ADAG_ERR_INVALID, "a communicator joins 2..%d actors, not %u",
                          ADAG_COMM_MAX_RANKS, n);
    pthread_mutex_lock(&rt->lock);
    for (l = rt->comm_leases; l; l = l->next)
        if (!l->closed && l->ops == ops && l->nranks == n &&
            (l->users == 0 || (!exclusive && !l->exclusive)) &&
            memcmp(l->actor_ids, actor_ids, n * sizeof(*actor_ids)) == 0)
            break;
    if (l) {
        l->users++;
        l->exclusive = exclusive;
        pthread_mutex_unlock(&rt->lock);
        *out = l;
        return ADAG_OK;
    }
    uint64_t key = ++rt->next_comm_key;
    pthread_mutex_unlock(&rt->lock);
    if (!(l = calloc(1, sizeof(*l))))
        return adag__error(ADAG_ERR_NO_MEMORY, "communicator: out of memory");
    l->key = key;
    l->ops = ops;
    l->nranks = n;
    memcpy(l->actor_ids, actor_ids, n * sizeof(*actor_ids));
    l->users = 1;
    l->exclusive = exclusive;
    adag_status_t st = ops->id_create(n, &l->id, &l->owner);
    if (st != ADAG_OK) {
        free(l);
        adag__error_prefix("communicator %s of %u ranks", ops->name, n);
        return st;
    }
    pthread_mutex_lock(&rt->lock);
    l->next = rt->comm_leases;
    rt->comm_leases = l;
    pthread_mutex_unlock(&rt->lock);
    *out = l;
    return ADAG_OK;
}

uint64_t adag__comm_lease_key(const adag_comm_lease_t *l)
{
    return l->key;
}

const adag_comm_ops_t *adag__comm_lease_ops(const adag_comm_lease_t *l)
{
    return l->ops;
}

const adag_comm_id_t *adag__comm_lease_id(const adag_comm_lease_t *l)
{
    return &l->id;
}

int adag__comm_lease_rank(const adag_comm_lease_t *l, unsigned actor_id)
{
    for (unsigned r = 0; r < l->nranks; r++)
        if (l->actor_ids[r] == actor_id)
            return (int)r;
    return -1;
}

unsigned adag__comm_lease_nranks(const adag_comm_lease_t *l)
{
    return l->nranks;
}

static void unlink_lease(adag_runtime_h rt, adag_comm_lease_t *l)
{
    for (adag_comm_lease_t **p = &rt->comm_leases; *p; p = &(*p)->next)
        if (*p == l) {
            *p = l->next;
            return;
        }
}

int adag__comm_lease_leave(adag_runtime_h rt, adag_comm_lease_t *l, int keep)
{
    pthread_mutex_lock(&rt->lock);
    l->users--;
    if (!keep)
        l->closed = 1;
    int gone = l->users == 0 && l->closed;
    if (gone)
        unlink_lease(rt, l);
    pthread_mutex_unlock(&rt->lock);
    return gone;
}

void adag__comm_lease_free(adag_comm_lease_t *l)
{
    if (l)
        lease_free(l);
}

unsigned adag__comm_lease_users(adag_runtime_h rt, const adag_comm_lease_t *l)
{
    pthread_mutex_lock(&rt->lock);
    unsigned n = l->users;
    pthread_mutex_unlock(&rt->lock);
    return n;
}

int adag__comm_lease_shared(const adag_comm_lease_t *l)
{
    return !l->exclusive;
}

uint64_t adag__comm_lease_next_ticket(adag_comm_lease_t *l)
{
    return l->next_ticket++;
}

void adag__comm_leases_forget_actor(adag_runtime_h rt, unsigned actor_id)
{
    for (;;) {
        adag_comm_lease_t *l;
        pthread_mutex_lock(&rt->lock);
        for (l = rt->comm_leases; l; l = l->next)
            if (l->users == 0 && adag__comm_lease_rank(l, actor_id) >= 0)
                break;
        if (l)
            unlink_lease(rt, l);
        pthread_mutex_unlock(&rt->lock);
        if (!l)
            return;
        lease_free(l);
    }
}

unsigned adag__comm_leases_count(adag_runtime_h rt)
{
    unsigned n = 0;
    pthread_mutex_lock(&rt->lock);
    for (adag_comm_lease_t *l = rt->comm_leases; l; l = l->next)
        n++;
    pthread_mutex_unlock(&rt->lock);
    return n;
}

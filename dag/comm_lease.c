/*
 * The driver's communicators (dag/actor_comm.h): one record per
 * communicator made for a set of device actors, leased to one DAG at a
 * time. Two DAGs alive at once over the same actors get two communicators:
 * their loops issue send/recv independently, and operations of one
 * communicator match in issue order on each pair of ranks, so sharing one
 * would pair one DAG's send with the other's recv. A DAG that ended cleanly
 * gives its communicator back for the next DAG over the same actors (that
 * DAG's actors find it joined: no new init); one that failed drops it (its
 * state is undefined after an abort). A record goes when one of its actors
 * stops. All under rt->lock.
 */
#include "common/error.h"
#include "dag/internal.h"

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
    int leased;
};

static void lease_free(adag_comm_lease_t *l)
{
    l->ops->id_destroy(l->owner);
    free(l);
}

adag_status_t adag_comm_lease_take(adag_runtime_h rt, const adag_comm_ops_t *ops,
                                   const unsigned *actor_ids, unsigned n, adag_comm_lease_t **out)
{
    adag_comm_lease_t *l;
    *out = NULL;
    if (n < 2 || n > ADAG_COMM_MAX_RANKS)
        return adag_error(ADAG_ERR_INVALID, "a communicator joins 2..%d actors, not %u",
                          ADAG_COMM_MAX_RANKS, n);
    pthread_mutex_lock(&rt->lock);
    for (l = rt->comm_leases; l; l = l->next)
        if (!l->leased && l->ops == ops && l->nranks == n &&
            memcmp(l->actor_ids, actor_ids, n * sizeof(*actor_ids)) == 0)
            break;
    if (l) {
        l->leased = 1;
        pthread_mutex_unlock(&rt->lock);
        *out = l;
        return ADAG_OK;
    }
    uint64_t key = ++rt->next_comm_key;
    pthread_mutex_unlock(&rt->lock);
    if (!(l = calloc(1, sizeof(*l))))
        return adag_error(ADAG_ERR_NO_MEMORY, "communicator: out of memory");
    l->key = key;
    l->ops = ops;
    l->nranks = n;
    memcpy(l->actor_ids, actor_ids, n * sizeof(*actor_ids));
    l->leased = 1;
    adag_status_t st = ops->id_create(n, &l->id, &l->owner);
    if (st != ADAG_OK) {
        free(l);
        adag_error_prefix("communicator %s of %u ranks", ops->name, n);
        return st;
    }
    pthread_mutex_lock(&rt->lock);
    l->next = rt->comm_leases;
    rt->comm_leases = l;
    pthread_mutex_unlock(&rt->lock);
    *out = l;
    return ADAG_OK;
}

uint64_t adag_comm_lease_key(const adag_comm_lease_t *l)
{
    return l->key;
}

const adag_comm_ops_t *adag_comm_lease_ops(const adag_comm_lease_t *l)
{
    return l->ops;
}

const adag_comm_id_t *adag_comm_lease_id(const adag_comm_lease_t *l)
{
    return &l->id;
}

int adag_comm_lease_rank(const adag_comm_lease_t *l, unsigned actor_id)
{
    for (unsigned r = 0; r < l->nranks; r++)
        if (l->actor_ids[r] == actor_id)
            return (int)r;
    return -1;
}

unsigned adag_comm_lease_nranks(const adag_comm_lease_t *l)
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

void adag_comm_lease_give_back(adag_runtime_h rt, adag_comm_lease_t *l, int keep)
{
    if (!l)
        return;
    pthread_mutex_lock(&rt->lock);
    l->leased = 0;
    if (!keep)
        unlink_lease(rt, l);
    pthread_mutex_unlock(&rt->lock);
    if (!keep)
        lease_free(l);
}

void adag_comm_leases_forget_actor(adag_runtime_h rt, unsigned actor_id)
{
    for (;;) {
        adag_comm_lease_t *l;
        pthread_mutex_lock(&rt->lock);
        for (l = rt->comm_leases; l; l = l->next)
            if (!l->leased && adag_comm_lease_rank(l, actor_id) >= 0)
                break;
        if (l)
            unlink_lease(rt, l);
        pthread_mutex_unlock(&rt->lock);
        if (!l)
            return;
        lease_free(l);
    }
}

unsigned adag_comm_leases_count(adag_runtime_h rt)
{
    unsigned n = 0;
    pthread_mutex_lock(&rt->lock);
    for (adag_comm_lease_t *l = rt->comm_leases; l; l = l->next)
        n++;
    pthread_mutex_unlock(&rt->lock);
    return n;
}

/*
 * Page-locking the host memory of device channels: an endpoint that copies
 * between its device and the ring's slots (a device writer whose readers
 * are on the host, a device reader of a host writer) has the ring's
 * memory registered with its device backend (gpu/device.h host_register),
 * else each copy to those slots would hold the loop until the stream got
 * there (CUDA's rule for pageable memory; the emulated device keeps it too).
 *
 * A registration is the process's (CUDA's are portable), and several
 * endpoints of one process may copy with one ring (thread actors on two
 * devices reading one host value), each with a device of its own that
 * closes with it. So a pin per (backend, ring) lists its endpoints and is
 * registered through one of them, its owner; when the owner closes first,
 * the pin is registered again through another (for a moment the memory is
 * pageable: copies are then correct, only synchronous), and the last one
 * unregisters it. Open and close only, under a mutex.
 */
#include "common/error.h"
#include "common/log.h"
#include "transport/chan_dev.h"
#include "transport/chan_shm.h"

#include <pthread.h>
#include <stdlib.h>

struct chan_pin {
    struct chan_pin *next;
    const adag_device_ops_t *ops;
    void *base;
    size_t size;
    adag_dev_mem_t reg; /* registered through users[0]'s device (reg.ptr NULL: not) */
    dev_chan_t **users;
    unsigned nusers, cap;
};

static pthread_mutex_t pins_lock = PTHREAD_MUTEX_INITIALIZER;
static chan_pin_t *pins;

static adag_status_t pin_register(chan_pin_t *p, dev_chan_t *owner)
{
    adag_status_t st = p->ops->host_register(owner->device->dev, p->base, p->size, &p->reg);
    if (st != ADAG_OK)
        adag__error_prefix("device channel %s: page-locking its %zu bytes of host memory",
                          owner->base.name, p->size);
    return st;
}

adag_status_t adag__chan_dev_pin(dev_chan_t *c)
{
    adag_status_t st = ADAG_OK;
    void *base;
    size_t size;
    adag__shm_chan_memory(c->ring, &base, &size);
    pthread_mutex_lock(&pins_lock);
    chan_pin_t *p = pins;
    while (p && !(p->ops == c->ops && p->base == base))
        p = p->next;
    int fresh = !p;
    if (fresh) {
        if (!(p = calloc(1, sizeof(*p)))) {
            st = adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", c->base.name);
            goto out;
        }
        *p = (chan_pin_t){.ops = c->ops, .base = base, .size = size};
    }
    if (p->nusers == p->cap) {
        unsigned cap = p->cap ? p->cap * 2 : 4;
        dev_chan_t **u = realloc(p->users, cap * sizeof(*u));
        if (!u) {
            st = adag__error(ADAG_ERR_NO_MEMORY, "device channel %s: out of memory", c->base.name);
            goto out;
        }
        p->users = u;
        p->cap = cap;
    }
    if (fresh && (st = pin_register(p, c)) != ADAG_OK)
        goto out;
    p->users[p->nusers++] = c;
    c->pin = p;
    if (fresh) {
        p->next = pins;
        pins = p;
    }
out:
    if (st != ADAG_OK && fresh && p) {
        free(p->users);
        free(p);
    }
    pthread_mutex_unlock(&pins_lock);
    return st;
}

void adag__chan_dev_unpin(dev_chan_t *c)
{
    chan_pin_t *p = c->pin;
    if (!p)
        return;
    pthread_mutex_lock(&pins_lock);
    unsigned i = 0;
    while (i < p->nusers && p->users[i] != c)
        i++;
    if (i < p->nusers) {
        if (i == 0 && p->reg.ptr)
            p->ops->host_unregister(c->device->dev, &p->reg);
        p->users[i] = p->users[--p->nusers];
        if (i == 0 && p->nusers) {
            /* the owner goes (its device with it): another endpoint registers */
            if (pin_register(p, p->users[0]) != ADAG_OK)
                ADAG_LOG_WARN("%s (its copies are synchronous from now on)", adag_last_error());
        }
    }
    if (p->nusers == 0) {
        chan_pin_t **pp = &pins;
        while (*pp != p)
            pp = &(*pp)->next;
        *pp = p->next;
        if (p->reg.ptr)
            p->ops->host_unregister(c->device->dev, &p->reg);
        free(p->users);
        free(p);
    }
    c->pin = NULL;
    pthread_mutex_unlock(&pins_lock);
}

/*
 * The emulated device's handles that this process exported (gpu/host_impl.h,
 * "aliases"): a table of the exported memory and events by the identity of
 * their memfd (device and inode), so that importing a handle of this very
 * process gives an alias of the exporter's object (its mapping, its event
 * page) instead of a second mapping through /proc/self/fd, as CUDA's
 * backend does for the handles its process exported (gpu/cuda_alias.c).
 *
 * A short list under a mutex: exports and imports happen at connect,
 * removals at teardown, never on the hot path. take() finds an object and
 * takes its reference under the lock, and an owner removes its object
 * before it drops its own reference, so an import either finds a live
 * object or none.
 */
#include "common/error.h"
#include "gpu/host_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct alias_entry {
    struct alias_entry *next;
    uint64_t dev, ino; /* the memfd's identity */
    void *obj;         /* the exporter's host_mem_t or adag_dev_event_t */
} alias_entry_t;

static struct {
    pthread_mutex_t lock;
    alias_entry_t *head;
} aliases = {.lock = PTHREAD_MUTEX_INITIALIZER};

int adag__host_handle_local(const adag_dev_handle_t *h, adag_memfd_ref_t *ref)
{
    if (h->len != sizeof(*ref) || h->nfds)
        return 0;
    memcpy(ref, h->bytes, sizeof(*ref));
    return ref->magic == ADAG_MEMFD_REF_MAGIC && ref->pid == (int32_t)getpid();
}

adag_status_t adag__host_alias_add(const adag_dev_handle_t *h, void *obj)
{
    adag_memfd_ref_t ref;
    memcpy(&ref, h->bytes, sizeof(ref));
    pthread_mutex_lock(&aliases.lock);
    for (alias_entry_t *e = aliases.head; e; e = e->next)
        if (e->obj == obj) { /* exported before */
            pthread_mutex_unlock(&aliases.lock);
            return ADAG_OK;
        }
    alias_entry_t *e = malloc(sizeof(*e));
    if (e) {
        *e = (alias_entry_t){aliases.head, ref.dev, ref.ino, obj};
        aliases.head = e;
    }
    pthread_mutex_unlock(&aliases.lock);
    return e ? ADAG_OK
             : adag__error(ADAG_ERR_NO_MEMORY, "emulated device: exporting a handle: out of memory");
}

void adag__host_alias_remove(void *obj)
{
    pthread_mutex_lock(&aliases.lock);
    for (alias_entry_t **p = &aliases.head; *p; p = &(*p)->next)
        if ((*p)->obj == obj) {
            alias_entry_t *e = *p;
            *p = e->next;
            free(e);
            break;
        }
    pthread_mutex_unlock(&aliases.lock);
}

void *adag__host_alias_take(const adag_memfd_ref_t *ref, void (*take)(void *obj))
{
    void *obj = NULL;
    pthread_mutex_lock(&aliases.lock);
    for (alias_entry_t *e = aliases.head; e; e = e->next)
        if (e->dev == ref->dev && e->ino == ref->ino) {
            obj = e->obj;
            take(obj);
            break;
        }
    pthread_mutex_unlock(&aliases.lock);
    return obj;
}

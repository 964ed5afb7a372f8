/*
 * Same-process handles of the cuda backend (gpu/cuda_alias.h).
 *
 * cudaIpcOpenMemHandle refuses a handle that the calling process exported
 * (cudaErrorDeviceUninitialized, "invalid device context": UCX's cuda_ipc
 * transport meets the same and uses the exporter's pointer in that case),
 * and cudaIpcOpenEventHandle is documented for handles "exported from
 * another process" only (it may fail the same way). Thread actors of one process exchange tensors through device
 * channels, which export and import as they do between processes; here,
 * those threads share the process's CUDA context (the runtime's primary
 * context of each device), so the importer can use the exporter's device
 * pointer and cudaEvent_t as they are: plain stream ordering, no IPC.
 *
 * A handle this backend exports is the CUDA IPC handle (memory: plus its
 * size), untouched, followed by a trailer: a magic, the exporter's pid, a
 * random token drawn once per process (so a process in another pid
 * namespace with the same pid, or a child forked after the draw, which has
 * another pid, is never taken for the exporter) and the serial number of
 * the exported object in this process's table. An importer that finds its
 * own pid and token in the trailer takes a reference on the entry and
 * gets an alias: memory tagged as one (mem_unimport), or an event object
 * over the same cudaEvent_t, marked imported (it can be waited on, not
 * recorded). Any other importer drops the trailer and opens the IPC
 * handle as before.
 *
 * An entry holds the object for its owner and for each alias: the owner's
 * mem_free / event_destroy drops its count at once and its reference, and
 * the cudaFree / cudaEventDestroy happens when the last reference drops,
 * so an alias stays usable after the exporter freed. The table is a list
 * under a mutex: exports and imports happen at a channel's connect, frees
 * at teardown, never on the hot path. An entry's refs change only under
 * the lock; the free itself runs after the entry left the table, outside it.
 *
 * An alias on another device than the exporter's (thread actors on cuda:0
 * and cuda:1) enables peer access from the importer's device where the
 * two can, as cudaIpcMemLazyEnablePeerAccess does for an IPC import;
 * copies (cudaMemcpyDefault) work across devices either way, and a stream
 * may wait on another device's event.
 */
#ifdef ADAG_HAVE_CUDA

#include "gpu/cuda_alias.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define ALIAS_MAGIC 0x61646761u /* "adga" */

typedef struct {
    uint32_t magic;
    int32_t pid;
    uint64_t token;
    uint64_t serial;
} alias_trailer_t;

typedef struct alias_entry {
    struct alias_entry *next;
    uint64_t serial;
    int is_event;
    void *ptr;          /* memory */
    size_t size;
    cudaEvent_t ev;     /* event */
    unsigned dev_index; /* the exporter's device */
    int owned;          /* the owner has not freed it yet */
    int refs;           /* the owner's and the aliases' (under the lock) */
} alias_entry_t;

static struct {
    pthread_mutex_t lock;
    alias_entry_t *head;
    uint64_t next_serial;
    pthread_once_t once;
    uint64_t token;
} table = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_serial = 1, .once = PTHREAD_ONCE_INIT};

/* mem->impl of an alias */
static char mem_tag_alias;

static void draw_token(void)
{
    uint64_t t = 0;
    if (getrandom(&t, sizeof(t), GRND_NONBLOCK) != (ssize_t)sizeof(t) || t == 0)
        t = (uint64_t)adag__now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&t;
    table.token = t ? t : 1;
}

static uint64_t process_token(void)
{
    pthread_once(&table.once, draw_token);
    return table.token;
}

/* The entry of memory ptr / event ev still owned (under the lock). */
static alias_entry_t *find_owned(int is_event, const void *ptr, cudaEvent_t ev)
{
    for (alias_entry_t *e = table.head; e; e = e->next)
        if (e->owned && e->is_event == is_event && (is_event ? e->ev == ev : e->ptr == ptr))
            return e;
    return NULL;
}

static alias_entry_t *find_serial(uint64_t serial, int is_event)
{
    for (alias_entry_t *e = table.head; e; e = e->next)
        if (e->serial == serial && e->is_event == is_event)
            return e;
    return NULL;
}

/* Takes e out of the table (under the lock). */
static void unlink_entry(alias_entry_t *e)
{
    for (alias_entry_t **p = &table.head; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            return;
        }
}

/* Drops a reference; the last one frees the object (d: for messages). */
static void entry_unref(cuda_dev_t *d, alias_entry_t *e)
{
    pthread_mutex_lock(&table.lock);
    int last = --e->refs == 0;
    if (last)
        unlink_entry(e);
    pthread_mutex_unlock(&table.lock);
    if (!last)
        return;
    cudaError_t err = e->is_event ? adag_cudart.fn.EventDestroy(e->ev) : adag_cudart.fn.Free(e->ptr);
    if (err != cudaSuccess)
        adag__cuda_warn(d, err, "%s of an object exported by device %u, after its last alias",
                        e->is_event ? "cudaEventDestroy" : "cudaFree", e->dev_index);
    free(e);
}

static adag_status_t export_entry(cuda_dev_t *d, adag_dev_handle_t *h, size_t ipc_len,
                                  int is_event, void *ptr, size_t size, cudaEvent_t ev)
{
    if (ipc_len + sizeof(alias_trailer_t) > ADAG_DEVICE_HANDLE_BYTES)
        return adag__error(ADAG_ERR_INVALID, "cuda device %u (%s): a handle of %zu bytes has no "
                          "room for its process's trailer", d->base.index, d->name, ipc_len);
    uint64_t token = process_token();
    pthread_mutex_lock(&table.lock);
    alias_entry_t *e = find_owned(is_event, ptr, ev);
    if (!e && (e = calloc(1, sizeof(*e))) != NULL) {
        *e = (alias_entry_t){.next = table.head, .serial = table.next_serial++,
                             .is_event = is_event, .ptr = ptr, .size = size, .ev = ev,
                             .dev_index = d->base.index, .owned = 1, .refs = 1};
        table.head = e;
    }
    uint64_t serial = e ? e->serial : 0;
    pthread_mutex_unlock(&table.lock);
    if (!e)
        return adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u (%s): exporting a handle: out of "
                          "memory", d->base.index, d->name);
    alias_trailer_t t = {ALIAS_MAGIC, (int32_t)getpid(), token, serial};
    memcpy(h->bytes + ipc_len, &t, sizeof(t));
    h->len = (uint32_t)(ipc_len + sizeof(t));
    return ADAG_OK;
}

adag_status_t adag__cuda_alias_export_mem(cuda_dev_t *d, adag_dev_handle_t *h, size_t ipc_len,
                                          void *ptr, size_t size)
{
    return export_entry(d, h, ipc_len, 0, ptr, size, NULL);
}

adag_status_t adag__cuda_alias_export_event(cuda_dev_t *d, adag_dev_handle_t *h, size_t ipc_len,
                                            cudaEvent_t ev)
{
    return export_entry(d, h, ipc_len, 1, NULL, 0, ev);
}

/* 1 and *serial if h (with a trailer after ipc_len bytes) is this
 * process's; 0 otherwise, the trailer dropped. */
static int local_handle(adag_dev_handle_t *h, size_t ipc_len, uint64_t *serial)
{
    alias_trailer_t t;
    if (h->len != ipc_len + sizeof(t))
        return 0; /* no trailer: the caller's checks say what it is */
    memcpy(&t, h->bytes + ipc_len, sizeof(t));
    h->len = (uint32_t)ipc_len;
    if (t.magic != ALIAS_MAGIC || t.pid != (int32_t)getpid() || t.token != process_token())
        return 0;
    *serial = t.serial;
    return 1;
}

/* Takes a reference on the entry `serial` for an alias on d; NULL (and the
 * error) if the exporter freed it. */
static alias_entry_t *take_entry(cuda_dev_t *d, uint64_t serial, int is_event)
{
    pthread_mutex_lock(&table.lock);
    alias_entry_t *e = find_serial(serial, is_event);
    if (e && e->owned)
        e->refs++;
    else
        e = NULL;
    pthread_mutex_unlock(&table.lock);
    if (!e)
        adag__error(ADAG_ERR_PROTOCOL,
                    "cuda device %u (%s): a %s handle of this process names an object that is "
                    "no longer exported (freed)",
                    d->base.index, d->name, is_event ? "event" : "memory");
    return e;
}

/* Best effort: lets d's kernels reach memory of device `peer` (copies do
 * without). The runtime's peer calls are looked up here once, not in the
 * backend's table of required functions. */
static void enable_peer(cuda_dev_t *d, unsigned peer)
{
    typedef cudaError_t (*can_fn)(int *, int, int);
    typedef cudaError_t (*enable_fn)(int, unsigned);
    can_fn can = (can_fn)dlsym(adag_cudart.lib, "cudaDeviceCanAccessPeer");
    enable_fn enable = (enable_fn)dlsym(adag_cudart.lib, "cudaDeviceEnablePeerAccess");
    int ok = 0;
    if (!can || !enable || can(&ok, (int)d->base.index, (int)peer) != cudaSuccess || !ok) {
        (void)adag_cudart.fn.GetLastError();
        return;
    }
    cudaError_t err = enable((int)peer, 0); /* d is current (set_device) */
    if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled)
        ADAG_LOG_WARN("cuda device %u (%s): cudaDeviceEnablePeerAccess(%u): %s: copies from it "
                      "still work", d->base.index, d->name, peer, adag_cudart.fn.GetErrorName(err));
    (void)adag_cudart.fn.GetLastError(); /* not the program's error */
}

int adag__cuda_alias_import_mem(cuda_dev_t *d, adag_dev_handle_t *h, size_t ipc_len,
                                adag_dev_mem_t *mem, adag_status_t *st)
{
    uint64_t serial;
    if (h->nfds || !local_handle(h, ipc_len, &serial))
        return 0;
    alias_entry_t *e = take_entry(d, serial, 0);
    if (!e) {
        *st = ADAG_ERR_PROTOCOL;
        return 1;
    }
    if (e->dev_index != d->base.index && adag__cuda_set_device(d) == ADAG_OK)
        enable_peer(d, e->dev_index);
    *mem = (adag_dev_mem_t){.ptr = e->ptr, .size = e->size, .impl = &mem_tag_alias};
    atomic_fetch_add(&d->imported_mem, 1);
    *st = ADAG_OK;
    return 1;
}

int adag__cuda_alias_import_event(cuda_dev_t *d, adag_dev_handle_t *h, size_t ipc_len,
                                  adag_dev_event_t **out, adag_status_t *st)
{
    uint64_t serial;
    if (h->nfds || !local_handle(h, ipc_len, &serial))
        return 0;
    adag_dev_event_t *ev = calloc(1, sizeof(*ev));
    if (!ev) {
        *st = adag__error(ADAG_ERR_NO_MEMORY, "cuda device %u (%s): event_import: out of memory",
                          d->base.index, d->name);
        return 1;
    }
    alias_entry_t *e = take_entry(d, serial, 1);
    if (!e) {
        free(ev);
        *st = ADAG_ERR_PROTOCOL;
        return 1;
    }
    *ev = (adag_dev_event_t){.dev = d, .ev = e->ev, .imported = true};
    atomic_fetch_add(&d->imported_events, 1);
    *out = ev;
    *st = ADAG_OK;
    return 1;
}

int adag__cuda_alias_mem_free(cuda_dev_t *d, adag_dev_mem_t *mem)
{
    pthread_mutex_lock(&table.lock);
    alias_entry_t *e = find_owned(0, mem->ptr, NULL);
    if (e)
        e->owned = 0; /* a later import of its handle is stale */
    pthread_mutex_unlock(&table.lock);
    if (!e)
        return 0;
    atomic_fetch_sub(&d->mem, 1);
    memset(mem, 0, sizeof(*mem));
    entry_unref(d, e);
    return 1;
}

/* The entry an alias of memory ptr holds: any entry of ptr (an owned one
 * first is not needed: a pointer is in one entry at a time, cudaFree only
 * running once its entry left the table). */
static alias_entry_t *find_ptr(const void *ptr)
{
    for (alias_entry_t *e = table.head; e; e = e->next)
        if (!e->is_event && e->ptr == ptr)
            return e;
    return NULL;
}

int adag__cuda_alias_mem_unimport(cuda_dev_t *d, adag_dev_mem_t *mem)
{
    if (mem->impl != &mem_tag_alias)
        return 0;
    pthread_mutex_lock(&table.lock);
    alias_entry_t *e = find_ptr(mem->ptr);
    pthread_mutex_unlock(&table.lock);
    atomic_fetch_sub(&d->imported_mem, 1);
    memset(mem, 0, sizeof(*mem));
    if (e)
        entry_unref(d, e);
    return 1;
}

int adag__cuda_alias_event_destroy(adag_dev_event_t *ev)
{
    pthread_mutex_lock(&table.lock);
    alias_entry_t *e = NULL;
    for (alias_entry_t *x = table.head; x && !e; x = x->next)
        if (x->is_event && x->ev == ev->ev && (ev->imported || x->owned))
            e = x;
    if (e && !ev->imported)
        e->owned = 0;
    pthread_mutex_unlock(&table.lock);
    if (!e)
        return 0;
    cuda_dev_t *d = ev->dev;
    atomic_fetch_sub(ev->imported ? &d->imported_events : &d->events, 1);
    free(ev);
    entry_unref(d, e);
    return 1;
}

#else
typedef int adag_cuda_alias_not_built; /* without the toolkit's headers: gpu/cuda.c says so */
#endif

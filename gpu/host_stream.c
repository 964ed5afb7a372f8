/*
 * The emulated device's events and streams (gpu/host.c describes the device:
 * what an event and a stream are, and the memory ordering).
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/event.h"
#include "common/fd.h"
#include "gpu/host_impl.h"
#include "gpu/memfd_handle.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- events ---- */

typedef struct {
    _Atomic uint64_t recorded;  /* ticket of the latest record (taken at enqueue) */
    _Atomic uint64_t completed; /* highest ticket reached by its stream */
    adag_event_t wake;          /* waiters sleep here */
    /* timed events: when `completed` last moved (adag__now_ns), and the
     * lock of the completers (stream threads of the owner process; a
     * timed event is never exported) that makes "stamp, then move
     * `completed`" one step */
    _Atomic int64_t completed_ns;
    _Atomic uint32_t completing;
} event_page_t;

struct adag_dev_event {
    host_dev_t *dev;
    int timed; /* from event_create_timed: stamped at completion, never exported */
    event_page_t *page;
    int fd;
    int imported;
    /* an alias (an import of this process's own handle, gpu/host_alias.c):
     * the exporter's event, whose page it shares and which it holds by a
     * reference until its own last one drops; NULL otherwise */
    adag_dev_event_t *origin;
    /* set (seq_cst, then the page's wake word is notified) by
     * event_abandon: waits in this process stop waiting for the exporter */
    _Atomic int abandoned;
    /* the owner and every queued operation that names the event: destroying
     * it with work pending frees it once that work is done (as CUDA does) */
    _Atomic int refs;
    /* the stream of its latest record (a reference; NULL for none), under
     * stream_lock: event_sync helps it (see "helping" below) */
    pthread_mutex_t stream_lock;
    adag_dev_stream_t *stream;
};

static void stream_ref(adag_dev_stream_t *s);
static void stream_unref(adag_dev_stream_t *s);
static void stream_help(adag_dev_stream_t *s, adag_cond_fn done, const void *arg,
                        int64_t deadline);

typedef struct {
    const event_page_t *page;
    uint64_t ticket;
    const _Atomic int *abandoned;
} reached_arg_t;

/* The wait ends when the ticket is reached or the event was abandoned
 * (both seq_cst, each stored before the wake word is notified). */
static int ticket_reached(const void *p)
{
    const reached_arg_t *a = p;
    return atomic_load_explicit(&a->page->completed, memory_order_seq_cst) >= a->ticket ||
           atomic_load_explicit(a->abandoned, memory_order_seq_cst);
}

/* Waits until the event reaches ticket (or is abandoned), or the deadline. */
static adag_status_t wait_ticket(adag_dev_event_t *ev, uint64_t ticket, int64_t deadline)
{
    adag_spin_t spin;
    adag__spin_init(&spin, (adag_wait_policy_t){20000, 1});
    reached_arg_t a = {ev->page, ticket, &ev->abandoned};
    return adag__event_wait(&ev->page->wake, ticket_reached, &a, NULL, deadline, &spin);
}

/* Moves `completed` up to ticket (never down: records of one event on two
 * streams complete in any order). A timed event stamps the time first,
 * under its completers' lock, so that the stamp is always that of the
 * ticket `completed` holds: the lock's acquire/release orders the
 * completers, and the seq_cst store of `completed` publishes the relaxed
 * stamp before it to whoever loads `completed` and then the stamp
 * (event_elapsed_ns). */
static void complete_ticket(adag_dev_event_t *ev, uint64_t ticket)
{
    event_page_t *pg = ev->page;
    if (ev->timed) {
        while (atomic_exchange_explicit(&pg->completing, 1, memory_order_acquire))
            sched_yield();
        if (atomic_load_explicit(&pg->completed, memory_order_relaxed) < ticket) {
            atomic_store_explicit(&pg->completed_ns, adag__now_ns(), memory_order_relaxed);
            atomic_store_explicit(&pg->completed, ticket, memory_order_seq_cst);
        }
        atomic_store_explicit(&pg->completing, 0, memory_order_release);
        adag__event_notify(&pg->wake);
        return;
    }
    uint64_t cur = atomic_load_explicit(&pg->completed, memory_order_seq_cst);
    while (cur < ticket && !atomic_compare_exchange_weak_explicit(&pg->completed, &cur, ticket,
                                                                  memory_order_seq_cst,
                                                                  memory_order_seq_cst)) {
    }
    adag__event_notify(&pg->wake);
}

/* Maps the event page of fd; the event keeps fd (-1 after an import). */
static adag_status_t map_event(host_dev_t *dev, int fd, int keep_fd, adag_dev_event_t **out)
{
    adag_dev_event_t *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: out of memory", dev->base.index);
    ev->page = mmap(NULL, adag__host_page_round(sizeof(event_page_t)), PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
    if (ev->page == MAP_FAILED) {
        adag_status_t st = adag__error_errno(errno, "device emu:%u: mapping an event",
                                            dev->base.index);
        free(ev);
        return st;
    }
    ev->dev = dev;
    ev->fd = keep_fd ? fd : -1;
    atomic_init(&ev->refs, 1);
    pthread_mutex_init(&ev->stream_lock, NULL);
    *out = ev;
    return ADAG_OK;
}

adag_status_t adag__host_event_create(adag_device_t *d, adag_dev_event_t **out)
{
    int fd = adag__fd_above_stdio(memfd_create("adag-event", MFD_CLOEXEC));
    if (fd < 0)
        return adag__error_errno(errno, "device emu:%u: memfd_create for an event", d->index);
    adag_status_t st;
    if (ftruncate(fd, (off_t)adag__host_page_round(sizeof(event_page_t))) != 0) {
        st = adag__error_errno(errno, "device emu:%u: sizing an event", d->index);
        close(fd);
        return st;
    }
    if ((st = map_event(adag__host_dev(d), fd, 1, out)) != ADAG_OK) {
        close(fd);
        return st;
    }
    COUNT(adag__host_dev(d), events, 1);
    return ADAG_OK;
}

adag_status_t adag__host_event_create_timed(adag_device_t *d, adag_dev_event_t **out)
{
    adag_status_t st = adag__host_event_create(d, out);
    if (st == ADAG_OK)
        (*out)->timed = 1; /* before any record: no stream has seen the event */
    return st;
}

/* Drops a reference; the last one frees the event. acq_rel: every use of
 * the event by a dropper happens-before the free. */
static void event_unref(adag_dev_event_t *ev)
{
    if (atomic_fetch_sub_explicit(&ev->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (ev->origin)
        event_unref(ev->origin); /* the page is the origin's */
    else
        munmap(ev->page, adag__host_page_round(sizeof(event_page_t)));
    if (ev->stream)
        stream_unref(ev->stream);
    pthread_mutex_destroy(&ev->stream_lock);
    if (ev->fd >= 0)
        close(ev->fd);
    free(ev);
}

static void event_ref(void *obj)
{
    atomic_fetch_add_explicit(&((adag_dev_event_t *)obj)->refs, 1, memory_order_relaxed);
}

/* The count drops at once: the event is no longer its owner's (work
 * queued on it and aliases may hold it longer, without its device). */
void adag__host_event_destroy(adag_device_t *d, adag_dev_event_t *ev)
{
    (void)d;
    if (!ev)
        return;
    if (ev->imported) {
        COUNT(ev->dev, imported_events, -1);
    } else {
        adag__host_alias_remove(ev);
        COUNT(ev->dev, events, -1);
    }
    event_unref(ev);
}

adag_status_t adag__host_event_export(adag_device_t *d, adag_dev_event_t *ev,
                                       adag_dev_handle_t *h)
{
    if (ev->imported || ev->fd < 0)
        return adag__error(ADAG_ERR_INVALID, "device emu:%u: an imported event cannot be "
                                            "exported again", d->index);
    if (ev->timed) /* as on CUDA, where an interprocess event cannot be timed */
        return adag__error(ADAG_ERR_INVALID, "device emu:%u: a timed event cannot be exported",
                          d->index);
    adag_status_t st = adag__host_handle_make(d, ev->fd, sizeof(event_page_t), "event", h);
    return st == ADAG_OK ? adag__host_alias_add(h, ev) : st;
}

/* An import of a handle this process exported: an event object of the
 * importer's own (its abandon flag: abandoning it releases the waits on it,
 * not those on the exporter's event) over the exporter's page. */
static adag_status_t event_import_alias(adag_device_t *d, const adag_memfd_ref_t *ref,
                                        adag_dev_event_t **out)
{
    adag_dev_event_t *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: out of memory", d->index);
    adag_dev_event_t *o = adag__host_alias_take(ref, event_ref);
    if (!o) {
        free(ev);
        return adag__error(ADAG_ERR_PROTOCOL,
                          "device emu:%u: an event handle of this process (fd %d) names an "
                          "event that is no longer exported (destroyed)", d->index, ref->fd);
    }
    ev->dev = adag__host_dev(d);
    ev->page = o->page;
    ev->fd = -1;
    ev->imported = 1;
    ev->origin = o;
    atomic_init(&ev->refs, 1);
    pthread_mutex_init(&ev->stream_lock, NULL);
    COUNT(adag__host_dev(d), imported_events, 1);
    *out = ev;
    return ADAG_OK;
}

adag_status_t adag__host_event_import(adag_device_t *d, adag_dev_handle_t *h,
                                       adag_dev_event_t **out)
{
    uint64_t size;
    adag_status_t st = ADAG_OK;
    adag_memfd_ref_t ref;
    if (adag__host_handle_local(h, &ref))
        return event_import_alias(d, &ref, out);
    int fd = adag__host_handle_open(d, h, "event", sizeof(event_page_t), &size, &st);
    if (fd < 0)
        return st;
    if (size != sizeof(event_page_t)) {
        close(fd);
        return adag__error(ADAG_ERR_PROTOCOL, "device emu:%u: an event handle of %llu bytes",
                          d->index, (unsigned long long)size);
    }
    st = map_event(adag__host_dev(d), fd, 0, out);
    close(fd); /* the mapping keeps the page */
    if (st != ADAG_OK)
        return st;
    (*out)->imported = 1;
    COUNT(adag__host_dev(d), imported_events, 1);
    return ADAG_OK;
}

void adag__host_event_abandon(adag_dev_event_t *ev)
{
    if (!ev || !ev->imported)
        return;
    atomic_store_explicit(&ev->abandoned, 1, memory_order_seq_cst);
    /* wakes the sleepers of the page in every process: the others find
     * their own flag clear and sleep again */
    adag__event_notify(&ev->page->wake);
}

adag_status_t adag__host_event_query(adag_dev_event_t *ev)
{
    if (atomic_load_explicit(&ev->abandoned, memory_order_seq_cst))
        return ADAG_OK;
    uint64_t want = atomic_load_explicit(&ev->page->recorded, memory_order_seq_cst);
    return atomic_load_explicit(&ev->page->completed, memory_order_seq_cst) >= want
               ? ADAG_OK
               : ADAG_ERR_AGAIN;
}

adag_status_t adag__host_event_sync(adag_dev_event_t *ev, int64_t deadline)
{
    uint64_t want = atomic_load_explicit(&ev->page->recorded, memory_order_seq_cst);
    reached_arg_t a = {ev->page, want, &ev->abandoned};
    if (!ticket_reached(&a)) {
        /* an alias helps the stream of its exporter's latest record */
        adag_dev_event_t *rec = ev->origin ? ev->origin : ev;
        pthread_mutex_lock(&rec->stream_lock);
        adag_dev_stream_t *s = rec->stream;
        if (s)
            stream_ref(s);
        pthread_mutex_unlock(&rec->stream_lock);
        if (s) {
            stream_help(s, ticket_reached, &a, deadline);
            stream_unref(s);
        }
    }
    adag_status_t st = wait_ticket(ev, want, deadline);
    if (st == ADAG_ERR_TIMEOUT)
        return adag__error(ADAG_ERR_TIMEOUT, "device emu:%u: event not reached by the deadline",
                          ev->dev->base.index);
    return st;
}

/* ADAG_OK if ev can be timed, else ADAG_ERR_INVALID saying why. */
static adag_status_t check_timeable(adag_dev_event_t *ev, const char *which)
{
    const char *why = !ev->timed ? "was not created by event_create_timed"
                      : atomic_load_explicit(&ev->page->recorded, memory_order_seq_cst) == 0
                          ? "was never recorded"
                          : NULL;
    if (!why)
        return ADAG_OK;
    return adag__error(ADAG_ERR_INVALID, "device emu:%u: event_elapsed_ns: the %s event %s",
                      ev->dev->base.index, which, why);
}

/* 1 and *t = when the event's latest record completed; 0 if it has not. */
static int completed_at(adag_dev_event_t *ev, int64_t *t)
{
    uint64_t want = atomic_load_explicit(&ev->page->recorded, memory_order_seq_cst);
    if (atomic_load_explicit(&ev->page->completed, memory_order_seq_cst) < want)
        return 0;
    /* stored before `completed` (complete_ticket), seen after it */
    *t = atomic_load_explicit(&ev->page->completed_ns, memory_order_relaxed);
    return 1;
}

adag_status_t adag__host_event_elapsed_ns(adag_dev_event_t *start, adag_dev_event_t *end,
                                           int64_t *ns)
{
    adag_status_t st;
    if ((st = check_timeable(start, "start")) != ADAG_OK ||
        (st = check_timeable(end, "end")) != ADAG_OK)
        return st;
    int64_t t0, t1;
    if (!completed_at(start, &t0) || !completed_at(end, &t1))
        return ADAG_ERR_AGAIN;
    *ns = t1 - t0;
    return ADAG_OK;
}

/* ---- streams ---- */

/* (stream_op_t: gpu/host_impl.h) */

_Atomic(adag_host_capture_hook_t) adag__host_capture_hook;

/* The queue is under `lock`, and so is `running` (an operation was taken
 * from it and has not finished): operations run one at a time, in queue
 * order, by whichever thread took them. The counters are seq_cst, each
 * bumped after the step it counts (an operation queued; an operation run,
 * its effects included) and before the matching wake word is notified, so
 * a waiter that loads a count also sees what it counts (common/event.h's
 * handshake); `running` is also stored seq_cst (under the lock) before
 * queued_wake is notified. Waiters spin first, adaptively (the stream
 * thread for the next operation, stream_sync for the end of the last):
 * back-to-back work meets a spinning waiter, a futex wake-up costs tens of
 * microseconds on a busy host; waits that keep sleeping long shrink the
 * spin to a probe.
 *
 * Helping. A thread that waits for a stream (stream_sync; event_sync on an
 * event a stream of this process recorded) runs the stream's queued
 * operations itself while the stream thread is not running one, as long as
 * each is bounded or keeps to the waiter's deadline: copies (not slowed by
 * ADAG_EMU_COPY_MBPS), records, event waits and OP_STEPS work (launch_steps;
 * at its deadline it keeps its progress, goes back to the head of the
 * queue and the stream thread continues it). An opaque host function
 * (host_fn, launch_host) or a slowed copy stops the helping: the waiter
 * then waits as before. On a host with fewer cores than busy threads this
 * saves the hand-off to the stream thread and back, which is most of a
 * small collective's time. */
struct adag_dev_stream {
    host_dev_t *dev;
    pthread_t thread;
    pthread_mutex_t lock;
    stream_op_t *head, *tail;
    _Atomic int running;
    _Atomic uint64_t enqueued, done;
    _Atomic uint64_t ended; /* runs that ended (finished or went back) */
    adag_event_t queued_wake, done_wake;
    adag_spin_t idle_spin, sync_spin;
    /* the creator and every event whose latest record was here: the
     * last drop (after stream_destroy ended the thread) frees it */
    _Atomic int refs;
};

static void stream_ref(adag_dev_stream_t *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

/* acq_rel: every use of the stream by a dropper happens-before the free. */
static void stream_unref(adag_dev_stream_t *s)
{
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_mutex_destroy(&s->lock);
    free(s);
}

typedef struct {
    const _Atomic uint64_t *count;
    uint64_t want;
} count_arg_t;

static int count_reached(const void *p)
{
    const count_arg_t *a = p;
    return atomic_load_explicit(a->count, memory_order_seq_cst) >= a->want;
}

/* Sleeps until adag__now_ns() reaches t. */
static void sleep_until_ns(int64_t t)
{
    struct timespec ts = {t / 1000000000, t % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* A copy at its device's ADAG_EMU_COPY_MBPS (0: as fast as memmove): it
 * ends no sooner than size / bandwidth after it began (MB/s = bytes per
 * us). */
static void run_copy(const stream_op_t *op)
{
    uint64_t mbps = op->mbps;
    int64_t began = mbps ? adag__now_ns() : 0;
    memmove(op->dst, op->src ? op->src : op->args, op->size);
    if (mbps) {
        uint64_t size = op->size;
        sleep_until_ns(began + (int64_t)(size / mbps * 1000 + size % mbps * 1000 / mbps));
    }
}

/* Takes the head operation if none is running and `may` accepts it
 * (NULL: any); else NULL, and *busy says whether one was running. */
static stream_op_t *take(adag_dev_stream_t *s, int (*may)(const stream_op_t *), int *busy)
{
    pthread_mutex_lock(&s->lock);
    stream_op_t *op = s->head;
    *busy = atomic_load_explicit(&s->running, memory_order_relaxed);
    if (!op || *busy || (may && !may(op))) {
        pthread_mutex_unlock(&s->lock);
        return NULL;
    }
    s->head = op->next;
    if (!s->head)
        s->tail = NULL;
    atomic_store_explicit(&s->running, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&s->lock);
    return op;
}

int adag__host_op_run(stream_op_t *op, int64_t deadline)
{
    switch (op->kind) {
    case OP_COPY:
        run_copy(op);
        break;
    case OP_HOST_FN:
        op->fn(op->arg);
        break;
    case OP_STEPS:
        return op->step(op->arg, deadline) != ADAG_ERR_TIMEOUT;
    case OP_RECORD:
        complete_ticket(op->ev, op->ticket);
        break;
    case OP_WAIT:
        return wait_ticket(op->ev, op->ticket, deadline) != ADAG_ERR_TIMEOUT;
    case OP_WRITE_VALUE:
        adag__host_value_store(op->cell, op->ticket);
        break;
    case OP_WAIT_VALUE:
        return adag__host_value_wait(op->cell, op->ticket, deadline) != ADAG_ERR_TIMEOUT;
    case OP_STOP:
        break;
    }
    return 1;
}

void adag__host_op_free(stream_op_t *op)
{
    if (op->release)
        op->release(op->arg);
    if (op->ev)
        event_unref(op->ev);
    free(op);
}

/* Runs a taken operation (on the stream thread, or on a helper) until the
 * deadline: 1 if it finished (counted in `done`), 0 if it is not done and
 * went back to the head of the queue. */
static int run_taken(adag_dev_stream_t *s, stream_op_t *op, int64_t deadline)
{
    int finished = adag__host_op_run(op, deadline);
    pthread_mutex_lock(&s->lock);
    if (!finished) {
        op->next = s->head;
        s->head = op;
        if (!s->tail)
            s->tail = op;
    }
    atomic_store_explicit(&s->running, 0, memory_order_seq_cst);
    pthread_mutex_unlock(&s->lock);
    if (finished) {
        adag__host_op_free(op);
        atomic_fetch_add_explicit(&s->done, 1, memory_order_seq_cst);
    }
    /* stream_sync waits for `done`; the stream thread, while a helper
     * runs an operation, for `ended` */
    atomic_fetch_add_explicit(&s->ended, 1, memory_order_seq_cst);
    adag__event_notify(&s->done_wake);
    return finished;
}

/* Two short waits rather than one long one when a helper takes the
 * operation (wait for it, then for the next): each ends while the thread
 * still spins, so back-to-back work keeps finding it awake. */
static void *stream_main(void *arg)
{
    adag_dev_stream_t *s = arg;
    for (;;) {
        /* past `done`, an operation is queued (or a helper runs it) */
        count_arg_t next = {&s->enqueued, atomic_load_explicit(&s->done, memory_order_seq_cst) + 1};
        adag__event_wait(&s->queued_wake, count_reached, &next, NULL, ADAG_FOREVER, &s->idle_spin);
        /* loaded before the take: a run that is on at the take ends past it */
        count_arg_t ended = {&s->ended, atomic_load_explicit(&s->ended, memory_order_seq_cst) + 1};
        int busy;
        stream_op_t *op = take(s, NULL, &busy);
        if (!op) {
            /* a helper runs one: wait until that run ends; else helpers
             * ran what was queued: wait for more */
            if (busy)
                adag__event_wait(&s->done_wake, count_reached, &ended, NULL, ADAG_FOREVER,
                                &s->idle_spin);
            continue;
        }
        int stop = op->kind == OP_STOP;
        run_taken(s, op, ADAG_FOREVER);
        if (stop)
            return NULL;
    }
}

/* What a helper may run: bounded work, or work that keeps a deadline. */
int adag__host_op_helpable(const stream_op_t *op)
{
    switch (op->kind) {
    case OP_COPY:
        return op->mbps == 0;
    case OP_STEPS:
        return !op->unhelped;
    case OP_RECORD:
    case OP_WAIT:
    case OP_WRITE_VALUE:
    case OP_WAIT_VALUE:
        return 1;
    case OP_HOST_FN:
    case OP_STOP:
        break;
    }
    return 0;
}

/* Runs s's queued operations on this thread until `done` holds, the
 * stream thread runs one, the head is not the helper's to run, or one
 * kept to the deadline without finishing. */
static void stream_help(adag_dev_stream_t *s, adag_cond_fn done, const void *arg,
                        int64_t deadline)
{
    stream_op_t *op;
    int busy;
    while (!done(arg) && (op = take(s, adag__host_op_helpable, &busy)) != NULL)
        if (!run_taken(s, op, deadline))
            return;
}

/* Queues a copy of proto, with args[0..size) copied after it (arg then
 * points at the copy). */
adag_status_t adag__host_enqueue(adag_dev_stream_t *s, stream_op_t proto, const void *args,
                                 size_t size)
{
    stream_op_t *op = malloc(sizeof(*op) + size);
    if (!op)
        return adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: stream operation",
                          s->dev->base.index);
    *op = proto;
    op->next = NULL;
    if (size) {
        memcpy(op->args, args, size);
        op->arg = op->args;
    }
    if (op->ev)
        atomic_fetch_add_explicit(&op->ev->refs, 1, memory_order_relaxed);
    adag_status_t st;
    adag_host_capture_hook_t hook =
        atomic_load_explicit(&adag__host_capture_hook, memory_order_acquire);
    if (hook && hook(s, op, size, &st)) /* recorded by a capture (host_graph.c) */
        return st;
    if (op->kind == OP_WRITE_VALUE || op->kind == OP_WAIT_VALUE)
        COUNT(s->dev, value_ops, 1);
    pthread_mutex_lock(&s->lock);
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    atomic_fetch_add_explicit(&s->enqueued, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&s->lock);
    adag__event_notify(&s->queued_wake);
    return ADAG_OK;
}

static adag_status_t enqueue(adag_dev_stream_t *s, stream_op_t proto)
{
    return adag__host_enqueue(s, proto, NULL, 0);
}

adag_status_t adag__host_stream_create(adag_device_t *d, adag_dev_stream_t **out)
{
    adag_dev_stream_t *s = calloc(1, sizeof(*s));
    if (!s)
        return adag__error(ADAG_ERR_NO_MEMORY, "device emu:%u: out of memory", d->index);
    s->dev = adag__host_dev(d);
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->lock, NULL);
    adag_wait_policy_t policy = {d->tuning.spin_ns, 1};
    adag__spin_init(&s->idle_spin, policy);
    adag__spin_init(&s->sync_spin, policy);
    int err = pthread_create(&s->thread, NULL, stream_main, s);
    if (err) {
        pthread_mutex_destroy(&s->lock);
        free(s);
        return adag__error_errno(err, "device emu:%u: stream thread", d->index);
    }
    COUNT(adag__host_dev(d), streams, 1);
    *out = s;
    return ADAG_OK;
}

void adag__host_stream_destroy(adag_device_t *d, adag_dev_stream_t *s)
{
    if (!s)
        return;
    while (enqueue(s, (stream_op_t){.kind = OP_STOP}) != ADAG_OK)
        usleep(1000); /* out of memory: the stream must still end */
    pthread_join(s->thread, NULL);
    COUNT(adag__host_dev(d), streams, -1);
    stream_unref(s);
}

/* CUDA's rules for cudaMemcpyAsync with pageable host memory (see
 * gpu/host_ranges.c): to it, the call returns once the stream reached the
 * copy and did it; from it, the bytes are staged at once and moved in
 * stream order. Device and page-locked memory copy without waiting. */
adag_status_t adag__host_copy_async(adag_dev_stream_t *s, void *dst, const void *src,
                                     size_t size)
{
    stream_op_t copy = {.kind = OP_COPY, .dst = dst, .src = src, .size = size,
                        .mbps = (uint64_t)s->dev->base.tuning.copy_mbps};
    if (size == 0 || (adag__host_ranges_cover(dst, size) && adag__host_ranges_cover(src, size)))
        return enqueue(s, copy);
    if (!adag__host_ranges_cover(dst, size)) {
        adag_status_t st = enqueue(s, copy);
        return st == ADAG_OK ? adag__host_stream_sync(s, ADAG_FOREVER) : st;
    }
    copy.src = NULL;
    return adag__host_enqueue(s, copy, src, size);
}

adag_status_t adag__host_host_fn(adag_dev_stream_t *s, adag_host_fn fn, void *arg)
{
    return enqueue(s, (stream_op_t){.kind = OP_HOST_FN, .fn = fn, .arg = arg});
}

adag_status_t adag__host_launch_host(adag_dev_stream_t *s, adag_host_fn fn, const void *args,
                                      size_t size)
{
    if (size > ADAG_DEVICE_ARGS_MAX)
        return adag__error(ADAG_ERR_INVALID,
                          "device emu:%u: launch_host: %zu bytes of arguments, at most %d",
                          s->dev->base.index, size, ADAG_DEVICE_ARGS_MAX);
    return adag__host_enqueue(s, (stream_op_t){.kind = OP_HOST_FN, .fn = fn}, args, size);
}

void *adag__host_stream_native(adag_dev_stream_t *s)
{
    return s;
}

host_dev_t *adag__host_stream_dev(adag_dev_stream_t *s)
{
    return s->dev;
}

adag_status_t adag__host_launch_steps(adag_dev_stream_t *s, adag_host_step_fn fn,
                                     const void *args, size_t size)
{
    if (size > ADAG_DEVICE_ARGS_MAX)
        return adag__error(ADAG_ERR_INVALID,
                          "device emu:%u: launch_steps: %zu bytes of arguments, at most %d",
                          s->dev->base.index, size, ADAG_DEVICE_ARGS_MAX);
    return adag__host_enqueue(s, (stream_op_t){.kind = OP_STEPS, .step = fn}, args, size);
}

adag_status_t adag__host_stream_sync(adag_dev_stream_t *s, int64_t deadline)
{
    count_arg_t all = {&s->done, atomic_load_explicit(&s->enqueued, memory_order_seq_cst)};
    adag_status_t st = ADAG_OK;
    /* help, wait for the operation the stream thread runs, help again */
    while (!count_reached(&all)) {
        stream_help(s, count_reached, &all, deadline);
        uint64_t done = atomic_load_explicit(&s->done, memory_order_seq_cst);
        count_arg_t next = {&s->done, done + 1 < all.want ? done + 1 : all.want};
        if ((st = adag__event_wait(&s->done_wake, count_reached, &next, NULL, deadline,
                                  &s->sync_spin)) != ADAG_OK)
            break;
    }
    if (st != ADAG_OK)
        return adag__error(st, "device emu:%u: stream work not done by the deadline (%llu of "
                          "%llu operations)", s->dev->base.index,
                          (unsigned long long)atomic_load_explicit(&s->done,
                                                                   memory_order_seq_cst),
                          (unsigned long long)all.want);
    return ADAG_OK;
}

adag_status_t adag__host_event_record(adag_dev_event_t *ev, adag_dev_stream_t *s)
{
    if (ev->imported)
        return adag__error(ADAG_ERR_INVALID, "device emu:%u: an imported event cannot be "
                                            "recorded", s->dev->base.index);
    uint64_t ticket = atomic_fetch_add_explicit(&ev->page->recorded, 1, memory_order_seq_cst) + 1;
    adag_status_t st = enqueue(s, (stream_op_t){.kind = OP_RECORD, .ev = ev, .ticket = ticket});
    if (st != ADAG_OK) {
        complete_ticket(ev, ticket); /* never leave a ticket nobody will reach */
        return st;
    }
    adag__host_event_recorded_on(ev, s);
    return ADAG_OK;
}

uint64_t adag__host_event_ticket(adag_dev_event_t *ev, int take)
{
    if (!take)
        return atomic_load_explicit(&ev->page->recorded, memory_order_seq_cst);
    return atomic_fetch_add_explicit(&ev->page->recorded, 1, memory_order_seq_cst) + 1;
}

void adag__host_event_complete(adag_dev_event_t *ev, uint64_t ticket)
{
    complete_ticket(ev, ticket);
}

void adag__host_event_recorded_on(adag_dev_event_t *ev, adag_dev_stream_t *s)
{
    stream_ref(s);
    pthread_mutex_lock(&ev->stream_lock);
    adag_dev_stream_t *was = ev->stream;
    ev->stream = s;
    pthread_mutex_unlock(&ev->stream_lock);
    if (was)
        stream_unref(was);
}

adag_status_t adag__host_stream_wait_event(adag_dev_stream_t *s, adag_dev_event_t *ev)
{
    uint64_t ticket = atomic_load_explicit(&ev->page->recorded, memory_order_seq_cst);
    if (ticket == 0)
        return ADAG_OK; /* never recorded: complete */
    return enqueue(s, (stream_op_t){.kind = OP_WAIT, .ev = ev, .ticket = ticket});
}


adag_status_t adag__host_stream_write_value64(adag_dev_stream_t *s, const adag_dev_word_t *w,
                                             uint64_t v)
{
    return enqueue(s, (stream_op_t){.kind = OP_WRITE_VALUE, .cell = adag__host_cell(w),
                                    .ticket = v});
}

adag_status_t adag__host_stream_wait_value64(adag_dev_stream_t *s, const adag_dev_word_t *w,
                                            uint64_t v)
{
    return enqueue(s, (stream_op_t){.kind = OP_WAIT_VALUE, .cell = adag__host_cell(w),
                                    .ticket = v});
}

/*
 * The runtime's monitor thread. It
 *   - spawns every worker (so the worker's parent-death signal is tied to a
 *     thread that lives as long as the runtime: see transport/spawn.h);
 *   - watches every worker's pidfd and, when one polls readable, collects
 *     the worker and fails every DAG it belongs to with ADAG_ERR_ACTOR_DIED.
 *     Liveness comes from the pidfd alone, so the host program's SIGCHLD
 *     handling (SIG_IGN, a handler that reaps) changes nothing;
 *   - reads every worker's event socket: a DAG_FAILED fails that DAG (a
 *     device communication op of the worker past the DAG's comm timeout),
 *     the worker's other DAGs go on;
 *   - keeps armed DAG fds exact: when a writer signals one of a DAG's notify
 *     fds (a backend's pollable fd), it recomputes that DAG's user fd under
 *     the DAG's lock.
 * Lock order: rt->lock, then run->lock.
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "dag/proc/proc.h"
#include "transport/protocol.h"
#include "transport/spawn.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/fd.h"

typedef struct adag_spawn_req {
    struct adag_spawn_req *next;
    int done;
    adag_status_t status;
    char msg[ADAG_ERROR_MAX];
    int pid, pidfd, sock;
} adag_spawn_req_t;

/* What one poll slot watches. */
typedef enum { WATCH_WAKE, WATCH_WORKER, WATCH_EVENTS, WATCH_DAG } watch_kind_t;
typedef struct {
    watch_kind_t kind;
    unsigned id; /* actor id or DAG id */
} watch_t;

void adag__actor_mark_dead_locked(adag_actor_h a, const char *fmt, ...)
{
    va_list ap;
    a->dead = 1;
    va_start(ap, fmt);
    vsnprintf(a->death, sizeof(a->death), fmt, ap);
    va_end(ap);
}

/* Whether actor a runs part of the DAG. */
static int run_uses_actor(const adag_dag_run_t *run, adag_actor_h a)
{
    for (unsigned i = 0; i < run->nactors; i++)
        if (run->actors[i].actor == a)
            return 1;
    return 0;
}

static adag_actor_h find_actor_locked(adag_runtime_h rt, unsigned actor_id)
{
    for (adag_list_t *l = rt->actors.next; l != &rt->actors; l = l->next) {
        adag_actor_h c = ADAG_CONTAINER(l, struct adag_actor, link);
        if (c->id == actor_id)
            return c;
    }
    return NULL;
}

/* Collects a worker whose pidfd polled readable; fails every DAG it is in.
 * Returns 0 if it turned out not to have exited yet. */
static int reap_worker(adag_runtime_h rt, unsigned actor_id)
{
    adag_actor_h a = NULL;
    char how[128], msg[256];

    pthread_mutex_lock(&rt->lock);
    a = find_actor_locked(rt, actor_id);
    if (!a || a->reaped || !a->ops->reap || a->ops->liveness_fd(a) < 0) {
        pthread_mutex_unlock(&rt->lock);
        return 1;
    }
    if (!a->ops->reap(a, how, sizeof(how))) {
        pthread_mutex_unlock(&rt->lock);
        return 0;
    }
    a->reaped = 1;
    int was_dead = a->dead;
    if (!was_dead)
        adag__actor_mark_dead_locked(a, "actor %s (pid %d) died: %s", a->name, a->ops->pid(a), how);
    snprintf(msg, sizeof(msg), "%s", a->death);
    pthread_cond_broadcast(&rt->cond);
    for (adag_list_t *l = rt->dags.next; l != &rt->dags; l = l->next) {
        adag_dag_run_t *run = ADAG_CONTAINER(l, adag_dag_run_t, link);
        if (run_uses_actor(run, a))
            run->ops->fail(run, ADAG_ERR_ACTOR_DIED, msg);
    }
    pthread_mutex_unlock(&rt->lock);
    if (!was_dead)
        ADAG_LOG_WARN("%s", msg);
    return 1;
}

/* A worker's event socket polled readable: one frame, a DAG_FAILED (small,
 * sent whole: read under rt->lock with a short deadline). A socket that
 * hung up or carries anything else is closed: the worker is dying (its
 * pidfd tells) or broken. */
static void read_events(adag_runtime_h rt, unsigned actor_id)
{
    adag_ctl_msg_t msg;
    adag_msg_failed_t m;
    pthread_mutex_lock(&rt->lock);
    adag_actor_h a = find_actor_locked(rt, actor_id);
    int fd = a && a->ops->events_fd ? a->ops->events_fd(a) : -1;
    if (fd < 0) {
        pthread_mutex_unlock(&rt->lock);
        return;
    }
    adag_status_t st = adag__msg_recv(fd, adag__deadline_ms(100), &msg);
    if (st == ADAG_OK) {
        st = adag__msg_decode_failed(&msg, &m);
        adag__ctl_msg_free(&msg);
    }
    if (st != ADAG_OK) {
        if (st != ADAG_ERR_CLOSED)
            ADAG_LOG_WARN("actor %s: event socket: %s; no longer read", a->name,
                          adag_last_error());
        a->ops->events_close(a);
        pthread_mutex_unlock(&rt->lock);
        return;
    }
    int found = 0;
    for (adag_list_t *l = rt->dags.next; l != &rt->dags; l = l->next) {
        adag_dag_run_t *run = ADAG_CONTAINER(l, adag_dag_run_t, link);
        if (run->id == m.dag_id && run_uses_actor(run, a)) {
            run->ops->fail(run, m.status, m.msg);
            found = 1;
        }
    }
    pthread_mutex_unlock(&rt->lock);
    if (found)
        ADAG_LOG_WARN("DAG %u failed: %s", m.dag_id, m.msg);
}

/* A loop signalled the DAG's notify fd: drain it, recompute the user fd. */
static void refresh_dag_fd(adag_runtime_h rt, unsigned dag_id)
{
    pthread_mutex_lock(&rt->lock);
    for (adag_list_t *l = rt->dags.next; l != &rt->dags; l = l->next) {
        adag_dag_run_t *run = ADAG_CONTAINER(l, adag_dag_run_t, link);
        if (run->id != dag_id)
            continue;
        uint64_t v;
        for (unsigned i = 0; i < run->nnotify; i++)
            while (read(run->notify_fds[i], &v, sizeof(v)) < 0 && errno == EINTR) {
            }
        run->ops->notified(run);
        break;
    }
    pthread_mutex_unlock(&rt->lock);
}

/* Runs the spawns queued by adag__monitor_spawn (this thread must be the
 * workers' parent). Called without rt->lock. */
static void run_spawns(adag_runtime_h rt, adag_spawn_req_t *reqs)
{
    for (adag_spawn_req_t *r = reqs; r; r = r->next) {
        r->status = adag__spawn_worker(rt->worker_path, &r->pid, &r->pidfd, &r->sock);
        if (r->status != ADAG_OK)
            snprintf(r->msg, sizeof(r->msg), "%s", adag_last_error());
    }
    pthread_mutex_lock(&rt->lock);
    while (reqs) {
        adag_spawn_req_t *next = reqs->next;
        reqs->done = 1;
        reqs = next;
    }
    pthread_cond_broadcast(&rt->cond);
    pthread_mutex_unlock(&rt->lock);
}

/* Grows the poll arrays to n entries; 0 on success. */
static int reserve_slots(struct pollfd **pfds, watch_t **watch, unsigned *cap, unsigned n)
{
    if (n <= *cap)
        return 0;
    struct pollfd *np = realloc(*pfds, n * sizeof(**pfds));
    if (!np)
        return -1;
    *pfds = np;
    watch_t *nw = realloc(*watch, n * sizeof(**watch));
    if (!nw)
        return -1;
    *watch = nw;
    *cap = n;
    return 0;
}

static void *monitor_main(void *arg)
{
    adag_runtime_h rt = arg;
    struct pollfd *pfds = NULL;
    watch_t *watch = NULL;
    unsigned cap = 0;
    int retry_ms = -1; /* a pidfd polled readable but the worker had not exited */

    for (;;) {
        pthread_mutex_lock(&rt->lock);
        adag_spawn_req_t *reqs = rt->spawn_reqs;
        rt->spawn_reqs = NULL;
        if (reqs && !rt->monitor_stop) {
            pthread_mutex_unlock(&rt->lock);
            run_spawns(rt, reqs);
            continue;
        }
        if (rt->monitor_stop) {
            for (adag_spawn_req_t *r = reqs; r; r = r->next) {
                r->status = ADAG_ERR_CLOSED;
                snprintf(r->msg, sizeof(r->msg), "the runtime is being destroyed");
                r->done = 1;
            }
            pthread_cond_broadcast(&rt->cond);
            pthread_mutex_unlock(&rt->lock);
            break;
        }
        unsigned count = 1;
        for (adag_list_t *l = rt->actors.next; l != &rt->actors; l = l->next)
            count += 2; /* liveness and events */
        for (adag_list_t *l = rt->dags.next; l != &rt->dags; l = l->next) {
            adag_dag_run_t *run = ADAG_CONTAINER(l, adag_dag_run_t, link);
            /* nnotify is written under run->lock, not ours: read it only once
             * armed (the seq_cst store of fd_armed publishes it) */
            if (atomic_load_explicit(&run->fd_armed, memory_order_seq_cst))
                count += run->nnotify;
        }
        if (reserve_slots(&pfds, &watch, &cap, count) != 0 && cap == 0) {
            /* out of memory: try again shortly rather than lose deaths */
            pthread_mutex_unlock(&rt->lock);
            ADAG_LOG_ERROR("monitor: out of memory");
            usleep(100000);
            continue;
        }
        unsigned n = 0;
        pfds[n] = (struct pollfd){rt->monitor_wake, POLLIN, 0};
        watch[n++] = (watch_t){WATCH_WAKE, 0};
        for (adag_list_t *l = rt->actors.next; l != &rt->actors && n < cap; l = l->next) {
            adag_actor_h a = ADAG_CONTAINER(l, struct adag_actor, link);
            int fd = a->ops->liveness_fd ? a->ops->liveness_fd(a) : -1;
            if (a->reaped || fd < 0)
                continue;
            pfds[n] = (struct pollfd){fd, POLLIN, 0};
            watch[n++] = (watch_t){WATCH_WORKER, a->id};
            int efd = a->ops->events_fd ? a->ops->events_fd(a) : -1;
            if (efd >= 0 && n < cap) {
                pfds[n] = (struct pollfd){efd, POLLIN, 0};
                watch[n++] = (watch_t){WATCH_EVENTS, a->id};
            }
        }
        for (adag_list_t *l = rt->dags.next; l != &rt->dags && n < cap; l = l->next) {
            adag_dag_run_t *run = ADAG_CONTAINER(l, adag_dag_run_t, link);
            if (!atomic_load_explicit(&run->fd_armed, memory_order_seq_cst))
                continue;
            for (unsigned i = 0; i < run->nnotify && n < cap; i++) {
                pfds[n] = (struct pollfd){run->notify_fds[i], POLLIN, 0};
                watch[n++] = (watch_t){WATCH_DAG, run->id};
            }
        }
        pthread_mutex_unlock(&rt->lock);

        int r = poll(pfds, n, retry_ms);
        retry_ms = -1;
        if (r < 0)
            continue; /* EINTR */
        for (unsigned i = 0; i < n; i++) {
            if (!pfds[i].revents)
                continue;
            if (watch[i].kind == WATCH_WAKE) {
                uint64_t v;
                (void)!read(rt->monitor_wake, &v, sizeof(v));
            } else if (watch[i].kind == WATCH_WORKER) {
                if (!reap_worker(rt, watch[i].id))
                    retry_ms = 10;
            } else if (watch[i].kind == WATCH_EVENTS) {
                read_events(rt, watch[i].id);
            } else {
                refresh_dag_fd(rt, watch[i].id);
            }
        }
    }
    free(pfds);
    free(watch);
    return NULL;
}

adag_status_t adag__monitor_spawn(adag_runtime_h rt, int *pid, int *pidfd, int *sock)
{
    adag_spawn_req_t req;
    memset(&req, 0, sizeof(req));
    pthread_mutex_lock(&rt->lock);
    req.next = rt->spawn_reqs;
    rt->spawn_reqs = &req;
    pthread_mutex_unlock(&rt->lock);
    adag__monitor_poke(rt);
    pthread_mutex_lock(&rt->lock);
    while (!req.done)
        pthread_cond_wait(&rt->cond, &rt->lock);
    pthread_mutex_unlock(&rt->lock);
    if (req.status != ADAG_OK)
        return adag__error(req.status, "%s", req.msg);
    *pid = req.pid;
    *pidfd = req.pidfd;
    *sock = req.sock;
    return ADAG_OK;
}

void adag__monitor_poke(adag_runtime_h rt)
{
    uint64_t one = 1;
    while (write(rt->monitor_wake, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
}

adag_status_t adag__monitor_start(adag_runtime_h rt)
{
    rt->monitor_wake = adag__fd_above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (rt->monitor_wake < 0)
        return adag__error_errno(errno, "adag_runtime_create: eventfd");
    int err = pthread_create(&rt->monitor, NULL, monitor_main, rt);
    if (err) {
        close(rt->monitor_wake);
        rt->monitor_wake = -1;
        return adag__error_errno(err, "adag_runtime_create: cannot start the monitor thread");
    }
    return ADAG_OK;
}

void adag__monitor_stop(adag_runtime_h rt)
{
    pthread_mutex_lock(&rt->lock);
    rt->monitor_stop = 1;
    pthread_mutex_unlock(&rt->lock);
    adag__monitor_poke(rt);
    pthread_join(rt->monitor, NULL);
    close(rt->monitor_wake);
    rt->monitor_wake = -1;
}

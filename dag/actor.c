#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "dag/class.h"
#include "dag/internal.h"
#include "transport/spawn.h"
#include "transport/wire.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#define ADAG_MAX_INIT_SIZE (16u << 20)

static adag_class_entry_t *find_class(adag_runtime_h rt, const char *name)
{
    for (adag_class_entry_t *e = rt->classes; e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

int adag_actor_method(adag_actor_h a, const char *name)
{
    for (unsigned i = 0; i < a->nmethods; i++)
        if (strcmp(a->methods[i].name, name) == 0)
            return (int)i;
    return -1;
}

void adag_actor_ref(adag_actor_h a)
{
    a->refs++;
}

void adag_actor_hold(adag_actor_h a)
{
    a->refs++;
    a->live++;
}

/* Parses a CREATE_ACTOR / generic reply: status, message, [methods]. */
static adag_status_t parse_reply(adag_actor_h a, const adag_ctl_msg_t *msg, const char *what)
{
    adag_rbuf_t rb = {msg->payload, msg->len, 0, 0};
    char text[ADAG_ERROR_MAX];
    if (msg->type != ADAG_MSG_REPLY)
        return adag_error(ADAG_ERR_PROTOCOL, "actor %s: unexpected control message %u to %s",
                          a->name, msg->type, what);
    adag_status_t st = (adag_status_t)(int32_t)adag_rbuf_u32(&rb);
    adag_rbuf_str(&rb, text, sizeof(text));
    if (rb.failed)
        return adag_error(ADAG_ERR_PROTOCOL, "actor %s: malformed reply to %s", a->name, what);
    if (st != ADAG_OK)
        return adag_error(st, "actor %s: %s", a->name, text);
    return ADAG_OK;
}

static int64_t control_deadline(void)
{
    return adag_deadline_ms(adag_settings()->control_timeout_ms);
}

static const char *request_name(uint32_t type)
{
    static const char *names[] = {"", "create the actor", "install a DAG", "stop a DAG",
                                  "shut down", "reply"};
    return type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
}

/* Sends a request (a->ctl_lock held). */
static adag_status_t request_send(adag_actor_h a, uint32_t type, const void *payload, size_t len,
                                  const int *fds, unsigned nfds)
{
    adag_status_t st;
    pthread_mutex_lock(&a->rt->lock);
    int dead = a->dead;
    if (dead)
        st = adag_error(ADAG_ERR_ACTOR_DIED, "%s", a->death);
    pthread_mutex_unlock(&a->rt->lock);
    if (dead)
        return st;
    st = adag_ctl_send(a->ctl, type, payload, len, fds, nfds);
    if (st == ADAG_ERR_CLOSED)
        return adag_error(ADAG_ERR_ACTOR_DIED, "actor %s (pid %d) died while asked to %s",
                          a->name, a->pid, request_name(type));
    if (st != ADAG_OK)
        adag_error_prefix("actor %s", a->name);
    return st;
}

/* Receives the reply to a request sent (a->ctl_lock held). */
static adag_status_t request_recv(adag_actor_h a, uint32_t type, int64_t deadline,
                                  adag_ctl_msg_t *reply_out)
{
    adag_ctl_msg_t reply;
    adag_status_t st = adag_ctl_recv(a->ctl, deadline, &reply);
    if (st == ADAG_ERR_CLOSED)
        return adag_error(ADAG_ERR_ACTOR_DIED, "actor %s (pid %d) died while asked to %s",
                          a->name, a->pid, request_name(type));
    if (st == ADAG_ERR_TIMEOUT)
        return adag_error(ADAG_ERR_TIMEOUT, "actor %s (pid %d) did not %s in time", a->name,
                          a->pid, request_name(type));
    if (st != ADAG_OK) {
        adag_error_prefix("actor %s", a->name);
        return st;
    }
    st = parse_reply(a, &reply, request_name(type));
    if (st == ADAG_OK && reply_out)
        *reply_out = reply;
    else
        adag_ctl_msg_free(&reply);
    return st;
}

adag_status_t adag_actor_request(adag_actor_h a, uint32_t type, const void *payload, size_t len,
                                 const int *fds, unsigned nfds, int64_t deadline,
                                 adag_ctl_msg_t *reply_out)
{
    pthread_mutex_lock(&a->ctl_lock);
    adag_status_t st = request_send(a, type, payload, len, fds, nfds);
    if (st == ADAG_OK)
        st = request_recv(a, type, deadline, reply_out);
    pthread_mutex_unlock(&a->ctl_lock);
    return st;
}

void adag_actor_request_all(adag_actor_h *actors, unsigned n, uint32_t type, const void *payload,
                            size_t len, int64_t deadline, adag_status_t *st,
                            char (*why)[ADAG_ERROR_MAX])
{
    unsigned *order = malloc((n + 1) * sizeof(*order));
    struct pollfd *pfds = malloc((n + 1) * sizeof(*pfds));
    unsigned *who = malloc((n + 1) * sizeof(*who));
    unsigned char *waiting = calloc(n + 1, 1); /* request sent, reply not yet read */
    if (!order || !pfds || !who || !waiting) {
        /* no memory for the parallel form: one at a time, same deadline */
        for (unsigned i = 0; i < n; i++) {
            st[i] = adag_actor_request(actors[i], type, payload, len, NULL, 0, deadline, NULL);
            snprintf(why[i], ADAG_ERROR_MAX, "%s", adag_last_error());
        }
        goto out;
    }
    /* ctl_locks in actor id order: two teardowns sharing actors cannot
     * deadlock (every other holder takes a single ctl_lock) */
    for (unsigned i = 0; i < n; i++) {
        unsigned k = i;
        while (k > 0 && actors[order[k - 1]]->id > actors[i]->id) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    for (unsigned k = 0; k < n; k++)
        pthread_mutex_lock(&actors[order[k]]->ctl_lock);
    unsigned pending = 0;
    for (unsigned i = 0; i < n; i++) {
        st[i] = request_send(actors[i], type, payload, len, NULL, 0);
        if (st[i] != ADAG_OK) {
            snprintf(why[i], ADAG_ERROR_MAX, "%s", adag_last_error());
            pthread_mutex_unlock(&actors[i]->ctl_lock);
        } else {
            waiting[i] = 1;
            pending++;
        }
    }
    /* every worker works on it at once; each reply is taken as it comes and
     * frees that actor at once */
    while (pending) {
        unsigned np = 0;
        for (unsigned i = 0; i < n; i++) {
            if (!waiting[i])
                continue;
            pfds[np] = (struct pollfd){actors[i]->ctl, POLLIN, 0};
            who[np++] = i;
        }
        int r = poll(pfds, np, adag_ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            for (unsigned k = 0; k < np; k++) {
                adag_actor_h a = actors[who[k]];
                st[who[k]] = adag_error(ADAG_ERR_TIMEOUT, "actor %s (pid %d) did not %s in time",
                                        a->name, a->pid, request_name(type));
                snprintf(why[who[k]], ADAG_ERROR_MAX, "%s", adag_last_error());
                pthread_mutex_unlock(&a->ctl_lock);
            }
            break;
        }
        for (unsigned k = 0; k < np; k++) {
            if (!pfds[k].revents)
                continue;
            unsigned i = who[k];
            st[i] = request_recv(actors[i], type, deadline, NULL);
            snprintf(why[i], ADAG_ERROR_MAX, "%s", st[i] == ADAG_OK ? "" : adag_last_error());
            waiting[i] = 0;
            pthread_mutex_unlock(&actors[i]->ctl_lock);
            pending--;
        }
    }
out:
    free(order);
    free(pfds);
    free(who);
    free(waiting);
}

/* Waits until the monitor reaped the worker; 0 if it did by the deadline. */
static int wait_reaped(adag_actor_h a, int64_t deadline)
{
    pthread_mutex_lock(&a->rt->lock);
    while (!a->reaped) {
        int64_t left = deadline - adag_now_ns();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t wake = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + left;
        ts.tv_sec = wake / 1000000000;
        ts.tv_nsec = wake % 1000000000;
        pthread_cond_timedwait(&a->rt->cond, &a->rt->lock, &ts);
    }
    int reaped = a->reaped;
    pthread_mutex_unlock(&a->rt->lock);
    return reaped;
}

void adag_actor_kill(adag_actor_h a, const char *why)
{
    if (a->placement != ADAG_PLACEMENT_PROCESS)
        return;
    pthread_mutex_lock(&a->rt->lock);
    if (!a->dead) {
        a->dead = 1;
        snprintf(a->death, sizeof(a->death), "actor %s (pid %d) was killed: %s", a->name, a->pid,
                 why);
    }
    int reaped = a->reaped;
    pthread_mutex_unlock(&a->rt->lock);
    if (reaped)
        return;
    adag_pidfd_kill(a->pidfd, SIGKILL);
    if (!wait_reaped(a, adag_deadline_ms(5000)))
        ADAG_LOG_ERROR("actor %s (pid %d) was not reaped after SIGKILL", a->name, a->pid);
}

static void actor_free(adag_actor_h a)
{
    if (a->ctl >= 0)
        close(a->ctl);
    if (a->pidfd >= 0)
        close(a->pidfd);
    pthread_mutex_destroy(&a->call_lock);
    pthread_mutex_destroy(&a->ctl_lock);
    free(a->methods);
    free(a->state);
    free(a);
}

/* Stops a process actor's worker: SHUTDOWN (fini runs there), then kill. */
static void actor_stop_worker(adag_actor_h a)
{
    int64_t deadline = adag_deadline_ms(adag_settings()->teardown_timeout_ms);
    adag_status_t st =
        adag_actor_request(a, ADAG_MSG_SHUTDOWN, NULL, 0, NULL, 0, deadline, NULL);
    if (st == ADAG_OK && wait_reaped(a, deadline))
        return;
    adag_actor_kill(a, "it did not shut down within ADAG_TEARDOWN_TIMEOUT_MS");
}

/* Runs fini / shuts the worker down, once. */
static void actor_stop(adag_actor_h a)
{
    if (a->stopped)
        return;
    a->stopped = 1;
    if (a->placement == ADAG_PLACEMENT_THREAD) {
        if (a->def->fini)
            a->def->fini(a->state);
    } else {
        actor_stop_worker(a);
    }
}

void adag_actor_unref(adag_actor_h a)
{
    adag_runtime_h rt = a->rt;
    pthread_mutex_lock(&rt->lock);
    int left = --a->refs;
    pthread_mutex_unlock(&rt->lock);
    if (left > 0)
        return;
    actor_stop(a);
    pthread_mutex_lock(&rt->lock);
    adag_list_remove(&a->link);
    pthread_mutex_unlock(&rt->lock);
    adag_monitor_poke(rt);
    actor_free(a);
}

void adag_actor_drop(adag_actor_h a)
{
    pthread_mutex_lock(&a->rt->lock);
    int live = --a->live;
    pthread_mutex_unlock(&a->rt->lock);
    if (live == 0)
        actor_stop(a);
    adag_actor_unref(a);
}

static adag_status_t create_thread_actor(adag_runtime_h rt, adag_actor_h a,
                                         const adag_actor_params_t *p, const void *init_data,
                                         size_t init_size)
{
    pthread_mutex_lock(&rt->lock);
    adag_class_entry_t *e = find_class(rt, a->class_name);
    pthread_mutex_unlock(&rt->lock);
    (void)p;
    if (!e)
        return adag_error(ADAG_ERR_NOT_FOUND,
                          "adag_actor_create: class %s is not registered (adag_class_register) "
                          "for thread actor %s",
                          a->class_name, a->name);
    a->def = &e->def;
    a->nmethods = e->def.nmethods;
    a->methods = calloc(a->nmethods, sizeof(*a->methods));
    a->state = calloc(1, e->def.state_size ? e->def.state_size : 1);
    if (!a->methods || !a->state)
        return adag_error(ADAG_ERR_NO_MEMORY, "adag_actor_create: state of %zu bytes for %s",
                          e->def.state_size, a->name);
    memcpy(a->methods, e->methods, a->nmethods * sizeof(*a->methods));
    if (e->def.init) {
        adag_status_t st = e->def.init(a->state, init_data, init_size);
        if (st != ADAG_OK)
            return adag_error(st == ADAG_ERR_NO_MEMORY ? st : ADAG_ERR_INVALID,
                              "actor %s: init of class %s returned %s", a->name, a->class_name,
                              adag_status_str(st));
    }
    return ADAG_OK;
}

/* A worker that failed while being created: say how it ended (the monitor
 * reaps it; a worker that closed its socket is normally dying already). */
static adag_status_t creation_failed(adag_actor_h a, adag_status_t st, const char *module)
{
    char msg[ADAG_ERROR_MAX];
    snprintf(msg, sizeof(msg), "%s", adag_last_error());
    if (st == ADAG_ERR_ACTOR_DIED && wait_reaped(a, adag_deadline_ms(2000))) {
        pthread_mutex_lock(&a->rt->lock);
        st = adag_error(ADAG_ERR_ACTOR_DIED,
                        "adag_actor_create: %s while creating the actor (class %s, module %s)",
                        a->death, a->class_name, module);
        pthread_mutex_unlock(&a->rt->lock);
    } else {
        adag_actor_kill(a, "its creation failed");
        st = adag_error(st, "%s", msg);
    }
    return st;
}

static adag_status_t create_process_actor(adag_runtime_h rt, adag_actor_h a,
                                          const adag_actor_params_t *p, const void *init_data,
                                          size_t init_size)
{
    adag_wbuf_t wb = {0};
    adag_ctl_msg_t reply;
    adag_status_t st;
    int pid, pidfd, ctl;

    if (!(p->field_mask & ADAG_ACTOR_PARAM_MODULE) || !p->module_path || !*p->module_path)
        return adag_error(ADAG_ERR_INVALID,
                          "adag_actor_create: process actor %s needs module_path "
                          "(ADAG_ACTOR_PARAM_MODULE)",
                          a->name);
    size_t path_len = strlen(p->module_path);
    if (path_len >= PATH_MAX)
        return adag_error(ADAG_ERR_INVALID,
                          "adag_actor_create: module_path of actor %s is %zu bytes, longer than "
                          "the system's path limit PATH_MAX - 1 (%d bytes)",
                          a->name, path_len, PATH_MAX - 1);
    st = adag_monitor_spawn(rt, &pid, &pidfd, &ctl);
    if (st != ADAG_OK) {
        adag_error_prefix("adag_actor_create %s", a->name);
        return st;
    }
    /* from here on the monitor watches it (it is in rt->actors) */
    pthread_mutex_lock(&rt->lock);
    a->pid = pid;
    a->pidfd = pidfd;
    a->ctl = ctl;
    pthread_mutex_unlock(&rt->lock);
    adag_monitor_poke(rt);

    adag_wbuf_str(&wb, p->module_path);
    adag_wbuf_str(&wb, a->class_name);
    adag_wbuf_str(&wb, a->name);
    adag_wbuf_bytes(&wb, init_data, init_size);
    if (wb.failed) {
        adag_wbuf_free(&wb);
        st = adag_error(ADAG_ERR_NO_MEMORY, "adag_actor_create: out of memory");
        return creation_failed(a, st, p->module_path);
    }
    st = adag_actor_request(a, ADAG_MSG_CREATE_ACTOR, wb.data, wb.len, NULL, 0,
                            control_deadline(), &reply);
    adag_wbuf_free(&wb);
    if (st != ADAG_OK)
        return creation_failed(a, st, p->module_path);
    /* the reply carries the class's method table after status and message */
    adag_rbuf_t rb = {reply.payload, reply.len, 0, 0};
    char skip[ADAG_ERROR_MAX];
    adag_rbuf_u32(&rb);
    adag_rbuf_str(&rb, skip, sizeof(skip));
    a->nmethods = adag_rbuf_u32(&rb);
    if (rb.failed || a->nmethods == 0 || a->nmethods > ADAG_MAX_METHODS ||
        !(a->methods = calloc(a->nmethods, sizeof(*a->methods)))) {
        adag_ctl_msg_free(&reply);
        st = adag_error(ADAG_ERR_PROTOCOL, "actor %s: malformed method table from the worker",
                        a->name);
        return creation_failed(a, st, p->module_path);
    }
    for (unsigned i = 0; i < a->nmethods; i++) {
        adag_rbuf_str(&rb, a->methods[i].name, sizeof(a->methods[i].name));
        a->methods[i].nargs = adag_rbuf_u32(&rb);
        a->methods[i].nreturns = adag_rbuf_u32(&rb);
        /* the limits the worker checked (dag/class.c), checked again: a peer's bytes */
        if (!adag_method_shape_ok(a->methods[i].name, a->methods[i].nargs,
                                  a->methods[i].nreturns))
            rb.failed = 1;
    }
    adag_ctl_msg_free(&reply);
    if (rb.failed) {
        st = adag_error(ADAG_ERR_PROTOCOL, "actor %s: malformed method table from the worker",
                        a->name);
        return creation_failed(a, st, p->module_path);
    }
    return ADAG_OK;
}

#define ACTOR_PARAMS_KNOWN                                                                     \
    (ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME | ADAG_ACTOR_PARAM_MODULE |                  \
     ADAG_ACTOR_PARAM_PLACEMENT | ADAG_ACTOR_PARAM_INIT)

static adag_status_t check_actor_params(const adag_actor_params_t *p)
{
    static const char *fn = "adag_actor_create";
    adag_status_t st = adag_check_field_mask(fn, "adag_actor_params_t", p->field_mask,
                                             ACTOR_PARAMS_KNOWN);
    if (st != ADAG_OK)
        return st;
    if (!(p->field_mask & ADAG_ACTOR_PARAM_CLASS) || !adag_valid_name(p->class_name))
        return adag_error(ADAG_ERR_INVALID,
                          "%s: class_name (ADAG_ACTOR_PARAM_CLASS) of 1..%d bytes is required", fn,
                          ADAG_MAX_NAME - 1);
    if ((p->field_mask & ADAG_ACTOR_PARAM_NAME) && !adag_valid_name(p->name))
        return adag_error(ADAG_ERR_INVALID,
                          "%s: name is set (ADAG_ACTOR_PARAM_NAME) but %s; it must be 1..%d bytes",
                          fn, p->name ? "not 1..63 bytes" : "NULL", ADAG_MAX_NAME - 1);
    if ((p->field_mask & ADAG_ACTOR_PARAM_MODULE) && (!p->module_path || !*p->module_path))
        return adag_error(ADAG_ERR_INVALID,
                          "%s: module_path is set (ADAG_ACTOR_PARAM_MODULE) but %s", fn,
                          p->module_path ? "empty" : "NULL");
    if ((p->field_mask & ADAG_ACTOR_PARAM_PLACEMENT) && p->placement != ADAG_PLACEMENT_THREAD &&
        p->placement != ADAG_PLACEMENT_PROCESS)
        return adag_error(ADAG_ERR_INVALID, "%s: unknown placement %d", fn, (int)p->placement);
    if (p->field_mask & ADAG_ACTOR_PARAM_INIT) {
        if (p->init_size && !p->init_data)
            return adag_error(ADAG_ERR_INVALID, "%s: init_data is NULL", fn);
        if (p->init_size > ADAG_MAX_INIT_SIZE)
            return adag_error(ADAG_ERR_TOO_LARGE, "%s: init bytes %zu exceed %u", fn,
                              p->init_size, ADAG_MAX_INIT_SIZE);
    }
    return ADAG_OK;
}

/* The name is taken and the actor listed, in one step under rt->lock: two
 * threads creating actors of one name cannot both succeed. */
static adag_status_t list_new_actor(adag_runtime_h rt, adag_actor_h a, const adag_actor_params_t *p)
{
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&rt->lock);
    a->id = rt->next_actor_id++;
    if (p->field_mask & ADAG_ACTOR_PARAM_NAME)
        snprintf(a->name, sizeof(a->name), "%s", p->name);
    else
        snprintf(a->name, sizeof(a->name), "%.40s#%u", p->class_name, a->id);
    for (adag_list_t *l = rt->actors.next; l != &rt->actors; l = l->next)
        if (strcmp(ADAG_CONTAINER(l, struct adag_actor, link)->name, a->name) == 0)
            st = adag_error(ADAG_ERR_INVALID, "adag_actor_create: an actor named %s exists",
                            a->name);
    if (st == ADAG_OK) {
        a->creating = 1;
        adag_list_push(&rt->actors, &a->link);
    }
    pthread_mutex_unlock(&rt->lock);
    return st;
}

adag_status_t adag_actor_create(adag_runtime_h rt, const adag_actor_params_t *p, adag_actor_h *out)
{
    adag_actor_h a;
    adag_status_t st;
    const void *init_data = NULL;
    size_t init_size = 0;

    if (!rt || !p || !out)
        return adag_error(ADAG_ERR_INVALID, "adag_actor_create: runtime, params and actor must not be NULL");
    *out = NULL;
    if ((st = check_actor_params(p)) != ADAG_OK)
        return st;
    adag_placement_t placement =
        (p->field_mask & ADAG_ACTOR_PARAM_PLACEMENT) ? p->placement : ADAG_PLACEMENT_THREAD;
    if (p->field_mask & ADAG_ACTOR_PARAM_INIT) {
        init_data = p->init_data;
        init_size = p->init_size;
    }
    a = calloc(1, sizeof(*a));
    if (!a)
        return adag_error(ADAG_ERR_NO_MEMORY, "adag_actor_create: out of memory");
    a->rt = rt;
    a->placement = placement;
    a->pid = 0;
    a->pidfd = -1;
    a->ctl = -1;
    a->refs = 1;
    a->live = 1;
    adag_list_init(&a->link);
    pthread_mutex_init(&a->call_lock, NULL);
    pthread_mutex_init(&a->ctl_lock, NULL);
    snprintf(a->class_name, sizeof(a->class_name), "%s", p->class_name);
    if ((st = list_new_actor(rt, a, p)) != ADAG_OK) {
        actor_free(a);
        return st;
    }
    if (placement == ADAG_PLACEMENT_THREAD)
        st = create_thread_actor(rt, a, p, init_data, init_size);
    else
        st = create_process_actor(rt, a, p, init_data, init_size);
    if (st != ADAG_OK) {
        pthread_mutex_lock(&rt->lock);
        adag_list_remove(&a->link);
        pthread_mutex_unlock(&rt->lock);
        adag_monitor_poke(rt);
        actor_free(a);
        return st;
    }
    pthread_mutex_lock(&rt->lock);
    a->creating = 0;
    pthread_mutex_unlock(&rt->lock);
    *out = a;
    return ADAG_OK;
}

const char *adag_actor_name(adag_actor_h a)
{
    return a ? a->name : "";
}

int adag_actor_pid(adag_actor_h a)
{
    return a && a->placement == ADAG_PLACEMENT_PROCESS ? a->pid : 0;
}

adag_status_t adag_actor_destroy(adag_actor_h a)
{
    if (!a)
        return adag_error(ADAG_ERR_INVALID, "adag_actor_destroy: actor is NULL");
    pthread_mutex_lock(&a->rt->lock);
    if (a->user_destroyed) {
        pthread_mutex_unlock(&a->rt->lock);
        return adag_error(ADAG_ERR_INVALID, "adag_actor_destroy: actor %s was already destroyed",
                          a->name);
    }
    a->user_destroyed = 1;
    pthread_mutex_unlock(&a->rt->lock);
    adag_actor_drop(a);
    return ADAG_OK;
}

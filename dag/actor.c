#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "dag/internal.h"
#include "transport/wire.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

adag_status_t adag_actor_request(adag_actor_h a, uint32_t type, const void *payload, size_t len,
                                 const int *fds, unsigned nfds, int64_t deadline,
                                 adag_ctl_msg_t *reply_out)
{
    static const char *names[] = {"", "create the actor", "install a DAG", "stop a DAG",
                                  "shut down", "reply"};
    const char *what = type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
    adag_ctl_msg_t reply;
    adag_status_t st;

    pthread_mutex_lock(&a->ctl_lock);
    pthread_mutex_lock(&a->rt->lock);
    int dead = a->dead;
    if (dead)
        st = adag_error(ADAG_ERR_ACTOR_DIED, "%s", a->death);
    pthread_mutex_unlock(&a->rt->lock);
    if (dead)
        goto out;
    st = adag_ctl_send(a->ctl, type, payload, len, fds, nfds);
    if (st == ADAG_OK)
        st = adag_ctl_recv(a->ctl, deadline, &reply);
    if (st == ADAG_ERR_CLOSED) {
        st = adag_error(ADAG_ERR_ACTOR_DIED, "actor %s (pid %d) died while asked to %s", a->name,
                        a->pid, what);
        goto out;
    }
    if (st == ADAG_ERR_TIMEOUT) {
        st = adag_error(ADAG_ERR_TIMEOUT, "actor %s (pid %d) did not %s in time", a->name, a->pid,
                        what);
        goto out;
    }
    if (st != ADAG_OK) {
        adag_error_prefix("actor %s", a->name);
        goto out;
    }
    st = parse_reply(a, &reply, what);
    if (st == ADAG_OK && reply_out)
        *reply_out = reply;
    else
        adag_ctl_msg_free(&reply);
out:
    pthread_mutex_unlock(&a->ctl_lock);
    return st;
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
    syscall(SYS_pidfd_send_signal, a->pidfd, SIGKILL, NULL, 0);
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

static adag_status_t create_process_actor(adag_runtime_h rt, adag_actor_h a,
                                          const adag_actor_params_t *p, const void *init_data,
                                          size_t init_size)
{
    adag_wbuf_t wb = {0};
    adag_ctl_msg_t reply;
    adag_status_t st;

    if (!(p->field_mask & ADAG_ACTOR_PARAM_MODULE) || !p->module_path || !*p->module_path)
        return adag_error(ADAG_ERR_INVALID,
                          "adag_actor_create: process actor %s needs module_path "
                          "(ADAG_ACTOR_PARAM_MODULE)",
                          a->name);
    st = adag_spawn_worker(rt->worker_path, &a->pid, &a->pidfd, &a->ctl);
    if (st != ADAG_OK) {
        adag_error_prefix("adag_actor_create %s", a->name);
        return st;
    }
    adag_wbuf_str(&wb, p->module_path);
    adag_wbuf_str(&wb, a->class_name);
    adag_wbuf_str(&wb, a->name);
    adag_wbuf_bytes(&wb, init_data, init_size);
    if (wb.failed) {
        st = adag_error(ADAG_ERR_NO_MEMORY, "adag_actor_create: out of memory");
        goto fail;
    }
    st = adag_actor_request(a, ADAG_MSG_CREATE_ACTOR, wb.data, wb.len, NULL, 0,
                            control_deadline(), &reply);
    adag_wbuf_free(&wb);
    if (st != ADAG_OK)
        goto fail;
    /* the reply carries the class's method table after status and message */
    adag_rbuf_t rb = {reply.payload, reply.len, 0, 0};
    char skip[ADAG_ERROR_MAX];
    adag_rbuf_u32(&rb);
    adag_rbuf_str(&rb, skip, sizeof(skip));
    a->nmethods = adag_rbuf_u32(&rb);
    if (rb.failed || a->nmethods == 0 || a->nmethods > 4096 ||
        !(a->methods = calloc(a->nmethods, sizeof(*a->methods)))) {
        adag_ctl_msg_free(&reply);
        st = adag_error(ADAG_ERR_PROTOCOL, "actor %s: malformed method table from the worker",
                        a->name);
        goto fail;
    }
    for (unsigned i = 0; i < a->nmethods; i++) {
        adag_rbuf_str(&rb, a->methods[i].name, sizeof(a->methods[i].name));
        a->methods[i].nargs = adag_rbuf_u32(&rb);
        a->methods[i].nreturns = adag_rbuf_u32(&rb);
        if (a->methods[i].nargs > ADAG_MAX_ARGS || a->methods[i].nreturns == 0 ||
            a->methods[i].nreturns > ADAG_MAX_RETURNS)
            rb.failed = 1;
    }
    adag_ctl_msg_free(&reply);
    if (rb.failed) {
        st = adag_error(ADAG_ERR_PROTOCOL, "actor %s: malformed method table from the worker",
                        a->name);
        goto fail;
    }
    return ADAG_OK;
fail:
    /* not yet watched by the monitor: reap it here */
    kill(a->pid, SIGKILL);
    while (waitpid(a->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    a->reaped = 1;
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
    if (!(p->field_mask & ADAG_ACTOR_PARAM_CLASS) || !adag_valid_name(p->class_name))
        return adag_error(ADAG_ERR_INVALID,
                          "adag_actor_create: class_name (ADAG_ACTOR_PARAM_CLASS) of 1..%d bytes is required",
                          ADAG_MAX_NAME - 1);
    if ((p->field_mask & ADAG_ACTOR_PARAM_NAME) && p->name && !adag_valid_name(p->name))
        return adag_error(ADAG_ERR_INVALID, "adag_actor_create: actor name must be 1..%d bytes",
                          ADAG_MAX_NAME - 1);
    adag_placement_t placement =
        (p->field_mask & ADAG_ACTOR_PARAM_PLACEMENT) ? p->placement : ADAG_PLACEMENT_THREAD;
    if (placement != ADAG_PLACEMENT_THREAD && placement != ADAG_PLACEMENT_PROCESS)
        return adag_error(ADAG_ERR_INVALID, "adag_actor_create: unknown placement %d",
                          (int)placement);
    if (p->field_mask & ADAG_ACTOR_PARAM_INIT) {
        init_data = p->init_data;
        init_size = p->init_size;
        if (init_size && !init_data)
            return adag_error(ADAG_ERR_INVALID, "adag_actor_create: init_data is NULL");
        if (init_size > ADAG_MAX_INIT_SIZE)
            return adag_error(ADAG_ERR_TOO_LARGE, "adag_actor_create: init bytes %zu exceed %u",
                              init_size, ADAG_MAX_INIT_SIZE);
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

    pthread_mutex_lock(&rt->lock);
    a->id = rt->next_actor_id++;
    if ((p->field_mask & ADAG_ACTOR_PARAM_NAME) && p->name)
        snprintf(a->name, sizeof(a->name), "%s", p->name);
    else
        snprintf(a->name, sizeof(a->name), "%.40s#%u", p->class_name, a->id);
    for (adag_list_t *l = rt->actors.next; l != &rt->actors; l = l->next) {
        if (strcmp(ADAG_CONTAINER(l, struct adag_actor, link)->name, a->name) == 0) {
            pthread_mutex_unlock(&rt->lock);
            st = adag_error(ADAG_ERR_INVALID, "adag_actor_create: an actor named %s exists",
                            a->name);
            goto fail;
        }
    }
    pthread_mutex_unlock(&rt->lock);

    if (placement == ADAG_PLACEMENT_THREAD)
        st = create_thread_actor(rt, a, p, init_data, init_size);
    else
        st = create_process_actor(rt, a, p, init_data, init_size);
    if (st != ADAG_OK)
        goto fail;

    pthread_mutex_lock(&rt->lock);
    adag_list_push(&rt->actors, &a->link);
    pthread_mutex_unlock(&rt->lock);
    if (placement == ADAG_PLACEMENT_PROCESS)
        adag_monitor_poke(rt);
    *out = a;
    return ADAG_OK;
fail:
    actor_free(a);
    return st;
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

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "common/settings.h"
#include "dag/proc/proc.h"
#include "transport/tcp.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#define ADAG_MAX_INIT_SIZE (16u << 20)

int adag__actor_method(adag_actor_h a, const char *name)
{
    for (unsigned i = 0; i < a->nmethods; i++)
        if (strcmp(a->methods[i].name, name) == 0)
            return (int)i;
    return -1;
}

void adag__actor_ref(adag_actor_h a)
{
    a->refs++;
}

void adag__actor_hold(adag_actor_h a)
{
    a->refs++;
    a->live++;
}

/* Sorts ais by actor id (insertion sort: DAGs have few actors). */
static void sort_by_id(adag_dag_run_t *run, unsigned *order, const unsigned *ais, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        unsigned k = i;
        while (k > 0 && run->actors[order[k - 1]].actor->id > run->actors[ais[i]].actor->id) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = ais[i];
    }
}

static void step_done(adag_actor_h a, adag_status_t s, adag_status_t *st,
                      char (*why)[ADAG_ERROR_MAX], unsigned i)
{
    st[i] = s;
    snprintf(why[i], ADAG_ERROR_MAX, "%s", s == ADAG_OK ? "" : adag_last_error());
    if (a->ops->unlock)
        a->ops->unlock(a);
}

void adag__actors_step(adag_dag_run_t *run, const unsigned *ais, unsigned n, adag_step_t step,
                      int64_t deadline, adag_status_t *st, char (*why)[ADAG_ERROR_MAX])
{
    unsigned *order = malloc((n + 1) * sizeof(*order));
    unsigned *pos = malloc((n + 1) * sizeof(*pos)); /* index in ais of order[k] */
    struct pollfd *pfds = malloc((n + 1) * sizeof(*pfds));
    unsigned *who = malloc((n + 1) * sizeof(*who));
    unsigned char *waiting = calloc(n + 1, 1); /* sent, answer not yet taken */
    unsigned pending = 0;
    if (!order || !pos || !pfds || !who || !waiting) {
        for (unsigned i = 0; i < n; i++) {
            st[i] = adag__error(ADAG_ERR_NO_MEMORY, "DAG %s: out of memory", run->name);
            snprintf(why[i], ADAG_ERROR_MAX, "%s", adag_last_error());
        }
        goto out;
    }
    /* locks in actor-id order: two DAGs stepping shared actors cannot
     * deadlock (every other holder takes a single one) */
    sort_by_id(run, order, ais, n);
    for (unsigned k = 0; k < n; k++) {
        for (unsigned i = 0; i < n; i++)
            if (ais[i] == order[k])
                pos[k] = i;
        adag_actor_h a = run->actors[order[k]].actor;
        if (a->ops->lock)
            a->ops->lock(a);
    }
    /* everyone works on it at once; each answer is taken as it comes and
     * frees that actor at once */
    for (unsigned k = 0; k < n; k++) {
        unsigned i = pos[k];
        adag_actor_h a = run->actors[ais[i]].actor;
        int wait = 0;
        adag_status_t s = a->ops->step_begin(a, run, ais[i], step, &wait);
        if (s == ADAG_OK && wait) {
            waiting[i] = 1;
            pending++;
        } else {
            step_done(a, s, st, why, i);
        }
    }
    while (pending) {
        unsigned np = 0;
        for (unsigned i = 0; i < n; i++) {
            if (!waiting[i])
                continue;
            adag_actor_h a = run->actors[ais[i]].actor;
            pfds[np] = (struct pollfd){a->ops->step_fd(a), POLLIN, 0};
            who[np++] = i;
        }
        int r = poll(pfds, np, adag__ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            for (unsigned k = 0; k < np; k++) {
                adag_actor_h a = run->actors[ais[who[k]]].actor;
                adag_status_t s = adag__error(ADAG_ERR_TIMEOUT, "actor %s (pid %d) did not "
                                             "answer in time (%s)", a->name, adag_actor_pid(a),
                                             step == ADAG_STEP_STOP ? "stopping the DAG"
                                                                    : "installing the DAG");
                step_done(a, s, st, why, who[k]);
            }
            break;
        }
        for (unsigned k = 0; k < np; k++) {
            if (!pfds[k].revents)
                continue;
            unsigned i = who[k];
            adag_actor_h a = run->actors[ais[i]].actor;
            step_done(a, a->ops->step_end(a, run, ais[i], step, deadline), st, why, i);
            waiting[i] = 0;
            pending--;
        }
    }
out:
    free(order);
    free(pos);
    free(pfds);
    free(who);
    free(waiting);
}

/* Waits until the monitor reaped the worker; 0 if it did by the deadline. */
int adag__actor_wait_reaped(adag_actor_h a, int64_t deadline)
{
    pthread_mutex_lock(&a->rt->lock);
    while (!a->reaped) {
        int64_t left = deadline - adag__now_ns();
        if (left <= 0)
            break;
        struct timespec ts = adag__timespec_at(deadline);
        pthread_cond_timedwait(&a->rt->cond, &a->rt->lock, &ts);
    }
    int reaped = a->reaped;
    pthread_mutex_unlock(&a->rt->lock);
    return reaped;
}

static void actor_free(adag_actor_h a)
{
    if (a->ops->free)
        a->ops->free(a);
    free(a->methods);
    free(a);
}

/* Runs fini / shuts the worker down, once. */
static void actor_stop(adag_actor_h a)
{
    if (a->stopped)
        return;
    a->stopped = 1;
    if (a->ops->stop)
        a->ops->stop(a);
    adag__comm_leases_forget_actor(a->rt, a->id);
}

void adag__actor_unref(adag_actor_h a)
{
    adag_runtime_h rt = a->rt;
    pthread_mutex_lock(&rt->lock);
    int left = --a->refs;
    pthread_mutex_unlock(&rt->lock);
    if (left > 0)
        return;
    actor_stop(a);
    pthread_mutex_lock(&rt->lock);
    adag__list_remove(&a->link);
    pthread_mutex_unlock(&rt->lock);
    adag__monitor_poke(rt);
    actor_free(a);
}

void adag__actor_drop(adag_actor_h a)
{
    pthread_mutex_lock(&a->rt->lock);
    int live = --a->live;
    pthread_mutex_unlock(&a->rt->lock);
    if (live == 0)
        actor_stop(a);
    adag__actor_unref(a);
}

#define ACTOR_FIELD(m, bit) ADAG_PARAM_FIELD(adag_actor_params_t, m, bit)
static const adag_param_field_t actor_fields[] = {
    ACTOR_FIELD(class_name, ADAG_ACTOR_PARAM_CLASS),
    ACTOR_FIELD(name, ADAG_ACTOR_PARAM_NAME),
    ACTOR_FIELD(module_path, ADAG_ACTOR_PARAM_MODULE),
    ACTOR_FIELD(placement, ADAG_ACTOR_PARAM_PLACEMENT),
    ACTOR_FIELD(init_data, ADAG_ACTOR_PARAM_INIT),
    ACTOR_FIELD(init_size, ADAG_ACTOR_PARAM_INIT),
    ACTOR_FIELD(device, ADAG_ACTOR_PARAM_DEVICE),
    ACTOR_FIELD(node, ADAG_ACTOR_PARAM_NODE),
    ACTOR_FIELD(cpus, ADAG_ACTOR_PARAM_CPUS),
    ACTOR_FIELD(numa, ADAG_ACTOR_PARAM_NUMA),
    ACTOR_FIELD(nic, ADAG_ACTOR_PARAM_NIC),
};

/* A remote actor's node: "address:port" as it is, or a name of the
 * runtime's ADAG_HOSTS ("name=address:port,..."), e.g. a rank under
 * `adag-worker --pmix`. */
static adag_status_t resolve_node(adag_runtime_h rt, const char *node, char *out, size_t len)
{
    if (strchr(node, ':')) {
        snprintf(out, len, "%s", node);
        return ADAG_OK;
    }
    const char *table = rt->settings.hosts;
    size_t nlen = strlen(node);
    for (const char *e = table; e && *e;) {
        const char *end = strchr(e, ',');
        size_t elen = end ? (size_t)(end - e) : strlen(e);
        const char *eq = memchr(e, '=', elen);
        if (eq && (size_t)(eq - e) == nlen && !memcmp(e, node, nlen)) {
            size_t alen = elen - nlen - 1;
            if (alen == 0 || alen >= len || !memchr(eq + 1, ':', alen))
                return adag__error(ADAG_ERR_INVALID,
                                  "adag_actor_create: ADAG_HOSTS gives node %s the address "
                                  "\"%.*s\", not address:port",
                                  node, (int)alen, eq + 1);
            snprintf(out, len, "%.*s", (int)alen, eq + 1);
            return ADAG_OK;
        }
        e = end ? end + 1 : e + elen;
    }
    return adag__error(ADAG_ERR_NOT_FOUND,
                      "adag_actor_create: node \"%s\" is neither address:port nor a name in "
                      "ADAG_HOSTS (%s)",
                      node, table && *table ? table : "not set");
}

static adag_status_t check_actor_params(const adag_actor_params_t *p)
{
    static const char *fn = "adag_actor_create";
    adag_status_t st = adag__params_check(fn, "adag_actor_params_t", p, p->field_mask,
                                         actor_fields, ADAG_PARAM_COUNT(actor_fields));
    if (st != ADAG_OK)
        return st;
    if (!(p->field_mask & ADAG_ACTOR_PARAM_CLASS) || !adag__valid_name(p->class_name))
        return adag__error(ADAG_ERR_INVALID,
                          "%s: class_name (ADAG_ACTOR_PARAM_CLASS) of 1..%d bytes is required", fn,
                          ADAG_MAX_NAME - 1);
    if ((p->field_mask & ADAG_ACTOR_PARAM_NAME) && !adag__valid_name(p->name))
        return adag__error(ADAG_ERR_INVALID,
                          "%s: name is set (ADAG_ACTOR_PARAM_NAME) but %s; it must be 1..%d bytes",
                          fn, p->name ? "not 1..63 bytes" : "NULL", ADAG_MAX_NAME - 1);
    if ((p->field_mask & ADAG_ACTOR_PARAM_MODULE) && (!p->module_path || !*p->module_path))
        return adag__error(ADAG_ERR_INVALID,
                          "%s: module_path is set (ADAG_ACTOR_PARAM_MODULE) but %s", fn,
                          p->module_path ? "empty" : "NULL");
    if ((p->field_mask & ADAG_ACTOR_PARAM_PLACEMENT) && p->placement != ADAG_PLACEMENT_THREAD &&
        p->placement != ADAG_PLACEMENT_PROCESS && p->placement != ADAG_PLACEMENT_REMOTE)
        return adag__error(ADAG_ERR_INVALID, "%s: unknown placement %d", fn, (int)p->placement);
    int remote = (p->field_mask & ADAG_ACTOR_PARAM_PLACEMENT) &&
                 p->placement == ADAG_PLACEMENT_REMOTE;
    int has_node = (p->field_mask & ADAG_ACTOR_PARAM_NODE) != 0;
    if (remote && (!has_node || !p->node || !p->node[0] || strlen(p->node) >= ADAG_HOSTPORT_MAX))
        return adag__error(ADAG_ERR_INVALID,
                          "%s: remote actor %s needs node (ADAG_ACTOR_PARAM_NODE): "
                          "\"address:port\" of an agent or a name in ADAG_HOSTS, under %d bytes",
                          fn, p->name && (p->field_mask & ADAG_ACTOR_PARAM_NAME) ? p->name : "",
                          ADAG_HOSTPORT_MAX);
    if (!remote && has_node)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: node is set (ADAG_ACTOR_PARAM_NODE) but the placement is not "
                          "ADAG_PLACEMENT_REMOTE",
                          fn);
    if (p->field_mask & ADAG_ACTOR_PARAM_INIT) {
        if (p->init_size && !p->init_data)
            return adag__error(ADAG_ERR_INVALID, "%s: init_data is NULL", fn);
        if (p->init_size > ADAG_MAX_INIT_SIZE)
            return adag__error(ADAG_ERR_TOO_LARGE, "%s: init bytes %zu exceed %u", fn,
                              p->init_size, ADAG_MAX_INIT_SIZE);
    }
    if ((p->field_mask & ADAG_ACTOR_PARAM_DEVICE) && !p->device)
        return adag__error(ADAG_ERR_INVALID, "%s: device is set (ADAG_ACTOR_PARAM_DEVICE) but NULL",
                          fn);
    return adag__actor_place_check(p, fn);
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
            st = adag__error(ADAG_ERR_INVALID, "adag_actor_create: an actor named %s exists",
                            a->name);
    if (st == ADAG_OK) {
        a->creating = 1;
        adag__list_push(&rt->actors, &a->link);
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
        return adag__error(ADAG_ERR_INVALID,
                           "adag_actor_create: runtime, params and actor must not be NULL");
    *out = NULL;
    if ((st = check_actor_params(p)) != ADAG_OK)
        return st;
    /* the text is checked here; whether the device exists, where it is opened */
    adag_device_kind_t device_kind = 0;
    unsigned device_index = 0;
    int has_device = (p->field_mask & ADAG_ACTOR_PARAM_DEVICE) != 0;
    if (has_device &&
        (st = adag__device_parse(p->device, &device_kind, &device_index)) != ADAG_OK) {
        adag__error_prefix("adag_actor_create");
        return st;
    }
    adag_placement_t placement =
        (p->field_mask & ADAG_ACTOR_PARAM_PLACEMENT) ? p->placement : ADAG_PLACEMENT_THREAD;
    if (p->field_mask & ADAG_ACTOR_PARAM_INIT) {
        init_data = p->init_data;
        init_size = p->init_size;
    }
    char host[ADAG_HOSTPORT_MAX] = "";
    if (placement == ADAG_PLACEMENT_REMOTE &&
        (st = resolve_node(rt, p->node, host, sizeof(host))) != ADAG_OK)
        return st;
    a = calloc(1, sizeof(*a));
    if (!a)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_actor_create: out of memory");
    a->rt = rt;
    a->ops = placement == ADAG_PLACEMENT_THREAD ? &adag_placement_thread : &adag_placement_process;
    snprintf(a->node, sizeof(a->node), "%s", host);
    a->refs = 1;
    a->live = 1;
    a->device_kind = has_device ? (int32_t)device_kind : -1;
    a->device_index = device_index;
    adag__list_init(&a->link);
    snprintf(a->class_name, sizeof(a->class_name), "%s", p->class_name);
    if ((st = list_new_actor(rt, a, p)) != ADAG_OK) {
        actor_free(a);
        return st;
    }
    st = a->ops->create(a, p, (adag_blob_t){init_data, init_size});
    if (st != ADAG_OK) {
        pthread_mutex_lock(&rt->lock);
        adag__list_remove(&a->link);
        pthread_mutex_unlock(&rt->lock);
        adag__monitor_poke(rt);
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

adag_status_t adag__placement_check_out(const char *fn, const adag_actor_placement_t *out)
{
    if (out->struct_size < sizeof(adag_actor_placement_t))
        return adag__error(ADAG_ERR_INVALID, "%s: struct_size %zu is below %zu (set it to "
                          "sizeof(adag_actor_placement_t))", fn, out->struct_size,
                          sizeof(adag_actor_placement_t));
    return ADAG_OK;
}

void adag__placement_report(const adag_place_t *p, adag_actor_placement_t *out)
{
    adag_actor_placement_t r;
    memset(&r, 0, sizeof(r));
    r.struct_size = sizeof(r);
    adag__cpulist_format(&p->cpus, r.cpus, sizeof(r.cpus));
    r.bound = p->bound;
    r.numa = p->numa;
    snprintf(r.gpu, sizeof(r.gpu), "%s", p->gpu_bus_id);
    snprintf(r.nic, sizeof(r.nic), "%s", p->nic);
    if (p->nic[0])
        snprintf(r.nic_distance, sizeof(r.nic_distance), "%s", adag__topo_dist_name(p->nic_dist));
    r.this_machine = p->this_system;
    memcpy(out, &r, sizeof(r)); /* this version: every field */
}

adag_status_t adag_actor_placement(adag_actor_h a, adag_actor_placement_t *out)
{
    if (!a || !out)
        return adag__error(ADAG_ERR_INVALID,
                           "adag_actor_placement: actor and out must not be NULL");
    adag_status_t st = adag__placement_check_out("adag_actor_placement", out);
    if (st == ADAG_OK)
        adag__placement_report(&a->place, out);
    return st;
}

int adag_actor_pid(adag_actor_h a)
{
    return a && a->ops->pid ? a->ops->pid(a) : 0;
}

adag_status_t adag_actor_destroy(adag_actor_h a)
{
    if (!a)
        return adag__error(ADAG_ERR_INVALID, "adag_actor_destroy: actor is NULL");
    pthread_mutex_lock(&a->rt->lock);
    if (a->user_destroyed) {
        pthread_mutex_unlock(&a->rt->lock);
        return adag__error(ADAG_ERR_INVALID, "adag_actor_destroy: actor %s was already destroyed",
                          a->name);
    }
    a->user_destroyed = 1;
    pthread_mutex_unlock(&a->rt->lock);
    adag__actor_drop(a);
    return ADAG_OK;
}

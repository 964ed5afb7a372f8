/*
 * Thread actors: the state lives in the driver and each DAG's loop is a
 * thread of the driver, sharing the driver's DAG context (one abort word,
 * one set of domains). Every step runs at once; nothing can die alone.
 * A device-bound one opens its device in the driver: init runs in
 * adag_actor_create's thread, bound to it; fini in the thread that stops
 * the actor, bound to it too (dag/exec/actor_device.h).
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/settings.h"
#include "dag/exec/actor_device.h"
#include "dag/exec/class.h"
#include "dag/proc/proc.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const adag_class_def_t *def;
    void *state;
    pthread_mutex_t call_lock; /* methods of one actor never run concurrently, across DAGs */
    adag_actor_device_t *device; /* NULL: a host actor */
    adag_actor_comms_t comms;  /* its communicators (dag/exec/actor_comm.h) */
    int leaked;                /* its device work outlived teardown: state and device are kept */
} thread_actor_t;

static thread_actor_t *thr_of(adag_actor_h a)
{
    return a->impl;
}

static adag_class_entry_t *find_class(adag_runtime_h rt, const char *name)
{
    for (adag_class_entry_t *e = rt->classes; e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

static adag_status_t thread_create(adag_actor_h a, const adag_actor_params_t *p, adag_blob_t init)
{
    adag_msg_place_t req;
    char who[ADAG_MAX_NAME + 8];
    snprintf(who, sizeof(who), "actor %s", a->name);
    adag__actor_place_request(p, a->rt->settings.placement != 0, &req);
    adag_status_t pst = adag__actor_place_decide(who, a->device_kind, a->device_index, &req,
                                                &a->place);
    if (pst != ADAG_OK)
        return pst;
    pthread_mutex_lock(&a->rt->lock);
    adag_class_entry_t *e = find_class(a->rt, a->class_name);
    pthread_mutex_unlock(&a->rt->lock);
    if (!e)
        return adag__error(ADAG_ERR_NOT_FOUND,
                          "adag_actor_create: class %s is not registered (adag_class_register) "
                          "for thread actor %s",
                          a->class_name, a->name);
    thread_actor_t *t = calloc(1, sizeof(*t));
    if (!t)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_actor_create: out of memory");
    pthread_mutex_init(&t->call_lock, NULL);
    adag__actor_comms_init(&t->comms, &a->rt->settings);
    a->impl = t;
    t->def = &e->def;
    a->nmethods = e->def.nmethods;
    a->methods = calloc(a->nmethods, sizeof(*a->methods));
    t->state = calloc(1, e->def.state_size ? e->def.state_size : 1);
    if (!a->methods || !t->state)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_actor_create: state of %zu bytes for %s",
                          e->def.state_size, a->name);
    memcpy(a->methods, e->methods, a->nmethods * sizeof(*a->methods));
    /* binds this thread, which runs init */
    if (a->device_kind >= 0) {
        adag_status_t st = adag__actor_device_open((adag_device_kind_t)a->device_kind,
                                                  a->device_index, &a->rt->settings,
                                                  &t->device);
        if (st != ADAG_OK) {
            adag__error_prefix("actor %s", a->name);
            return st;
        }
    }
    if (e->def.init) {
        adag_status_t st = adag__class_init(&e->def, t->state, init.data, init.len, who);
        if (st != ADAG_OK) {
            t->def = NULL; /* fini must not run on a failed init */
            return st;
        }
    }
    return ADAG_OK;
}

static void loop_fatal(void *ctx, adag_status_t st, const char *msg)
{
    adag_dag_run_t *run = ctx;
    run->ops->fail(run, st, msg);
}

static adag_status_t thread_step_begin(adag_actor_h a, adag_dag_run_t *run, unsigned ai,
                                       adag_step_t step, int *pending)
{
    adag_dag_actor_t *da = &run->actors[ai];
    thread_actor_t *t = thr_of(a);
    adag_program_t copy;
    adag_status_t st;
    *pending = 0;
    switch (step) {
    case ADAG_STEP_PREPARE:
        if ((st = adag__program_copy(&copy, &da->prog)) != ADAG_OK)
            return st;
        da->prepared = 1;
        adag__wbuf_free(&da->infos);
        adag_loop_actor_t la = {
            .state = t->state,
            .call_lock = &t->call_lock,
            .methods = a->methods,
            .nmethods = a->nmethods,
            .name = a->name,
            .device = t->device ? &t->device->chan : NULL,
            .comms = &t->comms,
            .cpus = a->place.bound && a->place.this_system ? &a->place.cpus : NULL,
            .has_numa = a->place.numa >= 0 && a->place.this_system,
            .numa = a->place.numa,
            .settings = &a->rt->settings,
        };
        st = adag__loop_prepare(&da->loop, &run->ctx, &copy, &la, &da->infos);
        da->loop.on_fatal = loop_fatal;
        da->loop.fatal_ctx = run;
        return st;
    case ADAG_STEP_CONNECT:
        return adag__loop_connect(&da->loop, (adag_blob_t){da->peers.data, da->peers.len});
    case ADAG_STEP_START:
        return adag__loop_start(&da->loop);
    case ADAG_STEP_STOP: {
        /* the DAG is aborted in this process: the loop ends at its next wait
         * (a method that never returns keeps it: teardown waits for it). A
         * communicator the driver let go is dropped first: aborted, nothing
         * of it can keep the loop's streams waiting */
        uint64_t drop = da->comm_drop;
        for (uint32_t i = 0; i < da->prog.ncomms; i++)
            if (drop >> i & 1)
                adag__actor_comm_drop(&t->comms, da->prog.comms[i].key);
        adag__loop_close(&da->loop);
        return ADAG_OK;
    }
    }
    return adag__error(ADAG_ERR_INTERNAL, "actor %s: unknown step %d", a->name, (int)step);
}

static int64_t teardown_deadline(adag_actor_h a)
{
    return adag__deadline_ms(a->rt->settings.teardown_timeout_ms);
}

/* fini, between the device's drain and its close (dag/exec/actor_device.h). */
static void thread_stop(adag_actor_h a)
{
    thread_actor_t *t = thr_of(a);
    if (!t)
        return;
    void (*fini)(void *) = t->def ? t->def->fini : NULL;
    /* every DAG context that held one is gone: this frees them */
    adag__actor_comms_destroy(&t->comms);
    if (adag__actor_device_stop(t->device, a->name, teardown_deadline(a), fini, t->state) !=
        ADAG_OK)
        t->leaked = 1; /* logged there */
    t->device = NULL;
}

static void thread_free(adag_actor_h a)
{
    thread_actor_t *t = thr_of(a);
    if (!t)
        return;
    /* a failed creation (init may have enqueued work) */
    if (t->device && adag__actor_device_close(t->device, a->name, teardown_deadline(a)) != ADAG_OK)
        t->leaked = 1;
    if (t->leaked)
        return; /* the state and the call lock stay: device work may still use the state */
    pthread_mutex_destroy(&t->call_lock);
    free(t->state);
    free(t);
    a->impl = NULL;
}

/* The loop is in this process: its figures or its ring, read at once. */
static adag_status_t thread_ask_begin(adag_actor_h a, adag_dag_run_t *run, unsigned ai,
                                      adag_ask_t what, int64_t deadline, int *pending,
                                      adag_answer_t *out)
{
    (void)a;
    (void)deadline;
    *pending = 0;
    adag_loop_t *loop = &run->actors[ai].loop;
    if (what == ADAG_ASK_FIGURES)
        return adag__loop_figures(loop, &out->figures);
    out->offset_ns = 0;
    return adag__loop_trace_copy(loop, &out->recs, &out->nrecs, &out->lost);
}

const adag_placement_ops_t adag_placement_thread = {
    .name = "thread",
    .create = thread_create,
    .step_begin = thread_step_begin,
    .stop = thread_stop,
    .ask_begin = thread_ask_begin,
    .free = thread_free,
};

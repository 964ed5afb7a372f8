#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "common/settings.h"
#include "dag/exec/class.h"
#include "dag/driver/dag.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The worker next to the library: <dir of libadag>/adag-worker, or
 * <dir>/adag/adag-worker (the installed layout). */
static char *default_worker_path(void)
{
    Dl_info info;
    char dir[PATH_MAX], path[PATH_MAX + 32];
    if (!dladdr((void *)adag_runtime_create_version, &info) || !info.dli_fname)
        return strdup("adag-worker");
    snprintf(dir, sizeof(dir), "%s", info.dli_fname);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    snprintf(path, sizeof(path), "%s/adag-worker", dir);
    if (access(path, X_OK) == 0)
        return strdup(path);
    snprintf(path, sizeof(path), "%s/adag/adag-worker", dir);
    if (access(path, X_OK) == 0)
        return strdup(path);
    snprintf(path, sizeof(path), "%s/adag-worker", dir);
    return strdup(path);
}

adag_status_t adag_runtime_create_version(unsigned major, unsigned minor,
                                          const adag_runtime_params_t *params,
                                          adag_runtime_h *out)
{
    adag_runtime_h rt;
    adag_status_t st;

    if (!out)
        return adag__error(ADAG_ERR_INVALID, "adag_runtime_create: runtime is NULL");
    *out = NULL;
    /* while the major is 0, every minor may change struct layouts */
    if (major != ADAG_VERSION_MAJOR || minor > ADAG_VERSION_MINOR ||
        (major == 0 && minor != ADAG_VERSION_MINOR))
        return adag__error(ADAG_ERR_INVALID,
                          "adag_runtime_create: the program was built for adag %u.%u, "
                          "this library is %u.%u",
                          major, minor, ADAG_VERSION_MAJOR, ADAG_VERSION_MINOR);
    if (params) {
        static const adag_param_field_t fields[] = {
            ADAG_PARAM_FIELD(adag_runtime_params_t, worker_path, ADAG_RUNTIME_PARAM_WORKER_PATH),
            ADAG_PARAM_FIELD(adag_runtime_params_t, config, ADAG_RUNTIME_PARAM_CONFIG),
        };
        st = adag__params_check("adag_runtime_create", "adag_runtime_params_t", params,
                               params->field_mask, fields, ADAG_PARAM_COUNT(fields));
        if (st != ADAG_OK)
            return st;
        if ((params->field_mask & ADAG_RUNTIME_PARAM_WORKER_PATH) &&
            (!params->worker_path || !*params->worker_path))
            return adag__error(ADAG_ERR_INVALID, "adag_runtime_create: worker_path is set "
                                                "(ADAG_RUNTIME_PARAM_WORKER_PATH) but empty");
        if ((params->field_mask & ADAG_RUNTIME_PARAM_CONFIG) && !params->config)
            return adag__error(ADAG_ERR_INVALID, "adag_runtime_create: config is NULL, but its "
                                                "bit ADAG_RUNTIME_PARAM_CONFIG is set");
    }
    rt = calloc(1, sizeof(*rt));
    if (!rt)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_runtime_create: out of memory");
    st = params && (params->field_mask & ADAG_RUNTIME_PARAM_CONFIG)
             ? adag__settings_copy(&rt->settings, &params->config->settings)
             : adag__settings_from_env(&rt->settings);
    if (st != ADAG_OK) {
        free(rt);
        adag__error_prefix("adag_runtime_create");
        return st;
    }
    pthread_mutex_init(&rt->lock, NULL);
    pthread_mutex_init(&rt->order_lock, NULL);
    pthread_mutex_init(&rt->live_lock, NULL);
    adag__copy_pool_init(&rt->copy_pool);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rt->cond, &ca);
    pthread_condattr_destroy(&ca);
    adag__list_init(&rt->actors);
    adag__list_init(&rt->graphs);
    adag__list_init(&rt->dags);
    rt->monitor_wake = -1;

    if (params && (params->field_mask & ADAG_RUNTIME_PARAM_WORKER_PATH))
        rt->worker_path = strdup(params->worker_path);
    else if (rt->settings.worker_path)
        rt->worker_path = strdup(rt->settings.worker_path);
    else
        rt->worker_path = default_worker_path();
    if (!rt->worker_path) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_runtime_create: out of memory");
        goto fail;
    }
    st = adag__monitor_start(rt);
    if (st != ADAG_OK)
        goto fail;
    /* ADAG_LIVE=1: the live view, for an operator; a runtime without it
     * still works (said once) */
    if (rt->settings.live && adag_runtime_live_open(rt, NULL) != ADAG_OK)
        ADAG_LOG_WARN("ADAG_LIVE=1, but %s", adag_last_error());
    *out = rt;
    return ADAG_OK;
fail:
    free(rt->worker_path);
    adag__settings_free(&rt->settings);
    pthread_mutex_destroy(&rt->live_lock);
    pthread_cond_destroy(&rt->cond);
    adag__copy_pool_fini(&rt->copy_pool);
    pthread_mutex_destroy(&rt->order_lock);
    pthread_mutex_destroy(&rt->lock);
    free(rt);
    return st;
}

static void class_entry_free(adag_class_entry_t *e)
{
    free(e->methods);
    free(e);
}

adag_status_t adag_runtime_destroy(adag_runtime_h rt)
{
    if (!rt)
        return adag__error(ADAG_ERR_INVALID, "adag_runtime_destroy: runtime is NULL");
    /* the live view first: it reads the DAGs */
    adag_runtime_live_close(rt);
    /* DAGs first (they hold actors), then graphs, then the actors left */
    for (;;) {
        pthread_mutex_lock(&rt->lock);
        adag_list_t *l = rt->dags.next;
        pthread_mutex_unlock(&rt->lock);
        if (l == &rt->dags)
            break;
        adag_dag_destroy(ADAG_CONTAINER(l, struct adag_dag, run.link));
    }
    for (;;) {
        pthread_mutex_lock(&rt->lock);
        adag_list_t *l = rt->graphs.next;
        pthread_mutex_unlock(&rt->lock);
        if (l == &rt->graphs)
            break;
        adag_graph_destroy(ADAG_CONTAINER(l, struct adag_graph, link));
    }
    for (;;) {
        /* with DAGs and graphs gone, only user handles hold actors now */
        pthread_mutex_lock(&rt->lock);
        adag_actor_h a = NULL;
        for (adag_list_t *l = rt->actors.next; l != &rt->actors && !a; l = l->next)
            if (!ADAG_CONTAINER(l, struct adag_actor, link)->user_destroyed &&
                !ADAG_CONTAINER(l, struct adag_actor, link)->creating)
                a = ADAG_CONTAINER(l, struct adag_actor, link);
        if (a)
            a->user_destroyed = 1;
        pthread_mutex_unlock(&rt->lock);
        if (!a)
            break;
        adag__actor_drop(a);
    }
    adag__monitor_stop(rt);
    while (rt->classes) {
        adag_class_entry_t *e = rt->classes;
        rt->classes = e->next;
        class_entry_free(e);
    }
    free(rt->worker_path);
    adag__settings_free(&rt->settings);
    pthread_cond_destroy(&rt->cond);
    adag__copy_pool_fini(&rt->copy_pool); /* no DAG is left: no copy runs */
    pthread_mutex_destroy(&rt->order_lock);
    pthread_mutex_destroy(&rt->live_lock);
    pthread_mutex_destroy(&rt->lock);
    free(rt);
    return ADAG_OK;
}

adag_status_t adag_class_register(adag_runtime_h rt, const adag_class_def_t *def)
{
    static const char *fn = "adag_class_register";
    adag_class_entry_t *e = NULL;
    adag_status_t st;

    if (!rt || !def)
        return adag__error(ADAG_ERR_INVALID, "%s: runtime and def must not be NULL", fn);
    if ((st = adag__class_validate(def, fn)) != ADAG_OK)
        return st;
    if (!(e = calloc(1, sizeof(*e)))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "%s: out of memory", fn);
        goto fail;
    }
    if ((st = adag__class_methods(def, fn, &e->methods)) != ADAG_OK)
        goto fail;
    e->def = *def;
    snprintf(e->name, sizeof(e->name), "%s", def->name);
    e->def.name = e->name;
    e->def.methods = NULL;
    pthread_mutex_lock(&rt->lock);
    for (adag_class_entry_t *o = rt->classes; o; o = o->next) {
        if (strcmp(o->name, e->name) == 0) {
            pthread_mutex_unlock(&rt->lock);
            st = adag__error(ADAG_ERR_INVALID, "%s: class %s is already registered", fn, def->name);
            goto fail;
        }
    }
    e->next = rt->classes;
    rt->classes = e;
    pthread_mutex_unlock(&rt->lock);
    return ADAG_OK;
fail:
    if (e)
        class_entry_free(e);
    return st;
}

/*
 * A runtime's live view (include/adag/stats.h: adag_runtime_live_open):
 * the socket of common/live.c, whose view is the figures of every DAG the
 * runtime holds now (adag_stats_print) and each one's executions a second
 * since the last view. The DAGs' figures are taken one DAG after another,
 * each bounded by ADAG_STATS_TIMEOUT_MS (dag/proc/observe.c): an actor that does
 * not answer costs the first DAG that asks it that long and the later
 * ones (and later views, until it answers) nothing.
 */
#include "common/clock.h"
#include "common/live.h"
#include "common/log.h"
#include "common/settings.h"
#include "dag/driver/dag.h"
#include "dag/observe/observe.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RATE_DAGS 64 /* DAGs whose last view is remembered (for their rate) */

struct adag_live_view {
    adag_runtime_h rt;
    adag_live_t *live;
    /* per DAG id: completed executions and when, at the last view
     * (listener thread only) */
    struct {
        unsigned id;
        uint64_t completed;
        int64_t at;
    } last[RATE_DAGS];
};

/* The DAGs held now, each pinned (adag__dag_api_enter) so that a destroy
 * waits for the view; *n of them. */
static adag_dag_h *pin_dags(adag_runtime_h rt, unsigned *n)
{
    adag_dag_h *dags = NULL;
    unsigned cap = 0;
    *n = 0;
    pthread_mutex_lock(&rt->lock);
    for (adag_list_t *l = rt->dags.next; l != &rt->dags; l = l->next)
        cap++;
    if (cap && (dags = calloc(cap, sizeof(*dags))))
        /* a DAG still in the list is not being destroyed (destroy takes
         * it out first, then waits for its users): entering cannot fail */
        for (adag_list_t *l = rt->dags.next; l != &rt->dags; l = l->next) {
            adag_dag_h dag = ADAG_CONTAINER(l, struct adag_dag, run.link);
            if (adag__dag_api_enter(dag, "the live view") == ADAG_OK)
                dags[(*n)++] = dag;
        }
    pthread_mutex_unlock(&rt->lock);
    return dags;
}

/* Executions a second of DAG `dag` since the last view (-1: first view). */
static double rate_of(struct adag_live_view *v, adag_dag_h dag, uint64_t completed, int64_t now)
{
    unsigned free_slot = RATE_DAGS, oldest = 0;
    for (unsigned i = 0; i < RATE_DAGS; i++) {
        if (v->last[i].at && v->last[i].id == dag->run.id) {
            double s = (double)(now - v->last[i].at) / 1e9;
            double r = s > 0 ? (double)(completed - v->last[i].completed) / s : 0;
            v->last[i].completed = completed;
            v->last[i].at = now;
            return r;
        }
        if (!v->last[i].at && free_slot == RATE_DAGS)
            free_slot = i;
        if (v->last[i].at < v->last[oldest].at)
            oldest = i;
    }
    unsigned k = free_slot < RATE_DAGS ? free_slot : oldest;
    v->last[k].id = dag->run.id;
    v->last[k].completed = completed;
    v->last[k].at = now;
    return -1;
}

/* adag_stats_print into the view's text (common/live.c's memory stream). */
static adag_status_t to_view(void *ctx, const void *buf, size_t n)
{
    return fwrite(buf, 1, n, ctx) == n ? ADAG_OK
                                       : adag__error(ADAG_ERR_NO_MEMORY, "the live view's text");
}

static int render(void *arg, FILE *out)
{
    struct adag_live_view *v = arg;
    unsigned n;
    adag_dag_h *dags = pin_dags(v->rt, &n);
    int64_t now = adag__now_ns();
    fprintf(out, "adag live view of driver pid %d: %u DAG%s\n", (int)getpid(), n,
            n == 1 ? "" : "s");
    for (unsigned i = 0; i < n; i++) {
        adag_stats_h s;
        fputc('\n', out);
        if (adag_dag_stats_take(dags[i], &s) != ADAG_OK) {
            fprintf(out, "DAG %s: no figures: %s\n", dags[i]->run.name, adag_last_error());
            continue;
        }
        adag_dag_stats_t c = *adag__stats_counts(s);
        double r = rate_of(v, dags[i], c.completed + c.failed, now);
        adag_stats_print(s, (adag_writer_t){to_view, out});
        if (r >= 0)
            fprintf(out, "executions/s since the last view: %.1f\n", r);
        adag_stats_free(s);
    }
    for (unsigned i = 0; i < n; i++)
        adag__dag_api_leave(dags[i]);
    free(dags);
    return 0;
}

adag_status_t adag_runtime_live_open(adag_runtime_h rt, const char *path)
{
    if (!rt)
        return adag__error(ADAG_ERR_INVALID, "adag_runtime_live_open: runtime is NULL");
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&rt->live_lock);
    if (rt->live) {
        st = adag__error(ADAG_ERR_BUSY, "adag_runtime_live_open: the live view is open already "
                                       "(%s)", adag__live_path(rt->live->live));
        goto out;
    }
    struct adag_live_view *v = calloc(1, sizeof(*v));
    if (!v) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_runtime_live_open: out of memory");
        goto out;
    }
    v->rt = rt;
    if ((st = adag__live_open(path, render, v, &v->live)) != ADAG_OK) {
        adag__error_prefix("adag_runtime_live_open");
        free(v);
        goto out;
    }
    rt->live = v;
    ADAG_LOG_INFO("live view open: `adag-info attach %d` (socket %s)", (int)getpid(),
                  adag__live_path(v->live));
out:
    pthread_mutex_unlock(&rt->live_lock);
    return st;
}

const char *adag_runtime_live_path(adag_runtime_h rt)
{
    if (!rt)
        return NULL;
    pthread_mutex_lock(&rt->live_lock);
    const char *p = rt->live ? adag__live_path(rt->live->live) : NULL;
    pthread_mutex_unlock(&rt->live_lock);
    return p;
}

adag_status_t adag_runtime_live_close(adag_runtime_h rt)
{
    if (!rt)
        return adag__error(ADAG_ERR_INVALID, "adag_runtime_live_close: runtime is NULL");
    pthread_mutex_lock(&rt->live_lock);
    struct adag_live_view *v = rt->live;
    rt->live = NULL;
    pthread_mutex_unlock(&rt->live_lock);
    if (v) {
        adag__live_close(v->live);
        free(v);
    }
    return ADAG_OK;
}

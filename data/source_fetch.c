/*
 * A source's http(s) shards (data/source.h): fetched into the cache of
 * data/cache.h by a few threads at once, in the order the first epoch
 * reads the shards, before the shards are opened.
 */
#include "data/source.h"

#include "data/order.h"
#include "data/settings.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    adag_data_source_t *src;
    const uint32_t *order; /* shard indices, in the order they are fetched */
    uint32_t n, next;
    pthread_mutex_t lock; /* guards next, st, why */
    adag_status_t st;
    char why[ADAG_ERROR_MAX];
} fetch_job_t;

/* Fetches shard sh's URL (a token dataset's .bin and .idx); its path
 * becomes the cache entry's. */
static adag_status_t fetch_shard(adag_data_source_t *src, adag_data_shard_t *sh)
{
    char *stem = NULL;
    adag_status_t st;
    if (src->p.format == ADAG_DATA_FORMAT_TOKENS) {
        char *idx = NULL;
        if ((st = adag__data_cache_get(src->cache, sh->path, ".bin", &stem)) != ADAG_OK ||
            (st = adag__data_cache_get(src->cache, sh->path, ".idx", &idx)) != ADAG_OK) {
            free(stem);
            return st;
        }
        free(idx); /* the same stem */
    } else if ((st = adag__data_cache_get(src->cache, sh->path, "", &stem)) != ADAG_OK) {
        return st;
    }
    free(sh->path);
    sh->path = stem;
    return ADAG_OK;
}

static void *fetch_main(void *arg)
{
    fetch_job_t *job = arg;
    for (;;) {
        pthread_mutex_lock(&job->lock);
        int stop = job->st != ADAG_OK || job->next == job->n;
        uint32_t k = stop ? 0 : job->order[job->next++];
        pthread_mutex_unlock(&job->lock);
        if (stop)
            return NULL;
        adag_data_shard_t *sh = &job->src->shards[k]; /* this thread's alone */
        if (!adag__data_is_url(sh->path))
            continue;
        adag_status_t st = fetch_shard(job->src, sh);
        if (st != ADAG_OK) {
            pthread_mutex_lock(&job->lock);
            if (job->st == ADAG_OK) {
                job->st = st;
                snprintf(job->why, sizeof(job->why), "%s", adag_last_error());
            }
            pthread_mutex_unlock(&job->lock);
        }
    }
}

/* The cache directory: the params', the setting's, or the user's cache. */
static adag_status_t cache_dir(const adag_data_params_t *p, const char *setting, char *out,
                               size_t len)
{
    const char *dir = (p->field_mask & ADAG_DATA_PARAM_CACHE) && p->cache_dir
                          ? p->cache_dir
                          : setting;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (dir && dir[0])
        n = snprintf(out, len, "%s", dir);
    else if (xdg && xdg[0] == '/')
        n = snprintf(out, len, "%s/adag/shards", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, len, "%s/.cache/adag/shards", home);
    else
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: http(s) shards need a cache directory: set "
                          "ADAG_DATA_CACHE_DIR, cache_dir (ADAG_DATA_PARAM_CACHE) or HOME");
    if (n < 0 || (size_t)n >= len)
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: cache directory name too long");
    return ADAG_OK;
}

adag_status_t adag__data_fetch_shards(adag_data_source_t *src)
{
    uint32_t nurls = 0;
    for (uint32_t i = 0; i < src->nshards; i++)
        nurls += adag__data_is_url(src->shards[i].path);
    if (!nurls)
        return ADAG_OK;
    /* the settings of the runtime of the DAG it feeds, else the
     * environment's now */
    adag_config_h cfg;
    adag_status_t st = adag__data_config(src->p.dag, &cfg);
    if (st != ADAG_OK)
        return st;
    char setting[4096], dir[4096];
    int64_t cache_bytes = 0, retries = 0, timeout_ms = 0, fetches = 0;
    st = adag__data_config_text(cfg, "ADAG_DATA_CACHE_DIR", setting, sizeof(setting));
    if (st == ADAG_ERR_TOO_LARGE)
        st = adag__error(ADAG_ERR_INVALID, "adag_data_open: cache directory name too long");
    if (st == ADAG_OK &&
        (st = adag__data_config_int(cfg, "ADAG_DATA_CACHE_BYTES", &cache_bytes)) == ADAG_OK &&
        (st = adag__data_config_int(cfg, "ADAG_DATA_HTTP_RETRIES", &retries)) == ADAG_OK &&
        (st = adag__data_config_int(cfg, "ADAG_DATA_HTTP_TIMEOUT_MS", &timeout_ms)) == ADAG_OK &&
        (st = adag__data_config_int(cfg, "ADAG_DATA_FETCHES", &fetches)) == ADAG_OK)
        st = cache_dir(&src->p, setting, dir, sizeof(dir));
    adag_config_release(cfg);
    if (st != ADAG_OK)
        return st;
    uint64_t cap = (src->p.field_mask & ADAG_DATA_PARAM_CACHE) && src->p.cache_bytes
                       ? src->p.cache_bytes
                       : (uint64_t)cache_bytes;
    adag_data_fetch_opts_t opts = {
        .retries = (int)retries,
        .timeout_ms = timeout_ms,
    };
    if ((st = adag__data_cache_open(dir, cap, &opts, &src->cache)) != ADAG_OK)
        return st;

    /* the first epoch's shard order (the opened shards' permutation is over
     * those that open well; with none bad it is this one) */
    fetch_job_t job = {.src = src, .n = src->nshards};
    uint32_t *order = malloc(src->nshards * sizeof(*order));
    unsigned nthreads = (uint64_t)fetches < nurls ? (unsigned)fetches : nurls;
    pthread_t *threads = calloc(nthreads, sizeof(*threads));
    if (!order || !threads) {
        free(order);
        free(threads);
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_data_open: out of memory");
    }
    if (src->p.shuffle_shards)
        adag__order_shuffle(order, src->nshards,
                            adag__order_key(src->p.seed, src->p.start_epoch, 0, 0));
    else
        for (uint32_t k = 0; k < src->nshards; k++)
            order[k] = k;
    job.order = order;
    pthread_mutex_init(&job.lock, NULL);
    unsigned started = 0;
    for (; started < nthreads; started++) {
        int rc = pthread_create(&threads[started], NULL, fetch_main, &job);
        if (rc != 0) {
            if (started == 0) {
                st = adag__error_errno(rc, "adag_data_open: starting a fetch thread");
                break;
            }
            break; /* fewer threads do */
        }
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    if (st == ADAG_OK && job.st != ADAG_OK)
        st = adag__error(job.st, "adag_data_open: %s", job.why);
    pthread_mutex_destroy(&job.lock);
    free(order);
    free(threads);
    return st;
}

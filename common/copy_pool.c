/*
 * The split copy (common/copy_pool.h).
 *
 * Ordering: a chunk is handed out and counted finished under p->lock. A
 * helper copies its chunk with the lock released, then takes the lock to
 * count it; the caller returns only after it saw, under the same lock,
 * every chunk counted. The helper's unlock after its memcpy and the
 * caller's lock that reads `finished` are a release/acquire pair (mutexes
 * are acq_rel), so every chunk's bytes happen-before whatever the caller
 * does next: in execute, the ring publish (itself a release that the
 * readers acquire), so the readers see the whole input. A helper reads the
 * job's fields only under the lock, for a chunk that is not yet counted:
 * the caller cannot have returned, so src and dst are still the caller's.
 */
#include "common/copy_pool.h"

#include "common/cpuset.h"
#include "common/log.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>

#define CHUNK_MIN ((size_t)1 << 20)
#define CHUNK_ALIGN ((size_t)4096)

void adag__copy_pool_init(adag_copy_pool_t *p)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
}

/* Takes the next chunk of the job, if any (under p->lock): 1 and its
 * bounds, or 0. */
static int take_chunk(adag_copy_pool_t *p, char **dst, const char **src, size_t *n)
{
    if (!p->busy || p->next >= p->nchunks)
        return 0;
    size_t off = (size_t)p->next++ * p->chunk;
    *dst = p->dst + off;
    *src = p->src + off;
    *n = p->bytes - off < p->chunk ? p->bytes - off : p->chunk;
    return 1;
}

/* Counts a chunk finished (under p->lock); the last one wakes the caller. */
static void chunk_done(adag_copy_pool_t *p)
{
    if (++p->finished == p->nchunks)
        pthread_cond_signal(&p->done);
}

static void *helper_main(void *arg)
{
    adag_copy_pool_t *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        char *dst;
        const char *src;
        size_t n;
        if (!take_chunk(p, &dst, &src, &n)) {
            pthread_cond_wait(&p->work, &p->lock);
            continue;
        }
        pthread_mutex_unlock(&p->lock);
        memcpy(dst, src, n);
        pthread_mutex_lock(&p->lock); /* acquire/release with the caller: see above */
        chunk_done(p);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Starts the helpers (under p->lock, state 0): min(CPUs this thread may
 * run on, ADAG_COPY_THREADS_MAX) - 1 of them, signals blocked (the
 * process's handlers run on its own threads). A helper that cannot start
 * is said once; the pool runs with those that did. */
static void start_helpers(adag_copy_pool_t *p)
{
    cpu_set_t cpus;
    adag__cpus_allowed(&cpus);
    unsigned want = (unsigned)CPU_COUNT(&cpus);
    want = (want > ADAG_COPY_THREADS_MAX ? ADAG_COPY_THREADS_MAX : want) - 1;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = 0;
    while (p->nhelpers < want &&
           (err = pthread_create(&p->helpers[p->nhelpers], NULL, helper_main, p)) == 0)
        p->nhelpers++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        ADAG_LOG_WARN("copy pool: %u of %u helper threads started (pthread_create: %s); large "
                      "inputs are copied on %u thread%s",
                      p->nhelpers, want, strerror(err), p->nhelpers + 1,
                      p->nhelpers ? "s" : "");
    p->state = p->nhelpers ? 1 : -1;
}

void adag__copy_pool_memcpy(adag_copy_pool_t *p, void *dst, const void *src, size_t n)
{
    if (n < ADAG_COPY_SPLIT_MIN) {
        memcpy(dst, src, n);
        return;
    }
    pthread_mutex_lock(&p->lock);
    if (p->state == 0)
        start_helpers(p);
    if (p->state < 0 || p->busy) { /* no helper, or another copy is split now */
        pthread_mutex_unlock(&p->lock);
        memcpy(dst, src, n);
        return;
    }
    /* chunks of at least CHUNK_MIN, two per thread, so that a helper slow
     * to wake leaves its share to the others */
    size_t threads = p->nhelpers + 1, chunk = (n + 2 * threads - 1) / (2 * threads);
    chunk = chunk < CHUNK_MIN ? CHUNK_MIN : (chunk + CHUNK_ALIGN - 1) / CHUNK_ALIGN * CHUNK_ALIGN;
    p->busy = 1;
    p->dst = dst;
    p->src = src;
    p->bytes = n;
    p->chunk = chunk;
    p->nchunks = (unsigned)((n + chunk - 1) / chunk);
    p->next = p->finished = 0;
    pthread_cond_broadcast(&p->work);
    char *d;
    const char *s;
    size_t len;
    while (take_chunk(p, &d, &s, &len)) {
        pthread_mutex_unlock(&p->lock);
        memcpy(d, s, len);
        pthread_mutex_lock(&p->lock);
        chunk_done(p);
    }
    /* the join: every chunk counted under the lock (acquire of each
     * helper's release), so its bytes happen-before our return */
    while (p->finished < p->nchunks)
        pthread_cond_wait(&p->done, &p->lock);
    p->busy = 0;
    p->dst = NULL;
    p->src = NULL;
    p->copies++;
    pthread_mutex_unlock(&p->lock);
}

void adag__copy_pool_figures(adag_copy_pool_t *p, unsigned *nhelpers, unsigned long long *copies)
{
    pthread_mutex_lock(&p->lock);
    *nhelpers = p->nhelpers;
    *copies = p->copies;
    pthread_mutex_unlock(&p->lock);
}

void adag__copy_pool_fini(adag_copy_pool_t *p)
{
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->nhelpers; i++)
        pthread_join(p->helpers[i], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
}

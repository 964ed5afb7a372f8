/*
 * A copy split over threads: the driver's copy of a large input into its
 * ring slot (dag/driver/reserve.c) runs at the host's memory bandwidth
 * rather than one core's. A pool of helper threads, owned by its runtime,
 * started at the first large copy and stopped by adag__copy_pool_fini;
 * a copy below ADAG_COPY_SPLIT_MIN bytes, or with no helper, is one
 * memcpy on the caller's thread.
 *
 * One copy at a time is split: a caller that finds the pool busy (another
 * DAG's execute) copies alone, on its own thread, so nobody waits for a
 * copy that is not theirs. The caller takes chunks itself too and returns
 * once every chunk is written; what it does next (publishing the slot)
 * sees every chunk's bytes (see copy_pool.c for the ordering).
 */
#ifndef ADAG_COMMON_COPY_POOL_H
#define ADAG_COMMON_COPY_POOL_H

#include <pthread.h>
#include <stddef.h>

/* Copies from this size on are split over the pool's threads. */
#define ADAG_COPY_SPLIT_MIN ((size_t)4 << 20)
/* The most threads one copy runs on (the caller included). */
#define ADAG_COPY_THREADS_MAX 8u

typedef struct adag_copy_pool adag_copy_pool_t;

/* Zero-initialized storage is a pool not started yet (its lock must be
 * initialized with adag__copy_pool_init before use). */
struct adag_copy_pool {
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    int state;            /* 0 not started, 1 running, -1 runs on the caller alone */
    int stop;
    unsigned nhelpers;    /* helper threads running */
    pthread_t helpers[ADAG_COPY_THREADS_MAX - 1];
    /* the copy being split; all under lock */
    int busy;             /* a caller owns the job */
    char *dst;
    const char *src;
    size_t bytes, chunk;
    unsigned nchunks, next, finished;
    unsigned long long copies; /* split copies done (for the tests) */
};

void adag__copy_pool_init(adag_copy_pool_t *p);
/* Stops and joins the helpers (no copy may be running). */
void adag__copy_pool_fini(adag_copy_pool_t *p);

/* memcpy(dst, src, n), split over the pool's threads when n >=
 * ADAG_COPY_SPLIT_MIN; starts the pool at the first such copy (sized
 * min(CPUs this thread may run on, ADAG_COPY_THREADS_MAX); a helper that
 * cannot start is logged once and the copy runs on fewer threads). */
void adag__copy_pool_memcpy(adag_copy_pool_t *p, void *dst, const void *src, size_t n);

/* Helper threads running (0 before the first large copy or on one CPU)
 * and split copies done so far. */
void adag__copy_pool_figures(adag_copy_pool_t *p, unsigned *nhelpers,
                             unsigned long long *copies);

#endif

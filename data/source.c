/*
 * The data source (include/adag/data.h): shards opened by their format
 * (data/shard.h), the order of data/order.h, and a pool of threads that
 * fill batches in a ring of slots while the consumer takes them in order.
 *
 * Batches are numbered per rank from the source's start cursor (seq 0 is
 * batch start_batch of epoch start_epoch). Seq s lives in slot s % nslots
 * (nslots = prefetch + threads). A thread takes the next seq only once its
 * slot is free and a buffer is free or the budget allows one more: so the
 * oldest seq not yet delivered always has its buffer and a thread filling
 * it, and the consumer, which takes seqs in order, never waits on a batch
 * that waits for memory held by later ones. A buffer goes back to the free
 * list when its batch is released; every buffer ever allocated is counted
 * (bytes_held), and that count never passes the budget.
 *
 * Every field below `lock` is guarded by it. A thread fills its batch
 * without the lock; the slot is its own (FILLING) until it marks it READY.
 *
 * This file holds the threads' ring loop, open/close and the consumer; a
 * thread of a source that feeds a DAG runs data/source_feed.c's loop
 * instead. What both loops share (filling a batch, failing the source,
 * the wait and stats counts) is data/source_fill.c, below both: calls go
 * source.c -> source_feed.c -> source_fill.c, and source.c ->
 * source_fill.c, never back.
 */
#include <adag/data.h>

#include "common/clock.h"
#include "common/error.h"
#include "data/order.h"
#include "data/source.h"
#include "data/source_fill.h"

#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* ---- the threads ---- */

/* Under the lock: whether a thread may take next_assign now (its slot is
 * free, and a buffer is free or the budget allows one more). */
static int can_take(const adag_data_source_t *src)
{
    const slot_t *s = &src->slots[src->next_assign % src->nslots];
    return s->state == SLOT_FREE &&
           (src->nfree || src->bytes_held + src->batch_bytes <= src->p.budget);
}

static void *thread_main(void *arg)
{
    adag_data_source_t *src = arg;
    filler_t f = {0};
    f.view.order = calloc(src->nshards, sizeof(*f.view.order));
    f.view.prefix = calloc((size_t)src->nshards + 1, sizeof(*f.view.prefix));
    /* the scratch is counted in bytes_held since open */
    f.scratch = src->p.scratch_size ? malloc(src->p.scratch_size) : NULL;
    pthread_mutex_lock(&src->lock);
    if (!f.view.order || !f.view.prefix || (src->p.scratch_size && !f.scratch))
        adag__data_fail_locked(src, ADAG_ERR_NO_MEMORY,
                              "data source: out of memory (a thread's shard order and scratch)",
                              ADAG_DATA_NO_SEQ);
    if (src->p.dag) {
        adag__data_feed_loop(src, &f);
        goto out;
    }
    for (;;) {
        int64_t t0 = adag__data_wait_begin(src);
        while (!src->stopping && src->failed == ADAG_OK && !can_take(src))
            pthread_cond_wait(&src->work_cv, &src->lock);
        adag__data_wait_end(src, t0);
        if (src->stopping || src->failed != ADAG_OK)
            break;
        uint64_t seq = src->next_assign++;
        slot_t *slot = &src->slots[seq % src->nslots];
        slot->state = SLOT_FILLING;
        slot->seq = seq;
        slot->buf = src->nfree ? src->free_bufs[--src->nfree] : NULL;
        int fresh = !slot->buf;
        if (fresh) {
            src->bytes_held += src->batch_bytes; /* reserved before it exists */
            if (src->bytes_held > src->bytes_peak)
                src->bytes_peak = src->bytes_held;
        }
        pthread_mutex_unlock(&src->lock);

        adag_status_t st = ADAG_OK;
        if (fresh && !(slot->buf = malloc(src->batch_bytes)))
            st = adag__error(ADAG_ERR_NO_MEMORY, "data source: a batch of %zu bytes",
                            src->batch_bytes);
        if (st == ADAG_OK)
            st = adag__data_fill(src, &f, seq, slot->buf);

        pthread_mutex_lock(&src->lock);
        if (fresh && !slot->buf)
            src->bytes_held -= src->batch_bytes;
        adag__data_counted(src, &f);
        if (st != ADAG_OK) {
            adag__data_fail_locked(src, st, adag_last_error(), seq);
            break;
        }
        src->samples += src->p.batch_size;
        slot->state = SLOT_READY;
        atomic_fetch_add_explicit(&src->readies, 1, memory_order_release);
        pthread_cond_broadcast(&src->ready_cv);
    }
out:
    pthread_mutex_unlock(&src->lock);
    free(f.view.order);
    free(f.view.prefix);
    free(f.scratch);
    return NULL;
}

static void source_free(adag_data_source_t *src)
{
    for (uint32_t i = 0; i < src->nshards; i++) {
        src->fmt->close(&src->shards[i]);
        free(src->shards[i].path);
    }
    free(src->shards);
    adag__data_cache_close(src->cache); /* after the shards' mappings */
    for (unsigned i = 0; src->slots && i < src->nslots && !src->p.dag; i++)
        free(src->slots[i].buf);
    for (unsigned i = 0; i < src->nfree; i++)
        free(src->free_bufs[i]);
    free(src->free_bufs);
    free(src->slots);
    free(src->threads);
    pthread_mutex_destroy(&src->lock);
    pthread_cond_destroy(&src->work_cv);
    pthread_cond_destroy(&src->ready_cv);
    free(src);
}

static void stop_threads(adag_data_source_t *src)
{
    pthread_mutex_lock(&src->lock);
    src->stopping = 1;
    pthread_cond_broadcast(&src->work_cv);
    pthread_mutex_unlock(&src->lock);
    for (unsigned i = 0; i < src->started; i++)
        pthread_join(src->threads[i], NULL);
    src->started = 0;
}

adag_status_t adag_data_open(const adag_data_params_t *params, adag_data_source_h *out)
{
    adag_status_t st;
    if (!params || !out)
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: params or out is NULL");
    *out = NULL;
    if ((st = adag__data_check_params(params)) != ADAG_OK)
        return st;
    adag_data_source_t *src = calloc(1, sizeof(*src));
    if (!src)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_data_open: out of memory");
    src->p = *params;
    src->p.shards = NULL;
    src->opened_ns = adag__now_ns();
    for (unsigned k = 0; k < src->p.nsteps && (params->field_mask & ADAG_DATA_PARAM_STEPS); k++) {
        src->steps[k] = params->steps[k];
        if (params->steps[k].name)
            snprintf(src->step_names[k], sizeof(src->step_names[k]), "%s",
                     params->steps[k].name);
        else
            snprintf(src->step_names[k], sizeof(src->step_names[k]), "step %u", k + 1);
        src->steps[k].name = src->step_names[k];
    }
    adag__data_defaults(&src->p);
    src->fmt = adag__data_format(params->format);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* adag__timespec_at */
    pthread_mutex_init(&src->lock, NULL);
    pthread_cond_init(&src->work_cv, &ca);
    pthread_cond_init(&src->ready_cv, &ca);
    pthread_condattr_destroy(&ca);
    if ((st = adag__data_expand_shards(src, params)) != ADAG_OK ||
        (st = adag__data_fetch_shards(src)) != ADAG_OK ||
        (st = adag__data_open_shards(src)) != ADAG_OK ||
        (st = adag__data_count_batches(src)) != ADAG_OK)
        goto fail;
    src->p.fields = NULL; /* the formats copied what they need at open */
    src->sample_size = src->p.sample_size;
    if (src->sample_size == 0 || src->sample_size > SIZE_MAX / src->p.batch_size) {
        st = adag__error(ADAG_ERR_INVALID, "adag_data_open: samples of %zu bytes in batches of %u",
                        src->sample_size, src->p.batch_size);
        goto fail;
    }
    src->batch_bytes = src->sample_size * src->p.batch_size;
    src->nthreads = src->p.threads;
    /* the ring: what the consumer may hold, one batch per thread, and for
     * small batches room to fill ahead up to RING_BYTES */
    src->nslots = src->p.prefetch + src->nthreads;
    if (src->batch_bytes && RING_BYTES / src->batch_bytes > src->nslots)
        src->nslots = RING_BYTES / src->batch_bytes > RING_MAX ? RING_MAX
                                                                : (unsigned)(RING_BYTES /
                                                                             src->batch_bytes);
    src->scratch_bytes = src->p.scratch_size * src->nthreads;
    if (src->p.dag && (st = adag__data_check_dag(src)) != ADAG_OK)
        goto fail;
    if (src->p.dag)
        src->p.budget = src->scratch_bytes; /* the batches live in the DAG's slots */
    else if (!(params->field_mask & ADAG_DATA_PARAM_BUDGET))
        src->p.budget = src->batch_bytes * src->nslots + src->scratch_bytes;
    if (!src->p.dag && src->p.budget < src->batch_bytes + src->scratch_bytes) {
        st = adag__error(ADAG_ERR_INVALID,
                        "adag_data_open: a budget of %zu bytes does not hold one batch of %zu "
                        "and the threads' scratch (%u x %zu)",
                        src->p.budget, src->batch_bytes, src->nthreads, src->p.scratch_size);
        goto fail;
    }
    src->bytes_held = src->bytes_peak = src->scratch_bytes;
    if ((st = adag__data_feed_open(src)) != ADAG_OK)
        goto fail;
    src->slots = calloc(src->nslots, sizeof(*src->slots));
    src->free_bufs = calloc(src->nslots, sizeof(*src->free_bufs));
    src->threads = calloc(src->nthreads, sizeof(*src->threads));
    if (!src->slots || !src->free_bufs || !src->threads) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_data_open: out of memory");
        goto fail;
    }
    if ((st = adag__data_choose_cpus(src, params)) != ADAG_OK)
        goto fail;
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0 && src->bound_cpus)
        rc = pthread_attr_setaffinity_np(&attr, sizeof(src->cpus), &src->cpus);
    if (rc != 0) {
        st = adag__error_errno(rc, "adag_data_open: thread attributes");
        goto fail;
    }
    for (unsigned i = 0; i < src->nthreads; i++) {
        rc = pthread_create(&src->threads[i], &attr, thread_main, src);
        if (rc != 0) {
            st = adag__error_errno(rc, "adag_data_open: starting thread %u", i);
            break;
        }
        src->started++;
    }
    pthread_attr_destroy(&attr);
    if (st != ADAG_OK)
        goto fail;
    *out = src;
    return ADAG_OK;
fail:
    stop_threads(src);
    source_free(src);
    return st;
}

/* ---- the consumer ---- */

/* Under the lock: whether the consumer has reached the failure's batch. */
static int failed_here(const adag_data_source_t *src)
{
    return src->failed != ADAG_OK && src->next_deliver >= src->failed_seq;
}

static adag_status_t failed_error(const adag_data_source_t *src)
{
    return adag__error(src->failed, "%s", src->why);
}

/* How long the consumer watches for its batch before it sleeps. */
#define CONSUMER_SPIN_NS 50000LL

/* Under the lock, after a slot came free: wakes the threads once half the
 * ring is free (or less than half is filled ahead), not for every batch:
 * with small batches a wake-up per batch costs more than filling it. The
 * consumer wakes them too before it waits (wait_next), so they never
 * sleep while it needs a batch. */
static void wake_fillers(adag_data_source_t *src)
{
    if (src->nwaiting && src->next_assign - src->next_deliver <= src->nslots / 2)
        pthread_cond_broadcast(&src->work_cv);
}

/* Under the lock: waits for the batch of next_deliver to be ready, takes
 * it (counted) and describes it in *batch (data NULL). */
static adag_status_t wait_next(adag_data_source_t *src, const char *fn, int timeout_ms,
                               slot_t **out, adag_data_batch_t *batch)
{
    adag_status_t st = ADAG_OK;
    int64_t t0 = adag__now_ns();
    int64_t deadline = timeout_ms < 0 ? ADAG_FOREVER : adag__deadline_ms(timeout_ms);
    int spun = 0;
    slot_t *slot;
    /* the batches before a failure's are delivered first (their threads
     * finish them: every one of them was taken before the failure) */
    while (slot = &src->slots[src->next_deliver % src->nslots],
           !failed_here(src) && !(slot->state == SLOT_READY && slot->seq == src->next_deliver)) {
        if (deadline != ADAG_FOREVER && adag__now_ns() >= deadline) {
            st = adag__error(ADAG_ERR_TIMEOUT, "%s: batch %llu not ready within %d ms", fn,
                            (unsigned long long)src->next_deliver, timeout_ms);
            break;
        }
        if (src->nwaiting)
            pthread_cond_broadcast(&src->work_cv); /* see wake_fillers */
        if (!spun) {
            /* a batch is usually microseconds away: watch for it a while,
             * yielding the CPU, before sleeping (a futex wake-up per batch
             * costs more than a small batch) */
            spun = 1;
            uint64_t seen = atomic_load_explicit(&src->readies, memory_order_relaxed);
            int64_t until = adag__now_ns() + CONSUMER_SPIN_NS;
            pthread_mutex_unlock(&src->lock);
            while (atomic_load_explicit(&src->readies, memory_order_acquire) == seen &&
                   adag__now_ns() < until)
                sched_yield();
            pthread_mutex_lock(&src->lock);
            continue;
        }
        if (deadline == ADAG_FOREVER) {
            pthread_cond_wait(&src->ready_cv, &src->lock);
        } else {
            struct timespec ts = adag__timespec_at(deadline);
            pthread_cond_timedwait(&src->ready_cv, &src->lock, &ts);
        }
    }
    src->starved_ns += adag__now_ns() - t0;
    if (st != ADAG_OK)
        return st;
    if (failed_here(src))
        return failed_error(src);
    uint64_t epoch, b, g, seq = src->next_deliver++;
    adag__data_seq_place(src, seq, &epoch, &b, &g);
    src->batches++;
    *batch = (adag_data_batch_t){
        .data = NULL,
        .size = src->batch_bytes,
        .nsamples = src->p.batch_size,
        .epoch = epoch,
        .batch = b,
        .epoch_batch = g,
        .next_epoch = b + 1 == src->batches_rank ? epoch + 1 : epoch,
        .next_batch = b + 1 == src->batches_rank ? 0 : b + 1,
    };
    *out = slot;
    return ADAG_OK;
}

adag_status_t adag_data_next(adag_data_source_h src, adag_data_batch_t *batch, int timeout_ms)
{
    if (!src || !batch)
        return adag__error(ADAG_ERR_INVALID, "adag_data_next: source or batch is NULL");
    if (timeout_ms < -1)
        return adag__error(ADAG_ERR_INVALID, "adag_data_next: timeout_ms %d", timeout_ms);
    adag_status_t st = ADAG_OK;
    if (src->p.dag)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_next: this source feeds DAG %s: use adag_data_next_exec",
                          adag_dag_name(src->p.dag));
    pthread_mutex_lock(&src->lock);
    if (src->held >= src->p.prefetch) {
        st = adag__error(ADAG_ERR_INVALID,
                        "adag_data_next: %u batches held already (prefetch %u): release one",
                        src->held, src->p.prefetch);
        goto out;
    }
    slot_t *slot;
    if ((st = wait_next(src, "adag_data_next", timeout_ms, &slot, batch)) != ADAG_OK)
        goto out;
    slot->state = SLOT_HELD;
    src->held++;
    batch->data = slot->buf;
out:
    pthread_mutex_unlock(&src->lock);
    return st;
}

adag_status_t adag_data_next_exec(adag_data_source_h src, adag_ref_t *ref,
                                  adag_data_batch_t *batch, int timeout_ms)
{
    if (!src || !ref || !batch)
        return adag__error(ADAG_ERR_INVALID, "adag_data_next_exec: source, ref or batch is NULL");
    if (!src->p.dag)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_next_exec: this source feeds no DAG (ADAG_DATA_PARAM_DAG): "
                          "use adag_data_next");
    if (timeout_ms < -1)
        return adag__error(ADAG_ERR_INVALID, "adag_data_next_exec: timeout_ms %d", timeout_ms);
    pthread_mutex_lock(&src->lock);
    slot_t *slot;
    adag_status_t st = wait_next(src, "adag_data_next_exec", timeout_ms, &slot, batch);
    if (st == ADAG_OK) {
        *ref = slot->ref;
        slot->state = SLOT_FREE; /* the execution is the caller's now */
        slot->buf = NULL;
        pthread_cond_broadcast(&src->work_cv);
    }
    pthread_mutex_unlock(&src->lock);
    return st;
}

adag_status_t adag_data_release(adag_data_source_h src, adag_data_batch_t *batch)
{
    if (!src || !batch)
        return adag__error(ADAG_ERR_INVALID, "adag_data_release: source or batch is NULL");
    if (src->p.dag)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_release: batch %llu of epoch %llu came from "
                          "adag_data_next_exec: it is in an execution of DAG %s, released "
                          "with adag_dag_release(dag, ref)",
                          (unsigned long long)batch->batch, (unsigned long long)batch->epoch,
                          adag_dag_name(src->p.dag));
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&src->lock);
    slot_t *slot = NULL;
    for (unsigned i = 0; i < src->nslots && !slot; i++)
        if (src->slots[i].state == SLOT_HELD && src->slots[i].buf == batch->data)
            slot = &src->slots[i];
    if (!slot) {
        st = adag__error(ADAG_ERR_INVALID,
                        "adag_data_release: batch %llu of epoch %llu is not held (released "
                        "twice, or not from this source)",
                        (unsigned long long)batch->batch, (unsigned long long)batch->epoch);
    } else {
        slot->state = SLOT_FREE;
        src->free_bufs[src->nfree++] = slot->buf;
        slot->buf = NULL;
        src->held--;
        batch->data = NULL;
        wake_fillers(src);
    }
    pthread_mutex_unlock(&src->lock);
    return st;
}

adag_status_t adag_data_cpus(adag_data_source_h src, char *buf, size_t len)
{
    if (!src || !buf || len == 0)
        return adag__error(ADAG_ERR_INVALID, "adag_data_cpus: source or buffer is NULL");
    buf[0] = '\0';
    if (src->bound_cpus)
        adag__cpulist_format(&src->cpus, buf, len);
    return ADAG_OK;
}

adag_status_t adag_data_size(adag_data_source_h src, uint64_t *batches_per_epoch,
                             uint64_t *samples_per_epoch)
{
    if (!src)
        return adag__error(ADAG_ERR_INVALID, "adag_data_size: source is NULL");
    if (batches_per_epoch)
        *batches_per_epoch = src->batches_rank;
    if (samples_per_epoch)
        *samples_per_epoch = src->nsamples;
    return ADAG_OK;
}

adag_status_t adag_data_stats(adag_data_source_h src, adag_data_stats_t *stats)
{
    if (!src || !stats)
        return adag__error(ADAG_ERR_INVALID, "adag_data_stats: source or stats is NULL");
    adag_data_cache_stats_t cs = {0};
    if (src->cache)
        adag__data_cache_stats(src->cache, &cs);
    pthread_mutex_lock(&src->lock);
    *stats = (adag_data_stats_t){
        .elapsed_s = (double)(adag__now_ns() - src->opened_ns) / 1e9,
        .nsteps = src->p.nsteps,
        .cache_hits = cs.hits,
        .cache_misses = cs.misses,
        .bytes_fetched = cs.bytes_fetched,
        .batches = src->batches,
        .samples = src->samples,
        .bytes_read = src->bytes_read,
        .bad_skipped = src->skipped + src->bad_samples,
        .budget = src->p.budget,
        .bytes_held = src->bytes_held,
        .bytes_peak = src->bytes_peak,
        .starved_s = (double)src->starved_ns / 1e9,
        .blocked_s = (double)(src->blocked_ns + (int64_t)src->nwaiting * adag__now_ns() -
                              src->wait_start_sum) / 1e9,
    };
    for (unsigned k = 0; k <= src->p.nsteps; k++)
        stats->step_s[k] = (double)src->step_ns[k] / 1e9;
    pthread_mutex_unlock(&src->lock);
    return ADAG_OK;
}

adag_status_t adag_data_close(adag_data_source_h src)
{
    if (!src)
        return ADAG_OK;
    adag__data_progress_end(src);
    stop_threads(src);
    /* executions the threads started that adag_data_next_exec never handed
     * out: only the source knows their refs, so it releases them (their
     * results dropped), and the DAG's window is free for what comes next */
    for (unsigned k = 0; src->p.dag && src->slots && k < src->nslots; k++)
        if (src->slots[k].state == SLOT_READY)
            adag_dag_release(src->p.dag, src->slots[k].ref);
    source_free(src);
    return ADAG_OK;
}

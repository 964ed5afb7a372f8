/*
 * A data source feeding a compiled DAG (ADAG_DATA_PARAM_DAG): its threads
 * reserve the DAG's executions in batch order, fill each batch and commit
 * it (data/source.h).
 *
 * Host input: the batch is written straight into the input slot.
 *
 * Input on the driver's device (a device first stage): the batch is written
 * into a pinned staging buffer of the slot's (host_alloc: the device copies
 * from it asynchronously, as DMA does from pinned memory), its copy to the
 * device slot is enqueued on the DAG's compute stream (after the waits the
 * reservation enqueued there, before the `ready` record its publish adds),
 * an event is recorded after it, and the execution is committed without
 * waiting for the copy. A staging buffer is filled again only after its
 * event: the thread that takes the slot next waits for it, outside the
 * lock (by then the copy is normally long done). Several threads enqueue on
 * the one stream: the backends' enqueueing is thread-safe (CUDA's API; the
 * host device's queue mutex), and each thread binds the device first.
 */
#include "data/source.h"

#include "common/clock.h"
#include "dag/actor_device.h"
#include "dag/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a thread feeding a DAG whose window is full waits before it
 * tries to reserve again (reserving without waiting keeps the source's
 * lock from being held across the DAG's wait, and close prompt). */
#define FEED_RETRY_NS 1000000LL
/* How long close, or a thread about to refill a staging buffer, waits for
 * its copy. */
#define STAGED_DRAIN_MS 10000

static adag_status_t set_meta(adag_data_source_t *src)
{
    const adag_data_params_t *p = &src->p;
    if (!(p->field_mask & ADAG_DATA_PARAM_TENSOR))
        return ADAG_OK;
    size_t es = adag_dtype_size(p->sample_dtype);
    if (p->sample_dtype == ADAG_DTYPE_BYTES || !es || p->sample_ndim >= ADAG_MAX_DIMS)
        return adag_error(ADAG_ERR_INVALID,
                          "adag_data_open: a sample tensor of dtype %d and %u dimensions "
                          "(a dtype other than bytes, at most %d)",
                          (int)p->sample_dtype, p->sample_ndim, ADAG_MAX_DIMS - 1);
    uint64_t n = 1;
    src->meta.dtype = (uint32_t)p->sample_dtype;
    src->meta.ndim = p->sample_ndim + 1;
    src->meta.shape[0] = p->batch_size;
    for (unsigned d = 0; d < p->sample_ndim; d++) {
        if (p->sample_shape[d] < 0 || (p->sample_shape[d] && n > UINT64_MAX / (uint64_t)p->sample_shape[d]))
            return adag_error(ADAG_ERR_INVALID, "adag_data_open: sample_shape[%u] is %lld", d,
                              (long long)p->sample_shape[d]);
        n *= (uint64_t)p->sample_shape[d];
        src->meta.shape[d + 1] = p->sample_shape[d];
    }
    if (n * es != src->sample_size)
        return adag_error(ADAG_ERR_INVALID,
                          "adag_data_open: a sample tensor of %llu %s elements is %llu bytes, "
                          "but sample_size is %zu",
                          (unsigned long long)n, adag_dtype_name(p->sample_dtype),
                          (unsigned long long)(n * es), src->sample_size);
    src->has_meta = 1;
    return ADAG_OK;
}

adag_status_t adag_data_feed_open(adag_data_source_t *src)
{
    adag_status_t st = set_meta(src);
    if (st != ADAG_OK || !src->p.dag || !adag_dag_input_on_device(src->p.dag, 0))
        return st;
    const adag_chan_device_t *d = &src->p.dag->driver_dev->chan;
    const adag_device_ops_t *ops = d->dev->ops;
    src->staging = calloc(src->nslots, sizeof(*src->staging));
    src->staged = calloc(src->nslots, sizeof(*src->staged));
    src->staged_pending = calloc(src->nslots, 1);
    if (!src->staging || !src->staged || !src->staged_pending)
        return adag_error(ADAG_ERR_NO_MEMORY, "adag_data_open: out of memory");
    src->dev = d; /* from here on adag_data_feed_close frees what exists */
    for (unsigned i = 0; i < src->nslots; i++) {
        if ((st = ops->host_alloc(d->dev, src->batch_bytes, &src->staging[i])) != ADAG_OK ||
            (st = ops->event_create(d->dev, &src->staged[i])) != ADAG_OK) {
            adag_error_prefix("adag_data_open: pinned staging for DAG %s's device input",
                              src->p.dag->name);
            return st;
        }
        src->bytes_held += src->batch_bytes;
    }
    src->p.budget += (size_t)src->nslots * src->batch_bytes;
    if (src->bytes_held > src->bytes_peak)
        src->bytes_peak = src->bytes_held;
    return ADAG_OK;
}

void adag_data_feed_close(adag_data_source_t *src)
{
    if (!src->dev)
        return;
    const adag_device_ops_t *ops = src->dev->dev->ops;
    int64_t deadline = adag_deadline_ms(STAGED_DRAIN_MS);
    for (unsigned i = 0; i < src->nslots; i++) {
        if (src->staged && src->staged[i]) {
            if (src->staged_pending[i])
                (void)ops->event_sync(src->staged[i], deadline); /* its copy reads the buffer */
            ops->event_destroy(src->dev->dev, src->staged[i]);
        }
        if (src->staging && src->staging[i].ptr)
            ops->host_free(src->dev->dev, &src->staging[i]);
    }
    free(src->staging);
    free(src->staged);
    free(src->staged_pending);
    src->dev = NULL;
}

/* Under the lock: reserves the execution of next_assign if its slot is
 * free and the DAG has room. 1: reserved (slot FILLING with the ref and
 * its buffers); 0: not now; -1: failed (the source). */
static int feed_reserve(adag_data_source_t *src)
{
    unsigned k = (unsigned)(src->next_assign % src->nslots);
    slot_t *slot = &src->slots[k];
    if (slot->state != SLOT_FREE)
        return 0;
    void *buf;
    uint64_t ref;
    adag_status_t st = adag_dag_reserve_feed(src->p.dag, ADAG_EXECUTE_NONBLOCK, &buf, &ref);
    if (st == ADAG_ERR_AGAIN)
        return 0;
    if (st != ADAG_OK) {
        adag_error_prefix("data source feeding DAG %s", src->p.dag->name);
        adag_data_fail_locked(src, st, adag_last_error(), ADAG_DATA_NO_SEQ);
        return -1;
    }
    slot->state = SLOT_FILLING;
    slot->seq = src->next_assign++;
    slot->ref = ref;
    slot->dev_buf = src->dev ? buf : NULL;
    slot->buf = src->dev ? src->staging[k].ptr : buf;
    return 1;
}

/* The slot's batch, filled: to the device (staged), then committed. */
static adag_status_t deliver(adag_data_source_t *src, unsigned k, slot_t *slot)
{
    size_t size = src->batch_bytes;
    if (src->dev) {
        const adag_device_ops_t *ops = src->dev->dev->ops;
        adag_status_t st = ops->copy_async(src->dev->compute, slot->dev_buf, slot->buf, size);
        if (st == ADAG_OK)
            st = ops->event_record(src->staged[k], src->dev->compute);
        if (st != ADAG_OK) {
            adag_error_prefix("data source: copying a batch to DAG %s's device input",
                              src->p.dag->name);
            return st;
        }
        src->staged_pending[k] = 1;
    }
    return adag_dag_commit_feed(src->p.dag, slot->ref, &size, src->has_meta ? &src->meta : NULL);
}

void adag_data_feed_loop(adag_data_source_t *src, filler_t *f)
{
    if (src->dev && src->dev->dev->ops->bind_thread) {
        adag_status_t st = src->dev->dev->ops->bind_thread(src->dev->dev);
        if (st != ADAG_OK) {
            adag_data_fail_locked(src, st, adag_last_error(), ADAG_DATA_NO_SEQ);
            return;
        }
    }
    for (;;) {
        int64_t t0 = adag_data_wait_begin(src);
        int got = 0;
        while (!src->stopping && src->failed == ADAG_OK && (got = feed_reserve(src)) == 0) {
            struct timespec ts = adag_timespec_at(adag_now_ns() + FEED_RETRY_NS);
            pthread_cond_timedwait(&src->work_cv, &src->lock, &ts);
        }
        adag_data_wait_end(src, t0);
        if (got != 1)
            return;
        unsigned k = (unsigned)((src->next_assign - 1) % src->nslots);
        slot_t *slot = &src->slots[k];
        uint64_t seq = slot->seq;
        pthread_mutex_unlock(&src->lock);

        adag_status_t st = ADAG_OK;
        if (src->dev && src->staged_pending[k]) { /* the last copy out of this buffer */
            st = src->dev->dev->ops->event_sync(src->staged[k], adag_deadline_ms(STAGED_DRAIN_MS));
            src->staged_pending[k] = 0;
            if (st != ADAG_OK)
                adag_error_prefix("data source: the last copy to DAG %s's device input",
                                  src->p.dag->name);
        }
        if (st == ADAG_OK)
            st = adag_data_fill(src, f, seq, slot->buf);
        if (st == ADAG_OK)
            st = deliver(src, k, slot);
        if (st != ADAG_OK) {
            /* a reservation not committed (the batch failed, or the DAG
             * refused it) is cancelled, so the DAG's window moves on */
            char why[ADAG_ERROR_MAX];
            snprintf(why, sizeof(why), "%s", adag_last_error());
            adag_dag_cancel(src->p.dag, slot->ref);
            adag_error(st, "%s", why); /* the first failure is the one to report */
        }

        pthread_mutex_lock(&src->lock);
        adag_data_counted(src, f);
        if (st != ADAG_OK) {
            adag_data_fail_locked(src, st, adag_last_error(), seq);
            return;
        }
        src->samples += src->p.batch_size;
        slot->state = SLOT_READY;
        atomic_fetch_add_explicit(&src->readies, 1, memory_order_release);
        pthread_cond_broadcast(&src->ready_cv);
    }
}

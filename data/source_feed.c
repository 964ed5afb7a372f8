/*
 * A data source feeding a compiled DAG (ADAG_DATA_PARAM_DAG): its threads
 * reserve the DAG's executions in batch order, fill each batch and commit
 * it (data/source.h), through the public zero-copy path only
 * (adag_dag_reserve / adag_dag_commit / adag_dag_cancel).
 *
 * The batch is written into the view the reservation gives: the input slot
 * itself for a host input; for an input on the driver's device (a device
 * first stage), the DAG's pinned staging buffer of that slot, whose copy
 * to the device slot the commit enqueues on the DAG's stream without
 * waiting for it (the DAG hands the buffer out again only once that copy
 * ran). The staging is the DAG's memory: the source's budget does not
 * hold it.
 *
 * Calls go one way: data/source.c (the threads) runs this loop instead of
 * the ring's for a source that feeds a DAG; both fill and report through
 * data/source_fill.c, and nothing here calls back into source.c.
 */
#include "data/source.h"
#include "data/source_fill.h"

#include "common/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a thread feeding a DAG whose window is full waits before it
 * tries to reserve again (reserving without waiting keeps the source's
 * lock from being held across the DAG's wait, and close prompt). */
#define FEED_RETRY_NS 1000000LL

static adag_status_t set_meta(adag_data_source_t *src)
{
    const adag_data_params_t *p = &src->p;
    if (!(p->field_mask & ADAG_DATA_PARAM_TENSOR))
        return ADAG_OK;
    size_t es = adag_dtype_size(p->sample_dtype);
    if (p->sample_dtype == ADAG_DTYPE_BYTES || !es || p->sample_ndim >= ADAG_MAX_DIMS)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: a sample tensor of dtype %d and %u dimensions "
                          "(a dtype other than bytes, at most %d)",
                          (int)p->sample_dtype, p->sample_ndim, ADAG_MAX_DIMS - 1);
    uint64_t n = 1;
    adag_value_t *v = &src->batch_value;
    v->kind = ADAG_VALUE_TENSOR;
    v->dtype = p->sample_dtype;
    v->ndim = p->sample_ndim + 1;
    v->shape[0] = p->batch_size;
    for (unsigned d = 0; d < p->sample_ndim; d++) {
        if (p->sample_shape[d] < 0 || (p->sample_shape[d] && n > UINT64_MAX / (uint64_t)p->sample_shape[d]))
            return adag__error(ADAG_ERR_INVALID, "adag_data_open: sample_shape[%u] is %lld", d,
                              (long long)p->sample_shape[d]);
        n *= (uint64_t)p->sample_shape[d];
        v->shape[d + 1] = p->sample_shape[d];
    }
    if (n * es != src->sample_size)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: a sample tensor of %llu %s elements is %llu bytes, "
                          "but sample_size is %zu",
                          (unsigned long long)n, adag_dtype_name(p->sample_dtype),
                          (unsigned long long)(n * es), src->sample_size);
    return ADAG_OK;
}

adag_status_t adag__data_feed_open(adag_data_source_t *src)
{
    src->batch_value = (adag_value_t){.kind = ADAG_VALUE_BYTES};
    return set_meta(src);
}

/* Under the lock: reserves the execution of next_assign if its slot is
 * free and the DAG has room. 1: reserved (slot FILLING with the ref and
 * its view's memory); 0: not now; -1: failed (the source). */
static int feed_reserve(adag_data_source_t *src)
{
    unsigned k = (unsigned)(src->next_assign % src->nslots);
    slot_t *slot = &src->slots[k];
    if (slot->state != SLOT_FREE)
        return 0;
    adag_input_view_t view;
    adag_ref_t ref;
    adag_status_t st = adag_dag_reserve(src->p.dag, ADAG_EXECUTE_NONBLOCK, &view, 1, &ref);
    if (st == ADAG_ERR_AGAIN)
        return 0;
    if (st != ADAG_OK) {
        adag__error_prefix("data source feeding DAG %s", adag_dag_name(src->p.dag));
        adag__data_fail_locked(src, st, adag_last_error(), ADAG_DATA_NO_SEQ);
        return -1;
    }
    slot->state = SLOT_FILLING;
    slot->seq = src->next_assign++;
    slot->ref = ref;
    slot->buf = view.data;
    return 1;
}

/* The slot's batch, filled: committed as written (the DAG copies it from
 * its staging to a device input). */
static adag_status_t deliver(adag_data_source_t *src, slot_t *slot)
{
    adag_value_t v = src->batch_value;
    v.data = slot->buf;
    v.size = src->batch_bytes;
    return adag_dag_commit(src->p.dag, slot->ref, &v, 1);
}

void adag__data_feed_loop(adag_data_source_t *src, filler_t *f)
{
    for (;;) {
        int64_t t0 = adag__data_wait_begin(src);
        int got = 0;
        while (!src->stopping && src->failed == ADAG_OK && (got = feed_reserve(src)) == 0) {
            struct timespec ts = adag__timespec_at(adag__now_ns() + FEED_RETRY_NS);
            pthread_cond_timedwait(&src->work_cv, &src->lock, &ts);
        }
        adag__data_wait_end(src, t0);
        if (got != 1)
            return;
        unsigned k = (unsigned)((src->next_assign - 1) % src->nslots);
        slot_t *slot = &src->slots[k];
        uint64_t seq = slot->seq;
        pthread_mutex_unlock(&src->lock);

        adag_status_t st = adag__data_fill(src, f, seq, slot->buf);
        if (st == ADAG_OK)
            st = deliver(src, slot);
        if (st != ADAG_OK) {
            /* a reservation not committed (the batch failed, or the DAG
             * refused it) is cancelled, so the DAG's window moves on */
            char why[ADAG_ERROR_MAX];
            snprintf(why, sizeof(why), "%s", adag_last_error());
            adag_dag_cancel(src->p.dag, slot->ref);
            adag__error(st, "%s", why); /* the first failure is the one to report */
        }

        pthread_mutex_lock(&src->lock);
        adag__data_counted(src, f);
        if (st != ADAG_OK) {
            adag__data_fail_locked(src, st, adag_last_error(), seq);
            return;
        }
        src->samples += src->p.batch_size;
        slot->state = SLOT_READY;
        atomic_fetch_add_explicit(&src->readies, 1, memory_order_release);
        pthread_cond_broadcast(&src->ready_cv);
    }
}

/*
 * Filling a batch and what the threads report (data/source_fill.h): the
 * part of a data source's threads that both of their loops share, the
 * ring's (data/source.c) and the DAG feed's (data/source_feed.c). Calls go
 * one way: source.c -> source_feed.c -> source_fill.c (and source.c ->
 * source_fill.c); nothing here calls either loop.
 */
#include "data/source_fill.h"

#include "common/clock.h"
#include "common/error.h"
#include "data/order.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* ---- order: which sample goes where ---- */

static void view_set(const adag_data_source_t *src, epoch_view_t *v, uint64_t epoch)
{
    if (v->valid && v->epoch == epoch)
        return;
    if (src->p.shuffle_shards)
        adag__order_shuffle(v->order, src->nshards, adag__order_key(src->p.seed, epoch, 0, 0));
    else
        for (uint32_t k = 0; k < src->nshards; k++)
            v->order[k] = k;
    v->prefix[0] = 0;
    for (uint32_t k = 0; k < src->nshards; k++)
        v->prefix[k + 1] = v->prefix[k] + src->shards[v->order[k]].nsamples;
    v->epoch = epoch;
    v->valid = 1;
}

/* The shard and index of the epoch's ord-th sample in its order. */
static const adag_data_shard_t *locate(const adag_data_source_t *src, const epoch_view_t *v,
                                       uint64_t ord, uint64_t *local)
{
    uint32_t lo = 0, hi = src->nshards; /* prefix[lo] <= ord < prefix[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v->prefix[mid] <= ord)
            lo = mid;
        else
            hi = mid;
    }
    *local = ord - v->prefix[lo];
    return &src->shards[v->order[lo]];
}

void adag__data_seq_place(const adag_data_source_t *src, uint64_t seq, uint64_t *epoch,
                          uint64_t *batch, uint64_t *global)
{
    uint64_t q = src->p.start_batch + seq;
    *epoch = src->p.start_epoch + q / src->batches_rank;
    *batch = q % src->batches_rank;
    uint64_t g = *batch * src->p.world + src->p.rank;
    *global = g % src->batches_global; /* past the end (PAD): the first ones again */
}

/* Samples tried in a batch's place when maps call them bad (BAD_SKIP). */
#define BAD_TRIES 16

/* Writes the sample at position pos of the epoch into out. */
static adag_status_t fill_one(adag_data_source_t *src, filler_t *f, uint64_t epoch, uint64_t pos,
                              unsigned char *out)
{
    uint64_t ord = adag__order_window(pos, src->nsamples, src->p.shuffle_window, src->p.seed,
                                     epoch);
    uint64_t local;
    const adag_data_shard_t *sh = locate(src, &f->view, ord, &local);
    adag_data_sample_t s = {
        .size = sh->sample_size,
        .dtype = sh->dtype,
        .index = pos,
        .shard = sh->path,
        .scratch = f->scratch,
        .scratch_size = f->scratch ? src->p.scratch_size : 0,
    };
    if (src->fmt->fields)
        src->fmt->fields(sh, local, &s);
    else
        s.data = src->fmt->sample(sh, local);
    for (unsigned k = 0; k < s.nfields; k++)
        f->bytes += s.fields[k].size;
    f->bytes += s.nfields ? 0 : s.size;
    if (!src->p.map && !src->p.nsteps) {
        memcpy(out, s.data, src->sample_size);
        return ADAG_OK;
    }
    if (!src->p.map)
        memcpy(out, s.data, src->sample_size);
    uint64_t rng = adag__order_key(src->p.seed, epoch, 2, pos);
    /* the map (k = 0), then the steps (k = 1..nsteps), each timed */
    for (unsigned k = src->p.map ? 0 : 1; k <= src->p.nsteps; k++) {
        adag_data_map_fn fn = k ? src->steps[k - 1].fn : src->p.map;
        void *arg = k ? src->steps[k - 1].arg : src->p.map_arg;
        int64_t t0 = adag__now_ns();
        adag__error_clear();
        adag_status_t st = fn(arg, &s, &rng, out, src->sample_size);
        f->step_ns[k] += adag__now_ns() - t0;
        if (st != ADAG_OK) {
            const char *msg = adag_last_error();
            if (!msg || !msg[0])
                return adag__error(st, "%s: sample %llu: %s returned %s", sh->path,
                                  (unsigned long long)pos,
                                  k ? src->steps[k - 1].name : "the map callback",
                                  adag_status_str(st));
            return st; /* adag_data_fail said what */
        }
    }
    return ADAG_OK;
}

/* Fills seq's batch into buf (no lock held). A sample a map calls bad is,
 * with ADAG_DATA_BAD_SKIP, replaced by the next of the epoch's order. */
adag_status_t adag__data_fill(adag_data_source_t *src, filler_t *f, uint64_t seq,
                              unsigned char *buf)
{
    uint64_t epoch, batch, g;
    adag__data_seq_place(src, seq, &epoch, &batch, &g);
    view_set(src, &f->view, epoch);
    unsigned bs = src->p.batch_size;
    char first[ADAG_ERROR_MAX]; /* the first bad sample's text, if all tries fail */
    for (unsigned j = 0; j < bs; j++) {
        uint64_t pos = (g * bs + j) % src->nsamples; /* PAD: completed from the start */
        unsigned char *out = buf + (size_t)j * src->sample_size;
        for (unsigned tries = 1;; tries++) {
            adag_status_t st = fill_one(src, f, epoch, pos, out);
            if (st == ADAG_OK)
                break;
            if (st != ADAG_ERR_INVALID || src->p.bad_policy != ADAG_DATA_BAD_SKIP)
                return st;
            f->bad++;
            if (tries == 1)
                snprintf(first, sizeof(first), "%s", adag_last_error());
            if (tries == BAD_TRIES)
                return adag__error(st, "%s (and the %d samples after it were bad too: "
                                      "ADAG_DATA_BAD_SKIP gives up)",
                                  first, BAD_TRIES - 1);
            pos = (pos + 1) % src->nsamples;
        }
    }
    return ADAG_OK;
}

/* ---- what a thread reports under the lock ---- */

/* Under the lock: the source fails at batch seq (ADAG_DATA_NO_SEQ: at the
 * next one not taken yet); a failure at an earlier batch replaces it. */
void adag__data_fail_locked(adag_data_source_t *src, adag_status_t st, const char *msg,
                           uint64_t seq)
{
    if (seq == ADAG_DATA_NO_SEQ)
        seq = src->next_assign;
    if (src->failed != ADAG_OK && seq >= src->failed_seq)
        return;
    src->failed = st;
    src->failed_seq = seq;
    snprintf(src->why, sizeof(src->why), "%s", msg ? msg : "");
    pthread_cond_broadcast(&src->ready_cv);
    pthread_cond_broadcast(&src->work_cv);
}

/* Under the lock: a thread starts / ends waiting for room (blocked_s
 * counts waits still going too). */
int64_t adag__data_wait_begin(adag_data_source_t *src)
{
    int64_t t0 = adag__now_ns();
    src->nwaiting++;
    src->wait_start_sum += t0;
    return t0;
}

void adag__data_wait_end(adag_data_source_t *src, int64_t t0)
{
    src->nwaiting--;
    src->wait_start_sum -= t0;
    src->blocked_ns += adag__now_ns() - t0;
}

/* Under the lock: what a thread counted while filling goes to the stats. */
void adag__data_counted(adag_data_source_t *src, filler_t *f)
{
    src->bytes_read += f->bytes;
    src->bad_samples += f->bad;
    f->bytes = f->bad = 0;
    for (unsigned k = 0; k <= src->p.nsteps; k++) {
        src->step_ns[k] += f->step_ns[k];
        f->step_ns[k] = 0;
    }
}

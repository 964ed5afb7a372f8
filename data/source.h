/*
 * The data source's state and the functions of the files that make it:
 * data/source.c (threads, ring, consumer), data/source_feed.c (feeding a
 * DAG), data/source_print.c (showing it), data/source_open.c and
 * source_fetch.c (opening: parameters, shards, batch counts). What the
 * threads of both loops share is data/source_fill.h.
 */
#ifndef ADAG_DATA_SOURCE_H
#define ADAG_DATA_SOURCE_H

#include <adag/data.h>

#include "common/cpuset.h"
#include "common/error.h"
#include "data/cache.h"
#include "data/shard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct adag_data_source adag_data_source_t;

/* A thread's view of one epoch's shard order: order[k] is the shard read
 * k-th, prefix[k] the samples before it (prefix[nshards] = nsamples). */
typedef struct {
    uint64_t epoch;
    int valid;
    uint32_t *order;
    uint64_t *prefix;
} epoch_view_t;

/* A thread's memory for filling: its view of the epoch's order, its
 * scratch for the map callback, and what it counted since it last took the
 * lock. */
typedef struct {
    epoch_view_t view;
    void *scratch;
    uint64_t bytes, bad;
    int64_t step_ns[1 + ADAG_DATA_MAX_STEPS]; /* the map's and each step's time */
} filler_t;


#define MAX_THREADS 64
#define DEFAULT_PREFETCH 2
/* Small batches: the ring holds up to this many bytes of batches (at most
 * RING_MAX), so threads fill several per wake-up while what they write
 * stays in cache (the default budget is the ring; measured with adag-bench
 * data-tokens, 32 KiB batches: 1 MiB 5.0-5.4 GB/s, 4 MiB 2.8-5.8) */
#define RING_BYTES ((size_t)1024 << 10)
#define RING_MAX 64u

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD };

typedef struct {
    uint64_t seq;
    int state;
    void *buf;
    adag_ref_t ref; /* feeding a DAG: the execution the batch is in (buf: its view's data) */
} slot_t;

struct adag_data_source {
    adag_data_params_t p; /* the caller's, shards excepted */
    const adag_data_format_ops_t *fmt;
    adag_data_shard_t *shards; /* the usable ones, in file order */
    uint32_t nshards;
    size_t sample_size, batch_bytes;
    uint64_t nsamples;       /* per epoch */
    uint64_t batches_global; /* per epoch, every rank's */
    uint64_t batches_rank;   /* per epoch, this rank's */
    uint64_t skipped;        /* bad records and shards skipped at open */
    size_t scratch_bytes;    /* every thread's scratch (held from open to close) */
    adag_data_cache_t *cache; /* http(s) shards: their entries, held until close */

    pthread_mutex_t lock;
    pthread_cond_t work_cv;  /* threads: a slot or budget came free, or stop */
    pthread_cond_t ready_cv; /* the consumer: a batch is ready, or a failure */
    slot_t *slots;
    unsigned nslots;
    /* batch buffers not in a slot (a slot has one from taken to released) */
    void **free_bufs;
    unsigned nfree;
    uint64_t next_assign, next_deliver;
    /* batches marked READY so far: bumped (release) after each, under the
     * lock; the consumer watches it (acquire) while it spins before it
     * sleeps, without the lock */
    _Atomic uint64_t readies;
    unsigned held;
    size_t bytes_held, bytes_peak;
    int stopping;
    /* the failure, and the batch it belongs to: the consumer gets every
     * batch before failed_seq, then the failure (threads take no batch
     * after a failure; those taken before it are finished) */
    adag_status_t failed;
    uint64_t failed_seq;
    char why[ADAG_ERROR_MAX];
    uint64_t batches, samples, bytes_read;
    uint64_t bad_samples; /* samples a map called bad, replaced (ADAG_DATA_BAD_SKIP) */
    int64_t step_ns[1 + ADAG_DATA_MAX_STEPS];
    /* the steps (ADAG_DATA_PARAM_STEPS), copied at open with their names */
    adag_data_step_t steps[ADAG_DATA_MAX_STEPS];
    char step_names[ADAG_DATA_MAX_STEPS][32];
    int64_t starved_ns, blocked_ns;
    /* threads waiting now, and the sum of when they began (their waits so
     * far count in the stats before they end) */
    unsigned nwaiting;
    int64_t wait_start_sum;

    pthread_t *threads;
    unsigned nthreads, started;
    cpu_set_t cpus; /* where the threads run (bound_cpus); data/source_open.c */
    int bound_cpus;

    /* feeding a DAG (data/source_feed.c): what a batch is committed as
     * (bytes, or the tensor [batch_size, sample_shape...]; data and size
     * per batch), and the DAG's input as adag_dag_inputs describes it (an
     * input on the driver's device is written in the DAG's pinned
     * staging: the DAG's memory, not the source's) */
    adag_value_t batch_value;
    adag_input_view_t dag_input;

    int64_t opened_ns;
    /* adag_data_progress (the consumer's): the writer drawn on (fn NULL:
     * none, or its line was ended), when */
    adag_writer_t progress_out;
    int64_t progress_ns;
};

/* ---- feeding a DAG (data/source_feed.c) ---- */

/* The batch's tensor description (ADAG_DATA_PARAM_TENSOR), set for any
 * source: what a batch fed to a DAG is committed as. */
adag_status_t adag__data_feed_open(adag_data_source_t *src);
/* A thread's loop: reserve in batch order, fill, commit (adag_dag_reserve,
 * adag_dag_commit: the public zero-copy path). */
void adag__data_feed_loop(adag_data_source_t *src, filler_t *f);

/* ---- showing it (data/source_print.c) ---- */

/* Ends the progress bar's line (a newline on the writer last drawn on), if
 * one is drawn. */
static inline void adag__data_progress_end(adag_data_source_t *src)
{
    if (src->progress_out.fn) /* a failed write only leaves the line open */
        (void)src->progress_out.fn(src->progress_out.ctx, "\n", 1);
    src->progress_out.fn = NULL;
}

/* ---- opening (data/source_open.c); each reports its own failure ---- */

/* The caller's params are usable (field mask, formats, sizes, ranks). */
adag_status_t adag__data_check_params(const adag_data_params_t *p);
/* Where the threads run: ADAG_DATA_PARAM_CPUS, else next to the first
 * stage of the DAG fed (ADAG_PLACEMENT=1), else anywhere. */
adag_status_t adag__data_choose_cpus(adag_data_source_t *src, const adag_data_params_t *p);
/* Fills in every default the field mask leaves out. */
void adag__data_defaults(adag_data_params_t *p);
/* The shard paths, globs expanded and sorted. */
adag_status_t adag__data_expand_shards(adag_data_source_t *src, const adag_data_params_t *p);
/* Fetches http(s) shards into the cache (several at once, in the order
 * of the first epoch); their paths become the cached files'. */
adag_status_t adag__data_fetch_shards(adag_data_source_t *src);
/* Opens every shard with its format (bad ones fail or are skipped). */
adag_status_t adag__data_open_shards(adag_data_source_t *src);
/* Batches per epoch, every rank's and this one's; the start cursor. */
adag_status_t adag__data_count_batches(adag_data_source_t *src);
/* A DAG to feed: one input field whose slots hold a batch. */
adag_status_t adag__data_check_dag(adag_data_source_t *src);

#endif

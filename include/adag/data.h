/*
 * adag data front stage: streams preprocessed batches out of shards
 * (files, globs, http(s) URLs) into a compiled DAG, or to a caller that
 * iterates them.
 *
 * A source is a list of shards in one format, a batch shape and options.
 * Shards are paths, globs, or http:// and https:// URLs; a URL is fetched
 * with libcurl into a disk cache shared by processes (byte-capped, least
 * recently used evicted, crash-safe: see README "Data front stage").
 * Its output is a sequence of batches, each a pure function of
 * (seed, epoch, batch index): the same with 1 or 16 threads, and a source
 * opened at a cursor continues exactly where another stopped without
 * reading what came before. Threads decode into the batches in parallel;
 * batches come out in order. Everything the source holds (batches being
 * filled and waiting, read buffers) fits a byte budget that is never
 * exceeded: a slow consumer makes the source wait, never grow.
 *
 * Order. The epoch's samples are the shards' samples, the shards taken in
 * a permutation of (seed, epoch) when shuffle_shards, each shard's in file
 * order; then, with a shuffle window W > 1, position p of the epoch holds
 * sample w*W + perm(p % W) of its window w = p / W, perm a pseudorandom
 * permutation keyed by (seed, epoch, w) (the last, shorter window too). A
 * window never spans more than W consecutive samples, so a shard is read
 * almost in order. Batch b of the epoch holds positions b*B .. b*B+B-1.
 *
 * Data-parallel ranks (rank, world): the epoch's batches are dealt out
 * round-robin, batch b to rank b % world, and every rank gets the same
 * number (ADAG_DATA_RANKS_DROP: the last incomplete round is dropped;
 * _PAD: missing batches are the epoch's first ones again, so every batch
 * is seen and some twice; a sample count that is not a multiple of the
 * batch size is completed the same way). Each rank computes its share
 * alone: there is no coordinator.
 */
#ifndef ADAG_DATA_H
#define ADAG_DATA_H

#include <adag.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct adag_data_source *adag_data_source_h;

/* Shard formats. */
typedef enum {
    /* fixed-size binary records: a sample is record_size bytes; a file
     * whose size is not a multiple is refused (or, with
     * ADAG_DATA_BAD_SKIP, its tail is skipped and counted) */
    ADAG_DATA_FORMAT_RECORDS = 1,
    /* NumPy .npy (format versions 1-3, little-endian, C order): a sample
     * is one row, i.e. the array indexed on its first axis */
    ADAG_DATA_FORMAT_NPY = 2,
    /* Megatron-style token dataset: shard "x" names x.bin (the tokens) and
     * x.idx (the index: dtype, document sizes and offsets); the documents'
     * tokens, concatenated in order, are packed into samples of seq_len
     * tokens (the tail that does not fill one is dropped) */
    ADAG_DATA_FORMAT_TOKENS = 3,
    /* WebDataset: an uncompressed .tar whose members are grouped into
     * samples by key (the path up to the first '.' of its file name:
     * "d/000017.jpg" and "d/000017.cls" are fields "jpg" and "cls" of
     * sample "d/000017"); a sample is the fields named in `fields`, read
     * in place from the mapped file; samples differ in size, so a map
     * callback writes them into the batch */
    ADAG_DATA_FORMAT_WEBDATASET = 4,
    /* one file, one sample: its bytes (shards given as a
     * glob over a directory of JPEGs); samples differ in size, so a map callback
     * writes them into the batch (adag_data_image_map decodes images) */
    ADAG_DATA_FORMAT_FILES = 5,
} adag_data_format_t;

/* What a rank does with a share that would be shorter than the others'. */
typedef enum {
    ADAG_DATA_RANKS_DROP = 0,
    ADAG_DATA_RANKS_PAD = 1,
} adag_data_ranks_policy_t;

/* What a bad record (a truncated file, a malformed header) does. */
typedef enum {
    /* the source fails, naming file and offset */
    ADAG_DATA_BAD_FAIL = 0,
    /* the shard (or its broken tail) is skipped and counted in the stats;
     * the order of what remains is still a pure function of the seed */
    ADAG_DATA_BAD_SKIP = 1,
} adag_data_bad_policy_t;

/* Most fields a WebDataset sample may be asked for. */
#define ADAG_DATA_MAX_FIELDS 8

/* One field of a WebDataset sample. */
typedef struct {
    const char *ext;  /* "jpg", "cls", ... */
    const void *data;
    size_t size;
} adag_data_field_t;

/* One sample handed to a map callback. */
typedef struct {
    const void *data; /* its bytes (a record; a row of an .npy; seq_len tokens;
                         WebDataset: its first field's) */
    size_t size;
    adag_dtype_t dtype; /* the element type (.npy and tokens; BYTES otherwise) */
    uint64_t index;     /* its position in the epoch's sample order */
    const char *shard;  /* the file it came from */
    /* WebDataset: the key and the fields, in the order of params.fields */
    const char *key;
    const adag_data_field_t *fields;
    unsigned nfields;
    /* the calling thread's scratch memory (ADAG_DATA_PARAM_SCRATCH bytes,
     * counted in the budget; NULL, 0 without) */
    void *scratch;
    size_t scratch_size;
} adag_data_sample_t;

/* Fills `out` (sample_size bytes inside the batch) from a sample. `rng` is
 * a per-sample random state, a pure function of (seed, epoch, sample
 * index): draw from it with adag_data_rand. A status other than ADAG_OK
 * fails the source (its message through adag_last_error: call
 * adag_data_fail from the callback to set one), except that with
 * ADAG_DATA_BAD_SKIP a sample the callback calls bad (ADAG_ERR_INVALID,
 * what adag_data_fail returns) is counted in bad_skipped and its place in
 * the batch taken by the next sample of the epoch's order that maps (at
 * most 16 tried): the batch stays a pure function of seed and data; when
 * all 16 are bad the source fails with the first one's message. */
typedef adag_status_t (*adag_data_map_fn)(void *arg, const adag_data_sample_t *sample,
                                          uint64_t *rng, void *out, size_t out_size);

/* Most preprocessing steps after the map (ADAG_DATA_PARAM_STEPS). */
#define ADAG_DATA_MAX_STEPS 8

/* A preprocessing step run after the map, on what the map wrote. */
typedef struct {
    adag_data_map_fn fn;
    void *arg;
    const char *name; /* names it in messages and stats (NULL: "step <i>") */
} adag_data_step_t;

/* The next 64 random bits of a per-sample state. */
ADAG_API uint64_t adag_data_rand(uint64_t *rng);

/* Field mask of adag_data_params_t. */
enum {
    ADAG_DATA_PARAM_RECORD_SIZE = 1u << 0,
    ADAG_DATA_PARAM_SEQ_LEN = 1u << 1,
    ADAG_DATA_PARAM_MAP = 1u << 2,
    ADAG_DATA_PARAM_THREADS = 1u << 3,
    ADAG_DATA_PARAM_SEED = 1u << 4,
    ADAG_DATA_PARAM_SHUFFLE = 1u << 5,
    ADAG_DATA_PARAM_RANKS = 1u << 6,
    ADAG_DATA_PARAM_BUDGET = 1u << 7,
    ADAG_DATA_PARAM_PREFETCH = 1u << 8,
    ADAG_DATA_PARAM_BAD_POLICY = 1u << 9,
    ADAG_DATA_PARAM_START = 1u << 10,
    ADAG_DATA_PARAM_DAG = 1u << 11,
    ADAG_DATA_PARAM_FIELDS = 1u << 12,
    ADAG_DATA_PARAM_SCRATCH = 1u << 13,
    ADAG_DATA_PARAM_CACHE = 1u << 14,
    ADAG_DATA_PARAM_TENSOR = 1u << 15,
    ADAG_DATA_PARAM_STEPS = 1u << 16,
    ADAG_DATA_PARAM_CPUS = 1u << 17,
};

typedef struct {
    uint64_t field_mask;
    /* required: the shards (paths, a path with * ? [ being a glob, expanded
     * and sorted; or http:// and https:// URLs, which are not globs; a
     * token dataset's URL "u" is fetched as u.bin and u.idx), their format,
     * and batch_size, the samples in a batch.
     * sample_size: the bytes a sample takes in the batch. Needed with a map
     * or steps (what they write). Without them it may be 0: it is then the
     * shards' own (record_size, an .npy row, seq_len tokens), which must be
     * the same in every shard; a value given is checked against them. */
    const char *const *shards;
    unsigned nshards;
    adag_data_format_t format;
    unsigned batch_size;
    size_t sample_size;
    /* RECORD_SIZE: bytes per record (ADAG_DATA_FORMAT_RECORDS, required) */
    size_t record_size;
    /* SEQ_LEN: tokens per sample (ADAG_DATA_FORMAT_TOKENS, required) */
    uint32_t seq_len;
    /* FIELDS: the extensions every sample must have (ADAG_DATA_FORMAT_
     * WEBDATASET, required, at most 8); a sample missing one is a bad
     * record */
    const char *const *fields;
    unsigned nfields;
    /* MAP: a callback that writes each sample into the batch (else the
     * sample's bytes are copied) */
    adag_data_map_fn map;
    void *map_arg;
    /* CACHE: where http(s) shards are kept and how many bytes at most
     * (default: the settings ADAG_DATA_CACHE_DIR and ADAG_DATA_CACHE_BYTES:
     * those of the runtime of the DAG the source feeds, else the
     * environment's when it opens, like the other ADAG_DATA_* settings) */
    const char *cache_dir;
    uint64_t cache_bytes;
    /* STEPS: a chain of steps run after the map (or the copy of the
     * sample's bytes), in order, on the sample's place in the batch: each
     * gets the same sample, the random state where the step before left it,
     * and `out` holding what was written before it (at most
     * ADAG_DATA_MAX_STEPS; the array is copied at open, names too). A step
     * fails and is counted like the map. */
    const adag_data_step_t *steps;
    unsigned nsteps;
    /* SCRATCH: bytes of scratch memory each thread hands its map callback
     * (adag_data_image_scratch for the image map); counted in the budget */
    size_t scratch_size;
    /* THREADS: decoding threads (default 1 + online CPUs / 2, at most 16) */
    unsigned threads;
    /* SEED: the seed (default 0) */
    uint64_t seed;
    /* SHUFFLE: shuffle the shard order, and samples within windows of
     * shuffle_window consecutive ones (0 or 1: in order; default: none) */
    int shuffle_shards;
    unsigned shuffle_window;
    /* RANKS: this consumer's share (rank < world; default 0 of 1) */
    unsigned rank, world;
    adag_data_ranks_policy_t ranks_policy;
    /* BUDGET: bytes the source may hold at once, every buffer counted
     * (default: prefetch + threads batches plus the threads' scratch); too
     * small for one batch and the scratch is ADAG_ERR_INVALID */
    size_t budget;
    /* PREFETCH: finished batches it may hold ahead of the consumer
     * (default 2) */
    unsigned prefetch;
    /* BAD_POLICY: what a bad record does (default ADAG_DATA_BAD_FAIL) */
    adag_data_bad_policy_t bad_policy;
    /* START: where to begin: the epoch and the number of this rank's
     * batches of that epoch already consumed (a cursor saved from
     * adag_data_batch_t; default epoch 0, batch 0) */
    uint64_t start_epoch;
    uint64_t start_batch;
    /* DAG: feed this compiled DAG (see adag_data_next_exec) instead of
     * handing batches to adag_data_next */
    adag_dag_h dag;
    /* TENSOR: a sample is a tensor of sample_dtype and shape
     * sample_shape[0..sample_ndim) (sample_ndim < ADAG_MAX_DIMS; its bytes
     * are sample_size), so a batch fed to a DAG is the tensor [batch_size,
     * sample_shape...] its first stage sees (without: bytes); e.g. the image
     * map's F32 {3, height, width}. Without a map or steps the batch holds
     * the files' elements as they are: a dtype or shape other than what an
     * .npy header (a row) or a token index (seq_len tokens) says is refused
     * at open, as are shards whose headers disagree with each other */
    adag_dtype_t sample_dtype;
    unsigned sample_ndim;
    int64_t sample_shape[ADAG_MAX_DIMS - 1];
    /* CPUS: the CPUs the threads run on, as a list ("8-15"; each one this
     * process may use). Default: feeding a DAG whose runtime has
     * ADAG_PLACEMENT=1, the
     * CPUs of the actors that read its input (adag_dag_input_placement:
     * next to the first stage and its GPU); otherwise not bound. */
    const char *cpus;
} adag_data_params_t;

/* Opens a source: expands globs, fetches http(s) shards into the cache
 * (those missing or failing their checksum; several at once, in the order
 * the first epoch reads them; each kept from eviction while the source is
 * open), opens every shard and reads its header
 * (what is malformed fails here, naming the file, or is skipped with
 * ADAG_DATA_BAD_SKIP), then starts the threads. */
ADAG_API adag_status_t adag_data_open(const adag_data_params_t *params, adag_data_source_h *out);

/* One batch, valid until adag_data_release. */
typedef struct {
    void *data;           /* batch_size * sample_size bytes */
    size_t size;
    unsigned nsamples;    /* batch_size (a batch is always full) */
    uint64_t epoch;
    uint64_t batch;       /* this rank's batch number within the epoch */
    uint64_t epoch_batch; /* the batch's number among the epoch's batches */
    /* the cursor to resume after this batch: start_epoch, start_batch */
    uint64_t next_epoch, next_batch;
} adag_data_batch_t;

/* The next batch of this rank, in order, waiting up to timeout_ms (-1:
 * forever). Epochs follow each other (the next epoch reshuffles).
 * ADAG_ERR_TIMEOUT if none is ready in time. A failure of the source (a
 * bad record with ADAG_DATA_BAD_FAIL, a map callback's error) belongs to
 * the batch it happened in: every batch before that one is delivered
 * first, in order, whatever the threads' timing; then the failure is
 * returned, with its message, by this and every later call. At most
 * `prefetch` batches may be held (not yet released) at once. */
ADAG_API adag_status_t adag_data_next(adag_data_source_h src, adag_data_batch_t *batch,
                                      int timeout_ms);
/* With ADAG_DATA_PARAM_DAG: the source feeds a compiled DAG with one
 * input field whose slots hold a batch (the field's channel: adag_node_channel's
 * max_bytes or the DAG's slot_capacity). Its threads reserve the DAG's
 * executions (adag_dag_reserve) in batch order, write each batch straight
 * into the execution's input slot and commit it: no batch passes through
 * memory of the source's own, and several threads fill several executions
 * at once. adag_data_next_exec returns the next execution started, in batch
 * order, with the batch it carries (batch->data NULL: its bytes are in the
 * DAG); take its results with adag_dag_get and adag_dag_release as usual
 * (adag_data_release is not for these batches). A failure comes after the
 * executions of the batches before it, as with adag_data_next.
 * Executions not released hold the DAG's window, and the source waits for
 * room: a slow consumer slows the source, never grows it. At most the
 * DAG's max_inflight executions are started ahead of adag_data_next_exec.
 * The threads use the public zero-copy path (adag_dag_reserve, the view's
 * data; adag_dag_commit, the batch as bytes or as the tensor
 * [batch_size, sample_shape...] with ADAG_DATA_PARAM_TENSOR; a commit the
 * DAG refuses fails the source and the reservation is cancelled). When
 * the DAG's input lives on the driver's device
 * (adag_compile_params_t.driver_device: a device first stage), the view's
 * data is the DAG's pinned staging of that slot: the threads fill it and
 * each commit enqueues its copy to the device slot on the DAG's stream
 * without waiting for it (the DAG hands a staging buffer out again once
 * its copy is done). That staging is the DAG's memory (one buffer per
 * execution in flight, allocated when the DAG was compiled), not the
 * source's: its budget and bytes_held do not count it.
 * adag_data_next is refused on such a source. Close the source before
 * destroying the DAG; close releases the executions it started but never
 * handed out (their results dropped), so the DAG's window is free again for
 * the caller or another source. */
ADAG_API adag_status_t adag_data_next_exec(adag_data_source_h src, adag_ref_t *ref,
                                           adag_data_batch_t *batch, int timeout_ms);

/* Gives a batch of adag_data_next back (its memory goes to the next one).
 * A batch of adag_data_next_exec is in its execution: adag_dag_release
 * gives that back (this call refuses it, saying so). */
ADAG_API adag_status_t adag_data_release(adag_data_source_h src, adag_data_batch_t *batch);

/* The CPUs the source's threads run on, as a list ("0-15"), or "" when
 * they are not bound (they run wherever the process may). */
ADAG_API adag_status_t adag_data_cpus(adag_data_source_h src, char *buf, size_t len);

/* This rank's batches per epoch, and the epoch's samples. */
ADAG_API adag_status_t adag_data_size(adag_data_source_h src, uint64_t *batches_per_epoch,
                                      uint64_t *samples_per_epoch);

typedef struct {
    uint64_t batches;       /* delivered by adag_data_next */
    uint64_t samples;       /* decoded into batches */
    uint64_t bytes_read;    /* from shards */
    uint64_t bad_skipped;   /* records or shards skipped (ADAG_DATA_BAD_SKIP) */
    size_t budget;          /* bytes it may hold (feeding a DAG: the threads' scratch;
                               the batches are in the DAG's slots and staging) */
    size_t bytes_held;      /* now */
    size_t bytes_peak;      /* most ever held at once (never above budget) */
    double starved_s;       /* time adag_data_next waited for a batch */
    double blocked_s;       /* time threads waited for budget or a consumer (summed
                               over the threads, waits still going included) */
    /* http(s) shards: found valid in the cache, fetched, bytes fetched */
    uint64_t cache_hits, cache_misses, bytes_fetched;
    double elapsed_s;       /* since the source was opened (rates: samples / elapsed_s) */
    /* time in the map (0) and each step (1..nsteps), summed over the
     * threads; 0 without a map and steps */
    double step_s[1 + ADAG_DATA_MAX_STEPS];
    unsigned nsteps;
} adag_data_stats_t;

ADAG_API adag_status_t adag_data_stats(adag_data_source_h src, adag_data_stats_t *stats);

/* Prints the source (shards, format, batches per epoch, rank) and its
 * stats, as adag-info prints, to out (adag.h, "Writers"): rates, waits,
 * memory against the budget (feeding a DAG: the batches in its input
 * slots and, for an input on the driver's device, the DAG's pinned
 * staging, then the source's own scratch against its budget), bad records,
 * the cache. adag_data_format_stats: the same text into buf[0..len) (the
 * figures move on between calls: leave room). */
ADAG_API adag_status_t adag_data_print_stats(adag_data_source_h src, adag_writer_t out);
ADAG_API adag_status_t adag_data_format_stats(adag_data_source_h src, char *buf, size_t len,
                                              size_t *needed);

/* Redraws a one-line progress bar for the batches delivered so far (epoch,
 * position in it, samples/s, MB/s read, memory held of the budget or,
 * feeding a DAG, the executions being filled, time starved) on out, at most
 * 10 times a second: "\r", the terminal's erase-line sequence and the line.
 * An fd writer (adag_writer_fd) gets it only when its fd is a terminal
 * (isatty), so a log stays clean; any other writer gets every redraw.
 * Call it after each batch; adag_data_print_stats and adag_data_close end
 * the line with a newline on the writer last drawn on, which must stay
 * valid until then. adag_data_format_progress: the line alone (no
 * "\r", no escape sequence, not rate-limited) into buf[0..len). */
ADAG_API adag_status_t adag_data_progress(adag_data_source_h src, adag_writer_t out);
ADAG_API adag_status_t adag_data_format_progress(adag_data_source_h src, char *buf, size_t len,
                                                 size_t *needed);

/* Inside a map callback: sets the message the source fails with
 * ("<shard>: sample <index>: <text>"), returns ADAG_ERR_INVALID. */
ADAG_API adag_status_t adag_data_fail(const adag_data_sample_t *sample, const char *fmt, ...)
    ADAG_PRINTF(2, 3);

/* ---- images: JPEG decode -> random-resized crop -> flip -> normalize ---- */

/* Field mask of adag_data_image_t. */
enum {
    ADAG_DATA_IMAGE_FIELD = 1u << 0,
    ADAG_DATA_IMAGE_SCALE = 1u << 1,
    ADAG_DATA_IMAGE_RATIO = 1u << 2,
    ADAG_DATA_IMAGE_FLIP = 1u << 3,
    ADAG_DATA_IMAGE_NORMALIZE = 1u << 4,
    ADAG_DATA_IMAGE_DTYPE = 1u << 5,
    ADAG_DATA_IMAGE_MAX_PIXELS = 1u << 6,
};

/* The vision models' usual training transform, as a map callback
 * (adag_data_image_map, its arg a const adag_data_image_t *): a JPEG
 * (libjpeg-turbo) -> a random crop of scale x the image's area and aspect
 * ratio w/h in ratio (log-uniform; 10 draws, then the centre crop of the
 * nearest allowed ratio, as torchvision's RandomResizedCrop) resized to
 * height x width (bilinear, pixel centres aligned) -> flipped left-right
 * with probability flip -> (v / 255 - mean[c]) / std[c] -> a CHW tensor of
 * dtype (f32, f16 or bf16, rounded to nearest even). Every draw comes from
 * the sample's rng, so the output is a pure function of (seed, epoch,
 * sample). The JPEG is decoded at the smallest of libjpeg-turbo's scales
 * (1/8 .. 1) whose crop still covers the output, into the thread's scratch.
 * A progressive (multi-scan) JPEG is decoded by libjpeg-turbo out of a
 * coefficient buffer for the whole image (2 bytes a coefficient at any
 * scale: 3 bytes a pixel at 4:2:0, 6 at 4:4:4), which the scratch counts
 * too. A bad JPEG (corrupt, truncated, CMYK, over max_pixels at 1/8, or
 * progressive with a coefficient buffer that does not fit the scratch
 * beside its pixels) is a bad sample: ADAG_ERR_INVALID with the shard,
 * sample and libjpeg-turbo's words or the sizes (skipped and counted with
 * ADAG_DATA_BAD_SKIP). */
typedef struct {
    uint64_t field_mask;
    /* required: the output size */
    unsigned height, width;
    /* FIELD: which of params.fields holds the JPEG (WebDataset; default 0;
     * other formats: the sample's bytes) */
    unsigned field;
    /* SCALE: area fraction range (default 0.08 .. 1) */
    float scale_min, scale_max;
    /* RATIO: aspect ratio range (default 3/4 .. 4/3) */
    float ratio_min, ratio_max;
    /* FLIP: probability of a left-right flip (default 0.5) */
    float flip;
    /* NORMALIZE: per channel R, G, B (default ImageNet's: mean 0.485 0.456
     * 0.406, std 0.229 0.224 0.225) */
    float mean[3], std[3];
    /* DTYPE: ADAG_DTYPE_F32 (default), _F16 or _BF16 */
    adag_dtype_t dtype;
    /* MAX_PIXELS: most pixels decoded at once (default 2048 x 2048): sizes
     * the scratch (3 bytes a pixel, and as much again for a progressive
     * JPEG's coefficients: one of up to max_pixels at 4:2:0 fits whole).
     * An image whose crop needs more at the scale that covers the output
     * is decoded at the largest scale that fits (its crop then upsampled a
     * little); one over it even at 1/8 is a bad sample */
    uint64_t max_pixels;
} adag_data_image_t;

/* Checks an image transform: ADAG_ERR_INVALID saying what is wrong. */
ADAG_API adag_status_t adag_data_image_check(const adag_data_image_t *img);
/* Bytes of one output tensor (the source's sample_size), 0 if invalid. */
ADAG_API size_t adag_data_image_size(const adag_data_image_t *img);
/* Scratch bytes a thread needs to decode images of up to max_pixels (the
 * source's scratch_size), 0 if invalid: 6 bytes a pixel (the decoded
 * pixels, and room for a progressive JPEG's coefficient buffer, which
 * libjpeg-turbo allocates itself: that part is counted, never touched)
 * and the resampler's tables. */
ADAG_API size_t adag_data_image_scratch(const adag_data_image_t *img);
/* The map callback: arg is a const adag_data_image_t * (checked once with
 * adag_data_image_check; it must outlive the source). */
ADAG_API adag_status_t adag_data_image_map(void *arg, const adag_data_sample_t *sample,
                                           uint64_t *rng, void *out, size_t out_size);

/* Stops the threads, frees everything (batches still held included). */
ADAG_API adag_status_t adag_data_close(adag_data_source_h src);

#ifdef __cplusplus
}
#endif

#endif

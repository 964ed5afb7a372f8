/* examples/llm/stage_actors.c: the actor class "llm_shard", one tensor-
 * parallel rank of one pipeline stage of the model (serve_graph.h lists the
 * methods). Built as build/examples/llm/libllm_shard.so with model.c and
 * safetensors.c compiled in.
 *
 * The state holds the whole model's weights (loaded from the seed or the
 * file; a rank only reads its layers, heads, d_ff columns and vocabulary
 * rows) and the rank's paged KV cache: layers [l0, l1), heads of its range.
 * The layer of attn/mlp is in the method's name (attn0, mlp3, ...): a method
 * cannot tell which node of the graph it serves, so one name per layer.
 *
 * Where the work runs: on a host actor, in the method. On a device-bound
 * actor (an "emu:N" device) the f32 tensors are device memory and each
 * method checks its arguments on the host, then enqueues the same C work on
 * the actor's compute stream (adag_call_enqueue) and returns: the loop goes
 * on while the stream computes, and the runtime orders every reader after
 * it. The rows argument (bytes) is host memory, kept by the runtime until
 * the stream ran the work. libllm_shard_cuda.so (this file with
 * -DLLM_SHARD_CUDA, linked with shard_kernels.cu) runs the work as CUDA
 * kernels on a "cuda:N" actor's stream, the weights and the cache in device
 * memory. */
#include <adag.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "safetensors.h"
#include "serve_graph.h"
#ifdef LLM_SHARD_CUDA
#include "shard_cuda.h"
#endif

typedef struct {
    llm_shard_init_t in;
    llm_model_t m;
    llm_kv_t kv;
    int col0, col1, voc0, voc1;
    /* a failure of work run on the stream, reported by the next method:
     * the message is written before the flag is set (release), read after
     * the flag is seen (acquire) */
    atomic_int async_failed;
    char async_msg[256];
    /* the time run_work took, summed, and its calls (work_stats): added by
     * whichever thread ran it; relaxed, counters read as a snapshot after
     * the steps whose results the driver already has */
    atomic_uint_fast64_t work_ns, work_calls;
#ifdef LLM_SHARD_CUDA
    llm_cuda_t *cuda; /* the weights and the cache on the actor's GPU (cuda actors) */
#endif
} shard_t;

/* The work of one method, run in the method (host actor) or on the
 * stream (device actor). Pointers are the values' memory: host, or the
 * emulated device's (host addresses). At most 256 bytes (a launch's
 * parameters). */
typedef enum { W_EMBED, W_ATTN, W_MLP, W_RESID, W_LOGITS, W_PICK } work_kind_t;
typedef struct {
    work_kind_t kind;
    int layer, n;
    shard_t *st;
    const float *x, *x2;
    const llm_shard_row_t *rows;
    void *out;
    const llm_pick_t *picks[LLM_SHARD_MAX_TP];
} work_t;
_Static_assert(sizeof(work_t) <= 256, "work_t is a launch's parameters: 256 bytes at most");

static int rows_to_llm(const llm_shard_row_t *r, int n, llm_row_t *rows) {
    for (int k = 0; k < n; k++)
        rows[k] = (llm_row_t){.table = r[k].table, .n_table = r[k].n_table, .pos = r[k].pos, .token = r[k].token};
    return 0;
}

/* 0, or -1 with llm_error(). */
static int run_work(const work_t *w) {
    shard_t *st = w->st;
    llm_row_t rows[LLM_SHARD_MAX_ROWS];
    int d = st->m.cfg.d_model, n = w->n;
    switch (w->kind) {
    case W_EMBED:
        rows_to_llm(w->rows, n, rows);
        return llm_embed(&st->m, rows, n, w->out);
    case W_ATTN:
        rows_to_llm(w->rows, n, rows);
        return llm_attn_shard(&st->m, w->layer, &st->kv, rows, n, w->x, w->out);
    case W_MLP:
        return llm_mlp_shard(&st->m, w->layer, st->col0, st->col1, n, w->x, w->out);
    case W_RESID: {
        size_t count = (size_t)n * (size_t)d;
        memcpy(w->out, w->x, count * sizeof(float));
        llm_residual_add(w->out, w->x2, count);
        return 0;
    }
    case W_LOGITS: {
        int vc = st->voc1 - st->voc0;
        llm_pick_t *picks = w->out;
        float *h = malloc(((size_t)n * (size_t)d + (size_t)n * (size_t)vc + 1) * sizeof *h);
        if (!h)
            return llm_fail("logits: out of memory for %d rows", n);
        float *logits = h + (size_t)n * (size_t)d;
        llm_final_norm(&st->m, n, w->x, h);
        int rc = llm_logits_shard(&st->m, st->voc0, st->voc1, n, h, logits);
        for (int i = 0; rc == 0 && i < n; i++)
            picks[i] = llm_argmax_shard(logits + (size_t)i * (size_t)vc, vc, st->voc0);
        free(h);
        return rc;
    }
    case W_PICK: {
        int32_t *next = w->out;
        for (int i = 0; i < n; i++) {
            llm_pick_t row[LLM_SHARD_MAX_TP];
            for (int r = 0; r < st->in.tp; r++)
                row[r] = w->picks[r][i];
            next[i] = llm_pick(row, st->in.tp);
        }
        return 0;
    }
    }
    return llm_fail("llm_shard: work of kind %d", (int)w->kind);
}

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* run_work, its time added to the shard's work counters. */
static int run_timed(const work_t *w) {
    uint64_t t0 = mono_ns();
    int rc = run_work(w);
    atomic_fetch_add_explicit(&w->st->work_ns, mono_ns() - t0, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->st->work_calls, 1, memory_order_relaxed);
    return rc;
}

/* On the emulated device's stream. */
static void stream_work(void *args) {
    const work_t *w = args;
    if (run_timed(w) != 0 && !atomic_load_explicit(&w->st->async_failed, memory_order_acquire)) {
        snprintf(w->st->async_msg, sizeof w->st->async_msg, "%s", llm_error());
        atomic_store_explicit(&w->st->async_failed, 1, memory_order_release);
    }
}

/* Runs w now (host actor) or on the stream (device actor). */
static adag_status_t submit(adag_call_h call, const work_t *w) {
    shard_t *st = w->st;
    if (atomic_load_explicit(&st->async_failed, memory_order_acquire))
        return adag_call_fail(call, "an earlier step's work on the stream failed: %s", st->async_msg);
    if (adag_call_device(call) == ADAG_DEVICE_HOST)
        return run_timed(w) ? adag_call_fail(call, "%s", llm_error()) : ADAG_OK;
#ifdef LLM_SHARD_CUDA
    if (ADAG_DEVICE_KIND(adag_call_device(call)) == ADAG_DEV_CUDA) {
        static const int kinds[] = {[W_EMBED] = LLM_CUDA_EMBED, [W_ATTN] = LLM_CUDA_ATTN, [W_MLP] = LLM_CUDA_MLP,
                                    [W_RESID] = LLM_CUDA_RESID, [W_LOGITS] = LLM_CUDA_LOGITS,
                                    [W_PICK] = LLM_CUDA_PICK};
        char err[256];
        if (!st->cuda)
            return adag_call_fail(call, "llm_shard: no CUDA state (the actor's init ran off its GPU)");
        if (llm_cuda_run(st->cuda, adag_call_stream(call), kinds[w->kind], w->layer, w->n, w->x, w->x2, w->rows,
                         w->out, w->picks, err, sizeof err))
            return adag_call_fail(call, "%s", err);
        return ADAG_OK;
    }
#endif
    return adag_call_enqueue(call, stream_work, w, sizeof *w);
}

static void shard_fini(void *state) {
    shard_t *st = state;
#ifdef LLM_SHARD_CUDA
    llm_cuda_free(st->cuda);
    st->cuda = NULL;
#endif
    llm_kv_free(&st->kv);
    llm_model_free(&st->m);
}

static adag_status_t shard_init(void *state, const void *data, size_t size) {
    shard_t *st = state;
    if (data == NULL || size != sizeof st->in)
        return adag_init_fail("llm_shard: init is %zu bytes, an llm_shard_init_t is %zu", size, sizeof st->in);
    memcpy(&st->in, data, sizeof st->in);
    llm_shard_init_t *in = &st->in;
    in->path[sizeof in->path - 1] = '\0';
    int rc = in->path[0] ? llm_st_load(&st->m, in->path) : llm_model_init(&st->m, &in->cfg, in->seed);
    if (rc)
        return adag_init_fail("llm_shard: %s", llm_error());
    const llm_config_t *c = &st->m.cfg;
    if (in->tp < 1 || in->tp > LLM_SHARD_MAX_TP || in->rank < 0 || in->rank >= in->tp ||
        llm_tp_check(c, in->tp) || in->l0 < 0 || in->l1 <= in->l0 || in->l1 > c->n_layers ||
        c->n_layers > LLM_SHARD_MAX_LAYERS || in->n_blocks < 1) {
        llm_model_free(&st->m);
        return adag_init_fail("llm_shard: rank %d of tp %d, layers [%d, %d) of %d (at most %d), %d blocks: "
                              "does not fit the model", in->rank, in->tp, in->l0, in->l1, c->n_layers,
                              LLM_SHARD_MAX_LAYERS, in->n_blocks);
    }
    int h0, h1;
    llm_shard_range(c->n_heads, in->tp, in->rank, &h0, &h1);
    llm_shard_range(c->d_ff, in->tp, in->rank, &st->col0, &st->col1);
    llm_shard_range(c->vocab, in->tp, in->rank, &st->voc0, &st->voc1);
    if (llm_kv_init(&st->kv, c, in->l0, in->l1, h0, h1, in->n_blocks)) {
        llm_model_free(&st->m);
        return adag_init_fail("llm_shard: %s", llm_error());
    }
#ifdef LLM_SHARD_CUDA
    /* the init runs on a thread bound to the actor's device: a cuda actor
     * gets its weights and cache there (a host or emu actor needs none) */
    if (in->device_kind == ADAG_DEV_CUDA) {
        llm_cuda_shard_t sh = {.l0 = in->l0, .l1 = in->l1, .h0 = h0, .h1 = h1, .col0 = st->col0, .col1 = st->col1,
                               .voc0 = st->voc0, .voc1 = st->voc1, .tp = in->tp, .n_blocks = in->n_blocks};
        char err[256];
        if (llm_cuda_init(&st->m, &sh, &st->cuda, err, sizeof err)) {
            llm_kv_free(&st->kv);
            llm_model_free(&st->m);
            return adag_init_fail("%s", err);
        }
    }
#endif
    return ADAG_OK;
}

/* Argument i as f32 [n, d_model] in the actor's memory; *n its rows. */
static adag_status_t arg_x(adag_call_h call, const shard_t *st, unsigned i, const float **x, int *n) {
    adag_value_t v;
    adag_status_t s = adag_call_arg(call, i, &v);
    if (s != ADAG_OK)
        return s;
    if (v.kind != ADAG_VALUE_TENSOR || v.dtype != ADAG_DTYPE_F32 || v.ndim != 2 ||
        v.shape[1] != st->m.cfg.d_model || v.shape[0] > LLM_SHARD_MAX_ROWS)
        return adag_call_fail(call, "argument %u: expected f32 [n <= %d, %d], got kind %d dtype %s ndim %u",
                              i, LLM_SHARD_MAX_ROWS, st->m.cfg.d_model, (int)v.kind, adag_dtype_name(v.dtype),
                              v.ndim);
    if (v.device != adag_call_device(call))
        return adag_call_fail(call, "argument %u is on device %s:%u, the actor on %s:%u", i,
                              adag_device_kind_name(ADAG_DEVICE_KIND(v.device)), ADAG_DEVICE_INDEX(v.device),
                              adag_device_kind_name(ADAG_DEVICE_KIND(adag_call_device(call))),
                              ADAG_DEVICE_INDEX(adag_call_device(call)));
    *x = v.data;
    *n = (int)v.shape[0];
    return ADAG_OK;
}

/* Argument i as the step's rows (host memory), each checked against the
 * cache here, before any work is enqueued. */
static adag_status_t arg_rows(adag_call_h call, const shard_t *st, unsigned i, const llm_shard_row_t **rows,
                              int *n) {
    adag_value_t v;
    adag_status_t s = adag_call_arg(call, i, &v);
    if (s != ADAG_OK)
        return s;
    if (v.kind != ADAG_VALUE_BYTES || v.size % sizeof(llm_shard_row_t) != 0 ||
        v.size / sizeof(llm_shard_row_t) > LLM_SHARD_MAX_ROWS)
        return adag_call_fail(call, "argument %u: rows of %zu bytes, not a whole number (<= %d) of %zu-byte rows",
                              i, v.size, LLM_SHARD_MAX_ROWS, sizeof(llm_shard_row_t));
    const llm_shard_row_t *r = v.data;
    *n = (int)(v.size / sizeof *r);
    for (int k = 0; k < *n; k++) {
        if (r[k].n_table < 0 || r[k].n_table > LLM_SHARD_MAX_TABLE)
            return adag_call_fail(call, "row %d: a block table of %d entries (at most %d)", k, r[k].n_table,
                                  LLM_SHARD_MAX_TABLE);
        if (r[k].token < 0 || r[k].token >= st->m.cfg.vocab)
            return adag_call_fail(call, "row %d: token %d outside the vocabulary of %d", k, r[k].token,
                                  st->m.cfg.vocab);
        llm_row_t row = {.table = r[k].table, .n_table = r[k].n_table, .pos = r[k].pos, .token = r[k].token};
        if (llm_kv_row_check(&st->kv, &row, k))
            return adag_call_fail(call, "%s", llm_error());
    }
    *rows = r;
    return ADAG_OK;
}

static adag_status_t out_x(adag_call_h call, const shard_t *st, int n, float **y) {
    int64_t shape[2] = {n, st->m.cfg.d_model};
    return adag_call_output_tensor(call, 0, ADAG_DTYPE_F32, 2, shape, (void **)y);
}

static adag_status_t m_embed(void *state, adag_call_h call) {
    shard_t *st = state;
    work_t w = {.kind = W_EMBED, .st = st};
    float *x;
    adag_status_t s = arg_rows(call, st, 0, &w.rows, &w.n);
    if (s == ADAG_OK)
        s = out_x(call, st, w.n, &x);
    if (s != ADAG_OK)
        return s;
    if (!st->in.is_first)
        return adag_call_fail(call, "embed on a stage that is not the first (layers [%d, %d))", st->in.l0,
                              st->in.l1);
    w.out = x;
    return submit(call, &w);
}

static adag_status_t check_layer(adag_call_h call, const shard_t *st, int layer) {
    if (layer < st->in.l0 || layer >= st->in.l1)
        return adag_call_fail(call, "layer %d is not in this stage's [%d, %d)", layer, st->in.l0, st->in.l1);
    return ADAG_OK;
}

static adag_status_t do_attn(shard_t *st, adag_call_h call, int layer) {
    work_t w = {.kind = W_ATTN, .st = st, .layer = layer};
    float *p;
    int nr;
    adag_status_t s = check_layer(call, st, layer);
    if (s == ADAG_OK)
        s = arg_x(call, st, 0, &w.x, &w.n);
    if (s == ADAG_OK)
        s = arg_rows(call, st, 1, &w.rows, &nr);
    if (s == ADAG_OK && nr != w.n)
        return adag_call_fail(call, "attn%d: %d rows of x, %d rows", layer, w.n, nr);
    if (s == ADAG_OK)
        s = out_x(call, st, w.n, &p);
    if (s != ADAG_OK)
        return s;
    w.out = p;
    return submit(call, &w);
}

static adag_status_t do_mlp(shard_t *st, adag_call_h call, int layer) {
    work_t w = {.kind = W_MLP, .st = st, .layer = layer};
    float *p;
    adag_status_t s = check_layer(call, st, layer);
    if (s == ADAG_OK)
        s = arg_x(call, st, 0, &w.x, &w.n);
    if (s == ADAG_OK)
        s = out_x(call, st, w.n, &p);
    if (s != ADAG_OK)
        return s;
    w.out = p;
    return submit(call, &w);
}

/* x + sum: the reference adds the partials into a zeroed buffer in rank
 * order, then adds that to x once; sum is the allreduce of the partials. */
static adag_status_t m_resid(void *state, adag_call_h call) {
    shard_t *st = state;
    work_t w = {.kind = W_RESID, .st = st};
    float *y;
    int n2;
    adag_status_t s = arg_x(call, st, 0, &w.x, &w.n);
    if (s == ADAG_OK)
        s = arg_x(call, st, 1, &w.x2, &n2);
    if (s == ADAG_OK && n2 != w.n)
        return adag_call_fail(call, "resid: x has %d rows, the sum %d", w.n, n2);
    if (s == ADAG_OK)
        s = out_x(call, st, w.n, &y);
    if (s != ADAG_OK)
        return s;
    w.out = y;
    return submit(call, &w);
}

/* picks: host bytes (n llm_pick_t), published once the work ran. */
static adag_status_t m_logits(void *state, adag_call_h call) {
    shard_t *st = state;
    work_t w = {.kind = W_LOGITS, .st = st};
    adag_status_t s = arg_x(call, st, 0, &w.x, &w.n);
    if (s != ADAG_OK)
        return s;
    if (!st->in.is_last)
        return adag_call_fail(call, "logits on a stage that is not the last (layers [%d, %d))", st->in.l0,
                              st->in.l1);
    s = adag_call_output(call, 0, (size_t)w.n * sizeof(llm_pick_t), &w.out);
    if (s != ADAG_OK)
        return s;
    return submit(call, &w);
}

/* pick<tp>(picks of rank 0 .. tp-1) -> i32 [n]. */
static adag_status_t m_pick(void *state, adag_call_h call) {
    shard_t *st = state;
    work_t w = {.kind = W_PICK, .st = st};
    size_t size = 0;
    for (int r = 0; r < st->in.tp; r++) {
        adag_value_t v;
        adag_status_t s = adag_call_arg(call, (unsigned)r, &v);
        if (s != ADAG_OK)
            return s;
        if (v.size % sizeof(llm_pick_t) != 0 || (r > 0 && v.size != size))
            return adag_call_fail(call, "pick: rank %d's picks are %zu bytes (rank 0's %zu, %zu each)", r, v.size,
                                  size, sizeof(llm_pick_t));
        size = v.size;
        w.picks[r] = v.data;
    }
    int64_t n = (int64_t)(size / sizeof(llm_pick_t));
    w.n = (int)n;
    adag_status_t s = adag_call_output_tensor(call, 0, ADAG_DTYPE_I32, 1, &n, &w.out);
    if (s != ADAG_OK)
        return s;
    return submit(call, &w);
}

/* work_stats() -> bytes, an llm_shard_work_stats_t: the time the actor's
 * work took so far (in the method on a host actor, on the stream on an emu
 * actor; CUDA kernels run asynchronously and are not timed: zeros). */
static adag_status_t m_work_stats(void *state, adag_call_h call) {
    shard_t *st = state;
    llm_shard_work_stats_t ws = {.ns = atomic_load_explicit(&st->work_ns, memory_order_relaxed),
                                 .calls = atomic_load_explicit(&st->work_calls, memory_order_relaxed)};
    return adag_call_set_output(call, 0, &ws, sizeof ws);
}

#define LAYER(L)                                                                                                  \
    static adag_status_t m_attn##L(void *state, adag_call_h call) { return do_attn(state, call, L); }           \
    static adag_status_t m_mlp##L(void *state, adag_call_h call) { return do_mlp(state, call, L); }
LAYER(0) LAYER(1) LAYER(2) LAYER(3) LAYER(4) LAYER(5) LAYER(6) LAYER(7)
LAYER(8) LAYER(9) LAYER(10) LAYER(11) LAYER(12) LAYER(13) LAYER(14) LAYER(15)
#define LAYER_DEFS(L) {"attn" #L, m_attn##L, 2, 1}, {"mlp" #L, m_mlp##L, 1, 1}

static const adag_method_def_t shard_methods[] = {
    {"embed", m_embed, 1, 1},
    {"resid", m_resid, 2, 1},
    {"work_stats", m_work_stats, 0, 1},
    {"logits", m_logits, 1, 1},
    {"pick1", m_pick, 1, 1}, {"pick2", m_pick, 2, 1}, {"pick3", m_pick, 3, 1}, {"pick4", m_pick, 4, 1},
    {"pick5", m_pick, 5, 1}, {"pick6", m_pick, 6, 1}, {"pick7", m_pick, 7, 1}, {"pick8", m_pick, 8, 1},
    LAYER_DEFS(0), LAYER_DEFS(1), LAYER_DEFS(2), LAYER_DEFS(3), LAYER_DEFS(4), LAYER_DEFS(5),
    LAYER_DEFS(6), LAYER_DEFS(7), LAYER_DEFS(8), LAYER_DEFS(9), LAYER_DEFS(10), LAYER_DEFS(11),
    LAYER_DEFS(12), LAYER_DEFS(13), LAYER_DEFS(14), LAYER_DEFS(15),
};

static const adag_class_def_t shard_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "llm_shard",
    .state_size = sizeof(shard_t),
    .init = shard_init,
    .fini = shard_fini,
    .methods = shard_methods,
    .nmethods = sizeof shard_methods / sizeof shard_methods[0],
};

ADAG_MODULE(&shard_class);

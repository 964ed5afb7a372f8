/* examples/llm/model.h: a small decoder-only transformer in plain C11 (float32),
 * written as functions over one tensor-parallel shard so that sharded actors
 * and the single-process reference (llm_ref_*) compute bit-identical results.
 *
 * Model: byte vocabulary (256), RMSNorm before attention and before the MLP
 * and a final RMSNorm, RoPE on q and k (pairs (2i, 2i+1)), causal multi-head
 * attention over a paged KV cache, SwiGLU MLP, output head tied to tok_emb,
 * greedy decoding (max logit, lowest index on ties).
 *
 * Matrices are row-major [out, in] (y[o] = sum_i W[o*in + i] * x[i]):
 *   tok_emb            [vocab, d_model]
 *   layers.L.attn_norm [d_model]
 *   layers.L.wq/wk/wv  [n_heads*head_dim, d_model]   (row h*head_dim+j: head h)
 *   layers.L.wo        [d_model, n_heads*head_dim]
 *   layers.L.mlp_norm  [d_model]
 *   layers.L.w_gate    [d_ff, d_model]
 *   layers.L.w_up      [d_ff, d_model]
 *   layers.L.w_down    [d_model, d_ff]
 *   final_norm         [d_model]
 *
 * Sharding contract (tensor parallelism of degree tp, rank r):
 *   attention: heads [r*H/tp, (r+1)*H/tp); the rank's partial output is
 *     wo[:, its heads' columns] . attn_out(its heads) (llm_attn_shard);
 *   MLP: d_ff columns [r*F/tp, (r+1)*F/tp); partial = w_down[:, its columns] .
 *     (silu(gate) * up)(its columns) (llm_mlp_shard);
 *   the partials are summed in rank order into a zeroed buffer
 *     (acc = 0; acc += p_0; ...; acc += p_{tp-1}: llm_acc_add), then added to
 *     the residual once (llm_residual_add);
 *   head: vocab rows [r*V/tp, (r+1)*V/tp) (llm_logits_shard); each rank's
 *     (max, index) pair (llm_argmax_shard) is combined in rank order
 *     (llm_pick): the max value, the lowest global index on ties.
 *
 * Errors: functions returning int give 0 or -1; the message (naming what
 * and where) is in llm_error() of the calling thread. */
#ifndef LLM_MODEL_H
#define LLM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define LLM_VOCAB 256
#define LLM_KV_BLOCK 16 /* tokens per KV cache block */

typedef struct llm_config {
    int vocab;    /* 256 (bytes) */
    int d_model;  /* 256 */
    int n_layers; /* 4 */
    int n_heads;  /* 8 */
    int head_dim; /* d_model / n_heads = 32 */
    int d_ff;     /* 688 */
    float norm_eps;   /* 1e-5 */
    float rope_theta; /* 10000 */
} llm_config_t;

typedef struct llm_layer {
    float *attn_norm, *wq, *wk, *wv, *wo, *mlp_norm, *w_gate, *w_up, *w_down;
} llm_layer_t;

typedef struct llm_model {
    llm_config_t cfg;
    float *tok_emb;
    llm_layer_t *layers; /* cfg.n_layers */
    float *final_norm;
    float *data;     /* every tensor, one allocation, in llm_tensor order */
    size_t n_floats;
} llm_model_t;

/* The message of the last failure on this thread. */
const char *llm_error(void);
/* Sets llm_error() (printf format); returns -1. */
int llm_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The default configuration (the numbers in the comments above). */
void llm_config_default(llm_config_t *cfg);
/* Refuses a configuration that does not fit the model (head_dim even,
 * n_heads*head_dim == d_model, vocab 256, positive sizes). */
int llm_config_check(const llm_config_t *cfg);
/* Whether tp divides the heads, d_ff and the vocabulary (-1 if not). */
int llm_tp_check(const llm_config_t *cfg, int tp);

/* The tensors, in file and memory order: 1 + 9*n_layers + 1. */
#define LLM_MAX_NAME 48
typedef struct llm_tensor {
    char name[LLM_MAX_NAME];
    int ndim;           /* 1 or 2 */
    int64_t shape[2];
    size_t count;       /* elements */
    float *data;        /* in the model (NULL for llm_tensor_info on a config) */
} llm_tensor_t;
int llm_tensor_count(const llm_config_t *cfg);
/* Tensor i of cfg (data set when m is not NULL). */
void llm_tensor_info(const llm_config_t *cfg, const llm_model_t *m, int i, llm_tensor_t *t);

/* Allocates the tensors of cfg (zeroed). */
int llm_model_alloc(llm_model_t *m, const llm_config_t *cfg);
/* Allocates and fills the weights from seed: tensor i (llm_tensor order) is
 * a splitmix64 stream with state seed + (i+1)*0x9E3779B97F4A7C15; each value
 * u = (next() >> 40) / 2^24 in [0,1), w = (2u-1) * scale: scale 1/sqrt(fan_in)
 * for matrices (fan_in = in), 0.02 for tok_emb (small next to the layers'
 * outputs, so the tied head does not just echo the input byte); norm weights
 * 1 + 0.1*(2u-1). */
int llm_model_init(llm_model_t *m, const llm_config_t *cfg, uint64_t seed);
void llm_model_free(llm_model_t *m);

/* ---- the paged KV cache ----
 * One cache holds n_blocks blocks for layers [layer_begin, layer_end) and
 * heads [head_begin, head_end) (one shard of one stage). Layout of k and v:
 * [layer - layer_begin][block][head - head_begin][slot 0..15][head_dim].
 * A request's block table maps position p to block table[p / 16], slot p % 16. */
typedef struct llm_kv {
    int layer_begin, layer_end, head_begin, head_end, head_dim, n_blocks;
    float *k, *v;
} llm_kv_t;
int llm_kv_init(llm_kv_t *kv, const llm_config_t *cfg, int layer_begin, int layer_end, int head_begin,
                int head_end, int n_blocks);
void llm_kv_free(llm_kv_t *kv);
/* The head_dim floats of K (or V) of (layer, block, head, slot). */
float *llm_kv_k(const llm_kv_t *kv, int layer, int block, int head, int slot);
float *llm_kv_v(const llm_kv_t *kv, int layer, int block, int head, int slot);

/* The position of a padding row: a row that fills a batch up to its static
 * size. Its token is embedded and goes through every layer like any row
 * (its result is ignored), but attention neither reads nor writes the cache
 * for it (its partial is zeros) and its table is not looked at. */
#define LLM_ROW_PAD (-1)

/* One row of a batch: a token of a request at a position. The request's
 * block table must cover pos (pos / 16 < n_table). In one batch, the rows of
 * one request are consecutive positions in increasing order (a prefill) or
 * one decode token; positions before a request's first row in the batch are
 * already in the cache. */
typedef struct llm_row {
    const int32_t *table; /* block ids of the request */
    int n_table;
    int pos;
    int token;
} llm_row_t;

/* Whether row i fits the cache: a padding row, or a position its block
 * table covers with block ids of the cache (-1 with llm_error() if not). */
int llm_kv_row_check(const llm_kv_t *kv, const llm_row_t *r, int i);

/* x[n, d_model] = tok_emb[token of each row]. */
int llm_embed(const llm_model_t *m, const llm_row_t *rows, int n, float *x);
/* One shard's attention of `layer` for n rows: RMSNorm(x), q/k/v of the
 * cache's heads (kv->head_begin..head_end), RoPE, K/V written to the cache at
 * each row's position, attention over positions 0..pos of the row's request,
 * and the partial output projection over those heads: partial[n, d_model]
 * (overwritten). */
int llm_attn_shard(const llm_model_t *m, int layer, llm_kv_t *kv, const llm_row_t *rows, int n, const float *x,
                   float *partial);
/* One shard's MLP of `layer`: RMSNorm(x), SwiGLU over d_ff columns
 * [col_begin, col_end), the partial down projection: partial[n, d_model]. */
int llm_mlp_shard(const llm_model_t *m, int layer, int col_begin, int col_end, int n, const float *x,
                  float *partial);
/* acc[i] += p[i] (one rank's partial, in rank order after a zeroed acc). */
void llm_acc_add(float *acc, const float *p, size_t n);
/* x[i] += acc[i] (the residual add, once after the sum). */
void llm_residual_add(float *x, const float *acc, size_t n);
/* h[n, d_model] = RMSNorm(x) with final_norm. */
void llm_final_norm(const llm_model_t *m, int n, const float *x, float *h);
/* logits[n, vocab_end - vocab_begin] = h . tok_emb[vocab_begin..vocab_end)^T. */
int llm_logits_shard(const llm_model_t *m, int vocab_begin, int vocab_end, int n, const float *h, float *logits);

typedef struct llm_pick {
    float value;
    int index; /* global token id */
} llm_pick_t;
/* The max of logits[0..count) (lowest index on ties) as a global index. */
llm_pick_t llm_argmax_shard(const float *logits, int count, int vocab_begin);
/* Combines the shards' picks in rank order: max value, lowest index on ties. */
int llm_pick(const llm_pick_t *picks, int tp);

/* Shard ranges of rank r of tp (begin inclusive, end exclusive). */
void llm_shard_range(int total, int tp, int r, int *begin, int *end);

/* ---- the single-process reference ----
 * kvs: tp caches, cache r holding rank r's heads of every layer.
 * llm_ref_init_kvs makes them (n_blocks each); llm_ref_free_kvs frees. */
int llm_ref_init_kvs(const llm_model_t *m, int tp, int n_blocks, llm_kv_t *kvs);
void llm_ref_free_kvs(llm_kv_t *kvs, int tp);
/* The whole model for n rows, every shard in rank order, partials summed in
 * rank order: x[n, d_model] is the last hidden state (before final_norm). */
int llm_forward_tokens(const llm_model_t *m, int tp, llm_kv_t *kvs, const llm_row_t *rows, int n, float *x);
/* llm_forward_tokens, then for each row its logits (logits[n, vocab], may
 * be NULL; computed shard by shard) and greedy next token (next[n], may be
 * NULL; picks combined in rank order). */
int llm_ref_step(const llm_model_t *m, int tp, llm_kv_t *kvs, const llm_row_t *rows, int n, float *logits,
                 int *next);
/* Prefill the prompt (one batch), then greedy decode: out[max_new_tokens]
 * receives the generated tokens. n_prompt >= 1. */
int llm_ref_generate(const llm_model_t *m, int tp, const uint8_t *prompt, int n_prompt, int max_new_tokens,
                     int *out);

#endif

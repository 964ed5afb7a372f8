/* examples/llm/serve_graph.h: the model of model.h sharded over adag actors
 * (tensor parallel tp x pipeline parallel pp), one batch step per DAG
 * execution.
 *
 * The actor class "llm_shard" (stage_actors.c, built as
 * build/examples/llm/libllm_shard.so) is one rank of one pipeline stage: it
 * holds the weights and its own paged KV cache (its layers, its heads). Its
 * init bytes are an llm_shard_init_t. Its methods, all on host tensors:
 *
 *   embed(rows)          -> x        f32 [n, d_model] (first stage)
 *   attn<L>(x, rows)     -> partial  f32 [n, d_model]: the rank's attention
 *                                     partial of layer L (K/V written to its
 *                                     cache); one method per layer index,
 *                                     attn0 .. attn<LLM_SHARD_MAX_LAYERS-1>
 *   mlp<L>(x)            -> partial  f32 [n, d_model]: the MLP partial of L
 *   resid(x, sum)        -> x + sum  f32 [n, d_model]
 *   logits(x)            -> picks    bytes, n llm_pick_t of the rank's vocab
 *                                     range (last stage)
 *   pick<T>(picks_0..T-1)-> next     i32 [n]: the picks combined in rank
 *                                     order (T = tp, pick1 .. pick8)
 *
 *   work_stats()         -> bytes, an llm_shard_work_stats_t: the time the
 *                                     actor's work took, summed (the bench's
 *                                     compute measured inside the actors)
 *
 * rows: bytes, n llm_shard_row_t (one per token of the batch). */
#ifndef LLM_SERVE_GRAPH_H
#define LLM_SERVE_GRAPH_H

#include <adag.h>
#include <stdint.h>

#include "model.h"

#define LLM_SHARD_MAX_LAYERS 16
#define LLM_SHARD_MAX_TP 8
#define LLM_SHARD_MAX_TABLE 16 /* blocks per request: 256 positions */
#define LLM_SHARD_MAX_ROWS 256 /* rows per step */

/* One row of a step, as the driver sends it. */
typedef struct llm_shard_row {
    int32_t pos, token, n_table;
    int32_t table[LLM_SHARD_MAX_TABLE];
} llm_shard_row_t;

/* What work_stats returns. */
typedef struct llm_shard_work_stats {
    uint64_t ns, calls;
} llm_shard_work_stats_t;

/* The init bytes of an "llm_shard" actor. */
typedef struct llm_shard_init {
    llm_config_t cfg;   /* with seed weights; ignored with a path */
    uint64_t seed;
    char path[256];     /* a .safetensors file, or "" for llm_model_init(cfg, seed) */
    int32_t l0, l1;     /* the stage's layers [l0, l1) */
    int32_t is_first, is_last;
    int32_t tp, rank;
    int32_t n_blocks;   /* KV cache blocks of this actor */
    int32_t device_kind; /* ADAG_DEV_* of the actor's device (0: host) */
} llm_shard_init_t;

#define LLM_SHARD_MAX_STAGES 8

/* The sharded model's actors: stage s, rank r is actors[s * tp + r]. */
typedef struct llm_serve {
    adag_runtime_h rt;
    adag_actor_h actors[LLM_SHARD_MAX_STAGES * LLM_SHARD_MAX_TP];
    llm_config_t cfg;
    int tp, pp;
    adag_dag_h dag; /* llm_serve_build's DAG (LLM_SHARD_MAX_ROWS rows), else NULL */
} llm_serve_t;

typedef struct llm_serve_params {
    const char *module;       /* path of libllm_shard.so */
    adag_placement_t placement; /* ADAG_PLACEMENT_PROCESS or _THREAD (class registered) */
    llm_config_t cfg;
    uint64_t seed;
    const char *path;         /* weights file or NULL (seed) */
    int tp, pp, n_blocks;
    const char *name;         /* actor name prefix ("llm"): actors <name>_s<S>r<R> */
    /* NULL: host actors. "emu": actor (s, r) on the emulated device
     * emu:<s*tp + r>, its tensors in device memory, its work in stream order.
     * "cuda": actor (s, r) on cuda:<r> (the stages share the GPUs; tp needs
     * tp GPUs), with module = libllm_shard_cuda.so. */
    const char *device;
} llm_serve_params_t;

/* Creates the tp*pp actors in rt (no DAG yet). -1 with llm_error() (naming
 * the actor and adag_last_error()). The actors go with the runtime. */
int llm_serve_create(adag_runtime_h rt, const llm_serve_params_t *p, llm_serve_t *s);

/* Compiles a step DAG over s's actors for batches of exactly `rows` rows
 * (1..LLM_SHARD_MAX_ROWS; static shapes: every channel's slot is sized for
 * `rows`, f32 [rows, d_model] between the methods): input 0 the rows
 * (bytes, rows * sizeof(llm_shard_row_t)), output 0 the next token per row
 * (i32 [rows]). max_inflight executions may be in flight (pp keeps every
 * stage busy). Several DAGs over the same actors share the actors' KV
 * caches and their communicators. name names the DAG in stats and traces.
 * -1 with llm_error(). */
int llm_serve_compile(llm_serve_t *s, int rows, unsigned max_inflight, const char *name, adag_dag_h *dag);

/* llm_serve_create, then one DAG for up to LLM_SHARD_MAX_ROWS rows with
 * per-execution shapes (s->dag), max_inflight 1. */
int llm_serve_build(adag_runtime_h rt, const llm_serve_params_t *p, llm_serve_t *s);
/* One step on s->dag: rows[0..n) in, next[0..n) out (greedy next token per
 * row; a padding row's is meaningless). */
int llm_serve_step(llm_serve_t *s, const llm_shard_row_t *rows, int n, int *next);
/* One step on a DAG of llm_serve_compile: starts it (*ref) ... */
int llm_serve_start(adag_dag_h dag, const llm_shard_row_t *rows, int n, adag_ref_t *ref);
/* ... and waits for its n next tokens (timeout_ms; -1 forever), releasing
 * the ref whatever happens. */
int llm_serve_finish(adag_dag_h dag, adag_ref_t ref, int n, int *next, int timeout_ms);
/* Destroys s->dag (the actors go with the runtime). */
void llm_serve_free(llm_serve_t *s);

#endif

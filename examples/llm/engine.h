/* examples/llm/engine.h: a serving engine over the sharded model
 * (serve_graph.h): requests in, tokens out as they are decided.
 *
 * What is compiled once: the tp x pp actors (each holding the weights and
 * its paged KV cache) and, over those same actors, one step DAG per batch
 * size ("bucket"): decode buckets 1, 2, 4, .., 64 rows and prefill buckets
 * 16, 32, .. token_budget rows. Every DAG has static shapes and
 * max_inflight = pp.
 *
 * What each step sends: the rows of the batch (llm_shard_row_t: token,
 * position, the request's block table), padded with LLM_ROW_PAD rows up to
 * the bucket; what comes back: one next token per row. The KV cache never
 * leaves the actors.
 *
 * The scheduler (on the engine's own thread) admits waiting requests in
 * arrival order while KV blocks are free: a request reserves, when admitted,
 * the blocks of its whole length (prompt + max_tokens - 1 positions), so a
 * running request never runs out; a request that does not fit waits (it is
 * queued, never preempted). Each step takes the running requests that have
 * no step in flight: one decode row each, then prompt chunks (chunked
 * prefill) up to token_budget rows. A step with prompt rows runs on the
 * smallest prefill bucket that holds its rows, a decode-only step on the
 * smallest decode bucket. With pp stages, pp steps are in flight at once
 * (micro-batches of disjoint requests), so every stage has work.
 *
 * Threads: llm_engine_submit, _cancel, _metrics and _drain may be called
 * from any thread. The token callback runs on the engine's thread, without
 * the engine's lock held (it may call _submit or _cancel); it must not
 * block for long: the next steps wait for it. */
#ifndef LLM_ENGINE_H
#define LLM_ENGINE_H

#include <adag.h>
#include <stdint.h>

#include "serve_graph.h"

#define LLM_ENGINE_MAX_DECODE 64 /* the largest decode bucket */

/* Why a request ended. */
typedef enum llm_finish {
    LLM_FINISH_NONE = 0,  /* not ended: a token event */
    LLM_FINISH_LENGTH,    /* max_tokens generated */
    LLM_FINISH_CANCELLED, /* llm_engine_cancel, or the engine was destroyed first */
    LLM_FINISH_ERROR,     /* a step failed (message in the event) */
} llm_finish_t;

const char *llm_finish_name(llm_finish_t f); /* "length", "cancelled", "error", "" */

/* One event of a request, on the engine's thread: a generated token
 * (token >= 0, finish NONE), then exactly one end event (token -1, finish
 * set; message non-NULL with LLM_FINISH_ERROR). After the end event the
 * request's id is unknown to the engine and its blocks are free. */
typedef void (*llm_event_fn)(void *user, void *req_user, uint64_t id, int token, llm_finish_t finish,
                             const char *message);

typedef struct llm_engine_params {
    llm_serve_params_t serve; /* the model, tp, pp, n_blocks per actor */
    int token_budget;         /* rows per step: 16, 32, 64, 128 or 256; default 64 */
    int max_queue;            /* waiting requests at most; default 256 */
    llm_event_fn on_event;
    void *user;
} llm_engine_params_t;

typedef struct llm_engine llm_engine_t;

/* Creates the actors in rt, compiles the bucket DAGs and starts the
 * engine's thread. -1 with llm_error(). */
int llm_engine_create(adag_runtime_h rt, const llm_engine_params_t *p, llm_engine_t **out);

enum {
    LLM_ENGINE_EFULL = -2,     /* max_queue requests wait already */
    LLM_ENGINE_EDRAINING = -3, /* llm_engine_drain was called, or a step failed */
};
/* Queues a request: prompt[0..n) (bytes = tokens, 1 <= n), max_tokens >= 1,
 * n + max_tokens - 1 <= llm_engine_max_len(). 0 with *id; -1 with
 * llm_error() naming the bad field; LLM_ENGINE_EFULL; LLM_ENGINE_EDRAINING.
 * The prompt is copied. */
int llm_engine_submit(llm_engine_t *e, const uint8_t *prompt, int n, int max_tokens, void *req_user,
                      uint64_t *id);
/* Cancels request id (no-op when it already ended). Its end event
 * (CANCELLED) comes once no step of it is in flight, its blocks freed. */
void llm_engine_cancel(llm_engine_t *e, uint64_t id);
/* Positions one request may use: min(LLM_SHARD_MAX_TABLE blocks, the
 * cache) * LLM_KV_BLOCK. */
int llm_engine_max_len(const llm_engine_t *e);

typedef struct llm_engine_metrics {
    uint64_t requests;         /* submitted and accepted */
    uint64_t finished[4];      /* by llm_finish_t */
    uint64_t rejected_full;    /* LLM_ENGINE_EFULL answers */
    uint64_t prompt_tokens, generated_tokens;
    uint64_t steps_prefill, steps_decode;
    uint64_t rows, padded_rows; /* real rows and padding rows sent */
    uint64_t waited_for_blocks; /* requests admitted later than they could have
                                   been for want of free blocks */
    int rows_max;               /* the most real rows of one step */
    int in_flight_max;          /* the most steps in flight at once (pp at most) */
    double step_seconds;        /* summed over steps, start to result */
    int waiting, running, in_flight;
    int blocks_used, blocks_total;
    int draining, failed;
} llm_engine_metrics_t;
void llm_engine_metrics(llm_engine_t *e, llm_engine_metrics_t *m);

/* The engine's DAGs (for adag_dag_stats_take and friends): at most max,
 * returns the count. Valid until llm_engine_destroy. */
int llm_engine_dags(llm_engine_t *e, adag_dag_h *dags, int max);

/* The actor of pipeline stage `stage`, tensor-parallel rank `rank` (NULL
 * outside the grid). */
adag_actor_h llm_engine_actor(llm_engine_t *e, int stage, int rank);

/* Stops admitting (submit answers LLM_ENGINE_EDRAINING), lets waiting and
 * running requests finish, and returns 0 once none is left and every end
 * event has been delivered (its callback returned), or -1 when timeout_ms
 * (-1: forever) passed first. */
int llm_engine_drain(llm_engine_t *e, int timeout_ms);
/* Stops the thread (requests left end CANCELLED), destroys the DAGs. The
 * actors go with the runtime. */
void llm_engine_destroy(llm_engine_t *e);

#endif

/* examples/llm/shard_cuda.h: the CUDA work of an "llm_shard" actor on a
 * "cuda:N" device (stage_actors.c built with -DLLM_SHARD_CUDA, linked with
 * shard_kernels.cu into libllm_shard_cuda.so). The weights and the rank's
 * KV cache live in device memory; every method's work is a few simple
 * kernels (one thread per output, the C loops' summation order, no fused
 * multiply-adds) launched on the stream the method is given.
 *
 * Same math as model.c; expf, sqrtf and the double-precision RoPE angles
 * of the CUDA math library may differ from glibc's in the last bit, so the
 * tokens are compared with the reference (a last-bit difference flips a
 * greedy pick only on a near tie), not the hidden states.
 *
 * Every function returns 0, or -1 with the CUDA error (what and where) in
 * err. */
#ifndef LLM_SHARD_CUDA_H
#define LLM_SHARD_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "serve_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llm_cuda llm_cuda_t;

/* The rank's slices, as stage_actors.c computed them. */
typedef struct llm_cuda_shard {
    int l0, l1;     /* layers of the stage */
    int h0, h1;     /* heads of the rank */
    int col0, col1; /* d_ff columns of the rank */
    int voc0, voc1; /* vocabulary rows of the rank */
    int tp, n_blocks;
} llm_cuda_shard_t;

/* Uploads every weight of m (one allocation, m->data's layout) and
 * allocates the cache and the scratch for LLM_SHARD_MAX_ROWS rows. */
int llm_cuda_init(const llm_model_t *m, const llm_cuda_shard_t *shard, llm_cuda_t **out, char *err, size_t errlen);
void llm_cuda_free(llm_cuda_t *c);

enum { LLM_CUDA_EMBED, LLM_CUDA_ATTN, LLM_CUDA_MLP, LLM_CUDA_RESID, LLM_CUDA_LOGITS, LLM_CUDA_PICK };

/* One method's work on `stream` (a cudaStream_t). x, x2 and out are device
 * memory, but: rows (host, copied to the device on the stream), LOGITS'
 * out (host: n llm_pick_t, copied back on the stream) and PICK's picks
 * (host, tp arrays of n). */
int llm_cuda_run(llm_cuda_t *c, void *stream, int kind, int layer, int n, const float *x, const float *x2,
                 const llm_shard_row_t *rows, void *out, const llm_pick_t *const *picks, char *err,
                 size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

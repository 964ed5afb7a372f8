/*
 * The "tp_mlp" class of examples/modules/tp_mlp.c (emulated device) and
 * tp_mlp_kernel.cu (CUDA): one tensor-parallel shard of an MLP block, shared
 * with examples/tp_pp.c and tests/test_tp_pp.c, which compute the whole
 * block with the same functions to check every element they get back.
 *
 * The block of pipeline stage s: y = relu(x . W1) . W2, x and y [B, D],
 * W1 [D, H], W2 [H, D]. Shard t of T holds the columns [t*H/T, (t+1)*H/T)
 * of W1 and the same rows of W2 (Megatron's column-parallel then
 * row-parallel split): its partial relu(x . W1[:, cols]) . W2[cols, :] is
 * [B, D], and the sum of the T partials is y, since relu works elementwise
 * on the hidden columns each shard owns whole.
 *
 * Weights are -1, 0 or 1 (a quarter of them nonzero, so that sums grow
 * slowly through the stages), drawn from (seed, stage, matrix, row,
 * column), so any shard computes its slice alone, and the inputs are small
 * integers too: every product and every sum is then an integer, and while
 * each sum of absolute values stays below 2^24 (tp_mlp_bound checks it)
 * f32 holds every partial sum exactly, in any order. So the shards, the
 * allreduce's order of summation and the single-threaded reference agree
 * bit for bit.
 */
#ifndef ADAG_EXAMPLE_TP_MLP_H
#define ADAG_EXAMPLE_TP_MLP_H

#include <stddef.h>
#include <stdint.h>

#define TP_MLP_MAX_DIM 65536
/* f32 holds every integer of magnitude up to 2^24 */
#define TP_MLP_EXACT_LIMIT 16777216.0

/* The init bytes of a "tp_mlp" actor. */
typedef struct {
    int32_t stage;  /* pipeline stage: picks the weights */
    int32_t shard;  /* 0..shards-1 */
    int32_t shards; /* T; divides hidden */
    int32_t dim;    /* D: the block's input and output width */
    int32_t hidden; /* H: the hidden width of the whole block */
    int32_t pad;    /* 0 */
    uint64_t seed;
} tp_mlp_init_t;

/* splitmix64's finalizer: a well-mixed 64-bit hash of z. */
static inline uint64_t tp_mlp_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Element (row, col) of matrix `which` (1: W1, 2: W2) of stage `stage`. */
static inline float tp_mlp_weight(uint64_t seed, int32_t stage, int which, uint32_t row,
                                  uint32_t col)
{
    uint64_t h = tp_mlp_mix(seed ^ tp_mlp_mix((uint64_t)(uint32_t)stage * 4u + (uint64_t)which));
    h = tp_mlp_mix(h ^ ((uint64_t)row << 32 | col));
    switch (h % 8) {
    case 0: return -1.0f;
    case 1: return 1.0f;
    default: return 0.0f;
    }
}

/* The weights of hidden columns [k0, k0 + ncols) of stage `stage`:
 * w1 [dim, ncols] (W1's columns), w2 [ncols, dim] (W2's rows), row-major. */
static inline void tp_mlp_fill_weights(uint64_t seed, int32_t stage, uint32_t dim, uint32_t k0,
                                       uint32_t ncols, float *w1, float *w2)
{
    for (uint32_t d = 0; d < dim; d++)
        for (uint32_t k = 0; k < ncols; k++)
            w1[(size_t)d * ncols + k] = tp_mlp_weight(seed, stage, 1, d, k0 + k);
    for (uint32_t k = 0; k < ncols; k++)
        for (uint32_t d = 0; d < dim; d++)
            w2[(size_t)k * dim + d] = tp_mlp_weight(seed, stage, 2, k0 + k, d);
}

/* One row: y[dim] = relu(x[dim] . w1) . w2 over ncols hidden columns,
 * with h[ncols] as scratch. */
static inline void tp_mlp_row(const float *x, float *y, uint32_t dim, uint32_t ncols,
                              const float *w1, const float *w2, float *h)
{
    for (uint32_t k = 0; k < ncols; k++)
        h[k] = 0.0f;
    for (uint32_t d = 0; d < dim; d++) {
        const float xd = x[d], *w = w1 + (size_t)d * ncols;
        for (uint32_t k = 0; k < ncols; k++)
            h[k] += xd * w[k];
    }
    for (uint32_t j = 0; j < dim; j++)
        y[j] = 0.0f;
    for (uint32_t k = 0; k < ncols; k++) {
        const float hk = h[k] > 0.0f ? h[k] : 0.0f, *w = w2 + (size_t)k * dim;
        for (uint32_t j = 0; j < dim; j++)
            y[j] += hk * w[j];
    }
}

/* rows rows of x [rows, dim] into y [rows, dim] (y != x). */
static inline void tp_mlp_rows(const float *x, float *y, uint64_t rows, uint32_t dim,
                               uint32_t ncols, const float *w1, const float *w2, float *h)
{
    for (uint64_t r = 0; r < rows; r++)
        tp_mlp_row(x + r * dim, y + r * dim, dim, ncols, w1, w2, h);
}

/* The bound behind exactness: for x_abs = |x| elementwise, replaces it
 * with a bound on |y| of the whole block (every hidden column) and returns
 * the largest sum of absolute values of any dot product it formed (the
 * hidden units' and the outputs'), which bounds every partial sum a shard,
 * the allreduce or the reference forms. Below TP_MLP_EXACT_LIMIT, f32 is
 * exact. w1_abs, w2_abs: |W1|, |W2| of the whole block; h, y: scratch of
 * hidden and dim floats. */
static inline double tp_mlp_bound(float *x_abs, uint64_t rows, uint32_t dim, uint32_t hidden,
                                  const float *w1_abs, const float *w2_abs, float *h, float *y)
{
    double worst = 0;
    for (uint64_t r = 0; r < rows; r++) {
        float *xr = x_abs + r * dim;
        /* with no negative term, h holds the hidden sums and y the output
         * sums of absolute values (exact while below the limit) */
        tp_mlp_row(xr, y, dim, hidden, w1_abs, w2_abs, h);
        for (uint32_t k = 0; k < hidden; k++)
            worst = h[k] > worst ? h[k] : worst;
        for (uint32_t j = 0; j < dim; j++) {
            worst = y[j] > worst ? y[j] : worst;
            xr[j] = y[j];
        }
    }
    return worst;
}

#endif

// examples/llm/shard_kernels.cu: the CUDA work of an "llm_shard" actor
// (shard_cuda.h). Simple kernels: one block per row, its threads over the
// outputs; every sum runs in the C reference's order on one thread. Built
// with -fmad=false (no fused multiply-adds, as the C side's -std=c11) by
// nvcc into libllm_shard_cuda.so with the shared CUDA runtime, the one the
// cuda device backend loads.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "model.h"
}
#include "shard_cuda.h"

#define THREADS 128
#define MAX_D 2048 // d_model that a block's shared row holds

typedef struct {
    const float *attn_norm, *wq, *wk, *wv, *wo, *mlp_norm, *w_gate, *w_up, *w_down;
} dev_layer_t;

struct llm_cuda {
    llm_config_t cfg;
    llm_cuda_shard_t sh;
    float *weights; // every tensor, m->data's layout
    const float *tok_emb, *final_norm;
    dev_layer_t *layers; // host array of device pointers (cfg.n_layers)
    float *k, *v;        // [layer - l0][block][head - h0][slot][head_dim]
    llm_shard_row_t *rows;
    float *q, *att, *h, *sc; // scratch
    llm_pick_t *picks;
    int32_t *next_host;
    int max_pos;
};

static int failed(cudaError_t e, const char *what, char *err, size_t errlen) {
    if (e == cudaSuccess)
        return 0;
    snprintf(err, errlen, "llm_shard cuda: %s: %s: %s", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return -1;
}

// ---- device helpers: the C loops, one thread ----

__device__ static float dev_rms_scale(const float *x, int d, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < d; i++)
        ss += x[i] * x[i];
    return 1.0f / sqrtf(ss / (float)d + eps);
}

// xn[0..d) = RMSNorm(x) * w into shared memory (the whole block)
__device__ static void dev_rmsnorm(const float *x, const float *w, int d, float eps, float *xn, float *scale) {
    if (threadIdx.x == 0)
        *scale = dev_rms_scale(x, d, eps);
    __syncthreads();
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        xn[i] = x[i] * *scale * w[i];
    __syncthreads();
}

__device__ static float dev_dot(const float *row, const float *x, int begin, int end) {
    float s = 0.0f;
    for (int i = begin; i < end; i++)
        s += row[i] * x[i];
    return s;
}

__device__ static size_t kv_off(const llm_cuda_shard_t *sh, int head_dim, int layer, int block, int head, int slot) {
    size_t nh = (size_t)(sh->h1 - sh->h0);
    return ((((size_t)(layer - sh->l0) * (size_t)sh->n_blocks + (size_t)block) * nh + (size_t)(head - sh->h0)) *
                LLM_KV_BLOCK + (size_t)slot) * (size_t)head_dim;
}

__device__ static void dev_rope(float *v, int head_dim, int pos, float theta) {
    for (int i = 0; i < head_dim / 2; i++) {
        double freq = pow((double)theta, -2.0 * i / head_dim);
        double a = (double)pos * freq;
        float c = (float)cos(a), s = (float)sin(a);
        float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
    }
}

// ---- kernels ----

__global__ static void k_embed(const llm_shard_row_t *rows, const float *tok_emb, int d, float *x) {
    const llm_shard_row_t *r = &rows[blockIdx.x];
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        x[(size_t)blockIdx.x * d + j] = tok_emb[(size_t)r->token * d + j];
}

// q of the rank's heads into q[row], K and V into the cache, RoPE on both
__global__ static void k_qkv(const llm_shard_row_t *rows, const float *x, dev_layer_t L, llm_config_t cfg,
                             llm_cuda_shard_t sh, int layer, float *q, float *kc, float *vc) {
    __shared__ float xn[MAX_D];
    __shared__ float scale;
    const llm_shard_row_t *r = &rows[blockIdx.x];
    if (r->pos == LLM_ROW_PAD)
        return;
    int d = cfg.d_model, hd = cfg.head_dim, width = (sh.h1 - sh.h0) * hd;
    dev_rmsnorm(x + (size_t)blockIdx.x * d, L.attn_norm, d, cfg.norm_eps, xn, &scale);
    int blk = r->table[r->pos / LLM_KV_BLOCK], slot = r->pos % LLM_KV_BLOCK;
    float *qi = q + (size_t)blockIdx.x * width;
    for (int o = threadIdx.x; o < width; o += blockDim.x) {
        int row = sh.h0 * hd + o, h = sh.h0 + o / hd, j = o % hd;
        qi[o] = dev_dot(L.wq + (size_t)row * d, xn, 0, d);
        size_t off = kv_off(&sh, hd, layer, blk, h, slot) + (size_t)j;
        kc[off] = dev_dot(L.wk + (size_t)row * d, xn, 0, d);
        vc[off] = dev_dot(L.wv + (size_t)row * d, xn, 0, d);
    }
    __syncthreads();
    for (int h = sh.h0 + threadIdx.x; h < sh.h1; h += blockDim.x) {
        dev_rope(qi + (size_t)(h - sh.h0) * hd, hd, r->pos, cfg.rope_theta);
        dev_rope(kc + kv_off(&sh, hd, layer, blk, h, slot), hd, r->pos, cfg.rope_theta);
    }
}

// att[row][h*hd ..] over positions 0..pos of the row's request: one thread per (row, head)
__global__ static void k_attend(const llm_shard_row_t *rows, int n, llm_config_t cfg, llm_cuda_shard_t sh, int layer,
                                const float *q, const float *kc, const float *vc, float *att, float *sc,
                                int max_pos) {
    int nh = sh.h1 - sh.h0, t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * nh)
        return;
    int i = t / nh, h = sh.h0 + t % nh, hd = cfg.head_dim, d = cfg.d_model;
    const llm_shard_row_t *r = &rows[i];
    float *o = att + (size_t)i * d + (size_t)h * hd;
    for (int j = 0; j < hd; j++)
        o[j] = 0.0f;
    if (r->pos == LLM_ROW_PAD)
        return;
    const float *qh = q + (size_t)i * nh * hd + (size_t)(h - sh.h0) * hd;
    float *s = sc + (size_t)t * (size_t)max_pos;
    float inv = 1.0f / sqrtf((float)hd), mx = -INFINITY;
    for (int p = 0; p <= r->pos; p++) {
        const float *k = kc + kv_off(&sh, hd, layer, r->table[p / LLM_KV_BLOCK], h, p % LLM_KV_BLOCK);
        float acc = 0.0f;
        for (int j = 0; j < hd; j++)
            acc += qh[j] * k[j];
        s[p] = acc * inv;
        mx = s[p] > mx ? s[p] : mx;
    }
    float sum = 0.0f;
    for (int p = 0; p <= r->pos; p++)
        sum += (s[p] = expf(s[p] - mx));
    for (int p = 0; p <= r->pos; p++) {
        const float *v = vc + kv_off(&sh, hd, layer, r->table[p / LLM_KV_BLOCK], h, p % LLM_KV_BLOCK);
        float w = s[p] / sum;
        for (int j = 0; j < hd; j++)
            o[j] += w * v[j];
    }
}

// partial[row][o] = wo[o, the rank's heads' columns] . att[row]
__global__ static void k_attn_out(const llm_shard_row_t *rows, const float *att, const float *wo, int d, int c0,
                                  int c1, float *partial) {
    const llm_shard_row_t *r = &rows[blockIdx.x];
    float *p = partial + (size_t)blockIdx.x * d;
    for (int o = threadIdx.x; o < d; o += blockDim.x)
        p[o] = r->pos == LLM_ROW_PAD ? 0.0f : dev_dot(wo + (size_t)o * d, att + (size_t)blockIdx.x * d, c0, c1);
}

// g[row][c] = silu(gate . xn) * (up . xn) for the rank's columns
__global__ static void k_mlp_up(const float *x, dev_layer_t L, llm_config_t cfg, int c0, int c1, float *g) {
    __shared__ float xn[MAX_D];
    __shared__ float scale;
    int d = cfg.d_model, f = cfg.d_ff;
    dev_rmsnorm(x + (size_t)blockIdx.x * d, L.mlp_norm, d, cfg.norm_eps, xn, &scale);
    for (int c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
        float gv = dev_dot(L.w_gate + (size_t)c * d, xn, 0, d);
        float uv = dev_dot(L.w_up + (size_t)c * d, xn, 0, d);
        g[(size_t)blockIdx.x * f + c] = gv / (1.0f + expf(-gv)) * uv;
    }
}

__global__ static void k_mlp_down(const float *g, const float *w_down, int d, int f, int c0, int c1, float *partial) {
    for (int o = threadIdx.x; o < d; o += blockDim.x)
        partial[(size_t)blockIdx.x * d + o] = dev_dot(w_down + (size_t)o * f, g + (size_t)blockIdx.x * f, c0, c1);
}

__global__ static void k_resid(const float *x, const float *sum, size_t count, float *y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        float v = x[i];
        v += sum[i];
        y[i] = v;
    }
}

// final RMSNorm, the rank's logits, their argmax (lowest index on ties)
__global__ static void k_logits(const float *x, const float *final_norm, const float *tok_emb, llm_config_t cfg,
                                int v0, int v1, float *lg, llm_pick_t *picks) {
    __shared__ float xn[MAX_D];
    __shared__ float scale;
    int d = cfg.d_model, w = v1 - v0;
    dev_rmsnorm(x + (size_t)blockIdx.x * d, final_norm, d, cfg.norm_eps, xn, &scale);
    float *row = lg + (size_t)blockIdx.x * w;
    for (int t = threadIdx.x; t < w; t += blockDim.x)
        row[t] = dev_dot(tok_emb + (size_t)(v0 + t) * d, xn, 0, d);
    __syncthreads();
    if (threadIdx.x == 0) {
        llm_pick_t p = {row[0], v0};
        for (int t = 1; t < w; t++)
            if (row[t] > p.value) {
                p.value = row[t];
                p.index = v0 + t;
            }
        picks[blockIdx.x] = p;
    }
}

// ---- the host side ----

extern "C" void llm_cuda_free(llm_cuda_t *c) {
    if (!c)
        return;
    cudaFree(c->weights);
    cudaFree(c->k);
    cudaFree(c->v);
    cudaFree(c->rows);
    cudaFree(c->q);
    cudaFree(c->att);
    cudaFree(c->h);
    cudaFree(c->sc);
    cudaFree(c->picks);
    cudaFreeHost(c->next_host);
    free(c->layers);
    free(c);
}

#define DEV(p) (c->weights + ((p) - m->data))

extern "C" int llm_cuda_init(const llm_model_t *m, const llm_cuda_shard_t *shard, llm_cuda_t **out, char *err,
                             size_t errlen) {
    *out = NULL;
    const llm_config_t *cfg = &m->cfg;
    if (cfg->d_model > MAX_D) {
        snprintf(err, errlen, "llm_shard cuda: d_model %d: the kernels hold at most %d", cfg->d_model, MAX_D);
        return -1;
    }
    llm_cuda_t *c = (llm_cuda_t *)calloc(1, sizeof *c);
    if (!c || !(c->layers = (dev_layer_t *)calloc((size_t)cfg->n_layers, sizeof *c->layers))) {
        free(c);
        snprintf(err, errlen, "llm_shard cuda: out of host memory");
        return -1;
    }
    c->cfg = *cfg;
    c->sh = *shard;
    c->max_pos = LLM_SHARD_MAX_TABLE * LLM_KV_BLOCK;
    int rows = LLM_SHARD_MAX_ROWS, d = cfg->d_model, nh = shard->h1 - shard->h0;
    size_t kv = (size_t)(shard->l1 - shard->l0) * (size_t)shard->n_blocks * (size_t)nh * LLM_KV_BLOCK *
                (size_t)cfg->head_dim * sizeof(float);
    size_t lg = (size_t)(shard->voc1 - shard->voc0) * rows;
    if (failed(cudaMalloc((void **)&c->weights, m->n_floats * sizeof(float)), "cudaMalloc (weights)", err, errlen) ||
        failed(cudaMemcpy(c->weights, m->data, m->n_floats * sizeof(float), cudaMemcpyHostToDevice),
               "cudaMemcpy (weights)", err, errlen) ||
        failed(cudaMalloc((void **)&c->k, kv), "cudaMalloc (K cache)", err, errlen) ||
        failed(cudaMalloc((void **)&c->v, kv), "cudaMalloc (V cache)", err, errlen) ||
        failed(cudaMalloc((void **)&c->rows, (size_t)rows * sizeof(llm_shard_row_t)), "cudaMalloc (rows)", err,
               errlen) ||
        failed(cudaMalloc((void **)&c->q, (size_t)rows * (size_t)d * sizeof(float)), "cudaMalloc (q)", err, errlen) ||
        failed(cudaMalloc((void **)&c->att, (size_t)rows * (size_t)d * sizeof(float)), "cudaMalloc (att)", err,
               errlen) ||
        failed(cudaMalloc((void **)&c->h, ((size_t)rows * (size_t)cfg->d_ff + lg) * sizeof(float)), "cudaMalloc (h)",
               err, errlen) ||
        failed(cudaMalloc((void **)&c->sc, (size_t)rows * (size_t)nh * (size_t)c->max_pos * sizeof(float)),
               "cudaMalloc (scores)", err, errlen) ||
        failed(cudaMalloc((void **)&c->picks, (size_t)rows * sizeof(llm_pick_t)), "cudaMalloc (picks)", err,
               errlen) ||
        failed(cudaMallocHost((void **)&c->next_host, (size_t)rows * sizeof(int32_t)), "cudaMallocHost (next)", err,
               errlen)) {
        llm_cuda_free(c);
        return -1;
    }
    c->tok_emb = DEV(m->tok_emb);
    c->final_norm = DEV(m->final_norm);
    for (int l = 0; l < cfg->n_layers; l++) {
        const llm_layer_t *L = &m->layers[l];
        c->layers[l] = (dev_layer_t){DEV(L->attn_norm), DEV(L->wq), DEV(L->wk), DEV(L->wv), DEV(L->wo),
                                     DEV(L->mlp_norm), DEV(L->w_gate), DEV(L->w_up), DEV(L->w_down)};
    }
    *out = c;
    return 0;
}

extern "C" int llm_cuda_run(llm_cuda_t *c, void *stream_, int kind, int layer, int n, const float *x,
                            const float *x2, const llm_shard_row_t *rows, void *out,
                            const llm_pick_t *const *picks, char *err, size_t errlen) {
    cudaStream_t stream = (cudaStream_t)stream_;
    const llm_config_t *cfg = &c->cfg;
    const llm_cuda_shard_t *sh = &c->sh;
    int d = cfg->d_model, hd = cfg->head_dim;
    if (n <= 0)
        return 0;
    if (rows && failed(cudaMemcpyAsync(c->rows, rows, (size_t)n * sizeof *rows, cudaMemcpyHostToDevice, stream),
                       "cudaMemcpyAsync (rows)", err, errlen))
        return -1;
    switch (kind) {
    case LLM_CUDA_EMBED:
        k_embed<<<n, THREADS, 0, stream>>>(c->rows, c->tok_emb, d, (float *)out);
        break;
    case LLM_CUDA_ATTN: {
        dev_layer_t L = c->layers[layer];
        int nh = sh->h1 - sh->h0;
        k_qkv<<<n, THREADS, 0, stream>>>(c->rows, x, L, *cfg, *sh, layer, c->q, c->k, c->v);
        int t = n * nh;
        k_attend<<<(t + THREADS - 1) / THREADS, THREADS, 0, stream>>>(c->rows, n, *cfg, *sh, layer, c->q, c->k,
                                                                      c->v, c->att, c->sc, c->max_pos);
        k_attn_out<<<n, THREADS, 0, stream>>>(c->rows, c->att, L.wo, d, sh->h0 * hd, sh->h1 * hd, (float *)out);
        break;
    }
    case LLM_CUDA_MLP: {
        dev_layer_t L = c->layers[layer];
        k_mlp_up<<<n, THREADS, 0, stream>>>(x, L, *cfg, sh->col0, sh->col1, c->h);
        k_mlp_down<<<n, THREADS, 0, stream>>>(c->h, L.w_down, d, cfg->d_ff, sh->col0, sh->col1, (float *)out);
        break;
    }
    case LLM_CUDA_RESID: {
        size_t count = (size_t)n * (size_t)d;
        k_resid<<<(unsigned)((count + THREADS - 1) / THREADS), THREADS, 0, stream>>>(x, x2, count, (float *)out);
        break;
    }
    case LLM_CUDA_LOGITS:
        k_logits<<<n, THREADS, 0, stream>>>(x, c->final_norm, c->tok_emb, *cfg, sh->voc0, sh->voc1,
                                            c->h + (size_t)LLM_SHARD_MAX_ROWS * (size_t)cfg->d_ff, c->picks);
        if (failed(cudaMemcpyAsync(out, c->picks, (size_t)n * sizeof(llm_pick_t), cudaMemcpyDeviceToHost, stream),
                   "cudaMemcpyAsync (picks)", err, errlen))
            return -1;
        break;
    case LLM_CUDA_PICK:
        // the picks are host values already published: combine them here, then
        // copy the tokens to the device return (pinned staging, stream order)
        if (failed(cudaStreamSynchronize(stream), "cudaStreamSynchronize (pick staging)", err, errlen))
            return -1;
        for (int i = 0; i < n; i++) {
            llm_pick_t row[LLM_SHARD_MAX_TP];
            for (int r = 0; r < sh->tp; r++)
                row[r] = picks[r][i];
            c->next_host[i] = llm_pick(row, sh->tp);
        }
        if (failed(cudaMemcpyAsync(out, c->next_host, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
                   "cudaMemcpyAsync (next)", err, errlen))
            return -1;
        break;
    default:
        snprintf(err, errlen, "llm_shard cuda: work of kind %d", kind);
        return -1;
    }
    return failed(cudaGetLastError(), "kernel launch", err, errlen);
}

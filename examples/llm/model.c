/* examples/llm/model.c: the transformer of model.h, shard by shard. */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char llm_err[512];

const char *llm_error(void) { return llm_err; }

#define fail llm_fail

int llm_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(llm_err, sizeof llm_err, fmt, ap);
    va_end(ap);
    return -1;
}

void llm_config_default(llm_config_t *cfg) {
    *cfg = (llm_config_t){.vocab = LLM_VOCAB, .d_model = 256, .n_layers = 4, .n_heads = 8, .head_dim = 32,
                          .d_ff = 688, .norm_eps = 1e-5f, .rope_theta = 10000.0f};
}

int llm_config_check(const llm_config_t *c) {
    if (c->vocab != LLM_VOCAB)
        return fail("llm config: vocab %d, the byte vocabulary is %d", c->vocab, LLM_VOCAB);
    if (c->d_model <= 0 || c->d_model > 65536 || c->n_layers <= 0 || c->n_layers > 1024 || c->n_heads <= 0 ||
        c->head_dim <= 0 || c->d_ff <= 0 || c->d_ff > 1 << 20)
        return fail("llm config: sizes out of range (d_model %d, n_layers %d, n_heads %d, head_dim %d, d_ff %d)",
                    c->d_model, c->n_layers, c->n_heads, c->head_dim, c->d_ff);
    if (c->head_dim % 2 || (int64_t)c->n_heads * c->head_dim != c->d_model)
        return fail("llm config: n_heads %d x head_dim %d must be d_model %d, head_dim even", c->n_heads,
                    c->head_dim, c->d_model);
    if (!(c->norm_eps > 0) || !(c->rope_theta > 1))
        return fail("llm config: norm_eps %g and rope_theta %g must be positive (theta > 1)", c->norm_eps,
                    c->rope_theta);
    return 0;
}

int llm_tp_check(const llm_config_t *c, int tp) {
    if (tp < 1 || c->n_heads % tp || c->d_ff % tp || c->vocab % tp)
        return fail("llm: tp %d must divide n_heads %d, d_ff %d and vocab %d", tp, c->n_heads, c->d_ff, c->vocab);
    return 0;
}

void llm_shard_range(int total, int tp, int r, int *begin, int *end) {
    *begin = (int)((int64_t)r * total / tp);
    *end = (int)((int64_t)(r + 1) * total / tp);
}

/* ---- tensors ---- */

enum { T_ATTN_NORM, T_WQ, T_WK, T_WV, T_WO, T_MLP_NORM, T_GATE, T_UP, T_DOWN, T_PER_LAYER };
static const char *const layer_names[T_PER_LAYER] = {"attn_norm", "wq",     "wk",   "wv",    "wo",
                                                     "mlp_norm",  "w_gate", "w_up", "w_down"};

int llm_tensor_count(const llm_config_t *cfg) { return 2 + T_PER_LAYER * cfg->n_layers; }

void llm_tensor_info(const llm_config_t *c, const llm_model_t *m, int i, llm_tensor_t *t) {
    int64_t d = c->d_model, f = c->d_ff;
    memset(t, 0, sizeof *t);
    if (i == 0) {
        snprintf(t->name, sizeof t->name, "tok_emb");
        t->ndim = 2, t->shape[0] = c->vocab, t->shape[1] = d;
    } else if (i == llm_tensor_count(c) - 1) {
        snprintf(t->name, sizeof t->name, "final_norm");
        t->ndim = 1, t->shape[0] = d;
    } else {
        int l = (i - 1) / T_PER_LAYER, k = (i - 1) % T_PER_LAYER;
        snprintf(t->name, sizeof t->name, "layers.%d.%s", l, layer_names[k]);
        t->ndim = 2;
        switch (k) {
        case T_ATTN_NORM:
        case T_MLP_NORM: t->ndim = 1, t->shape[0] = d; break;
        case T_GATE:
        case T_UP: t->shape[0] = f, t->shape[1] = d; break;
        case T_DOWN: t->shape[0] = d, t->shape[1] = f; break;
        default: t->shape[0] = d, t->shape[1] = d; break;
        }
    }
    t->count = (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1);
    if (m) {
        size_t off = 0;
        for (int j = 0; j < i; j++) {
            llm_tensor_t u;
            llm_tensor_info(c, NULL, j, &u);
            off += u.count;
        }
        t->data = m->data + off;
    }
}

int llm_model_alloc(llm_model_t *m, const llm_config_t *cfg) {
    memset(m, 0, sizeof *m);
    if (llm_config_check(cfg))
        return -1;
    m->cfg = *cfg;
    int nt = llm_tensor_count(cfg);
    size_t total = 0;
    for (int i = 0; i < nt; i++) {
        llm_tensor_t t;
        llm_tensor_info(cfg, NULL, i, &t);
        total += t.count;
    }
    m->data = calloc(total, sizeof(float));
    m->layers = calloc((size_t)cfg->n_layers, sizeof *m->layers);
    if (!m->data || !m->layers) {
        llm_model_free(m);
        return fail("llm: out of memory for %zu weights", total);
    }
    m->n_floats = total;
    float *p = m->data;
    m->tok_emb = p, p += (size_t)cfg->vocab * cfg->d_model;
    for (int l = 0; l < cfg->n_layers; l++) {
        llm_layer_t *L = &m->layers[l];
        size_t d = (size_t)cfg->d_model, f = (size_t)cfg->d_ff;
        L->attn_norm = p, p += d;
        L->wq = p, p += d * d;
        L->wk = p, p += d * d;
        L->wv = p, p += d * d;
        L->wo = p, p += d * d;
        L->mlp_norm = p, p += d;
        L->w_gate = p, p += f * d;
        L->w_up = p, p += f * d;
        L->w_down = p, p += d * f;
    }
    m->final_norm = p;
    return 0;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int llm_model_init(llm_model_t *m, const llm_config_t *cfg, uint64_t seed) {
    if (llm_model_alloc(m, cfg))
        return -1;
    int nt = llm_tensor_count(cfg);
    for (int i = 0; i < nt; i++) {
        llm_tensor_t t;
        llm_tensor_info(cfg, m, i, &t);
        uint64_t s = seed + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
        int norm = t.ndim == 1;
        float scale = i == 0 ? 0.02f : norm ? 0.1f : 1.0f / sqrtf((float)t.shape[1]);
        for (size_t j = 0; j < t.count; j++) {
            float u = (float)(splitmix64(&s) >> 40) / 16777216.0f;
            t.data[j] = (norm ? 1.0f : 0.0f) + (2.0f * u - 1.0f) * scale;
        }
    }
    return 0;
}

void llm_model_free(llm_model_t *m) {
    free(m->data);
    free(m->layers);
    memset(m, 0, sizeof *m);
}

/* ---- the KV cache ---- */

int llm_kv_init(llm_kv_t *kv, const llm_config_t *cfg, int layer_begin, int layer_end, int head_begin,
                int head_end, int n_blocks) {
    memset(kv, 0, sizeof *kv);
    if (layer_begin < 0 || layer_end > cfg->n_layers || layer_begin >= layer_end || head_begin < 0 ||
        head_end > cfg->n_heads || head_begin >= head_end || n_blocks <= 0)
        return fail("llm kv: layers [%d, %d) of %d, heads [%d, %d) of %d, %d blocks: out of range", layer_begin,
                    layer_end, cfg->n_layers, head_begin, head_end, cfg->n_heads, n_blocks);
    size_t n = (size_t)(layer_end - layer_begin) * (size_t)n_blocks * (size_t)(head_end - head_begin) *
               LLM_KV_BLOCK * (size_t)cfg->head_dim;
    kv->k = calloc(n, sizeof(float));
    kv->v = calloc(n, sizeof(float));
    if (!kv->k || !kv->v) {
        llm_kv_free(kv);
        return fail("llm kv: out of memory for 2 x %zu floats (%d blocks)", n, n_blocks);
    }
    kv->layer_begin = layer_begin, kv->layer_end = layer_end;
    kv->head_begin = head_begin, kv->head_end = head_end;
    kv->head_dim = cfg->head_dim, kv->n_blocks = n_blocks;
    return 0;
}

void llm_kv_free(llm_kv_t *kv) {
    free(kv->k);
    free(kv->v);
    memset(kv, 0, sizeof *kv);
}

static size_t kv_off(const llm_kv_t *kv, int layer, int block, int head, int slot) {
    size_t nh = (size_t)(kv->head_end - kv->head_begin);
    return ((((size_t)(layer - kv->layer_begin) * (size_t)kv->n_blocks + (size_t)block) * nh +
             (size_t)(head - kv->head_begin)) * LLM_KV_BLOCK + (size_t)slot) * (size_t)kv->head_dim;
}

float *llm_kv_k(const llm_kv_t *kv, int layer, int block, int head, int slot) {
    return kv->k + kv_off(kv, layer, block, head, slot);
}

float *llm_kv_v(const llm_kv_t *kv, int layer, int block, int head, int slot) {
    return kv->v + kv_off(kv, layer, block, head, slot);
}

/* ---- the layer computations ---- */

static void rmsnorm(const float *x, const float *w, int d, float eps, float *out) {
    float ss = 0.0f;
    for (int i = 0; i < d; i++)
        ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)d + eps);
    for (int i = 0; i < d; i++)
        out[i] = x[i] * r * w[i];
}

/* y[o] = W[o, in_begin..in_end) . x[in_begin..in_end) for o in [o_begin, o_end);
 * W row-major with `in` columns; y indexed from o_begin. */
static void matvec(const float *w, int in, int in_begin, int in_end, int o_begin, int o_end, const float *x,
                   float *y) {
    for (int o = o_begin; o < o_end; o++) {
        const float *row = w + (size_t)o * (size_t)in;
        float s = 0.0f;
        for (int i = in_begin; i < in_end; i++)
            s += row[i] * x[i];
        y[o - o_begin] = s;
    }
}

static void rope(float *v, int head_dim, int pos, float theta) {
    for (int i = 0; i < head_dim / 2; i++) {
        double freq = pow((double)theta, -2.0 * i / head_dim);
        double a = (double)pos * freq;
        float c = (float)cos(a), s = (float)sin(a);
        float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
    }
}

int llm_kv_row_check(const llm_kv_t *kv, const llm_row_t *r, int i) {
    if (r->pos == LLM_ROW_PAD)
        return 0;
    if (r->pos < 0 || r->pos / LLM_KV_BLOCK >= r->n_table)
        return fail("llm: row %d: position %d is past its block table of %d blocks", i, r->pos, r->n_table);
    for (int b = 0; b <= r->pos / LLM_KV_BLOCK; b++)
        if (r->table[b] < 0 || r->table[b] >= kv->n_blocks)
            return fail("llm: row %d: block table[%d] = %d, the cache has %d blocks", i, b, r->table[b],
                        kv->n_blocks);
    return 0;
}

int llm_embed(const llm_model_t *m, const llm_row_t *rows, int n, float *x) {
    int d = m->cfg.d_model;
    for (int i = 0; i < n; i++) {
        if (rows[i].token < 0 || rows[i].token >= m->cfg.vocab)
            return fail("llm: row %d: token %d outside the vocabulary of %d", i, rows[i].token, m->cfg.vocab);
        memcpy(x + (size_t)i * d, m->tok_emb + (size_t)rows[i].token * d, (size_t)d * sizeof(float));
    }
    return 0;
}

int llm_attn_shard(const llm_model_t *m, int layer, llm_kv_t *kv, const llm_row_t *rows, int n, const float *x,
                   float *partial) {
    const llm_config_t *c = &m->cfg;
    int d = c->d_model, hd = c->head_dim, h0 = kv->head_begin, h1 = kv->head_end;
    if (layer < kv->layer_begin || layer >= kv->layer_end)
        return fail("llm attn: layer %d is not in the cache's layers [%d, %d)", layer, kv->layer_begin,
                    kv->layer_end);
    for (int i = 0; i < n; i++)
        if (llm_kv_row_check(kv, &rows[i], i))
            return -1;
    if (n <= 0)
        return n < 0 ? fail("llm attn: %d rows", n) : 0;
    const llm_layer_t *L = &m->layers[layer];
    int nh = h1 - h0, width = nh * hd, max_pos = 0;
    for (int i = 0; i < n; i++)
        max_pos = rows[i].pos > max_pos ? rows[i].pos : max_pos; /* a pad row's -1 never wins */
    float *xn = malloc((size_t)d * sizeof(float));
    float *q = malloc((size_t)n * (size_t)width * sizeof(float));
    float *att = malloc((size_t)d * sizeof(float));
    float *sc = malloc((size_t)(max_pos + 1) * sizeof(float));
    if (!xn || !q || !att || !sc) {
        free(xn), free(q), free(att), free(sc);
        return fail("llm attn: out of memory for %d rows", n);
    }
    /* q of every row; K and V written at each row's slot before any row attends */
    for (int i = 0; i < n; i++) {
        const llm_row_t *r = &rows[i];
        if (r->pos == LLM_ROW_PAD)
            continue;
        int blk = r->table[r->pos / LLM_KV_BLOCK], slot = r->pos % LLM_KV_BLOCK;
        rmsnorm(x + (size_t)i * d, L->attn_norm, d, c->norm_eps, xn);
        float *qi = q + (size_t)i * width;
        matvec(L->wq, d, 0, d, h0 * hd, h1 * hd, xn, qi);
        for (int h = h0; h < h1; h++) {
            float *k = llm_kv_k(kv, layer, blk, h, slot), *v = llm_kv_v(kv, layer, blk, h, slot);
            matvec(L->wk, d, 0, d, h * hd, (h + 1) * hd, xn, k);
            matvec(L->wv, d, 0, d, h * hd, (h + 1) * hd, xn, v);
            rope(qi + (size_t)(h - h0) * hd, hd, r->pos, c->rope_theta);
            rope(k, hd, r->pos, c->rope_theta);
        }
    }
    float inv = 1.0f / sqrtf((float)hd);
    for (int i = 0; i < n; i++) {
        const llm_row_t *r = &rows[i];
        if (r->pos == LLM_ROW_PAD) {
            memset(partial + (size_t)i * d, 0, (size_t)d * sizeof(float));
            continue;
        }
        memset(att, 0, (size_t)d * sizeof(float));
        for (int h = h0; h < h1; h++) {
            const float *qh = q + (size_t)i * width + (size_t)(h - h0) * hd;
            float mx = -INFINITY;
            for (int p = 0; p <= r->pos; p++) {
                const float *k = llm_kv_k(kv, layer, r->table[p / LLM_KV_BLOCK], h, p % LLM_KV_BLOCK);
                float s = 0.0f;
                for (int j = 0; j < hd; j++)
                    s += qh[j] * k[j];
                sc[p] = s * inv;
                mx = sc[p] > mx ? sc[p] : mx;
            }
            float sum = 0.0f;
            for (int p = 0; p <= r->pos; p++)
                sum += (sc[p] = expf(sc[p] - mx));
            float *o = att + (size_t)h * hd;
            for (int p = 0; p <= r->pos; p++) {
                const float *v = llm_kv_v(kv, layer, r->table[p / LLM_KV_BLOCK], h, p % LLM_KV_BLOCK);
                float w = sc[p] / sum;
                for (int j = 0; j < hd; j++)
                    o[j] += w * v[j];
            }
        }
        /* partial output projection: wo's columns of this shard's heads */
        matvec(L->wo, d, h0 * hd, h1 * hd, 0, d, att, partial + (size_t)i * d);
    }
    free(xn), free(q), free(att), free(sc);
    return 0;
}

int llm_mlp_shard(const llm_model_t *m, int layer, int col_begin, int col_end, int n, const float *x,
                  float *partial) {
    const llm_config_t *c = &m->cfg;
    int d = c->d_model, f = c->d_ff;
    if (layer < 0 || layer >= c->n_layers || col_begin < 0 || col_end > f || col_begin >= col_end)
        return fail("llm mlp: layer %d of %d, columns [%d, %d) of %d: out of range", layer, c->n_layers,
                    col_begin, col_end, f);
    const llm_layer_t *L = &m->layers[layer];
    float *xn = malloc((size_t)d * sizeof(float));
    float *g = malloc((size_t)f * sizeof(float)), *u = malloc((size_t)f * sizeof(float));
    if (!xn || !g || !u) {
        free(xn), free(g), free(u);
        return fail("llm mlp: out of memory (d_ff %d)", f);
    }
    memset(g, 0, (size_t)f * sizeof(float));
    for (int i = 0; i < n; i++) {
        rmsnorm(x + (size_t)i * d, L->mlp_norm, d, c->norm_eps, xn);
        matvec(L->w_gate, d, 0, d, col_begin, col_end, xn, g + col_begin);
        matvec(L->w_up, d, 0, d, col_begin, col_end, xn, u + col_begin);
        for (int j = col_begin; j < col_end; j++)
            g[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
        matvec(L->w_down, f, col_begin, col_end, 0, d, g, partial + (size_t)i * d);
    }
    free(xn), free(g), free(u);
    return 0;
}

void llm_acc_add(float *acc, const float *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        acc[i] += p[i];
}

void llm_residual_add(float *x, const float *acc, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] += acc[i];
}

void llm_final_norm(const llm_model_t *m, int n, const float *x, float *h) {
    int d = m->cfg.d_model;
    for (int i = 0; i < n; i++)
        rmsnorm(x + (size_t)i * d, m->final_norm, d, m->cfg.norm_eps, h + (size_t)i * d);
}

int llm_logits_shard(const llm_model_t *m, int vocab_begin, int vocab_end, int n, const float *h, float *logits) {
    int d = m->cfg.d_model, w = vocab_end - vocab_begin;
    if (vocab_begin < 0 || vocab_end > m->cfg.vocab || w <= 0)
        return fail("llm logits: vocab rows [%d, %d) of %d: out of range", vocab_begin, vocab_end, m->cfg.vocab);
    for (int i = 0; i < n; i++)
        matvec(m->tok_emb, d, 0, d, vocab_begin, vocab_end, h + (size_t)i * d, logits + (size_t)i * w);
    return 0;
}

llm_pick_t llm_argmax_shard(const float *logits, int count, int vocab_begin) {
    llm_pick_t p = {logits[0], vocab_begin};
    for (int i = 1; i < count; i++)
        if (logits[i] > p.value)
            p.value = logits[i], p.index = vocab_begin + i;
    return p;
}

int llm_pick(const llm_pick_t *picks, int tp) {
    llm_pick_t best = picks[0];
    for (int r = 1; r < tp; r++)
        if (picks[r].value > best.value || (picks[r].value == best.value && picks[r].index < best.index))
            best = picks[r];
    return best.index;
}

/* ---- the reference ---- */

int llm_ref_init_kvs(const llm_model_t *m, int tp, int n_blocks, llm_kv_t *kvs) {
    if (llm_tp_check(&m->cfg, tp))
        return -1;
    for (int r = 0; r < tp; r++) {
        int h0, h1;
        llm_shard_range(m->cfg.n_heads, tp, r, &h0, &h1);
        if (llm_kv_init(&kvs[r], &m->cfg, 0, m->cfg.n_layers, h0, h1, n_blocks)) {
            llm_ref_free_kvs(kvs, r);
            return -1;
        }
    }
    return 0;
}

void llm_ref_free_kvs(llm_kv_t *kvs, int tp) {
    for (int r = 0; r < tp; r++)
        llm_kv_free(&kvs[r]);
}

int llm_forward_tokens(const llm_model_t *m, int tp, llm_kv_t *kvs, const llm_row_t *rows, int n, float *x) {
    if (llm_tp_check(&m->cfg, tp))
        return -1;
    if (n <= 0)
        return n < 0 ? fail("llm forward: %d rows", n) : 0;
    size_t nd = (size_t)n * (size_t)m->cfg.d_model;
    float *part = malloc(nd * sizeof(float)), *acc = malloc(nd * sizeof(float));
    int rc = -1;
    if (!part || !acc) {
        fail("llm: out of memory for %d rows", n);
        goto out;
    }
    if (llm_embed(m, rows, n, x))
        goto out;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        memset(acc, 0, nd * sizeof(float));
        for (int r = 0; r < tp; r++) {
            if (llm_attn_shard(m, l, &kvs[r], rows, n, x, part))
                goto out;
            llm_acc_add(acc, part, nd);
        }
        llm_residual_add(x, acc, nd);
        memset(acc, 0, nd * sizeof(float));
        for (int r = 0; r < tp; r++) {
            int c0, c1;
            llm_shard_range(m->cfg.d_ff, tp, r, &c0, &c1);
            if (llm_mlp_shard(m, l, c0, c1, n, x, part))
                goto out;
            llm_acc_add(acc, part, nd);
        }
        llm_residual_add(x, acc, nd);
    }
    rc = 0;
out:
    free(part);
    free(acc);
    return rc;
}

int llm_ref_step(const llm_model_t *m, int tp, llm_kv_t *kvs, const llm_row_t *rows, int n, float *logits,
                 int *next) {
    int d = m->cfg.d_model, V = m->cfg.vocab, rc = -1;
    if (llm_tp_check(&m->cfg, tp))
        return -1;
    if (n <= 0)
        return n < 0 ? fail("llm step: %d rows", n) : 0;
    float *x = malloc((size_t)n * d * sizeof(float)), *h = malloc((size_t)n * d * sizeof(float));
    float *lg = malloc((size_t)V * sizeof(float));
    llm_pick_t *picks = malloc((size_t)tp * sizeof *picks);
    if (!x || !h || !lg || !picks) {
        fail("llm: out of memory for %d rows", n);
        goto out;
    }
    if (llm_forward_tokens(m, tp, kvs, rows, n, x))
        goto out;
    llm_final_norm(m, n, x, h);
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < tp; r++) {
            int v0, v1;
            llm_shard_range(V, tp, r, &v0, &v1);
            if (llm_logits_shard(m, v0, v1, 1, h + (size_t)i * d, lg + v0))
                goto out;
            picks[r] = llm_argmax_shard(lg + v0, v1 - v0, v0);
        }
        if (logits)
            memcpy(logits + (size_t)i * V, lg, (size_t)V * sizeof(float));
        if (next)
            next[i] = llm_pick(picks, tp);
    }
    rc = 0;
out:
    free(x), free(h), free(lg), free(picks);
    return rc;
}

int llm_ref_generate(const llm_model_t *m, int tp, const uint8_t *prompt, int n_prompt, int max_new_tokens,
                     int *out) {
    if (n_prompt < 1 || max_new_tokens < 0)
        return fail("llm generate: %d prompt bytes, %d new tokens (a prompt of 1 byte or more)", n_prompt,
                    max_new_tokens);
    int total = n_prompt + max_new_tokens, n_blocks = (total + LLM_KV_BLOCK - 1) / LLM_KV_BLOCK, rc = -1;
    llm_kv_t *kvs = calloc((size_t)tp > 0 ? (size_t)tp : 1, sizeof *kvs);
    int32_t *table = malloc((size_t)n_blocks * sizeof *table);
    llm_row_t *rows = malloc((size_t)n_prompt * sizeof *rows);
    int *next = malloc((size_t)n_prompt * sizeof *next);
    if (!kvs || !table || !rows || !next) {
        fail("llm generate: out of memory for %d tokens", total);
        goto out;
    }
    if (llm_ref_init_kvs(m, tp, n_blocks, kvs))
        goto out;
    for (int b = 0; b < n_blocks; b++)
        table[b] = b;
    for (int i = 0; i < n_prompt; i++)
        rows[i] = (llm_row_t){.table = table, .n_table = n_blocks, .pos = i, .token = prompt[i]};
    /* prefill: only the last row's token is the first generated one */
    if (max_new_tokens > 0 && llm_ref_step(m, tp, kvs, rows, n_prompt, NULL, next))
        goto free_kvs;
    for (int t = 0; t < max_new_tokens; t++) {
        out[t] = t == 0 ? next[n_prompt - 1] : next[0];
        if (t + 1 == max_new_tokens)
            break;
        llm_row_t r = {.table = table, .n_table = n_blocks, .pos = n_prompt + t, .token = out[t]};
        if (llm_ref_step(m, tp, kvs, &r, 1, NULL, next))
            goto free_kvs;
    }
    rc = 0;
free_kvs:
    llm_ref_free_kvs(kvs, tp);
out:
    free(kvs), free(table), free(rows), free(next);
    return rc;
}

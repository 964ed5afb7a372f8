/* Unit tests (suite "llm_model"): the transformer of examples/llm/model.h and
 * its safetensors file (examples/llm/safetensors.h), on a tiny config (2
 * layers, d_model 64, 8 heads of 8, d_ff 96): the file round trip and
 * corrupt files refused by name; the KV cache (token-by-token decoding equals
 * recomputing the whole sequence, bit for bit; a scattered block table and
 * two interleaved requests equal a contiguous table and each request alone);
 * RoPE at the cached K's position; the shard functions called by hand for
 * tp 2 and 4 equal llm_ref; each tp deterministic; the greedy pick's ties. */
#include "examples/llm/model.h"
#include "examples/llm/safetensors.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static llm_config_t tiny(void) {
    llm_config_t c;
    llm_config_default(&c);
    c.d_model = 64, c.n_layers = 2, c.n_heads = 8, c.head_dim = 8, c.d_ff = 96;
    return c;
}

static void tiny_model(llm_model_t *m, uint64_t seed) {
    llm_config_t c = tiny();
    cr_assert_eq(llm_model_init(m, &c, seed), 0, "%s", llm_error());
}

/* ---- safetensors ---- */

static char tmpdir[64];

static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/llm-model-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*len + 1);
    cr_assert_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    b[*len] = 0;
    return b;
}

static void write_all(const char *path, const void *b, size_t len) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(b, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

/* Writes dst: src's file with its JSON header's first `from` replaced by `to`
 * (header length rewritten, padded with spaces). */
static void rewrite_header(const char *src, const char *dst, const char *from, const char *to) {
    size_t len;
    char *b = read_all(src, &len);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)(uint8_t)b[i] << (8 * i);
    char *hdr = strndup(b + 8, hlen);
    char *at = strstr(hdr, from);
    cr_assert_not_null(at, "%s not in the header", from);
    size_t nlen = hlen - strlen(from) + strlen(to), padded = (nlen + 7) / 8 * 8;
    char *out = malloc(8 + padded + (len - 8 - hlen));
    for (int i = 0; i < 8; i++)
        out[i] = (char)(padded >> (8 * i));
    size_t pre = (size_t)(at - hdr);
    memcpy(out + 8, hdr, pre);
    memcpy(out + 8 + pre, to, strlen(to));
    memcpy(out + 8 + pre + strlen(to), at + strlen(from), hlen - pre - strlen(from));
    memset(out + 8 + nlen, ' ', padded - nlen);
    memcpy(out + 8 + padded, b + 8 + hlen, len - 8 - hlen);
    write_all(dst, out, 8 + padded + (len - 8 - hlen));
    free(out), free(hdr), free(b);
}

/* The file at path is refused, with a message naming path and holding each
 * of the needles. */
static void assert_refused(const char *path, const char *n1, const char *n2) {
    llm_model_t m;
    cr_assert_eq(llm_st_load(&m, path), -1, "%s loaded", path);
    const char *e = llm_error();
    cr_assert_not_null(strstr(e, path), "message without the file: %s", e);
    cr_assert_not_null(strstr(e, n1), "message without \"%s\": %s", n1, e);
    if (n2)
        cr_assert_not_null(strstr(e, n2), "message without \"%s\": %s", n2, e);
    cr_assert_null(m.data);
}

Test(llm_model, safetensors_round_trip) {
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/m.safetensors", tmpdir);
    llm_model_t a, b;
    tiny_model(&a, 7);
    cr_assert_eq(llm_st_save(&a, path), 0, "%s", llm_error());
    cr_assert_eq(llm_st_load(&b, path), 0, "%s", llm_error());
    cr_assert_eq(memcmp(&a.cfg, &b.cfg, sizeof a.cfg), 0);
    cr_assert_eq(a.n_floats, b.n_floats);
    cr_assert_eq(memcmp(a.data, b.data, a.n_floats * sizeof(float)), 0);
    llm_model_t c;
    tiny_model(&c, 8); /* another seed: other weights */
    cr_assert_neq(memcmp(a.data, c.data, a.n_floats * sizeof(float)), 0);
    llm_model_free(&a), llm_model_free(&b), llm_model_free(&c);
    remove_tmpdir();
}

Test(llm_model, safetensors_corrupt_refused) {
    make_tmpdir();
    char good[128], bad[128];
    snprintf(good, sizeof good, "%s/good.safetensors", tmpdir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", tmpdir);
    llm_model_t a;
    tiny_model(&a, 3);
    cr_assert_eq(llm_st_save(&a, good), 0, "%s", llm_error());
    llm_model_free(&a);
    size_t len;
    char *b = read_all(good, &len);

    /* truncated: the last tensor's offsets leave the data */
    write_all(bad, b, len - 100);
    assert_refused(bad, "final_norm", "outside");
    /* shorter than the length field */
    write_all(bad, b, 5);
    assert_refused(bad, "8-byte header length", NULL);
    /* header length past the file */
    FILE *f;
    char *c = malloc(len);
    memcpy(c, b, len);
    c[6] = 1;
    write_all(bad, c, len);
    assert_refused(bad, "header length", "out of bounds");
    /* bad JSON */
    rewrite_header(good, bad, "{\"tok_emb\":{", "{\"tok_emb\":{{");
    assert_refused(bad, "header JSON", NULL);
    /* wrong dtype */
    rewrite_header(good, bad, "\"dtype\":\"F32\"", "\"dtype\":\"F16\"");
    assert_refused(bad, "tok_emb", "dtype F16");
    /* shape mismatch (layers.0.attn_norm is the first [64]) */
    rewrite_header(good, bad, "\"shape\":[64]", "\"shape\":[65]");
    assert_refused(bad, "layers.0.attn_norm", "shape [65]");
    /* a tensor's offsets past the data (final_norm is the last one) */
    char *fn = strstr(b + 8, "\"final_norm\"");
    cr_assert_not_null(fn);
    long o0, o1;
    cr_assert_eq(sscanf(strstr(fn, "data_offsets"), "data_offsets\":[%ld,%ld]", &o0, &o1), 2);
    char from[64], to[64];
    snprintf(from, sizeof from, "[%ld,%ld]", o0, o1);
    snprintf(to, sizeof to, "[%ld,%ld]", o0 + 4, o1 + 4);
    rewrite_header(good, bad, from, to);
    assert_refused(bad, "final_norm", "outside");
    /* overlapping: layers.0.attn_norm moved 4 bytes back, into tok_emb */
    fn = strstr(b + 8, "\"layers.0.attn_norm\"");
    cr_assert_eq(sscanf(strstr(fn, "data_offsets"), "data_offsets\":[%ld,%ld]", &o0, &o1), 2);
    snprintf(from, sizeof from, "[%ld,%ld]", o0, o1);
    snprintf(to, sizeof to, "[%ld,%ld]", o0 - 4, o1 - 4);
    rewrite_header(good, bad, from, to);
    assert_refused(bad, "layers.0.attn_norm", "overlapping");
    /* a gap: final_norm moved 4 bytes on, its slot padded by 4 bytes at the end */
    fn = strstr(b + 8, "\"final_norm\"");
    cr_assert_eq(sscanf(strstr(fn, "data_offsets"), "data_offsets\":[%ld,%ld]", &o0, &o1), 2);
    snprintf(from, sizeof from, "[%ld,%ld]", o0, o1);
    snprintf(to, sizeof to, "[%ld,%ld]", o0 + 4, o1 + 4);
    rewrite_header(good, bad, from, to);
    f = fopen(bad, "ab");
    fputs("pad!", f);
    fclose(f);
    assert_refused(bad, "final_norm", "gap");
    /* a config that asks for tensors the file lacks */
    rewrite_header(good, bad, "\"n_layers\":\"2\"", "\"n_layers\":\"3\"");
    assert_refused(bad, "layers.2.attn_norm", "missing");
    /* a tensor this model does not have */
    rewrite_header(good, bad, "\"layers.1.wq\"", "\"layers.1.wx\"");
    assert_refused(bad, "layers.1.wx", "not a tensor");
    /* extra bytes after the data */
    memcpy(c, b, len);
    write_all(bad, c, len);
    f = fopen(bad, "ab");
    fputs("tail", f);
    fclose(f);
    assert_refused(bad, "cover", NULL);
    /* the good one still loads */
    cr_assert_eq(llm_st_load(&a, good), 0, "%s", llm_error());
    llm_model_free(&a);
    free(c), free(b);
    remove_tmpdir();
}

/* ---- the KV cache ---- */

#define NB 8 /* blocks per cache: 128 positions */

static void contiguous(int32_t *t) {
    for (int i = 0; i < NB; i++)
        t[i] = i;
}

/* Token-by-token decoding through the cache: n_steps tokens after prompt,
 * each step's logits to lg[step] (vocab floats). */
static void decode(const llm_model_t *m, int tp, const int32_t *table, const int *prompt, int n_prompt, int n_steps,
                   int *toks, float *lg) {
    llm_kv_t kvs[4];
    cr_assert_eq(llm_ref_init_kvs(m, tp, NB, kvs), 0, "%s", llm_error());
    /* garbage in every slot: a read of a slot not written shows */
    for (int r = 0; r < tp; r++) {
        size_t n = (size_t)m->cfg.n_layers * NB * (size_t)(kvs[r].head_end - kvs[r].head_begin) * LLM_KV_BLOCK *
                   (size_t)m->cfg.head_dim;
        for (size_t i = 0; i < n; i++)
            kvs[r].k[i] = kvs[r].v[i] = 1e4f;
    }
    llm_row_t rows[32];
    int next[32];
    for (int i = 0; i < n_prompt; i++)
        rows[i] = (llm_row_t){table, NB, i, prompt[i]};
    float *all = malloc((size_t)n_prompt * 256 * sizeof(float));
    cr_assert_eq(llm_ref_step(m, tp, kvs, rows, n_prompt, all, next), 0, "%s", llm_error());
    memcpy(lg, all + (size_t)(n_prompt - 1) * 256, 256 * sizeof(float));
    free(all);
    toks[0] = next[n_prompt - 1];
    for (int s = 1; s < n_steps; s++) {
        llm_row_t r = {table, NB, n_prompt + s - 1, toks[s - 1]};
        cr_assert_eq(llm_ref_step(m, tp, kvs, &r, 1, lg + (size_t)s * 256, &toks[s]), 0, "%s", llm_error());
    }
    llm_ref_free_kvs(kvs, tp);
}

static const int prompt5[5] = {'H', 'e', 'l', 'l', 'o'};

Test(llm_model, kv_decode_equals_recompute) {
    llm_model_t m;
    tiny_model(&m, 1);
    int32_t table[NB];
    contiguous(table);
    for (int tp = 1; tp <= 2; tp++) {
        enum { STEPS = 20 }; /* past the first block of 16 */
        int toks[STEPS], seq[5 + STEPS];
        float *lg = malloc(STEPS * 256 * sizeof(float)), rl[256];
        decode(&m, tp, table, prompt5, 5, STEPS, toks, lg);
        memcpy(seq, prompt5, sizeof prompt5);
        memcpy(seq + 5, toks, sizeof toks);
        /* each step again from a fresh cache: the whole sequence at once */
        for (int s = 0; s < STEPS; s++) {
            int n = 5 + s, rtok[1];
            decode(&m, tp, table, seq, n, 1, rtok, rl);
            cr_assert_eq(rtok[0], toks[s], "tp %d step %d: recomputed token %d, cached %d", tp, s, rtok[0],
                         toks[s]);
            cr_assert_eq(memcmp(rl, lg + (size_t)s * 256, sizeof rl), 0, "tp %d step %d: logits differ", tp, s);
        }
        free(lg);
    }
    llm_model_free(&m);
}

Test(llm_model, kv_scattered_block_table) {
    llm_model_t m;
    tiny_model(&m, 2);
    int32_t cont[NB], scat[NB] = {5, 2, 7, 0, 3, 6, 1, 4};
    contiguous(cont);
    enum { STEPS = 40 }; /* 45 positions: three blocks */
    int a[STEPS], b[STEPS];
    float *la = malloc(STEPS * 256 * sizeof(float)), *lb = malloc(STEPS * 256 * sizeof(float));
    decode(&m, 2, cont, prompt5, 5, STEPS, a, la);
    decode(&m, 2, scat, prompt5, 5, STEPS, b, lb);
    cr_assert_eq(memcmp(a, b, sizeof a), 0, "tokens differ with a scattered table");
    cr_assert_eq(memcmp(la, lb, STEPS * 256 * sizeof(float)), 0, "logits differ with a scattered table");
    free(la), free(lb);
    llm_model_free(&m);
}

Test(llm_model, kv_two_requests_in_one_batch) {
    llm_model_t m;
    tiny_model(&m, 4);
    const int pa[3] = {'a', 'b', 'c'}, pb[6] = {'x', 'y', 'z', 'x', 'y', 'z'};
    int32_t ta[NB] = {1, 3, 5, 7}, tb[NB] = {0, 2, 4, 6};
    enum { STEPS = 24 };
    int alone_a[STEPS], alone_b[STEPS], ja[STEPS], jb[STEPS];
    float *la = malloc(STEPS * 256 * sizeof(float)), *lb = malloc(STEPS * 256 * sizeof(float));
    decode(&m, 2, ta, pa, 3, STEPS, alone_a, la);
    decode(&m, 2, tb, pb, 6, STEPS, alone_b, lb);
    /* one cache, both requests: one prefill batch, then one decode batch per step */
    llm_kv_t kvs[2];
    cr_assert_eq(llm_ref_init_kvs(&m, 2, NB, kvs), 0, "%s", llm_error());
    llm_row_t rows[9];
    int next[9];
    float lg[9 * 256];
    for (int i = 0; i < 3; i++)
        rows[i] = (llm_row_t){ta, 4, i, pa[i]};
    for (int i = 0; i < 6; i++)
        rows[3 + i] = (llm_row_t){tb, 4, i, pb[i]};
    cr_assert_eq(llm_ref_step(&m, 2, kvs, rows, 9, lg, next), 0, "%s", llm_error());
    ja[0] = next[2], jb[0] = next[8];
    cr_assert_eq(memcmp(lg + 2 * 256, la, 256 * sizeof(float)), 0);
    cr_assert_eq(memcmp(lg + 8 * 256, lb, 256 * sizeof(float)), 0);
    for (int s = 1; s < STEPS; s++) {
        rows[0] = (llm_row_t){tb, 4, 6 + s - 1, jb[s - 1]}; /* b first this time */
        rows[1] = (llm_row_t){ta, 4, 3 + s - 1, ja[s - 1]};
        cr_assert_eq(llm_ref_step(&m, 2, kvs, rows, 2, lg, next), 0, "%s", llm_error());
        jb[s] = next[0], ja[s] = next[1];
        cr_assert_eq(memcmp(lg + 256, la + (size_t)s * 256, 256 * sizeof(float)), 0, "step %d: a's logits", s);
        cr_assert_eq(memcmp(lg, lb + (size_t)s * 256, 256 * sizeof(float)), 0, "step %d: b's logits", s);
    }
    cr_assert_eq(memcmp(ja, alone_a, sizeof ja), 0, "a's tokens differ in the batch");
    cr_assert_eq(memcmp(jb, alone_b, sizeof jb), 0, "b's tokens differ in the batch");
    llm_ref_free_kvs(kvs, 2);
    free(la), free(lb);
    llm_model_free(&m);
}

/* The K cached for a token at position p is its K at position 0 rotated by
 * p * theta^(-2i/head_dim) in each pair (2i, 2i+1); V is not rotated. */
Test(llm_model, rope_at_cached_position) {
    llm_model_t m;
    tiny_model(&m, 5);
    llm_kv_t kv;
    cr_assert_eq(llm_kv_init(&kv, &m.cfg, 0, 1, 0, m.cfg.n_heads, 2), 0, "%s", llm_error());
    int32_t table[2] = {0, 1};
    int d = m.cfg.d_model, hd = m.cfg.head_dim;
    float *x = malloc(2 * (size_t)d * sizeof(float)), *part = malloc(2 * (size_t)d * sizeof(float));
    llm_row_t rows[2] = {{table, 2, 0, 'q'}, {table, 2, 21, 'q'}};
    cr_assert_eq(llm_embed(&m, rows, 2, x), 0);
    cr_assert_eq(llm_attn_shard(&m, 0, &kv, rows, 2, x, part), 0, "%s", llm_error());
    for (int h = 0; h < m.cfg.n_heads; h++) {
        const float *k0 = llm_kv_k(&kv, 0, 0, h, 0), *k21 = llm_kv_k(&kv, 0, 1, h, 5);
        cr_assert_eq(memcmp(llm_kv_v(&kv, 0, 0, h, 0), llm_kv_v(&kv, 0, 1, h, 5), (size_t)hd * sizeof(float)), 0);
        for (int i = 0; i < hd / 2; i++) {
            double a = 21.0 * pow(10000.0, -2.0 * i / hd), c = cos(a), s = sin(a);
            double e0 = k0[2 * i] * c - k0[2 * i + 1] * s, e1 = k0[2 * i] * s + k0[2 * i + 1] * c;
            cr_assert(fabs(k21[2 * i] - e0) < 1e-5 && fabs(k21[2 * i + 1] - e1) < 1e-5,
                      "head %d pair %d: K at 21 (%g, %g), rotation of K at 0 (%g, %g)", h, i, k21[2 * i],
                      k21[2 * i + 1], e0, e1);
        }
        if (h == 0) /* and it is a rotation indeed, not the identity */
            cr_assert(fabs(k21[0] - k0[0]) > 1e-6 || fabs(k21[1] - k0[1]) > 1e-6);
    }
    free(x), free(part);
    llm_kv_free(&kv);
    llm_model_free(&m);
}

/* ---- tensor parallelism ---- */

/* tp ranks as separate actors would run them: each its own cache and partials, the
 * allreduce summing the partials in rank order into a zeroed buffer, the
 * vocab-parallel head's picks combined in rank order. */
static void manual_tp(const llm_model_t *m, int TP, const int *prompt, int n_prompt, int steps, int *out) {
    int d = m->cfg.d_model, V = m->cfg.vocab;
    llm_kv_t kv[4];
    int32_t table[NB];
    contiguous(table);
    for (int r = 0; r < TP; r++) {
        int h0, h1;
        llm_shard_range(m->cfg.n_heads, TP, r, &h0, &h1);
        cr_assert_eq(llm_kv_init(&kv[r], &m->cfg, 0, m->cfg.n_layers, h0, h1, NB), 0);
    }
    float *x = malloc(32 * (size_t)d * sizeof(float)), *h = malloc(32 * (size_t)d * sizeof(float));
    float *part[4], *acc = malloc(32 * (size_t)d * sizeof(float)), lg[256];
    for (int r = 0; r < TP; r++)
        part[r] = malloc(32 * (size_t)d * sizeof(float));
    llm_row_t rows[32];
    int n = n_prompt;
    for (int i = 0; i < n; i++)
        rows[i] = (llm_row_t){table, NB, i, prompt[i]};
    for (int s = 0; s < steps; s++) {
        size_t nd = (size_t)n * d;
        cr_assert_eq(llm_embed(m, rows, n, x), 0);
        for (int l = 0; l < m->cfg.n_layers; l++) {
            for (int r = 0; r < TP; r++) /* each rank, its heads */
                cr_assert_eq(llm_attn_shard(m, l, &kv[r], rows, n, x, part[r]), 0);
            memset(acc, 0, nd * sizeof(float));
            for (int r = 0; r < TP; r++) /* the allreduce, rank order */
                llm_acc_add(acc, part[r], nd);
            llm_residual_add(x, acc, nd);
            for (int r = 0; r < TP; r++) {
                int c0, c1;
                llm_shard_range(m->cfg.d_ff, TP, r, &c0, &c1);
                cr_assert_eq(llm_mlp_shard(m, l, c0, c1, n, x, part[r]), 0);
            }
            memset(acc, 0, nd * sizeof(float));
            for (int r = 0; r < TP; r++)
                llm_acc_add(acc, part[r], nd);
            llm_residual_add(x, acc, nd);
        }
        llm_final_norm(m, 1, x + (size_t)(n - 1) * d, h);
        llm_pick_t picks[4];
        for (int r = 0; r < TP; r++) {
            int v0, v1;
            llm_shard_range(V, TP, r, &v0, &v1);
            cr_assert_eq(llm_logits_shard(m, v0, v1, 1, h, lg), 0);
            picks[r] = llm_argmax_shard(lg, v1 - v0, v0);
        }
        out[s] = llm_pick(picks, TP);
        rows[0] = (llm_row_t){table, NB, rows[n - 1].pos + 1, out[s]};
        n = 1;
    }
    for (int r = 0; r < TP; r++)
        llm_kv_free(&kv[r]), free(part[r]);
    free(x), free(h), free(acc);
}

/* tp 2 and 4: the sum of 4 partials depends on its order (2 would not) */
Test(llm_model, tp_shards_by_hand_equal_ref) {
    llm_model_t m;
    tiny_model(&m, 6);
    enum { STEPS = 24 };
    const uint8_t p[5] = {'H', 'e', 'l', 'l', 'o'};
    for (int tp = 2; tp <= 4; tp += 2) {
        int ref[STEPS], hand[STEPS];
        cr_assert_eq(llm_ref_generate(&m, tp, p, 5, STEPS, ref), 0, "%s", llm_error());
        manual_tp(&m, tp, prompt5, 5, STEPS, hand);
        cr_assert_eq(memcmp(ref, hand, sizeof ref), 0, "tp %d: shards by hand differ from llm_ref_generate", tp);
        /* and the hidden states bit for bit */
        llm_kv_t kvs[4];
        int32_t table[NB];
        contiguous(table);
        cr_assert_eq(llm_ref_init_kvs(&m, tp, NB, kvs), 0);
        llm_row_t rows[5];
        for (int i = 0; i < 5; i++)
            rows[i] = (llm_row_t){table, NB, i, prompt5[i]};
        float x[5 * 64], y[5 * 64], part[5 * 64], acc[5 * 64];
        cr_assert_eq(llm_forward_tokens(&m, tp, kvs, rows, 5, x), 0);
        llm_ref_free_kvs(kvs, tp);
        cr_assert_eq(llm_ref_init_kvs(&m, tp, NB, kvs), 0);
        llm_embed(&m, rows, 5, y);
        for (int l = 0; l < 2; l++) {
            memset(acc, 0, sizeof acc);
            for (int r = 0; r < tp; r++) {
                cr_assert_eq(llm_attn_shard(&m, l, &kvs[r], rows, 5, y, part), 0);
                llm_acc_add(acc, part, 5 * 64);
            }
            llm_residual_add(y, acc, 5 * 64);
            memset(acc, 0, sizeof acc);
            int w = 96 / tp;
            for (int r = 0; r < tp; r++) {
                cr_assert_eq(llm_mlp_shard(&m, l, r * w, (r + 1) * w, 5, y, part), 0);
                llm_acc_add(acc, part, 5 * 64);
            }
            llm_residual_add(y, acc, 5 * 64);
        }
        cr_assert_eq(memcmp(x, y, sizeof x), 0, "tp %d: hidden states differ", tp);
        llm_ref_free_kvs(kvs, tp);
    }
    llm_model_free(&m);
}

Test(llm_model, tp_deterministic) {
    llm_model_t m;
    tiny_model(&m, 1);
    const uint8_t p[5] = {'H', 'e', 'l', 'l', 'o'};
    enum { STEPS = 32 };
    int first[3][STEPS];
    for (int i = 0; i < 3; i++) {
        int tp = 1 << i, again[STEPS];
        cr_assert_eq(llm_ref_generate(&m, tp, p, 5, STEPS, first[i]), 0, "%s", llm_error());
        cr_assert_eq(llm_ref_generate(&m, tp, p, 5, STEPS, again), 0, "%s", llm_error());
        cr_assert_eq(memcmp(first[i], again, sizeof again), 0, "tp %d: two runs differ", tp);
    }
    cr_assert_eq(llm_ref_generate(&m, 3, p, 5, STEPS, first[0]), -1, "tp 3 of 8 heads accepted");
    cr_assert_not_null(strstr(llm_error(), "tp 3"), "%s", llm_error());
    llm_model_free(&m);
}

/* The tiny model's greedy tokens for seed 1 and "Hello", pinned: any change
 * to the computation (RoPE on q or k, the norms, the MLP, the head) moves them. */
Test(llm_model, golden_tokens) {
    static const int want[16] = {80, 80, 80, 216, 216, 216, 216, 216, 216, 216, 216, 216, 216, 216, 216, 216};
    llm_model_t m;
    tiny_model(&m, 1);
    const uint8_t p[5] = {'H', 'e', 'l', 'l', 'o'};
    int got[16];
    cr_assert_eq(llm_ref_generate(&m, 1, p, 5, 16, got), 0, "%s", llm_error());
    for (int i = 0; i < 16; i++)
        printf("%d%s", got[i], i < 15 ? ", " : "\n");
    cr_assert_eq(memcmp(got, want, sizeof want), 0, "the tiny model's tokens moved");
    llm_model_free(&m);
}

Test(llm_model, pick_ties_lowest_index) {
    const float lg[4] = {1.0f, 3.0f, 3.0f, 2.0f};
    llm_pick_t p = llm_argmax_shard(lg, 4, 100);
    cr_assert_eq(p.index, 101);
    llm_pick_t picks[3] = {{2.0f, 5}, {3.0f, 70}, {3.0f, 130}};
    cr_assert_eq(llm_pick(picks, 3), 70);
    llm_pick_t later[2] = {{1.0f, 0}, {4.0f, 128}};
    cr_assert_eq(llm_pick(later, 2), 128);
}

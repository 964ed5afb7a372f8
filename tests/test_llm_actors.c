/* tests/test_llm_actors.c: the model of examples/llm sharded over process
 * actors (examples/llm/stage_actors.c, serve_graph.c), tp x pp in {1x1, 2x1,
 * 1x2, 2x2}: a prefill of three requests of different lengths in one step,
 * then decode steps of one row per request, every picked token equal to the
 * single-process reference's (llm_ref_generate of each request alone, same
 * tp); 2x2 loads the weights from a .safetensors file. With tp <= 2 the allreduce's sum is the reference's bit for bit. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "examples/llm/model.h"
#include "examples/llm/safetensors.h"
#include "examples/llm/serve_graph.h"

#define LLM_MODULE ADAG_TEST_BUILD_DIR "/examples/llm/libllm_shard.so"
#define SEED 0x11a5eedull
#define NREQ 3
#define NEW 11 /* the prefill's token, then 10 decode steps */
#define BLOCKS_PER_REQ 3
#define N_BLOCKS (NREQ * BLOCKS_PER_REQ)

static const char *const prompts[NREQ] = {"Hello, sharded actors", "ab", "The quick brown fox jumps!"};

static void tiny_config(llm_config_t *cfg) {
    llm_config_default(cfg);
    cfg->d_model = 64;
    cfg->n_layers = 4;
    cfg->n_heads = 4;
    cfg->head_dim = 16;
    cfg->d_ff = 128;
}

/* Request q's block b is block b * NREQ + (NREQ - 1 - q): the requests'
 * blocks interleave, none in table order. */
static void set_row(llm_shard_row_t *r, int q, int pos, int token) {
    memset(r, 0, sizeof *r);
    r->pos = pos;
    r->token = token;
    r->n_table = BLOCKS_PER_REQ;
    for (int b = 0; b < BLOCKS_PER_REQ; b++)
        r->table[b] = b * NREQ + (NREQ - 1 - q);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* from_file: the actors load the weights from a .safetensors file the test
 * writes (else each makes them from the seed). */
static void run_case(int tp, int pp, int from_file) {
    llm_config_t cfg;
    llm_model_t m;
    int want[NREQ][NEW], got[NREQ][NEW], len[NREQ], total = 0;
    tiny_config(&cfg);
    cr_assert_eq(llm_model_init(&m, &cfg, SEED), 0, "%s", llm_error());
    for (int q = 0; q < NREQ; q++) {
        len[q] = (int)strlen(prompts[q]);
        total += len[q];
        cr_assert_leq(len[q] + NEW, BLOCKS_PER_REQ * LLM_KV_BLOCK);
        cr_assert_eq(llm_ref_generate(&m, tp, (const uint8_t *)prompts[q], len[q], NEW, want[q]), 0, "%s",
                     llm_error());
    }
    char path[] = "/tmp/adag-llm-actors-XXXXXX";
    if (from_file) {
        int fd = mkstemp(path);
        cr_assert_geq(fd, 0, "mkstemp %s", path);
        close(fd);
        cr_assert_eq(llm_st_save(&m, path), 0, "%s", llm_error());
    }
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    llm_serve_params_t p = {.module = LLM_MODULE, .placement = ADAG_PLACEMENT_PROCESS, .cfg = cfg,
                            .seed = from_file ? ~SEED : SEED, /* the file's weights, not the seed's */
                            .path = from_file ? path : NULL, .tp = tp, .pp = pp, .n_blocks = N_BLOCKS, .name = "llm"};
    llm_serve_t s;
    cr_assert_eq(llm_serve_build(rt, &p, &s), 0, "tp %d pp %d: %s", tp, pp, llm_error());

    /* prefill: every prompt in one step; a request's first token is its last row's pick */
    llm_shard_row_t rows[64];
    int next[64], n = 0;
    cr_assert_leq(total, 64);
    for (int q = 0; q < NREQ; q++)
        for (int i = 0; i < len[q]; i++)
            set_row(&rows[n++], q, i, (uint8_t)prompts[q][i]);
    cr_assert_eq(llm_serve_step(&s, rows, n, next), 0, "prefill: %s", llm_error());
    for (int q = 0, end = 0; q < NREQ; q++) {
        end += len[q];
        got[q][0] = next[end - 1];
    }
    double t0 = now_s();
    for (int t = 1; t < NEW; t++) {
        for (int q = 0; q < NREQ; q++)
            set_row(&rows[q], q, len[q] + t - 1, got[q][t - 1]);
        cr_assert_eq(llm_serve_step(&s, rows, NREQ, next), 0, "decode step %d: %s", t, llm_error());
        for (int q = 0; q < NREQ; q++)
            got[q][t] = next[q];
    }
    double dt = now_s() - t0;
    for (int q = 0; q < NREQ; q++)
        for (int t = 0; t < NEW; t++)
            cr_assert_eq(got[q][t], want[q][t], "tp %d pp %d: request %d token %d: actors %d, reference %d", tp,
                         pp, q, t, got[q][t], want[q][t]);
    fprintf(stderr, "llm_actors tp %d pp %d: %d tokens equal; decode step %.2f ms (%d rows)\n", tp, pp,
            NREQ * NEW, dt * 1e3 / (NEW - 1), NREQ);
    llm_serve_free(&s);
    ASSERT_OK(adag_runtime_destroy(rt));
    llm_model_free(&m);
    if (from_file)
        unlink(path);
    h_assert_clean(&snap);
}

Test(llm_actors, tp1_pp1, .timeout = 120) { run_case(1, 1, 0); }
Test(llm_actors, tp2_pp1, .timeout = 120) { run_case(2, 1, 0); }
Test(llm_actors, tp1_pp2, .timeout = 120) { run_case(1, 2, 0); }
Test(llm_actors, tp2_pp2, .timeout = 120) { run_case(2, 2, 1); }

/* An actor whose weights file is missing fails its init; the build says
 * which actor and which file, and leaves nothing behind. */
Test(llm_actors, missing_weights_file, .timeout = 60) {
    llm_config_t cfg;
    tiny_config(&cfg);
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    llm_serve_params_t p = {.module = LLM_MODULE, .placement = ADAG_PLACEMENT_PROCESS, .cfg = cfg, .seed = SEED,
                            .path = "/nonexistent/llm-actors.safetensors", .tp = 2, .pp = 1, .n_blocks = 4};
    llm_serve_t s;
    cr_assert_eq(llm_serve_build(rt, &p, &s), -1);
    cr_assert(strstr(llm_error(), "llm_s0r0") && strstr(llm_error(), "/nonexistent/llm-actors.safetensors"),
              "the error names neither the actor nor the file: %s", llm_error());
    cr_assert_null(s.dag);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* tests/gpu/test_llm_cuda.c: examples/llm's serving engine on CUDA (the
 * shard class's kernels, libllm_shard_cuda.so): 24 requests of random
 * prompts and lengths through the engine, every token compared with the
 * single-process reference (llm_ref_generate, same tp), for TP-1 x PP-1
 * and TP-1 x PP-2 (the two stages on one GPU, through the device
 * channels); TP-2 needs two GPUs (NCCL refuses two ranks on one) and says
 * "skipped" without them. Exit 0 (passed), 77 (every case skipped, the
 * reason printed) or 1 (failed), as tests/gpu/run-tests.sh expects. */
#include <adag.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "examples/llm/engine.h"
#include "examples/llm/model.h"

#define NREQ 24
#define MAX_NEW 24
#define SEED 0xc0dau

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ended, n[NREQ], tokens[NREQ][MAX_NEW];
    llm_finish_t finish[NREQ];
    char message[256];
} seen_t;

static void on_event(void *user, void *req_user, uint64_t id, int token, llm_finish_t finish, const char *msg) {
    (void)id;
    seen_t *s = user;
    int i = (int)(intptr_t)req_user;
    pthread_mutex_lock(&s->lock);
    if (finish == LLM_FINISH_NONE) {
        if (s->n[i] < MAX_NEW)
            s->tokens[i][s->n[i]] = token;
        s->n[i]++;
    } else {
        s->finish[i] = finish;
        if (msg)
            snprintf(s->message, sizeof s->message, "%s", msg);
        s->ended++;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
}

/* 0 passed, 1 failed. */
static int run_case(const char *module, int tp, int pp) {
    llm_config_t cfg;
    llm_model_t m;
    llm_config_default(&cfg);
    if (llm_model_init(&m, &cfg, SEED)) {
        fprintf(stderr, "test-llm-cuda: %s\n", llm_error());
        return 1;
    }
    static uint8_t prompts[NREQ][64];
    static int want[NREQ][MAX_NEW];
    int len[NREQ], max_new[NREQ];
    uint64_t x = SEED;
    for (int i = 0; i < NREQ; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        len[i] = 1 + (int)((x >> 33) % 60);
        max_new[i] = 1 + (int)((x >> 17) % MAX_NEW);
        for (int k = 0; k < len[i]; k++)
            prompts[i][k] = (uint8_t)(32 + (x >> (k % 32)) % 95);
        if (llm_ref_generate(&m, tp, prompts[i], len[i], max_new[i], want[i])) {
            fprintf(stderr, "test-llm-cuda: reference: %s\n", llm_error());
            return 1;
        }
    }
    static seen_t s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.cond, NULL);
    adag_runtime_h rt;
    if (adag_runtime_create(NULL, &rt) != ADAG_OK) {
        fprintf(stderr, "test-llm-cuda: %s\n", adag_last_error());
        return 1;
    }
    llm_engine_params_t p = {
        .serve = {.module = module, .placement = ADAG_PLACEMENT_PROCESS, .cfg = cfg, .seed = SEED, .tp = tp,
                  .pp = pp, .n_blocks = 96, .name = "gpu", .device = "cuda"},
        .token_budget = 64, .on_event = on_event, .user = &s};
    llm_engine_t *e;
    int rc = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (llm_engine_create(rt, &p, &e)) {
        fprintf(stderr, "test-llm-cuda: tp %d pp %d: %s\n", tp, pp, llm_error());
        goto out;
    }
    for (int i = 0; i < NREQ; i++) {
        uint64_t id;
        if (llm_engine_submit(e, prompts[i], len[i], max_new[i], (void *)(intptr_t)i, &id)) {
            fprintf(stderr, "test-llm-cuda: submit %d: %s\n", i, llm_error());
            llm_engine_destroy(e);
            goto out;
        }
    }
    int drained = llm_engine_drain(e, 120000);
    llm_engine_metrics_t mt;
    llm_engine_metrics(e, &mt);
    llm_engine_destroy(e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (drained) {
        fprintf(stderr, "test-llm-cuda: tp %d pp %d: %s\n", tp, pp, llm_error());
        goto out;
    }
    int bad = 0;
    for (int i = 0; i < NREQ && !bad; i++) {
        if (s.finish[i] != LLM_FINISH_LENGTH || s.n[i] != max_new[i]) {
            fprintf(stderr, "test-llm-cuda: tp %d pp %d: request %d ended %s after %d of %d tokens: %s\n", tp, pp,
                    i, llm_finish_name(s.finish[i]), s.n[i], max_new[i], s.message);
            bad = 1;
        }
        for (int t = 0; t < max_new[i] && !bad; t++)
            if (s.tokens[i][t] != want[i][t]) {
                fprintf(stderr, "test-llm-cuda: tp %d pp %d: request %d token %d: GPU %d, reference %d\n", tp, pp,
                        i, t, s.tokens[i][t], want[i][t]);
                bad = 1;
            }
    }
    if (!bad) {
        printf("test-llm-cuda: tp %d pp %d: %d requests equal to the reference (%llu steps, %.1f ms per step, "
               "%.2f s in all)\n", tp, pp, NREQ, (unsigned long long)(mt.steps_prefill + mt.steps_decode),
               1e3 * mt.step_seconds / (double)(mt.steps_prefill + mt.steps_decode),
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        rc = 0;
    }
out:
    adag_runtime_destroy(rt);
    llm_model_free(&m);
    return rc;
}

int main(void) {
    unsigned count = 0;
    if (adag_device_count("cuda", &count) != ADAG_OK || count == 0) {
        printf("test-llm-cuda: skipped: no CUDA device (%s)\n", adag_last_error());
        return 77;
    }
    const char *module = ADAG_TEST_BUILD_DIR "/examples/llm/libllm_shard_cuda.so";
    int failed = run_case(module, 1, 1) | run_case(module, 1, 2);
    if (count >= 2)
        failed |= run_case(module, 2, 1);
    else
        printf("test-llm-cuda: tp 2: skipped: one GPU here (NCCL refuses two ranks on one GPU)\n");
    return failed ? 1 : 0;
}

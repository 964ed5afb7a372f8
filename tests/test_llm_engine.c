/* tests/test_llm_engine.c: the serving engine of examples/llm (engine.h)
 * over process actors: continuous batching, bucket DAGs, chunked prefill,
 * paged KV blocks, micro-batches in flight with pp stages. Every request's
 * tokens equal the single-process reference's (llm_ref_generate of that
 * request alone, same tp), whatever the batch it ran in; cancels, queueing
 * for blocks, a full queue, drain, destroy with requests running and a
 * worker killed mid-run end each request exactly once. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "examples/llm/engine.h"
#include "examples/llm/model.h"

#define LLM_MODULE ADAG_TEST_BUILD_DIR "/examples/llm/libllm_shard.so"
#define SEED 0xe2e5eedull
#define MAXQ 64
#define MAX_NEW 40

static void tiny_config(llm_config_t *cfg) {
    llm_config_default(cfg);
    cfg->d_model = 64;
    cfg->n_layers = 4;
    cfg->n_heads = 4;
    cfg->head_dim = 16;
    cfg->d_ff = 128;
}

/* What the callback saw, per request (indexed by the req_user). */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int n_ended;
    struct {
        uint64_t id;
        int tokens[MAX_NEW + 1], n, ends;
        llm_finish_t finish;
        char message[256];
    } q[MAXQ];
    llm_engine_t *e;
    int cancel_after; /* cancel request 0 from its own callback after this many tokens (0: never) */
} seen_t;

static void on_event(void *user, void *req_user, uint64_t id, int token, llm_finish_t finish, const char *msg) {
    seen_t *s = user;
    int i = (int)(intptr_t)req_user;
    pthread_mutex_lock(&s->lock);
    s->q[i].id = id;
    if (finish == LLM_FINISH_NONE) {
        if (s->q[i].n <= MAX_NEW)
            s->q[i].tokens[s->q[i].n] = token;
        s->q[i].n++;
    } else {
        s->q[i].ends++;
        s->q[i].finish = finish;
        if (msg)
            snprintf(s->q[i].message, sizeof s->q[i].message, "%s", msg);
        s->n_ended++;
        pthread_cond_broadcast(&s->cond);
    }
    int cancel = i == 0 && s->cancel_after && s->q[0].n == s->cancel_after && finish == LLM_FINISH_NONE;
    pthread_mutex_unlock(&s->lock);
    if (cancel)
        llm_engine_cancel(s->e, id); /* from the engine's own thread, as the header allows */
}

static void seen_init(seen_t *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
}

static void seen_wait(seen_t *s, int n, int timeout_s) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_s;
    pthread_mutex_lock(&s->lock);
    while (s->n_ended < n)
        if (pthread_cond_timedwait(&s->cond, &s->lock, &dl) != 0)
            break;
    int ended = s->n_ended;
    pthread_mutex_unlock(&s->lock);
    cr_assert_eq(ended, n, "%d of %d requests ended within %d s", ended, n, timeout_s);
}

static uint64_t rng_next(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const char *g_device; /* NULL: host actors; "emu": on emu:N */

static llm_engine_t *make_engine(adag_runtime_h rt, const llm_config_t *cfg, int tp, int pp, int n_blocks,
                                 int budget, int max_queue, seen_t *s) {
    llm_engine_params_t p = {
        .serve = {.module = LLM_MODULE, .placement = ADAG_PLACEMENT_PROCESS, .cfg = *cfg, .seed = SEED, .tp = tp,
                  .pp = pp, .n_blocks = n_blocks, .name = "eng", .device = g_device},
        .token_budget = budget, .max_queue = max_queue, .on_event = on_event, .user = s};
    llm_engine_t *e;
    cr_assert_eq(llm_engine_create(rt, &p, &e), 0, "tp %d pp %d: %s", tp, pp, llm_error());
    s->e = e;
    return e;
}

/* 64 requests of random prompts (1..90 bytes: some longer than the token
 * budget, so chunked), random max_tokens (1..MAX_NEW) and random arrival
 * gaps, over a cache too small to hold them all (so some wait for
 * blocks). */
static void run_exact(int tp, int pp) {
    llm_config_t cfg;
    llm_model_t m;
    tiny_config(&cfg);
    cr_assert_eq(llm_model_init(&m, &cfg, SEED), 0, "%s", llm_error());
    static uint8_t prompts[MAXQ][96];
    static int want[MAXQ][MAX_NEW];
    int len[MAXQ], max_new[MAXQ], gap_us[MAXQ];
    uint64_t x = SEED ^ (uint64_t)(tp * 10 + pp);
    for (int i = 0; i < MAXQ; i++) {
        len[i] = 1 + (int)(rng_next(&x) % 90);
        max_new[i] = 1 + (int)(rng_next(&x) % MAX_NEW);
        gap_us[i] = (int)(rng_next(&x) % 3000);
        for (int k = 0; k < len[i]; k++)
            prompts[i][k] = (uint8_t)(32 + rng_next(&x) % 95);
        cr_assert_eq(llm_ref_generate(&m, tp, prompts[i], len[i], max_new[i], want[i]), 0, "%s", llm_error());
    }
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    static seen_t s;
    seen_init(&s);
    llm_engine_t *e = make_engine(rt, &cfg, tp, pp, 40, 32, MAXQ, &s);
    for (int i = 0; i < MAXQ; i++) {
        uint64_t id;
        cr_assert_eq(llm_engine_submit(e, prompts[i], len[i], max_new[i], (void *)(intptr_t)i, &id), 0,
                     "request %d: %s", i, llm_error());
        usleep((useconds_t)gap_us[i]);
    }
    seen_wait(&s, MAXQ, 240);
    llm_engine_metrics_t mt;
    llm_engine_metrics(e, &mt);
    for (int i = 0; i < MAXQ; i++) {
        cr_assert_eq(s.q[i].ends, 1, "request %d ended %d times", i, s.q[i].ends);
        cr_assert_eq(s.q[i].finish, LLM_FINISH_LENGTH, "request %d: %s %s", i, llm_finish_name(s.q[i].finish),
                     s.q[i].message);
        cr_assert_eq(s.q[i].n, max_new[i], "request %d: %d tokens, max_tokens %d", i, s.q[i].n, max_new[i]);
        for (int t = 0; t < max_new[i]; t++)
            cr_assert_eq(s.q[i].tokens[t], want[i][t],
                         "tp %d pp %d: request %d (prompt %d, max %d) token %d: engine %d, reference %d", tp, pp,
                         i, len[i], max_new[i], t, s.q[i].tokens[t], want[i][t]);
    }
    /* the schedule went through every path it claims */
    cr_assert_eq(mt.blocks_used, 0, "%d blocks still in use", mt.blocks_used);
    cr_assert_eq(mt.finished[LLM_FINISH_LENGTH], MAXQ);
    cr_assert_gt(mt.steps_prefill, 0);
    cr_assert_gt(mt.steps_decode, 0);
    cr_assert_gt(mt.rows_max, 8, "no step batched more than %d rows", mt.rows_max);
    cr_assert_gt(mt.padded_rows, 0);
    cr_assert_gt(mt.waited_for_blocks, 0, "no request waited for blocks (40 blocks)");
    cr_assert_eq(mt.in_flight_max, pp, "at most %d steps were in flight with %d stages", mt.in_flight_max, pp);
    fprintf(stderr,
            "llm_engine %s tp %d pp %d: %d requests exact; %llu prefill + %llu decode steps, %llu rows "
            "(%llu padding, at most %d real), %llu waited for blocks, %.2f ms per step\n",
            g_device ? g_device : "host", tp, pp, MAXQ, (unsigned long long)mt.steps_prefill, (unsigned long long)mt.steps_decode,
            (unsigned long long)mt.rows, (unsigned long long)mt.padded_rows, mt.rows_max,
            (unsigned long long)mt.waited_for_blocks,
            1e3 * mt.step_seconds / (double)(mt.steps_prefill + mt.steps_decode));
    llm_engine_destroy(e);
    ASSERT_OK(adag_runtime_destroy(rt));
    llm_model_free(&m);
    h_assert_clean(&snap);
}

Test(llm_engine, exact_tp1_pp1, .timeout = 300) { run_exact(1, 1); }
Test(llm_engine, exact_tp2_pp1, .timeout = 300) { run_exact(2, 1); }
Test(llm_engine, exact_tp1_pp2, .timeout = 300) { run_exact(1, 2); }
Test(llm_engine, exact_tp2_pp2, .timeout = 300) { run_exact(2, 2); }
/* on emulated devices: tensors in device memory, the work in stream order,
 * the allreduce over the device communicator */
Test(llm_engine, exact_emu_tp1_pp2, .timeout = 300) {
    g_device = "emu";
    run_exact(1, 2);
}
Test(llm_engine, exact_emu_tp2_pp2, .timeout = 300) {
    g_device = "emu";
    run_exact(2, 2);
}

/* Waits until cond(e) or timeout_s. */
static int wait_metric(llm_engine_t *e, int (*cond)(const llm_engine_metrics_t *), int timeout_s) {
    for (int i = 0; i < timeout_s * 1000; i++) {
        llm_engine_metrics_t mt;
        llm_engine_metrics(e, &mt);
        if (cond(&mt))
            return 1;
        usleep(1000);
    }
    return 0;
}
static int one_running(const llm_engine_metrics_t *mt) { return mt->running == 1 && mt->waiting == 0; }
static int is_draining(const llm_engine_metrics_t *mt) { return mt->draining; }

typedef struct {
    llm_engine_t *e;
    int rc;
} drain_arg_t;
static void *drain_thread(void *p) {
    drain_arg_t *a = p;
    a->rc = llm_engine_drain(a->e, 60000);
    return NULL;
}

/* Bad requests name their field; a request that takes every block makes
 * the next ones wait; one more than max_queue is refused; a waiting
 * request and a running one (from its own callback) are cancelled; the
 * others still come out exact; drain refuses new requests and returns once
 * the running ones finished. */
Test(llm_engine, errors_queue_cancel_drain, .timeout = 120) {
    llm_config_t cfg;
    llm_model_t m;
    tiny_config(&cfg);
    cr_assert_eq(llm_model_init(&m, &cfg, SEED), 0, "%s", llm_error());
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    static seen_t s;
    seen_init(&s);
    s.cancel_after = 3;
    llm_engine_t *e = make_engine(rt, &cfg, 1, 1, 4, 32, 2, &s);
    cr_assert_eq(llm_engine_max_len(e), 64);
    uint8_t prompt[64];
    for (int i = 0; i < 64; i++)
        prompt[i] = (uint8_t)('a' + i % 26);
    uint64_t id;
    cr_assert_eq(llm_engine_submit(e, prompt, 0, 4, NULL, &id), -1);
    cr_assert(strstr(llm_error(), "prompt"), "%s", llm_error());
    cr_assert_eq(llm_engine_submit(e, prompt, 4, 0, NULL, &id), -1);
    cr_assert(strstr(llm_error(), "max_tokens"), "%s", llm_error());
    cr_assert_eq(llm_engine_submit(e, prompt, 40, 26, NULL, &id), -1); /* 65 positions of 64 */
    cr_assert(strstr(llm_error(), "max_tokens") && strstr(llm_error(), "64"), "%s", llm_error());

    /* request 0 takes the 4 blocks (40 + 25 - 1 = 64 positions) */
    cr_assert_eq(llm_engine_submit(e, prompt, 40, 25, (void *)(intptr_t)0, &id), 0, "%s", llm_error());
    cr_assert(wait_metric(e, one_running, 30), "request 0 was not admitted");
    uint64_t id2;
    cr_assert_eq(llm_engine_submit(e, prompt + 3, 10, 8, (void *)(intptr_t)1, &id), 0, "%s", llm_error());
    cr_assert_eq(llm_engine_submit(e, prompt + 5, 5, 5, (void *)(intptr_t)2, &id2), 0, "%s", llm_error());
    cr_assert_eq(llm_engine_submit(e, prompt, 5, 5, (void *)(intptr_t)3, &id), LLM_ENGINE_EFULL);
    cr_assert(strstr(llm_error(), "queue is full"), "%s", llm_error());
    llm_engine_cancel(e, id2);
    llm_engine_cancel(e, 999999); /* unknown: nothing */
    seen_wait(&s, 3, 60);

    int want[30];
    cr_assert_eq(llm_ref_generate(&m, 1, prompt, 40, 25, want), 0, "%s", llm_error());
    cr_assert_eq(s.q[0].finish, LLM_FINISH_CANCELLED, "request 0: %s", llm_finish_name(s.q[0].finish));
    cr_assert_eq(s.q[0].n, 3, "request 0 cancelled after 3 tokens got %d", s.q[0].n);
    for (int t = 0; t < 3; t++)
        cr_assert_eq(s.q[0].tokens[t], want[t]);
    cr_assert_eq(s.q[1].finish, LLM_FINISH_LENGTH, "request 1: %s %s", llm_finish_name(s.q[1].finish),
                 s.q[1].message);
    cr_assert_eq(llm_ref_generate(&m, 1, prompt + 3, 10, 8, want), 0, "%s", llm_error());
    cr_assert_eq(s.q[1].n, 8);
    for (int t = 0; t < 8; t++)
        cr_assert_eq(s.q[1].tokens[t], want[t], "request 1 token %d", t);
    cr_assert_eq(s.q[2].finish, LLM_FINISH_CANCELLED);
    cr_assert_eq(s.q[2].n, 0, "the waiting request cancelled got %d tokens", s.q[2].n);
    cr_assert_eq(s.q[3].ends, 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(s.q[i].ends, 1, "request %d ended %d times", i, s.q[i].ends);
    llm_engine_metrics_t mt;
    llm_engine_metrics(e, &mt);
    cr_assert_eq(mt.blocks_used, 0);
    cr_assert_eq(mt.finished[LLM_FINISH_CANCELLED], 2);
    cr_assert_eq(mt.rejected_full, 1);
    cr_assert_eq(mt.requests, 3);

    /* drain: request 4 runs to its end, request 5 is refused */
    cr_assert_eq(llm_engine_submit(e, prompt + 7, 20, 30, (void *)(intptr_t)4, &id), 0, "%s", llm_error());
    drain_arg_t da = {.e = e};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, drain_thread, &da), 0);
    cr_assert(wait_metric(e, is_draining, 30));
    cr_assert_eq(llm_engine_submit(e, prompt, 5, 5, (void *)(intptr_t)5, &id), LLM_ENGINE_EDRAINING);
    cr_assert(strstr(llm_error(), "draining"), "%s", llm_error());
    pthread_join(th, NULL);
    cr_assert_eq(da.rc, 0, "%s", llm_error());
    cr_assert_eq(s.q[4].finish, LLM_FINISH_LENGTH);
    cr_assert_eq(s.q[4].n, 30, "drain cut request 4 at %d tokens", s.q[4].n);
    cr_assert_eq(llm_ref_generate(&m, 1, prompt + 7, 20, 30, want), 0, "%s", llm_error());
    for (int t = 0; t < 30; t++)
        cr_assert_eq(s.q[4].tokens[t], want[t], "request 4 token %d", t);
    cr_assert_eq(s.q[5].ends, 0);
    llm_engine_destroy(e);
    ASSERT_OK(adag_runtime_destroy(rt));
    llm_model_free(&m);
    h_assert_clean(&snap);
}

static int some_tokens(const llm_engine_metrics_t *mt) { return mt->generated_tokens >= 20; }

/* Destroy with requests running: each ends once (CANCELLED unless it had
 * finished), nothing is left behind. */
Test(llm_engine, destroy_while_running, .timeout = 120) {
    llm_config_t cfg;
    tiny_config(&cfg);
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    static seen_t s;
    seen_init(&s);
    llm_engine_t *e = make_engine(rt, &cfg, 1, 2, 64, 32, 64, &s);
    uint8_t prompt[32];
    memset(prompt, 'z', sizeof prompt);
    for (int i = 0; i < 12; i++) {
        uint64_t id;
        cr_assert_eq(llm_engine_submit(e, prompt, 8 + i, MAX_NEW, (void *)(intptr_t)i, &id), 0, "%s", llm_error());
    }
    cr_assert(wait_metric(e, some_tokens, 60));
    llm_engine_destroy(e);
    int cancelled = 0;
    for (int i = 0; i < 12; i++) {
        cr_assert_eq(s.q[i].ends, 1, "request %d ended %d times", i, s.q[i].ends);
        cancelled += s.q[i].finish == LLM_FINISH_CANCELLED;
        cr_assert(s.q[i].finish == LLM_FINISH_CANCELLED || (s.q[i].finish == LLM_FINISH_LENGTH &&
                                                            s.q[i].n == MAX_NEW));
    }
    cr_assert_gt(cancelled, 0);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* A worker killed mid-run: every request ends once with ERROR naming the
 * step; new requests are refused with that message; nothing hangs. */
Test(llm_engine, worker_killed, .timeout = 120) {
    llm_config_t cfg;
    tiny_config(&cfg);
    adag_runtime_h rt = h_runtime();
    static seen_t s;
    seen_init(&s);
    llm_engine_t *e = make_engine(rt, &cfg, 2, 1, 64, 32, 64, &s);
    uint8_t prompt[32];
    memset(prompt, 'k', sizeof prompt);
    for (int i = 0; i < 6; i++) {
        uint64_t id;
        cr_assert_eq(llm_engine_submit(e, prompt, 10 + i, MAX_NEW, (void *)(intptr_t)i, &id), 0, "%s",
                     llm_error());
    }
    cr_assert(wait_metric(e, some_tokens, 60));
    adag_actor_h victim = llm_engine_actor(e, 0, 1);
    cr_assert_not_null(victim);
    cr_assert_null(llm_engine_actor(e, 1, 0));
    cr_assert_eq(kill(adag_actor_pid(victim), SIGKILL), 0);
    seen_wait(&s, 6, 60);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(s.q[i].ends, 1);
        cr_assert_eq(s.q[i].finish, LLM_FINISH_ERROR, "request %d: %s", i, llm_finish_name(s.q[i].finish));
        cr_assert(strstr(s.q[i].message, "eng_decode") || strstr(s.q[i].message, "eng_prefill") ||
                      strstr(s.q[i].message, "llm_"),
                  "request %d's message names no step: %s", i, s.q[i].message);
    }
    uint64_t id;
    cr_assert_eq(llm_engine_submit(e, prompt, 4, 4, NULL, &id), LLM_ENGINE_EDRAINING);
    cr_assert(strstr(llm_error(), "step on"), "%s", llm_error());
    llm_engine_metrics_t mt;
    llm_engine_metrics(e, &mt);
    cr_assert(mt.failed);
    cr_assert_eq(mt.blocks_used, 0);
    llm_engine_destroy(e);
    adag_runtime_destroy(rt); /* a killed worker: the status says so; what matters is no hang */
}

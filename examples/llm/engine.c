/* examples/llm/engine.c: the serving engine of engine.h. One thread runs
 * the scheduler and the steps; other threads queue requests and cancels
 * under e->lock. Events are gathered under the lock and delivered after it
 * is dropped. */
#include "engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEP_TIMEOUT_MS 60000
#define MAX_BUCKETS 16
#define MAX_INFLIGHT LLM_SHARD_MAX_STAGES
#define PREFILL_MIN 16 /* the smallest prefill bucket, and the rows kept for prompts in a mixed step */

typedef struct req {
    uint64_t id;
    uint8_t *prompt;
    int n_prompt, max_tokens;
    int n_cached;   /* prompt positions scheduled into the cache */
    int n_gen;      /* tokens generated */
    int last;       /* the last generated token */
    int n_table;
    int32_t table[LLM_SHARD_MAX_TABLE];
    int in_flight, cancelled, waited;
    void *user;
    struct req *next;
} req_t;

typedef struct {
    req_t *req;
    uint64_t id;
    int token;
    llm_finish_t finish;
    void *user;
    char *message;
} event_t;

typedef struct {
    adag_dag_h dag;
    int rows, prefill;
} bucket_t;

typedef struct {
    bucket_t *b;
    adag_ref_t ref;
    int n_real;
    req_t *row_req[LLM_SHARD_MAX_ROWS]; /* the request whose token row i decides, else NULL */
    req_t *reqs[LLM_SHARD_MAX_ROWS];    /* the step's requests, once each */
    int n_reqs;
    double t0;
} step_t;

struct llm_engine {
    llm_serve_t serve;
    llm_engine_params_t p;
    int pp, max_len, n_blocks;
    bucket_t buckets[MAX_BUCKETS];
    int n_buckets;

    pthread_mutex_t lock;
    pthread_cond_t wake; /* the engine thread: work or stop */
    pthread_cond_t idle; /* drain: nothing waiting or running */
    pthread_t thread;
    int thread_started, stop, draining, failed;
    char fail_msg[512];

    req_t *wait_head, *wait_tail, *running;
    int n_waiting, n_running;
    uint64_t next_id;
    int *free_blocks, n_free;

    step_t steps[MAX_INFLIGHT]; /* in flight, oldest at steps_head */
    int steps_head, n_steps;

    event_t *events;
    int n_events, cap_events;
    int delivering; /* callbacks running (the lock dropped) */
    llm_shard_row_t rows[LLM_SHARD_MAX_ROWS];
    llm_engine_metrics_t m;
};

const char *llm_finish_name(llm_finish_t f) {
    switch (f) {
    case LLM_FINISH_LENGTH:
        return "length";
    case LLM_FINISH_CANCELLED:
        return "cancelled";
    case LLM_FINISH_ERROR:
        return "error";
    default:
        return "";
    }
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int blocks_for(int n_prompt, int max_tokens) {
    int positions = n_prompt + max_tokens - 1; /* the last token is never fed back */
    return (positions + LLM_KV_BLOCK - 1) / LLM_KV_BLOCK;
}

/* ---- events (under the lock; delivered by deliver() without it) ---- */

static void push_event(llm_engine_t *e, req_t *r, int token, llm_finish_t finish, const char *message) {
    if (e->n_events == e->cap_events) {
        int cap = e->cap_events ? 2 * e->cap_events : 256;
        event_t *ev = realloc(e->events, (size_t)cap * sizeof *ev);
        if (!ev) {
            /* out of memory for the event queue: this event is lost; say so */
            fprintf(stderr, "llm engine: out of memory queueing an event of request %llu\n",
                    (unsigned long long)r->id);
            return;
        }
        e->events = ev;
        e->cap_events = cap;
    }
    e->events[e->n_events++] = (event_t){.req = finish ? r : NULL, .id = r->id, .token = token,
                                          .finish = finish, .user = r->user,
                                          .message = message ? strdup(message) : NULL};
}

static void free_req(req_t *r) {
    free(r->prompt);
    free(r);
}

/* Called with the lock held; drops it while the callbacks run. */
static void deliver(llm_engine_t *e) {
    while (e->n_events) {
        int n = e->n_events;
        event_t *ev = e->events;
        e->events = NULL;
        e->n_events = e->cap_events = 0;
        e->delivering = 1;
        pthread_mutex_unlock(&e->lock);
        for (int i = 0; i < n; i++) {
            if (e->p.on_event)
                e->p.on_event(e->p.user, ev[i].user, ev[i].id, ev[i].token, ev[i].finish, ev[i].message);
            free(ev[i].message);
            if (ev[i].req)
                free_req(ev[i].req);
        }
        free(ev);
        pthread_mutex_lock(&e->lock);
        e->delivering = 0;
        pthread_cond_broadcast(&e->idle); /* drain waits for the last end event */
    }
}

/* Ends running request r (not in flight): blocks back, end event. */
static void end_running(llm_engine_t *e, req_t *r, llm_finish_t finish, const char *message) {
    for (req_t **pp = &e->running; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    e->n_running--;
    for (int b = 0; b < r->n_table; b++)
        e->free_blocks[e->n_free++] = r->table[b];
    r->n_table = 0;
    e->m.finished[finish]++;
    push_event(e, r, -1, finish, message);
}

static void end_waiting_all(llm_engine_t *e, llm_finish_t finish, const char *message) {
    while (e->wait_head) {
        req_t *r = e->wait_head;
        e->wait_head = r->next;
        e->n_waiting--;
        e->m.finished[finish]++;
        push_event(e, r, -1, finish, message);
    }
    e->wait_tail = NULL;
}

/* ---- scheduling ---- */

/* Admits waiting requests in arrival order while their blocks are free
 * and the running set has room. */
static void admit(llm_engine_t *e) {
    int max_running = LLM_ENGINE_MAX_DECODE * e->pp;
    while (e->wait_head && e->n_running < max_running) {
        req_t *r = e->wait_head;
        if (r->cancelled) {
            e->wait_head = r->next;
            e->n_waiting--;
            e->m.finished[LLM_FINISH_CANCELLED]++;
            push_event(e, r, -1, LLM_FINISH_CANCELLED, NULL);
            continue;
        }
        int need = blocks_for(r->n_prompt, r->max_tokens);
        if (need > e->n_free) {
            if (!r->waited)
                e->m.waited_for_blocks++;
            r->waited = 1;
            break; /* first come, first served: later requests wait behind it */
        }
        e->wait_head = r->next;
        e->n_waiting--;
        r->n_table = need;
        for (int b = 0; b < need; b++)
            r->table[b] = e->free_blocks[--e->n_free];
        req_t **tail = &e->running; /* arrival order: the oldest prompt is prefilled first */
        while (*tail)
            tail = &(*tail)->next;
        r->next = NULL;
        *tail = r;
        e->n_running++;
    }
    if (!e->wait_head)
        e->wait_tail = NULL;
}

static void set_row(llm_shard_row_t *row, const req_t *r, int pos, int token) {
    row->pos = pos;
    row->token = token;
    row->n_table = r->n_table;
    memcpy(row->table, r->table, (size_t)r->n_table * sizeof row->table[0]);
}

static bucket_t *pick_bucket(llm_engine_t *e, int rows, int prefill) {
    for (int i = 0; i < e->n_buckets; i++)
        if (e->buckets[i].prefill == prefill && e->buckets[i].rows >= rows)
            return &e->buckets[i];
    return NULL;
}

/* Builds the next step from running requests with no step in flight:
 * their decode rows first, then prompt chunks up to the token budget.
 * Returns 0 when there is nothing to run. The rows go to e->rows. */
static int build_step(llm_engine_t *e, step_t *st) {
    int budget = e->p.token_budget, n = 0, prefill_pending = 0;
    memset(st, 0, sizeof *st);
    for (req_t *r = e->running; r; r = r->next)
        if (!r->in_flight && !r->cancelled && r->n_cached < r->n_prompt)
            prefill_pending = 1;
    /* decode rows, leaving PREFILL_MIN rows to prompts when any wait */
    int decode_cap = LLM_ENGINE_MAX_DECODE;
    if (prefill_pending && decode_cap > budget - PREFILL_MIN)
        decode_cap = budget - PREFILL_MIN;
    for (req_t *r = e->running; r && n < decode_cap; r = r->next) {
        if (r->in_flight || r->cancelled || r->n_cached < r->n_prompt)
            continue;
        set_row(&e->rows[n], r, r->n_prompt + r->n_gen - 1, r->last);
        st->row_req[n++] = r;
        st->reqs[st->n_reqs++] = r;
        r->in_flight = 1;
    }
    int n_decode = n;
    for (req_t *r = e->running; r && n < budget; r = r->next) {
        if (r->in_flight || r->cancelled || r->n_cached >= r->n_prompt)
            continue;
        int chunk = r->n_prompt - r->n_cached;
        if (chunk > budget - n)
            chunk = budget - n;
        for (int k = 0; k < chunk; k++) {
            int pos = r->n_cached + k;
            set_row(&e->rows[n], r, pos, r->prompt[pos]);
            st->row_req[n++] = pos == r->n_prompt - 1 ? r : NULL; /* the prompt's last row decides */
        }
        r->n_cached += chunk;
        st->reqs[st->n_reqs++] = r;
        r->in_flight = 1;
    }
    if (n == 0)
        return 0;
    int prefill = n > n_decode;
    st->b = pick_bucket(e, n, prefill);
    st->n_real = n;
    for (int i = n; i < st->b->rows; i++) {
        memset(&e->rows[i], 0, sizeof e->rows[i]);
        e->rows[i].pos = LLM_ROW_PAD;
        st->row_req[i] = NULL;
    }
    e->m.rows += (uint64_t)n;
    if (n > e->m.rows_max)
        e->m.rows_max = n;
    e->m.padded_rows += (uint64_t)(st->b->rows - n);
    if (prefill)
        e->m.steps_prefill++;
    else
        e->m.steps_decode++;
    return 1;
}

/* The results of step st (next[] valid unless failed). */
static void apply_step(llm_engine_t *e, step_t *st, const int *next, int failed) {
    for (int i = 0; i < st->n_reqs; i++)
        st->reqs[i]->in_flight = 0;
    if (failed)
        return;
    for (int i = 0; i < st->n_real; i++) {
        req_t *r = st->row_req[i];
        if (!r)
            continue;
        r->last = next[i];
        r->n_gen++;
        e->m.generated_tokens++;
        if (!r->cancelled)
            push_event(e, r, next[i], LLM_FINISH_NONE, NULL);
        if (r->n_gen >= r->max_tokens && !r->cancelled)
            end_running(e, r, LLM_FINISH_LENGTH, NULL);
    }
}

/* Ends cancelled running requests that have no step in flight. */
static void reap_cancelled(llm_engine_t *e) {
    for (req_t *r = e->running, *nx; r; r = nx) {
        nx = r->next;
        if (r->cancelled && !r->in_flight)
            end_running(e, r, LLM_FINISH_CANCELLED, NULL);
    }
}

/* A step failed: the engine stops taking work and every request ends with
 * the message, once the steps in flight came back. */
static void fail_engine(llm_engine_t *e, const char *msg) {
    if (!e->failed) {
        e->failed = 1;
        snprintf(e->fail_msg, sizeof e->fail_msg, "%s", msg);
        fprintf(stderr, "llm engine: %s\n", msg);
    }
}

static void end_all(llm_engine_t *e, llm_finish_t finish, const char *message) {
    end_waiting_all(e, finish, message);
    while (e->running)
        end_running(e, e->running, finish, message);
}

/* Waits for the oldest step in flight (lock dropped meanwhile). */
static void finish_oldest(llm_engine_t *e) {
    step_t *st = &e->steps[e->steps_head];
    int next[LLM_SHARD_MAX_ROWS];
    pthread_mutex_unlock(&e->lock);
    int rc = llm_serve_finish(st->b->dag, st->ref, st->b->rows, next, STEP_TIMEOUT_MS);
    char msg[512];
    if (rc)
        snprintf(msg, sizeof msg, "step on %s: %s", adag_dag_name(st->b->dag), llm_error());
    pthread_mutex_lock(&e->lock);
    e->m.step_seconds += now_s() - st->t0;
    e->steps_head = (e->steps_head + 1) % MAX_INFLIGHT;
    e->n_steps--;
    if (rc)
        fail_engine(e, msg);
    apply_step(e, st, next, rc != 0);
}

static void *engine_main(void *arg) {
    llm_engine_t *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        reap_cancelled(e);
        if (!e->failed && !e->stop) {
            admit(e);
            while (e->n_steps < e->pp) {
                step_t *st = &e->steps[(e->steps_head + e->n_steps) % MAX_INFLIGHT];
                if (!build_step(e, st))
                    break;
                st->t0 = now_s();
                /* execute never waits for room: at most pp steps are in flight over
                 * all DAGs, each DAG compiled with max_inflight pp */
                if (llm_serve_start(st->b->dag, e->rows, st->b->rows, &st->ref)) {
                    char msg[512];
                    snprintf(msg, sizeof msg, "%s", llm_error());
                    fail_engine(e, msg);
                    apply_step(e, st, NULL, 1);
                    break;
                }
                e->n_steps++;
                if (e->n_steps > e->m.in_flight_max)
                    e->m.in_flight_max = e->n_steps;
            }
        }
        if (e->n_steps > 0) {
            deliver(e);
            finish_oldest(e);
            continue;
        }
        /* nothing in flight: every running request was scheduled if it could be */
        if (e->stop || e->failed)
            end_all(e, e->failed ? LLM_FINISH_ERROR : LLM_FINISH_CANCELLED, e->failed ? e->fail_msg : NULL);
        deliver(e); /* drops the lock: requests may have come meanwhile */
        if (e->stop)
            break;
        if (e->running || (e->wait_head && !e->failed))
            continue;
        pthread_cond_wait(&e->wake, &e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* ---- the public side ---- */

int llm_engine_create(adag_runtime_h rt, const llm_engine_params_t *p, llm_engine_t **out) {
    *out = NULL;
    llm_engine_params_t q = *p;
    if (q.token_budget == 0)
        q.token_budget = 64;
    if (q.max_queue == 0)
        q.max_queue = 256;
    int tb = q.token_budget;
    if (tb < 2 * PREFILL_MIN || tb > LLM_SHARD_MAX_ROWS || (tb & (tb - 1)))
        return llm_fail("llm engine: token_budget %d: a power of two in [%d, %d]", tb, 2 * PREFILL_MIN,
                        LLM_SHARD_MAX_ROWS);
    if (q.max_queue < 1)
        return llm_fail("llm engine: max_queue %d (at least 1)", q.max_queue);
    if (q.serve.n_blocks < 1)
        return llm_fail("llm engine: %d KV blocks (at least 1)", q.serve.n_blocks);
    llm_engine_t *e = calloc(1, sizeof *e);
    if (!e)
        return llm_fail("llm engine: out of memory");
    e->p = q;
    e->pp = q.serve.pp;
    e->n_blocks = q.serve.n_blocks;
    int table_blocks = e->n_blocks < LLM_SHARD_MAX_TABLE ? e->n_blocks : LLM_SHARD_MAX_TABLE;
    e->max_len = table_blocks * LLM_KV_BLOCK;
    e->next_id = 1;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    pthread_cond_init(&e->idle, NULL);
    e->free_blocks = malloc((size_t)e->n_blocks * sizeof *e->free_blocks);
    if (!e->free_blocks) {
        llm_fail("llm engine: out of memory for %d blocks", e->n_blocks);
        goto fail;
    }
    /* popped from the end: block 0 first */
    for (int b = 0; b < e->n_blocks; b++)
        e->free_blocks[b] = e->n_blocks - 1 - b;
    e->n_free = e->n_blocks;
    if (llm_serve_create(rt, &q.serve, &e->serve))
        goto fail;
    for (int rows = 1; rows <= LLM_ENGINE_MAX_DECODE; rows *= 2)
        e->buckets[e->n_buckets++] = (bucket_t){.rows = rows, .prefill = 0};
    for (int rows = PREFILL_MIN; rows <= tb; rows *= 2)
        e->buckets[e->n_buckets++] = (bucket_t){.rows = rows, .prefill = 1};
    for (int i = 0; i < e->n_buckets; i++) {
        bucket_t *b = &e->buckets[i];
        char name[32];
        snprintf(name, sizeof name, "llm_%s%d", b->prefill ? "prefill" : "decode", b->rows);
        if (llm_serve_compile(&e->serve, b->rows, (unsigned)e->pp, name, &b->dag))
            goto fail;
    }
    e->m.blocks_total = e->n_blocks;
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        llm_fail("llm engine: pthread_create: %s", strerror(errno));
        goto fail;
    }
    e->thread_started = 1;
    *out = e;
    return 0;
fail:
    llm_engine_destroy(e);
    return -1;
}

int llm_engine_max_len(const llm_engine_t *e) { return e->max_len; }

int llm_engine_submit(llm_engine_t *e, const uint8_t *prompt, int n, int max_tokens, void *req_user,
                      uint64_t *id) {
    if (n < 1 || !prompt)
        return llm_fail("prompt: %d tokens (at least 1)", n);
    if (max_tokens < 1)
        return llm_fail("max_tokens: %d (at least 1)", max_tokens);
    if (n > e->max_len || max_tokens > e->max_len || n + max_tokens - 1 > e->max_len)
        return llm_fail("max_tokens: %d prompt tokens + %d new tokens need %d cache positions; a request may use "
                        "%d", n, max_tokens, n + max_tokens - 1, e->max_len);
    req_t *r = calloc(1, sizeof *r);
    uint8_t *copy = malloc((size_t)n);
    if (!r || !copy) {
        free(r);
        free(copy);
        return llm_fail("llm engine: out of memory for a prompt of %d tokens", n);
    }
    memcpy(copy, prompt, (size_t)n);
    *r = (req_t){.prompt = copy, .n_prompt = n, .max_tokens = max_tokens, .user = req_user};
    pthread_mutex_lock(&e->lock);
    int rc = 0;
    if (e->draining || e->failed || e->stop) {
        rc = LLM_ENGINE_EDRAINING;
        llm_fail("llm engine: %s", e->failed ? e->fail_msg : "draining, no new requests");
    } else if (e->n_waiting >= e->p.max_queue) {
        rc = LLM_ENGINE_EFULL;
        e->m.rejected_full++;
        llm_fail("llm engine: the queue is full (%d requests wait)", e->n_waiting);
    } else {
        r->id = e->next_id++;
        if (e->wait_tail)
            e->wait_tail->next = r;
        else
            e->wait_head = r;
        e->wait_tail = r;
        e->n_waiting++;
        e->m.requests++;
        e->m.prompt_tokens += (uint64_t)n;
        *id = r->id;
        pthread_cond_signal(&e->wake);
    }
    pthread_mutex_unlock(&e->lock);
    if (rc)
        free_req(r);
    return rc;
}

void llm_engine_cancel(llm_engine_t *e, uint64_t id) {
    pthread_mutex_lock(&e->lock);
    for (req_t *r = e->wait_head; r; r = r->next)
        if (r->id == id)
            r->cancelled = 1;
    for (req_t *r = e->running; r; r = r->next)
        if (r->id == id)
            r->cancelled = 1;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
}

void llm_engine_metrics(llm_engine_t *e, llm_engine_metrics_t *m) {
    pthread_mutex_lock(&e->lock);
    *m = e->m;
    m->waiting = e->n_waiting;
    m->running = e->n_running;
    m->in_flight = e->n_steps;
    m->blocks_used = e->n_blocks - e->n_free;
    m->blocks_total = e->n_blocks;
    m->draining = e->draining;
    m->failed = e->failed;
    pthread_mutex_unlock(&e->lock);
}

int llm_engine_dags(llm_engine_t *e, adag_dag_h *dags, int max) {
    int n = 0;
    for (int i = 0; i < e->n_buckets && n < max; i++)
        dags[n++] = e->buckets[i].dag;
    return n;
}

adag_actor_h llm_engine_actor(llm_engine_t *e, int stage, int rank) {
    if (stage < 0 || stage >= e->serve.pp || rank < 0 || rank >= e->serve.tp)
        return NULL;
    return e->serve.actors[stage * e->serve.tp + rank];
}

int llm_engine_drain(llm_engine_t *e, int timeout_ms) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    if (timeout_ms >= 0) {
        dl.tv_sec += timeout_ms / 1000;
        dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
    }
    int rc = 0;
    pthread_mutex_lock(&e->lock);
    e->draining = 1;
    /* done when no request is left and every end event was delivered */
    while (e->n_waiting + e->n_running > 0 || e->n_events > 0 || e->delivering) {
        int w = timeout_ms < 0 ? pthread_cond_wait(&e->idle, &e->lock)
                               : pthread_cond_timedwait(&e->idle, &e->lock, &dl);
        if (w == ETIMEDOUT) {
            rc = llm_fail("llm engine: drain: %d requests wait and %d run after %d ms", e->n_waiting,
                          e->n_running, timeout_ms);
            break;
        }
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

void llm_engine_destroy(llm_engine_t *e) {
    if (!e)
        return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->lock);
        e->stop = 1;
        pthread_cond_signal(&e->wake);
        pthread_mutex_unlock(&e->lock);
        pthread_join(e->thread, NULL);
    }
    for (int i = 0; i < e->n_buckets; i++)
        if (e->buckets[i].dag)
            adag_dag_destroy(e->buckets[i].dag);
    /* without a thread (create failed) nothing was queued */
    free(e->events);
    free(e->free_blocks);
    pthread_cond_destroy(&e->idle);
    pthread_cond_destroy(&e->wake);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

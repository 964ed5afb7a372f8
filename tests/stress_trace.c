/*
 * stress_trace: trace rings (common/trace.h) under ThreadSanitizer
 * (make test-tsan): several writers on one ring (the driver's: execute and
 * get on any thread) while readers copy it, every copied span whole; and a
 * traced DAG of thread actors run from two threads while a third writes
 * its trace again and again.
 */
#include "common/trace.h"
#include "stress.h"

#include <adag.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRITERS 3
#define SPANS_EACH 200000

static adag_trace_ring_t ring;
static _Atomic int writers_done;

static void *writer(void *arg)
{
    uint64_t w = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < SPANS_EACH; i++) {
        uint64_t v = w << 40 | i;
        /* every field derived from v: a torn copy would not agree */
        adag_trace_add(&ring, ADAG_SPAN_COMPUTE, (uint32_t)w, (uint32_t)i, v, v * 3, v * 3 + 7);
    }
    atomic_fetch_add(&writers_done, 1);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    adag_span_t *out = malloc((ring.mask + 1) * sizeof(*out));
    uint64_t copies = 0, spans = 0;
    while (atomic_load(&writers_done) < WRITERS) {
        uint64_t lost, n = adag_trace_ring_copy(&ring, out, &lost);
        for (uint64_t i = 0; i < n; i++) {
            const adag_span_t *s = &out[i];
            uint64_t w = s->seq >> 40, k = s->seq & ((1ull << 40) - 1);
            EXPECT(s->kind == ADAG_SPAN_COMPUTE && s->op == w && s->arg == (uint32_t)k &&
                       s->start_ns == s->seq * 3 && s->end_ns == s->seq * 3 + 7,
                   "torn span: seq %llx start %llu end %llu op %u arg %u",
                   (unsigned long long)s->seq, (unsigned long long)s->start_ns,
                   (unsigned long long)s->end_ns, s->op, s->arg);
        }
        EXPECT(n <= ring.mask + 1, "copied %llu of a ring of %llu", (unsigned long long)n,
               (unsigned long long)(ring.mask + 1));
        copies++;
        spans += n;
    }
    printf("stress_trace: %llu copies, %llu spans checked\n", (unsigned long long)copies,
           (unsigned long long)spans);
    free(out);
    return NULL;
}

/* a traced DAG of thread actors */
static adag_status_t add_one(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t in;
    int64_t x;
    if (adag_call_arg(call, 0, &in) != ADAG_OK || in.size != 8)
        return adag_call_fail(call, "add_one wants an int64");
    memcpy(&x, in.data, 8);
    x++;
    return adag_call_set_output(call, 0, &x, 8);
}

static const adag_method_def_t methods[] = {{"add_one", add_one, 1, 1}};
static const adag_class_def_t stage_class = {.abi_version = ADAG_ABI_VERSION, .name = "stage",
                                             .state_size = 8, .methods = methods, .nmethods = 1};
static adag_dag_h dag;
static _Atomic int runners_done;

static void *runner(void *arg)
{
    int64_t base = (int64_t)(intptr_t)arg;
    for (int64_t i = 0; i < 3000; i++) {
        int64_t x = base + i, y = 0;
        adag_value_t in = {.data = &x, .size = 8}, out;
        adag_ref_t ref;
        EXPECT(adag_dag_execute(dag, &in, 1, 0, &ref) == ADAG_OK, "%s", adag_last_error());
        EXPECT(adag_dag_get(dag, ref, &out, 1, 10000) == ADAG_OK, "%s", adag_last_error());
        memcpy(&y, out.data, 8);
        EXPECT(y == x + 3, "got %lld for %lld", (long long)y, (long long)x);
        adag_dag_release(dag, ref);
    }
    atomic_fetch_add(&runners_done, 1);
    return NULL;
}

static int traced_dag(void)
{
    adag_runtime_h rt;
    adag_actor_h a[3];
    adag_graph_h g;
    adag_node_h n;
    if (adag_runtime_create(NULL, &rt) != ADAG_OK || adag_class_register(rt, &stage_class))
        return -1;
    for (int i = 0; i < 3; i++) {
        adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "stage"};
        if (adag_actor_create(rt, &p, &a[i]) != ADAG_OK)
            return -1;
    }
    adag_graph_create(rt, &g);
    adag_graph_input(g, 0, &n);
    for (int i = 0; i < 3; i++)
        adag_graph_bind(g, a[i], "add_one", &n, 1, &n);
    adag_graph_output(g, &n, 1);
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_TRACE |
                                              ADAG_COMPILE_PARAM_MAX_INFLIGHT,
                                .max_inflight = 4, .trace_spans = 256};
    if (adag_graph_compile(g, &cp, &dag) != ADAG_OK)
        return -1;
    pthread_t t[2];
    pthread_create(&t[0], NULL, runner, (void *)(intptr_t)0);
    pthread_create(&t[1], NULL, runner, (void *)(intptr_t)1000000);
    int writes = 0;
    while (atomic_load(&runners_done) < 2) {
        FILE *f = fopen("/dev/null", "w");
        EXPECT(adag_dag_write_trace(dag, f) == ADAG_OK, "%s", adag_last_error());
        fclose(f);
        writes++;
    }
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    printf("stress_trace: a traced DAG run from 2 threads, its trace written %d times\n", writes);
    adag_dag_destroy(dag);
    adag_graph_destroy(g);
    adag_runtime_destroy(rt);
    return 0;
}

int main(void)
{
    if (adag_trace_ring_init(&ring, 4096, 0) != ADAG_OK)
        return 2;
    pthread_t w[WRITERS], r[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&r[i], NULL, reader, NULL);
    for (uintptr_t i = 0; i < WRITERS; i++)
        pthread_create(&w[i], NULL, writer, (void *)i);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(w[i], NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(r[i], NULL);
    uint64_t lost;
    adag_span_t *all = malloc((ring.mask + 1) * sizeof(*all));
    uint64_t n = adag_trace_ring_copy(&ring, all, &lost);
    /* every span claimed is kept or counted lost (a slot a lapped writer
     * held keeps its older span, which is not the ring's latest lap) */
    EXPECT(n <= ring.mask + 1 && n > ring.mask / 2 && n + lost == WRITERS * (uint64_t)SPANS_EACH,
           "after the writers: %llu kept, %llu lost", (unsigned long long)n,
           (unsigned long long)lost);
    free(all);
    adag_trace_ring_free(&ring);
    EXPECT(traced_dag() == 0, "traced DAG: %s", adag_last_error());
    int f = atomic_load(&failures);
    printf("stress_trace: %s\n", f ? "FAILED" : "ok");
    return f ? 1 : 0;
}

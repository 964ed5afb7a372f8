/*
 * execute's split copy under ThreadSanitizer (`make test-tsan`; the
 * harness: tests/stress.h). Large inputs (above ADAG_COPY_SPLIT_MIN) are
 * copied into the input ring by the runtime's copy pool (common/copy_pool.h)
 * while thread actors of the gpu_stage class on the emulated device read
 * the slots of earlier executions: only the pool's join (its lock) and the
 * ring's publish order the chunks' writes before the readers, so a missing
 * edge is a race TSan reports, and a chunk that did not land fails the
 * byte check. Two threads at once: on two DAGs of one runtime (their
 * copies contend for the pool: one is split, the other runs on its
 * caller), then on one DAG (each gets its own refs).
 */
#include "gpu_stage.h"
#include "stress.h"

#include <adag.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)
#define BYTES (5 * MiB + 3)
enum { EXECS = 12, INFLIGHT = 2, STAGE = 1 };

static adag_status_t build(adag_runtime_h rt, adag_actor_h a, unsigned inflight, adag_dag_h *dag)
{
    adag_graph_h g;
    adag_node_h x, y;
    adag_status_t st;
    if ((st = adag_graph_create(rt, &g)) != ADAG_OK)
        return st;
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_SLOT_CAPACITY,
                                .max_inflight = inflight, .slot_capacity = BYTES};
    if ((st = adag_graph_input(g, 0, &x)) == ADAG_OK && (st = adag_node_tensor(x, NULL)) == ADAG_OK &&
        (st = adag_graph_bind(g, a, "apply", &x, 1, &y)) == ADAG_OK &&
        (st = adag_graph_output(g, &y, 1)) == ADAG_OK)
        st = adag_graph_compile(g, &cp, dag);
    adag_graph_destroy(g);
    return st;
}

static uint8_t pattern(uint64_t k, size_t j)
{
    return (uint8_t)(j * 131u + (j >> 12) * 7u + k * 29u + 1u);
}

static int check(const adag_value_t *out, uint64_t k)
{
    if (out->size != BYTES) {
        EXPECT(0, "execution %llu: %zu bytes back, want %zu", (unsigned long long)k, out->size,
               BYTES);
        return 0;
    }
    const uint8_t *b = out->data;
    for (size_t j = 0; j < BYTES; j++)
        if (b[j] != (uint8_t)(pattern(k, j) * 3u + STAGE)) {
            EXPECT(0, "execution %llu: byte %zu differs", (unsigned long long)k, j);
            return 0;
        }
    return 1;
}

typedef struct {
    adag_dag_h dag;
    uint64_t k0;
    int ok;
} submitter_t;

/* EXECS executions, INFLIGHT of them in flight, each checked. */
static void *submit_main(void *arg)
{
    submitter_t *s = arg;
    uint8_t *in = malloc(BYTES);
    adag_ref_t refs[INFLIGHT];
    s->ok = in != NULL;
    for (uint64_t k = 0; s->ok && k < EXECS + INFLIGHT; k++) {
        if (k >= INFLIGHT) {
            adag_value_t out;
            adag_ref_t ref = refs[(k - INFLIGHT) % INFLIGHT];
            s->ok = adag_dag_get(s->dag, ref, &out, 1, 120000) == ADAG_OK &&
                    check(&out, s->k0 + k - INFLIGHT);
            s->ok = adag_dag_release(s->dag, ref) == ADAG_OK && s->ok;
        }
        if (s->ok && k < EXECS) {
            int64_t shape[1] = {(int64_t)BYTES};
            for (size_t j = 0; j < BYTES; j++)
                in[j] = pattern(s->k0 + k, j);
            adag_value_t v = adag_value_tensor(in, ADAG_DTYPE_U8, 1, shape);
            s->ok = adag_dag_execute(s->dag, &v, 1, 0, &refs[k % INFLIGHT]) == ADAG_OK;
        }
    }
    EXPECT(s->ok, "submitter %llu: %s", (unsigned long long)s->k0, adag_last_error());
    free(in);
    return NULL;
}

/* Two threads, on two DAGs (shared 0) or one (shared 1, twice the room). */
static int two_threads(int shared)
{
    adag_runtime_h rt = NULL;
    adag_actor_h a[2] = {NULL, NULL};
    submitter_t s[2] = {{.k0 = 0}, {.k0 = 1000}};
    pthread_t t[2];
    int ok = 0, started = 0;
    const char *devices[2] = {"emu:0", "emu:1"};
    if (adag_runtime_create(NULL, &rt) != ADAG_OK ||
        adag_class_register(rt, &test_gpu_stage_class) != ADAG_OK)
        goto out;
    for (int i = 0; i < 2; i++) {
        int init[2] = {STAGE, 0};
        adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS |
                                               ADAG_ACTOR_PARAM_PLACEMENT |
                                               ADAG_ACTOR_PARAM_INIT | ADAG_ACTOR_PARAM_DEVICE,
                                 .class_name = "gpu_stage", .placement = ADAG_PLACEMENT_THREAD,
                                 .init_data = init, .init_size = sizeof init,
                                 .device = devices[i]};
        if (adag_actor_create(rt, &p, &a[i]) != ADAG_OK)
            goto out;
    }
    if (build(rt, a[0], shared ? 2 * INFLIGHT : INFLIGHT, &s[0].dag) != ADAG_OK)
        goto out;
    if (shared)
        s[1].dag = s[0].dag;
    else if (build(rt, a[1], INFLIGHT, &s[1].dag) != ADAG_OK)
        goto out;
    for (; started < 2; started++)
        if (pthread_create(&t[started], NULL, submit_main, &s[started]) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    ok = started == 2 && s[0].ok && s[1].ok;
out:
    for (int i = 0; i < (shared ? 1 : 2); i++)
        if (s[i].dag)
            adag_dag_destroy(s[i].dag);
    for (int i = 0; i < 2; i++)
        if (a[i])
            adag_actor_destroy(a[i]);
    if (rt)
        adag_runtime_destroy(rt);
    return ok;
}

static int two_dags(void)
{
    return two_threads(0);
}

static int one_dag(void)
{
    return two_threads(1);
}

int main(void)
{
    const stress_part_t parts[] = {
        {"two threads on two DAGs, large inputs", two_dags},
        {"two threads on one DAG, large inputs", one_dag},
    };
    return stress_run_parts("stress-execute-copy", parts, sizeof parts / sizeof parts[0]);
}

/*
 * Suite "execcopy": adag_dag_execute's copy of large host inputs into the
 * input ring, which the runtime splits over its copy pool's threads from
 * 4 MiB on (common/copy_pool.h). Inputs of 24 MiB, odd sizes and sizes
 * around the split threshold, several per execution, several executions
 * in flight, go through actors on the emulated device emu:0 (each input
 * to the device, one elementwise kernel, back to the driver), and every
 * byte that comes back is checked against the C reference; then two
 * threads executing at once on two DAGs of one runtime (their copies
 * contend for the pool).
 */
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define SPLIT ((size_t)4 * MiB) /* ADAG_COPY_SPLIT_MIN */
#define MAX_INPUTS 3
#define STAGE 1

/* inputs 0..n-1, each -> a.apply (a u8 tensor on emu:0) -> output i */
static adag_dag_h fan_dag(adag_runtime_h rt, adag_actor_h a, unsigned n, unsigned inflight,
                          size_t cap)
{
    adag_graph_h g;
    adag_node_h x[MAX_INPUTS], y[MAX_INPUTS];
    ASSERT_OK(adag_graph_create(rt, &g));
    for (unsigned i = 0; i < n; i++) {
        ASSERT_OK(adag_graph_input(g, i, &x[i]));
        ASSERT_OK(adag_node_tensor(x[i], NULL));
        ASSERT_OK(adag_graph_bind(g, a, "apply", &x[i], 1, &y[i]));
    }
    ASSERT_OK(adag_graph_output(g, y, n));
    adag_compile_params_t cp = h_compile_params(inflight, cap, 0, 0);
    adag_dag_h dag;
    ASSERT_OK(adag_graph_compile(g, &cp, &dag));
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

/* The bytes of input i of execution k: they change with k (a slot reused
 * from an earlier execution, or a chunk left out, shows) and along the
 * buffer in every 4 KiB page. */
static uint8_t pattern(uint64_t k, unsigned i, size_t j)
{
    return (uint8_t)(j * 131u + (j >> 12) * 7u + k * 29u + i * 53u + 1u);
}

static void fill(uint8_t *buf, size_t n, uint64_t k, unsigned i)
{
    for (size_t j = 0; j < n; j++)
        buf[j] = pattern(k, i, j);
}

/* Every byte of out is stage STAGE of pattern(k, i): 0, or a message
 * naming the first byte that is not. */
static int check_out(const adag_value_t *out, size_t n, uint64_t k, unsigned i, char *why,
                     size_t len)
{
    if (out->kind != ADAG_VALUE_TENSOR || out->device != ADAG_DEVICE_HOST || out->size != n) {
        snprintf(why, len, "execution %llu output %u: kind %d, %zu bytes on device %d; want a "
                 "host tensor of %zu bytes", (unsigned long long)k, i, out->kind, out->size,
                 out->device, n);
        return -1;
    }
    const uint8_t *b = out->data;
    for (size_t j = 0; j < n; j++) {
        uint8_t want = (uint8_t)(pattern(k, i, j) * 3u + STAGE);
        if (b[j] != want) {
            snprintf(why, len, "execution %llu output %u (%zu bytes): byte %zu (chunk of 1 MiB "
                     "%zu) is 0x%02x, want 0x%02x", (unsigned long long)k, i, n, j, j / MiB,
                     b[j], want);
            return -1;
        }
    }
    return 0;
}

/* Runs nexec executions of dag (ninputs inputs of sizes[i], inflight in
 * flight, pipelined: execution k is submitted before k - inflight + 1 is
 * taken), each output checked byte for byte. 0, or -1 with why. */
static int run_execs(adag_dag_h dag, unsigned ninputs, const size_t *sizes, unsigned inflight,
                     uint64_t k0, unsigned nexec, char *why, size_t len)
{
    uint8_t *in[MAX_INPUTS] = {0};
    adag_ref_t refs[8];
    int rc = -1;
    for (unsigned i = 0; i < ninputs; i++)
        if (!(in[i] = malloc(sizes[i]))) {
            snprintf(why, len, "out of memory");
            goto out;
        }
    for (uint64_t k = 0; k < nexec + inflight; k++) {
        if (k >= inflight) { /* take execution k - inflight */
            uint64_t j = k - inflight;
            adag_value_t outs[MAX_INPUTS];
            adag_status_t st = adag_dag_get(dag, refs[j % inflight], outs, ninputs, 60000);
            if (st != ADAG_OK) {
                snprintf(why, len, "get of execution %llu: %s", (unsigned long long)(k0 + j),
                         adag_last_error());
                goto out;
            }
            for (unsigned i = 0; i < ninputs; i++)
                if (check_out(&outs[i], sizes[i], k0 + j, i, why, len)) {
                    adag_dag_release(dag, refs[j % inflight]);
                    goto out;
                }
            if (adag_dag_release(dag, refs[j % inflight]) != ADAG_OK) {
                snprintf(why, len, "release: %s", adag_last_error());
                goto out;
            }
        }
        if (k < nexec) {
            /* the caller's buffer is reused at once: execute copied it */
            adag_value_t v[MAX_INPUTS];
            for (unsigned i = 0; i < ninputs; i++) {
                int64_t shape[1] = {(int64_t)sizes[i]};
                fill(in[i], sizes[i], k0 + k, i);
                v[i] = adag_value_tensor(in[i], ADAG_DTYPE_U8, 1, shape);
            }
            if (adag_dag_execute(dag, v, ninputs, 0, &refs[k % inflight]) != ADAG_OK) {
                snprintf(why, len, "execute %llu: %s", (unsigned long long)(k0 + k),
                         adag_last_error());
                goto out;
            }
        }
    }
    rc = 0;
out:
    for (unsigned i = 0; i < ninputs; i++)
        free(in[i]);
    return rc;
}

/* ninputs inputs of sizes, inflight in flight, through an actor on emu:0
 * placed pl; every byte checked; nothing left behind. */
static void through_device(adag_placement_t pl, unsigned ninputs, const size_t *sizes,
                           unsigned inflight, unsigned nexec)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_gpu_stage(rt, pl, "dev", "emu:0", STAGE, 0);
    size_t cap = 0;
    for (unsigned i = 0; i < ninputs; i++)
        cap = sizes[i] > cap ? sizes[i] : cap;
    adag_dag_h dag = fan_dag(rt, a, ninputs, inflight, cap);
    char why[256] = "";
    int rc = run_execs(dag, ninputs, sizes, inflight, 0, nexec, why, sizeof why);
    cr_assert_eq(rc, 0, "%s actor, %u inputs, %u in flight: %s", h_pl_name(pl), ninputs,
                 inflight, why);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_actor_destroy(a));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* 24 MiB, one input, 3 executions in flight, 8 executions */
static void large(adag_placement_t pl)
{
    size_t sizes[1] = {24 * MiB};
    through_device(pl, 1, sizes, 3, 8);
}
H_BOTH(execcopy, large, 120)

/* odd sizes and sizes around the split threshold, one per execution's
 * input: below (one thread), at, just above, not a multiple of anything */
Test(execcopy, sizes_around_the_threshold, .timeout = 120)
{
    const size_t sizes[] = {SPLIT - 1, SPLIT, SPLIT + 1, 5 * MiB + 4097, 9 * MiB + 13,
                            17 * MiB - 3};
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        through_device(ADAG_PLACEMENT_PROCESS, 1, &sizes[s], 2, 3);
}

/* three inputs per execution, large and small mixed, 2 in flight */
Test(execcopy, several_inputs, .timeout = 120)
{
    const size_t sizes[MAX_INPUTS] = {11 * MiB + 7, 100, 6 * MiB};
    through_device(ADAG_PLACEMENT_PROCESS, MAX_INPUTS, sizes, 2, 6);
}

/* ---- two submitting threads ---- */

typedef struct {
    adag_dag_h dag;
    uint64_t k0;
    unsigned inflight; /* this thread's executions in flight */
    char why[256];
    int rc;
} submitter_t;

static void *submit_main(void *arg)
{
    submitter_t *s = arg;
    const size_t sizes[2] = {12 * MiB + 1, 5 * MiB - 5};
    s->rc = run_execs(s->dag, 2, sizes, s->inflight, s->k0, 10, s->why, sizeof s->why);
    return NULL;
}

/* Two threads execute at once, each on its own DAG of one runtime (thread
 * actors on emu:0 and emu:1; their large copies run at the same time, one
 * split by the pool and the other on its caller, or one after the other),
 * then both on one DAG; every byte checked either way. On one DAG (4 in
 * flight) each thread keeps one execution of its own in flight: refs are
 * numbered across both threads and execution N takes the slots of N - 4,
 * so a thread keeping two could wait for room behind its own unreleased
 * ref while the other ran ahead (adag_dag_execute then says so after its
 * timeout). */
static void two_threads(int shared)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2] = {h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "d0", "emu:0", STAGE, 0),
                         h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "d1", "emu:1", STAGE, 0)};
    submitter_t s[2] = {{.k0 = 0, .inflight = shared ? 1 : 2},
                        {.k0 = 1000, .inflight = shared ? 1 : 2}};
    pthread_t t[2];
    s[0].dag = fan_dag(rt, a[0], 2, shared ? 4 : 2, 12 * MiB + 1);
    s[1].dag = shared ? s[0].dag : fan_dag(rt, a[1], 2, 2, 12 * MiB + 1);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, submit_main, &s[i]), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(s[i].rc, 0, "thread %d (%s): %s", i, shared ? "one DAG" : "two DAGs",
                     s[i].why);
    for (int i = 0; i < (shared ? 1 : 2); i++)
        ASSERT_OK(adag_dag_destroy(s[i].dag));
    for (int i = 0; i < 2; i++)
        ASSERT_OK(adag_actor_destroy(a[i]));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

Test(execcopy, two_threads_two_dags, .timeout = 180)
{
    two_threads(0);
}

Test(execcopy, two_threads_one_dag, .timeout = 180)
{
    two_threads(1);
}

/*
 * Faults on the device path of whole DAGs (suite "device_faults"), on the
 * emulated device with the device pipeline stage (gpu_stage.h):
 *   - a transfer that does not complete within the DAG's comm timeout
 *     fails the DAG with ADAG_ERR_TIMEOUT naming the op and the peer (the
 *     watchdog of the reading actor; a process actor reports it on its
 *     event socket), long before the stuck kernel would have ended; a DAG
 *     over other actors goes on, and the workers keep serving;
 *   - SIGKILL of a device actor mid-stream fails its DAG with
 *     ADAG_ERR_ACTOR_DIED; the survivors' streams, which wait on the dead
 *     actor's events, give up on them (the abort abandons them), so
 *     teardown is prompt and leaves no device memory or event in any
 *     survivor, and the survivors run a new DAG correctly;
 *   - comm_timeout_ms is checked at compile time.
 */
#include "common/clock.h"
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_ELEMS 64

/* input -> a[0].step -> ... -> a[n-1].step -> (tensor, last info) */
static adag_dag_h chain(adag_runtime_h rt, adag_actor_h *a, unsigned n, const char *name, int comm_timeout_ms,
                        unsigned inflight)
{
    adag_compile_params_t cp = h_compile_params(inflight, 4096, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_NAME | ADAG_COMPILE_PARAM_COMM_TIMEOUT;
    cp.name = name;
    cp.comm_timeout_ms = comm_timeout_ms;
    return h_gpu_chain(rt, a, n, &cp);
}

/* f32 elements of execution k */
static void make_input(float *x, uint64_t k)
{
    for (unsigned i = 0; i < N_ELEMS; i++)
        x[i] = (float)((k * 3 + i) % 200) - 100.0f;
}

static adag_value_t tensor_of(float *x)
{
    adag_value_t v = {.data = x, .size = N_ELEMS * sizeof(float), .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_F32, .ndim = 1, .shape = {N_ELEMS}};
    return v;
}

/* out must be in through stages first..first+n-1 (C reference) */
static void check(const float *in, const adag_value_t *out, const int *stages, unsigned n,
                  uint64_t k)
{
    cr_assert_eq(out->kind, ADAG_VALUE_TENSOR);
    cr_assert_eq(out->size, N_ELEMS * sizeof(float), "execution %llu",
                 (unsigned long long)k);
    for (unsigned i = 0; i < N_ELEMS; i++) {
        float a = in[i], b;
        for (unsigned s = 0; s < n; s++) {
            stage_apply(ADAG_DTYPE_F32, stages[s], &a, &b);
            a = b;
        }
        cr_assert(memcmp(&a, (const char *)out->data + i * sizeof(float), sizeof(a)) == 0,
                  "execution %llu, element %u differs from the C reference",
                  (unsigned long long)k, i);
    }
}

/* A runtime whose device hand-offs are by value ops (memops 1, the
 * default) or by IPC events (ADAG_DEVICE_MEMOPS=0, read at its creation;
 * each test runs in a process of its own). */
static adag_runtime_h runtime_memops(int memops)
{
    setenv("ADAG_DEVICE_MEMOPS", memops ? "1" : "0", 1);
    adag_runtime_h rt = h_runtime();
    unsetenv("ADAG_DEVICE_MEMOPS");
    return rt;
}

/* One execution through dag, checked. */
static void run_one(adag_dag_h dag, const int *stages, unsigned n, uint64_t k)
{
    float x[N_ELEMS];
    adag_value_t in = tensor_of(x), out[2];
    adag_ref_t ref;
    make_input(x, k);
    ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, out, 2, 20000));
    check(x, &out[0], stages, n, k);
    ASSERT_OK(adag_dag_release(dag, ref));
}

/* s1 (emu:0) runs a kernel of 4 s; s2 (emu:1) copies s1's value when it
 * is ready. With a comm timeout of 300 ms, s2's watchdog fails the DAG
 * with ADAG_ERR_TIMEOUT naming the peer copy and s1, well before the
 * kernel ends; a DAG over s3 alone runs before and after. */
static void stuck_transfer_by(adag_placement_t pl, int memops)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = runtime_memops(memops);
    adag_actor_h a[2] = {h_gpu_stage(rt, pl, "s1", "emu:0", 1, 4000000),
                         h_gpu_stage(rt, pl, "s2", "emu:1", 2, 0)};
    adag_actor_h s3 = h_gpu_stage(rt, pl, "s3", "emu:2", 3, 0);
    adag_dag_h stuck = chain(rt, a, 2, "stuck", 300, 2);
    adag_dag_h other = chain(rt, &s3, 1, "other", 300, 2);
    const int other_stages[1] = {3};
    run_one(other, other_stages, 1, 0);

    float x[N_ELEMS];
    adag_value_t in = tensor_of(x), out[2];
    adag_ref_t ref;
    make_input(x, 1);
    int64_t t0 = adag__now_ns();
    ASSERT_OK(adag_dag_execute(stuck, &in, 1, 0, &ref));
    adag_status_t st = adag_dag_get(stuck, ref, out, 2, 20000);
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    cr_assert_eq(st, ADAG_ERR_TIMEOUT, "get: %s (%s) after %.0f ms", adag_status_str(st),
                 adag_last_error(), ms);
    const char *msg = adag_last_error();
    cr_assert(strstr(msg, "the peer copy from s1 (emu:0)") &&
                  strstr(msg, "did not complete within 300 ms") && strstr(msg, "actor s2"),
              "the failure does not name the op, the peer and the actor: %s", msg);
    cr_assert(strstr(msg, memops ? "after a stream memory op on its word" : "after its IPC event"),
              "the hand-off is not by %s: %s", memops ? "value ops" : "IPC events", msg);
    /* the watchdog, not the kernel's end (4 s), failed it */
    cr_assert_lt(ms, 3500.0, "the DAG failed only after %.0f ms", ms);
    /* the DAG stays failed; the other DAG and every worker go on */
    cr_assert_eq(adag_dag_execute(stuck, &in, 1, 0, &ref), ADAG_ERR_TIMEOUT);
    run_one(other, other_stages, 1, 1);
    ASSERT_OK(adag_dag_destroy(stuck));
    run_one(other, other_stages, 1, 2);
    ASSERT_OK(adag_dag_destroy(other));
    for (int i = 0; i < 2; i++)
        ASSERT_OK(adag_actor_destroy(a[i]));
    ASSERT_OK(adag_actor_destroy(s3));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

static void stuck_transfer(adag_placement_t pl)
{
    stuck_transfer_by(pl, 1);
}

H_BOTH(device_faults, stuck_transfer, 60)

/* The same by IPC events (ADAG_DEVICE_MEMOPS=0): the watchdog names the
 * event, and the abort abandons it. */
Test(device_faults, stuck_transfer_by_ipc_events, .timeout = 60)
{
    stuck_transfer_by(ADAG_PLACEMENT_PROCESS, 0);
}

/* s1 (emu:0) -> s2 (emu:0, zero copy: s1's compute stream waits on s2's
 * `consumed` events) -> s3 (emu:1, peer copy: s3's comm stream waits on
 * s2's `ready` events), kernels of 2 ms; s2 is killed with executions in
 * flight. */
static void sigkill_mid_stream(int memops)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = runtime_memops(memops);
    const int stages[3] = {1, 2, 3};
    adag_actor_h a[3] = {h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "s1", "emu:0", 1, 2000),
                         h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "s2", "emu:0", 2, 2000),
                         h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "s3", "emu:1", 3, 2000)};
    enum { INFLIGHT = 4 };
    adag_dag_h dag = chain(rt, a, 3, "victim", 0, INFLIGHT);
    static float x[INFLIGHT][N_ELEMS];
    adag_ref_t refs[INFLIGHT];
    adag_status_t st = ADAG_OK;
    uint64_t k;
    for (k = 0; st == ADAG_OK && k < 100000; k++) {
        if (k == 40)
            cr_assert_eq(kill(adag_actor_pid(a[1]), SIGKILL), 0);
        if (k >= INFLIGHT) {
            adag_value_t out[2];
            adag_ref_t r = refs[k % INFLIGHT];
            st = adag_dag_get(dag, r, out, 2, 20000);
            if (st == ADAG_OK) {
                check(x[k % INFLIGHT], &out[0], stages, 3, k - INFLIGHT);
                ASSERT_OK(adag_dag_release(dag, r));
            }
        }
        if (st == ADAG_OK) {
            make_input(x[k % INFLIGHT], k);
            adag_value_t in = tensor_of(x[k % INFLIGHT]);
            st = adag_dag_execute(dag, &in, 1, 0, &refs[k % INFLIGHT]);
        }
    }
    cr_assert_eq(st, ADAG_ERR_ACTOR_DIED, "after %llu executions: %s (%s)",
                 (unsigned long long)k, adag_status_str(st), adag_last_error());
    cr_assert(strstr(adag_last_error(), "s2"), "the failure does not name s2: %s",
              adag_last_error());
    /* the survivors' streams gave up on s2: teardown does not wait for
     * them (it would wait out the teardown timeout, then leak) */
    int64_t t0 = adag__now_ns();
    ASSERT_OK(adag_dag_destroy(dag));
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    cr_assert_lt(ms, 4000.0, "destroy took %.0f ms", ms);
    cr_assert_eq(probe_device_objects(adag_actor_pid(a[0])), 0,
                 "s1 still holds device memory or events");
    cr_assert_eq(probe_device_objects(adag_actor_pid(a[2])), 0,
                 "s3 still holds device memory or events");
    /* the survivors work */
    adag_actor_h rest[2] = {a[0], a[2]};
    const int rest_stages[2] = {1, 3};
    adag_dag_h again = chain(rt, rest, 2, "survivors", 0, 2);
    for (uint64_t j = 0; j < 50; j++)
        run_one(again, rest_stages, 2, j);
    ASSERT_OK(adag_dag_destroy(again));
    for (int i = 0; i < 3; i++)
        adag_actor_destroy(a[i]); /* s2's says it died */
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* by value ops, the survivors' stores of the abort value into the ring's
 * words release the streams that waited for s2 */
Test(device_faults, sigkill_mid_stream, .timeout = 90)
{
    sigkill_mid_stream(1);
}

/* by IPC events, their abandon does */
Test(device_faults, sigkill_mid_stream_by_ipc_events, .timeout = 90)
{
    sigkill_mid_stream(0);
}

Test(device_faults, comm_timeout_is_checked)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h s = h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "s", "emu:0", 1, 0);
    adag_graph_h g;
    adag_node_h x, call, outs[2];
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_graph_bind(g, s, "step", &x, 1, &call));
    ASSERT_OK(adag_node_output(call, 0, &outs[0]));
    ASSERT_OK(adag_node_output(call, 1, &outs[1]));
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_COMM_TIMEOUT,
                                .comm_timeout_ms = -2};
    adag_dag_h dag;
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "comm_timeout_ms -2"), "%s", adag_last_error());
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_actor_destroy(s));
    ASSERT_OK(adag_runtime_destroy(rt));
}

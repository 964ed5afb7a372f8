/*
 * test-cuda-dag's timing and fault tests (cuda_dag.h), the CUDA side of
 * tests/test_gpu_pipeline.c's slow kernel and tests/test_device_faults.c:
 *   - a method whose kernel spins 200 ms returns at once, and the loop
 *     runs the next executions' methods while the kernels queue up;
 *   - a kernel that spins 4 s upstream and a comm timeout of 300 ms fail
 *     the DAG with ADAG_ERR_TIMEOUT naming the op, long before the kernel
 *     ends, while another DAG goes on;
 *   - SIGKILL of a device actor mid-stream fails the DAG with
 *     ADAG_ERR_ACTOR_DIED, and destroy is bounded;
 *   - after everything is destroyed, the device's free memory
 *     (cudaMemGetInfo) is back.
 * Only ordering facts are asserted about time, with wide margins.
 */
#include "cuda_dag.h"

#include "gpu_stage.h" /* stage_apply: the C reference */

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One execution of input k through dag (stages first..first+nstages-1),
 * checked. */
static int run_one(adag_dag_h dag, int first, int nstages, uint64_t k)
{
    int rc = PASS;
    static cdag_input_t in;
    adag_value_t out[2];
    adag_ref_t ref;
    cdag_make_input(&in, k);
    adag_value_t v = cdag_input_value(&in);
    CHECK_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    CHECK_OK(adag_dag_get(dag, ref, out, 2, 20000));
    CHECK(cdag_check(&in, &out[0], out[0].data, first, nstages, k) == 0,
          "execution %llu: the output is wrong (above)", (unsigned long long)k);
    CHECK_OK(adag_dag_release(dag, ref));
out:
    return rc;
}

/* One actor whose kernels spin 200 ms; 4 executions in flight. A loop
 * that waited for its kernel would run the 4 methods >= 200 ms apart, and
 * each method would last as long as its kernel. */
int cdag_test_slow_kernel(void)
{
    enum { N = 4, SPIN_MS = 200 };
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    adag_runtime_h rt = NULL;
    adag_actor_h a;
    adag_dag_h dag = NULL;
    static cdag_input_t in[N];
    adag_ref_t refs[N];
    cuda_stage_info_t info[N];
    int64_t first_result_ns = 0;
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(cdag_stage(rt, "slow", cdag_dev(0), 1, SPIN_MS * 1000, &a));
    cdag_chain_t o = {.max_inflight = N, .slot_capacity = 4096};
    CHECK_OK(cdag_chain(rt, &a, 1, &o, &dag));
    /* first, one execution on its own: the first launch in a process loads
     * (or JIT-compiles) the kernels, which is not what is measured */
    if ((rc = run_one(dag, 1, 1, 0)) != PASS)
        goto out;
    int64_t t0 = cdag_now_ns();
    for (int k = 0; k < N; k++) {
        cdag_make_input(&in[k], (uint64_t)k + 1);
        adag_value_t v = cdag_input_value(&in[k]);
        CHECK_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k]));
    }
    for (int k = 0; k < N; k++) {
        adag_value_t out[2];
        CHECK_OK(adag_dag_get(dag, refs[k], out, 2, 20000));
        if (k == 0)
            first_result_ns = cdag_now_ns();
        CHECK(cdag_check(&in[k], &out[0], out[0].data, 1, 1, (uint64_t)k + 1) == 0,
              "execution %d: the output is wrong (above)", k + 1);
        CHECK(out[1].size == sizeof info[k], "info of %zu bytes", out[1].size);
        memcpy(&info[k], out[1].data, sizeof info[k]);
        CHECK_OK(adag_dag_release(dag, refs[k]));
    }
    double all_ms = cdag_ms_since(t0);
    double longest_ms = 0;
    for (int k = 0; k < N; k++) {
        double ms = (double)(info[k].method_end_ns - info[k].method_begin_ns) / 1e6;
        longest_ms = ms > longest_ms ? ms : longest_ms;
    }
    double spread_ms = (double)(info[N - 1].method_begin_ns - info[0].method_begin_ns) / 1e6;
    double ahead_ms = (double)(first_result_ns - info[0].method_end_ns) / 1e6;
    printf("  slow kernel: each method took <= %.2f ms on the host, method 4 began %.1f ms after "
           "method 1, which returned %.1f ms before its result was got; %d x %d ms kernels in "
           "%.0f ms\n",
           longest_ms, spread_ms, ahead_ms, N, SPIN_MS, all_ms);
    CHECK(longest_ms < SPIN_MS / 2, "a method took %.1f ms: it waited for its %d ms kernel",
          longest_ms, SPIN_MS);
    CHECK(spread_ms < SPIN_MS * 0.75,
          "the 4th method began %.1f ms after the 1st: the loop waited for a kernel", spread_ms);
    CHECK(ahead_ms > SPIN_MS / 2,
          "the 1st method returned only %.1f ms before its result: it waited for its kernel",
          ahead_ms);
    /* the kernels did spin, one after the other on the compute stream */
    CHECK(all_ms >= (N - 1) * SPIN_MS, "%d kernels of %d ms on one stream took %.0f ms", N,
          SPIN_MS, all_ms);
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* s1 (cuda:0) runs a kernel of 4 s; s2 (cuda:0) reads s1's value in place
 * (zero copy), its compute stream waiting for s1's `ready`. With a comm
 * timeout of 300 ms, s2's watchdog fails the DAG with ADAG_ERR_TIMEOUT
 * naming that wait and s1, well before the kernel ends; a DAG over s3
 * (cuda:0) runs before, meanwhile and after. */
int cdag_test_stuck_transfer(void)
{
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    adag_runtime_h rt = NULL;
    adag_actor_h a[2], s3;
    adag_dag_h stuck = NULL, other = NULL;
    static cdag_input_t in;
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(cdag_stage(rt, "s1", cdag_dev(0), 1, 4000000, &a[0]));
    CHECK_OK(cdag_stage(rt, "s2", cdag_dev(0), 2, 0, &a[1]));
    CHECK_OK(cdag_stage(rt, "s3", cdag_dev(0), 3, 0, &s3));
    cdag_chain_t so = {.name = "stuck", .max_inflight = 2, .slot_capacity = 4096,
                       .comm_timeout_ms = 300};
    /* the other DAG's kernels share the GPU with the 4 s kernel of another
     * process (time slices): a wider timeout, still watched */
    cdag_chain_t oo = {.name = "other", .max_inflight = 2, .slot_capacity = 4096,
                       .comm_timeout_ms = 2000};
    CHECK_OK(cdag_chain(rt, a, 2, &so, &stuck));
    CHECK_OK(cdag_chain(rt, &s3, 1, &oo, &other));
    if ((rc = run_one(other, 3, 1, 0)) != PASS)
        goto out;

    adag_value_t out[2];
    adag_ref_t ref;
    cdag_make_input(&in, 7); /* 7: not an empty tensor */
    adag_value_t v = cdag_input_value(&in);
    int64_t t0 = cdag_now_ns();
    CHECK_OK(adag_dag_execute(stuck, &v, 1, 0, &ref));
    adag_status_t st = adag_dag_get(stuck, ref, out, 2, 20000);
    double ms = cdag_ms_since(t0);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", adag_last_error());
    printf("  stuck transfer: %s after %.0f ms: %s\n", adag_status_str(st), ms, msg);
    CHECK(st == ADAG_ERR_TIMEOUT, "get: %s (%s) after %.0f ms", adag_status_str(st), msg, ms);
    char op[64];
    snprintf(op, sizeof op, "waiting for the value of s1 (%s)", cdag_dev(0));
    CHECK(strstr(msg, op) &&
              strstr(msg, "did not complete within 300 ms") && strstr(msg, "actor s2"),
          "the failure does not name the op, the peer and the actor: %s", msg);
    /* the watchdog, not the kernel's end (4 s), failed it */
    CHECK(ms < 3000, "the DAG failed only after %.0f ms", ms);
    /* the DAG stays failed; the other DAG and the workers go on */
    st = adag_dag_execute(stuck, &v, 1, 0, &ref);
    CHECK(st == ADAG_ERR_TIMEOUT, "execute on the failed DAG: %s", adag_status_str(st));
    if ((rc = run_one(other, 3, 1, 1)) != PASS)
        goto out;
    CHECK_OK(adag_dag_destroy(stuck));
    stuck = NULL;
    if ((rc = run_one(other, 3, 1, 2)) != PASS)
        goto out;
    CHECK_OK(adag_dag_destroy(other));
    other = NULL;
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* s1 -> s2 -> s3, all on cuda:0 (zero copy: s1's compute stream waits on
 * s2's `consumed` events, s3's on s2's `ready`), kernels of 2 ms; s2 is
 * killed with executions in flight. CUDA cannot release a stream's wait
 * on a dead process's event (event_abandon does nothing there), so
 * destroy is bounded by the teardown timeout (ADAG_TEARDOWN_TIMEOUT_MS,
 * 5 s by default) rather than immediate. */
int cdag_test_sigkill(void)
{
    enum { INFLIGHT = 4 };
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    adag_runtime_h rt = NULL;
    adag_actor_h a[3];
    adag_dag_h dag = NULL;
    static cdag_input_t in[INFLIGHT];
    adag_ref_t refs[INFLIGHT];
    adag_status_t st = ADAG_OK;
    uint64_t k;
    CHECK_OK(cdag_runtime(&rt));
    for (int s = 0; s < 3; s++) {
        char name[8];
        snprintf(name, sizeof name, "s%d", s + 1);
        CHECK_OK(cdag_stage(rt, name, cdag_dev(0), s + 1, 2000, &a[s]));
    }
    cdag_chain_t o = {.name = "victim", .max_inflight = INFLIGHT, .slot_capacity = 4096};
    CHECK_OK(cdag_chain(rt, a, 3, &o, &dag));
    for (k = 0; st == ADAG_OK && k < 100000; k++) {
        if (k == 40)
            CHECK(kill(adag_actor_pid(a[1]), SIGKILL) == 0, "kill of s2");
        if (k >= INFLIGHT) {
            unsigned s = (unsigned)(k % INFLIGHT);
            adag_value_t out[2];
            st = adag_dag_get(dag, refs[s], out, 2, 20000);
            if (st == ADAG_OK) {
                CHECK(cdag_check(&in[s], &out[0], out[0].data, 1, 3, k - INFLIGHT) == 0,
                      "execution %llu: the output is wrong (above)",
                      (unsigned long long)(k - INFLIGHT));
                CHECK_OK(adag_dag_release(dag, refs[s]));
            }
        }
        if (st == ADAG_OK) {
            unsigned s = (unsigned)(k % INFLIGHT);
            cdag_make_input(&in[s], k);
            adag_value_t v = cdag_input_value(&in[s]);
            st = adag_dag_execute(dag, &v, 1, 0, &refs[s]);
        }
    }
    CHECK(st == ADAG_ERR_ACTOR_DIED, "after %llu executions: %s (%s)", (unsigned long long)k,
          adag_status_str(st), adag_last_error());
    CHECK(strstr(adag_last_error(), "s2"), "the failure does not name s2: %s", adag_last_error());
    int64_t t0 = cdag_now_ns();
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    double ms = cdag_ms_since(t0);
    printf("  sigkill: failed after %llu executions; destroy took %.0f ms\n",
           (unsigned long long)k, ms);
    CHECK(ms < 8000, "destroy took %.0f ms (the teardown timeout is 5 s)", ms);
    for (int s = 0; s < 3; s++)
        adag_actor_destroy(a[s]); /* s2's says it died */
    t0 = cdag_now_ns();
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
    printf("  sigkill: runtime destroyed in %.0f ms\n", cdag_ms_since(t0));
out:
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* ---- no device memory left behind ---- */

#define LEAK_ELEMS ((size_t)1 << 20)         /* 4 MiB of f32 per tensor */
#define LEAK_CAPACITY ((size_t)16 << 20)     /* per slot: 3 device channels x 2 slots = 96 MiB */
#define LEAK_MARGIN ((size_t)8 << 20)        /* what cudaMemGetInfo may differ by */
#define LEAK_VISIBLE ((size_t)64 << 20)      /* what a live DAG surely takes */

/* The device's free memory once it stops changing (workers' contexts go
 * away after the processes), up to ms. */
static int settled_free(const cdag_cuda_t *cu, int ms, size_t *free_bytes)
{
    char cuerr[256] = "";
    size_t total, last = 0;
    int64_t t0 = cdag_now_ns();
    for (int same = 0; same < 5 && cdag_ms_since(t0) < ms;) {
        if (cu->mem_info(free_bytes, &total, cuerr, sizeof cuerr) != 0) {
            fprintf(stderr, "  %s\n", cuerr);
            return FAIL;
        }
        same = *free_bytes == last ? same + 1 : 0;
        last = *free_bytes;
        sleep_ms(100);
    }
    return PASS;
}

/* runtime, s1 -> s2 on cuda:0 with the driver's device cuda:0, 20
 * executions of 4 MiB checked, *mid_free measured while the DAG lives,
 * then everything destroyed. */
static int leak_cycle(const cdag_cuda_t *cu, float *x, float *back, size_t *mid_free)
{
    int rc = PASS;
    char cuerr[256] = "";
    adag_runtime_h rt = NULL;
    adag_actor_h a[2];
    adag_dag_h dag = NULL;
    size_t total;
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(cdag_stage(rt, "s1", cdag_dev(0), 1, 0, &a[0]));
    CHECK_OK(cdag_stage(rt, "s2", cdag_dev(0), 2, 0, &a[1]));
    cdag_chain_t o = {.max_inflight = 2, .slot_capacity = LEAK_CAPACITY, .driver_device = cdag_dev(0)};
    CHECK_OK(cdag_chain(rt, a, 2, &o, &dag));
    for (uint64_t k = 0; k < 20; k++) {
        for (size_t i = 0; i < LEAK_ELEMS; i++)
            x[i] = (float)((i * 7 + k) % 1000) - 500.0f;
        adag_value_t v = {.data = x, .size = LEAK_ELEMS * sizeof(float),
                          .kind = ADAG_VALUE_TENSOR, .dtype = ADAG_DTYPE_F32, .ndim = 1,
                          .shape = {(int64_t)LEAK_ELEMS}};
        adag_value_t out[2];
        adag_ref_t ref;
        CHECK_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
        CHECK_OK(adag_dag_get(dag, ref, out, 2, 20000));
        CHECK(out[0].device == cdag_device(0) && out[0].size == v.size,
              "output on device %d, %zu bytes", (int)out[0].device, out[0].size);
        CHECK_OK(adag_dag_stream_sync(dag, 20000));
        CHECK_CUDA(cu->copy(back, out[0].data, out[0].size, NULL, cuerr, sizeof cuerr));
        for (size_t i = 0; i < LEAK_ELEMS; i++) {
            float y, want;
            stage_apply(ADAG_DTYPE_F32, 1, &x[i], &y);
            stage_apply(ADAG_DTYPE_F32, 2, &y, &want);
            CHECK(memcmp(&want, &back[i], sizeof want) == 0,
                  "execution %llu, element %zu: %.9g, the C reference %.9g",
                  (unsigned long long)k, i, (double)back[i], (double)want);
        }
        CHECK_OK(adag_dag_release(dag, ref));
    }
    CHECK_CUDA(cu->mem_info(mid_free, &total, cuerr, sizeof cuerr));
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    for (int s = 0; s < 2; s++)
        CHECK_OK(adag_actor_destroy(a[s]));
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(20000) == 0, "workers left after the runtime was destroyed");
out:
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* Two cycles of leak_cycle: the first settles what this process keeps
 * (its context, the loaded kernels); after the second, the device's free
 * memory must come back to what it was before it, within a margin far
 * below the DAG's 96 MiB of slots or a worker's context. */
int cdag_test_leaks(void)
{
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    if (cdag_emulated) {
        snprintf(cdag_skip_reason, sizeof cdag_skip_reason, "cudaMemGetInfo has no emulation");
        return SKIP;
    }
    cdag_cuda_t cu = {0};
    float *x = malloc(LEAK_ELEMS * sizeof(float)), *back = malloc(LEAK_ELEMS * sizeof(float));
    size_t base = 0, mid = 0, after = 0, first_mid = 0;
    CHECK(x && back, "out of memory");
    CHECK(cdag_cuda_load(&cu) == PASS, "the module's CUDA helpers (above)");
    if ((rc = leak_cycle(&cu, x, back, &first_mid)) != PASS)
        goto out;
    CHECK(settled_free(&cu, 10000, &base) == PASS, "cudaMemGetInfo (above)");
    if ((rc = leak_cycle(&cu, x, back, &mid)) != PASS)
        goto out;
    /* workers' contexts are freed after they exit: wait for it */
    int64_t t0 = cdag_now_ns();
    do {
        CHECK(settled_free(&cu, 2000, &after) == PASS, "cudaMemGetInfo (above)");
    } while (after + LEAK_MARGIN < base && cdag_ms_since(t0) < 20000);
    printf("  leaks: free device memory %zu MiB before, %zu MiB while the DAG lived (first "
           "cycle %zu), %zu MiB after\n",
           base >> 20, mid >> 20, first_mid >> 20, after >> 20);
    CHECK(mid + LEAK_VISIBLE <= base,
          "a live DAG took only %lld MiB: cudaMemGetInfo does not see its memory",
          ((long long)base - (long long)mid) / (1 << 20));
    CHECK(after + LEAK_MARGIN >= base, "%.1f MiB of device memory left after everything was destroyed",
          (double)(base - after) / (1 << 20));
out:
    cdag_cuda_unload(&cu);
    free(x);
    free(back);
    return rc;
}

/*
 * test-cuda-dag: the DAG scenarios of the emulated device's suites with
 * "cuda_stage" process actors (and thread actors: thread_actors_one_process)
 * on CUDA devices (`make test-gpu`;
 * tests/gpu/README.md). This file has the runner and the data-path tests
 * (pipelines, the driver's device); cuda_dag_faults.c the timing and fault
 * tests.
 *
 * Each test runs in a fresh copy of this program (`--run <test>`, started
 * with posix_spawn: every test gets a CUDA context of its own, and this
 * process never initializes CUDA), under a time limit. A test prints
 * "passed", "FAILED" or "skipped: <reason>"; the program exits 0 when
 * none failed and one passed at least, 77 when all skipped, 1 when one
 * failed. With TEST_GPU_REQUIRE set (a runner that has a GPU) a skip for
 * any reason but "needs N CUDA devices" is a failure.
 *
 *   test-cuda-dag [--emulate] [test ...]   runs the tests named (default:
 *                                          all); --emulate: on the emulated
 *                                          emulated device (cuda_dag.h)
 */
#include "cuda_dag.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- pipelines through stage actors, every element checked ---- */

#define MAX_INFLIGHT 8

/* `execs` executions pipelined `inflight` deep through a chain of nstages
 * stages (stage numbers 1..nstages) that returns to host memory; checks
 * every element against the C reference and what the last method saw. */
static int run_checked(adag_dag_h dag, int nstages, unsigned inflight, uint64_t execs,
                       int32_t last_device)
{
    int rc = PASS;
    static cdag_input_t in[MAX_INFLIGHT];
    adag_ref_t refs[MAX_INFLIGHT];
    CHECK(inflight >= 1 && inflight <= MAX_INFLIGHT, "inflight %u", inflight);
    for (uint64_t k = 0; k < execs + inflight; k++) {
        if (k >= inflight) { /* the oldest in flight: check and release */
            uint64_t j = k - inflight;
            unsigned s = (unsigned)(j % inflight);
            adag_value_t out[2];
            cuda_stage_info_t info;
            CHECK_OK(adag_dag_get(dag, refs[s], out, 2, 30000));
            CHECK(out[0].device == ADAG_DEVICE_HOST, "execution %llu: output on device %d",
                  (unsigned long long)j, (int)out[0].device);
            CHECK(cdag_check(&in[s], &out[0], out[0].data, 1, nstages, j) == 0,
                  "execution %llu: the output is wrong (above)", (unsigned long long)j);
            CHECK(out[1].kind == ADAG_VALUE_BYTES && out[1].size == sizeof info,
                  "execution %llu: info of kind %d, %zu bytes", (unsigned long long)j,
                  (int)out[1].kind, out[1].size);
            memcpy(&info, out[1].data, sizeof info);
            CHECK(info.ref == refs[s] && info.elements == in[s].n &&
                      info.dtype == (uint32_t)in[s].dtype && info.device == last_device,
                  "execution %llu: the last method saw ref %llu, %llu %s elements on device "
                  "%d; want ref %llu, %zu %s elements on device %d",
                  (unsigned long long)j, (unsigned long long)info.ref,
                  (unsigned long long)info.elements, adag_dtype_name((adag_dtype_t)info.dtype),
                  (int)info.device, (unsigned long long)refs[s], in[s].n,
                  adag_dtype_name(in[s].dtype), (int)last_device);
            CHECK_OK(adag_dag_release(dag, refs[s]));
        }
        if (k < execs) {
            unsigned s = (unsigned)(k % inflight);
            cdag_make_input(&in[s], k);
            adag_value_t v = cdag_input_value(&in[s]);
            CHECK_OK(adag_dag_execute(dag, &v, 1, 0, &refs[s]));
        }
    }
out:
    return rc;
}

/* input -> s1 -> s2 -> s3 -> s4 -> output, all on cuda:0 (copy in, three
 * zero-copy edges, copy out), every dtype, shapes changing each
 * execution, 2000 executions 4 deep; every stage also returns host bytes
 * (info), the last one's an output next to the tensor. The kernels spin a
 * little, so that work the runtime failed to order (a reader before its
 * writer's kernel, a writer over a slot a reader's kernel still reads)
 * shows as wrong elements. */
int cdag_test_pipeline(void)
{
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    static const int spin_us[4] = {50, 150, 0, 50};
    adag_runtime_h rt = NULL;
    adag_actor_h a[4];
    adag_dag_h dag = NULL;
    char *dot = NULL;
    CHECK_OK(cdag_runtime(&rt));
    for (int s = 0; s < 4; s++) {
        char name[8];
        snprintf(name, sizeof name, "s%d", s + 1);
        CHECK_OK(cdag_stage(rt, name, cdag_dev(0), s + 1, spin_us[s], &a[s]));
    }
    cdag_chain_t o = {.max_inflight = 4, .slot_capacity = 4096};
    CHECK_OK(cdag_chain(rt, a, 4, &o, &dag));
    dot = cdag_dot(dag);
    CHECK(dot && strstr(dot, "zero copy") && strstr(dot, "copy in") && strstr(dot, "copy out"),
          "the DOT does not show every device edge:\n%s", dot ? dot : "(none)");
    if ((rc = run_checked(dag, 4, 4, 2000, cdag_device(0))) != PASS)
        goto out;
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    for (int s = 0; s < 4; s++)
        CHECK_OK(adag_actor_destroy(a[s]));
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    free(dot);
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* s1 (cuda:0) -> s2 (cuda:1): the peer copy, 1000 executions checked. */
int cdag_test_peer_copy(void)
{
    int rc = cdag_require(2);
    if (rc != PASS)
        return rc;
    adag_runtime_h rt = NULL;
    adag_actor_h a[2];
    adag_dag_h dag = NULL;
    char *dot = NULL;
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(cdag_stage(rt, "s1", cdag_dev(0), 1, 100, &a[0]));
    CHECK_OK(cdag_stage(rt, "s2", cdag_dev(1), 2, 0, &a[1]));
    cdag_chain_t o = {.max_inflight = 4, .slot_capacity = 4096};
    CHECK_OK(cdag_chain(rt, a, 2, &o, &dag));
    dot = cdag_dot(dag);
    CHECK(dot && strstr(dot, "peer copy"), "the DOT shows no peer copy:\n%s",
          dot ? dot : "(none)");
    if ((rc = run_checked(dag, 2, 4, 1000, cdag_device(1))) != PASS)
        goto out;
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    free(dot);
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* Thread actors of this process on CUDA devices: their device channels
 * import handles this process exported, which CUDA cannot open here (an
 * IPC import in the exporting process fails): the backend gives aliases
 * of the writer's slots and events instead, in the one context all the
 * threads share. s1 -> s2 -> s3 on cuda:0 (zero copies), 1000 executions
 * of every dtype checked; then, with two devices, s1 (cuda:0) -> s2
 * (cuda:1), a peer copy from the alias, 500 executions. */
int cdag_test_thread_actors(void)
{
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    const char *module = cdag_emulated ? ADAG_TEST_CUDA_EMULATED_MODULE : ADAG_TEST_CUDA_MODULE;
    static const int spin_us[3] = {50, 150, 0};
    adag_runtime_h rt = NULL;
    adag_actor_h a[3], b[2];
    adag_dag_h dag = NULL;
    CHECK_OK(cdag_runtime(&rt));
    for (int s = 0; s < 3; s++) {
        char name[8];
        snprintf(name, sizeof name, "s%d", s + 1);
        CHECK_OK(cdag_stage_placed(rt, name, cdag_dev(0), module, ADAG_PLACEMENT_THREAD, s + 1,
                                   spin_us[s], &a[s]));
    }
    cdag_chain_t o = {.max_inflight = 4, .slot_capacity = 4096};
    CHECK_OK(cdag_chain(rt, a, 3, &o, &dag));
    if ((rc = run_checked(dag, 3, 4, 1000, cdag_device(0))) != PASS)
        goto out;
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    if (cdag_require(2) == PASS) {
        CHECK_OK(cdag_stage_placed(rt, "t1", cdag_dev(0), module, ADAG_PLACEMENT_THREAD, 1, 100,
                                   &b[0]));
        CHECK_OK(cdag_stage_placed(rt, "t2", cdag_dev(1), module, ADAG_PLACEMENT_THREAD, 2, 0,
                                   &b[1]));
        CHECK_OK(cdag_chain(rt, b, 2, &o, &dag));
        if ((rc = run_checked(dag, 2, 4, 500, cdag_device(1))) != PASS)
            goto out;
        CHECK_OK(adag_dag_destroy(dag));
        dag = NULL;
    } else {
        printf("  (one device: the two-device part did not run: %s)\n", cdag_skip_reason);
    }
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
out:
    if (dag)
        adag_dag_destroy(dag);
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* s1 (cuda:0) -> s2 (cuda:1) by ADAG_TRANSPORT_COMM (NCCL send/recv),
 * 300 executions checked. */
int cdag_test_comm_transport(void)
{
    int rc = cdag_require(2);
    if (rc != PASS)
        return rc;
    adag_runtime_h rt = NULL;
    adag_actor_h a[2];
    adag_dag_h dag = NULL;
    char *dot = NULL;
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(cdag_stage(rt, "s1", cdag_dev(0), 1, 100, &a[0]));
    CHECK_OK(cdag_stage(rt, "s2", cdag_dev(1), 2, 0, &a[1]));
    cdag_chain_t o = {.max_inflight = 4, .slot_capacity = 4096,
                      .transport = ADAG_TRANSPORT_COMM};
    CHECK_OK(cdag_chain(rt, a, 2, &o, &dag));
    /* the edge must not be the IPC path AUTO would pick */
    dot = cdag_dot(dag);
    CHECK(dot && !strstr(dot, "peer copy"),
          "s1 -> s2 is a peer copy: ADAG_TRANSPORT_COMM was not used:\n%s", dot ? dot : "(none)");
    if ((rc = run_checked(dag, 2, 4, 300, cdag_device(1))) != PASS)
        goto out;
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    free(dot);
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* One runtime with actors on emu:0 and cuda:0 (process actors, each with
 * its module's variant): a chain on each device alone, 100 executions
 * checked each (the last method saw ADAG_DEVICE(ADAG_DEV_EMULATED, 0),
 * then ADAG_DEVICE(ADAG_DEV_CUDA, 0)); a device tensor from the emu actor
 * to the cuda actor refused at compile naming both; the same edge in host
 * memory (ADAG_TRANSPORT_HOST) runs, 100 executions checked. */
int cdag_test_emu_and_cuda(void)
{
    if (cdag_emulated) {
        snprintf(cdag_skip_reason, sizeof cdag_skip_reason,
                 "needs CUDA itself (an emu and a cuda actor in one runtime)");
        return SKIP;
    }
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    adag_runtime_h rt = NULL;
    adag_actor_h e = NULL, c1 = NULL, c2 = NULL;
    adag_dag_h dag = NULL;
    const int32_t emu0 = ADAG_DEVICE(ADAG_DEV_EMULATED, 0), cuda0 = ADAG_DEVICE(ADAG_DEV_CUDA, 0);
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(cdag_stage_module(rt, "e", "emu:0", ADAG_TEST_CUDA_EMULATED_MODULE, 1, 0, &e));
    CHECK_OK(cdag_stage_module(rt, "c1", "cuda:0", ADAG_TEST_CUDA_MODULE, 1, 0, &c1));
    CHECK_OK(cdag_stage_module(rt, "c2", "cuda:0", ADAG_TEST_CUDA_MODULE, 2, 0, &c2));
    cdag_chain_t o = {.max_inflight = 4, .slot_capacity = 4096};
    const adag_actor_h alone[2][1] = {{e}, {c1}};
    const int32_t where[2] = {emu0, cuda0};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(cdag_chain(rt, alone[k], 1, &o, &dag));
        if ((rc = run_checked(dag, 1, 4, 100, where[k])) != PASS)
            goto out;
        CHECK_OK(adag_dag_destroy(dag));
        dag = NULL;
    }
    const adag_actor_h mixed[2] = {e, c2};
    adag_status_t st = cdag_chain(rt, mixed, 2, &o, &dag);
    CHECK(st == ADAG_ERR_INVALID && strstr(adag_last_error(), "e (emu:0) to c2 (cuda:0)") &&
              strstr(adag_last_error(), "cannot move between device backends"),
          "a device tensor from emu:0 to cuda:0 compiled: %s: %s", adag_status_str(st),
          adag_last_error());
    o.transport = ADAG_TRANSPORT_HOST;
    CHECK_OK(cdag_chain(rt, mixed, 2, &o, &dag));
    if ((rc = run_checked(dag, 2, 4, 100, cuda0)) != PASS)
        goto out;
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    if (dag)
        adag_dag_destroy(dag);
    if (rt)
        adag_runtime_destroy(rt);
    return rc;
}

/* ---- the driver's device ---- */

/* s1 (stage 1, kernels spinning spin_us) -> s2 (stage 2), both on device
 * 0, which is the driver's device too; 4 KiB slots. */
static adag_status_t driver_chain(adag_runtime_h rt, unsigned inflight, int spin_us,
                                  adag_actor_h *a, adag_dag_h *dag)
{
    adag_status_t st = cdag_stage(rt, "s1", cdag_dev(0), 1, spin_us, &a[0]);
    if (st == ADAG_OK)
        st = cdag_stage(rt, "s2", cdag_dev(0), 2, 0, &a[1]);
    if (st != ADAG_OK)
        return st;
    cdag_chain_t o = {.max_inflight = inflight, .slot_capacity = 4096,
                      .driver_device = cdag_dev(0)};
    return cdag_chain(rt, a, 2, &o, dag);
}

/* input -> s1 -> s2 -> output with driver_device "cuda:0": every input
 * slot and output slot is on the driver's device (zero copy to s1 and from
 * s2). Every third input is a tensor in device memory of this process
 * (cudaMemcpyAsync'd there on the DAG's stream, which reads it in that
 * order), the rest host tensors; every output is a device view, copied
 * back by cudaMemcpyAsync on adag_dag_stream (odd executions) or, after
 * adag_dag_stream_sync, by cudaMemcpy (even ones), and checked. */
int cdag_test_driver_device(void)
{
    enum { INFLIGHT = 4, EXECS = 600 };
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    char cuerr[256] = "";
    cdag_cuda_t cu = {0};
    adag_runtime_h rt = NULL;
    adag_actor_h a[2];
    adag_dag_h dag = NULL;
    char *dot = NULL;
    void *stream = NULL, *dev_in[INFLIGHT] = {NULL};
    static cdag_input_t in[INFLIGHT];
    static unsigned char back[sizeof in[0].data];
    adag_ref_t refs[INFLIGHT];
    CHECK(cdag_cuda_load(&cu) == PASS, "the module's CUDA helpers (above)");
    for (int i = 0; i < INFLIGHT; i++)
        CHECK_CUDA(cu.malloc_(&dev_in[i], sizeof in[0].data, cuerr, sizeof cuerr));
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(driver_chain(rt, INFLIGHT, 200, a, &dag));
    dot = cdag_dot(dag);
    CHECK(dot && strstr(dot, cdag_dev(0)), "the DOT does not show the driver's device:\n%s",
          dot ? dot : "(none)");
    CHECK_OK(adag_dag_stream(dag, &stream));
    CHECK(stream, "adag_dag_stream gave no stream");
    for (uint64_t k = 0; k < EXECS + INFLIGHT; k++) {
        if (k >= INFLIGHT) {
            uint64_t j = k - INFLIGHT;
            unsigned s = (unsigned)(j % INFLIGHT);
            adag_value_t out[2];
            CHECK_OK(adag_dag_get(dag, refs[s], out, 2, 20000));
            CHECK(out[0].kind == ADAG_VALUE_TENSOR && out[0].device == cdag_device(0),
                  "execution %llu: output of kind %d on device %d, want a tensor on %d",
                  (unsigned long long)j, (int)out[0].kind, (int)out[0].device,
                  (int)cdag_device(0));
            CHECK(out[1].device == ADAG_DEVICE_HOST && out[1].size == sizeof(cuda_stage_info_t),
                  "execution %llu: info on device %d, %zu bytes", (unsigned long long)j,
                  (int)out[1].device, out[1].size);
            CHECK(out[0].size <= sizeof back, "execution %llu: %zu bytes", (unsigned long long)j,
                  out[0].size);
            memset(back, 0xee, sizeof back);
            if (out[0].size && j % 2) {
                if (cdag_emulated) /* its copy is a memcpy now, not work on the stream */
                    CHECK_OK(adag_dag_stream_sync(dag, 20000));
                CHECK_CUDA(cu.copy(back, out[0].data, out[0].size, stream, cuerr, sizeof cuerr));
                CHECK_CUDA(cu.stream_sync(stream, cuerr, sizeof cuerr));
            } else if (out[0].size) {
                CHECK_OK(adag_dag_stream_sync(dag, 20000));
                CHECK_CUDA(cu.copy(back, out[0].data, out[0].size, NULL, cuerr, sizeof cuerr));
            }
            CHECK(cdag_check(&in[s], &out[0], back, 1, 2, j) == 0,
                  "execution %llu (input in %s memory): the output is wrong (above)",
                  (unsigned long long)j, j % 3 == 1 ? "device" : "host");
            CHECK_OK(adag_dag_release(dag, refs[s]));
        }
        if (k < EXECS) {
            unsigned s = (unsigned)(k % INFLIGHT);
            cdag_make_input(&in[s], k);
            adag_value_t v = cdag_input_value(&in[s]);
            if (k % 3 == 1) { /* a device tensor, read in the stream's order */
                if (in[s].bytes)
                    CHECK_CUDA(cu.copy(dev_in[s], in[s].data, in[s].bytes, stream, cuerr,
                                       sizeof cuerr));
                v.data = dev_in[s];
                v.device = cdag_device(0);
            }
            CHECK_OK(adag_dag_execute(dag, &v, 1, 0, &refs[s]));
        }
    }
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    free(dot);
    if (rt)
        adag_runtime_destroy(rt);
    for (int i = 0; i < INFLIGHT && cu.lib; i++)
        cu.free_(dev_in[i], cuerr, sizeof cuerr);
    cdag_cuda_unload(&cu);
    return rc;
}

/* input -> s1 -> s2 with driver_device "cuda:0", every input written in
 * place through adag_dag_reserve: each round reserves INFLIGHT executions
 * at once and commits them the last first; even executions are written in
 * the DAG's pinned staging (view.data: the commit enqueues its copy on the
 * DAG's stream), odd ones copied by cudaMemcpyAsync into the device slot
 * (view.device_data) on the view's stream. Every output is checked. */
int cdag_test_driver_device_zero_copy(void)
{
    enum { INFLIGHT = 4, ROUNDS = 150 };
    int rc = cdag_require(1);
    if (rc != PASS)
        return rc;
    char cuerr[256] = "";
    cdag_cuda_t cu = {0};
    adag_runtime_h rt = NULL;
    adag_actor_h a[2];
    adag_dag_h dag = NULL;
    void *stream = NULL;
    static cdag_input_t in[INFLIGHT];
    static unsigned char back[sizeof in[0].data];
    adag_input_view_t view[INFLIGHT];
    adag_ref_t refs[INFLIGHT];
    CHECK(cdag_cuda_load(&cu) == PASS, "the module's CUDA helpers (above)");
    CHECK_OK(cdag_runtime(&rt));
    CHECK_OK(driver_chain(rt, INFLIGHT, 0, a, &dag));
    CHECK_OK(adag_dag_stream(dag, &stream));
    for (uint64_t round = 0; round < ROUNDS; round++) {
        for (unsigned s = 0; s < INFLIGHT; s++) {
            CHECK_OK(adag_dag_reserve(dag, 0, &view[s], 1, &refs[s]));
            CHECK(view[s].device == cdag_device(0) && view[s].data && view[s].device_data &&
                      view[s].stream == stream && view[s].capacity == 4096,
                  "round %llu: a view on device %d, stream %p (the DAG's %p), %zu bytes",
                  (unsigned long long)round, (int)view[s].device, view[s].stream, stream,
                  view[s].capacity);
        }
        for (unsigned s = INFLIGHT; s-- > 0;) {
            uint64_t k = round * INFLIGHT + s;
            cdag_make_input(&in[s], k);
            adag_value_t v = cdag_input_value(&in[s]);
            if (k % 2) { /* the device slot, written on the DAG's stream */
                if (cdag_emulated) /* its copy is a memcpy now: after the stream's waits */
                    CHECK_OK(adag_dag_stream_sync(dag, 20000));
                if (in[s].bytes)
                    CHECK_CUDA(cu.copy(view[s].device_data, in[s].data, in[s].bytes,
                                       view[s].stream, cuerr, sizeof cuerr));
                v.data = view[s].device_data;
                v.device = view[s].device;
            } else { /* the pinned staging */
                memcpy(view[s].data, in[s].data, in[s].bytes);
                v.data = view[s].data;
            }
            CHECK_OK(adag_dag_commit(dag, refs[s], &v, 1));
        }
        for (unsigned s = 0; s < INFLIGHT; s++) {
            uint64_t k = round * INFLIGHT + s;
            adag_value_t out[2];
            CHECK_OK(adag_dag_get(dag, refs[s], out, 2, 20000));
            CHECK(out[0].kind == ADAG_VALUE_TENSOR && out[0].device == cdag_device(0) &&
                      out[0].size <= sizeof back,
                  "execution %llu: output of kind %d on device %d, %zu bytes",
                  (unsigned long long)k, (int)out[0].kind, (int)out[0].device, out[0].size);
            memset(back, 0xee, sizeof back);
            CHECK_OK(adag_dag_stream_sync(dag, 20000));
            if (out[0].size)
                CHECK_CUDA(cu.copy(back, out[0].data, out[0].size, NULL, cuerr, sizeof cuerr));
            CHECK(cdag_check(&in[s], &out[0], back, 1, 2, k) == 0,
                  "execution %llu (written in the %s): the output is wrong (above)",
                  (unsigned long long)k, k % 2 ? "device slot" : "staging");
            CHECK_OK(adag_dag_release(dag, refs[s]));
        }
    }
    CHECK_OK(adag_dag_destroy(dag));
    dag = NULL;
    CHECK_OK(adag_runtime_destroy(rt));
    rt = NULL;
    CHECK(cdag_wait_no_children(10000) == 0, "workers left after the runtime was destroyed");
out:
    if (rt)
        adag_runtime_destroy(rt);
    cdag_cuda_unload(&cu);
    return rc;
}

/* ---- the runner ---- */

static const struct {
    const char *name;
    int (*fn)(void);
    int limit_s; /* past it the test is killed and failed */
} tests[] = {
    {"four_stages_every_dtype", cdag_test_pipeline, 240},
    {"driver_device", cdag_test_driver_device, 120},
    {"driver_device_zero_copy", cdag_test_driver_device_zero_copy, 120},
    {"slow_kernel_does_not_block_the_loop", cdag_test_slow_kernel, 60},
    {"stuck_transfer_times_out", cdag_test_stuck_transfer, 120},
    {"sigkill_mid_stream", cdag_test_sigkill, 120},
    {"no_device_memory_left", cdag_test_leaks, 180},
    {"peer_copy_two_devices", cdag_test_peer_copy, 120},
    {"emu_and_cuda_in_one_runtime", cdag_test_emu_and_cuda, 120},
    {"thread_actors_one_process", cdag_test_thread_actors, 180},
    {"static_shapes_run_ahead", cdag_test_ahead, 180},
    {"graphs_with_channel_hand_offs", cdag_test_graphs, 180},
    {"comm_transport_two_devices", cdag_test_comm_transport, 120},
    {"allreduce_every_op_and_dtype", cdag_test_coll_allreduce, 300},
    {"reducescatter_every_op_and_dtype", cdag_test_coll_reducescatter, 300},
    {"allgather_every_dtype", cdag_test_coll_allgather, 120},
    {"broadcast_every_dtype", cdag_test_coll_broadcast, 120},
    {"collective_method_error_fails_every_output", cdag_test_coll_method_error, 120},
    {"stuck_collective_times_out", cdag_test_coll_stuck, 120},
};
#define NTESTS (sizeof(tests) / sizeof(tests[0]))

/* In the copy: runs test i and says how it went. */
static int run_here(size_t i)
{
    int64_t t0 = cdag_now_ns();
    int rc = tests[i].fn();
    const char *require = getenv("TEST_GPU_REQUIRE");
    if (rc == SKIP && require && require[0] && strncmp(cdag_skip_reason, "needs ", 6) != 0) {
        printf("test-cuda-dag: %s: FAILED: skipped (%s), and TEST_GPU_REQUIRE is set\n",
               tests[i].name, cdag_skip_reason);
        return FAIL;
    }
    if (rc == PASS)
        printf("test-cuda-dag: %s: passed (%.0f ms)\n", tests[i].name, cdag_ms_since(t0));
    else if (rc == SKIP)
        printf("test-cuda-dag: %s: skipped: %s\n", tests[i].name, cdag_skip_reason);
    else
        printf("test-cuda-dag: %s: FAILED\n", tests[i].name);
    return rc == PASS || rc == SKIP ? rc : FAIL;
}

/* Runs test i in a fresh copy of this program, within its time limit;
 * PASS, SKIP or FAIL. */
static int run_spawned(size_t i, const char *argv0)
{
    char *argv[] = {(char *)argv0, "--run", (char *)tests[i].name,
                    cdag_emulated ? "--emulate" : NULL, NULL};
    pid_t pid;
    int err = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ);
    if (err) {
        printf("test-cuda-dag: %s: FAILED: posix_spawn: %s\n", tests[i].name, strerror(err));
        return FAIL;
    }
    int64_t t0 = cdag_now_ns();
    int status;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && cdag_ms_since(t0) < tests[i].limit_s * 1e3) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (r == 0) { /* its workers die with it */
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        printf("test-cuda-dag: %s: FAILED: killed after its limit of %d s\n", tests[i].name,
               tests[i].limit_s);
        return FAIL;
    }
    if (r < 0) {
        printf("test-cuda-dag: %s: FAILED: waitpid: %s\n", tests[i].name, strerror(errno));
        return FAIL;
    }
    if (WIFEXITED(status) && (WEXITSTATUS(status) == PASS || WEXITSTATUS(status) == SKIP ||
                              WEXITSTATUS(status) == FAIL))
        return WEXITSTATUS(status); /* it said so itself */
    if (WIFSIGNALED(status))
        printf("test-cuda-dag: %s: FAILED: killed by signal %d\n", tests[i].name,
               WTERMSIG(status));
    else
        printf("test-cuda-dag: %s: FAILED: exit status %d\n", tests[i].name,
               WEXITSTATUS(status));
    return FAIL;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && strcmp(argv[1], "--run") == 0) {
        cdag_emulated = argc == 4 && strcmp(argv[3], "--emulate") == 0;
        for (size_t i = 0; i < NTESTS; i++)
            if (strcmp(argv[2], tests[i].name) == 0)
                return run_here(i);
        fprintf(stderr, "test-cuda-dag: no test %s\n", argv[2]);
        return FAIL;
    }
    if (argc > 1 && strcmp(argv[1], "--emulate") == 0) {
        cdag_emulated = 1;
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    for (int a = 1; a < argc; a++) {
        size_t i = 0;
        while (i < NTESTS && strcmp(argv[a], tests[i].name) != 0)
            i++;
        if (i == NTESTS) {
            fprintf(stderr, "test-cuda-dag: no test %s; the tests:", argv[a]);
            for (i = 0; i < NTESTS; i++)
                fprintf(stderr, " %s", tests[i].name);
            fprintf(stderr, "\n");
            return FAIL;
        }
    }
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < NTESTS; i++) {
        int wanted = argc == 1;
        for (int a = 1; a < argc && !wanted; a++)
            wanted = strcmp(argv[a], tests[i].name) == 0;
        if (!wanted)
            continue;
        fflush(stdout);
        int rc = run_spawned(i, argv[0]);
        passed += rc == PASS;
        skipped += rc == SKIP;
        failed += rc == FAIL;
    }
    printf("test-cuda-dag: %d passed, %d failed, %d skipped (not passed)\n", passed, failed,
           skipped);
    if (failed)
        return FAIL;
    return passed ? PASS : SKIP;
}

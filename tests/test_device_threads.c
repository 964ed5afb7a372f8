/*
 * Thread actors on emulated devices (suite "device_threads"): device
 * channels between actors of one process import handles that this very
 * process exported, which gives aliases of the writer's slots and events
 * (gpu/device.h): no second mapping of any device memfd, every element of
 * every execution right, on one device (zero copies) and on two (peer
 * copies), pipelined. tests/gpu/test_cuda_dag.c runs the same on CUDA
 * (thread_actors_one_process), where an IPC import in the exporting
 * process is refused outright.
 */
#include "gpu_stage.h"
#include "helpers.h"
#include "probes.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { NSTAGES = 3, INFLIGHT = 4, ELEMS = 1024 };

typedef struct {
    int32_t x[ELEMS];
} input_t;

static void make_input(input_t *in, uint64_t k)
{
    for (size_t i = 0; i < ELEMS; i++)
        in->x[i] = (int32_t)(k * 2654435761u + i * 40503u);
}

static adag_value_t input_value(const input_t *in)
{
    adag_value_t v = {.data = in->x, .size = sizeof(in->x), .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_I32, .ndim = 1};
    v.shape[0] = ELEMS;
    return v;
}

/* Every element of execution k's output is stage 3 of stage 2 of stage 1
 * of its input (tests/modules/gpu_stage.h). */
static void check_output(const input_t *in, const adag_value_t *out, uint64_t k)
{
    cr_assert_eq(out->kind, ADAG_VALUE_TENSOR, "execution %llu", (unsigned long long)k);
    cr_assert_eq(out->dtype, ADAG_DTYPE_I32);
    cr_assert_eq(out->size, sizeof(in->x), "execution %llu: %zu bytes", (unsigned long long)k,
                 out->size);
    for (size_t i = 0; i < ELEMS; i++) {
        int32_t a = in->x[i], b;
        for (int s = 1; s <= NSTAGES; s++) {
            stage_apply(ADAG_DTYPE_I32, s, &a, &b);
            a = b;
        }
        int32_t got;
        memcpy(&got, (const char *)out->data + i * 4, 4);
        cr_assert_eq(got, a, "execution %llu, element %zu: %d, want %d", (unsigned long long)k,
                     i, got, a);
    }
}

/* The emulated device's memfds this process maps, against those it holds
 * open (one per allocation and per event it created): an import through
 * /proc/self/fd would map a memfd a second time, an alias maps nothing. */
static void assert_one_mapping_per_object(const char *when)
{
    int maps = probe_count_maps("memfd:adag-dev") + probe_count_maps("memfd:adag-event");
    int objects = probe_device_objects(getpid());
    cr_assert_gt(objects, 0, "%s: no device object", when);
    cr_assert_eq(maps, objects,
                 "%s: %d mappings of device memfds for %d device objects: an import in the "
                 "exporting process mapped its memfd again",
                 when, maps, objects);
}

/* input -> s1 -> s2 -> s3 -> output, thread actors on devs[], kernels
 * that take time (so that work the channels failed to order shows as
 * wrong elements), `executions` pipelined INFLIGHT deep. */
static void run_threads(const char *const devs[NSTAGES], unsigned executions)
{
    static const int kernel_us[NSTAGES] = {100, 200, 0};
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[NSTAGES];
    for (int s = 0; s < NSTAGES; s++) {
        char name[16];
        snprintf(name, sizeof(name), "s%d", s + 1);
        a[s] = h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, name, devs[s], s + 1, kernel_us[s]);
    }
    adag_compile_params_t cp = h_compile_params(INFLIGHT, sizeof(input_t), 0, 0);
    adag_dag_h dag = h_gpu_chain(rt, a, NSTAGES, &cp);
    static input_t in[INFLIGHT];
    adag_ref_t refs[INFLIGHT];
    for (uint64_t k = 0; k < executions + INFLIGHT; k++) {
        if (k >= INFLIGHT) {
            uint64_t j = k - INFLIGHT;
            adag_value_t out[2];
            ASSERT_OK(adag_dag_get(dag, refs[j % INFLIGHT], out, 2, 30000));
            check_output(&in[j % INFLIGHT], &out[0], j);
            ASSERT_OK(adag_dag_release(dag, refs[j % INFLIGHT]));
        }
        if (k < executions) {
            make_input(&in[k % INFLIGHT], k);
            adag_value_t v = input_value(&in[k % INFLIGHT]);
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k % INFLIGHT]));
        }
        if (k == INFLIGHT)
            assert_one_mapping_per_object("while the DAG runs");
    }
    ASSERT_OK(adag_dag_destroy(dag));
    cr_assert_eq(probe_device_objects(getpid()), 0, "device objects left after destroy");
    cr_assert_eq(probe_count_maps("memfd:adag-dev") + probe_count_maps("memfd:adag-event"), 0,
                 "device memfd mappings left after destroy");
    for (int s = 0; s < NSTAGES; s++)
        ASSERT_OK(adag_actor_destroy(a[s]));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* Three thread actors on emu:0: two zero-copy edges, aliases of one
 * device's slots and events, 2000 executions. */
Test(device_threads, one_device, .timeout = 120)
{
    static const char *const devs[NSTAGES] = {"emu:0", "emu:0", "emu:0"};
    run_threads(devs, 2000);
}

/* emu:0 -> emu:1 -> emu:1: a peer copy from an alias of the other
 * device's slot, then a zero-copy edge, 2000 executions. */
Test(device_threads, two_devices, .timeout = 120)
{
    static const char *const devs[NSTAGES] = {"emu:0", "emu:1", "emu:1"};
    run_threads(devs, 2000);
}

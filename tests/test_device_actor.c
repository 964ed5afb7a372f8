/*
 * Suite "devactor": device-bound actors (adag_actor_params_t.device) on the
 * emulated "emu" device, thread and process actors alike: which device a
 * method sees and its stream, work enqueued in stream order with its
 * arguments copied, a slow kernel that does not hold the loop up, the
 * errors of adag_call_enqueue and of device specs (each with its message;
 * a process actor that cannot have its device leaves no worker), and
 * adag_device_count. The emulated device's stream counts are checked in
 * tests/unit_actor_device.c (they are internal).
 */
#include "device_actors.h"
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ADAG_TEST_DEVICE_MODULE
#error "ADAG_TEST_DEVICE_MODULE must be defined by the build"
#endif

#define DTEST(name) Test(devactor, name, .timeout = 60)

static adag_runtime_h dev_runtime(void)
{
    adag_runtime_h rt = h_runtime();
    ASSERT_OK(adag_class_register(rt, &test_device_class));
    return rt;
}

/* Params of a "devactor" on `device` (NULL: a host actor). */
static adag_actor_params_t dev_params(adag_placement_t pl, const char *device, const char *name)
{
    adag_actor_params_t p = h_actor_params_init("devactor", pl, name, NULL, 0);
    if (pl == ADAG_PLACEMENT_PROCESS)
        p.module_path = ADAG_TEST_DEVICE_MODULE;
    if (device) {
        p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
        p.device = device;
    }
    return p;
}

static adag_actor_h dev_actor(adag_runtime_h rt, adag_placement_t pl, const char *device,
                              const char *name)
{
    adag_actor_params_t p = dev_params(pl, device, name);
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    return a;
}

/* input 0 -> a.method -> output */
static adag_dag_h one_call(adag_runtime_h rt, adag_actor_h a, const char *method,
                           unsigned max_inflight)
{
    return h_compile(h_chain_graph(rt, &a, 1, method), max_inflight, 0);
}

/* ---------------------------------------------------------------- */
/* Where a method runs                                               */
/* ---------------------------------------------------------------- */

/* adag_call_device is GPU(i) on device i and HOST without a device;
 * adag_call_stream is a stream only with a device. */
static void device_and_stream(adag_placement_t pl)
{
    adag_runtime_h rt = dev_runtime();
    const char *specs[3] = {"emu:0", "emu:1", NULL};
    const int64_t want_dev[3] = {ADAG_DEVICE(ADAG_DEV_EMULATED, 0),
                                 ADAG_DEVICE(ADAG_DEV_EMULATED, 1), ADAG_DEVICE_HOST};
    for (int i = 0; i < 3; i++) {
        adag_actor_h a = dev_actor(rt, pl, specs[i], NULL);
        adag_dag_h where = one_call(rt, a, "device", 0);
        adag_dag_h stream = one_call(rt, a, "has_stream", 0);
        int64_t dev = h_roundtrip(where, 0), has = h_roundtrip(stream, 0);
        cr_assert_eq(dev, want_dev[i], "%s actor on %s: adag_call_device %lld, want %lld",
                     h_pl_name(pl), specs[i] ? specs[i] : "no device", (long long)dev,
                     (long long)want_dev[i]);
        cr_assert_eq(has, specs[i] != NULL, "%s actor on %s: adag_call_stream %s", h_pl_name(pl),
                     specs[i] ? specs[i] : "no device", has ? "non-NULL" : "NULL");
        ASSERT_OK(adag_dag_destroy(where));
        ASSERT_OK(adag_dag_destroy(stream));
        ASSERT_OK(adag_actor_destroy(a));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(devactor, device_and_stream, 60)

/* ---------------------------------------------------------------- */
/* Work on the compute stream                                        */
/* ---------------------------------------------------------------- */

/* Kernels run one after the other in the order they were enqueued (a
 * later, shorter one never overtakes), each with the arguments as they
 * were at enqueue (the method overwrites its copy at once). */
static void enqueue_in_order_with_copied_args(adag_placement_t pl)
{
    adag_runtime_h rt = dev_runtime();
    adag_actor_h a = dev_actor(rt, pl, "emu:1", "gpu1");
    adag_dag_h record = one_call(rt, a, "record", 8);
    adag_dag_h readlog = one_call(rt, a, "readlog", 0);
    const int64_t xs[] = {40, 30, 20, 10, 0, 5};
    const unsigned n = sizeof(xs) / sizeof(xs[0]);
    adag_ref_t refs[sizeof(xs) / sizeof(xs[0])];
    for (unsigned i = 0; i < n; i++)
        refs[i] = h_execute(record, xs[i]);
    for (unsigned i = 0; i < n; i++) {
        cr_assert_eq(h_get_i64(record, refs[i], 10000), xs[i]);
        ASSERT_OK(adag_dag_release(record, refs[i]));
    }
    int64_t zero = 0;
    adag_value_t in = h_i64v(&zero), out;
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(readlog, &in, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(readlog, ref, &out, 1, 10000));
    cr_assert_eq(out.size, n * sizeof(int64_t), "%u kernels logged, want %u",
                 (unsigned)(out.size / sizeof(int64_t)), n);
    int64_t log[sizeof(xs) / sizeof(xs[0])];
    memcpy(log, out.data, sizeof(log));
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq(log[i], xs[i],
                     "kernel %u logged %lld, want %lld (-999: its arguments were not copied at "
                     "enqueue; another value: out of order)",
                     i, (long long)log[i], (long long)xs[i]);
    ASSERT_OK(adag_dag_release(readlog, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(devactor, enqueue_in_order_with_copied_args, 60)

#define SLOW_N 4
#define SLOW_MS 300

/* A method that enqueues a slow kernel returns at once: the loop runs the
 * next executions' methods while the stream works, so their results come
 * back long before the kernels are done. Had the loop waited for each
 * kernel, method i could not run before i * SLOW_MS after the first; the
 * bounds are half of that (a loaded machine has room). The kernels did run,
 * one after the other: a drain after them ends no sooner than their sum. */
static void slow_kernel_does_not_hold_the_loop(adag_placement_t pl)
{
    adag_runtime_h rt = dev_runtime();
    adag_actor_h a = dev_actor(rt, pl, "emu:0", "gpu0");
    adag_dag_h slow = one_call(rt, a, "slow", SLOW_N);
    adag_dag_h drain = one_call(rt, a, "drain", 0);
    adag_ref_t refs[SLOW_N];
    int64_t ran[SLOW_N];
    double t0 = h_now_ms();
    for (int i = 0; i < SLOW_N; i++)
        refs[i] = h_execute(slow, SLOW_MS);
    for (int i = 0; i < SLOW_N; i++) {
        ran[i] = h_get_i64(slow, refs[i], 10000);
        ASSERT_OK(adag_dag_release(slow, refs[i]));
    }
    double got = h_now_ms() - t0;
    double span = (double)(ran[SLOW_N - 1] - ran[0]) / 1e6;
    cr_assert(span < (SLOW_N - 1) * SLOW_MS / 2.0,
              "%s actor: the methods ran over %.0f ms; waiting for each %d ms kernel would take "
              "%d ms: the loop waited for the kernels",
              h_pl_name(pl), span, SLOW_MS, (SLOW_N - 1) * SLOW_MS);
    cr_assert(got < SLOW_N * SLOW_MS * 0.75,
              "%s actor: the results came after %.0f ms, the kernels take %d ms: a result waited "
              "for its kernel",
              h_pl_name(pl), got, SLOW_N * SLOW_MS);
    cr_assert_eq(h_roundtrip(drain, 7), 7);
    double done = h_now_ms() - t0;
    cr_assert(done >= SLOW_N * SLOW_MS - 5,
              "the stream was drained after %.0f ms, less than its %d ms of kernels", done,
              SLOW_N * SLOW_MS);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(devactor, slow_kernel_does_not_hold_the_loop, 60)

/* A method that enqueues a slow kernel which writes its host return (a
 * buffer from adag_call_output, not declared a tensor): the return is
 * published once the kernel ran, so each result comes after its own
 * kernel and holds what the kernel wrote. */
static void host_return_waits_for_its_kernel(adag_placement_t pl)
{
    adag_runtime_h rt = dev_runtime();
    adag_actor_h a = dev_actor(rt, pl, "emu:0", "gpu0");
    adag_dag_h late = one_call(rt, a, "late_stamp", SLOW_N);
    adag_ref_t refs[SLOW_N];
    double t0 = h_now_ms();
    for (int i = 0; i < SLOW_N; i++)
        refs[i] = h_execute(late, SLOW_MS);
    for (int i = 0; i < SLOW_N; i++) {
        int64_t stamp = h_get_i64(late, refs[i], 10000);
        double got = h_now_ms() - t0;
        cr_assert(got >= (i + 1) * SLOW_MS - 5,
                  "%s actor: result %d came after %.0f ms, before its kernel (%d ms of "
                  "kernels) ran",
                  h_pl_name(pl), i, got, (i + 1) * SLOW_MS);
        cr_assert_neq(stamp, 0, "%s actor: result %d is not what its kernel wrote",
                      h_pl_name(pl), i);
        ASSERT_OK(adag_dag_release(late, refs[i]));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(devactor, host_return_waits_for_its_kernel, 60)

/* Three device-bound stages on three emulated devices pass host bytes
 * (nothing declared a tensor, as "even between device-bound actors"
 * allows); each computes with a kernel that reads its input slot and
 * writes its host return some time after the method returned. Every
 * element of every execution is checked, with executions in flight. */
static void host_values_between_device_stages(adag_placement_t pl)
{
    enum { N = 200, W = 4, E = 64 };
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = dev_runtime();
    adag_actor_h st[3] = {dev_actor(rt, pl, "emu:0", "s0"), dev_actor(rt, pl, "emu:1", "s1"),
                          dev_actor(rt, pl, "emu:2", "s2")};
    adag_dag_h dag = h_compile(h_chain_graph(rt, st, 3, "affine_host"), W, 0);
    static int64_t in[W][E];
    adag_ref_t refs[W];
    unsigned bad = 0, first_bad = 0;
    for (unsigned base = 0; base < N; base += W) {
        for (unsigned k = 0; k < W; k++) {
            for (unsigned i = 0; i < E; i++)
                in[k][i] = (int64_t)((base + k) * 1000 + i);
            adag_value_t v = {.data = in[k], .size = sizeof(in[k])};
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[k]));
        }
        for (unsigned k = 0; k < W; k++) {
            adag_value_t out;
            ASSERT_OK(adag_dag_get(dag, refs[k], &out, 1, 10000));
            cr_assert_eq(out.size, sizeof(in[k]));
            const int64_t *y = out.data;
            int wrong = 0;
            for (unsigned i = 0; i < E; i++) {
                int64_t want = ((in[k][i] * 3 + 1) * 3 + 1) * 3 + 1;
                wrong |= y[i] != want;
            }
            if (wrong && !bad++)
                first_bad = base + k;
            ASSERT_OK(adag_dag_release(dag, refs[k]));
        }
    }
    cr_assert_eq(bad, 0, "%s actors: %u of %d executions came out wrong (the first: %u): host "
                 "values were published or released before the kernels that use them ran",
                 h_pl_name(pl), bad, N, first_bad);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(devactor, host_values_between_device_stages, 120)

/* A DAG destroyed while a kernel that reads an input of it still runs:
 * its loop ends after the kernel (the slot is still there when it reads
 * it); then the actor, while another kernel runs; nothing is left. */
static void teardown_with_work_in_flight(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = dev_runtime();
    adag_actor_h a = dev_actor(rt, pl, "emu:2", NULL);
    adag_dag_h late = one_call(rt, a, "late_read", 0);
    cr_assert_eq(h_roundtrip(late, 42), 0);
    ASSERT_OK(adag_dag_destroy(late));
    adag_dag_h readlog = one_call(rt, a, "readlog", 0);
    int64_t zero = 0;
    adag_value_t in = h_i64v(&zero), out;
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(readlog, &in, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(readlog, ref, &out, 1, 10000));
    cr_assert(out.size == sizeof(int64_t) && *(const int64_t *)out.data == 42,
              "the kernel read %s in the destroyed DAG's slot",
              out.size == sizeof(int64_t) ? "another value" : "nothing");
    ASSERT_OK(adag_dag_release(readlog, ref));
    ASSERT_OK(adag_dag_destroy(readlog));
    adag_dag_h slow = one_call(rt, a, "slow", 0);
    (void)h_roundtrip(slow, 200);
    ASSERT_OK(adag_dag_destroy(slow));
    ASSERT_OK(adag_actor_destroy(a));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(devactor, teardown_with_work_in_flight, 60)

/* adag_call_enqueue refuses an actor without a device, a NULL fn and more
 * than 256 bytes of arguments, each naming actor.method; a method that
 * returns its status keeps that message. */
static void enqueue_errors(adag_placement_t pl)
{
    adag_runtime_h rt = dev_runtime();
    adag_actor_h host = dev_actor(rt, pl, NULL, "plain");
    adag_actor_h gpu = dev_actor(rt, pl, "emu:3", "gpu3");
    adag_dag_h on_host = one_call(rt, host, "try_enqueue", 0);
    adag_dag_h on_gpu = one_call(rt, gpu, "try_enqueue", 0);
    adag_value_t out;
    adag_ref_t ref;

    ref = h_execute(on_host, 0);
    ASSERT_ST(adag_dag_get(on_host, ref, &out, 1, 10000), ADAG_ERR_METHOD);
    ASSERT_MSG_HAS("actor plain.try_enqueue: adag_call_enqueue: the actor has no device");
    ASSERT_OK(adag_dag_release(on_host, ref));

    cr_assert_eq(h_roundtrip(on_gpu, 0), 0);
    ref = h_execute(on_gpu, 1);
    ASSERT_ST(adag_dag_get(on_gpu, ref, &out, 1, 10000), ADAG_ERR_METHOD);
    ASSERT_MSG_HAS("actor gpu3.try_enqueue: adag_call_enqueue: fn is NULL");
    ASSERT_OK(adag_dag_release(on_gpu, ref));
    ref = h_execute(on_gpu, 2);
    ASSERT_ST(adag_dag_get(on_gpu, ref, &out, 1, 10000), ADAG_ERR_METHOD);
    ASSERT_MSG_HAS("actor gpu3.try_enqueue: adag_call_enqueue: 257 bytes of arguments, at most "
                   "256");
    ASSERT_OK(adag_dag_release(on_gpu, ref));
    /* the actor goes on */
    cr_assert_eq(h_roundtrip(on_gpu, 0), 0);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(devactor, enqueue_errors, 60)

/* ---------------------------------------------------------------- */
/* Device specs                                                      */
/* ---------------------------------------------------------------- */

/* Creating an actor on `device` (the bit set, even for NULL) fails with
 * `want` and a message holding each of the needles (NULL-terminated); the
 * name is free again (and, for a process actor, no worker is left). */
static void create_fails(adag_runtime_h rt, adag_placement_t pl, const char *device,
                         adag_status_t want, const char *const *needles)
{
    adag_actor_params_t p = dev_params(pl, NULL, "victim");
    p.field_mask |= ADAG_ACTOR_PARAM_DEVICE; /* also with a NULL device */
    p.device = device;
    adag_actor_h a = (adag_actor_h)0x1;
    h_check_status(adag_actor_create(rt, &p, &a), want, device ? device : "(NULL)", __FILE__,
                   __LINE__);
    cr_assert_null(a, "device %s: a failed create left a handle", device);
    for (const char *const *n = needles; *n; n++)
        cr_assert(strstr(h_msg(), *n), "device %s (%s actor): message \"%s\" lacks \"%s\"",
                  device, h_pl_name(pl), h_msg(), *n);
    cr_assert_eq(h_wait_no_children(5000), 0, "device %s: a worker was left", device);
    a = dev_actor(rt, pl, NULL, "victim");
    ASSERT_OK(adag_actor_destroy(a));
    cr_assert_eq(h_wait_no_children(5000), 0, "a worker was left");
}

static void device_spec_errors(adag_placement_t pl)
{
    adag_runtime_h rt = dev_runtime();
    static const char *const malformed[] = {"cuda", "cuda:", "cuda:-1", "cuda:1x", ":0",
                                            "", "emu:+1", "emu: 1", "emu:0:1"};
    for (unsigned i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        char quoted[64];
        snprintf(quoted, sizeof(quoted), "device \"%s\" is not \"<backend>:<index>\"",
                 malformed[i]);
        create_fails(rt, pl, malformed[i], ADAG_ERR_INVALID,
                     (const char *const[]){"adag_actor_create", quoted, NULL});
    }
    create_fails(rt, pl, "emu:99999999999", ADAG_ERR_INVALID,
                 (const char *const[]){"device \"emu:99999999999\": the index must be 0..",
                                       NULL});
    create_fails(rt, pl, "nope:0", ADAG_ERR_NOT_FOUND,
                 (const char *const[]){"device \"nope:0\": unknown backend \"nope\"",
                                       "known: emu, cuda", NULL});
    /* the text is fine, the device is not there (looked for where the actor runs) */
    create_fails(rt, pl, "emu:99", ADAG_ERR_NOT_FOUND,
                 (const char *const[]){"actor victim: device emu:99 does not exist here "
                                       "(emu: 4 devices)",
                                       NULL});
    unsigned ncuda = 0;
    ASSERT_OK(adag_device_count("cuda", &ncuda));
    char spec[32], want[96];
    snprintf(spec, sizeof(spec), "cuda:%u", ncuda);
    snprintf(want, sizeof(want), "actor victim: device %s does not exist here (cuda: %u device",
             spec, ncuda);
    create_fails(rt, pl, spec, ADAG_ERR_NOT_FOUND,
                 (const char *const[]){want, ncuda == 0 ? "devices: " : want, NULL});
    /* the bit set with a NULL device */
    create_fails(rt, pl, NULL, ADAG_ERR_INVALID,
                 (const char *const[]){"device is set (ADAG_ACTOR_PARAM_DEVICE) but NULL", NULL});
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(devactor, device_spec_errors, 60)

/* "emu" has ADAG_EMU_DEVICES (4 by default); "cuda" has what this
 * machine has, and says why when none; another name is NOT_FOUND. */
DTEST(device_count)
{
    unsigned n = 77;
    ASSERT_OK(adag_device_count("emu", &n));
    if (!getenv("ADAG_EMU_DEVICES"))
        cr_assert_eq(n, 4, "emulated devices: %u, ADAG_EMU_DEVICES defaults to 4", n);
    n = 77;
    ASSERT_OK(adag_device_count("cuda", &n));
    cr_assert_neq(n, 77u);
    if (n == 0) {
        cr_assert(strncmp(adag_last_error(), "adag_device_count: cuda: no device: ", 36) == 0 &&
                      strlen(adag_last_error()) > 36,
                  "no CUDA device, and the reason is missing: \"%s\"", adag_last_error());
    }
    ASSERT_ST(adag_device_count("nope", &n), ADAG_ERR_NOT_FOUND);
    ASSERT_MSG_HAS("unknown device backend \"nope\" (known: emu, cuda)");
    ASSERT_ST(adag_device_count("emu:0", &n), ADAG_ERR_NOT_FOUND);
    ASSERT_ST(adag_device_count(NULL, &n), ADAG_ERR_INVALID);
    ASSERT_ST(adag_device_count("emu", NULL), ADAG_ERR_INVALID);
}

/* A device actor's method reads host bytes (not declared) and returns a
 * device tensor nobody reads; its kernel reads the input slot 2 ms after
 * the method returned. The
 * DAG's output comes from a host actor beside it, so the driver and that
 * actor run ahead; the device actor's input slot is released only after
 * the kernel ran, so its writer never overwrites it first: the log holds
 * every execution's value, in order. */
static void host_input_kept_for_its_kernel(adag_placement_t pl)
{
    enum { N = 60, W = 2 };
    adag_runtime_h rt = dev_runtime();
    adag_actor_h h = h_counter(rt, pl, "fast", 0);
    adag_actor_h d = dev_actor(rt, pl, "emu:1", "late");
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h x = h_bind1(g, h, "echo", h_input(g, 0));
    adag_node_h none = h_bind1(g, d, "log_late", x);
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                               .dtype = ADAG_DTYPE_I64, .ndim = 1, .shape = {1}};
    ASSERT_OK(adag_node_tensor(none, &tp));
    ASSERT_OK(adag_graph_output(g, &x, 1));
    adag_dag_h dag = h_compile(g, W, 0);
    for (int64_t k = 0; k < N; k++)
        cr_assert_eq(h_roundtrip(dag, 1000 + k), 1000 + k);
    /* the log, gathered as the device actor's loop gets through the
     * executions */
    int64_t log[N];
    unsigned n = h_device_log(rt, d, log, N);
    cr_assert_eq(n, N, "%u values logged, want %d", n, N);
    for (int64_t k = 0; k < N; k++)
        cr_assert_eq(log[k], 1000 + k,
                     "%s actor: kernel %lld read %lld in its input slot: the slot was released "
                     "before the kernel that reads it ran",
                     h_pl_name(pl), (long long)k, (long long)log[k]);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(devactor, host_input_kept_for_its_kernel, 60)

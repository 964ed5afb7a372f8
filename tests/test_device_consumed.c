/*
 * Suite "dev_consumed": a device writer does not write a slot again before
 * a reader on its device is done with it (the writer's compute stream
 * waits for the reader's `consumed` event, transport/chan_dev.c
 * dev_acquire).
 *
 *   input -> W.write (emu:0) --tensor, zero copy--> R.check (emu:0) -> output
 *
 * W's kernel fills a 4096-element i64 tensor whose every element encodes
 * the execution's ref and its index. R's method enqueues a slow kernel
 * (3 ms, then every element checked against its ref) and returns its ref as
 * host bytes at once, so the driver's get waits for R's method, never for
 * its kernel: nothing on the host holds W back while R's kernels queue up
 * behind each other, and with two slots W's kernel for k + 2 is due while
 * R's kernel for k has not run yet. Only the consumed event keeps W's
 * stream from overwriting that slot; without it R's kernels read later
 * executions' values (each counted in `mismatches`).
 */
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ELEMS 4096
#define EXECUTIONS 300
#define INFLIGHT 2
#define CHECK_SLEEP_US 3000

static _Atomic int kernels_run;
static _Atomic int mismatches;
static _Atomic int64_t first_bad = -1; /* ref of the first kernel that saw a wrong element */

static int64_t element(uint64_t ref, uint64_t i)
{
    return (int64_t)(ref << 20 | i);
}

typedef struct {
    int64_t *data;
    uint64_t ref;
} fill_args_t;

static void fill_kernel(void *p)
{
    const fill_args_t *a = p;
    for (uint64_t i = 0; i < ELEMS; i++)
        a->data[i] = element(a->ref, i);
}

/* write(x) -> t: i64[ELEMS] on the actor's device, filled by a kernel */
static adag_status_t w_write(void *state, adag_call_h call)
{
    (void)state;
    const int64_t shape[1] = {ELEMS};
    void *out;
    adag_status_t st = adag_call_output_tensor(call, 0, ADAG_DTYPE_I64, 1, shape, &out);
    if (st != ADAG_OK)
        return st;
    fill_args_t a = {out, adag_call_ref(call)};
    return adag_call_enqueue(call, fill_kernel, &a, sizeof(a));
}

typedef struct {
    const int64_t *data;
    uint64_t ref;
} check_args_t;

static void check_kernel(void *p)
{
    const check_args_t *a = p;
    struct timespec ts = {0, CHECK_SLEEP_US * 1000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
    for (uint64_t i = 0; i < ELEMS; i++)
        if (a->data[i] != element(a->ref, i)) {
            int64_t none = -1;
            atomic_compare_exchange_strong(&first_bad, &none, (int64_t)a->ref);
            atomic_fetch_add(&mismatches, 1);
            break;
        }
    atomic_fetch_add(&kernels_run, 1);
}

/* check(t) -> ref (host bytes, written now: the kernel runs later) */
static adag_status_t r_check(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t t;
    adag_status_t st = adag_call_arg(call, 0, &t);
    if (st != ADAG_OK)
        return st;
    if (t.kind != ADAG_VALUE_TENSOR || t.dtype != ADAG_DTYPE_I64 || t.size != ELEMS * 8 ||
        t.device != adag_call_device(call))
        return adag_call_fail(call, "expects i64[%d] on its device, got %zu bytes on %d", ELEMS,
                              t.size, t.device);
    uint64_t ref = adag_call_ref(call);
    check_args_t a = {t.data, ref};
    if ((st = adag_call_enqueue(call, check_kernel, &a, sizeof(a))) != ADAG_OK)
        return st;
    int64_t out = (int64_t)ref;
    return adag_call_set_output(call, 0, &out, sizeof(out));
}

static const adag_method_def_t w_methods[] = {{"write", w_write, 1, 1}};
static const adag_method_def_t r_methods[] = {{"check", r_check, 1, 1}};
static const adag_class_def_t writer_class = {
    .abi_version = ADAG_ABI_VERSION, .name = "consumed_writer", .methods = w_methods,
    .nmethods = 1};
static const adag_class_def_t reader_class = {
    .abi_version = ADAG_ABI_VERSION, .name = "consumed_reader", .methods = r_methods,
    .nmethods = 1};

static adag_actor_h device_actor(adag_runtime_h rt, const char *cls, const char *name)
{
    adag_actor_params_t p = h_actor_params_init(cls, ADAG_PLACEMENT_THREAD, name, NULL, 0);
    p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
    p.device = "emu:0";
    adag_actor_h a;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    return a;
}

Test(dev_consumed, writer_waits_for_same_device_reader, .timeout = 120)
{
    adag_runtime_h rt = h_runtime();
    ASSERT_OK(adag_class_register(rt, &writer_class));
    ASSERT_OK(adag_class_register(rt, &reader_class));
    adag_actor_h w = device_actor(rt, "consumed_writer", "W");
    adag_actor_h r = device_actor(rt, "consumed_reader", "R");
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h t = h_bind1(g, w, "write", h_input(g, 0));
    ASSERT_OK(adag_node_tensor(t, NULL));
    adag_node_h out = h_bind1(g, r, "check", t);
    ASSERT_OK(adag_graph_output(g, &out, 1));
    adag_dag_h dag = h_compile(g, INFLIGHT, ELEMS * 8);
    ASSERT_OK(adag_graph_destroy(g));
    char *dot = h_dot(dag);
    cr_assert(strstr(dot, "zero copy"), "W -> R is not a zero-copy device edge:\n%s", dot);
    free(dot);

    atomic_store(&kernels_run, 0);
    atomic_store(&mismatches, 0);
    adag_ref_t refs[EXECUTIONS];
    for (int k = 0; k < EXECUTIONS + INFLIGHT; k++) {
        if (k >= INFLIGHT) { /* the oldest in flight: R's method ran (not its kernel) */
            int j = k - INFLIGHT;
            cr_assert_eq(h_get_i64(dag, refs[j], 30000), (int64_t)refs[j]);
            ASSERT_OK(adag_dag_release(dag, refs[j]));
        }
        if (k < EXECUTIONS)
            refs[k] = h_execute(dag, k);
    }
    int queued = EXECUTIONS - atomic_load(&kernels_run);
    /* every kernel runs before the DAG goes (its loops wait for the streams) */
    for (double deadline = h_now_ms() + 60000;
         atomic_load(&kernels_run) < EXECUTIONS && h_now_ms() < deadline;)
        h_sleep_ms(5);
    ASSERT_OK(adag_dag_destroy(dag));
    cr_log_info("dev_consumed: %d of %d check kernels were still queued when the last result "
                "came back",
                queued, EXECUTIONS);
    cr_assert_eq(atomic_load(&kernels_run), EXECUTIONS, "%d of %d check kernels ran",
                 atomic_load(&kernels_run), EXECUTIONS);
    cr_assert_eq(atomic_load(&mismatches), 0,
                 "%d of %d check kernels read another execution's values in their slot (the "
                 "first: ref %lld): W overwrote a slot R's kernel had not read yet",
                 atomic_load(&mismatches), EXECUTIONS, (long long)atomic_load(&first_bad));
    ASSERT_OK(adag_runtime_destroy(rt));
}

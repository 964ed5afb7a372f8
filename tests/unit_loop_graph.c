/* Unit tests (suite "loop_graph"): a capturable method that breaks its
 * capture (dag/exec/loop_graph.c) with an operation that is illegal during
 * one (gpu/device.h): the execution it was captured in fails with
 * ADAG_ERR_METHOD naming actor.method and the operation, and the method
 * runs uncaptured from then on. A thread actor on the emulated device,
 * whose method calls the device ops table itself (its compute stream is
 * the emulated device's stream). */
#include "common/clock.h"
#include "gpu/device.h"

#include <adag.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define OK(expr)                                                                              \
    do {                                                                                      \
        adag_status_t st_ = (expr);                                                           \
        cr_assert_eq(st_, ADAG_OK, "%s: %s: %s", #expr, adag_status_str(st_),                 \
                     adag_last_error());                                                      \
    } while (0)

typedef struct {
    int64_t calls;
} sync_state_t;

typedef struct {
    const int64_t *in;
    int64_t *out;
} copy_args_t;

static void copy_kernel(void *p)
{
    const copy_args_t *a = p;
    *a->out = *a->in + 1;
}

/* x -> x + 1 by a kernel; then it waits for its stream (which no
 * capturable method may do: during a capture the wait is refused) */
static adag_status_t syncs(void *state, adag_call_h call)
{
    sync_state_t *s = state;
    s->calls++;
    adag_value_t v;
    void *out;
    adag_status_t st = adag_call_arg(call, 0, &v);
    if (st == ADAG_OK)
        st = adag_call_output(call, 0, sizeof(int64_t), &out);
    copy_args_t args = {v.data, out};
    if (st == ADAG_OK)
        st = adag_call_enqueue(call, copy_kernel, &args, sizeof args);
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    (void)o->stream_sync(adag_call_stream(call), adag__deadline_ms(5000)); /* unchecked */
    return st;
}

static adag_status_t calls(void *state, adag_call_h call)
{
    return adag_call_set_output(call, 0, &((sync_state_t *)state)->calls, sizeof(int64_t));
}

static const adag_method_def_t sync_methods[] = {
    {.name = "syncs", .fn = syncs, .nargs = 1, .nreturns = 1},
    {.name = "calls", .fn = calls, .nargs = 1, .nreturns = 1},
};
static const char *const sync_capturable[] = {"syncs", NULL};
static const adag_class_def_t sync_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "syncer",
    .state_size = sizeof(sync_state_t),
    .methods = sync_methods,
    .nmethods = 2,
    .capturable = sync_capturable,
};

static adag_dag_h one(adag_runtime_h rt, adag_actor_h a, const char *method, int graphs)
{
    adag_graph_h g;
    adag_node_h in, y;
    OK(adag_graph_create(rt, &g));
    OK(adag_graph_input(g, 0, &in));
    OK(adag_graph_bind(g, a, method, &in, 1, &y));
    OK(adag_graph_output(g, &y, 1));
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_GRAPHS |
                                              ADAG_COMPILE_PARAM_MAX_INFLIGHT,
                                .max_inflight = 1, .graphs = graphs};
    adag_dag_h dag;
    OK(adag_graph_compile(g, &cp, &dag));
    OK(adag_graph_destroy(g));
    return dag;
}

static adag_status_t run(adag_dag_h dag, int64_t x, int64_t *y)
{
    adag_ref_t ref;
    adag_value_t in = {.data = &x, .size = sizeof x}, out;
    OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    adag_status_t st = adag_dag_get(dag, ref, &out, 1, 10000);
    if (st == ADAG_OK)
        memcpy(y, out.data, sizeof *y);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", adag_last_error());
    OK(adag_dag_release(dag, ref));
    adag_fail(st, "%s", msg);
    return st;
}

Test(loop_graph, a_sync_in_the_method_fails_its_capture_by_name, .timeout = 60)
{
    enum { N = 20 };
    adag_runtime_h rt;
    OK(adag_runtime_create(NULL, &rt));
    OK(adag_class_register(rt, &sync_class));
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_DEVICE | ADAG_ACTOR_PARAM_CLASS |
                                           ADAG_ACTOR_PARAM_NAME | ADAG_ACTOR_PARAM_PLACEMENT,
                             .class_name = "syncer",
                             .name = "waiter", .placement = ADAG_PLACEMENT_THREAD,
                             .device = "emu:0"};
    adag_actor_h a;
    OK(adag_actor_create(rt, &p, &a));
    adag_dag_h dag = one(rt, a, "syncs", 1);
    int failed = 0;
    for (int64_t k = 0; k < N; k++) {
        int64_t y = -1;
        adag_status_t st = run(dag, k, &y);
        if (st == ADAG_OK) {
            cr_assert_eq(y, k + 1, "execution %lld gave %lld", (long long)k, (long long)y);
            continue;
        }
        failed++;
        cr_assert_eq(st, ADAG_ERR_METHOD, "execution %lld: %s", (long long)k,
                     adag_status_str(st));
        cr_assert(strstr(adag_last_error(), "waiter.syncs") &&
                      strstr(adag_last_error(), "stream_sync"),
                  "the failure does not name actor.method and the operation: %s",
                  adag_last_error());
    }
    cr_assert_eq(failed, 1, "%d executions failed, want the one captured", failed);
    OK(adag_dag_destroy(dag));
    adag_dag_h cd = one(rt, a, "calls", 0);
    int64_t n = 0;
    OK(run(cd, 0, &n));
    cr_assert_eq(n, N, "the method ran %lld times in %d executions", (long long)n, N);
    OK(adag_dag_destroy(cd));
    OK(adag_runtime_destroy(rt));
}

/* The "graphactor" class (tests/modules/graph_actors.h). */
#include "graph_actors.h"

#include <string.h>

typedef struct {
    int64_t calls;
} graph_state_t;

typedef struct {
    const int64_t *x; /* the input slot: read when the kernel runs */
    float *y;
    float k;
} chain_args_t;

static void first_kernel(void *p)
{
    const chain_args_t *a = p;
    for (int i = 0; i < GRAPH_ACTOR_N; i++)
        a->y[i] = (float)(*a->x + i) * 0.5f;
}

static void next_kernel(void *p)
{
    const chain_args_t *a = p;
    for (int i = 0; i < GRAPH_ACTOR_N; i++)
        a->y[i] = a->y[i] * 0.75f + a->k * 0.125f;
}

void graph_actor_reference(int64_t x, float *y)
{
    for (int i = 0; i < GRAPH_ACTOR_N; i++)
        y[i] = (float)(x + i) * 0.5f;
    for (int k = 1; k < GRAPH_ACTOR_KERNELS; k++)
        for (int i = 0; i < GRAPH_ACTOR_N; i++)
            y[i] = y[i] * 0.75f + (float)k * 0.125f;
}

static adag_status_t g_chain(void *state, adag_call_h call)
{
    graph_state_t *s = state;
    s->calls++;
    adag_value_t v;
    adag_status_t st = adag_call_arg(call, 0, &v);
    if (st != ADAG_OK)
        return st;
    if (v.size != sizeof(int64_t))
        return adag_call_fail(call, "expects one int64, got %zu bytes", v.size);
    const int64_t shape[1] = {GRAPH_ACTOR_N};
    void *out;
    if ((st = adag_call_output_tensor(call, 0, ADAG_DTYPE_F32, 1, shape, &out)) != ADAG_OK)
        return st;
    chain_args_t a = {v.data, out, 0};
    st = adag_call_enqueue(call, first_kernel, &a, sizeof a);
    for (int k = 1; k < GRAPH_ACTOR_KERNELS && st == ADAG_OK; k++) {
        a.k = (float)k;
        st = adag_call_enqueue(call, next_kernel, &a, sizeof a);
    }
    return st;
}

static void empty_kernel(void *p)
{
    (void)p;
}

static adag_status_t g_host_set(void *state, adag_call_h call)
{
    graph_state_t *s = state;
    s->calls++;
    adag_value_t v;
    adag_status_t st = adag_call_arg(call, 0, &v);
    if (st == ADAG_OK)
        st = adag_call_enqueue(call, empty_kernel, NULL, 0);
    return st == ADAG_OK ? adag_call_set_output(call, 0, v.data, v.size) : st;
}

static adag_status_t g_calls(void *state, adag_call_h call)
{
    const graph_state_t *s = state;
    return adag_call_set_output(call, 0, &s->calls, sizeof(s->calls));
}

static const adag_method_def_t graph_methods[] = {
    {.name = "chain", .fn = g_chain, .nargs = 1, .nreturns = 1},
    {.name = "host_set", .fn = g_host_set, .nargs = 1, .nreturns = 1},
    {.name = "calls", .fn = g_calls, .nargs = 1, .nreturns = 1},
};

static const char *const graph_capturable[] = {"chain", "host_set", NULL};

const adag_class_def_t test_graph_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "graphactor",
    .state_size = sizeof(graph_state_t),
    .methods = graph_methods,
    .nmethods = sizeof(graph_methods) / sizeof(graph_methods[0]),
    .capturable = graph_capturable,
};

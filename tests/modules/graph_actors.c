/* The "graphactor" class (tests/modules/graph_actors.h). */
#include "graph_actors.h"

#include <string.h>
#include <time.h>

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

/* chain after 20 ms of host work: its warm-up and capture calls are long */
static adag_status_t g_slow_chain(void *state, adag_call_h call)
{
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return g_chain(state, call);
}

typedef struct {
    const float *x;
    float *sum;
} sum_args_t;

static void sum_kernel(void *p)
{
    const sum_args_t *a = p;
    float t = 0;
    for (int i = 0; i < GRAPH_ACTOR_N; i++)
        t += a->x[i];
    *a->sum = t;
}

/* Argument 0, an f32[GRAPH_ACTOR_N], into *in; return 0, an f32[n], into
 * *out; counted as a call. */
static adag_status_t f32_in_out(graph_state_t *s, adag_call_h call, int64_t n,
                                const float **in, float **out)
{
    s->calls++;
    adag_value_t v;
    adag_status_t st = adag_call_arg(call, 0, &v);
    if (st != ADAG_OK)
        return st;
    if (v.size != GRAPH_ACTOR_N * sizeof(float))
        return adag_call_fail(call, "expects f32[%d], got %zu bytes", GRAPH_ACTOR_N, v.size);
    *in = v.data;
    return adag_call_output_tensor(call, 0, ADAG_DTYPE_F32, 1, &n, (void **)out);
}

static adag_status_t g_sum(void *state, adag_call_h call)
{
    sum_args_t a;
    float *out;
    adag_status_t st = f32_in_out(state, call, 1, &a.x, &out);
    a.sum = out;
    return st == ADAG_OK ? adag_call_enqueue(call, sum_kernel, &a, sizeof a) : st;
}

typedef struct {
    const float *x;
    float *y;
} scale_args_t;

static void scale_kernel(void *p)
{
    const scale_args_t *a = p;
    for (int i = 0; i < GRAPH_ACTOR_N; i++)
        a->y[i] = a->x[i] * 2.0f + 1.0f;
}

static void inc_kernel(void *p)
{
    const scale_args_t *a = p;
    for (int i = 0; i < GRAPH_ACTOR_N; i++)
        a->y[i] += 0.25f;
}

static adag_status_t g_scale(void *state, adag_call_h call)
{
    scale_args_t a;
    adag_status_t st = f32_in_out(state, call, GRAPH_ACTOR_N, &a.x, &a.y);
    if (st == ADAG_OK)
        st = adag_call_enqueue(call, scale_kernel, &a, sizeof a);
    for (int k = 0; k < 3 && st == ADAG_OK; k++)
        st = adag_call_enqueue(call, inc_kernel, &a, sizeof a);
    return st;
}

void graph_actor_scale_reference(const float *x, float *y)
{
    for (int i = 0; i < GRAPH_ACTOR_N; i++) {
        y[i] = x[i] * 2.0f + 1.0f;
        for (int k = 0; k < 3; k++)
            y[i] += 0.25f;
    }
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
    {.name = "slow_chain", .fn = g_slow_chain, .nargs = 1, .nreturns = 1},
    {.name = "sum", .fn = g_sum, .nargs = 1, .nreturns = 1},
    {.name = "scale", .fn = g_scale, .nargs = 1, .nreturns = 1},
};

static const char *const graph_capturable[] = {"chain", "host_set", "slow_chain", "scale",
                                               NULL};

const adag_class_def_t test_graph_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "graphactor",
    .state_size = sizeof(graph_state_t),
    .methods = graph_methods,
    .nmethods = sizeof(graph_methods) / sizeof(graph_methods[0]),
    .capturable = graph_capturable,
};

/* two_stage: a 2-stage pipeline of thread actors computing 3 * x + 10. */
#include <adag.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every adag call returns a status; on failure, say why and exit. */
static void check(adag_status_t s, const char *what)
{
    if (s != ADAG_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, adag_status_str(s), adag_last_error());
        exit(1);
    }
}
#define CHECK(call) check((call), #call)

/* Class "affine": state is one int64 set at init. */
static adag_status_t affine_init(void *state, const void *data, size_t size)
{
    if (size != sizeof(int64_t))
        return ADAG_ERR_INVALID;
    memcpy(state, data, size);
    return ADAG_OK;
}

/* Input 0 (an int64) times a ("scale") or plus a ("offset"), as output 0. */
static adag_status_t apply(const int64_t *a, adag_call_h call, int mul)
{
    adag_value_t in;
    int64_t x;
    if (adag_call_arg(call, 0, &in) != ADAG_OK || in.size != sizeof x)
        return adag_call_fail(call, "expected one int64");
    memcpy(&x, in.data, sizeof x);
    x = mul ? x * *a : x + *a;
    return adag_call_set_output(call, 0, &x, sizeof x);
}
static adag_status_t scale(void *state, adag_call_h call) { return apply(state, call, 1); }
static adag_status_t offset(void *state, adag_call_h call) { return apply(state, call, 0); }

static const adag_method_def_t affine_methods[] = {
    {.name = "scale", .fn = scale, .nargs = 1, .nreturns = 1},
    {.name = "offset", .fn = offset, .nargs = 1, .nreturns = 1},
};
static const adag_class_def_t affine_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "affine", .state_size = sizeof(int64_t), .init = affine_init,
    .methods = affine_methods, .nmethods = 2,
};

int main(void)
{
    adag_runtime_h rt;
    adag_actor_h scaler, adder;
    adag_graph_h g;
    adag_node_h in, mid, out;
    adag_dag_h dag;
    int64_t three = 3, ten = 10;

    CHECK(adag_runtime_create(NULL, &rt));
    CHECK(adag_class_register(rt, &affine_class));
    adag_actor_params_t p = {
        .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_INIT,
        .class_name = "affine", .init_data = &three, .init_size = sizeof three,
    };
    CHECK(adag_actor_create(rt, &p, &scaler));
    p.init_data = &ten;
    CHECK(adag_actor_create(rt, &p, &adder));

    CHECK(adag_graph_create(rt, &g)); /* input -> scaler.scale -> adder.offset */
    CHECK(adag_graph_input(g, 0, &in));
    CHECK(adag_graph_bind(g, scaler, "scale", &in, 1, &mid));
    CHECK(adag_graph_bind(g, adder, "offset", &mid, 1, &out));
    CHECK(adag_graph_output(g, &out, 1));
    CHECK(adag_graph_compile(g, NULL, &dag));

    for (int64_t x = 0; x < 10; x++) {
        adag_value_t input = {.data = &x, .size = sizeof x}, result;
        adag_ref_t ref;
        int64_t y;
        CHECK(adag_dag_execute(dag, &input, 1, 0, &ref));
        CHECK(adag_dag_get(dag, ref, &result, 1, 5000));
        memcpy(&y, result.data, sizeof y); /* result.data is valid until release */
        CHECK(adag_dag_release(dag, ref));
        printf("3 * %lld + 10 = %lld\n", (long long)x, (long long)y);
    }
    CHECK(adag_runtime_destroy(rt)); /* also destroys the DAG, graph and actors */
    return 0;
}

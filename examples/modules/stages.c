/*
 * An actor module for the pipeline demo (examples/pipeline_demo.c).
 *
 * Class "stage": one stage of a pipeline-parallel model. Its state is the
 * stage's index and weight, set at init from a stage_init_t.
 *   forward(batch) -> batch'   float32 array of any length, transformed
 *                              elementwise (see stage_element in stages.h)
 *   checksum(batch) -> double  float64 sum of the batch's elements
 *
 * Both methods are zero-copy: they read the input straight from the incoming
 * channel slot (adag_call_arg) and write the output straight into the
 * outgoing one (adag_call_output).
 *
 * Built as build/examples/libstages.so; process actors name it as their
 * module, and a driver may also dlopen it and register the classes listed in
 * adag_module_classes for thread actors.
 */
#include <adag.h>

#include <stdint.h>
#include <string.h>

#include "stages.h"

typedef struct {
    int32_t index;
    float scale;
} stage_state_t;

static adag_status_t stage_init(void *state, const void *init_data, size_t init_size)
{
    stage_state_t *st = state;
    stage_init_t init;

    if (init_data == NULL || init_size != sizeof init)
        return ADAG_ERR_INVALID; /* a stage needs its stage_init_t */
    memcpy(&init, init_data, sizeof init);
    if (init.index < 0)
        return ADAG_ERR_INVALID;
    st->index = init.index;
    st->scale = init.scale;
    return ADAG_OK;
}

/* Input 0 as an array of floats; fails the call if it is not one. */
static adag_status_t batch_arg(adag_call_h call, const float **data, size_t *n)
{
    adag_value_t in;
    adag_status_t s = adag_call_arg(call, 0, &in);

    if (s != ADAG_OK)
        return adag_call_fail(call, "no input batch (%d)", (int)s);
    if (in.size % sizeof(float) != 0)
        return adag_call_fail(call, "batch of %zu bytes is not an array of float32", in.size);
    if (in.size > 0 && (uintptr_t)in.data % _Alignof(float) != 0)
        return adag_call_fail(call, "batch at %p is not aligned for float32", in.data);
    *data = in.data;
    *n = in.size / sizeof(float);
    return ADAG_OK;
}

static adag_status_t stage_forward(void *state, adag_call_h call)
{
    const stage_state_t *st = state;
    const float *x;
    size_t n;
    void *out;
    adag_status_t s;

    if ((s = batch_arg(call, &x, &n)) != ADAG_OK)
        return s;
    /* Fails (ADAG_ERR_TOO_LARGE) if the output does not fit the slot. */
    if ((s = adag_call_output(call, 0, n * sizeof(float), &out)) != ADAG_OK)
        return s;
    stage_compute(x, out, n, st->index, st->scale);
    return ADAG_OK;
}

static adag_status_t stage_checksum(void *state, adag_call_h call)
{
    const float *x;
    size_t n;
    double sum = 0.0;
    adag_status_t s;

    (void)state;
    if ((s = batch_arg(call, &x, &n)) != ADAG_OK)
        return s;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    return adag_call_set_output(call, 0, &sum, sizeof sum);
}

static const adag_method_def_t stage_methods[] = {
    {.name = "forward", .fn = stage_forward, .nargs = 1, .nreturns = 1},
    {.name = "checksum", .fn = stage_checksum, .nargs = 1, .nreturns = 1},
};

static const adag_class_def_t stage_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "stage",
    .state_size = sizeof(stage_state_t),
    .init = stage_init,
    .methods = stage_methods,
    .nmethods = sizeof stage_methods / sizeof stage_methods[0],
};

ADAG_MODULE(&stage_class);

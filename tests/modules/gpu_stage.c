/*
 * A pipeline stage for device-bound actors (tests/test_gpu_pipeline.c;
 * init: {stage, kernel_us, host_us}, the last two optional):
 * its "kernel" runs on the actor's compute stream (adag_call_enqueue), the
 * way a CUDA kernel would, so the method returns before the work is done
 * and the runtime's events order the next stage after it. On a host actor
 * (no device: host tensors) the method computes it itself.
 *
 *   step(x) -> (y, info)   y = stage_apply(stage, x) elementwise, with the
 *                          shape reversed; info (host bytes) = what the
 *                          method saw: {ref, elements, dtype, device, when}
 *   apply(x) -> y          the same, one return
 *   apply_with(x, any) -> y  apply; its second argument only read (a host
 *                          value held while the kernel may still run)
 *   apply_flaky(x) -> y    apply, but stage 2 fails executions ref % 4 == 1
 */
#include "gpu_stage.h"

#include <errno.h>
#include <string.h>
#include <time.h>

typedef struct {
    int stage;
    int kernel_us; /* each kernel sleeps this long (a slow emulated kernel) */
    int host_us;   /* each method sleeps this long before its kernel (a slow host side) */
} stage_state_t;

typedef struct {
    const void *in;
    void *out;
    uint64_t n;
    uint32_t dtype;
    int stage;
    int kernel_us;
} kernel_args_t;

static void kernel(void *p)
{
    const kernel_args_t *a = p;
    size_t es = adag_dtype_size((adag_dtype_t)a->dtype);
    if (a->kernel_us) {
        struct timespec ts = {a->kernel_us / 1000000, (a->kernel_us % 1000000) * 1000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ; /* a signal ends the sleep early: sleep what is left */
    }
    for (uint64_t i = 0; i < a->n; i++)
        stage_apply(a->dtype, a->stage, (const char *)a->in + i * es, (char *)a->out + i * es);
}

static adag_status_t stage_init(void *state, const void *data, size_t size)
{
    stage_state_t *s = state;
    if (size < sizeof(int))
        return ADAG_ERR_INVALID;
    memcpy(&s->stage, data, sizeof(int));
    if (size >= 2 * sizeof(int))
        memcpy(&s->kernel_us, (const char *)data + sizeof(int), sizeof(int));
    if (size >= 3 * sizeof(int))
        memcpy(&s->host_us, (const char *)data + 2 * sizeof(int), sizeof(int));
    return ADAG_OK;
}

static adag_status_t run(stage_state_t *s, adag_call_h call, int with_info)
{
    adag_value_t x;
    adag_status_t st = adag_call_arg(call, 0, &x);
    if (st != ADAG_OK)
        return st;
    if (x.kind != ADAG_VALUE_TENSOR)
        return adag_call_fail(call, "argument 0 is not a tensor");
    if (x.device != adag_call_device(call))
        return adag_call_fail(call, "argument 0 is on device %d, the actor on %d", x.device,
                              adag_call_device(call));
    int64_t shape[ADAG_MAX_DIMS];
    uint64_t n = 1;
    for (unsigned d = 0; d < x.ndim; d++) {
        shape[d] = x.shape[x.ndim - 1 - d];
        n *= (uint64_t)x.shape[d];
    }
    void *out;
    st = adag_call_output_tensor(call, 0, x.dtype, x.ndim, shape, &out);
    if (st != ADAG_OK)
        return st;
    kernel_args_t a = {x.data, out, n, (uint32_t)x.dtype, s->stage, s->kernel_us};
    if (s->host_us) {
        struct timespec ts = {s->host_us / 1000000, (s->host_us % 1000000) * 1000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    if (adag_call_device(call) == ADAG_DEVICE_HOST)
        kernel(&a); /* a host actor: host tensors, computed now */
    else if ((st = adag_call_enqueue(call, kernel, &a, sizeof(a))) != ADAG_OK)
        return st;
    if (with_info) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        stage_info_t info = {adag_call_ref(call), n, (uint32_t)x.dtype, adag_call_device(call),
                             (int64_t)now.tv_sec * 1000000000 + now.tv_nsec};
        return adag_call_set_output(call, 1, &info, sizeof(info));
    }
    return ADAG_OK;
}

static adag_status_t stage_step(void *state, adag_call_h call)
{
    return run(state, call, 1);
}

static adag_status_t stage_apply_m(void *state, adag_call_h call)
{
    return run(state, call, 0);
}

/* apply_with(x, any): apply of x; the second argument (any value, a host
 * value for a device actor whose work may still run when the method
 * returns) is only checked to be there */
static adag_status_t stage_apply_with(void *state, adag_call_h call)
{
    adag_value_t tag;
    adag_status_t st = adag_call_arg(call, 1, &tag);
    if (st != ADAG_OK)
        return st;
    return run(state, call, 0);
}

/* apply, except that stage 2 fails every execution whose ref % 4 == 1 */
static adag_status_t stage_apply_flaky(void *state, adag_call_h call)
{
    stage_state_t *s = state;
    if (s->stage == 2 && adag_call_ref(call) % 4 == 1)
        return adag_call_fail(call, "stage 2 fails execution %llu on purpose",
                              (unsigned long long)adag_call_ref(call));
    return run(state, call, 0);
}

static const adag_method_def_t stage_methods[] = {
    {"step", stage_step, 1, 2},
    {"apply", stage_apply_m, 1, 1},
    {"apply_with", stage_apply_with, 2, 1},
    {"apply_flaky", stage_apply_flaky, 1, 1},
};

/* apply enqueues one kernel on its stream (a device actor's) */
static const char *const stage_capturable[] = {"apply", NULL};

const adag_class_def_t test_gpu_stage_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "gpu_stage",
    .state_size = sizeof(stage_state_t),
    .init = stage_init,
    .methods = stage_methods,
    .nmethods = sizeof(stage_methods) / sizeof(stage_methods[0]),
    .capturable = stage_capturable,
};

/*
 * The "cuda_stage" class (cuda_stage.h): a device pipeline stage whose
 * work is CUDA kernels (cuda_stage_kernels.cu) launched on the actor's
 * compute stream. The method checks its argument, takes the output buffer
 * in device memory, enqueues the kernels and returns: the runtime orders
 * the next reader after them with events.
 */
#include "cuda_stage.h"

#include <adag.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#ifdef CUDA_STAGE_EMULATED
/* libcuda_stage_emulated.so, for `test-cuda-dag --emulate` (a check of the
 * test program itself on the emulated device, where no GPU is): the
 * kernels are host work on the compute stream (adag_call_enqueue), the
 * stage the C reference itself, the spin a sleep. */
#include "gpu_stage.h"

typedef struct {
    const void *in;
    void *out;
    uint64_t n;
    uint32_t dtype;
    int32_t stage, spin_us;
} emulated_args_t;

static void emulated_kernels(void *p)
{
    const emulated_args_t *a = p;
    size_t es = adag_dtype_size((adag_dtype_t)a->dtype);
    struct timespec ts = {a->spin_us / 1000000, (a->spin_us % 1000000) * 1000L};
    if (a->spin_us > 0)
        nanosleep(&ts, NULL);
    for (uint64_t i = 0; i < a->n; i++)
        stage_apply(a->dtype, a->stage, (const char *)a->in + i * es, (char *)a->out + i * es);
}
#endif

typedef struct {
    cuda_stage_init_t init;
} cuda_stage_state_t;

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static adag_status_t cuda_stage_init(void *state, const void *data, size_t size)
{
    if (!data || size != sizeof(cuda_stage_init_t))
        return ADAG_ERR_INVALID; /* a stage needs its cuda_stage_init_t */
    memcpy(&((cuda_stage_state_t *)state)->init, data, sizeof(cuda_stage_init_t));
    return ADAG_OK;
}

/* step, apply and apply_flaky: the kernels over argument 0 into output 0;
 * with_info: output 1 is the cuda_stage_info_t. */
static adag_status_t run_stage(const cuda_stage_state_t *s, adag_call_h call, int with_info)
{
    int64_t begin_ns = monotonic_ns();
    adag_value_t x;
    adag_status_t st = adag_call_arg(call, 0, &x);
    if (st != ADAG_OK)
        return st;
    if (x.kind != ADAG_VALUE_TENSOR)
        return adag_call_fail(call, "argument 0 is not a tensor");
    if (x.device != adag_call_device(call))
        return adag_call_fail(call, "argument 0 is on device %d, the actor on %d", (int)x.device,
                              (int)adag_call_device(call));
    size_t es = adag_dtype_size(x.dtype);
    if (es == 0 || x.dtype == ADAG_DTYPE_BYTES)
        return adag_call_fail(call, "argument 0 has dtype %d, which the kernel does not know",
                              (int)x.dtype);
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
    /* a misaligned element access would fault the kernel and with it the
     * actor's CUDA context: refuse it here, named */
    if (n && (((uintptr_t)x.data | (uintptr_t)out) % es))
        return adag_call_fail(call, "%s elements at %p -> %p are not %zu-byte aligned",
                              adag_dtype_name(x.dtype), x.data, out, es);
#ifdef CUDA_STAGE_EMULATED
    emulated_args_t args = {x.data, out, n, (uint32_t)x.dtype, s->init.stage, s->init.spin_us};
    if ((st = adag_call_enqueue(call, emulated_kernels, &args, sizeof args)) != ADAG_OK)
        return st;
#else
    char err[256];
    if (cuda_stage_launch(adag_call_stream(call), x.data, out, n, (uint32_t)x.dtype,
                          s->init.stage, s->init.spin_us, err, sizeof err) != 0)
        return adag_call_fail(call, "stage %d: %s", (int)s->init.stage, err);
#endif
    if (!with_info)
        return ADAG_OK;
    cuda_stage_info_t info = {adag_call_ref(call), n, (uint32_t)x.dtype, adag_call_device(call),
                              begin_ns, monotonic_ns()};
    return adag_call_set_output(call, 1, &info, sizeof info);
}

static adag_status_t cuda_stage_step(void *state, adag_call_h call)
{
    return run_stage(state, call, 1);
}

static adag_status_t cuda_stage_apply(void *state, adag_call_h call)
{
    return run_stage(state, call, 0);
}

/* apply, except that stage 2 fails every execution whose ref % 4 == 1
 * (before it enqueues anything) */
static adag_status_t cuda_stage_apply_flaky(void *state, adag_call_h call)
{
    const cuda_stage_state_t *s = state;
    if (s->init.stage == 2 && adag_call_ref(call) % 4 == 1)
        return adag_call_fail(call, "stage 2 fails execution %llu on purpose",
                              (unsigned long long)adag_call_ref(call));
    return run_stage(s, call, 0);
}

static const adag_method_def_t cuda_stage_methods[] = {
    {"step", cuda_stage_step, 1, 2},
    {"apply", cuda_stage_apply, 1, 1},
    {"apply_flaky", cuda_stage_apply_flaky, 1, 1},
};

/* apply enqueues kernels only, of sizes its input's declaration fixes */
static const char *const cuda_stage_capturable[] = {"apply", NULL};

static const adag_class_def_t cuda_stage_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "cuda_stage",
    .state_size = sizeof(cuda_stage_state_t),
    .init = cuda_stage_init,
    .methods = cuda_stage_methods,
    .nmethods = 3,
    .capturable = cuda_stage_capturable,
};

ADAG_MODULE(&cuda_stage_class);

/*
 * An actor module for examples/gpu_pipeline.c: class "gpu_stage", one stage
 * of a pipeline of device-bound actors.
 *
 *   forward(x) -> y   x: an f32 tensor on the actor's device, any shape;
 *                     y: the same shape, y = gpu_stage_compute(x) (see
 *                     gpu_stages.h), written on the actor's compute stream
 *
 * The method only enqueues the work and returns: the runtime orders the
 * next stage's read of y after it with events, and keeps x valid until the
 * work enqueued on the stream has run. Two builds of this file:
 *
 *   libgpu_stages.so       the emulated "emu" device: the work is host code
 *                          run in stream order (adag_call_enqueue, which
 *                          copies its arguments like a kernel launch);
 *   libgpu_stages_cuda.so  with -DGPU_STAGES_CUDA, linked with
 *                          gpu_stages_kernel.cu by nvcc: the work is a CUDA
 *                          kernel launched on adag_call_stream.
 */
#include <adag.h>

#include <stdint.h>
#include <string.h>

#include "gpu_stages.h"

#ifdef GPU_STAGES_CUDA
/* gpu_stages_kernel.cu: launches the kernel on `stream`; 0, or the CUDA
 * error with its text in err. */
int gpu_stages_launch(void *stream, const float *x, float *y, uint64_t rows, uint64_t cols,
                      int32_t index, char *err, size_t errlen);
#else
typedef struct {
    const float *x;
    float *y;
    uint64_t rows, cols;
    int32_t index;
} host_work_t;

/* Runs on the actor's compute stream (a thread of the emulated device). */
static void host_work(void *args)
{
    const host_work_t *w = args;
    gpu_stage_compute(w->x, w->y, w->rows, w->cols, w->index);
}
#endif

typedef struct {
    int32_t index;
} gpu_stage_state_t;

static adag_status_t gpu_stage_init(void *state, const void *init_data, size_t init_size)
{
    gpu_stage_init_t init;
    if (init_data == NULL || init_size != sizeof init)
        return ADAG_ERR_INVALID; /* a stage needs its gpu_stage_init_t */
    memcpy(&init, init_data, sizeof init);
    ((gpu_stage_state_t *)state)->index = init.index;
    return ADAG_OK;
}

static adag_status_t gpu_stage_forward(void *state, adag_call_h call)
{
    const gpu_stage_state_t *st = state;
    adag_value_t x;
    void *y;
    adag_status_t s = adag_call_arg(call, 0, &x);
    if (s != ADAG_OK)
        return s;
    if (x.kind != ADAG_VALUE_TENSOR || x.dtype != ADAG_DTYPE_F32 || x.ndim == 0)
        return adag_call_fail(call, "forward expects an f32 tensor of at least one dimension");
    if (x.device != adag_call_device(call))
        return adag_call_fail(call, "the input is on device %s:%u, the actor on %s:%u",
                              adag_device_kind_name(ADAG_DEVICE_KIND(x.device)),
                              ADAG_DEVICE_INDEX(x.device),
                              adag_device_kind_name(ADAG_DEVICE_KIND(adag_call_device(call))),
                              ADAG_DEVICE_INDEX(adag_call_device(call)));
    uint64_t cols = (uint64_t)x.shape[x.ndim - 1];
    uint64_t rows = cols ? x.size / sizeof(float) / cols : 0;
    s = adag_call_output_tensor(call, 0, ADAG_DTYPE_F32, x.ndim, x.shape, &y);
    if (s != ADAG_OK || rows == 0)
        return s;
#ifdef GPU_STAGES_CUDA
    char err[256];
    if (gpu_stages_launch(adag_call_stream(call), x.data, y, rows, cols, st->index, err,
                          sizeof err) != 0)
        return adag_call_fail(call, "stage %d: %s", st->index, err);
    return ADAG_OK;
#else
    host_work_t w = {x.data, y, rows, cols, st->index};
    return adag_call_enqueue(call, host_work, &w, sizeof w);
#endif
}

static const adag_method_def_t gpu_stage_methods[] = {
    {"forward", gpu_stage_forward, 1, 1},
};

static const adag_class_def_t gpu_stage_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "gpu_stage",
    .state_size = sizeof(gpu_stage_state_t),
    .init = gpu_stage_init,
    .methods = gpu_stage_methods,
    .nmethods = 1,
};

ADAG_MODULE(&gpu_stage_class);

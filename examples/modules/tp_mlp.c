/*
 * An actor module for examples/tp_pp.c: class "tp_mlp", one shard of a
 * tensor-parallel MLP block on a device (tp_mlp.h has the math).
 *
 *   up(x) -> partial   x: f32 [B, D] on the actor's device;
 *                      partial: f32 [B, D], relu(x . W1[:, cols]) . W2[cols, :]
 *                      over the shard's hidden columns, written on the
 *                      actor's compute stream; an allreduce (SUM) of the
 *                      shards' partials is the block's output.
 *
 * init holds the shard's weights (tp_mlp_init_t says which). The method
 * only enqueues the work and returns. Two builds of this file:
 *
 *   libtp_mlp.so       the emulated "emu" device: the work is host code run
 *                      in stream order (adag_call_enqueue);
 *   libtp_mlp_cuda.so  with -DTP_MLP_CUDA, linked with tp_mlp_kernel.cu by
 *                      nvcc: the weights live in device memory and the work
 *                      is a CUDA kernel launched on adag_call_stream.
 */
#include <adag.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tp_mlp.h"

#ifdef TP_MLP_CUDA
/* tp_mlp_kernel.cu: each returns 0, or the CUDA error with its text in err. */
int tp_mlp_cuda_upload(const float *w1, const float *w2, size_t nfloats, void **dev_w1,
                       void **dev_w2, char *err, size_t errlen);
void tp_mlp_cuda_free(void *dev_w1, void *dev_w2);
int tp_mlp_cuda_launch(void *stream, const float *x, float *y, uint64_t rows, uint32_t dim,
                       uint32_t ncols, const float *w1, const float *w2, char *err,
                       size_t errlen);
/* the hidden row of one batch row sits in a block's shared memory */
#define TP_MLP_CUDA_MAX_COLS 12288
#endif

typedef struct {
    tp_mlp_init_t init;
    uint32_t ncols;  /* hidden / shards */
    float *w1, *w2;  /* [dim, ncols], [ncols, dim]: host memory, or the device's (CUDA) */
    float *h;        /* ncols floats of scratch for the stream's work (host build) */
} tp_mlp_state_t;

#ifndef TP_MLP_CUDA
typedef struct {
    const float *x;
    float *y;
    uint64_t rows;
    const tp_mlp_state_t *st;
} host_work_t;

/* Runs on the actor's compute stream (a thread of the emulated device), one
 * piece of work at a time, so the one scratch row is enough. */
static void host_work(void *args)
{
    const host_work_t *w = args;
    const tp_mlp_state_t *st = w->st;
    tp_mlp_rows(w->x, w->y, w->rows, (uint32_t)st->init.dim, st->ncols, st->w1, st->w2, st->h);
}
#endif

static void tp_mlp_fini(void *state)
{
    tp_mlp_state_t *st = state;
#ifdef TP_MLP_CUDA
    tp_mlp_cuda_free(st->w1, st->w2);
#else
    free(st->w1);
    free(st->w2);
    free(st->h);
#endif
    st->w1 = st->w2 = st->h = NULL;
}

static adag_status_t tp_mlp_init(void *state, const void *init_data, size_t init_size)
{
    tp_mlp_state_t *st = state;
    tp_mlp_init_t in;
    float *w1 = NULL, *w2 = NULL;
    adag_status_t s = ADAG_ERR_NO_MEMORY;
    if (init_data == NULL || init_size != sizeof in)
        return ADAG_ERR_INVALID; /* a shard needs its tp_mlp_init_t */
    memcpy(&in, init_data, sizeof in);
    if (in.shards < 1 || in.shard < 0 || in.shard >= in.shards || in.dim < 1 ||
        in.dim > TP_MLP_MAX_DIM || in.hidden < 1 || in.hidden > TP_MLP_MAX_DIM ||
        in.hidden % in.shards != 0 || in.pad != 0)
        return ADAG_ERR_INVALID; /* shard outside 0..shards-1, or hidden not a multiple */
    st->init = in;
    st->ncols = (uint32_t)(in.hidden / in.shards);
    size_t nfloats = (size_t)in.dim * st->ncols;
    w1 = malloc(nfloats * sizeof(float));
    w2 = malloc(nfloats * sizeof(float));
    if (!w1 || !w2)
        goto cleanup;
    tp_mlp_fill_weights(in.seed, in.stage, (uint32_t)in.dim, (uint32_t)in.shard * st->ncols,
                        st->ncols, w1, w2);
#ifdef TP_MLP_CUDA
    char err[256];
    void *dev_w1, *dev_w2;
    s = ADAG_ERR_INVALID;
    if (st->ncols > TP_MLP_CUDA_MAX_COLS ||
        tp_mlp_cuda_upload(w1, w2, nfloats, &dev_w1, &dev_w2, err, sizeof err) != 0)
        goto cleanup; /* init has no message channel: the status says it */
    st->w1 = dev_w1;
    st->w2 = dev_w2;
    s = ADAG_OK;
cleanup:
    free(w1);
    free(w2);
    return s;
#else
    st->h = malloc(st->ncols * sizeof(float));
    if (!st->h)
        goto cleanup;
    st->w1 = w1;
    st->w2 = w2;
    return ADAG_OK;
cleanup:
    free(w1);
    free(w2);
    return s;
#endif
}

static adag_status_t tp_mlp_up(void *state, adag_call_h call)
{
    const tp_mlp_state_t *st = state;
    const int64_t dim = st->init.dim;
    adag_value_t x;
    void *y;
    adag_status_t s = adag_call_arg(call, 0, &x);
    if (s != ADAG_OK)
        return s;
    if (x.kind != ADAG_VALUE_TENSOR || x.dtype != ADAG_DTYPE_F32 || x.ndim != 2 ||
        x.shape[1] != dim)
        return adag_call_fail(call, "up expects an f32 tensor [B, %lld] (stage %d shard %d/%d)",
                              (long long)dim, st->init.stage, st->init.shard, st->init.shards);
    if (x.device != adag_call_device(call))
        return adag_call_fail(call, "the input is on device %s:%u, the actor on %s:%u",
                              adag_device_kind_name(ADAG_DEVICE_KIND(x.device)),
                              ADAG_DEVICE_INDEX(x.device),
                              adag_device_kind_name(ADAG_DEVICE_KIND(adag_call_device(call))),
                              ADAG_DEVICE_INDEX(adag_call_device(call)));
    uint64_t rows = (uint64_t)x.shape[0];
    s = adag_call_output_tensor(call, 0, ADAG_DTYPE_F32, 2, x.shape, &y);
    if (s != ADAG_OK || rows == 0)
        return s;
#ifdef TP_MLP_CUDA
    char err[256];
    if (tp_mlp_cuda_launch(adag_call_stream(call), x.data, y, rows, (uint32_t)dim, st->ncols,
                           st->w1, st->w2, err, sizeof err) != 0)
        return adag_call_fail(call, "stage %d shard %d: %s", st->init.stage, st->init.shard,
                              err);
    return ADAG_OK;
#else
    host_work_t w = {x.data, y, rows, st};
    return adag_call_enqueue(call, host_work, &w, sizeof w);
#endif
}

static const adag_method_def_t tp_mlp_methods[] = {
    {"up", tp_mlp_up, 1, 1},
};

static const adag_class_def_t tp_mlp_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "tp_mlp",
    .state_size = sizeof(tp_mlp_state_t),
    .init = tp_mlp_init,
    .fini = tp_mlp_fini,
    .methods = tp_mlp_methods,
    .nmethods = 1,
};

ADAG_MODULE(&tp_mlp_class);

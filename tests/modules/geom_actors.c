/* The "geom" class: tests/modules/geom_actors.h. */
#include "geom_actors.h"

typedef struct {
    geom_init_t init;
} geom_state_t;

typedef struct {
    const void *in;
    size_t in_size;
    void *out;
    size_t out_size;
    int32_t stage;
} geom_args_t;

static void geom_kernel(void *p)
{
    const geom_args_t *a = p;
    geom_fill(a->out, a->out_size, geom_hash(a->in, a->in_size), a->stage);
}

static adag_status_t geom_init(void *state, const void *data, size_t size)
{
    geom_state_t *s = state;
    if (size != sizeof(s->init))
        return ADAG_ERR_INVALID;
    memcpy(&s->init, data, sizeof(s->init));
    if (s->init.elems < 0 || !adag_dtype_size((adag_dtype_t)s->init.dtype))
        return ADAG_ERR_INVALID;
    return ADAG_OK;
}

static adag_status_t geom_make(void *state, adag_call_h call)
{
    const geom_state_t *s = state;
    adag_value_t x;
    adag_status_t st = adag_call_arg(call, 0, &x);
    if (st != ADAG_OK)
        return st;
    if (x.device != adag_call_device(call))
        return adag_call_fail(call, "argument 0 is on device %d, the actor on %d", x.device,
                              adag_call_device(call));
    int64_t shape[1] = {s->init.elems + ((int64_t)adag_call_ref(call) == s->init.over_ref)};
    void *out;
    st = adag_call_output_tensor(call, 0, (adag_dtype_t)s->init.dtype, 1, shape, &out);
    if (st != ADAG_OK)
        return st;
    geom_args_t a = {x.data, x.size, out,
                     (size_t)shape[0] * adag_dtype_size((adag_dtype_t)s->init.dtype),
                     s->init.stage};
    if (adag_call_device(call) == ADAG_DEVICE_HOST) {
        geom_kernel(&a); /* a host actor: host memory, now */
        return ADAG_OK;
    }
    return adag_call_enqueue(call, geom_kernel, &a, sizeof(a));
}

static const adag_method_def_t geom_methods[] = {
    {"make", geom_make, 1, 1},
};

const adag_class_def_t test_geom_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "geom",
    .state_size = sizeof(geom_state_t),
    .init = geom_init,
    .methods = geom_methods,
    .nmethods = 1,
};

/*
 * What the tests of test-cuda-dag share (cuda_dag.h): where a test can
 * run, the module's CUDA helpers, the actors and DAGs, the inputs and the
 * check against the C reference.
 */
#include "cuda_dag.h"

#include "gpu_stage.h" /* stage_apply: the C reference */
#include "probes.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef ADAG_TEST_CUDA_MODULE
#define ADAG_TEST_CUDA_MODULE "" /* built without nvcc */
#endif
#ifndef ADAG_TEST_NVCC
#define ADAG_TEST_NVCC "nvcc"
#endif
#ifndef ADAG_TEST_CUDA_EMULATED_MODULE
#error "ADAG_TEST_CUDA_EMULATED_MODULE must be defined by the build"
#endif

char cdag_skip_reason[256];
int cdag_emulated;

const char *cdag_dev(unsigned i)
{
    static char spec[4][16];
    snprintf(spec[i % 4], sizeof spec[0], "%s:%u", cdag_emulated ? "emu" : "cuda", i);
    return spec[i % 4];
}

int32_t cdag_device(unsigned i)
{
    return ADAG_DEVICE(cdag_emulated ? ADAG_DEV_EMULATED : ADAG_DEV_CUDA, i);
}

const adag_dtype_t cdag_dtypes[CDAG_NDTYPES] = {
    ADAG_DTYPE_U8,  ADAG_DTYPE_I8,   ADAG_DTYPE_I16, ADAG_DTYPE_I32, ADAG_DTYPE_I64,
    ADAG_DTYPE_F16, ADAG_DTYPE_BF16, ADAG_DTYPE_F32, ADAG_DTYPE_F64, ADAG_DTYPE_BOOL,
};

int cdag_require(unsigned need)
{
    unsigned n = 0;
    const char *backend = cdag_emulated ? "emu" : "cuda";
    adag_status_t st = adag_device_count(backend, &n);
    if (st != ADAG_OK) {
        fprintf(stderr, "  adag_device_count(\"%s\"): %s: %s\n", backend, adag_status_str(st),
                adag_last_error());
        return FAIL;
    }
    if (n == 0) { /* the reason the cuda backend's probe gives */
        snprintf(cdag_skip_reason, sizeof cdag_skip_reason, "%s", adag_last_error());
        return SKIP;
    }
    if (n < need) {
        snprintf(cdag_skip_reason, sizeof cdag_skip_reason, "needs %u CUDA devices (found %u)",
                 need, n);
        return SKIP;
    }
    if (!ADAG_TEST_CUDA_MODULE[0] && !cdag_emulated) {
        snprintf(cdag_skip_reason, sizeof cdag_skip_reason,
                 "the CUDA module (libcuda_stage.so) was not built: no nvcc at %s at build time",
                 ADAG_TEST_NVCC);
        return SKIP;
    }
    return PASS;
}

/* ---- the module's CUDA helpers in this process ---- */

/* ---- the emulated helpers: device memory is host memory ---- */

static int emulated_init(int device, char *err, size_t errlen)
{
    (void)device, (void)err, (void)errlen;
    return 0;
}

static int emulated_mem_info(size_t *free_bytes, size_t *total_bytes, char *err, size_t errlen)
{
    *free_bytes = *total_bytes = 0;
    snprintf(err, errlen, "cudaMemGetInfo has no emulation");
    return 1;
}

static int emulated_malloc(void **ptr, size_t size, char *err, size_t errlen)
{
    if ((*ptr = malloc(size ? size : 1)))
        return 0;
    snprintf(err, errlen, "malloc(%zu) failed", size);
    return 2; /* cudaErrorMemoryAllocation */
}

static int emulated_free(void *ptr, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    free(ptr);
    return 0;
}

static int emulated_copy(void *dst, const void *src, size_t n, void *stream, char *err,
                         size_t errlen)
{
    (void)stream, (void)err, (void)errlen;
    memcpy(dst, src, n);
    return 0;
}

static int emulated_stream_sync(void *stream, char *err, size_t errlen)
{
    (void)stream, (void)err, (void)errlen;
    return 0;
}

int cdag_cuda_load(cdag_cuda_t *cu)
{
    memset(cu, 0, sizeof *cu);
    if (cdag_emulated) {
        *cu = (cdag_cuda_t){.lib = cu, /* loaded: nothing to load */
                            .host_init = emulated_init,
                            .mem_info = emulated_mem_info,
                            .malloc_ = emulated_malloc,
                            .free_ = emulated_free,
                            .copy = emulated_copy,
                            .stream_sync = emulated_stream_sync};
        return PASS;
    }
    /* RTLD_LOCAL: its class table stays its own; its adag_call_* bind to
     * the libadag.so this program links */
    cu->lib = dlopen(ADAG_TEST_CUDA_MODULE, RTLD_NOW | RTLD_LOCAL);
    if (!cu->lib) {
        fprintf(stderr, "  dlopen(%s): %s\n", ADAG_TEST_CUDA_MODULE, dlerror());
        return FAIL;
    }
    static const char *const names[] = {"cuda_stage_host_init", "cuda_stage_mem_info",
                                        "cuda_stage_malloc",    "cuda_stage_free",
                                        "cuda_stage_copy",      "cuda_stage_stream_sync"};
    void *fns[6];
    for (unsigned i = 0; i < 6; i++) {
        if (!(fns[i] = dlsym(cu->lib, names[i]))) {
            fprintf(stderr, "  %s has no %s\n", ADAG_TEST_CUDA_MODULE, names[i]);
            cdag_cuda_unload(cu);
            return FAIL;
        }
    }
    /* POSIX: a function pointer from dlsym's void * (through memcpy, which
     * ISO C allows) */
    memcpy(&cu->host_init, &fns[0], sizeof(void *));
    memcpy(&cu->mem_info, &fns[1], sizeof(void *));
    memcpy(&cu->malloc_, &fns[2], sizeof(void *));
    memcpy(&cu->free_, &fns[3], sizeof(void *));
    memcpy(&cu->copy, &fns[4], sizeof(void *));
    memcpy(&cu->stream_sync, &fns[5], sizeof(void *));
    char err[256] = "";
    if (cu->host_init(0, err, sizeof err) != 0) {
        fprintf(stderr, "  cuda device 0 in the driver: %s\n", err);
        cdag_cuda_unload(cu);
        return FAIL;
    }
    return PASS;
}

void cdag_cuda_unload(cdag_cuda_t *cu)
{
    /* never dlclose'd: the CUDA runtime it loaded stays in the process */
    memset(cu, 0, sizeof *cu);
}

/* ---- actors and DAGs ---- */

adag_status_t cdag_runtime(adag_runtime_h *rt)
{
    return adag_runtime_create(NULL, rt);
}

adag_status_t cdag_stage(adag_runtime_h rt, const char *name, const char *device, int stage,
                         int spin_us, adag_actor_h *actor)
{
    return cdag_stage_module(rt, name, device,
                             cdag_emulated ? ADAG_TEST_CUDA_EMULATED_MODULE
                                           : ADAG_TEST_CUDA_MODULE,
                             stage, spin_us, actor);
}

adag_status_t cdag_stage_module(adag_runtime_h rt, const char *name, const char *device,
                                const char *module, int stage, int spin_us, adag_actor_h *actor)
{
    return cdag_stage_placed(rt, name, device, module, ADAG_PLACEMENT_PROCESS, stage, spin_us,
                             actor);
}

/* A thread actor's class comes from the module loaded into this process
 * (kept loaded: the runtime holds the class), registered once per runtime
 * (a second register of the name is refused, which is fine). */
static adag_status_t register_module_class(adag_runtime_h rt, const char *module)
{
    void *lib = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "  dlopen %s: %s\n", module, dlerror());
        return ADAG_ERR_NOT_FOUND;
    }
    const adag_class_def_t *const *classes = dlsym(lib, "adag_module_classes");
    if (!classes || !classes[0]) {
        fprintf(stderr, "  %s exports no classes\n", module);
        return ADAG_ERR_NOT_FOUND;
    }
    (void)adag_class_register(rt, classes[0]);
    return ADAG_OK;
}

adag_status_t cdag_stage_placed(adag_runtime_h rt, const char *name, const char *device,
                                const char *module, adag_placement_t placement, int stage,
                                int spin_us, adag_actor_h *actor)
{
    cuda_stage_init_t init = {stage, spin_us};
    if (placement == ADAG_PLACEMENT_THREAD) {
        adag_status_t st = register_module_class(rt, module);
        if (st != ADAG_OK)
            return st;
    }
    adag_actor_params_t p = {
        .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME | ADAG_ACTOR_PARAM_MODULE |
                      ADAG_ACTOR_PARAM_PLACEMENT | ADAG_ACTOR_PARAM_INIT |
                      ADAG_ACTOR_PARAM_DEVICE,
        .class_name = "cuda_stage",
        .name = name,
        .module_path = module,
        .placement = placement,
        .init_data = &init,
        .init_size = sizeof init,
        .device = device,
    };
    return adag_actor_create(rt, &p, actor);
}

static adag_compile_params_t compile_params(const cdag_chain_t *o)
{
    adag_compile_params_t cp = {.field_mask = 0};
    if (o->name) {
        cp.field_mask |= ADAG_COMPILE_PARAM_NAME;
        cp.name = o->name;
    }
    if (o->max_inflight) {
        cp.field_mask |= ADAG_COMPILE_PARAM_MAX_INFLIGHT;
        cp.max_inflight = o->max_inflight;
    }
    if (o->slot_capacity) {
        cp.field_mask |= ADAG_COMPILE_PARAM_SLOT_CAPACITY;
        cp.slot_capacity = o->slot_capacity;
    }
    if (o->comm_timeout_ms) {
        cp.field_mask |= ADAG_COMPILE_PARAM_COMM_TIMEOUT;
        cp.comm_timeout_ms = o->comm_timeout_ms;
    }
    if (o->driver_device) {
        cp.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
        cp.driver_device = o->driver_device;
    }
    if (o->graphs) {
        cp.field_mask |= ADAG_COMPILE_PARAM_GRAPHS;
        cp.graphs = 1;
    }
    if (o->run_ahead) {
        cp.field_mask |= ADAG_COMPILE_PARAM_RUN_AHEAD;
        cp.run_ahead = 1;
    }
    return cp;
}

adag_status_t cdag_chain(adag_runtime_h rt, const adag_actor_h *a, unsigned n,
                         const cdag_chain_t *o, adag_dag_h *dag)
{
    adag_graph_h g = NULL;
    adag_node_h x, y = NULL, info = NULL;
    adag_tensor_params_t between = {.field_mask = ADAG_TENSOR_PARAM_TRANSPORT,
                                    .transport = o->transport};
    adag_tensor_params_t fixed = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                                  .dtype = ADAG_DTYPE_F32,
                                  .ndim = 1,
                                  .shape = {o->fixed}};
    if (o->fixed) {
        between.field_mask |= fixed.field_mask;
        between.dtype = fixed.dtype;
        between.ndim = 1;
        between.shape[0] = o->fixed;
    }
    adag_status_t st = adag_graph_create(rt, &g);
    if (st != ADAG_OK)
        return st;
    if ((st = adag_graph_input(g, 0, &x)) != ADAG_OK ||
        (st = adag_node_tensor(x, o->fixed ? &fixed : NULL)) != ADAG_OK)
        goto out;
    for (unsigned s = 0; s < n; s++) {
        adag_node_h call;
        if ((st = adag_graph_bind(g, a[s], o->apply ? "apply" : "step", &x, 1, &call)) !=
                ADAG_OK ||
            (st = adag_node_output(call, 0, &y)) != ADAG_OK ||
            (!o->apply && (st = adag_node_output(call, 1, &info)) != ADAG_OK))
            goto out;
        /* the transport asked for goes to tensors a next stage reads */
        st = adag_node_tensor(y, o->fixed || (s + 1 < n && o->transport != ADAG_TRANSPORT_AUTO)
                                     ? &between : NULL);
        if (st != ADAG_OK)
            goto out;
        x = y;
    }
    adag_node_h outs[2] = {y, info};
    if ((st = adag_graph_output(g, outs, o->apply ? 1 : 2)) != ADAG_OK)
        goto out;
    adag_compile_params_t cp = compile_params(o);
    st = adag_graph_compile(g, &cp, dag);
out:
    adag_graph_destroy(g);
    return st;
}

char *cdag_dot(adag_dag_h dag)
{
    size_t needed = 0;
    if (adag_dag_format_dot(dag, NULL, 0, &needed) != ADAG_ERR_TOO_LARGE)
        return NULL;
    char *text = malloc(needed);
    if (text && adag_dag_format_dot(dag, text, needed, NULL) != ADAG_OK) {
        free(text);
        return NULL;
    }
    return text;
}

/* ---- values and the C reference ---- */

void cdag_make_input(cdag_input_t *in, uint64_t k)
{
    in->dtype = cdag_dtypes[k % CDAG_NDTYPES];
    in->ndim = 1 + (unsigned)(k % 4);
    in->n = 1;
    for (unsigned d = 0; d < in->ndim; d++) {
        in->shape[d] = (int64_t)(1 + (k * 7 + d * 3) % 5);
        in->n *= (size_t)in->shape[d];
    }
    if (k % 97 == 13) { /* an empty tensor now and then */
        in->shape[in->ndim - 1] = 0;
        in->n = 0;
    }
    size_t es = adag_dtype_size(in->dtype);
    in->bytes = in->n * es;
    for (size_t i = 0; i < in->n; i++) {
        unsigned char *e = in->data + i * es;
        double real = (double)((k * 3 + i * 11) % 1024) - 512.0; /* exact in f32 and f64 */
        if (in->dtype == ADAG_DTYPE_F32) {
            float f = (float)real;
            memcpy(e, &f, 4);
        } else if (in->dtype == ADAG_DTYPE_F64) {
            memcpy(e, &real, 8);
        } else if (in->dtype == ADAG_DTYPE_BOOL) {
            *e = (unsigned char)((k + i) & 1);
        } else { /* integers, and f16/bf16 as bit patterns */
            for (size_t b = 0; b < es; b++)
                e[b] = (unsigned char)(k * 29 + i * 7 + b * 101);
        }
    }
}

adag_value_t cdag_input_value(const cdag_input_t *in)
{
    adag_value_t v = {.data = in->data, .size = in->bytes, .kind = ADAG_VALUE_TENSOR,
                      .dtype = in->dtype, .ndim = in->ndim};
    memcpy(v.shape, in->shape, sizeof v.shape);
    return v;
}

int cdag_check(const cdag_input_t *in, const adag_value_t *out, const void *data, int first,
               int nstages, uint64_t k)
{
    const unsigned long long ex = (unsigned long long)k;
    if (out->kind != ADAG_VALUE_TENSOR || out->dtype != in->dtype || out->ndim != in->ndim ||
        out->size != in->bytes) {
        fprintf(stderr, "  execution %llu: got kind %d %s, %u dims, %zu bytes; want a %s tensor, "
                        "%u dims, %zu bytes\n",
                ex, (int)out->kind, adag_dtype_name(out->dtype), out->ndim, out->size,
                adag_dtype_name(in->dtype), in->ndim, in->bytes);
        return 1;
    }
    for (unsigned d = 0; d < in->ndim; d++) {
        unsigned from = nstages % 2 ? in->ndim - 1 - d : d;
        if (out->shape[d] != in->shape[from]) {
            fprintf(stderr, "  execution %llu: dim %u is %lld, want %lld\n", ex, d,
                    (long long)out->shape[d], (long long)in->shape[from]);
            return 1;
        }
    }
    size_t es = adag_dtype_size(in->dtype);
    for (size_t i = 0; i < in->n; i++) {
        unsigned char a[8], b[8];
        memcpy(a, in->data + i * es, es);
        for (int s = 0; s < nstages; s++) {
            stage_apply(in->dtype, first + s, a, b);
            memcpy(a, b, es);
        }
        if (memcmp(a, (const char *)data + i * es, es) != 0) {
            fprintf(stderr, "  execution %llu (%s): element %zu differs from the C reference\n",
                    ex, adag_dtype_name(in->dtype), i);
            return 1;
        }
    }
    return 0;
}

/* ---- time and processes ---- */

int64_t cdag_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double cdag_ms_since(int64_t t0_ns)
{
    return (double)(cdag_now_ns() - t0_ns) / 1e6;
}

int cdag_wait_no_children(int ms)
{
    int64_t t0 = cdag_now_ns();
    int n;
    while ((n = probe_children(getpid(), NULL, 0, NULL)) > 0 && cdag_ms_since(t0) < ms) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return n;
}

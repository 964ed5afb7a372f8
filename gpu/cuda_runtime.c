/*
 * The cuda device backend's base, below its other files (gpu/cuda_impl.h):
 * the CUDA runtime loaded once with dlopen, and the error helpers.
 */
#ifdef ADAG_HAVE_CUDA

#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "gpu/cuda_impl.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#ifndef ADAG_CUDA_HOME
#define ADAG_CUDA_HOME "/usr/local/cuda"
#endif

/* ---- the runtime, loaded once ---- */

cudart_t adag_cudart = {.once = PTHREAD_ONCE_INIT};

/* The candidates when ADAG_CUDART_PATH is unset, in order. The toolkit's
 * lib64 comes last: it is often not on the loader's path. */
static const char *const cudart_names[] = {
    "libcudart.so.13",
    "libcudart.so.12",
    "libcudart.so",
    ADAG_CUDA_HOME "/lib64/libcudart.so",
};
#define NCUDART_NAMES (sizeof(cudart_names) / sizeof(cudart_names[0]))

static void cudart_load(void)
{
    const char *forced = adag__process_settings()->cudart_path;
    const char *name = NULL;
    if (forced) {
        adag_cudart.lib = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
        if (!adag_cudart.lib) {
            snprintf(adag_cudart.error, sizeof(adag_cudart.error),
                     "cannot load the CUDA runtime %s (ADAG_CUDART_PATH): %s", forced, dlerror());
            return;
        }
        name = forced;
    } else {
        char first[ADAG_ERROR_MAX / 2] = "";
        for (size_t i = 0; i < NCUDART_NAMES && !adag_cudart.lib; i++) {
            adag_cudart.lib = dlopen(cudart_names[i], RTLD_NOW | RTLD_LOCAL);
            if (adag_cudart.lib)
                name = cudart_names[i];
            else if (i == 0)
                snprintf(first, sizeof(first), "%s", dlerror());
        }
        if (!adag_cudart.lib) {
            snprintf(adag_cudart.error, sizeof(adag_cudart.error),
                     "cannot load the CUDA runtime (tried libcudart.so.13, .so.12, .so and %s; "
                     "ADAG_CUDART_PATH sets the path): %s",
                     cudart_names[NCUDART_NAMES - 1], first);
            return;
        }
    }
    snprintf(adag_cudart.loaded, sizeof(adag_cudart.loaded), "%s", name);
#define CUDART_RESOLVE(sym)                                                                        \
    adag_cudart.fn.sym = (__typeof__(adag_cudart.fn.sym))dlsym(adag_cudart.lib, "cuda" #sym);                                 \
    if (!adag_cudart.fn.sym) {                                                                              \
        snprintf(adag_cudart.error, sizeof(adag_cudart.error), "the CUDA runtime %s has no cuda" #sym, name);       \
        goto fail;                                                                                 \
    }
    CUDART_FUNCTIONS(CUDART_RESOLVE)
#undef CUDART_RESOLVE
#define CUDART_RESOLVE_OPTIONAL(sym)                                                               \
    adag_cudart.fn.sym = (__typeof__(adag_cudart.fn.sym))dlsym(adag_cudart.lib, "cuda" #sym);
    CUDART_OPTIONAL_FUNCTIONS(CUDART_RESOLVE_OPTIONAL)
#undef CUDART_RESOLVE_OPTIONAL
    return;
fail:
    dlclose(adag_cudart.lib);
    adag_cudart.lib = NULL;
}

/* Whether the runtime is loaded (the first call loads it); adag_cudart.error says
 * why not. */
bool adag__cudart_loaded(void)
{
    pthread_once(&adag_cudart.once, cudart_load);
    return adag_cudart.lib != NULL;
}

/* ---- errors ---- */

/* "cuda device <i> (<name>): <what>: <error name>: <error text>" into buf.
 * The runtime also keeps each thread's latest error until cudaGetLastError
 * reads it; it is read (reset) here, so the program's own check after its
 * next kernel launch does not report this failure as its own (a sticky
 * error, which breaks the context, stays whatever is done). */
static void cuda_vmsg(char *buf, size_t len, const cuda_dev_t *d, cudaError_t err,
                      const char *fmt, va_list ap)
{
    (void)adag_cudart.fn.GetLastError();
    char what[256];
    vsnprintf(what, sizeof(what), fmt, ap);
    const char *ename = adag_cudart.fn.GetErrorName(err);
    const char *etext = adag_cudart.fn.GetErrorString(err);
    snprintf(buf, len, "cuda device %u (%s): %s: %s: %s", d->base.index, d->name, what,
             ename ? ename : "?", etext ? etext : "?");
}

/* Records a CUDA failure (what names the call) as this thread's error. */
adag_status_t ADAG_PRINTF(3, 4)
    adag__cuda_fail(const cuda_dev_t *d, cudaError_t err, const char *fmt, ...)
{
    char msg[ADAG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    cuda_vmsg(msg, sizeof(msg), d, err, fmt, ap);
    va_end(ap);
    return adag__error(err == cudaErrorMemoryAllocation ? ADAG_ERR_NO_MEMORY : ADAG_ERR_IO, "%s",
                      msg);
}

/* The same for ops that return nothing: logged, the thread's error kept. */
void ADAG_PRINTF(3, 4) adag__cuda_warn(const cuda_dev_t *d, cudaError_t err, const char *fmt, ...)
{
    char msg[ADAG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    cuda_vmsg(msg, sizeof(msg), d, err, fmt, ap);
    va_end(ap);
    ADAG_LOG_WARN("%s", msg);
}

adag_status_t adag__cuda_set_device(cuda_dev_t *d)
{
    cudaError_t err = adag_cudart.fn.SetDevice((int)d->base.index);
    return err == cudaSuccess ? ADAG_OK
                              : adag__cuda_fail(d, err, "cudaSetDevice(%u)", d->base.index);
}

#endif /* ADAG_HAVE_CUDA */

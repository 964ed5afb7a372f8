/*
 * Actor classes and methods: the class and method tables a module
 * exports (ADAG_MODULE), and the adag_call_* functions a method uses on
 * its call.
 *
 * A part of <adag.h>, which programs and modules include (it includes
 * every part, in order; this one includes the parts it builds on).
 */
#ifndef ADAG_CLASS_H
#define ADAG_CLASS_H

#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Actor classes and methods                                           */
/* ------------------------------------------------------------------ */

typedef struct adag_call *adag_call_h;

/* A method: runs on the actor's state with one execution's inputs.
 * Returns ADAG_OK, or an error (use adag_call_fail to say why). Whatever
 * non-OK value it returns (an ADAG_ERR_* code, a positive or unknown
 * value), the caller's get sees ADAG_ERR_METHOD, with the returned code in
 * the message; a failing adag_call_* whose status the method returns keeps
 * that call's own message. */
typedef adag_status_t (*adag_method_fn)(void *state, adag_call_h call);

#define ADAG_MAX_ARGS 16
#define ADAG_MAX_RETURNS 16
#define ADAG_MAX_METHODS 4096 /* methods per class */
#define ADAG_MAX_NAME 64 /* names of classes, methods, actors: < 64 bytes */

/* A method of a class. Its layout is versioned by the class's abi_version
 * (a method table is only ever read through its class), so it has no
 * version field and positional initializers {name, fn, nargs, nreturns}
 * stay complete. */
typedef struct {
    const char *name;   /* unique within the class */
    adag_method_fn fn;
    unsigned nargs;     /* 0..ADAG_MAX_ARGS */
    unsigned nreturns;  /* 1..ADAG_MAX_RETURNS */
} adag_method_def_t;

/* A class. Define it with designated initializers, abi_version first:
 *     static const adag_class_def_t my_class = {
 *         .abi_version = ADAG_ABI_VERSION, .name = "my_class", ...};
 * adag_class_register and adag-worker refuse (ADAG_ERR_INVALID) a class
 * whose abi_version is not the library's ADAG_ABI_VERSION (0: not set),
 * a nonzero reserved word, and a method table outside the limits above. */
typedef struct {
    uint32_t abi_version;   /* ADAG_ABI_VERSION of the header it was built with */
    const char *name;       /* class name, unique within a runtime/module */
    size_t state_size;      /* bytes of zeroed state given to init and methods */
    /* Optional. Called once when the actor is created, with the actor's
     * init bytes; a non-OK return fails adag_actor_create with
     * ADAG_ERR_INVALID (ADAG_ERR_NO_MEMORY stays itself), the message
     * naming the actor, the class and why: what init gave adag_init_fail,
     * else the status it returned. */
    adag_status_t (*init)(void *state, const void *init_data, size_t init_size);
    /* Optional. Called once when the actor is destroyed. */
    void (*fini)(void *state);
    const adag_method_def_t *methods;
    unsigned nmethods;      /* 1..ADAG_MAX_METHODS */
    uint64_t reserved[4];   /* must be zero */
    /* Optional: the names of the methods whose work can be captured into
     * a device graph and replayed (adag_compile_params_t.graphs), NULL
     * terminated; a name the class does not define is refused. Such a
     * method, on a device-bound actor, only enqueues work on its compute
     * stream (adag_call_stream, adag_call_enqueue) and fills every return
     * it writes there (adag_call_output, adag_call_output_tensor; never
     * adag_call_set_output); its work, sizes and shapes depend only on the
     * buffers of the execution's slots, never on the execution's number
     * or on values the host reads; and it never waits for the device (no
     * stream or event synchronisation, no copy with pageable host memory,
     * no allocation on CUDA). */
    const char *const *capturable;
} adag_class_def_t;

/* A module .so for process actors exports its classes with
 *     ADAG_MODULE(&class_a, &class_b);
 * which defines adag_module_classes (the NULL-terminated class table) and
 * adag_module_abi_version (= ADAG_ABI_VERSION). adag-worker loads the module
 * with dlopen, checks adag_module_abi_version before it reads anything else
 * (a module without it, or with another version, fails adag_actor_create
 * with ADAG_ERR_INVALID naming the module and both versions), then looks the
 * class up by name (ADAG_ERR_NOT_FOUND if absent) and checks it like
 * adag_class_register. A module needs no -ladag: its adag_call_* calls bind
 * to adag-worker's copy when it is loaded (linking it with -ladag works too). */
#ifdef __cplusplus
#define ADAG_MODULE_EXTERN extern "C"
#else
#define ADAG_MODULE_EXTERN extern
#endif
#define ADAG_MODULE(...)                                                      \
    ADAG_MODULE_EXTERN ADAG_API const uint32_t adag_module_abi_version;      \
    const uint32_t adag_module_abi_version = ADAG_ABI_VERSION;               \
    ADAG_MODULE_EXTERN ADAG_API const adag_class_def_t *const adag_module_classes[]; \
    const adag_class_def_t *const adag_module_classes[] = {__VA_ARGS__, NULL}

/* A module may also make classes when they are asked for, for classes that
 * exist only at run time (a language binding's: the Python package's module
 * builds a class from a Python class). It exports, instead of ADAG_MODULE,
 *     ADAG_MODULE_RESOLVER(my_resolve);
 * which defines adag_module_abi_version and adag_module_resolve. adag-worker
 * calls the resolver once, on its main thread, for the class the actor asks
 * for, with the actor's init bytes (the ones the class's init then gets):
 * it returns ADAG_OK and *def, a class that stays valid while the module is
 * loaded (checked like a listed one), or an error status, its message given
 * with adag_fail (adag_actor_create then fails with that status, the
 * message naming the module and the class). A module whose resolver ran
 * stays loaded even when it fails (it may have started threads). */
typedef adag_status_t (*adag_module_resolve_fn)(const char *class_name, const void *init,
                                               size_t init_size, const adag_class_def_t **def);
#define ADAG_MODULE_RESOLVER(fn)                                              \
    ADAG_MODULE_EXTERN ADAG_API const uint32_t adag_module_abi_version;      \
    const uint32_t adag_module_abi_version = ADAG_ABI_VERSION;               \
    ADAG_MODULE_EXTERN ADAG_API const adag_module_resolve_fn adag_module_resolve; \
    const adag_module_resolve_fn adag_module_resolve = (fn)

/* Inside a method: a zero-copy view of input i (valid during the call). */
ADAG_API adag_status_t adag_call_arg(adag_call_h call, unsigned i, adag_value_t *value);

/* Inside a method: a buffer of `size` bytes inside the outgoing channel slot
 * of return value i (zero-copy write). Calling it again for the same i
 * resizes. Fails with ADAG_ERR_TOO_LARGE if size exceeds the slot size of
 * the return's channel (adag_node_channel), naming the channel and both
 * sizes; the execution then fails with that status. Every return value must be
 * given a buffer (size 0 is fine) before the method returns ADAG_OK. The
 * value is bytes (after an adag_call_output_tensor for the same i, too); a
 * return declared with a static dtype or shape (adag_node_tensor) refuses
 * bytes with ADAG_ERR_INVALID, and the execution fails. */
ADAG_API adag_status_t adag_call_output(adag_call_h call, unsigned i, size_t size, void **buf);

/* Inside a method: like adag_call_output, for a tensor: dtype, ndim
 * (0..ADAG_MAX_DIMS) and shape[0..ndim) (each >= 0) give its size, which
 * must fit the slot (else ADAG_ERR_TOO_LARGE, as above). If the return was
 * declared a tensor with a static dtype or shape (adag_node_tensor), these
 * must match it (ADAG_ERR_INVALID naming both; the execution then fails with
 * ADAG_ERR_METHOD whatever the method does next). *buf is in the memory the
 * return lives in: device memory of the actor's device when the node was
 * declared a tensor and the actor has a device (adag_call_device), host
 * memory otherwise. */
ADAG_API adag_status_t adag_call_output_tensor(adag_call_h call, unsigned i, adag_dtype_t dtype,
                                               unsigned ndim, const int64_t *shape, void **buf);

/* Inside a method: copy `size` bytes into return value i. */
ADAG_API adag_status_t adag_call_set_output(adag_call_h call, unsigned i, const void *data,
                                            size_t size);

/* Inside a method: record why it failed. Returns ADAG_ERR_METHOD so a method
 * can `return adag_call_fail(call, "bad shape %d", n);`. The execution's
 * results then carry "actor <name>.<method>: <message>". A NULL call (not
 * inside a method): ADAG_ERR_INVALID. */
ADAG_API adag_status_t adag_call_fail(adag_call_h call, const char *fmt, ...) ADAG_PRINTF(2, 3);

/* Inside a class's init (on the thread that runs it: adag_actor_create's
 * for a thread actor, the worker's for a process or remote actor): record
 * why it fails. Returns ADAG_ERR_INVALID, so init can
 * `return adag_init_fail("cannot open %s", path);`. When init then returns
 * an error, adag_actor_create fails with "actor <name>: init of class
 * <class> failed: <message>" (a worker sends it to the driver in its
 * reply): the message of the first call in that init, its first 255 bytes.
 * An init that returns ADAG_OK after all drops it. Anywhere else:
 * ADAG_ERR_INVALID, nothing recorded. */
ADAG_API adag_status_t adag_init_fail(const char *fmt, ...) ADAG_PRINTF(1, 2);

/* Inside a method: the ref (sequence number) of the execution it serves. */
ADAG_API uint64_t adag_call_ref(adag_call_h call);

/* Inside a method: the name of the actor it runs on. */
ADAG_API const char *adag_call_actor_name(adag_call_h call);

/* Inside a method of a device-bound actor (adag_actor_params_t.device):
 * its device's id (ADAG_DEVICE(ADAG_DEV_CUDA, 1) for "cuda:1");
 * ADAG_DEVICE_HOST for other actors. */
ADAG_API int32_t adag_call_device(adag_call_h call);

/* Inside a method: where the buffer of return i (adag_call_output,
 * adag_call_output_tensor) lives: the actor's device (adag_call_device)
 * when the return was declared a tensor (adag_node_tensor) and the actor
 * is device-bound, ADAG_DEVICE_HOST otherwise (and for a return the
 * method does not have). A binding that cannot tell device memory from
 * host memory by its address asks here (the Python package does). */
ADAG_API int32_t adag_call_output_device(adag_call_h call, unsigned i);

/* Inside a method of a device-bound actor: its compute stream, in the
 * backend's own type (a cudaStream_t on "cuda"; an opaque handle on the
 * emulated "emu" device, for adag_call_enqueue). A method enqueues its
 * work there and returns at once, and the runtime orders every use of its
 * values after that work: returns and arguments declared as device
 * tensors (adag_node_tensor) by events on the device, with no host wait;
 * values in host memory (not declared): a return filled through
 * adag_call_output/_tensor is published once the stream ran the work (the
 * loop waits for it; adag_call_set_output's bytes are final and go at
 * once), and arguments go back to their writers only after that work. A
 * method that enqueues work must call this (or adag_call_enqueue) in that
 * call. NULL for other actors. */
ADAG_API void *adag_call_stream(adag_call_h call);

/* Inside a method of a device-bound actor: runs fn(args') on the compute
 * stream, after the work enqueued there so far, where args' is a copy of
 * args[0..size) (size <= 256) made now, the way a kernel launch copies its
 * parameters. On the emulated device this is how a "kernel" runs (device
 * pointers are host addresses there); on CUDA fn runs on a host thread and
 * must not touch device memory or call CUDA. ADAG_ERR_INVALID on an actor
 * without a device. */
ADAG_API adag_status_t adag_call_enqueue(adag_call_h call, void (*fn)(void *args),
                                         const void *args, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* ADAG_CLASS_H */

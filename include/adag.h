/*
 * adag: static DAGs of worker methods, compiled once into channels and
 * executed many times.
 *
 * A driver program creates a runtime, registers actor classes (or names a
 * module .so that exports them), creates actors (threads of the driver or
 * adag-worker processes), binds their methods into a graph, compiles the
 * graph once and then executes it many times:
 *
 *     adag_runtime_create(NULL, &rt);
 *     adag_class_register(rt, &my_class);
 *     adag_actor_create(rt, &actor_params, &a);
 *     adag_graph_create(rt, &g);
 *     adag_graph_input(g, 0, &in);
 *     adag_graph_bind(g, a, "step", &in, 1, &out);
 *     adag_graph_output(g, &out, 1);
 *     adag_graph_compile(g, NULL, &dag);
 *     adag_dag_execute(dag, &value, 1, 0, &ref);
 *     adag_dag_get(dag, ref, &result, 1, 1000);
 *     adag_dag_release(dag, ref);
 *
 * Conventions (shared with every later addition):
 *   - every function returns adag_status_t: ADAG_OK (0) or a negative error;
 *     adag_last_error() gives a message that says what failed and where;
 *   - out-parameters come last; handles are opaque;
 *   - every params struct starts with a field_mask: a bit per field that the
 *     caller set; fields whose bit is clear take their defaults, so new
 *     fields can be added without breaking existing callers. A field whose
 *     bit is clear must be zero (NULL, 0, all bytes zero: what a designated
 *     initializer or memset leaves): a nonzero one is refused with
 *     ADAG_ERR_INVALID naming the struct, the field and its bit
 *     ("adag_actor_params_t.device is set, but its bit
 *     ADAG_ACTOR_PARAM_DEVICE is clear in field_mask"), never ignored; so
 *     is a bit this library does not know, and a bit set for a pointer
 *     field left NULL. Fields without a bit are required (e.g. the
 *     shards of adag_data_params_t);
 *   - the other structs that cross the library boundary carry their version:
 *     adag_dag_stats_t a struct_size, adag_class_def_t an abi_version (which
 *     also covers its method table), a module its adag_module_abi_version;
 *     adag_value_t reserves room that must stay zero (see "ABI" below);
 *     adag_writer_t, a function and its context passed by value, is fixed;
 *   - nothing of the C library's stdio crosses it: what the library writes
 *     goes to a writer (an fd, a callback) or a caller's buffer;
 *   - the driver-side API (runtime, actors, graphs, DAGs) is thread-safe;
 *     adag_call_* functions are only valid inside a method, on its call.
 */
#ifndef ADAG_H
#define ADAG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ADAG_VERSION_MAJOR 0
#define ADAG_VERSION_MINOR 3

/* ABI
 *
 * ADAG_ABI_VERSION numbers the binary layout of what a module and the
 * library share: adag_class_def_t, adag_method_def_t, adag_value_t and the
 * meaning of the adag_call_* functions. It changes whenever one of them
 * changes incompatibly, and only then. A class definition carries it
 * (.abi_version = ADAG_ABI_VERSION, its first field) and a module records it
 * (ADAG_MODULE exports adag_module_abi_version): adag_class_register and
 * adag-worker accept exactly the library's own ADAG_ABI_VERSION and refuse
 * anything else with ADAG_ERR_INVALID naming both versions (a later library
 * may accept older versions it still knows how to read). Rebuild modules and
 * classes against the new header when it changes.
 *
 * Fields are added without a new ABI version where the struct leaves room:
 *   - params structs: a new field_mask bit (unset bits mean defaults);
 *   - adag_dag_stats_t: the caller's struct_size says how much it has room for;
 *   - adag_class_def_t and adag_value_t: reserved words, which must be zero
 *     today (a nonzero one is ADAG_ERR_INVALID), so a later field whose zero
 *     means "as before" can take their place;
 *   - adag_input_view_t (filled by the library, in arrays): reserved words
 *     it sets to zero, so a later field takes their place and an array's
 *     stride stays;
 *   - adag_method_def_t has no room of its own: it is read only through its
 *     class, so its layout is covered by the class's abi_version, and method
 *     tables keep their positional {name, fn, nargs, nreturns} initializers.
 * libadag.so exports exactly the ADAG_API functions declared here (adag.map). */
#define ADAG_ABI_VERSION 2u

#if defined(__GNUC__)
#define ADAG_API __attribute__((visibility("default")))
#define ADAG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ADAG_API
#define ADAG_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------ */
/* Status codes                                                        */
/* ------------------------------------------------------------------ */

typedef enum {
    ADAG_OK = 0,
    ADAG_ERR_INVALID = -1,     /* bad argument or graph; message names it */
    ADAG_ERR_NO_MEMORY = -2,   /* allocation or mapping failed */
    ADAG_ERR_TIMEOUT = -3,     /* the wait ran out; the operation may be retried */
    ADAG_ERR_AGAIN = -4,       /* non-blocking call would block */
    ADAG_ERR_METHOD = -5,      /* a method failed: "actor <name>.<method>: <message>" */
    ADAG_ERR_ACTOR_DIED = -6,  /* an actor process died; the message names it */
    ADAG_ERR_TOO_LARGE = -7,   /* a value does not fit its channel slot */
    ADAG_ERR_IO = -8,          /* a system call failed (message has errno text) */
    ADAG_ERR_CLOSED = -9,      /* the DAG was destroyed or is being destroyed */
    ADAG_ERR_NOT_FOUND = -10,  /* no such class, module, method or setting */
    ADAG_ERR_BUSY = -11,       /* the object is in use (e.g. a DAG still uses it) */
    ADAG_ERR_PROTOCOL = -12,   /* a peer sent a malformed or unexpected message */
    ADAG_ERR_INTERNAL = -13,   /* a broken invariant of the runtime (a bug, or its shared
                                  memory overwritten); the DAG is failed */
} adag_status_t;

/* Short static name of a status, e.g. "ADAG_ERR_TIMEOUT: timed out". */
ADAG_API const char *adag_status_str(adag_status_t status);

/* Detailed message of the last failure reported to this thread (never
 * NULL; empty if none). Valid until the next adag call on this thread. */
ADAG_API const char *adag_last_error(void);

/* Records the message (printf's format) as this thread's last error, what
 * adag_last_error() gives next, and returns status, so that code built on
 * adag reports a failure the way adag's own functions do: a writer's fn
 * (see below), a data map (include/adag/data.h), a library layered on this
 * one (libadag-data reports through it). `return adag_fail(ADAG_ERR_IO,
 * "cannot open %s", path);`. The arguments may quote adag_last_error()
 * (adding context to the message there); an empty message ("%s", "")
 * clears it. A NULL fmt records "(no message)". */
ADAG_API adag_status_t adag_fail(adag_status_t status, const char *fmt, ...) ADAG_PRINTF(2, 3);

/* ------------------------------------------------------------------ */
/* Writers: where text and traces go                                   */
/* ------------------------------------------------------------------ */

/* The functions that write text or a trace (adag_dag_write_dot,
 * adag_dag_write_trace, adag_stats_print, adag_data_print_stats,
 * adag_data_progress) take a writer: a function and its context. They
 * call fn on the calling thread, before they return, with the next n > 0
 * bytes each time, in order (staged: a few kilobytes a call, not a call
 * per line). fn returns ADAG_OK, or an error that ends the write: fn is
 * not called again, what the function allocated is freed, and it returns
 * fn's status (ADAG_ERR_IO for a value that is no ADAG_ERR_* code) with
 * "<function>: writing failed after <n> bytes: <why>", where why is the
 * message fn left in adag_last_error() (adag_write_fd's), else what it
 * returned. Nothing is written past a failure, so a reader may see a
 * prefix of the text. */
typedef adag_status_t (*adag_write_fn)(void *ctx, const void *buf, size_t n);

typedef struct {
    adag_write_fn fn;
    void *ctx;
} adag_writer_t;

/* An adag_write_fn for the file descriptor (int)(intptr_t)ctx: writes all
 * n bytes, going on after a short write and after EINTR, and waiting (poll)
 * whenever a non-blocking fd says EAGAIN, as long as a blocking fd would
 * have blocked. A pipe or socket without a reader is ADAG_ERR_IO (EPIPE)
 * with no SIGPIPE delivered; any other failure is ADAG_ERR_IO with the
 * errno text ("write to fd 5 (...): No space left on device"). The fd is
 * the caller's: never closed. */
ADAG_API adag_status_t adag_write_fd(void *ctx, const void *buf, size_t n);

/* The writer to file descriptor fd: adag_dag_write_dot(dag, adag_writer_fd(1)). */
static inline adag_writer_t adag_writer_fd(int fd)
{
    adag_writer_t w = {adag_write_fd, (void *)(intptr_t)fd};
    return w;
}

/* The text writers also fill a caller's buffer (adag_dag_format_dot,
 * adag_stats_format, adag_data_format_stats, adag_data_format_progress):
 * buf[0..len) gets the text, NUL-terminated, and *needed (may be NULL)
 * the bytes it takes, its NUL included. A text that does not fit is cut:
 * buf holds its first len - 1 bytes and a NUL (nothing when len is 0; buf
 * may then be NULL), and the call returns ADAG_ERR_TOO_LARGE with both
 * sizes in the message, *needed telling what to allocate (a DAG's DOT and
 * a stats snapshot give the same text again; a data source's figures move
 * on, so leave room). */

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

typedef enum {
    ADAG_VALUE_BYTES = 0,  /* plain bytes in host memory */
    ADAG_VALUE_TENSOR = 1, /* a dense, contiguous (row-major) tensor: dtype, shape,
                              device; size is the product of the shape times the
                              dtype's size */
} adag_value_kind_t;

/* Element types of tensor values. ADAG_DTYPE_BYTES (0) is untyped bytes,
 * the dtype of every ADAG_VALUE_BYTES value. New types get new numbers. */
typedef enum {
    ADAG_DTYPE_BYTES = 0,
    ADAG_DTYPE_U8 = 1,
    ADAG_DTYPE_I8 = 2,
    ADAG_DTYPE_I16 = 3,
    ADAG_DTYPE_I32 = 4,
    ADAG_DTYPE_I64 = 5,
    ADAG_DTYPE_F16 = 6,
    ADAG_DTYPE_BF16 = 7,
    ADAG_DTYPE_F32 = 8,
    ADAG_DTYPE_F64 = 9,
    ADAG_DTYPE_BOOL = 10,
} adag_dtype_t;

#define ADAG_MAX_DIMS 8

/* How a collective combines the ranks' elements (adag_graph_allreduce,
 * adag_graph_reducescatter). Integers wrap at their width; AVG is the SUM
 * divided by the number of ranks (integers: truncated toward zero); f16 and
 * bf16 are computed in f32 and rounded to nearest even. bool: SUM and MAX
 * are OR, PROD and MIN are AND, AVG is refused. */
typedef enum {
    ADAG_REDUCE_SUM = 0,
    ADAG_REDUCE_PROD = 1,
    ADAG_REDUCE_MIN = 2,
    ADAG_REDUCE_MAX = 3,
    ADAG_REDUCE_AVG = 4,
} adag_reduce_op_t;

/* Bytes per element of a dtype (1 for ADAG_DTYPE_BYTES and BOOL), 0 for a
 * number that is not an adag_dtype_t. */
ADAG_API size_t adag_dtype_size(adag_dtype_t dtype);
/* "f32", "bf16", ...; "?" for an unknown number. */
ADAG_API const char *adag_dtype_name(adag_dtype_t dtype);

/* Kinds of memory a value's bytes can live in. */
typedef enum {
    ADAG_DEV_HOST = 0,     /* host memory ("host") */
    ADAG_DEV_EMULATED = 1, /* the emulated device "emu:<index>" (ADAG_EMU_DEVICES of
                              them): host memory, with threads for its streams */
    ADAG_DEV_CUDA = 2,     /* a CUDA device "cuda:<index>" (the index-th the process sees) */
} adag_device_kind_t;

/* Where a value's bytes live (adag_value_t.device, adag_input_view_t.device,
 * adag_call_device): a device id, its kind in bits 24..30 and its index in
 * bits 0..23, so ids of every kind are distinct and never negative, and 0
 * is host memory (a zeroed value is host bytes):
 *     ADAG_DEVICE(ADAG_DEV_CUDA, 1)      cuda:1
 *     ADAG_DEVICE(ADAG_DEV_EMULATED, 0)  emu:0
 *     ADAG_DEVICE_HOST                   host memory
 * ADAG_DEVICE_KIND and ADAG_DEVICE_INDEX take an id apart. An index is at
 * most ADAG_DEVICE_INDEX_MAX (device strings with larger ones are
 * refused). */
#define ADAG_DEVICE_INDEX_MAX 0xFFFFFF
#define ADAG_DEVICE(kind, index)                                                               \
    ((int32_t)((((uint32_t)(kind) & 0x7Fu) << 24) | ((uint32_t)(index) & 0xFFFFFFu)))
#define ADAG_DEVICE_HOST ADAG_DEVICE(ADAG_DEV_HOST, 0)
#define ADAG_DEVICE_KIND(device) ((adag_device_kind_t)(((uint32_t)(device) >> 24) & 0x7Fu))
#define ADAG_DEVICE_INDEX(device) ((unsigned)((uint32_t)(device) & 0xFFFFFFu))

/* A kind's name: "host", "emu", "cuda" (a device prints as
 * "<name>:<index>", host memory as "host"); "?" for a number that is not
 * an adag_device_kind_t. */
ADAG_API const char *adag_device_kind_name(adag_device_kind_t kind);

/* A value passed to execute() or returned by get(). For results, data
 * points into the channel slot (zero copy) and stays valid until
 * adag_dag_release() of its ref.
 *
 * A zero-initialized value with data and size set is host bytes; both
 * {data, size, ADAG_VALUE_BYTES} (positional: -Wextra then warns about the
 * fields left out, which is harmless) and {.data = p, .size = n} build one.
 * Everything past kind is for tensors: for ADAG_VALUE_BYTES, dtype, ndim
 * and device must be 0 and reserved must be zero (execute says which field
 * is not); the library fills every field of the values it returns. */
typedef struct {
    const void *data;
    size_t size;                   /* bytes */
    adag_value_kind_t kind;        /* ADAG_VALUE_BYTES (0) or ADAG_VALUE_TENSOR */
    adag_dtype_t dtype;            /* ADAG_DTYPE_BYTES (0) for bytes */
    uint32_t ndim;                 /* 0..ADAG_MAX_DIMS; 0 for bytes */
    int32_t device;                /* ADAG_DEVICE_HOST (0) or ADAG_DEVICE(kind, index) */
    int64_t shape[ADAG_MAX_DIMS];  /* shape[0..ndim-1]; the rest is ignored */
    uint64_t reserved[4];          /* must be zero */
} adag_value_t;

/* A host tensor viewing data: kind ADAG_VALUE_TENSOR, dtype, ndim and
 * shape[0..ndim) as given, size their bytes (the product of the shape
 * times adag_dtype_size(dtype); 0 when a dimension is 0), every other
 * field zero:
 *     int64_t shape[2] = {4, 8};
 *     adag_value_t in = adag_value_tensor(buf, ADAG_DTYPE_F32, 2, shape);
 * It reports nothing itself: a tensor that cannot be (dtype BYTES or not
 * an adag_dtype_t, ndim above ADAG_MAX_DIMS, a negative dimension, shape
 * NULL with ndim > 0, bytes beyond a size_t) comes back with size SIZE_MAX
 * and the fields as given (the dimensions that fit; zeros for a NULL
 * shape), which adag_dag_execute refuses with ADAG_ERR_INVALID saying
 * what is wrong ("a tensor whose dtype 0 (bytes) is not a tensor dtype",
 * "... has more bytes than a size_t holds"). */
static inline adag_value_t adag_value_tensor(const void *data, adag_dtype_t dtype, unsigned ndim,
                                             const int64_t *shape)
{
    adag_value_t v;
    size_t elem = dtype == ADAG_DTYPE_BYTES ? 0 : adag_dtype_size(dtype), size = elem;
    int valid = elem != 0 && ndim <= ADAG_MAX_DIMS && (shape || ndim == 0), zero = 0;
    v.data = data;
    v.kind = ADAG_VALUE_TENSOR;
    v.dtype = dtype;
    v.ndim = ndim;
    v.device = ADAG_DEVICE_HOST;
    for (unsigned i = 0; i < ADAG_MAX_DIMS; i++) {
        v.shape[i] = shape && i < ndim ? shape[i] : 0;
        valid = valid && v.shape[i] >= 0;
        zero = zero || (i < ndim && v.shape[i] == 0);
    }
    for (unsigned i = 0; i < sizeof(v.reserved) / sizeof(v.reserved[0]); i++)
        v.reserved[i] = 0;
    for (unsigned i = 0; valid && !zero && i < ndim; i++) {
        if ((uint64_t)v.shape[i] > SIZE_MAX / size)
            valid = 0;
        else
            size *= (size_t)v.shape[i];
    }
    v.size = !valid ? SIZE_MAX : zero ? 0 : size;
    return v;
}

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

/* ------------------------------------------------------------------ */
/* Configuration                                                       */
/* ------------------------------------------------------------------ */

/* Values of the ADAG_* settings (`adag-info -c` lists every one with its
 * default and what it does), the way UCX's ucp_config_t holds its UCX_*
 * ones: read from the environment, changed by name, given to
 * adag_runtime_create (adag_runtime_params_t.config), which copies them.
 * Every setting is per runtime: its DAGs, channels and actors use its
 * values, and its process and remote actors receive them (their workers
 * use those, whatever their own environment says), so two runtimes of one
 * process may differ. The exceptions are process-wide, read by each
 * process from its own environment once: the device libraries loaded once
 * (ADAG_CUDART_PATH, ADAG_NCCL_PATH), ADAG_LOG_LEVEL, the emulated
 * backend's device count ADAG_EMU_DEVICES, the topology (ADAG_TOPO_XML,
 * ADAG_TOPO_XML_THIS_SYSTEM) and the agent's ADAG_AGENT_AUTH_TIMEOUT_MS; a
 * config shows them and refuses to change them. One config may be read by
 * several threads at once, but not while one modifies it. */
typedef struct adag_config *adag_config_h;

/* A new config with the environment's values now: a setting not set, or
 * set to "", has its default; a value the setting refuses is warned about
 * (ADAG_LOG_LEVEL >= 2) and the default kept, as for a runtime created
 * without a config. Release it with adag_config_release. */
ADAG_API adag_status_t adag_config_read(adag_config_h *config);

/* Sets setting `name` (e.g. "ADAG_EXECUTE_TIMEOUT_MS") to `value`, the
 * text its environment variable would hold ("250"; "" restores the
 * default), checked as the environment's is. Refused, the config left as
 * it was: ADAG_ERR_NOT_FOUND for a name that is no setting;
 * ADAG_ERR_INVALID for a value the setting does not take
 * ("adag_config_modify: ADAG_SPIN_NS=-1: not an integer in [0,
 * 1000000000]"), for a process-wide setting, and for a NULL argument. */
ADAG_API adag_status_t adag_config_modify(adag_config_h config, const char *name,
                                          const char *value);

/* Writes every setting as `adag-info -c` prints it, two lines each:
 * "NAME = value (default D)" (a process-wide one adds "; process-wide" and
 * shows this process's value; ADAG_TOKEN shows only whether it is set),
 * then what it does. *needed (when not NULL) gets the size of the whole
 * text with its NUL. The text is NUL-terminated within buf's len bytes;
 * when it does not fit, buf holds as much as fits and the call returns
 * ADAG_ERR_TOO_LARGE (buf may be NULL with len 0, to learn the size). */
ADAG_API adag_status_t adag_config_print(adag_config_h config, char *buf, size_t len,
                                         size_t *needed);

/* The value of setting `name` as text, as its environment variable would
 * hold it ("250"; "" for a string setting that is unset), NUL-terminated in
 * buf: what a component takes its settings from (e.g. the config of the DAG
 * it feeds, adag_dag_config). A process-wide setting gives this process's
 * value. *needed (when not NULL) gets the value's size with its NUL; when
 * it does not fit, buf holds as much as fits and the call returns
 * ADAG_ERR_TOO_LARGE (buf may be NULL with len 0, to learn the size).
 * ADAG_ERR_NOT_FOUND for a name that is no setting; ADAG_ERR_INVALID for
 * the secret ADAG_TOKEN (never read back) and for a NULL config or name. */
ADAG_API adag_status_t adag_config_get(adag_config_h config, const char *name, char *buf,
                                       size_t len, size_t *needed);

/* Frees the config; runtimes created with it keep their own copy. */
ADAG_API adag_status_t adag_config_release(adag_config_h config);

/* ------------------------------------------------------------------ */
/* Runtime                                                             */
/* ------------------------------------------------------------------ */

typedef struct adag_runtime *adag_runtime_h;
typedef struct adag_actor *adag_actor_h;
typedef struct adag_graph *adag_graph_h;
typedef struct adag_node *adag_node_h;
typedef struct adag_dag *adag_dag_h;

enum {
    ADAG_RUNTIME_PARAM_WORKER_PATH = 1u << 0,
    ADAG_RUNTIME_PARAM_CONFIG = 1u << 1,
};
/* Like every params struct (see "Conventions" at the top): a set field
 * needs its bit, a bit needs a known field. */

typedef struct {
    uint64_t field_mask;     /* ADAG_RUNTIME_PARAM_* bits of the fields set */
    /* adag-worker executable for process actors. Default: the setting
     * ADAG_WORKER_PATH, else "adag-worker" next to libadag (or in its
     * adag/ subfolder). */
    const char *worker_path;
    /* The runtime's settings (see "Configuration"), copied at creation:
     * the config may be modified or released afterwards without changing
     * the runtime. Default: the environment's values when the runtime is
     * created. */
    adag_config_h config;
} adag_runtime_params_t;

/* Creates a runtime (params may be NULL). Use the adag_runtime_create macro,
 * which passes the header's version so a mismatched library is caught:
 * the major must be the library's, and the minor at most the library's;
 * while the major is 0 every minor may change struct layouts, so the minor
 * must be the library's too (ADAG_ERR_INVALID naming both versions). */
ADAG_API adag_status_t adag_runtime_create_version(unsigned major, unsigned minor,
                                                   const adag_runtime_params_t *params,
                                                   adag_runtime_h *runtime);
#define adag_runtime_create(params, runtime)                                  \
    adag_runtime_create_version(ADAG_VERSION_MAJOR, ADAG_VERSION_MINOR, (params), (runtime))

/* Destroys every DAG, graph and actor still alive, stops all workers
 * (killing those that do not stop within its ADAG_TEARDOWN_TIMEOUT_MS) and
 * frees the runtime. Handles of the runtime's objects become invalid. */
ADAG_API adag_status_t adag_runtime_destroy(adag_runtime_h runtime);

/* Registers a class for thread actors. The definition is copied (names and
 * method table); the function pointers must stay valid. Its abi_version
 * must be ADAG_ABI_VERSION (see adag_class_def_t). A name already
 * registered in this runtime is ADAG_ERR_INVALID. */
ADAG_API adag_status_t adag_class_register(adag_runtime_h runtime, const adag_class_def_t *def);

/* ------------------------------------------------------------------ */
/* Actors                                                              */
/* ------------------------------------------------------------------ */

typedef enum {
    ADAG_PLACEMENT_THREAD = 0,  /* state and loops live in the driver process */
    ADAG_PLACEMENT_PROCESS = 1, /* an adag-worker process of its own */
    /* an adag-worker on another host, started by the agent named in
     * adag_actor_params_t.node (adag-worker --agent); its values travel
     * over UCX */
    ADAG_PLACEMENT_REMOTE = 2,
} adag_placement_t;

enum {
    ADAG_ACTOR_PARAM_CLASS = 1u << 0,
    ADAG_ACTOR_PARAM_NAME = 1u << 1,
    ADAG_ACTOR_PARAM_MODULE = 1u << 2,
    ADAG_ACTOR_PARAM_PLACEMENT = 1u << 3,
    ADAG_ACTOR_PARAM_INIT = 1u << 4,
    ADAG_ACTOR_PARAM_DEVICE = 1u << 5,
    ADAG_ACTOR_PARAM_NODE = 1u << 6,
    ADAG_ACTOR_PARAM_CPUS = 1u << 7,
    ADAG_ACTOR_PARAM_NUMA = 1u << 8,
    ADAG_ACTOR_PARAM_NIC = 1u << 9,
};

typedef struct {
    uint64_t field_mask;        /* ADAG_ACTOR_PARAM_* bits */
    const char *class_name;     /* required */
    const char *name;           /* default "<class>#<n>"; must be unique */
    const char *module_path;    /* the module .so; required for process actors */
    adag_placement_t placement; /* default ADAG_PLACEMENT_THREAD */
    const void *init_data;      /* bytes given to the class's init */
    size_t init_size;           /* at most 16 MiB */
    /* The device the actor is bound to: "<backend>:<index>", where backend
     * is "cuda" or "emu" (the emulated device, ADAG_EMU_DEVICES of them),
     * e.g. "cuda:1" (its id ADAG_DEVICE(ADAG_DEV_CUDA, 1)), "emu:0"; the
     * index is decimal, 0..ADAG_DEVICE_INDEX_MAX. Actors of one runtime may
     * be on devices of different backends. Every thread that runs the
     * actor's code (init, each DAG's loop) is bound to it, and the actor
     * gets a compute stream and a communication stream. Default: none (a
     * host actor). */
    const char *device;
    /* ADAG_PLACEMENT_REMOTE: the node the actor runs on, "<address>:<port>"
     * of the agent that starts its worker there (adag-worker --agent
     * <address>:<port> on that node), or a name of the runtime's
     * ADAG_HOSTS; the driver presents the token of the runtime's
     * ADAG_TOKEN_FILE or ADAG_TOKEN. module_path is a path on that node.
     * Actors naming the same agent share a node: the compiler gives UCX
     * channels to every value that crosses nodes and keeps shared memory
     * within the driver's node. */
    const char *node;
    /* Placement (docs: README "Placement"). By default (ADAG_PLACEMENT=1)
     * an actor with a GPU runs on the CPUs of its GPU's NUMA node, its
     * memory prefers that node, and its worker's UCX uses the nearest RDMA
     * NIC with an active port; an actor without one is not bound. Each of
     * these overrides its part, for process and remote actors (decided on
     * their host) and thread actors (their DAG loop threads):
     * cpus: a CPU list, "0-7,16" (every CPU must be one the process may
     * use); numa: a NUMA node's number (its memory, and its CPUs unless
     * cpus is given), -1 for none (memory where the kernel puts it); nic: an RDMA device "mlx5_0" (or "mlx5_0:1" for a
     * port) or a network interface for UCX_NET_DEVICES, "" for UCX's own
     * choice. A request that cannot be met fails adag_actor_create. */
    const char *cpus;
    int numa;
    const char *nic;
} adag_actor_params_t;

/* Where an actor was placed (adag_actor_placement). Set struct_size to
 * sizeof(adag_actor_placement_t) first (ADAG_ACTOR_PLACEMENT_INIT): as
 * with adag_dag_stats_t, later versions only append fields. */
typedef struct {
    size_t struct_size;    /* in: the caller's sizeof; out: bytes filled */
    char cpus[512];        /* the CPUs its loops run on, as a list ("0-15,32-47") */
    int bound;             /* 1: bound to them; 0: runs wherever its process may */
    int numa;              /* the NUMA node its memory prefers; -1: none */
    char gpu[16];          /* its GPU's PCI bus id in the topology; "" */
    char nic[40];          /* what its UCX was told (UCX_NET_DEVICES); "": UCX's choice */
    char nic_distance[24]; /* from its GPU (or node) to that NIC: "same PCI switch", "same PCI
                            * root", "same NUMA node", "same socket", "across sockets"; "" */
    int this_machine;      /* 0: placed on an XML topology of another machine (nothing bound) */
} adag_actor_placement_t;

#define ADAG_ACTOR_PLACEMENT_INIT {.struct_size = sizeof(adag_actor_placement_t)}

/* Creates an actor: for a process actor, spawns adag-worker, loads the module
 * and runs the class's init there. A worker dies with its driver, whatever
 * kills the driver (it gets SIGKILL from the kernel when the runtime's
 * monitor thread ends), even when stopped or stuck in a method; it starts
 * with fds 0-2 open (on /dev/null where the driver's are closed). Names are
 * unique per runtime, also between threads creating actors at once. A
 * worker that dies in its class's init fails this call with
 * ADAG_ERR_ACTOR_DIED saying how it died (signal or exit status).
 * Refusals, each with its one status and a message naming what failed:
 *   ADAG_ERR_INVALID    params that break their rules (a field without its
 *                       bit, a name taken or not 1..63 bytes, a process
 *                       actor without module_path, a placement request
 *                       the machine cannot meet), and a class's init that
 *                       failed, with its adag_init_fail message (see
 *                       adag_class_def_t.init);
 *   ADAG_ERR_NOT_FOUND  a class not registered (thread actor) or not in its
 *                       module, a module that cannot be loaded;
 *   ADAG_ERR_TOO_LARGE  init bytes over 16 MiB;
 *   ADAG_ERR_IO         an adag-worker that cannot be started (the worker
 *                       path is not executable). */
ADAG_API adag_status_t adag_actor_create(adag_runtime_h runtime, const adag_actor_params_t *params,
                                         adag_actor_h *actor);

/* The actor's name (never NULL). */
ADAG_API const char *adag_actor_name(adag_actor_h actor);

/* The worker's process id for a process actor (for a remote actor, its pid
 * on its host), 0 for a thread actor. */
ADAG_API int adag_actor_pid(adag_actor_h actor);

/* Where the actor runs: decided when it was created, on its own host.
 * ADAG_ERR_INVALID if out->struct_size is below the first version's. */
ADAG_API adag_status_t adag_actor_placement(adag_actor_h actor, adag_actor_placement_t *out);

/* How many devices the backend "cuda" or "emu" has here (0, with the
 * reason in adag_last_error(), when it has none); ADAG_ERR_NOT_FOUND for
 * another name. */
ADAG_API adag_status_t adag_device_count(const char *backend, unsigned *count);

/* Gives up the caller's handle. The actor is stopped (fini runs, the worker
 * exits) once no compiled DAG uses it; graphs not yet compiled that bind it
 * then fail to compile. */
ADAG_API adag_status_t adag_actor_destroy(adag_actor_h actor);

/* ------------------------------------------------------------------ */
/* Graphs                                                              */
/* ------------------------------------------------------------------ */

ADAG_API adag_status_t adag_graph_create(adag_runtime_h runtime, adag_graph_h *graph);

/* Frees the graph and its nodes (a DAG compiled from it stays valid). */
ADAG_API adag_status_t adag_graph_destroy(adag_graph_h graph);

/* The node for field `field` of execute()'s inputs (the same node each time
 * for the same field). Fields must be numbered 0..n-1, each used. */
ADAG_API adag_status_t adag_graph_input(adag_graph_h graph, unsigned field, adag_node_h *node);

/* Binds a call of `method` on `actor` taking the values `args` (input nodes
 * or results of earlier binds of the same graph). Checks that the method
 * exists and takes nargs arguments. For a method with one return the node
 * is its value; for several, take each with adag_node_output(). */
ADAG_API adag_status_t adag_graph_bind(adag_graph_h graph, adag_actor_h actor, const char *method,
                                       const adag_node_h *args, unsigned nargs, adag_node_h *node);

/* The i-th return value of a bound call node. */
ADAG_API adag_status_t adag_node_output(adag_node_h call_node, unsigned i, adag_node_h *value);

/* How a tensor travels. AUTO picks: device memory to device memory of one
 * host over IPC (zero copies on one device, one peer copy between two),
 * host memory to a device by an async copy on the reader's communication
 * stream, a device to host memory by an async copy on the writer's. */
typedef enum {
    ADAG_TRANSPORT_AUTO = 0,
    ADAG_TRANSPORT_HOST = 1, /* host memory (shm), even between device actors */
    ADAG_TRANSPORT_IPC = 2,  /* device memory over IPC; an error where it cannot run */
    /* Device memory to device memory by a communicator's send/recv: NCCL
     * between CUDA devices, the host communicator between emulated ones.
     * The writer and every device reader are ranks of one communicator per
     * DAG over the actors that use it, created at compile time and reused
     * by the next DAG over the same actors. Host readers (host actors,
     * and the driver when the tensor is an output) still get the value in
     * host memory by the writer's async copy; the driver cannot read it
     * on a driver device (ADAG_ERR_INVALID naming the tensor and its
     * edge). The path across hosts; here, a choice. */
    ADAG_TRANSPORT_COMM = 3,
} adag_transport_t;

enum {
    ADAG_TENSOR_PARAM_DTYPE = 1u << 0,
    ADAG_TENSOR_PARAM_SHAPE = 1u << 1,
    ADAG_TENSOR_PARAM_TRANSPORT = 1u << 2,
};

typedef struct {
    uint64_t field_mask;          /* ADAG_TENSOR_PARAM_* bits */
    adag_dtype_t dtype;           /* static dtype (not BYTES); default: per execution */
    unsigned ndim;                /* with SHAPE: static ndim and shape; default: */
    int64_t shape[ADAG_MAX_DIMS]; /*   per execution, bounded by the slot size */
    adag_transport_t transport;   /* default ADAG_TRANSPORT_AUTO */
} adag_tensor_params_t;

/* Declares that the value of `node` (an input field, or a call's return:
 * a one-return call node or a node from adag_node_output) is a tensor
 * (params may be NULL: dtype and shape per execution, AUTO transport).
 * Written by a device-bound actor, it stays in that device's memory; each
 * reader gets it in its own memory: a device-bound actor on its device, a
 * host actor and the driver in host memory. An undeclared value is host
 * memory (a device actor's adag_call_output then gives a host buffer).
 * A static dtype/shape is checked where the value is written (the method's
 * adag_call_output_tensor, the driver's execute); with both static, the
 * value's slots are its exact bytes (adag_node_channel), and a per-node
 * maximum below them fails adag_graph_compile. Call before compile. */
ADAG_API adag_status_t adag_node_tensor(adag_node_h node, const adag_tensor_params_t *params);

/* The channel of a value: every value (an input field, a call's return)
 * travels in a channel of its own, a ring of slots, one value each; the
 * channel's writer fills slot after slot while its readers read them.
 * Each channel has its own slot size and slot count (see them per channel
 * in adag_channel_stats_t and on each edge of adag_dag_write_dot):
 *
 *   slot size   max_bytes when given; else a tensor declared with a
 *               static dtype and shape (adag_node_tensor) takes its exact
 *               bytes; else the DAG's default, adag_compile_params_t.
 *               slot_capacity. A value larger than its slot fails with
 *               ADAG_ERR_TOO_LARGE naming the channel and both sizes; a
 *               max_bytes below a static tensor's bytes fails compile
 *               (ADAG_ERR_INVALID naming the node and both sizes).
 *   slots       max_inflight (the DAG's) by default: the writer may run up
 *               to max_inflight executions ahead of the slowest reader.
 *               Fewer (1..max_inflight) hold less memory and bound how far
 *               the writer runs ahead: with k slots it writes execution r
 *               only once every reader finished execution r - k (1: the
 *               two stages take turns; 2: the writer fills one slot while
 *               the reader reads the other). Allowed on a value the driver
 *               neither writes nor reads: refused at compile
 *               (ADAG_ERR_INVALID naming the node and the rule) on an
 *               input field (adag_dag_reserve hands out max_inflight input
 *               slots at once) and on a graph output (the caller may keep
 *               max_inflight results unreleased). Between actors it cannot
 *               deadlock: every actor runs the executions in order and each
 *               execution's methods in bind order, and gives an
 *               execution's input slots back once it finished that
 *               execution, so the writer waiting for slot r always waits
 *               for work of an earlier execution, which needs nothing of
 *               execution r. A channel read only by its writer has one
 *               buffer whatever is asked.
 */
enum {
    ADAG_CHANNEL_PARAM_MAX_BYTES = 1u << 0,
    ADAG_CHANNEL_PARAM_SLOTS = 1u << 1,
};

typedef struct {
    uint64_t field_mask; /* ADAG_CHANNEL_PARAM_* bits */
    size_t max_bytes;    /* the largest value, 0..2^40: its slot size */
    unsigned slots;      /* 1..max_inflight; default max_inflight */
} adag_channel_params_t;

/* Sizes the channel of `node`'s value (an input field, or a call's
 * return: a one-return call node or a node from adag_node_output);
 * params NULL: defaults. A second call replaces the first. Call before
 * compile. */
ADAG_API adag_status_t adag_node_channel(adag_node_h node, const adag_channel_params_t *params);

/* Collectives (tensor parallelism). The members are the actors that wrote
 * nodes[0..n) (one node each, each from a distinct device-bound actor, 2
 * to 64 of them, on devices of one backend: CUDA devices use NCCL, emu:N
 * devices the host communicator); every node is a tensor (declared by
 * adag_node_tensor, or declared here with a per-execution dtype and
 * shape). outs[i] is the result on member i's device: an ordinary node
 * that later methods of any actor may bind and the driver may read. All
 * the members' tensors of one execution have one dtype and shape, checked
 * at compile time where declared static and at each execution otherwise
 * (a mismatch fails that execution, naming both members). The DAG's
 * actors that share a set of members share one communicator, made at
 * compile time and reused by the next DAG over the same actors. A failure
 * upstream of any member fails every output of the collective for that
 * execution; the next execution runs. Errors: ADAG_ERR_INVALID naming the
 * node (a node of another graph or actor set, a host actor, two nodes of
 * one actor, mismatched static dtypes or shapes, bool with AVG).
 *
 *   allreduce      outs[i] = op over the members of nodes[*], elementwise;
 *   allgather      outs[i] = the nodes concatenated along dim 0 (member
 *                  order): shape [n * d0, d1, ...];
 *   reducescatter  outs[i] = block i of dim 0 of the reduction: shape
 *                  [d0 / n, d1, ...] (d0 a multiple of n);
 *   broadcast      outs[i] = nodes[root]. */
ADAG_API adag_status_t adag_graph_allreduce(adag_graph_h graph, const adag_node_h *nodes,
                                            unsigned n, adag_reduce_op_t op, adag_node_h *outs);
ADAG_API adag_status_t adag_graph_allgather(adag_graph_h graph, const adag_node_h *nodes,
                                            unsigned n, adag_node_h *outs);
ADAG_API adag_status_t adag_graph_reducescatter(adag_graph_h graph, const adag_node_h *nodes,
                                                unsigned n, adag_reduce_op_t op,
                                                adag_node_h *outs);
ADAG_API adag_status_t adag_graph_broadcast(adag_graph_h graph, const adag_node_h *nodes,
                                            unsigned n, unsigned root, adag_node_h *outs);

/* Declares the graph's outputs (in order); get() returns them in that order.
 * May be called once per graph. */
ADAG_API adag_status_t adag_graph_output(adag_graph_h graph, const adag_node_h *nodes, unsigned n);

enum {
    ADAG_COMPILE_PARAM_MAX_INFLIGHT = 1u << 0,
    ADAG_COMPILE_PARAM_SLOT_CAPACITY = 1u << 1,
    ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT = 1u << 2,
    ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT = 1u << 3,
    ADAG_COMPILE_PARAM_NAME = 1u << 4,
    ADAG_COMPILE_PARAM_SPIN = 1u << 5,
    ADAG_COMPILE_PARAM_COMM_TIMEOUT = 1u << 6,
    ADAG_COMPILE_PARAM_DRIVER_DEVICE = 1u << 7,
    ADAG_COMPILE_PARAM_TRACE = 1u << 8,
};

/* Every default below is a setting of the graph's runtime (see
 * "Configuration"); the numbers are the settings' own defaults. */
typedef struct {
    uint64_t field_mask;       /* ADAG_COMPILE_PARAM_* bits */
    unsigned max_inflight;     /* executions in flight; default ADAG_MAX_INFLIGHT (8) */
    /* the slot size of a value whose channel has none of its own (neither
     * a static tensor nor adag_node_channel's max_bytes), 1..2^40;
     * default ADAG_SLOT_CAPACITY (1 MiB) */
    size_t slot_capacity;
    int execute_timeout_ms;    /* how long a blocking execute waits for room (and for
                                  other threads' executes); -1 forever, else >= 0;
                                  default ADAG_EXECUTE_TIMEOUT_MS (60000) */
    int teardown_timeout_ms;   /* >= 0; how long each worker may take to stop its loop
                                  at teardown before it is killed (all workers at once);
                                  default ADAG_TEARDOWN_TIMEOUT_MS (5000) */
    const char *name;          /* for messages and DOT; default "dag<n>" */
    /* wait policy of every channel wait of this DAG: spin at most this many ns
     * before sleeping on a futex (0: sleep at once; each wait adapts below
     * it); default ADAG_SPIN_NS, or ADAG_SPIN_NS_CROWDED when the DAG has
     * more actors + 1 than the CPUs this process may run on */
    int64_t spin_ns;
    /* how long a device communication op of the DAG (a copy between
     * devices or to/from host memory, a stream's wait for a peer's value)
     * may take: past it the DAG fails with ADAG_ERR_TIMEOUT naming the op,
     * the execution and the peer, and its streams stop waiting on peers;
     * 0 or -1: not watched; default ADAG_COMM_TIMEOUT_MS (60000) */
    int comm_timeout_ms;
    /* the driver's device, "<backend>:<index>" ("cuda:0", "emu:1"): the
     * DAG opens it in this process, and the graph's tensor inputs and
     * outputs (adag_node_tensor, transport not HOST) live on it: execute
     * copies each tensor input into its device slot (from host memory,
     * or from a tensor on that device, ADAG_DEVICE(kind, index)), and get
     * returns device views (device ADAG_DEVICE(kind, index)), ready in the
     * order of the DAG's stream (adag_dag_stream); default none: tensors
     * reach the driver in host memory */
    const char *driver_device;
    /* tracing (adag_dag_write_trace): the records each actor loop and the
     * driver keep, in memory, the oldest overwritten (one per op: its four
     * spans; rounded up to a power of two, 16 .. 2^20; 64 bytes each; 0:
     * off, and tracing then costs nothing); a traced DAG also times its
     * statistics (adag/stats.h); default ADAG_TRACE_SPANS (0) */
    uint64_t trace_spans;
} adag_compile_params_t;

/* Validates the graph and compiles it into channels and per-actor schedules,
 * then starts every actor's loop. A graph compiles once. A graph the
 * compiler cannot run (empty, no outputs, an unused input field, an actor
 * destroyed or dead, a channel its endpoints cannot have) is
 * ADAG_ERR_INVALID naming the node, actor or tensor; a backend that cannot
 * run here (no libnccl) ADAG_ERR_NOT_FOUND; a value declared with a static
 * dtype and shape (adag_node_tensor) whose bytes exceed its slot capacity
 * ADAG_ERR_TOO_LARGE naming the node, its channel and both sizes (it could
 * never be written). */
ADAG_API adag_status_t adag_graph_compile(adag_graph_h graph, const adag_compile_params_t *params,
                                          adag_dag_h *dag);

/* ------------------------------------------------------------------ */
/* Compiled DAGs                                                       */
/* ------------------------------------------------------------------ */

typedef uint64_t adag_ref_t;

enum {
    ADAG_EXECUTE_NONBLOCK = 1u << 0, /* return ADAG_ERR_AGAIN instead of waiting for room */
};

/* Starts one execution with `inputs` (one per input field; NULL with n 0
 * for a DAG without input fields, whose methods take no argument or the
 * values of other methods) and returns its ref at once. An input is host
 * bytes or a host tensor (device ADAG_DEVICE_HOST; its size must be its
 * shape's bytes) and must match a static dtype/shape declared for its
 * field. It is the zero-copy path below with a copy: each input is copied
 * into the view adag_dag_reserve would give (host memory is the caller's
 * again when execute returns) and committed. With a driver device
 * (adag_compile_params_t.driver_device), a tensor field's input may also
 * be a tensor on that device (ADAG_DEVICE(kind, index)): it is copied on the
 * DAG's stream (adag_dag_stream), in that stream's order. Up to
 * max_inflight executions run pipelined. Ref r reuses the slots of ref
 * r - max_inflight, so while that ref is not released, execute waits for
 * it (up to the execute timeout; ADAG_ERR_TIMEOUT names the ref to
 * release), or with ADAG_EXECUTE_NONBLOCK returns ADAG_ERR_AGAIN. It never
 * fails just for being busy. Several threads may execute on one DAG:
 * executions start in ref order; a thread waiting for room, or for another
 * thread taking the next ref, honours NONBLOCK (ADAG_ERR_AGAIN at once)
 * and its own execute timeout. No lock is held across any wait. */
ADAG_API adag_status_t adag_dag_execute(adag_dag_h dag, const adag_value_t *inputs, unsigned n,
                                        unsigned flags, adag_ref_t *ref);

/* ---- zero-copy inputs ----
 *
 * Inputs written in place, bytes or tensors, into host or device memory,
 * from any number of threads:
 *
 *     adag_input_view_t v;
 *     adag_dag_reserve(dag, 0, &v, 1, &ref);          // room for ref; a view per input
 *     fill(v.data, n);                                 // write the input there
 *     adag_value_t in = {.data = v.data, .size = n};   // what was written, and where
 *     adag_dag_commit(dag, ref, &in, 1);               // the execution starts
 *
 * adag_dag_reserve waits for room like adag_dag_execute (same flags and
 * timeout) and gives the next execution's ref and, per input field, a view
 * of where to write it:
 *   - an input in host memory: `data` is its channel slot itself;
 *   - an input on the driver's device (a tensor field of a DAG with a
 *     driver_device): `device_data` is its device slot and `stream` the
 *     DAG's stream (adag_dag_stream's); `data` is a pinned host staging
 *     buffer of that slot, owned by the DAG (allocated at compile time,
 *     one per input and execution in flight). Write either: the staging
 *     (portable: the commit enqueues its copy to the device slot on the
 *     stream, and the DAG reuses the buffer only once that copy ran), or
 *     the device slot directly, by work enqueued on `stream` after the
 *     reserve returned (CUDA: cudaMemcpyAsync(v.device_data, src, n,
 *     cudaMemcpyDefault, (cudaStream_t)v.stream) or a kernel on it; the
 *     emulated "emu" device: adag_dag_enqueue): the reserve already put
 *     there the waits for the slot's previous readers, and what reads the
 *     value is ordered after everything enqueued on the stream before the
 *     commit.
 * Each view says how much fits (`capacity`) and what the field declares
 * (`flags`, and with them dtype and shape), so a client knows what to
 * commit.
 *
 * adag_dag_commit gives each input's final size and kind: bytes ({.data,
 * .size}), or a tensor (kind ADAG_VALUE_TENSOR, dtype, ndim, shape; size
 * the shape's bytes), and where it was written: `data` is the view's
 * `data` with device ADAG_DEVICE_HOST, or the view's `device_data` with
 * device ADAG_DEVICE(kind, index) (a tensor written on the stream); NULL is
 * allowed for size 0. A size above the capacity (ADAG_ERR_TOO_LARGE), a
 * value that does not match a static dtype/shape of its field or a pointer
 * that is not the view's (ADAG_ERR_INVALID, naming the input and both)
 * leaves the execution reserved: fix and commit again, or cancel it.
 * adag_dag_cancel drops a reservation.
 *
 * Up to max_inflight executions can be reserved at once, by any threads,
 * filled in parallel and committed or cancelled in any order, by any
 * thread; executions start in ref order, so a committed one starts once
 * every earlier one is committed or cancelled (a cancelled ref never
 * becomes a result: get and release refuse it). Only taking the next ref
 * is done one thread at a time, briefly; no lock is held across any wait.
 * A thread holding a reservation that executes, or reserves again, takes
 * the next ref: it waits for room like any other (the window may be full
 * of its own reservations). adag_dag_destroy drops the reservations of the
 * calling thread at once and waits up to the teardown timeout for those
 * of other threads to be committed or cancelled (a commit it meets cancels
 * the ref and returns ADAG_ERR_CLOSED); it then drops what is left and
 * returns, after which the views and the DAG handle are gone. */

/* Flags of adag_input_view_t: what adag_node_tensor declared of the field. */
enum {
    ADAG_INPUT_TENSOR = 1u << 0,       /* declared a tensor */
    ADAG_INPUT_STATIC_DTYPE = 1u << 1, /* its dtype is fixed: `dtype` */
    ADAG_INPUT_STATIC_SHAPE = 1u << 2, /* its shape is fixed: `ndim`, `shape` */
};

/* Where one input of a reserved execution is written (filled by the
 * library: every field set, reserved words zero). */
typedef struct {
    void *data;            /* host memory to write into: the slot, or the device
                              input's pinned staging */
    void *device_data;     /* an input on the driver's device: its device slot; else NULL */
    void *stream;          /* with device_data: the DAG's stream (adag_dag_stream); else NULL */
    size_t capacity;       /* bytes that fit, in data and in device_data: the input
                              channel's slot size (adag_node_channel) */
    int32_t device;        /* where the input lives: ADAG_DEVICE_HOST or ADAG_DEVICE(kind, index) */
    uint32_t flags;        /* ADAG_INPUT_* */
    adag_dtype_t dtype;    /* with ADAG_INPUT_STATIC_DTYPE; else ADAG_DTYPE_BYTES */
    uint32_t ndim;         /* with ADAG_INPUT_STATIC_SHAPE; else 0 */
    int64_t shape[ADAG_MAX_DIMS]; /* shape[0..ndim); the rest 0 */
    uint64_t reserved[4];  /* zero: room for later fields */
} adag_input_view_t;

/* Reserves the next execution: *ref and views[0..n) (n = the DAG's input
 * fields; views NULL with n 0 for a DAG without inputs). */
ADAG_API adag_status_t adag_dag_reserve(adag_dag_h dag, unsigned flags, adag_input_view_t *views,
                                        unsigned n, adag_ref_t *ref);
/* Starts reserved execution `ref` with inputs[0..n) as written. */
ADAG_API adag_status_t adag_dag_commit(adag_dag_h dag, adag_ref_t ref,
                                       const adag_value_t *inputs, unsigned n);
ADAG_API adag_status_t adag_dag_cancel(adag_dag_h dag, adag_ref_t ref);

/* Describes the DAG's input fields without reserving anything: *ninputs,
 * and views[0..min(n, *ninputs)) as adag_dag_reserve fills them, with
 * data, device_data and stream NULL (views may be NULL with n 0). */
ADAG_API adag_status_t adag_dag_inputs(adag_dag_h dag, adag_input_view_t *views, unsigned n,
                                       unsigned *ninputs);

/* The DAG's name (adag_compile_params_t.name, or "dag<n>"), valid until
 * adag_dag_destroy. */
ADAG_API const char *adag_dag_name(adag_dag_h dag);

/* A copy of the settings the DAG runs on (its runtime's), as a
 * configuration object the caller releases with adag_config_release
 * (what a component fed by or feeding the DAG, such as a data source,
 * takes its settings from). */
ADAG_API adag_status_t adag_dag_config(adag_dag_h dag, adag_config_h *config);

/* Waits up to timeout_ms (-1 forever, 0 poll; other negative values are
 * ADAG_ERR_INVALID) for execution `ref` and fills
 * outputs[0..n-1] (n = number of graph outputs) with zero-copy views that
 * stay valid until adag_dag_release(ref). Any order of refs works. Outputs
 * are in host memory (with a driver device, a tensor field's output is a
 * view of device memory instead: device ADAG_DEVICE(kind, index), ready in
 * the order of adag_dag_stream): bytes, or a tensor (kind ADAG_VALUE_TENSOR, with its
 * dtype and shape) for a tensor written with adag_call_output_tensor (one
 * that a device-bound actor wrote comes back by an async copy).
 * ADAG_ERR_TIMEOUT leaves the ref valid; ADAG_ERR_METHOD / ADAG_ERR_TOO_LARGE
 * report a failed execution (message in adag_last_error()); the ref must
 * still be released. A result keeps its slots until released: slots are
 * reused in ref order, so while ref r is unreleased, execute of ref
 * r + max_inflight waits (and then fails with ADAG_ERR_TIMEOUT naming r);
 * copy a result out if it must outlive the window. */
ADAG_API adag_status_t adag_dag_get(adag_dag_h dag, adag_ref_t ref, adag_value_t *outputs,
                                    unsigned n, int timeout_ms);

/* Gives the execution's result slots back; the ref becomes invalid. May be
 * called before the execution finished (its result is then dropped). */
ADAG_API adag_status_t adag_dag_release(adag_dag_h dag, adag_ref_t ref);

/* A file descriptor that polls readable exactly while some executed ref
 * has its result ready and has been neither got nor released (and once the
 * DAG failed): after the get or release of the last such ref it no longer
 * polls readable, so a level-triggered event loop never spins. Once armed
 * by this call, the runtime's monitor thread follows the DAG's results to
 * keep it so (a few microseconds after each result). The DAG owns it: do
 * not read or close it. */
ADAG_API adag_status_t adag_dag_fd(adag_dag_h dag, int *fd);

/* The stream of the DAG's driver device (adag_compile_params_t.
 * driver_device), in its backend's own type (a cudaStream_t on CUDA):
 * device tensor inputs are read and written (a zero-copy input's
 * device_data), and device outputs that get returns are ready, in its
 * order; enqueue work that reads an output there (before
 * adag_dag_release), or synchronize it. ADAG_ERR_INVALID without a driver
 * device. */
ADAG_API adag_status_t adag_dag_stream(adag_dag_h dag, void **stream);
/* Waits (host) up to timeout_ms (-1 forever) until the work enqueued on
 * that stream so far is done: after it, device outputs already got can be
 * read (on the emulated device, from host code). */
ADAG_API adag_status_t adag_dag_stream_sync(adag_dag_h dag, int timeout_ms);
/* Runs fn(args') on that stream, after the work enqueued there so far,
 * where args' is a copy of args[0..size) (size <= 256) made now: the
 * driver's adag_call_enqueue. On the emulated "emu" device this is how
 * the driver writes device memory in the stream's order (device pointers
 * are host addresses there: a zero-copy input's device_data, see
 * adag_dag_reserve); on CUDA fn runs on a host thread and must not touch
 * device memory or call CUDA (use cudaMemcpyAsync or a kernel on the
 * stream). ADAG_ERR_INVALID without a driver device. */
ADAG_API adag_status_t adag_dag_enqueue(adag_dag_h dag, void (*fn)(void *args), const void *args,
                                        size_t size);

/* Writes the compiled graph in Graphviz DOT to out (see "Writers"): each
 * actor labelled with its placement and device ("s1 (process, device
 * cuda:0)", "s2 (remote, node 10.0.0.2:7000, no device)"), its CPUs and
 * wait policy and its READ/COMPUTE/WRITE schedule, each edge with its
 * channel kind. adag_dag_format_dot writes it into buf[0..len) instead. */
ADAG_API adag_status_t adag_dag_write_dot(adag_dag_h dag, adag_writer_t out);
ADAG_API adag_status_t adag_dag_format_dot(adag_dag_h dag, char *buf, size_t len,
                                           size_t *needed);

/* Writes the DAG's trace (ADAG_COMPILE_PARAM_TRACE or ADAG_TRACE_SPANS) to
 * out (see "Writers": an fd, or a callback that keeps or sends it; it has
 * no buffer form, being megabytes that change with every call) as
 * Chrome trace-event JSON (Perfetto, chrome://tracing): a track per actor
 * loop and the driver, each span (wait input, compute, wait room, publish,
 * collective; a backend's ucx send or device copy inside them; execute,
 * get) with its ref, op and channel, on the driver's clock. Copied while
 * the DAG runs; a track's name counts the records lost (overwritten; one
 * record holds an op's four spans). Every actor is asked at once; one
 * that has not answered within ADAG_STATS_TIMEOUT_MS (1000 ms: stopped,
 * busy with a long control request) keeps an empty track named
 * "...: no answer", otherData's "unanswered" maps its name to why, and the
 * call still succeeds. ADAG_ERR_INVALID on a DAG compiled without
 * tracing. Statistics of the same DAG: adag/stats.h. */
ADAG_API adag_status_t adag_dag_write_trace(adag_dag_h dag, adag_writer_t out);

/* Where the DAG's first stage runs: the placement of the actors that read
 * its input fields (their CPUs together; their NUMA node, GPU and NIC if
 * they share one). What a front stage feeding the DAG (the data source's
 * threads) binds to. A DAG whose inputs only the driver reads gives the
 * driver's CPUs, not bound. */
ADAG_API adag_status_t adag_dag_input_placement(adag_dag_h dag, adag_actor_placement_t *out);

/* adag_dag_stats and the per actor, op and channel figures: adag/stats.h
 * (included below). */

/* Stops every actor loop of this DAG (executions in flight are abandoned)
 * and frees its channels. The stop goes to every worker at once and each
 * has the whole teardown timeout: only a worker whose method does not
 * return by then is killed (which fails the other DAGs it serves); healthy
 * workers, and the other DAGs they serve, go on. Blocked execute/get
 * calls on other threads return ADAG_ERR_CLOSED; executions reserved by
 * the calling thread are dropped, those of other threads are
 * waited for up to the teardown timeout and then dropped (adag_dag_reserve):
 * destroy returns whatever a client left reserved. A worker's loop that
 * fails (a malformed slot, a protocol error) fails its DAG with the loop's
 * message; the worker and its other DAGs go on. */
ADAG_API adag_status_t adag_dag_destroy(adag_dag_h dag);

#include "adag/stats.h"

#ifdef __cplusplus
}
#endif
#endif /* ADAG_H */

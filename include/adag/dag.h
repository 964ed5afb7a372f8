/*
 * Compiled DAGs: executing (with inputs copied, or written in place:
 * reserve and commit), getting and releasing results, the DAG's fd and
 * stream, DOT and trace output, and destroying it.
 *
 * A part of <adag.h>, which programs and modules include (it includes
 * every part, in order; this one includes the parts it builds on).
 */
#ifndef ADAG_DAG_H
#define ADAG_DAG_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * again when execute returns) and committed; an input of 4 MiB or more is
 * copied by up to 8 threads of the runtime (no more than the CPUs the
 * caller may run on; started at the first such copy), a smaller one on the
 * caller's thread. For large tensors, writing them in the reserved view
 * saves that copy. With a driver device
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

#ifdef __cplusplus
}
#endif
#endif /* ADAG_DAG_H */

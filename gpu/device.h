/*
 * Devices: one ops table per backend, the way channels have theirs. The
 * layers above (device channels, tensors, device-bound actors) call only
 * this table, so every rule of the GPU path runs the same on the emulated
 * device "emu" (gpu/host.c: CPU-only machines, the tests) and on CUDA
 * (gpu/cuda.c: the CUDA runtime loaded with dlopen).
 *
 * Semantics every backend keeps (CUDA's):
 *   - a stream runs its operations in the order they were enqueued, each
 *     after the previous one finished; enqueueing never waits for the work;
 *   - event_record(ev, s) captures "everything enqueued on s so far"; the
 *     event completes when that work has; recording again moves it;
 *   - stream_wait_event(s, ev) makes later work on s wait for ev's capture
 *     (the host thread does not wait); an event never recorded is complete;
 *   - memory and events can be exported as a handle (bytes + fds) that
 *     another process imports: it then sees the same bytes and can wait on
 *     the same event. The exporting process may import its own handle too
 *     (thread actors of one process): that import is an *alias* of the
 *     exporter's object, with no IPC (CUDA refuses to open a handle in the
 *     process that made it; the emulated device does not map its memfd a
 *     second time), counted as an import, and it stays valid until its
 *     mem_unimport / event_destroy even if the exporter frees the object
 *     first (the last of them frees it). A handle names its exporting
 *     process, so an import tells the two cases apart;
 *   - host_fn(s, fn, arg) runs fn on a backend thread in s's order (it must
 *     not call the device API);
 *   - a stream can capture its work into a graph that is then launched as
 *     one operation, many times (stream_capture_begin below).
 * Every backend counts what is live (memory, streams, events, imports), so
 * tests can check that teardown returns each count to zero. An object
 * counts until its holder frees it (mem_free, event_destroy, ...), even
 * where queued work or an alias keeps the backend's object a while longer.
 */
#ifndef ADAG_GPU_DEVICE_H
#define ADAG_GPU_DEVICE_H

#include <adag.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The backends are named by the public kinds (adag_device_kind_t):
 * ADAG_DEV_EMULATED (gpu/host.c, "emu") and ADAG_DEV_CUDA (gpu/cuda.c,
 * "cuda"); ADAG_DEV_HOST, host memory, has none. Kinds are below this. */
#define ADAG_DEVICE_KIND_COUNT 3

#define ADAG_DEVICE_MAX_FDS 2
#define ADAG_DEVICE_ARGS_MAX 256

typedef struct adag_device_ops adag_device_ops_t;

/* What an opened device takes from the settings of the runtime it serves
 * (common/settings.h). open fills it from the environment (a device opened
 * outside any runtime: tests, benchmarks); dag/exec/actor_device.c then sets
 * its runtime's values, before any work is enqueued. The emulated device
 * uses both; CUDA neither. */
typedef struct {
    /* ADAG_EMU_COPY_MBPS: a copy of n bytes takes at least n / copy_mbps
     * us, read when the copy is enqueued; 0: memmove speed */
    int64_t copy_mbps;
    /* ADAG_SPIN_NS_CROWDED: the spin of a stream's thread and of
     * stream_sync before they sleep, read when the stream is created */
    int64_t spin_ns;
    /* ADAG_DEVICE_MEMOPS: device channels hand off between processes by
     * stream memory operations (value_* below) where every endpoint's
     * device has them (1), or always by IPC events (0); read by the
     * channels at open */
    int memops;
} adag_device_tuning_t;

/* One opened device (backends embed it first). */
typedef struct {
    const adag_device_ops_t *ops;
    unsigned index;
    adag_device_tuning_t tuning;
} adag_device_t;

/* Device memory (or pinned host memory). */
typedef struct {
    void *ptr;      /* a device address (on the emulated device: a host address) */
    size_t size;
    void *impl;     /* the backend's */
} adag_dev_mem_t;

typedef struct adag_dev_stream adag_dev_stream_t;
typedef struct adag_dev_event adag_dev_event_t;
/* Recorded stream work, launched as one operation (stream_capture_begin). */
typedef struct adag_dev_graph adag_dev_graph_t;

#define ADAG_DEVICE_HANDLE_BYTES 128

/* What an exported handle carries: opaque bytes (a CUDA IPC handle is 64;
 * the emulated device's names the exporter's pid and memfd), so a handle
 * travels in any message. No backend exports fds today; an importer takes
 * (closes) any fds it is given and refuses a handle that has some. */
typedef struct {
    uint8_t bytes[ADAG_DEVICE_HANDLE_BYTES];
    uint32_t len;
    int fds[ADAG_DEVICE_MAX_FDS];
    unsigned nfds;
} adag_dev_handle_t;

typedef struct {
    uint64_t mem, host_mem, streams, events, imported_mem, imported_events;
    uint64_t registered; /* host_register'ed ranges not yet unregistered */
    uint64_t graphs;     /* graphs from stream_capture_end not yet freed */
    /* value ops queued on streams so far, one by one (not those of a
     * capture, which its graph's launches run): emu only, else 0 */
    uint64_t value_ops;
} adag_device_counts_t;

typedef void (*adag_host_fn)(void *arg);

/* Stream memory operations ("value ops"): a stream writes a 64-bit word
 * when it reaches that point, or waits until a word reaches a value, so
 * that a stream of one process orders its work after a stream of another
 * with neither an event nor a host thread on the path (CUDA:
 * cuStreamWriteValue64 / cuStreamWaitValue64).
 *
 * A word is a *cell* of ADAG_DEV_WORD_BYTES bytes, 64-aligned, zeroed
 * before first use, in host memory that every process using it maps (a
 * channel's ring) and that this process registered with the backend
 * (host_register); the value is its first 8 bytes, the rest the backend's
 * (the emulated device's futex handshake). The host reads the value with
 * an atomic load at any time (a watchdog sees progress without the
 * device) and may write it with word_store (an abort).
 *
 * Waits compare cyclically, as CUDA's GEQ does: a wait for v ends once
 * (int64_t)(value - v) >= 0. Writers only ever raise a word by less than
 * 2^62 at a time, so ADAG_DEV_WORD_ABORT, stored by the host, releases
 * every wait for a value below it: a stuck wait is given up that way. A
 * write by a stream happens after everything enqueued before it on that
 * stream, its effects (copies, kernels' writes) visible to whoever the
 * write releases. */
#define ADAG_DEV_WORD_BYTES 64
#define ADAG_DEV_WORD_ABORT ((UINT64_C(1) << 62) | UINT64_C(0xffffffff))

typedef struct {
    _Atomic uint64_t *host; /* the cell in this process's mapping */
    uint64_t dev;           /* its address for the device's operations */
} adag_dev_word_t;

struct adag_device_ops {
    const char *name; /* "emu", "cuda" */
    adag_device_kind_t kind;
    /* How many devices this backend has here; 0 and why not (never NULL
     * errors: "no driver (cudaErrorInsufficientDriver)", "not built"). */
    unsigned (*probe)(char *why, size_t len);
    adag_status_t (*open)(unsigned index, adag_device_t **out);
    void (*close)(adag_device_t *dev);
    /* Device index's PCI bus id ("0000:07:00.0"), without opening it, for
     * the topology map; NULL (or ADAG_ERR_NOT_FOUND): not a PCI device. */
    adag_status_t (*pci_bus_id)(unsigned index, char *buf, size_t len);
    /* Makes the calling thread use dev (CUDA: cudaSetDevice). */
    adag_status_t (*bind_thread)(adag_device_t *dev);

    adag_status_t (*mem_alloc)(adag_device_t *dev, size_t size, adag_dev_mem_t *mem);
    void (*mem_free)(adag_device_t *dev, adag_dev_mem_t *mem);
    adag_status_t (*host_alloc)(adag_device_t *dev, size_t size, adag_dev_mem_t *mem);
    void (*host_free)(adag_device_t *dev, adag_dev_mem_t *mem);
    /* Page-locks host memory that something else allocated (a channel's
     * shared-memory slots), for the whole process and every device of the
     * backend (CUDA: cudaHostRegister, portable and mapped: a word may
     * live in it), so copy_async to and
     * from it runs without the host waiting. copy_async with *pageable*
     * host memory (neither host_alloc'd nor registered) may be synchronous:
     * CUDA then returns only once the stream reached the copy and did it,
     * and the emulated device does the same. ptr and size are rounded out to
     * whole pages; a range that overlaps a registered one is refused
     * (ADAG_ERR_INVALID). *reg records it for host_unregister. */
    adag_status_t (*host_register)(adag_device_t *dev, void *ptr, size_t size,
                                   adag_dev_mem_t *reg);
    void (*host_unregister)(adag_device_t *dev, adag_dev_mem_t *reg);
    /* Export memory to another process / open it there / close the import. */
    adag_status_t (*mem_export)(adag_device_t *dev, const adag_dev_mem_t *mem,
                                adag_dev_handle_t *h);
    /* Takes h's fds (also on failure). */
    adag_status_t (*mem_import)(adag_device_t *dev, adag_dev_handle_t *h, adag_dev_mem_t *mem);
    void (*mem_unimport)(adag_device_t *dev, adag_dev_mem_t *mem);

    adag_status_t (*stream_create)(adag_device_t *dev, adag_dev_stream_t **s);
    void (*stream_destroy)(adag_device_t *dev, adag_dev_stream_t *s); /* waits for its work */
    /* Copies size bytes (any direction: the addresses say) in s's order. */
    adag_status_t (*copy_async)(adag_dev_stream_t *s, void *dst, const void *src, size_t size);
    adag_status_t (*host_fn)(adag_dev_stream_t *s, adag_host_fn fn, void *arg);
    /* Like host_fn with fn(copy of args[0..size)), the copy made now
     * (size <= ADAG_DEVICE_ARGS_MAX), the way a kernel launch copies its
     * parameters. */
    adag_status_t (*launch_host)(adag_dev_stream_t *s, adag_host_fn fn, const void *args,
                                 size_t size);
    /* The stream in the backend's own type (cudaStream_t; s itself on the
     * emulated device), for code that launches its own work on it. */
    void *(*stream_native)(adag_dev_stream_t *s);
    /* Waits (host) until everything enqueued on s so far finished, or the deadline. */
    adag_status_t (*stream_sync)(adag_dev_stream_t *s, int64_t deadline);

    adag_status_t (*event_create)(adag_device_t *dev, adag_dev_event_t **ev);
    void (*event_destroy)(adag_device_t *dev, adag_dev_event_t *ev);
    adag_status_t (*event_record)(adag_dev_event_t *ev, adag_dev_stream_t *s);
    adag_status_t (*stream_wait_event)(adag_dev_stream_t *s, adag_dev_event_t *ev);
    /* ADAG_OK if complete, ADAG_ERR_AGAIN if not (never blocks). */
    adag_status_t (*event_query)(adag_dev_event_t *ev);
    /* Waits (host) for the event, or the deadline (ADAG_ERR_TIMEOUT). */
    adag_status_t (*event_sync)(adag_dev_event_t *ev, int64_t deadline);
    adag_status_t (*event_export)(adag_device_t *dev, adag_dev_event_t *ev,
                                  adag_dev_handle_t *h);
    /* Takes h's fds (also on failure). An imported event can be waited on
     * (stream_wait_event, event_query, event_sync), not recorded. */
    adag_status_t (*event_import)(adag_device_t *dev, adag_dev_handle_t *h,
                                  adag_dev_event_t **ev);
    /* An event that can be timed (CUDA: created without
     * cudaEventDisableTiming): recorded, waited on and queried like any,
     * destroyed with event_destroy, but never exported (CUDA cannot share
     * a timed event; event_create's events, which the channels export,
     * cannot be timed). */
    adag_status_t (*event_create_timed)(adag_device_t *dev, adag_dev_event_t **ev);
    /* The time from start's completion to end's (each event's latest
     * record), in ns, negative if end completed first; never blocks.
     * ADAG_ERR_AGAIN if either is not complete yet (no message);
     * ADAG_ERR_INVALID if either cannot be timed (not from
     * event_create_timed) or was never recorded. Resolution: the emulated
     * device's clock (CLOCK_MONOTONIC, ns); CUDA's about 0.5 us. */
    adag_status_t (*event_elapsed_ns)(adag_dev_event_t *start, adag_dev_event_t *end,
                                      int64_t *ns);

    /* Gives up on an imported event's exporter (a peer that died or
     * stopped): from now on every wait on ev in this process, queued on a
     * stream, running or later, completes at once (what the stream then
     * reads of the peer is undefined), so no stream waits forever for a
     * peer that will never record. Any thread, idempotent; an event this
     * process created is left alone, and abandoning an alias releases the
     * waits on that alias only, never those on the exporter's own event
     * (its waits go on until it records). CUDA has no such operation for IPC
     * events: there it does nothing (see docs/design.md, "Faults"). */
    void (*event_abandon)(adag_dev_event_t *ev);

    /* Value ops (see adag_dev_word_t). values_supported: nonzero if
     * streams of dev can run them, else 0 and why not (CUDA: the device's
     * CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS and
     * CAN_MAP_HOST_MEMORY, and the driver's entry points, found at open:
     * gpu/cuda_values.c); NULL in a table means never. word_map: the device's view of
     * the cell at host (ADAG_ERR_INVALID, with a message, if it is not
     * 64-aligned or not in memory this process registered). */
    int (*values_supported)(adag_device_t *dev, char *why, size_t len);
    adag_status_t (*word_map)(adag_device_t *dev, _Atomic uint64_t *host, adag_dev_word_t *w);
    /* The stream stores v into w once everything before it on s is done. */
    adag_status_t (*stream_write_value64)(adag_dev_stream_t *s, const adag_dev_word_t *w,
                                          uint64_t v);
    /* Later work on s waits until (int64_t)(w's value - v) >= 0. */
    adag_status_t (*stream_wait_value64)(adag_dev_stream_t *s, const adag_dev_word_t *w,
                                         uint64_t v);
    /* The host stores v (seq_cst) and wakes the waits it releases, in any
     * process (any thread; never waits). */
    void (*word_store)(const adag_dev_word_t *w, uint64_t v);

    /* Graphs (CUDA's stream capture). stream_capture_begin(s): from now on
     * the work enqueued on s (by any thread: copies, host_fn, launch_host
     * with its argument bytes copied now, event records and waits, value
     * ops, kernels launched on stream_native(s)) is recorded, not run;
     * nothing of it runs until the graph is launched. stream_capture_end(s,
     * &g) ends the capture and gives the executable graph (counted in
     * `graphs`); graph_launch(g, s2) enqueues the whole recorded work on s2
     * (any stream of g's device, s itself included) in its recorded order,
     * as ONE operation: what it costs the launching thread does not grow
     * with the graph's length. A graph may be launched any number of times,
     * each launch after what s2 had before it, like any operation; an event
     * recorded in the graph is recorded again by each launch (a record
     * "now"), a wait in the graph waits for the event's latest record as of
     * the launch, a value op writes or waits for the value it was recorded
     * with plus the launch's `shift` (mod 2^64; 0: as recorded), so a
     * graph whose value ops name an execution's number, captured at
     * execution k, serves execution k + d launched with shift d. (CUDA
     * updates each memory-operation node of the executable graph before a
     * launch whose shift differs from the last one's: a host call per
     * value op.) graph_destroy frees g once its launches have run (it may
     * be called with launches pending).
     *
     * Illegal during a capture, as in CUDA (cudaErrorStreamCaptureUnsupported,
     * then cudaErrorStreamCaptureInvalidated): stream_sync of the capturing
     * stream, event_query or event_sync of an event recorded in the capture,
     * copy_async with pageable host memory (neither device memory nor
     * host_alloc'd nor registered), a second stream_capture_begin of the
     * stream, graph_launch on it. The illegal call fails (ADAG_ERR_INVALID)
     * and invalidates the capture: later enqueues on s fail, and
     * stream_capture_end fails with a message naming the first illegal
     * operation; either way s is an ordinary stream again after
     * stream_capture_end. A capture is ended before its stream is
     * destroyed. Without a capture, every op behaves as before. */
    adag_status_t (*stream_capture_begin)(adag_dev_stream_t *s);
    adag_status_t (*stream_capture_end)(adag_dev_stream_t *s, adag_dev_graph_t **graph);
    adag_status_t (*graph_launch)(adag_dev_graph_t *graph, adag_dev_stream_t *s, uint64_t shift);
    void (*graph_destroy)(adag_device_t *dev, adag_dev_graph_t *graph);

    /* (emu: dev NULL gives the counts of all its devices in this process) */
    void (*counts)(adag_device_t *dev, adag_device_counts_t *c);
};

/* The backend of a kind (NULL if unknown, and for ADAG_DEV_HOST). */
const adag_device_ops_t *adag__device_backend(uint32_t kind);
/* (a backend's name is adag_device_kind_name(kind); a device id's name,
 * "cuda:1", is common/value.h's adag__device_name) */
/* [ptr, ptr + size) rounded out to whole pages (one page for size 0): what
 * host_register registers, on every backend. */
void adag__device_page_span(void *ptr, size_t size, void **base, size_t *len);
/* Closes the fds a handle still holds (an importer's, after a failure). */
void adag__dev_handle_close(adag_dev_handle_t *h);

/* Device specs, "<backend>:<index>" (adag_actor_params_t.device): at most
 * ADAG_DEVICE_SPEC_MAX - 1 bytes, the index decimal digits up to
 * ADAG_DEVICE_INDEX_MAX (adag.h: what a device id holds). */
#define ADAG_DEVICE_SPEC_MAX 64
/* The backend named `name` ("emu", "cuda"); NULL if none. */
const adag_device_ops_t *adag__device_backend_named(const char *name);
/* Parses a spec: ADAG_ERR_INVALID for malformed text, ADAG_ERR_NOT_FOUND
 * for an unknown backend (listing the known ones); the message quotes the
 * spec. Whether the device exists here is for the backend's probe. */
adag_status_t adag__device_parse(const char *spec, adag_device_kind_t *kind, unsigned *index);

#endif

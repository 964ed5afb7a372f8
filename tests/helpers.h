/*
 * Helpers shared by the test suites: status assertions that print
 * adag_last_error(), runtime/actor/DAG builders for the test actor classes
 * (one-piece setups: H_DAG), executions with int64 values, and
 * process-hygiene probes (open fds, child processes, memfd mappings). The
 * Criterion-free part is in builders.h and probes.h (included).
 */
#ifndef ADAG_TESTS_HELPERS_H
#define ADAG_TESTS_HELPERS_H

#include <adag.h>
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "builders.h"
#include "probes.h"
#include "test_actors.h"

/* Test(suite, fn_thread) and Test(suite, fn_process) running fn(placement),
 * with a timeout in seconds: a scenario written once for both placements. */
#define H_BOTH(suite, fn, to)                                                                 \
    Test(suite, fn##_thread, .timeout = (to)) { fn(ADAG_PLACEMENT_THREAD); }                  \
    Test(suite, fn##_process, .timeout = (to)) { fn(ADAG_PLACEMENT_PROCESS); }

/* ---- status assertions ---- */

/* Checks got == want; on failure the assertion message names the
 * expression, both statuses and adag_last_error(). The last error text is
 * saved first, so h_msg() returns it afterwards. */
void h_check_status(adag_status_t got, adag_status_t want, const char *expr, const char *file,
                    int line);
/* Checks got != ADAG_OK (any error): only for a call whose header promises
 * no particular status; where it names one, assert that one (ASSERT_ST). */
void h_check_fails(adag_status_t got, const char *expr, const char *file, int line);

#define ASSERT_ST(expr, want) h_check_status((expr), (want), #expr, __FILE__, __LINE__)
#define ASSERT_OK(expr) ASSERT_ST(expr, ADAG_OK)
#define ASSERT_FAILS(expr) h_check_fails((expr), #expr, __FILE__, __LINE__)

/* The message saved by the last ASSERT_* above (copy of adag_last_error()). */
const char *h_msg(void);

/* Asserts h_msg() contains needle (case-sensitive). */
#define ASSERT_MSG_HAS(needle)                                                            \
    cr_assert(strstr(h_msg(), (needle)) != NULL, "%s:%d: error message \"%s\" lacks \"%s\"", \
              __FILE__, __LINE__, h_msg(), (needle))
/* Asserts h_msg() contains needle, ignoring case. */
#define ASSERT_MSG_HAS_CI(needle)                                                          \
    cr_assert(strcasestr(h_msg(), (needle)) != NULL,                                      \
              "%s:%d: error message \"%s\" lacks \"%s\" (any case)", __FILE__, __LINE__,  \
              h_msg(), (needle))

/* ---- runtime, actors, graphs ---- */

/* A runtime with the "counter" and "broken" classes registered (for thread
 * actors). */
adag_runtime_h h_runtime(void);

/* A "counter" actor with the given placement, name (NULL: default) and
 * int64 offset (the init bytes). Asserts success. */
adag_actor_h h_counter(adag_runtime_h rt, adag_placement_t pl, const char *name, int64_t offset);

/* n counters named "<prefix><i>" with offsets[i] (offsets NULL: all 0). */
void h_counters(adag_runtime_h rt, adag_placement_t pl, const char *prefix, unsigned n,
                const int64_t *offsets, adag_actor_h *out);

/* Compiles g with cp; asserts success. (h_compile_params: builders.h) */
/* A device-bound actor of the device pipeline stage (tests/modules/gpu_stage.h)
 * on `device` (NULL: a host actor, host tensors): stage number, kernel time
 * in us; asserts success. */
adag_actor_h h_gpu_stage(adag_runtime_h rt, adag_placement_t pl, const char *name,
                         const char *device, int stage, int kernel_us);
/* input 0 (a tensor) -> a[0].step -> ... -> a[n-1].step, every step's
 * tensor declared; outputs (the last tensor, the last stage_info_t bytes);
 * compiled with cp; asserts success. */
adag_dag_h h_gpu_chain(adag_runtime_h rt, const adag_actor_h *a, unsigned n,
                       const adag_compile_params_t *cp);
/* The same chain, its input declared with `input` (a static dtype or
 * shape; NULL: per execution). */
adag_dag_h h_gpu_chain_input(adag_runtime_h rt, const adag_actor_h *a, unsigned n,
                             const adag_compile_params_t *cp, const adag_tensor_params_t *input);
/* The same chain, the tensors between stages declared with `transport`;
 * returns what compile returned (*dag NULL on failure). */
adag_status_t h_gpu_chain_via(adag_runtime_h rt, const adag_actor_h *a, unsigned n,
                              const adag_compile_params_t *cp, adag_transport_t transport,
                              adag_dag_h *dag);
adag_dag_h h_compile_with(adag_graph_h g, const adag_compile_params_t *cp);
/* Compiles g; max_inflight 0 and cap 0 mean defaults. Asserts success. */
adag_dag_h h_compile(adag_graph_h g, unsigned max_inflight, size_t cap);

/* Writes the DAG's trace to a new file; path (room for H_TRACE_PATH_MAX)
 * gets its name: the caller unlinks it. */
#define H_TRACE_PATH_MAX 32
void h_trace_write(adag_dag_h dag, char *path);
/* After 100 ms (the loops' last records written), writes the DAG's trace
 * to a temporary file and checks it with
 * tests/trace_check.py ARGS ("STAGES METHOD [backend]"); its output must
 * hold want. */
void h_trace_check(adag_dag_h dag, const char *args, const char *want);

/* The most actors the graph builders below take. */
#define H_MAX_ACTORS 8

/* A graph: input 0 -> actors[0].method -> actors[1].method -> ... -> output
 * (every method takes one argument). Returns the graph (not compiled). */
adag_graph_h h_chain_graph(adag_runtime_h rt, adag_actor_h *actors, unsigned n,
                           const char *method);
/* The same with a method per stage: input 0 -> st[0] -> ... -> st[n-1] -> output. */
adag_graph_h h_stages_graph(adag_runtime_h rt, const h_stage_t *st, unsigned n);
/* A fan-out: input 0 -> actors[i].method for each i; the n results are the
 * outputs, in order. */
adag_graph_h h_fanout_graph(adag_runtime_h rt, adag_actor_h *actors, unsigned n,
                            const char *method);

/* ---- one-piece setups: counters, a graph over them, the DAG ---- */

/* What H_GRAPH / H_DAG build (fields left out are 0): n "counter" actors
 * (in order, with h_counter), a chain input 0 -> a[0].m -> ... -> a[n-1].m
 * -> output or a fan-out (input 0 -> each a[i].m, all outputs), compiled with
 * the compile params given (0: that field's default). */
typedef struct {
    adag_placement_t pl;         /* default ADAG_PLACEMENT_THREAD */
    unsigned n;                  /* counters; 0 means 1 */
    const char *name;            /* one counter: its name (NULL: the default) */
    const char *prefix;          /* or: counters named "<prefix><i>" (h_counters) */
    const char *const *names;    /* or: counter i named names[i] */
    int64_t offset;              /* every counter's offset */
    const int64_t *offsets;      /* or: counter i's */
    const char *method;          /* every stage's method */
    const char *const *methods;  /* or: stage i's */
    int fanout;                  /* a fan-out, not a chain */
    unsigned max_inflight;
    size_t cap;
    int exec_timeout, teardown_timeout;
    adag_actor_h *actors;        /* out (optional): the n counters */
    adag_graph_h *graph;         /* out (optional): the graph; else the runtime destroys it */
} h_setup_t;

/* Creates the counters and builds the graph (not compiled). */
adag_graph_h h_setup_graph(adag_runtime_h rt, const h_setup_t *s);
/* ... and compiles it. Asserts success. */
adag_dag_h h_setup_dag(adag_runtime_h rt, const h_setup_t *s);

/* H_DAG(rt, .pl = pl, .name = "a", .method = "add", .max_inflight = 4): the
 * fields of h_setup_t as designated initializers. */
#define H_GRAPH(rt, ...) h_setup_graph((rt), &(const h_setup_t){__VA_ARGS__})
#define H_DAG(rt, ...) h_setup_dag((rt), &(const h_setup_t){__VA_ARGS__})

/* Bind helper: node = actor.method(args...); asserts success. */
adag_node_h h_bind(adag_graph_h g, adag_actor_h actor, const char *method,
                   const adag_node_h *args, unsigned nargs);
adag_node_h h_bind1(adag_graph_h g, adag_actor_h actor, const char *method, adag_node_h arg);
adag_node_h h_input(adag_graph_h g, unsigned field);

/* A value viewing *p (8 bytes). */
adag_value_t h_i64v(const int64_t *p);
/* The int64 held by v; asserts v.size == 8. */
int64_t h_val_i64(adag_value_t v);

/* The zero-copy path with one int64 input: writes x into view->data (a
 * view adag_dag_reserve gave for ref) and commits it as 8 bytes there;
 * returns the commit's status. */
adag_status_t h_commit_i64(adag_dag_h dag, adag_ref_t ref, const adag_input_view_t *view,
                           int64_t x);

/* Starts one execution with the int64 input x (copied); asserts ADAG_OK
 * and returns its ref. */
adag_ref_t h_execute(adag_dag_h dag, int64_t x);
/* get of ref's one output, an int64; asserts ADAG_OK (does not release). */
int64_t h_get_i64(adag_dag_h dag, adag_ref_t ref, int timeout_ms);

/* One execute/get/release with int64 inputs and outputs. */
void h_run_i64(adag_dag_h dag, const int64_t *in, unsigned nin, int64_t *out, unsigned nout);
/* One input, one output. */
int64_t h_roundtrip(adag_dag_h dag, int64_t x);

/* The log of a "devactor" d (tests/modules/device_actors.h), gathered as
 * its loop writes it: its readlog (which empties the log) through a DAG of
 * its own until n values came or 10 s passed. Returns how many came
 * (more than n fails the test). */
unsigned h_device_log(adag_runtime_h rt, adag_actor_h d, int64_t *log, unsigned n);

/* DOT text of a DAG (malloc'd; free it). */
char *h_dot(adag_dag_h dag);

/* Text the library writes (adag_writer_t), collected: text is malloc'd
 * and NUL-terminated (NULL until something came; free it). */
typedef struct {
    char *text;
    size_t len, cap;
} h_text_t;
/* A writer appending to *t (zero it first). */
adag_writer_t h_text_writer(h_text_t *t);

/* ---- process hygiene ---- */

/* Open fds of this process. */
int h_count_fds(void);

/* Child processes of this process (by ppid in /proc/<pid>/stat): up to max
 * pids into out (may be NULL), *zombies (may be NULL) = those in state Z.
 * Returns the number of children. */
int h_children(pid_t *out, int max, int *zombies);

/* Waits up to timeout_ms for this process to have no child (zombie or not)
 * and returns the number left. Does not reap. */
int h_wait_no_children(int timeout_ms);

/* Lines of /proc/self/maps that map a memfd ("memfd:" in the path). */
int h_count_memfd_maps(void);
/* Lines of /proc/self/maps that contain "memfd:adag". */
int h_count_adag_memfd_maps(void);

typedef struct {
    int fds;
    int memfd_maps;
} h_snapshot_t;

/* Records the fd count and memfd mappings (take it before creating a runtime). */
void h_snapshot(h_snapshot_t *s);
/* After teardown: asserts no child process (zombie or not) is left, the fd
 * count is back to the snapshot's, and no memfd mapping is left. */
void h_assert_clean(const h_snapshot_t *s);

/* ---- child drivers (a forked process that plays the driver) ---- */

/* The state of a process: 'R', 'S', 'T' (stopped), 'Z' ... or 0 if gone. */
char h_proc_state(pid_t pid);
/* Reaps pid if it is our child or was reparented to us (a subreaper);
 * returns 1 once it is gone. */
int h_gone(pid_t pid);
/* Waits up to ms for every pid to be gone; returns how many are left,
 * lists them in report and SIGKILLs them, so nothing outlives the test. */
int h_wait_gone(const pid_t *pids, int n, int ms, char *report, size_t len);

typedef struct {
    pid_t driver;
    int rfd; /* what the driver reports */
} h_child_driver_t;

/* Forks a driver running fn(wfd); fn reports on wfd and never returns. */
h_child_driver_t h_fork_driver(void (*fn)(int wfd));
/* Reads exactly n bytes of the driver's report (or fails the test). */
void h_read_report(h_child_driver_t *c, void *buf, size_t n);
/* SIGKILLs and reaps the driver. */
void h_kill_driver(h_child_driver_t *c);

/* ---- misc ---- */

/* 1 if fd polls readable within timeout_ms (asserts poll does not fail). */
int h_fd_readable(int fd, int timeout_ms);

/* Monotonic time in milliseconds. */
double h_now_ms(void);
void h_sleep_ms(int ms);
const char *h_pl_name(adag_placement_t pl);

#endif

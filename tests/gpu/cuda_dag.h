/*
 * test-cuda-dag (tests/gpu/README.md): the DAG scenarios of the emulated
 * device's suites (test_gpu_pipeline.c, test_driver_device.c,
 * test_device_faults.c) with "cuda_stage" process actors (cuda_stage.h,
 * libcuda_stage.so) on CUDA devices. A plain program on the public API:
 * test_cuda_dag.c runs each test in a fresh copy of itself; this header
 * is what the tests share (cuda_dag_common.c).
 */
#ifndef ADAG_TESTS_GPU_CUDA_DAG_H
#define ADAG_TESTS_GPU_CUDA_DAG_H

#include <adag.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_stage.h"

enum { PASS = 0, FAIL = 1, SKIP = 77 };

/* Why the running test skips (printed by the runner). */
extern char cdag_skip_reason[256];

/* `test-cuda-dag --emulate`: the same tests on the emulated device
 * (libcuda_stage_emulated.so, host helpers), a check of the test program
 * itself where no GPU is; tests that need CUDA itself skip. */
extern int cdag_emulated;
/* The spec of device i: "cuda:<i>" ("emu:<i>" emulated). */
const char *cdag_dev(unsigned i);
/* Its id: ADAG_DEVICE(ADAG_DEV_CUDA, i) (ADAG_DEV_EMULATED emulated). */
int32_t cdag_device(unsigned i);

/* Inside a test returning int with `int rc = PASS;` and an `out:` label:
 * on failure, says where and why, sets rc = FAIL and jumps to out. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: %s: ", __FILE__, __LINE__, #cond);                           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            rc = FAIL;                                                                             \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* An adag call that must succeed: a failure shows its status and message. */
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        adag_status_t st_ = (expr);                                                                \
        CHECK(st_ == ADAG_OK, "%s: %s", adag_status_str(st_), adag_last_error());                  \
    } while (0)

/* A CUDA helper of the module (cuda_stage.h) that must succeed; it takes
 * `cuerr` (a char[256] the test declares) as its message buffer. */
#define CHECK_CUDA(expr)                                                                           \
    do {                                                                                           \
        int e_ = (expr);                                                                           \
        CHECK(e_ == 0, "CUDA error %d: %s", e_, cuerr);                                            \
    } while (0)

/* ---- the tests (each returns PASS, FAIL or SKIP) ---- */

/* test_cuda_dag.c */
int cdag_test_pipeline(void);
int cdag_test_driver_device(void);
int cdag_test_driver_device_zero_copy(void);
int cdag_test_peer_copy(void);
int cdag_test_comm_transport(void);
int cdag_test_emu_and_cuda(void);
int cdag_test_thread_actors(void);
int cdag_test_ahead(void);
int cdag_test_graphs(void);
/* cuda_dag_faults.c */
int cdag_test_slow_kernel(void);
int cdag_test_stuck_transfer(void);
int cdag_test_sigkill(void);
int cdag_test_leaks(void);
/* cuda_dag_coll.c: collectives over cuda:0..min(4, devices)-1 */
int cdag_test_coll_allreduce(void);
int cdag_test_coll_reducescatter(void);
int cdag_test_coll_allgather(void);
int cdag_test_coll_broadcast(void);
int cdag_test_coll_method_error(void);
int cdag_test_coll_stuck(void);

/* ---- where a test can run ---- */

/* SKIP (with cdag_skip_reason set) unless the cuda backend has at least
 * `need` devices and the module was built; else PASS. */
int cdag_require(unsigned need);

/* The module's driver-side helpers (cuda_stage.h), found with dlsym in
 * libcuda_stage.so loaded into this process. */
typedef struct {
    void *lib;
    int (*host_init)(int device, char *err, size_t errlen);
    int (*mem_info)(size_t *free_bytes, size_t *total_bytes, char *err, size_t errlen);
    int (*malloc_)(void **ptr, size_t size, char *err, size_t errlen);
    int (*free_)(void *ptr, char *err, size_t errlen);
    int (*copy)(void *dst, const void *src, size_t n, void *stream, char *err, size_t errlen);
    int (*stream_sync)(void *stream, char *err, size_t errlen);
} cdag_cuda_t;

/* Loads the module and makes device 0 current with its context created:
 * PASS, or FAIL saying why. Emulated: plain host memory functions (no
 * mem_info; a copy is done when it returns, stream or not). */
int cdag_cuda_load(cdag_cuda_t *cu);
void cdag_cuda_unload(cdag_cuda_t *cu);

/* ---- actors and DAGs ---- */

/* A runtime (process actors find adag-worker next to libadag). */
adag_status_t cdag_runtime(adag_runtime_h *rt);

/* A "cuda_stage" process actor named name on device ("cuda:0"). */
adag_status_t cdag_stage(adag_runtime_h rt, const char *name, const char *device, int stage,
                         int spin_us, adag_actor_h *actor);
/* The same with the module given: ADAG_TEST_CUDA_MODULE for a cuda
 * device, ADAG_TEST_CUDA_EMULATED_MODULE for an emu one. */
adag_status_t cdag_stage_module(adag_runtime_h rt, const char *name, const char *device,
                                const char *module, int stage, int spin_us, adag_actor_h *actor);
/* The same with the placement given (ADAG_PLACEMENT_THREAD: the module is
 * loaded into this process, which then runs CUDA itself). */
adag_status_t cdag_stage_placed(adag_runtime_h rt, const char *name, const char *device,
                                const char *module, adag_placement_t placement, int stage,
                                int spin_us, adag_actor_h *actor);

/* How cdag_chain compiles. */
typedef struct {
    const char *name;          /* NULL: the default */
    unsigned max_inflight;
    size_t slot_capacity;
    int comm_timeout_ms;       /* 0: the default */
    const char *driver_device; /* NULL: none */
    adag_transport_t transport; /* of every tensor between stages (not the input) */
    /* nonzero: every tensor (the input too) declared f32[fixed] */
    int64_t fixed;
    int run_ahead; /* adag_compile_params_t.run_ahead (with fixed) */
    /* the stages' method: "apply" (one output, capturable), and the
     * compile option graphs; else "step" (two outputs) */
    int apply, graphs;
} cdag_chain_t;

/* input 0 (a tensor) -> a[0].step -> ... -> a[n-1].step, each step's
 * tensor declared; outputs (the last tensor, the last cuda_stage_info_t),
 * or with apply only the last tensor.
 * The graph is freed either way. */
adag_status_t cdag_chain(adag_runtime_h rt, const adag_actor_h *a, unsigned n,
                         const cdag_chain_t *o, adag_dag_h *dag);

/* The DAG's DOT text (malloc'd), or NULL. */
char *cdag_dot(adag_dag_h dag);

/* ---- values and the C reference ---- */

/* Every tensor dtype. */
extern const adag_dtype_t cdag_dtypes[];
#define CDAG_NDTYPES 10

/* The input of execution k: a dtype (every dtype in turn), 1..4 dims of
 * 1..5 (every 97th has a 0 dim), elements a pattern of k (valid values of
 * the dtype: bools 0/1, finite floats). */
typedef struct {
    adag_dtype_t dtype;
    unsigned ndim;
    int64_t shape[ADAG_MAX_DIMS];
    size_t n, bytes;
    unsigned char data[4096];
} cdag_input_t;

void cdag_make_input(cdag_input_t *in, uint64_t k);
/* A host tensor viewing in's data. */
adag_value_t cdag_input_value(const cdag_input_t *in);

/* 0 if out (elements at data, read from host memory) is in after stages
 * first..first+nstages-1 of stage_apply (tests/modules/gpu_stage.h), the
 * shape reversed once per stage; else 1, saying what differs and where. */
int cdag_check(const cdag_input_t *in, const adag_value_t *out, const void *data, int first,
               int nstages, uint64_t k);

/* ---- time and processes ---- */

int64_t cdag_now_ns(void);
double cdag_ms_since(int64_t t0_ns);

/* Waits up to ms for this process to have no child left; returns how many
 * are left (zombies count: a worker not yet reaped). */
int cdag_wait_no_children(int ms);

#endif

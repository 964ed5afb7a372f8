/*
 * adag-bench: every overhead of the runtime measured against what the
 * machine can do (baselines measured in the same run) and, with --vs-ray,
 * against Ray Compiled Graphs. A scenario and its baseline are declared
 * together in one table (bench/table.c); later transports add rows.
 */
#ifndef ADAG_BENCH_H
#define ADAG_BENCH_H

#include <adag.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    METRIC_LATENCY,    /* median_us: lower is better; ratio = adag / baseline */
    METRIC_THROUGHPUT, /* per_s: higher is better; ratio = adag / baseline */
    METRIC_BANDWIDTH,  /* gbps: higher is better; ratio = adag / baseline */
    METRIC_CPU,        /* percent of one core: lower is better; ratio = adag / budget */
    METRIC_TIME,       /* median_us of a one-off operation: lower is better */
} metric_t;

typedef struct {
    double median_us, p99_us, per_s, gbps, cpu_pct;
    long iterations;
} measure_t;

/* Device rows (bench/device.c, bench/device_raw.c): which way the bytes go. */
typedef enum {
    DEV_PATH_NONE = 0,
    DEV_PATH_SAME,  /* device k -> device k: zero copy */
    DEV_PATH_PEER,  /* device 0 -> device 1: one peer copy */
    DEV_PATH_H2D,   /* driver input -> device: async copy in */
    DEV_PATH_D2H,   /* device -> driver output: async copy out */
    DEV_PATH_H2D_ZC, /* driver input written in its slot (reserve/commit) -> device */
} dev_path_t;

/* The most executions in flight a device-bandwidth row runs. */
#define BENCH_DEV_INFLIGHT_MAX 8

/* Device hop rows: how one stream is ordered after another's. */
typedef enum {
    DEV_MECH_DEFAULT = 0, /* adag: the runtime's ADAG_DEVICE_MEMOPS as set; raw: events */
    DEV_MECH_IPC_EVENT,   /* events (adag: ADAG_DEVICE_MEMOPS=0) */
    DEV_MECH_MEMOPS,      /* value ops on words (adag: ADAG_DEVICE_MEMOPS=1) */
} dev_mech_t;

typedef struct {
    char name[32];       /* roundtrip, chain, ..., device-hop, device-bandwidth */
    char placement[16];  /* thread, process */
    unsigned n, inflight;
    size_t bytes;
    int64_t spin_ns;     /* the DAG's wait policy */
    metric_t metric;
    measure_t m;
    char baseline[64];   /* what it is compared with */
    double baseline_value;
    double ratio;        /* adag / baseline for the metric */
    int has_ray;
    measure_t ray;
    double ray_ratio;    /* how many times adag beats Ray (> 1: adag faster) */
    /* device rows */
    char device[8];      /* backend: "emu", "cuda"; "" for the other rows */
    dev_path_t path;
    unsigned hops;       /* device-hop: hand-offs in one round trip (in, between, out) */
    unsigned copies;     /* device-bandwidth: copies of the bytes the runtime makes */
    char mechanism[16];  /* device-hop: "ipc-event", "memops" ("" for the other rows) */
    char skipped[160];   /* not run, and why ("" = ran); never counted as a result */
    /* collective rows (allreduce): the baseline's bus bandwidth, and the
     * goal for this size, printed, never asserted */
    double baseline_gbps;
    char goal[64];       /* "" for the other rows */
    int per_collective;  /* allreduce-dag: print adag - baseline as the DAG's cost */
    int goal_met;
    /* placement rows: the scenario measured ("chain", "payload",
     * "device-hop") and the variant against placement off ("on", "pinned") */
    char scenario[16];
    char variant[8];
    /* tracing rows: what tracing costs, in percent (latency: on / off - 1;
     * throughput: off / on - 1), of the medians and of the best rounds,
     * and the wider spread of either variant's rounds (best / worst); the
     * goal is judged on the median of the rounds' own costs (paired_cost_pct:
     * each round on against the off round run right after it), unless the
     * spread says noise */
    int has_cost;
    double cost_pct, best_cost_pct, spread, paired_cost_pct;
    int noisy;
    /* llm rows (bench/llm.c): the figures of one configuration, bucket and
     * in flight (bench_llm_row_t); median_us is step_us */
    int llm;
    char llm_device[8]; /* llm rows: "emu" or "host" */
    int tp, pp, bucket, d_model, cpus;
    double step_us, compute_us, collective_us, overhead_us, single_us, untraced_step_us;
    double other_cpus, collective_dag_us;
} result_t;

/* How the actors a scenario creates are placed (the placement rows,
 * bench/placement.c; every other row: BENCH_PLACE_ON). ON leaves the
 * placement parameters out: adag's placement decides (ADAG_PLACEMENT=1: an
 * actor with a GPU on the CPUs and memory of its GPU's NUMA node, one
 * without unbound). OFF binds nothing: cpus = every CPU the process may use,
 * numa -1, nic "". PINNED: actor i on the i-th of those CPUs, round robin. */
typedef enum { BENCH_PLACE_ON = 0, BENCH_PLACE_OFF, BENCH_PLACE_PINNED } bench_place_t;

/* What writing a traced DAG's trace gave (the tracing rows,
 * bench/tracing.c): the time of adag_dag_write_trace to /dev/null, and the
 * bytes and complete spans of the JSON it writes. */
typedef struct {
    int written;
    double write_us;
    size_t bytes;
    unsigned long spans;
} bench_trace_seen_t;

typedef struct {
    int quick;
    unsigned seed;
    long iters;          /* executions per latency measurement */
    unsigned n;          /* actors in chain and scatter-gather (--n, default 4) */
    int reps;            /* measurements per scenario; the median one is kept (--reps) */
    const char *module;  /* the bench actor module .so */
    const char *only;    /* --only NAME, or NULL */
    bench_place_t place; /* how the scenario's actors are placed */
    /* when set, where the placement of the scenario's first actor goes */
    adag_actor_placement_t *place_seen;
    /* tracing (the tracing rows; every other row: trace_param 0, and
     * compile leaves ADAG_COMPILE_PARAM_TRACE out): when trace_param is
     * set, the scenario's DAG is compiled with ADAG_COMPILE_PARAM_TRACE and
     * trace_spans (0: off) */
    int trace_param;
    uint64_t trace_spans;
    /* when set, run_chain writes its DAG's trace after its executions
     * (bench_trace_write) and says what that gave here */
    bench_trace_seen_t *trace_seen;
    /* --stats: the chain rows print their DAG's figures (adag_stats_print)
     * to stderr after their executions (a tracing row: its last on round,
     * timed) */
    int print_stats;
    /* --llm-model default: the llm rows run llm_config_default (else a
     * model of half its width, bench/llm.c) */
    int llm_default_model;
    /* --llm-device: the llm rows' actors on the emulated device ("emu", the
     * default: tensors in device memory, the work on each actor's stream)
     * or host actors ("host") */
    const char *llm_device;
} bench_opts_t;

/* Runs an adag call; on failure prints it with its status and message and
 * jumps to the caller's `fail` label. */
#define TRY(call)                                                                           \
    do {                                                                                    \
        adag_status_t s_ = (call);                                                          \
        if (s_ != ADAG_OK) {                                                                \
            fprintf(stderr, "adag-bench: %s: %s: %s\n", #call, adag_status_str(s_),         \
                    adag_last_error());                                                     \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

/* measurement helpers (bench/stats.c) */
double bench_now_us(void);
/* The folder of the adag-bench executable ("" if unknown), where the bench
 * module's folder and adag-worker are. */
void bench_exe_dir(char *dir, size_t len);
/* adag-worker next to adag-bench: the runtime's default looks next to
 * libadag, which adag-bench links statically (bench/device_raw.c drives the
 * internal device ops table). */
const char *bench_worker_path(void);
void bench_summarize(double *lat_us, long n, double total_s, measure_t *m);
/* The figure a metric is judged by: median_us, per_s, gbps or cpu_pct. */
double bench_primary(metric_t metric, const measure_t *m);
/* The measurement of m[0..rounds) whose primary figure is the median (bench/placement.c). */
measure_t bench_median_round(metric_t metric, const measure_t *m, int rounds);

/* baselines (bench/baselines.c): raw shared memory between processes */
typedef enum { WAIT_SPIN, WAIT_FUTEX } wait_policy_t;

/* A 32-bit word in shared memory that one process sets and another waits
 * for. Every access is seq_cst, with a sleeper count for the futex (the
 * handshake of common/event.h): a setter that sees no sleeper skips the
 * wake, and a sleeper re-checks the word after counting itself. */
typedef struct {
    _Alignas(64) _Atomic uint32_t word;
    _Atomic uint32_t sleepers;
} bench_cell_t;
/* Waits until the word is `want`. With `abort` (may be NULL), gives up and
 * returns -1 once *abort is nonzero (checked at least every 100 ms). */
int bench_cell_wait(bench_cell_t *c, uint32_t want, wait_policy_t policy,
                    const _Atomic uint32_t *abort);
void bench_cell_set(bench_cell_t *c, uint32_t v);
/* A token passed around `parties` processes (2 = ping-pong); latency of one
 * full cycle. */
int baseline_relay(unsigned parties, wait_policy_t policy, long rounds, measure_t *m);
/* One word to n processes and n acknowledgements back. */
int baseline_fanout(unsigned n, wait_policy_t policy, long rounds, measure_t *m);
/* memcpy bandwidth for `bytes` between two buffers. */
int baseline_memcpy(size_t bytes, long reps, measure_t *m);
/* bench/data.c: a token dataset's epoch through a data source, and a
 * memcpy of the same samples in the same order */
int run_data_tokens(const bench_opts_t *o, measure_t *m);
int baseline_tokens_memcpy(const bench_opts_t *o, measure_t *m);
/* bench/data_images.c: the image rows (samples/s) */
int run_data_images(const bench_opts_t *o, measure_t *m);
int baseline_images_ideal(const bench_opts_t *o, measure_t *m);
/* 0 with its samples/s, 1 not installed (why says so), -1 failed */
int run_images_peer(const bench_opts_t *o, const char *peer, measure_t *m, char *why,
                    size_t why_len);
/* 0 if the peer's Python modules import; else why not */
int images_peer_available(const char *peer, char *why, size_t why_len);
/* mode 0 local files, 1 http with an empty cache, 2 http with a warm one */
int run_data_remote(const bench_opts_t *o, int mode, measure_t *m);
const char *wait_policy_name(wait_policy_t p);

/* adag scenarios (bench/scenarios.c) */
int run_chain(const bench_opts_t *o, adag_placement_t pl, unsigned n, unsigned inflight,
              int64_t spin_ns, long iters, measure_t *m);
int run_scatter_gather(const bench_opts_t *o, adag_placement_t pl, unsigned n, long iters,
                       measure_t *m);
/* zero_copy: inputs written in the slot (adag_dag_reserve/commit) */
int run_payload(const bench_opts_t *o, adag_placement_t pl, size_t bytes, int zero_copy,
                long iters, measure_t *m);
int run_idle(const bench_opts_t *o, adag_placement_t pl, double seconds, measure_t *m);
int run_compile(const bench_opts_t *o, adag_placement_t pl, unsigned n, int reps,
                measure_t *compile, measure_t *teardown);

/* placement (bench/placement.c) */
/* Creates actor `nth` of a scenario (0, 1, ...) with params, their
 * placement fields set for o->place; records actor 0's placement in
 * o->place_seen. 0, or -1 (printed). */
int bench_actor_create(const bench_opts_t *o, adag_runtime_h rt, unsigned nth,
                       const adag_actor_params_t *params, adag_actor_h *out);

/* tracing (bench/tracing.c) */
/* Writes dag's trace to /dev/null (timed) and to memory (its bytes and
 * spans counted) into *seen; both writes must return ADAG_OK and the JSON
 * hold a span. 0, or -1 (printed). */
int bench_trace_write(adag_dag_h dag, bench_trace_seen_t *seen);
/* The chain's figures (adag_stats_print) on stderr. */
int bench_print_stats(adag_dag_h dag, unsigned n, unsigned inflight);

/* device rows, adag side (bench/device.c): actors bound to devices
 * of `backend` ("emu" or "cuda"), tensors of `bytes`, every result checked.
 * device-hop: driver -> A(dev 0) -> B(dev 0 for SAME, 1 for PEER) -> driver,
 * A and B placed `pl`, the runtime's ADAG_DEVICE_MEMOPS set by `mech`
 * (DEV_MECH_DEFAULT: left as configured); the bandwidth rows: process actors.
 * device-bandwidth: H2D (execute, or H2D_ZC: reserve/commit) driver -> A ->
 * 16 B back; D2H 16 B -> A -> driver;
 * PEER 16 B -> A(dev 0) -> B(dev 1) -> 16 B back. */
int run_device_hop(const bench_opts_t *o, const char *backend, dev_path_t path,
                   adag_placement_t pl, dev_mech_t mech, size_t bytes, long iters, measure_t *m);
/* The device-hop rows' measurements: for each mechanism (0 ipc-event, 1
 * memops), adag's hop (actors placed pl) and the raw hop of the same
 * mechanism (3 processes for process actors, 2 threads of one process for
 * thread actors; the better wait policy), rounds alternating the four,
 * each figure the median of its rounds. why[i] (empty on entry) says why
 * mechanism i could not run (its figures left alone). 0, or -1 (printed). */
int run_device_hop_rounds(const bench_opts_t *o, const char *backend, dev_path_t path,
                          size_t bytes, adag_placement_t pl, measure_t adag[2], measure_t raw[2],
                          char why[2][160]);
/* device-bandwidth with `inflight` executions in flight: h2d, h2d-zero-copy
 * and d2h pipelined (the time between executions coming back); peer with 1
 * in flight, one execution at a time (its latency). */
int run_device_bandwidth(const bench_opts_t *o, const char *backend, dev_path_t path,
                         size_t bytes, unsigned inflight, long iters, measure_t *m);
/* Whether a row can run here: 0, or -1 with why not in why. */
int device_row_available(const char *backend, dev_path_t path, char *why, size_t len);

/* device rows, raw mechanism (bench/device_raw.c): the same hand-offs with
 * the device ops table alone (gpu/device.h), in processes of adag-bench
 * started for it (--raw-peer), so a CUDA context is always fresh.
 * The hop: the driver writes the input into shared host memory, A copies it
 * in, copies it on its compute stream (the work), B reads it (zero copy or
 * peer copy), copies it on, copies it out; each hand-off between A and B
 * ordered by `mech` (events; value ops on words in registered shared
 * memory), each process woken through a shared word; with `threads`, A and
 * B are two threads of one process (nothing exported). 0; 1 with why when
 * the backend cannot (value ops not supported); -1 on failure (printed). */
int baseline_device_hop(const char *backend, dev_path_t path, int threads, dev_mech_t mech,
                        size_t bytes, wait_policy_t policy, long rounds, measure_t *m,
                        char *why, size_t why_len);
/* One copy of `bytes` through the device ops (copy_async + stream_sync) in
 * a process of its own: H2D from shared host memory, D2H into it, PEER from
 * another process's device 0 memory to device 1 (one process, one device:
 * device to device on device 0). */
int baseline_device_copy(const char *backend, dev_path_t path, size_t bytes, long reps,
                         measure_t *m);
/* The --raw-peer entry point of adag-bench. */
int device_raw_peer_main(int argc, char **argv);

/* output (bench/report.c) */
const char *bench_path_name(dev_path_t p); /* "", "zero-copy", "peer", "h2d", "d2h" */
const char *bench_mech_name(dev_mech_t m);  /* "", "ipc-event", "memops" */
void bench_print_table(FILE *out, const result_t *results, unsigned nresults);
void bench_print_json(FILE *out, const bench_opts_t *o, const result_t *results,
                      unsigned nresults);

/* allreduce rows (bench/collective.c): adag's host communicator, nranks
 * ranks in forked processes on emulated devices emu:0..nranks-1, against
 * Open MPI's MPI_Allreduce (bench/peers/mpi_allreduce.c under mpirun); SUM
 * over f32, out of place, each call synchronized; a call's time is the max
 * over ranks. m->gbps is the bus bandwidth of the median call. */
int allreduce_row_available(unsigned nranks, char *why, size_t len);
int run_allreduce(const bench_opts_t *o, unsigned nranks, size_t bytes, measure_t *m);
/* The same allreduce (i32 SUM) inside a compiled DAG of nranks process
 * actors on emu:0..n-1, one execution in flight (bench/device.c). */
int run_allreduce_dag(const bench_opts_t *o, const char *device, unsigned nranks, size_t bytes,
                      long iters,
                      measure_t *m);
/* MPI's figures for `bytes`: the peer runs once for every size of `sizes`
 * (the run's allreduce sizes) not measured yet. */
int baseline_mpi_allreduce(const bench_opts_t *o, unsigned nranks, size_t bytes,
                           const size_t *sizes, unsigned nsizes, measure_t *m);
/* nccl-tests' bus bandwidth of an allreduce of `bytes` taking `us`, in GB/s. */
double allreduce_bus_gbps(unsigned nranks, size_t bytes, double us);
/* run_allreduce on other backends: device "cuda" with comm "nccl" (each
 * rank then in a fresh copy of adag-bench, bench_coll_rank_main). */
int run_allreduce_on(const bench_opts_t *o, const char *device, const char *comm,
                     unsigned nranks, size_t bytes, measure_t *m);
/* `adag-bench --coll-rank <fd> <rank>`: one rank of run_allreduce_on. */
int bench_coll_rank_main(const char *fd_arg, const char *rank_arg);
/* The NCCL allreduce rows (bench/collective_nccl.c), on cuda:0..n-1 with
 * n = min(4, CUDA devices): 0 and *nranks set, or -1 saying why not
 * ("needs 2 CUDA devices (found 0): <the probe's reason>"). */
int nccl_allreduce_row_available(unsigned *nranks, char *why, size_t len);
/* The allreduce inside a compiled DAG on CUDA, and NCCL called directly. */
int run_nccl_allreduce_dag(const bench_opts_t *o, size_t bytes, long iters, measure_t *m);
int run_nccl_allreduce_direct(const bench_opts_t *o, size_t bytes, measure_t *m);

/* The llm rows (bench/llm.c): steady decode of examples/llm's sharded
 * model over process actors, TP-1xPP-1, TP-2xPP-1, TP-1xPP-2, TP-2xPP-2,
 * buckets 1, 8, 32, 64 (--quick: 1, 8), in flight pp and (pp > 1) 1; per
 * row the medians of rounds alternating the configurations: the step's
 * wall time, the actors' compute and the collectives on its path, the
 * rest (overhead_us: the median of the rounds' step - compute -
 * collective), and the same steps single-process. untraced_step_us: the
 * same steps on an untraced twin of TP-2xPP-2 (0: not run); cpus: the
 * CPUs online. */
typedef struct {
    int tp, pp, bucket, inflight, d_model, cpus;
    double step_us, compute_us, collective_us, overhead_us, single_us, untraced_step_us;
    /* the CPUs other processes of the machine took while the steps ran
     * (0..cpus; -1 unknown): the actors and the driver had the rest */
    double other_cpus;
    /* the allreduce ops' own time inside the DAG on the same path as
     * collective_us (the members' agreement, the wait for the other rank,
     * the call): traced op stats, like compute */
    double collective_dag_us;
    long steps;            /* steps counted (every round's) */
    char device[8];        /* "emu" or "host" */
} bench_llm_row_t;
#define BENCH_LLM_MAX_ROWS 32
#define BENCH_LLM_GOAL_US 20.0 /* overhead at TP-2xPP-2: printed, never asserted */
/* 0 with *nrows rows, 1 when it cannot run here (why says so), -1 failed
 * (printed) */
int run_llm(const bench_opts_t *o, bench_llm_row_t *rows, unsigned *nrows, char *why,
            size_t why_len);

#endif

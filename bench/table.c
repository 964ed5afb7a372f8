/*
 * The scenario table: what each row runs and what it is compared with (see
 * bench/table.h for the fields, bench/main.c for how a row is run).
 */
#include "table.h"

const scenario_t bench_scenarios[] = {
    {"roundtrip", RUN_CHAIN, 0, 1, 1, 8, -1, METRIC_LATENCY, BASE_RELAY_SPIN, 1,
     NULL, DEV_PATH_NONE},
    {"roundtrip", RUN_CHAIN, 0, 1, 1, 8, 0, METRIC_LATENCY, BASE_RELAY_FUTEX, 1,
     NULL, DEV_PATH_NONE},
    {"chain", RUN_CHAIN, 0, 4, 1, 8, -1, METRIC_LATENCY, BASE_RELAY_BEST, 1, NULL, DEV_PATH_NONE},
    {"chain", RUN_CHAIN, 0, 4, 8, 8, -1, METRIC_THROUGHPUT, BASE_INFLIGHT_ONE, 1,
     NULL, DEV_PATH_NONE},
    {"scatter-gather", RUN_SCATTER, 0, 4, 1, 8, -1, METRIC_LATENCY, BASE_FANOUT_BEST, 1,
     NULL, DEV_PATH_NONE},
    {"payload", RUN_PAYLOAD, 1, 1, 1, 8, -1, METRIC_LATENCY, BASE_RELAY_SPIN, 1,
     NULL, DEV_PATH_NONE},
    {"payload", RUN_PAYLOAD, 1, 1, 1, 1024, -1, METRIC_LATENCY, BASE_RELAY_SPIN, 0,
     NULL, DEV_PATH_NONE},
    {"payload", RUN_PAYLOAD, 1, 1, 1, 64 * 1024, -1, METRIC_BANDWIDTH, BASE_MEMCPY, 1,
     NULL, DEV_PATH_NONE},
    {"payload", RUN_PAYLOAD, 1, 1, 1, MiB, -1, METRIC_BANDWIDTH, BASE_MEMCPY, 1,
     NULL, DEV_PATH_NONE},
    {"payload", RUN_PAYLOAD, 1, 1, 1, 16 * MiB, -1, METRIC_BANDWIDTH, BASE_MEMCPY, 1,
     NULL, DEV_PATH_NONE},
    {"payload", RUN_PAYLOAD, 1, 1, 1, 64 * MiB, -1, METRIC_BANDWIDTH, BASE_MEMCPY, 0,
     NULL, DEV_PATH_NONE},
    {"payload-zc", RUN_PAYLOAD_ZC, 1, 1, 1, MiB, -1, METRIC_BANDWIDTH, BASE_MEMCPY, 0,
     NULL, DEV_PATH_NONE},
    {"payload-zc", RUN_PAYLOAD_ZC, 1, 1, 1, 16 * MiB, -1, METRIC_BANDWIDTH, BASE_MEMCPY, 1,
     NULL, DEV_PATH_NONE},
    {"idle", RUN_IDLE, 0, 4, 8, 8, -1, METRIC_CPU, BASE_BUDGET, 1, NULL, DEV_PATH_NONE},
    {"compile", RUN_COMPILE, 0, 2, 8, 8, -1, METRIC_TIME, BASE_BUDGET, 0, NULL, DEV_PATH_NONE},
    {"compile", RUN_COMPILE, 0, 8, 8, 8, -1, METRIC_TIME, BASE_BUDGET, 0, NULL, DEV_PATH_NONE},
    {"compile", RUN_COMPILE, 0, 16, 8, 8, -1, METRIC_TIME, BASE_BUDGET, 1, NULL, DEV_PATH_NONE},
    {"compile", RUN_COMPILE, 0, 64, 8, 8, -1, METRIC_TIME, BASE_BUDGET, 1, NULL, DEV_PATH_NONE},
    /* device rows: actors bound to devices, tensors in device memory
     * (bench/device.c) against the same hand-offs or copies on the device
     * ops table alone (bench/device_raw.c). "emu" is the emulated device;
     * the "cuda" rows say "skipped: <reason>" where CUDA has no device.
     * A hop row is a round trip of 3 hand-offs: copy in, A -> B, copy out,
     * with thread actors (one process: one context) and process actors,
     * each giving a row per mechanism (ipc-event, memops: ADAG_DEVICE_MEMOPS
     * 0 and 1) against the raw hop of that mechanism, rounds alternating;
     * the bandwidth rows h2d (execute: copied into the ring, then to the
     * device), h2d-zero-copy (reserve, written in the slot, commit) and
     * d2h run 2 executions in flight, pipelined, against one raw copy of
     * the same bytes (the h2d one for both h2d rows); peer one at a time;
     * --quick divides the bandwidth rows' bytes by 4. */
    {"device-hop", RUN_DEV_HOP, 0, 2, 1, 64, -1, METRIC_LATENCY, BASE_DEV_RAW_SAME_MECH, 1, "emu",
     DEV_PATH_SAME},
    {"device-hop", RUN_DEV_HOP, 0, 2, 1, 64, -1, METRIC_LATENCY, BASE_DEV_RAW_SAME_MECH, 1, "emu",
     DEV_PATH_PEER},
    {"device-bandwidth", RUN_DEV_BW, 1, 1, 2, 16 * MiB, -1, METRIC_BANDWIDTH, BASE_DEV_COPY, 1,
     "emu", DEV_PATH_H2D},
    {"device-bandwidth", RUN_DEV_BW, 1, 1, 2, 16 * MiB, -1, METRIC_BANDWIDTH, BASE_DEV_COPY, 1,
     "emu", DEV_PATH_H2D_ZC},
    {"device-bandwidth", RUN_DEV_BW, 1, 1, 2, 16 * MiB, -1, METRIC_BANDWIDTH, BASE_DEV_COPY, 1,
     "emu", DEV_PATH_D2H},
    {"device-bandwidth", RUN_DEV_BW, 1, 2, 1, 16 * MiB, -1, METRIC_BANDWIDTH, BASE_DEV_COPY, 1,
     "emu", DEV_PATH_PEER},
    {"device-bandwidth", RUN_DEV_BW, 1, 2, 1, 64 * MiB, -1, METRIC_BANDWIDTH, BASE_DEV_COPY, 0,
     "emu", DEV_PATH_PEER},
    {"device-hop", RUN_DEV_HOP, 0, 2, 1, 64, -1, METRIC_LATENCY, BASE_DEV_RAW_SAME_MECH, 1, "cuda",
     DEV_PATH_SAME},
    {"device-hop", RUN_DEV_HOP, 0, 2, 1, 64, -1, METRIC_LATENCY, BASE_DEV_RAW_SAME_MECH, 1, "cuda",
     DEV_PATH_PEER},
    {"device-bandwidth", RUN_DEV_BW, 1, 1, 2, 64 * MiB, -1, METRIC_BANDWIDTH, BASE_DEV_COPY, 1,
     "cuda", DEV_PATH_H2D},
    {"device-bandwidth", RUN_DEV_BW, 1, 1, 2, 64 * MiB, -1, METRIC_BANDWIDTH, BASE_DEV_COPY, 1,
     "cuda", DEV_PATH_H2D_ZC},
    {"device-bandwidth", RUN_DEV_BW, 1, 1, 2, 64 * MiB, -1, METRIC_BANDWIDTH, BASE_DEV_COPY, 1,
     "cuda", DEV_PATH_D2H},
    {"device-bandwidth", RUN_DEV_BW, 1, 2, 1, 64 * MiB, -1, METRIC_BANDWIDTH, BASE_DEV_COPY, 1,
     "cuda", DEV_PATH_PEER},
    /* allreduce rows (bench/collective.c): the host communicator, 4 ranks in
     * processes on emu:0..3, SUM over f32, out of place, against Open MPI
     * (4 processes, shared memory) measured in the same run; time per call,
     * ratio = adag / MPI time. The goal, printed, never asserted:
     * adag's bus bandwidth >= MPI's from 1 MiB up, time <= 2x MPI's below. */
    {"allreduce", RUN_ALLREDUCE, 1, 4, 1, 8, -1, METRIC_LATENCY, BASE_MPI_ALLREDUCE, 1, NULL,
     DEV_PATH_NONE},
    {"allreduce", RUN_ALLREDUCE, 1, 4, 1, 64, -1, METRIC_LATENCY, BASE_MPI_ALLREDUCE, 0, NULL,
     DEV_PATH_NONE},
    {"allreduce", RUN_ALLREDUCE, 1, 4, 1, 512, -1, METRIC_LATENCY, BASE_MPI_ALLREDUCE, 0, NULL,
     DEV_PATH_NONE},
    {"allreduce", RUN_ALLREDUCE, 1, 4, 1, 4096, -1, METRIC_LATENCY, BASE_MPI_ALLREDUCE, 1, NULL,
     DEV_PATH_NONE},
    {"allreduce", RUN_ALLREDUCE, 1, 4, 1, 64 * 1024, -1, METRIC_LATENCY, BASE_MPI_ALLREDUCE, 0,
     NULL, DEV_PATH_NONE},
    {"allreduce", RUN_ALLREDUCE, 1, 4, 1, MiB, -1, METRIC_LATENCY, BASE_MPI_ALLREDUCE, 1, NULL,
     DEV_PATH_NONE},
    {"allreduce", RUN_ALLREDUCE, 1, 4, 1, 4 * MiB, -1, METRIC_LATENCY, BASE_MPI_ALLREDUCE, 0,
     NULL, DEV_PATH_NONE},
    {"allreduce", RUN_ALLREDUCE, 1, 4, 1, 16 * MiB, -1, METRIC_LATENCY, BASE_MPI_ALLREDUCE, 0,
     NULL, DEV_PATH_NONE},
    {"allreduce", RUN_ALLREDUCE, 1, 4, 1, 64 * MiB, -1, METRIC_LATENCY, BASE_MPI_ALLREDUCE, 0,
     NULL, DEV_PATH_NONE},
    /* the same allreduce inside a compiled DAG (4 process actors on emu:0..3:
     * stamp -> allreduce SUM i32 -> member 0's ends back to the driver, one
     * execution at a time) against the allreduce called directly, same run:
     * the difference is the DAG's cost per collective (its hand-offs, the
     * members' agreement, the copy out of 16 bytes) */
    {"allreduce-dag", RUN_ALLREDUCE_DAG, 1, 4, 1, 4096, -1, METRIC_LATENCY,
     BASE_ALLREDUCE_DIRECT, 1, NULL, DEV_PATH_NONE},
    {"allreduce-dag", RUN_ALLREDUCE_DAG, 1, 4, 1, MiB, -1, METRIC_LATENCY,
     BASE_ALLREDUCE_DIRECT, 0, NULL, DEV_PATH_NONE},
    {"allreduce-dag", RUN_ALLREDUCE_DAG, 1, 4, 1, 16 * MiB, -1, METRIC_LATENCY,
     BASE_ALLREDUCE_DIRECT, 0, NULL, DEV_PATH_NONE},
    /* the same on CUDA (bench/collective_nccl.c): a compiled DAG of process
     * actors on cuda:0..n-1, n = min(4, devices), against NCCL through the
     * nccl communicator's ops alone (a rank per GPU), same run; skipped
     * with fewer than 2 CUDA devices */
    {"allreduce-nccl-dag", RUN_NCCL_ALLREDUCE_DAG, 1, 4, 1, 4096, -1, METRIC_LATENCY,
     BASE_NCCL_ALLREDUCE_DIRECT, 1, NULL, DEV_PATH_NONE},
    {"allreduce-nccl-dag", RUN_NCCL_ALLREDUCE_DAG, 1, 4, 1, MiB, -1, METRIC_LATENCY,
     BASE_NCCL_ALLREDUCE_DIRECT, 1, NULL, DEV_PATH_NONE},
    {"allreduce-nccl-dag", RUN_NCCL_ALLREDUCE_DAG, 1, 4, 1, 64 * MiB, -1, METRIC_LATENCY,
     BASE_NCCL_ALLREDUCE_DIRECT, 0, NULL, DEV_PATH_NONE},
    /* the data front stage (bench/data.c): a shuffled epoch of a Megatron
     * token dataset (uint16, 100 M tokens) in batches of 8 x 2048 against
     * memcpy of the same samples in the same order; goal >= 0.8 */
    {"data-tokens", RUN_DATA_TOKENS, 1, 1, 1, 8 * 2048 * 2, -1, METRIC_BANDWIDTH,
     BASE_TOKENS_MEMCPY, 1, NULL, DEV_PATH_NONE},
    /* images (bench/data_images.c): WebDataset JPEGs 256 -> random-resized
     * crop 224, flip, normalize, f32, batches of 64, samples/s: against the
     * ideal (one thread's rate x threads; Ray Data in the "ray" column) and
     * torch's DataLoader + PIL; goals >= 0.9x ideal, >= 2x Ray */
    {"data-images", RUN_DATA_IMAGES, 1, 1, 1, 64, -1, METRIC_THROUGHPUT, BASE_IMAGES_IDEAL, 1,
     NULL, DEV_PATH_NONE},
    {"data-images", RUN_DATA_IMAGES, 1, 2, 1, 64, -1, METRIC_THROUGHPUT, BASE_IMAGES_TORCH, 1,
     NULL, DEV_PATH_NONE},
    /* the same shards over loopback http through the cache, an open + an
     * epoch, cold and warm, against local files; goal warm >= 0.95x */
    {"data-remote-cold", RUN_DATA_REMOTE_COLD, 1, 1, 1, 64, -1, METRIC_THROUGHPUT,
     BASE_IMAGES_LOCAL, 1, NULL, DEV_PATH_NONE},
    {"data-remote-warm", RUN_DATA_REMOTE_WARM, 1, 2, 1, 64, -1, METRIC_THROUGHPUT,
     BASE_IMAGES_LOCAL, 1, NULL, DEV_PATH_NONE},
    /* placement (bench/placement.c): process actors placed by adag (on:
     * default parameters) against placement off (cpus = every CPU the
     * process may use, numa -1, nic ""), and pinned (actor i on the i-th of
     * those CPUs) against off; 3 rounds (--reps R: R) alternating on, off,
     * pinned, medians. A chain of 4 (8 B, in-flight 1 and 8), a 1 MiB
     * payload, a device hop on "emu" and "cuda" (skipped without a CUDA
     * device). */
    {"placement", RUN_PLACE_CHAIN, 1, 4, 1, 8, -1, METRIC_LATENCY, BASE_PLACE_OFF, 1, NULL,
     DEV_PATH_NONE},
    {"placement", RUN_PLACE_CHAIN, 1, 4, 8, 8, -1, METRIC_THROUGHPUT, BASE_PLACE_OFF, 1, NULL,
     DEV_PATH_NONE},
    {"placement", RUN_PLACE_PAYLOAD, 1, 1, 1, MiB, -1, METRIC_BANDWIDTH, BASE_PLACE_OFF, 1, NULL,
     DEV_PATH_NONE},
    {"placement", RUN_PLACE_DEV_HOP, 1, 2, 1, 64, -1, METRIC_LATENCY, BASE_PLACE_OFF, 1, "emu",
     DEV_PATH_SAME},
    {"placement", RUN_PLACE_DEV_HOP, 1, 2, 1, 64, -1, METRIC_LATENCY, BASE_PLACE_OFF, 1, "cuda",
     DEV_PATH_SAME},
    /* tracing (bench/tracing.c): process actors, the DAG compiled with
     * tracing on (trace_spans 65536) against off (trace_spans 0); 5 rounds
     * (--reps R: R) alternating on, off, medians; ratio on / off, and the
     * cost of tracing (latency: on / off - 1; executions/s: off / on - 1)
     * against the goal, <= 5 %, printed, never asserted. A round
     * trip (1 actor, 8 B, in-flight 1) and a chain of 4 (8 B, in-flight 8);
     * the last on round's trace is written, and must be a real one. */
    {"tracing", RUN_TRACE_CHAIN, 1, 1, 1, 8, -1, METRIC_LATENCY, BASE_TRACE_OFF, 1, NULL,
     DEV_PATH_NONE},
    {"tracing", RUN_TRACE_CHAIN, 1, 4, 8, 8, -1, METRIC_THROUGHPUT, BASE_TRACE_OFF, 1, NULL,
     DEV_PATH_NONE},
    /* llm (bench/llm.c): steady decode of examples/llm's sharded model over
     * process actors, TP-1xPP-1, TP-2xPP-1, TP-1xPP-2, TP-2xPP-2, buckets 1,
     * 8, 32, 64 (--quick: 1, 8), pp micro-batches in flight and 1; one
     * line generates every row. Each: the step's wall time against the
     * same steps single-process (llm_ref_step), with the actors' compute,
     * the collectives and the rest (adag's overhead) on the step's path;
     * goal at TP-2xPP-2: overhead <= 20 us, printed, never asserted. */
    {"llm", RUN_LLM, 1, 4, 2, 0, -1, METRIC_LATENCY, BASE_LLM_SINGLE, 1, NULL, DEV_PATH_NONE},
    /* graph (bench/graph.c): on the device ops table alone, an execution
     * enqueues 50 small kernels (n) one by one against one graph_launch of
     * the same 50 captured once, then waits for its stream; rounds
     * alternating, medians. Two results per row: the launching thread's
     * CPU time per execution (ratio graph / eager) and executions/s. */
    {"graph", RUN_GRAPH, 1, 50, 1, 256 * sizeof(float), -1, METRIC_LATENCY, BASE_GRAPH_EAGER, 1,
     "emu", DEV_PATH_NONE},
    {"graph", RUN_GRAPH, 1, 50, 1, 256 * sizeof(float), -1, METRIC_LATENCY, BASE_GRAPH_EAGER, 1,
     "cuda", DEV_PATH_NONE},
};

const unsigned bench_nscenarios = sizeof(bench_scenarios) / sizeof(bench_scenarios[0]);
_Static_assert(sizeof(bench_scenarios) / sizeof(bench_scenarios[0]) <= BENCH_MAX_SCENARIOS,
               "raise BENCH_MAX_SCENARIOS (bench/table.h)");

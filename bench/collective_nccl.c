/*
 * The NCCL allreduce rows: SUM over 4-byte elements on cuda:0..n-1, n =
 * min(4, CUDA devices), one rank per GPU (NCCL refuses two ranks on one
 * GPU, so fewer than 2 devices skips every row, saying why).
 *
 *   allreduce-nccl-dag     the allreduce inside a compiled DAG of n process
 *                          actors (run_allreduce_dag of bench/device.c on
 *                          "cuda": stamp -> allreduce SUM i32 -> member 0's
 *                          ends back to the driver, one execution at a
 *                          time), against
 *   the baseline           NCCL through the nccl communicator's ops table
 *                          alone, same run (run_allreduce_on of
 *                          bench/collective.c: a rank per GPU, each in a
 *                          fresh copy of adag-bench, `--coll-rank`, since
 *                          CUDA cannot be used in a child forked after the
 *                          parent initialized it), timed per call from
 *                          before the enqueue to stream_sync's return.
 *
 * The difference is the DAG's cost per collective on CUDA.
 */
#include "bench.h"

#include "gpu/comm.h"
#include "gpu/device.h"

#include <stdio.h>

#define NCCL_ROW_MAX_RANKS 4

int nccl_allreduce_row_available(unsigned *nranks, char *why, size_t len)
{
    const adag_device_ops_t *dev = adag__device_backend_named("cuda");
    const adag_comm_ops_t *comm = adag__comm_backend_named("nccl");
    char dev_why[160] = "", comm_why[160] = "";
    unsigned ndev = dev ? dev->probe(dev_why, sizeof dev_why) : 0;
    if (ndev < 2)
        snprintf(why, len, "needs 2 CUDA devices (found %u)%s%s", ndev, ndev ? "" : ": ",
                 ndev ? "" : dev ? dev_why : "no cuda device backend in this build");
    else if (!comm || !comm->allreduce || !comm->probe(comm_why, sizeof comm_why))
        snprintf(why, len, "the nccl communicator: %s",
                 comm ? comm_why : "not in this build");
    else {
        *nranks = ndev < NCCL_ROW_MAX_RANKS ? ndev : NCCL_ROW_MAX_RANKS;
        return 0;
    }
    return -1;
}

int run_nccl_allreduce_dag(const bench_opts_t *o, size_t bytes, long iters, measure_t *m)
{
    unsigned n;
    char why[256];
    if (nccl_allreduce_row_available(&n, why, sizeof why)) {
        fprintf(stderr, "adag-bench: allreduce-nccl-dag: %s\n", why);
        return -1;
    }
    return run_allreduce_dag(o, "cuda", n, bytes, iters, m);
}

int run_nccl_allreduce_direct(const bench_opts_t *o, size_t bytes, measure_t *m)
{
    unsigned n;
    char why[256];
    if (nccl_allreduce_row_available(&n, why, sizeof why)) {
        fprintf(stderr, "adag-bench: NCCL allreduce: %s\n", why);
        return -1;
    }
    return run_allreduce_on(o, "cuda", "nccl", n, bytes, m);
}

/* Unit tests (suite "comm_direct"): the host communicator's direct
 * allreduce (gpu/comm_host_coll.c), which reads its peers' buffers in
 * place when they lie in the emulated device's memory, and its fallback to
 * staging when one rank's buffers cannot be mapped; the peer maps
 * (gpu/comm_host_peers.c) that it keeps. Ranks in threads; every result
 * checked bit for bit against the reference of tests/comm_coll_ref.h. */
#include "gpu/comm.h"
#include "gpu/comm_host.h"
#include "gpu/device.h"
#include "comm_coll_rank.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Allreduces past the flat one (count * size * ranks > 64 KiB), in place
 * and not, over several dtypes and ops, for 4 ranks. */
static const call_t big[] = {
    {ALLREDUCE, ADAG_DTYPE_F32, ADAG_REDUCE_SUM, 300007, 0, 0, 21},
    {ALLREDUCE, ADAG_DTYPE_BF16, ADAG_REDUCE_AVG, 70001, 0, 1, 22},
    {ALLREDUCE, ADAG_DTYPE_I64, ADAG_REDUCE_PROD, 5003, 0, 0, 23},
    {ALLREDUCE, ADAG_DTYPE_U8, ADAG_REDUCE_MAX, 70003, 0, 1, 24},
    {ALLREDUCE, ADAG_DTYPE_F64, ADAG_REDUCE_MIN, 9001, 0, 0, 25},
};
#define NBIG (sizeof(big) / sizeof(big[0]))
#define N 4
#define CAP ((size_t)300007 * 4)

static unsigned maps_of(const rank_t *r)
{
    return adag__comm_host_peer_maps_live(r->comm);
}

/* Device memory everywhere: every rank maps each peer's send and recv
 * once (the later calls hit the maps), and every result is exact. */
Test(comm_direct, device_memory_is_read_in_place, .timeout = 60)
{
    rank_t r[N];
    open_all(host_ops(), N, CAP, r);
    run_opened(r, N, big, NBIG);
    for (unsigned i = 0; i < N; i++)
        cr_assert_eq(maps_of(&r[i]), 2 * (N - 1), "rank %u holds %u peer maps, want %u", i,
                     maps_of(&r[i]), 2 * (N - 1));
    run_opened(r, N, big, NBIG);
    for (unsigned i = 0; i < N; i++)
        cr_assert_eq(maps_of(&r[i]), 2 * (N - 1));
    close_all(r, N);
}

/* Host memory (not in a memfd) on every rank, or on one only: no rank
 * maps anything, the staged allreduce gives the same bits. */
Test(comm_direct, host_memory_is_staged, .timeout = 60)
{
    rank_t r[N];
    open_all_mem(host_ops(), N, CAP, r, 0xf);
    run_opened(r, N, big, NBIG);
    for (unsigned i = 0; i < N; i++)
        cr_assert_eq(maps_of(&r[i]), 0, "rank %u mapped %u peer buffers", i, maps_of(&r[i]));
    close_all(r, N);
}

Test(comm_direct, one_rank_in_host_memory_makes_every_rank_stage, .timeout = 60)
{
    rank_t r[N];
    open_all_mem(host_ops(), N, CAP, r, 1u << 2);
    run_opened(r, N, big, NBIG);
    for (unsigned i = 0; i < N; i++)
        cr_assert_eq(maps_of(&r[i]), 0, "rank %u mapped %u peer buffers", i, maps_of(&r[i]));
    close_all(r, N);
}

/* Rank 0's send buffer is memory imported from a process that has exited:
 * rank 0 still holds it mapped, its peers cannot open it any more. The
 * first allreduce finds that in its reduce phase and finishes staged; from
 * then on the peers stage without trying; every result is exact. */
Test(comm_direct, a_buffer_peers_cannot_map_falls_back_to_staging, .timeout = 60)
{
    const adag_device_ops_t *d = adag__device_backend(ADAG_DEV_EMULATED);
    int hp[2], go[2];
    cr_assert_eq(pipe(hp), 0);
    cr_assert_eq(pipe(go), 0);
    pid_t pid = fork(); /* before any thread of this process */
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        adag_device_t *dev;
        adag_dev_mem_t m;
        adag_dev_handle_t h;
        char c;
        int bad = d->open(0, &dev) != ADAG_OK || d->mem_alloc(dev, CAP, &m) != ADAG_OK ||
                  d->mem_export(dev, &m, &h) != ADAG_OK ||
                  write(hp[1], &h, sizeof(h)) != (ssize_t)sizeof(h) || read(go[0], &c, 1) != 1;
        _exit(bad);
    }
    adag_dev_handle_t h;
    cr_assert_eq(read(hp[0], &h, sizeof(h)), (ssize_t)sizeof(h), "the child failed");
    rank_t r[N];
    open_all(host_ops(), N, CAP, r);
    adag_dev_mem_t imported, own = r[0].dsend;
    cr_assert_eq(d->mem_import(r[0].dev, &h, &imported), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(write(go[1], "x", 1), 1);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    r[0].dsend = imported;
    const call_t not_in_place[] = {big[0], big[2], big[4]};
    run_opened(r, N, not_in_place, 3);
    for (unsigned i = 1; i < N; i++) /* they gave up at rank 0's buffer, the first */
        cr_assert_eq(maps_of(&r[i]), 0, "rank %u holds %u peer maps", i, maps_of(&r[i]));
    run_opened(r, N, not_in_place, 3);
    r[0].dsend = own;
    d->mem_unimport(r[0].dev, &imported);
    close_all(r, N);
    close(hp[0]);
    close(hp[1]);
    close(go[0]);
    close(go[1]);
}

/* A rank that reallocates its buffers for every call: its peers drop the
 * maps of the freed ones at their next miss, so what they hold stays one
 * send and one recv per peer (a freed buffer's memory is not kept). */
Test(comm_direct, maps_of_freed_buffers_are_dropped, .timeout = 60)
{
    enum { M = 3 };
    const adag_device_ops_t *d = adag__device_backend(ADAG_DEV_EMULATED);
    const call_t call = {ALLREDUCE, ADAG_DTYPE_I32, ADAG_REDUCE_SUM, 40000, 0, 0, 31};
    rank_t r[M];
    open_all(host_ops(), M, 40000 * 4, r);
    for (int round = 0; round < 12; round++) {
        for (unsigned i = 0; i < M; i++) {
            d->mem_free(r[i].dev, &r[i].dsend);
            d->mem_free(r[i].dev, &r[i].drecv);
            cr_assert_eq(d->mem_alloc(r[i].dev, r[i].cap, &r[i].dsend), ADAG_OK);
            cr_assert_eq(d->mem_alloc(r[i].dev, r[i].cap, &r[i].drecv), ADAG_OK);
        }
        run_opened(r, M, &call, 1);
        for (unsigned i = 0; i < M; i++)
            cr_assert_eq(maps_of(&r[i]), 2 * (M - 1), "round %d: rank %u holds %u peer maps",
                         round, i, maps_of(&r[i]));
    }
    close_all(r, M);
}

/* More live buffers per peer than the maps hold: the least recently used
 * map goes, what is held stays bounded, every result is exact. */
Test(comm_direct, more_buffers_than_maps_stay_bounded, .timeout = 60)
{
    enum { M = 2, BUFS = ADAG_COMM_HOST_PEER_MAPS };
    const adag_device_ops_t *d = adag__device_backend(ADAG_DEV_EMULATED);
    const call_t call = {ALLREDUCE, ADAG_DTYPE_F32, ADAG_REDUCE_SUM, 40000, 0, 0, 41};
    adag_dev_mem_t bufs[M][BUFS][2];
    rank_t r[M];
    open_all(host_ops(), M, 40000 * 4, r);
    for (unsigned i = 0; i < M; i++)
        for (unsigned b = 0; b < BUFS; b++)
            for (int k = 0; k < 2; k++)
                cr_assert_eq(d->mem_alloc(r[i].dev, r[i].cap, &bufs[i][b][k]), ADAG_OK);
    adag_dev_mem_t own[M][2];
    for (unsigned i = 0; i < M; i++) {
        own[i][0] = r[i].dsend;
        own[i][1] = r[i].drecv;
    }
    for (unsigned round = 0; round < 2 * BUFS; round++) {
        for (unsigned i = 0; i < M; i++) {
            r[i].dsend = bufs[i][round % BUFS][0];
            r[i].drecv = bufs[i][round % BUFS][1];
        }
        run_opened(r, M, &call, 1);
        for (unsigned i = 0; i < M; i++)
            cr_assert_leq(maps_of(&r[i]), ADAG_COMM_HOST_PEER_MAPS * (M - 1));
    }
    for (unsigned i = 0; i < M; i++) {
        cr_assert_eq(maps_of(&r[i]), ADAG_COMM_HOST_PEER_MAPS, "rank %u", i);
        r[i].dsend = own[i][0];
        r[i].drecv = own[i][1];
        for (unsigned b = 0; b < BUFS; b++)
            for (int k = 0; k < 2; k++)
                d->mem_free(r[i].dev, &bufs[i][b][k]);
    }
    close_all(r, M);
}

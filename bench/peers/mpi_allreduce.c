/*
 * The MPI side of adag-bench's allreduce rows: MPI_Allreduce SUM over f32
 * elements, out of place (separate send and receive buffers, as the adag
 * side does), for each size given, on every rank of MPI_COMM_WORLD.
 *
 *   mpi-allreduce [--seconds S] [--warmup N] BYTES...
 *
 * Per size: N warm-up calls (timed, to pick the number of timed calls:
 * enough for about S seconds, 5 to MAX_ITERS), then the timed calls. Each
 * rank times every call from before MPI_Allreduce until it returns (the
 * blocking call is complete: the result is in the receive buffer); the
 * time of call i is the max of that over ranks (MPI_Reduce MAX), the
 * median and p99 are over calls. The result is checked after the timed
 * calls. Rank 0 prints one line per size:
 *
 *   allreduce bytes=B count=C iters=N median_us=M p99_us=P mean_us=A check=ok
 *
 * Built with mpicc by the Makefile when it exists (bench/peers is not part
 * of libadag); adag-bench runs it under mpirun and parses those lines.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITERS 20000
#define MAX_SIZES 32

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* rank r's element i, and what the sum over nranks ranks must be: small
 * integers, so every order of summation gives the same f32 bits */
static float element(int rank, size_t i)
{
    return (float)((int)(i % 7) + rank + 1);
}

static float expected_sum(int nranks, size_t i)
{
    return (float)(nranks * (int)(i % 7) + nranks * (nranks + 1) / 2);
}

static int run_size(size_t bytes, double seconds, int warmup, int rank, int nranks)
{
    size_t count = bytes / sizeof(float);
    float *send = malloc(count * sizeof(float)), *recv = malloc(count * sizeof(float));
    double *lat = malloc(MAX_ITERS * sizeof(double)), *lat_max = malloc(MAX_ITERS * sizeof(double));
    int ok = send && recv && lat && lat_max && count > 0, all_ok = 0, rc = -1;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all_ok) {
        if (rank == 0)
            fprintf(stderr, "mpi-allreduce: %zu bytes: out of memory or not a whole f32\n",
                    bytes);
        goto done;
    }
    for (size_t i = 0; i < count; i++)
        send[i] = element(rank, i);

    /* warm-up, timed to pick the number of timed calls (the same on every
     * rank: the slowest rank's figure) */
    double t0 = MPI_Wtime(), warm = 0;
    for (int i = 0; i < warmup; i++)
        MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - t0) / (warmup > 0 ? warmup : 1);
    MPI_Allreduce(&mine, &warm, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long iters = warm > 0 ? (long)(seconds / warm) : MAX_ITERS;
    iters = iters < 5 ? 5 : iters > MAX_ITERS ? MAX_ITERS : iters;

    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        double a = MPI_Wtime();
        MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        lat[i] = (MPI_Wtime() - a) * 1e6;
    }
    double total = (MPI_Wtime() - start) * 1e6;
    MPI_Reduce(lat, lat_max, (int)iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    ok = 1;
    for (size_t k = 0; k < 3; k++) { /* first, middle and last element */
        size_t i = k == 0 ? 0 : k == 1 ? count / 2 : count - 1;
        if (recv[i] != expected_sum(nranks, i)) {
            fprintf(stderr, "mpi-allreduce: rank %d, %zu bytes: element %zu is %g, want %g\n",
                    rank, bytes, i, (double)recv[i], (double)expected_sum(nranks, i));
            ok = 0;
        }
    }
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    double total_max = 0;
    MPI_Reduce(&total, &total_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0 && all_ok) {
        qsort(lat_max, (size_t)iters, sizeof(double), cmp_double);
        long p99 = iters * 99 / 100 < iters ? iters * 99 / 100 : iters - 1;
        printf("allreduce bytes=%zu count=%zu iters=%ld median_us=%.3f p99_us=%.3f "
               "mean_us=%.3f check=ok\n",
               bytes, count, iters, lat_max[iters / 2], lat_max[p99], total_max / iters);
        fflush(stdout);
    }
    rc = all_ok ? 0 : -1;
done:
    free(send);
    free(recv);
    free(lat);
    free(lat_max);
    return rc;
}

int main(int argc, char **argv)
{
    double seconds = 0.2;
    int warmup = 10, nsizes = 0, rank = 0, nranks = 0, rc = 0;
    size_t sizes[MAX_SIZES];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (nsizes < MAX_SIZES && strtoull(argv[i], NULL, 0) > 0)
            sizes[nsizes++] = (size_t)strtoull(argv[i], NULL, 0);
        else {
            if (rank == 0)
                fprintf(stderr, "usage: mpi-allreduce [--seconds S] [--warmup N] BYTES...\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (rank == 0)
        printf("mpi-allreduce ranks=%d inplace=0 dtype=f32 op=sum\n", nranks);
    for (int s = 0; s < nsizes && rc == 0; s++)
        rc = run_size(sizes[s], seconds, warmup, rank, nranks);
    MPI_Finalize();
    return rc ? 1 : 0;
}

#include "bench.h"

#include <stdlib.h>
#include <time.h>

double bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_summarize(double *lat_us, long n, double total_s, measure_t *m)
{
    qsort(lat_us, (size_t)n, sizeof(*lat_us), cmp_double);
    m->median_us = n ? lat_us[n / 2] : 0;
    m->p99_us = n ? lat_us[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] : 0;
    m->per_s = total_s > 0 ? n / total_s : 0;
    m->iterations = n;
    m->gbps = 0;
    m->cpu_pct = 0;
}

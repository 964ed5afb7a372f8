#include "bench.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

double bench_primary(metric_t metric, const measure_t *m)
{
    switch (metric) {
    case METRIC_THROUGHPUT: return m->per_s;
    case METRIC_BANDWIDTH: return m->gbps;
    case METRIC_CPU: return m->cpu_pct;
    default: return m->median_us;
    }
}

void bench_exe_dir(char *dir, size_t len)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[k > 0 ? k : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(dir, len, "%s", slash ? exe : "");
}

const char *bench_worker_path(void)
{
    static char path[PATH_MAX + 16];
    char dir[PATH_MAX];
    bench_exe_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/adag-worker", dir);
    return path;
}

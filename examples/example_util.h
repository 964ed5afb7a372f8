/*
 * What the device examples (gpu_pipeline, tp_pp) share: reporting a failed
 * call, a clock, a checked count option, the choice of device backend and
 * module, and writing the DOT graph. Define EXAMPLE_NAME ("tp_pp") before
 * including it: messages start with it.
 */
#ifndef ADAG_EXAMPLE_UTIL_H
#define ADAG_EXAMPLE_UTIL_H

#include <adag.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef EXAMPLE_NAME
#error "define EXAMPLE_NAME before including example_util.h"
#endif

/* true on ADAG_OK; else says what failed, with the library's message. */
static inline bool ok(adag_status_t s, const char *what)
{
    char msg[1024];
    if (s == ADAG_OK)
        return true;
    snprintf(msg, sizeof msg, "%s", adag_last_error()); /* before the next adag call */
    fprintf(stderr, EXAMPLE_NAME ": %s failed: %s%s%s\n", what, adag_status_str(s),
            msg[0] ? ": " : "", msg);
    return false;
}

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Option opt's argument as a number in min..max. */
static inline bool parse_count(const char *opt, const char *arg, unsigned long min,
                               unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = arg ? strtoul(arg, &end, 10) : 0;
    if (!arg || errno || end == arg || *end || arg[0] == '-' || v < min || v > max) {
        fprintf(stderr, EXAMPLE_NAME ": %s %s: expected a number in %lu..%lu\n", opt,
                arg ? arg : "(missing)", min, max);
        return false;
    }
    *out = v;
    return true;
}

/* Fills *device (unless given): cuda where a CUDA device exists and the
 * CUDA variant of the module was built, else emu; and *module (unless
 * given) to the variant for that device. */
static inline void pick_backend(const char **device, const char **module,
                                const char *cuda_module, const char *host_module)
{
    unsigned n = 0;
    if (!*device) {
        bool have_cuda = adag_device_count("cuda", &n) == ADAG_OK && n > 0;
        *device = have_cuda && access(cuda_module, R_OK) == 0 ? "cuda" : "emu";
        if (have_cuda && !strcmp(*device, "emu"))
            printf(EXAMPLE_NAME ": %u CUDA devices, but %s was not built (no nvcc at build "
                   "time): using the emulated device\n", n, cuda_module);
    }
    if (!*module)
        *module = !strcmp(*device, "cuda") ? cuda_module : host_module;
}

/* Writes the DAG's DOT graph to `dot`, or (NULL) to a new file in $TMPDIR
 * or /tmp (mkstemps: the six X of the name are replaced), and says where. */
static inline bool write_dot_file(adag_dag_h dag, const char *dot)
{
    char path[4096];
    int fd;
    if (dot) {
        snprintf(path, sizeof path, "%s", dot);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/" EXAMPLE_NAME "-XXXXXX.dot", tmp && *tmp ? tmp : "/tmp");
        fd = mkstemps(path, 4);
    }
    if (fd < 0) {
        fprintf(stderr, EXAMPLE_NAME ": cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    bool good = ok(adag_dag_write_dot(dag, adag_writer_fd(fd)), "adag_dag_write_dot");
    if (close(fd) != 0)
        good = false;
    if (good)
        printf(EXAMPLE_NAME ": DOT graph in %s (dot -Tsvg %s > " EXAMPLE_NAME ".svg)\n", path,
               path);
    return good;
}

/* Writes the DAG's trace (compiled with trace_spans) as Chrome trace JSON. */
static inline bool write_trace_file(adag_dag_h dag, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, EXAMPLE_NAME ": cannot create %s: %s\n", path, strerror(errno));
        return false;
    }
    bool good = ok(adag_dag_write_trace(dag, adag_writer_fd(fd)), "adag_dag_write_trace");
    if (close(fd) != 0 && good) {
        fprintf(stderr, EXAMPLE_NAME ": cannot write %s: %s\n", path, strerror(errno));
        good = false;
    }
    if (good)
        printf(EXAMPLE_NAME ": trace in %s (open it in https://ui.perfetto.dev)\n", path);
    return good;
}

/* Prints the memory the DAG's channels hold: each channel's slots are
 * sized for its value (a static tensor's bytes), so this is what the
 * graph's values need, max_inflight of each. */
static inline bool print_memory(adag_dag_h dag)
{
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    if (!ok(adag_dag_stats(dag, &st), "adag_dag_stats"))
        return false;
    printf(EXAMPLE_NAME ": channel memory: %.1f KiB of shared memory (shm_bytes), %.1f KiB of "
                        "device memory (device_bytes), %u channels\n",
           (double)st.shm_bytes / 1024, (double)st.device_bytes / 1024, st.nchannels);
    return true;
}

/* Prints the DAG's figures: each actor, op and channel (adag_stats_print). */
static inline bool print_stats(adag_dag_h dag)
{
    adag_stats_h figures;
    if (!ok(adag_dag_stats_take(dag, &figures), "adag_dag_stats_take"))
        return false;
    fflush(stdout); /* what printf holds goes first */
    bool good = ok(adag_stats_print(figures, adag_writer_fd(STDOUT_FILENO)), "adag_stats_print");
    adag_stats_free(figures);
    return good;
}

#endif

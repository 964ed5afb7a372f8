/*
 * adag-bench data rows (include/adag/data.h): a generated Megatron token
 * dataset (uint16 tokens, 100 M of them; --quick: 10 M) read by a source
 * with shuffling into batches of 8 x 2048 tokens, one epoch, against a
 * memcpy of the same samples in the same order (the order functions of
 * data/order.h, one thread) in the same run. Both are measured in the
 * steady state: the source's second epoch, the baseline's second pass
 * (the first maps the file: a page fault per page). The dataset is written
 * once per run under /tmp and removed at exit.
 */
#include "bench.h"

#include <adag/data.h>

#include "data/order.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEQ 2048
#define BATCH 8
#define WINDOW 4096
#define SEED 17

static char prefix[64];
static uint64_t tokens;

static void remove_dataset(void)
{
    char p[80];
    snprintf(p, sizeof p, "%s.bin", prefix);
    unlink(p);
    snprintf(p, sizeof p, "%s.idx", prefix);
    unlink(p);
}

/* Writes the dataset (documents of 1-4096 tokens) once per run. */
static int dataset(const bench_opts_t *o)
{
    if (prefix[0])
        return 0;
    tokens = o->quick ? 10000000ull : 100000000ull;
    snprintf(prefix, sizeof prefix, "/tmp/adag-bench-tokens-%d", (int)getpid());
    char p[80];
    snprintf(p, sizeof p, "%s.bin", prefix);
    FILE *f = fopen(p, "wb");
    if (!f)
        return -1;
    atexit(remove_dataset);
    uint16_t chunk[65536];
    uint64_t state = o->seed;
    for (uint64_t done = 0; done < tokens;) {
        size_t n = tokens - done < 65536 ? (size_t)(tokens - done) : 65536;
        for (size_t i = 0; i < n; i++)
            chunk[i] = (uint16_t)(adag__order_mix(state++) % 50257);
        if (fwrite(chunk, 2, n, f) != n)
            return fclose(f), -1;
        done += n;
    }
    fclose(f);
    /* the index: documents cut at pseudorandom lengths */
    size_t cap = 1024, ndocs = 0;
    int32_t *sizes = malloc(cap * sizeof(*sizes));
    for (uint64_t left = tokens; left;) {
        uint64_t n = 1 + adag__order_mix(state++) % 4096;
        n = n > left ? left : n;
        if (ndocs == cap && !(sizes = realloc(sizes, (cap *= 2) * sizeof(*sizes))))
            return -1;
        sizes[ndocs++] = (int32_t)n;
        left -= n;
    }
    snprintf(p, sizeof p, "%s.idx", prefix);
    if (!(f = fopen(p, "wb")))
        return free(sizes), -1;
    uint64_t v = 1, nd = ndocs, nd1 = ndocs + 1;
    unsigned char code = 8; /* uint16 */
    fwrite("MMIDIDX\0\0", 1, 9, f);
    fwrite(&v, 8, 1, f);
    fwrite(&code, 1, 1, f);
    fwrite(&nd, 8, 1, f);
    fwrite(&nd1, 8, 1, f);
    fwrite(sizes, 4, ndocs, f);
    int64_t off = 0;
    for (size_t i = 0; i < ndocs; i++) {
        fwrite(&off, 8, 1, f);
        off += (int64_t)sizes[i] * 2;
    }
    for (int64_t i = 0; i <= (int64_t)ndocs; i++)
        fwrite(&i, 8, 1, f);
    free(sizes);
    return fclose(f) == 0 ? 0 : -1;
}

int baseline_tokens_memcpy(const bench_opts_t *o, measure_t *m)
{
    if (dataset(o))
        return -1;
    char p[80];
    snprintf(p, sizeof p, "%s.bin", prefix);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return -1;
    size_t len = (size_t)tokens * 2;
    const unsigned char *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return -1;
    uint64_t samples = tokens / SEQ, batches = samples / BATCH;
    size_t ss = SEQ * 2;
    unsigned char *buf = malloc(ss * BATCH);
    double best = 0;
    for (int pass = 0; pass < 2; pass++) { /* the first warms the page cache */
        double t0 = bench_now_us();
        for (uint64_t b = 0; b < batches; b++)
            for (unsigned j = 0; j < BATCH; j++) {
                uint64_t ord = adag__order_window(b * BATCH + j, samples, WINDOW, SEED, 0);
                memcpy(buf + j * ss, map + ord * ss, ss);
            }
        double dt = bench_now_us() - t0;
        best = (double)(batches * BATCH * ss) / dt / 1e3;
    }
    munmap((void *)map, len);
    free(buf);
    memset(m, 0, sizeof(*m));
    m->gbps = best;
    m->iterations = (long)batches;
    return 0;
}

int run_data_tokens(const bench_opts_t *o, measure_t *m)
{
    if (dataset(o))
        return -1;
    const char *shards[1] = {prefix};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_SEQ_LEN | ADAG_DATA_PARAM_SHUFFLE | ADAG_DATA_PARAM_SEED,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_TOKENS,
        .batch_size = BATCH,
        .seq_len = SEQ,
        .shuffle_window = WINDOW,
        .seed = SEED,
    };
    adag_data_source_h src = NULL;
    uint64_t batches;
    TRY(adag_data_open(&p, &src));
    TRY(adag_data_size(src, &batches, NULL));
    /* epoch 0 maps the file (a page fault per page, as the baseline's first
     * pass); epoch 1, reshuffled, is the steady state measured */
    double t0 = 0;
    size_t bytes = 0;
    for (uint64_t b = 0; b < 2 * batches; b++) {
        if (b == batches)
            t0 = bench_now_us();
        adag_data_batch_t bt;
        TRY(adag_data_next(src, &bt, 60000));
        bytes += b >= batches ? bt.size : 0;
        TRY(adag_data_release(src, &bt));
    }
    double dt = bench_now_us() - t0;
    adag_data_close(src);
    memset(m, 0, sizeof(*m));
    m->gbps = (double)bytes / dt / 1e3;
    m->iterations = (long)batches;
    return 0;
fail:
    adag_data_close(src);
    return -1;
}

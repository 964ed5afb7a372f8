/*
 * The data source's threads under ThreadSanitizer (make test-tsan): many
 * threads filling batches under a tight budget while a consumer takes them
 * in order, holds two at once and releases them out of order, checks each
 * sample, and closes the source while threads are busy. Fails on a wrong
 * batch or any race TSan reports.
 */
#include <adag/data.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RS 64
#define NREC 5000

static char path[64];

static int write_records(void)
{
    snprintf(path, sizeof(path), "/tmp/adag-stress-data-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    unsigned char r[RS];
    for (uint64_t id = 0; id < NREC; id++) {
        memcpy(r, &id, 8);
        for (unsigned i = 8; i < RS; i++)
            r[i] = (unsigned char)(id + i);
        if (write(fd, r, RS) != RS)
            return -1;
    }
    close(fd);
    return 0;
}

/* 0 if every record of the batch is whole */
static int check(const adag_data_batch_t *b, unsigned bs)
{
    for (unsigned j = 0; j < bs; j++) {
        const unsigned char *r = (const unsigned char *)b->data + (size_t)j * RS;
        uint64_t id;
        memcpy(&id, r, 8);
        if (id >= NREC)
            return -1;
        for (unsigned i = 8; i < RS; i++)
            if (r[i] != (unsigned char)(id + i))
                return -1;
    }
    return 0;
}

static int run(unsigned threads, size_t budget_batches, unsigned nbatches, int close_early)
{
    const char *shards[1] = {path};
    const unsigned bs = 16;
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_THREADS |
                      ADAG_DATA_PARAM_BUDGET | ADAG_DATA_PARAM_SHUFFLE | ADAG_DATA_PARAM_SEED |
                      ADAG_DATA_PARAM_PREFETCH,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = bs,
        .record_size = RS,
        .threads = threads,
        .budget = budget_batches * bs * RS,
        .shuffle_window = 100,
        .seed = threads,
        .prefetch = 2,
    };
    adag_data_source_h src;
    if (adag_data_open(&p, &src) != ADAG_OK) {
        fprintf(stderr, "stress_data: open: %s\n", adag_last_error());
        return -1;
    }
    adag_data_batch_t held[2];
    uint64_t expect = 0;
    for (unsigned n = 0; n < nbatches; n += 2) {
        for (unsigned k = 0; k < 2; k++) {
            if (adag_data_next(src, &held[k], 20000) != ADAG_OK || check(&held[k], bs) ||
                held[k].batch != expect % (NREC / bs)) {
                fprintf(stderr, "stress_data: batch %llu wrong: %s\n",
                        (unsigned long long)expect, adag_last_error());
                adag_data_close(src);
                return -1;
            }
            expect++;
        }
        adag_data_release(src, &held[1]); /* out of order */
        adag_data_release(src, &held[0]);
    }
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    if (st.bytes_peak > p.budget) {
        fprintf(stderr, "stress_data: peak %zu over budget %zu\n", st.bytes_peak, p.budget);
        adag_data_close(src);
        return -1;
    }
    if (close_early)
        usleep(1000); /* threads busy filling ahead */
    adag_data_close(src);
    return 0;
}

int main(void)
{
    if (write_records() != 0) {
        perror("stress_data: writing records");
        return 1;
    }
    int failed = 0;
    static const struct {
        unsigned threads;
        size_t budget;
        unsigned batches;
    } cases[] = {{1, 2, 300}, {4, 2, 600}, {8, 3, 800}, {16, 18, 800}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = run(cases[i].threads, cases[i].budget, cases[i].batches, (int)(i & 1));
        printf("stress_data: %u threads, budget of %zu batches: %s\n", cases[i].threads,
               cases[i].budget, rc ? "FAILED" : "ok");
        failed |= rc != 0;
    }
    unlink(path);
    printf("stress_data: %s\n", failed ? "FAILED" : "ok");
    return failed;
}

/*
 * Suite "data": the data front stage (include/adag/data.h) against files
 * the tests write: records, .npy and Megatron token datasets; the order
 * (same batches whatever the thread count, each sample once per epoch,
 * epochs reshuffled), exact resume from a cursor without reading what came
 * before, equal shares for 1-8 ranks, the byte budget under a stalled
 * consumer, bad-data policies, map callbacks and their failures.
 */
#include <adag/data.h>

#include "data_rig.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(data, .init = data_dir_make, .fini = data_dir_remove, .timeout = 60);

/* Record k (global id) of RS bytes: its id in the first 8 bytes, then a
 * pattern of it. */
#define RS 32
static void record_fill(unsigned char *r, uint64_t id)
{
    memcpy(r, &id, 8);
    for (unsigned i = 8; i < RS; i++)
        r[i] = (unsigned char)(id * 31 + i);
}

static uint64_t record_id(const unsigned char *r)
{
    uint64_t id;
    memcpy(&id, r, 8);
    for (unsigned i = 8; i < RS; i++)
        cr_assert_eq(r[i], (unsigned char)(id * 31 + i), "record %llu is torn at byte %u",
                     (unsigned long long)id, i);
    return id;
}

/* nshards files "r<i>.bin" of per[i] records, ids counting up across them. */
static uint64_t write_records(unsigned nshards, const unsigned *per)
{
    uint64_t id = 0;
    for (unsigned s = 0; s < nshards; s++) {
        unsigned char *buf = malloc((size_t)per[s] * RS + 1);
        for (unsigned k = 0; k < per[s]; k++)
            record_fill(buf + (size_t)k * RS, id++);
        char name[32];
        snprintf(name, sizeof(name), "r%u.bin", s);
        data_write_file(name, buf, (size_t)per[s] * RS);
        free(buf);
    }
    return id;
}

static adag_data_params_t records_params(unsigned batch)
{
    static const char *glob[1];
    glob[0] = data_path("r*.bin");
    return (adag_data_params_t){
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE,
        .shards = glob,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = batch,
        .record_size = RS,
    };
}

/* The ids of the next n batches (n * batch ids). */
static void take_ids(adag_data_source_h src, unsigned n, unsigned batch, uint64_t *ids)
{
    for (unsigned b = 0; b < n; b++) {
        adag_data_batch_t bt;
        cr_assert_eq(adag_data_next(src, &bt, 10000), ADAG_OK, "batch %u: %s", b,
                     adag_last_error());
        cr_assert_eq(bt.nsamples, batch);
        cr_assert_eq(bt.size, (size_t)batch * RS);
        for (unsigned j = 0; j < batch; j++)
            ids[(size_t)b * batch + j] = record_id((unsigned char *)bt.data + (size_t)j * RS);
        cr_assert_eq(adag_data_release(src, &bt), ADAG_OK);
    }
}

/* Without shuffling, batch b holds records b*B .. b*B+B-1 of the shards in
 * file order; epochs repeat. */
Test(data, records_in_order)
{
    unsigned per[3] = {10, 7, 15};
    uint64_t n = write_records(3, per);
    adag_data_params_t p = records_params(4);
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    uint64_t batches, samples;
    adag_data_size(src, &batches, &samples);
    cr_assert_eq(samples, n);
    cr_assert_eq(batches, n / 4); /* 32 / 4, the tail dropped */
    uint64_t ids[2 * 8 * 4];
    take_ids(src, 16, 4, ids);
    for (unsigned i = 0; i < 64; i++)
        cr_assert_eq(ids[i], i % 32, "position %u holds record %llu", i,
                     (unsigned long long)ids[i]);
    adag_data_close(src);
}

static void shuffled(adag_data_params_t *p, uint64_t seed, unsigned threads)
{
    p->field_mask |= ADAG_DATA_PARAM_SHUFFLE | ADAG_DATA_PARAM_SEED | ADAG_DATA_PARAM_THREADS;
    p->shuffle_shards = 1;
    p->shuffle_window = 16;
    p->seed = seed;
    p->threads = threads;
}

/* Shuffled: each epoch is a permutation of every record, epochs differ,
 * the same seed gives the same batches with 1, 4 or 16 threads, another
 * seed others. */
Test(data, shuffle_is_a_pure_function_of_the_seed)
{
    unsigned per[5] = {40, 13, 27, 1, 47};
    uint64_t n = write_records(5, per); /* 128 */
    const unsigned nb = 2 * 128 / 8;
    uint64_t runs[4][2 * 128];
    unsigned threads[4] = {1, 4, 16, 4};
    for (unsigned r = 0; r < 4; r++) {
        adag_data_params_t p = records_params(8);
        shuffled(&p, r == 3 ? 43 : 42, threads[r]);
        adag_data_source_h src;
        cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
        take_ids(src, nb, 8, runs[r]);
        adag_data_close(src);
    }
    cr_assert_arr_eq(runs[0], runs[1], sizeof(runs[0]), "1 and 4 threads differ");
    cr_assert_arr_eq(runs[0], runs[2], sizeof(runs[0]), "1 and 16 threads differ");
    cr_assert(memcmp(runs[0], runs[3], sizeof(runs[0])), "seeds 42 and 43 give one order");
    for (unsigned e = 0; e < 2; e++) {
        unsigned char seen[128] = {0};
        unsigned in_place = 0;
        for (unsigned i = 0; i < n; i++) {
            uint64_t id = runs[0][e * n + i];
            cr_assert_lt(id, n);
            cr_assert_eq(seen[id]++, 0, "epoch %u: record %llu twice", e, (unsigned long long)id);
            in_place += id == i;
        }
        cr_assert_lt(in_place, n / 4, "epoch %u barely shuffled (%u in place)", e, in_place);
    }
    cr_assert(memcmp(runs[0], runs[0] + n, n * sizeof(uint64_t)), "epoch 1 repeats epoch 0");
}

/* A source opened at the cursor after batch k continues with exactly the
 * batches the first one gave after k, and reads nothing before it. */
Test(data, resume_is_exact_and_reads_nothing_before)
{
    unsigned per[4] = {100, 100, 100, 100};
    write_records(4, per);
    adag_data_params_t p = records_params(10);
    shuffled(&p, 7, 3);
    adag_data_source_h a;
    cr_assert_eq(adag_data_open(&p, &a), ADAG_OK, "%s", adag_last_error());
    uint64_t all[90 * 10];
    adag_data_batch_t bt;
    uint64_t cur_e = 0, cur_b = 0;
    for (unsigned b = 0; b < 90; b++) {
        cr_assert_eq(adag_data_next(a, &bt, 10000), ADAG_OK);
        for (unsigned j = 0; j < 10; j++)
            all[b * 10 + j] = record_id((unsigned char *)bt.data + (size_t)j * RS);
        if (b == 56) {
            cur_e = bt.next_epoch;
            cur_b = bt.next_batch;
        }
        cr_assert_eq(adag_data_release(a, &bt), ADAG_OK);
    }
    adag_data_close(a);
    cr_assert_eq(cur_e, 1, "batch 56 is in epoch 1 (40 batches per epoch)");
    cr_assert_eq(cur_b, 17);

    p.field_mask |= ADAG_DATA_PARAM_START | ADAG_DATA_PARAM_BUDGET;
    p.start_epoch = cur_e;
    p.start_batch = cur_b;
    p.budget = 5 * 10 * RS; /* it cannot read more than 5 batches ahead */
    adag_data_source_h r;
    cr_assert_eq(adag_data_open(&p, &r), ADAG_OK, "%s", adag_last_error());
    uint64_t rest[33 * 10];
    take_ids(r, 33, 10, rest);
    cr_assert_arr_eq(rest, all + 57 * 10, sizeof(rest), "the resumed batches differ");
    adag_data_stats_t st;
    adag_data_stats(r, &st);
    /* what it decoded: the 33 batches and at most its budget ahead */
    cr_assert_leq(st.bytes_read, (uint64_t)(33 + 5) * 10 * RS,
                  "the resumed source read %llu bytes", (unsigned long long)st.bytes_read);
    adag_data_close(r);
}

/* 1-8 ranks: each gets the same number of batches; with DROP every batch
 * of the epoch goes to exactly one rank, with PAD every sample is seen. */
Test(data, ranks_get_equal_shares)
{
    unsigned per[2] = {50, 53}; /* 103 records: 25 batches of 4, 3 left over */
    uint64_t n = write_records(2, per);
    for (unsigned world = 1; world <= 8; world++) {
        for (int pad = 0; pad < 2; pad++) {
            unsigned count[8];
            unsigned char seen_batch[32] = {0}, seen_rec[103] = {0};
            for (unsigned rank = 0; rank < world; rank++) {
                adag_data_params_t p = records_params(4);
                shuffled(&p, 5, 2);
                p.field_mask |= ADAG_DATA_PARAM_RANKS;
                p.rank = rank;
                p.world = world;
                p.ranks_policy = pad ? ADAG_DATA_RANKS_PAD : ADAG_DATA_RANKS_DROP;
                adag_data_source_h src;
                cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
                uint64_t nb;
                adag_data_size(src, &nb, NULL);
                count[rank] = (unsigned)nb;
                for (uint64_t b = 0; b < nb; b++) {
                    adag_data_batch_t bt;
                    cr_assert_eq(adag_data_next(src, &bt, 10000), ADAG_OK);
                    cr_assert_eq(bt.epoch, 0);
                    cr_assert_lt(bt.epoch_batch, 32);
                    seen_batch[bt.epoch_batch]++;
                    for (unsigned j = 0; j < 4; j++)
                        seen_rec[record_id((unsigned char *)bt.data + (size_t)j * RS)] = 1;
                    adag_data_release(src, &bt);
                }
                adag_data_close(src);
            }
            for (unsigned rank = 1; rank < world; rank++)
                cr_assert_eq(count[rank], count[0], "world %u: rank %u has %u batches, rank 0 %u",
                             world, rank, count[rank], count[0]);
            if (!pad) {
                cr_assert_eq(count[0], 25 / world, "world %u", world);
                for (unsigned b = 0; b < count[0] * world; b++)
                    cr_assert_eq(seen_batch[b], 1, "world %u: batch %u seen %u times", world, b,
                                 seen_batch[b]);
            } else {
                cr_assert_eq(count[0], (26 + world - 1) / world, "world %u", world);
                for (uint64_t k = 0; k < n; k++)
                    cr_assert(seen_rec[k], "world %u, pad: record %llu never seen", world,
                              (unsigned long long)k);
            }
        }
    }
}

/* A consumer that stops taking batches makes the threads wait: the peak
 * of bytes held stays within the budget, also a budget of two batches
 * with four threads; the batches still come in order. */
Test(data, budget_is_never_exceeded)
{
    unsigned per[1] = {4096};
    write_records(1, per);
    size_t batch_bytes = 16 * RS;
    for (int tight = 0; tight < 2; tight++) {
        adag_data_params_t p = records_params(16);
        p.field_mask |= ADAG_DATA_PARAM_THREADS | ADAG_DATA_PARAM_BUDGET | ADAG_DATA_PARAM_PREFETCH;
        p.threads = 4;
        p.prefetch = 2;
        p.budget = tight ? 2 * batch_bytes : 5 * batch_bytes + 7;
        adag_data_source_h src;
        cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
        usleep(200000); /* stalled */
        adag_data_stats_t st;
        adag_data_stats(src, &st);
        cr_assert_leq(st.bytes_peak, p.budget, "peak %zu over a budget of %zu", st.bytes_peak,
                      p.budget);
        cr_assert_gt(st.blocked_s, 0.1, "the threads did not wait for the consumer");
        uint64_t ids[64 * 16];
        take_ids(src, 64, 16, ids);
        for (unsigned i = 0; i < 64 * 16; i++)
            cr_assert_eq(ids[i], i);
        adag_data_stats(src, &st);
        cr_assert_leq(st.bytes_peak, p.budget);
        cr_assert_eq(st.budget, p.budget);
        cr_assert_eq(st.batches, 64);
        adag_data_close(src);
    }
    adag_data_params_t p = records_params(16);
    p.field_mask |= ADAG_DATA_PARAM_BUDGET;
    p.budget = batch_bytes - 1;
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "does not hold one batch"), "%s", adag_last_error());
}

/* ---- .npy ---- */

/* A .npy v1 file of rows x cols float32, element (r, c) = r * 1000 + c. */
static void write_npy(const char *name, unsigned rows, unsigned cols)
{
    float *data = malloc((size_t)rows * cols * sizeof(float));
    for (unsigned r = 0; r < rows; r++)
        for (unsigned c = 0; c < cols; c++)
            data[(size_t)r * cols + c] = (float)(r * 1000 + c);
    unsigned shape[2] = {rows, cols};
    data_write_npy(name, "<f4", 2, shape, data, (size_t)rows * cols * sizeof(float));
    free(data);
}

/* Rows of .npy files are the samples; a corrupt file among them fails the
 * source naming it, or with ADAG_DATA_BAD_SKIP is left out and counted. */
Test(data, npy_rows_and_bad_files)
{
    write_npy("a.npy", 6, 3);
    write_npy("b.npy", 4, 3);
    const char *shards[3] = {data_path("a.npy"), data_path("b.npy"), data_path("c.npy")};
    adag_data_params_t p = {
        .shards = shards,
        .nshards = 2,
        .format = ADAG_DATA_FORMAT_NPY,
        .batch_size = 5,
    };
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    for (unsigned b = 0; b < 2; b++) {
        adag_data_batch_t bt;
        cr_assert_eq(adag_data_next(src, &bt, 10000), ADAG_OK);
        cr_assert_eq(bt.size, 5 * 3 * sizeof(float));
        const float *f = bt.data;
        for (unsigned j = 0; j < 5; j++) {
            unsigned k = b * 5 + j, row = k < 6 ? k : k - 6;
            for (unsigned c = 0; c < 3; c++)
                cr_assert_eq(f[j * 3 + c], (float)(row * 1000 + c), "batch %u sample %u", b, j);
        }
        adag_data_release(src, &bt);
    }
    adag_data_close(src);

    /* a third file whose header is cut short */
    unsigned char junk[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 200, 0, '{', '\''};
    data_write_file("c.npy", junk, sizeof(junk));
    p.nshards = 3;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "c.npy"), "the message names the file: %s",
              adag_last_error());
    p.field_mask |= ADAG_DATA_PARAM_BAD_POLICY;
    p.bad_policy = ADAG_DATA_BAD_SKIP;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    uint64_t samples;
    adag_data_size(src, NULL, &samples);
    cr_assert_eq(samples, 10);
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    cr_assert_eq(st.bad_skipped, 1);
    adag_data_close(src);
}

/* ---- Megatron tokens ---- */

/* Documents are packed into samples of seq_len tokens across document
 * bounds; the tail is dropped; "t.bin" and "t" name the same dataset. */
Test(data, tokens_packed_into_sequences)
{
    uint32_t sizes[4] = {5, 17, 3, 40};
    uint64_t total = data_write_tokens("t", sizes, 4); /* 65 tokens */
    const char *shards[1] = {data_path("t.bin")};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_SEQ_LEN,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_TOKENS,
        .batch_size = 2,
        .seq_len = 8,
    };
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    uint64_t nb, ns;
    adag_data_size(src, &nb, &ns);
    cr_assert_eq(ns, total / 8);
    cr_assert_eq(nb, ns / 2);
    for (unsigned b = 0; b < nb; b++) {
        adag_data_batch_t bt;
        cr_assert_eq(adag_data_next(src, &bt, 10000), ADAG_OK);
        const int32_t *t = bt.data;
        for (unsigned i = 0; i < 16; i++)
            cr_assert_eq(t[i], (int32_t)(b * 16 + i), "batch %u token %u", b, i);
        adag_data_release(src, &bt);
    }
    adag_data_close(src);

    /* an index whose last document runs past the .bin */
    uint32_t bad[2] = {5, 100};
    data_write_tokens("u", bad, 2);
    data_write_file("u.bin", "abcd", 4);
    shards[0] = data_path("u");
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "u.idx"), "%s", adag_last_error());
}

/* ---- map callbacks ---- */

typedef struct {
    uint64_t fail_at; /* a sample index that fails, or UINT64_MAX */
} map_ctx_t;

/* out = the record's id and two draws of its random state */
static adag_status_t map_fn(void *arg, const adag_data_sample_t *s, uint64_t *rng, void *out,
                            size_t out_size)
{
    const map_ctx_t *m = arg;
    if (s->index == m->fail_at)
        return adag_data_fail(s, "refusing this one");
    cr_assert_eq(out_size, 24);
    cr_assert_eq(s->size, RS);
    uint64_t v[3] = {0, adag_data_rand(rng), adag_data_rand(rng)};
    memcpy(&v[0], s->data, 8);
    memcpy(out, v, sizeof(v));
    return ADAG_OK;
}

/* The per-sample random state is a function of (seed, epoch, sample): the
 * same with 1 and 8 threads; a callback's failure reaches adag_data_next
 * with the shard and sample it named, and stays. */
Test(data, map_rng_is_deterministic_and_failures_travel)
{
    unsigned per[2] = {64, 64};
    write_records(2, per);
    uint64_t out[2][16 * 8 * 3];
    map_ctx_t ctx = {UINT64_MAX};
    for (unsigned r = 0; r < 2; r++) {
        adag_data_params_t p = records_params(8);
        shuffled(&p, 99, r ? 8 : 1);
        p.field_mask |= ADAG_DATA_PARAM_MAP;
        p.map = map_fn;
        p.map_arg = &ctx;
        p.sample_size = 24;
        adag_data_source_h src;
        cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
        for (unsigned b = 0; b < 16; b++) {
            adag_data_batch_t bt;
            cr_assert_eq(adag_data_next(src, &bt, 10000), ADAG_OK, "%s", adag_last_error());
            cr_assert_eq(bt.size, 8 * 24);
            memcpy(&out[r][b * 8 * 3], bt.data, bt.size);
            adag_data_release(src, &bt);
        }
        adag_data_close(src);
    }
    cr_assert_arr_eq(out[0], out[1], sizeof(out[0]), "1 and 8 threads drew differently");
    cr_assert_neq(out[0][1], out[0][2], "two draws of one state are equal");
    cr_assert_neq(out[0][1], out[0][4], "two samples drew alike");

    ctx.fail_at = 21;
    adag_data_params_t p = records_params(8);
    p.field_mask |= ADAG_DATA_PARAM_MAP;
    p.map = map_fn;
    p.map_arg = &ctx;
    p.sample_size = 24;
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    adag_status_t st = ADAG_OK;
    adag_data_batch_t bt;
    for (unsigned b = 0; b < 4 && st == ADAG_OK; b++)
        if ((st = adag_data_next(src, &bt, 10000)) == ADAG_OK)
            adag_data_release(src, &bt);
    cr_assert_eq(st, ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "sample 21: refusing this one") &&
                  strstr(adag_last_error(), "r0.bin"),
              "%s", adag_last_error());
    cr_assert_eq(adag_data_next(src, &bt, 100), ADAG_ERR_INVALID, "the failure stays");
    adag_data_close(src);
}

/* ---- misuse ---- */

Test(data, bad_params_and_misuse_are_refused)
{
    unsigned per[1] = {40};
    write_records(1, per);
    adag_data_source_h src;
    adag_data_params_t p = records_params(4);
    p.nshards = 0;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    p = records_params(0);
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "batch_size"), "%s", adag_last_error());
    p = records_params(4);
    p.field_mask &= ~(uint64_t)ADAG_DATA_PARAM_RECORD_SIZE;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    p = records_params(4);
    p.field_mask |= ADAG_DATA_PARAM_RANKS;
    p.rank = 3;
    p.world = 3;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    p = records_params(4);
    p.field_mask |= 1u << 30;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    const char *none[1] = {data_path("nothing*.bin")};
    p = records_params(4);
    p.shards = none;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "no file matches"), "%s", adag_last_error());
    /* a record file with a partial record at its end */
    unsigned char part[RS * 2 + 5] = {0};
    data_write_file("r1.bin", part, sizeof(part));
    p = records_params(4);
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "r1.bin") && strstr(adag_last_error(), "offset 64"),
              "%s", adag_last_error());
    unlink(data_path("r1.bin"));

    p = records_params(4);
    p.field_mask |= ADAG_DATA_PARAM_PREFETCH;
    p.prefetch = 2;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    adag_data_batch_t a, b, c;
    cr_assert_eq(adag_data_next(src, &a, 10000), ADAG_OK);
    cr_assert_eq(adag_data_next(src, &b, 10000), ADAG_OK);
    cr_assert_eq(adag_data_next(src, &c, 10000), ADAG_ERR_INVALID, "a third batch held");
    adag_data_batch_t again = a;
    cr_assert_eq(adag_data_release(src, &a), ADAG_OK);
    cr_assert_eq(adag_data_release(src, &again), ADAG_ERR_INVALID, "released twice");
    cr_assert_eq(adag_data_next(src, &c, 10000), ADAG_OK);
    adag_data_close(src); /* with batches still held */
}

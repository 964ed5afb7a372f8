/*
 * Suite "data_errors": how a data source fails. A map callback's failure
 * reaches the consumer after every batch before the failing one, in
 * order, whatever the threads' timing; ADAG_DATA_BAD_SKIP giving up keeps
 * the first bad sample's shard and text; special files (a FIFO, a unix
 * socket, a character device) given as shards are refused at once, named,
 * under both bad-data policies; a declared tensor dtype or shape that
 * contradicts an .npy file's header is refused; misuse of a batch is
 * explained.
 */
#include <adag/data.h>

#include "data_rig.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

TestSuite(data_errors, .init = data_dir_make, .fini = data_dir_remove, .timeout = 60);

#define RS 16

/* "r.bin": n records of RS bytes, record k holding k in its first 8. */
static void write_ids(unsigned n)
{
    unsigned char *buf = calloc(n, RS);
    cr_assert_not_null(buf);
    for (uint64_t k = 0; k < n; k++)
        memcpy(buf + k * RS, &k, 8);
    data_write_file("r.bin", buf, (size_t)n * RS);
    free(buf);
}

typedef struct {
    uint64_t bad_from, bad_to; /* samples in [bad_from, bad_to) are refused */
    unsigned slow_us;          /* good samples take this long */
} refuse_t;

/* out = the record's id; refuses the samples of its range at once, takes
 * slow_us for the others (so the failing batch is reached early). */
static adag_status_t refuse_map(void *arg, const adag_data_sample_t *s, uint64_t *rng, void *out,
                                size_t out_size)
{
    (void)rng;
    const refuse_t *r = arg;
    if (s->index >= r->bad_from && s->index < r->bad_to)
        return adag_data_fail(s, "refusing this one");
    if (r->slow_us) {
        struct timespec ts = {0, (long)r->slow_us * 1000};
        nanosleep(&ts, NULL);
    }
    memcpy(out, s->data, out_size < 8 ? out_size : 8);
    return ADAG_OK;
}

static adag_data_params_t refuse_params(refuse_t *r, unsigned threads)
{
    static const char *shard[1];
    shard[0] = data_path("r.bin");
    return (adag_data_params_t){
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_MAP |
                      ADAG_DATA_PARAM_THREADS | ADAG_DATA_PARAM_BAD_POLICY,
        .shards = shard,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = 10,
        .sample_size = 8,
        .record_size = RS,
        .map = refuse_map,
        .map_arg = r,
        .threads = threads,
        .bad_policy = ADAG_DATA_BAD_FAIL,
    };
}

/* With ADAG_DATA_BAD_FAIL and a map refusing sample 100 (batch 10), the
 * ten batches before it arrive, in order and whole, then the failure with
 * its text, which stays; also with a budget of two batches, and with 1 or
 * 4 threads (the good samples are slow, so another thread reaches the
 * failing one long before the consumer has taken the first batches). */
Test(data_errors, batches_before_a_failure_arrive_in_order_then_the_failure)
{
    write_ids(400);
    refuse_t r = {100, 101, 2000};
    for (int c = 0; c < 3; c++) {
        adag_data_params_t p = refuse_params(&r, c == 0 ? 1 : 4);
        if (c == 2) {
            p.field_mask |= ADAG_DATA_PARAM_BUDGET;
            p.budget = 2 * 10 * 8;
        }
        adag_data_source_h src;
        cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
        for (unsigned b = 0; b < 10; b++) {
            adag_data_batch_t bt;
            adag_status_t st = adag_data_next(src, &bt, 20000);
            cr_assert_eq(st, ADAG_OK, "case %d: batch %u of the 10 before the failure: %s (%s)",
                         c, b, adag_status_str(st), adag_last_error());
            cr_assert_eq(bt.batch, b);
            const uint64_t *ids = bt.data;
            for (unsigned j = 0; j < 10; j++)
                cr_assert_eq(ids[j], b * 10 + j, "case %d: batch %u, sample %u", c, b, j);
            cr_assert_eq(adag_data_release(src, &bt), ADAG_OK);
        }
        adag_data_batch_t bt;
        cr_assert_eq(adag_data_next(src, &bt, 20000), ADAG_ERR_INVALID, "case %d", c);
        cr_assert(strstr(adag_last_error(), "r.bin: sample 100: refusing this one"),
                  "case %d: %s", c, adag_last_error());
        cr_assert_eq(adag_data_next(src, &bt, 100), ADAG_ERR_INVALID, "the failure stays");
        cr_assert(strstr(adag_last_error(), "sample 100"), "%s", adag_last_error());
        adag_data_close(src);
    }
}

/* ADAG_DATA_BAD_SKIP gives up after 16 bad samples in a row: the message
 * still names the shard and the first of them, with the map's words. */
Test(data_errors, bad_skip_giving_up_keeps_the_first_sample_and_its_shard)
{
    write_ids(400);
    refuse_t r = {30, 400, 0};
    adag_data_params_t p = refuse_params(&r, 2);
    p.bad_policy = ADAG_DATA_BAD_SKIP;
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    adag_data_batch_t bt;
    for (unsigned b = 0; b < 3; b++) {
        cr_assert_eq(adag_data_next(src, &bt, 20000), ADAG_OK, "%s", adag_last_error());
        adag_data_release(src, &bt);
    }
    cr_assert_eq(adag_data_next(src, &bt, 20000), ADAG_ERR_INVALID);
    const char *e = adag_last_error();
    cr_assert(strstr(e, data_path("r.bin")) && strstr(e, "sample 30: refusing this one") &&
                  strstr(e, "the 15 samples after it were bad too") &&
                  strstr(e, "ADAG_DATA_BAD_SKIP gives up"),
              "%s", e);
    adag_data_close(src);
}


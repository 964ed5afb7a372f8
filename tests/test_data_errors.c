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

/* ---- special files ---- */

/* A FIFO, a unix socket bound to a path, a character device and a
 * directory given as shards are refused at once, naming the path and what
 * it is, under ADAG_DATA_BAD_FAIL; with ADAG_DATA_BAD_SKIP they are left
 * out and counted (a FIFO with no writer used to block open forever). */
Test(data_errors, special_files_are_refused_not_waited_on, .timeout = 20)
{
    write_ids(40);
    cr_assert_eq(mkfifo(data_path("fifo"), 0600), 0, "mkfifo: %s", strerror(errno));
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(sock, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", data_path("sock"));
    cr_assert_eq(bind(sock, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind: %s", strerror(errno));
    cr_assert_eq(mkdir(data_path("dir"), 0700), 0);
    struct {
        char path[512];
        const char *what;
    } special[4] = {{"", "a FIFO"}, {"", "a socket"}, {"/dev/null", "a character device"},
                    {"", "a directory"}};
    snprintf(special[0].path, sizeof(special[0].path), "%s", data_path("fifo"));
    snprintf(special[1].path, sizeof(special[1].path), "%s", data_path("sock"));
    snprintf(special[3].path, sizeof(special[3].path), "%s", data_path("dir"));
    for (int i = 0; i < 4; i++) {
        for (int skip = 0; skip < 2; skip++) {
            const char *shards[2] = {data_path("r.bin"), special[i].path};
            adag_data_params_t p = {
                .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_BAD_POLICY,
                .shards = shards,
                .nshards = 2,
                .format = ADAG_DATA_FORMAT_RECORDS,
                .batch_size = 4,
                .record_size = RS,
                .bad_policy = skip ? ADAG_DATA_BAD_SKIP : ADAG_DATA_BAD_FAIL,
            };
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            adag_data_source_h src = NULL;
            adag_status_t st = adag_data_open(&p, &src);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double took = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
            cr_assert_lt(took, 5.0, "%s: open took %.1f s", special[i].what, took);
            if (!skip) {
                cr_assert_eq(st, ADAG_ERR_INVALID, "%s: %s", special[i].what,
                             adag_status_str(st));
                cr_assert(strstr(adag_last_error(), special[i].path) &&
                              strstr(adag_last_error(), special[i].what),
                          "%s", adag_last_error());
                continue;
            }
            cr_assert_eq(st, ADAG_OK, "%s, skipped: %s", special[i].what, adag_last_error());
            adag_data_stats_t stats;
            uint64_t samples;
            adag_data_stats(src, &stats);
            adag_data_size(src, NULL, &samples);
            cr_assert_eq(stats.bad_skipped, 1, "%s: %llu skipped", special[i].what,
                         (unsigned long long)stats.bad_skipped);
            cr_assert_eq(samples, 40);
            adag_data_close(src);
        }
    }
    close(sock);
}

/* ---- what the files' headers say ---- */

/* An f64 .npy of 8 rows of 3 whose bytes are also 8 rows of 6 f32: a
 * declared f32 sample (the bytes would be reinterpreted) or a shape other
 * than the rows' is refused naming the file; the true one is taken; a
 * second file of another dtype with rows of the same size is refused too.
 * With a map the declaration is the map's output and is not checked. */
Test(data_errors, a_declared_tensor_that_contradicts_the_npy_header_is_refused)
{
    double v[8 * 3];
    for (unsigned i = 0; i < 8 * 3; i++)
        v[i] = i * 0.5;
    unsigned shape[2] = {8, 3};
    data_write_npy("d.npy", "<f8", 2, shape, v, sizeof(v));
    const char *shards[2] = {data_path("d.npy"), data_path("f.npy")};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_TENSOR,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_NPY,
        .batch_size = 2,
        .sample_dtype = ADAG_DTYPE_F32,
        .sample_ndim = 1,
        .sample_shape = {6},
    };
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID, "f32 [6] on an f64 [3] file");
    cr_assert(strstr(adag_last_error(), "d.npy") && strstr(adag_last_error(), "f64") &&
                  strstr(adag_last_error(), "sample_dtype is f32"),
              "%s", adag_last_error());

    p.sample_dtype = ADAG_DTYPE_F64;
    p.sample_shape[0] = 3;
    p.sample_ndim = 1;
    p.field_mask |= ADAG_DATA_PARAM_BAD_POLICY;
    p.bad_policy = ADAG_DATA_BAD_FAIL;
    int64_t wrong[2][2] = {{1, 3}, {3, 1}};
    for (int w = 0; w < 2; w++) {
        p.sample_ndim = 2;
        p.sample_shape[0] = wrong[w][0];
        p.sample_shape[1] = wrong[w][1];
        cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID, "shape %d", w);
        cr_assert(strstr(adag_last_error(), "d.npy") && strstr(adag_last_error(), "[3]"),
                  "%s", adag_last_error());
    }
    p.sample_ndim = 1;
    p.sample_shape[0] = 3;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    adag_data_batch_t bt;
    cr_assert_eq(adag_data_next(src, &bt, 10000), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(((const double *)bt.data)[4], 2.0);
    adag_data_release(src, &bt);
    adag_data_close(src);

    /* a map writes what the declaration says: not checked against the file */
    refuse_t none = {UINT64_MAX, UINT64_MAX, 0};
    adag_data_params_t m = p;
    m.field_mask |= ADAG_DATA_PARAM_MAP;
    m.map = refuse_map;
    m.map_arg = &none;
    m.sample_size = 24;
    m.sample_dtype = ADAG_DTYPE_F32;
    m.sample_shape[0] = 6;
    cr_assert_eq(adag_data_open(&m, &src), ADAG_OK, "%s", adag_last_error());
    adag_data_close(src);

    /* rows of 6 f32 are 24 bytes too */
    float f[4 * 6] = {0};
    unsigned fshape[2] = {4, 6};
    data_write_npy("f.npy", "<f4", 2, fshape, f, sizeof(f));
    p.nshards = 2;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID, "an f32 file after an f64 one");
    cr_assert(strstr(adag_last_error(), "f.npy"), "%s", adag_last_error());
    p.field_mask &= ~(uint64_t)ADAG_DATA_PARAM_TENSOR; /* and its fields zero */
    p.sample_dtype = ADAG_DTYPE_BYTES;
    p.sample_ndim = 0;
    memset(p.sample_shape, 0, sizeof(p.sample_shape));
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID, "shards of two layouts");
    cr_assert(strstr(adag_last_error(), "f.npy") && strstr(adag_last_error(), "d.npy"), "%s",
              adag_last_error());
}

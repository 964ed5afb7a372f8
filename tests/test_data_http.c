/*
 * Suite "data_http": http:// shards through the disk cache, against a real
 * HTTP server on loopback (Python's http.server, tests/http_rig.c): the
 * same batches as the local files, a second source served from the cache
 * without a request, 0700/0600 modes, transient failures retried and
 * permanent ones reported with the URL, a server killed mid-download
 * leaving nothing that is used, a corrupted cached file fetched again,
 * least-recently-used eviction that spares entries in use, and two
 * processes fetching one shard once.
 */
#include <adag/data.h>

#include "data_rig.h"
#include "http_rig.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static http_server_t server;

static void http_fini(void)
{
    http_stop(&server);
    data_dir_remove();
}

static void http_init(void)
{
    data_dir_make();
    cr_assert_eq(mkdir(data_path("srv"), 0700), 0);
    http_start(&server, data_path("srv"), 0);
}

TestSuite(data_http, .init = http_init, .fini = http_fini, .timeout = 60);

#define REC 64

/* srv/<name>: n records of REC bytes, record i filled with (seed + i) */
static void write_records(const char *name, int n, int seed)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", data_path("srv"), name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    for (int i = 0; i < n; i++) {
        unsigned char r[REC];
        memset(r, (seed + i) & 0xff, sizeof(r));
        r[0] = (unsigned char)seed;
        cr_assert_eq(fwrite(r, 1, sizeof(r), f), sizeof(r));
    }
    fclose(f);
}

static adag_status_t open_records(const char *const *shards, unsigned n, unsigned batch,
                                  uint64_t cache_bytes, adag_data_source_h *src)
{
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_CACHE | ADAG_DATA_PARAM_THREADS,
        .shards = shards,
        .nshards = n,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = batch,
        .sample_size = REC,
        .record_size = REC,
        .cache_dir = data_path("cache"),
        .cache_bytes = cache_bytes,
        .threads = 2,
    };
    return adag_data_open(&p, src);
}

/* The bytes of a source's first epoch (malloc'd). */
static unsigned char *read_epoch(adag_data_source_h src, size_t *len)
{
    uint64_t nb;
    adag_data_size(src, &nb, NULL);
    unsigned char *all = NULL;
    *len = 0;
    for (uint64_t b = 0; b < nb; b++) {
        adag_data_batch_t batch;
        cr_assert_eq(adag_data_next(src, &batch, 20000), ADAG_OK, "%s", adag_last_error());
        all = realloc(all, *len + batch.size);
        memcpy(all + *len, batch.data, batch.size);
        *len += batch.size;
        adag_data_release(src, &batch);
    }
    return all;
}

/* Cache files whose name ends with suffix ("" : data files) */
static int cache_files(const char *suffix, char *first, size_t first_len)
{
    DIR *d = opendir(data_path("cache"));
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *dot = strrchr(e->d_name, '.');
        if (e->d_name[0] == '.')
            continue;
        int data = !strstr(e->d_name, ".sum") && !strstr(e->d_name, ".lock") &&
                   !strstr(e->d_name, ".tmp.");
        int match = suffix[0] ? (strstr(e->d_name, suffix) != NULL) : data;
        (void)dot;
        if (match) {
            if (!n && first)
                snprintf(first, first_len, "%s/%s", data_path("cache"), e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

Test(data_http, fetches_into_the_cache_then_serves_from_it)
{
    write_records("a.bin", 40, 1);
    write_records("b.bin", 24, 2);
    const char *urls[] = {http_url(&server, "/files/a.bin"), http_url(&server, "/files/b.bin")};
    char la[512], lb[512];
    snprintf(la, sizeof(la), "%s/a.bin", data_path("srv"));
    snprintf(lb, sizeof(lb), "%s/b.bin", data_path("srv"));
    const char *locals[] = {la, lb};

    adag_data_source_h src, local;
    cr_assert_eq(open_records(urls, 2, 8, 1 << 20, &src), ADAG_OK, "%s", adag_last_error());
    cr_assert_eq(open_records(locals, 2, 8, 1 << 20, &local), ADAG_OK, "%s", adag_last_error());
    size_t n1, n2;
    unsigned char *remote_bytes = read_epoch(src, &n1), *local_bytes = read_epoch(local, &n2);
    cr_assert_eq(n1, 64 * REC);
    cr_assert_eq(n1, n2);
    cr_assert_eq(memcmp(remote_bytes, local_bytes, n1), 0, "remote and local batches differ");
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    cr_assert_eq(st.cache_misses, 2);
    cr_assert_eq(st.cache_hits, 0);
    cr_assert_eq(st.bytes_fetched, 64 * REC);
    adag_data_close(src);
    adag_data_close(local);

    /* modes: the directory 0700, entries 0600 */
    struct stat s;
    cr_assert_eq(stat(data_path("cache"), &s), 0);
    cr_assert_eq(s.st_mode & 0777, 0700, "cache dir mode %o", s.st_mode & 0777);
    char entry[600];
    cr_assert_eq(cache_files("", entry, sizeof(entry)), 2);
    cr_assert_eq(stat(entry, &s), 0);
    cr_assert_eq(s.st_mode & 0777, 0600, "%s mode %o", entry, s.st_mode & 0777);

    /* a second source: from the cache, no request */
    cr_assert_eq(open_records(urls, 2, 8, 1 << 20, &src), ADAG_OK, "%s", adag_last_error());
    unsigned char *again = read_epoch(src, &n1);
    cr_assert_eq(memcmp(again, local_bytes, n1), 0);
    adag_data_stats(src, &st);
    cr_assert_eq(st.cache_hits, 2);
    cr_assert_eq(st.cache_misses, 0);
    adag_data_close(src);
    cr_assert_eq(http_count(&server, "/files/a.bin"), 1);
    cr_assert_eq(http_count(&server, "/files/b.bin"), 1);
    free(remote_bytes);
    free(local_bytes);
    free(again);
}

Test(data_http, transient_failures_are_retried_and_the_last_reported)
{
    setenv("ADAG_DATA_HTTP_RETRIES", "2", 1);
    write_records("a.bin", 16, 3);
    const char *flaky[] = {http_url(&server, "/flaky/2/a.bin")};
    adag_data_source_h src;
    cr_assert_eq(open_records(flaky, 1, 4, 1 << 20, &src), ADAG_OK, "%s", adag_last_error());
    adag_data_close(src);
    cr_assert_eq(http_count(&server, "/flaky/2/a.bin"), 3, "two 503s, then the file");

    const char *down[] = {http_url(&server, "/flaky/99/a.bin")};
    cr_assert_eq(open_records(down, 1, 4, 1 << 20, &src), ADAG_ERR_IO);
    const char *why = adag_last_error();
    cr_assert(strstr(why, down[0]) && strstr(why, "503") && strstr(why, "3 tries"), "%s", why);
    cr_assert_eq(http_count(&server, "/flaky/99/a.bin"), 3);

    const char *missing[] = {http_url(&server, "/files/nope.bin")};
    cr_assert_eq(open_records(missing, 1, 4, 1 << 20, &src), ADAG_ERR_IO);
    why = adag_last_error();
    cr_assert(strstr(why, missing[0]) && strstr(why, "404") && strstr(why, "1 try"), "%s", why);
    cr_assert_eq(cache_files("", NULL, 0), 1, "a failed fetch left a file (one is /flaky/2's)");
    cr_assert_eq(cache_files(".tmp.", NULL, 0), 0, "a failed fetch left a temporary file");
}

/* The server dies after half the body: the fetch fails (retries find no
 * server) naming the URL, and nothing is left that a later source would
 * use; restarted on the same port, the same URL is fetched whole. */
Test(data_http, a_server_killed_mid_download_leaves_nothing_used)
{
    setenv("ADAG_DATA_HTTP_RETRIES", "2", 1);
    write_records("big.bin", 4096, 5); /* 256 KiB */
    const char *urls[] = {http_url(&server, "/die/big.bin")};
    adag_data_source_h src;
    cr_assert_eq(open_records(urls, 1, 64, 1 << 22, &src), ADAG_ERR_IO);
    cr_assert(strstr(adag_last_error(), urls[0]), "%s", adag_last_error());
    cr_assert_not(http_alive(&server), "the server should have killed itself");
    cr_assert_eq(cache_files("", NULL, 0), 0, "a half download was left as an entry");
    cr_assert_eq(cache_files(".sum", NULL, 0), 0);
    cr_assert_eq(cache_files(".tmp.", NULL, 0), 0);

    int port = server.port;
    http_start(&server, data_path("srv"), port);
    cr_assert_eq(open_records(urls, 1, 64, 1 << 22, &src), ADAG_OK, "%s", adag_last_error());
    size_t n;
    unsigned char *all = read_epoch(src, &n);
    cr_assert_eq(n, 4096 * REC);
    for (int i = 0; i < 4096; i++)
        cr_assert_eq(all[(size_t)i * REC + 1], (unsigned char)(5 + i), "record %d", i);
    free(all);
    adag_data_close(src);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A server that sends half the body and then nothing: with
 * ADAG_DATA_HTTP_TIMEOUT_MS=1500 each try fails once nothing has come for
 * 1.5 s (libcurl's low-speed check, which averages over whole seconds,
 * took 5-7 s), and the message says so; a transfer that takes longer than
 * the timeout but never pauses that long is not cut. */
Test(data_http, a_stalled_download_fails_after_the_timeout)
{
    setenv("ADAG_DATA_HTTP_TIMEOUT_MS", "1500", 1);
    setenv("ADAG_DATA_HTTP_RETRIES", "1", 1);
    write_records("big.bin", 4096, 5); /* 256 KiB */
    const char *urls[] = {http_url(&server, "/stall/big.bin")};
    adag_data_source_h src;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(open_records(urls, 1, 64, 1 << 22, &src), ADAG_ERR_IO);
    double took = seconds_since(&t0);
    const char *why = adag_last_error();
    cr_assert(strstr(why, urls[0]) && strstr(why, "1500 ms") && strstr(why, "2 tries"), "%s",
              why);
    cr_assert_eq(http_count(&server, "/stall/big.bin"), 2);
    /* two tries of 1.5 s and a 0.2 s backoff: 3.2 s; a bound of 3.5 s a try */
    cr_assert(took >= 2.9 && took < 2 * 3.5 + 0.2, "two stalled tries took %.2f s", took);
    cr_assert_eq(cache_files(".tmp.", NULL, 0), 0, "a stalled fetch left a temporary file");

    /* 8 pieces 0.5 s apart: 3.5 s in all, never 1.5 s without a byte */
    write_records("slow.bin", 1024, 9);
    const char *slow[] = {http_url(&server, "/slow/500/slow.bin")};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(open_records(slow, 1, 64, 1 << 22, &src), ADAG_OK, "%s", adag_last_error());
    cr_assert_geq(seconds_since(&t0), 3.0, "the slow body came too fast to mean anything");
    cr_assert_eq(http_count(&server, "/slow/500/slow.bin"), 1, "a slow transfer was retried");
    size_t n;
    unsigned char *all = read_epoch(src, &n);
    cr_assert_eq(n, 1024 * REC);
    free(all);
    adag_data_close(src);
}

Test(data_http, a_corrupted_cached_file_is_fetched_again)
{
    write_records("a.bin", 32, 7);
    const char *urls[] = {http_url(&server, "/files/a.bin")};
    adag_data_source_h src;
    cr_assert_eq(open_records(urls, 1, 8, 1 << 20, &src), ADAG_OK, "%s", adag_last_error());
    adag_data_close(src);
    char entry[600];
    cr_assert_eq(cache_files("", entry, sizeof(entry)), 1);
    int fd = open(entry, O_WRONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pwrite(fd, "X", 1, 100), 1); /* one byte, size unchanged */
    close(fd);

    cr_assert_eq(open_records(urls, 1, 8, 1 << 20, &src), ADAG_OK, "%s", adag_last_error());
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    cr_assert_eq(st.cache_misses, 1, "the corrupt entry was used");
    size_t n;
    unsigned char *all = read_epoch(src, &n);
    cr_assert_eq(all[100], (unsigned char)(7 + 100 / REC), "byte 100 is %d", all[100]);
    free(all);
    adag_data_close(src);
    cr_assert_eq(http_count(&server, "/files/a.bin"), 2);
}

/* Entries of 8 KiB under a cap of 20 KiB: an entry in use is never
 * evicted (the cache goes over the cap meanwhile); once none is in use,
 * the least recently used go first. */
Test(data_http, lru_eviction_spares_entries_in_use)
{
    const char *names[] = {"s1.bin", "s2.bin", "s3.bin", "s4.bin"};
    const char *u[4];
    for (int i = 0; i < 4; i++) {
        write_records(names[i], 128, 10 * i); /* 8 KiB */
        char path[64];
        snprintf(path, sizeof(path), "/files/%s", names[i]);
        u[i] = strdup(http_url(&server, path));
    }
    uint64_t cap = 20 << 10;
    adag_data_source_h a, b, c;
    cr_assert_eq(open_records(u, 2, 8, cap, &a), ADAG_OK, "%s", adag_last_error()); /* s1 s2 */
    usleep(20000);
    cr_assert_eq(open_records(u + 2, 1, 8, cap, &b), ADAG_OK, "%s", adag_last_error()); /* s3 */
    cr_assert_eq(cache_files("", NULL, 0), 3, "an entry in use was evicted");
    adag_data_close(a);
    adag_data_close(b);
    usleep(20000);
    cr_assert_eq(open_records(u, 1, 8, cap, &c), ADAG_OK); /* s1 used again: most recent */
    adag_data_close(c);
    usleep(20000);
    cr_assert_eq(open_records(u + 3, 1, 8, cap, &c), ADAG_OK, "%s", adag_last_error()); /* s4 */
    adag_data_close(c);
    /* 32 KiB would be over 20: s2 and s3 (least recent) went */
    cr_assert_eq(cache_files("", NULL, 0), 2);
    cr_assert_eq(cache_files("-s1.bin", NULL, 0) >= 1, 1, "s1 was evicted, though used last");
    cr_assert_eq(cache_files("-s2.bin", NULL, 0), 0, "s2 kept");
    cr_assert_eq(cache_files("-s3.bin", NULL, 0), 0, "s3 kept");
    cr_assert(cache_files("-s4.bin", NULL, 0) >= 1);
    for (int i = 0; i < 4; i++)
        free((void *)u[i]);
}

/* Two processes open the same URL at once: one fetches, the other waits
 * on the entry's lock and uses what it fetched. */
Test(data_http, two_processes_fetch_a_shard_once)
{
    write_records("shared.bin", 1 << 15, 9); /* 2 MiB */
    const char *urls[] = {http_url(&server, "/files/shared.bin")};
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        cr_assert_geq(kids[k], 0);
        if (kids[k] == 0) {
            adag_data_source_h src;
            if (open_records(urls, 1, 64, 1 << 24, &src) != ADAG_OK)
                _exit(1);
            adag_data_batch_t b;
            int ok = adag_data_next(src, &b, 20000) == ADAG_OK &&
                     ((unsigned char *)b.data)[1] == 9;
            adag_data_close(src);
            _exit(ok ? 0 : 2);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status;
        cr_assert_eq(waitpid(kids[k], &status, 0), kids[k]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %#x", k,
                  status);
    }
    cr_assert_eq(http_count(&server, "/files/shared.bin"), 1, "fetched %d times",
                 http_count(&server, "/files/shared.bin"));
}

/* A token dataset's URL "u" is two files, u.bin and u.idx: both fetched,
 * once, and the batches equal those of the local files. */
Test(data_http, a_token_dataset_is_fetched_as_bin_and_idx)
{
    const uint32_t sizes[] = {300, 17, 1000, 211};
    data_write_tokens("srv/t", sizes, 4);
    char local[512];
    snprintf(local, sizeof(local), "%s/t", data_path("srv"));
    const char *url = http_url(&server, "/files/t");
    /* 1528 tokens: 47 samples of 32, 23 batches of 2 int32 sequences */
    static unsigned char epoch[2][23 * 2 * 32 * 4];
    for (int remote = 0; remote < 2; remote++) {
        const char *shards[] = {remote ? url : local};
        adag_data_params_t p = {
            .field_mask = ADAG_DATA_PARAM_SEQ_LEN | ADAG_DATA_PARAM_CACHE,
            .shards = shards,
            .nshards = 1,
            .format = ADAG_DATA_FORMAT_TOKENS,
            .batch_size = 2,
            .seq_len = 32,
            .cache_dir = data_path("cache"),
            .cache_bytes = 1 << 20,
        };
        adag_data_source_h src;
        cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
        size_t n;
        unsigned char *all = read_epoch(src, &n);
        cr_assert_eq(n, sizeof(epoch[0]), "%zu bytes an epoch", n);
        memcpy(epoch[remote], all, n);
        free(all);
        adag_data_close(src);
    }
    cr_assert_eq(memcmp(epoch[0], epoch[1], sizeof(epoch[0])), 0,
                 "the fetched dataset's batches differ from the local one's");
    cr_assert_eq(http_count(&server, "/files/t.bin"), 1);
    cr_assert_eq(http_count(&server, "/files/t.idx"), 1);
}

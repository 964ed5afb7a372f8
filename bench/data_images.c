/*
 * adag-bench image rows (include/adag/data.h): a WebDataset of JPEGs the
 * bench writes once per run (8 shards x 1000 images of 256 x 256, fixed
 * seed; --quick: 2 x 250) read by a source with the built-in image map
 * (decode -> random-resized crop to 224 -> flip -> normalize to f32 CHW),
 * batches of 64, a thread per online CPU, shuffled. Measured in samples/s
 * over an open plus one epoch of the source (the dataset was just written:
 * the page cache holds it), against:
 *   - the ideal: the image map called in a loop on one thread over shard
 *     0's samples in memory, its rate times the source's threads; three
 *     rounds alternate the two, medians;
 *   - Ray Data and torch's DataLoader with PIL (bench/peers/images_*.py,
 *     the same shards and transform, the same parallelism), where
 *     installed;
 *   - remote: the same shards over http:// from a loopback server
 *     (Python's http.server) through the cache, cold (empty cache: the
 *     fetch is in the time) and warm, each an open plus one epoch, against
 *     an open plus one epoch of the local files: five rounds alternating
 *     local and remote, medians (the row's baseline is its own local
 *     rounds).
 */
#include "bench.h"

#include <adag/data.h>

#include "data/order.h"
#include "examples/jpeg_shards.h"

#include <archive.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef ADAG_BENCH_PEERS
#define ADAG_BENCH_PEERS "bench/peers"
#endif

#define SIDE 256
#define OUT 224
#define BATCH 64
#define SEED 23

static char dir[64];
static unsigned nshards, per_shard;
static pid_t server_pid;
static int server_port;

static void cleanup(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
    }
    if (dir[0])
        jpeg_shards_remove(dir);
}

static int dataset(const bench_opts_t *o)
{
    if (dir[0])
        return 0;
    nshards = o->quick ? 2 : 8;
    per_shard = o->quick ? 250 : 1000;
    snprintf(dir, sizeof dir, "/tmp/adag-bench-images-%d", (int)getpid());
    if (mkdir(dir, 0700) != 0)
        return dir[0] = '\0', -1;
    atexit(cleanup);
    fprintf(stderr, "adag-bench: writing %u WebDataset shards x %u JPEGs (%ux%u) in %s\n",
            nshards, per_shard, SIDE, SIDE, dir);
    return jpeg_shards_write(dir, nshards, per_shard, SIDE, SEED);
}

static unsigned threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 16 ? 16 : (unsigned)n;
}

static const adag_data_image_t transform = {.height = OUT, .width = OUT};

static adag_status_t open_source(const char *const *shards, unsigned n, const char *cache,
                                 adag_data_source_h *src)
{
    static const char *fields[] = {"jpg"};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_FIELDS | ADAG_DATA_PARAM_MAP | ADAG_DATA_PARAM_SCRATCH |
                      ADAG_DATA_PARAM_THREADS | ADAG_DATA_PARAM_SHUFFLE | ADAG_DATA_PARAM_SEED |
                      (cache ? ADAG_DATA_PARAM_CACHE : 0),
        .shards = shards,
        .nshards = n,
        .format = ADAG_DATA_FORMAT_WEBDATASET,
        .batch_size = BATCH,
        .sample_size = adag_data_image_size(&transform),
        .fields = fields,
        .nfields = 1,
        .map = adag_data_image_map,
        .map_arg = (void *)&transform,
        .scratch_size = adag_data_image_scratch(&transform),
        .threads = threads(),
        .shuffle_shards = 1,
        .shuffle_window = 1000,
        .seed = SEED,
        .cache_dir = cache,
        .cache_bytes = cache ? (uint64_t)1 << 32 : 0,
    };
    return adag_data_open(&p, src);
}

/* Consumes `epochs` epochs; the samples/s of the last. */
static int run_epochs(adag_data_source_h src, int epochs, double t_open, double *per_s)
{
    uint64_t nb;
    TRY(adag_data_size(src, &nb, NULL));
    double t0 = t_open;
    for (uint64_t b = 0; b < nb * (uint64_t)epochs; b++) {
        if (epochs > 1 && b == nb * (uint64_t)(epochs - 1))
            t0 = bench_now_us();
        adag_data_batch_t bt;
        TRY(adag_data_next(src, &bt, 120000));
        volatile float touch = ((const float *)bt.data)[b % 1000];
        (void)touch;
        TRY(adag_data_release(src, &bt));
    }
    *per_s = (double)(nb * BATCH) / ((bench_now_us() - t0) / 1e6);
    return 0;
fail:
    return -1;
}

static const char **local_shards(void)
{
    static char paths[16][96];
    static const char *ptrs[16];
    for (unsigned k = 0; k < nshards; k++) {
        snprintf(paths[k], sizeof paths[k], "%s/shard-%02u.tar", dir, k);
        ptrs[k] = paths[k];
    }
    return ptrs;
}

/* ---- the ideal: one thread running the image map over shard 0 ---- */

/* shard 0's JPEGs, read once into memory with libarchive */
static unsigned char **ideal_jpegs;
static size_t *ideal_lens;
static unsigned ideal_n;

static int ideal_load(void)
{
    if (ideal_jpegs)
        return 0;
    char path[128];
    snprintf(path, sizeof path, "%s/shard-00.tar", dir);
    struct archive *a = archive_read_new();
    struct archive_entry *e;
    int rc = -1;
    ideal_jpegs = calloc(per_shard, sizeof(*ideal_jpegs));
    ideal_lens = calloc(per_shard, sizeof(*ideal_lens));
    archive_read_support_format_tar(a);
    if (!ideal_jpegs || !ideal_lens || archive_read_open_filename(a, path, 1 << 16))
        goto out;
    while (ideal_n < per_shard && archive_read_next_header(a, &e) == ARCHIVE_OK) {
        const char *name = archive_entry_pathname(e);
        size_t len = (size_t)archive_entry_size(e);
        if (strlen(name) < 4 || strcmp(name + strlen(name) - 4, ".jpg"))
            continue;
        if (!(ideal_jpegs[ideal_n] = malloc(len)) ||
            archive_read_data(a, ideal_jpegs[ideal_n], len) != (la_ssize_t)len)
            goto out;
        ideal_lens[ideal_n++] = len;
    }
    rc = 0;
out:
    archive_read_free(a);
    return rc;
}

/* One pass of the image map over the loaded JPEGs on this thread: its
 * samples/s (nothing around it: no source, no threads, no batches). */
static int ideal_pass(double *per_s)
{
    size_t scratch_size = adag_data_image_scratch(&transform);
    void *scratch = malloc(scratch_size), *out = malloc(adag_data_image_size(&transform));
    int rc = scratch && out ? 0 : -1;
    double t0 = bench_now_us();
    for (unsigned i = 0; i < ideal_n && rc == 0; i++) {
        adag_data_sample_t s = {.data = ideal_jpegs[i], .size = ideal_lens[i], .index = i,
                                .shard = "shard-00", .scratch = scratch,
                                .scratch_size = scratch_size};
        uint64_t rng = adag__order_key(SEED, 0, 2, i);
        if (adag_data_image_map((void *)&transform, &s, &rng, out,
                                adag_data_image_size(&transform)) != ADAG_OK) {
            fprintf(stderr, "adag-bench: image map: %s\n", adag_last_error());
            rc = -1;
        }
    }
    *per_s = ideal_n / ((bench_now_us() - t0) / 1e6);
    free(scratch);
    free(out);
    return rc;
}

#define IMAGE_ROUNDS 3

/* the ideal (one thread's rate x threads) of the rounds of the last row */
static double ideal_median;

static int by_rate(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rounds alternating a pass of the ideal and an open + epoch of the
 * source, so that both see the same machine; medians. */
int run_data_images(const bench_opts_t *o, measure_t *m)
{
    if (dataset(o) || ideal_load())
        return -1;
    double ideal[IMAGE_ROUNDS], rate[IMAGE_ROUNDS], warm;
    adag_data_source_h src = NULL;
    if (ideal_pass(&warm)) /* caches */
        return -1;
    for (int r = 0; r < IMAGE_ROUNDS; r++) {
        if (ideal_pass(&ideal[r]))
            return -1;
        double t0 = bench_now_us();
        TRY(open_source(local_shards(), nshards, NULL, &src));
        if (run_epochs(src, 1, t0, &rate[r]))
            goto fail;
        adag_data_close(src);
        src = NULL;
    }
    qsort(ideal, IMAGE_ROUNDS, sizeof(double), by_rate);
    qsort(rate, IMAGE_ROUNDS, sizeof(double), by_rate);
    ideal_median = ideal[IMAGE_ROUNDS / 2] * threads();
    memset(m, 0, sizeof(*m));
    m->per_s = rate[IMAGE_ROUNDS / 2];
    m->iterations = (long)(nshards * per_shard);
    return 0;
fail:
    adag_data_close(src);
    return -1;
}

/* The ideal: the same transform of the same samples by one thread, with
 * nothing around it, times the source's threads: the rounds of the row
 * (run_data_images), else three passes of its own. */
int baseline_images_ideal(const bench_opts_t *o, measure_t *m)
{
    if (dataset(o) || ideal_load())
        return -1;
    double v[IMAGE_ROUNDS];
    if (ideal_median <= 0) {
        for (int r = 0; r < IMAGE_ROUNDS; r++)
            if (ideal_pass(&v[r]))
                return -1;
        qsort(v, IMAGE_ROUNDS, sizeof(double), by_rate);
        ideal_median = v[IMAGE_ROUNDS / 2] * threads();
    }
    memset(m, 0, sizeof(*m));
    m->per_s = ideal_median;
    m->iterations = ideal_n;
    return 0;
}

/* ---- peers: bench/peers/images_{ray,torch}.py ---- */

/* Runs a peer on the dataset: 0 and its samples/s, 1 if it is not
 * installed (why says so), -1 if it failed. */
int run_images_peer(const bench_opts_t *o, const char *peer, measure_t *m, char *why,
                    size_t why_len)
{
    if (dataset(o))
        return -1;
    char cmd[PATH_MAX + 256];
    snprintf(cmd, sizeof cmd,
             "python3 %s/images_%s.py --shards '%s/shard-*.tar' --threads %u --batch %d "
             "--seconds %d",
             ADAG_BENCH_PEERS, peer, dir, threads(), BATCH, o->quick ? 5 : 15);
    fprintf(stderr, "adag-bench: running %s\n", cmd);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[1024] = "";
    double per_s = 0;
    while (fgets(line, sizeof line, p)) {
        const char *k = strstr(line, "\"samples_per_s\":");
        if (k)
            per_s = strtod(k + strlen("\"samples_per_s\":"), NULL);
    }
    int status = pclose(p);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
        snprintf(why, why_len, "%s or its libraries are not installed (pip install %s)", peer,
                 strcmp(peer, "ray") ? "torch torchvision pillow" : "'ray[data]' pillow");
        return 1;
    }
    if (status != 0 || per_s <= 0) {
        fprintf(stderr, "adag-bench: the %s peer failed (status %d)\n", peer, status);
        return -1;
    }
    memset(m, 0, sizeof(*m));
    m->per_s = per_s;
    return 0;
}

/* ---- remote: the shards over loopback http ---- */

static const char server_py[] =
    "import http.server, os, sys\n"
    "os.chdir(sys.argv[1])\n"
    "class H(http.server.SimpleHTTPRequestHandler):\n"
    "    def log_message(self, *a):\n"
    "        pass\n"
    "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)\n"
    "open(sys.argv[2] + '.tmp', 'w').write(str(s.server_address[1]))\n"
    "os.rename(sys.argv[2] + '.tmp', sys.argv[2])\n"
    "s.serve_forever()\n";

static int start_server(void)
{
    if (server_pid > 0)
        return 0;
    char script[128], portfile[128];
    snprintf(script, sizeof script, "%s/.server.py", dir);
    snprintf(portfile, sizeof portfile, "%s/.port", dir);
    FILE *f = fopen(script, "w");
    if (!f)
        return -1;
    fputs(server_py, f);
    fclose(f);
    if ((server_pid = fork()) < 0)
        return -1;
    if (server_pid == 0) {
        execlp("python3", "python3", script, dir, portfile, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000; i++) {
        if ((f = fopen(portfile, "r"))) {
            int ok = fscanf(f, "%d", &server_port) == 1;
            fclose(f);
            if (ok)
                return 0;
        }
        usleep(10000);
    }
    return -1;
}

/* An open plus one epoch: local files (mode 0), http cold (1: an empty
 * cache), http warm (2: the cache of a run before). */
static int open_and_epoch(int mode, double *per_s)
{
    char cache[96], urls[16][128];
    const char *shards[16];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    if (mode == 1)
        jpeg_shards_remove(cache);
    for (unsigned k = 0; k < nshards; k++) {
        snprintf(urls[k], sizeof urls[k], "http://127.0.0.1:%d/shard-%02u.tar", server_port, k);
        shards[k] = urls[k];
    }
    adag_data_source_h src = NULL;
    if (mode == 2) { /* warm: whatever ran before, the cache holds the shards */
        TRY(open_source(shards, nshards, cache, &src));
        adag_data_close(src);
        src = NULL;
    }
    double t0 = bench_now_us();
    TRY(open_source(mode ? shards : local_shards(), nshards, mode ? cache : NULL, &src));
    if (run_epochs(src, 1, t0, per_s))
        goto fail;
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    if (mode)
        fprintf(stderr, "adag-bench: data-remote %s: %llu cache hits, %llu misses, %.1f MB "
                        "fetched, %.0f samples/s\n",
                mode == 1 ? "cold" : "warm", (unsigned long long)st.cache_hits,
                (unsigned long long)st.cache_misses, st.bytes_fetched / 1e6, *per_s);
    adag_data_close(src);
    return 0;
fail:
    adag_data_close(src);
    return -1;
}

#define ROUNDS 5

/* the median of the local rounds paired with the last remote row */
static double local_median;

static double median(double *v)
{
    qsort(v, ROUNDS, sizeof(*v), by_rate);
    return v[ROUNDS / 2];
}

int run_data_remote(const bench_opts_t *o, int mode, measure_t *m)
{
    if (dataset(o) || start_server())
        return -1;
    double remote[ROUNDS], local[ROUNDS];
    if (mode == 0 && local_median > 0) { /* the baseline: the rounds paired with the row */
        remote[0] = local_median;
    } else if (mode == 0) {
        for (int r = 0; r < ROUNDS; r++)
            if (open_and_epoch(0, &local[r]))
                return -1;
        remote[0] = median(local);
    } else {
        /* alternating with local rounds, so both see the same machine */
        for (int r = 0; r < ROUNDS; r++)
            if (open_and_epoch(0, &local[r]) || open_and_epoch(mode, &remote[r]))
                return -1;
        local_median = median(local);
        remote[0] = median(remote);
    }
    memset(m, 0, sizeof(*m));
    m->per_s = remote[0];
    m->iterations = (long)(nshards * per_shard);
    return 0;
}

int images_peer_available(const char *peer, char *why, size_t why_len)
{
    const char *mods = strcmp(peer, "ray") ? "torch, torchvision, PIL" : "ray.data, PIL";
    char cmd[128];
    snprintf(cmd, sizeof cmd, "python3 -c 'import %s' >/dev/null 2>&1", mods);
    if (system(cmd) == 0)
        return 0;
    snprintf(why, why_len, "python3 cannot import %s (pip install %s)", mods,
             strcmp(peer, "ray") ? "torch torchvision pillow" : "'ray[data]' pillow");
    return 1;
}

/*
 * Fetching a remote shard into a file with libcurl (data/cache.h): http and
 * https only (redirects too), TLS verified as libcurl does by default, a
 * transfer that receives nothing for timeout_ms fails, a body larger than
 * max_bytes is refused, and transient failures are retried with
 * exponential backoff. The body is hashed (XXH3-64) as it is written.
 *
 * The stall is timed here, not by libcurl's low-speed check (which
 * averages over whole seconds: a try stalled under a 1.5 s setting failed
 * after 5-7 s): a try runs on a multi handle polled at most until
 * timeout_ms after the last byte received (headers or body), and is
 * abandoned then.
 */
#include "data/cache.h"

#include "common/clock.h"
#include "common/error.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* backoff before retry k (1-based): 200 ms, 400 ms, ... at most 5 s */
#define BACKOFF_FIRST_MS 200
#define BACKOFF_MAX_MS 5000

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int adag__data_is_url(const char *s)
{
    return s && (!strncmp(s, "http://", 7) || !strncmp(s, "https://", 8));
}

/* libcurl hands the body over in pieces of at most 16 KiB: they are
 * gathered into writes of SINK_BUF (fewer system calls, and the file's page
 * cache is filled in large pieces, as a local copy's is) */
#define SINK_BUF ((size_t)1 << 20)

typedef struct {
    int fd;
    XXH3_state_t *xxh;
    uint64_t bytes;
    int write_errno;
    char *buf;
    size_t used;
    int64_t last_ns; /* when the last bytes (headers or body) arrived */
} sink_t;

/* Writes n bytes at p to the file. */
static int sink_out(sink_t *s, const char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(s->fd, p + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s->write_errno = w < 0 ? errno : ENOSPC;
            return -1;
        }
        done += (size_t)w;
    }
    return 0;
}

static int sink_flush(sink_t *s)
{
    int rc = sink_out(s, s->buf, s->used);
    s->used = 0;
    return rc;
}

static size_t sink_write(char *data, size_t one, size_t n, void *arg)
{
    sink_t *s = arg;
    size_t len = one * n;
    s->last_ns = adag__now_ns();
    if (s->used + len > SINK_BUF && sink_flush(s) != 0)
        return 0; /* libcurl stops with CURLE_WRITE_ERROR */
    if (len > SINK_BUF) { /* larger than the buffer (libcurl's are 16 KiB): straight out */
        if (sink_out(s, data, len) != 0)
            return 0;
    } else {
        memcpy(s->buf + s->used, data, len);
        s->used += len;
    }
    XXH3_64bits_update(s->xxh, data, len);
    s->bytes += len;
    return len;
}

static size_t sink_header(char *data, size_t one, size_t n, void *arg)
{
    (void)data;
    ((sink_t *)arg)->last_ns = adag__now_ns();
    return one * n;
}

/* One try: runs h on m until it ends, or until nothing has arrived for
 * timeout_ms (CURLE_OPERATION_TIMEDOUT, *stalled set). */
static CURLcode perform(CURLM *m, CURL *h, sink_t *sink, int64_t timeout_ms, int *stalled)
{
    CURLcode rc = CURLE_OK;
    *stalled = 0;
    sink->last_ns = adag__now_ns();
    if (curl_multi_add_handle(m, h) != CURLM_OK)
        return CURLE_OUT_OF_MEMORY;
    for (;;) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(m, &running);
        if (mc != CURLM_OK) {
            rc = mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_RECV_ERROR;
            break;
        }
        if (!running) {
            int left;
            CURLMsg *msg;
            while ((msg = curl_multi_info_read(m, &left)))
                if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
                    rc = msg->data.result;
            break;
        }
        int64_t idle_left = sink->last_ns + timeout_ms * 1000000 - adag__now_ns();
        if (idle_left <= 0) {
            *stalled = 1;
            rc = CURLE_OPERATION_TIMEDOUT;
            break;
        }
        /* wakes for the socket, libcurl's own timers, or the stall's time */
        int wait_ms = (int)((idle_left + 999999) / 1000000);
        (void)curl_multi_poll(m, NULL, 0, wait_ms < 1000 ? wait_ms : 1000, NULL);
    }
    curl_multi_remove_handle(m, h);
    return rc;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Whether a failed try may succeed if repeated. */
static int transient(CURLcode rc, long http)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return 1;
    case CURLE_HTTP_RETURNED_ERROR:
        return http == 408 || http == 429 || http >= 500;
    default:
        return 0;
    }
}

adag_status_t adag__data_fetch(const char *url, int fd, const adag_data_fetch_opts_t *opts,
                              uint64_t *size, uint64_t *hash)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return adag__error(ADAG_ERR_IO, "fetching %s: libcurl did not initialize: %s", url,
                          curl_easy_strerror(curl_init_rc));
    adag_status_t st = ADAG_OK;
    char errbuf[CURL_ERROR_SIZE];
    sink_t sink = {.fd = fd, .xxh = XXH3_createState(), .buf = malloc(SINK_BUF)};
    CURL *h = curl_easy_init();
    CURLM *m = curl_multi_init();
    if (!h || !m || !sink.xxh || !sink.buf) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "fetching %s: out of memory", url);
        goto out;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)opts->timeout_ms);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)opts->max_bytes);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sink_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &sink);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "adag-data/1");

    CURLcode rc = CURLE_OK;
    long http = 0;
    int tries = 0;
    for (;;) {
        tries++;
        errbuf[0] = '\0';
        sink.bytes = 0;
        sink.used = 0;
        sink.write_errno = 0;
        XXH3_64bits_reset(sink.xxh);
        if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) {
            st = adag__error_errno(errno, "fetching %s: truncating the temporary file", url);
            goto out;
        }
        int stalled;
        rc = perform(m, h, &sink, opts->timeout_ms, &stalled);
        if (stalled)
            snprintf(errbuf, sizeof(errbuf),
                     "nothing received for %lld ms (ADAG_DATA_HTTP_TIMEOUT_MS) after %llu bytes "
                     "of the body",
                     (long long)opts->timeout_ms, (unsigned long long)sink.bytes);
        if (rc == CURLE_OK && sink_flush(&sink) != 0)
            rc = CURLE_WRITE_ERROR;
        http = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
        if (rc == CURLE_OK)
            break;
        if (sink.write_errno) {
            st = adag__error_errno(sink.write_errno, "fetching %s: writing the cache file", url);
            goto out;
        }
        if (!transient(rc, http) || tries > opts->retries)
            break;
        int64_t wait = (int64_t)BACKOFF_FIRST_MS << (tries - 1 < 5 ? tries - 1 : 5);
        sleep_ms(wait < BACKOFF_MAX_MS ? wait : BACKOFF_MAX_MS);
    }
    if (rc != CURLE_OK) {
        char code[32] = "";
        if (http)
            snprintf(code, sizeof(code), " (HTTP %ld)", http);
        st = adag__error(ADAG_ERR_IO, "fetching %s: %s%s%s%s after %d tr%s", url,
                        curl_easy_strerror(rc), errbuf[0] ? ": " : "", errbuf, code, tries,
                        tries == 1 ? "y" : "ies");
        goto out;
    }
    *size = sink.bytes;
    *hash = XXH3_64bits_digest(sink.xxh);
out:
    if (h)
        curl_easy_cleanup(h);
    if (m)
        curl_multi_cleanup(m);
    XXH3_freeState(sink.xxh);
    free(sink.buf);
    return st;
}

adag_status_t adag__data_file_hash(int fd, uint64_t len, uint64_t *hash)
{
    if (len == 0) {
        *hash = XXH3_64bits(NULL, 0);
        return ADAG_OK;
    }
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        return adag__error_errno(errno, "mapping a cache file of %llu bytes",
                                (unsigned long long)len);
    *hash = XXH3_64bits(p, len);
    munmap(p, len);
    return ADAG_OK;
}

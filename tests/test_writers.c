/*
 * Suite "writers": where the library's text and traces go (adag.h,
 * "Writers"). Each writer (adag_dag_write_dot, adag_dag_write_trace,
 * adag_stats_print, adag_data_print_stats) to a real pipe's fd, to a
 * callback that collects, to a callback that fails midway (its status
 * comes back, it is never called again, nothing is left), and the buffer
 * forms with a buffer too small (cut, ADAG_ERR_TOO_LARGE, the size
 * needed). adag_write_fd on the fds that make writing hard: a non-blocking
 * pipe (EAGAIN and short writes), signals (EINTR), a pipe whose reader is
 * gone (EPIPE, and no SIGPIPE), a bad fd. The progress bar on a real
 * terminal (a pseudo-terminal) and not on a pipe.
 */
#include <adag/data.h>

#include "data_rig.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(writers, .init = data_dir_make, .fini = data_dir_remove, .timeout = 60);

/* ---- what is written: a traced 3-stage DAG, its stats, a data source ---- */

#define RECORD 16
#define RECORDS 64

typedef struct {
    h_snapshot_t snap;
    adag_runtime_h rt;
    adag_dag_h dag;
    adag_stats_h stats;
    adag_data_source_h src;
} fx_t;

static adag_data_source_h open_source(void)
{
    unsigned char buf[RECORDS * RECORD];
    for (unsigned i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)i;
    data_write_file("w.bin", buf, sizeof(buf));
    const char *shards[1] = {data_path("w.bin")};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = 4,
        .record_size = RECORD,
    };
    adag_data_source_h src = NULL;
    ASSERT_OK(adag_data_open(&p, &src));
    for (int b = 0; b < 3; b++) {
        adag_data_batch_t bt;
        ASSERT_OK(adag_data_next(src, &bt, 10000));
        ASSERT_OK(adag_data_release(src, &bt));
    }
    return src;
}

static void fx_open(fx_t *f)
{
    h_snapshot(&f->snap);
    f->rt = h_runtime();
    adag_actor_h a[3];
    h_counters(f->rt, ADAG_PLACEMENT_THREAD, "w", 3, NULL, a);
    adag_compile_params_t cp = h_compile_params(4, 256, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_TRACE;
    cp.trace_spans = 4096;
    f->dag = h_compile_with(h_chain_graph(f->rt, a, 3, "add"), &cp);
    for (int64_t x = 0; x < 100; x++)
        cr_assert_eq(h_roundtrip(f->dag, x), x);
    usleep(100 * 1000); /* the loops' last records are written */
    ASSERT_OK(adag_dag_stats_take(f->dag, &f->stats));
    f->src = open_source();
}

static void fx_close(fx_t *f)
{
    adag_data_close(f->src);
    adag_stats_free(f->stats);
    ASSERT_OK(adag_runtime_destroy(f->rt));
    h_assert_clean(&f->snap);
}

typedef enum { DOT, TRACE, STATS, DATA, NSUBJECTS } subject_t;
static const char *const writer_name[] = {"adag_dag_write_dot", "adag_dag_write_trace",
                                          "adag_stats_print", "adag_data_print_stats"};
static const char *const format_name[] = {"adag_dag_format_dot", NULL, "adag_stats_format",
                                          "adag_data_format_stats"};
/* what each text holds */
static const char *const mark[] = {"digraph", "\"traceEvents\"", "bottleneck", "data source:"};

static adag_status_t write_subject(fx_t *f, subject_t s, adag_writer_t w)
{
    switch (s) {
    case DOT:
        return adag_dag_write_dot(f->dag, w);
    case TRACE:
        return adag_dag_write_trace(f->dag, w);
    case STATS:
        return adag_stats_print(f->stats, w);
    default:
        return adag_data_print_stats(f->src, w);
    }
}

static adag_status_t format_subject(fx_t *f, subject_t s, char *buf, size_t len, size_t *needed)
{
    switch (s) {
    case DOT:
        return adag_dag_format_dot(f->dag, buf, len, needed);
    case STATS:
        return adag_stats_format(f->stats, buf, len, needed);
    case DATA:
        return adag_data_format_stats(f->src, buf, len, needed);
    default:
        cr_assert_fail("the trace has no buffer form");
        return ADAG_ERR_INVALID;
    }
}

/* The text as a collecting callback gets it. */
static char *collected(fx_t *f, subject_t s)
{
    h_text_t t = {0};
    ASSERT_OK(write_subject(f, s, h_text_writer(&t)));
    cr_assert(t.text && strstr(t.text, mark[s]), "%s: %.300s", writer_name[s], t.text);
    return t.text;
}

/* Runs of digits and dots as one '#': a trace's times, converted from the
 * clock's ticks at each write, may differ in their last digit. */
static char *numbers_out(const char *text)
{
    char *out = strdup(text), *o = out;
    cr_assert_not_null(out);
    for (const char *p = text; *p;) {
        if ((*p >= '0' && *p <= '9') || *p == '.') {
            while ((*p >= '0' && *p <= '9') || *p == '.')
                p++;
            *o++ = '#';
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

/* The same text: byte for byte (DOT, stats), every byte but the numbers
 * (the trace), by its lines' heads (the data source's figures move on:
 * rates, times). */
static void assert_same_text(subject_t s, const char *got, const char *want, const char *how)
{
    if (s == TRACE) {
        char *g = numbers_out(got), *w = numbers_out(want);
        cr_assert(strlen(g) > 1000, "a trace of %zu bytes", strlen(got));
        cr_assert_str_eq(g, w, "the trace %s differs", how);
        free(g);
        free(w);
        return;
    }
    if (s != DATA) {
        size_t i = 0;
        while (got[i] && got[i] == want[i])
            i++;
        cr_assert(got[i] == want[i],
                  "%s %s differs at byte %zu of %zu (%zu wanted): \"%.80s\" "
                  "against \"%.80s\"",
                  writer_name[s], how, i, strlen(got), strlen(want), got + (i > 20 ? i - 20 : 0),
                  want + (i > 20 ? i - 20 : 0));
        return;
    }
    const char *heads[] = {"data source: 1 shard (records), 64 samples an epoch, 16 batches of 4",
                           "\n  delivered   3 batches", "\n  waiting", "\n  bad records 0"};
    for (unsigned i = 0; i < sizeof(heads) / sizeof(heads[0]); i++)
        cr_assert(strstr(got, heads[i]), "%s %s lacks \"%s\":\n%s", writer_name[s], how, heads[i],
                  got);
}

/* ---- pipes ---- */

typedef struct {
    int fd;
    size_t chunk; /* bytes a read */
    int delay_us; /* between reads */
    h_text_t text;
    pthread_t thread;
} drain_t;

static void *drain_run(void *arg)
{
    drain_t *d = arg;
    char buf[65536];
    adag_writer_t keep = h_text_writer(&d->text);
    for (;;) {
        ssize_t n = read(d->fd, buf, d->chunk < sizeof(buf) ? d->chunk : sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        keep.fn(keep.ctx, buf, (size_t)n);
        if (d->delay_us)
            usleep((useconds_t)d->delay_us);
    }
    return NULL;
}

/* A pipe whose read end a thread drains (chunk bytes a read, delay_us
 * between reads); p[1] is the write end, its buffer one page when small. */
static void drain_start(drain_t *d, int p[2], size_t chunk, int delay_us, int small)
{
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    if (small)
        cr_assert_eq(fcntl(p[1], F_SETPIPE_SZ, 4096), 4096);
    *d = (drain_t){.fd = p[0], .chunk = chunk, .delay_us = delay_us};
    cr_assert_eq(pthread_create(&d->thread, NULL, drain_run, d), 0);
}

/* Closes the write end, waits for the reader; returns the text (free it). */
static char *drain_end(drain_t *d, int p[2])
{
    close(p[1]);
    pthread_join(d->thread, NULL);
    close(p[0]);
    cr_assert_not_null(d->text.text, "nothing came through the pipe");
    return d->text.text;
}

Test(writers, each_writer_to_a_pipe_fd)
{
    fx_t f;
    fx_open(&f);
    for (subject_t s = 0; s < NSUBJECTS; s++) {
        int p[2];
        drain_t d;
        drain_start(&d, p, 4096, 0, 0);
        ASSERT_OK(write_subject(&f, s, adag_writer_fd(p[1])));
        char *piped = drain_end(&d, p);
        char *want = collected(&f, s);
        assert_same_text(s, piped, want, "through a pipe");
        free(piped);
        free(want);
    }
    fx_close(&f);
}

/* A callback gets the whole text in a few staged pieces, the same text as
 * the buffer form. */
typedef struct {
    h_text_t text;
    unsigned calls, fail_at; /* the call (1, 2, ...) that fails; 0: none */
    adag_status_t fail_with;
    size_t biggest;
} sink_t;

static adag_status_t sink(void *ctx, const void *buf, size_t n)
{
    sink_t *k = ctx;
    k->calls++;
    cr_assert(n > 0, "a writer was called with 0 bytes");
    cr_assert(!k->fail_at || k->calls <= k->fail_at, "called again (call %u) after failing at %u",
              k->calls, k->fail_at);
    if (k->calls == k->fail_at)
        return k->fail_with;
    adag_writer_t keep = h_text_writer(&k->text);
    if (n > k->biggest)
        k->biggest = n;
    return keep.fn(keep.ctx, buf, n);
}

Test(writers, each_writer_to_a_collecting_callback)
{
    fx_t f;
    fx_open(&f);
    for (subject_t s = 0; s < NSUBJECTS; s++) {
        sink_t k = {0};
        ASSERT_OK(write_subject(&f, s, (adag_writer_t){sink, &k}));
        cr_assert(k.text.text && strstr(k.text.text, mark[s]), "%s", writer_name[s]);
        /* staged: never a call per line */
        cr_assert(k.calls <= k.text.len / 4096 + 1, "%s: %u calls for %zu bytes", writer_name[s],
                  k.calls, k.text.len);
        if (format_name[s]) {
            size_t needed = 0;
            cr_assert_eq(format_subject(&f, s, NULL, 0, &needed), ADAG_ERR_TOO_LARGE);
            char *buf = malloc(needed + 256);
            ASSERT_OK(format_subject(&f, s, buf, needed + 256, &needed));
            cr_assert_eq(strlen(buf) + 1, needed);
            assert_same_text(s, k.text.text, buf, "to a callback");
            free(buf);
        }
        free(k.text.text);
    }
    fx_close(&f);
}

/* A callback failing on call `at`: the writer returns its status (an
 * unknown value as ADAG_ERR_IO), saying after how many bytes; the
 * callback is not called again; everything is freed (h_assert_clean, and
 * ASan under make SAN=address). Returns what the callback took (free it). */
static char *fails_on(fx_t *f, subject_t s, unsigned at, adag_status_t with, adag_status_t want)
{
    sink_t k = {.fail_at = at, .fail_with = with};
    ASSERT_ST(write_subject(f, s, (adag_writer_t){sink, &k}), want);
    cr_assert_eq(k.calls, at, "%s: %u calls, the failing one was %u", writer_name[s], k.calls, at);
    char head[128];
    snprintf(head, sizeof(head), "%s: writing failed after %zu bytes: it returned", writer_name[s],
             k.text.len);
    ASSERT_MSG_HAS(head);
    return k.text.text;
}

Test(writers, callback_failing_midway)
{
    fx_t f;
    fx_open(&f);
    for (subject_t s = 0; s < NSUBJECTS; s++) {
        cr_assert_null(fails_on(&f, s, 1, ADAG_ERR_IO, ADAG_ERR_IO));
        cr_assert_null(fails_on(&f, s, 1, ADAG_ERR_CLOSED, ADAG_ERR_CLOSED));
        cr_assert_null(fails_on(&f, s, 1, (adag_status_t)7, ADAG_ERR_IO));
        ASSERT_MSG_HAS("no adag status (7)");
    }
    /* the trace comes in many pieces: a failure in the middle of it */
    char *whole = collected(&f, TRACE);
    size_t len = strlen(whole);
    cr_assert_gt(len, 4 * 8192, "the trace is only %zu bytes", len);
    char *part = fails_on(&f, TRACE, 3, ADAG_ERR_NO_MEMORY, ADAG_ERR_NO_MEMORY);
    size_t got = part ? strlen(part) : 0;
    cr_assert(got > 0 && got < len, "%zu bytes came before the failure, of %zu", got, len);
    char *p = numbers_out(part), *w = numbers_out(whole);
    cr_assert(strncmp(p, w, strlen(p) - 1) == 0,
              "what came before the failure is not the trace's start (%zu of %zu bytes)", got,
              len);
    free(p);
    free(w);
    free(part);
    free(whole);
    /* the DAG goes on */
    cr_assert_eq(h_roundtrip(f.dag, 5), 5);
    fx_close(&f);
}

Test(writers, refusals)
{
    fx_t f;
    fx_open(&f);
    adag_writer_t none = {NULL, NULL};
    for (subject_t s = 0; s < NSUBJECTS; s++) {
        ASSERT_ST(write_subject(&f, s, none), ADAG_ERR_INVALID);
        ASSERT_MSG_HAS("out.fn");
        if (format_name[s]) {
            ASSERT_ST(format_subject(&f, s, NULL, 8, NULL), ADAG_ERR_INVALID);
            ASSERT_MSG_HAS("nor buf with len 8");
        }
    }
    ASSERT_ST(adag_dag_format_dot(NULL, NULL, 0, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_stats_format(NULL, NULL, 0, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_data_format_stats(NULL, NULL, 0, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_data_progress(f.src, none), ADAG_ERR_INVALID);
    fx_close(&f);
}

/* Too small a buffer: the text is cut (its first len - 1 bytes and a NUL),
 * ADAG_ERR_TOO_LARGE names both sizes, *needed says what takes it all. */
Test(writers, buffer_too_small)
{
    fx_t f;
    fx_open(&f);
    for (subject_t s = 0; s < NSUBJECTS; s++) {
        if (!format_name[s])
            continue;
        size_t needed = 0;
        ASSERT_ST(format_subject(&f, s, NULL, 0, &needed), ADAG_ERR_TOO_LARGE);
        cr_assert_gt(needed, 64);
        char *whole = malloc(needed + 256);
        size_t got = 0;
        ASSERT_OK(format_subject(&f, s, whole, needed + 256, &got));
        size_t len = strlen(whole);
        cr_assert_eq(got, len + 1);
        /* one byte short; the data stage's figures move while it runs (a
         * digit more or less), so its text gets half */
        size_t cut = s == DATA ? len / 2 : len;
        char *small = malloc(cut);
        memset(small, 'Z', cut);
        size_t need2 = 0;
        ASSERT_ST(format_subject(&f, s, small, cut, &need2), ADAG_ERR_TOO_LARGE);
        char want[160];
        snprintf(want, sizeof(want),
                 "%s: the text is %zu bytes (%zu with its NUL); the buffer "
                 "holds %zu",
                 format_name[s], len, len + 1, len);
        if (s != DATA) /* its figures may have grown a digit */
            ASSERT_MSG_HAS(want);
        if (s != DATA)
            cr_assert_eq(need2, len + 1);
        cr_assert_eq(small[cut - 1], '\0', "%s: the cut text is not NUL-terminated",
                     format_name[s]);
        cr_assert_eq(strlen(small), cut - 1);
        if (s != DATA)
            cr_assert_eq(memcmp(small, whole, len - 1), 0, "%s: the cut text is not its start",
                         format_name[s]);
        /* one byte: just the NUL */
        char one = 'Z';
        ASSERT_ST(format_subject(&f, s, &one, 1, NULL), ADAG_ERR_TOO_LARGE);
        cr_assert_eq(one, '\0');
        /* exactly what it asked for */
        if (s != DATA)
            ASSERT_OK(format_subject(&f, s, whole, needed, NULL));
        free(small);
        free(whole);
    }
    fx_close(&f);
}

/* ---- adag_write_fd on hard fds ---- */

/* A non-blocking pipe of one page, read slowly: writes are short and
 * EAGAIN comes often; every byte arrives, in order. */
Test(writers, fd_nonblocking_pipe_short_writes)
{
    fx_t f;
    fx_open(&f);
    char *want = collected(&f, TRACE);
    int p[2];
    drain_t d;
    drain_start(&d, p, 512, 200, 1);
    cr_assert_eq(fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK), 0);
    ASSERT_OK(adag_dag_write_trace(f.dag, adag_writer_fd(p[1])));
    char *got = drain_end(&d, p);
    assert_same_text(TRACE, got, want, "through a non-blocking pipe");
    free(got);
    free(want);
    fx_close(&f);
}

static atomic_int signals_seen;
static atomic_int stop_signals;

static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&signals_seen, 1);
}

static void *signaller(void *arg)
{
    pthread_t target = *(pthread_t *)arg;
    while (!atomic_load(&stop_signals)) {
        pthread_kill(target, SIGUSR1);
        usleep(100);
    }
    return NULL;
}

/* A handler without SA_RESTART: the blocked writes end with EINTR or
 * short; every byte still arrives, in order. */
Test(writers, fd_interrupted_by_signals)
{
    fx_t f;
    fx_open(&f);
    char *want = collected(&f, TRACE);
    struct sigaction sa = {.sa_handler = on_usr1}, old;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGUSR1, &sa, &old), 0);
    atomic_store(&signals_seen, 0);
    atomic_store(&stop_signals, 0);
    int p[2];
    drain_t d;
    drain_start(&d, p, 512, 200, 1);
    pthread_t self = pthread_self(), sig;
    cr_assert_eq(pthread_create(&sig, NULL, signaller, &self), 0);
    adag_status_t st = adag_dag_write_trace(f.dag, adag_writer_fd(p[1]));
    atomic_store(&stop_signals, 1);
    pthread_join(sig, NULL);
    ASSERT_OK(st);
    char *got = drain_end(&d, p);
    sigaction(SIGUSR1, &old, NULL);
    cr_assert_gt(atomic_load(&signals_seen), 0, "no signal came while writing");
    assert_same_text(TRACE, got, want, "interrupted by signals");
    free(got);
    free(want);
    fx_close(&f);
}

/* A pipe whose reader is gone: ADAG_ERR_IO (EPIPE), and no SIGPIPE ends
 * the program or stays pending. */
Test(writers, fd_reader_gone_is_an_error_not_a_signal)
{
    fx_t f;
    fx_open(&f);
    for (subject_t s = 0; s < NSUBJECTS; s++) {
        int p[2];
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        close(p[0]);
        ASSERT_ST(write_subject(&f, s, adag_writer_fd(p[1])), ADAG_ERR_IO);
        char want[96];
        snprintf(want, sizeof(want), "%s: writing failed after 0 bytes: write to fd %d",
                 writer_name[s], p[1]);
        ASSERT_MSG_HAS(want);
        ASSERT_MSG_HAS("Broken pipe");
        close(p[1]);
        sigset_t pending;
        sigpending(&pending);
        cr_assert(!sigismember(&pending, SIGPIPE), "a SIGPIPE is left pending");
    }
    fx_close(&f);
}

Test(writers, fd_bad_descriptor)
{
    fx_t f;
    fx_open(&f);
    ASSERT_ST(adag_dag_write_dot(f.dag, adag_writer_fd(-1)), ADAG_ERR_IO);
    ASSERT_MSG_HAS("write to fd -1");
    ASSERT_MSG_HAS("Bad file descriptor");
    int ro = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_ST(adag_stats_print(f.stats, adag_writer_fd(ro)), ADAG_ERR_IO);
    ASSERT_MSG_HAS("adag_stats_print: writing failed after 0 bytes");
    close(ro);
    fx_close(&f);
}

/* ---- the progress bar ---- */

/* Reads what a pseudo-terminal's master has (waiting up to 2 s for the first bytes). */
static void read_master(int master, char *buf, size_t len)
{
    size_t got = 0;
    buf[0] = '\0';
    if (!h_fd_readable(master, 2000))
        return;
    while (got + 1 < len && h_fd_readable(master, 50)) {
        ssize_t n = read(master, buf + got, len - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
}

Test(writers, progress_on_a_terminal_not_on_a_pipe)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_data_source_h src = open_source();
    /* a pipe is no terminal: nothing */
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    ASSERT_OK(adag_data_progress(src, adag_writer_fd(p[1])));
    char c;
    cr_assert_eq(read(p[0], &c, 1), -1, "the progress bar was drawn on a pipe");
    cr_assert_eq(errno, EAGAIN);
    close(p[0]);
    close(p[1]);
    /* a pseudo-terminal: the bar, then print_stats ends its line */
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    cr_assert_geq(master, 0);
    cr_assert(grantpt(master) == 0 && unlockpt(master) == 0);
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
    cr_assert_geq(slave, 0);
    ASSERT_OK(adag_data_progress(src, adag_writer_fd(slave)));
    char text[1024];
    read_master(master, text, sizeof(text));
    cr_assert(strncmp(text, "\r\033[Kepoch 0 [", 13) == 0 && strstr(text, "] 3/16"), "%s", text);
    cr_assert_null(strchr(text, '\n'), "the line was ended early: %s", text);
    char stats[4096];
    ASSERT_OK(adag_data_format_stats(src, stats, sizeof(stats), NULL));
    cr_assert(!h_fd_readable(master, 100), "a buffer form wrote on the terminal");
    sink_t k = {0};
    ASSERT_OK(adag_data_print_stats(src, (adag_writer_t){sink, &k}));
    read_master(master, text, sizeof(text));
    cr_assert(text[0] == '\n' || strcmp(text, "\r\n") == 0, "the line was not ended: \"%s\"", text);
    free(k.text.text);
    /* a callback gets every redraw (not faster than 10 a second) and the
     * newline at close */
    usleep(150 * 1000);
    k = (sink_t){0};
    ASSERT_OK(adag_data_progress(src, (adag_writer_t){sink, &k}));
    cr_assert(k.text.text && strstr(k.text.text, "\r\033[Kepoch 0 ["), "%s", k.text.text);
    size_t drawn = k.text.len;
    char line[256];
    ASSERT_OK(adag_data_format_progress(src, line, sizeof(line), NULL));
    cr_assert(strncmp(line, "epoch 0 [", 9) == 0 && !strchr(line, '\033') && !strchr(line, '\r'),
              "%s", line);
    ASSERT_ST(adag_data_format_progress(src, line, 10, NULL), ADAG_ERR_TOO_LARGE);
    cr_assert_str_eq(line, "epoch 0 [");
    ASSERT_OK(adag_data_close(src));
    cr_assert(k.text.len == drawn + 1 && k.text.text[drawn] == '\n', "close did not end the line");
    free(k.text.text);
    close(slave);
    close(master);
    h_assert_clean(&snap);
}

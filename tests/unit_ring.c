/* Unit tests of the shared-memory ring (suite "ring"), the event wait and
 * the local channel. These link the static library to reach internals; the
 * ThreadSanitizer run (`make test-tsan`) runs this suite. */
#include "common/clock.h"
#include "common/event.h"
#include "transport/channel.h"
#include "transport/shm_ring.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static const adag_wait_policy_t TEST_WAIT = {2000, 0};

typedef struct {
    adag_shm_segment_t seg;
    _Atomic uint32_t *abort;
    void *chan;
    unsigned nslots, nreaders;
    size_t capacity;
} ring_t;

static void ring_make(ring_t *r, unsigned nslots, unsigned nreaders, size_t capacity)
{
    r->nslots = nslots;
    r->nreaders = nreaders;
    r->capacity = capacity;
    size_t size = 64 + adag_shm_chan_size(nslots, nreaders, capacity);
    cr_assert_eq(adag_shm_segment_create(&r->seg, "adag-test", size), ADAG_OK, "%s",
                 adag_last_error());
    r->abort = (_Atomic uint32_t *)r->seg.base;
    r->chan = (char *)r->seg.base + 64;
    adag_shm_chan_init(r->chan, nslots, nreaders, capacity);
}

static void ring_open(ring_t *r, adag_chan_t *ch, int reader)
{
    adag_status_t st = adag_shm_chan_open(ch, r->chan, r->seg.size - 64, reader, r->nslots,
                                          r->nreaders, r->capacity, r->abort, TEST_WAIT);
    cr_assert_eq(st, ADAG_OK, "%s", adag_last_error());
}

/* The writer writes seq as a 64-bit value repeated to fill `words` words. */
static void write_seq(adag_chan_t *w, uint64_t seq, unsigned words)
{
    void *buf;
    cr_assert_eq(adag_chan_acquire(w, seq, adag_deadline_ms(10000), &buf), ADAG_OK);
    for (unsigned i = 0; i < words; i++)
        ((uint64_t *)buf)[i] = seq * 1000 + i;
    adag_chan_publish(w, seq, words * 8, ADAG_OK, NULL);
}

static int check_seq(adag_chan_t *rd, uint64_t seq, unsigned words)
{
    adag_slot_view_t v;
    if (adag_chan_wait(rd, seq, adag_deadline_ms(10000), &v) != ADAG_OK)
        return -1;
    if (v.size != words * 8 || v.status != ADAG_OK)
        return -2;
    for (unsigned i = 0; i < words; i++)
        if (((const uint64_t *)v.data)[i] != seq * 1000 + i)
            return -3;
    adag_chan_release(rd, seq);
    return 0;
}

typedef struct {
    ring_t *ring;
    int reader;
    uint64_t n;
    unsigned words;
    int result;
} reader_arg_t;

static void *reader_main(void *p)
{
    reader_arg_t *a = p;
    adag_chan_t rd;
    ring_open(a->ring, &rd, a->reader);
    for (uint64_t s = 0; s < a->n; s++) {
        int rc = check_seq(&rd, s, a->words);
        if (rc) {
            a->result = rc;
            return NULL;
        }
        if ((s & 1023) == (unsigned)a->reader * 100)
            usleep(100); /* let the writer catch up and sleep */
    }
    return NULL;
}

static void run_threads(unsigned nslots, unsigned nreaders, uint64_t n, unsigned words)
{
    ring_t r;
    adag_chan_t w;
    pthread_t th[8];
    reader_arg_t args[8];
    ring_make(&r, nslots, nreaders, words * 8);
    ring_open(&r, &w, -1);
    for (unsigned i = 0; i < nreaders; i++) {
        args[i] = (reader_arg_t){&r, (int)i, n, words, 0};
        pthread_create(&th[i], NULL, reader_main, &args[i]);
    }
    for (uint64_t s = 0; s < n; s++)
        write_seq(&w, s, words);
    for (unsigned i = 0; i < nreaders; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(args[i].result, 0, "reader %u failed with %d", i, args[i].result);
    }
    adag_shm_segment_destroy(&r.seg);
}

Test(ring, one_writer_one_reader_threads, .timeout = 60)
{
    run_threads(4, 1, 50000, 4);
}

Test(ring, one_writer_three_readers_threads, .timeout = 60)
{
    run_threads(3, 3, 20000, 16);
}

Test(ring, single_slot_ring, .timeout = 60)
{
    run_threads(1, 2, 5000, 2);
}

Test(ring, across_processes, .timeout = 60)
{
    ring_t r;
    adag_chan_t w;
    const uint64_t n = 20000;
    ring_make(&r, 8, 2, 256);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        cr_assert_geq(kids[k], 0);
        if (kids[k] == 0) {
            adag_chan_t rd;
            if (adag_shm_chan_open(&rd, r.chan, r.seg.size - 64, k, 8, 2, 256, r.abort, TEST_WAIT))
                _exit(10);
            for (uint64_t s = 0; s < n; s++)
                if (check_seq(&rd, s, 32))
                    _exit(11);
            _exit(0);
        }
    }
    ring_open(&r, &w, -1);
    for (uint64_t s = 0; s < n; s++)
        write_seq(&w, s, 32);
    for (int k = 0; k < 2; k++) {
        int status;
        cr_assert_eq(waitpid(kids[k], &status, 0), kids[k]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader process %d: status %d",
                  k, status);
    }
    adag_shm_segment_destroy(&r.seg);
}

Test(ring, writer_waits_for_every_reader, .timeout = 30)
{
    ring_t r;
    adag_chan_t w, r0, r1;
    void *buf;
    adag_slot_view_t v;
    ring_make(&r, 2, 2, 64);
    ring_open(&r, &w, -1);
    ring_open(&r, &r0, 0);
    ring_open(&r, &r1, 1);
    write_seq(&w, 0, 1);
    write_seq(&w, 1, 1);
    /* slot 0 is held by both readers: seq 2 must not be writable */
    cr_assert_eq(adag_chan_acquire(&w, 2, adag_deadline_ms(20), &buf), ADAG_ERR_TIMEOUT);
    cr_assert_eq(check_seq(&r0, 0, 1), 0);
    cr_assert_eq(adag_chan_acquire(&w, 2, adag_deadline_ms(20), &buf), ADAG_ERR_TIMEOUT,
                 "one reader still holds slot 0");
    cr_assert_eq(check_seq(&r1, 0, 1), 0);
    cr_assert_eq(adag_chan_acquire(&w, 2, adag_deadline_ms(20), &buf), ADAG_OK);
    /* a reader cannot see seq 2 before it is published */
    cr_assert_eq(adag_chan_wait(&r0, 2, adag_deadline_ms(20), &v), ADAG_ERR_TIMEOUT);
    adag_shm_segment_destroy(&r.seg);
}

Test(ring, error_status_and_text_travel, .timeout = 30)
{
    ring_t r;
    adag_chan_t w, rd;
    void *buf;
    adag_slot_view_t v;
    ring_make(&r, 2, 1, 64);
    ring_open(&r, &w, -1);
    ring_open(&r, &rd, 0);
    cr_assert_eq(adag_chan_acquire(&w, 0, ADAG_FOREVER, &buf), ADAG_OK);
    adag_chan_publish(&w, 0, 0, ADAG_ERR_METHOD, "actor a.m: broken");
    cr_assert_eq(adag_chan_wait(&rd, 0, ADAG_FOREVER, &v), ADAG_OK);
    cr_assert_eq(v.status, ADAG_ERR_METHOD);
    cr_assert_str_eq(v.err, "actor a.m: broken");
    /* an over-long message is cut, never overflows */
    char longmsg[2000];
    memset(longmsg, 'x', sizeof(longmsg) - 1);
    longmsg[sizeof(longmsg) - 1] = '\0';
    cr_assert_eq(adag_chan_acquire(&w, 1, ADAG_FOREVER, &buf), ADAG_OK);
    adag_chan_publish(&w, 1, 0, ADAG_ERR_METHOD, longmsg);
    cr_assert_eq(adag_chan_wait(&rd, 1, ADAG_FOREVER, &v), ADAG_OK);
    cr_assert_eq(strlen(v.err), ADAG_SLOT_ERR_MAX - 1);
    adag_shm_segment_destroy(&r.seg);
}

typedef struct {
    adag_chan_t *ch;
    int writer;
    adag_status_t st;
} blocked_arg_t;

static void *blocked_main(void *p)
{
    blocked_arg_t *a = p;
    void *buf;
    adag_slot_view_t v;
    if (a->writer)
        a->st = adag_chan_acquire(a->ch, 1, ADAG_FOREVER, &buf);
    else
        a->st = adag_chan_wait(a->ch, 0, ADAG_FOREVER, &v);
    return NULL;
}

Test(ring, abort_wakes_sleeping_reader_and_writer, .timeout = 30)
{
    ring_t r, r2;
    adag_chan_t rd, w2;
    pthread_t t1, t2;
    ring_make(&r, 1, 1, 64);
    ring_open(&r, &rd, 0);
    ring_make(&r2, 1, 1, 64);
    ring_open(&r2, &w2, -1);
    write_seq(&w2, 0, 1); /* the only slot is now held: acquiring seq 1 sleeps */
    w2.abort = r.abort;   /* both obey the same abort word */
    blocked_arg_t a1 = {&rd, 0, ADAG_OK}, a2 = {&w2, 1, ADAG_OK};
    pthread_create(&t1, NULL, blocked_main, &a1);
    pthread_create(&t2, NULL, blocked_main, &a2);
    usleep(100000); /* long past the spin: both sleep in the futex */
    atomic_store(r.abort, 1);
    adag_shm_chan_wake_all(r.chan);
    adag_shm_chan_wake_all(r2.chan);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    cr_assert_eq(a1.st, ADAG_ERR_CLOSED);
    cr_assert_eq(a2.st, ADAG_ERR_CLOSED);
    adag_shm_segment_destroy(&r.seg);
    adag_shm_segment_destroy(&r2.seg);
}

Test(ring, wait_times_out, .timeout = 30)
{
    ring_t r;
    adag_chan_t rd;
    adag_slot_view_t v;
    ring_make(&r, 2, 1, 64);
    ring_open(&r, &rd, 0);
    int64_t t0 = adag_now_ns();
    cr_assert_eq(adag_chan_wait(&rd, 0, adag_deadline_ms(50), &v), ADAG_ERR_TIMEOUT);
    int64_t waited = adag_now_ns() - t0;
    cr_assert_geq(waited, 45 * 1000000, "returned after %lld ns", (long long)waited);
    adag_shm_segment_destroy(&r.seg);
}

Test(ring, open_rejects_wrong_geometry, .timeout = 30)
{
    ring_t r;
    adag_chan_t ch;
    ring_make(&r, 4, 2, 128);
    cr_assert_eq(adag_shm_chan_open(&ch, r.chan, r.seg.size - 64, 0, 4, 3, 128, r.abort, TEST_WAIT),
                 ADAG_ERR_PROTOCOL);
    cr_assert_eq(adag_shm_chan_open(&ch, r.chan, r.seg.size - 64, 2, 4, 2, 128, r.abort, TEST_WAIT),
                 ADAG_ERR_PROTOCOL, "reader index out of range");
    cr_assert_eq(adag_shm_chan_open(&ch, r.chan, 100, 0, 4, 2, 128, r.abort, TEST_WAIT),
                 ADAG_ERR_PROTOCOL, "mapping too small");
    cr_assert_eq(adag_shm_chan_open(&ch, r.chan, r.seg.size - 64, 0, 4, 2, 256, r.abort, TEST_WAIT),
                 ADAG_ERR_PROTOCOL, "capacity differs");
    adag_shm_segment_destroy(&r.seg);
}

Test(ring, idle_sleeper_uses_no_cpu, .timeout = 30)
{
    ring_t r;
    adag_chan_t rd;
    pthread_t t;
    ring_make(&r, 1, 1, 64);
    ring_open(&r, &rd, 0);
    blocked_arg_t a = {&rd, 0, ADAG_OK};
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    pthread_create(&t, NULL, blocked_main, &a);
    usleep(300000);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    /* 300 ms asleep: the spin phase (2 us here) and thread start only */
    cr_assert_lt(cpu, 0.1, "a sleeping waiter used %.3f s of CPU in 0.3 s", cpu);
    atomic_store(r.abort, 1);
    adag_shm_chan_wake_all(r.chan);
    pthread_join(t, NULL);
    adag_shm_segment_destroy(&r.seg);
}

Test(ring, local_channel, .timeout = 30)
{
    adag_chan_t ch;
    void *buf;
    adag_slot_view_t v;
    cr_assert_eq(adag_local_chan_open(&ch, 32), ADAG_OK);
    cr_assert_eq(adag_chan_acquire(&ch, 0, ADAG_FOREVER, &buf), ADAG_OK);
    memcpy(buf, "hello", 5);
    adag_chan_publish(&ch, 0, 5, ADAG_OK, NULL);
    cr_assert_eq(adag_chan_wait(&ch, 0, ADAG_FOREVER, &v), ADAG_OK);
    cr_assert_eq(v.size, 5);
    cr_assert_eq(v.data, buf, "local reads are zero-copy");
    cr_assert_eq(memcmp(v.data, "hello", 5), 0);
    adag_local_chan_close(&ch);
}

/*
 * The emulated device's value ops (gpu/device.h, adag_dev_word_t; run by
 * gpu/host_stream.c) under ThreadSanitizer (`make test-tsan`; the harness:
 * tests/stress.h): two streams in a ping-pong over plain memory ordered
 * only by stream_write_value64 / stream_wait_value64, with the host's
 * stream_sync helping (running queued value ops itself, giving a wait back
 * at its deadline); and stuck waits released by another thread's
 * word_store of the abort value while the host syncs. A missing
 * happens-before edge is a race TSan reports.
 */
#include "common/clock.h"
#include "gpu/device.h"

#include "stress.h"
#include <adag.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define ROUNDS 2000

/* The words' cells: 64-aligned, in registered memory (a channel's ring). */
static _Alignas(4096) unsigned char ring[4096];

typedef struct {
    int64_t buf[64]; /* plain memory: only the value ops order its accesses */
    int64_t round;
    int bad;
} relay_t;

static void relay_write(void *arg)
{
    relay_t *r = arg;
    r->round++;
    for (int i = 0; i < 64; i++)
        r->buf[i] = r->round * 64 + i;
}

static void relay_check(void *arg)
{
    relay_t *r = arg;
    for (int i = 0; i < 64; i++)
        r->bad |= r->buf[i] != r->round * 64 + i;
}

static int open_ring(const adag_device_ops_t *o, adag_device_t **dev, adag_dev_mem_t *reg,
                     adag_dev_word_t *word, adag_dev_word_t *ack)
{
    memset(ring, 0, sizeof ring);
    if (o->open(0, dev) || o->host_register(*dev, ring, sizeof ring, reg) ||
        o->word_map(*dev, (_Atomic uint64_t *)ring, word) ||
        o->word_map(*dev, (_Atomic uint64_t *)(ring + 64), ack)) {
        fprintf(stderr, "emulated device: %s\n", adag_last_error());
        return 0;
    }
    return 1;
}

static int close_ring(const adag_device_ops_t *o, adag_device_t *dev, adag_dev_mem_t *reg)
{
    o->host_unregister(dev, reg);
    adag_device_counts_t c;
    o->counts(dev, &c);
    o->close(dev);
    return c.streams == 0 && c.registered == 0;
}

/* A writes and writes the word r; B waits for r, checks and writes the ack
 * r; A waits for the ack before the next write. The host syncs A with a
 * deadline of 0 to 1 ms now and then (a helper that runs A's queued ops
 * and gives a wait back), and B fully every 500 rounds. */
static int run_ping_pong(void)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev;
    adag_dev_mem_t reg;
    adag_dev_word_t word, ack;
    adag_dev_stream_t *a, *b;
    static relay_t r;
    if (!open_ring(o, &dev, &reg, &word, &ack))
        return 0;
    if (o->stream_create(dev, &a) || o->stream_create(dev, &b)) {
        fprintf(stderr, "emulated device: %s\n", adag_last_error());
        return 0;
    }
    int ok = 1;
    for (uint64_t i = 1; i <= ROUNDS && ok; i++) {
        ok &= o->stream_wait_value64(a, &ack, i - 1) == ADAG_OK &&
              o->host_fn(a, relay_write, &r) == ADAG_OK &&
              o->stream_write_value64(a, &word, i) == ADAG_OK &&
              o->stream_wait_value64(b, &word, i) == ADAG_OK &&
              o->host_fn(b, relay_check, &r) == ADAG_OK &&
              o->stream_write_value64(b, &ack, i) == ADAG_OK;
        if (i % 7 == 0) {
            adag_status_t st = o->stream_sync(a, adag__deadline_ms((int64_t)(i % 2)));
            ok &= st == ADAG_OK || st == ADAG_ERR_TIMEOUT;
        }
        if (i % 500 == 0)
            ok &= o->stream_sync(b, adag__deadline_ms(10000)) == ADAG_OK;
    }
    ok &= o->stream_sync(b, adag__deadline_ms(10000)) == ADAG_OK &&
          o->stream_sync(a, adag__deadline_ms(10000)) == ADAG_OK;
    EXPECT(atomic_load(word.host) == ROUNDS && atomic_load(ack.host) == ROUNDS,
           "words at %llu and %llu, not %d", (unsigned long long)atomic_load(word.host),
           (unsigned long long)atomic_load(ack.host), ROUNDS);
    o->stream_destroy(dev, a);
    o->stream_destroy(dev, b);
    return close_ring(o, dev, &reg) && ok && !r.bad && r.round == ROUNDS;
}

/* A stream waits for a value nobody writes, plain memory written behind
 * it; another thread stores the abort value while the main thread syncs
 * the stream (helping it) or the stream thread waits. 200 rounds, each on
 * a fresh word value. */
typedef struct {
    const adag_dev_word_t *word;
    int delay_us;
} aborter_arg_t;

static void *aborter(void *arg)
{
    const aborter_arg_t *a = arg;
    for (int i = 0; i < a->delay_us; i += 10)
        sched_yield();
    adag__device_backend(ADAG_DEV_EMULATED)->word_store(a->word, ADAG_DEV_WORD_ABORT);
    return NULL;
}

static int run_abort(void)
{
    const adag_device_ops_t *o = adag__device_backend(ADAG_DEV_EMULATED);
    adag_device_t *dev;
    adag_dev_mem_t reg;
    adag_dev_word_t word, ack;
    adag_dev_stream_t *s;
    static relay_t r;
    if (!open_ring(o, &dev, &reg, &word, &ack))
        return 0;
    if (o->stream_create(dev, &s)) {
        fprintf(stderr, "emulated device: %s\n", adag_last_error());
        return 0;
    }
    int ok = 1;
    for (int i = 0; i < 200 && ok; i++) {
        o->word_store(&word, 0);
        pthread_t th;
        aborter_arg_t arg = {&word, i % 4 * 100};
        ok &= o->stream_wait_value64(s, &word, 1) == ADAG_OK &&
              o->host_fn(s, relay_write, &r) == ADAG_OK;
        ok &= pthread_create(&th, NULL, aborter, &arg) == 0;
        if (i % 2) {
            adag_status_t st = o->stream_sync(s, adag__deadline_ms(1));
            ok &= st == ADAG_OK || st == ADAG_ERR_TIMEOUT;
        }
        ok &= o->stream_sync(s, adag__deadline_ms(10000)) == ADAG_OK;
        pthread_join(th, NULL);
        relay_check(&r); /* after the sync: the stream's write happened-before */
    }
    o->stream_destroy(dev, s);
    return close_ring(o, dev, &reg) && ok && !r.bad && r.round == 200;
}

int main(void)
{
    static const stress_part_t parts[] = {
        {"emulated device: two streams ordered by value ops", run_ping_pong},
        {"emulated device: stuck waits released by the abort value", run_abort},
    };
    return stress_run_parts("stress_values", parts, sizeof(parts) / sizeof(parts[0]));
}

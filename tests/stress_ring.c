/*
 * A stand-alone stress test of the shared-memory ring for ThreadSanitizer
 * (`make test-tsan`): Criterion cannot run under TSan (its sandbox arena
 * clashes with TSan's memory layout), so this program has its own tiny
 * harness. Writers and readers are threads of one process, so TSan sees
 * every access to the ring: a missing happens-before edge is reported as a
 * data race and fails the run.
 */
#include "common/clock.h"
#include "transport/shm_ring.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define EXPECT(cond, ...)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                             \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fprintf(stderr, "\n");                                                           \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

typedef struct {
    adag_shm_segment_t seg;
    _Atomic uint32_t *abort;
    void *chan;
    unsigned nslots, nreaders;
    size_t capacity;
} ring_t;

typedef struct {
    ring_t *ring;
    int reader;
    uint64_t n;
    unsigned words;
    int bad;
} reader_t;

static void *reader_main(void *p)
{
    reader_t *a = p;
    adag_chan_t rd;
    if (adag_shm_chan_open(&rd, a->ring->chan, a->ring->seg.size - 64, a->reader,
                           a->ring->nslots, a->ring->nreaders, a->ring->capacity, a->ring->abort,
                           1000)) {
        a->bad = 1;
        return NULL;
    }
    for (uint64_t s = 0; s < a->n; s++) {
        adag_slot_view_t v;
        if (adag_chan_wait(&rd, s, adag_deadline_ms(20000), &v) != ADAG_OK ||
            v.size != a->words * 8) {
            a->bad = 2;
            return NULL;
        }
        for (unsigned i = 0; i < a->words; i++)
            if (((const uint64_t *)v.data)[i] != s * 31 + i)
                a->bad = 3;
        adag_chan_release(&rd, s);
    }
    return NULL;
}

static void run(unsigned nslots, unsigned nreaders, uint64_t n, unsigned words)
{
    ring_t r = {.nslots = nslots, .nreaders = nreaders, .capacity = words * 8};
    pthread_t th[8];
    reader_t rd[8];
    adag_chan_t w;
    size_t size = 64 + adag_shm_chan_size(nslots, nreaders, r.capacity);
    if (adag_shm_segment_create(&r.seg, "adag-stress", size) != ADAG_OK) {
        EXPECT(0, "segment: %s", adag_last_error());
        return;
    }
    r.abort = (_Atomic uint32_t *)r.seg.base;
    r.chan = (char *)r.seg.base + 64;
    adag_shm_chan_init(r.chan, nslots, nreaders, r.capacity);
    EXPECT(adag_shm_chan_open(&w, r.chan, r.seg.size - 64, -1, nslots, nreaders, r.capacity,
                              r.abort, 1000) == ADAG_OK,
           "open writer");
    for (unsigned i = 0; i < nreaders; i++) {
        rd[i] = (reader_t){&r, (int)i, n, words, 0};
        pthread_create(&th[i], NULL, reader_main, &rd[i]);
    }
    for (uint64_t s = 0; s < n; s++) {
        void *buf;
        if (adag_chan_acquire(&w, s, adag_deadline_ms(20000), &buf) != ADAG_OK) {
            EXPECT(0, "acquire %llu", (unsigned long long)s);
            break;
        }
        for (unsigned i = 0; i < words; i++)
            ((uint64_t *)buf)[i] = s * 31 + i;
        adag_chan_publish(&w, s, words * 8, ADAG_OK, NULL);
    }
    for (unsigned i = 0; i < nreaders; i++) {
        pthread_join(th[i], NULL);
        EXPECT(rd[i].bad == 0, "reader %u of %u slots / %u readers: error %d", i, nslots,
               nreaders, rd[i].bad);
    }
    adag_shm_segment_destroy(&r.seg);
}

int main(void)
{
    struct {
        unsigned nslots, nreaders;
        uint64_t n;
        unsigned words;
    } cases[] = {{4, 1, 20000, 4}, {3, 3, 10000, 8}, {1, 2, 3000, 2}, {8, 4, 5000, 1}};
    unsigned ncases = sizeof(cases) / sizeof(cases[0]), passed = 0;
    for (unsigned i = 0; i < ncases; i++) {
        int before = failures;
        run(cases[i].nslots, cases[i].nreaders, cases[i].n, cases[i].words);
        passed += failures == before;
    }
    printf("stress_ring: %u passed, %u failed\n", passed, ncases - passed);
    return passed == ncases ? 0 : 1;
}

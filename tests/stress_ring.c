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

#include <adag.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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
                           (adag_wait_policy_t){1000, 0})) {
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
                              r.abort, (adag_wait_policy_t){1000, 1}) == ADAG_OK,
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

/* ---- a whole DAG of thread actors: driver, loops and channels under TSan ---- */

static adag_status_t add_one(void *state, adag_call_h call)
{
    adag_value_t in;
    int64_t x;
    (*(int64_t *)state)++;
    if (adag_call_arg(call, 0, &in) != ADAG_OK || in.size != sizeof x)
        return adag_call_fail(call, "expected an int64");
    memcpy(&x, in.data, sizeof x);
    x += 1;
    return adag_call_set_output(call, 0, &x, sizeof x);
}

static adag_status_t sum2(void *state, adag_call_h call)
{
    adag_value_t a, b;
    int64_t x, y;
    (*(int64_t *)state)++;
    if (adag_call_arg(call, 0, &a) != ADAG_OK || adag_call_arg(call, 1, &b) != ADAG_OK)
        return adag_call_fail(call, "expected two args");
    memcpy(&x, a.data, sizeof x);
    memcpy(&y, b.data, sizeof y);
    x += y;
    return adag_call_set_output(call, 0, &x, sizeof x);
}

static const adag_method_def_t stress_methods[] = {{"add_one", add_one, 1, 1},
                                                   {"sum2", sum2, 2, 1}};
static const adag_class_def_t stress_class = {.abi_version = ADAG_ABI_VERSION,
                                              .name = "stress",
                                              .state_size = sizeof(int64_t),
                                              .methods = stress_methods,
                                              .nmethods = 2};

/* input -> a.add_one -> {b.add_one, c.add_one} -> a.sum2 -> driver; a second
 * DAG shares actor a. Returns 1 if every value came back right. */
static int run_dag(void)
{
    adag_runtime_h rt;
    adag_actor_h a, b, c;
    adag_graph_h g, g2;
    adag_node_h in, x, y, z, out, in2, out2;
    adag_dag_h dag, dag2;
    int ok = 1;
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "stress"};
    if (adag_runtime_create(NULL, &rt) || adag_class_register(rt, &stress_class) ||
        adag_actor_create(rt, &p, &a) || adag_actor_create(rt, &p, &b) ||
        adag_actor_create(rt, &p, &c) || adag_graph_create(rt, &g) ||
        adag_graph_input(g, 0, &in) || adag_graph_bind(g, a, "add_one", &in, 1, &x) ||
        adag_graph_bind(g, b, "add_one", &x, 1, &y) || adag_graph_bind(g, c, "add_one", &x, 1, &z))
        return 0;
    adag_node_h yz[2] = {y, z};
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT, .max_inflight = 4};
    if (adag_graph_bind(g, a, "sum2", yz, 2, &out) || adag_graph_output(g, &out, 1) ||
        adag_graph_compile(g, &cp, &dag) || adag_graph_create(rt, &g2) ||
        adag_graph_input(g2, 0, &in2) || adag_graph_bind(g2, a, "add_one", &in2, 1, &out2) ||
        adag_graph_output(g2, &out2, 1) || adag_graph_compile(g2, &cp, &dag2)) {
        fprintf(stderr, "setup: %s\n", adag_last_error());
        return 0;
    }
    adag_ref_t refs[4], refs2[4];
    for (int64_t i = 0; i < 3000 + 4; i++) {
        if (i >= 4) {
            adag_value_t o;
            int64_t v;
            if (adag_dag_get(dag, refs[i % 4], &o, 1, 20000) || o.size != 8)
                return 0;
            memcpy(&v, o.data, 8);
            ok &= v == 2 * (i - 4) + 4;
            if (adag_dag_get(dag2, refs2[i % 4], &o, 1, 20000))
                return 0;
            memcpy(&v, o.data, 8);
            ok &= v == i - 4 + 1;
            adag_dag_release(dag, refs[i % 4]);
            adag_dag_release(dag2, refs2[i % 4]);
        }
        if (i < 3000) {
            adag_value_t v = {.data = &i, .size = sizeof i};
            if (adag_dag_execute(dag, &v, 1, 0, &refs[i % 4]) ||
                adag_dag_execute(dag2, &v, 1, 0, &refs2[i % 4]))
                return 0;
        }
    }
    /* teardown with work in flight */
    for (int64_t i = 0; i < 4; i++) {
        adag_value_t v = {.data = &i, .size = sizeof i};
        adag_dag_execute(dag, &v, 1, 0, &refs[i]);
    }
    return ok && adag_runtime_destroy(rt) == ADAG_OK;
}

/* Several threads drive one DAG at once: plain executes, NONBLOCK ones
 * that retry on ADAG_ERR_AGAIN, and zero-copy prepare/commit, while another
 * thread polls the armed DAG fd. Every result is checked; TSan checks the
 * reservation, the ref window and the fd state. */
typedef struct {
    adag_dag_h dag;
    int mode; /* 0 execute, 1 NONBLOCK execute, 2 prepare/commit */
    int64_t base;
    int ok;
} driver_thread_t;

#include <errno.h>
#include <poll.h>

static void *drive(void *arg)
{
    driver_thread_t *t = arg;
    t->ok = 1;
    for (int64_t i = 0; i < 1500; i++) {
        int64_t x = t->base + i;
        adag_ref_t ref;
        adag_status_t st;
        if (t->mode == 2) {
            void *buf;
            size_t size = sizeof x;
            while ((st = adag_dag_execute_prepare(t->dag, 0, &buf, 1)) == ADAG_ERR_TIMEOUT) {
            }
            if (st != ADAG_OK)
                return (t->ok = 0, NULL);
            memcpy(buf, &x, sizeof x);
            st = adag_dag_execute_commit(t->dag, &size, 1, &ref);
        } else {
            adag_value_t v = {.data = &x, .size = sizeof x};
            unsigned flags = t->mode == 1 ? ADAG_EXECUTE_NONBLOCK : 0;
            while ((st = adag_dag_execute(t->dag, &v, 1, flags, &ref)) == ADAG_ERR_AGAIN ||
                   st == ADAG_ERR_TIMEOUT)
                sched_yield();
        }
        adag_value_t o;
        int64_t y;
        if (st != ADAG_OK || adag_dag_get(t->dag, ref, &o, 1, 20000) != ADAG_OK ||
            o.size != sizeof y) {
            fprintf(stderr, "driver thread %d: %s\n", t->mode, adag_last_error());
            return (t->ok = 0, NULL);
        }
        memcpy(&y, o.data, sizeof y);
        t->ok &= y == x + 1;
        adag_dag_release(t->dag, ref);
    }
    return NULL;
}

static _Atomic int polling;

static void *poll_fd(void *arg)
{
    int fd = *(int *)arg;
    while (atomic_load(&polling)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 1);
    }
    return NULL;
}

static int run_concurrent_drivers(void)
{
    adag_runtime_h rt;
    adag_actor_h a;
    adag_graph_h g;
    adag_node_h in, out;
    adag_dag_h dag;
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "stress"};
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT,
                                .max_inflight = 3, .execute_timeout_ms = 50};
    if (adag_runtime_create(NULL, &rt) || adag_class_register(rt, &stress_class) ||
        adag_actor_create(rt, &p, &a) || adag_graph_create(rt, &g) ||
        adag_graph_input(g, 0, &in) || adag_graph_bind(g, a, "add_one", &in, 1, &out) ||
        adag_graph_output(g, &out, 1) || adag_graph_compile(g, &cp, &dag)) {
        fprintf(stderr, "setup: %s\n", adag_last_error());
        return 0;
    }
    int fd;
    if (adag_dag_fd(dag, &fd) != ADAG_OK)
        return 0;
    atomic_store(&polling, 1);
    pthread_t poller, th[3];
    driver_thread_t dt[3] = {{dag, 0, 0, 0}, {dag, 1, 1000000, 0}, {dag, 2, 2000000, 0}};
    pthread_create(&poller, NULL, poll_fd, &fd);
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, drive, &dt[i]);
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        ok &= dt[i].ok;
    }
    atomic_store(&polling, 0);
    pthread_join(poller, NULL);
    /* destroyed by the thread holding a prepared execution */
    void *buf;
    ok &= adag_dag_execute_prepare(dag, 0, &buf, 1) == ADAG_OK;
    ok &= adag_dag_destroy(dag) == ADAG_OK;
    return ok && adag_runtime_destroy(rt) == ADAG_OK;
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
    int dag_ok = run_dag();
    EXPECT(dag_ok, "thread-actor DAG: %s", adag_last_error());
    passed += dag_ok;
    ncases++;
    int drivers_ok = run_concurrent_drivers();
    EXPECT(drivers_ok, "three threads driving one DAG: %s", adag_last_error());
    passed += drivers_ok;
    ncases++;
    printf("stress_ring: %u passed, %u failed\n", passed, ncases - passed);
    return passed == ncases ? 0 : 1;
}

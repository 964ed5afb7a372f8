/*
 * stress_trace: trace rings (common/trace.h) under ThreadSanitizer
 * (make test-tsan): an indexed ring (the driver's: execute and get on any
 * thread) written by three threads that lap each other and a one-writer
 * ring (a loop's: op records and spans) while two readers copy both,
 * every copied record whole and in order; and a
 * traced DAG of thread actors run from two threads while a third writes
 * its trace again and again.
 */
#include "common/live.h"
#include "common/trace.h"
#include "stress.h"

#include <adag.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WRITERS 3
#define RECORDS_EACH 200000

static adag_trace_ring_t ring;    /* indexed: WRITERS threads */
static adag_trace_ring_t one;     /* one writer */
static _Atomic int writers_done;

/* Every field of record v is derived from v: a torn copy would not agree. */
static void *indexed_writer(void *arg)
{
    uint64_t w = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < RECORDS_EACH; i++) {
        /* writer w owns the slots w mod 4 (the driver's writers never share
         * a slot: a ref's records are reused long after it was released) */
        uint64_t v = i * 4 + w;
        adag__trace_put(&ring, v, ADAG_SPAN_EXECUTE + (unsigned)(v & 1), v, v * 3, v * 3 + 7);
    }
    atomic_fetch_add(&writers_done, 1);
    return NULL;
}

static void *one_writer(void *arg)
{
    (void)arg;
    for (uint64_t v = 0; v < (uint64_t)WRITERS * RECORDS_EACH; v++) {
        uint64_t t[5] = {v, v + 1, v + 2, v + 3, v + 4};
        if (v & 1)
            adag__trace_add_op(&one, (uint32_t)(v & 0xffff), 0, (uint32_t)(v * 7), 0, v, t);
        else
            adag__trace_add(&one, ADAG_SPAN_BACKEND, (uint32_t)v, (uint32_t)(v * 7), v, v, v + 1);
    }
    atomic_fetch_add(&writers_done, 1);
    return NULL;
}

static void check_indexed(const adag_trace_rec_t *r, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = r[i].seq;
        EXPECT(adag__trace_rec_kind(&r[i]) == ADAG_SPAN_EXECUTE + (v & 1) && r[i].t[0] == v * 3 &&
                   r[i].t[1] == v * 3 + 7,
               "torn record: seq %llx start %llu end %llu", (unsigned long long)v,
               (unsigned long long)r[i].t[0], (unsigned long long)r[i].t[1]);
        EXPECT(i == 0 || r[i - 1].seq < v, "indexed copy out of order at %llu",
               (unsigned long long)i);
    }
}

static void check_one(const adag_trace_rec_t *r, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = r[i].seq, p = r[i].packed;
        int ok = r[i].t[0] == v && r[i].t[1] == v + 1 && (p >> 16 & 0xffff) == (v & 0xffff);
        if (v & 1)
            ok = ok && adag__trace_rec_kind(&r[i]) == ADAG_SPAN_OP &&
                 (p >> 32 & 0xffff) == ((v * 7) & 0xffff) && p >> 48 == 0 &&
                 r[i].t[2] == v + 2 && r[i].t[3] == v + 3 && r[i].t[4] == v + 4;
        else
            ok = ok && adag__trace_rec_kind(&r[i]) == ADAG_SPAN_BACKEND &&
                 p >> 32 == (uint32_t)(v * 7);
        EXPECT(ok, "torn record in the one-writer ring: seq %llu", (unsigned long long)v);
        EXPECT(i == 0 || r[i - 1].seq < v, "one-writer copy out of order at %llu",
               (unsigned long long)i);
    }
}

static void *reader(void *arg)
{
    (void)arg;
    adag_trace_rec_t *out = malloc((ring.mask + 1) * sizeof(*out));
    adag_trace_rec_t *out1 = malloc((one.mask + 1) * sizeof(*out1));
    uint64_t copies = 0, recs = 0;
    while (atomic_load(&writers_done) < WRITERS + 1) {
        uint64_t lost, n = adag__trace_ring_copy(&ring, out, &lost);
        check_indexed(out, n);
        EXPECT(n <= ring.mask + 1, "copied %llu of a ring of %llu", (unsigned long long)n,
               (unsigned long long)(ring.mask + 1));
        recs += n;
        n = adag__trace_ring_copy(&one, out1, &lost);
        check_one(out1, n);
        recs += n;
        copies++;
    }
    printf("stress_trace: %llu copies, %llu records checked\n", (unsigned long long)copies,
           (unsigned long long)recs);
    free(out);
    free(out1);
    return NULL;
}

/* a traced DAG of thread actors */
static adag_status_t add_one(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t in;
    int64_t x;
    if (adag_call_arg(call, 0, &in) != ADAG_OK || in.size != 8)
        return adag_call_fail(call, "add_one wants an int64");
    memcpy(&x, in.data, 8);
    x++;
    return adag_call_set_output(call, 0, &x, 8);
}

static const adag_method_def_t methods[] = {{"add_one", add_one, 1, 1}};
static const adag_class_def_t stage_class = {.abi_version = ADAG_ABI_VERSION, .name = "stage",
                                             .state_size = 8, .methods = methods, .nmethods = 1};
static adag_dag_h dag;
static _Atomic int runners_done;

static _Atomic int stop_viewing;

/* an operator's `adag-info attach`: views of the live DAG, again and
 * again, while it runs and while it is destroyed */
static void *viewer(void *arg)
{
    const char *path = arg;
    int views = 0, empty = 0;
    while (!atomic_load(&stop_viewing)) {
        int fd;
        char *text = NULL;
        size_t len = 0;
        EXPECT(adag__live_connect(path, &fd) == ADAG_OK, "%s", adag_last_error());
        FILE *out = open_memstream(&text, &len);
        EXPECT(adag__live_request(fd, out, 10000) == ADAG_OK, "%s", adag_last_error());
        fclose(out);
        views++;
        if (strstr(text, ": 0 DAGs"))
            empty++;
        else
            EXPECT(strstr(text, ": 1 DAG\n") && strstr(text, "DAG dag"), "a view of %.300s",
                   text);
        free(text);
        close(fd);
    }
    printf("stress_trace: %d live views taken while the DAG ran and was destroyed (%d after)\n",
           views, empty);
    return NULL;
}

static void *runner(void *arg)
{
    int64_t base = (int64_t)(intptr_t)arg;
    for (int64_t i = 0; i < 3000; i++) {
        int64_t x = base + i, y = 0;
        adag_value_t in = {.data = &x, .size = 8}, out;
        adag_ref_t ref;
        EXPECT(adag_dag_execute(dag, &in, 1, 0, &ref) == ADAG_OK, "%s", adag_last_error());
        EXPECT(adag_dag_get(dag, ref, &out, 1, 10000) == ADAG_OK, "%s", adag_last_error());
        memcpy(&y, out.data, 8);
        EXPECT(y == x + 3, "got %lld for %lld", (long long)y, (long long)x);
        adag_dag_release(dag, ref);
    }
    atomic_fetch_add(&runners_done, 1);
    return NULL;
}

static int traced_dag(void)
{
    adag_runtime_h rt;
    adag_actor_h a[3];
    adag_graph_h g;
    adag_node_h n;
    if (adag_runtime_create(NULL, &rt) != ADAG_OK || adag_class_register(rt, &stage_class))
        return -1;
    for (int i = 0; i < 3; i++) {
        adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "stage"};
        if (adag_actor_create(rt, &p, &a[i]) != ADAG_OK)
            return -1;
    }
    adag_graph_create(rt, &g);
    adag_graph_input(g, 0, &n);
    for (int i = 0; i < 3; i++)
        adag_graph_bind(g, a[i], "add_one", &n, 1, &n);
    adag_graph_output(g, &n, 1);
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_TRACE |
                                              ADAG_COMPILE_PARAM_MAX_INFLIGHT,
                                .max_inflight = 4, .trace_spans = 256};
    if (adag_graph_compile(g, &cp, &dag) != ADAG_OK)
        return -1;
    char dir[] = "/tmp/adag-stress-XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    char path[128];
    snprintf(path, sizeof(path), "%s/live.sock", dir);
    if (adag_runtime_live_open(rt, path) != ADAG_OK)
        return -1;
    pthread_t t[3];
    pthread_create(&t[0], NULL, runner, (void *)(intptr_t)0);
    pthread_create(&t[1], NULL, runner, (void *)(intptr_t)1000000);
    pthread_create(&t[2], NULL, viewer, path);
    int writes = 0;
    while (atomic_load(&runners_done) < 2) {
        int f = open("/dev/null", O_WRONLY | O_CLOEXEC);
        EXPECT(adag_dag_write_trace(dag, adag_writer_fd(f)) == ADAG_OK, "%s", adag_last_error());
        close(f);
        writes++;
    }
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    printf("stress_trace: a traced DAG run from 2 threads, its trace written %d times\n", writes);
    adag_dag_destroy(dag); /* while the viewer views */
    usleep(20 * 1000);
    atomic_store(&stop_viewing, 1);
    pthread_join(t[2], NULL);
    adag_graph_destroy(g);
    adag_runtime_destroy(rt); /* closes the live view */
    rmdir(dir);
    return 0;
}

int main(void)
{
    if (adag__trace_ring_init(&ring, 4096, 1) != ADAG_OK ||
        adag__trace_ring_init(&one, 4096, 0) != ADAG_OK)
        return 2;
    pthread_t w[WRITERS + 1], r[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&r[i], NULL, reader, NULL);
    for (uintptr_t i = 0; i < WRITERS; i++)
        pthread_create(&w[i], NULL, indexed_writer, (void *)i);
    pthread_create(&w[WRITERS], NULL, one_writer, NULL);
    for (int i = 0; i <= WRITERS; i++)
        pthread_join(w[i], NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(r[i], NULL);
    uint64_t lost;
    adag_trace_rec_t *all = malloc((ring.mask + 1) * sizeof(*all));
    uint64_t n = adag__trace_ring_copy(&ring, all, &lost);
    /* at rest every slot written holds a whole record: the latest lap's */
    EXPECT(n == (ring.mask + 1) / 4 * WRITERS && all[n - 1].seq == (RECORDS_EACH - 1) * 4ull + 2,
           "after the writers: %llu kept of %llu, last %llu", (unsigned long long)n,
           (unsigned long long)(ring.mask + 1), (unsigned long long)(n ? all[n - 1].seq : 0));
    n = adag__trace_ring_copy(&one, all, &lost);
    EXPECT(n == one.mask + 1 && n + lost == (uint64_t)WRITERS * RECORDS_EACH,
           "one writer: %llu kept, %llu lost", (unsigned long long)n, (unsigned long long)lost);
    free(all);
    adag__trace_ring_free(&ring);
    adag__trace_ring_free(&one);
    EXPECT(traced_dag() == 0, "traced DAG: %s", adag_last_error());
    int f = atomic_load(&failures);
    printf("stress_trace: %s\n", f ? "FAILED" : "ok");
    return f ? 1 : 0;
}

/*
 * The data source's threads under ThreadSanitizer (make test-tsan): many
 * threads filling batches under a tight budget while a consumer takes them
 * in order, holds two at once and releases them out of order, checks each
 * sample, and closes the source while threads are busy; then a source
 * feeding a thread-actor DAG (reserve/fill/commit from its threads while
 * the driver gets and releases); and sources whose batches fail from
 * batch 50 on, several threads failing at once, which must hand out
 * batches 0..49 and then the first failure. Fails on a wrong batch or any
 * race TSan reports.
 */
#include <adag/data.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RS 64
#define NREC 5000

static char path[64];

static int write_records(void)
{
    snprintf(path, sizeof(path), "/tmp/adag-stress-data-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    unsigned char r[RS];
    for (uint64_t id = 0; id < NREC; id++) {
        memcpy(r, &id, 8);
        for (unsigned i = 8; i < RS; i++)
            r[i] = (unsigned char)(id + i);
        if (write(fd, r, RS) != RS)
            return -1;
    }
    close(fd);
    return 0;
}

/* 0 if every record of the batch is whole */
static int check(const adag_data_batch_t *b, unsigned bs)
{
    for (unsigned j = 0; j < bs; j++) {
        const unsigned char *r = (const unsigned char *)b->data + (size_t)j * RS;
        uint64_t id;
        memcpy(&id, r, 8);
        if (id >= NREC)
            return -1;
        for (unsigned i = 8; i < RS; i++)
            if (r[i] != (unsigned char)(id + i))
                return -1;
    }
    return 0;
}

static int run(unsigned threads, size_t budget_batches, unsigned nbatches, int close_early)
{
    const char *shards[1] = {path};
    const unsigned bs = 16;
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_THREADS |
                      ADAG_DATA_PARAM_BUDGET | ADAG_DATA_PARAM_SHUFFLE | ADAG_DATA_PARAM_SEED |
                      ADAG_DATA_PARAM_PREFETCH,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = bs,
        .record_size = RS,
        .threads = threads,
        .budget = budget_batches * bs * RS,
        .shuffle_window = 100,
        .seed = threads,
        .prefetch = 2,
    };
    adag_data_source_h src;
    if (adag_data_open(&p, &src) != ADAG_OK) {
        fprintf(stderr, "stress_data: open: %s\n", adag_last_error());
        return -1;
    }
    adag_data_batch_t held[2];
    uint64_t expect = 0;
    for (unsigned n = 0; n < nbatches; n += 2) {
        for (unsigned k = 0; k < 2; k++) {
            if (adag_data_next(src, &held[k], 20000) != ADAG_OK || check(&held[k], bs) ||
                held[k].batch != expect % (NREC / bs)) {
                fprintf(stderr, "stress_data: batch %llu wrong: %s\n",
                        (unsigned long long)expect, adag_last_error());
                adag_data_close(src);
                return -1;
            }
            expect++;
        }
        adag_data_release(src, &held[1]); /* out of order */
        adag_data_release(src, &held[0]);
    }
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    if (st.bytes_peak > p.budget) {
        fprintf(stderr, "stress_data: peak %zu over budget %zu\n", st.bytes_peak, p.budget);
        adag_data_close(src);
        return -1;
    }
    if (close_early)
        usleep(1000); /* threads busy filling ahead */
    adag_data_close(src);
    return 0;
}

/* Copies the record; refuses every sample from index 800 on. */
static adag_status_t refuse_late(void *arg, const adag_data_sample_t *s, uint64_t *rng, void *out,
                                 size_t out_size)
{
    (void)arg;
    (void)rng;
    if (s->index >= 800)
        return adag_data_fail(s, "refused");
    memcpy(out, s->data, out_size);
    return ADAG_OK;
}

/* Every batch from 50 on fails, several threads failing at once, later
 * batches often first: the consumer gets batches 0..49 whole and in order,
 * then the failure of sample 800. */
static int run_failing(unsigned threads)
{
    const char *shards[1] = {path};
    const unsigned bs = 16;
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_THREADS |
                      ADAG_DATA_PARAM_BUDGET | ADAG_DATA_PARAM_MAP,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = bs,
        .sample_size = RS,
        .record_size = RS,
        .map = refuse_late,
        .threads = threads,
        .budget = 3 * bs * RS,
    };
    adag_data_source_h src;
    if (adag_data_open(&p, &src) != ADAG_OK) {
        fprintf(stderr, "stress_data: open: %s\n", adag_last_error());
        return -1;
    }
    int rc = 0;
    for (unsigned n = 0; n <= 50 && rc == 0; n++) {
        adag_data_batch_t b;
        adag_status_t st = adag_data_next(src, &b, 20000);
        if (n == 50) {
            if (st != ADAG_ERR_INVALID || !strstr(adag_last_error(), "sample 800: refused")) {
                fprintf(stderr, "stress_data: after 50 batches: %s (%s)\n",
                        adag_status_str(st), adag_last_error());
                rc = -1;
            }
            break;
        }
        uint64_t id;
        if (st == ADAG_OK)
            memcpy(&id, b.data, 8);
        if (st != ADAG_OK || check(&b, bs) || b.batch != n || id != (uint64_t)n * bs) {
            fprintf(stderr, "stress_data: batch %u before the failure: %s\n", n,
                    st == ADAG_OK ? "wrong" : adag_last_error());
            rc = -1;
        }
        if (st == ADAG_OK)
            adag_data_release(src, &b);
        usleep(100); /* the threads get ahead, to the failing batches */
    }
    adag_data_close(src);
    return rc;
}

/* copy(batch) -> the same bytes, checked on the way */
static adag_status_t copy(void *state, adag_call_h call)
{
    adag_value_t in;
    (void)state;
    if (adag_call_arg(call, 0, &in) != ADAG_OK)
        return adag_call_fail(call, "no argument");
    return adag_call_set_output(call, 0, in.data, in.size);
}

static const adag_method_def_t copy_methods[] = {{"copy", copy, 1, 1}};
static const adag_class_def_t copy_class = {.abi_version = ADAG_ABI_VERSION, .name = "copy",
                                            .state_size = 8, .methods = copy_methods,
                                            .nmethods = 1};

/* A source with `threads` threads feeding input -> a.copy -> b.copy; on
 * `device` the input (a tensor field) lives on the driver's emulated
 * device emu:0: the threads fill the DAG's pinned staging and each commit
 * enqueues its copy on the DAG's stream, from several threads at once. */
static int run_feed(unsigned threads, unsigned nexec, int device)
{
    const unsigned bs = 16;
    adag_runtime_h rt;
    adag_actor_h a, b;
    adag_graph_h g;
    adag_node_h in, x, y;
    adag_dag_h dag;
    adag_actor_params_t ap = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "copy"};
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_SLOT_CAPACITY,
                                .max_inflight = 4,
                                .slot_capacity = bs * RS};
    if (device) {
        cp.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
        cp.driver_device = "emu:0";
    }
    if (adag_runtime_create(NULL, &rt) || adag_class_register(rt, &copy_class) ||
        adag_actor_create(rt, &ap, &a) || adag_actor_create(rt, &ap, &b) ||
        adag_graph_create(rt, &g) || adag_graph_input(g, 0, &in) ||
        (device && adag_node_tensor(in, NULL)) ||
        adag_graph_bind(g, a, "copy", &in, 1, &x) || adag_graph_bind(g, b, "copy", &x, 1, &y) ||
        adag_graph_output(g, &y, 1) || adag_graph_compile(g, &cp, &dag)) {
        fprintf(stderr, "stress_data: DAG: %s\n", adag_last_error());
        return -1;
    }
    adag_graph_destroy(g);
    adag_input_view_t input;
    unsigned ninputs;
    if (adag_dag_inputs(dag, &input, 1, &ninputs) != ADAG_OK ||
        input.device != (device ? ADAG_DEVICE(ADAG_DEV_EMULATED, 0) : ADAG_DEVICE_HOST)) {
        fprintf(stderr, "stress_data: the DAG's input is on device %d\n", (int)input.device);
        return -1;
    }
    const char *shards[1] = {path};
    adag_data_params_t p = {
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_THREADS |
                      ADAG_DATA_PARAM_SHUFFLE | ADAG_DATA_PARAM_DAG,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = bs,
        .record_size = RS,
        .threads = threads,
        .shuffle_window = 50,
        .dag = dag,
    };
    adag_data_source_h src;
    int rc = 0;
    if (adag_data_open(&p, &src) != ADAG_OK) {
        fprintf(stderr, "stress_data: open: %s\n", adag_last_error());
        return -1;
    }
    for (unsigned n = 0; n < nexec && rc == 0; n++) {
        adag_ref_t ref;
        adag_data_batch_t bt;
        adag_value_t out;
        if (adag_data_next_exec(src, &ref, &bt, 20000) != ADAG_OK ||
            adag_dag_get(dag, ref, &out, 1, 20000) != ADAG_OK) {
            fprintf(stderr, "stress_data: execution %u: %s\n", n, adag_last_error());
            rc = -1;
            break;
        }
        bt.data = (void *)out.data;
        if (check(&bt, bs) || out.size != bs * RS) {
            fprintf(stderr, "stress_data: execution %u came back wrong\n", n);
            rc = -1;
        }
        adag_dag_release(dag, ref);
    }
    adag_data_close(src);
    adag_dag_destroy(dag);
    adag_runtime_destroy(rt);
    return rc;
}

int main(void)
{
    if (write_records() != 0) {
        perror("stress_data: writing records");
        return 1;
    }
    int failed = 0;
    static const struct {
        unsigned threads;
        size_t budget;
        unsigned batches;
    } cases[] = {{1, 2, 300}, {4, 2, 600}, {8, 3, 800}, {16, 18, 800}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = run(cases[i].threads, cases[i].budget, cases[i].batches, (int)(i & 1));
        printf("stress_data: %u threads, budget of %zu batches: %s\n", cases[i].threads,
               cases[i].budget, rc ? "FAILED" : "ok");
        failed |= rc != 0;
    }
    for (unsigned threads = 2; threads <= 16; threads *= 2) {
        int rc = 0;
        for (int k = 0; k < 5 && rc == 0; k++)
            rc = run_failing(threads);
        printf("stress_data: %u threads, failures from batch 50 on: %s\n", threads,
               rc ? "FAILED" : "ok");
        failed |= rc != 0;
    }
    for (int device = 0; device < 2; device++) {
        for (unsigned threads = 1; threads <= 8; threads *= 4) {
            int rc = run_feed(threads, 400, device);
            printf("stress_data: %u threads feeding a DAG%s: %s\n", threads,
                   device ? " whose input is on the driver's device" : "",
                   rc ? "FAILED" : "ok");
            failed |= rc != 0;
        }
    }
    unlink(path);
    printf("stress_data: %s\n", failed ? "FAILED" : "ok");
    return failed;
}

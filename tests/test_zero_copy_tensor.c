/*
 * Suite "zero_copy": tensors written in place through adag_dag_reserve /
 * adag_dag_commit. Several threads reserve at once (the window full of
 * their reservations), fill tensors of every dtype and 1-3 dimensions and
 * commit in the reverse order; every element of every result is checked
 * against the C reference of the gpu_stage chain (tests/modules/
 * gpu_stage.h). Inputs in host slots, and inputs on the driver's emulated
 * device (driver_device "emu:0", copies slowed down): written in the
 * DAG's pinned staging, or in the device slot directly by work on the
 * DAG's stream (adag_dag_enqueue). A staging buffer is handed out again
 * only once its copy ran; a commit that does not match the field's static
 * declaration, or names other memory, is refused and the ref stays
 * reserved (a size above the capacity: tests/test_reserve.c).
 */
#include "gpu_stage.h"
#include "helpers.h"
#include "probes.h"
#include "tensor_ref.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NW 4      /* writer threads, and executions in flight */
#define ROUNDS 25 /* each thread writes one execution a round */
#define CAP 4096

/* The input of execution k: a dtype (every one in turn), 1..3 dims of
 * 1..5, elements a pattern of k. */
typedef struct {
    adag_dtype_t dtype;
    unsigned ndim;
    int64_t shape[ADAG_MAX_DIMS];
    size_t n, bytes;
    unsigned char data[1024];
} input_t;

static void make_input(input_t *in, uint64_t k)
{
    memset(in, 0, sizeof(*in));
    in->dtype = t_dtypes[k % T_NDTYPES];
    in->ndim = 1 + (unsigned)(k % 3);
    for (unsigned d = 0; d < in->ndim; d++)
        in->shape[d] = 1 + (int64_t)((k / 3 + 2 * d) % 5);
    in->n = t_count(in->ndim, in->shape);
    in->bytes = in->n * t_elem(in->dtype);
    t_fill(in->dtype, in->n, (unsigned)k, in->data);
}

/* What a commit says of `in`, written at data on device. */
static adag_value_t committed(const input_t *in, void *data, int32_t device)
{
    adag_value_t v = {.data = data, .size = in->bytes, .kind = ADAG_VALUE_TENSOR,
                      .dtype = in->dtype, .ndim = in->ndim, .device = device};
    memcpy(v.shape, in->shape, sizeof(v.shape));
    return v;
}

/* out (elements readable from the host) is in after stages 1 and 2: the
 * same dtype, the shape reversed twice, every element the reference's. */
static void check_result(const adag_value_t *out, const input_t *in, uint64_t k)
{
    cr_assert_eq(out->kind, ADAG_VALUE_TENSOR, "execution %llu: not a tensor",
                 (unsigned long long)k);
    cr_assert_eq(out->dtype, in->dtype, "execution %llu: dtype %s, want %s",
                 (unsigned long long)k, adag_dtype_name(out->dtype), adag_dtype_name(in->dtype));
    cr_assert_eq(out->ndim, in->ndim, "execution %llu", (unsigned long long)k);
    for (unsigned d = 0; d < in->ndim; d++)
        cr_assert_eq(out->shape[d], in->shape[d], "execution %llu: dim %u",
                     (unsigned long long)k, d);
    cr_assert_eq(out->size, in->bytes, "execution %llu", (unsigned long long)k);
    size_t es = t_elem(in->dtype);
    for (size_t i = 0; i < in->n; i++) {
        unsigned char y[8], z[8];
        stage_apply(in->dtype, 1, in->data + i * es, y);
        stage_apply(in->dtype, 2, y, z);
        cr_assert(memcmp(z, (const char *)out->data + i * es, es) == 0,
                  "execution %llu (%s), element %zu differs from the C reference",
                  (unsigned long long)k, adag_dtype_name(in->dtype), i);
    }
}

static int all_zero(const uint64_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (w[i])
            return 0;
    return 1;
}

/* ---- the writers ---- */

/* A write of the device slot on the DAG's stream (adag_dag_enqueue): it
 * runs late (sleep_us first), so a commit not ordered after the stream's
 * work would publish the slot before it. */
typedef struct {
    void *dst;
    const void *src;
    size_t n;
    int sleep_us;
} slot_write_t;

static void write_slot(void *p)
{
    const slot_write_t *w = p;
    usleep((useconds_t)w->sleep_us);
    memcpy(w->dst, w->src, w->n);
}

typedef struct {
    adag_dag_h dag;
    pthread_barrier_t *reserved;
    unsigned index;
    int direct; /* write the device slot on the stream, not the staging */
    uint64_t k;
    input_t in;
    adag_ref_t ref;
    adag_input_view_t view;
    adag_status_t st;
    char why[256];
} writer_t;

/* Reserves, waits until every writer holds a reservation, fills its input
 * and commits, the last writer first. */
static void *write_one(void *arg)
{
    writer_t *w = arg;
    make_input(&w->in, w->k);
    memset(&w->view, 0xff, sizeof(w->view)); /* every field must be set */
    w->st = adag_dag_reserve(w->dag, 0, &w->view, 1, &w->ref);
    pthread_barrier_wait(w->reserved);
    if (w->st == ADAG_OK) {
        h_sleep_ms(3 * (NW - w->index));
        adag_value_t v;
        if (w->direct) {
            slot_write_t sw = {w->view.device_data, w->in.data, w->in.bytes, 2000};
            w->st = adag_dag_enqueue(w->dag, write_slot, &sw, sizeof(sw));
            v = committed(&w->in, w->view.device_data, w->view.device);
        } else {
            memcpy(w->view.data, w->in.data, w->in.bytes);
            v = committed(&w->in, w->view.data, ADAG_DEVICE_HOST);
        }
        if (w->st == ADAG_OK)
            w->st = adag_dag_commit(w->dag, w->ref, &v, 1);
    }
    snprintf(w->why, sizeof(w->why), "%s", adag_last_error());
    return NULL;
}

/* ROUNDS rounds of NW writers at once on dag (stages s1 -> s2), each
 * result checked. device: the input lives on the driver's device 0 (odd
 * writers write its slot directly). */
static void run_writers(adag_dag_h dag, int device)
{
    void *stream = NULL;
    if (device)
        ASSERT_OK(adag_dag_stream(dag, &stream));
    static writer_t w[NW];
    for (uint64_t round = 0; round < ROUNDS; round++) {
        pthread_barrier_t reserved;
        pthread_barrier_init(&reserved, NULL, NW);
        pthread_t t[NW];
        for (unsigned i = 0; i < NW; i++) {
            w[i] = (writer_t){.dag = dag, .reserved = &reserved, .index = i,
                              .direct = device && i % 2, .k = round * NW + i};
            cr_assert_eq(pthread_create(&t[i], NULL, write_one, &w[i]), 0);
        }
        unsigned seen = 0;
        for (unsigned i = 0; i < NW; i++) {
            pthread_join(t[i], NULL);
            cr_assert_eq(w[i].st, ADAG_OK, "round %llu, writer %u: %s",
                         (unsigned long long)round, i, w[i].why);
            cr_assert(w[i].ref >= round * NW && w[i].ref < (round + 1) * NW,
                      "writer %u of round %llu got ref %llu", i, (unsigned long long)round,
                      (unsigned long long)w[i].ref);
            seen |= 1u << (w[i].ref % NW);
            const adag_input_view_t *v = &w[i].view;
            cr_assert_not_null(v->data);
            cr_assert_eq(v->capacity, CAP);
            cr_assert_eq(v->flags, ADAG_INPUT_TENSOR, "a tensor declared without a static type");
            cr_assert(v->dtype == ADAG_DTYPE_BYTES && v->ndim == 0 &&
                          all_zero((const uint64_t *)v->shape, ADAG_MAX_DIMS) &&
                          all_zero(v->reserved, 4),
                      "view fields left unset");
            if (device) {
                cr_assert_eq(v->device, ADAG_DEVICE(ADAG_DEV_EMULATED, 0));
                cr_assert(v->device_data && v->device_data != v->data,
                          "a device input: its slot and a staging buffer");
                cr_assert_eq(v->stream, stream, "the view's stream is not adag_dag_stream's");
            } else {
                cr_assert(v->device == ADAG_DEVICE_HOST && !v->device_data && !v->stream,
                          "a host input");
            }
        }
        cr_assert_eq(seen, (1u << NW) - 1, "the writers did not reserve %d refs at once", NW);
        pthread_barrier_destroy(&reserved);
        for (unsigned i = 0; i < NW; i++) {
            adag_value_t out[2];
            ASSERT_OK(adag_dag_get(dag, w[i].ref, out, 2, 20000));
            cr_assert_eq(out[0].device,
                         device ? ADAG_DEVICE(ADAG_DEV_EMULATED, 0) : ADAG_DEVICE_HOST);
            if (device) /* emu:0 device memory, read from the host once the stream ran */
                ASSERT_OK(adag_dag_stream_sync(dag, 20000));
            check_result(&out[0], &w[i].in, w[i].k);
            stage_info_t info;
            cr_assert_eq(out[1].size, sizeof(info));
            memcpy(&info, out[1].data, sizeof(info));
            cr_assert(info.ref == w[i].ref && info.elements == w[i].in.n &&
                          info.dtype == (uint32_t)w[i].in.dtype,
                      "execution %llu: stage 2 saw ref %llu, %llu elements of dtype %u",
                      (unsigned long long)w[i].k, (unsigned long long)info.ref,
                      (unsigned long long)info.elements, info.dtype);
            ASSERT_OK(adag_dag_release(dag, w[i].ref));
        }
    }
    adag_dag_stats_t stats = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &stats));
    cr_assert_eq(stats.executed, ROUNDS * NW);
}

/* ---- the tests ---- */

/* input (host) -> s1 -> s2, host actors: tensors written in the input
 * slots by NW threads at once. */
static void host_inputs(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2] = {h_gpu_stage(rt, pl, "s1", NULL, 1, 0),
                         h_gpu_stage(rt, pl, "s2", NULL, 2, 0)};
    adag_compile_params_t cp = h_compile_params(NW, CAP, 0, 0);
    adag_dag_h dag = h_gpu_chain(rt, a, 2, &cp);
    run_writers(dag, 0);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(zero_copy, host_inputs, 90)

/* input (on the driver's device emu:0) -> d1 (emu:0) -> d2 (emu:1),
 * copies slowed down: NW threads at once, even ones writing the DAG's
 * pinned staging (the commit's copy), odd ones the device slot by a late
 * write on the DAG's stream. A copy or write not ordered before d1's read,
 * or a commit that copied the staging over a direct write, shows in the
 * results. Nothing of the device stays behind. */
static void device_inputs(adag_placement_t pl)
{
    setenv("ADAG_EMU_COPY_MBPS", "300", 1);
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2] = {h_gpu_stage(rt, pl, "d1", "emu:0", 1, 0),
                         h_gpu_stage(rt, pl, "d2", "emu:1", 2, 0)};
    adag_compile_params_t cp = h_compile_params(NW, CAP, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
    cp.driver_device = "emu:0";
    adag_dag_h dag = h_gpu_chain(rt, a, 2, &cp);
    run_writers(dag, 1);
    ASSERT_OK(adag_dag_destroy(dag));
    cr_assert_eq(probe_device_objects(getpid()), 0,
                 "device objects left in the driver (the staging, its events)");
    for (int s = 0; s < 2; s++)
        ASSERT_OK(adag_actor_destroy(a[s]));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(zero_copy, device_inputs, 120)

/* A field declared f32[8,16], on the device and in host memory: the views
 * say so; a commit of another dtype or shape, of bytes, of a size that is
 * not its shape's, or naming other memory than the view's, is refused
 * naming the input and what is wrong, and the ref stays reserved: the
 * right commit then runs it. */
static void refused_commits(int device)
{
    adag_runtime_h rt = h_runtime();
    adag_placement_t pl = ADAG_PLACEMENT_THREAD;
    adag_actor_h a[2] = {h_gpu_stage(rt, pl, "r1", device ? "emu:0" : NULL, 1, 0),
                         h_gpu_stage(rt, pl, "r2", device ? "emu:1" : NULL, 2, 0)};
    adag_compile_params_t cp = h_compile_params(2, CAP, 0, 0);
    if (device) {
        cp.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
        cp.driver_device = "emu:0";
    }
    adag_tensor_params_t decl = {.field_mask = ADAG_TENSOR_PARAM_DTYPE | ADAG_TENSOR_PARAM_SHAPE,
                                 .dtype = ADAG_DTYPE_F32, .ndim = 2, .shape = {8, 16}};
    adag_dag_h dag = h_gpu_chain_input(rt, a, 2, &cp, &decl);

    unsigned ninputs = 0;
    adag_input_view_t described, view;
    ASSERT_OK(adag_dag_inputs(dag, &described, 1, &ninputs));
    cr_assert_eq(ninputs, 1);
    cr_assert(!described.data && !described.device_data && !described.stream,
              "adag_dag_inputs gives no memory");
    ASSERT_OK(adag_dag_inputs(dag, NULL, 0, &ninputs));
    adag_ref_t ref;
    ASSERT_OK(adag_dag_reserve(dag, 0, &view, 1, &ref));
    cr_assert_eq(view.flags,
                 ADAG_INPUT_TENSOR | ADAG_INPUT_STATIC_DTYPE | ADAG_INPUT_STATIC_SHAPE);
    cr_assert(view.dtype == ADAG_DTYPE_F32 && view.ndim == 2 && view.shape[0] == 8 &&
                  view.shape[1] == 16 && view.shape[2] == 0,
              "the view says %s, %u dims", adag_dtype_name(view.dtype), view.ndim);
    cr_assert(view.capacity == described.capacity && view.flags == described.flags &&
                  view.device == described.device,
              "adag_dag_inputs and adag_dag_reserve disagree");

    input_t in = {.dtype = ADAG_DTYPE_F32, .ndim = 2, .shape = {8, 16}, .n = 128, .bytes = 512};
    t_fill(ADAG_DTYPE_F32, in.n, 5, in.data);
    memcpy(view.data, in.data, in.bytes);
    adag_value_t good = committed(&in, view.data, ADAG_DEVICE_HOST), v;
    static float other[CAP];
    struct {
        adag_value_t v;
        adag_status_t st;
        const char *needle;
    } bad[] = {
        {good, ADAG_ERR_INVALID, "is declared f32[8,16], given f64[8,16]"},
        {good, ADAG_ERR_INVALID, "given f32[16,8]"},
        {good, ADAG_ERR_INVALID, "given f32[8]"},
        {{.data = view.data, .size = 512}, ADAG_ERR_INVALID, "given bytes"},
        {good, ADAG_ERR_INVALID, "is not the view's data"},
        {good, ADAG_ERR_INVALID, "size is 511 bytes but a f32[8,16] tensor is 512 bytes"},
    };
    bad[0].v.dtype = ADAG_DTYPE_F64;
    bad[0].v.size = 1024;
    bad[1].v.shape[0] = 16;
    bad[1].v.shape[1] = 8;
    bad[2].v.ndim = 1;
    bad[2].v.size = 32;
    bad[4].v.data = other;
    bad[5].v.size = 511;
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ASSERT_ST(adag_dag_commit(dag, ref, &bad[i].v, 1), bad[i].st);
        cr_assert(strstr(adag_last_error(), bad[i].needle), "commit %u: %s (want '%s')", i,
                  adag_last_error(), bad[i].needle);
        cr_assert(strstr(adag_last_error(), "input 0"), "%s", adag_last_error());
    }
    if (device) { /* host memory at the device slot, and another device */
        v = committed(&in, view.device_data, ADAG_DEVICE_HOST);
        ASSERT_ST(adag_dag_commit(dag, ref, &v, 1), ADAG_ERR_INVALID);
        v = committed(&in, view.device_data, ADAG_DEVICE(ADAG_DEV_EMULATED, 1));
        ASSERT_ST(adag_dag_commit(dag, ref, &v, 1), ADAG_ERR_INVALID);
        ASSERT_MSG_HAS("the driver's device emu:0");
    } else { /* a host input has no device memory */
        v = committed(&in, view.data, ADAG_DEVICE(ADAG_DEV_EMULATED, 0));
        ASSERT_ST(adag_dag_commit(dag, ref, &v, 1), ADAG_ERR_INVALID);
    }
    adag_value_t out[2];
    ASSERT_ST(adag_dag_get(dag, ref, out, 2, 0), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("reserved but not committed");
    /* still reserved: the right commit runs it, the input as written */
    ASSERT_OK(adag_dag_commit(dag, ref, &good, 1));
    ASSERT_OK(adag_dag_get(dag, ref, out, 2, 20000));
    if (device)
        ASSERT_OK(adag_dag_stream_sync(dag, 20000));
    check_result(&out[0], &in, ref);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_ST(adag_dag_commit(dag, ref, &good, 1), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("not a reservation");
    ASSERT_OK(adag_runtime_destroy(rt));
}
Test(zero_copy, refused_commits_stay_reserved_host, .timeout = 60)
{
    refused_commits(0);
}
Test(zero_copy, refused_commits_stay_reserved_device, .timeout = 60)
{
    refused_commits(1);
}

/* A staging buffer is handed out again only once the copy out of it ran.
 * input (device) -> d1.apply, whose result nobody reads, and the DAG's
 * output c.tick(): a result that does not wait for d1, so the window
 * frees ref 0's slot while its copy (256 KiB at 1 MB/s) still runs. A
 * non-blocking reserve of ref 1, which reuses that staging, must say so
 * until the copy is done; a blocking one then succeeds. */
Test(zero_copy, staging_reused_only_after_its_copy, .timeout = 60)
{
    setenv("ADAG_EMU_COPY_MBPS", "1", 1);
    enum { N = 65536, BYTES = N * 4 };
    adag_runtime_h rt = h_runtime();
    adag_actor_h d1 = h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "d1", "emu:0", 1, 0);
    adag_actor_h c = h_counter(rt, ADAG_PLACEMENT_THREAD, "c", 0);
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h x = h_input(g, 0), y, t;
    ASSERT_OK(adag_node_tensor(x, NULL));
    ASSERT_OK(adag_graph_bind(g, d1, "apply", &x, 1, &y));
    ASSERT_OK(adag_node_tensor(y, NULL));
    ASSERT_OK(adag_graph_bind(g, c, "tick", NULL, 0, &t));
    ASSERT_OK(adag_graph_output(g, &t, 1));
    adag_compile_params_t cp = h_compile_params(1, BYTES, 30000, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
    cp.driver_device = "emu:0";
    adag_dag_h dag = h_compile_with(g, &cp);
    ASSERT_OK(adag_graph_destroy(g));

    adag_input_view_t view;
    adag_ref_t r0, r1;
    ASSERT_OK(adag_dag_reserve(dag, 0, &view, 1, &r0));
    memset(view.data, 0x3c, BYTES); /* f32 0.0115: stage_apply keeps it finite */
    adag_value_t v = {.data = view.data, .size = BYTES, .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_F32, .ndim = 1, .shape = {N}};
    ASSERT_OK(adag_dag_commit(dag, r0, &v, 1));
    adag_value_t out;
    ASSERT_OK(adag_dag_get(dag, r0, &out, 1, 20000));
    ASSERT_OK(adag_dag_release(dag, r0));
    int staging_said = 0, other = 0;
    char last[512] = "";
    adag_status_t st;
    while ((st = adag_dag_reserve(dag, ADAG_EXECUTE_NONBLOCK, &view, 1, &r1)) == ADAG_ERR_AGAIN) {
        if (strstr(adag_last_error(), "pinned staging"))
            staging_said++;
        else
            other++;
        snprintf(last, sizeof(last), "%s", adag_last_error());
        usleep(1000);
    }
    ASSERT_OK(st);
    cr_assert_gt(staging_said, 0,
                 "ref 1 reused ref 0's staging while its copy ran (%d other refusals, the "
                 "last: %s)",
                 other, last);
    cr_assert_eq(r1, r0 + 1);
    ASSERT_OK(adag_dag_cancel(dag, r1));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* adag_dag_enqueue wants a driver device, a function and at most 256
 * bytes of arguments; adag_dag_name is the compile name. */
Test(zero_copy, enqueue_and_name_misuse, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "e", 0);
    adag_compile_params_t cp = h_compile_params(2, 64, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_NAME;
    cp.name = "zc_named";
    adag_dag_h dag = h_compile_with(h_chain_graph(rt, &a, 1, "echo"), &cp);
    cr_assert_str_eq(adag_dag_name(dag), "zc_named");
    char args[300] = {0};
    ASSERT_ST(adag_dag_enqueue(dag, write_slot, args, 8), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("has no driver device");
    ASSERT_OK(adag_dag_destroy(dag));

    adag_actor_h d = h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "d", "emu:0", 1, 0);
    cp = h_compile_params(2, 64, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
    cp.driver_device = "emu:0";
    dag = h_gpu_chain(rt, &d, 1, &cp);
    ASSERT_ST(adag_dag_enqueue(dag, write_slot, args, sizeof(args)), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("at most 256");
    ASSERT_ST(adag_dag_enqueue(dag, NULL, args, 8), ADAG_ERR_INVALID);
    ASSERT_OK(adag_runtime_destroy(rt));
}

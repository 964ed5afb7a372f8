/*
 * The field_mask rule of every params struct of the public API (suite
 * "params_mask", include/adag.h "Conventions"): a field that is not zero
 * while its bit is clear is refused with ADAG_ERR_INVALID naming the struct,
 * the field and the bit, never ignored: for each struct, each field with a
 * bit is set (its bytes not zero) with the bit clear, through the call that
 * reads the struct. The library must refuse before it reads the field, so
 * the bytes set are a pattern, not a valid value.
 */
#include "helpers.h"

#include <adag/data.h>
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *field, *bit;
    size_t off, size;
} field_t;

#define F(type, member, bit) {#member, #bit, offsetof(type, member), sizeof(((type *)0)->member)}
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const field_t runtime_fields[] = {
    F(adag_runtime_params_t, worker_path, ADAG_RUNTIME_PARAM_WORKER_PATH),
    F(adag_runtime_params_t, config, ADAG_RUNTIME_PARAM_CONFIG),
};

/* class_name's bit is set by every case (the class is required) */
static const field_t actor_fields[] = {
    F(adag_actor_params_t, name, ADAG_ACTOR_PARAM_NAME),
    F(adag_actor_params_t, module_path, ADAG_ACTOR_PARAM_MODULE),
    F(adag_actor_params_t, placement, ADAG_ACTOR_PARAM_PLACEMENT),
    F(adag_actor_params_t, init_data, ADAG_ACTOR_PARAM_INIT),
    F(adag_actor_params_t, init_size, ADAG_ACTOR_PARAM_INIT),
    F(adag_actor_params_t, device, ADAG_ACTOR_PARAM_DEVICE),
    F(adag_actor_params_t, node, ADAG_ACTOR_PARAM_NODE),
    F(adag_actor_params_t, cpus, ADAG_ACTOR_PARAM_CPUS),
    F(adag_actor_params_t, numa, ADAG_ACTOR_PARAM_NUMA),
    F(adag_actor_params_t, nic, ADAG_ACTOR_PARAM_NIC),
};

static const field_t tensor_fields[] = {
    F(adag_tensor_params_t, dtype, ADAG_TENSOR_PARAM_DTYPE),
    F(adag_tensor_params_t, ndim, ADAG_TENSOR_PARAM_SHAPE),
    F(adag_tensor_params_t, shape, ADAG_TENSOR_PARAM_SHAPE),
    F(adag_tensor_params_t, transport, ADAG_TENSOR_PARAM_TRANSPORT),
};

static const field_t compile_fields[] = {
    F(adag_compile_params_t, max_inflight, ADAG_COMPILE_PARAM_MAX_INFLIGHT),
    F(adag_compile_params_t, slot_capacity, ADAG_COMPILE_PARAM_SLOT_CAPACITY),
    F(adag_compile_params_t, execute_timeout_ms, ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT),
    F(adag_compile_params_t, teardown_timeout_ms, ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT),
    F(adag_compile_params_t, name, ADAG_COMPILE_PARAM_NAME),
    F(adag_compile_params_t, spin_ns, ADAG_COMPILE_PARAM_SPIN),
    F(adag_compile_params_t, comm_timeout_ms, ADAG_COMPILE_PARAM_COMM_TIMEOUT),
    F(adag_compile_params_t, driver_device, ADAG_COMPILE_PARAM_DRIVER_DEVICE),
    F(adag_compile_params_t, trace_spans, ADAG_COMPILE_PARAM_TRACE),
    F(adag_compile_params_t, graphs, ADAG_COMPILE_PARAM_GRAPHS),
};

static const field_t channel_fields[] = {
    F(adag_channel_params_t, max_bytes, ADAG_CHANNEL_PARAM_MAX_BYTES),
    F(adag_channel_params_t, slots, ADAG_CHANNEL_PARAM_SLOTS),
};

static const field_t data_fields[] = {
    F(adag_data_params_t, record_size, ADAG_DATA_PARAM_RECORD_SIZE),
    F(adag_data_params_t, seq_len, ADAG_DATA_PARAM_SEQ_LEN),
    F(adag_data_params_t, fields, ADAG_DATA_PARAM_FIELDS),
    F(adag_data_params_t, nfields, ADAG_DATA_PARAM_FIELDS),
    F(adag_data_params_t, map, ADAG_DATA_PARAM_MAP),
    F(adag_data_params_t, map_arg, ADAG_DATA_PARAM_MAP),
    F(adag_data_params_t, cache_dir, ADAG_DATA_PARAM_CACHE),
    F(adag_data_params_t, cache_bytes, ADAG_DATA_PARAM_CACHE),
    F(adag_data_params_t, steps, ADAG_DATA_PARAM_STEPS),
    F(adag_data_params_t, nsteps, ADAG_DATA_PARAM_STEPS),
    F(adag_data_params_t, scratch_size, ADAG_DATA_PARAM_SCRATCH),
    F(adag_data_params_t, threads, ADAG_DATA_PARAM_THREADS),
    F(adag_data_params_t, seed, ADAG_DATA_PARAM_SEED),
    F(adag_data_params_t, shuffle_shards, ADAG_DATA_PARAM_SHUFFLE),
    F(adag_data_params_t, shuffle_window, ADAG_DATA_PARAM_SHUFFLE),
    F(adag_data_params_t, rank, ADAG_DATA_PARAM_RANKS),
    F(adag_data_params_t, world, ADAG_DATA_PARAM_RANKS),
    F(adag_data_params_t, ranks_policy, ADAG_DATA_PARAM_RANKS),
    F(adag_data_params_t, budget, ADAG_DATA_PARAM_BUDGET),
    F(adag_data_params_t, prefetch, ADAG_DATA_PARAM_PREFETCH),
    F(adag_data_params_t, bad_policy, ADAG_DATA_PARAM_BAD_POLICY),
    F(adag_data_params_t, start_epoch, ADAG_DATA_PARAM_START),
    F(adag_data_params_t, start_batch, ADAG_DATA_PARAM_START),
    F(adag_data_params_t, dag, ADAG_DATA_PARAM_DAG),
    F(adag_data_params_t, sample_dtype, ADAG_DATA_PARAM_TENSOR),
    F(adag_data_params_t, sample_ndim, ADAG_DATA_PARAM_TENSOR),
    F(adag_data_params_t, sample_shape, ADAG_DATA_PARAM_TENSOR),
    F(adag_data_params_t, cpus, ADAG_DATA_PARAM_CPUS),
};

static const field_t image_fields[] = {
    F(adag_data_image_t, field, ADAG_DATA_IMAGE_FIELD),
    F(adag_data_image_t, scale_min, ADAG_DATA_IMAGE_SCALE),
    F(adag_data_image_t, scale_max, ADAG_DATA_IMAGE_SCALE),
    F(adag_data_image_t, ratio_min, ADAG_DATA_IMAGE_RATIO),
    F(adag_data_image_t, ratio_max, ADAG_DATA_IMAGE_RATIO),
    F(adag_data_image_t, flip, ADAG_DATA_IMAGE_FLIP),
    F(adag_data_image_t, mean, ADAG_DATA_IMAGE_NORMALIZE),
    F(adag_data_image_t, std, ADAG_DATA_IMAGE_NORMALIZE),
    F(adag_data_image_t, dtype, ADAG_DATA_IMAGE_DTYPE),
    F(adag_data_image_t, max_pixels, ADAG_DATA_IMAGE_MAX_PIXELS),
};

/* Sets field f of struct s to a non-zero pattern. */
static void set_field(void *s, const field_t *f)
{
    memset((char *)s + f->off, 0x41, f->size);
}

/* The refusal of a call that read struct `params` with f set, bit clear. */
static void expect_refused(adag_status_t st, const char *params, const field_t *f)
{
    char field[96];
    snprintf(field, sizeof(field), "%s.%s", params, f->field);
    cr_assert_eq(st, ADAG_ERR_INVALID, "%s set without %s: %s, want ADAG_ERR_INVALID (%s)", field,
                 f->bit, adag_status_str(st), adag_last_error());
    cr_assert(strstr(adag_last_error(), field) && strstr(adag_last_error(), f->bit),
              "the refusal of %s without %s does not name both: %s", field, f->bit,
              adag_last_error());
}

Test(params_mask, runtime_params, .timeout = 30)
{
    for (size_t i = 0; i < COUNT(runtime_fields); i++) {
        adag_runtime_params_t p = {0};
        set_field(&p, &runtime_fields[i]);
        adag_runtime_h rt = NULL;
        adag_status_t st = adag_runtime_create(&p, &rt);
        if (rt)
            adag_runtime_destroy(rt);
        expect_refused(st, "adag_runtime_params_t", &runtime_fields[i]);
    }
}

Test(params_mask, actor_params, .timeout = 60)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    for (size_t i = 0; i < COUNT(actor_fields); i++) {
        adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "counter"};
        set_field(&p, &actor_fields[i]);
        adag_actor_h a = NULL;
        adag_status_t st = adag_actor_create(rt, &p, &a);
        if (st == ADAG_OK)
            adag_actor_destroy(a);
        expect_refused(st, "adag_actor_params_t", &actor_fields[i]);
    }
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* The two mistakes seen in callers: a device without its bit made a host
 * actor; a placement without its bit made a thread actor, which then
 * failed on its class. */
Test(params_mask, device_or_placement_without_their_bit, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = NULL;
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "counter",
                             .device = "emu:0"};
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("adag_actor_params_t.device is set, but its bit ADAG_ACTOR_PARAM_DEVICE is "
                   "clear in field_mask");
    p = (adag_actor_params_t){.field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_MODULE,
                              .class_name = "crashy", .module_path = ADAG_TEST_MODULE,
                              .placement = ADAG_PLACEMENT_PROCESS};
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("adag_actor_params_t.placement is set, but its bit "
                   "ADAG_ACTOR_PARAM_PLACEMENT is clear");
    /* the same with their bits: a device actor; a process actor */
    p = (adag_actor_params_t){.field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_DEVICE,
                              .class_name = "counter", .device = "emu:0"};
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    ASSERT_OK(adag_actor_destroy(a));
    p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    cr_assert_gt(adag_actor_pid(a), 0, "a process actor has a worker");
    ASSERT_OK(adag_actor_destroy(a));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(params_mask, channel_params, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_graph_h g;
    adag_node_h x;
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    for (size_t i = 0; i < COUNT(channel_fields); i++) {
        adag_channel_params_t p = {0};
        set_field(&p, &channel_fields[i]);
        expect_refused(adag_node_channel(x, &p), "adag_channel_params_t", &channel_fields[i]);
    }
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(params_mask, tensor_params, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_graph_h g;
    adag_node_h x;
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    for (size_t i = 0; i < COUNT(tensor_fields); i++) {
        adag_tensor_params_t p = {0};
        set_field(&p, &tensor_fields[i]);
        expect_refused(adag_node_tensor(x, &p), "adag_tensor_params_t", &tensor_fields[i]);
    }
    /* shape entries past a given ndim are ignored only with the bit set */
    adag_tensor_params_t p = {.field_mask = ADAG_TENSOR_PARAM_SHAPE, .ndim = 1,
                              .shape = {4, 99}};
    ASSERT_OK(adag_node_tensor(x, &p));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(params_mask, compile_params, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
    for (size_t i = 0; i < COUNT(compile_fields); i++) {
        adag_compile_params_t p = {0};
        set_field(&p, &compile_fields[i]);
        adag_dag_h dag = NULL;
        adag_status_t st = adag_graph_compile(g, &p, &dag);
        if (dag)
            adag_dag_destroy(dag);
        expect_refused(st, "adag_compile_params_t", &compile_fields[i]);
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(params_mask, data_params, .timeout = 30)
{
    static const char *const shards[] = {"/nonexistent/adag-params-mask.bin"};
    for (size_t i = 0; i < COUNT(data_fields); i++) {
        adag_data_params_t p = {.field_mask = 0, .shards = shards, .nshards = 1,
                                .format = ADAG_DATA_FORMAT_NPY, .batch_size = 2,
                                .sample_size = 8};
        set_field(&p, &data_fields[i]);
        adag_data_source_h src = NULL;
        adag_status_t st = adag_data_open(&p, &src);
        if (src)
            adag_data_close(src);
        expect_refused(st, "adag_data_params_t", &data_fields[i]);
    }
}

Test(params_mask, data_image, .timeout = 30)
{
    for (size_t i = 0; i < COUNT(image_fields); i++) {
        adag_data_image_t img = {.height = 8, .width = 8};
        set_field(&img, &image_fields[i]);
        expect_refused(adag_data_image_check(&img), "adag_data_image_t", &image_fields[i]);
        cr_assert_eq(adag_data_image_size(&img), 0, "adag_data_image_size of a refused "
                     "transform (%s)", image_fields[i].field);
    }
    adag_data_image_t img = {.height = 8, .width = 8};
    ASSERT_OK(adag_data_image_check(&img));
}

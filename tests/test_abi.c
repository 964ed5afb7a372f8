/*
 * Suite "abi": what a program or a module built against another adag.h
 * would trip over. libadag.so and adag-worker export exactly the ADAG_API
 * functions of include/adag.h and include/adag/stats.h (libadag-data.so's,
 * those of include/adag/data.h: tests/test_abi_data.c); the public structs
 * keep their layout (pinned numbers, x86_64); modules and classes of another ABI version are refused
 * with a message; versioned structs and reserved words behave as adag.h
 * says; modules bind their adag_call_* to the worker's copy of the library.
 */
#include "abi_syms.h"
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef ADAG_TEST_SRC_DIR
#error "ADAG_TEST_SRC_DIR must be defined by the build"
#endif

#define ATEST(name) Test(abi, name, .timeout = 30)
#define MODULE_DIR ADAG_TEST_BUILD_DIR "/tests/modules/"

/* ---------------------------------------------------------------- */
/* Exported symbols                                                  */
/* ---------------------------------------------------------------- */

ATEST(library_exports_exactly_the_header_api)
{
    symset_t header = {0}, lib = {0};
    abi_runtime_api(&header);
    abi_elf_symbols(ADAG_TEST_BUILD_DIR "/libadag.so", "--defined-only", "", &lib);
    abi_assert_same_symbols(&header, &lib, "libadag.so", "adag.map");
    cr_assert(!symset_has(&lib, "adag__worker_main"));
    symset_free(&header);
    symset_free(&lib);
}

/* adag-worker exports the same API from its own copy (modules bind to it);
 * it also has libc's own symbols, so only adag_* names are compared. */
ATEST(worker_exports_exactly_the_header_api)
{
    symset_t header = {0}, worker = {0};
    abi_runtime_api(&header);
    abi_elf_symbols(ADAG_TEST_BUILD_DIR "/adag-worker", "--defined-only", "adag_", &worker);
    abi_assert_same_symbols(&header, &worker, "adag-worker", "adag.map");
    symset_free(&header);
    symset_free(&worker);
}

/* ---------------------------------------------------------------- */
/* Struct layouts                                                    */
/* ---------------------------------------------------------------- */

#define PIN_SIZE(type, n)                                                                   \
    cr_expect_eq(sizeof(type), (size_t)(n), "sizeof(%s) is %zu, pinned at %d", #type,      \
                 sizeof(type), (n))
#define PIN_AT(type, field, n)                                                              \
    cr_expect_eq(offsetof(type, field), (size_t)(n), "%s.%s is at %zu, pinned at %d", #type, \
                 #field, offsetof(type, field), (n))

/* A change here breaks every program and module built against the old
 * header: it needs a new ADAG_ABI_VERSION (or a new struct_size / a field
 * taken from reserved room), and then these numbers are updated on purpose. */
ATEST(struct_layouts_are_pinned)
{
#if !defined(__x86_64__)
    cr_skip("struct layouts are pinned for x86_64 (LP64) only");
#else
    PIN_SIZE(adag_value_t, 128);
    PIN_AT(adag_value_t, data, 0);
    PIN_AT(adag_value_t, size, 8);
    PIN_AT(adag_value_t, kind, 16);
    PIN_AT(adag_value_t, dtype, 20);
    PIN_AT(adag_value_t, ndim, 24);
    PIN_AT(adag_value_t, device, 28);
    PIN_AT(adag_value_t, shape, 32);
    PIN_AT(adag_value_t, reserved, 96);

    /* an array of them is filled by adag_dag_reserve: its stride is ABI */
    PIN_SIZE(adag_input_view_t, 144);
    PIN_AT(adag_input_view_t, data, 0);
    PIN_AT(adag_input_view_t, device_data, 8);
    PIN_AT(adag_input_view_t, stream, 16);
    PIN_AT(adag_input_view_t, capacity, 24);
    PIN_AT(adag_input_view_t, device, 32);
    PIN_AT(adag_input_view_t, flags, 36);
    PIN_AT(adag_input_view_t, dtype, 40);
    PIN_AT(adag_input_view_t, ndim, 44);
    PIN_AT(adag_input_view_t, shape, 48);
    PIN_AT(adag_input_view_t, reserved, 112);

    PIN_SIZE(adag_method_def_t, 24);
    PIN_AT(adag_method_def_t, name, 0);
    PIN_AT(adag_method_def_t, fn, 8);
    PIN_AT(adag_method_def_t, nargs, 16);
    PIN_AT(adag_method_def_t, nreturns, 20);

    PIN_SIZE(adag_class_def_t, 96); /* capturable appended */
    PIN_AT(adag_class_def_t, abi_version, 0);
    PIN_AT(adag_class_def_t, name, 8);
    PIN_AT(adag_class_def_t, state_size, 16);
    PIN_AT(adag_class_def_t, init, 24);
    PIN_AT(adag_class_def_t, fini, 32);
    PIN_AT(adag_class_def_t, methods, 40);
    PIN_AT(adag_class_def_t, nmethods, 48);
    PIN_AT(adag_class_def_t, reserved, 56);
    PIN_AT(adag_class_def_t, capturable, 88);

    PIN_SIZE(adag_dag_stats_t, 168); /* timed, bottleneck (version 3), device_bytes (4) appended */
    PIN_AT(adag_dag_stats_t, struct_size, 0);
    PIN_AT(adag_dag_stats_t, executed, 8);
    PIN_AT(adag_dag_stats_t, completed, 16);
    PIN_AT(adag_dag_stats_t, failed, 24);
    PIN_AT(adag_dag_stats_t, released, 32);
    PIN_AT(adag_dag_stats_t, max_inflight, 40);
    PIN_AT(adag_dag_stats_t, slot_capacity, 48);
    PIN_AT(adag_dag_stats_t, nchannels, 56);
    PIN_AT(adag_dag_stats_t, shm_bytes, 64);
    PIN_AT(adag_dag_stats_t, communicators, 72);
    PIN_AT(adag_dag_stats_t, shared_communicators, 76);
    PIN_AT(adag_dag_stats_t, timed, 80);
    PIN_AT(adag_dag_stats_t, bottleneck_busy, 88);
    PIN_AT(adag_dag_stats_t, bottleneck, 96);
    PIN_AT(adag_dag_stats_t, device_bytes, 160);

    PIN_SIZE(adag_actor_stats_t, 112); /* unanswered, device appended */
    PIN_AT(adag_actor_stats_t, device, 104);
    PIN_AT(adag_actor_stats_t, unanswered, 96);
    PIN_AT(adag_actor_stats_t, doing, 88);
    PIN_AT(adag_actor_stats_t, idle_ns, 80);
    PIN_AT(adag_actor_stats_t, name, 8);
    PIN_AT(adag_actor_stats_t, nops, 24);
    PIN_AT(adag_actor_stats_t, count, 32);
    PIN_AT(adag_actor_stats_t, elapsed_ns, 64);
    PIN_AT(adag_actor_stats_t, busy, 72);
    PIN_SIZE(adag_op_stats_t, 104);
    PIN_AT(adag_op_stats_t, index, 24);
    PIN_AT(adag_op_stats_t, count, 32);
    PIN_AT(adag_op_stats_t, compute_p99_ns, 64);
    PIN_AT(adag_op_stats_t, publish_ns, 96);
    PIN_SIZE(adag_channel_stats_t, 80); /* slot_bytes, host_bytes, device_bytes appended */
    PIN_AT(adag_channel_stats_t, writer, 24);
    PIN_AT(adag_channel_stats_t, bytes, 40);
    PIN_AT(adag_channel_stats_t, in_use, 52);
    PIN_AT(adag_channel_stats_t, slot_bytes, 56);
    PIN_AT(adag_channel_stats_t, host_bytes, 64);
    PIN_AT(adag_channel_stats_t, device_bytes, 72);

    PIN_SIZE(adag_channel_params_t, 24);
    PIN_AT(adag_channel_params_t, field_mask, 0);
    PIN_AT(adag_channel_params_t, max_bytes, 8);
    PIN_AT(adag_channel_params_t, slots, 16);

    PIN_SIZE(adag_runtime_params_t, 24); /* config appended (bit 1) */
    PIN_AT(adag_runtime_params_t, field_mask, 0);
    PIN_AT(adag_runtime_params_t, worker_path, 8);
    PIN_AT(adag_runtime_params_t, config, 16);

    PIN_SIZE(adag_actor_params_t, 96); /* cpus, numa, nic appended (bits 7-9) */
    PIN_AT(adag_actor_params_t, field_mask, 0);
    PIN_AT(adag_actor_params_t, class_name, 8);
    PIN_AT(adag_actor_params_t, name, 16);
    PIN_AT(adag_actor_params_t, module_path, 24);
    PIN_AT(adag_actor_params_t, placement, 32);
    PIN_AT(adag_actor_params_t, init_data, 40);
    PIN_AT(adag_actor_params_t, init_size, 48);
    PIN_AT(adag_actor_params_t, device, 56);
    PIN_AT(adag_actor_params_t, node, 64);
    PIN_AT(adag_actor_params_t, cpus, 72);
    PIN_AT(adag_actor_params_t, numa, 80);
    PIN_AT(adag_actor_params_t, nic, 88);

    PIN_SIZE(adag_actor_placement_t, 616);
    PIN_AT(adag_actor_placement_t, struct_size, 0);
    PIN_AT(adag_actor_placement_t, cpus, 8);
    PIN_AT(adag_actor_placement_t, bound, 520);
    PIN_AT(adag_actor_placement_t, numa, 524);
    PIN_AT(adag_actor_placement_t, gpu, 528);
    PIN_AT(adag_actor_placement_t, nic, 544);
    PIN_AT(adag_actor_placement_t, nic_distance, 584);
    PIN_AT(adag_actor_placement_t, this_machine, 608);

    PIN_SIZE(adag_compile_params_t, 80); /* comm_timeout_ms, driver_device, trace_spans, run_ahead, graphs appended (bits 6-10) */
    PIN_AT(adag_compile_params_t, field_mask, 0);
    PIN_AT(adag_compile_params_t, max_inflight, 8);
    PIN_AT(adag_compile_params_t, slot_capacity, 16);
    PIN_AT(adag_compile_params_t, execute_timeout_ms, 24);
    PIN_AT(adag_compile_params_t, teardown_timeout_ms, 28);
    PIN_AT(adag_compile_params_t, name, 32);
    PIN_AT(adag_compile_params_t, spin_ns, 40);
    PIN_AT(adag_compile_params_t, comm_timeout_ms, 48);
    PIN_AT(adag_compile_params_t, driver_device, 56);
    PIN_AT(adag_compile_params_t, trace_spans, 64);
    PIN_AT(adag_compile_params_t, run_ahead, 72);
    PIN_AT(adag_compile_params_t, graphs, 76);

    PIN_SIZE(adag_writer_t, 16);
    PIN_AT(adag_writer_t, fn, 0);
    PIN_AT(adag_writer_t, ctx, 8);

    PIN_SIZE(adag_status_t, 4);
    PIN_SIZE(adag_value_kind_t, 4);
    PIN_SIZE(adag_dtype_t, 4);
    PIN_SIZE(adag_placement_t, 4);
#endif
}

/* The numbers that cross the boundary as values. */
ATEST(abi_numbers_are_pinned)
{
    cr_expect_eq(ADAG_ABI_VERSION, 2u, "ADAG_ABI_VERSION changed: update this test on purpose");
    cr_expect_eq(ADAG_MAX_DIMS, 8);
    cr_expect_eq(ADAG_VALUE_BYTES, 0);
    cr_expect_eq(ADAG_VALUE_TENSOR, 1);
    /* device ids: the kind in bits 24..30, the index in bits 0..23 */
    cr_expect_eq(ADAG_DEV_HOST, 0);
    cr_expect_eq(ADAG_DEV_EMULATED, 1);
    cr_expect_eq(ADAG_DEV_CUDA, 2);
    cr_expect_eq(ADAG_DEVICE_HOST, 0);
    cr_expect_eq(ADAG_DEVICE_INDEX_MAX, 0xFFFFFF);
    cr_expect_eq(ADAG_DEVICE(ADAG_DEV_EMULATED, 0), 0x01000000);
    cr_expect_eq(ADAG_DEVICE(ADAG_DEV_CUDA, 3), 0x02000003);
    cr_expect_eq(ADAG_DEVICE(ADAG_DEV_CUDA, ADAG_DEVICE_INDEX_MAX), 0x02FFFFFF);
    cr_expect_eq(ADAG_DEVICE_KIND(0x02000003), ADAG_DEV_CUDA);
    cr_expect_eq(ADAG_DEVICE_INDEX(0x02000003), 3u);
    cr_expect_eq(ADAG_DEVICE_KIND(ADAG_DEVICE_HOST), ADAG_DEV_HOST);
    cr_expect_str_eq(adag_device_kind_name(ADAG_DEV_HOST), "host");
    cr_expect_str_eq(adag_device_kind_name(ADAG_DEV_EMULATED), "emu");
    cr_expect_str_eq(adag_device_kind_name(ADAG_DEV_CUDA), "cuda");
    cr_expect_str_eq(adag_device_kind_name((adag_device_kind_t)3), "?");
    static const int dtypes[] = {ADAG_DTYPE_BYTES, ADAG_DTYPE_U8,   ADAG_DTYPE_I8,
                                 ADAG_DTYPE_I16,   ADAG_DTYPE_I32,  ADAG_DTYPE_I64,
                                 ADAG_DTYPE_F16,   ADAG_DTYPE_BF16, ADAG_DTYPE_F32,
                                 ADAG_DTYPE_F64,   ADAG_DTYPE_BOOL};
    for (int i = 0; i < (int)(sizeof(dtypes) / sizeof(dtypes[0])); i++)
        cr_expect_eq(dtypes[i], i, "dtype number %d is %d", i, dtypes[i]);
    static const int statuses[] = {
        ADAG_OK,         ADAG_ERR_INVALID,   ADAG_ERR_NO_MEMORY,  ADAG_ERR_TIMEOUT,
        ADAG_ERR_AGAIN,  ADAG_ERR_METHOD,    ADAG_ERR_ACTOR_DIED, ADAG_ERR_TOO_LARGE,
        ADAG_ERR_IO,     ADAG_ERR_CLOSED,    ADAG_ERR_NOT_FOUND,  ADAG_ERR_BUSY,
        ADAG_ERR_PROTOCOL, ADAG_ERR_INTERNAL};
    for (int i = 0; i < (int)(sizeof(statuses) / sizeof(statuses[0])); i++)
        cr_expect_eq(statuses[i], -i, "status number %d is %d", -i, statuses[i]);
    /* a zeroed value is host bytes */
    adag_value_t zero;
    memset(&zero, 0, sizeof(zero));
    cr_expect(zero.kind == ADAG_VALUE_BYTES && zero.dtype == ADAG_DTYPE_BYTES &&
              zero.device == ADAG_DEVICE_HOST && zero.ndim == 0);
}

/* While the major is 0, a program built for another minor has other
 * struct layouts: refused, older and newer. */
ATEST(other_minor_refused_while_major_is_0)
{
    adag_runtime_h rt = NULL;
    if (ADAG_VERSION_MAJOR != 0)
        cr_skip("the library's major is not 0");
    ASSERT_ST(adag_runtime_create_version(0, ADAG_VERSION_MINOR - 1, NULL, &rt),
              ADAG_ERR_INVALID);
    char want[32];
    snprintf(want, sizeof(want), "0.%d", ADAG_VERSION_MINOR - 1);
    ASSERT_MSG_HAS(want);
    ASSERT_ST(adag_runtime_create_version(0, ADAG_VERSION_MINOR + 1, NULL, &rt),
              ADAG_ERR_INVALID);
    cr_assert_null(rt);
}

/* ---------------------------------------------------------------- */
/* Modules and classes of another ABI                                */
/* ---------------------------------------------------------------- */

/* Creating a process actor from `module` fails with `want`; no worker, fd
 * or mapping is left. */
static void refused_module(const char *module, adag_status_t want)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    p.module_path = module;
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), want);
    cr_assert_null(a);
    ASSERT_MSG_HAS(module);
    /* the runtime goes on: a good module still works */
    adag_actor_h good = h_counter(rt, ADAG_PLACEMENT_PROCESS, "good", 1);
    adag_graph_h g = h_chain_graph(rt, &good, 1, "add");
    adag_dag_h dag = h_compile(g, 0, 0);
    cr_assert_eq(h_roundtrip(dag, 41), 42);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

ATEST(module_of_a_newer_abi_is_refused)
{
    refused_module(MODULE_DIR "libbad_abi_newer.so", ADAG_ERR_INVALID);
    char want[96];
    snprintf(want, sizeof(want), "built for adag ABI version %u, this adag-worker has ABI version %u",
             ADAG_ABI_VERSION + 1, ADAG_ABI_VERSION);
    cr_assert(strstr(h_msg(), want), "message \"%s\" lacks \"%s\"", h_msg(), want);
}

ATEST(module_without_abi_version_is_refused)
{
    refused_module(MODULE_DIR "libbad_abi_missing.so", ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("has no ABI version");
    ASSERT_MSG_HAS("adag_module_abi_version");
    char want[64];
    snprintf(want, sizeof(want), "ABI version %u", ADAG_ABI_VERSION);
    ASSERT_MSG_HAS(want);
}

ATEST(module_class_without_abi_version_is_refused)
{
    refused_module(MODULE_DIR "libbad_abi_class.so", ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("abi_version 0");
    ASSERT_MSG_HAS(".abi_version = ADAG_ABI_VERSION");
}

/* adag_class_register applies the same checks (dag/exec/class.c). */
ATEST(class_register_checks_abi_and_reserved)
{
    adag_runtime_h rt = NULL;
    ASSERT_OK(adag_runtime_create(NULL, &rt));
    adag_class_def_t def = test_counter_class;
    def.abi_version = 0;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("adag_class_register");
    ASSERT_MSG_HAS("abi_version 0");
    def.abi_version = ADAG_ABI_VERSION + 1;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    char want[80];
    snprintf(want, sizeof(want), "abi_version %u, this library has ADAG_ABI_VERSION %u",
             ADAG_ABI_VERSION + 1, ADAG_ABI_VERSION);
    ASSERT_MSG_HAS(want);
    def = test_counter_class;
    def.reserved[2] = 1;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("reserved[2]");
    def = test_counter_class;
    def.nmethods = ADAG_MAX_METHODS + 1;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("ADAG_MAX_METHODS");
    adag_method_def_t twice[2] = {test_counter_class.methods[0], test_counter_class.methods[0]};
    def = test_counter_class;
    def.methods = twice;
    def.nmethods = 2;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("twice");
    /* nothing was registered by the refused calls */
    ASSERT_OK(adag_class_register(rt, &test_counter_class));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---------------------------------------------------------------- */
/* Modules bind to the worker's copy                                 */
/* ---------------------------------------------------------------- */

/* Runs add(x), call_lib() and arg_value(x) on one actor; returns the path
 * call_lib reported (malloc'd) and checks the other two. */
static char *run_abi_probe(adag_runtime_h rt, adag_actor_h a)
{
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0);
    adag_node_h outs[3] = {h_bind1(g, a, "add", in), h_bind(g, a, "call_lib", NULL, 0),
                           h_bind1(g, a, "arg_value", in)};
    ASSERT_OK(adag_graph_output(g, outs, 3));
    adag_dag_h dag = h_compile(g, 0, 0);
    int64_t x = 41;
    adag_value_t in_v = h_i64v(&x), out[3];
    memset(out, 0xff, sizeof(out));
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &in_v, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, out, 3, 10000));
    cr_assert_eq(h_val_i64(out[0]), 42);
    /* get and adag_call_arg set every field, not just data and size */
    static const adag_value_t zero_tail;
    for (int i = 0; i < 3; i++)
        cr_assert(out[i].kind == ADAG_VALUE_BYTES &&
                      memcmp((const char *)&out[i] + offsetof(adag_value_t, dtype),
                             (const char *)&zero_tail + offsetof(adag_value_t, dtype),
                             sizeof(adag_value_t) - offsetof(adag_value_t, dtype)) == 0,
                  "adag_dag_get left fields of output %d unset", i);
    adag_value_t seen;
    cr_assert_eq(out[2].size, sizeof(seen));
    memcpy(&seen, out[2].data, sizeof(seen));
    cr_assert_eq(seen.size, sizeof(x));
    cr_assert(seen.kind == ADAG_VALUE_BYTES &&
                  memcmp((const char *)&seen + offsetof(adag_value_t, dtype),
                         (const char *)&zero_tail + offsetof(adag_value_t, dtype),
                         sizeof(adag_value_t) - offsetof(adag_value_t, dtype)) == 0,
              "adag_call_arg left fields unset (dtype %d ndim %u device %d)", (int)seen.dtype,
              seen.ndim, (int)seen.device);
    cr_assert(out[1].size > 1 && ((const char *)out[1].data)[out[1].size - 1] == '\0');
    char *path = strdup(out[1].data);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_destroy(dag));
    return path;
}

static void binds_to(const char *module, const char *want)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a;
    if (module) {
        adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
        p.module_path = module;
        p.field_mask |= ADAG_ACTOR_PARAM_INIT;
        int64_t one = 1;
        p.init_data = &one;
        p.init_size = sizeof(one);
        ASSERT_OK(adag_actor_create(rt, &p, &a));
    } else {
        a = h_counter(rt, ADAG_PLACEMENT_THREAD, NULL, 1);
    }
    char *path = run_abi_probe(rt, a);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    cr_assert(strncmp(base, want, strlen(want)) == 0,
              "adag_call_arg of %s binds to %s, expected %s", module ? module : "a thread actor",
              path, want);
    free(path);
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* In the driver a class's calls go to libadag.so; in a worker to the
 * worker's own copy, whether the module was linked with -ladag or not (a
 * module linked with it still binds to the worker: the executable comes
 * first in the lookup scope). */
ATEST(thread_actor_calls_bind_to_libadag)
{
    binds_to(NULL, "libadag.so");
}

ATEST(module_calls_bind_to_the_worker)
{
    binds_to(ADAG_TEST_MODULE, "adag-worker");
}

ATEST(module_linked_with_libadag_binds_to_the_worker)
{
    binds_to(MODULE_DIR "libtest_actors_linked.so", "adag-worker");
}

/* ---------------------------------------------------------------- */
/* adag_dag_stats_t.struct_size                                      */
/* ---------------------------------------------------------------- */

ATEST(stats_struct_size)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, NULL, 0);
    adag_dag_h dag = h_compile(h_chain_graph(rt, &a, 1, "add"), 2, 0);
    cr_assert_eq(h_roundtrip(dag, 1), 1);

    adag_dag_stats_t st;
    memset(&st, 0, sizeof(st));
    ASSERT_ST(adag_dag_stats(dag, &st), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("struct_size is 0");
    size_t v1 = offsetof(adag_dag_stats_t, shm_bytes) + sizeof(size_t);
    st.struct_size = v1 - 1; /* below the first version */
    ASSERT_ST(adag_dag_stats(dag, &st), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("struct_size");
    /* a program built against the first header: its fields only */
    memset(&st, 0xab, sizeof(st));
    st.struct_size = v1;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.struct_size, v1);
    cr_assert_eq(st.executed, 1);
    cr_assert_eq(st.communicators, 0xababababu, "a field past its struct_size was written");

    /* a program built against a newer header: a larger struct; the library
     * fills its own size and says so, and leaves the rest alone */
    struct {
        adag_dag_stats_t stats;
        uint64_t later_fields[4];
    } big;
    memset(&big, 0xab, sizeof(big));
    big.stats.struct_size = sizeof(big);
    ASSERT_OK(adag_dag_stats(dag, &big.stats));
    cr_assert_eq(big.stats.struct_size, sizeof(adag_dag_stats_t));
    cr_assert_eq(big.stats.executed, 1);
    cr_assert_eq(big.stats.max_inflight, 2);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(big.later_fields[i], 0xababababababababull, "byte past the struct written");

    adag_dag_stats_t exact = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &exact));
    cr_assert_eq(exact.struct_size, sizeof(exact));
    cr_assert_eq(exact.completed, 1);
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---------------------------------------------------------------- */
/* adag_value_t inputs                                               */
/* ---------------------------------------------------------------- */

ATEST(value_fields_checked_by_execute)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, NULL, 0);
    adag_dag_h dag = h_compile(h_chain_graph(rt, &a, 1, "add"), 2, 0);
    int64_t x = 5;
    adag_ref_t ref;
    adag_value_t v;

    /* a tensor needs a tensor dtype and a shape whose bytes are its size
     * (tests/test_tensor_checks.c has every case); a host tensor is accepted */
    v = h_i64v(&x);
    v.kind = ADAG_VALUE_TENSOR;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("input 0: a tensor whose dtype 0 (bytes) is not a tensor dtype");
    v.dtype = ADAG_DTYPE_I64;
    v.ndim = 1;
    v.shape[0] = 2;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("size is 8 bytes but a i64[2] tensor is 16 bytes");
    v.shape[0] = 1;
    v.device = ADAG_DEVICE(ADAG_DEV_EMULATED, 0);
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("a tensor on device emu:0");
    v.device = ADAG_DEVICE_HOST;
    adag_value_t got;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, &got, 1, 10000));
    cr_assert_eq(h_val_i64(got), 5); /* add read the i64[1] tensor's 8 bytes */
    ASSERT_OK(adag_dag_release(dag, ref));
    v = h_i64v(&x);
    v.kind = (adag_value_kind_t)7;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("unknown value kind 7");
    v = h_i64v(&x);
    v.reserved[3] = 1;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("input 0: reserved[3]");
    v = h_i64v(&x);
    v.ndim = ADAG_MAX_DIMS + 1;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("ndim 9 exceeds ADAG_MAX_DIMS");
    v = h_i64v(&x);
    v.ndim = 1;
    v.shape[0] = 8;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("ndim 1");
    v = h_i64v(&x);
    v.dtype = ADAG_DTYPE_I64;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("dtype 5");
    v = h_i64v(&x);
    v.device = ADAG_DEVICE(ADAG_DEV_EMULATED, 0);
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("and device emu:0");

    /* a shape past ndim (0) is ignored; old initializers still build bytes */
    v = h_i64v(&x);
    v.shape[7] = 3;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    ASSERT_OK(adag_dag_release(dag, ref));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
    adag_value_t positional = {&x, sizeof(x), ADAG_VALUE_BYTES};
#pragma GCC diagnostic pop
    adag_value_t designated = {.data = &x, .size = sizeof(x)};
    cr_assert_eq(h_roundtrip(dag, 6), 6);
    adag_value_t out;
    ASSERT_OK(adag_dag_execute(dag, &positional, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
    cr_assert_eq(h_val_i64(out), 5);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_execute(dag, &designated, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
    cr_assert_eq(h_val_i64(out), 5);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}

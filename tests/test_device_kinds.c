/*
 * Suite "device_kinds": device ids that say kind and index
 * (ADAG_DEVICE(ADAG_DEV_EMULATED, 1) is "emu:1", ADAG_DEVICE_HOST host
 * memory). Values carry them through execute/get and the zero-copy views
 * (thread and process actors); DOT, stats, traces and messages print the
 * names; emulated and CUDA devices are named apart in one runtime (here a
 * "cuda:0" actor fails to be created where CUDA has no device, and the
 * "emu:0" actor next to it still runs; tests/gpu/test_cuda_dag.c mixes the
 * two where a GPU exists); malformed device strings are refused; a remote
 * actor's agent is its `node`.
 */
#include "gpu_stage.h"
#include "helpers.h"

#include <adag/stats.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_ELEMS 64
#define EMU(i) ADAG_DEVICE(ADAG_DEV_EMULATED, (i))

/* A host f32 tensor of N_ELEMS at x, said to live on `device`. */
static adag_value_t tensor(float *x, int32_t device)
{
    adag_value_t v = {.data = x, .size = N_ELEMS * sizeof(float), .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_F32, .ndim = 1, .shape = {N_ELEMS}, .device = device};
    return v;
}

/* input -> s1 (emu:1) -> s2 (emu:2) -> (tensor, info), compiled with the
 * driver's device `driver_device` (NULL: none). */
static adag_dag_h two_stages(adag_runtime_h rt, adag_placement_t pl, adag_actor_h *a,
                             const char *driver_device, uint64_t trace_spans)
{
    a[0] = h_gpu_stage(rt, pl, "s1", "emu:1", 1, 0);
    a[1] = h_gpu_stage(rt, pl, "s2", "emu:2", 2, 0);
    adag_compile_params_t cp = h_compile_params(2, N_ELEMS * 8, 0, 0);
    if (driver_device) {
        cp.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
        cp.driver_device = driver_device;
    }
    if (trace_spans) {
        cp.field_mask |= ADAG_COMPILE_PARAM_TRACE;
        cp.trace_spans = trace_spans;
    }
    return h_gpu_chain(rt, a, 2, &cp);
}

/* ---------------------------------------------------------------- */
/* The id                                                            */
/* ---------------------------------------------------------------- */

/* Every kind and index comes back out of its id; ids of different kinds
 * differ (emu:i is not cuda:i); host memory is 0 (a zeroed value). */
Test(device_kinds, ids_take_apart)
{
    const adag_device_kind_t kinds[] = {ADAG_DEV_EMULATED, ADAG_DEV_CUDA};
    const unsigned idx[] = {0, 1, 7, 255, 256, 65536, ADAG_DEVICE_INDEX_MAX};
    for (unsigned k = 0; k < 2; k++)
        for (unsigned i = 0; i < sizeof(idx) / sizeof(idx[0]); i++) {
            int32_t d = ADAG_DEVICE(kinds[k], idx[i]);
            cr_assert(d > 0, "%s:%u: id %d is not positive", adag_device_kind_name(kinds[k]),
                      idx[i], d);
            cr_assert_eq(ADAG_DEVICE_KIND(d), kinds[k], "%s:%u: kind %d",
                         adag_device_kind_name(kinds[k]), idx[i], (int)ADAG_DEVICE_KIND(d));
            cr_assert_eq(ADAG_DEVICE_INDEX(d), idx[i], "%s:%u: index %u",
                         adag_device_kind_name(kinds[k]), idx[i], ADAG_DEVICE_INDEX(d));
            cr_assert_neq(d, ADAG_DEVICE(kinds[1 - k], idx[i]), "%u: emu and cuda ids collide",
                          idx[i]);
            cr_assert_neq(d, ADAG_DEVICE_HOST);
        }
    adag_value_t zero = {0};
    cr_assert_eq(zero.device, ADAG_DEVICE_HOST);
    cr_assert_eq(ADAG_DEVICE_KIND(ADAG_DEVICE_HOST), ADAG_DEV_HOST);
    cr_assert_str_eq(adag_device_kind_name(ADAG_DEVICE_KIND(EMU(3))), "emu");
    cr_assert_str_eq(adag_device_kind_name(ADAG_DEVICE_KIND(ADAG_DEVICE(ADAG_DEV_CUDA, 3))),
                     "cuda");
}

/* ---------------------------------------------------------------- */
/* Values                                                            */
/* ---------------------------------------------------------------- */

/* With the driver's device emu:3: get's tensor is on emu:3 (kind emulated,
 * index 3), its info bytes in host memory, and what the last stage saw as
 * its device (adag_call_device; the argument's own device, which the stage
 * checks against it) is emu:2; an input on emu:3 is taken, one on cuda:3
 * (same index, other kind) refused naming both; a zero-copy view's device
 * is emu:3. Without a driver device, the tensor reaches the driver in host
 * memory. */
static void values_carry_kind_and_index(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2], b[2];
    adag_dag_h dag = two_stages(rt, pl, a, "emu:3", 0);
    static float x[N_ELEMS];
    for (unsigned i = 0; i < N_ELEMS; i++)
        x[i] = (float)i;
    for (int k = 0; k < 2; k++) {
        adag_value_t in = tensor(x, k ? EMU(3) : ADAG_DEVICE_HOST), out[2];
        adag_ref_t ref;
        ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
        ASSERT_OK(adag_dag_get(dag, ref, out, 2, 20000));
        cr_assert_eq(out[0].device, EMU(3), "output on device 0x%x, want emu:3 (0x%x)",
                     (unsigned)out[0].device, (unsigned)EMU(3));
        cr_assert(ADAG_DEVICE_KIND(out[0].device) == ADAG_DEV_EMULATED &&
                  ADAG_DEVICE_INDEX(out[0].device) == 3);
        cr_assert_eq(out[1].device, ADAG_DEVICE_HOST);
        stage_info_t info;
        cr_assert_eq(out[1].size, sizeof(info));
        memcpy(&info, out[1].data, sizeof(info));
        cr_assert_eq(info.device, EMU(2), "s2 saw device 0x%x, want emu:2 (0x%x)",
                     (unsigned)info.device, (unsigned)EMU(2));
        ASSERT_OK(adag_dag_stream_sync(dag, 20000));
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    adag_value_t in = tensor(x, ADAG_DEVICE(ADAG_DEV_CUDA, 3));
    adag_ref_t ref;
    ASSERT_ST(adag_dag_execute(dag, &in, 1, 0, &ref), ADAG_ERR_INVALID);
    cr_assert(strstr(h_msg(), "a tensor on device cuda:3") &&
                  strstr(h_msg(), "the driver's device emu:3"),
              "%s", h_msg());
    adag_input_view_t view;
    ASSERT_OK(adag_dag_reserve(dag, 0, &view, 1, &ref));
    cr_assert_eq(view.device, EMU(3), "the view's device 0x%x, want emu:3",
                 (unsigned)view.device);
    ASSERT_OK(adag_dag_cancel(dag, ref));
    ASSERT_OK(adag_dag_destroy(dag));
    for (int s = 0; s < 2; s++)
        ASSERT_OK(adag_actor_destroy(a[s]));

    dag = two_stages(rt, pl, b, NULL, 0);
    adag_value_t out[2];
    in = tensor(x, ADAG_DEVICE_HOST);
    ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, out, 2, 20000));
    cr_assert_eq(out[0].device, ADAG_DEVICE_HOST, "without a driver device: device 0x%x",
                 (unsigned)out[0].device);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_destroy(dag));
    for (int s = 0; s < 2; s++)
        ASSERT_OK(adag_actor_destroy(b[s]));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(device_kinds, values_carry_kind_and_index, 90)

/* ---------------------------------------------------------------- */
/* Names                                                             */
/* ---------------------------------------------------------------- */

/* DOT labels, the stats (the id and its printed table) and the trace's
 * track names say "emu:1" and "emu:2". */
Test(device_kinds, names_in_dot_stats_and_trace, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2];
    adag_dag_h dag = two_stages(rt, ADAG_PLACEMENT_PROCESS, a, NULL, 1u << 20);
    char *dot = h_dot(dag);
    cr_assert(strstr(dot, "s1 (process, device emu:1)") &&
                  strstr(dot, "s2 (process, device emu:2)") &&
                  strstr(dot, "emu_ipc peer copy emu:1 -> emu:2"),
              "the DOT does not name the devices emu:1 and emu:2:\n%s", dot);
    free(dot);
    static float x[N_ELEMS];
    adag_value_t in = tensor(x, ADAG_DEVICE_HOST), out[2];
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, out, 2, 20000));
    ASSERT_OK(adag_dag_release(dag, ref));

    adag_stats_h s;
    ASSERT_OK(adag_dag_stats_take(dag, &s));
    cr_assert_eq(adag_stats_nactors(s), 2);
    for (unsigned i = 0; i < 2; i++) {
        adag_actor_stats_t as = ADAG_ACTOR_STATS_INIT;
        ASSERT_OK(adag_stats_actor(s, i, &as));
        int32_t want = strcmp(as.name, "s1") == 0 ? EMU(1) : EMU(2);
        cr_assert_eq(as.device, want, "%s: stats device 0x%x, want 0x%x", as.name,
                     (unsigned)as.device, (unsigned)want);
    }
    h_text_t t = {0};
    ASSERT_OK(adag_stats_print(s, h_text_writer(&t)));
    cr_assert(t.text && strstr(t.text, "emu:1") && strstr(t.text, "emu:2"),
              "the stats table does not name the devices:\n%s", t.text ? t.text : "");
    free(t.text);
    adag_stats_free(s);

    usleep(100 * 1000); /* the loops' last records written (h_trace_check) */
    h_text_t tr = {0};
    ASSERT_OK(adag_dag_write_trace(dag, h_text_writer(&tr)));
    cr_assert(tr.text && strstr(tr.text, "actor s1 (process, pid ") &&
                  strstr(tr.text, ", device emu:1)") && strstr(tr.text, ", device emu:2)"),
              "the trace's track names do not name the devices: %.2000s",
              tr.text ? tr.text : "");
    free(tr.text);
    ASSERT_OK(adag_dag_destroy(dag));
    for (int i = 0; i < 2; i++)
        ASSERT_OK(adag_actor_destroy(a[i]));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---------------------------------------------------------------- */
/* Two kinds in one runtime                                          */
/* ---------------------------------------------------------------- */

/* One runtime takes an actor on "cuda:0" and one on "emu:0". Without a
 * CUDA device the cuda actor's creation fails saying so (and naming
 * cuda:0), and the emu actor next to it still runs; with one, a tensor
 * from the emu actor to the cuda actor is refused at compile naming both
 * devices. */
Test(device_kinds, emu_and_cuda_in_one_runtime, .timeout = 60)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    unsigned ncuda = 0;
    ASSERT_OK(adag_device_count("cuda", &ncuda));
    adag_actor_h a[2] = {h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "on_emu", "emu:0", 1, 0), NULL};
    adag_actor_params_t p = h_actor_params_init("gpu_stage", ADAG_PLACEMENT_THREAD, "on_cuda",
                                                (int[2]){2, 0}, 2 * sizeof(int));
    p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
    p.device = "cuda:0";
    adag_status_t st = adag_actor_create(rt, &p, &a[1]);
    if (ncuda == 0) {
        cr_assert_eq(st, ADAG_ERR_NOT_FOUND, "a cuda:0 actor without CUDA: %s: %s",
                     adag_status_str(st), adag_last_error());
        cr_assert(strstr(adag_last_error(), "device cuda:0 does not exist here (cuda: 0 devices"),
                  "%s", adag_last_error());
        cr_assert_null(a[1]);
    } else {
        ASSERT_OK(st);
        adag_compile_params_t cp = h_compile_params(2, N_ELEMS * 8, 0, 0);
        adag_dag_h bad = NULL;
        ASSERT_ST(h_gpu_chain_via(rt, a, 2, &cp, ADAG_TRANSPORT_AUTO, &bad), ADAG_ERR_INVALID);
        cr_assert(strstr(h_msg(), "(emu:0) to on_cuda (cuda:0)") &&
                      strstr(h_msg(), "cannot move between device backends"),
                  "%s", h_msg());
        ASSERT_OK(adag_actor_destroy(a[1]));
    }
    /* the emu actor runs, in the runtime that has seen both kinds */
    adag_compile_params_t cp = h_compile_params(2, N_ELEMS * 8, 0, 0);
    adag_dag_h dag = h_gpu_chain(rt, a, 1, &cp);
    static float x[N_ELEMS];
    for (unsigned i = 0; i < N_ELEMS; i++)
        x[i] = (float)i;
    adag_value_t in = tensor(x, ADAG_DEVICE_HOST), out[2];
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, out, 2, 20000));
    stage_info_t info;
    memcpy(&info, out[1].data, sizeof(info));
    cr_assert_eq(info.device, EMU(0));
    for (unsigned i = 0; i < N_ELEMS; i++) {
        float want;
        stage_apply(ADAG_DTYPE_F32, 1, &x[i], &want);
        cr_assert(memcmp(&want, (const float *)out[0].data + i, sizeof(want)) == 0,
                  "element %u differs from the C reference", i);
    }
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_actor_destroy(a[0]));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* ---------------------------------------------------------------- */
/* Refusals                                                          */
/* ---------------------------------------------------------------- */

/* Malformed device strings, unknown backends (the emulated device's old
 * name "host" among them) and indices past ADAG_DEVICE_INDEX_MAX are
 * refused by adag_actor_create with a message quoting the string; no
 * actor is left. */
Test(device_kinds, bad_device_strings_are_refused, .timeout = 60)
{
    static const struct {
        const char *spec;
        adag_status_t st;
        const char *msg;
    } cases[] = {
        {"emu:x", ADAG_ERR_INVALID, "device \"emu:x\" is not \"<backend>:<index>\""},
        {"cuda:-1", ADAG_ERR_INVALID, "device \"cuda:-1\" is not \"<backend>:<index>\""},
        {"emu:", ADAG_ERR_INVALID, "device \"emu:\" is not"},
        {"emu", ADAG_ERR_INVALID, "device \"emu\" is not"},
        {"emu:16777216", ADAG_ERR_INVALID, "device \"emu:16777216\": the index must be "
                                           "0..16777215"},
        {"tpu:0", ADAG_ERR_NOT_FOUND, "device \"tpu:0\": unknown backend \"tpu\" (known: emu, "
                                      "cuda)"},
        {"host:0", ADAG_ERR_NOT_FOUND, "device \"host:0\": unknown backend \"host\""},
    };
    adag_runtime_h rt = h_runtime();
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        adag_actor_params_t p = h_actor_params_init("gpu_stage", ADAG_PLACEMENT_THREAD, "bad",
                                                    (int[2]){1, 0}, 2 * sizeof(int));
        adag_class_register(rt, &test_gpu_stage_class); /* once; later calls say it exists */
        p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
        p.device = cases[i].spec;
        adag_actor_h a = NULL;
        adag_status_t st = adag_actor_create(rt, &p, &a);
        cr_assert_eq(st, cases[i].st, "\"%s\": %s, want %s (%s)", cases[i].spec,
                     adag_status_str(st), adag_status_str(cases[i].st), adag_last_error());
        cr_assert(strstr(adag_last_error(), cases[i].msg), "\"%s\": message \"%s\" lacks \"%s\"",
                  cases[i].spec, adag_last_error(), cases[i].msg);
        cr_assert_null(a);
    }
    /* the name is free again: nothing of the refused actors stayed */
    adag_actor_h ok = h_gpu_stage(rt, ADAG_PLACEMENT_THREAD, "bad", "emu:3", 1, 0);
    ASSERT_OK(adag_actor_destroy(ok));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* A remote actor's agent is its node (ADAG_ACTOR_PARAM_NODE): required
 * for ADAG_PLACEMENT_REMOTE, refused for other placements. */
Test(device_kinds, remote_actor_needs_a_node, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params_init("gpu_stage", ADAG_PLACEMENT_REMOTE, "far",
                                                (int[2]){1, 0}, 2 * sizeof(int));
    p.field_mask |= ADAG_ACTOR_PARAM_MODULE;
    p.module_path = "/nonexistent.so";
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    cr_assert(strstr(h_msg(), "remote actor far needs node (ADAG_ACTOR_PARAM_NODE)"), "%s",
              h_msg());
    p.placement = ADAG_PLACEMENT_THREAD;
    p.field_mask |= ADAG_ACTOR_PARAM_NODE;
    p.node = "127.0.0.1:1";
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    cr_assert(strstr(h_msg(), "node is set (ADAG_ACTOR_PARAM_NODE) but the placement is not "
                              "ADAG_PLACEMENT_REMOTE"),
              "%s", h_msg());
    cr_assert_null(a);
    ASSERT_OK(adag_runtime_destroy(rt));
}

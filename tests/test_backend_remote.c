/*
 * Device tensors between nodes (network namespaces, tests/netns_rig.h):
 * the ucx backend carries them staged through host memory, so a chain of
 * device-bound actors on emulated devices spans hosts and every element
 * comes back bit-exact. The driver runs in host h0, agents in h1 and h2.
 * Where namespaces cannot be made each test says "skipped: <reason>".
 */
#include "builders.h"
#include "gpu_stage.h"
#include "helpers.h"
#include "netns_rig.h"
#include "remote_rig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN "a token for the device tensors between nodes"

typedef struct {
    h_netns_t hosts;
    h_agent_t ag[H_NETNS_MAX]; /* ag[i] in hosts.ns[i], i >= 1 */
    unsigned nagents;
    adag_runtime_h rt;
} nodes_t;

static nodes_t *current; /* torn down after a failed assertion too */

static void nodes_fini(void)
{
    if (!current)
        return;
    for (unsigned i = 1; i <= current->nagents; i++)
        h_agent_cleanup(&current->ag[i]);
    h_netns_down(&current->hosts);
    current = NULL;
}

TestSuite(backend_remote, .fini = nodes_fini);

/* The driver in h0, an agent in each of h1 .. h<nagents>; skips where
 * namespaces cannot be made. */
static void nodes_up(nodes_t *w, unsigned nagents)
{
    char why[256];
    memset(w, 0, sizeof(*w));
    if (h_netns_up(&w->hosts, nagents + 1, why, sizeof(why)) != 0)
        cr_skip_test("skipped: %s", why);
    current = w;
    w->nagents = nagents;
    h_agents_in_hosts(&w->hosts, w->ag, nagents, TOKEN);
    unsetenv("ADAG_TOKEN");
    setenv("ADAG_TOKEN_FILE", w->ag[1].token, 1);
    w->rt = h_runtime();
}

static void nodes_down(nodes_t *w)
{
    ASSERT_OK(adag_runtime_destroy(w->rt));
    nodes_fini();
}

/* A gpu_stage on host `host` of w on `device`. */
static adag_actor_h stage_on(nodes_t *w, unsigned host, const char *name, int stage,
                             const char *device)
{
    int init[2] = {stage, 0};
    adag_actor_params_t p = h_actor_params_init("gpu_stage", ADAG_PLACEMENT_REMOTE, name, init,
                                                sizeof(init));
    p.field_mask |= ADAG_ACTOR_PARAM_MODULE | ADAG_ACTOR_PARAM_NODE | ADAG_ACTOR_PARAM_DEVICE;
    p.module_path = ADAG_TEST_MODULE;
    p.node = w->ag[host].addr;
    p.device = device;
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(w->rt, &p, &a));
    return a;
}

/* Runs n-element i32 tensors through dag (stages[0..nstages) applied in
 * order), a few sizes up to a rendezvous-sized one, 3 in flight; every
 * element checked; the last stage saw its argument on `last_device`. */
static void check_chain(adag_dag_h dag, const int *stages, unsigned nstages, int32_t last_device)
{
    static const unsigned sizes[] = {1, 1000, 70000, 3, 262144};
    enum { NSIZES = sizeof(sizes) / sizeof(sizes[0]), ROUNDS = 3 };
    int32_t *in[NSIZES * ROUNDS];
    adag_ref_t refs[NSIZES * ROUNDS];
    for (unsigned e = 0; e < NSIZES * ROUNDS; e++) {
        unsigned n = sizes[e % NSIZES];
        in[e] = malloc(n * sizeof(int32_t));
        cr_assert(in[e]);
        for (unsigned i = 0; i < n; i++)
            in[e][i] = (int32_t)(i * 2654435761u + e * 7919u); /* every bit pattern differs */
    }
    for (unsigned e = 0; e < NSIZES * ROUNDS + 3; e++) {
        if (e >= 3) {
            unsigned k = e - 3, n = sizes[k % NSIZES];
            adag_value_t out[2];
            ASSERT_OK(adag_dag_get(dag, refs[k], out, 2, 30000));
            cr_assert_eq(out[0].kind, ADAG_VALUE_TENSOR, "execution %u", k);
            cr_assert_eq(out[0].size, n * sizeof(int32_t), "execution %u", k);
            for (unsigned i = 0; i < n; i++) {
                int32_t want = in[k][i], got;
                for (unsigned s = 0; s < nstages; s++)
                    stage_apply(ADAG_DTYPE_I32, stages[s], &want, &want);
                memcpy(&got, (const char *)out[0].data + 4 * i, 4);
                cr_assert_eq(got, want, "execution %u (%u elements), element %u", k, n, i);
            }
            stage_info_t info;
            cr_assert_eq(out[1].size, sizeof(info));
            memcpy(&info, out[1].data, sizeof(info));
            cr_assert_eq(info.device, last_device, "the last stage ran on %d", info.device);
            ASSERT_OK(adag_dag_release(dag, refs[k]));
        }
        if (e < NSIZES * ROUNDS) {
            unsigned n = sizes[e % NSIZES];
            adag_value_t v = {.data = in[e], .size = n * sizeof(int32_t),
                              .kind = ADAG_VALUE_TENSOR, .dtype = ADAG_DTYPE_I32, .ndim = 1,
                              .shape = {n}};
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &refs[e]));
        }
    }
    for (unsigned e = 0; e < NSIZES * ROUNDS; e++)
        free(in[e]);
}

/* emu:0 in h0 (a process actor) -> emu:1 in h1 -> the driver; the driver
 * -> emu:0 in h1 -> emu:1 in h2 -> the driver: device values cross every
 * way (device to device, host to device, device to host), each over ucx,
 * staged through host memory, and come back bit-exact. */
Test(backend_remote, device_tensors_across_nodes, .timeout = 180)
{
    static nodes_t w;
    nodes_up(&w, 2);
    adag_compile_params_t cp = h_compile_params(4, 1 << 20, 0, 0);

    adag_actor_h a[2] = {h_gpu_stage(w.rt, ADAG_PLACEMENT_PROCESS, "near", "emu:0", 1, 0),
                         stage_on(&w, 1, "far", 2, "emu:1")};
    adag_dag_h dag = NULL;
    ASSERT_OK(h_gpu_chain_via(w.rt, a, 2, &cp, ADAG_TRANSPORT_AUTO, &dag));
    char *dot = h_dot(dag);
    cr_assert(strstr(dot, "ucx\\nstaged through host memory: emu:0 -> emu:1"),
              "near -> far is not staged over ucx:\n%s", dot);
    cr_assert(strstr(dot, "ucx\\nstaged through host memory: emu:1 -> host memory"),
              "far -> the driver is not staged over ucx:\n%s", dot);
    free(dot);
    static const int near_far[] = {1, 2};
    check_chain(dag, near_far, 2, ADAG_DEVICE(ADAG_DEV_EMULATED, 1));
    ASSERT_OK(adag_dag_destroy(dag));

    adag_actor_h b[2] = {stage_on(&w, 1, "f1", 3, "emu:0"), stage_on(&w, 2, "f2", 4, "emu:1")};
    ASSERT_OK(h_gpu_chain_via(w.rt, b, 2, &cp, ADAG_TRANSPORT_AUTO, &dag));
    dot = h_dot(dag);
    cr_assert(strstr(dot, "staged through host memory: host memory -> emu:0"),
              "the driver -> f1 is not staged over ucx:\n%s", dot);
    free(dot);
    static const int f1_f2[] = {3, 4};
    check_chain(dag, f1_f2, 2, ADAG_DEVICE(ADAG_DEV_EMULATED, 1));
    ASSERT_OK(adag_dag_destroy(dag));
    for (unsigned i = 0; i < 2; i++) {
        ASSERT_OK(adag_actor_destroy(a[i]));
        ASSERT_OK(adag_actor_destroy(b[i]));
    }
    nodes_down(&w);
}

/* A device tensor declared to stay in device memory cannot cross nodes:
 * compile names the channel, both endpoints with their devices and
 * nodes, and why each backend refused. */
Test(backend_remote, ipc_tensor_across_nodes_refused, .timeout = 120)
{
    static nodes_t w;
    nodes_up(&w, 1);
    adag_compile_params_t cp = h_compile_params(2, 4096, 0, 0);
    adag_actor_h a[2] = {h_gpu_stage(w.rt, ADAG_PLACEMENT_PROCESS, "near", "emu:0", 1, 0),
                         stage_on(&w, 1, "far", 2, "emu:1")};
    adag_dag_h dag = NULL;
    ASSERT_ST(h_gpu_chain_via(w.rt, a, 2, &cp, ADAG_TRANSPORT_IPC, &dag), ADAG_ERR_INVALID);
    cr_assert_null(dag);
    char far_at[96];
    snprintf(far_at, sizeof(far_at), "far (emu:1 on %s)", w.ag[1].addr);
    ASSERT_MSG_HAS("channel near.step[0]: near (emu:0 on the driver's node) -> ");
    ASSERT_MSG_HAS(far_at);
    ASSERT_MSG_HAS("device: its endpoints are on more than one node");
    ASSERT_MSG_HAS("ucx: it stages device values through host memory, and the tensor's "
                   "transport is ADAG_TRANSPORT_IPC");
    for (unsigned i = 0; i < 2; i++)
        ASSERT_OK(adag_actor_destroy(a[i]));
    nodes_down(&w);
}

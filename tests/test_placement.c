/*
 * Placement on this machine: actors bound to the CPUs asked for (or those
 * of their GPU's NUMA node), their memory and the slots they write on
 * their node, the refusals, and the wait policy each loop gets. The
 * decisions on machines that are not here (XML topologies) are in
 * tests/unit_topo.c; these tests bind for real (tests/modules/probe_actors.c
 * reports from inside the actor).
 */
#include "helpers.h"
#include "probe_actors.h"

#include <adag/data.h>

#include <linux/mempolicy.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOPO_FILE(f) ADAG_TEST_SRC_DIR "/tests/topo/" f

/* An actor of class probe; returns what adag_actor_create returned. */
static adag_status_t probe(adag_runtime_h rt, adag_placement_t pl, const char *name,
                           const char *device, const char *cpus, int numa, const char *nic,
                           adag_actor_h *out)
{
    adag_actor_params_t p = h_actor_params_init("probe", pl, name, NULL, 0);
    if (device) {
        p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
        p.device = device;
    }
    if (cpus) {
        p.field_mask |= ADAG_ACTOR_PARAM_CPUS;
        p.cpus = cpus;
    }
    if (numa >= 0) {
        p.field_mask |= ADAG_ACTOR_PARAM_NUMA;
        p.numa = numa;
    }
    if (nic) {
        p.field_mask |= ADAG_ACTOR_PARAM_NIC;
        p.nic = nic;
    }
    *out = NULL;
    return adag_actor_create(rt, &p, out);
}

static adag_runtime_h runtime(void)
{
    adag_runtime_h rt = h_runtime();
    ASSERT_OK(adag_class_register(rt, &test_probe_class));
    return rt;
}

static int allowed_cpus(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

#define NEED_TWO_CPUS()                                                                   \
    do {                                                                                  \
        if (allowed_cpus() < 2) {                                                         \
            printf("skipped: needs 2 CPUs this process may use (has %d)\n", allowed_cpus()); \
            cr_skip_test("needs 2 CPUs");                                                 \
        }                                                                                 \
    } while (0)

/* What a.where() says from inside the actor's loop: "cpus=... mode=... node=..." */
static void where(adag_runtime_h rt, adag_actor_h a, char *out, size_t len)
{
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h outs[2];
    outs[0] = h_bind1(g, a, "pass", h_input(g, 0));
    outs[1] = h_bind(g, a, "where", NULL, 0);
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_dag_h dag = h_compile(g, 2, 4096);
    int64_t x = 5;
    adag_value_t in = h_i64v(&x), res[2];
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, res, 2, 10000));
    cr_assert_eq(h_val_i64(res[0]), 5);
    snprintf(out, len, "%s", (const char *)res[1].data);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
}

static adag_actor_placement_t placement(adag_actor_h a)
{
    adag_actor_placement_t p = ADAG_ACTOR_PLACEMENT_INIT;
    ASSERT_OK(adag_actor_placement(a, &p));
    return p;
}

static void binds_requested_cpus(adag_placement_t pl)
{
    NEED_TWO_CPUS();
    adag_runtime_h rt = runtime();
    adag_actor_h a, b, free_one;
    char w[320];
    ASSERT_OK(probe(rt, pl, "on1", NULL, "1", -1, NULL, &a));
    ASSERT_OK(probe(rt, pl, "on0", NULL, "0", -1, NULL, &b));
    ASSERT_OK(probe(rt, pl, "free", NULL, NULL, -1, NULL, &free_one));
    adag_actor_placement_t p = placement(a);
    cr_assert_str_eq(p.cpus, "1");
    cr_assert(p.bound && p.this_machine && p.numa == -1 && !p.nic[0], "%d %d", p.bound, p.numa);
    where(rt, a, w, sizeof(w));
    cr_assert(strncmp(w, "cpus=1 ", 7) == 0, "actor on1 runs on %s", w);
    where(rt, b, w, sizeof(w));
    cr_assert(strncmp(w, "cpus=0 ", 7) == 0, "actor on0 runs on %s", w);
    /* an actor that asked for nothing is not bound */
    p = placement(free_one);
    cr_assert(!p.bound);
    where(rt, free_one, w, sizeof(w));
    char want[64];
    snprintf(want, sizeof(want), "cpus=%s ", p.cpus);
    cr_assert(strncmp(w, want, strlen(want)) == 0, "unbound actor runs on %s, not %s", w, p.cpus);
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(placement, process_actor_bound_to_its_cpus, .timeout = 60)
{
    binds_requested_cpus(ADAG_PLACEMENT_PROCESS);
}

Test(placement, thread_actor_loop_bound_to_its_cpus, .timeout = 60)
{
    binds_requested_cpus(ADAG_PLACEMENT_THREAD);
}

/* numa 0: the worker's memory prefers node 0, and so do the slots it
 * writes (the next stage reads them in place and sees the policy) */
Test(placement, numa_node_sets_memory_and_slot_policy, .timeout = 60)
{
    adag_runtime_h rt = runtime();
    adag_actor_h a, b, c;
    char w[320];
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "writer0", NULL, NULL, 0, NULL, &a));
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "reader", NULL, NULL, -1, NULL, &b));
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "plain", NULL, NULL, -1, NULL, &c));
    adag_actor_placement_t p = placement(a);
    cr_assert_eq(p.numa, 0);
    where(rt, a, w, sizeof(w));
    char want[64];
    snprintf(want, sizeof(want), " mode=%d node=0", MPOL_PREFERRED);
    cr_assert(strstr(w, want), "writer0 reports %s", w);
    where(rt, c, w, sizeof(w));
    snprintf(want, sizeof(want), " mode=%d ", MPOL_DEFAULT);
    cr_assert(strstr(w, want), "plain reports %s", w);

    /* input -> a.pass -> b.page_policy, and input -> c.pass -> b.page_policy */
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h outs[2];
    outs[0] = h_bind1(g, b, "page_policy", h_bind1(g, a, "pass", h_input(g, 0)));
    outs[1] = h_bind1(g, b, "page_policy", h_bind1(g, c, "pass", h_input(g, 0)));
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_dag_h dag = h_compile(g, 2, 4096);
    int64_t x = 9;
    adag_value_t in = h_i64v(&x), res[2];
    adag_ref_t ref;
    ASSERT_OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, res, 2, 10000));
    snprintf(want, sizeof(want), "mode=%d node=0", MPOL_PREFERRED);
    cr_assert_str_eq((const char *)res[0].data, want, "the slot writer0 wrote: %s",
                     (const char *)res[0].data);
    snprintf(want, sizeof(want), "mode=%d ", MPOL_DEFAULT);
    cr_assert(strncmp((const char *)res[1].data, want, strlen(want)) == 0,
              "the slot plain wrote: %s", (const char *)res[1].data);
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* Requests this machine cannot meet fail adag_actor_create, naming what;
 * the runtime goes on. */
static void refuses(adag_placement_t pl)
{
    adag_runtime_h rt = runtime();
    adag_actor_h a;
    struct {
        const char *cpus;
        int numa;
        const char *nic;
        const char *says;
    } bad[] = {
        {"1-0", -1, NULL, "is not a CPU list"},
        {"a", -1, NULL, "is not a CPU list"},
        {"0,", -1, NULL, "is not a CPU list"},
        {"1000", -1, NULL, "outside those this process may use"},
        {NULL, 999, NULL, "NUMA node 999 does not exist"},
        {NULL, 5000, NULL, "is not a NUMA node number"},
        {NULL, -1, "mlx5_9", "unknown NIC \"mlx5_9\""},
        {NULL, -1, "mlx5_0:0", "the port after ':' must be"},
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        adag_actor_params_t p = h_actor_params_init("probe", pl, NULL, NULL, 0);
        if (bad[i].cpus) {
            p.field_mask |= ADAG_ACTOR_PARAM_CPUS;
            p.cpus = bad[i].cpus;
        }
        if (bad[i].numa != -1) {
            p.field_mask |= ADAG_ACTOR_PARAM_NUMA;
            p.numa = bad[i].numa;
        }
        if (bad[i].nic) {
            p.field_mask |= ADAG_ACTOR_PARAM_NIC;
            p.nic = bad[i].nic;
        }
        ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
        cr_assert_null(a);
        ASSERT_MSG_HAS(bad[i].says);
    }
    /* and a good one still works */
    ASSERT_OK(probe(rt, pl, "fine", NULL, "0", -1, "", &a));
    cr_assert_str_eq(placement(a).cpus, "0");
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(placement, impossible_requests_fail_clearly_process, .timeout = 60)
{
    refuses(ADAG_PLACEMENT_PROCESS);
}

Test(placement, impossible_requests_fail_clearly_thread, .timeout = 60)
{
    refuses(ADAG_PLACEMENT_THREAD);
}

Test(placement, placement_struct_size_checked)
{
    adag_runtime_h rt = runtime();
    adag_actor_h a;
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_THREAD, "t", NULL, NULL, -1, NULL, &a));
    adag_actor_placement_t p = {.struct_size = 8};
    ASSERT_ST(adag_actor_placement(a, &p), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("struct_size 8");
    ASSERT_ST(adag_actor_placement(NULL, &p), ADAG_ERR_INVALID);
    ASSERT_OK(adag_runtime_destroy(rt));
}

/*
 * tests/topo/thismachine-2numa.xml describes this VM's two CPUs as two
 * NUMA nodes with one GPU each (emu:0 stands for the GPU of node 0, emu:1
 * for node 1's), and ADAG_TOPO_XML_THIS_SYSTEM=1 says it is this machine:
 * GPU actors are bound to their GPU's CPU, with no request.
 */
static void use_two_node_map(void)
{
    setenv("ADAG_TOPO_XML", TOPO_FILE("thismachine-2numa.xml"), 1);
    setenv("ADAG_TOPO_XML_THIS_SYSTEM", "1", 1);
    setenv("ADAG_EMU_DEVICES", "2", 1);
}

Test(placement, gpu_actors_run_next_to_their_gpu, .timeout = 60)
{
    NEED_TWO_CPUS();
    use_two_node_map();
    adag_runtime_h rt = runtime();
    adag_actor_h g0, g1, t1, over, host_only;
    char w[320];
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "g0", "emu:0", NULL, -1, NULL, &g0));
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "g1", "emu:1", NULL, -1, NULL, &g1));
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_THREAD, "t1", "emu:1", NULL, -1, NULL, &t1));
    /* the user's CPUs win over the GPU's */
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "over", "emu:1", "0", -1, NULL, &over));
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "cpu", NULL, NULL, -1, NULL, &host_only));
    adag_actor_placement_t p0 = placement(g0), p1 = placement(g1);
    cr_assert(p0.bound && p0.numa == 0 && !strcmp(p0.cpus, "0"), "g0: %s numa %d", p0.cpus,
              p0.numa);
    cr_assert(p1.bound && p1.numa == 1 && !strcmp(p1.cpus, "1"), "g1: %s numa %d", p1.cpus,
              p1.numa);
    cr_assert(p0.gpu[0] && p1.gpu[0] && strcmp(p0.gpu, p1.gpu) != 0, "GPUs %s %s", p0.gpu,
              p1.gpu);
    where(rt, g0, w, sizeof(w));
    cr_assert(strncmp(w, "cpus=0 ", 7) == 0, "g0 runs on %s", w);
    where(rt, g1, w, sizeof(w));
    cr_assert(strncmp(w, "cpus=1 ", 7) == 0, "g1 runs on %s", w);
    where(rt, t1, w, sizeof(w));
    cr_assert(strncmp(w, "cpus=1 ", 7) == 0, "thread actor t1's loop runs on %s", w);
    adag_actor_placement_t po = placement(over);
    cr_assert(!strcmp(po.cpus, "0") && po.numa == 1, "over: %s numa %d", po.cpus, po.numa);
    where(rt, over, w, sizeof(w));
    cr_assert(strncmp(w, "cpus=0 ", 7) == 0, "over runs on %s", w);
    cr_assert(!placement(host_only).bound);
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(placement, placement_off_binds_nothing, .timeout = 60)
{
    NEED_TWO_CPUS();
    use_two_node_map();
    setenv("ADAG_PLACEMENT", "0", 1);
    adag_runtime_h rt = runtime();
    adag_actor_h g1, asked;
    char w[320];
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "g1", "emu:1", NULL, -1, NULL, &g1));
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "asked", "emu:1", "0", -1, NULL, &asked));
    adag_actor_placement_t p = placement(g1);
    cr_assert(!p.bound && p.numa == -1 && !p.gpu[0], "g1: %s numa %d", p.cpus, p.numa);
    where(rt, g1, w, sizeof(w));
    cr_assert(strncmp(w, "cpus=0-1 ", 9) == 0, "g1 runs on %s", w);
    /* what the user asked for still applies */
    where(rt, asked, w, sizeof(w));
    cr_assert(strncmp(w, "cpus=0 ", 7) == 0, "asked runs on %s", w);
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* A bad ADAG_TOPO_XML fails the actors that need the map, naming the file;
 * an actor that needs none is created. */
Test(placement, unreadable_topology_fails_clearly, .timeout = 60)
{
    setenv("ADAG_TOPO_XML", "/nonexistent/topo.xml", 1);
    adag_runtime_h rt = runtime();
    adag_actor_h a;
    ASSERT_ST(probe(rt, ADAG_PLACEMENT_PROCESS, "g", "emu:0", NULL, -1, NULL, &a),
              ADAG_ERR_IO);
    ASSERT_MSG_HAS("/nonexistent/topo.xml");
    ASSERT_MSG_HAS("actor g");
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "plain", NULL, NULL, -1, NULL, &a));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* DOT shows where each actor runs and how its loop waits. */
Test(placement, dot_shows_placement_and_wait_policy, .timeout = 60)
{
    NEED_TWO_CPUS();
    adag_runtime_h rt = runtime();
    adag_actor_h a;
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "one", NULL, "1", -1, NULL, &a));
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h out = h_bind1(g, a, "pass", h_input(g, 0));
    ASSERT_OK(adag_graph_output(g, &out, 1));
    adag_dag_h dag = h_compile(g, 2, 64);
    char *dot = h_dot(dag);
    /* one CPU, shared with the driver: 2 loops on 1 CPU, so it yields */
    cr_assert(strstr(dot, "CPUs 1, NIC (UCX's choice); waits: spin, yielding"), "%s", dot);
    free(dot);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---- the data stage's threads next to the first stage ---- */

#define LOADER_RS 32
#define LOADER_BATCH 4

/* map: copies the record and notes the CPUs of the thread that ran it */
static _Atomic int loader_runs, loader_elsewhere;
static cpu_set_t loader_want;

static adag_status_t note_cpus(void *arg, const adag_data_sample_t *s, uint64_t *rng, void *out,
                               size_t out_size)
{
    (void)arg;
    (void)rng;
    cpu_set_t mine;
    sched_getaffinity(0, sizeof(mine), &mine);
    atomic_fetch_add(&loader_runs, 1);
    if (!CPU_EQUAL(&mine, &loader_want))
        atomic_fetch_add(&loader_elsewhere, 1);
    memcpy(out, s->data, out_size < s->size ? out_size : s->size);
    return ADAG_OK;
}

static char records_path[64];

static adag_data_params_t loader_params(adag_dag_h dag)
{
    static const char *shards[1];
    snprintf(records_path, sizeof(records_path), "/tmp/adag-place-XXXXXX");
    int fd = mkstemp(records_path);
    cr_assert_geq(fd, 0);
    unsigned char rec[LOADER_RS] = {0};
    for (int i = 0; i < 64; i++) {
        rec[0] = (unsigned char)i;
        cr_assert_eq(write(fd, rec, sizeof(rec)), (ssize_t)sizeof(rec));
    }
    close(fd);
    shards[0] = records_path;
    return (adag_data_params_t){
        .field_mask = ADAG_DATA_PARAM_RECORD_SIZE | ADAG_DATA_PARAM_THREADS |
                      ADAG_DATA_PARAM_MAP | ADAG_DATA_PARAM_DAG,
        .shards = shards,
        .nshards = 1,
        .format = ADAG_DATA_FORMAT_RECORDS,
        .batch_size = LOADER_BATCH,
        .sample_size = LOADER_RS,
        .record_size = LOADER_RS,
        .threads = 2,
        .map = note_cpus,
        .dag = dag,
    };
}

/* feeds `batches` executions; returns the source's CPU list */
static void feed(adag_data_params_t *p, adag_dag_h dag, unsigned batches, char *cpus, size_t len)
{
    adag_data_source_h src;
    loader_runs = loader_elsewhere = 0;
    ASSERT_OK(adag_data_open(p, &src));
    ASSERT_OK(adag_data_cpus(src, cpus, len));
    for (unsigned b = 0; b < batches; b++) {
        adag_ref_t ref;
        adag_data_batch_t bt;
        adag_value_t out;
        ASSERT_OK(adag_data_next_exec(src, &ref, &bt, 10000));
        ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 10000));
        cr_assert_eq(out.size, LOADER_BATCH * LOADER_RS);
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    adag_data_close(src);
    unlink(records_path);
}

/* input -> first.pass -> second.pass: a new DAG per source (a closed
 * source may leave executions it started in the DAG) */
static adag_dag_h loader_dag(adag_runtime_h rt, adag_actor_h first, adag_actor_h second)
{
    adag_actor_h chain[2] = {first, second};
    adag_graph_h g = h_chain_graph(rt, chain, 2, "pass");
    adag_dag_h dag = h_compile(g, 4, LOADER_BATCH * LOADER_RS);
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

Test(placement, loader_threads_run_next_to_the_first_stage, .timeout = 60)
{
    NEED_TWO_CPUS();
    use_two_node_map();
    adag_runtime_h rt = runtime();
    adag_actor_h first, second;
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "first", "emu:1", NULL, -1, NULL, &first));
    ASSERT_OK(probe(rt, ADAG_PLACEMENT_PROCESS, "second", "emu:0", NULL, -1, NULL, &second));
    adag_dag_h dag = loader_dag(rt, first, second);
    adag_actor_placement_t in = ADAG_ACTOR_PLACEMENT_INIT;
    ASSERT_OK(adag_dag_input_placement(dag, &in));
    cr_assert(in.bound && !strcmp(in.cpus, "1") && in.numa == 1, "first stage: %s numa %d",
              in.cpus, in.numa);

    char cpus[64];
    adag_data_params_t p = loader_params(dag);
    CPU_ZERO(&loader_want);
    CPU_SET(1, &loader_want);
    feed(&p, dag, 12, cpus, sizeof(cpus));
    cr_assert_str_eq(cpus, "1");
    cr_assert_gt(loader_runs, 0);
    cr_assert_eq(loader_elsewhere, 0, "%d of %d samples mapped off CPU 1", loader_elsewhere,
                 loader_runs);
    ASSERT_OK(adag_dag_destroy(dag));

    /* the user's CPUs win */
    dag = loader_dag(rt, first, second);
    p = loader_params(dag);
    p.field_mask |= ADAG_DATA_PARAM_CPUS;
    p.cpus = "0";
    CPU_ZERO(&loader_want);
    CPU_SET(0, &loader_want);
    feed(&p, dag, 12, cpus, sizeof(cpus));
    cr_assert_str_eq(cpus, "0");
    cr_assert_eq(loader_elsewhere, 0, "%d of %d samples mapped off CPU 0", loader_elsewhere,
                 loader_runs);

    /* and CPUs it may not use are refused */
    p = loader_params(dag);
    p.field_mask |= ADAG_DATA_PARAM_CPUS;
    p.cpus = "1000";
    adag_data_source_h src;
    ASSERT_ST(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("outside those this process may use");
    unlink(records_path);

    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---- adag-info topo ---- */

/* Runs adag-info with args; its stdout+stderr into out; returns its exit status. */
static int info(const char *args, char *out, size_t len)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/adag-info %s 2>&1", ADAG_TEST_BUILD_DIR, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(placement, adag_info_topo_shows_and_exports_maps, .timeout = 60)
{
    static char out[32768];
    char xml[] = "/tmp/adag-info-topo-XXXXXX";
    int fd = mkstemp(xml);
    cr_assert_geq(fd, 0);
    close(fd);
    char args[512];
    snprintf(args, sizeof(args), "topo %s --xml %s", TOPO_FILE("server-2s8g4n.xml"), xml);
    cr_assert_eq(info(args, out, sizeof(out)), 0, "%s", out);
    cr_assert(strstr(out, "another machine"), "%s", out);
    cr_assert(strstr(out, "GPUs: 8"), "%s", out);
    cr_assert(strstr(out, "actor on GPU 5 (0000:14:00.0)  CPUs 16-31,48-63, NUMA 1, GPU "
                          "0000:14:00.0, NIC mlx5_2:1 (same PCI switch)"),
              "%s", out);
    cr_assert(strstr(out, "actor without a GPU"), "%s", out);
    /* the file written is a map of the same machine */
    snprintf(args, sizeof(args), "topo %s", xml);
    cr_assert_eq(info(args, out, sizeof(out)), 0, "%s", out);
    cr_assert(strstr(out, "NIC mlx5_3:1 (same PCI switch)"), "%s", out);
    unlink(xml);
    /* this machine */
    cr_assert_eq(info("topo", out, sizeof(out)), 0, "%s", out);
    cr_assert(strstr(out, "topology of this machine"), "%s", out);
    cr_assert(strstr(out, "RDMA: "), "%s", out);
    /* refusals */
    cr_assert_eq(info("topo /nonexistent/t.xml", out, sizeof(out)), 1, "%s", out);
    cr_assert(strstr(out, "cannot use hwloc XML file /nonexistent/t.xml"), "%s", out);
    cr_assert_eq(info("topo --bogus", out, sizeof(out)), 2, "%s", out);
    cr_assert(strstr(out, "usage: adag-info topo"), "%s", out);
}

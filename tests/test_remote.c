/*
 * Remote actors (ADAG_PLACEMENT_REMOTE) through a real agent
 * (`adag-worker --agent`) on loopback: the compiler's UCX edges, values
 * through a chain that crosses "hosts" several times, two DAGs sharing
 * remote actors, the token refused or missing, a remote worker killed, an
 * agent restarted, and remote workers ending with their driver. The same
 * across network namespaces: tests/netns/.
 */
#include "common/clock.h"
#include "helpers.h"
#include "builders.h"
#include "gpu_stage.h"
#include "remote_rig.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOKEN "correct horse battery staple"

/* The driver presents the token of file (NULL: none at all). */
static adag_runtime_h runtime_with_token(const char *file)
{
    unsetenv("ADAG_TOKEN");
    if (file)
        setenv("ADAG_TOKEN_FILE", file, 1);
    else
        unsetenv("ADAG_TOKEN_FILE");
    return h_runtime();
}

static adag_actor_h remote_counter(adag_runtime_h rt, const h_agent_t *ag, const char *name,
                                   int64_t offset)
{
    adag_actor_params_t p = h_remote_params(ag, name, &offset);
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    cr_assert_gt(adag_actor_pid(a), 0, "a remote actor reports its pid on its host");
    return a;
}

/* Creating remote actor `name` fails with `want` (the message saved for
 * ASSERT_MSG_HAS) and yields no actor. */
static void create_refused(adag_runtime_h rt, const h_agent_t *ag, const char *name,
                           adag_status_t want)
{
    int64_t off = 0;
    adag_actor_params_t p = h_remote_params(ag, name, &off);
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), want);
    cr_assert_null(a);
}

/* An agent, a runtime with its token, and the chain's actors: a local
 * process actor (+1), two on the agent's host (+10, +100). */
static adag_runtime_h three_stage_hosts(h_agent_t *ag, adag_actor_h *a)
{
    h_agent_start(ag, TOKEN, 0);
    adag_runtime_h rt = runtime_with_token(ag->token);
    a[0] = h_counter(rt, ADAG_PLACEMENT_PROCESS, "local", 1);
    a[1] = remote_counter(rt, ag, "far1", 10);
    a[2] = remote_counter(rt, ag, "far2", 100);
    return rt;
}

/* Destroys what three_stage_hosts made and the chain over it. */
static void three_stage_hosts_end(h_agent_t *ag, adag_runtime_h rt, adag_actor_h *a,
                                  adag_graph_h g, adag_dag_h dag)
{
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    for (int i = 0; i < 3; i++)
        ASSERT_OK(adag_actor_destroy(a[i]));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_agent_cleanup(ag);
}

/* input -> local process (+1) -> remote (+10) -> remote (+100) -> driver,
 * and the remote ones' values to the driver too: 64 executions in flight
 * 8 at a time, every value checked. */
Test(remote, chain_across_hosts, .timeout = 90)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    h_agent_t ag;
    adag_actor_h a[3];
    adag_runtime_h rt = three_stage_hosts(&ag, a);
    adag_graph_h g = h_chain_graph(rt, a, 3, "add");
    adag_dag_h dag = h_compile(g, 8, 4096);
    char *dot = h_dot(dag);
    cr_assert(strstr(dot, "ucx"), "no ucx channel in:\n%s", dot);
    cr_assert(strstr(dot, "shm"), "the local hop should stay shm:\n%s", dot);
    cr_assert(strstr(dot, "remote, node 127.0.0.1:"), "DOT does not show the node:\n%s", dot);
    free(dot);
    adag_ref_t refs[64];
    for (int64_t i = 0; i < 64; i++) {
        if (i >= 8)
            ASSERT_OK(adag_dag_release(dag, refs[i - 8]));
        refs[i] = h_execute(dag, i * 1000);
        if (i >= 7)
            cr_assert_eq(h_get_i64(dag, refs[i - 7], 20000), (i - 7) * 1000 + 111);
    }
    for (int64_t i = 57; i < 64; i++) {
        cr_assert_eq(h_get_i64(dag, refs[i], 20000), i * 1000 + 111);
        ASSERT_OK(adag_dag_release(dag, refs[i]));
    }
    for (int64_t i = 56; i < 57; i++)
        ASSERT_OK(adag_dag_release(dag, refs[i]));
    three_stage_hosts_end(&ag, rt, a, g, dag);
    h_assert_clean(&snap);
}

/* Traced across hosts: the remote loops' records come over the control
 * connection with their clocks mapped, and the ucx sends are spans inside
 * their publishes (tests/trace_check.py). */
Test(remote, traced_chain_across_hosts, .timeout = 90)
{
    h_agent_t ag;
    adag_actor_h a[3];
    adag_runtime_h rt = three_stage_hosts(&ag, a);
    adag_graph_h g = h_chain_graph(rt, a, 3, "add");
    adag_compile_params_t cp = h_compile_params(4, 4096, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_TRACE;
    cp.trace_spans = 4096;
    adag_dag_h dag = h_compile_with(g, &cp);
    for (int64_t i = 0; i < 20; i++)
        cr_assert_eq(h_roundtrip(dag, i), i + 111);
    h_trace_check(dag, "3 add backend", "ok 20 executions");
    three_stage_hosts_end(&ag, rt, a, g, dag);
}

/* Two DAGs over the same remote actors, executed in turns. */
Test(remote, two_dags_share_remote_actors, .timeout = 90)
{
    h_agent_t ag;
    h_agent_start(&ag, TOKEN, 0);
    adag_runtime_h rt = runtime_with_token(ag.token);
    adag_actor_h a[2] = {remote_counter(rt, &ag, "r0", 5), remote_counter(rt, &ag, "r1", 7)};
    adag_actor_h b[2] = {a[1], a[0]};
    adag_graph_h g1 = h_chain_graph(rt, a, 2, "add"), g2 = h_chain_graph(rt, b, 1, "add");
    adag_dag_h d1 = h_compile(g1, 4, 64), d2 = h_compile(g2, 4, 64);
    for (int64_t i = 0; i < 50; i++) {
        cr_assert_eq(h_roundtrip(d1, i), i + 12);
        cr_assert_eq(h_roundtrip(d2, i), i + 7);
    }
    ASSERT_OK(adag_dag_destroy(d1));
    cr_assert_eq(h_roundtrip(d2, 1), 8, "the other DAG goes on");
    ASSERT_OK(adag_dag_destroy(d2));
    ASSERT_OK(adag_graph_destroy(g1));
    ASSERT_OK(adag_graph_destroy(g2));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_agent_cleanup(&ag);
}

/* A wrong token, and none: refused with a message on both sides. */
Test(remote, token_refused, .timeout = 60)
{
    h_agent_t ag;
    char wrong[128];
    h_agent_start(&ag, TOKEN, 0);
    h_token_file(wrong, sizeof(wrong), "not the token");
    adag_runtime_h rt = runtime_with_token(wrong);
    create_refused(rt, &ag, "intruder", ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("refused");
    ASSERT_MSG_HAS("wrong token");
    ASSERT_MSG_HAS("intruder");
    for (int i = 0; i < 100 && !h_agent_logged(&ag, "wrong token"); i++)
        usleep(10000);
    cr_assert(h_agent_logged(&ag, "refused 127.0.0.1:"), "the agent did not log the refusal");
    cr_assert(h_agent_logged(&ag, "wrong token"));
    ASSERT_OK(adag_runtime_destroy(rt));
    unlink(wrong);
    h_agent_cleanup(&ag);
}

Test(remote, token_missing, .timeout = 60)
{
    h_agent_t ag;
    h_agent_start(&ag, TOKEN, 0);
    adag_runtime_h rt = runtime_with_token(NULL);
    create_refused(rt, &ag, "anon", ADAG_ERR_NOT_FOUND);
    ASSERT_MSG_HAS("ADAG_TOKEN_FILE");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_agent_cleanup(&ag);
}

/* A token file others may read is refused before anything is sent. */
Test(remote, token_file_mode_checked, .timeout = 60)
{
    h_agent_t ag;
    char loose[128];
    h_agent_start(&ag, TOKEN, 0);
    h_token_file(loose, sizeof(loose), TOKEN);
    cr_assert_eq(chmod(loose, 0644), 0);
    adag_runtime_h rt = runtime_with_token(loose);
    create_refused(rt, &ag, "loose", ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("chmod 600");
    ASSERT_OK(adag_runtime_destroy(rt));
    unlink(loose);
    h_agent_cleanup(&ag);
}

/* SIGKILL of a remote worker: the DAG fails with ADAG_ERR_ACTOR_DIED naming
 * the actor and its host within 2 s; teardown completes. */
Test(remote, killed_remote_worker, .timeout = 60)
{
    h_agent_t ag;
    h_agent_start(&ag, TOKEN, 0);
    adag_runtime_h rt = runtime_with_token(ag.token);
    adag_actor_h a[2] = {h_counter(rt, ADAG_PLACEMENT_PROCESS, "near", 1),
                         remote_counter(rt, &ag, "victim", 2)};
    adag_graph_h g = h_chain_graph(rt, a, 2, "add");
    adag_dag_h dag = h_compile(g, 4, 64);
    cr_assert_eq(h_roundtrip(dag, 1), 4);
    cr_assert_eq(kill(adag_actor_pid(a[1]), SIGKILL), 0);
    int64_t t0 = adag__now_ns();
    adag_ref_t ref;
    adag_value_t out;
    int64_t x = 5;
    adag_value_t in = h_i64v(&x);
    adag_status_t st = adag_dag_execute(dag, &in, 1, 0, &ref);
    if (st == ADAG_OK)
        st = adag_dag_get(dag, ref, &out, 1, 10000);
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    ASSERT_ST(st, ADAG_ERR_ACTOR_DIED);
    ASSERT_MSG_HAS("victim");
    ASSERT_MSG_HAS(ag.addr);
    cr_assert_lt(ms, 2000.0, "the death was reported after %.0f ms", ms);
    t0 = adag__now_ns();
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
    cr_assert_lt((double)(adag__now_ns() - t0) / 1e6, 10000.0);
    h_agent_cleanup(&ag);
}

/* The agent restarts (on the same port): new actors come from the new one,
 * and a remote actor created before goes on (its worker is not the
 * agent's to end). */
Test(remote, agent_restart, .timeout = 90)
{
    h_agent_t ag;
    h_agent_start(&ag, TOKEN, 0);
    unsigned port = (unsigned)atoi(strrchr(ag.addr, ':') + 1);
    adag_runtime_h rt = runtime_with_token(ag.token);
    adag_actor_h before = remote_counter(rt, &ag, "before", 1);
    char token[128];
    snprintf(token, sizeof(token), "%s", ag.token);
    h_agent_stop(&ag);
    h_agent_t ag2;
    h_agent_start(&ag2, TOKEN, port);
    adag_actor_h after = remote_counter(rt, &ag2, "after", 2);
    adag_actor_h a[2] = {before, after};
    adag_graph_h g = h_chain_graph(rt, a, 2, "add");
    adag_dag_h dag = h_compile(g, 2, 64);
    for (int64_t i = 0; i < 20; i++)
        cr_assert_eq(h_roundtrip(dag, i), i + 3);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
    unlink(token);
    h_agent_cleanup(&ag);
    h_agent_cleanup(&ag2);
}

/* A driver SIGKILLed: its remote worker exits (its connection closes). */
Test(remote, workers_end_with_their_driver, .timeout = 60)
{
    h_agent_t ag;
    h_agent_start(&ag, TOKEN, 0);
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t drv = fork();
    cr_assert_geq(drv, 0);
    if (drv == 0) {
        adag_runtime_h rt = runtime_with_token(ag.token);
        int64_t off = 3;
        adag_actor_params_t p = h_remote_params(&ag, "orphan", &off);
        adag_actor_h a;
        if (adag_actor_create(rt, &p, &a) != ADAG_OK)
            _exit(1);
        int pid = adag_actor_pid(a);
        if (write(pfd[1], &pid, sizeof(pid)) != sizeof(pid))
            _exit(2);
        pause();
        _exit(0);
    }
    close(pfd[1]);
    int wpid = 0;
    cr_assert_eq(read(pfd[0], &wpid, sizeof(wpid)), (ssize_t)sizeof(wpid),
                 "the child driver did not create its remote actor");
    cr_assert_gt(wpid, 0);
    cr_assert_eq(kill(wpid, 0), 0, "the remote worker is not running");
    kill(drv, SIGKILL);
    waitpid(drv, NULL, 0);
    int gone = 0;
    for (int i = 0; i < 300 && !gone; i++) { /* the agent reaps it within its 1 s poll */
        gone = kill(wpid, 0) != 0 && errno == ESRCH;
        usleep(10000);
    }
    cr_assert(gone, "remote worker %d outlived its driver by 3 s", wpid);
    close(pfd[0]);
    h_agent_cleanup(&ag);
}

/* A remote gpu_stage: device-bound on `device` of its host (NULL: a host
 * actor, host tensors). */
static adag_actor_h remote_gpu_stage(adag_runtime_h rt, const h_agent_t *ag, const char *name,
                                     int stage, const char *device)
{
    int init[2] = {stage, 0};
    adag_actor_params_t p = h_actor_params_init("gpu_stage", ADAG_PLACEMENT_REMOTE, name, init,
                                                sizeof(init));
    p.field_mask |= ADAG_ACTOR_PARAM_MODULE | ADAG_ACTOR_PARAM_NODE;
    p.module_path = ADAG_TEST_MODULE;
    p.node = ag->addr;
    if (device) {
        p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
        p.device = device;
    }
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    return a;
}

/* A device tensor crosses hosts over ucx, staged through host memory;
 * declared to stay in device memory (ADAG_TRANSPORT_IPC) it is refused,
 * naming the tensor, both endpoints and both hosts. Tensors in host
 * memory cross too. (Bit-exact device results between network
 * namespaces: tests/test_backend_remote.c.) */
Test(remote, tensors_across_hosts, .timeout = 90)
{
    h_agent_t ag;
    h_agent_start(&ag, TOKEN, 0);
    adag_runtime_h rt = runtime_with_token(ag.token);
    adag_actor_h a[2] = {h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "near", "emu:0", 1, 0),
                         remote_gpu_stage(rt, &ag, "far", 2, "emu:1")};
    adag_compile_params_t cp = h_compile_params(2, 4096, 0, 0);
    adag_dag_h dag = NULL;
    ASSERT_ST(h_gpu_chain_via(rt, a, 2, &cp, ADAG_TRANSPORT_IPC, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("no backend can carry it");
    ASSERT_MSG_HAS("near (emu:0 on the driver's node) -> far (emu:1 on 127.0.0.1:");
    ASSERT_MSG_HAS("ucx: it stages device values through host memory, and the tensor's "
                   "transport is ADAG_TRANSPORT_IPC");
    cr_assert_null(dag);
    ASSERT_OK(h_gpu_chain_via(rt, a, 2, &cp, ADAG_TRANSPORT_AUTO, &dag));
    ASSERT_OK(adag_dag_destroy(dag));
    dag = NULL;
    /* tensors in host memory cross: host actors of the same class on both
     * sides, every element checked */
    adag_actor_h h[2] = {h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "hnear", NULL, 1, 0),
                         remote_gpu_stage(rt, &ag, "hfar", 2, NULL)};
    ASSERT_OK(h_gpu_chain_via(rt, h, 2, &cp, ADAG_TRANSPORT_AUTO, &dag));
    char *dot = h_dot(dag);
    cr_assert(strstr(dot, "ucx"), "no ucx channel in:\n%s", dot);
    free(dot);
    enum { N = 256 };
    static int32_t in[N];
    for (int i = 0; i < N; i++)
        in[i] = i * 3 - 100;
    adag_value_t v = {.data = in, .size = sizeof(in), .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {N}};
    adag_ref_t ref;
    adag_value_t out[2];
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, out, 2, 20000));
    cr_assert_eq(out[0].size, sizeof(in));
    cr_assert_eq(out[0].kind, ADAG_VALUE_TENSOR);
    for (int i = 0; i < N; i++) {
        int32_t want = in[i], got;
        stage_apply(ADAG_DTYPE_I32, 1, &want, &want);
        stage_apply(ADAG_DTYPE_I32, 2, &want, &want);
        memcpy(&got, (const char *)out[0].data + 4 * i, 4);
        cr_assert_eq(got, want, "element %d", i);
    }
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_agent_cleanup(&ag);
}

/* A collective with a member on another host is refused at compile time
 * (communicators stay within the driver's host for now), naming it. */
Test(remote, collective_with_remote_member_refused, .timeout = 90)
{
    h_agent_t ag;
    h_agent_start(&ag, TOKEN, 0);
    adag_runtime_h rt = runtime_with_token(ag.token);
    adag_actor_h a[2] = {h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "m0", "emu:0", 1, 0),
                         remote_gpu_stage(rt, &ag, "m1", 2, "emu:1")};
    adag_graph_h g;
    adag_node_h x, parts[2], outs[2];
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    adag_tensor_params_t host = {.field_mask = ADAG_TENSOR_PARAM_TRANSPORT,
                                 .transport = ADAG_TRANSPORT_HOST};
    ASSERT_OK(adag_node_tensor(x, &host)); /* the input may cross; the collective not */
    for (int m = 0; m < 2; m++) {
        ASSERT_OK(adag_graph_bind(g, a[m], "apply", &x, 1, &parts[m]));
        ASSERT_OK(adag_node_tensor(parts[m], NULL));
    }
    ASSERT_OK(adag_graph_allreduce(g, parts, 2, ADAG_REDUCE_SUM, outs));
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_compile_params_t cp = h_compile_params(2, 4096, 0, 0);
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("collective allreduce#0 has member m1 on node 127.0.0.1:");
    cr_assert_null(dag);
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_agent_cleanup(&ag);
}

/* Clients that say nothing, or send garbage (a huge length first), hold up
 * no driver: a remote actor is created at once beside them; the garbage is
 * refused and logged; the agent goes on serving. */
Test(remote, hostile_clients_hold_up_nobody, .timeout = 60)
{
    h_agent_t ag;
    h_agent_start(&ag, TOKEN, 0);
    int silent[3];
    for (int i = 0; i < 3; i++)
        silent[i] = h_agent_connect(&ag);
    int junk = h_agent_connect(&ag);
    unsigned char bytes[64];
    memset(bytes, 0xff, sizeof(bytes)); /* a frame "length" of 4 GiB, then junk */
    cr_assert_eq(write(junk, bytes, sizeof(bytes)), (ssize_t)sizeof(bytes));
    adag_runtime_h rt = runtime_with_token(ag.token);
    int64_t t0 = adag__now_ns();
    adag_actor_h a = remote_counter(rt, &ag, "beside", 5);
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    cr_assert_lt(ms, 2000.0, "creating a remote actor beside silent clients took %.0f ms", ms);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
    adag_dag_h dag = h_compile(g, 2, 64);
    cr_assert_eq(h_roundtrip(dag, 1), 6);
    char buf[256];
    ssize_t n = 0;
    for (int i = 0; i < 100 && !h_agent_logged(&ag, "refused 127.0.0.1:"); i++)
        usleep(10000);
    cr_assert(h_agent_logged(&ag, "refused 127.0.0.1:"), "the garbage was not refused and logged");
    n = read(junk, buf, sizeof(buf)); /* the refusal (a REPLY), then the close */
    cr_assert_geq(n, 0);
    close(junk);
    for (int i = 0; i < 3; i++)
        close(silent[i]);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_agent_cleanup(&ag);
}

/*
 * Multi-host DAGs across network namespaces (tests/netns_rig.h): the
 * driver in host h0, agents (`adag-worker --agent`) in h1 and h2, every
 * value between hosts over UCX on TCP through a bridge. A 3-host chain and
 * a scatter-gather checked value by value, payloads 8 B .. 64 MiB, two
 * DAGs sharing remote actors, a remote worker SIGKILLed, a link cut, a
 * wrong token, an agent restart, and a link cut or one-way partition
 * under a pipelined chain with a bystander DAG that must outlive the
 * failed one. Where namespaces cannot be made (not root, no iproute2, a
 * kernel or container that refuses them) each test says
 * "skipped: <reason>".
 */
#include "common/clock.h"
#include "helpers.h"
#include "netns_rig.h"
#include "remote_rig.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOKEN "a token only the tests know"

typedef struct {
    h_netns_t hosts;
    h_agent_t ag[H_NETNS_MAX]; /* ag[i] in hosts.ns[i], i >= 1 */
    unsigned nagents;
    adag_runtime_h rt;
} world_t;

/* The test's hosts: torn down after it even when an assertion failed
 * (each test's world is static, so it outlives the failed test's frame). */
static world_t *current;

/* Hosts h0 (this process: the driver) .. h<nagents>, an agent in each
 * but h0, a runtime presenting the token in driver_token (NULL: the
 * agents' own). Skips where namespaces cannot be made. */
static void world_up(world_t *w, unsigned nagents, const char *driver_token)
{
    char why[256];
    memset(w, 0, sizeof(*w));
    current = w;
    if (h_netns_up(&w->hosts, nagents + 1, why, sizeof(why)) != 0)
        cr_skip_test("skipped: %s", why);
    w->nagents = nagents;
    h_agents_in_hosts(&w->hosts, w->ag, nagents, TOKEN);
    unsetenv("ADAG_TOKEN");
    setenv("ADAG_TOKEN_FILE", driver_token ? driver_token : w->ag[1].token, 1);
    w->rt = h_runtime();
}

static void world_down(world_t *w)
{
    if (w->rt)
        ASSERT_OK(adag_runtime_destroy(w->rt));
    w->rt = NULL;
    for (unsigned i = 1; i <= w->nagents; i++)
        h_agent_cleanup(&w->ag[i]);
    w->nagents = 0;
    h_netns_down(&w->hosts);
    current = NULL;
}

/* After a failed assertion: agents and namespaces go (the runtime's
 * workers end with this process). */
static void partition_fini(void);

static void world_fini(void)
{
    if (!current)
        return;
    partition_fini();
    for (unsigned i = 1; i <= current->nagents; i++)
        h_agent_cleanup(&current->ag[i]);
    h_netns_down(&current->hosts);
}

TestSuite(netns, .fini = world_fini);

static adag_actor_h remote_counter(world_t *w, unsigned host, const char *name, int64_t offset)
{
    adag_actor_params_t p = h_remote_params(&w->ag[host], name, &offset);
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(w->rt, &p, &a));
    return a;
}

/* h0 (a process actor, +1) -> h1 (+10) -> h2 (+100) -> h1 (+1000) -> the
 * driver in h0: 200 executions, 8 in flight, each value checked. */
Test(netns, chain_3hosts, .timeout = 120)
{
    static world_t w;
    world_up(&w, 2, NULL);
    adag_actor_h a[4] = {h_counter(w.rt, ADAG_PLACEMENT_PROCESS, "h0", 1),
                         remote_counter(&w, 1, "h1a", 10), remote_counter(&w, 2, "h2", 100),
                         remote_counter(&w, 1, "h1b", 1000)};
    adag_graph_h g = h_chain_graph(w.rt, a, 4, "add");
    adag_dag_h dag = h_compile(g, 8, 64);
    char *dot = h_dot(dag);
    cr_assert(strstr(dot, w.hosts.ip[1]) && strstr(dot, w.hosts.ip[2]),
              "DOT does not name the hosts:\n%s", dot);
    free(dot);
    adag_ref_t refs[8];
    for (int64_t i = 0; i < 200 + 8; i++) {
        if (i >= 8) {
            cr_assert_eq(h_get_i64(dag, refs[i % 8], 20000), (i - 8) * 7 + 1111,
                         "execution %lld", (long long)(i - 8));
            ASSERT_OK(adag_dag_release(dag, refs[i % 8]));
        }
        if (i < 200)
            refs[i % 8] = h_execute(dag, i * 7);
    }
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    world_down(&w);
}

/* input -> h1.add(+10) and h2.add(+100) -> h1.sum2 -> output, and h2's
 * value as a second output: the gather reads from two hosts. */
Test(netns, scatter_gather, .timeout = 120)
{
    static world_t w;
    world_up(&w, 2, NULL);
    adag_actor_h s1 = remote_counter(&w, 1, "s1", 10), s2 = remote_counter(&w, 2, "s2", 100),
                 g1 = remote_counter(&w, 1, "gather", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(w.rt, &g));
    adag_node_h in = h_input(g, 0);
    adag_node_h parts[2] = {h_bind1(g, s1, "add", in), h_bind1(g, s2, "add", in)};
    adag_node_h outs[2] = {h_bind(g, g1, "sum2", parts, 2), parts[1]};
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_dag_h dag = h_compile(g, 4, 64);
    for (int64_t i = 0; i < 100; i++) {
        int64_t out[2];
        h_run_i64(dag, &i, 1, out, 2);
        cr_assert_eq(out[0], 2 * i + 110, "execution %lld: gathered %lld", (long long)i,
                     (long long)out[0]);
        cr_assert_eq(out[1], i + 100);
    }
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    world_down(&w);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (unsigned char)x;
    }
}

/* Bytes through h1 and h2 and back (echo): 8 B .. 64 MiB, three
 * executions per size with different contents, each compared whole. */
Test(netns, payloads_8B_to_64MiB, .timeout = 240)
{
    static world_t w;
    world_up(&w, 2, NULL);
    adag_actor_h a[2] = {remote_counter(&w, 1, "e1", 0), remote_counter(&w, 2, "e2", 0)};
    const size_t max = 64u << 20;
    adag_graph_h g = h_chain_graph(w.rt, a, 2, "echo");
    adag_dag_h dag = h_compile(g, 2, max);
    unsigned char *in = malloc(max);
    cr_assert_not_null(in);
    static const size_t sizes[] = {8, 4096, 65536, 1u << 20, 16u << 20, 64u << 20};
    for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (unsigned k = 0; k < 3; k++) {
            fill(in, sizes[s], s * 3 + k);
            adag_value_t v = {.data = in, .size = sizes[s]};
            adag_ref_t ref;
            adag_value_t out;
            ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
            ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 60000));
            cr_assert_eq(out.size, sizes[s]);
            cr_assert(memcmp(out.data, in, sizes[s]) == 0, "%zu bytes came back changed",
                      sizes[s]);
            ASSERT_OK(adag_dag_release(dag, ref));
        }
    free(in);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    world_down(&w);
}

/* Two DAGs over the same remote actors on two hosts, in turns; one
 * destroyed, the other goes on. */
Test(netns, two_dags_share_remote_actors, .timeout = 120)
{
    static world_t w;
    world_up(&w, 2, NULL);
    adag_actor_h a[2] = {remote_counter(&w, 1, "r1", 5), remote_counter(&w, 2, "r2", 7)};
    adag_actor_h b[2] = {a[1], a[0]};
    adag_graph_h g1 = h_chain_graph(w.rt, a, 2, "add"), g2 = h_chain_graph(w.rt, b, 2, "add");
    adag_dag_h d1 = h_compile(g1, 4, 64), d2 = h_compile(g2, 4, 64);
    for (int64_t i = 0; i < 50; i++) {
        cr_assert_eq(h_roundtrip(d1, i), i + 12);
        cr_assert_eq(h_roundtrip(d2, -i), -i + 12);
    }
    ASSERT_OK(adag_dag_destroy(d1));
    cr_assert_eq(h_roundtrip(d2, 1), 13, "the other DAG goes on");
    ASSERT_OK(adag_dag_destroy(d2));
    ASSERT_OK(adag_graph_destroy(g1));
    ASSERT_OK(adag_graph_destroy(g2));
    world_down(&w);
}

/* One execution that fails (asserts the status); the time it took, ms. */
static double failing_execution(adag_dag_h dag, adag_status_t want, int timeout_ms)
{
    int64_t t0 = adag__now_ns();
    int64_t x = 5;
    adag_value_t in = h_i64v(&x);
    adag_ref_t ref;
    adag_value_t out;
    adag_status_t st = adag_dag_execute(dag, &in, 1, 0, &ref);
    if (st == ADAG_OK)
        st = adag_dag_get(dag, ref, &out, 1, timeout_ms);
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    ASSERT_ST(st, want);
    return ms;
}

/* A remote worker SIGKILLed in h2: ADAG_ERR_ACTOR_DIED naming it and its
 * host within 2 s; the other host's actor lives on in a new DAG. */
Test(netns, sigkill_remote_worker, .timeout = 120)
{
    static world_t w;
    world_up(&w, 2, NULL);
    adag_actor_h a[2] = {remote_counter(&w, 1, "keeper", 1), remote_counter(&w, 2, "victim", 2)};
    adag_graph_h g = h_chain_graph(w.rt, a, 2, "add");
    adag_dag_h dag = h_compile(g, 4, 64);
    cr_assert_eq(h_roundtrip(dag, 1), 4);
    cr_assert_eq(kill(adag_actor_pid(a[1]), SIGKILL), 0);
    double ms = failing_execution(dag, ADAG_ERR_ACTOR_DIED, 10000);
    ASSERT_MSG_HAS("victim");
    ASSERT_MSG_HAS(w.hosts.ip[2]);
    cr_assert_lt(ms, 2000.0, "the death was reported after %.0f ms", ms);
    cr_log_info("SIGKILL reported after %.0f ms: %s", ms, h_msg());
    ASSERT_OK(adag_dag_destroy(dag));
    adag_graph_h g2 = h_chain_graph(w.rt, a, 1, "add");
    adag_dag_h d2 = h_compile(g2, 2, 64);
    cr_assert_eq(h_roundtrip(d2, 1), 2, "the survivor on h1 goes on");
    ASSERT_OK(adag_dag_destroy(d2));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_graph_destroy(g2));
    world_down(&w);
}

/* h2's link cut (its bridge port down: packets vanish, nothing resets):
 * the DAG fails after ADAG_REMOTE_TIMEOUT_MS (2 s here; 2.01-2.03 s
 * measured), asserted with 3 s of slack for a loaded host, naming h2's
 * host; teardown completes; the worker on the far side gives up by
 * itself. */
Test(netns, link_cut, .timeout = 120)
{
    setenv("ADAG_REMOTE_TIMEOUT_MS", "2000", 1);
    static world_t w;
    world_up(&w, 2, NULL);
    adag_actor_h a[2] = {remote_counter(&w, 1, "near", 1), remote_counter(&w, 2, "cut", 2)};
    int cut_pid = adag_actor_pid(a[1]);
    adag_graph_h g = h_chain_graph(w.rt, a, 2, "add");
    adag_dag_h dag = h_compile(g, 4, 64);
    cr_assert_eq(h_roundtrip(dag, 1), 4);
    h_netns_link(&w.hosts, 2, 0);
    double ms = failing_execution(dag, ADAG_ERR_ACTOR_DIED, 20000);
    ASSERT_MSG_HAS("cut");
    ASSERT_MSG_HAS("unreachable");
    ASSERT_MSG_HAS(w.hosts.ip[2]);
    cr_assert_lt(ms, 3000.0 + 2000.0, "the cut link was reported after %.0f ms", ms);
    cr_log_info("link cut reported after %.0f ms: %s", ms, h_msg());
    int64_t t0 = adag__now_ns();
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(w.rt));
    w.rt = NULL;
    cr_assert_lt((double)(adag__now_ns() - t0) / 1e6, 5000.0, "teardown after a cut link");
    int gone = 0; /* the worker's keepalive fails too: it exits */
    for (int i = 0; i < 1000 && !gone; i++) {
        gone = kill(cut_pid, 0) != 0 && errno == ESRCH;
        usleep(10000);
    }
    cr_assert(gone, "the worker behind the cut link did not exit within 10 s");
    world_down(&w);
}

/* A driver with the wrong token is refused by the agent in h1, which logs
 * the driver's address. */
Test(netns, wrong_token, .timeout = 60)
{
    static world_t w;
    char wrong[128];
    h_token_file(wrong, sizeof(wrong), "guessed");
    world_up(&w, 1, wrong);
    int64_t off = 0;
    adag_actor_params_t p = h_remote_params(&w.ag[1], "intruder", &off);
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(w.rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("wrong token");
    ASSERT_MSG_HAS(w.hosts.ip[1]);
    char needle[64];
    snprintf(needle, sizeof(needle), "refused %s:", w.hosts.ip[0]);
    for (int i = 0; i < 100 && !h_agent_logged(&w.ag[1], needle); i++)
        usleep(10000);
    cr_assert(h_agent_logged(&w.ag[1], needle), "the agent did not log \"%s\"", needle);
    unlink(wrong);
    world_down(&w);
}

/* The agent in h1 killed and started again on its port: an actor made
 * before it goes on, new ones come from the new agent. */
Test(netns, agent_restart, .timeout = 120)
{
    static world_t w;
    world_up(&w, 1, NULL);
    adag_actor_h before = remote_counter(&w, 1, "before", 1);
    unsigned port = (unsigned)atoi(strrchr(w.ag[1].addr, ':') + 1);
    h_agent_t old = w.ag[1]; /* its token file stays: the driver's */
    h_agent_stop(&w.ag[1]);
    h_agent_start_in(&w.ag[1], TOKEN, w.hosts.ip[1], port, w.hosts.ns[1]);
    adag_actor_h after = remote_counter(&w, 1, "after", 2);
    adag_actor_h a[2] = {before, after};
    adag_graph_h g = h_chain_graph(w.rt, a, 2, "add");
    adag_dag_h dag = h_compile(g, 2, 64);
    for (int64_t i = 0; i < 20; i++)
        cr_assert_eq(h_roundtrip(dag, i), i + 3);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    world_down(&w);
    h_agent_cleanup(&old);
}

/* Connections to port `port` in the network namespace of pid whose bytes
 * wait unread (/proc/<pid>/net/tcp: established, rx_queue > 0). */
static int unread_connections(pid_t pid, unsigned port)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/net/tcp", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned lport, st, txq, rxq;
        if (sscanf(line, " %*u: %*x:%x %*x:%*x %x %x:%x", &lport, &st, &txq, &rxq) == 4 &&
            lport == port && st == 1 && rxq > 0)
            n++;
    }
    fclose(f);
    return n;
}

typedef struct {
    adag_runtime_h rt;
    const h_agent_t *ag;
    adag_status_t st;
    char msg[512];
    int done[2]; /* a pipe: written once the attempt returned */
} attempt_t;

static void *attempt_main(void *arg)
{
    attempt_t *t = arg;
    int64_t off = 0;
    adag_actor_params_t p = h_remote_params(t->ag, "latecomer", &off);
    adag_actor_h a = NULL;
    t->st = adag_actor_create(t->rt, &p, &a);
    snprintf(t->msg, sizeof(t->msg), "%s", adag_last_error());
    if (write(t->done[1], "x", 1) != 1)
        abort();
    return NULL;
}

/* The agent's refusal is lost on the wire (the driver's link is down) and
 * the driver's HELLO waits unread in the agent: the refusal still arrives
 * once the link is back, retransmitted, since the agent reads the HELLO
 * rather than close with it unread, which resets the connection and
 * discards the refusal for good. The agent refuses this driver itself:
 * 64 silent clients hold every slot. */
Test(netns, refusal_survives_a_lost_segment, .timeout = 90)
{
    enum { SLOTS = 64 };
    static world_t w;
    setenv("ADAG_AGENT_AUTH_TIMEOUT_MS", "30000", 1); /* the silent ones hold on */
    world_up(&w, 1, NULL);
    unsetenv("ADAG_AGENT_AUTH_TIMEOUT_MS");
    h_agent_t *ag = &w.ag[1];
    unsigned port = (unsigned)atoi(strrchr(ag->addr, ':') + 1);
    int silent[SLOTS];
    for (int i = 0; i < SLOTS; i++)
        silent[i] = h_agent_connect(ag);
    for (int i = 0; i < 300 && h_agent_children(ag) < SLOTS; i++)
        usleep(10000);
    cr_assert_eq(h_agent_children(ag), SLOTS);
    cr_assert_eq(kill(ag->pid, SIGSTOP), 0);
    attempt_t t = {.rt = w.rt, .ag = ag};
    cr_assert_eq(pipe(t.done), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, attempt_main, &t), 0);
    /* the driver connected (the kernel accepts for the stopped agent) and
     * its HELLO arrived, unread */
    int waiting = 0;
    for (int i = 0; i < 500 && !(waiting = unread_connections(ag->pid, port)); i++)
        usleep(10000);
    int refusals = h_agent_log_count(ag, "too many connections");
    h_netns_link(&w.hosts, 0, 0);
    kill(ag->pid, SIGCONT);
    cr_assert_eq(waiting, 1, "the driver's HELLO did not reach the agent within 5 s");
    for (int i = 0; i < 300 && h_agent_log_count(ag, "too many connections") == refusals; i++)
        usleep(10000);
    cr_assert_gt(h_agent_log_count(ag, "too many connections"), refusals,
                 "the agent did not refuse the driver");
    usleep(100000); /* it has closed the connection, or lingers on it */
    h_netns_link(&w.hosts, 0, 1);
    cr_assert(h_fd_readable(t.done[0], 20000), "the driver got no answer within 20 s");
    pthread_join(th, NULL);
    cr_log_info("the driver got: %s", t.msg);
    cr_assert_eq(t.st, ADAG_ERR_INVALID, "status %d: %s", (int)t.st, t.msg);
    cr_assert(strstr(t.msg, "refused this driver: too many connections"), "%s", t.msg);
    close(t.done[0]);
    close(t.done[1]);
    for (int i = 0; i < SLOTS; i++)
        close(silent[i]);
    world_down(&w);
}

/* ---- partitions under a pipelined chain, with a bystander DAG ---- */

/* A DAG run over and over from a thread of its own beside the test: its
 * round trips and the first failure (status and message), if any. */
typedef struct {
    adag_dag_h dag;
    int64_t want_offset;
    pthread_t thread;
    int started;
    _Atomic int stop;
    _Atomic long done;
    _Atomic int failed; /* an adag_status_t, stored after msg */
    char msg[512];
} bystander_t;

static void *bystander_main(void *arg)
{
    bystander_t *b = arg;
    for (int64_t x = 0; !atomic_load(&b->stop); x++) {
        adag_value_t in = h_i64v(&x), out;
        adag_ref_t ref;
        adag_status_t st = adag_dag_execute(b->dag, &in, 1, 0, &ref);
        if (st == ADAG_OK) {
            st = adag_dag_get(b->dag, ref, &out, 1, 20000);
            if (st == ADAG_OK && h_val_i64(out) != x + b->want_offset) {
                snprintf(b->msg, sizeof(b->msg), "execution %lld gave %lld", (long long)x,
                         (long long)h_val_i64(out));
                atomic_store(&b->failed, ADAG_ERR_PROTOCOL);
                return NULL;
            }
            if (st == ADAG_OK)
                st = adag_dag_release(b->dag, ref);
        }
        if (st != ADAG_OK) {
            snprintf(b->msg, sizeof(b->msg), "%s", adag_last_error());
            atomic_store(&b->failed, st);
            return NULL;
        }
        atomic_fetch_add(&b->done, 1);
        usleep(2000);
    }
    return NULL;
}

static void bystander_stop(bystander_t *b)
{
    if (!b->started)
        return;
    atomic_store(&b->stop, 1);
    pthread_join(b->thread, NULL);
    b->started = 0;
}

typedef enum {
    FAULT_CUT,     /* h2's bridge port down: nothing in or out */
    FAULT_FROM_H2, /* h2's packets to h0 and h1 dropped; theirs reach h2 */
    FAULT_TO_H2,   /* h0's and h1's packets to h2 dropped; h2's reach them */
} fault_t;

static void fault_apply(world_t *w, fault_t f)
{
    if (f == FAULT_CUT) {
        h_netns_link(&w->hosts, 2, 0);
        return;
    }
    for (unsigned other = 0; other < 2; other++)
        if (f == FAULT_FROM_H2)
            h_netns_blackhole(&w->hosts, 2, other, 1);
        else
            h_netns_blackhole(&w->hosts, other, 2, 1);
}

/* The chain's execution i: `size` bytes (at least 8) that start with i. */
static void chain_value(unsigned char *buf, size_t size, int64_t i)
{
    fill(buf, size, (unsigned)i);
    memcpy(buf, &i, sizeof(i));
}

/* Static, not on a test's stack: world_fini and the bystander's stop run
 * after a failed assertion has left the test's frames. */
static world_t part_world;
static bystander_t part_bystander;

/* After a failed assertion: the bystander stops before its DAG's actors go. */
static void partition_fini(void)
{
    bystander_stop(&part_bystander);
}

/* The driver (h0) -> h2 -> h1 -> h2 -> h1 -> the driver, every stage an
 * echo of `size`-byte values (from 64 KiB a rendezvous), 8 in flight, and
 * beside it a bystander DAG driver -> h1 (+10) -> h1 (+1000) -> driver
 * over the chain's actors on h1, run from a thread of its own. The fault
 * hits h2 while the chain streams: the chain fails with
 * ADAG_ERR_ACTOR_DIED naming h2 as unreachable (where h2 can still send
 * but not hear, its worker gives up and closes: "closed"; a channel whose
 * UCX endpoint timed out first waits for the death behind it). Destroying it
 * completes within a bound and crashes nobody: not the driver (this
 * process), not the workers on h1, which all close UCP endpoints to h2
 * with requests still in flight (sends to h2, receives from it), and so
 * not the bystander, which must keep answering through all of it and
 * after. */
static void partition(fault_t fault, size_t size)
{
    setenv("ADAG_REMOTE_TIMEOUT_MS", "2000", 1);
    world_t *w = &part_world;
    bystander_t *b = &part_bystander;
    memset(b, 0, sizeof(*b));
    world_up(w, 2, NULL);
    adag_actor_h a[4] = {remote_counter(w, 2, "p2a", 100), remote_counter(w, 1, "p1a", 10),
                         remote_counter(w, 2, "p2b", 100), remote_counter(w, 1, "p1b", 1000)};
    adag_actor_h by[2] = {a[1], a[3]};
    adag_graph_h g = h_chain_graph(w->rt, a, 4, "echo"), gb = h_chain_graph(w->rt, by, 2, "add");
    adag_dag_h dag = h_compile(g, 8, size);
    b->dag = h_compile(gb, 4, 64);
    b->want_offset = 1010;
    cr_assert_eq(pthread_create(&b->thread, NULL, bystander_main, b), 0);
    b->started = 1;

    /* the chain streams: 8 in flight, each value checked */
    unsigned char *in = malloc(size), *want = malloc(size);
    cr_assert(in && want);
    adag_ref_t refs[8];
    int64_t next = 0, oldest = 0;
    adag_status_t st = ADAG_OK;
    adag_value_t out;
    int64_t t0 = 0;
    for (;;) {
        if (next - oldest < 8 && st == ADAG_OK) {
            chain_value(in, size, next);
            adag_value_t v = {.data = in, .size = size};
            st = adag_dag_execute(dag, &v, 1, 0, &refs[next % 8]);
            if (st == ADAG_OK)
                next++;
            continue;
        }
        if (st == ADAG_OK)
            st = adag_dag_get(dag, refs[oldest % 8], &out, 1, 20000);
        if (st != ADAG_OK)
            break;
        chain_value(want, size, oldest);
        cr_assert(out.size == size && memcmp(out.data, want, size) == 0,
                  "execution %lld came back changed", (long long)oldest);
        ASSERT_OK(adag_dag_release(dag, refs[oldest % 8]));
        if (++oldest == 100) { /* streaming: the fault hits */
            fault_apply(w, fault);
            t0 = adag__now_ns();
        }
        cr_assert_lt(oldest, 100000, "the chain never failed");
    }
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    ASSERT_ST(st, ADAG_ERR_ACTOR_DIED);
    ASSERT_MSG_HAS("p2");
    if (fault != FAULT_TO_H2)
        ASSERT_MSG_HAS("unreachable");
    ASSERT_MSG_HAS(w->hosts.ip[2]);
    /* ADAG_REMOTE_TIMEOUT_MS (2 s; 1.0-2.0 s measured), or a UCX channel's
     * error and then up to twice that for the death behind it; with 3 s of
     * slack for a loaded host */
    cr_assert_lt(ms, 2000.0 * 3 + 3000.0, "the fault was reported after %.0f ms", ms);
    cr_log_info("fault reported after %.0f ms (%lld executions after it): %s", ms,
                (long long)(oldest - 100), h_msg());
    free(in);
    free(want);

    int64_t t1 = adag__now_ns();
    ASSERT_OK(adag_dag_destroy(dag));
    double destroy_ms = (double)(adag__now_ns() - t1) / 1e6;
    cr_log_info("the failed DAG destroyed in %.0f ms", destroy_ms);
    /* the teardown timeout (5 s) bounds a worker that does not answer,
     * with slack for a loaded host */
    cr_assert_lt(destroy_ms, 5000.0 + 3000.0, "destroying the failed DAG took %.0f ms",
                 destroy_ms);

    /* the bystander kept going, and goes on */
    long before = atomic_load(&b->done);
    for (int i = 0; i < 500 && atomic_load(&b->done) < before + 50 && !atomic_load(&b->failed);
         i++)
        usleep(10000);
    bystander_stop(b);
    int crashed = h_agent_logged(&w->ag[1], "Caught signal") ||
                  h_agent_logged(&w->ag[1], "Assertion");
    const char *why = crashed ? " (h1's agent log shows a worker's crash)" : "";
    cr_assert_eq(atomic_load(&b->failed), ADAG_OK, "the bystander DAG failed (%s): %s%s",
                 adag_status_str(atomic_load(&b->failed)), b->msg, why);
    cr_assert_geq(atomic_load(&b->done), before + 50,
                  "the bystander DAG made %ld round trips in 5 s after the destroy%s",
                  atomic_load(&b->done) - before, why);
    for (unsigned i = 0; i < 2; i++) {
        char state = h_proc_state(adag_actor_pid(by[i]));
        cr_assert(state && state != 'Z', "the worker of %s (pid %d) is gone%s",
                  adag_actor_name(by[i]), adag_actor_pid(by[i]), why);
    }
    cr_assert(!crashed, "a worker on h1 crashed (its agent's log says so)");
    for (int64_t i = 0; i < 20; i++)
        cr_assert_eq(h_roundtrip(b->dag, i), i + 1010);
    ASSERT_OK(adag_dag_destroy(b->dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_graph_destroy(gb));
    world_down(w);
}

Test(netns, partition_cut_keeps_bystander, .timeout = 120)
{
    partition(FAULT_CUT, 64);
}

Test(netns, partition_cut_rendezvous_keeps_bystander, .timeout = 120)
{
    partition(FAULT_CUT, 1u << 20);
}

Test(netns, partition_from_host_keeps_bystander, .timeout = 120)
{
    partition(FAULT_FROM_H2, 1u << 20);
}

Test(netns, partition_to_host_keeps_bystander, .timeout = 120)
{
    partition(FAULT_TO_H2, 1u << 20);
}

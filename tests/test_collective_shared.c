/*
 * Live DAGs sharing one communicator (suite "collective_shared"): two DAGs
 * over the same four members (prefill and decode) run at once from two
 * threads, each with executions in flight, on the communicator they share
 * (the executions take turns on it, dag/exec/loop_collective.c): every result is
 * checked against a C reference. A DAG that fails for a reason outside
 * the group, with executions published that its members never ran, leaves
 * the other DAG working; a member killed fails both, and so does a member
 * stopped (SIGSTOP), within the comm timeout, each naming the cause.
 * Process and thread actors, members on emulated devices and host actors.
 */
#include "common/clock.h"
#include "gpu_stage.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

enum { N = 4, ELEMS = 16, INFLIGHT = 2 };

static void members_make(adag_runtime_h rt, adag_placement_t pl, int on_host, adag_actor_h *a)
{
    for (unsigned m = 0; m < N; m++) {
        char name[16], dev[16];
        snprintf(name, sizeof(name), "m%u", m);
        snprintf(dev, sizeof(dev), "emu:%u", m);
        a[m] = h_gpu_stage(rt, pl, name, on_host ? NULL : dev, (int)m + 1, 0);
    }
}

/* "prefill": allreduce(SUM) of every member's stage of x (from `from`
 * if given: x -> from.apply -> members). "decode": allreduce(MAX) of the
 * stages, each member's stage again of its result, allreduce(SUM): two
 * collectives per execution on the shared communicator. */
typedef enum { PREFILL, DECODE } shape_t;

static adag_dag_h build(adag_runtime_h rt, adag_actor_h *a, shape_t shape, adag_actor_h from,
                        int comm_timeout_ms)
{
    adag_graph_h g;
    adag_node_h x, src, parts[N], r1[N], q[N], r2[N];
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, NULL));
    src = x;
    if (from) {
        ASSERT_OK(adag_graph_bind(g, from, "apply", &x, 1, &src));
        ASSERT_OK(adag_node_tensor(src, NULL));
    }
    for (unsigned m = 0; m < N; m++) {
        ASSERT_OK(adag_graph_bind(g, a[m], "apply", &src, 1, &parts[m]));
        ASSERT_OK(adag_node_tensor(parts[m], NULL));
    }
    if (shape == PREFILL) {
        ASSERT_OK(adag_graph_allreduce(g, parts, N, ADAG_REDUCE_SUM, r2));
    } else {
        ASSERT_OK(adag_graph_allreduce(g, parts, N, ADAG_REDUCE_MAX, r1));
        for (unsigned m = 0; m < N; m++) {
            ASSERT_OK(adag_graph_bind(g, a[m], "apply", &r1[m], 1, &q[m]));
            ASSERT_OK(adag_node_tensor(q[m], NULL));
        }
        ASSERT_OK(adag_graph_allreduce(g, q, N, ADAG_REDUCE_SUM, r2));
    }
    ASSERT_OK(adag_graph_output(g, r2, N));
    adag_compile_params_t cp = h_compile_params(INFLIGHT, 4096, 0, 0);
    if (comm_timeout_ms) {
        cp.field_mask |= ADAG_COMPILE_PARAM_COMM_TIMEOUT;
        cp.comm_timeout_ms = comm_timeout_ms;
    }
    adag_dag_h dag;
    ASSERT_OK(adag_graph_compile(g, &cp, &dag));
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

static int32_t stage_i32(int stage, int32_t v)
{
    int32_t out;
    stage_apply(ADAG_DTYPE_I32, stage, &v, &out);
    return out;
}

/* The reference of element v of the input (from_stage > 0: through that
 * stage first). */
static int32_t reference(shape_t shape, int from_stage, int32_t v)
{
    if (from_stage)
        v = stage_i32(from_stage, v);
    uint32_t sum = 0;
    int32_t max = INT32_MIN;
    for (int m = 0; m < N; m++) {
        int32_t p = stage_i32(m + 1, v);
        sum += (uint32_t)p;
        if (p > max)
            max = p;
    }
    if (shape == PREFILL)
        return (int32_t)sum;
    sum = 0;
    for (int m = 0; m < N; m++)
        sum += (uint32_t)stage_i32(m + 1, max);
    return (int32_t)sum;
}

typedef struct {
    adag_dag_h dag;
    shape_t shape;
    int from_stage;
    unsigned runs;
    uint64_t salt;
    adag_status_t st;      /* the first failure */
    char msg[1024];
    _Atomic unsigned ok;   /* executions checked (read by the test thread) */
} runner_t;

static void input_of(uint64_t k, uint64_t salt, int32_t *x)
{
    for (unsigned i = 0; i < ELEMS; i++)
        x[i] = (int32_t)((k * 7 + i * 13 + salt) % 2001) - 1000;
}

/* runs executions, INFLIGHT at once, checking each; stops at the first
 * failure */
static void *run(void *arg)
{
    runner_t *r = arg;
    adag_ref_t refs[INFLIGHT];
    uint64_t next = 0, done = 0;
    r->st = ADAG_OK;
    while (done < r->runs && r->st == ADAG_OK) {
        while (next < r->runs && next < done + INFLIGHT) {
            int32_t x[ELEMS];
            input_of(next, r->salt, x);
            adag_value_t v = {.data = x, .size = sizeof(x), .kind = ADAG_VALUE_TENSOR,
                              .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {ELEMS}};
            if ((r->st = adag_dag_execute(r->dag, &v, 1, 0, &refs[next % INFLIGHT])) != ADAG_OK)
                break;
            next++;
        }
        if (r->st != ADAG_OK)
            break;
        adag_value_t out[N];
        if ((r->st = adag_dag_get(r->dag, refs[done % INFLIGHT], out, N, 20000)) != ADAG_OK)
            break;
        int32_t x[ELEMS];
        input_of(done, r->salt, x);
        for (unsigned m = 0; m < N && r->st == ADAG_OK; m++)
            for (unsigned i = 0; i < ELEMS; i++) {
                int32_t got, want = reference(r->shape, r->from_stage, x[i]);
                memcpy(&got, (const char *)out[m].data + 4 * i, 4);
                if (got != want) {
                    r->st = ADAG_ERR_INTERNAL;
                    snprintf(r->msg, sizeof(r->msg), "execution %llu, member %u, element %u: "
                             "%d, the reference says %d", (unsigned long long)done, m, i, got,
                             want);
                    return NULL;
                }
            }
        adag_dag_release(r->dag, refs[done % INFLIGHT]);
        done++;
        r->ok++;
    }
    if (r->st != ADAG_OK && !r->msg[0])
        snprintf(r->msg, sizeof(r->msg), "%s", adag_last_error());
    return NULL;
}

/* What adag_dag_stats says of the DAG's communicators. */
static void comms_are(adag_dag_h dag, unsigned n, unsigned shared)
{
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &st));
    cr_assert_eq(st.communicators, n, "%u communicators", st.communicators);
    cr_assert_eq(st.shared_communicators, shared, "%u shared", st.shared_communicators);
}

static void run_both(runner_t *r1, runner_t *r2)
{
    pthread_t t1, t2;
    cr_assert_eq(pthread_create(&t1, NULL, run, r1), 0);
    cr_assert_eq(pthread_create(&t2, NULL, run, r2), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
}

static void two_dags_at_once(adag_placement_t pl, int on_host)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[N];
    members_make(rt, pl, on_host, a);
    adag_dag_h prefill = build(rt, a, PREFILL, NULL, 0);
    adag_dag_h decode = build(rt, a, DECODE, NULL, 0);
    comms_are(prefill, 1, 1);
    comms_are(decode, 1, 1);
    runner_t r1 = {.dag = prefill, .shape = PREFILL, .runs = 150, .salt = 1};
    runner_t r2 = {.dag = decode, .shape = DECODE, .runs = 150, .salt = 2};
    run_both(&r1, &r2);
    cr_assert_eq(r1.st, ADAG_OK, "prefill: %s: %s", adag_status_str(r1.st), r1.msg);
    cr_assert_eq(r2.st, ADAG_OK, "decode: %s: %s", adag_status_str(r2.st), r2.msg);
    /* one goes; the other keeps the communicator and runs on */
    ASSERT_OK(adag_dag_destroy(prefill));
    comms_are(decode, 1, 0);
    r2 = (runner_t){.dag = decode, .shape = DECODE, .runs = 20, .salt = 3};
    run(&r2);
    cr_assert_eq(r2.st, ADAG_OK, "decode after prefill went: %s", r2.msg);
    /* a new DAG joins the communicator decode holds */
    prefill = build(rt, a, PREFILL, NULL, 0);
    comms_are(prefill, 1, 1);
    r1 = (runner_t){.dag = prefill, .shape = PREFILL, .runs = 40, .salt = 4};
    r2 = (runner_t){.dag = decode, .shape = DECODE, .runs = 40, .salt = 5};
    run_both(&r1, &r2);
    cr_assert_eq(r1.st, ADAG_OK, "the new prefill: %s", r1.msg);
    cr_assert_eq(r2.st, ADAG_OK, "decode beside the new prefill: %s", r2.msg);
    ASSERT_OK(adag_dag_destroy(prefill));
    ASSERT_OK(adag_dag_destroy(decode));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(collective_shared, two_dags_at_once_process, .timeout = 180)
{
    two_dags_at_once(ADAG_PLACEMENT_PROCESS, 0);
}

Test(collective_shared, two_dags_at_once_thread, .timeout = 180)
{
    two_dags_at_once(ADAG_PLACEMENT_THREAD, 0);
}

Test(collective_shared, two_dags_at_once_host_actors, .timeout = 180)
{
    two_dags_at_once(ADAG_PLACEMENT_PROCESS, 1);
}

/* Prefill reads its input through a slow actor W outside the group; W is
 * killed while prefill has executions published (tickets its members never
 * run: they wait for W's value). Prefill fails with ADAG_ERR_ACTOR_DIED;
 * decode, whose turns come after those tickets, runs on without waiting
 * for its comm timeout; then a new DAG over the members runs too. */
Test(collective_shared, a_failed_dag_leaves_the_others_working, .timeout = 180)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[N];
    members_make(rt, ADAG_PLACEMENT_PROCESS, 0, a);
    adag_actor_h w = h_gpu_stage(rt, ADAG_PLACEMENT_PROCESS, "w", NULL, 9, 300000);
    adag_dag_h prefill = build(rt, a, PREFILL, w, 0);
    adag_dag_h decode = build(rt, a, DECODE, NULL, 10000);
    runner_t r1 = {.dag = prefill, .shape = PREFILL, .from_stage = 9, .runs = 2, .salt = 6};
    run(&r1);
    cr_assert_eq(r1.st, ADAG_OK, "prefill: %s", r1.msg);
    /* two prefill executions published, then W dies */
    int32_t x[ELEMS];
    input_of(0, 0, x);
    adag_value_t v = {.data = x, .size = sizeof(x), .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {ELEMS}};
    adag_ref_t p1, p2;
    ASSERT_OK(adag_dag_execute(prefill, &v, 1, 0, &p1));
    ASSERT_OK(adag_dag_execute(prefill, &v, 1, 0, &p2));
    runner_t r2 = {.dag = decode, .shape = DECODE, .runs = 30, .salt = 7};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, run, &r2), 0);
    cr_assert_eq(kill(adag_actor_pid(w), SIGKILL), 0);
    int64_t t0 = adag__now_ns();
    pthread_join(t, NULL);
    double ms = (double)(adag__now_ns() - t0) / 1e6;
    cr_assert_eq(r2.st, ADAG_OK, "decode: %s: %s", adag_status_str(r2.st), r2.msg);
    cr_assert_lt(ms, 8000.0, "decode waited %.0f ms behind the failed DAG's tickets", ms);
    adag_value_t out[N];
    adag_status_t st = adag_dag_get(prefill, p1, out, N, 20000);
    cr_assert_eq(st, ADAG_ERR_ACTOR_DIED, "prefill: %s: %s", adag_status_str(st),
                 adag_last_error());
    ASSERT_OK(adag_dag_destroy(prefill));
    r2 = (runner_t){.dag = decode, .shape = DECODE, .runs = 10, .salt = 8};
    run(&r2);
    cr_assert_eq(r2.st, ADAG_OK, "decode after prefill was destroyed: %s", r2.msg);
    /* the failure closed the shared communicator to new DAGs: a new one */
    adag_dag_h again = build(rt, a, PREFILL, NULL, 0);
    comms_are(again, 1, 0);
    r1 = (runner_t){.dag = again, .shape = PREFILL, .runs = 10, .salt = 9};
    run(&r1);
    cr_assert_eq(r1.st, ADAG_OK, "a new DAG over the members: %s", r1.msg);
    ASSERT_OK(adag_dag_destroy(again));
    ASSERT_OK(adag_dag_destroy(decode));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* A member killed while both DAGs run: both fail (each has the member),
 * neither hangs, and both are destroyed promptly. */
Test(collective_shared, a_killed_member_fails_both, .timeout = 180)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[N];
    members_make(rt, ADAG_PLACEMENT_PROCESS, 0, a);
    adag_dag_h prefill = build(rt, a, PREFILL, NULL, 0);
    adag_dag_h decode = build(rt, a, DECODE, NULL, 0);
    runner_t r1 = {.dag = prefill, .shape = PREFILL, .runs = 100000, .salt = 1};
    runner_t r2 = {.dag = decode, .shape = DECODE, .runs = 100000, .salt = 2};
    pthread_t t1, t2;
    cr_assert_eq(pthread_create(&t1, NULL, run, &r1), 0);
    cr_assert_eq(pthread_create(&t2, NULL, run, &r2), 0);
    while (r1.ok < 20 || r2.ok < 20)
        usleep(1000);
    cr_assert_eq(kill(adag_actor_pid(a[2]), SIGKILL), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    cr_assert_eq(r1.st, ADAG_ERR_ACTOR_DIED, "prefill: %s: %s", adag_status_str(r1.st), r1.msg);
    cr_assert_eq(r2.st, ADAG_ERR_ACTOR_DIED, "decode: %s: %s", adag_status_str(r2.st), r2.msg);
    int64_t t0 = adag__now_ns();
    ASSERT_OK(adag_dag_destroy(prefill));
    ASSERT_OK(adag_dag_destroy(decode));
    cr_assert_lt((double)(adag__now_ns() - t0) / 1e6, 6000.0);
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* Runs r on a thread of its own, recording when it stopped. */
typedef struct {
    runner_t *r;
    _Atomic int64_t ended_ns;
} timed_runner_t;

static void *run_timed(void *arg)
{
    timed_runner_t *t = arg;
    run(t->r);
    atomic_store(&t->ended_ns, adag__now_ns());
    return NULL;
}

/* "DAG <name>" of the DAG named after the API call that reported msg
 * ("adag_dag_get: DAG dag3: ..."). */
static void failed_dag(const char *msg, char *out, size_t len)
{
    const char *p = strstr(msg, ": DAG ");
    cr_assert(p, "no DAG named in %s", msg);
    p += strlen(": DAG ");
    int n = (int)strcspn(p, ":");
    snprintf(out, len, "DAG %.*s", n, p);
}

/* One member SIGSTOPped while both DAGs run (each from its own thread,
 * with executions in flight): both DAGs fail within the comm timeout plus
 * slack -- one names the collective and the stopped member, the other the
 * member too or the DAG whose failure broke the communicator they share --
 * and neither runs out its gets' own 20 s. Once the member is continued,
 * teardown is prompt and leaves nothing behind. */
static void a_stopped_member_fails_both(int on_host)
{
    enum { COMM_TIMEOUT_MS = 1000 };
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[N];
    members_make(rt, ADAG_PLACEMENT_PROCESS, on_host, a);
    adag_dag_h prefill = build(rt, a, PREFILL, NULL, COMM_TIMEOUT_MS);
    adag_dag_h decode = build(rt, a, DECODE, NULL, COMM_TIMEOUT_MS);
    runner_t r1 = {.dag = prefill, .shape = PREFILL, .runs = 100000000, .salt = 1};
    runner_t r2 = {.dag = decode, .shape = DECODE, .runs = 100000000, .salt = 2};
    timed_runner_t t1 = {.r = &r1}, t2 = {.r = &r2};
    pthread_t th1, th2;
    cr_assert_eq(pthread_create(&th1, NULL, run_timed, &t1), 0);
    cr_assert_eq(pthread_create(&th2, NULL, run_timed, &t2), 0);
    while ((r1.ok < 20 || r2.ok < 20) && !atomic_load(&t1.ended_ns) &&
           !atomic_load(&t2.ended_ns))
        usleep(1000);
    pid_t m2 = adag_actor_pid(a[2]);
    cr_assert_eq(kill(m2, SIGSTOP), 0);
    int64_t t0 = adag__now_ns();
    pthread_join(th1, NULL);
    pthread_join(th2, NULL);
    double ms1 = (double)(atomic_load(&t1.ended_ns) - t0) / 1e6;
    double ms2 = (double)(atomic_load(&t2.ended_ns) - t0) / 1e6;
    cr_log_info("prefill failed after %.0f ms: %s: %s", ms1, adag_status_str(r1.st), r1.msg);
    cr_log_info("decode failed after %.0f ms: %s: %s", ms2, adag_status_str(r2.st), r2.msg);
    cr_assert_neq(r1.st, ADAG_OK, "prefill did not fail");
    cr_assert_neq(r2.st, ADAG_OK, "decode did not fail");
    /* each fails for the communication fault (a get's own timeout would
     * be ADAG_ERR_TIMEOUT too: the bound below tells them apart) */
    cr_assert(r1.st == ADAG_ERR_TIMEOUT || r1.st == ADAG_ERR_CLOSED, "prefill: %s: %s",
              adag_status_str(r1.st), r1.msg);
    cr_assert(r2.st == ADAG_ERR_TIMEOUT || r2.st == ADAG_ERR_CLOSED, "decode: %s: %s",
              adag_status_str(r2.st), r2.msg);
    /* the comm timeout, once per DAG at most, plus generous slack; a get
     * that runs out its own 20 s is far past it */
    cr_assert_lt(ms1, 4.0 * COMM_TIMEOUT_MS + 6000.0, "prefill failed after %.0f ms: %s", ms1,
                 r1.msg);
    cr_assert_lt(ms2, 4.0 * COMM_TIMEOUT_MS + 6000.0, "decode failed after %.0f ms: %s", ms2,
                 r2.msg);
    /* each message names the cause: the stopped member, or the other DAG
     * (whose failure in a collective broke the communicator they share, or
     * whose turn on it did not end) */
    char pname[80], dname[80];
    failed_dag(r1.msg, pname, sizeof(pname));
    failed_dag(r2.msg, dname, sizeof(dname));
    cr_assert(strstr(r1.msg, "m2") || strstr(r1.msg, dname), "prefill: %s", r1.msg);
    cr_assert(strstr(r2.msg, "m2") || strstr(r2.msg, pname), "decode: %s", r2.msg);
    cr_assert(strstr(r1.msg, "m2") || strstr(r2.msg, "m2"),
              "neither message names the stopped member m2:\nprefill: %s\ndecode: %s", r1.msg,
              r2.msg);
    /* a failed DAG refuses new executions with its failure, not AGAIN */
    int32_t x[ELEMS];
    input_of(0, 0, x);
    adag_value_t v = {.data = x, .size = sizeof(x), .kind = ADAG_VALUE_TENSOR,
                      .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {ELEMS}};
    adag_ref_t ref;
    adag_status_t st = adag_dag_execute(decode, &v, 1, 0, &ref);
    cr_assert(st != ADAG_OK && st != ADAG_ERR_AGAIN, "decode's execute after it failed: %s: %s",
              adag_status_str(st), adag_last_error());
    st = adag_dag_execute(prefill, &v, 1, 0, &ref);
    cr_assert(st != ADAG_OK && st != ADAG_ERR_AGAIN, "prefill's execute after it failed: %s: %s",
              adag_status_str(st), adag_last_error());
    cr_assert_eq(kill(m2, SIGCONT), 0);
    int64_t t1_ns = adag__now_ns();
    ASSERT_OK(adag_dag_destroy(prefill));
    ASSERT_OK(adag_dag_destroy(decode));
    ASSERT_OK(adag_runtime_destroy(rt));
    double down = (double)(adag__now_ns() - t1_ns) / 1e6;
    cr_assert_lt(down, 10000.0, "teardown took %.0f ms", down);
    h_assert_clean(&snap);
}

Test(collective_shared, a_stopped_member_fails_both, .timeout = 180)
{
    a_stopped_member_fails_both(0);
}

Test(collective_shared, a_stopped_host_actor_fails_both, .timeout = 180)
{
    a_stopped_member_fails_both(1);
}

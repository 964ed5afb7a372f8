/*
 * Suite "faults": dead actors, crashes, teardown with work in flight,
 * signals in the driver and a killed driver. After each, nothing is left
 * behind: no child process, no fd, no shared-memory mapping.
 */
#include "helpers.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* Building and compiling a graph over a dead actor fails with
 * ADAG_ERR_INVALID (compile refuses it; bind refuses a destroyed actor)
 * and a message naming the actor. */
static void graph_over_dead_actor_fails(adag_runtime_h rt, adag_actor_h dead, const char *name)
{
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0), x = NULL;
    adag_status_t st = adag_graph_bind(g, dead, "add", &in, 1, &x);
    if (st == ADAG_OK) {
        ASSERT_OK(adag_graph_output(g, &x, 1));
        adag_dag_h dag = NULL;
        st = adag_graph_compile(g, NULL, &dag);
    }
    ASSERT_ST(st, ADAG_ERR_INVALID);
    ASSERT_MSG_HAS(name);
    ASSERT_OK(adag_graph_destroy(g));
}

/* ---------------------------------------------------------------- */
/* Dead actors                                                       */
/* ---------------------------------------------------------------- */

Test(faults, sigkill_middle_actor, .timeout = 60)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    /* first.add -> middle.sleep_ms -> last.add */
    adag_actor_h actors[3];
    adag_dag_h dag = H_DAG(rt, .pl = ADAG_PLACEMENT_PROCESS, .n = 3,
                           .names = (const char *const[]){"first", "middle", "last"},
                           .offsets = (const int64_t[]){0, 0, 1},
                           .methods = (const char *const[]){"add", "sleep_ms", "add"},
                           .max_inflight = 8, .actors = actors);
    adag_actor_h middle = actors[1];
    cr_assert(h_count_memfd_maps() > snap.memfd_maps, "no memfd mapping while a DAG lives");
    cr_assert_eq(h_roundtrip(dag, 1), 2);

    enum { N = 6 };
    adag_ref_t refs[N];
    for (int i = 0; i < N; i++)
        refs[i] = h_execute(dag, 100);
    h_sleep_ms(30);
    pid_t pid = adag_actor_pid(middle);
    cr_assert(pid > 0);
    cr_assert_eq(kill(pid, SIGKILL), 0, "kill: %s", strerror(errno));
    double t_kill = h_now_ms();

    for (int i = 0; i < N; i++) {
        adag_value_t out;
        int left = (int)(t_kill + 1000 - h_now_ms());
        ASSERT_ST(adag_dag_get(dag, refs[i], &out, 1, left > 0 ? left : 0), ADAG_ERR_ACTOR_DIED);
        ASSERT_MSG_HAS("middle");
    }
    double took = h_now_ms() - t_kill;
    cr_assert(took <= 1100, "pending gets took %.0f ms after the kill", took);

    int fd = -1;
    ASSERT_OK(adag_dag_fd(dag, &fd));
    cr_assert(h_fd_readable(fd, 0), "the fd of a failed DAG is not readable");

    /* later calls fail the same way */
    int64_t one = 1;
    adag_value_t v = h_i64v(&one), out;
    adag_ref_t ref;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_ACTOR_DIED);
    ASSERT_MSG_HAS("middle");
    ASSERT_ST(adag_dag_get(dag, refs[0], &out, 1, 1000), ADAG_ERR_ACTOR_DIED);
    ASSERT_MSG_HAS("middle");
    for (int i = 0; i < N; i++)
        (void)adag_dag_release(dag, refs[i]);

    double t0 = h_now_ms();
    ASSERT_OK(adag_dag_destroy(dag));
    double dt = h_now_ms() - t0;
    cr_assert(dt < 2000, "adag_dag_destroy of a failed DAG took %.0f ms", dt);
    t0 = h_now_ms();
    ASSERT_OK(adag_runtime_destroy(rt));
    dt = h_now_ms() - t0;
    cr_assert(dt < 3000, "adag_runtime_destroy took %.0f ms", dt);
    h_assert_clean(&snap);
}

Test(faults, method_crashes_worker, .timeout = 60)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    /* before.add -> crasher.crash_if -> after.add */
    adag_actor_h actors[3];
    adag_dag_h dag = H_DAG(rt, .pl = ADAG_PLACEMENT_PROCESS, .n = 3,
                           .names = (const char *const[]){"before", "crasher", "after"},
                           .offsets = (const int64_t[]){1, 0, 10},
                           .methods = (const char *const[]){"add", "crash_if", "add"},
                           .max_inflight = 4, .actors = actors);
    adag_actor_h a = actors[0], c = actors[1];
    cr_assert_eq(h_roundtrip(dag, 5), 16);

    adag_value_t out;
    adag_ref_t ref = h_execute(dag, 665); /* 665 + 1 = 666 at the crasher */
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 5000), ADAG_ERR_ACTOR_DIED);
    ASSERT_MSG_HAS("crasher");
    (void)adag_dag_release(dag, ref);
    int64_t good = 1;
    adag_value_t v = h_i64v(&good);
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_ERR_ACTOR_DIED);
    ASSERT_MSG_HAS("crasher");
    double t0 = h_now_ms();
    ASSERT_OK(adag_dag_destroy(dag));
    cr_assert(h_now_ms() - t0 < 2000, "adag_dag_destroy took %.0f ms", h_now_ms() - t0);

    /* the runtime still makes new actors and DAGs */
    adag_actor_h n = h_counter(rt, ADAG_PLACEMENT_PROCESS, "fresh", 3);
    adag_actor_h an[2] = {a, n};
    adag_graph_h g2 = h_chain_graph(rt, an, 2, "add");
    adag_dag_h dag2 = h_compile(g2, 0, 0);
    cr_assert_eq(h_roundtrip(dag2, 1), 5);
    /* a graph over the dead actor is refused */
    graph_over_dead_actor_fails(rt, c, "crasher");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

Test(faults, other_dag_survives, .timeout = 60)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h A = h_counter(rt, ADAG_PLACEMENT_PROCESS, "shared", 1);
    adag_actor_h B = h_counter(rt, ADAG_PLACEMENT_PROCESS, "victim", 10);
    adag_actor_h C = h_counter(rt, ADAG_PLACEMENT_PROCESS, "bystander", 100);
    adag_actor_h ab[2] = {A, B}, ac[2] = {A, C};
    adag_graph_h g1 = h_chain_graph(rt, ab, 2, "add");
    adag_graph_h g2 = h_chain_graph(rt, ac, 2, "add");
    adag_dag_h d1 = h_compile(g1, 4, 0);
    adag_dag_h d2 = h_compile(g2, 4, 0);
    cr_assert_eq(h_roundtrip(d1, 0), 11);
    cr_assert_eq(h_roundtrip(d2, 0), 101);

    cr_assert_eq(kill(adag_actor_pid(B), SIGKILL), 0);
    int64_t x = 5;
    adag_value_t v = h_i64v(&x), out;
    adag_ref_t ref;
    adag_status_t st = adag_dag_execute(d1, &v, 1, 0, &ref);
    if (st == ADAG_OK) {
        ASSERT_ST(adag_dag_get(d1, ref, &out, 1, 2000), ADAG_ERR_ACTOR_DIED);
        (void)adag_dag_release(d1, ref);
    } else {
        ASSERT_ST(st, ADAG_ERR_ACTOR_DIED);
    }
    ASSERT_MSG_HAS("victim");

    /* d2 does not contain the dead actor: it keeps working, pipelined too */
    for (int64_t i = 0; i < 20; i++)
        cr_assert_eq(h_roundtrip(d2, i), i + 101);
    adag_ref_t refs[4];
    for (int i = 0; i < 4; i++)
        refs[i] = h_execute(d2, 1000 + i);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(h_get_i64(d2, refs[i], 10000), 1000 + i + 101);
        ASSERT_OK(adag_dag_release(d2, refs[i]));
    }
    ASSERT_OK(adag_dag_destroy(d1));
    cr_assert_eq(h_roundtrip(d2, 7), 108);
    ASSERT_OK(adag_dag_destroy(d2));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

Test(faults, idle_actor_killed_without_dag, .timeout = 30)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_PROCESS, "idle", 0);
    cr_assert_eq(kill(adag_actor_pid(a), SIGKILL), 0);
    h_sleep_ms(50);
    /* compiling over a dead actor fails, naming it */
    graph_over_dead_actor_fails(rt, a, "idle");
    double t0 = h_now_ms();
    ASSERT_OK(adag_runtime_destroy(rt));
    cr_assert(h_now_ms() - t0 < 3000, "adag_runtime_destroy took %.0f ms", h_now_ms() - t0);
    h_assert_clean(&snap);
}

/* ---------------------------------------------------------------- */
/* Teardown                                                          */
/* ---------------------------------------------------------------- */

static void teardown_in_flight(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = pl, .n = 2, .names = (const char *const[]){"sleepy", "next"},
                           .offsets = (const int64_t[]){0, 1},
                           .methods = (const char *const[]){"sleep_ms", "add"}, .max_inflight = 8);
    if (pl == ADAG_PLACEMENT_PROCESS)
        cr_assert(h_count_memfd_maps() > snap.memfd_maps, "no memfd mapping while a DAG lives");
    for (int i = 0; i < 5; i++)
        (void)h_execute(dag, 200);
    h_sleep_ms(20);
    double t0 = h_now_ms();
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
    double dt = h_now_ms() - t0;
    cr_assert(dt < 4000, "teardown with work in flight took %.0f ms", dt);
    h_assert_clean(&snap);
}
H_BOTH(faults, teardown_in_flight, 30)

/* Executions queued behind a running method are abandoned by
 * adag_dag_destroy, not run: 8 x 300 ms queued, destroy returns after about
 * one method (the margin is wide: < 1.5 s where running them all takes 2.4 s). */
static void teardown_abandons_queued(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "queued", .method = "sleep_ms", .max_inflight = 8,
                           .teardown_timeout = 10000);
    for (int i = 0; i < 8; i++)
        (void)h_execute(dag, 300);
    h_sleep_ms(50);
    double t0 = h_now_ms();
    ASSERT_OK(adag_dag_destroy(dag));
    double dt = h_now_ms() - t0;
    cr_assert(dt < 1500,
              "adag_dag_destroy took %.0f ms: the queued executions were run, not abandoned", dt);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(faults, teardown_abandons_queued, 30)

/* Only the runtime is destroyed: it destroys the DAGs and actors itself. */
Test(faults, runtime_destroy_in_flight, .timeout = 30)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[3];
    h_counters(rt, ADAG_PLACEMENT_PROCESS, "r", 2, NULL, a);
    a[2] = h_counter(rt, ADAG_PLACEMENT_THREAD, "r_thread", 0);
    /* two DAGs over the same actors: a sleepy one and a chain */
    h_stage_t sleepy[3] = {{a[0], "sleep_ms"}, {a[1], "add"}, {a[2], "add"}};
    adag_dag_h dsleep = h_compile(h_stages_graph(rt, sleepy, 3), 4, 0);
    adag_dag_h dchain = h_compile(h_chain_graph(rt, a, 3, "add"), 4, 0);
    for (int i = 0; i < 3; i++) {
        (void)h_execute(dsleep, 300);
        (void)h_execute(dchain, 300);
    }
    h_sleep_ms(20);
    double t0 = h_now_ms();
    ASSERT_OK(adag_runtime_destroy(rt));
    cr_assert(h_now_ms() - t0 < 4000, "adag_runtime_destroy took %.0f ms", h_now_ms() - t0);
    h_assert_clean(&snap);
}

/* A method that does not return within the teardown timeout: its worker is
 * killed and teardown completes. */
Test(faults, teardown_kills_stuck_worker, .timeout = 30)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = ADAG_PLACEMENT_PROCESS, .name = "stuck", .method = "sleep_ms",
                           .max_inflight = 2, .teardown_timeout = 500);
    (void)h_execute(dag, 20000);
    h_sleep_ms(50);
    double t0 = h_now_ms();
    ASSERT_OK(adag_dag_destroy(dag));
    double dt = h_now_ms() - t0;
    cr_assert(dt < 3000, "adag_dag_destroy with a stuck method took %.0f ms (timeout 500)", dt);
    ASSERT_OK(adag_runtime_destroy(rt));
    cr_assert(h_now_ms() - t0 < 8000, "teardown took %.0f ms", h_now_ms() - t0);
    h_assert_clean(&snap);
}

/* adag_dag_destroy while other threads are blocked in get and execute. */
struct blocked_call {
    adag_dag_h dag;
    adag_ref_t ref;
    int is_get;
    adag_status_t st;
    char msg[512];
};

static void *blocked_fn(void *arg)
{
    struct blocked_call *c = arg;
    if (c->is_get) {
        adag_value_t out;
        c->st = adag_dag_get(c->dag, c->ref, &out, 1, -1);
    } else {
        int64_t x = 1;
        adag_value_t v = {.data = &x, .size = sizeof(x)};
        adag_ref_t r;
        c->st = adag_dag_execute(c->dag, &v, 1, 0, &r);
    }
    snprintf(c->msg, sizeof(c->msg), "%s", adag_last_error());
    return NULL;
}

static void destroy_while_blocked(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    /* one slot, executes wait forever for room */
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "blocker", .method = "sleep_ms", .max_inflight = 1,
                           .exec_timeout = -1);
    adag_ref_t ref = h_execute(dag, 1000);

    struct blocked_call get = {.dag = dag, .ref = ref, .is_get = 1, .st = ADAG_OK};
    struct blocked_call exe = {.dag = dag, .is_get = 0, .st = ADAG_OK};
    pthread_t t1, t2;
    cr_assert_eq(pthread_create(&t1, NULL, blocked_fn, &get), 0);
    cr_assert_eq(pthread_create(&t2, NULL, blocked_fn, &exe), 0);
    h_sleep_ms(200);
    double t0 = h_now_ms();
    ASSERT_OK(adag_dag_destroy(dag));
    double dt = h_now_ms() - t0;
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    cr_assert_eq(get.st, ADAG_ERR_CLOSED, "blocked get returned %s (%s)",
                 adag_status_str(get.st), get.msg);
    cr_assert_eq(exe.st, ADAG_ERR_CLOSED, "blocked execute returned %s (%s)",
                 adag_status_str(exe.st), exe.msg);
    cr_assert(dt < 4000, "adag_dag_destroy took %.0f ms", dt);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(faults, destroy_while_blocked, 30)

/* ---------------------------------------------------------------- */
/* Signals                                                           */
/* ---------------------------------------------------------------- */

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

static void signal_interrupted_driver(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2];
    int64_t off[2] = {3, 40};
    h_counters(rt, pl, "sig", 2, off, a);
    adag_actor_h sl = h_counter(rt, pl, "sig_sleeper", 0);
    adag_dag_h dag = h_compile(h_chain_graph(rt, a, 2, "add"), 4, 0);
    adag_dag_h dsleep = h_compile(h_chain_graph(rt, &sl, 1, "sleep_ms"), 2, 0);

    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sa.sa_flags = 0; /* no SA_RESTART: system calls fail with EINTR */
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGALRM, &sa, &old), 0);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);

    enum { N = 2000, W = 4 };
    adag_ref_t refs[W];
    int64_t xs[W];
    for (int i = 0; i < N; i += W) {
        for (int k = 0; k < W; k++) {
            xs[k] = i + k;
            refs[k] = h_execute(dag, xs[k]);
        }
        for (int k = 0; k < W; k++) {
            cr_assert_eq(h_get_i64(dag, refs[k], 10000), xs[k] + 43);
            ASSERT_OK(adag_dag_release(dag, refs[k]));
        }
    }
    /* waits that sleep: gets on a 5 ms method, and a get that times out */
    for (int i = 0; i < 30; i++)
        cr_assert_eq(h_roundtrip(dsleep, 5), 5);
    adag_value_t out;
    adag_ref_t ref = h_execute(dsleep, 300);
    double t0 = h_now_ms();
    ASSERT_ST(adag_dag_get(dsleep, ref, &out, 1, 50), ADAG_ERR_TIMEOUT);
    double dt = h_now_ms() - t0;
    cr_assert(dt >= 40, "get(timeout 50) returned TIMEOUT after %.1f ms: EINTR cut it short",
              dt);
    cr_assert_eq(h_get_i64(dsleep, ref, 10000), 300);
    ASSERT_OK(adag_dag_release(dsleep, ref));

    /* teardown under signals too */
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
    struct itimerval off_it;
    memset(&off_it, 0, sizeof(off_it));
    setitimer(ITIMER_REAL, &off_it, NULL);
    sigaction(SIGALRM, &old, NULL);
    cr_assert(alarms > 10, "only %d SIGALRMs were delivered", (int)alarms);
    cr_assert_eq(h_wait_no_children(2000), 0);
}
H_BOTH(faults, signal_interrupted_driver, 60)

/* ---------------------------------------------------------------- */
/* The driver is killed                                              */
/* ---------------------------------------------------------------- */

/* In the forked child driver: no Criterion asserts, exit codes only. */
static void child_driver(int wfd)
{
    adag_runtime_h rt = NULL;
    if (adag_runtime_create(NULL, &rt) != ADAG_OK)
        _exit(10);
    adag_actor_h a[2];
    for (int i = 0; i < 2; i++) {
        adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
        if (adag_actor_create(rt, &p, &a[i]) != ADAG_OK)
            _exit(11);
    }
    adag_graph_h g = NULL;
    adag_dag_h dag = NULL;
    h_stage_t st[2] = {{a[0], "add"}, {a[1], "sleep_ms"}};
    if (h_try_chain(rt, st, 2, NULL, &g, &dag, NULL) != ADAG_OK)
        _exit(12);
    /* one round trip, then leave an execution in flight */
    int64_t v64 = 1;
    adag_value_t v = {.data = &v64, .size = sizeof(v64)}, out;
    adag_ref_t ref;
    if (adag_dag_execute(dag, &v, 1, 0, &ref) || adag_dag_get(dag, ref, &out, 1, 10000) ||
        adag_dag_release(dag, ref))
        _exit(13);
    v64 = 100000;
    if (adag_dag_execute(dag, &v, 1, 0, &ref))
        _exit(14);
    int pids[2] = {adag_actor_pid(a[0]), adag_actor_pid(a[1])};
    if (write(wfd, pids, sizeof(pids)) != (ssize_t)sizeof(pids))
        _exit(15);
    for (;;)
        pause();
}

Test(faults, driver_killed, .timeout = 60)
{
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0, "prctl: %s", strerror(errno));
    h_child_driver_t c = h_fork_driver(child_driver);
    int raw[2] = {0, 0};
    h_read_report(&c, raw, sizeof(raw));
    cr_assert(raw[0] > 0 && raw[1] > 0 && raw[0] != raw[1], "worker pids %d %d", raw[0], raw[1]);
    h_kill_driver(&c);
    /* orphaned workers are reparented to this process (a subreaper) */
    pid_t pids[2] = {raw[0], raw[1]};
    char left[256];
    int n = h_wait_gone(pids, 2, 2000, left, sizeof(left));
    cr_assert_eq(n, 0, "%d worker(s) still alive 2 s after their driver was killed:%s", n, left);
    cr_assert_eq(h_children(NULL, 0, NULL), 0, "child processes left");
}

/* A worker does not inherit the driver's blocked signals: with SIGTERM
 * blocked in the driver's thread, SIGTERM still ends the worker, and the
 * death is reported with the signal. */
Test(faults, worker_does_not_inherit_blocked_signals, .timeout = 30)
{
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    cr_assert_eq(pthread_sigmask(SIG_BLOCK, &term, &old), 0);
    adag_runtime_h rt = h_runtime();
    adag_actor_h a;
    adag_dag_h dag = H_DAG(rt, .pl = ADAG_PLACEMENT_PROCESS, .name = "termed", .method = "add",
                           .max_inflight = 2, .actors = &a);
    cr_assert_eq(h_roundtrip(dag, 1), 1);
    cr_assert_eq(kill(adag_actor_pid(a), SIGTERM), 0);
    int64_t x = 1;
    adag_value_t v = h_i64v(&x), out;
    adag_ref_t ref;
    adag_status_t st = adag_dag_execute(dag, &v, 1, 0, &ref);
    if (st == ADAG_OK)
        st = adag_dag_get(dag, ref, &out, 1, 5000);
    ASSERT_ST(st, ADAG_ERR_ACTOR_DIED);
    ASSERT_MSG_HAS("termed");
    ASSERT_MSG_HAS("SIGTERM");
    ASSERT_OK(adag_runtime_destroy(rt));
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* A worker that segfaults or calls exit() is reported as dead within 1 s,
 * with how it died. (Under ASan a segfault is reported by ASan, which then
 * exits with status 1.) */
static void worker_dies_by(int64_t how, const char *expect, const char *expect_san)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = ADAG_PLACEMENT_PROCESS, .name = "mortal", .method = "die_if",
                           .max_inflight = 2);
    cr_assert_eq(h_roundtrip(dag, 1), 1);
    adag_value_t out;
    adag_ref_t ref = h_execute(dag, how);
    double t0 = h_now_ms();
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 1000), ADAG_ERR_ACTOR_DIED);
    cr_assert(h_now_ms() - t0 < 1000, "death noticed after %.0f ms", h_now_ms() - t0);
    ASSERT_MSG_HAS("mortal");
    cr_assert(strstr(h_msg(), expect) || strstr(h_msg(), expect_san), "message \"%s\" lacks \"%s\"",
              h_msg(), expect);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

Test(faults, worker_segfaults, .timeout = 30)
{
    worker_dies_by(11, "SIGSEGV", "exited with status 1");
}

Test(faults, worker_exits, .timeout = 30)
{
    worker_dies_by(7, "exited with status 7", "exited with status 7");
}

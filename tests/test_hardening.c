/*
 * Suite "hardening": one DAG driven by several threads, methods returning
 * odd codes, the DAG fd under load, misuse and validation gaps (each once a
 * real fault of the core). The driver and host faults are in
 * test_hostile.c.
 */
#include "helpers.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- */
/* 5. Concurrent executes honour NONBLOCK and timeouts               */
/* ---------------------------------------------------------------- */

struct exec_thread {
    adag_dag_h dag;
    unsigned flags;
    adag_status_t st;
    double took_ms;
    adag_ref_t ref;
    char msg[512];
};

static void *exec_fn(void *arg)
{
    struct exec_thread *t = arg;
    int64_t x = 1;
    adag_value_t v = {.data = &x, .size = sizeof(x)};
    double t0 = h_now_ms();
    t->st = adag_dag_execute(t->dag, &v, 1, t->flags, &t->ref);
    t->took_ms = h_now_ms() - t0;
    snprintf(t->msg, sizeof(t->msg), "%s", adag_last_error());
    return NULL;
}

/* A DAG of one sleepy actor with a full window: ref 0 runs and is not
 * released, so every further execute waits for room. */
static adag_dag_h full_window(adag_runtime_h rt, adag_placement_t pl, int exec_timeout,
                              adag_ref_t *ref0)
{
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "sleepy", .method = "sleep_ms", .max_inflight = 1,
                           .exec_timeout = exec_timeout);
    *ref0 = h_execute(dag, 10);
    return dag;
}

static void nonblock_while_other_waits(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_ref_t ref0;
    adag_dag_h dag = full_window(rt, pl, 3000, &ref0);
    struct exec_thread waiter = {.dag = dag, .flags = 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, exec_fn, &waiter), 0);
    h_sleep_ms(100); /* it waits for room now */
    struct exec_thread nb = {.dag = dag, .flags = ADAG_EXECUTE_NONBLOCK};
    exec_fn(&nb);
    cr_assert_eq(nb.st, ADAG_ERR_AGAIN, "NONBLOCK execute returned %s (%s)",
                 adag_status_str(nb.st), nb.msg);
    cr_assert(nb.took_ms < 500, "NONBLOCK execute blocked %.0f ms behind a waiting thread",
              nb.took_ms);
    /* the waiter gets its room once ref 0 is released */
    adag_value_t out;
    ASSERT_OK(adag_dag_get(dag, ref0, &out, 1, 5000));
    ASSERT_OK(adag_dag_release(dag, ref0));
    pthread_join(t, NULL);
    cr_assert_eq(waiter.st, ADAG_OK, "the waiting execute returned %s (%s)",
                 adag_status_str(waiter.st), waiter.msg);
    cr_assert_eq(h_get_i64(dag, waiter.ref, 5000), 1);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(hardening, nonblock_while_other_waits, 30)

/* Five threads execute on a full window with a 300 ms timeout: each times
 * out after about 300 ms of its own, not one after the other. */
Test(hardening, concurrent_execute_timeouts, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_ref_t ref0;
    adag_dag_h dag = full_window(rt, ADAG_PLACEMENT_THREAD, 300, &ref0);
    enum { N = 5 };
    struct exec_thread th[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        th[i] = (struct exec_thread){.dag = dag, .flags = 0};
        cr_assert_eq(pthread_create(&t[i], NULL, exec_fn, &th[i]), 0);
    }
    double worst = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(th[i].st, ADAG_ERR_TIMEOUT, "thread %d: %s (%s)", i,
                     adag_status_str(th[i].st), th[i].msg);
        cr_assert(th[i].took_ms >= 290, "thread %d timed out after %.0f ms", i, th[i].took_ms);
        if (th[i].took_ms > worst)
            worst = th[i].took_ms;
    }
    cr_assert(worst < 1000, "an execute with a 300 ms timeout took %.0f ms among %d threads",
              worst, N);
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* A thread holding a reservation that executes and reserves again takes
 * the next refs at once (no deadlock, nothing refused); they start only
 * after its reservation commits, in ref order; with the window full of
 * its own reservations it waits for room like any caller and times out
 * naming the reserved ref. */
static void reserve_then_execute(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "zc", .offset = 5, .method = "add",
                           .max_inflight = 3, .cap = 64, .exec_timeout = 200);
    adag_input_view_t held, again;
    adag_ref_t r0, r2;
    ASSERT_OK(adag_dag_reserve(dag, 0, &held, 1, &r0));
    int64_t x = 1;
    adag_value_t v = h_i64v(&x);
    adag_ref_t r1;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &r1)); /* input 1 -> 6 */
    cr_assert_eq(r1, r0 + 1);
    ASSERT_OK(adag_dag_reserve(dag, 0, &again, 1, &r2));
    cr_assert_eq(r2, r0 + 2);
    adag_value_t out;
    ASSERT_ST(adag_dag_get(dag, r1, &out, 1, 100), ADAG_ERR_TIMEOUT);
    /* the window (3) is full: r0 is reserved, not committed */
    adag_ref_t r3;
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &r3), ADAG_ERR_TIMEOUT);
    ASSERT_MSG_HAS("ref 0 is reserved and not yet committed");
    /* the reservations still commit; everything then runs, in ref order */
    ASSERT_OK(h_commit_i64(dag, r2, &again, 50));
    ASSERT_OK(h_commit_i64(dag, r0, &held, 37));
    cr_assert_eq(h_get_i64(dag, r0, 5000), 42);
    cr_assert_eq(h_get_i64(dag, r1, 5000), 6);
    cr_assert_eq(h_get_i64(dag, r2, 5000), 55);
    for (adag_ref_t r = r0; r <= r2; r++)
        ASSERT_OK(adag_dag_release(dag, r));
    cr_assert_eq(h_roundtrip(dag, 1), 6);
    /* reserved, then destroyed by the same thread: dropped */
    ASSERT_OK(adag_dag_reserve(dag, 0, &held, 1, &r0));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(hardening, reserve_then_execute, 30)

/* ---------------------------------------------------------------- */
/* 6. Method status codes are normalized                              */
/* ---------------------------------------------------------------- */

static void method_codes(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a;
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "odd", .method = "ret_status", .max_inflight = 2,
                           .actors = &a);
    static const struct {
        int64_t code;
        const char *says;
    } cases[] = {
        {ADAG_ERR_TIMEOUT, "returned ADAG_ERR_TIMEOUT"},
        {ADAG_ERR_AGAIN, "returned ADAG_ERR_AGAIN"},
        {ADAG_ERR_CLOSED, "returned ADAG_ERR_CLOSED"},
        {ADAG_ERR_ACTOR_DIED, "returned ADAG_ERR_ACTOR_DIED"},
        {ADAG_ERR_TOO_LARGE, "returned ADAG_ERR_TOO_LARGE"},
        {5, "returned 5, which is not an adag status"},
        {-1000, "returned -1000, which is not an adag status"},
    };
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        adag_value_t out;
        adag_ref_t ref = h_execute(dag, cases[i].code);
        ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 5000), ADAG_ERR_METHOD);
        ASSERT_MSG_HAS("actor odd.ret_status");
        ASSERT_MSG_HAS(cases[i].says);
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    cr_assert_eq(h_roundtrip(dag, 0), 0); /* the DAG goes on */
    ASSERT_OK(adag_dag_destroy(dag));
    /* a failing adag_call_* keeps its own message */
    dag = h_compile(h_chain_graph(rt, &a, 1, "bad_arg"), 2, 0);
    adag_value_t out;
    adag_ref_t ref = h_execute(dag, 1);
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, 5000), ADAG_ERR_METHOD);
    ASSERT_MSG_HAS("actor odd.bad_arg");
    ASSERT_MSG_HAS("argument 3 does not exist");
    ASSERT_OK(adag_dag_release(dag, ref));
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(hardening, method_codes, 30)

/* ---------------------------------------------------------------- */
/* 7. The DAG fd is readable exactly while a result waits             */
/* ---------------------------------------------------------------- */

static void fd_exact_dags(adag_placement_t pl, int dags, int rounds)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[2];
    h_counters(rt, pl, "fdx", 2, NULL, a);
    for (int d = 0; d < dags; d++) {
        adag_dag_h dag = h_compile(h_chain_graph(rt, a, 2, "add"), 4, 0);
        int fd = -1;
        ASSERT_OK(adag_dag_fd(dag, &fd));
        cr_assert(!h_fd_readable(fd, 0), "DAG %d: readable before any execution", d);
        for (int r = 0; r < rounds; r++) {
            adag_value_t out;
            adag_ref_t ref = h_execute(dag, r);
            if (r % 2 == 0) {
                /* wait through the fd, as an event loop does */
                cr_assert(h_fd_readable(fd, 5000), "DAG %d round %d: not readable with a result",
                          d, r);
                ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 0));
            } else {
                /* or spin in get, so a loop's signal may land after it */
                ASSERT_OK(adag_dag_get(dag, ref, &out, 1, 5000));
            }
            cr_assert_eq(h_val_i64(out), r);
            ASSERT_OK(adag_dag_release(dag, ref));
            /* a late signal of the loop must not leave it readable */
            cr_assert(!h_fd_readable(fd, r % 5 == 0 ? 2 : 0),
                      "DAG %d round %d: readable after every ref was got and released", d, r);
        }
        ASSERT_OK(adag_dag_destroy(dag));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}
static void fd_exact(adag_placement_t pl)
{
    fd_exact_dags(pl, 20, 60);
}
H_BOTH(hardening, fd_exact, 60)

/* ---------------------------------------------------------------- */
/* 8. Validation gaps                                                 */
/* ---------------------------------------------------------------- */

Test(hardening, negative_timeouts_rejected, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_graph_h g = H_GRAPH(rt, .name = "t", .method = "add");
    adag_dag_h dag = NULL;
    adag_compile_params_t cp = h_compile_params(0, 0, -2, 0);
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("execute_timeout_ms -2");
    cp = h_compile_params(0, 0, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT;
    cp.teardown_timeout_ms = -1;
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("teardown_timeout_ms -1");
    cp = h_compile_params(0, 0, -1, 0); /* -1: forever, accepted */
    dag = h_compile_with(g, &cp);
    adag_value_t out;
    adag_ref_t ref = h_execute(dag, 1);
    ASSERT_ST(adag_dag_get(dag, ref, &out, 1, -2), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("timeout_ms -2");
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, -1));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(hardening, unknown_mask_bits_rejected, .timeout = 30)
{
    adag_runtime_h rt = NULL;
    adag_runtime_params_t rp = {.field_mask = 1u << 7};
    ASSERT_ST(adag_runtime_create(&rp, &rt), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("0x80");
    rp.field_mask = ADAG_RUNTIME_PARAM_WORKER_PATH;
    rp.worker_path = NULL;
    ASSERT_ST(adag_runtime_create(&rp, &rt), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("worker_path");

    rt = h_runtime();
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    adag_actor_h a = NULL;
    p.field_mask |= 1u << 20;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("0x100000");
    p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    p.field_mask |= ADAG_ACTOR_PARAM_NAME; /* name left NULL */
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("name");
    p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    p.module_path = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("module_path");

    adag_graph_h g = H_GRAPH(rt, .name = "m", .method = "add");
    adag_compile_params_t cp = h_compile_params(0, 0, 0, 0);
    adag_dag_h dag = NULL;
    cp.field_mask = 1ull << 40;
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("0x10000000000");
    cp.field_mask = ADAG_COMPILE_PARAM_NAME; /* name left NULL */
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("name");
    ASSERT_OK(adag_runtime_destroy(rt));
}

struct named_create {
    adag_runtime_h rt;
    pthread_barrier_t *go;
    adag_status_t st;
    adag_actor_h a;
};

static void *create_named(void *arg)
{
    struct named_create *c = arg;
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    p.field_mask |= ADAG_ACTOR_PARAM_NAME;
    p.name = "twin";
    pthread_barrier_wait(c->go);
    c->st = adag_actor_create(c->rt, &p, &c->a);
    return NULL;
}

Test(hardening, same_name_race, .timeout = 60)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    for (int round = 0; round < 4; round++) {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        struct named_create c[2] = {{rt, &go, ADAG_OK, NULL}, {rt, &go, ADAG_OK, NULL}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            cr_assert_eq(pthread_create(&t[i], NULL, create_named, &c[i]), 0);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        pthread_barrier_destroy(&go);
        int ok = (c[0].st == ADAG_OK) + (c[1].st == ADAG_OK);
        cr_assert_eq(ok, 1, "round %d: %d actors named twin were created", round, ok);
        for (int i = 0; i < 2; i++) {
            if (c[i].st == ADAG_OK)
                ASSERT_OK(adag_actor_destroy(c[i].a));
            else
                cr_assert_eq(c[i].st, ADAG_ERR_INVALID);
        }
    }
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

Test(hardening, long_module_path, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    size_t n = PATH_MAX + 100;
    char *path = malloc(n + 1);
    cr_assert_not_null(path);
    for (size_t i = 0; i < n; i++)
        path[i] = (i % 8 == 0) ? '/' : 'x';
    path[n] = '\0';
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    p.module_path = path;
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("PATH_MAX");
    free(path);
    /* a long path within the limit reaches the worker (and fails as a path) */
    char longer[3000];
    snprintf(longer, sizeof(longer), "%s", "/tmp");
    while (strlen(longer) + 3 < sizeof(longer) - 40)
        strcat(longer, "/..");
    strcat(longer, "/nonexistent/libnothing.so");
    p.module_path = longer;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_NOT_FOUND);
    ASSERT_MSG_HAS("cannot load module /tmp/../..");
    ASSERT_OK(adag_runtime_destroy(rt));
}

static void crash_in_init(const char *how, const char *expect, const char *expect_san)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("crashy", ADAG_PLACEMENT_PROCESS);
    p.field_mask |= ADAG_ACTOR_PARAM_INIT | ADAG_ACTOR_PARAM_NAME;
    p.name = "fragile";
    p.init_data = how;
    p.init_size = 4;
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_ACTOR_DIED);
    ASSERT_MSG_HAS("fragile");
    ASSERT_MSG_HAS("crashy");
    cr_assert(strstr(h_msg(), expect) || strstr(h_msg(), expect_san),
              "message \"%s\" lacks \"%s\"", h_msg(), expect);
    /* the name is free again, the runtime goes on */
    adag_dag_h dag = H_DAG(rt, .pl = ADAG_PLACEMENT_PROCESS, .name = "fragile", .offset = 2,
                           .method = "add", .max_inflight = 2);
    cr_assert_eq(h_roundtrip(dag, 1), 3);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
Test(hardening, crash_in_init_segv, .timeout = 30)
{
    crash_in_init("segv", "SIGSEGV", "exited with status 1");
}
Test(hardening, crash_in_init_exit, .timeout = 30)
{
    crash_in_init("exit", "exited with status 9", "exited with status 9");
}

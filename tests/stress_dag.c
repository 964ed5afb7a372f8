/*
 * Whole DAGs under ThreadSanitizer (`make test-tsan`; the harness:
 * tests/stress.h): thread actors driven through the public API, so the
 * driver, the actors' loops and the channels between them are threads of
 * one process that TSan watches, and several driver threads executing on
 * one DAG at once (execute, NONBLOCK, reserve/commit, cancel; a DAG
 * without inputs; a reservation left at destroy). A race, a wrong result
 * or a hang fails the run.
 */
#include "common/clock.h"

#include "stress.h"
#include <adag.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a whole DAG of thread actors: driver, loops and channels under TSan ---- */

static adag_status_t add_one(void *state, adag_call_h call)
{
    adag_value_t in;
    int64_t x;
    (*(int64_t *)state)++;
    if (adag_call_arg(call, 0, &in) != ADAG_OK || in.size != sizeof x)
        return adag_call_fail(call, "expected an int64");
    memcpy(&x, in.data, sizeof x);
    x += 1;
    return adag_call_set_output(call, 0, &x, sizeof x);
}

static adag_status_t sum2(void *state, adag_call_h call)
{
    adag_value_t a, b;
    int64_t x, y;
    (*(int64_t *)state)++;
    if (adag_call_arg(call, 0, &a) != ADAG_OK || adag_call_arg(call, 1, &b) != ADAG_OK)
        return adag_call_fail(call, "expected two args");
    memcpy(&x, a.data, sizeof x);
    memcpy(&y, b.data, sizeof y);
    x += y;
    return adag_call_set_output(call, 0, &x, sizeof x);
}

/* tick() -> how many methods of this actor ran, this one included */
static adag_status_t tick(void *state, adag_call_h call)
{
    int64_t x = ++*(int64_t *)state;
    return adag_call_set_output(call, 0, &x, sizeof x);
}

static const adag_method_def_t stress_methods[] = {
    {"add_one", add_one, 1, 1}, {"sum2", sum2, 2, 1}, {"tick", tick, 0, 1}};
static const adag_class_def_t stress_class = {.abi_version = ADAG_ABI_VERSION,
                                              .name = "stress", .state_size = sizeof(int64_t),
                                              .methods = stress_methods, .nmethods = 3};

/* input -> a.add_one -> {b.add_one, c.add_one} -> a.sum2 -> driver; a second
 * DAG shares actor a. Returns 1 if every value came back right. */
static int run_dag(void)
{
    adag_runtime_h rt;
    adag_actor_h a, b, c;
    adag_graph_h g, g2;
    adag_node_h in, x, y, z, out, in2, out2;
    adag_dag_h dag, dag2;
    int ok = 1;
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "stress"};
    if (adag_runtime_create(NULL, &rt) || adag_class_register(rt, &stress_class) ||
        adag_actor_create(rt, &p, &a) || adag_actor_create(rt, &p, &b) ||
        adag_actor_create(rt, &p, &c) || adag_graph_create(rt, &g) ||
        adag_graph_input(g, 0, &in) || adag_graph_bind(g, a, "add_one", &in, 1, &x) ||
        adag_graph_bind(g, b, "add_one", &x, 1, &y) || adag_graph_bind(g, c, "add_one", &x, 1, &z))
        return 0;
    adag_node_h yz[2] = {y, z};
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT, .max_inflight = 4};
    if (adag_graph_bind(g, a, "sum2", yz, 2, &out) || adag_graph_output(g, &out, 1) ||
        adag_graph_compile(g, &cp, &dag) || adag_graph_create(rt, &g2) ||
        adag_graph_input(g2, 0, &in2) || adag_graph_bind(g2, a, "add_one", &in2, 1, &out2) ||
        adag_graph_output(g2, &out2, 1) || adag_graph_compile(g2, &cp, &dag2)) {
        fprintf(stderr, "setup: %s\n", adag_last_error());
        return 0;
    }
    adag_ref_t refs[4], refs2[4];
    for (int64_t i = 0; i < 3000 + 4; i++) {
        if (i >= 4) {
            adag_value_t o;
            int64_t v;
            if (adag_dag_get(dag, refs[i % 4], &o, 1, 20000) || o.size != 8)
                return 0;
            memcpy(&v, o.data, 8);
            ok &= v == 2 * (i - 4) + 4;
            if (adag_dag_get(dag2, refs2[i % 4], &o, 1, 20000))
                return 0;
            memcpy(&v, o.data, 8);
            ok &= v == i - 4 + 1;
            adag_dag_release(dag, refs[i % 4]);
            adag_dag_release(dag2, refs2[i % 4]);
        }
        if (i < 3000) {
            adag_value_t v = {.data = &i, .size = sizeof i};
            if (adag_dag_execute(dag, &v, 1, 0, &refs[i % 4]) ||
                adag_dag_execute(dag2, &v, 1, 0, &refs2[i % 4]))
                return 0;
        }
    }
    /* teardown with work in flight */
    for (int64_t i = 0; i < 4; i++) {
        adag_value_t v = {.data = &i, .size = sizeof i};
        adag_dag_execute(dag, &v, 1, 0, &refs[i]);
    }
    return ok && adag_runtime_destroy(rt) == ADAG_OK;
}

/* Several threads drive one DAG at once: plain executes, NONBLOCK ones
 * that retry on ADAG_ERR_AGAIN, and zero-copy reserve/commit (one thread
 * committing as a tensor, one as bytes with every fifth reservation
 * cancelled), while another thread polls the armed DAG fd. Every result is
 * checked; TSan checks the reservation, the ref window and the fd state. */
typedef struct {
    adag_dag_h dag;
    int mode; /* 0 execute, 1 NONBLOCK execute, 2 reserve/commit as an i64[1] tensor,
                 3 reserve/commit as bytes (every fifth reservation cancelled) */
    int64_t base;
    int ok;
} driver_thread_t;


static void *drive(void *arg)
{
    driver_thread_t *t = arg;
    t->ok = 1;
    for (int64_t i = 0; i < 1500; i++) {
        int64_t x = t->base + i;
        adag_ref_t ref;
        adag_status_t st;
        if (t->mode == 2 || t->mode == 3) {
            adag_input_view_t view;
            while ((st = adag_dag_reserve(t->dag, 0, &view, 1, &ref)) == ADAG_ERR_TIMEOUT) {
            }
            if (st != ADAG_OK)
                return (t->ok = 0, NULL);
            if (t->mode == 3 && i % 5 == 4) {
                t->ok &= adag_dag_cancel(t->dag, ref) == ADAG_OK;
                continue;
            }
            memcpy(view.data, &x, sizeof x);
            adag_value_t v = {.data = view.data, .size = sizeof x};
            if (t->mode == 2)
                v = (adag_value_t){.data = view.data, .size = sizeof x, .kind = ADAG_VALUE_TENSOR,
                                   .dtype = ADAG_DTYPE_I64, .ndim = 1, .shape = {1}};
            st = adag_dag_commit(t->dag, ref, &v, 1);
        } else {
            adag_value_t v = {.data = &x, .size = sizeof x};
            unsigned flags = t->mode == 1 ? ADAG_EXECUTE_NONBLOCK : 0;
            while ((st = adag_dag_execute(t->dag, &v, 1, flags, &ref)) == ADAG_ERR_AGAIN ||
                   st == ADAG_ERR_TIMEOUT)
                sched_yield();
        }
        adag_value_t o;
        int64_t y;
        if (st != ADAG_OK || adag_dag_get(t->dag, ref, &o, 1, 20000) != ADAG_OK ||
            o.size != sizeof y) {
            fprintf(stderr, "driver thread %d: %s\n", t->mode, adag_last_error());
            return (t->ok = 0, NULL);
        }
        memcpy(&y, o.data, sizeof y);
        t->ok &= y == x + 1;
        adag_dag_release(t->dag, ref);
    }
    return NULL;
}

static _Atomic int polling;

static void *poll_fd(void *arg)
{
    int fd = *(int *)arg;
    while (atomic_load(&polling)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 1);
    }
    return NULL;
}

static int run_concurrent_drivers(void)
{
    adag_runtime_h rt;
    adag_actor_h a;
    adag_graph_h g;
    adag_node_h in, out;
    adag_dag_h dag;
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "stress"};
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT,
                                .max_inflight = 3, .execute_timeout_ms = 50};
    if (adag_runtime_create(NULL, &rt) || adag_class_register(rt, &stress_class) ||
        adag_actor_create(rt, &p, &a) || adag_graph_create(rt, &g) ||
        adag_graph_input(g, 0, &in) || adag_graph_bind(g, a, "add_one", &in, 1, &out) ||
        adag_graph_output(g, &out, 1) || adag_graph_compile(g, &cp, &dag)) {
        fprintf(stderr, "setup: %s\n", adag_last_error());
        return 0;
    }
    int fd;
    if (adag_dag_fd(dag, &fd) != ADAG_OK)
        return 0;
    atomic_store(&polling, 1);
    pthread_t poller, th[4];
    driver_thread_t dt[4] = {{dag, 0, 0, 0}, {dag, 1, 1000000, 0}, {dag, 2, 2000000, 0},
                             {dag, 3, 3000000, 0}};
    pthread_create(&poller, NULL, poll_fd, &fd);
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, drive, &dt[i]);
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ok &= dt[i].ok;
    }
    atomic_store(&polling, 0);
    pthread_join(poller, NULL);
    /* destroyed by the thread holding a reservation */
    adag_input_view_t view;
    adag_ref_t ref;
    ok &= adag_dag_reserve(dag, 0, &view, 1, &ref) == ADAG_OK;
    ok &= adag_dag_destroy(dag) == ADAG_OK;
    return ok && adag_runtime_destroy(rt) == ADAG_OK;
}

/* Several threads drive one DAG without inputs: b.add_one(a.tick()) ->
 * driver, and c.tick() that nobody reads (its loop may lag: the start
 * channel's slots). Plain and NONBLOCK executes, reserve/commit with every
 * fifth reservation cancelled (its tick must not run); every result is
 * a.tick + 1, each tick once. Then a thread leaves a reservation behind
 * and destroy drops it after the teardown timeout. */
#define ZI_THREADS 4
#define ZI_PER 1000

typedef struct {
    adag_dag_h dag;
    int mode; /* 0 execute, 1 NONBLOCK execute, 3 reserve/commit/cancel */
    int64_t got[ZI_PER];
    unsigned n;
    int ok;
} zi_thread_t;

static void *drive_zero_input(void *arg)
{
    zi_thread_t *t = arg;
    t->ok = 1;
    for (int i = 0; i < ZI_PER; i++) {
        adag_ref_t ref;
        adag_status_t st;
        if (t->mode == 3) {
            while ((st = adag_dag_reserve(t->dag, 0, NULL, 0, &ref)) == ADAG_ERR_TIMEOUT) {
            }
            if (st != ADAG_OK)
                return (t->ok = 0, NULL);
            if (i % 5 == 4) {
                t->ok &= adag_dag_cancel(t->dag, ref) == ADAG_OK;
                continue;
            }
            st = adag_dag_commit(t->dag, ref, NULL, 0);
        } else {
            unsigned flags = t->mode == 1 ? ADAG_EXECUTE_NONBLOCK : 0;
            while ((st = adag_dag_execute(t->dag, NULL, 0, flags, &ref)) == ADAG_ERR_AGAIN ||
                   st == ADAG_ERR_TIMEOUT)
                sched_yield();
        }
        adag_value_t o;
        if (st != ADAG_OK || adag_dag_get(t->dag, ref, &o, 1, 20000) != ADAG_OK ||
            o.size != sizeof(int64_t)) {
            fprintf(stderr, "zero-input driver thread %d: %s\n", t->mode, adag_last_error());
            return (t->ok = 0, NULL);
        }
        memcpy(&t->got[t->n], o.data, sizeof(int64_t));
        t->ok &= t->n == 0 || t->got[t->n] > t->got[t->n - 1];
        t->n++;
        adag_dag_release(t->dag, ref);
    }
    return NULL;
}

static void *reserve_and_leave(void *arg)
{
    adag_ref_t ref;
    return adag_dag_reserve(arg, 0, NULL, 0, &ref) == ADAG_OK ? arg : NULL;
}

static int run_zero_input_drivers(void)
{
    adag_runtime_h rt;
    adag_actor_h a, b, c;
    adag_graph_h g;
    adag_node_h t, u, unread;
    adag_dag_h dag;
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = "stress"};
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT |
                                              ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT,
                                .max_inflight = 3, .execute_timeout_ms = 50,
                                .teardown_timeout_ms = 300};
    if (adag_runtime_create(NULL, &rt) || adag_class_register(rt, &stress_class) ||
        adag_actor_create(rt, &p, &a) || adag_actor_create(rt, &p, &b) ||
        adag_actor_create(rt, &p, &c) || adag_graph_create(rt, &g) ||
        adag_graph_bind(g, a, "tick", NULL, 0, &t) || adag_graph_bind(g, b, "add_one", &t, 1, &u) ||
        adag_graph_bind(g, c, "tick", NULL, 0, &unread) || adag_graph_output(g, &u, 1) ||
        adag_graph_compile(g, &cp, &dag)) {
        fprintf(stderr, "setup: %s\n", adag_last_error());
        return 0;
    }
    static zi_thread_t zt[ZI_THREADS];
    const int modes[ZI_THREADS] = {0, 1, 3, 3};
    pthread_t th[ZI_THREADS];
    for (int i = 0; i < ZI_THREADS; i++) {
        memset(&zt[i], 0, sizeof(zt[i]));
        zt[i].dag = dag;
        zt[i].mode = modes[i];
        pthread_create(&th[i], NULL, drive_zero_input, &zt[i]);
    }
    int ok = 1;
    unsigned total = 0;
    static unsigned char seen[ZI_THREADS * ZI_PER + 2];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < ZI_THREADS; i++) {
        pthread_join(th[i], NULL);
        ok &= zt[i].ok;
        for (unsigned k = 0; k < zt[i].n; k++) {
            int64_t v = zt[i].got[k] - 1; /* a's tick */
            ok &= v >= 1 && v <= ZI_THREADS * ZI_PER && !seen[v];
            if (v >= 1 && v <= ZI_THREADS * ZI_PER)
                seen[v] = 1;
        }
        total += zt[i].n;
    }
    /* the ticks of the executions that ran are 1..total: no cancelled one ran */
    for (unsigned v = 1; v <= total; v++)
        ok &= seen[v];
    EXPECT(ok, "zero-input DAG: a result out of place (%u executions)", total);
    pthread_t leaver;
    void *left = NULL;
    pthread_create(&leaver, NULL, reserve_and_leave, dag);
    pthread_join(leaver, &left);
    ok &= left == dag;
    ok &= adag_dag_destroy(dag) == ADAG_OK;
    return ok && adag_runtime_destroy(rt) == ADAG_OK;
}

int main(void)
{
    static const stress_part_t parts[] = {
        {"thread-actor DAG", run_dag},
        {"four threads driving one DAG (execute, NONBLOCK, reserve/commit of a tensor and of "
         "bytes, cancel)",
         run_concurrent_drivers},
        {"four threads driving a DAG without inputs; a reservation left at destroy",
         run_zero_input_drivers},
    };
    return stress_run_parts("stress_dag", parts, sizeof(parts) / sizeof(parts[0]));
}

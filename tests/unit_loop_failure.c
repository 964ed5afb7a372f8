/* Unit tests (suite "loop_failure"): what a DAG's loop meets in a worker
 * (here a malformed slot: the driver's side of an input channel publishes
 * an execution out of turn, as a corrupt or hostile peer would) fails that
 * DAG with the loop's message; the worker process and its other DAGs go
 * on. The DAG is reached through dag/driver/dag.h to inject the fault. */
#include "common/clock.h"
#include "dag/driver/dag.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OK(expr)                                                                              \
    do {                                                                                      \
        adag_status_t st_ = (expr);                                                           \
        cr_assert_eq(st_, ADAG_OK, "%s: %s (%s)", #expr, adag_status_str(st_),              \
                     adag_last_error());                                                      \
    } while (0)

/* adag-worker next to this program's build folder (build/tests/..). */
static void use_built_worker(void)
{
    char exe[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    cr_assert_gt(n, 0);
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    cr_assert(slash);
    *slash = '\0';
    snprintf(path, sizeof(path), "%s/../adag-worker", exe);
    cr_assert_eq(access(path, X_OK), 0, "no worker at %s", path);
    setenv("ADAG_WORKER_PATH", path, 1);
}

static adag_actor_h counter(adag_runtime_h rt, const char *name)
{
    adag_actor_params_t p = {
        .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_MODULE |
                      ADAG_ACTOR_PARAM_PLACEMENT | ADAG_ACTOR_PARAM_NAME,
        .class_name = "counter",
        .module_path = ADAG_TEST_MODULE,
        .placement = ADAG_PLACEMENT_PROCESS,
        .name = name,
    };
    adag_actor_h a;
    OK(adag_actor_create(rt, &p, &a));
    return a;
}

/* input 0 -> a.method -> output */
static adag_dag_h one_call(adag_runtime_h rt, adag_actor_h a, const char *method, unsigned nargs)
{
    adag_graph_h g;
    adag_node_h in, out;
    OK(adag_graph_create(rt, &g));
    OK(adag_graph_input(g, 0, &in));
    OK(adag_graph_bind(g, a, method, &in, nargs, &out));
    OK(adag_graph_output(g, &out, 1));
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT,
                                .max_inflight = 2};
    adag_dag_h dag;
    OK(adag_graph_compile(g, &cp, &dag));
    OK(adag_graph_destroy(g));
    return dag;
}

static int64_t run(adag_dag_h dag, int64_t x)
{
    adag_value_t in = {.data = &x, .size = sizeof(x)}, out;
    adag_ref_t ref;
    OK(adag_dag_execute(dag, &in, 1, 0, &ref));
    OK(adag_dag_get(dag, ref, &out, 1, 5000));
    cr_assert_eq(out.size, sizeof(int64_t));
    int64_t y;
    memcpy(&y, out.data, sizeof(y));
    OK(adag_dag_release(dag, ref));
    return y;
}

static adag_status_t abort_status(adag_dag_h dag)
{
    pthread_mutex_lock(&dag->lock);
    adag_status_t st = dag->abort_status;
    pthread_mutex_unlock(&dag->lock);
    return st;
}

Test(loop_failure, malformed_slot_fails_only_its_dag, .timeout = 60)
{
    use_built_worker();
    adag_runtime_h rt;
    OK(adag_runtime_create(NULL, &rt));
    adag_actor_h a = counter(rt, "shared");
    adag_dag_h victim = one_call(rt, a, "add", 1);
    adag_dag_h bystander = one_call(rt, a, "echo", 1);
    cr_assert_eq(run(victim, 1), 1);
    cr_assert_eq(run(bystander, 2), 2);

    /* the worker's pid, from the bystander's "pid" method of no argument */
    adag_graph_h g;
    adag_node_h pn;
    OK(adag_graph_create(rt, &g));
    OK(adag_graph_bind(g, a, "pid", NULL, 0, &pn));
    OK(adag_graph_output(g, &pn, 1));
    adag_dag_h pid_dag;
    OK(adag_graph_compile(g, NULL, &pid_dag));
    OK(adag_graph_destroy(g));
    adag_ref_t ref;
    adag_value_t out;
    OK(adag_dag_execute(pid_dag, NULL, 0, 0, &ref));
    OK(adag_dag_get(pid_dag, ref, &out, 1, 5000));
    int64_t pid;
    memcpy(&pid, out.data, sizeof(pid));
    OK(adag_dag_release(pid_dag, ref));

    /* the loop waits for execution 1 of the victim's input; its slot is
     * published as execution 1 + max_inflight */
    adag_chan_t *in = victim->ends.inputs[0];
    uint64_t bogus = 1 + in->nslots;
    void *buf;
    OK(adag__chan_acquire(in, 1, adag__deadline_ms(1000), &buf));
    OK(adag__chan_publish(in, bogus, 0, NULL, ADAG_OK, NULL));
    int64_t deadline = adag__deadline_ms(5000);
    while (abort_status(victim) == ADAG_OK && adag__now_ns() < deadline)
        usleep(1000);
    adag_status_t st = abort_status(victim);
    cr_assert_eq(st, ADAG_ERR_PROTOCOL, "the victim DAG's status is %s (%s)",
                 adag_status_str(st), victim->abort_msg);
    cr_assert(strstr(victim->abort_msg, "actor shared") &&
                  strstr(victim->abort_msg, "holds execution"),
              "the failure does not say where: %s", victim->abort_msg);
    int64_t x = 5;
    adag_value_t iv = {.data = &x, .size = sizeof(x)};
    cr_assert_eq(adag_dag_execute(victim, &iv, 1, 0, &ref), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(adag_last_error(), "holds execution"), "%s", adag_last_error());

    /* the worker lives on, and so does the bystander DAG over it */
    cr_assert_eq(kill((pid_t)pid, 0), 0, "the worker (pid %lld) is gone", (long long)pid);
    for (int64_t i = 0; i < 50; i++)
        cr_assert_eq(run(bystander, 100 + i), 100 + i);
    cr_assert_eq(abort_status(bystander), ADAG_OK);
    OK(adag_dag_destroy(victim));
    for (int64_t i = 0; i < 10; i++)
        cr_assert_eq(run(bystander, i), i);
    /* and a new DAG installs on it */
    adag_dag_h again = one_call(rt, a, "add", 1);
    cr_assert_eq(run(again, 7), 7);
    OK(adag_runtime_destroy(rt));
    int status;
    cr_assert_eq(waitpid((pid_t)pid, &status, WNOHANG), -1, "the worker was not reaped");
}

/*
 * Suite "validation", continued: NULL pointers everywhere in the API, actor
 * creation that must fail (module, class, worker path, init, names), and the
 * runtime's version check, status strings and per-thread last error.
 */
#include "helpers.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VTEST(name) Test(validation, name, .timeout = 30)

/* ---------------------------------------------------------------- */
/* NULL pointers                                                     */
/* ---------------------------------------------------------------- */

VTEST(null_pointers)
{
    adag_runtime_h rt = NULL;
    ASSERT_ST(adag_runtime_create(NULL, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_runtime_destroy(NULL), ADAG_ERR_INVALID);
    rt = h_runtime();

    /* classes */
    ASSERT_ST(adag_class_register(NULL, &test_counter_class), ADAG_ERR_INVALID);
    ASSERT_ST(adag_class_register(rt, NULL), ADAG_ERR_INVALID);
    adag_class_def_t def = test_counter_class;
    def.name = NULL;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    def = test_counter_class;
    def.name = "nomethods";
    def.methods = NULL;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    adag_method_def_t m = {"m", NULL, 1, 1};
    def.name = "nullfn";
    def.methods = &m;
    def.nmethods = 1;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    adag_method_def_t m2 = {NULL, test_counter_class.methods[0].fn, 1, 1};
    def.name = "nullmethodname";
    def.methods = &m2;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    adag_method_def_t m3 = {"noreturns", test_counter_class.methods[0].fn, 1, 0};
    def.name = "noreturns";
    def.methods = &m3;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);
    adag_method_def_t m4 = {"manyargs", test_counter_class.methods[0].fn, ADAG_MAX_ARGS + 1, 1};
    def.name = "manyargs";
    def.methods = &m4;
    ASSERT_ST(adag_class_register(rt, &def), ADAG_ERR_INVALID);

    /* actors */
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(NULL, &p, &a), ADAG_ERR_INVALID);
    ASSERT_ST(adag_actor_create(rt, NULL, &a), ADAG_ERR_INVALID);
    ASSERT_ST(adag_actor_create(rt, &p, NULL), ADAG_ERR_INVALID);
    p.class_name = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    p.field_mask &= ~(uint64_t)ADAG_ACTOR_PARAM_CLASS;
    p.class_name = "counter";
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID); /* class is required */
    p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    p.field_mask |= ADAG_ACTOR_PARAM_INIT;
    p.init_data = NULL;
    p.init_size = 8;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    p.field_mask |= ADAG_ACTOR_PARAM_PLACEMENT;
    p.placement = (adag_placement_t)77;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    cr_assert_not_null(adag_actor_name(NULL));
    cr_assert(adag_actor_pid(NULL) <= 0);
    ASSERT_ST(adag_actor_destroy(NULL), ADAG_ERR_INVALID);
    a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);

    /* graphs */
    adag_graph_h g = NULL;
    ASSERT_ST(adag_graph_create(NULL, &g), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_create(rt, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_destroy(NULL), ADAG_ERR_INVALID);
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = NULL, n = NULL;
    ASSERT_ST(adag_graph_input(NULL, 0, &in), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_input(g, 0, NULL), ADAG_ERR_INVALID);
    in = h_input(g, 0);
    ASSERT_ST(adag_graph_bind(NULL, a, "add", &in, 1, &n), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_bind(g, NULL, "add", &in, 1, &n), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_bind(g, a, NULL, &in, 1, &n), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_bind(g, a, "add", NULL, 1, &n), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_bind(g, a, "add", &in, 1, NULL), ADAG_ERR_INVALID);
    adag_node_h nulls[1] = {NULL};
    ASSERT_ST(adag_graph_bind(g, a, "add", nulls, 1, &n), ADAG_ERR_INVALID);
    adag_node_h s = h_bind1(g, a, "split", in);
    adag_node_h s0 = NULL;
    ASSERT_ST(adag_node_output(NULL, 0, &s0), ADAG_ERR_INVALID);
    ASSERT_ST(adag_node_output(s, 0, NULL), ADAG_ERR_INVALID);
    ASSERT_OK(adag_node_output(s, 0, &s0));
    adag_node_h x = h_bind1(g, a, "add", s0);
    ASSERT_ST(adag_graph_output(NULL, &x, 1), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_output(g, NULL, 1), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_output(g, nulls, 1), ADAG_ERR_INVALID);
    ASSERT_OK(adag_graph_output(g, &x, 1));
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(NULL, NULL, &dag), ADAG_ERR_INVALID);
    ASSERT_ST(adag_graph_compile(g, NULL, NULL), ADAG_ERR_INVALID);
    ASSERT_OK(adag_graph_compile(g, NULL, &dag));

    /* DAGs */
    int64_t v = 5;
    adag_value_t iv = h_i64v(&v), ov;
    adag_ref_t ref = 0;
    ASSERT_ST(adag_dag_execute(NULL, &iv, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_execute(dag, NULL, 1, 0, &ref), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_execute(dag, &iv, 1, 0, NULL), ADAG_ERR_INVALID);
    ASSERT_OK(adag_dag_execute(dag, &iv, 1, 0, &ref));
    ASSERT_ST(adag_dag_get(NULL, ref, &ov, 1, 1000), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_get(dag, ref, NULL, 1, 1000), ADAG_ERR_INVALID);
    ASSERT_OK(adag_dag_get(dag, ref, &ov, 1, 5000));
    cr_assert_eq(h_val_i64(ov), 5);
    ASSERT_ST(adag_dag_release(NULL, ref), ADAG_ERR_INVALID);
    ASSERT_OK(adag_dag_release(dag, ref));
    int fd = -1;
    ASSERT_ST(adag_dag_fd(NULL, &fd), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_fd(dag, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_write_dot(NULL, adag_writer_fd(2)), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_write_dot(dag, (adag_writer_t){NULL, NULL}), ADAG_ERR_INVALID);
    adag_dag_stats_t st = ADAG_DAG_STATS_INIT;
    ASSERT_ST(adag_dag_stats(NULL, &st), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_stats(dag, NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_destroy(NULL), ADAG_ERR_INVALID);

    /* call functions outside a method */
    adag_value_t cv;
    void *buf = NULL;
    ASSERT_ST(adag_call_arg(NULL, 0, &cv), ADAG_ERR_INVALID);
    ASSERT_ST(adag_call_output(NULL, 0, 8, &buf), ADAG_ERR_INVALID);
    ASSERT_ST(adag_call_set_output(NULL, 0, &v, sizeof(v)), ADAG_ERR_INVALID);
    ASSERT_ST(adag_call_fail(NULL, "%s", "no call"), ADAG_ERR_INVALID);
    (void)adag_call_ref(NULL);

    /* everything still works */
    cr_assert_eq(h_roundtrip(dag, 6), 6);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---------------------------------------------------------------- */
/* Actor creation                                                    */
/* ---------------------------------------------------------------- */

VTEST(process_actor_missing_module_path)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    p.field_mask &= ~(uint64_t)ADAG_ACTOR_PARAM_MODULE;
    p.module_path = NULL;
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS_CI("module");
    /* the bit set with a NULL path */
    p.field_mask |= ADAG_ACTOR_PARAM_MODULE;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS_CI("module");
    cr_assert_eq(h_wait_no_children(2000), 0, "a worker was left behind");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

VTEST(process_actor_nonexistent_module)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    p.module_path = "/nonexistent/dir/libnope_module.so";
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_NOT_FOUND);
    ASSERT_MSG_HAS("libnope_module.so");
    cr_assert_eq(h_wait_no_children(2000), 0, "a worker was left behind");
    /* the runtime still works */
    adag_dag_h dag =
        H_DAG(rt, .pl = ADAG_PLACEMENT_PROCESS, .name = "b", .offset = 1, .method = "add");
    cr_assert_eq(h_roundtrip(dag, 1), 2);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

VTEST(process_actor_unknown_class)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("no_such_class", ADAG_PLACEMENT_PROCESS);
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_NOT_FOUND);
    ASSERT_MSG_HAS("no_such_class");
    cr_assert_eq(h_wait_no_children(2000), 0, "a worker was left behind");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

VTEST(thread_actor_unknown_class)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("no_such_class", ADAG_PLACEMENT_THREAD);
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_NOT_FOUND);
    ASSERT_MSG_HAS("no_such_class");
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(process_actor_bad_worker_path)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_params_t rp;
    memset(&rp, 0, sizeof(rp));
    rp.field_mask = ADAG_RUNTIME_PARAM_WORKER_PATH;
    rp.worker_path = "/nonexistent/dir/no-adag-worker";
    adag_runtime_h rt = NULL;
    ASSERT_OK(adag_runtime_create(&rp, &rt));
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_IO);
    ASSERT_MSG_HAS("no-adag-worker");
    cr_assert_eq(h_wait_no_children(2000), 0, "a failed spawn left a child behind");
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

static void broken_init(adag_placement_t pl)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("broken", pl);
    p.field_mask |= ADAG_ACTOR_PARAM_NAME;
    p.name = "broken_one";
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("init of class broken returned");
    cr_assert_eq(h_wait_no_children(2000), 0, "the worker of a failed actor is still there");
    /* the name is not taken by the failed actor */
    adag_dag_h dag = H_DAG(rt, .pl = pl, .name = "broken_one", .offset = 3, .method = "add");
    cr_assert_eq(h_roundtrip(dag, 1), 4);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}
H_BOTH(validation, broken_init, 30)

static void bad_init_bytes(adag_placement_t pl)
{
    /* counter's init rejects sizes other than 0 and 8 */
    adag_runtime_h rt = h_runtime();
    adag_actor_params_t p = h_actor_params("counter", pl);
    int32_t four = 4;
    p.field_mask |= ADAG_ACTOR_PARAM_INIT;
    p.init_data = &four;
    p.init_size = sizeof(four);
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("init of class counter returned");
    cr_assert_eq(h_wait_no_children(2000), 0, "the worker of a failed actor is still there");
    /* more than 16 MiB of init bytes */
    size_t big = (size_t)16 * 1024 * 1024 + 1;
    char *buf = calloc(1, big);
    cr_assert_not_null(buf);
    p.init_data = buf;
    p.init_size = big;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_TOO_LARGE);
    ASSERT_MSG_HAS("16777217");
    free(buf);
    cr_assert_eq(h_wait_no_children(2000), 0, "a worker was left behind");
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(validation, bad_init_bytes, 30)

VTEST(duplicate_actor_name)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    (void)h_counter(rt, ADAG_PLACEMENT_THREAD, "dup_name", 0);
    adag_actor_params_t p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    p.field_mask |= ADAG_ACTOR_PARAM_NAME;
    p.name = "dup_name";
    adag_actor_h a = NULL;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("dup_name");
    p = h_actor_params("counter", ADAG_PLACEMENT_PROCESS);
    p.field_mask |= ADAG_ACTOR_PARAM_NAME;
    p.name = "dup_name";
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("dup_name");
    cr_assert_eq(h_wait_no_children(2000), 0, "a worker was left behind");
    /* names of 64 bytes or more are rejected */
    char longname[ADAG_MAX_NAME + 8];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    p.field_mask |= ADAG_ACTOR_PARAM_NAME;
    p.name = longname;
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    p.name = "";
    ASSERT_ST(adag_actor_create(rt, &p, &a), ADAG_ERR_INVALID);
    /* default names are unique */
    adag_actor_h d1 = NULL, d2 = NULL;
    p = h_actor_params("counter", ADAG_PLACEMENT_THREAD);
    ASSERT_OK(adag_actor_create(rt, &p, &d1));
    ASSERT_OK(adag_actor_create(rt, &p, &d2));
    cr_assert_str_neq(adag_actor_name(d1), adag_actor_name(d2));
    cr_assert(strstr(adag_actor_name(d1), "counter") != NULL, "default name \"%s\"",
              adag_actor_name(d1));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

VTEST(duplicate_class_register)
{
    adag_runtime_h rt = h_runtime(); /* registers "counter" */
    ASSERT_ST(adag_class_register(rt, &test_counter_class), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("counter");
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* ---------------------------------------------------------------- */
/* Runtime and status                                                */
/* ---------------------------------------------------------------- */

VTEST(wrong_major_version)
{
    adag_runtime_h rt = NULL;
    ASSERT_ST(adag_runtime_create_version(ADAG_VERSION_MAJOR + 1, 0, NULL, &rt),
              ADAG_ERR_INVALID);
    /* the message names the version asked for */
    char want[32];
    snprintf(want, sizeof(want), "%d.0", ADAG_VERSION_MAJOR + 1);
    ASSERT_MSG_HAS(want);
    ASSERT_ST(adag_runtime_create_version(ADAG_VERSION_MAJOR + 100, ADAG_VERSION_MINOR, NULL,
                                          &rt),
              ADAG_ERR_INVALID);
    /* the right version works */
    ASSERT_OK(adag_runtime_create_version(ADAG_VERSION_MAJOR, ADAG_VERSION_MINOR, NULL, &rt));
    ASSERT_OK(adag_runtime_destroy(rt));
}

VTEST(status_strings)
{
    static const adag_status_t all[] = {
        ADAG_OK,          ADAG_ERR_INVALID,     ADAG_ERR_NO_MEMORY, ADAG_ERR_TIMEOUT,
        ADAG_ERR_AGAIN,   ADAG_ERR_METHOD,      ADAG_ERR_ACTOR_DIED, ADAG_ERR_TOO_LARGE,
        ADAG_ERR_IO,      ADAG_ERR_CLOSED,      ADAG_ERR_NOT_FOUND, ADAG_ERR_BUSY,
        ADAG_ERR_PROTOCOL,
    };
    const unsigned n = sizeof(all) / sizeof(all[0]);
    for (unsigned i = 0; i < n; i++) {
        const char *s = adag_status_str(all[i]);
        cr_assert_not_null(s, "status %d has no string", (int)all[i]);
        cr_assert(s[0] != '\0', "status %d has an empty string", (int)all[i]);
        for (unsigned j = 0; j < i; j++)
            cr_assert_str_neq(s, adag_status_str(all[j]), "statuses %d and %d share \"%s\"",
                              (int)all[i], (int)all[j], s);
    }
    /* an unknown status still gives a string */
    const char *u = adag_status_str((adag_status_t)-1000);
    cr_assert_not_null(u);
    cr_assert(u[0] != '\0');
    /* the last error is never NULL */
    cr_assert_not_null(adag_last_error());
}

static void *fail_in_thread(void *arg)
{
    (void)arg;
    /* a different failure on another thread */
    adag_status_t st = adag_runtime_create_version(ADAG_VERSION_MAJOR + 7, 0, NULL, NULL);
    static char msg[1024];
    snprintf(msg, sizeof(msg), "%s", adag_last_error());
    return st == ADAG_OK ? NULL : msg;
}

VTEST(last_error_is_per_thread)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0), n = NULL;
    ASSERT_ST(adag_graph_bind(g, a, "per_thread_marker", &in, 1, &n), ADAG_ERR_INVALID);
    char mine[1024];
    snprintf(mine, sizeof(mine), "%s", adag_last_error());
    cr_assert(strstr(mine, "per_thread_marker") != NULL, "message \"%s\"", mine);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, fail_in_thread, NULL), 0);
    void *other = NULL;
    pthread_join(t, &other);
    cr_assert_not_null(other, "the other thread's call did not fail");
    cr_assert(((const char *)other)[0] != '\0', "the other thread got no message");
    cr_assert(strstr((const char *)other, "per_thread_marker") == NULL,
              "the other thread sees this thread's message");
    cr_assert_str_eq(adag_last_error(), mine, "this thread's message changed");
    ASSERT_OK(adag_runtime_destroy(rt));
}

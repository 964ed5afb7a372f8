/*
 * Suite "trace": adag_dag_write_trace on a 3-stage chain of thread and of
 * process actors, checked by tests/trace_check.py with Python's JSON
 * parser (tracks, the order of each execution's spans in every stage and
 * across stages, refs); results identical with tracing on and off; a
 * ring smaller than the run keeps the latest spans and counts the rest;
 * refusals.
 */
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static adag_dag_h chain(adag_runtime_h rt, adag_placement_t pl, uint64_t spans, adag_actor_h *a)
{
    int64_t offsets[3] = {1, 10, 100};
    h_counters(rt, pl, "s", 3, offsets, a);
    adag_graph_h g = h_chain_graph(rt, a, 3, "add");
    adag_compile_params_t cp = h_compile_params(4, 64, 0, 0);
    if (spans) {
        cp.field_mask |= ADAG_COMPILE_PARAM_TRACE;
        cp.trace_spans = spans;
    }
    adag_dag_h dag = h_compile_with(g, &cp);
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

/* runs n executions, 4 in flight, checking each result */
static void run(adag_dag_h dag, int n)
{
    adag_ref_t refs[4];
    for (int i = 0; i < n + 4; i++) {
        if (i >= 4)
            cr_assert_eq(h_get_i64(dag, refs[i % 4], 10000), (int64_t)(i - 4) + 111);
        if (i >= 4)
            ASSERT_OK(adag_dag_release(dag, refs[i % 4]));
        if (i < n)
            refs[i % 4] = h_execute(dag, i);
    }
}

static void write_and_check(adag_dag_h dag, const char *want)
{
    h_trace_check(dag, "3 add", want);
}

static void traces_a_chain(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[3];
    adag_dag_h dag = chain(rt, pl, 4096, a);
    run(dag, 30);
    /* 30 executions x 3 stages x (wait, compute, publish) */
    write_and_check(dag, "ok 30 executions, 270 spans checked");
    /* again while it runs on: the copy does not stop the DAG */
    run(dag, 10);
    write_and_check(dag, "ok 40 executions");
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(trace, thread_actor_chain, .timeout = 60)
{
    traces_a_chain(ADAG_PLACEMENT_THREAD);
}

Test(trace, process_actor_chain, .timeout = 60)
{
    traces_a_chain(ADAG_PLACEMENT_PROCESS);
}

/* Results do not depend on tracing. */
/* The duration (us) of the driver's execute span of ref, read from the
 * trace with Python's JSON parser. */
static double execute_span_us(adag_dag_h dag, uint64_t ref)
{
    char path[H_TRACE_PATH_MAX];
    h_trace_write(dag, path);
    char cmd[1024], out[128] = "";
    snprintf(cmd, sizeof(cmd),
             "python3 -c 'import json, sys\n"
             "t = json.load(open(sys.argv[1]))\n"
             "d = [e[\"dur\"] for e in t[\"traceEvents\"] if e.get(\"ph\") == \"X\" and "
             "e[\"name\"] == \"execute\" and e[\"args\"][\"ref\"] == int(sys.argv[2])]\n"
             "print(d[0] if len(d) == 1 else -1)' %s %llu 2>&1",
             path, (unsigned long long)ref);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    unlink(path);
    char *end;
    double us = strtod(out, &end);
    cr_assert(end != out && us >= 0, "ref %llu: %s", (unsigned long long)ref, out);
    return us;
}

/* The zero-copy API's executions are traced too: a ref reserved and
 * committed (adag_dag_reserve/commit) has its execute record, from the
 * reserve to the commit, and its get's; execute's are traced alongside. */
Test(trace, zero_copy_commits_are_traced, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[3];
    adag_dag_h dag = chain(rt, ADAG_PLACEMENT_THREAD, 4096, a);
    for (int64_t i = 0; i < 20; i++) {
        adag_input_view_t view;
        adag_ref_t ref;
        if (i % 2) {
            ASSERT_OK(adag_dag_reserve(dag, 0, &view, 1, &ref));
            memcpy(view.data, &i, sizeof(i));
            if (i == 5)
                usleep(30 * 1000); /* a slow fill: in its execute span */
            adag_value_t written = {.data = view.data, .size = sizeof(i)};
            ASSERT_OK(adag_dag_commit(dag, ref, &written, 1));
        } else {
            ref = h_execute(dag, i);
        }
        cr_assert_eq(h_get_i64(dag, ref, 10000), i + 111);
        ASSERT_OK(adag_dag_release(dag, ref));
    }
    /* every ref: the driver's execute and get, each stage's three spans */
    write_and_check(dag, "ok 20 executions, 180 spans checked");
    double slow = execute_span_us(dag, 5), quick = execute_span_us(dag, 7);
    cr_assert(slow >= 30000 && quick < 30000, "execute spans: ref 5 %.0f us, ref 7 %.0f us", slow,
              quick);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(trace, results_identical_on_and_off, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[3];
    adag_dag_h on = chain(rt, ADAG_PLACEMENT_PROCESS, 256, a);
    /* the same actors, a second DAG without tracing */
    adag_graph_h g = h_chain_graph(rt, a, 3, "add");
    adag_dag_h off = h_compile(g, 4, 64);
    ASSERT_OK(adag_graph_destroy(g));
    for (int64_t x = -50; x < 50; x++)
        cr_assert_eq(h_roundtrip(on, x), h_roundtrip(off, x), "x = %lld", (long long)x);
    ASSERT_ST(adag_dag_write_trace(off, adag_writer_fd(1)), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("compiled without tracing");
    ASSERT_OK(adag_dag_destroy(on));
    ASSERT_OK(adag_dag_destroy(off));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* A ring of 16 records keeps the latest and says how many went. */
Test(trace, small_ring_keeps_the_latest, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a[3];
    adag_dag_h dag = chain(rt, ADAG_PLACEMENT_THREAD, 16, a);
    run(dag, 100);
    h_text_t t = {0};
    ASSERT_OK(adag_dag_write_trace(dag, h_text_writer(&t)));
    char *text = t.text;
    /* each stage made 100 records (one per op: its wait input, wait room,
     * compute and publish) and keeps 16; the driver 200 (execute, get), 16
     * kept */
    cr_assert(strstr(text, "loop of dag"), "%s", text);
    const char *lost = strstr(text, "loop of dag");
    cr_assert(lost && strstr(lost, "(84 records lost)"), "%.300s", lost ? lost : text);
    cr_assert(strstr(text, "(184 records lost)"), "%s", text);
    cr_assert(strstr(text, "execute/get of dag"), "%s", text);
    cr_assert(strstr(text, "\"ref\":99"), "the latest execution is kept");
    cr_assert_null(strstr(text, "\"ref\":3,"), "the oldest are gone");
    free(text);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(trace, refusals)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "x", 0);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
    adag_compile_params_t cp = h_compile_params(2, 64, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_TRACE;
    cp.trace_spans = ((uint64_t)1 << 20) + 1;
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("trace_spans 1048577 is not in 0..1048576");
    ASSERT_ST(adag_dag_write_trace(NULL, adag_writer_fd(1)), ADAG_ERR_INVALID);
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}

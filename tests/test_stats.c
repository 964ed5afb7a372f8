/*
 * Suite "stats": adag_dag_stats_take / adag_stats_* on a 3-stage chain
 * whose middle stage is slow (sleeps 1 ms a call), of thread and of
 * process actors: counts per op and channel, compute times and their
 * quantiles, the waits they cause, the bottleneck named (also by
 * adag_dag_stats' version-3 fields and the printed table); an untraced
 * DAG counts but does not time; refusals; the live view; a stopped process
 * actor: statistics, the trace and `adag-info attach` answer within
 * ADAG_STATS_TIMEOUT_MS with the others' figures, naming it.
 */
#include "common/clock.h"
#include "helpers.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#define RUNS 60
#define SLOW_MS 1

/* input -> s0.add -> s1.sleep_ms -> s2.add -> output, 4 in flight; the
 * actors in a */
static adag_dag_h slow_chain_of(adag_runtime_h rt, adag_placement_t pl, int traced,
                                adag_actor_h *a)
{
    h_counters(rt, pl, "s", 3, NULL, a);
    h_stage_t st[3] = {{a[0], "add"}, {a[1], "sleep_ms"}, {a[2], "add"}};
    adag_graph_h g = h_stages_graph(rt, st, 3);
    adag_compile_params_t cp = h_compile_params(4, 64, 0, 0);
    cp.field_mask |= ADAG_COMPILE_PARAM_TRACE;
    cp.trace_spans = traced ? 4096 : 0;
    adag_dag_h dag = h_compile_with(g, &cp);
    ASSERT_OK(adag_graph_destroy(g));
    return dag;
}

static adag_dag_h slow_chain(adag_runtime_h rt, adag_placement_t pl, int traced)
{
    adag_actor_h a[3];
    return slow_chain_of(rt, pl, traced, a);
}

static void run(adag_dag_h dag)
{
    adag_ref_t refs[4];
    for (int i = 0; i < RUNS + 4; i++) {
        if (i >= 4) {
            cr_assert_eq(h_get_i64(dag, refs[i % 4], 10000), SLOW_MS);
            ASSERT_OK(adag_dag_release(dag, refs[i % 4]));
        }
        if (i < RUNS)
            refs[i % 4] = h_execute(dag, SLOW_MS);
    }
}

static void find_op(adag_stats_h s, const char *actor, adag_op_stats_t *out)
{
    for (unsigned i = 0; i < adag_stats_nops(s); i++) {
        *out = (adag_op_stats_t)ADAG_OP_STATS_INIT;
        ASSERT_OK(adag_stats_op(s, i, out));
        if (strcmp(out->actor, actor) == 0)
            return;
    }
    cr_assert_fail("no op of actor %s", actor);
}

static void find_chan(adag_stats_h s, const char *name, adag_channel_stats_t *out)
{
    for (unsigned i = 0; i < adag_stats_nchannels(s); i++) {
        *out = (adag_channel_stats_t)ADAG_CHANNEL_STATS_INIT;
        ASSERT_OK(adag_stats_channel(s, i, out));
        if (strcmp(out->name, name) == 0)
            return;
    }
    cr_assert_fail("no channel %s", name);
}

static void check_slow_chain(adag_placement_t pl)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = slow_chain(rt, pl, 1);
    run(dag);
    adag_stats_h s;
    ASSERT_OK(adag_dag_stats_take(dag, &s));
    cr_assert_eq(adag_stats_timed(s), 1);
    cr_assert_eq(adag_stats_nactors(s), 3);
    cr_assert_eq(adag_stats_nops(s), 3);
    adag_op_stats_t o[3];
    const char *names[3] = {"s0", "s1", "s2"};
    for (int i = 0; i < 3; i++) {
        find_op(s, names[i], &o[i]);
        cr_assert_eq(o[i].count, RUNS, "%s ran %llu times", names[i],
                     (unsigned long long)o[i].count);
        cr_assert_str_eq(o[i].name, i == 1 ? "sleep_ms" : "add");
        cr_assert(o[i].compute_p50_ns <= o[i].compute_p99_ns &&
                      o[i].compute_p99_ns <= o[i].compute_max_ns,
                  "%s: p50 %llu p99 %llu max %llu", names[i],
                  (unsigned long long)o[i].compute_p50_ns,
                  (unsigned long long)o[i].compute_p99_ns,
                  (unsigned long long)o[i].compute_max_ns);
        cr_assert_eq(o[i].compute_mean_ns, o[i].compute_ns / RUNS);
    }
    /* the slow stage computes >= 1 ms a call; the others far less */
    cr_assert_geq(o[1].compute_p50_ns, SLOW_MS * 1000000ull * 95 / 100);
    cr_assert_geq(o[1].compute_mean_ns, SLOW_MS * 1000000ull);
    cr_assert_lt(o[0].compute_p50_ns, SLOW_MS * 1000000ull / 2, "%llu",
                 (unsigned long long)o[0].compute_p50_ns);
    cr_assert_lt(o[2].compute_p50_ns, SLOW_MS * 1000000ull / 2);
    /* the stage after it waits for it: most of a millisecond a run */
    cr_assert_geq(o[2].wait_input_ns, RUNS * SLOW_MS * 1000000ull / 2, "s2 waited %llu ns",
                  (unsigned long long)o[2].wait_input_ns);
    double busy;
    const char *b = adag_stats_bottleneck(s, &busy);
    cr_assert_str_eq(b ? b : "(none)", "s1");
    cr_assert(busy > 0.3 && busy <= 1.0, "busy %f", busy);
    adag_actor_stats_t as = ADAG_ACTOR_STATS_INIT;
    for (unsigned i = 0; i < 3; i++) {
        ASSERT_OK(adag_stats_actor(s, i, &as));
        cr_assert_eq(as.count, RUNS);
        cr_assert_geq(as.elapsed_ns, as.busy_ns);
        cr_assert_str_eq(as.placement, pl == ADAG_PLACEMENT_THREAD ? "thread" : "process");
    }
    /* channels: what each writer published */
    adag_channel_stats_t c;
    find_chan(s, "input[0]", &c);
    cr_assert(c.values == RUNS && c.bytes == RUNS * 8 && strcmp(c.writer, "driver") == 0,
              "input[0]: %llu values, %llu bytes, writer %s", (unsigned long long)c.values,
              (unsigned long long)c.bytes, c.writer);
    cr_assert(c.in_use >= 0 && c.in_use <= 4 && c.slots == 4, "in use %d of %u", c.in_use,
              c.slots);
    cr_assert_str_eq(c.kind, "shm");
    find_chan(s, "s1.sleep_ms[0]", &c);
    cr_assert(c.values == RUNS && c.bytes == RUNS * 8 && strcmp(c.writer, "s1") == 0,
              "s1.sleep_ms[0]: %llu values, writer %s", (unsigned long long)c.values, c.writer);
    /* every value was released: nothing in use once the last ref went */
    cr_assert_eq(c.in_use, 0);
    /* the table names the bottleneck */
    h_text_t t = {0};
    ASSERT_OK(adag_stats_print(s, h_text_writer(&t)));
    char *text = t.text;
    cr_assert(strstr(text, "bottleneck: actor s1"), "%s", text);
    cr_assert(strstr(text, "sleep_ms"), "%s", text);
    free(text);
    adag_stats_free(s);
    /* idle now: every loop has waited since its last op */
    usleep(200 * 1000);
    ASSERT_OK(adag_dag_stats_take(dag, &s));
    for (unsigned i = 0; i < 3; i++) {
        as = (adag_actor_stats_t)ADAG_ACTOR_STATS_INIT;
        ASSERT_OK(adag_stats_actor(s, i, &as));
        cr_assert(as.idle_ns >= 150000000ull && as.idle_ns < as.elapsed_ns,
                  "%s: last op %llu ns ago", as.name, (unsigned long long)as.idle_ns);
    }
    adag_stats_free(s);
    /* adag_dag_stats' version-3 fields */
    adag_dag_stats_t ds = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &ds));
    cr_assert(ds.timed == 1 && strcmp(ds.bottleneck, "s1") == 0 && ds.bottleneck_busy > 0.05,
              "timed %d bottleneck %s busy %f", ds.timed, ds.bottleneck, ds.bottleneck_busy);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(stats, slow_stage_of_threads, .timeout = 60)
{
    check_slow_chain(ADAG_PLACEMENT_THREAD);
}

Test(stats, slow_stage_of_processes, .timeout = 60)
{
    check_slow_chain(ADAG_PLACEMENT_PROCESS);
}

/* Without tracing: counts, no times, no bottleneck, and the table says so;
 * a caller of the first adag_dag_stats_t version still works. */
Test(stats, untraced_counts_only, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = slow_chain(rt, ADAG_PLACEMENT_PROCESS, 0);
    run(dag);
    adag_stats_h s;
    ASSERT_OK(adag_dag_stats_take(dag, &s));
    cr_assert_eq(adag_stats_timed(s), 0);
    adag_op_stats_t o;
    find_op(s, "s1", &o);
    cr_assert(o.count == RUNS && o.compute_ns == 0 && o.compute_p99_ns == 0,
              "count %llu compute %llu", (unsigned long long)o.count,
              (unsigned long long)o.compute_ns);
    cr_assert_null(adag_stats_bottleneck(s, NULL));
    h_text_t t = {0};
    ASSERT_OK(adag_stats_print(s, h_text_writer(&t)));
    char *text = t.text;
    cr_assert(strstr(text, "times not measured"), "%s", text);
    free(text);
    adag_stats_free(s);
    adag_dag_stats_t ds = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(dag, &ds));
    cr_assert(ds.timed == 0 && ds.bottleneck[0] == '\0');
    /* a first-version caller: only its bytes are written */
    adag_dag_stats_t old;
    memset(&old, 0xab, sizeof(old));
    old.struct_size = 72;
    ASSERT_OK(adag_dag_stats(dag, &old));
    cr_assert(old.struct_size == 72 && old.executed == RUNS);
    cr_assert_eq(((unsigned char *)&old)[72], 0xab);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(stats, refusals, .timeout = 60)
{
    adag_runtime_h rt = h_runtime();
    adag_dag_h dag = slow_chain(rt, ADAG_PLACEMENT_THREAD, 1);
    adag_stats_h s;
    ASSERT_ST(adag_dag_stats_take(NULL, &s), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_stats_take(dag, NULL), ADAG_ERR_INVALID);
    ASSERT_OK(adag_dag_stats_take(dag, &s));
    adag_op_stats_t o = ADAG_OP_STATS_INIT;
    ASSERT_ST(adag_stats_op(s, 3, &o), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("index 3, the snapshot has 3");
    o.struct_size = 0;
    ASSERT_ST(adag_stats_op(s, 0, &o), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("struct_size is 0");
    ASSERT_ST(adag_stats_print(s, (adag_writer_t){NULL, NULL}), ADAG_ERR_INVALID);
    /* nothing ran: no bottleneck yet */
    cr_assert_null(adag_stats_bottleneck(s, NULL));
    /* a caller built before `unanswered`: only its bytes are written */
    adag_actor_stats_t old;
    memset(&old, 0xab, sizeof(old));
    old.struct_size = offsetof(adag_actor_stats_t, unanswered);
    ASSERT_OK(adag_stats_actor(s, 0, &old));
    cr_assert(old.struct_size == offsetof(adag_actor_stats_t, unanswered) &&
              strcmp(old.name, "s0") == 0);
    cr_assert_eq(((unsigned char *)&old)[offsetof(adag_actor_stats_t, unanswered)], 0xab);
    adag_stats_free(s);
    adag_stats_free(NULL);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* A fresh 0700 directory as $XDG_RUNTIME_DIR (this test's process only). */
static void runtime_dir(char *dir)
{
    strcpy(dir, "/tmp/adag-stats-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    setenv("XDG_RUNTIME_DIR", dir, 1);
}

static void remove_dir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* `adag-info attach` on a running driver: two views a moment apart show
 * the stuck stage computing (its method sleeps 1.5 s), the one after it
 * waiting for input, the bottleneck, and the rate between the views. */
Test(stats, live_view_shows_a_stuck_stage, .timeout = 60)
{
    char dir[64];
    runtime_dir(dir);
    adag_runtime_h rt = h_runtime();
    cr_assert_null(adag_runtime_live_path(rt), "closed unless asked");
    ASSERT_OK(adag_runtime_live_open(rt, NULL));
    ASSERT_ST(adag_runtime_live_open(rt, NULL), ADAG_ERR_BUSY);
    const char *path = adag_runtime_live_path(rt);
    char want[64];
    snprintf(want, sizeof(want), "/adag/%d.sock", (int)getpid());
    cr_assert(path && strstr(path, dir) && strstr(path, want), "%s", path ? path : "(null)");
    char sock[256];
    snprintf(sock, sizeof(sock), "%s", path);
    struct stat sb;
    cr_assert_eq(stat(sock, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0600);
    adag_dag_h dag = slow_chain(rt, ADAG_PLACEMENT_THREAD, 1);
    run(dag);
    adag_ref_t stuck = h_execute(dag, 1500);
    usleep(300 * 1000);
    char cmd[512], out[16384] = "";
    snprintf(cmd, sizeof(cmd), "%s/adag-info attach %d --count 2 --interval 0.3 2>&1",
             ADAG_TEST_BUILD_DIR, (int)getpid());
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    cr_assert_eq(pclose(p), 0, "%s", out);
    cr_assert(strstr(out, "--- view 2") && strstr(out, "bottleneck: actor s1") &&
                  strstr(out, "computing sleep_ms") && strstr(out, "waiting for input add") &&
                  strstr(out, "executions/s since the last view"),
              "%s", out);
    cr_assert_eq(h_get_i64(dag, stuck, 10000), 1500);
    ASSERT_OK(adag_dag_release(dag, stuck));
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_live_close(rt));
    cr_assert_null(adag_runtime_live_path(rt));
    cr_assert_neq(stat(sock, &sb), 0, "the socket is gone once closed");
    ASSERT_OK(adag_runtime_destroy(rt));
    remove_dir(dir);
}

/* ADAG_LIVE=1 opens it at adag_runtime_create; destroy closes it. */
Test(stats, live_setting_opens_it, .timeout = 60)
{
    char dir[64];
    runtime_dir(dir);
    setenv("ADAG_LIVE", "1", 1);
    adag_runtime_h rt = h_runtime();
    const char *path = adag_runtime_live_path(rt);
    cr_assert(path && strstr(path, dir), "%s", path ? path : "(null)");
    char sock[256];
    snprintf(sock, sizeof(sock), "%s", path);
    ASSERT_OK(adag_runtime_destroy(rt));
    struct stat sb;
    cr_assert_neq(stat(sock, &sb), 0, "destroy closes the live view");
    remove_dir(dir);
}

/* ---- observation of a stuck actor ---- */

static double ms_since(int64_t t0)
{
    return (double)(adag__now_ns() - t0) / 1e6;
}

/* The figures of actor `name` in s (asserts it is there). */
static void find_actor(adag_stats_h s, const char *name, adag_actor_stats_t *out)
{
    for (unsigned i = 0; i < adag_stats_nactors(s); i++) {
        *out = (adag_actor_stats_t)ADAG_ACTOR_STATS_INIT;
        ASSERT_OK(adag_stats_actor(s, i, out));
        if (strcmp(out->name, name) == 0)
            return;
    }
    cr_assert_fail("no actor %s", name);
}

/* A snapshot with s1 stopped: within the bound, s0's and s2's figures,
 * s1 named as not answering (in the struct and the printed table). */
static void stats_without_s1(adag_dag_h dag, int bound_ms, uint64_t ran)
{
    adag_stats_h s;
    int64_t t0 = adag__now_ns();
    adag_status_t st = adag_dag_stats_take(dag, &s);
    double ms = ms_since(t0);
    cr_assert_eq(st, ADAG_OK, "stats_take with s1 stopped: %s (after %.0f ms)",
                 adag_last_error(), ms);
    cr_assert_lt(ms, bound_ms + 4000.0, "stats_take took %.0f ms with s1 stopped (bound %d ms)",
                 ms, bound_ms);
    cr_assert_eq(adag_stats_nactors(s), 3);
    adag_actor_stats_t as;
    find_actor(s, "s1", &as);
    cr_assert_not_null(as.unanswered, "s1 is stopped, yet it is not marked as not answering");
    cr_assert_null(adag_stats_bottleneck(s, NULL), "a bottleneck named without s1's figures");
    char want[64];
    snprintf(want, sizeof(want), "did not answer within %d ms", bound_ms);
    cr_assert(strstr(as.unanswered, want), "s1: %s", as.unanswered);
    for (int i = 0; i < 3; i += 2) {
        find_actor(s, i ? "s2" : "s0", &as);
        cr_assert_null(as.unanswered, "%s: %s", as.name, as.unanswered);
        cr_assert_geq(as.count, ran, "%s: %llu executions", as.name,
                      (unsigned long long)as.count);
    }
    h_text_t t = {0};
    ASSERT_OK(adag_stats_print(s, h_text_writer(&t)));
    char *text = t.text;
    cr_assert(strstr(text, "s1") && strstr(text, want) && strstr(text, "s0") &&
                  strstr(text, "1 actor did not answer"),
              "%s", text);
    free(text);
    adag_stats_free(s);
}

/* The trace with s1 stopped: within the bound, s0's and s2's spans, s1's
 * track there and empty, s1 named in otherData as not answering
 * (tests/trace_check.py --unanswered). */
static void trace_without_s1(adag_dag_h dag, int bound_ms)
{
    char want[64];
    snprintf(want, sizeof(want), "did not answer within %d ms", bound_ms);
    int64_t t0 = adag__now_ns();
    h_trace_check(dag, "--unanswered s1", want);
    double ms = ms_since(t0);
    cr_assert_lt(ms, bound_ms + 4000.0, "write_trace took %.0f ms with s1 stopped", ms);
}

/* `adag-info attach` with s1 stopped: a view within the bound, s0 and s2
 * in it, s1 said not to answer. */
static void attach_without_s1(int bound_ms)
{
    char cmd[512], out[16384] = "";
    snprintf(cmd, sizeof(cmd), "%s/adag-info attach %d --count 1 2>&1", ADAG_TEST_BUILD_DIR,
             (int)getpid());
    int64_t t0 = adag__now_ns();
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    cr_assert_eq(pclose(p), 0, "%s", out);
    double ms = ms_since(t0);
    cr_assert_lt(ms, bound_ms + 4000.0, "attach took %.0f ms with s1 stopped", ms);
    char want[64];
    snprintf(want, sizeof(want), "did not answer within %d ms", bound_ms);
    cr_assert(strstr(out, "s0") && strstr(out, "s2") && strstr(out, "s1") && strstr(out, want),
              "%s", out);
}

/* A process actor SIGSTOPped while the DAG runs: statistics, the trace and
 * the live view answer within ADAG_STATS_TIMEOUT_MS (asked of every actor
 * at once) with the others' figures and s1 named as not answering --
 * twice, the second time with the first request still unanswered; once
 * continued, s1 answers again (its late answers were dropped, not taken
 * for later ones) and the DAG runs on. */
static void observe_a_stopped_actor(int bound_ms)
{
    char dir[64], ms_text[16];
    runtime_dir(dir);
    /* a request that waited for the control timeout (120 s) fails fast */
    setenv("ADAG_CONTROL_TIMEOUT_MS", "20000", 1);
    if (bound_ms != 1000) {
        snprintf(ms_text, sizeof(ms_text), "%d", bound_ms);
        setenv("ADAG_STATS_TIMEOUT_MS", ms_text, 1);
    }
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    ASSERT_OK(adag_runtime_live_open(rt, NULL));
    adag_actor_h a[3];
    adag_dag_h dag = slow_chain_of(rt, ADAG_PLACEMENT_PROCESS, 1, a);
    run(dag);
    /* stop s1 with an execution in flight (s2 then waits for it) */
    adag_ref_t stuck = h_execute(dag, SLOW_MS);
    pid_t pid = adag_actor_pid(a[1]);
    cr_assert_eq(kill(pid, SIGSTOP), 0);
    for (int i = 0; i < 2000 && h_proc_state(pid) != 'T'; i++)
        usleep(1000);
    cr_assert_eq(h_proc_state(pid), 'T', "s1 did not stop");
    stats_without_s1(dag, bound_ms, RUNS);
    trace_without_s1(dag, bound_ms);
    attach_without_s1(bound_ms);
    stats_without_s1(dag, bound_ms, RUNS); /* its earlier requests still unanswered */
    cr_assert_eq(kill(pid, SIGCONT), 0);
    cr_assert_eq(h_get_i64(dag, stuck, 10000), SLOW_MS);
    ASSERT_OK(adag_dag_release(dag, stuck));
    /* s1 answers again, with its own figures (counted before the result
     * went: exact). It first answers the requests it owes, one per
     * observation made while it was stopped, which a slow build (ASan) may
     * take longer than one bound for: a take may still miss it, for a
     * while, never for good */
    adag_stats_h s;
    adag_actor_stats_t as;
    for (int tries = 0;; tries++) {
        ASSERT_OK(adag_dag_stats_take(dag, &s));
        find_actor(s, "s1", &as);
        if (!as.unanswered || tries == 200)
            break;
        adag_stats_free(s);
        usleep(50 * 1000);
    }
    for (int i = 0; i < 3; i++) {
        const char *name = i == 0 ? "s0" : i == 1 ? "s1" : "s2";
        find_actor(s, name, &as);
        cr_assert_null(as.unanswered, "%s after SIGCONT: %s", name, as.unanswered);
        cr_assert_eq(as.count, RUNS + 1, "%s: %llu executions", name,
                     (unsigned long long)as.count);
    }
    adag_stats_free(s);
    run(dag);
    /* and the trace has every actor's spans again */
    h_trace_check(dag, "--unanswered -", "ok every actor answered");
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
    remove_dir(dir);
}

Test(stats, observe_a_stopped_actor, .timeout = 120)
{
    observe_a_stopped_actor(1000);
}

Test(stats, observe_a_stopped_actor_bound_set, .timeout = 120)
{
    observe_a_stopped_actor(400);
}

/*
 * Configuration objects (suite "config", include/adag.h "Configuration"):
 * adag_config_read takes the environment's values, adag_config_modify
 * checks names and values with the settings table's messages,
 * adag_config_print lists every setting, and a runtime created with a
 * config keeps its own copy. Two runtimes of one process with different
 * timeouts and spins each behave by their own; a process actor and a
 * remote one (through a real agent) run on their runtime's settings while
 * their environment says otherwise.
 */
#include "helpers.h"
#include "builders.h"
#include "remote_rig.h"
#include "tensor_actors.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef ADAG_TEST_DEVICE_MODULE
#error "ADAG_TEST_DEVICE_MODULE must be defined by the build"
#endif

/* Every setting of the table, in its order (`adag-info -c`, README
 * "Settings"). */
static const char *const all_settings[] = {
    "ADAG_WORKER_PATH",          "ADAG_CUDART_PATH",
    "ADAG_NCCL_PATH",            "ADAG_SPIN_NS",
    "ADAG_SPIN_NS_CROWDED",      "ADAG_MAX_INFLIGHT",
    "ADAG_SLOT_CAPACITY",        "ADAG_EXECUTE_TIMEOUT_MS",
    "ADAG_TEARDOWN_TIMEOUT_MS",  "ADAG_CONTROL_TIMEOUT_MS",
    "ADAG_COMM_TIMEOUT_MS",      "ADAG_LOG_LEVEL",
    "ADAG_EMU_DEVICES",         "ADAG_EMU_COPY_MBPS",
    "ADAG_DEVICE_MEMOPS",
    "ADAG_TOKEN_FILE",           "ADAG_TOKEN",
    "ADAG_HOSTS",                "ADAG_REMOTE_TIMEOUT_MS",
    "ADAG_AGENT_AUTH_TIMEOUT_MS", "ADAG_DATA_CACHE_DIR",
    "ADAG_DATA_CACHE_BYTES",     "ADAG_DATA_FETCHES",
    "ADAG_DATA_HTTP_RETRIES",    "ADAG_DATA_HTTP_TIMEOUT_MS",
    "ADAG_TRACE_SPANS",          "ADAG_LIVE",
    "ADAG_STATS_TIMEOUT_MS",     "ADAG_PLACEMENT",
    "ADAG_TOPO_XML",             "ADAG_TOPO_XML_THIS_SYSTEM",
};
#define NSETTINGS (sizeof(all_settings) / sizeof(all_settings[0]))

/* The process-wide ones (each process reads its environment once). */
static const char *const process_wide[] = {
    "ADAG_CUDART_PATH",  "ADAG_NCCL_PATH",           "ADAG_LOG_LEVEL", "ADAG_EMU_DEVICES",
    "ADAG_AGENT_AUTH_TIMEOUT_MS", "ADAG_TOPO_XML", "ADAG_TOPO_XML_THIS_SYSTEM",
};

/* The whole text of adag_config_print (malloc'd), checking the size it says. */
static char *print_config(adag_config_h c)
{
    size_t need = 0;
    ASSERT_ST(adag_config_print(c, NULL, 0, &need), ADAG_ERR_TOO_LARGE);
    cr_assert_gt(need, 1);
    char *text = malloc(need);
    size_t again = 0;
    ASSERT_OK(adag_config_print(c, text, need, &again));
    cr_assert_eq(again, need);
    cr_assert_eq(strlen(text) + 1, need, "the text is %zu bytes, print said %zu with its NUL",
                 strlen(text), need);
    return text;
}

/* The line of setting `name` in a printed text (NULL if none), and its
 * value: what stands between " = " and " (default", blanks trimmed. */
static const char *setting_line(const char *text, const char *name, char *value, size_t len)
{
    size_t n = strlen(name);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, name, n) != 0 || (l[n] != ' ' && l[n] != '='))
            continue;
        const char *eq = strstr(l, " = "), *dflt = strstr(l, " (default ");
        cr_assert(eq && dflt && eq < dflt, "malformed line for %s", name);
        const char *v = eq + 3, *end = dflt;
        while (end > v && end[-1] == ' ')
            end--;
        snprintf(value, len, "%.*s", (int)(end - v), v);
        return l;
    }
    return NULL;
}

static void assert_value(const char *text, const char *name, const char *want)
{
    char v[256];
    cr_assert(setting_line(text, name, v, sizeof(v)), "%s is not printed", name);
    cr_assert_str_eq(v, want, "%s", name);
}

/* A runtime with the test classes whose settings are the environment's
 * changed by pairs {name, value, ..., NULL}. */
static adag_runtime_h runtime_with(const char *const *pairs)
{
    adag_config_h c = NULL;
    ASSERT_OK(adag_config_read(&c));
    for (; pairs && *pairs; pairs += 2)
        ASSERT_OK(adag_config_modify(c, pairs[0], pairs[1]));
    adag_runtime_params_t p = {.field_mask = ADAG_RUNTIME_PARAM_CONFIG, .config = c};
    adag_runtime_h rt = NULL;
    ASSERT_OK(adag_runtime_create(&p, &rt));
    ASSERT_OK(adag_config_release(c));
    ASSERT_OK(adag_class_register(rt, &test_counter_class));
    return rt;
}

/* input -> actor.method -> output, compiled with no params: every default
 * is the runtime's. */
static adag_dag_h one_stage(adag_runtime_h rt, adag_actor_h a, const char *method,
                            adag_graph_h *g)
{
    h_stage_t st = {a, method};
    adag_dag_h dag = NULL;
    const char *step = "";
    ASSERT_OK(h_try_chain(rt, &st, 1, NULL, g, &dag, &step));
    return dag;
}

/* ---- the config object ---- */

Test(config, modify_checks_names_and_values, .timeout = 30)
{
    adag_config_h c = NULL;
    ASSERT_OK(adag_config_read(&c));
    ASSERT_OK(adag_config_modify(c, "ADAG_EXECUTE_TIMEOUT_MS", "250"));
    ASSERT_OK(adag_config_modify(c, "ADAG_HOSTS", "a=10.0.0.1:7000"));
    static const struct {
        const char *name, *value;
        adag_status_t st;
        const char *says;
    } refused[] = {
        {"ADAG_NO_SUCH_SETTING", "1", ADAG_ERR_NOT_FOUND,
         "adag_config_modify: there is no setting ADAG_NO_SUCH_SETTING"},
        {"ADAG_EXECUTE_TIMEOUT_MS", "soon", ADAG_ERR_INVALID,
         "adag_config_modify: ADAG_EXECUTE_TIMEOUT_MS=soon: not an integer in [-1, 2147483647]"},
        {"ADAG_EXECUTE_TIMEOUT_MS", "-2", ADAG_ERR_INVALID,
         "ADAG_EXECUTE_TIMEOUT_MS=-2: not an integer in [-1, 2147483647]"},
        {"ADAG_EXECUTE_TIMEOUT_MS", "250ms", ADAG_ERR_INVALID, "ADAG_EXECUTE_TIMEOUT_MS=250ms"},
        {"ADAG_MAX_INFLIGHT", "4097", ADAG_ERR_INVALID,
         "ADAG_MAX_INFLIGHT=4097: not an integer in [1, 4096]"},
        {"ADAG_SPIN_NS", "99999999999999999999", ADAG_ERR_INVALID, "not an integer in [0, "},
        {"ADAG_LOG_LEVEL", "4", ADAG_ERR_INVALID, "ADAG_LOG_LEVEL is process-wide"},
        {"ADAG_EMU_DEVICES", "2", ADAG_ERR_INVALID, "ADAG_EMU_DEVICES is process-wide"},
    };
    for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        ASSERT_ST(adag_config_modify(c, refused[i].name, refused[i].value), refused[i].st);
        ASSERT_MSG_HAS(refused[i].says);
    }
    ASSERT_ST(adag_config_modify(NULL, "ADAG_SPIN_NS", "1"), ADAG_ERR_INVALID);
    ASSERT_ST(adag_config_modify(c, NULL, "1"), ADAG_ERR_INVALID);
    ASSERT_ST(adag_config_modify(c, "ADAG_SPIN_NS", NULL), ADAG_ERR_INVALID);
    /* what was refused left the config as it was */
    char *text = print_config(c);
    assert_value(text, "ADAG_EXECUTE_TIMEOUT_MS", "250");
    assert_value(text, "ADAG_MAX_INFLIGHT", "8");
    assert_value(text, "ADAG_HOSTS", "a=10.0.0.1:7000");
    free(text);
    /* "" is the default again, as an empty environment variable */
    ASSERT_OK(adag_config_modify(c, "ADAG_EXECUTE_TIMEOUT_MS", ""));
    ASSERT_OK(adag_config_modify(c, "ADAG_HOSTS", ""));
    text = print_config(c);
    assert_value(text, "ADAG_EXECUTE_TIMEOUT_MS", "60000");
    assert_value(text, "ADAG_HOSTS", "(unset)");
    free(text);
    ASSERT_OK(adag_config_release(c));
    ASSERT_ST(adag_config_release(NULL), ADAG_ERR_INVALID);
    ASSERT_ST(adag_config_read(NULL), ADAG_ERR_INVALID);
}

Test(config, print_lists_every_setting, .timeout = 30)
{
    unsetenv("ADAG_TOKEN");
    adag_config_h c = NULL;
    ASSERT_OK(adag_config_read(&c));
    ASSERT_OK(adag_config_modify(c, "ADAG_TOKEN", "do not print me"));
    char *text = print_config(c);
    /* two lines a setting: "NAME = value (default D)", then what it does */
    unsigned lines = 0, entries = 0;
    for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
        cr_assert(strchr(l, '\n'), "the text does not end its last line");
        lines++;
        entries += strncmp(l, "ADAG_", 5) == 0;
    }
    cr_assert_eq(entries, NSETTINGS, "%u settings printed, the table has %zu:\n%s", entries,
                 NSETTINGS, text);
    cr_assert_eq(lines, 2 * NSETTINGS, "%u lines for %zu settings", lines, NSETTINGS);
    const char *prev = text;
    for (unsigned i = 0; i < NSETTINGS; i++) {
        char v[256];
        const char *l = setting_line(text, all_settings[i], v, sizeof(v));
        cr_assert(l, "%s is not printed:\n%s", all_settings[i], text);
        cr_assert_geq(l, prev, "%s is out of the table's order", all_settings[i]);
        prev = l;
        const char *desc = strchr(l, '\n') + 1;
        cr_assert(strncmp(desc, "    ", 4) == 0 && desc[4] != ' ' && desc[4] != '\n',
                  "%s has no description line", all_settings[i]);
        int proc = 0;
        for (unsigned k = 0; k < sizeof(process_wide) / sizeof(process_wide[0]); k++)
            proc |= strcmp(process_wide[k], all_settings[i]) == 0;
        const char *eol = strchr(l, '\n');
        const char *mark = strstr(l, "; process-wide)");
        cr_assert_eq(mark && mark < eol, proc, "%s: process-wide is %s", all_settings[i],
                     proc ? "not said" : "said");
    }
    cr_assert_null(strstr(text, "do not print me"), "the token was printed");
    assert_value(text, "ADAG_TOKEN", "(set, hidden)");
    assert_value(text, "ADAG_SPIN_NS", "100000");
    /* a buffer too small: its beginning, NUL-terminated, and the size */
    char small[64];
    size_t need = 0;
    memset(small, 'x', sizeof(small));
    ASSERT_ST(adag_config_print(c, small, sizeof(small), &need), ADAG_ERR_TOO_LARGE);
    cr_assert_eq(need, strlen(text) + 1);
    cr_assert_eq(strlen(small), sizeof(small) - 1);
    cr_assert_eq(strncmp(small, text, sizeof(small) - 1), 0);
    ASSERT_ST(adag_config_print(c, NULL, 10, &need), ADAG_ERR_INVALID);
    ASSERT_ST(adag_config_print(NULL, small, sizeof(small), &need), ADAG_ERR_INVALID);
    free(text);
    ASSERT_OK(adag_config_release(c));
}

/* The environment gives a config's values, read when the config is read;
 * a value the table refuses leaves the default (and nothing hangs: the
 * settings load once deadlocked on its own warning). A runtime without a
 * config takes the environment when it is created. */
Test(config, environment_gives_the_values, .timeout = 30)
{
    setenv("ADAG_SPIN_NS", "not a number", 1);    /* refused: the default */
    setenv("ADAG_EMU_DEVICES", "many", 1);       /* process-wide, refused */
    setenv("ADAG_EXECUTE_TIMEOUT_MS", "150", 1);
    setenv("ADAG_MAX_INFLIGHT", "1", 1);
    unsigned n = 0;
    ASSERT_OK(adag_device_count("emu", &n));
    cr_assert_eq(n, 4, "a refused ADAG_EMU_DEVICES keeps the default 4, got %u", n);
    adag_config_h c = NULL;
    ASSERT_OK(adag_config_read(&c));
    char *text = print_config(c);
    assert_value(text, "ADAG_SPIN_NS", "100000");
    assert_value(text, "ADAG_EXECUTE_TIMEOUT_MS", "150");
    assert_value(text, "ADAG_EMU_DEVICES", "4");
    free(text);
    setenv("ADAG_EXECUTE_TIMEOUT_MS", "170", 1); /* read again: the new value */
    adag_config_h c2 = NULL;
    ASSERT_OK(adag_config_read(&c2));
    text = print_config(c2);
    assert_value(text, "ADAG_EXECUTE_TIMEOUT_MS", "170");
    free(text);
    ASSERT_OK(adag_config_release(c));
    ASSERT_OK(adag_config_release(c2));
    /* a runtime without a config: the environment now (170 ms, one slot) */
    adag_runtime_h rt = h_runtime();
    unsetenv("ADAG_EXECUTE_TIMEOUT_MS");
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g;
    adag_dag_h dag = one_stage(rt, a, "add", &g);
    adag_ref_t r0 = h_execute(dag, 1), r1;
    cr_assert_eq(h_get_i64(dag, r0, 10000), 1);
    int64_t x = 2;
    adag_value_t v = h_i64v(&x);
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &r1), ADAG_ERR_TIMEOUT);
    ASSERT_MSG_HAS("no room after 170 ms");
    ASSERT_OK(adag_dag_release(dag, r0));
    ASSERT_OK(adag_runtime_destroy(rt));
    unsetenv("ADAG_SPIN_NS");
    unsetenv("ADAG_EMU_DEVICES");
    unsetenv("ADAG_MAX_INFLIGHT");
}

/* The config field and its bit follow the params rule; the runtime keeps
 * a copy: modifying or releasing the config afterwards changes nothing. */
Test(config, runtime_keeps_its_own_copy, .timeout = 30)
{
    adag_runtime_h rt = NULL;
    adag_runtime_params_t p = {.field_mask = ADAG_RUNTIME_PARAM_CONFIG};
    ASSERT_ST(adag_runtime_create(&p, &rt), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("config is NULL, but its bit ADAG_RUNTIME_PARAM_CONFIG is set");
    adag_config_h c = NULL;
    ASSERT_OK(adag_config_read(&c));
    p = (adag_runtime_params_t){.config = c};
    ASSERT_ST(adag_runtime_create(&p, &rt), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("adag_runtime_params_t.config is set, but its bit ADAG_RUNTIME_PARAM_CONFIG");
    cr_assert_null(rt);
    ASSERT_OK(adag_config_modify(c, "ADAG_EXECUTE_TIMEOUT_MS", "120"));
    ASSERT_OK(adag_config_modify(c, "ADAG_MAX_INFLIGHT", "1"));
    p.field_mask = ADAG_RUNTIME_PARAM_CONFIG;
    ASSERT_OK(adag_runtime_create(&p, &rt));
    ASSERT_OK(adag_config_modify(c, "ADAG_EXECUTE_TIMEOUT_MS", "9000"));
    ASSERT_OK(adag_config_modify(c, "ADAG_MAX_INFLIGHT", "8"));
    ASSERT_OK(adag_config_release(c));
    ASSERT_OK(adag_class_register(rt, &test_counter_class));
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g;
    adag_dag_h dag = one_stage(rt, a, "add", &g);
    adag_ref_t r0 = h_execute(dag, 1), r1;
    int64_t x = 2;
    adag_value_t v = h_i64v(&x);
    ASSERT_ST(adag_dag_execute(dag, &v, 1, 0, &r1), ADAG_ERR_TIMEOUT);
    ASSERT_MSG_HAS("no room after 120 ms");
    ASSERT_MSG_HAS("(max_inflight 1)");
    ASSERT_OK(adag_dag_release(dag, r0));
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* adag_dag_config gives the settings the DAG runs on: its runtime's, not
 * the environment's, as a copy of its own. */
Test(config, a_dag_gives_its_runtimes_settings, .timeout = 30)
{
    setenv("ADAG_DATA_HTTP_RETRIES", "7", 1);
    static const char *const pairs[] = {"ADAG_DATA_HTTP_RETRIES", "2", "ADAG_SPIN_NS", "1234",
                                        NULL};
    adag_runtime_h rt = runtime_with(pairs);
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 0);
    adag_graph_h g;
    adag_dag_h dag = one_stage(rt, a, "add", &g);
    adag_config_h c = NULL;
    ASSERT_ST(adag_dag_config(NULL, &c), ADAG_ERR_INVALID);
    ASSERT_ST(adag_dag_config(dag, NULL), ADAG_ERR_INVALID);
    ASSERT_OK(adag_dag_config(dag, &c));
    char *text = print_config(c);
    assert_value(text, "ADAG_DATA_HTTP_RETRIES", "2");
    assert_value(text, "ADAG_SPIN_NS", "1234");
    free(text);
    /* a copy: changing it changes nothing of the DAG's */
    ASSERT_OK(adag_config_modify(c, "ADAG_SPIN_NS", "5"));
    ASSERT_OK(adag_config_release(c));
    ASSERT_OK(adag_dag_config(dag, &c));
    text = print_config(c);
    assert_value(text, "ADAG_SPIN_NS", "1234");
    free(text);
    ASSERT_OK(adag_config_release(c));
    ASSERT_OK(adag_runtime_destroy(rt));
    unsetenv("ADAG_DATA_HTTP_RETRIES");
}

/* ---- two runtimes in one process ---- */

/* One slot and its own execute and teardown timeouts in each runtime: a
 * second execute waits its runtime's execute timeout, and destroying a DAG
 * whose process actor is stuck in a method waits its runtime's teardown
 * timeout before the worker is killed. Both runtimes live at once. */
Test(config, two_runtimes_keep_their_own_timeouts, .timeout = 90)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    static const char *const settings[2][7] = {
        {"ADAG_EXECUTE_TIMEOUT_MS", "200", "ADAG_TEARDOWN_TIMEOUT_MS", "300",
         "ADAG_MAX_INFLIGHT", "1", NULL},
        {"ADAG_EXECUTE_TIMEOUT_MS", "2000", "ADAG_TEARDOWN_TIMEOUT_MS", "3000",
         "ADAG_MAX_INFLIGHT", "1", NULL},
    };
    static const int exec_ms[2] = {200, 2000}, teardown_ms[2] = {300, 3000};
    adag_runtime_h rt[2];
    adag_graph_h g[2];
    adag_dag_h dag[2];
    adag_ref_t r0[2];
    for (int i = 0; i < 2; i++) {
        rt[i] = runtime_with(settings[i]);
        adag_actor_h a = h_counter(rt[i], ADAG_PLACEMENT_PROCESS, "sleeper", 0);
        dag[i] = one_stage(rt[i], a, "sleep_ms", &g[i]);
        r0[i] = h_execute(dag[i], 0);
        cr_assert_eq(h_get_i64(dag[i], r0[i], 20000), 0);
    }
    /* the window of one is taken: execute waits its own runtime's timeout */
    for (int i = 0; i < 2; i++) {
        int64_t x = 0;
        adag_value_t v = h_i64v(&x);
        adag_ref_t r;
        double t0 = h_now_ms();
        ASSERT_ST(adag_dag_execute(dag[i], &v, 1, 0, &r), ADAG_ERR_TIMEOUT);
        double took = h_now_ms() - t0;
        char says[64];
        snprintf(says, sizeof(says), "no room after %d ms", exec_ms[i]);
        ASSERT_MSG_HAS(says);
        cr_assert(took >= exec_ms[i] * 0.9 && took < exec_ms[i] + 1500,
                  "runtime %d: execute gave up after %.0f ms, its timeout is %d ms", i, took,
                  exec_ms[i]);
        ASSERT_OK(adag_dag_release(dag[i], r0[i]));
    }
    /* a method stuck for a minute: destroy waits the runtime's teardown
     * timeout, then kills the worker */
    for (int i = 0; i < 2; i++)
        (void)h_execute(dag[i], 60000);
    h_sleep_ms(100);
    for (int i = 0; i < 2; i++) {
        double t0 = h_now_ms();
        ASSERT_OK(adag_dag_destroy(dag[i]));
        double took = h_now_ms() - t0;
        cr_log_info("runtime %d: a stuck DAG went in %.0f ms (teardown timeout %d ms)", i, took,
                    teardown_ms[i]);
        cr_assert(took >= teardown_ms[i] * 0.9 && took < teardown_ms[i] + 2500,
                  "runtime %d: destroying a stuck DAG took %.0f ms, its teardown timeout is "
                  "%d ms",
                  i, took, teardown_ms[i]);
        ASSERT_OK(adag_graph_destroy(g[i]));
    }
    for (int i = 0; i < 2; i++)
        ASSERT_OK(adag_runtime_destroy(rt[i]));
    h_assert_clean(&snap);
}

/* CPU time a process has used (user + system), in ms. */
static double cpu_ms(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert(f, "no %s", path);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* after the name: state (field 3) ... utime (14), stime (15) */
    const char *p = strrchr(buf, ')');
    cr_assert(p);
    unsigned long utime = 0, stime = 0;
    cr_assert_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                        &stime),
                 2);
    return (double)(utime + stime) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

/* Each runtime's spin reaches its actors' loops: a worker waiting 250 ms
 * for each next input sleeps at once with ADAG_SPIN_NS=0 and spins through
 * the wait with 1 s, which its CPU time shows. */
Test(config, two_runtimes_keep_their_own_spin, .timeout = 90)
{
    static const char *const settings[2][5] = {
        {"ADAG_SPIN_NS", "0", "ADAG_SPIN_NS_CROWDED", "0", NULL},
        {"ADAG_SPIN_NS", "1000000000", "ADAG_SPIN_NS_CROWDED", "1000000000", NULL},
    };
    enum { ROUNDS = 8, GAP_MS = 250 };
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt[2];
    adag_graph_h g[2];
    adag_dag_h dag[2];
    pid_t pid[2];
    double used[2];
    for (int i = 0; i < 2; i++) {
        rt[i] = runtime_with(settings[i]);
        adag_actor_h a = h_counter(rt[i], ADAG_PLACEMENT_PROCESS, "waiter", 0);
        pid[i] = adag_actor_pid(a);
        dag[i] = one_stage(rt[i], a, "add", &g[i]);
        cr_assert_eq(h_roundtrip(dag[i], 1), 1);
    }
    for (int i = 0; i < 2; i++) {
        double before = cpu_ms(pid[i]);
        for (int k = 0; k < ROUNDS; k++) {
            h_sleep_ms(GAP_MS); /* the worker waits for the next input */
            cr_assert_eq(h_roundtrip(dag[i], k), k);
        }
        used[i] = cpu_ms(pid[i]) - before;
    }
    cr_log_info("worker CPU time over %d waits of %d ms: %.0f ms (spin 0), %.0f ms (spin 1 s)",
                ROUNDS, GAP_MS, used[0], used[1]);
    cr_assert(used[0] < 150, "the worker of a runtime with ADAG_SPIN_NS=0 used %.0f ms of CPU "
                             "in %d idle waits of %d ms",
              used[0], ROUNDS, GAP_MS);
    cr_assert(used[1] > 300, "the worker of a runtime with ADAG_SPIN_NS=1 s used only %.0f ms "
                             "of CPU in %d idle waits of %d ms: it did not spin",
              used[1], ROUNDS, GAP_MS);
    for (int i = 0; i < 2; i++)
        ASSERT_OK(adag_runtime_destroy(rt[i]));
    h_assert_clean(&snap);
}

/* ---- workers run on their runtime's settings ---- */

/* Whether process pid's environment holds "var" exactly. */
static int environ_has(pid_t pid, const char *var)
{
    char path[64];
    static char buf[1 << 16];
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert(f, "no %s", path);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strcmp(buf + i, var) == 0)
            return 1;
    return 0;
}

/* The emulated device's copies run at ADAG_EMU_COPY_MBPS. Every worker's
 * environment says 1 MB/s (a 4 MiB tensor would take 4.2 s to leave its
 * device), but each process actor copies at its runtime's: at memmove
 * speed in one, 16 MB/s (262 ms) in the other. */
Test(config, process_actor_copies_at_its_runtimes_bandwidth, .timeout = 90)
{
    setenv("ADAG_EMU_COPY_MBPS", "1", 1);
    h_snapshot_t snap;
    h_snapshot(&snap);
    static const char *const settings[2][5] = {
        {"ADAG_EMU_COPY_MBPS", "0", "ADAG_SLOT_CAPACITY", "8388608", NULL},
        {"ADAG_EMU_COPY_MBPS", "16", "ADAG_SLOT_CAPACITY", "8388608", NULL},
    };
    static const double at_least_ms[2] = {0, 4194304 / 16 / 1000.0 * 0.95};
    const double env_ms = 4194304 / 1 / 1000.0;
    adag_runtime_h rt[2];
    adag_graph_h g[2];
    adag_dag_h dag[2];
    for (int i = 0; i < 2; i++) {
        rt[i] = runtime_with(settings[i]);
        adag_actor_params_t p =
            h_actor_params_init("tensor", ADAG_PLACEMENT_PROCESS, "emitter", NULL, 0);
        p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
        p.device = "emu:0";
        adag_actor_h a = NULL;
        ASSERT_OK(adag_actor_create(rt[i], &p, &a));
        cr_assert(environ_has(adag_actor_pid(a), "ADAG_EMU_COPY_MBPS=1"),
                  "the worker's environment does not say 1 MB/s");
        ASSERT_OK(adag_graph_create(rt[i], &g[i]));
        adag_node_h e = h_bind1(g[i], a, "emit", h_input(g[i], 0));
        ASSERT_OK(adag_node_tensor(e, NULL)); /* in the actor's device memory */
        ASSERT_OK(adag_graph_output(g[i], &e, 1));
        ASSERT_OK(adag_graph_compile(g[i], NULL, &dag[i]));
    }
    tensor_spec_t spec = {.dtype = ADAG_DTYPE_F32, .ndim = 1, .shape = {1 << 20}};
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 2; i++) {
            adag_value_t v = {.data = &spec, .size = sizeof(spec)}, out;
            adag_ref_t ref;
            double t0 = h_now_ms();
            ASSERT_OK(adag_dag_execute(dag[i], &v, 1, 0, &ref));
            ASSERT_OK(adag_dag_get(dag[i], ref, &out, 1, 30000));
            double took = h_now_ms() - t0;
            cr_assert_eq(out.size, (size_t)4 << 20);
            cr_assert_eq(((const unsigned char *)out.data)[12345], (unsigned char)(12345 * 7 + 1));
            ASSERT_OK(adag_dag_release(dag[i], ref));
            cr_log_info("runtime %d: 4 MiB left the worker's device in %.0f ms", i, took);
            cr_assert(took >= at_least_ms[i] && took < env_ms / 2,
                      "runtime %d (ADAG_EMU_COPY_MBPS=%s): 4 MiB took %.0f ms to leave the "
                      "worker's device (at the environment's 1 MB/s: %.0f ms)",
                      i, settings[i][1], took, env_ms);
        }
    for (int i = 0; i < 2; i++)
        ASSERT_OK(adag_runtime_destroy(rt[i]));
    h_assert_clean(&snap);
    unsetenv("ADAG_EMU_COPY_MBPS");
}

/* A remote worker runs on its runtime's settings too, not on its agent's
 * environment: the agent's ADAG_TEARDOWN_TIMEOUT_MS is a minute, the
 * runtime's 300 ms. A device actor's kernel runs for 15 s when its DAG and
 * then the actor are stopped: the worker gives the kernel its runtime's
 * 300 ms at each, then leaves it and exits, long before the kernel ends.
 * (On the agent's minute it would answer nothing until the kernel ended:
 * the driver would drop it, and it would live on for 15 s.) */
Test(config, remote_worker_uses_its_runtimes_teardown, .timeout = 90)
{
    setenv("ADAG_TEARDOWN_TIMEOUT_MS", "60000", 1); /* the agent's environment */
    h_agent_t ag;
    h_agent_start(&ag, "config token", 0);
    unsetenv("ADAG_TEARDOWN_TIMEOUT_MS");
    unsetenv("ADAG_TOKEN");
    setenv("ADAG_TOKEN_FILE", ag.token, 1);
    static const char *const settings[] = {"ADAG_TEARDOWN_TIMEOUT_MS", "300", NULL};
    adag_runtime_h rt = runtime_with(settings);
    adag_actor_params_t p = h_actor_params_init("devactor", ADAG_PLACEMENT_REMOTE, "far", NULL, 0);
    p.field_mask |= ADAG_ACTOR_PARAM_MODULE | ADAG_ACTOR_PARAM_NODE | ADAG_ACTOR_PARAM_DEVICE;
    p.module_path = ADAG_TEST_DEVICE_MODULE;
    p.node = ag.addr;
    p.device = "emu:0";
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    pid_t pid = adag_actor_pid(a); /* on this machine: the agent is on loopback */
    cr_assert(environ_has(pid, "ADAG_TEARDOWN_TIMEOUT_MS=60000"),
              "the remote worker's environment does not say a minute");
    adag_graph_h g;
    adag_dag_h dag;
    h_stage_t st = {a, "slow"};
    /* the DAG waits up to 10 s for the worker to stop its loop */
    adag_compile_params_t cp = h_compile_params(0, 0, 0, 10000);
    ASSERT_OK(h_try_chain(rt, &st, 1, &cp, &g, &dag, NULL));
    adag_ref_t ref = h_execute(dag, 15000);
    (void)h_get_i64(dag, ref, 20000); /* the method returned; its kernel runs on */
    double t0 = h_now_ms();
    ASSERT_OK(adag_dag_destroy(dag));
    double stop_ms = h_now_ms() - t0;
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
    /* gone (or a zombie of the agent's) well before the kernel's 15 s */
    double end = h_now_ms() + 4000;
    char state;
    while ((state = h_proc_state(pid)) != 0 && state != 'Z' && h_now_ms() < end)
        h_sleep_ms(20);
    double gone_ms = h_now_ms() - t0;
    cr_log_info("remote worker: its DAG stopped in %.0f ms, it was gone %.0f ms after", stop_ms,
                gone_ms);
    cr_assert(stop_ms < 3000, "the remote worker stopped its DAG in %.0f ms: it waited for the "
                              "kernel past its runtime's 300 ms",
              stop_ms);
    if (state != 0 && state != 'Z')
        kill(pid, SIGKILL); /* nothing outlives the test */
    cr_assert(state == 0 || state == 'Z',
              "the remote worker (pid %d, state %c) still runs %.0f ms after its runtime was "
              "destroyed: it is waiting for its kernel on the agent's teardown timeout",
              (int)pid, state, gone_ms);
    h_agent_cleanup(&ag);
}

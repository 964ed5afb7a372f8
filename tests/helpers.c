#include "helpers.h"

#include "gpu_stage.h"

#include <sys/wait.h>
#include <signal.h>
#include <poll.h>
#include <fcntl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- status assertions ---- */

static char saved_msg[1024];

const char *h_msg(void)
{
    return saved_msg;
}

static void save_msg(void)
{
    snprintf(saved_msg, sizeof(saved_msg), "%s", adag_last_error());
}

void h_check_status(adag_status_t got, adag_status_t want, const char *expr, const char *file,
                    int line)
{
    save_msg();
    cr_assert(got == want, "%s:%d: %s returned %d (%s), expected %d (%s); last error: \"%s\"",
              file, line, expr, (int)got, adag_status_str(got), (int)want,
              adag_status_str(want), saved_msg);
}

void h_check_fails(adag_status_t got, const char *expr, const char *file, int line)
{
    save_msg();
    cr_assert(got != ADAG_OK, "%s:%d: %s succeeded, expected an error", file, line, expr);
    cr_assert(got < 0, "%s:%d: %s returned %d, not a negative status", file, line, expr,
              (int)got);
}

/* ---- runtime, actors, graphs ---- */

adag_runtime_h h_runtime(void)
{
    adag_runtime_h rt = NULL;
    ASSERT_OK(adag_runtime_create(NULL, &rt));
    cr_assert_not_null(rt);
    ASSERT_OK(adag_class_register(rt, &test_counter_class));
    ASSERT_OK(adag_class_register(rt, &test_broken_class));
    return rt;
}

adag_actor_h h_counter(adag_runtime_h rt, adag_placement_t pl, const char *name, int64_t offset)
{
    adag_actor_params_t p = h_actor_params_init("counter", pl, name, &offset, sizeof(offset));
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    cr_assert_not_null(a);
    if (name)
        cr_assert_str_eq(adag_actor_name(a), name);
    if (pl == ADAG_PLACEMENT_PROCESS)
        cr_assert(adag_actor_pid(a) > 0, "process actor %s has pid %d", adag_actor_name(a),
                  adag_actor_pid(a));
    else
        cr_assert_eq(adag_actor_pid(a), 0, "thread actor %s has pid %d", adag_actor_name(a),
                     adag_actor_pid(a));
    return a;
}

void h_counters(adag_runtime_h rt, adag_placement_t pl, const char *prefix, unsigned n,
                const int64_t *offsets, adag_actor_h *out)
{
    for (unsigned i = 0; i < n; i++) {
        char name[ADAG_MAX_NAME];
        snprintf(name, sizeof(name), "%s%u", prefix, i);
        out[i] = h_counter(rt, pl, name, offsets ? offsets[i] : 0);
    }
}

adag_dag_h h_compile_with(adag_graph_h g, const adag_compile_params_t *cp)
{
    adag_dag_h dag = NULL;
    ASSERT_OK(adag_graph_compile(g, cp, &dag));
    cr_assert_not_null(dag);
    return dag;
}

adag_dag_h h_compile(adag_graph_h g, unsigned max_inflight, size_t cap)
{
    adag_compile_params_t cp = h_compile_params(max_inflight, cap, 0, 0);
    return h_compile_with(g, &cp);
}

adag_node_h h_input(adag_graph_h g, unsigned field)
{
    adag_node_h n = NULL;
    ASSERT_OK(adag_graph_input(g, field, &n));
    cr_assert_not_null(n);
    return n;
}

adag_node_h h_bind(adag_graph_h g, adag_actor_h actor, const char *method,
                   const adag_node_h *args, unsigned nargs)
{
    adag_node_h n = NULL;
    ASSERT_OK(adag_graph_bind(g, actor, method, args, nargs, &n));
    cr_assert_not_null(n);
    return n;
}

adag_node_h h_bind1(adag_graph_h g, adag_actor_h actor, const char *method, adag_node_h arg)
{
    return h_bind(g, actor, method, &arg, 1);
}

adag_graph_h h_stages_graph(adag_runtime_h rt, const h_stage_t *st, unsigned n)
{
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h cur = h_input(g, 0);
    for (unsigned i = 0; i < n; i++)
        cur = h_bind1(g, st[i].actor, st[i].method, cur);
    ASSERT_OK(adag_graph_output(g, &cur, 1));
    return g;
}

adag_graph_h h_chain_graph(adag_runtime_h rt, adag_actor_h *actors, unsigned n,
                           const char *method)
{
    h_stage_t st[H_MAX_ACTORS];
    cr_assert(n <= H_MAX_ACTORS, "a chain of %u actors (at most %d)", n, H_MAX_ACTORS);
    for (unsigned i = 0; i < n; i++)
        st[i] = (h_stage_t){actors[i], method};
    return h_stages_graph(rt, st, n);
}

adag_graph_h h_fanout_graph(adag_runtime_h rt, adag_actor_h *actors, unsigned n,
                            const char *method)
{
    adag_node_h outs[H_MAX_ACTORS];
    cr_assert(n <= H_MAX_ACTORS, "a fan-out of %u actors (at most %d)", n, H_MAX_ACTORS);
    adag_graph_h g = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0);
    for (unsigned i = 0; i < n; i++)
        outs[i] = h_bind1(g, actors[i], method, in);
    ASSERT_OK(adag_graph_output(g, outs, n));
    return g;
}

/* ---- one-piece setups ---- */

adag_graph_h h_setup_graph(adag_runtime_h rt, const h_setup_t *s)
{
    unsigned n = s->n ? s->n : 1;
    adag_actor_h local[H_MAX_ACTORS], *a = s->actors ? s->actors : local;
    h_stage_t st[H_MAX_ACTORS];
    cr_assert(n <= H_MAX_ACTORS, "a setup of %u actors (at most %d)", n, H_MAX_ACTORS);
    cr_assert(s->method || s->methods, "a setup without a method");
    for (unsigned i = 0; i < n; i++) {
        char buf[ADAG_MAX_NAME];
        const char *name = s->name;
        if (s->names) {
            name = s->names[i];
        } else if (s->prefix) {
            snprintf(buf, sizeof(buf), "%s%u", s->prefix, i); /* as h_counters names them */
            name = buf;
        } else {
            cr_assert(n == 1, "%u counters need a prefix or names", n);
        }
        a[i] = h_counter(rt, s->pl, name, s->offsets ? s->offsets[i] : s->offset);
    }
    for (unsigned i = 0; i < n; i++)
        st[i] = (h_stage_t){a[i], s->methods ? s->methods[i] : s->method};
    adag_graph_h g;
    if (s->fanout) {
        cr_assert(!s->methods, "a fan-out has one method");
        g = h_fanout_graph(rt, a, n, s->method);
    } else {
        g = h_stages_graph(rt, st, n);
    }
    if (s->graph)
        *s->graph = g;
    return g;
}

adag_dag_h h_setup_dag(adag_runtime_h rt, const h_setup_t *s)
{
    adag_compile_params_t cp =
        h_compile_params(s->max_inflight, s->cap, s->exec_timeout, s->teardown_timeout);
    return h_compile_with(h_setup_graph(rt, s), &cp);
}

adag_value_t h_i64v(const int64_t *p)
{
    adag_value_t v;
    memset(&v, 0, sizeof(v));
    v.data = p;
    v.size = sizeof(*p);
    v.kind = ADAG_VALUE_BYTES;
    return v;
}

adag_status_t h_commit_i64(adag_dag_h dag, adag_ref_t ref, const adag_input_view_t *view,
                           int64_t x)
{
    memcpy(view->data, &x, sizeof(x));
    adag_value_t v = {.data = view->data, .size = sizeof(x)};
    return adag_dag_commit(dag, ref, &v, 1);
}

int64_t h_val_i64(adag_value_t v)
{
    cr_assert_eq(v.size, sizeof(int64_t), "value has %zu bytes, expected 8", v.size);
    cr_assert_not_null(v.data);
    int64_t x;
    memcpy(&x, v.data, sizeof(x));
    return x;
}

adag_ref_t h_execute(adag_dag_h dag, int64_t x)
{
    adag_value_t v = h_i64v(&x);
    adag_ref_t ref = 0;
    ASSERT_OK(adag_dag_execute(dag, &v, 1, 0, &ref));
    return ref;
}

int64_t h_get_i64(adag_dag_h dag, adag_ref_t ref, int timeout_ms)
{
    adag_value_t out;
    ASSERT_OK(adag_dag_get(dag, ref, &out, 1, timeout_ms));
    return h_val_i64(out);
}

void h_run_i64(adag_dag_h dag, const int64_t *in, unsigned nin, int64_t *out, unsigned nout)
{
    adag_value_t vin[ADAG_MAX_ARGS], vout[ADAG_MAX_RETURNS];
    cr_assert(nin <= ADAG_MAX_ARGS && nout <= ADAG_MAX_RETURNS);
    for (unsigned i = 0; i < nin; i++)
        vin[i] = h_i64v(&in[i]);
    adag_ref_t ref = 0;
    ASSERT_OK(adag_dag_execute(dag, vin, nin, 0, &ref));
    ASSERT_OK(adag_dag_get(dag, ref, vout, nout, 10000));
    for (unsigned i = 0; i < nout; i++)
        out[i] = h_val_i64(vout[i]);
    ASSERT_OK(adag_dag_release(dag, ref));
}

int64_t h_roundtrip(adag_dag_h dag, int64_t x)
{
    int64_t out = 0;
    h_run_i64(dag, &x, 1, &out, 1);
    return out;
}

static adag_status_t text_append(void *ctx, const void *buf, size_t n)
{
    h_text_t *t = ctx;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *grown = realloc(t->text, cap);
        cr_assert_not_null(grown);
        t->text = grown;
        t->cap = cap;
    }
    memcpy(t->text + t->len, buf, n);
    t->len += n;
    t->text[t->len] = '\0';
    return ADAG_OK;
}

adag_writer_t h_text_writer(h_text_t *t)
{
    return (adag_writer_t){text_append, t};
}

char *h_dot(adag_dag_h dag)
{
    h_text_t t = {0};
    ASSERT_OK(adag_dag_write_dot(dag, h_text_writer(&t)));
    cr_assert_not_null(t.text);
    return t.text;
}

/* ---- process hygiene ---- */

int h_count_fds(void)
{
    int n = probe_count_fds();
    cr_assert(n >= 0, "opendir(/proc/self/fd): %s", strerror(errno));
    return n;
}

int h_children(pid_t *out, int max, int *zombies)
{
    int n = probe_children(getpid(), out, max, zombies);
    cr_assert(n >= 0, "opendir(/proc): %s", strerror(errno));
    return n;
}

int h_wait_no_children(int timeout_ms)
{
    double end = h_now_ms() + timeout_ms;
    int n;
    while ((n = h_children(NULL, 0, NULL)) > 0 && h_now_ms() < end)
        h_sleep_ms(10);
    return n;
}

static int count_maps(const char *needle)
{
    int n = probe_count_maps(needle);
    cr_assert(n >= 0, "fopen(/proc/self/maps): %s", strerror(errno));
    return n;
}

int h_count_memfd_maps(void)
{
    return count_maps("memfd:");
}

int h_count_adag_memfd_maps(void)
{
    return count_maps("memfd:adag");
}

void h_snapshot(h_snapshot_t *s)
{
    s->fds = h_count_fds();
    s->memfd_maps = h_count_memfd_maps();
}

void h_assert_clean(const h_snapshot_t *s)
{
    pid_t kids[16];
    int zombies = 0;
    int left = h_wait_no_children(2000);
    if (left) {
        int n = h_children(kids, 16, &zombies);
        cr_assert(n == 0, "%d child process(es) left after teardown (%d zombie), first pid %d",
                  n, zombies, n ? (int)kids[0] : 0);
    }
    int fds = h_count_fds();
    cr_assert_eq(fds, s->fds, "%d fds open after teardown, %d before", fds, s->fds);
    int maps = h_count_memfd_maps();
    cr_assert_eq(maps, s->memfd_maps, "%d memfd mappings after teardown, %d before", maps,
                 s->memfd_maps);
    cr_assert_eq(h_count_adag_memfd_maps(), 0, "a memfd:adag mapping is left after teardown");
}

/* ---- child drivers ---- */

/* 'R', 'S', 'T' (stopped), 'Z' ... or 0 if the process is gone. */
char h_proc_state(pid_t pid)
{
    char st = 0;
    return probe_stat(pid, NULL, &st) == 0 ? st : 0;
}

/* Reaps pid if it is our child or was reparented to us (we are a
 * subreaper); returns 1 once it is gone. */
int h_gone(pid_t pid)
{
    int status;
    pid_t w = waitpid(pid, &status, WNOHANG | __WALL);
    if (w == pid)
        return 1;
    char st = h_proc_state(pid);
    return st == 0 || (st == 'Z' && waitpid(pid, &status, __WALL) == pid);
}

/* Waits up to ms for every pid to be gone; returns how many are left (and
 * SIGKILLs them, so nothing outlives the test). */
int h_wait_gone(const pid_t *pids, int n, int ms, char *report, size_t len)
{
    double end = h_now_ms() + ms;
    int left;
    report[0] = '\0';
    for (;;) {
        left = 0;
        for (int i = 0; i < n; i++)
            left += pids[i] > 0 && !h_gone(pids[i]);
        if (!left || h_now_ms() >= end)
            break;
        h_sleep_ms(5);
    }
    for (int i = 0; i < n; i++) {
        if (pids[i] <= 0 || h_gone(pids[i]))
            continue;
        size_t used = strlen(report);
        snprintf(report + used, len - used, " %d (state %c)", (int)pids[i], h_proc_state(pids[i]));
        kill(pids[i], SIGCONT);
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, __WALL);
    }
    return left;
}

/* Forks a driver running fn(wfd); fn reports on wfd and never returns. */
h_child_driver_t h_fork_driver(void (*fn)(int wfd))
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(p[0]);
        fn(p[1]);
        _exit(1);
    }
    close(p[1]);
    return (h_child_driver_t){pid, p[0]};
}

/* Reads exactly n bytes from the child driver (or fails the test). */
void h_read_report(h_child_driver_t *c, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd pf = {.fd = c->rfd, .events = POLLIN};
        int r = poll(&pf, 1, 30000);
        ssize_t k = r > 0 ? read(c->rfd, (char *)buf + got, n - got) : -1;
        if (k <= 0) {
            int status = 0;
            kill(c->driver, SIGKILL);
            waitpid(c->driver, &status, 0);
            cr_assert_fail("the child driver stopped reporting (status 0x%x)", status);
        }
        got += (size_t)k;
    }
}

void h_kill_driver(h_child_driver_t *c)
{
    int status;
    cr_assert_eq(kill(c->driver, SIGKILL), 0);
    cr_assert_eq(waitpid(c->driver, &status, 0), c->driver);
    close(c->rfd);
}

/* ---- misc ---- */

int h_fd_readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    cr_assert(r >= 0, "poll: %s", strerror(errno));
    return r > 0 && (p.revents & POLLIN);
}

double h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void h_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

const char *h_pl_name(adag_placement_t pl)
{
    return pl == ADAG_PLACEMENT_PROCESS ? "process" : "thread";
}

adag_actor_h h_gpu_stage(adag_runtime_h rt, adag_placement_t pl, const char *name,
                         const char *device, int stage, int kernel_us)
{
    if (pl == ADAG_PLACEMENT_THREAD)
        adag_class_register(rt, &test_gpu_stage_class); /* once; later calls say it exists */
    int init[2] = {stage, kernel_us};
    adag_actor_params_t p = h_actor_params_init("gpu_stage", pl, name, init, sizeof(init));
    if (device) { /* NULL: a host actor (host tensors, computed in the method) */
        p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
        p.device = device;
    }
    adag_actor_h a;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    return a;
}

/* h_gpu_chain_via with the input declared by `input` (NULL: a tensor,
 * dtype and shape per execution). */
static adag_status_t gpu_chain(adag_runtime_h rt, const adag_actor_h *a, unsigned n,
                               const adag_compile_params_t *cp, adag_transport_t transport,
                               const adag_tensor_params_t *input, adag_dag_h *dag)
{
    adag_graph_h g;
    adag_node_h x, y = NULL, info = NULL;
    ASSERT_OK(adag_graph_create(rt, &g));
    ASSERT_OK(adag_graph_input(g, 0, &x));
    ASSERT_OK(adag_node_tensor(x, input));
    for (unsigned s = 0; s < n; s++) {
        adag_node_h call;
        ASSERT_OK(adag_graph_bind(g, a[s], "step", &x, 1, &call));
        ASSERT_OK(adag_node_output(call, 0, &y));
        ASSERT_OK(adag_node_output(call, 1, &info));
        adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_TRANSPORT,
                                   .transport = s + 1 < n ? transport : ADAG_TRANSPORT_AUTO};
        ASSERT_OK(adag_node_tensor(y, &tp));
        x = y;
    }
    adag_node_h outs[2] = {y, info};
    ASSERT_OK(adag_graph_output(g, outs, 2));
    adag_status_t st = adag_graph_compile(g, cp, dag);
    ASSERT_OK(adag_graph_destroy(g));
    return st;
}

adag_status_t h_gpu_chain_via(adag_runtime_h rt, const adag_actor_h *a, unsigned n,
                              const adag_compile_params_t *cp, adag_transport_t transport,
                              adag_dag_h *dag)
{
    return gpu_chain(rt, a, n, cp, transport, NULL, dag);
}

adag_dag_h h_gpu_chain(adag_runtime_h rt, const adag_actor_h *a, unsigned n,
                       const adag_compile_params_t *cp)
{
    return h_gpu_chain_input(rt, a, n, cp, NULL);
}

adag_dag_h h_gpu_chain_input(adag_runtime_h rt, const adag_actor_h *a, unsigned n,
                             const adag_compile_params_t *cp, const adag_tensor_params_t *input)
{
    adag_dag_h dag;
    ASSERT_OK(gpu_chain(rt, a, n, cp, ADAG_TRANSPORT_AUTO, input, &dag));
    return dag;
}

void h_trace_write(adag_dag_h dag, char *path)
{
    strcpy(path, "/tmp/adag-trace-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    ASSERT_OK(adag_dag_write_trace(dag, adag_writer_fd(fd)));
    cr_assert_eq(close(fd), 0);
}

void h_trace_check(adag_dag_h dag, const char *args, const char *want)
{
    /* a loop writes an op's record just after publishing its value, so the
     * driver may get a result a moment before the records of it are all
     * there: the trace is taken once the loops had time to write them */
    usleep(100 * 1000);
    char path[H_TRACE_PATH_MAX];
    h_trace_write(dag, path);
    char cmd[512], out[512] = "";
    snprintf(cmd, sizeof(cmd), "python3 %s/tests/trace_check.py %s %s 2>&1", ADAG_TEST_SRC_DIR,
             path, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    unlink(path);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
    cr_assert(strstr(out, want), "%s", out);
}

unsigned h_device_log(adag_runtime_h rt, adag_actor_h d, int64_t *log, unsigned n)
{
    adag_dag_h readlog = h_compile(h_chain_graph(rt, &d, 1, "readlog"), 0, 0);
    unsigned got = 0;
    double t0 = h_now_ms();
    while (got < n && h_now_ms() - t0 < 10000) {
        int64_t zero = 0;
        adag_value_t in = h_i64v(&zero), out;
        adag_ref_t ref;
        ASSERT_OK(adag_dag_execute(readlog, &in, 1, 0, &ref));
        ASSERT_OK(adag_dag_get(readlog, ref, &out, 1, 10000));
        size_t k = out.size / sizeof(int64_t);
        cr_assert_leq(got + k, n, "%zu values logged, want %u", got + k, n);
        if (k)
            memcpy(log + got, out.data, k * sizeof(int64_t));
        got += (unsigned)k;
        ASSERT_OK(adag_dag_release(readlog, ref));
    }
    ASSERT_OK(adag_dag_destroy(readlog));
    return got;
}

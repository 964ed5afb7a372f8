/* The fault matrix's driver (fault_matrix_driver.h): a forked child that
 * creates a runtime and actors, builds and compiles a graph, executes it and
 * tears it down, announcing each phase to the checker. */
#include "fault_matrix_driver.h"

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "builders.h"

const config_t *D_cfg;
shared_t *D_sh;
int D_code;
int64_t D_t_go;
static int D_wfd = -1, D_gofd = -1;

void drv_line(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    for (int i = 0; i < n; i++)
        if (buf[i] == '\n')
            buf[i] = ' ';
    buf[n++] = '\n';
    (void)write_all(D_wfd, buf, (size_t)n); /* < PIPE_BUF: one atomic write */
}

void drv_fail(int code, const char *fmt, ...)
{
    char buf[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (!D_code)
        D_code = code;
    drv_line("E %d %s", code, buf);
}

void drv_activity(const char *fmt, ...)
{
    char buf[sizeof(D_sh->activity)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    memcpy(D_sh->activity, buf, sizeof(buf));
}

/* Announces a phase; at the round's target phase, waits for the checker's go. */
static void drv_announce(phase_t ph)
{
    static int64_t last;
    int64_t t = now_ns();
    if (last)
        drv_line("V phase %s took %.2f ms", phase_name(atomic_load(&D_sh->phase)), ms_of(t - last));
    last = t;
    atomic_store(&D_sh->phase, (int)ph);
    drv_line("P %d", (int)ph);
    if (ph != D_cfg->phase)
        return;
    struct pollfd p = {.fd = D_gofd, .events = POLLIN};
    char g = 0;
    int r;
    while ((r = poll(&p, 1, 5000)) < 0 && errno == EINTR) {
    }
    if (r <= 0 || read(D_gofd, &g, 1) != 1 || g != 'G')
        drv_fail(XC_SETUP, "no go from the checker at phase %s", phase_name(ph));
    D_t_go = now_ns();
}

/* ---- the watcher: a thread that notes when each worker exits (pidfd) ---- */

watcher_t W;

static void *watch_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&W.stop)) {
        struct pollfd p[MAXP];
        int idx[MAXP], n = 0;
        for (int i = 0; i < MAXP; i++) {
            int fd = atomic_load(&W.pidfd[i]);
            if (fd >= 0 && atomic_load(&W.death_ns[i]) == 0) {
                p[n].fd = fd;
                p[n].events = POLLIN;
                idx[n++] = i;
            }
        }
        int r = poll(p, (nfds_t)n, 2);
        if (r <= 0)
            continue;
        int64_t t = now_ns();
        for (int k = 0; k < n; k++)
            if (p[k].revents)
                atomic_store(&W.death_ns[idx[k]], t);
    }
    return NULL;
}

static void watch_add(unsigned i, pid_t pid)
{
    int fd = pidfd_open_(pid);
    if (fd < 0) {
        /* gone already (the runtime reaped it): died no later than now */
        atomic_store(&W.death_ns[i], now_ns());
        return;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    atomic_store(&W.pidfd[i], fd);
}

static void watch_stop(void)
{
    if (W.started) {
        atomic_store(&W.stop, 1);
        pthread_join(W.th, NULL);
        W.started = 0;
    }
    for (int i = 0; i < MAXP; i++) {
        int fd = atomic_exchange(&W.pidfd[i], -1);
        if (fd >= 0)
            close(fd);
    }
}

/* ---- call records ---- */

rec_t *R;
unsigned NR;
int R_full;

rec_t *rec_add(kind_t k, const char *what, adag_status_t st, int64_t t0, int64_t t1)
{
    static rec_t dummy;
    if (NR >= MAXREC) {
        R_full = 1;
        memset(&dummy, 0, sizeof(dummy));
        return &dummy;
    }
    rec_t *r = &R[NR++];
    memset(r, 0, sizeof(*r));
    r->kind = k;
    r->st = st;
    r->t0 = t0;
    r->t1 = t1;
    snprintf(r->what, sizeof(r->what), "%s", what);
    if (st != ADAG_OK)
        snprintf(r->msg, sizeof(r->msg), "%s", adag_last_error());
    return r;
}

typedef struct {
    adag_ref_t ref;
    int64_t t0;
    int poison;
    int64_t expect[MAXP + 3];
} pending_t;

/* Expected outputs of input v, sleep s. */
static void expected(const config_t *c, const drv_t *d, int64_t v, int64_t s, int64_t *out)
{
    unsigned k = 0;
    if (c->fanout) {
        for (unsigned i = 0; i < c->norder; i++)
            if (d->actor[c->order[i]])
                out[k++] = v + offset_of(c, c->order[i]);
    } else {
        int64_t x = v;
        for (unsigned i = 0; i < c->norder; i++)
            if (d->actor[c->order[i]])
                x += offset_of(c, c->order[i]);
        out[k++] = x;
    }
    if (d->has_zero)
        out[k++] = offset_of(c, c->zero_actor);
    if (d->has_sleep)
        out[k++] = s;
}

static int build_graph(const config_t *c, drv_t *d)
{
    adag_status_t st;
    int64_t t0 = now_ns();
    adag_node_h in0 = NULL, in1 = NULL, outs[MAXP + 3];
    unsigned n = 0;
    drv_activity("building the graph");
    if ((st = adag_graph_create(d->rt, &d->g)) != ADAG_OK ||
        (st = adag_graph_input(d->g, 0, &in0)) != ADAG_OK)
        goto fail;
    int want_die = fault_in_method(c->fault) && (c->phase == PH_EXECUTE || c->phase == PH_TEARDOWN);
    adag_node_h cur = in0;
    int64_t sum = 0;
    for (unsigned i = 0; i < c->norder; i++) {
        unsigned a = c->order[i];
        if (!d->actor[a])
            continue;
        adag_node_h x = NULL;
        adag_node_h arg = c->fanout ? in0 : cur;
        if ((st = adag_graph_bind(d->g, d->actor[a], "add", &arg, 1, &x)) != ADAG_OK)
            goto fail;
        sum += offset_of(c, a);
        if (a < c->nproc && a == c->victim &&
            !(c->phase == PH_CREATE && fault_in_method(c->fault))) {
            d->victim_in_dag = 1;
            if (want_die) {
                d->prefix = c->fanout ? offset_of(c, a) : sum;
                if ((st = adag_graph_bind(d->g, d->actor[a], "die_if", &x, 1, &x)) != ADAG_OK)
                    goto fail;
                d->die_bound = 1;
            }
        }
        if (c->fanout)
            outs[n++] = x;
        else
            cur = x;
    }
    if (!c->fanout)
        outs[n++] = cur;
    if (d->has_zero) {
        adag_node_h z = NULL;
        if ((st = adag_graph_bind(d->g, d->actor[c->zero_actor], "base", NULL, 0, &z)) != ADAG_OK)
            goto fail;
        outs[n++] = z;
    }
    if (d->has_sleep) {
        adag_node_h s = NULL;
        if ((st = adag_graph_input(d->g, 1, &in1)) != ADAG_OK ||
            (st = adag_graph_bind(d->g, d->actor[d->sleeper], c->spin ? "spin_ms" : "sleep_ms",
                                  &in1, 1, &s)) != ADAG_OK)
            goto fail;
        outs[n++] = s;
    }
    if ((st = adag_graph_output(d->g, outs, n)) != ADAG_OK)
        goto fail;
    d->nouts = n;
    return 0;
fail:
    rec_add(K_GRAPH, "graph building", st, t0, now_ns());
    return -1;
}

static int dag_failed(const drv_t *d)
{
    return d->death_seen;
}

/* One batch: up to max_inflight executions, then their gets in random order. */
static void run_batch(const config_t *c, drv_t *d, unsigned *count, int poison_due)
{
    pending_t p[8];
    unsigned np = 0, b = 1 + rnd(&d->rng, c->max_inflight);
    for (unsigned k = 0; k < b; k++) {
        /* unique per execution, so stale data in a slot cannot pass for a
         * result; >= 100 at die_if, so only the poison triggers it */
        int64_t v = 100 + *count, s = rnd(&d->rng, 2);
        int poison = 0;
        if (poison_due && *count == c->poison_after) {
            v = (c->fault == F_WEXIT ? 7 : 11) - d->prefix;
            s = 0;
            poison = 1;
        }
        (*count)++;
        adag_value_t in[2] = {{.data = &v, .size = sizeof(v)}, {.data = &s, .size = sizeof(s)}};
        adag_ref_t ref = 0;
        drv_activity("adag_dag_execute (execution %u)", *count);
        int64_t t0 = now_ns();
        adag_status_t st = adag_dag_execute(d->dag, in, d->has_sleep ? 2 : 1, 0, &ref);
        rec_t *r = rec_add(K_EXECUTE, poison ? "adag_dag_execute (poison)" : "adag_dag_execute", st,
                           t0, now_ns());
        r->poison = poison;
        if (poison)
            d->fault_t0 = t0;
        if (st == ADAG_OK) {
            p[np].ref = ref;
            p[np].t0 = t0;
            p[np].poison = poison;
            expected(c, d, v, s, p[np].expect);
            np++;
        } else if (st == ADAG_ERR_ACTOR_DIED) {
            d->death_seen = 1;
        }
    }
    for (unsigned i = np; i > 1; i--) {
        unsigned j = rnd(&d->rng, i);
        pending_t t = p[i - 1];
        p[i - 1] = p[j];
        p[j] = t;
    }
    for (unsigned i = 0; i < np; i++) {
        adag_value_t out[MAXP + 3];
        memset(out, 0, sizeof(out));
        drv_activity("adag_dag_get ref %" PRIu64 " (timeout %d ms)", (uint64_t)p[i].ref,
                     GET_TIMEOUT_MS);
        int64_t t0 = now_ns();
        adag_status_t st = adag_dag_get(d->dag, p[i].ref, out, d->nouts, GET_TIMEOUT_MS);
        int64_t t1 = now_ns();
        rec_t *r = rec_add(K_GET, p[i].poison ? "adag_dag_get (poison)" : "adag_dag_get", st, t0, t1);
        r->exec_t0 = p[i].t0;
        r->poison = p[i].poison;
        r->ref = p[i].ref;
        if (st == ADAG_OK) {
            for (unsigned k = 0; k < d->nouts; k++) {
                int64_t x = 0;
                if (out[k].size != sizeof(int64_t) || !out[k].data) {
                    r->bad = 1;
                    snprintf(r->bad_txt, sizeof(r->bad_txt), "output %u has %zu bytes at %p", k,
                             out[k].size, out[k].data);
                    break;
                }
                memcpy(&x, out[k].data, sizeof(x));
                if (x != p[i].expect[k]) {
                    r->bad = 1;
                    snprintf(r->bad_txt, sizeof(r->bad_txt),
                             "output %u is %" PRId64 ", expected %" PRId64, k, x, p[i].expect[k]);
                    break;
                }
            }
        } else if (st == ADAG_ERR_ACTOR_DIED) {
            d->death_seen = 1;
        } else if (st == ADAG_ERR_TIMEOUT) {
            /* the DAG is stuck (a failure, reported by evaluate); waiting
             * GET_TIMEOUT_MS for each pending ref would only hit the round limit */
            d->stuck = 1;
            for (unsigned j = i; j < np; j++)
                (void)adag_dag_release(d->dag, p[j].ref);
            return;
        }
        (void)adag_dag_release(d->dag, p[i].ref);
    }
}

static void on_chld_reap(int sig)
{
    (void)sig;
    int e = errno;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = e;
}

static void on_chld_nothing(int sig)
{
    (void)sig;
}

int driver_main(const config_t *c, shared_t *sh, int wfd, int gofd)
{
    drv_t dd, *d = &dd;
    memset(d, 0, sizeof(*d));
    D_cfg = c;
    D_sh = sh;
    D_wfd = wfd;
    D_gofd = gofd;
    d->rng = c->seed ^ 0x5eed5eed5eedull;
    for (int i = 0; i < MAXP; i++)
        atomic_store(&W.pidfd[i], -1);
    R = calloc(MAXREC, sizeof(*R));
    if (!R) {
        drv_fail(XC_SETUP, "out of memory");
        return D_code;
    }

    if (c->chld != CHLD_DEFAULT) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sigemptyset(&sa.sa_mask);
        if (c->chld == CHLD_IGNORE) {
            sa.sa_handler = SIG_IGN; /* children are reaped by the kernel */
        } else if (c->chld == CHLD_REAP) {
            sa.sa_handler = on_chld_reap; /* the application reaps every child */
            sa.sa_flags = SA_RESTART;
        } else {
            sa.sa_handler = on_chld_nothing; /* no SA_RESTART: system calls see EINTR */
        }
        sigaction(SIGCHLD, &sa, NULL);
    }
    int fds0 = probe_count_fds(), maps0 = probe_count_maps("memfd:");
    if (pthread_create(&W.th, NULL, watch_main, NULL) != 0) {
        drv_fail(XC_SETUP, "pthread_create (watcher)");
        return D_code;
    }
    W.started = 1;

    if (fault_in_method(c->fault) && c->phase == PH_CREATE)
        snprintf(d->victim_name, sizeof(d->victim_name), "fmCrash");
    else
        snprintf(d->victim_name, sizeof(d->victim_name), "fmP%u", c->victim);

    /* ---- create ---- */
    int announced = 0;
    if (c->phase != PH_CREATE) {
        drv_announce(PH_CREATE);
        announced = 1;
    }
    adag_status_t st;
    drv_activity("adag_runtime_create");
    if ((st = adag_runtime_create(NULL, &d->rt)) != ADAG_OK ||
        (st = adag_class_register(d->rt, &test_counter_class)) != ADAG_OK) {
        drv_fail(XC_SETUP, "adag_runtime_create: %s", adag_last_error());
        watch_stop();
        return D_code;
    }
    for (unsigned i = 0; i <= c->nproc; i++) {
        if (c->thread_actor && c->thread_pos == i) {
            adag_actor_params_t p = h_actor_params_init("counter", ADAG_PLACEMENT_THREAD, "fmT",
                                                        &c->offset[c->nproc], sizeof(int64_t));
            snprintf(d->name[c->nproc], sizeof(d->name[0]), "fmT");
            drv_activity("adag_actor_create fmT (thread)");
            int64_t t0 = now_ns();
            st = adag_actor_create(d->rt, &p, &d->actor[c->nproc]);
            rec_add(K_CREATE, "adag_actor_create fmT", st, t0, now_ns());
            if (st != ADAG_OK)
                d->actor[c->nproc] = NULL;
        }
        if (i == c->nproc)
            break;
        int fault_here = 0;
        if (!announced && i == c->victim) {
            drv_announce(PH_CREATE);
            announced = 1;
            fault_here = 1;
            if (fault_in_method(c->fault)) {
                /* the analog of a method fault at creation: init crashes */
                const char *how = c->fault == F_WEXIT ? "exit" : "segv";
                adag_actor_params_t p =
                    h_actor_params_init("crashy", ADAG_PLACEMENT_PROCESS, "fmCrash", how, 4);
                adag_actor_h crashy = NULL;
                drv_activity("adag_actor_create fmCrash (init %s)", how);
                int64_t t0 = now_ns();
                d->fault_t0 = t0;
                st = adag_actor_create(d->rt, &p, &crashy);
                rec_t *r = rec_add(K_CREATE, "adag_actor_create fmCrash", st, t0, now_ns());
                r->fault_call = 1;
                if (st == ADAG_OK)
                    drv_line("W 9 %d fmCrash", adag_actor_pid(crashy));
            }
        }
        snprintf(d->name[i], sizeof(d->name[0]), "fmP%u", i);
        adag_actor_params_t p = h_actor_params_init("counter", ADAG_PLACEMENT_PROCESS, d->name[i],
                                                    &c->offset[i], sizeof(int64_t));
        drv_activity("adag_actor_create %s", d->name[i]);
        int64_t t0 = now_ns();
        st = adag_actor_create(d->rt, &p, &d->actor[i]);
        char what[48];
        snprintf(what, sizeof(what), "adag_actor_create %s", d->name[i]);
        rec_t *r = rec_add(K_CREATE, what, st, t0, now_ns());
        r->fault_call = fault_here && fault_external_worker(c->fault);
        if (st != ADAG_OK) {
            d->actor[i] = NULL;
            continue;
        }
        d->pid[i] = adag_actor_pid(d->actor[i]);
        watch_add(i, d->pid[i]);
        drv_line("W %u %d %s", i, (int)d->pid[i], d->name[i]);
    }

    /* ---- compile ---- */
    d->sleeper = c->sleeper;
    if (!d->actor[d->sleeper]) {
        for (unsigned i = 0; i < c->nproc; i++)
            if (d->actor[i]) {
                d->sleeper = i;
                break;
            }
    }
    d->has_sleep = d->actor[d->sleeper] != NULL;
    d->has_zero = c->zero_arg && d->actor[c->zero_actor] != NULL;
    int any = 0;
    for (unsigned i = 0; i <= c->nproc; i++)
        any |= d->actor[i] != NULL;
    int graph_ok = any && build_graph(c, d) == 0;
    /* every field set (max_inflight >= 1, dag_teardown_ms >= 300) */
    adag_compile_params_t cp =
        h_compile_params(c->max_inflight, 64, GET_TIMEOUT_MS, c->dag_teardown_ms);
    int pre_poison = fault_in_method(c->fault) && c->phase == PH_COMPILE && d->actor[c->victim];
    adag_ref_t pre_ref = 0;
    int pre_sent = 0;
    int64_t pre_t0 = 0;
    if (pre_poison) {
        /* a small DAG over the victim: the poison runs there while the main
         * graph compiles */
        h_stage_t die = {d->actor[c->victim], "die_if"};
        int64_t t0 = now_ns();
        if ((st = h_try_chain(d->rt, &die, 1, &cp, &d->pre_g, &d->pre_dag, NULL)) != ADAG_OK) {
            rec_add(K_COMPILE, "compile of the poison DAG", st, t0, now_ns())->pre = 1;
            d->pre_dag = NULL;
        }
    }
    drv_announce(PH_COMPILE);
    if (pre_poison && d->pre_dag) {
        int64_t v = c->fault == F_WEXIT ? 7 : 11;
        adag_value_t in = {.data = &v, .size = sizeof(v)};
        pre_t0 = now_ns();
        d->fault_t0 = pre_t0;
        st = adag_dag_execute(d->pre_dag, &in, 1, 0, &pre_ref);
        rec_t *r = rec_add(K_EXECUTE, "adag_dag_execute (poison, small DAG)", st, pre_t0, now_ns());
        r->poison = 1;
        r->pre = 1;
        pre_sent = st == ADAG_OK;
    }
    if (graph_ok) {
        drv_activity("adag_graph_compile");
        int64_t t0 = now_ns();
        st = adag_graph_compile(d->g, &cp, &d->dag);
        rec_add(K_COMPILE, "adag_graph_compile", st, t0, now_ns());
        if (st != ADAG_OK) {
            d->dag = NULL;
            if (st == ADAG_ERR_ACTOR_DIED)
                d->death_seen = 1;
        }
    }
    if (pre_sent) {
        adag_value_t out;
        drv_activity("adag_dag_get (poison, small DAG)");
        int64_t t0 = now_ns();
        st = adag_dag_get(d->pre_dag, pre_ref, &out, 1, GET_TIMEOUT_MS);
        rec_t *r = rec_add(K_GET, "adag_dag_get (poison, small DAG)", st, t0, now_ns());
        r->poison = 1;
        r->pre = 1;
        r->exec_t0 = pre_t0;
        r->ref = pre_ref;
        (void)adag_dag_release(d->pre_dag, pre_ref);
    }

    /* ---- execute ---- */
    drv_announce(PH_EXECUTE);
    if (d->dag) {
        int need_death = fault_kills_worker(c->fault) && d->victim_in_dag &&
                         c->phase <= PH_EXECUTE;
        int poison_due = d->die_bound && c->phase == PH_EXECUTE;
        int64_t start = now_ns();
        int64_t from = D_t_go && c->phase <= PH_EXECUTE ? D_t_go : start;
        int64_t hard = from + (c->delay_us + (int64_t)c->stop_ms * 1000 + 4000000) * 1000;
        int64_t plain = start + (int64_t)(c->phase == PH_EXECUTE ? c->exec_ms : 30) * 1000000;
        unsigned count = 0, batches = 0, after_death = 0;
        while (!R_full && !d->stuck) {
            run_batch(c, d, &count, poison_due);
            batches++;
            int64_t t = now_ns();
            if (dag_failed(d) && ++after_death > 3)
                break;
            if (need_death) {
                if (!dag_failed(d) && t > hard)
                    break;
            } else if (batches >= 3 && t > plain && !dag_failed(d)) {
                break;
            }
            sleep_us(rnd(&d->rng, 1000));
        }
    }

    /* ---- teardown ---- */
    int td_fault = c->phase == PH_TEARDOWN && d->dag && !dag_failed(d);
    if (td_fault && !d->die_bound && d->has_sleep) {
        /* long methods in flight, so the teardown is under way when the fault lands */
        for (unsigned k = 0; k < c->nlong && k < c->max_inflight; k++) {
            int64_t v = 20, s = c->long_ms;
            adag_value_t in[2] = {{.data = &v, .size = sizeof(v)},
                                  {.data = &s, .size = sizeof(s)}};
            adag_ref_t ref;
            int64_t t0 = now_ns();
            st = adag_dag_execute(d->dag, in, 2, 0, &ref);
            rec_add(K_EXECUTE, "adag_dag_execute (long method before teardown)", st, t0, now_ns());
        }
        d->long_in_flight = 1;
        sleep_us(20000); /* let the first one start */
    }
    drv_announce(PH_TEARDOWN);
    if (td_fault && d->die_bound) {
        /* the poison, then teardown at once: the worker dies while it runs */
        int64_t v = (c->fault == F_WEXIT ? 7 : 11) - d->prefix, s = 0;
        adag_value_t in[2] = {{.data = &v, .size = sizeof(v)}, {.data = &s, .size = sizeof(s)}};
        adag_ref_t ref;
        int64_t t0 = now_ns();
        d->fault_t0 = t0;
        st = adag_dag_execute(d->dag, in, d->has_sleep ? 2 : 1, 0, &ref);
        rec_add(K_EXECUTE, "adag_dag_execute (poison, then teardown)", st, t0, now_ns())->poison = 1;
        sleep_us(rnd(&d->rng, 2000));
    }
    if (d->dag) {
        drv_activity("adag_dag_destroy");
        int64_t t0 = now_ns();
        st = adag_dag_destroy(d->dag);
        rec_add(K_DAG_DESTROY, "adag_dag_destroy", st, t0, now_ns());
    }
    if (d->pre_dag) {
        drv_activity("adag_dag_destroy (poison DAG)");
        int64_t t0 = now_ns();
        st = adag_dag_destroy(d->pre_dag);
        rec_add(K_DAG_DESTROY, "adag_dag_destroy (poison DAG)", st, t0, now_ns());
    }
    check_survivors(c, d);
    drv_activity("adag_runtime_destroy");
    int64_t t0 = now_ns();
    st = adag_runtime_destroy(d->rt);
    rec_add(K_RT_DESTROY, "adag_runtime_destroy", st, t0, now_ns());
    atomic_store(&sh->phase, PH_DONE);
    drv_activity("checks after teardown");

    /* ---- what is left ---- */
    watch_stop();
    pid_t kids[8];
    int64_t t_end = now_ns() + 1000000000;
    int nk;
    while ((nk = children_of(getpid(), kids, 8)) > 0 && now_ns() < t_end)
        sleep_us(10000);
    if (nk > 0) {
        char desc[600];
        probe_describe(kids[0], desc, sizeof(desc));
        drv_fail(XC_CHILDREN, "%d child process(es) left 1 s after adag_runtime_destroy, first: %s",
                 nk, desc);
    }
    int fds1 = probe_count_fds(), maps1 = probe_count_maps("memfd:");
    if (fds1 != fds0)
        drv_fail(XC_FDS, "%d fds open after teardown, %d before adag_runtime_create", fds1, fds0);
    if (maps1 != maps0)
        drv_fail(XC_MEMFD, "%d memfd mappings after teardown, %d before", maps1, maps0);

    double detect = -1;
    evaluate(c, d, &detect);
    if (detect >= 0)
        drv_line("D %.1f", detect);
    if (R_full)
        drv_line("N call record full (%d calls)", MAXREC);
    free(R);

    if (fault_kills_driver(c->fault)) {
        /* the checker kills us; if it does not, it could not deliver the fault */
        drv_activity("waiting to be killed");
        sleep_us(10000000);
        drv_fail(XC_NOT_DELIVERED, "the driver was not killed");
    }
    return D_code;
}


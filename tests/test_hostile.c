/*
 * Suite "hostile": the driver and host situations an inference server meets
 * in production, each once a real fault of the core: a driver that dies at
 * a bad moment (mid-teardown with a method stuck, with a forked child, with
 * a stopped worker), a host with its own SIGCHLD handling, a daemon started
 * with fds 0-2 closed, one stuck worker next to healthy ones. After each:
 * no process, fd or mapping left.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* In a child driver: no Criterion asserts, exit codes only. */
#define CHILD_CHECK(cond, code)                                                                \
    do {                                                                                       \
        if (!(cond))                                                                           \
            _exit(code);                                                                       \
    } while (0)

static adag_actor_h child_actor(adag_runtime_h rt, const char *name)
{
    adag_actor_params_t p = h_actor_params_init("counter", ADAG_PLACEMENT_PROCESS, name, NULL, 0);
    adag_actor_h a = NULL;
    CHILD_CHECK(adag_actor_create(rt, &p, &a) == ADAG_OK, 20);
    return a;
}

/* input -> a.m1 -> b.m2 -> output, compiled with teardown timeout td_ms. */
static adag_dag_h child_chain(adag_runtime_h rt, adag_actor_h a, const char *m1, adag_actor_h b,
                              const char *m2, int td_ms)
{
    adag_graph_h g = NULL;
    adag_dag_h dag = NULL;
    adag_compile_params_t cp = h_compile_params(4, 0, 0, td_ms);
    h_stage_t st[2] = {{a, m1}, {b, m2}};
    CHILD_CHECK(h_try_chain(rt, st, 2, &cp, &g, &dag, NULL) == ADAG_OK, 21);
    return dag;
}

static void child_execute(adag_dag_h dag, int64_t x)
{
    adag_value_t v = {.data = &x, .size = sizeof(x)};
    adag_ref_t ref;
    CHILD_CHECK(adag_dag_execute(dag, &v, 1, 0, &ref) == ADAG_OK, 22);
}


/* ---------------------------------------------------------------- */
/* 1. Workers never outlive their driver                             */
/* ---------------------------------------------------------------- */

/* (a) The driver dies while tearing down a DAG whose method never returns:
 * the worker's main thread is in pthread_join, not reading its socket. */
static void driver_in_stuck_teardown(int wfd)
{
    adag_runtime_h rt = NULL;
    CHILD_CHECK(adag_runtime_create(NULL, &rt) == ADAG_OK, 10);
    adag_actor_h a = child_actor(rt, "stuck"), b = child_actor(rt, "next");
    adag_dag_h dag = child_chain(rt, a, "spin_ms", b, "add", 60000);
    child_execute(dag, -1); /* spins forever */
    int pids[2] = {adag_actor_pid(a), adag_actor_pid(b)};
    CHILD_CHECK(write(wfd, pids, sizeof(pids)) == (ssize_t)sizeof(pids), 11);
    h_sleep_ms(100);
    adag_dag_destroy(dag); /* waits up to 60 s for the stuck worker */
    _exit(12);
}

Test(hardening, driver_killed_during_stuck_teardown, .timeout = 60)
{
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    h_child_driver_t c = h_fork_driver(driver_in_stuck_teardown);
    pid_t pids[2];
    int raw[2];
    h_read_report(&c, raw, sizeof(raw));
    pids[0] = raw[0];
    pids[1] = raw[1];
    h_sleep_ms(400); /* the driver is inside adag_dag_destroy now */
    h_kill_driver(&c);
    char left[256];
    double t0 = h_now_ms();
    int n = h_wait_gone(pids, 2, 2000, left, sizeof(left));
    cr_assert_eq(n, 0, "%d worker(s) alive 2 s after the driver died in teardown:%s", n, left);
    cr_log_info("workers gone %.0f ms after the driver was killed", h_now_ms() - t0);
    cr_assert_eq(h_wait_no_children(2000), 0, "child processes left");
}

/* (b) The driver forked a child (no exec) that still holds the control
 * sockets: the workers never see EOF, yet must leave with the driver. */
static void driver_with_forked_child(int wfd)
{
    adag_runtime_h rt = NULL;
    CHILD_CHECK(adag_runtime_create(NULL, &rt) == ADAG_OK, 10);
    adag_actor_h a = child_actor(rt, "a"), b = child_actor(rt, "b");
    adag_dag_h dag = child_chain(rt, a, "add", b, "add", 0);
    child_execute(dag, 1);
    pid_t kid = fork();
    if (kid == 0) {
        for (;;)
            pause(); /* holds every fd of the driver */
    }
    int pids[3] = {adag_actor_pid(a), adag_actor_pid(b), (int)kid};
    CHILD_CHECK(write(wfd, pids, sizeof(pids)) == (ssize_t)sizeof(pids), 11);
    for (;;)
        pause();
}

Test(hardening, driver_with_forked_child_killed, .timeout = 60)
{
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    h_child_driver_t c = h_fork_driver(driver_with_forked_child);
    int raw[3];
    h_read_report(&c, raw, sizeof(raw));
    pid_t workers[2] = {raw[0], raw[1]}, forked = raw[2];
    h_kill_driver(&c);
    char left[256];
    int n = h_wait_gone(workers, 2, 2000, left, sizeof(left));
    /* the forked child is the host's business: it still lives */
    cr_assert_neq(h_proc_state(forked), 0, "the driver's forked child is gone too");
    kill(forked, SIGKILL);
    waitpid(forked, NULL, 0);
    cr_assert_eq(n, 0, "%d worker(s) alive 2 s after their driver died (a forked child still "
                       "holds the sockets):%s",
                 n, left);
    cr_assert_eq(h_wait_no_children(2000), 0, "child processes left");
}

/* (c) A stopped worker (SIGSTOP) cannot read anything: still it dies with
 * its driver. */
static void driver_idle(int wfd)
{
    adag_runtime_h rt = NULL;
    CHILD_CHECK(adag_runtime_create(NULL, &rt) == ADAG_OK, 10);
    adag_actor_h a = child_actor(rt, "a"), b = child_actor(rt, "b");
    adag_dag_h dag = child_chain(rt, a, "add", b, "add", 0);
    child_execute(dag, 1);
    int pids[2] = {adag_actor_pid(a), adag_actor_pid(b)};
    CHILD_CHECK(write(wfd, pids, sizeof(pids)) == (ssize_t)sizeof(pids), 11);
    for (;;)
        pause();
}

Test(hardening, stopped_worker_dies_with_driver, .timeout = 60)
{
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    h_child_driver_t c = h_fork_driver(driver_idle);
    int raw[2];
    h_read_report(&c, raw, sizeof(raw));
    pid_t workers[2] = {raw[0], raw[1]};
    cr_assert_eq(kill(workers[0], SIGSTOP), 0);
    for (int i = 0; i < 200 && h_proc_state(workers[0]) != 'T'; i++)
        h_sleep_ms(5);
    cr_assert_eq(h_proc_state(workers[0]), 'T', "the worker did not stop");
    h_kill_driver(&c);
    char left[256];
    int n = h_wait_gone(workers, 2, 2000, left, sizeof(left));
    cr_assert_eq(n, 0, "%d worker(s) alive 2 s after their driver died:%s", n, left);
    cr_assert_eq(h_wait_no_children(2000), 0, "child processes left");
}

/* ---------------------------------------------------------------- */
/* 2. The host's SIGCHLD handling changes nothing                    */
/* ---------------------------------------------------------------- */

static int kernel_at_least(int major, int minor)
{
    struct utsname u;
    int ma = 0, mi = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
        return 0;
    return ma > major || (ma == major && mi >= minor);
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Two healthy process actors and a victim in one DAG, a second DAG over the
 * healthy ones; the victim is SIGKILLed: gets fail at once naming it and the
 * signal (want_signal: the runtime collected the status itself), the other
 * DAG works, the monitor does not spin, teardown is quick. */
static void kill_worker_under_host_sigchld(int want_signal)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    adag_actor_h h1 = h_counter(rt, ADAG_PLACEMENT_PROCESS, "healthy1", 1);
    adag_actor_h h2 = h_counter(rt, ADAG_PLACEMENT_PROCESS, "healthy2", 10);
    adag_actor_h v = h_counter(rt, ADAG_PLACEMENT_PROCESS, "victim", 100);
    adag_actor_h all[3] = {h1, v, h2}, healthy[2] = {h1, h2};
    adag_dag_h d1 = h_compile(h_chain_graph(rt, all, 3, "add"), 4, 0);
    adag_dag_h d2 = h_compile(h_chain_graph(rt, healthy, 2, "add"), 4, 0);
    cr_assert_eq(h_roundtrip(d1, 0), 111);
    cr_assert_eq(h_roundtrip(d2, 0), 11);

    int64_t x = 1;
    adag_value_t in = h_i64v(&x), out;
    adag_ref_t ref;
    cr_assert_eq(kill(adag_actor_pid(v), SIGKILL), 0);
    double t0 = h_now_ms();
    /* execute fails at once if the death is known, else get waits (forever,
     * if nothing noticed it) */
    adag_status_t st = adag_dag_execute(d1, &in, 1, 0, &ref);
    int executed = st == ADAG_OK;
    if (executed)
        st = adag_dag_get(d1, ref, &out, 1, -1);
    ASSERT_ST(st, ADAG_ERR_ACTOR_DIED);
    double dt = h_now_ms() - t0;
    cr_assert(dt < 1000, "the death was reported after %.0f ms", dt);
    ASSERT_MSG_HAS("victim");
    /* how it died: from our own wait, or where the host's wait collected it
     * first, from the pidfd's exit record (Linux >= 6.15) */
    if (want_signal || kernel_at_least(6, 15))
        ASSERT_MSG_HAS("SIGKILL");
    else
        cr_assert(strstr(h_msg(), "SIGKILL") || strstr(h_msg(), "collected elsewhere"),
                  "message \"%s\" says nothing of how the worker ended", h_msg());
    if (executed)
        (void)adag_dag_release(d1, ref);

    /* nothing spins: 400 ms idle costs the process far less than a core */
    double c0 = cpu_ms();
    h_sleep_ms(400);
    double used = cpu_ms() - c0;
    cr_assert(used < 200, "the driver used %.0f ms of CPU in 400 ms idle after the death", used);

    for (int64_t i = 0; i < 20; i++)
        cr_assert_eq(h_roundtrip(d2, i), i + 11);
    t0 = h_now_ms();
    ASSERT_OK(adag_runtime_destroy(rt));
    dt = h_now_ms() - t0;
    cr_assert(dt < 2000, "adag_runtime_destroy took %.0f ms", dt);
    h_assert_clean(&snap);
}

Test(hardening, sigchld_ignored, .timeout = 60)
{
    cr_assert(signal(SIGCHLD, SIG_IGN) != SIG_ERR);
    kill_worker_under_host_sigchld(0);
}

static volatile sig_atomic_t host_reaped, host_sigchld;

static void reaping_handler(int sig)
{
    (void)sig;
    int saved = errno, status;
    host_sigchld++;
    while (waitpid(-1, &status, WNOHANG) > 0)
        host_reaped++;
    errno = saved;
}

Test(hardening, sigchld_reaping_handler, .timeout = 60)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = reaping_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGCHLD, &sa, NULL), 0);
    kill_worker_under_host_sigchld(0);
    /* the handler did run (it collected the dead worker or the others at
     * teardown), and the host's own children are still its business */
    cr_assert(host_sigchld > 0, "the host's SIGCHLD handler never ran");
    int before = host_reaped;
    pid_t kid = fork();
    if (kid == 0)
        _exit(0);
    for (int i = 0; i < 400 && host_reaped == before; i++)
        h_sleep_ms(5);
    cr_assert_eq(host_reaped, before + 1, "the host's own child was not reaped by its handler");
}

/* A host thread that collects every child, clone children included
 * (waitpid with __WALL): the runtime still sees the death at once. */
static void *wall_reaper(void *arg)
{
    volatile int *stop = arg;
    while (!*stop) {
        int status;
        if (waitpid(-1, &status, __WALL | WNOHANG) <= 0)
            h_sleep_ms(1);
    }
    return NULL;
}

Test(hardening, host_collects_every_child, .timeout = 60)
{
    volatile int stop = 0;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wall_reaper, (void *)&stop), 0);
    kill_worker_under_host_sigchld(0);
    stop = 1;
    pthread_join(t, NULL);
}

/* ---------------------------------------------------------------- */
/* 3. One stuck worker cannot take healthy ones down                 */
/* ---------------------------------------------------------------- */

Test(hardening, stuck_worker_killed_alone, .timeout = 60)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    /* d1: input -> stuck.sleep_ms -> healthy1.add -> healthy2.add; stuck is
     * first so the healthy workers come after it in teardown order */
    adag_actor_h a[3];
    adag_dag_h d1 = H_DAG(rt, .pl = ADAG_PLACEMENT_PROCESS, .n = 3,
                          .names = (const char *const[]){"stuck", "healthy1", "healthy2"},
                          .offsets = (const int64_t[]){0, 1, 10},
                          .methods = (const char *const[]){"sleep_ms", "add", "add"},
                          .max_inflight = 4, .teardown_timeout = 600, .actors = a);
    adag_dag_h d2 = h_compile(h_chain_graph(rt, a + 1, 2, "add"), 4, 0);
    cr_assert_eq(h_roundtrip(d1, 0), 11);

    (void)h_execute(d1, 100000); /* stuck for good */
    h_sleep_ms(50);
    pid_t ps = adag_actor_pid(a[0]), p1 = adag_actor_pid(a[1]), p2 = adag_actor_pid(a[2]);
    double t0 = h_now_ms();
    ASSERT_OK(adag_dag_destroy(d1));
    double dt = h_now_ms() - t0;
    cr_assert(dt < 3000, "destroy with one stuck worker took %.0f ms (timeout 600)", dt);
    /* only the stuck one was killed; d2 over the healthy ones works */
    cr_assert(h_proc_state(ps) == 0 || h_proc_state(ps) == 'Z', "the stuck worker lives");
    cr_assert(h_proc_state(p1) != 0 && h_proc_state(p1) != 'Z', "healthy1 was killed");
    cr_assert(h_proc_state(p2) != 0 && h_proc_state(p2) != 'Z', "healthy2 was killed");
    for (int64_t i = 0; i < 10; i++)
        cr_assert_eq(h_roundtrip(d2, i), i + 11);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* Three stuck workers with a 1 s teardown timeout: stop requests go out in
 * parallel, so teardown takes about one timeout, not three. */
Test(hardening, stuck_workers_stopped_in_parallel, .timeout = 60)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    adag_runtime_h rt = h_runtime();
    /* input -> stuck<i>.sleep_ms for i = 0, 1, 2 */
    adag_dag_h dag = H_DAG(rt, .pl = ADAG_PLACEMENT_PROCESS, .n = 3, .prefix = "stuck",
                           .method = "sleep_ms", .fanout = 1, .max_inflight = 2,
                           .teardown_timeout = 1000);
    (void)h_execute(dag, 100000);
    h_sleep_ms(50);
    double t0 = h_now_ms();
    ASSERT_OK(adag_dag_destroy(dag));
    double dt = h_now_ms() - t0;
    cr_assert(dt < 2500, "tearing down 3 stuck workers took %.0f ms with a 1000 ms timeout", dt);
    cr_log_info("tearing down 3 stuck workers took %.0f ms (timeout 1000 ms)", dt);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_assert_clean(&snap);
}

/* ---------------------------------------------------------------- */
/* 4. A driver started with fds 0-2 closed                           */
/* ---------------------------------------------------------------- */

static int fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

static void driver_without_stdio(int wfd)
{
    /* move the report pipe out of the way, then close 0-2 */
    int w = fcntl(wfd, F_DUPFD_CLOEXEC, 10);
    CHILD_CHECK(w >= 0, 30);
    close(wfd);
    close(0);
    close(1);
    close(2);
    adag_runtime_h rt = NULL;
    CHILD_CHECK(adag_runtime_create(NULL, &rt) == ADAG_OK, 31);
    adag_actor_h a = child_actor(rt, "talker"), b = child_actor(rt, "next");
    adag_dag_h dag = child_chain(rt, a, "say", b, "add", 0);
    int fd = -1;
    CHILD_CHECK(adag_dag_fd(dag, &fd) == ADAG_OK && fd > 2, 32);
    /* the runtime holds none of 0-2 */
    CHILD_CHECK(!fd_open(0) && !fd_open(1) && !fd_open(2), 33);
    /* the worker's 0-2 are open, on /dev/null */
    char path[64], target[256];
    for (int i = 0; i <= 2; i++) {
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", adag_actor_pid(a), i);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        CHILD_CHECK(n > 0, 34);
        target[n] = '\0';
        CHILD_CHECK(strcmp(target, "/dev/null") == 0, 35);
    }
    /* methods that write to stdout and stderr: every get has its data */
    for (int64_t i = 0; i < 50; i++) {
        adag_value_t v = {.data = &i, .size = sizeof(i)}, out;
        adag_ref_t ref;
        CHILD_CHECK(adag_dag_execute(dag, &v, 1, 0, &ref) == ADAG_OK, 36);
        adag_status_t st = adag_dag_get(dag, ref, &out, 1, 10000);
        CHILD_CHECK(st == ADAG_OK, 37);
        CHILD_CHECK(out.data && out.size == 8, 38);
        int64_t got;
        memcpy(&got, out.data, 8);
        CHILD_CHECK(got == i, 39);
        CHILD_CHECK(adag_dag_release(dag, ref) == ADAG_OK, 40);
    }
    CHILD_CHECK(adag_runtime_destroy(rt) == ADAG_OK, 41);
    char ok = 'k';
    CHILD_CHECK(write(w, &ok, 1) == 1, 42);
    _exit(0);
}

Test(hardening, driver_with_stdio_closed, .timeout = 60)
{
    h_child_driver_t c = h_fork_driver(driver_without_stdio);
    char ok = 0;
    h_read_report(&c, &ok, 1);
    int status = 0;
    cr_assert_eq(waitpid(c.driver, &status, 0), c.driver);
    close(c.rfd);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the driver with fds 0-2 closed failed: %s %d (see driver_without_stdio)",
              WIFEXITED(status) ? "exit code" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    cr_assert_eq(ok, 'k');
}

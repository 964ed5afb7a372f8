/*
 * The agent (`adag-worker --agent`) against connections that misbehave:
 * many that come and go at once, more silent ones than it authenticates at
 * once (AGENT_SLOTS), one silent past ADAG_AGENT_AUTH_TIMEOUT_MS, and an
 * authenticating child that stops. Real agents on loopback
 * (tests/remote_rig.h), real sockets, real drivers.
 */
#include "helpers.h"
#include "remote_rig.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOKEN "correct horse battery staple"
/* connections an agent authenticates at once (dag/proc/agent.c) */
#define AGENT_SLOTS 64

/* An agent whose connections must send their HELLO within auth_ms (0: the
 * default). */
static void agent_start(h_agent_t *ag, int auth_ms)
{
    char ms[32];
    snprintf(ms, sizeof(ms), "%d", auth_ms);
    if (auth_ms)
        setenv("ADAG_AGENT_AUTH_TIMEOUT_MS", ms, 1);
    h_agent_start(ag, TOKEN, 0);
    unsetenv("ADAG_AGENT_AUTH_TIMEOUT_MS");
}

static adag_runtime_h driver_runtime(const h_agent_t *ag)
{
    unsetenv("ADAG_TOKEN");
    setenv("ADAG_TOKEN_FILE", ag->token, 1);
    return h_runtime();
}

static adag_status_t create_remote(adag_runtime_h rt, const h_agent_t *ag, const char *name,
                                   adag_actor_h *a)
{
    int64_t off = 1;
    adag_actor_params_t p = h_remote_params(ag, name, &off);
    *a = NULL;
    return adag_actor_create(rt, &p, a);
}

/* A remote actor is created, and within ms; it answers. */
static void create_serves_within(adag_runtime_h rt, const h_agent_t *ag, const char *name,
                                 double ms)
{
    adag_actor_h a;
    double t0 = h_now_ms();
    ASSERT_OK(create_remote(rt, ag, name, &a));
    double took = h_now_ms() - t0;
    cr_assert_lt(took, ms, "creating remote actor %s took %.0f ms", name, took);
    adag_graph_h g = h_chain_graph(rt, &a, 1, "add");
    adag_dag_h dag = h_compile(g, 2, 64);
    cr_assert_eq(h_roundtrip(dag, 41), 42);
    ASSERT_OK(adag_dag_destroy(dag));
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_actor_destroy(a));
}

/* Waits up to ms until the agent has `want` children; returns how many it has. */
static int wait_children(const h_agent_t *ag, int want, int ms)
{
    double end = h_now_ms() + ms;
    int n;
    while ((n = h_agent_children(ag)) != want && h_now_ms() < end)
        h_sleep_ms(10);
    return n;
}

/* Waits up to ms until the agent logged `needle` at least n times. */
static int wait_logged(const h_agent_t *ag, const char *needle, int n, int ms)
{
    double end = h_now_ms() + ms;
    int got;
    while ((got = h_agent_log_count(ag, needle)) < n && h_now_ms() < end)
        h_sleep_ms(10);
    return got;
}

/* Reads fd until EOF (or ms pass: -1); what it read into buf (NUL-terminated). */
static ssize_t read_to_eof(int fd, char *buf, size_t len, int ms)
{
    size_t got = 0;
    double end = h_now_ms() + ms;
    for (;;) {
        int left = (int)(end - h_now_ms());
        if (left <= 0 || !h_fd_readable(fd, left))
            return -1;
        ssize_t n = read(fd, buf + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == len - 1)
            break;
    }
    buf[got] = '\0';
    return (ssize_t)got;
}

/* 80 clients connect and close at once: their authenticating children end
 * at once, and so do their slots. A driver is served right after, not
 * refused "too many connections are authenticating" until slots age out. */
Test(agent, connections_that_come_and_go_free_their_slots, .timeout = 60)
{
    enum { N = 80 };
    h_agent_t ag;
    agent_start(&ag, 0);
    int fd[N];
    for (int i = 0; i < N; i++)
        fd[i] = h_agent_connect(&ag);
    for (int i = 0; i < N; i++)
        close(fd[i]);
    /* every one refused ("no HELLO", or "too many" for those beyond the
     * slots), and no child left */
    int refused = wait_logged(&ag, "refused 127.0.0.1:", N, 5000);
    int left = wait_children(&ag, 0, 3000);
    cr_assert_eq(left, 0, "the agent still has %d children 3 s after its %d clients closed", left,
                 N);
    cr_log_info("%d of %d refusals logged", refused, N);
    adag_runtime_h rt = driver_runtime(&ag);
    create_serves_within(rt, &ag, "after_the_crowd", 2000.0);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_agent_cleanup(&ag);
}

/* More silent clients than the agent authenticates at once: every driver
 * attempt meanwhile is refused with ADAG_ERR_INVALID "refused this driver:
 * too many connections are authenticating", never a worker's death. Once
 * the silent clients close, their slots are free and a driver is served. */
Test(agent, refused_when_full_as_a_refusal, .timeout = 90)
{
    enum { SILENT = AGENT_SLOTS + 6, ATTEMPTS = 200 };
    h_agent_t ag;
    agent_start(&ag, 0);
    int fd[SILENT];
    for (int i = 0; i < SILENT; i++)
        fd[i] = h_agent_connect(&ag);
    cr_assert_eq(wait_children(&ag, AGENT_SLOTS, 3000), AGENT_SLOTS,
                 "the agent should authenticate %d at once", AGENT_SLOTS);
    cr_assert_geq(wait_logged(&ag, "too many connections", SILENT - AGENT_SLOTS, 3000),
                  SILENT - AGENT_SLOTS);
    adag_runtime_h rt = driver_runtime(&ag);
    int died = 0, refused = 0, other = 0;
    char first_other[512] = "";
    for (int i = 0; i < ATTEMPTS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "try%d", i);
        adag_actor_h a;
        adag_status_t st = create_remote(rt, &ag, name, &a);
        cr_assert_null(a);
        const char *msg = adag_last_error();
        if (st == ADAG_ERR_INVALID && strstr(msg, "refused this driver: too many connections"))
            refused++;
        else if (st == ADAG_ERR_ACTOR_DIED)
            died++;
        else
            other++;
        if (st != ADAG_ERR_INVALID && !first_other[0])
            snprintf(first_other, sizeof(first_other), "status %d: %s", (int)st, msg);
    }
    cr_assert_eq(refused, ATTEMPTS,
                 "%d of %d attempts refused, %d saw a death, %d else (first: %s)", refused,
                 ATTEMPTS, died, other, first_other);
    for (int i = 0; i < SILENT; i++)
        close(fd[i]);
    cr_assert_eq(wait_children(&ag, 0, 3000), 0, "the silent clients' children outlived them");
    create_serves_within(rt, &ag, "after_the_silent", 2000.0);
    ASSERT_OK(adag_runtime_destroy(rt));
    h_agent_cleanup(&ag);
}

/* Clients silent past ADAG_AGENT_AUTH_TIMEOUT_MS (here 1 s) are refused
 * ("no HELLO") and dropped (EOF) at that bound though they stay open, and
 * their slots come free: a driver is served while they are still open. */
Test(agent, silent_past_the_bound_are_dropped, .timeout = 60)
{
    enum { AUTH_MS = 1000 };
    h_agent_t ag;
    agent_start(&ag, AUTH_MS);
    int fd[AGENT_SLOTS];
    double t0 = h_now_ms();
    for (int i = 0; i < AGENT_SLOTS; i++)
        fd[i] = h_agent_connect(&ag);
    cr_assert_eq(wait_children(&ag, AGENT_SLOTS, 3000), AGENT_SLOTS);
    double first = 0, last = 0;
    for (int i = 0; i < AGENT_SLOTS; i++) {
        char buf[1024];
        ssize_t n = read_to_eof(fd[i], buf, sizeof(buf), 5000);
        double at = h_now_ms() - t0;
        cr_assert_geq(n, 0, "silent client %d was not dropped within %.0f ms", i, at);
        cr_assert(memmem(buf, (size_t)n, "refused this driver: no HELLO", 29),
                  "silent client %d got %zd bytes without the refusal", i, n);
        first = i == 0 ? at : first;
        last = at;
    }
    cr_log_info("silent clients dropped after %.0f to %.0f ms (bound %d ms)", first, last,
                AUTH_MS);
    cr_assert_geq(first, AUTH_MS * 0.9, "dropped before the bound: %.0f ms", first);
    cr_assert_lt(last, AUTH_MS + 3000.0, "the last one dropped after %.0f ms", last);
    /* the refusal is left 1 s to be read; then the slots are free */
    cr_assert_eq(wait_children(&ag, 0, 4000), 0, "silent clients hold their slots");
    adag_runtime_h rt = driver_runtime(&ag);
    create_serves_within(rt, &ag, "beside_the_dropped", 2000.0);
    ASSERT_OK(adag_runtime_destroy(rt));
    for (int i = 0; i < AGENT_SLOTS; i++)
        close(fd[i]);
    h_agent_cleanup(&ag);
}

/* A child that cannot finish authenticating (SIGSTOPped here) is killed by
 * the agent past the bound: its connection ends and its slot is freed. */
Test(agent, stuck_authentication_is_killed, .timeout = 60)
{
    enum { AUTH_MS = 1000 };
    h_agent_t ag;
    agent_start(&ag, AUTH_MS);
    int fd = h_agent_connect(&ag);
    cr_assert_eq(wait_children(&ag, 1, 3000), 1);
    pid_t child;
    cr_assert_eq(probe_children(ag.pid, &child, 1, NULL), 1);
    cr_assert_eq(kill(child, SIGSTOP), 0);
    double t0 = h_now_ms();
    char buf[256];
    ssize_t n = read_to_eof(fd, buf, sizeof(buf), 8000);
    double ms = h_now_ms() - t0;
    int left = wait_children(&ag, 0, 3000);
    if (n < 0 || left)
        kill(child, SIGKILL); /* nothing outlives the test */
    cr_assert_geq(n, 0, "the stopped child's connection was not ended within 8 s");
    cr_assert_eq(left, 0, "the stopped child %d is left", (int)child);
    cr_log_info("the stopped child's connection ended after %.0f ms", ms);
    cr_assert(h_agent_logged(&ag, "killed"), "the agent did not log the kill");
    close(fd);
    h_agent_cleanup(&ag);
}

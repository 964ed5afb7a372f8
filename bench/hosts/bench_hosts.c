/*
 * adag-bench-hosts: DAGs across two hosts made of network namespaces
 * (tests/netns_rig.h: veth pairs on a bridge, UCX over TCP on eth0), each
 * row against ucx_perftest (Debian's ucx-utils) over the same link in the
 * same run, with the same UCX settings and error handling mode (-e: peer
 * failures reported, as adag's endpoints need):
 *
 *   rtt-8B      driver (h0) -> actor in h1 -> driver, 8 bytes, one in
 *               flight: median round trip vs 2 x ucx_perftest ucp_am_lat's
 *               median (it reports half a round trip)
 *   bw-1MiB     driver -> actor in h1 ("check": reads the payload in place,
 *   bw-16MiB    returns 8 bytes), a DAG compiled for values of that size
 *               with 3 in flight at 1 MiB, 1 at 16 MiB (bw_inflight_for):
 *               payload bytes per second vs ucx_perftest ucp_am_bw at that
 *               size; zero-copy (reserve/commit: the driver writes into the
 *               slot, as ucx_perftest sends from its buffer) and with
 *               adag_dag_execute (a copy of the caller's buffer into the
 *               slot). Each value in flight holds a slot on both sides:
 *               past what covers the reply's round trip, more only spread
 *               the bytes over more memory and cost the copies their cache
 *               (16 MiB with 2 in flight: 64 MiB touched per value pair, vs
 *               ucx_perftest's one buffer per side); 1 MiB with 8 in flight
 *               is printed for the record
 *   chain-4     h0 process actor -> h1 -> h0 -> h1 -> driver, 8 bytes:
 *               executions per second at 1 and 8 in flight (no peer: the
 *               ratio is in flight 8 over 1)
 *
 * Rounds (3; --quick: 1; --rounds R: R, at most 9) alternate ucx_perftest
 * and adag; each figure is the median over the rounds, each ratio the
 * median of the rounds' ratios (adag over ucx_perftest in the same round)
 * (--verbose: each round's figures on stderr).
 * Needs root (namespaces); elsewhere it prints "skipped: <reason>" and
 * exits 0. --quick: fewer iterations; --json: one JSON object; --rtt N /
 * --bw N / --chain N: only adag's 8 B round trip / a 16 MiB stream (--size
 * BYTES, --zero-copy; in flight as in the table) / the 4-stage chain (8 in
 * flight), N times (--inflight K), to profile; in the table --inflight K
 * sets both bandwidth rows' values in flight.
 */
#include "netns_rig.h"

#include <adag.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORKER ADAG_BENCH_BUILD_DIR "/adag-worker"
#define MODULE ADAG_BENCH_BUILD_DIR "/bench/libbench_actors.so"
#define PERFTEST_PORT 13391

static h_netns_t hosts;
static pid_t agent = -1, perf_server = -1;
static char token_path[64] = "", port_path[80] = "";
static int quick;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void cleanup(void)
{
    if (agent > 0) {
        kill(agent, SIGKILL);
        waitpid(agent, NULL, 0);
    }
    if (perf_server > 0) {
        kill(perf_server, SIGKILL);
        waitpid(perf_server, NULL, 0);
    }
    if (token_path[0])
        unlink(token_path);
    if (port_path[0])
        unlink(port_path);
    h_netns_down(&hosts);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "adag-bench-hosts: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    cleanup();
    exit(1);
}

/* A child in namespace ns running argv, output to /dev/null; dies with us. */
static pid_t spawn_in(const char *ns, char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 || h_netns_join(ns) != 0)
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    if (pid < 0)
        die("fork: %s", strerror(errno));
    return pid;
}

static void start_agent(char *addr, size_t len)
{
    snprintf(token_path, sizeof(token_path), "/tmp/adag-bench-token-XXXXXX");
    int fd = mkstemp(token_path);
    unsigned char raw[16];
    FILE *r = fopen("/dev/urandom", "r");
    if (fd < 0 || !r || fread(raw, 1, sizeof(raw), r) != sizeof(raw))
        die("making a token file: %s", strerror(errno));
    fclose(r);
    for (size_t i = 0; i < sizeof(raw); i++)
        dprintf(fd, "%02x", raw[i]);
    close(fd);
    chmod(token_path, 0600);
    setenv("ADAG_TOKEN_FILE", token_path, 1);
    snprintf(port_path, sizeof(port_path), "%s.port", token_path);
    char listen[64];
    snprintf(listen, sizeof(listen), "%s:0", hosts.ip[1]);
    char *argv[] = {WORKER, "--agent", listen, "--port-file", port_path, NULL};
    agent = spawn_in(hosts.ns[1], argv);
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(port_path, "r");
        if (f) {
            int ok = fgets(addr, (int)len, f) != NULL;
            fclose(f);
            if (ok) {
                addr[strcspn(addr, "\n")] = '\0';
                return;
            }
        }
        usleep(10000);
    }
    die("the agent in %s did not start", hosts.ns[1]);
}

/* ucx_perftest's "Final:" line for one test against a server in h1, both
 * with -e (UCP_ERR_HANDLING_MODE_PEER, as adag's endpoints) unless
 * no_err_mode: [0] median latency us, [1] overall bandwidth MB/s (2^20
 * bytes). */
static int perftest(const char *test, size_t size, long iters, int no_err_mode, double out[2])
{
    const char *e = no_err_mode ? "" : " -e";
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "ucx_perftest %s -p %d%s -t %s -s %zu -n %ld -w %ld 2>&1",
             hosts.ip[1], PERFTEST_PORT, e, test, size, iters, iters / 10 + 1);
    char *argv[] = {"ucx_perftest", "-p", NULL, no_err_mode ? NULL : "-e", NULL};
    char port[16];
    snprintf(port, sizeof(port), "%d", PERFTEST_PORT);
    argv[2] = port;
    perf_server = spawn_in(hosts.ns[1], argv);
    usleep(300000);
    FILE *f = popen(cmd, "r");
    int found = 0;
    char line[512];
    while (f && fgets(line, sizeof(line), f)) {
        long n;
        double lat50, latavg, latall, bwavg, bwall;
        if (sscanf(line, "Final: %ld %lf %lf %lf %lf %lf", &n, &lat50, &latavg, &latall, &bwavg,
                   &bwall) == 6) {
            out[0] = lat50;
            out[1] = bwall;
            found = 1;
        }
    }
    if (f)
        pclose(f);
    waitpid(perf_server, NULL, 0);
    perf_server = -1;
    return found ? 0 : -1;
}

static adag_actor_h actor(adag_runtime_h rt, const char *name, const char *host)
{
    adag_actor_params_t p = {
        .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME | ADAG_ACTOR_PARAM_MODULE |
                      ADAG_ACTOR_PARAM_PLACEMENT | (host ? ADAG_ACTOR_PARAM_NODE : 0),
        .class_name = "bench",
        .name = name,
        .module_path = MODULE,
        .placement = host ? ADAG_PLACEMENT_REMOTE : ADAG_PLACEMENT_PROCESS,
        .node = host,
    };
    adag_actor_h a;
    adag_status_t st = adag_actor_create(rt, &p, &a);
    if (st != ADAG_OK)
        die("actor %s: %s", name, adag_last_error());
    return a;
}

static adag_dag_h chain(adag_runtime_h rt, adag_actor_h *a, const char *const *methods,
                        unsigned n, unsigned inflight, size_t cap)
{
    adag_graph_h g;
    adag_node_h cur, next;
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_SLOT_CAPACITY,
                                .max_inflight = inflight,
                                .slot_capacity = cap};
    adag_dag_h dag;
    if (adag_graph_create(rt, &g) != ADAG_OK || adag_graph_input(g, 0, &cur) != ADAG_OK)
        die("graph: %s", adag_last_error());
    for (unsigned i = 0; i < n; i++) {
        if (adag_graph_bind(g, a[i], methods[i], &cur, 1, &next) != ADAG_OK)
            die("bind: %s", adag_last_error());
        cur = next;
    }
    if (adag_graph_output(g, &cur, 1) != ADAG_OK || adag_graph_compile(g, &cp, &dag) != ADAG_OK)
        die("compile: %s", adag_last_error());
    adag_graph_destroy(g);
    return dag;
}

/* Rounds of ucx_perftest and adag, alternating: 3 (--quick 1), or --rounds R. */
#define ROUNDS_MAX 9

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n)
{
    double s[ROUNDS_MAX];
    memcpy(s, v, n * sizeof(*v));
    qsort(s, n, sizeof(*s), cmp_double);
    return s[n / 2];
}

/* The median over the rounds of adag's figure over ucx_perftest's in the
 * same round: a slow spell of this shared host that spans a round hits
 * both, and drops out of its ratio. */
static double median_ratio(const double *adag, const double *peer, unsigned n)
{
    double r[ROUNDS_MAX];
    for (unsigned i = 0; i < n; i++)
        r[i] = adag[i] / peer[i];
    return median(r, n);
}


static int zero_copy; /* run(): the driver writes into the slot (reserve/commit) */

/* Values in flight in a bandwidth run of values this size: `asked`
 * (--inflight K) if not 0, else by size (see the top comment): a value of
 * 4 MiB or more takes a millisecond or more to move, against a reply's
 * round trip of 10-30 us, so one in flight keeps the link busy and a
 * second only adds a slot per side (16 MiB, 16-core Xeon: 1 in flight
 * 0.91-1.02 of ucx_perftest, 2: 0.77-0.86, 4: 0.80). A smaller one streams
 * while the previous one's reply comes back, and with 3 in flight the next
 * value's rendezvous request leaves before the current one's bytes (at 2
 * it queues behind them and the link waits a round trip per value:
 * docs/design.md, "The rendezvous handshake at 2 in flight"). */
static unsigned bw_inflight_for(size_t size, long asked)
{
    if (asked)
        return (unsigned)asked;
    return size >= (4u << 20) ? 1 : 3;
}

/* The most values in flight run() keeps track of. */
#define INFLIGHT_MAX 64

/* n executions of `in` (stamped with its index at both ends when stamp),
 * `inflight` at a time; the seconds they took. Each output checked. */
static double run(adag_dag_h dag, unsigned char *in, size_t size, long n, unsigned inflight,
                  int stamp, double *lat_median)
{
    adag_ref_t refs[64];
    double *lat = lat_median ? calloc((size_t)n, sizeof(double)) : NULL, t_start[64];
    double t0 = now_s();
    for (long i = 0; i < n + (long)inflight; i++) {
        if (i >= (long)inflight) {
            long k = i - inflight;
            adag_value_t out;
            if (adag_dag_get(dag, refs[k % 64], &out, 1, 60000) != ADAG_OK)
                die("get: %s", adag_last_error());
            uint64_t want = (uint64_t)k, got;
            memcpy(&got, out.data, 8);
            if (stamp && got != want)
                die("execution %ld came back as %llu", k, (unsigned long long)got);
            if (lat)
                lat[k] = now_s() - t_start[k % 64];
            adag_dag_release(dag, refs[k % 64]);
        }
        if (i < n) {
            uint64_t s = (uint64_t)i;
            memcpy(in, &s, 8);
            if (stamp)
                memcpy(in + size - 8, &s, 8);
            t_start[i % 64] = now_s();
            if (zero_copy) {
                /* the stamps go straight into the slot: no copy of the payload */
                adag_input_view_t view;
                if (adag_dag_reserve(dag, 0, &view, 1, &refs[i % 64]) != ADAG_OK)
                    die("reserve: %s", adag_last_error());
                memcpy(view.data, in, 8);
                memcpy((unsigned char *)view.data + size - 8, in + size - 8, 8);
                adag_value_t written = {.data = view.data, .size = size};
                if (adag_dag_commit(dag, refs[i % 64], &written, 1) != ADAG_OK)
                    die("commit: %s", adag_last_error());
            } else {
                adag_value_t v = {.data = in, .size = size};
                if (adag_dag_execute(dag, &v, 1, 0, &refs[i % 64]) != ADAG_OK)
                    die("execute: %s", adag_last_error());
            }
        }
    }
    double dt = now_s() - t0;
    if (lat) {
        qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
        *lat_median = lat[n / 2];
        free(lat);
    }
    return dt;
}

int main(int argc, char **argv)
{
    int json = 0, verbose = 0;
    long rtt_only = 0, bw_only = 0, chain_only = 0;
    size_t bw_size = 16 << 20;
    long inflight_asked = 0; /* 0: the mode's own */
    size_t bw_capacity = 0; /* 0: the value's size */
    int rounds_asked = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--rtt") && i + 1 < argc)
            rtt_only = atol(argv[++i]);
        else if (!strcmp(argv[i], "--bw") && i + 1 < argc)
            bw_only = atol(argv[++i]);
        else if (!strcmp(argv[i], "--chain") && i + 1 < argc)
            chain_only = atol(argv[++i]);
        else if (!strcmp(argv[i], "--inflight") && i + 1 < argc)
            inflight_asked = strtol(argv[++i], NULL, 10) ? strtol(argv[i], NULL, 10) : -1;
        else if (!strcmp(argv[i], "--capacity") && i + 1 < argc)
            bw_capacity = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--zero-copy"))
            zero_copy = 1;
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            bw_size = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds_asked = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr, "usage: adag-bench-hosts [--quick] [--json] [--verbose] [--rounds R] "
                            "[--rtt N | --bw N [--size BYTES] [--zero-copy] | --chain N] "
                            "[--inflight K]\n");
            return 2;
        }
    }
    if (inflight_asked < 0 || inflight_asked > INFLIGHT_MAX) {
        fprintf(stderr, "adag-bench-hosts: --inflight: expected 1 to %d\n", INFLIGHT_MAX);
        return 2;
    }
    if (rounds_asked && (rounds_asked < 1 || rounds_asked > ROUNDS_MAX)) {
        fprintf(stderr, "adag-bench-hosts: --rounds %d: expected 1 to %d\n", rounds_asked,
                ROUNDS_MAX);
        return 2;
    }
    char why[256];
    if (system("command -v ucx_perftest >/dev/null 2>&1") != 0) {
        printf("skipped: no ucx_perftest (Debian's ucx-utils)\n");
        return 0;
    }
    if (h_netns_up(&hosts, 2, why, sizeof(why)) != 0) {
        printf("skipped: %s\n", why);
        return 0;
    }
    h_netns_ucx_env();
    /* the TCP fragment size adag's UCX context uses unless told otherwise
     * (transport/ucx_domain.c), given to ucx_perftest too: both sides run
     * the same transport settings */
    setenv("UCX_TCP_RX_SEG_SIZE", "524352", 0); /* 512 KiB + 64 B */
    char addr[96];
    start_agent(addr, sizeof(addr));
    if (h_netns_join(hosts.ns[0]) != 0)
        die("joining %s: %s", hosts.ns[0], strerror(errno));

    long lat_n = quick ? 2000 : 20000;
    if (chain_only) {
        adag_runtime_h rt;
        if (adag_runtime_create(NULL, &rt) != ADAG_OK)
            die("runtime: %s", adag_last_error());
        adag_actor_h four[4] = {actor(rt, "near1", NULL), actor(rt, "far", addr),
                                actor(rt, "near2", NULL), actor(rt, "far2", addr)};
        static const char *const pass4[4] = {"pass", "pass", "pass", "pass"};
        unsigned inflight = inflight_asked ? (unsigned)inflight_asked : 8;
        adag_dag_h d = chain(rt, four, pass4, 4, inflight, 64);
        unsigned char b[64] = {0};
        run(d, b, 8, chain_only / 10 + 1, inflight, 1, NULL);
        double dt = run(d, b, 8, chain_only, inflight, 1, NULL);
        printf("adag 4-stage chain, in flight %u: %.0f /s\n", inflight, chain_only / dt);
        adag_runtime_destroy(rt);
        cleanup();
        return 0;
    }
    if (rtt_only || bw_only) {
        adag_runtime_h rt;
        if (adag_runtime_create(NULL, &rt) != ADAG_OK)
            die("runtime: %s", adag_last_error());
        adag_actor_h far = actor(rt, "far", addr);
        static const char *const pass1[1] = {"pass"}, *const check1[1] = {"check"};
        size_t size = rtt_only ? 8 : bw_size;
        unsigned inflight = rtt_only ? 1 : bw_inflight_for(size, inflight_asked);
        adag_dag_h d = chain(rt, &far, rtt_only ? pass1 : check1, 1, inflight,
                              bw_capacity > size ? bw_capacity : size);
        unsigned char *b = calloc(1, size);
        if (rtt_only) {
            double rtt = 0;
            run(d, b, 8, rtt_only, 1, 1, &rtt);
            printf("adag round trip 8 B (median of %ld): %.2f us\n", rtt_only, rtt * 1e6);
        } else {
            double dt = run(d, b, size, bw_only, inflight, 1, NULL);
            printf("adag %zu B x %ld%s, in flight %u: %.0f MB/s\n", size, bw_only,
                   zero_copy ? " (zero-copy)" : "", inflight, (double)size * bw_only / dt / 1e6);
        }
        free(b);
        adag_runtime_destroy(rt);
        cleanup();
        return 0;
    }

    /* Rounds alternate ucx_perftest and adag, each row's figure is the
     * median over the rounds: this host is shared and noisy, and a slow
     * spell then hits both sides alike. */
    unsigned rounds = rounds_asked ? (unsigned)rounds_asked : quick ? 1 : 3;
    double p_lat[ROUNDS_MAX], p_bw[2][ROUNDS_MAX], a_lat[ROUNDS_MAX], a_bw[2][ROUNDS_MAX],
        a_zc[2][ROUNDS_MAX], a_zc8[ROUNDS_MAX], noerr[2] = {0, 0};
    size_t sizes[2] = {1 << 20, 16 << 20};
    long counts[2] = {quick ? 100 : 1000, quick ? 12 : 120};
    /* --inflight K: both bandwidth rows' values in flight (not the 8 of the
     * row printed for the record) */
    unsigned bw_inflight[2];
    for (int s = 0; s < 2; s++)
        bw_inflight[s] = bw_inflight_for(sizes[s], inflight_asked);

    adag_runtime_h rt;
    if (adag_runtime_create(NULL, &rt) != ADAG_OK)
        die("runtime: %s", adag_last_error());
    adag_actor_h far = actor(rt, "far", addr), far2 = actor(rt, "far2", addr);
    adag_actor_h near1 = actor(rt, "near1", NULL), near2 = actor(rt, "near2", NULL);
    unsigned char *buf = calloc(1, 16 << 20);
    if (!buf)
        die("out of memory");
    static const char *const pass[4] = {"pass", "pass", "pass", "pass"};
    static const char *const check[1] = {"check"};
    adag_dag_h d_rtt = chain(rt, &far, pass, 1, 1, 64);
    /* a DAG per value size (its slots that size), bw_inflight in flight;
     * and 1 MiB with 8 in flight, for the record */
    adag_dag_h d_bw[2], d_bw8 = chain(rt, &far, check, 1, 8, sizes[0]);
    for (int s = 0; s < 2; s++)
        d_bw[s] = chain(rt, &far, check, 1, bw_inflight[s], sizes[s]);
    run(d_rtt, buf, 8, lat_n / 10, 1, 1, NULL); /* warm-up */
    for (int s = 0; s < 2; s++)
        run(d_bw[s], buf, sizes[s], counts[s] / 10 + 1, bw_inflight[s], 1, NULL);
    run(d_bw8, buf, sizes[0], counts[0] / 10 + 1, 8, 1, NULL);
    for (unsigned r = 0; r < rounds; r++) {
        double out[2];
        if (perftest("ucp_am_lat", 8, lat_n, 0, out))
            die("ucx_perftest gave no result");
        p_lat[r] = 2 * out[0] * 1e-6; /* it reports half a round trip */
        run(d_rtt, buf, 8, lat_n, 1, 1, &a_lat[r]);
        for (int s = 0; s < 2; s++) {
            if (perftest("ucp_am_bw", sizes[s], counts[s] * 2, 0, out))
                die("ucx_perftest gave no result");
            p_bw[s][r] = out[1] * 1048576.0;
            double n = (double)sizes[s] * (double)counts[s];
            zero_copy = 1;
            a_zc[s][r] = n / run(d_bw[s], buf, sizes[s], counts[s], bw_inflight[s], 1, NULL);
            if (s == 0)
                a_zc8[r] = n / run(d_bw8, buf, sizes[s], counts[s], 8, 1, NULL);
            zero_copy = 0;
            a_bw[s][r] = n / run(d_bw[s], buf, sizes[s], counts[s], bw_inflight[s], 1, NULL);
        }
    }
    /* for the record: UCX without peer-failure handling (which adag cannot
     * do without) moves rendezvous data as one zero-copy put */
    double out[2];
    if (!perftest("ucp_am_lat", 8, lat_n, 1, out))
        noerr[0] = 2 * out[0];
    if (!perftest("ucp_am_bw", sizes[0], counts[0] * 2, 1, out))
        noerr[1] = out[1] * 1048576.0 / 1e6;
    adag_dag_destroy(d_rtt);
    for (int s = 0; s < 2; s++)
        adag_dag_destroy(d_bw[s]);
    adag_dag_destroy(d_bw8);

    adag_actor_h four[4] = {near1, far, near2, far2};
    double rate[2];
    unsigned inflight[2] = {1, 8};
    long chain_n = quick ? 500 : 5000;
    for (int k = 0; k < 2; k++) {
        adag_dag_h d = chain(rt, four, pass, 4, inflight[k], 64);
        run(d, buf, 8, chain_n / 10, inflight[k], 1, NULL);
        rate[k] = (double)chain_n / run(d, buf, 8, chain_n, inflight[k], 1, NULL);
        adag_dag_destroy(d);
    }
    adag_runtime_destroy(rt);
    free(buf);
    cleanup();

    if (verbose)
        for (unsigned r = 0; r < rounds; r++)
            fprintf(stderr,
                    "round %u: rtt %.2f/%.2f us, 1 MiB %.0f/%.0f/%.0f (8 in flight %.0f), "
                    "16 MiB %.0f/%.0f/%.0f MB/s\n",
                    r, a_lat[r] * 1e6, p_lat[r] * 1e6, a_zc[0][r] / 1e6, a_bw[0][r] / 1e6,
                    p_bw[0][r] / 1e6, a_zc8[r] / 1e6, a_zc[1][r] / 1e6, a_bw[1][r] / 1e6,
                    p_bw[1][r] / 1e6);
    /* figures: medians over the rounds; ratios: medians of each round's */
    double rtt = median(a_lat, rounds), ucx_rtt = median(p_lat, rounds);
    double r_rtt = median_ratio(a_lat, p_lat, rounds);
    double bw[2], bw_zc[2], ucx_bw[2], r_bw[2], r_zc[2];
    for (int s = 0; s < 2; s++) {
        bw[s] = median(a_bw[s], rounds);
        bw_zc[s] = median(a_zc[s], rounds);
        ucx_bw[s] = median(p_bw[s], rounds);
        r_bw[s] = median_ratio(a_bw[s], p_bw[s], rounds);
        r_zc[s] = median_ratio(a_zc[s], p_bw[s], rounds);
    }
    double zc8 = median(a_zc8, rounds), r_zc8 = median_ratio(a_zc8, p_bw[0], rounds);
    const char *seg = getenv("UCX_TCP_RX_SEG_SIZE");
    if (json) {
        printf("{\"link\": \"veth+bridge, UCX_TLS=tcp\", \"rounds\": %u, "
               "\"ucx_tcp_rx_seg_size\": \"%s\", \"bw_inflight\": [%u, %u], "
               "\"rtt_8B_us\": {\"adag\": %.2f, \"ucx_perftest\": %.2f, \"ratio\": %.3f}, "
               "\"bw_1MiB_MBps\": {\"adag\": %.1f, \"zero_copy\": %.1f, \"ucx_perftest\": %.1f, "
               "\"ratio\": %.3f, \"ratio_zero_copy\": %.3f, \"zero_copy_inflight8\": %.1f, "
               "\"ratio_zero_copy_inflight8\": %.3f}, "
               "\"bw_16MiB_MBps\": {\"adag\": %.1f, \"zero_copy\": %.1f, \"ucx_perftest\": %.1f, "
               "\"ratio\": %.3f, \"ratio_zero_copy\": %.3f}, "
               "\"ucx_perftest_without_peer_errors\": {\"rtt_8B_us\": %.2f, \"bw_1MiB_MBps\": %.1f}, "
               "\"chain4_2hosts_execs_per_s\": {\"inflight1\": %.0f, \"inflight8\": %.0f}}\n",
               rounds, seg ? seg : "", bw_inflight[0], bw_inflight[1], rtt * 1e6,
               ucx_rtt * 1e6, r_rtt,
               bw[0] / 1e6, bw_zc[0] / 1e6, ucx_bw[0] / 1e6, r_bw[0], r_zc[0], zc8 / 1e6, r_zc8,
               bw[1] / 1e6, bw_zc[1] / 1e6, ucx_bw[1] / 1e6, r_bw[1], r_zc[1], noerr[0],
               noerr[1], rate[0], rate[1]);
        return 0;
    }
    printf("two hosts (network namespaces, veth + bridge), UCX over TCP, UCX_TCP_RX_SEG_SIZE=%s;\n"
           "ucx_perftest -e (peer-failure handling, as adag) in the same run, alternating: "
           "medians of %u rounds\n(ratio: the median of each round's); bandwidth: %u values "
           "in flight at 1 MiB, %u at 16 MiB\n",
           seg ? seg : "(UCX default)", rounds, bw_inflight[0], bw_inflight[1]);
    printf("%-30s %14s %14s %8s  %s\n", "row", "adag", "ucx_perftest", "ratio", "goal");
    printf("%-30s %11.2f us %11.2f us %8.2f  <= 1.20\n", "round trip 8 B (median)", rtt * 1e6,
           ucx_rtt * 1e6, r_rtt);
    const char *names[2] = {"1 MiB", "16 MiB"};
    for (int s = 0; s < 2; s++) {
        char row[64];
        snprintf(row, sizeof(row), "bandwidth %s, zero-copy", names[s]);
        printf("%-30s %9.0f MB/s %9.0f MB/s %8.2f  >= 0.90\n", row, bw_zc[s] / 1e6,
               ucx_bw[s] / 1e6, r_zc[s]);
        snprintf(row, sizeof(row), "bandwidth %s, copy", names[s]);
        printf("%-30s %9.0f MB/s %9.0f MB/s %8.2f\n", row, bw[s] / 1e6, ucx_bw[s] / 1e6,
               r_bw[s]);
        if (s == 0)
            printf("%-30s %9.0f MB/s %9.0f MB/s %8.2f  (8 in flight)\n",
                   "bandwidth 1 MiB, zero-copy", zc8 / 1e6, ucx_bw[0] / 1e6, r_zc8);
    }
    printf("%-30s %9.0f /s   (in flight 1)\n", "4-stage chain on 2 hosts", rate[0]);
    printf("%-30s %9.0f /s   (in flight 8: %.2fx)\n", "", rate[1], rate[1] / rate[0]);
    printf("ucx_perftest without -e (one zero-copy put per value, no peer-failure handling): "
           "round trip %.2f us, 1 MiB %.0f MB/s\n",
           noerr[0], noerr[1]);
    return 0;
}

/* examples/llm/server.c: llm-server, an OpenAI-compatible HTTP server over
 * the serving engine (engine.h): POST /v1/completions (streamed or not),
 * GET /v1/models, /health, /metrics. See examples/llm/README.md, "Server".
 *
 *   llm-server [--seed N | --weights FILE] [--port 0] [--host 127.0.0.1]
 *              [--tp 1] [--pp 1] [--blocks N] [--token-budget 64]
 *              [--max-queue 256] [--model-name NAME] [--drain-timeout S]
 *              [--idle-timeout S] [--device host|emu|cuda]
 *
 * It prints "listening on http://HOST:PORT" once it answers. SIGTERM or
 * SIGINT drains: new requests get 503, the running ones (streams too) run
 * to their end, then it exits 0 (1 when the drain timed out or a step had
 * failed). */
#include "safetensors.h"
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct opts {
    const char *host, *weights, *model_name, *module, *device;
    long port, seed, tp, pp, blocks, token_budget, max_queue, drain_timeout, idle_timeout;
} opts_t;

static void usage(FILE *f) {
    fprintf(f,
            "usage: llm-server [options]\n"
            "  --seed N            weights from llm_model_init(default config, N) (default 1)\n"
            "  --weights FILE      weights (and config) from a .safetensors file instead\n"
            "  --host ADDR         numeric IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
            "  --port N            TCP port; 0 picks a free one (default 8000)\n"
            "  --tp N, --pp N      tensor x pipeline parallel actors (default 1 x 1)\n"
            "  --blocks N          KV cache blocks of 16 positions per actor (default 256)\n"
            "  --token-budget N    rows per step: 32, 64, 128 or 256 (default 64)\n"
            "  --max-queue N       waiting requests at most; more get 503 (default 256)\n"
            "  --model-name NAME   the model's name in the API (default adag-llm)\n"
            "  --drain-timeout S   at SIGTERM, wait at most S seconds for requests (default 300)\n"
            "  --idle-timeout S    close a connection idle for S seconds, between requests (default 120)\n"
            "  --device KIND       the actors' device: host (default), emu (the emulated device,\n"
            "                      emu:<stage*tp+rank>) or cuda (cuda:<rank>, libllm_shard_cuda.so)\n"
            "  --module PATH       the llm_shard actor module (default: next to this program,\n"
            "                      libllm_shard.so, or libllm_shard_cuda.so with --device cuda)\n");
}

static int num(const char *opt, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "llm-server: %s %s: an integer in [%ld, %ld]\n", opt, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse(int argc, char **argv, opts_t *o) {
    *o = (opts_t){.host = "127.0.0.1", .model_name = "adag-llm", .port = 8000, .seed = 1, .tp = 1, .pp = 1,
                  .blocks = 256, .token_budget = 64, .max_queue = 256, .drain_timeout = 300, .idle_timeout = 120};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "llm-server: %s needs a value (--help)\n", a);
            return -1;
        }
        i++;
        int rc = 0;
        if (!strcmp(a, "--seed"))
            rc = num(a, v, 0, LONG_MAX, &o->seed);
        else if (!strcmp(a, "--weights"))
            o->weights = v;
        else if (!strcmp(a, "--host"))
            o->host = v;
        else if (!strcmp(a, "--port"))
            rc = num(a, v, 0, 65535, &o->port);
        else if (!strcmp(a, "--tp"))
            rc = num(a, v, 1, LLM_SHARD_MAX_TP, &o->tp);
        else if (!strcmp(a, "--pp"))
            rc = num(a, v, 1, LLM_SHARD_MAX_STAGES, &o->pp);
        else if (!strcmp(a, "--blocks"))
            rc = num(a, v, 1, 1 << 20, &o->blocks);
        else if (!strcmp(a, "--token-budget"))
            rc = num(a, v, 1, LLM_SHARD_MAX_ROWS, &o->token_budget);
        else if (!strcmp(a, "--max-queue"))
            rc = num(a, v, 1, 1 << 20, &o->max_queue);
        else if (!strcmp(a, "--model-name"))
            o->model_name = v;
        else if (!strcmp(a, "--drain-timeout"))
            rc = num(a, v, 1, 86400, &o->drain_timeout);
        else if (!strcmp(a, "--idle-timeout"))
            rc = num(a, v, 1, 86400, &o->idle_timeout);
        else if (!strcmp(a, "--module"))
            o->module = v;
        else if (!strcmp(a, "--device"))
            o->device = v;
        else {
            fprintf(stderr, "llm-server: unknown option %s (--help)\n", a);
            return -1;
        }
        if (rc)
            return -1;
    }
    if (o->device && strcmp(o->device, "host") && strcmp(o->device, "emu") && strcmp(o->device, "cuda")) {
        fprintf(stderr, "llm-server: --device %s: host, emu or cuda\n", o->device);
        return -1;
    }
    if (o->device && !strcmp(o->device, "host"))
        o->device = NULL;
    if (!*o->model_name) {
        fprintf(stderr, "llm-server: --model-name is empty\n");
        return -1;
    }
    return 0;
}

/* The signal's only work: a byte into a pipe that main polls. */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (write(sig_pipe[1], &b, 1) < 0) {
        /* the pipe is full: a signal is pending already */
    }
    errno = saved;
}

static int install_signals(void) {
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        perror("llm-server: pipe2");
        return -1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigemptyset(&ign.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL) || sigaction(SIGPIPE, &ign, NULL)) {
        perror("llm-server: sigaction");
        return -1;
    }
    return 0;
}

/* The listening address: a numeric IPv4 or IPv6 address and a port. */
static int make_addr(const char *host, int port, struct sockaddr_storage *ss, int *v6) {
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *v6 = 0;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *v6 = 1;
        return 0;
    }
    fprintf(stderr, "llm-server: --host %s: not a numeric IPv4 or IPv6 address\n", host);
    return -1;
}

/* libmicrohttpd's messages (a client gone mid-response, ..), marked. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    char msg[1024];
    (void)cls;
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = 0;
    fprintf(stderr, "llm-server: http: %s\n", msg);
}

/* The module next to this program (build/examples/llm/libllm_shard.so,
 * or libllm_shard_cuda.so). */
static char *default_module(const char *device) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("llm-server: readlink /proc/self/exe (use --module)");
        return NULL;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    char *path = NULL;
    int cuda = device && !strcmp(device, "cuda");
    return asprintf(&path, "%s/libllm_shard%s.so", self, cuda ? "_cuda" : "") < 0 ? NULL : path;
}

int main(int argc, char **argv) {
    opts_t o;
    if (parse(argc, argv, &o))
        return 2;
    struct sockaddr_storage addr;
    int v6 = 0, rc = 1;
    if (make_addr(o.host, (int)o.port, &addr, &v6) || install_signals())
        return 2;

    llm_config_t cfg;
    llm_config_default(&cfg);
    char *weights = NULL, *module = o.module ? strdup(o.module) : default_module(o.device);
    if (!module)
        goto out_paths;
    if (o.weights) {
        llm_model_t m;
        if (!(weights = realpath(o.weights, NULL))) {
            fprintf(stderr, "llm-server: --weights %s: %s\n", o.weights, strerror(errno));
            goto out_paths;
        }
        if (strlen(weights) >= sizeof(((llm_shard_init_t *)0)->path)) {
            fprintf(stderr, "llm-server: --weights %s: the path is longer than %zu bytes\n", weights,
                    sizeof(((llm_shard_init_t *)0)->path) - 1);
            goto out_paths;
        }
        if (llm_st_load(&m, weights)) { /* checks the file; its config is the model's */
            fprintf(stderr, "llm-server: %s\n", llm_error());
            goto out_paths;
        }
        cfg = m.cfg;
        llm_model_free(&m);
    }

    if (llm_tp_check(&cfg, (int)o.tp) || o.pp > cfg.n_layers) {
        fprintf(stderr, "llm-server: --tp %ld --pp %ld: %s\n", o.tp, o.pp,
                o.pp > cfg.n_layers ? "pp must be at most the model's layers" : llm_error());
        goto out_paths;
    }

    srv_t s = {.model = o.model_name, .idle_timeout_s = (unsigned)o.idle_timeout};
    pthread_mutex_init(&s.live_mu, NULL);
    pthread_cond_init(&s.live_cv, NULL);
    srv_metrics_init(&s.metrics);
    adag_runtime_h rt = NULL;
    if (adag_runtime_create(NULL, &rt) != ADAG_OK) {
        fprintf(stderr, "llm-server: adag_runtime_create: %s\n", adag_last_error());
        goto out_srv;
    }
    llm_engine_params_t ep = {
        .serve = {.module = module, .placement = ADAG_PLACEMENT_PROCESS, .cfg = cfg, .seed = (uint64_t)o.seed,
                  .path = weights, .tp = (int)o.tp, .pp = (int)o.pp, .n_blocks = (int)o.blocks, .name = "llm",
                  .device = o.device},
        .token_budget = (int)o.token_budget,
        .max_queue = (int)o.max_queue,
        .on_event = srv_on_event,
        .user = &s,
    };
    if (llm_engine_create(rt, &ep, &s.engine)) {
        fprintf(stderr, "llm-server: %s\n", llm_error());
        goto out_rt;
    }
    s.max_len = llm_engine_max_len(s.engine);

    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0), 0,
        NULL, NULL, srv_handle, &s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, srv_completed, &s, MHD_OPTION_CONNECTION_TIMEOUT,
        s.idle_timeout_s, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "llm-server: cannot listen on %s port %ld (libmicrohttpd's MHD_start_daemon failed)\n", o.host,
                o.port);
        goto out_engine;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on http://%s%s%s:%u\n", v6 ? "[" : "", o.host, v6 ? "]" : "", di ? di->port : (unsigned)o.port);
    printf("model %s: d_model %d, %d layers, tp %ld x pp %ld on %s, %ld KV blocks per actor, %d positions per "
           "request\n",
           o.model_name, cfg.d_model, cfg.n_layers, o.tp, o.pp, o.device ? o.device : "host", o.blocks, s.max_len);
    fflush(stdout);

    unsigned char sig = 0;
    struct pollfd pf = {.fd = sig_pipe[0], .events = POLLIN};
    while (poll(&pf, 1, -1) < 0 && errno == EINTR)
        ;
    if (read(sig_pipe[0], &sig, 1) != 1)
        sig = 0;
    atomic_store_explicit(&s.draining, 1, memory_order_relaxed);
    fprintf(stderr, "llm-server: %s: draining (new requests get 503)\n", strsignal(sig));
    double t0 = srv_now();
    int drained = llm_engine_drain(s.engine, (int)o.drain_timeout * 1000) == 0;
    /* the requests ended; their connections write what is left */
    int left_ms = (int)(o.drain_timeout * 1000 - (srv_now() - t0) * 1000);
    if (drained && srv_wait_idle(&s, left_ms > 1000 ? left_ms : 1000) != 0)
        drained = 0;
    if (!drained)
        fprintf(stderr, "llm-server: the drain did not finish within %ld s; ending the rest\n", o.drain_timeout);
    atomic_store_explicit(&s.stopping, 1, memory_order_relaxed);
    MHD_stop_daemon(d); /* joins the connections' threads */
    fprintf(stderr, "llm-server: drained in %.2f s\n", srv_now() - t0);
    llm_engine_metrics_t em;
    llm_engine_metrics(s.engine, &em);
    if (em.failed)
        fprintf(stderr, "llm-server: exiting with status 1: a step had failed (its requests ended with an error)\n");
    rc = drained && !em.failed ? 0 : 1;
out_engine:
    llm_engine_destroy(s.engine); /* requests left end CANCELLED: their last references */
out_rt:
    if (rt && adag_runtime_destroy(rt) != ADAG_OK) {
        fprintf(stderr, "llm-server: adag_runtime_destroy: %s\n", adag_last_error());
        rc = 1;
    }
out_srv:
    srv_metrics_destroy(&s.metrics);
    pthread_cond_destroy(&s.live_cv);
    pthread_mutex_destroy(&s.live_mu);
out_paths:
    free(weights);
    free(module);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    return rc;
}

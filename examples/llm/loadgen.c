/* examples/llm/loadgen.c: llm-loadgen, a load generator for llm-server
 * (or any OpenAI-compatible completions server on this machine): streaming
 * requests (POST /v1/completions, "stream": true) at Poisson arrivals, at
 * most --concurrency in flight, until --requests were sent or --duration
 * passed; then requests/s, tokens/s, time to first token and inter-token
 * latency (p50, p99) and the errors. One thread drives every request with
 * libcurl's multi interface. Loopback only: it refuses any other host.
 * `llm-loadgen --help` lists the options. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct opts {
    const char *url, *model, *prompt;
    long concurrency, requests, max_tokens, seed;
    double rate, duration;
} opts_t;

typedef struct dvec {
    double *v;
    size_t n, cap;
} dvec_t;

typedef struct client {
    CURL *h;
    int busy;
    double t_sent, t_last;
    int tokens, done, error_event, finished;
    char *buf; /* SSE bytes not yet split into events */
    size_t len, cap;
    struct curl_slist *hdrs;
} client_t;

typedef struct run {
    opts_t o;
    char endpoint[1024], body[8192];
    dvec_t ttft, itl, arrivals; /* arrivals: when request i arrived (Poisson) */
    long sent, ok, errors, tokens, delayed;
    char first_error[512];
    uint64_t rng;
} run_t;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: llm-loadgen [options]\n"
            "  --url URL           the server (default http://127.0.0.1:8000); loopback hosts only\n"
            "                      (127.0.0.0/8, ::1, localhost); requests go to URL/v1/completions\n"
            "  --model NAME        the model field (default adag-llm)\n"
            "  --concurrency N     requests in flight at most (default 8)\n"
            "  --rate R            Poisson arrivals per second; 0: each client sends its next request\n"
            "                      as soon as its last ended (default 0)\n"
            "  --requests N        requests to send (default 100)\n"
            "  --duration S        no new request after S seconds (default 60); the ones in flight\n"
            "                      then get S more seconds before they count as errors\n"
            "  --prompt TEXT       the prompt (default \"Hello from llm-loadgen\")\n"
            "  --max-tokens N      tokens per request (default 32)\n"
            "  --seed N            seed of the arrival times (default 1)\n"
            "Prints: requests sent/ok/errors, the time, requests/s and tokens/s, time to first\n"
            "token and inter-token latency p50 and p99 (ms). Exit status 0 when every request\n"
            "succeeded, 1 otherwise, 2 on bad options.\n");
}

static int num(const char *opt, const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "llm-loadgen: %s %s: a number in [%g, %g]\n", opt, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse(int argc, char **argv, opts_t *o) {
    *o = (opts_t){.url = "http://127.0.0.1:8000", .model = "adag-llm", .prompt = "Hello from llm-loadgen",
                  .concurrency = 8, .requests = 100, .max_tokens = 32, .seed = 1, .duration = 60};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x = 0;
        int rc = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "llm-loadgen: %s needs a value (--help)\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--url"))
            o->url = v;
        else if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--prompt"))
            o->prompt = v;
        else if (!strcmp(a, "--rate"))
            rc = num(a, v, 0, 1e6, &o->rate);
        else if (!strcmp(a, "--duration"))
            rc = num(a, v, 0.001, 86400, &o->duration);
        else if (!strcmp(a, "--concurrency")) {
            rc = num(a, v, 1, 1024, &x);
            o->concurrency = (long)x;
        } else if (!strcmp(a, "--requests")) {
            rc = num(a, v, 1, 1e9, &x);
            o->requests = (long)x;
        } else if (!strcmp(a, "--max-tokens")) {
            rc = num(a, v, 1, 1 << 20, &x);
            o->max_tokens = (long)x;
        } else if (!strcmp(a, "--seed")) {
            rc = num(a, v, 0, 1e18, &x);
            o->seed = (long)x;
        } else {
            fprintf(stderr, "llm-loadgen: unknown option %s (--help)\n", a);
            return -1;
        }
        if (rc)
            return -1;
    }
    return 0;
}

/* The URL's host must be this machine's loopback: a load generator pointed
 * elsewhere is a denial of service. */
static int check_loopback(const char *url) {
    CURLU *u = curl_url();
    char *host = NULL, *scheme = NULL;
    int ok = 0;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK && curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK) {
        struct in_addr a4;
        struct in6_addr a6;
        char h[256];
        snprintf(h, sizeof h, "%s", host);
        size_t n = strlen(h);
        if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
            memmove(h, h + 1, n - 2);
            h[n - 2] = 0;
        }
        if (strcmp(scheme, "http") != 0)
            fprintf(stderr, "llm-loadgen: --url %s: only http:// (the server listens on loopback)\n", url);
        else if (!strcmp(h, "localhost") || (inet_pton(AF_INET, h, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127) ||
                 (inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6)))
            ok = 1;
        else
            fprintf(stderr, "llm-loadgen: --url %s: host %s is not a loopback address (127.0.0.0/8, ::1, localhost); "
                            "this tool only loads this machine\n", url, host);
    } else {
        fprintf(stderr, "llm-loadgen: --url %s: not a URL\n", url);
    }
    curl_free(host);
    curl_free(scheme);
    curl_url_cleanup(u);
    return ok ? 0 : -1;
}

/* src as the inside of a JSON string into dst[cap]; -1 if it does not fit. */
static int json_escape(const char *src, char *dst, size_t cap) {
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
        if (k + 8 >= cap)
            return -1;
        if (*p == '"' || *p == '\\')
            k += (size_t)snprintf(dst + k, cap - k, "\\%c", *p);
        else if (*p < 0x20)
            k += (size_t)snprintf(dst + k, cap - k, "\\u%04x", *p);
        else
            dst[k++] = (char)*p;
    }
    dst[k] = 0;
    return 0;
}

static int dvec_push(dvec_t *d, double x) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 1024;
        double *v = realloc(d->v, cap * sizeof *v);
        if (!v)
            return -1;
        d->v = v;
        d->cap = cap;
    }
    d->v[d->n++] = x;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of d (sorted here), in ms; NAN when empty. */
static double pct_ms(dvec_t *d, double p) {
    if (!d->n)
        return NAN;
    qsort(d->v, d->n, sizeof *d->v, cmp_double);
    size_t k = (size_t)ceil(p / 100.0 * (double)d->n);
    return d->v[k ? k - 1 : 0] * 1e3;
}

/* splitmix64, then an exponential gap of mean 1/rate. */
static double exp_gap(run_t *r) {
    uint64_t z = (r->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double u = ((double)(z >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
    return -log(u) / r->o.rate;
}

static void fail(run_t *r, const char *fmt, const char *what) {
    if (!r->first_error[0])
        snprintf(r->first_error, sizeof r->first_error, fmt, what);
}

/* One SSE event's data: a token chunk (its token_ids counted), an error, or
 * [DONE]. */
static void on_event(run_t *r, client_t *c, const char *data, double t) {
    if (!strcmp(data, "[DONE]")) {
        c->done = 1;
        return;
    }
    if (strstr(data, "\"error\"")) {
        c->error_event = 1;
        fail(r, "an error event: %.400s", data);
        return;
    }
    if (strstr(data, "\"finish_reason\":\"") || strstr(data, "\"finish_reason\": \""))
        c->finished = 1;
    const char *ids = strstr(data, "\"token_ids\":");
    if (!ids)
        return;
    ids = strchr(ids, '[');
    int n = 0;
    for (const char *p = ids ? ids + 1 : ""; *p && *p != ']'; p++)
        if (*p >= '0' && *p <= '9' && (p[-1] < '0' || p[-1] > '9'))
            n++;
    if (!n)
        return;
    if (c->tokens == 0)
        dvec_push(&r->ttft, t - c->t_sent);
    else
        dvec_push(&r->itl, t - c->t_last);
    c->t_last = t;
    c->tokens += n;
}

typedef struct wctx {
    run_t *r;
    client_t *c;
} wctx_t;

static size_t on_data(char *p, size_t size, size_t nmemb, void *user) {
    wctx_t *w = user;
    client_t *c = w->c;
    size_t n = size * nmemb;
    double t = now_s();
    if (c->len + n + 1 > c->cap) {
        size_t cap = (c->len + n + 1) * 2;
        char *b = realloc(c->buf, cap);
        if (!b)
            return 0;
        c->buf = b;
        c->cap = cap;
    }
    memcpy(c->buf + c->len, p, n);
    c->len += n;
    c->buf[c->len] = 0;
    char *start = c->buf, *end;
    while ((end = strstr(start, "\n\n"))) {
        *end = 0;
        for (char *line = start; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            if (!strncmp(line, "data: ", 6))
                on_event(w->r, c, line + 6, t);
            line = nl ? nl + 1 : NULL;
        }
        start = end + 2;
    }
    c->len -= (size_t)(start - c->buf);
    memmove(c->buf, start, c->len);
    return n;
}

static int start(run_t *r, CURLM *m, client_t *c, wctx_t *w) {
    if (!c->h && !(c->h = curl_easy_init()))
        return -1;
    curl_easy_reset(c->h);
    c->busy = 1;
    c->tokens = c->done = c->error_event = c->finished = 0;
    c->len = 0;
    w->r = r;
    w->c = c;
    curl_easy_setopt(c->h, CURLOPT_URL, r->endpoint);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdrs);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(c->h, CURLOPT_PRIVATE, c);
    curl_easy_setopt(c->h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, (long)(2 * r->o.duration * 1000));
    c->t_sent = now_s();
    r->sent++;
    return curl_multi_add_handle(m, c->h) == CURLM_OK ? 0 : -1;
}

static void finish(run_t *r, CURLM *m, CURLMsg *msg) {
    client_t *c = NULL;
    long code = 0;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
    curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
    curl_multi_remove_handle(m, msg->easy_handle);
    c->busy = 0;
    char why[256];
    if (msg->data.result != CURLE_OK) {
        snprintf(why, sizeof why, "curl: %s", curl_easy_strerror(msg->data.result));
        fail(r, "%s", why);
    } else if (code != 200) {
        snprintf(why, sizeof why, "HTTP %ld: %.200s", code, c->len ? c->buf : "");
        fail(r, "%s", why);
    } else if (c->error_event) {
        /* said in on_event */
    } else if (!c->done || !c->finished) {
        fail(r, "%s", "a stream ended without its finish_reason and [DONE]");
    } else {
        r->ok++;
        r->tokens += c->tokens;
        return;
    }
    r->errors++;
}

int main(int argc, char **argv) {
    run_t r = {0};
    if (parse(argc, argv, &r.o))
        return 2;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || check_loopback(r.o.url))
        return 2;
    r.rng = (uint64_t)r.o.seed;
    const char *u = r.o.url;
    size_t ul = strlen(u);
    snprintf(r.endpoint, sizeof r.endpoint, "%.*s/v1/completions", (int)(ul && u[ul - 1] == '/' ? ul - 1 : ul), u);
    char model[512], prompt[4096];
    if (json_escape(r.o.model, model, sizeof model) || json_escape(r.o.prompt, prompt, sizeof prompt)) {
        fprintf(stderr, "llm-loadgen: --model or --prompt too long\n");
        return 2;
    }
    snprintf(r.body, sizeof r.body, "{\"model\":\"%s\",\"prompt\":\"%s\",\"max_tokens\":%ld,\"stream\":true}",
             model, prompt, r.o.max_tokens);

    CURLM *m = curl_multi_init();
    client_t *cl = calloc((size_t)r.o.concurrency, sizeof *cl);
    wctx_t *wc = calloc((size_t)r.o.concurrency, sizeof *wc);
    if (!m || !cl || !wc) {
        fprintf(stderr, "llm-loadgen: out of memory\n");
        return 1;
    }
    for (long i = 0; i < r.o.concurrency; i++)
        cl[i].hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    printf("llm-loadgen: %s, model %s, %ld clients, %s%.3g, %ld requests of %ld tokens, limit %.3g s\n", r.endpoint,
           r.o.model, r.o.concurrency, r.o.rate > 0 ? "Poisson arrivals/s " : "closed loop, rate ",
           r.o.rate, r.o.requests, r.o.max_tokens, r.o.duration);
    double t0 = now_s(), next_arrival = t0, stop_at = t0 + r.o.duration, hard_stop = t0 + 2 * r.o.duration;
    long arrived = 0; /* requests whose arrival time passed (sent or waiting for a client) */
    int running = 0;
    for (;;) {
        double t = now_s();
        int issuing = t < stop_at && r.sent < r.o.requests;
        if (issuing && r.o.rate > 0)
            while (arrived < r.o.requests && next_arrival <= t) {
                arrived++;
                if (dvec_push(&r.arrivals, next_arrival)) {
                    fprintf(stderr, "llm-loadgen: out of memory\n");
                    return 1;
                }
                next_arrival += exp_gap(&r);
            }
        else if (issuing)
            arrived = r.o.requests; /* closed loop: every idle client sends */
        for (long i = 0; issuing && i < r.o.concurrency && r.sent < arrived; i++) {
            if (cl[i].busy)
                continue;
            if (r.o.rate > 0 && t - r.arrivals.v[r.sent] > 0.001)
                r.delayed++; /* it waited for a client */
            if (start(&r, m, &cl[i], &wc[i])) {
                fprintf(stderr, "llm-loadgen: cannot start a request\n");
                return 1;
            }
        }
        int idle = 1;
        for (long i = 0; i < r.o.concurrency; i++)
            idle &= !cl[i].busy;
        if (idle && (!issuing || r.sent >= r.o.requests))
            break;
        if (t >= hard_stop)
            break;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)))
            if (msg->msg == CURLMSG_DONE)
                finish(&r, m, msg);
        int wait_ms = 100;
        if (issuing && r.o.rate > 0 && arrived < r.o.requests) {
            double dt = (next_arrival - now_s()) * 1e3;
            wait_ms = dt < 0 ? 0 : dt < 100 ? (int)dt : 100;
        }
        curl_multi_poll(m, NULL, 0, wait_ms, NULL);
    }
    double elapsed = now_s() - t0;
    for (long i = 0; i < r.o.concurrency; i++) {
        if (cl[i].busy) { /* past the hard stop */
            curl_multi_remove_handle(m, cl[i].h);
            r.errors++;
            fail(&r, "%s", "a request still running past twice the time limit");
        }
        curl_easy_cleanup(cl[i].h);
        curl_slist_free_all(cl[i].hdrs);
        free(cl[i].buf);
    }
    printf("requests: %ld sent, %ld ok, %ld errors\n", r.sent, r.ok, r.errors);
    printf("time: %.3f s\n", elapsed);
    printf("throughput: %.2f requests/s, %.1f tokens/s (%ld tokens)\n", (double)r.ok / elapsed,
           (double)r.tokens / elapsed, r.tokens);
    printf("ttft: p50 %.3f ms, p99 %.3f ms (%zu requests)\n", pct_ms(&r.ttft, 50), pct_ms(&r.ttft, 99), r.ttft.n);
    printf("itl: p50 %.3f ms, p99 %.3f ms (%zu gaps)\n", pct_ms(&r.itl, 50), pct_ms(&r.itl, 99), r.itl.n);
    if (r.o.rate > 0)
        printf("arrivals that waited for a free client (> 1 ms): %ld\n", r.delayed);
    if (r.errors)
        printf("first error: %s\n", r.first_error);
    free(r.ttft.v);
    free(r.itl.v);
    free(r.arrivals.v);
    free(cl);
    free(wc);
    curl_multi_cleanup(m);
    curl_global_cleanup();
    return r.errors || r.ok < r.sent ? 1 : 0;
}

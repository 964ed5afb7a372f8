/* examples/llm/server.h: the parts of llm-server, the OpenAI-compatible
 * HTTP front of the serving engine (engine.h), shared by its files:
 *
 *   server.c          main: options, the runtime and the engine, the HTTP
 *                     daemon, SIGTERM/SIGINT and the drain
 *   server_http.c     the endpoints, the request's life (engine events to
 *                     the connection), streaming
 *   server_api.c      the JSON of the OpenAI completions API: the request
 *                     parsed and checked, responses, stream chunks, errors
 *   server_metrics.c  the figures and GET /metrics (Prometheus text)
 *
 * Tokens are bytes; a token's text is the byte as one Unicode code point
 * (latin-1: 0x41 is "A", 0xf8 is "ø", written in UTF-8 in the JSON), and
 * every choice carries "token_ids" too. A prompt string's UTF-8 bytes are
 * its tokens. */
#ifndef LLM_SERVER_H
#define LLM_SERVER_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"

/* ---- server_api.c ---- */

/* A POST /v1/completions body, checked. */
typedef struct srv_completion {
    uint8_t *prompt; /* malloc'ed; srv_completion_free */
    int n_prompt, max_tokens;
    int stream, include_usage;
} srv_completion_t;

/* An answer that is not a success: HTTP status, OpenAI error type, the
 * request field at fault (NULL: none) and what is wrong. */
typedef struct srv_error {
    int status;
    const char *type;  /* "invalid_request_error", "server_error", .. */
    const char *param; /* "prompt", "max_tokens", .., or NULL */
    char message[512];
} srv_error_t;

/* Fills err (returns -1). */
int srv_err(srv_error_t *err, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Parses and checks body for a model named `model` whose requests may use
 * max_len positions (prompt + max_tokens - 1): 0, or -1 with err naming the
 * field. */
int srv_parse_completion(const char *body, size_t len, const char *model, int max_len, srv_completion_t *c,
                         srv_error_t *err);
void srv_completion_free(srv_completion_t *c);

/* {"error": {"message", "type", "param", "code": null}}, malloc'ed. */
char *srv_error_json(const srv_error_t *err);

/* The text of tokens: each byte as one code point, UTF-8 encoded, into
 * out (room for 2 * n bytes); returns its length. */
size_t srv_token_text(const int *tokens, int n, char *out);

/* What a completion's JSON says about it. */
typedef struct srv_choice {
    uint64_t id;
    long long created;
    const char *model;
    const int *tokens;
    int n_tokens;
    const char *finish; /* "length", .. or NULL (a stream's token chunk) */
    int n_prompt;       /* for usage */
} srv_choice_t;

/* The text_completion object: with usage (the whole answer) or without
 * (a stream chunk). malloc'ed compact JSON, NULL when out of memory. */
char *srv_completion_json(const srv_choice_t *c, int with_usage);
/* A stream's last chunk for stream_options.include_usage: choices [],
 * usage set. */
char *srv_usage_chunk_json(const srv_choice_t *c);
/* GET /v1/models: the list of the one model. */
char *srv_models_json(const char *model, int max_len);

/* ---- server_metrics.c ---- */

#define SRV_HIST_MAX 16

typedef struct srv_hist {
    int n;             /* buckets (le bounds), +Inf not counted */
    const double *le;
    uint64_t bucket[SRV_HIST_MAX]; /* not cumulative: bucket[i] holds le[i-1] < v <= le[i] */
    uint64_t count;
    double sum;
} srv_hist_t;

#define SRV_MAX_CODES 16

typedef struct srv_figures {
    srv_hist_t ttft, itl;
    int codes[SRV_MAX_CODES]; /* HTTP statuses answered, 0: free */
    uint64_t responses[SRV_MAX_CODES];
    uint64_t rejected_draining, rejected_full, invalid, disconnected;
} srv_figures_t;

typedef struct srv_metrics {
    pthread_mutex_t mu; /* guards fig */
    srv_figures_t fig;
} srv_metrics_t;

/* fig's counter += 1 (under mu): srv_metrics_count(m, rejected_full). */
#define srv_metrics_count(m, field)                                                                                \
    do {                                                                                                           \
        pthread_mutex_lock(&(m)->mu);                                                                              \
        (m)->fig.field++;                                                                                          \
        pthread_mutex_unlock(&(m)->mu);                                                                            \
    } while (0)

void srv_metrics_init(srv_metrics_t *m);
void srv_metrics_destroy(srv_metrics_t *m);
/* A time to first token / between two tokens (seconds). */
void srv_metrics_ttft(srv_metrics_t *m, double s);
void srv_metrics_itl(srv_metrics_t *m, double s);
/* An HTTP response with that status. */
void srv_metrics_response(srv_metrics_t *m, int status);

/* ---- server_http.c ---- */

typedef struct srv {
    llm_engine_t *engine;
    const char *model; /* --model-name */
    int max_len;       /* llm_engine_max_len */
    /* set once by the signal's handling thread, read by the connections'
     * threads; relaxed is enough: a request that reads 0 just before the
     * store is answered by the engine (LLM_ENGINE_EDRAINING) or drained */
    atomic_int draining;
    atomic_int stopping; /* streams end now (the drain timed out) */
    pthread_mutex_t live_mu;
    pthread_cond_t live_cv;
    int live; /* requests not yet freed (under live_mu) */
    srv_metrics_t metrics;
} srv_t;

/* The engine's event callback (llm_engine_params_t.on_event, user = srv). */
void srv_on_event(void *user, void *req_user, uint64_t id, int token, llm_finish_t finish, const char *message);
/* MHD's access handler and its completion notice (cls = srv). */
enum MHD_Result srv_handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                           const char *version, const char *upload_data, size_t *upload_size, void **con_cls);
void srv_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe);
/* Waits until no request is left (their connections done), at most
 * timeout_ms; 0 or -1. */
int srv_wait_idle(srv_t *s, int timeout_ms);

/* GET /metrics: the text, malloc'ed (length in *len), NULL when out of
 * memory. Reads the engine's figures and its DAGs' stats. */
char *srv_metrics_text(srv_t *s, size_t *len);

double srv_now(void);

#endif

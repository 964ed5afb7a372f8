/* examples/llm/server_http.c: llm-server's endpoints (server.h) on
 * libmicrohttpd, one thread per connection.
 *
 * A completion's life: the connection's thread parses the body, creates a
 * request (req_t) and submits it to the engine; the engine's thread appends
 * each token to the request (its callback takes the request's lock for a
 * copy and a signal, nothing more: it never waits for the client); the
 * connection's thread waits on the request's condvar, and writes what came
 * (a stream: one SSE event per token, from MHD's content reader; else one
 * JSON object at the end).
 *
 * Two owners, one free: a request holds two references, the engine's
 * (dropped by its end event, which comes exactly once after a successful
 * submit) and the connection's (dropped when the connection is done with
 * it: a stream's response freed, or the non-stream answer written). The
 * last to drop frees it. A connection that goes before the end event
 * cancels the request (llm_engine_cancel: its blocks are freed; a no-op when
 * it already ended).
 *
 * A client that goes away is noticed while waiting (the socket polled for
 * a hang-up every WAIT_SLICE_MS) and at the next write. */
#include "server.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_SLICE_MS 50
#define MAX_BODY (1u << 20)


typedef struct req {
    srv_t *srv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu: */
    int refs;
    int *tokens; /* [max_tokens], n_tokens of them filled by the engine */
    int n_tokens;
    int ended;
    llm_finish_t finish;
    char *message; /* LLM_FINISH_ERROR's */
    /* the engine's thread only (after submit): */
    double t_submit, t_last;
    /* the connection's thread only: */
    uint64_t id;
    struct MHD_Connection *conn;
    srv_choice_t choice; /* id, created, model, n_prompt */
    int max_tokens, stream, include_usage;
    int sent;        /* tokens written */
    int stream_done; /* the last chunk and [DONE] are formatted */
    char *out;       /* formatted, not yet handed to MHD: out[off..len) */
    size_t off, len, cap;
} req_t;

/* What one connection collects of its request: the POST body. */
typedef struct conn_state {
    char *body;
    size_t len, cap;
    int too_big;
    req_t *req; /* a non-stream request while its connection owns it */
} conn_state_t;

double srv_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static req_t *req_new(srv_t *s, const srv_completion_t *c) {
    req_t *r = calloc(1, sizeof *r);
    if (!r || !(r->tokens = calloc((size_t)c->max_tokens, sizeof *r->tokens))) {
        free(r);
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->srv = s;
    r->refs = 2;
    r->max_tokens = c->max_tokens;
    r->stream = c->stream;
    r->include_usage = c->include_usage;
    r->choice.model = s->model;
    r->choice.created = (long long)time(NULL);
    r->choice.n_prompt = c->n_prompt;
    pthread_mutex_lock(&s->live_mu);
    s->live++;
    pthread_mutex_unlock(&s->live_mu);
    return r;
}

static void req_unref(req_t *r) {
    pthread_mutex_lock(&r->mu);
    int last = --r->refs == 0;
    pthread_mutex_unlock(&r->mu);
    if (!last)
        return;
    srv_t *s = r->srv;
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->tokens);
    free(r->message);
    free(r->out);
    free(r);
    pthread_mutex_lock(&s->live_mu);
    if (--s->live == 0)
        pthread_cond_broadcast(&s->live_cv);
    pthread_mutex_unlock(&s->live_mu);
}

/* The connection is done with r: cancels it if it has not ended (the
 * client went away first), drops its reference. */
static void req_release(req_t *r) {
    pthread_mutex_lock(&r->mu);
    int ended = r->ended;
    pthread_mutex_unlock(&r->mu);
    if (!ended) {
        srv_metrics_count(&r->srv->metrics, disconnected);
        llm_engine_cancel(r->srv->engine, r->id);
    }
    req_unref(r);
}

void srv_on_event(void *user, void *req_user, uint64_t id, int token, llm_finish_t finish, const char *message) {
    srv_t *s = user;
    req_t *r = req_user;
    double t = srv_now();
    (void)id;
    if (token >= 0) {
        /* t_submit/t_last: written before llm_engine_submit (whose lock
         * orders it before this thread's reads) or on this thread */
        if (r->t_last == 0)
            srv_metrics_ttft(&s->metrics, t - r->t_submit);
        else
            srv_metrics_itl(&s->metrics, t - r->t_last);
        r->t_last = t;
        pthread_mutex_lock(&r->mu);
        if (r->n_tokens < r->max_tokens)
            r->tokens[r->n_tokens++] = token;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
        return;
    }
    pthread_mutex_lock(&r->mu);
    r->ended = 1;
    r->finish = finish;
    if (message)
        r->message = strdup(message);
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    req_unref(r);
}

/* Whether the client hung up (or the socket failed): a poll for
 * POLLRDHUP/POLLHUP/POLLERR, not for data (a pipelined request is not a
 * hang-up). */
static int peer_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Waits (r->mu held) until r has tokens past `seen` or ended; 0, or -1 when
 * the client went away or the server stops. */
static int wait_progress(req_t *r, int seen) {
    while (r->n_tokens == seen && !r->ended) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += WAIT_SLICE_MS * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->cv, &r->mu, &dl);
        if (r->n_tokens != seen || r->ended)
            break;
        if (atomic_load_explicit(&r->srv->stopping, memory_order_relaxed) || peer_gone(r->conn))
            return -1;
    }
    return 0;
}

/* ---- answers ---- */

static enum MHD_Result respond(srv_t *s, struct MHD_Connection *conn, int status, const char *ctype, char *body,
                               size_t len) {
    struct MHD_Response *resp = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, POST");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    srv_metrics_response(&s->metrics, status);
    return rc;
}

static enum MHD_Result respond_json(srv_t *s, struct MHD_Connection *conn, int status, char *json) {
    return respond(s, conn, status, "application/json", json, json ? strlen(json) : 0);
}

static enum MHD_Result respond_error(srv_t *s, struct MHD_Connection *conn, const srv_error_t *err) {
    return respond_json(s, conn, err->status, srv_error_json(err));
}

/* ---- streaming ---- */

static int out_append(req_t *r, const char *a, const char *b) {
    size_t n = strlen(a) + (b ? strlen(b) : 0) + 2;
    if (r->len + n + 1 > r->cap) {
        size_t cap = (r->len + n + 1) * 2;
        char *p = realloc(r->out, cap);
        if (!p)
            return -1;
        r->out = p;
        r->cap = cap;
    }
    r->len += (size_t)sprintf(r->out + r->len, "%s%s\n\n", a, b ? b : "");
    return 0;
}

static int out_event(req_t *r, char *json) {
    int rc = json ? out_append(r, "data: ", json) : -1;
    free(json);
    return rc;
}

/* Formats the events of tokens [sent, n) and, once ended, the end. */
static int format_events(req_t *r, const int *tokens, int n, int ended, llm_finish_t finish, const char *message) {
    srv_choice_t c = r->choice;
    c.finish = NULL;
    for (; r->sent < n; r->sent++) {
        c.tokens = &tokens[r->sent];
        c.n_tokens = 1;
        if (out_event(r, srv_completion_json(&c, 0)))
            return -1;
    }
    if (!ended)
        return 0;
    c.tokens = tokens;
    c.n_tokens = 0;
    if (finish == LLM_FINISH_ERROR) {
        srv_error_t err;
        srv_err(&err, 500, "server_error", NULL, "generation failed: %s", message ? message : "?");
        if (out_event(r, srv_error_json(&err)))
            return -1;
    } else {
        c.finish = llm_finish_name(finish);
        if (out_event(r, srv_completion_json(&c, 0)))
            return -1;
    }
    if (r->include_usage) {
        c.n_tokens = n;
        if (out_event(r, srv_usage_chunk_json(&c)))
            return -1;
    }
    r->stream_done = 1;
    return out_append(r, "data: [DONE]", NULL);
}

/* MHD's content reader of a stream: blocks (on the connection's own
 * thread) until there is something to send. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    req_t *r = cls;
    (void)pos;
    if (r->off == r->len) {
        r->off = r->len = 0;
        if (r->stream_done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&r->mu);
        if (wait_progress(r, r->sent)) {
            pthread_mutex_unlock(&r->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR; /* the response's free cancels it */
        }
        /* tokens[0..n) are written once and never change: read them
         * unlocked after copying n */
        int n = r->n_tokens, ended = r->ended;
        llm_finish_t finish = r->finish;
        const char *message = r->message;
        pthread_mutex_unlock(&r->mu);
        if (format_events(r, r->tokens, n, ended, finish, message))
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = r->len - r->off < max ? r->len - r->off : max;
    memcpy(buf, r->out + r->off, n);
    r->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) { req_release(cls); }

/* ---- POST /v1/completions ---- */

static enum MHD_Result non_stream_answer(srv_t *s, struct MHD_Connection *conn, req_t *r) {
    pthread_mutex_lock(&r->mu);
    int gone = 0;
    while (!r->ended && !gone)
        gone = wait_progress(r, r->n_tokens);
    int n = r->n_tokens;
    llm_finish_t finish = r->finish;
    pthread_mutex_unlock(&r->mu);
    if (gone)
        return MHD_NO; /* closes the connection; srv_completed releases r */
    if (finish == LLM_FINISH_ERROR) {
        srv_error_t err;
        srv_err(&err, 500, "server_error", NULL, "generation failed: %s", r->message ? r->message : "?");
        return respond_error(s, conn, &err);
    }
    srv_choice_t c = r->choice;
    c.tokens = r->tokens;
    c.n_tokens = n;
    c.finish = llm_finish_name(finish);
    return respond_json(s, conn, 200, srv_completion_json(&c, 1));
}

static enum MHD_Result completions(srv_t *s, struct MHD_Connection *conn, conn_state_t *cs) {
    srv_error_t err;
    srv_completion_t c;
    if (atomic_load_explicit(&s->draining, memory_order_relaxed)) {
        srv_metrics_count(&s->metrics, rejected_draining);
        srv_err(&err, 503, "server_error", NULL, "the server is shutting down; it takes no new request");
        return respond_error(s, conn, &err);
    }
    if (cs->too_big) {
        srv_err(&err, 413, "invalid_request_error", NULL, "the body is larger than %u bytes", MAX_BODY);
        return respond_error(s, conn, &err);
    }
    if (srv_parse_completion(cs->body ? cs->body : "", cs->len, s->model, s->max_len, &c, &err)) {
        srv_metrics_count(&s->metrics, invalid);
        return respond_error(s, conn, &err);
    }
    req_t *r = req_new(s, &c);
    if (!r) {
        srv_completion_free(&c);
        srv_err(&err, 500, "server_error", NULL, "out of memory for a request of %d tokens", c.max_tokens);
        return respond_error(s, conn, &err);
    }
    r->conn = conn;
    r->t_submit = srv_now();
    int rc = llm_engine_submit(s->engine, c.prompt, c.n_prompt, c.max_tokens, r, &r->id);
    srv_completion_free(&c);
    if (rc) {
        r->refs = 1; /* no end event comes */
        if (rc == LLM_ENGINE_EFULL)
            srv_err(&err, 503, "server_error", NULL, "the server is overloaded: its queue is full; retry later");
        else if (rc == LLM_ENGINE_EDRAINING && atomic_load_explicit(&s->draining, memory_order_relaxed))
            srv_err(&err, 503, "server_error", NULL, "the server is shutting down; it takes no new request");
        else if (rc == LLM_ENGINE_EDRAINING)
            srv_err(&err, 503, "server_error", NULL,
                    "the engine stopped after a step failed (GET /health says \"failed\"); restart the server");
        else
            srv_err(&err, 400, "invalid_request_error", NULL, "the engine refused the request: %s", llm_error());
        if (rc == LLM_ENGINE_EFULL)
            srv_metrics_count(&s->metrics, rejected_full);
        else if (rc == LLM_ENGINE_EDRAINING)
            srv_metrics_count(&s->metrics, rejected_draining);
        req_unref(r);
        return respond_error(s, conn, &err);
    }
    r->choice.id = r->id;
    /* no idle timeout while it runs: it may wait in the queue for longer,
     * sending nothing; srv_completed sets it back */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    if (!r->stream) {
        cs->req = r; /* srv_completed releases it */
        return non_stream_answer(s, conn, r);
    }
    /* the connection's reference goes to the response: stream_free drops it */
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, r, stream_free);
    if (!resp) {
        req_release(r);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ret = MHD_queue_response(conn, 200, resp);
    MHD_destroy_response(resp); /* on failure this frees it: stream_free */
    if (ret == MHD_YES)
        srv_metrics_response(&s->metrics, 200);
    return ret;
}

/* ---- routing ---- */

static enum MHD_Result models(srv_t *s, struct MHD_Connection *conn) {
    return respond_json(s, conn, 200, srv_models_json(s->model, s->max_len));
}

/* 200 ok; 503 draining (SIGTERM), or failed (a step failed: the engine
 * takes no more requests). */
static enum MHD_Result health(srv_t *s, struct MHD_Connection *conn) {
    llm_engine_metrics_t em;
    llm_engine_metrics(s->engine, &em);
    const char *st = atomic_load_explicit(&s->draining, memory_order_relaxed) ? "draining"
                     : em.failed                                              ? "failed"
                                                                              : "ok";
    char *body = NULL;
    if (asprintf(&body, "{\"status\":\"%s\"}", st) < 0)
        body = NULL;
    return respond_json(s, conn, strcmp(st, "ok") ? 503 : 200, body);
}

static enum MHD_Result metrics(srv_t *s, struct MHD_Connection *conn) {
    size_t len = 0;
    char *text = srv_metrics_text(s, &len);
    return respond(s, conn, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

static const struct route {
    const char *path, *method;
} routes[] = {
    {"/v1/completions", "POST"}, {"/v1/models", "GET"}, {"/health", "GET"}, {"/metrics", "GET"},
};

enum MHD_Result srv_handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                           const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    srv_t *s = cls;
    conn_state_t *cs = *con_cls;
    (void)version;
    if (!cs) {
        const struct route *rt = NULL;
        for (size_t i = 0; i < sizeof routes / sizeof routes[0] && !rt; i++)
            if (!strcmp(url, routes[i].path))
                rt = &routes[i];
        srv_error_t err;
        if (!rt) {
            srv_err(&err, 404, "invalid_request_error", NULL, "no such path: %s %s", method, url);
            return respond_error(s, conn, &err);
        }
        if (strcmp(method, rt->method) != 0 && !(!strcmp(method, "HEAD") && !strcmp(rt->method, "GET"))) {
            srv_err(&err, 405, "invalid_request_error", NULL, "%s takes %s, not %s", url, rt->method, method);
            return respond_error(s, conn, &err);
        }
        if (!(cs = calloc(1, sizeof *cs)))
            return MHD_NO;
        *con_cls = cs;
        if (strcmp(rt->method, "POST") == 0)
            return MHD_YES; /* the body comes next */
    }
    if (*upload_size) {
        if (cs->len + *upload_size > MAX_BODY) {
            cs->too_big = 1;
        } else if (!cs->too_big) {
            if (cs->len + *upload_size + 1 > cs->cap) {
                size_t cap = (cs->len + *upload_size + 1) * 2;
                char *p = realloc(cs->body, cap);
                if (!p)
                    return MHD_NO;
                cs->body = p;
                cs->cap = cap;
            }
            memcpy(cs->body + cs->len, upload_data, *upload_size);
            cs->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (!strcmp(url, "/v1/completions"))
        return completions(s, conn, cs);
    if (!strcmp(url, "/v1/models"))
        return models(s, conn);
    if (!strcmp(url, "/health"))
        return health(s, conn);
    return metrics(s, conn);
}

void srv_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    srv_t *s = cls;
    conn_state_t *cs = *con_cls;
    (void)toe;
    if (!cs)
        return;
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, s->idle_timeout_s);
    if (cs->req)
        req_release(cs->req);
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

int srv_wait_idle(srv_t *s, int timeout_ms) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->live_mu);
    int rc = 0;
    while (s->live > 0 && rc == 0)
        rc = pthread_cond_timedwait(&s->live_cv, &s->live_mu, &dl);
    int left = s->live;
    pthread_mutex_unlock(&s->live_mu);
    return left ? -1 : 0;
}

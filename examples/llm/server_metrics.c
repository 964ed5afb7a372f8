/* examples/llm/server_metrics.c: llm-server's figures (server.h) and
 * GET /metrics in the Prometheus text format (version 0.0.4): the server's
 * own counters and latency histograms, the engine's (llm_engine_metrics),
 * and adag's per-DAG stats of the engine's step DAGs (adag_dag_stats and a
 * snapshot of each, adag_dag_stats_take). */
#include "server.h"

#include <adag/stats.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DAGS 32

/* seconds; a local step is well under a millisecond, a queued request's
 * first token may wait for seconds */
static const double ttft_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
static const double itl_le[] = {0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};

static void hist_init(srv_hist_t *h, const double *le, int n) {
    memset(h, 0, sizeof *h);
    h->le = le;
    h->n = n;
}

void srv_metrics_init(srv_metrics_t *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    hist_init(&m->fig.ttft, ttft_le, (int)(sizeof ttft_le / sizeof ttft_le[0]));
    hist_init(&m->fig.itl, itl_le, (int)(sizeof itl_le / sizeof itl_le[0]));
}

void srv_metrics_destroy(srv_metrics_t *m) { pthread_mutex_destroy(&m->mu); }

static void hist_add(srv_metrics_t *m, srv_hist_t *h, double v) {
    int i = 0;
    while (i < h->n && v > h->le[i])
        i++;
    pthread_mutex_lock(&m->mu);
    if (i < h->n)
        h->bucket[i]++;
    h->count++;
    h->sum += v;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_ttft(srv_metrics_t *m, double s) { hist_add(m, &m->fig.ttft, s); }
void srv_metrics_itl(srv_metrics_t *m, double s) { hist_add(m, &m->fig.itl, s); }

void srv_metrics_response(srv_metrics_t *m, int status) {
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < SRV_MAX_CODES; i++) {
        if (m->fig.codes[i] == status || m->fig.codes[i] == 0) {
            m->fig.codes[i] = status;
            m->fig.responses[i]++;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

static void family(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void one(FILE *f, const char *name, const char *type, const char *help, double v) {
    family(f, name, type, help);
    fprintf(f, "%s %.17g\n", name, v);
}

static void hist(FILE *f, const char *name, const char *help, const srv_hist_t *h) {
    family(f, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->bucket[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i], (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, (unsigned long long)h->count, name,
            h->sum, name, (unsigned long long)h->count);
}

/* A label value: backslash, quote and newline escaped. */
static void label(FILE *f, const char *v) {
    fputc('"', f);
    for (; v && *v; v++) {
        if (*v == '\\' || *v == '"')
            fprintf(f, "\\%c", *v);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
    fputc('"', f);
}

typedef struct dag_fig {
    const char *name;
    adag_dag_stats_t st;
    int have_st;
    adag_stats_h snap; /* NULL if the snapshot failed */
} dag_fig_t;

static void dags_text(FILE *f, dag_fig_t *d, int n) {
    static const struct {
        const char *name, *type, *help;
    } dag_fams[] = {
        {"adag_dag_executions_total", "counter", "Executions started (refs handed out by execute), per step DAG."},
        {"adag_dag_completed_total", "counter", "Executions whose results were got."},
        {"adag_dag_failed_total", "counter", "Executions whose get reported an error."},
        {"adag_dag_max_inflight", "gauge", "Executions a DAG may have in flight."},
        {"adag_dag_channels", "gauge", "Channels carrying values."},
        {"adag_dag_shm_bytes", "gauge", "Bytes of a DAG's shared-memory segment."},
        {"adag_dag_device_bytes", "gauge", "Device memory of a DAG's channels' slots."},
    };
    for (size_t k = 0; k < sizeof dag_fams / sizeof dag_fams[0]; k++) {
        family(f, dag_fams[k].name, dag_fams[k].type, dag_fams[k].help);
        for (int i = 0; i < n; i++) {
            if (!d[i].have_st)
                continue;
            const adag_dag_stats_t *st = &d[i].st;
            double v = k == 0   ? (double)st->executed
                       : k == 1 ? (double)st->completed
                       : k == 2 ? (double)st->failed
                       : k == 3 ? (double)st->max_inflight
                       : k == 4 ? (double)st->nchannels
                       : k == 5 ? (double)st->shm_bytes
                                : (double)st->device_bytes;
            fprintf(f, "%s{dag=", dag_fams[k].name);
            label(f, d[i].name);
            fprintf(f, "} %.17g\n", v);
        }
    }
    static const struct {
        const char *name, *type, *help;
    } op_fams[] = {
        {"adag_op_runs_total", "counter", "Times an op (a method call or a collective) of an actor's schedule ran."},
        {"adag_op_compute_seconds_total", "counter", "Compute time of an op (0 unless the DAG is traced)."},
        {"adag_op_wait_input_seconds_total", "counter", "Time an op waited for its inputs (traced DAGs)."},
        {"adag_op_wait_room_seconds_total", "counter", "Time an op waited for room in its output (traced DAGs)."},
    };
    for (size_t k = 0; k < sizeof op_fams / sizeof op_fams[0]; k++) {
        family(f, op_fams[k].name, op_fams[k].type, op_fams[k].help);
        for (int i = 0; i < n; i++) {
            unsigned nops = d[i].snap ? adag_stats_nops(d[i].snap) : 0;
            for (unsigned j = 0; j < nops; j++) {
                adag_op_stats_t op = ADAG_OP_STATS_INIT;
                if (adag_stats_op(d[i].snap, j, &op) != ADAG_OK)
                    continue;
                double v = k == 0   ? (double)op.count
                           : k == 1 ? (double)op.compute_ns * 1e-9
                           : k == 2 ? (double)op.wait_input_ns * 1e-9
                                    : (double)op.wait_room_ns * 1e-9;
                fprintf(f, "%s{dag=", op_fams[k].name);
                label(f, d[i].name);
                fputs(",actor=", f);
                label(f, op.actor);
                fputs(",op=", f);
                label(f, op.name);
                fprintf(f, ",index=\"%u\"} %.17g\n", op.index, v);
            }
        }
    }
    family(f, "adag_actor_executions_total", "counter",
           "Executions an actor's loop finished, per DAG (device: the actor's, or host).");
    for (int i = 0; i < n; i++) {
        unsigned na = d[i].snap ? adag_stats_nactors(d[i].snap) : 0;
        for (unsigned j = 0; j < na; j++) {
            adag_actor_stats_t a = ADAG_ACTOR_STATS_INIT;
            if (adag_stats_actor(d[i].snap, j, &a) != ADAG_OK || a.unanswered)
                continue;
            fputs("adag_actor_executions_total{dag=", f);
            label(f, d[i].name);
            fputs(",actor=", f);
            label(f, a.name);
            if (a.device == ADAG_DEVICE_HOST)
                fputs(",device=\"host\"", f);
            else
                fprintf(f, ",device=\"%s:%u\"", adag_device_kind_name(ADAG_DEVICE_KIND(a.device)),
                        ADAG_DEVICE_INDEX(a.device));
            fprintf(f, "} %llu\n", (unsigned long long)a.count);
        }
    }
}

char *srv_metrics_text(srv_t *s, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    llm_engine_metrics_t em;
    llm_engine_metrics(s->engine, &em);
    srv_figures_t m;
    pthread_mutex_lock(&s->metrics.mu);
    m = s->metrics.fig;
    pthread_mutex_unlock(&s->metrics.mu);

    one(f, "llm_requests_total", "counter", "Completion requests the engine accepted.", (double)em.requests);
    family(f, "llm_requests_finished_total", "counter", "Requests ended, by reason.");
    for (int r = LLM_FINISH_LENGTH; r <= LLM_FINISH_ERROR; r++)
        fprintf(f, "llm_requests_finished_total{reason=\"%s\"} %llu\n", llm_finish_name((llm_finish_t)r),
                (unsigned long long)em.finished[r]);
    family(f, "llm_requests_rejected_total", "counter",
           "Completion requests answered with an error before they ran, by reason.");
    fprintf(f, "llm_requests_rejected_total{reason=\"queue_full\"} %llu\n", (unsigned long long)m.rejected_full);
    fprintf(f, "llm_requests_rejected_total{reason=\"draining\"} %llu\n", (unsigned long long)m.rejected_draining);
    fprintf(f, "llm_requests_rejected_total{reason=\"invalid\"} %llu\n", (unsigned long long)m.invalid);
    one(f, "llm_client_disconnects_total", "counter", "Requests whose client went away before they ended (cancelled).",
        (double)m.disconnected);
    family(f, "llm_http_responses_total", "counter", "HTTP responses, by status code.");
    for (int i = 0; i < SRV_MAX_CODES && m.codes[i]; i++)
        fprintf(f, "llm_http_responses_total{code=\"%d\"} %llu\n", m.codes[i], (unsigned long long)m.responses[i]);
    one(f, "llm_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", (double)em.prompt_tokens);
    one(f, "llm_generation_tokens_total", "counter", "Tokens generated.", (double)em.generated_tokens);
    hist(f, "llm_time_to_first_token_seconds", "From a request's submission to its first token.", &m.ttft);
    hist(f, "llm_inter_token_latency_seconds", "Between two consecutive tokens of a request.", &m.itl);
    one(f, "llm_queue_depth", "gauge", "Requests waiting to be admitted.", em.waiting);
    one(f, "llm_requests_running", "gauge", "Requests admitted (holding KV blocks), not ended.", em.running);
    one(f, "llm_steps_in_flight", "gauge", "Steps started and not finished.", em.in_flight);
    one(f, "llm_kv_blocks_in_use", "gauge", "KV cache blocks reserved by requests (per actor).", em.blocks_used);
    one(f, "llm_kv_blocks_total", "gauge", "KV cache blocks of each actor.", em.blocks_total);
    family(f, "llm_steps_total", "counter", "Steps run, by kind (prefill: with prompt rows; decode: decode rows only).");
    fprintf(f, "llm_steps_total{kind=\"prefill\"} %llu\nllm_steps_total{kind=\"decode\"} %llu\n",
            (unsigned long long)em.steps_prefill, (unsigned long long)em.steps_decode);
    one(f, "llm_step_rows_total", "counter", "Real rows sent in steps.", (double)em.rows);
    one(f, "llm_step_padded_rows_total", "counter", "Padding rows sent to fill a bucket.", (double)em.padded_rows);
    one(f, "llm_step_seconds_total", "counter", "Steps' time from start to result, summed.", em.step_seconds);
    one(f, "llm_draining", "gauge", "1 while the server drains (SIGTERM).",
        atomic_load_explicit(&s->draining, memory_order_relaxed) || em.draining);
    one(f, "llm_engine_failed", "gauge", "1 once a step failed (the engine takes no more requests).", em.failed);

    adag_dag_h dags[MAX_DAGS];
    dag_fig_t d[MAX_DAGS];
    int n = llm_engine_dags(s->engine, dags, MAX_DAGS);
    for (int i = 0; i < n; i++) {
        d[i].name = adag_dag_name(dags[i]);
        d[i].st = (adag_dag_stats_t)ADAG_DAG_STATS_INIT;
        d[i].have_st = adag_dag_stats(dags[i], &d[i].st) == ADAG_OK;
        if (adag_dag_stats_take(dags[i], &d[i].snap) != ADAG_OK)
            d[i].snap = NULL;
    }
    dags_text(f, d, n);
    for (int i = 0; i < n; i++)
        adag_stats_free(d[i].snap);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

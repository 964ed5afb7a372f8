/* examples/llm/server_api.c: the JSON of the OpenAI completions API for
 * llm-server (server.h): the request body checked field by field, the
 * text_completion object, stream chunks and error objects, with jansson. */
#include "server.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int srv_err(srv_error_t *err, int status, const char *type, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->status = status;
    err->type = type;
    err->param = param;
    return -1;
}

static int bad(srv_error_t *err, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(srv_error_t *err, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->status = 400;
    err->type = "invalid_request_error";
    err->param = param;
    return -1;
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* prompt: a non-empty string (its UTF-8 bytes) or array of integers 0..255. */
static int parse_prompt(const json_t *v, srv_completion_t *c, srv_error_t *err) {
    if (json_is_string(v)) {
        size_t n = json_string_length(v);
        if (!n)
            return bad(err, "prompt", "'prompt' is empty; it needs at least one token");
        if (n > 1u << 20)
            return bad(err, "prompt", "'prompt' is %zu bytes, more than 1 MiB", n);
        if (!(c->prompt = malloc(n)))
            return srv_err(err, 500, "server_error", NULL, "out of memory for a prompt of %zu bytes", n);
        memcpy(c->prompt, json_string_value(v), n);
        c->n_prompt = (int)n;
        return 0;
    }
    if (!json_is_array(v))
        return bad(err, "prompt", "'prompt' is %s; it must be a string or an array of token ids (integers 0..255)",
                   json_kind(v));
    size_t n = json_array_size(v);
    if (!n)
        return bad(err, "prompt", "'prompt' is an empty array; it needs at least one token");
    if (n > 1u << 20)
        return bad(err, "prompt", "'prompt' has %zu tokens, more than 2^20", n);
    if (!(c->prompt = malloc(n)))
        return srv_err(err, 500, "server_error", NULL, "out of memory for a prompt of %zu tokens", n);
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_array_get(v, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > 255)
            return bad(err, "prompt",
                       "'prompt'[%zu] is %s; a prompt array holds token ids, integers 0..255 (one prompt only)", i,
                       json_is_integer(t) ? "out of 0..255" : json_kind(t));
        c->prompt[i] = (uint8_t)json_integer_value(t);
    }
    c->n_prompt = (int)n;
    return 0;
}

/* A field that is absent or null takes *out's value. */
static int opt_bool(const json_t *o, const char *key, int *out, srv_error_t *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return bad(err, key, "'%s' is %s; it must be a boolean", key, json_kind(v));
    *out = json_is_true(v);
    return 0;
}

int srv_parse_completion(const char *body, size_t len, const char *model, int max_len, srv_completion_t *c,
                         srv_error_t *err) {
    memset(c, 0, sizeof *c);
    json_error_t jerr;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    int rc = -1;
    if (!o)
        return bad(err, NULL, "the body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                   jerr.column);
    if (!json_is_object(o)) {
        bad(err, NULL, "the body is %s; it must be a JSON object", json_kind(o));
        goto out;
    }
    const json_t *v = json_object_get(o, "model");
    if (!v) {
        bad(err, "model", "'model' is missing; this server serves \"%s\"", model);
        goto out;
    }
    if (!json_is_string(v)) {
        bad(err, "model", "'model' is %s; it must be a string (\"%s\")", json_kind(v), model);
        goto out;
    }
    if (strcmp(json_string_value(v), model) != 0) {
        srv_err(err, 404, "invalid_request_error", "model", "the model '%s' does not exist; this server serves \"%s\"",
                json_string_value(v), model);
        goto out;
    }
    if (!(v = json_object_get(o, "prompt"))) {
        bad(err, "prompt", "'prompt' is missing");
        goto out;
    }
    if (parse_prompt(v, c, err))
        goto out;
    long long asked = 16; /* max_tokens as asked */
    c->max_tokens = 16;
    v = json_object_get(o, "max_tokens");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) {
            bad(err, "max_tokens", "'max_tokens' is %s; it must be an integer >= 1", json_kind(v));
            goto out;
        }
        json_int_t mt = json_integer_value(v);
        if (mt < 1) {
            bad(err, "max_tokens", "'max_tokens' is %lld; it must be >= 1", (long long)mt);
            goto out;
        }
        asked = (long long)mt;
        c->max_tokens = mt > max_len ? max_len + 1 : (int)mt; /* too long either way: said below */
    }
    if (c->n_prompt > max_len) {
        bad(err, "prompt", "the prompt has %d tokens; this model's requests hold %d positions", c->n_prompt,
            max_len);
        goto out;
    }
    if (c->n_prompt + c->max_tokens - 1 > max_len) {
        bad(err, "max_tokens",
            "'max_tokens' %lld with a prompt of %d tokens needs %lld positions; this model's requests hold %d "
            "(prompt + max_tokens - 1)",
            asked, c->n_prompt, asked + c->n_prompt - 1, max_len);
        goto out;
    }
    if (opt_bool(o, "stream", &c->stream, err))
        goto out;
    v = json_object_get(o, "stream_options");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) {
            bad(err, "stream_options", "'stream_options' is %s; it must be an object", json_kind(v));
            goto out;
        }
        if (opt_bool(v, "include_usage", &c->include_usage, err))
            goto out;
    }
    v = json_object_get(o, "n");
    if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 1)) {
        bad(err, "n", "'n' must be 1: this server generates one choice per request");
        goto out;
    }
    rc = 0;
out:
    json_decref(o);
    if (rc)
        srv_completion_free(c);
    return rc;
}

void srv_completion_free(srv_completion_t *c) {
    free(c->prompt);
    c->prompt = NULL;
}

static char *dump(json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

char *srv_error_json(const srv_error_t *err) {
    return dump(json_pack("{s:{s:s, s:s, s:s?, s:n}}", "error", "message", err->message, "type", err->type, "param",
                          err->param, "code"));
}

size_t srv_token_text(const int *tokens, int n, char *out) {
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        unsigned b = (unsigned)tokens[i] & 0xff;
        if (b < 0x80) {
            out[k++] = (char)b;
        } else {
            out[k++] = (char)(0xc0 | (b >> 6));
            out[k++] = (char)(0x80 | (b & 0x3f));
        }
    }
    return k;
}

static json_t *usage(const srv_choice_t *c) {
    return json_pack("{s:i, s:i, s:i}", "prompt_tokens", c->n_prompt, "completion_tokens", c->n_tokens,
                     "total_tokens", c->n_prompt + c->n_tokens);
}

char *srv_completion_json(const srv_choice_t *c, int with_usage) {
    char idbuf[32], *text = malloc(2 * (size_t)c->n_tokens + 1);
    json_t *ids = json_array();
    if (!text || !ids) {
        free(text);
        json_decref(ids);
        return NULL;
    }
    for (int i = 0; i < c->n_tokens; i++)
        json_array_append_new(ids, json_integer(c->tokens[i]));
    size_t n = srv_token_text(c->tokens, c->n_tokens, text);
    snprintf(idbuf, sizeof idbuf, "cmpl-%llu", (unsigned long long)c->id);
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:s%, s:o, s:n, s:s?}]}", "id", idbuf, "object",
                          "text_completion", "created", (json_int_t)c->created, "model", c->model, "choices",
                          "index", 0, "text", text, n, "token_ids", ids, "logprobs", "finish_reason", c->finish);
    free(text);
    if (o && with_usage)
        json_object_set_new(o, "usage", usage(c));
    return dump(o);
}

char *srv_usage_chunk_json(const srv_choice_t *c) {
    char idbuf[32];
    snprintf(idbuf, sizeof idbuf, "cmpl-%llu", (unsigned long long)c->id);
    return dump(json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", idbuf, "object", "text_completion", "created",
                          (json_int_t)c->created, "model", c->model, "choices", "usage", usage(c)));
}

char *srv_models_json(const char *model, int max_len) {
    return dump(json_pack("{s:s, s:[{s:s, s:s, s:i, s:s, s:i}]}", "object", "list", "data", "id", model, "object",
                          "model", "created", 0, "owned_by", "adag", "max_model_len", max_len));
}

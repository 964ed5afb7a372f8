/* examples/llm/safetensors.c: write and load the weights (safetensors.h). */
#include "safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST_MAX_HEADER (100u << 20) /* the format's own bound on the JSON */

static int little_endian(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* the config fields kept in __metadata__ */
typedef struct {
    const char *key;
    int is_float;
    size_t off;
} meta_field_t;
static const meta_field_t meta_fields[] = {
    {"vocab", 0, offsetof(llm_config_t, vocab)},         {"d_model", 0, offsetof(llm_config_t, d_model)},
    {"n_layers", 0, offsetof(llm_config_t, n_layers)},   {"n_heads", 0, offsetof(llm_config_t, n_heads)},
    {"head_dim", 0, offsetof(llm_config_t, head_dim)},   {"d_ff", 0, offsetof(llm_config_t, d_ff)},
    {"norm_eps", 1, offsetof(llm_config_t, norm_eps)},   {"rope_theta", 1, offsetof(llm_config_t, rope_theta)},
};
#define N_META (sizeof meta_fields / sizeof meta_fields[0])

static json_t *header_json(const llm_model_t *m) {
    json_t *root = json_object(), *meta = json_object();
    if (!root || !meta)
        goto fail;
    size_t off = 0;
    for (int i = 0; i < llm_tensor_count(&m->cfg); i++) {
        llm_tensor_t t;
        llm_tensor_info(&m->cfg, NULL, i, &t);
        json_t *shape = t.ndim == 2 ? json_pack("[II]", (json_int_t)t.shape[0], (json_int_t)t.shape[1])
                                    : json_pack("[I]", (json_int_t)t.shape[0]);
        size_t end = off + t.count * sizeof(float);
        json_t *e = json_pack("{s:s, s:o, s:[II]}", "dtype", "F32", "shape", shape, "data_offsets",
                              (json_int_t)off, (json_int_t)end);
        if (!e || json_object_set_new(root, t.name, e))
            goto fail;
        off = end;
    }
    for (size_t f = 0; f < N_META; f++) {
        char v[64];
        const char *p = (const char *)&m->cfg + meta_fields[f].off;
        if (meta_fields[f].is_float)
            snprintf(v, sizeof v, "%.9g", (double)*(const float *)(const void *)p);
        else
            snprintf(v, sizeof v, "%d", *(const int *)(const void *)p);
        if (json_object_set_new(meta, meta_fields[f].key, json_string(v)))
            goto fail;
    }
    if (json_object_set_new(root, "__metadata__", meta))
        goto fail_root;
    return root;
fail:
    json_decref(meta);
fail_root:
    json_decref(root);
    return NULL;
}

int llm_st_save(const llm_model_t *m, const char *path) {
    int rc = -1;
    FILE *f = NULL;
    char *text = NULL;
    json_t *root = header_json(m);
    if (!root || !(text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER))) {
        llm_fail("%s: out of memory for the safetensors header", path);
        goto out;
    }
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++)
        lenb[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    if (!little_endian()) {
        llm_fail("%s: the float data is written in host order, which is not little-endian here", path);
        goto out;
    }
    if (!(f = fopen(path, "wb"))) {
        llm_fail("%s: cannot create: %s", path, strerror(errno));
        goto out;
    }
    if (fwrite(lenb, 1, 8, f) != 8 || fwrite(text, 1, len, f) != len ||
        fwrite("        ", 1, padded - len, f) != padded - len ||
        fwrite(m->data, sizeof(float), m->n_floats, f) != m->n_floats) {
        llm_fail("%s: write failed: %s", path, strerror(errno));
        goto out;
    }
    if (fclose(f)) {
        f = NULL;
        llm_fail("%s: write failed at close: %s", path, strerror(errno));
        goto out;
    }
    f = NULL;
    rc = 0;
out:
    if (f)
        fclose(f);
    free(text);
    json_decref(root);
    return rc;
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int read_config(const char *path, json_t *root, llm_config_t *cfg) {
    json_t *meta = json_object_get(root, "__metadata__");
    if (!json_is_object(meta))
        return llm_fail("%s: no \"__metadata__\" object with the model's config", path);
    for (size_t f = 0; f < N_META; f++) {
        const char *s = json_string_value(json_object_get(meta, meta_fields[f].key));
        if (!s)
            return llm_fail("%s: __metadata__.%s: missing or not a string", path, meta_fields[f].key);
        char *p = (char *)cfg + meta_fields[f].off;
        if (meta_fields[f].is_float) {
            char *end;
            float v = strtof(s, &end);
            if (end == s || *end)
                return llm_fail("%s: __metadata__.%s: \"%s\" is not a number", path, meta_fields[f].key, s);
            memcpy(p, &v, sizeof v);
        } else {
            long v;
            if (parse_int(s, 1, 1 << 20, &v))
                return llm_fail("%s: __metadata__.%s: \"%s\" is not an integer in [1, %d]", path,
                                meta_fields[f].key, s, 1 << 20);
            int iv = (int)v;
            memcpy(p, &iv, sizeof iv);
        }
    }
    if (llm_config_check(cfg))
        return llm_fail("%s: %s", path, llm_error());
    return 0;
}

typedef struct {
    size_t begin, end;
    int tensor;
} span_t;

static int span_cmp(const void *a, const void *b) {
    const span_t *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Checks tensor t's entry; its span goes to *sp. */
static int check_entry(const char *path, json_t *e, const llm_tensor_t *t, size_t data_len, span_t *sp) {
    if (!json_is_object(e))
        return llm_fail("%s: tensor %s: the entry is not an object", path, t->name);
    const char *dtype = json_string_value(json_object_get(e, "dtype"));
    if (!dtype || strcmp(dtype, "F32"))
        return llm_fail("%s: tensor %s: dtype %s, only F32 is read", path, t->name, dtype ? dtype : "(missing)");
    json_t *shape = json_object_get(e, "shape");
    int ok = json_is_array(shape) && (int)json_array_size(shape) == t->ndim;
    for (int d = 0; ok && d < t->ndim; d++)
        ok = json_is_integer(json_array_get(shape, (size_t)d)) &&
             json_integer_value(json_array_get(shape, (size_t)d)) == t->shape[d];
    if (!ok) {
        char *got = json_dumps(shape ? shape : json_null(), JSON_COMPACT | JSON_ENCODE_ANY), want[64];
        if (t->ndim == 2)
            snprintf(want, sizeof want, "[%lld,%lld]", (long long)t->shape[0], (long long)t->shape[1]);
        else
            snprintf(want, sizeof want, "[%lld]", (long long)t->shape[0]);
        llm_fail("%s: tensor %s: shape %s, the config makes it %s", path, t->name, got ? got : "?", want);
        free(got);
        return -1;
    }
    json_t *offs = json_object_get(e, "data_offsets");
    json_t *b = json_array_get(offs, 0), *en = json_array_get(offs, 1);
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(b) || !json_is_integer(en))
        return llm_fail("%s: tensor %s: data_offsets is not [begin, end]", path, t->name);
    json_int_t bv = json_integer_value(b), ev = json_integer_value(en);
    if (bv < 0 || ev < bv || (uint64_t)ev > data_len)
        return llm_fail("%s: tensor %s: data_offsets [%lld, %lld] outside the %zu bytes of data", path, t->name,
                        (long long)bv, (long long)ev, data_len);
    if ((uint64_t)(ev - bv) != t->count * sizeof(float))
        return llm_fail("%s: tensor %s: data_offsets [%lld, %lld] hold %lld bytes, its shape needs %zu", path,
                        t->name, (long long)bv, (long long)ev, (long long)(ev - bv), t->count * sizeof(float));
    sp->begin = (size_t)bv, sp->end = (size_t)ev;
    return 0;
}

int llm_st_load(llm_model_t *m, const char *path) {
    int rc = -1, nt = 0;
    FILE *f = NULL;
    char *hdr = NULL;
    json_t *root = NULL;
    span_t *spans = NULL;
    memset(m, 0, sizeof *m);
    if (!little_endian())
        return llm_fail("%s: the float data is little-endian, this host is not", path);
    if (!(f = fopen(path, "rb")))
        return llm_fail("%s: cannot open: %s", path, strerror(errno));
    uint8_t lenb[8];
    long fsize = -1;
    if (fseek(f, 0, SEEK_END) || (fsize = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        llm_fail("%s: cannot find its size: %s", path, strerror(errno));
        goto out;
    }
    if (fsize < 8 || fread(lenb, 1, 8, f) != 8) {
        llm_fail("%s: %ld bytes, shorter than the 8-byte header length", path, fsize);
        goto out;
    }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)lenb[i] << (8 * i);
    if (hlen < 2 || hlen > ST_MAX_HEADER || hlen > (uint64_t)fsize - 8) {
        llm_fail("%s: header length %llu out of bounds (2..%u, and the file has %ld bytes)", path,
                 (unsigned long long)hlen, ST_MAX_HEADER, fsize);
        goto out;
    }
    if (!(hdr = malloc(hlen)) || fread(hdr, 1, hlen, f) != hlen) {
        llm_fail("%s: cannot read the %llu-byte header", path, (unsigned long long)hlen);
        goto out;
    }
    json_error_t jerr;
    if (!(root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES, &jerr))) {
        llm_fail("%s: header JSON: %s (line %d, column %d)", path, jerr.text, jerr.line, jerr.column);
        goto out;
    }
    if (!json_is_object(root)) {
        llm_fail("%s: the header is not a JSON object", path);
        goto out;
    }
    llm_config_t cfg;
    if (read_config(path, root, &cfg))
        goto out;
    size_t data_len = (size_t)fsize - 8 - hlen;
    nt = llm_tensor_count(&cfg);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        int known = !strcmp(key, "__metadata__");
        for (int i = 0; !known && i < nt; i++) {
            llm_tensor_t t;
            llm_tensor_info(&cfg, NULL, i, &t);
            known = !strcmp(key, t.name);
        }
        if (!known) {
            llm_fail("%s: tensor %s: not a tensor of this model (%d layers)", path, key, cfg.n_layers);
            goto out;
        }
    }
    if (!(spans = malloc((size_t)nt * sizeof *spans))) {
        llm_fail("%s: out of memory", path);
        goto out;
    }
    for (int i = 0; i < nt; i++) {
        llm_tensor_t t;
        llm_tensor_info(&cfg, NULL, i, &t);
        json_t *e = json_object_get(root, t.name);
        if (!e) {
            llm_fail("%s: tensor %s: missing", path, t.name);
            goto out;
        }
        if (check_entry(path, e, &t, data_len, &spans[i]))
            goto out;
        spans[i].tensor = i;
    }
    span_t *sorted = malloc((size_t)nt * sizeof *sorted);
    if (!sorted) {
        llm_fail("%s: out of memory", path);
        goto out;
    }
    memcpy(sorted, spans, (size_t)nt * sizeof *spans);
    qsort(sorted, (size_t)nt, sizeof *sorted, span_cmp);
    size_t at = 0;
    for (int i = 0; i < nt; i++) {
        if (sorted[i].begin != at) {
            llm_tensor_t t;
            llm_tensor_info(&cfg, NULL, sorted[i].tensor, &t);
            if (sorted[i].begin < at)
                llm_fail("%s: tensor %s: data_offsets begin at %zu, overlapping the tensor before, which ends at "
                         "%zu", path, t.name, sorted[i].begin, at);
            else
                llm_fail("%s: tensor %s: data_offsets begin at %zu, leaving a gap after the data before it, which "
                         "ends at %zu", path, t.name, sorted[i].begin, at);
            free(sorted);
            goto out;
        }
        at = sorted[i].end;
    }
    free(sorted);
    if (at != data_len) {
        llm_fail("%s: the tensors cover %zu bytes of data, the file holds %zu after the header", path, at,
                 data_len);
        goto out;
    }
    if (llm_model_alloc(m, &cfg)) {
        llm_fail("%s: %s", path, llm_error());
        goto out;
    }
    for (int i = 0; i < nt; i++) {
        llm_tensor_t t;
        llm_tensor_info(&cfg, m, i, &t);
        if (fseek(f, (long)(8 + hlen + spans[i].begin), SEEK_SET) || fread(t.data, sizeof(float), t.count, f) !=
                                                                         t.count) {
            llm_fail("%s: tensor %s: short read of %zu bytes at %llu", path, t.name, t.count * sizeof(float),
                     (unsigned long long)(8 + hlen + spans[i].begin));
            llm_model_free(m);
            goto out;
        }
    }
    rc = 0;
out:
    if (f)
        fclose(f);
    free(hdr);
    free(spans);
    json_decref(root);
    return rc;
}

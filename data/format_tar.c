/*
 * WebDataset shards: uncompressed .tar files whose members are grouped into
 * samples by key (include/adag/data.h). The tar is mapped read-only and
 * indexed once at open with libarchive (headers only: names, sizes and
 * where each member's data lies in the file); a sample's fields are then
 * pointers into the mapping, read in place like the other formats.
 *
 * Where a member's data starts: libarchive reports where an entry's header
 * begins (archive_read_header_position), which for an entry with pax or
 * GNU long-name headers is the first of them. The data of entry i ends
 * right where entry i + 1's headers begin, padded to 512 bytes, so its
 * start is next_header - round_up(size, 512); the last entry's data ends
 * where the end-of-archive blocks begin. Every offset is checked against
 * the file before use.
 */
#include "data/shard.h"

#include "common/error.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>

#define TAR_BLOCK 512

typedef struct {
    uint64_t offset, size;
} span_t;

/* The index of one shard: per sample, its key and one span per field. */
typedef struct {
    unsigned nfields;
    char ext[ADAG_DATA_MAX_FIELDS][32];
    uint64_t nsamples;
    char **keys;       /* [nsamples] */
    span_t *spans;     /* [nsamples * nfields] */
    adag_data_field_t *views; /* [nsamples * nfields]: what map callbacks get */
} tar_index_t;

/* A member read from the headers, waiting for the next header to place
 * its data. */
typedef struct {
    char *key, ext[32];
    uint64_t size, header;
    int regular;
} member_t;

static void index_free(tar_index_t *x)
{
    if (!x)
        return;
    for (uint64_t i = 0; x->keys && i < x->nsamples; i++)
        free(x->keys[i]);
    free(x->keys);
    free(x->spans);
    free(x->views);
    free(x);
}

/* Splits a member path into key and extension at the first '.' of its file
 * name; 0 if it has none (not a sample field). */
static int split_name(const char *path, char **key, char *ext, size_t ext_len)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strchr(base, '.');
    if (!dot || dot == base || strlen(dot + 1) >= ext_len || !dot[1])
        return 0;
    snprintf(ext, ext_len, "%s", dot + 1);
    *key = strndup(path, (size_t)(dot - path));
    return *key != NULL;
}

/* The sample being gathered (consecutive members with one key). */
typedef struct {
    char *key;
    span_t spans[ADAG_DATA_MAX_FIELDS];
    unsigned found; /* bit f: field f seen */
} gather_t;

static adag_status_t grow(tar_index_t *x, uint64_t *cap)
{
    if (x->nsamples < *cap)
        return ADAG_OK;
    uint64_t n = *cap ? 2 * *cap : 256;
    char **k = realloc(x->keys, n * sizeof(*k));
    if (k)
        x->keys = k;
    span_t *s = k ? realloc(x->spans, n * x->nfields * sizeof(*s)) : NULL;
    if (s)
        x->spans = s;
    if (!k || !s)
        return adag__error(ADAG_ERR_NO_MEMORY, "WebDataset index: out of memory");
    *cap = n;
    return ADAG_OK;
}

/* Ends the sample being gathered: kept if it has every field, else a bad
 * record (the whole shard fails with FAIL; SKIP drops the sample). */
static adag_status_t flush_sample(adag_data_shard_t *sh, const adag_data_params_t *p,
                                  tar_index_t *x, gather_t *g, uint64_t *cap)
{
    adag_status_t st = ADAG_OK;
    if (!g->key)
        return ADAG_OK;
    unsigned want = (1u << x->nfields) - 1;
    if (g->found != want) {
        unsigned f = 0;
        while (g->found & (1u << f))
            f++;
        if (p->bad_policy != ADAG_DATA_BAD_SKIP)
            st = adag__error(ADAG_ERR_INVALID, "data shard %s: sample %s has no field '%s'",
                            sh->path, g->key, x->ext[f]);
        else
            sh->skipped++;
        free(g->key);
    } else if ((st = grow(x, cap)) == ADAG_OK) {
        x->keys[x->nsamples] = g->key;
        memcpy(&x->spans[x->nsamples * x->nfields], g->spans, x->nfields * sizeof(span_t));
        x->nsamples++;
    } else {
        free(g->key);
    }
    g->key = NULL;
    g->found = 0;
    return st;
}

/* Places member m, whose headers begin at m->header, now that the next
 * headers begin at `next`: its data span, checked against the file. */
static adag_status_t place(adag_data_shard_t *sh, const adag_data_params_t *p, tar_index_t *x,
                           gather_t *g, member_t *m, uint64_t next, uint64_t *cap)
{
    adag_status_t st = ADAG_OK;
    if (!m->key)
        return ADAG_OK;
    uint64_t padded = (m->size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
    if (m->size > sh->data.len || padded > next || next - padded < m->header + TAR_BLOCK ||
        next > sh->data.len) {
        st = adag__error(ADAG_ERR_INVALID,
                        "data shard %s: member %s.%s of %llu bytes at offset %llu does not fit "
                        "before offset %llu (a truncated or corrupt tar)",
                        sh->path, m->key, m->ext, (unsigned long long)m->size,
                        (unsigned long long)m->header, (unsigned long long)next);
        goto out;
    }
    if (!g->key || strcmp(g->key, m->key)) {
        if ((st = flush_sample(sh, p, x, g, cap)) != ADAG_OK)
            goto out;
        g->key = m->key;
        m->key = NULL;
    }
    for (unsigned f = 0; f < x->nfields; f++)
        if (!strcmp(x->ext[f], m->ext)) {
            g->spans[f] = (span_t){next - padded, m->size};
            g->found |= 1u << f;
        }
out:
    free(m->key);
    m->key = NULL;
    return st;
}

static adag_status_t tar_index(adag_data_shard_t *sh, const adag_data_params_t *p,
                               tar_index_t *x)
{
    adag_status_t st = ADAG_OK;
    uint64_t cap = 0;
    gather_t g = {0};
    member_t m = {0};
    struct archive *a = archive_read_new();
    if (!a)
        return adag__error(ADAG_ERR_NO_MEMORY, "data shard %s: libarchive", sh->path);
    archive_read_support_format_tar(a);
    if (archive_read_open_memory(a, sh->data.base, sh->data.len) != ARCHIVE_OK) {
        st = adag__error(ADAG_ERR_INVALID, "data shard %s: not a tar: %s", sh->path,
                        archive_error_string(a));
        goto out;
    }
    for (;;) {
        struct archive_entry *e;
        int rc = archive_read_next_header(a, &e);
        if (rc == ARCHIVE_EOF) {
            /* the end-of-archive blocks begin where the last data ends */
            st = place(sh, p, x, &g, &m, (uint64_t)archive_read_header_position(a), &cap);
            break;
        }
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
            st = adag__error(ADAG_ERR_INVALID, "data shard %s: at offset %lld: %s", sh->path,
                            (long long)archive_read_header_position(a), archive_error_string(a));
            break;
        }
        int64_t hp = archive_read_header_position(a);
        if (hp < 0 || (st = place(sh, p, x, &g, &m, (uint64_t)hp, &cap)) != ADAG_OK)
            break;
        const char *name = archive_entry_pathname(e);
        if (archive_entry_filetype(e) == AE_IFREG && name &&
            split_name(name, &m.key, m.ext, sizeof(m.ext))) {
            int64_t size = archive_entry_size(e);
            m.size = size > 0 ? (uint64_t)size : 0;
            m.header = (uint64_t)hp;
        }
    }
    if (st == ADAG_OK)
        st = flush_sample(sh, p, x, &g, &cap);
out:
    free(g.key);
    free(m.key);
    archive_read_free(a);
    return st;
}

adag_status_t adag__data_tar_index(adag_data_shard_t *sh, const adag_data_params_t *p)
{
    adag_status_t st;
    if (sh->data.len == 0)
        return adag__error(ADAG_ERR_INVALID, "data shard %s: an empty file is not a tar", sh->path);
    tar_index_t *x = calloc(1, sizeof(*x));
    if (!x)
        return adag__error(ADAG_ERR_NO_MEMORY, "data shard %s: out of memory", sh->path);
    x->nfields = p->nfields;
    for (unsigned f = 0; f < p->nfields; f++)
        snprintf(x->ext[f], sizeof(x->ext[f]), "%s", p->fields[f]);
    sh->priv = x;
    if ((st = tar_index(sh, p, x)) != ADAG_OK)
        return st;
    x->views = calloc(x->nsamples * x->nfields + 1, sizeof(*x->views));
    if (!x->views)
        return adag__error(ADAG_ERR_NO_MEMORY, "data shard %s: out of memory", sh->path);
    for (uint64_t i = 0; i < x->nsamples; i++)
        for (unsigned f = 0; f < x->nfields; f++) {
            const span_t *s = &x->spans[i * x->nfields + f];
            x->views[i * x->nfields + f] =
                (adag_data_field_t){x->ext[f], sh->data.base + s->offset, s->size};
        }
    sh->nsamples = x->nsamples;
    sh->sample_size = 0; /* they differ: a map callback sizes them */
    sh->dtype = ADAG_DTYPE_BYTES;
    return ADAG_OK;
}

static adag_status_t tar_open(adag_data_shard_t *sh, const adag_data_params_t *p)
{
    adag_status_t st = adag__data_map(sh->path, &sh->data);
    return st != ADAG_OK ? st : adag__data_tar_index(sh, p);
}

void adag__data_tar_unindex(adag_data_shard_t *sh)
{
    index_free(sh->priv);
    sh->priv = NULL;
}

static void tar_fields(const adag_data_shard_t *sh, uint64_t i, adag_data_sample_t *out)
{
    const tar_index_t *x = sh->priv;
    out->fields = &x->views[i * x->nfields];
    out->nfields = x->nfields;
    out->key = x->keys[i];
    out->data = out->fields[0].data;
    out->size = out->fields[0].size;
}

static const void *tar_sample(const adag_data_shard_t *sh, uint64_t i)
{
    const tar_index_t *x = sh->priv;
    return x->views[i * x->nfields].data;
}

static void tar_close(adag_data_shard_t *sh)
{
    adag__data_tar_unindex(sh);
    adag__data_unmap(&sh->data);
}

const adag_data_format_ops_t adag_data_webdataset_ops = {
    .format = ADAG_DATA_FORMAT_WEBDATASET,
    .name = "webdataset",
    .open = tar_open,
    .sample = tar_sample,
    .fields = tar_fields,
    .close = tar_close,
};

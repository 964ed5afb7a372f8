/*
 * The formats of mapped files: fixed-size records, NumPy .npy, Megatron
 * token datasets (.bin + .idx). Every sample is read in place from the
 * mapping; the headers are parsed by data/npy.c and data/megatron_idx.c,
 * which bound everything they read.
 */
#include "data/megatron_idx.h"
#include "data/npy.h"
#include "data/shard.h"

#include "common/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void close_maps(adag_data_shard_t *sh)
{
    adag__data_unmap(&sh->data);
    adag__data_unmap(&sh->index);
}

/* ---- fixed-size records ---- */

static adag_status_t records_open(adag_data_shard_t *sh, const adag_data_params_t *p)
{
    adag_status_t st = adag__data_map(sh->path, &sh->data);
    if (st != ADAG_OK)
        return st;
    size_t rs = p->record_size, tail = sh->data.len % rs;
    sh->nsamples = sh->data.len / rs;
    sh->sample_size = rs;
    sh->dtype = ADAG_DTYPE_BYTES;
    if (tail) {
        if (p->bad_policy != ADAG_DATA_BAD_SKIP)
            return adag__error(ADAG_ERR_INVALID,
                              "data shard %s: %zu bytes are not whole records of %zu bytes: "
                              "a partial record of %zu bytes at offset %zu",
                              sh->path, sh->data.len, rs, tail, sh->data.len - tail);
        sh->skipped = 1;
    }
    return ADAG_OK;
}

static const void *records_sample(const adag_data_shard_t *sh, uint64_t i)
{
    return sh->data.base + i * sh->sample_size;
}

const adag_data_format_ops_t adag_data_records_ops = {
    .format = ADAG_DATA_FORMAT_RECORDS,
    .name = "records",
    .open = records_open,
    .sample = records_sample,
    .close = close_maps,
};

/* ---- NumPy .npy: a sample is a row ---- */

static adag_status_t npy_open(adag_data_shard_t *sh, const adag_data_params_t *p)
{
    (void)p;
    adag_npy_header_t h;
    char why[256];
    adag_status_t st = adag__data_map(sh->path, &sh->data);
    if (st != ADAG_OK)
        return st;
    if (adag__npy_parse(sh->data.base, sh->data.len, sh->data.len, &h, why, sizeof(why)) !=
        ADAG_OK)
        return adag__error(ADAG_ERR_INVALID, "data shard %s: %s", sh->path, why);
    if (h.ndim == 0)
        return adag__error(ADAG_ERR_INVALID,
                          "data shard %s: a 0-dimensional array has no rows to be samples",
                          sh->path);
    sh->nsamples = h.shape[0];
    sh->sample_size = h.shape[0] ? (size_t)(h.data_size / h.shape[0]) : 0;
    sh->dtype = h.dtype;
    sh->has_shape = 1;
    sh->ndim = h.ndim - 1; /* a row: the shape after the first axis */
    for (unsigned d = 1; d < h.ndim; d++)
        sh->shape[d - 1] = h.shape[d];
    sh->data_offset = h.data_offset;
    return ADAG_OK;
}

static const void *npy_sample(const adag_data_shard_t *sh, uint64_t i)
{
    return sh->data.base + sh->data_offset + i * sh->sample_size;
}

const adag_data_format_ops_t adag_data_npy_ops = {
    .format = ADAG_DATA_FORMAT_NPY,
    .name = "npy",
    .open = npy_open,
    .sample = npy_sample,
    .close = close_maps,
};

/* ---- Megatron token datasets: shard "x" is x.bin + x.idx ---- */

static adag_status_t tokens_open(adag_data_shard_t *sh, const adag_data_params_t *p)
{
    char path[4096];
    char why[256];
    adag_megatron_idx_t idx;
    adag_status_t st;
    if (snprintf(path, sizeof(path), "%s.bin", sh->path) >= (int)sizeof(path))
        return adag__error(ADAG_ERR_INVALID, "data shard %s: path too long", sh->path);
    if ((st = adag__data_map(path, &sh->data)) != ADAG_OK)
        return st;
    snprintf(path, sizeof(path), "%s.idx", sh->path);
    if ((st = adag__data_map(path, &sh->index)) != ADAG_OK)
        return st;
    if (adag__megatron_idx_parse(sh->index.base, sh->index.len, sh->data.len, &idx, why,
                                sizeof(why)) != ADAG_OK)
        return adag__error(ADAG_ERR_INVALID, "data shard %s: %s", path, why);
    /* the documents' tokens are the .bin's first total_tokens items, in
     * order (the index's pointers say so): samples are runs of seq_len */
    sh->nsamples = idx.total_tokens / p->seq_len;
    sh->sample_size = (size_t)p->seq_len * idx.item_size;
    sh->dtype = idx.dtype;
    sh->has_shape = 1;
    sh->ndim = 1;
    sh->shape[0] = p->seq_len;
    return ADAG_OK;
}

static const void *tokens_sample(const adag_data_shard_t *sh, uint64_t i)
{
    return sh->data.base + i * sh->sample_size;
}

const adag_data_format_ops_t adag_data_tokens_ops = {
    .format = ADAG_DATA_FORMAT_TOKENS,
    .name = "tokens",
    .open = tokens_open,
    .sample = tokens_sample,
    .close = close_maps,
};

/* ---- files: one file, one sample ---- */

static adag_status_t files_open(adag_data_shard_t *sh, const adag_data_params_t *p)
{
    (void)p;
    adag_status_t st = adag__data_map(sh->path, &sh->data);
    if (st != ADAG_OK)
        return st;
    if (sh->data.len == 0)
        return adag__error(ADAG_ERR_INVALID, "data shard %s: an empty file is not a sample",
                          sh->path);
    sh->nsamples = 1;
    sh->sample_size = sh->data.len;
    sh->dtype = ADAG_DTYPE_BYTES;
    return ADAG_OK;
}

static const void *files_sample(const adag_data_shard_t *sh, uint64_t i)
{
    (void)i;
    return sh->data.base;
}

const adag_data_format_ops_t adag_data_files_ops = {
    .format = ADAG_DATA_FORMAT_FILES,
    .name = "files",
    .open = files_open,
    .sample = files_sample,
    .close = close_maps,
};

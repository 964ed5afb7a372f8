/*
 * A data source's shards (data/source.c) and the formats that read them:
 * one ops table per format (data/format_*.c), as transport/ has one per
 * channel backend.
 */
#ifndef ADAG_DATA_SHARD_H
#define ADAG_DATA_SHARD_H

#include <adag/data.h>

#include <stddef.h>
#include <stdint.h>

/* A file mapped read-only (data/shard.c). */
typedef struct {
    const unsigned char *base;
    size_t len;
} adag_data_map_t;

/* Maps path whole (an empty file maps to base NULL, len 0). */
adag_status_t adag__data_map(const char *path, adag_data_map_t *out);
void adag__data_unmap(adag_data_map_t *m);

typedef struct adag_data_shard {
    char *path;
    /* what open found: samples, each sample_size bytes of dtype (BYTES:
     * the file does not say); has_shape: the file states a sample's
     * dimensions (.npy: a row's, 0 of them for a 1-D array; tokens:
     * seq_len), shape[0..ndim) */
    uint64_t nsamples;
    size_t sample_size;
    adag_dtype_t dtype;
    int has_shape;
    unsigned ndim;
    uint64_t shape[ADAG_MAX_DIMS];
    /* the format's state: the mapped files and where samples start */
    adag_data_map_t data, index;
    uint64_t data_offset;
    /* bad records skipped at open (ADAG_DATA_BAD_SKIP) */
    uint64_t skipped;
    void *priv; /* the format's own (WebDataset: the sample index) */
} adag_data_shard_t;

typedef struct {
    adag_data_format_t format;
    const char *name;
    /* Opens sh->path: validates it and fills nsamples, sample_size and
     * dtype. A bad file fails with ADAG_ERR_INVALID naming it and the
     * offset; with ADAG_DATA_BAD_SKIP what can be kept is kept (a broken
     * tail: sh->skipped counts what was dropped), else it fails too and
     * the caller skips the shard. */
    adag_status_t (*open)(adag_data_shard_t *sh, const adag_data_params_t *p);
    /* Sample i (< nsamples): its bytes, in place (never fails once open). */
    const void *(*sample)(const adag_data_shard_t *sh, uint64_t i);
    /* Optional, formats whose samples differ in size: fills data, size,
     * key and fields of sample i (in place; fields stay valid while the
     * shard is open) instead of `sample`. */
    void (*fields)(const adag_data_shard_t *sh, uint64_t i, adag_data_sample_t *out);
    void (*close)(adag_data_shard_t *sh);
} adag_data_format_ops_t;

/* WebDataset (data/format_tar.c): indexes the tar already in sh->data
 * (what open does after mapping the file; the fuzz target calls it on its
 * input), and frees the index. */
adag_status_t adag__data_tar_index(adag_data_shard_t *sh, const adag_data_params_t *p);
void adag__data_tar_unindex(adag_data_shard_t *sh);

/* The ops of a format, NULL for an unknown one. */
const adag_data_format_ops_t *adag__data_format(adag_data_format_t f);

#endif

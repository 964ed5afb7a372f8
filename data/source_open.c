/*
 * Opening a data source (data/source.h): the caller's parameters checked
 * and completed, the shards expanded and opened by their format, and the
 * batch counts of an epoch.
 */
#include "data/source.h"

#include "common/params.h"
#include "data/settings.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- opening ---- */

static int has_glob(const char *s)
{
    return strpbrk(s, "*?[") != NULL;
}

/* Appends a shard path (owned copy); for token datasets "x.bin" and "x"
 * both mean the pair x.bin + x.idx. */
static adag_status_t add_path(adag_data_source_t *src, const char *path, uint32_t *cap)
{
    if (src->nshards == *cap) {
        uint32_t n = *cap ? 2 * *cap : 16;
        adag_data_shard_t *sh = realloc(src->shards, n * sizeof(*sh));
        if (!sh)
            return adag__error(ADAG_ERR_NO_MEMORY, "adag_data_open: out of memory");
        src->shards = sh;
        *cap = n;
    }
    adag_data_shard_t *sh = &src->shards[src->nshards];
    memset(sh, 0, sizeof(*sh));
    if (!(sh->path = strdup(path)))
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_data_open: out of memory");
    size_t n = strlen(sh->path);
    if (src->p.format == ADAG_DATA_FORMAT_TOKENS && n > 4 && !strcmp(sh->path + n - 4, ".bin"))
        sh->path[n - 4] = '\0';
    src->nshards++;
    return ADAG_OK;
}

adag_status_t adag__data_expand_shards(adag_data_source_t *src, const adag_data_params_t *p)
{
    uint32_t cap = 0;
    adag_status_t st = ADAG_OK;
    for (unsigned i = 0; i < p->nshards && st == ADAG_OK; i++) {
        const char *s = p->shards[i];
        if (!s || !s[0])
            return adag__error(ADAG_ERR_INVALID, "adag_data_open: shard %u is empty", i);
        if (!has_glob(s) || adag__data_is_url(s)) { /* a URL's ? is a query */
            st = add_path(src, s, &cap);
            continue;
        }
        glob_t g;
        int rc = glob(s, GLOB_ERR, NULL, &g);
        if (rc == GLOB_NOMATCH)
            return adag__error(ADAG_ERR_INVALID, "adag_data_open: no file matches %s", s);
        if (rc != 0)
            return adag__error(ADAG_ERR_IO, "adag_data_open: cannot expand %s (glob error %d)",
                              s, rc);
        for (size_t k = 0; k < g.gl_pathc && st == ADAG_OK; k++) {
            const char *m = g.gl_pathv[k];
            size_t n = strlen(m);
            /* a token dataset's glob names its .bin files; the .idx go along */
            if (p->format == ADAG_DATA_FORMAT_TOKENS && (n < 4 || strcmp(m + n - 4, ".bin")))
                continue;
            st = add_path(src, m, &cap);
        }
        globfree(&g);
    }
    return st;
}

/* "[3, 4]" (the dimensions of a sample; "[]" for a scalar) into buf. */
static const char *shape_str(char *buf, size_t len, unsigned ndim, const uint64_t *shape)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (unsigned d = 0; d < ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%llu", d ? ", " : "",
                              (unsigned long long)shape[d]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
    return buf;
}

/* Without a map or steps a batch holds the files' elements as they are:
 * what a shard's header says of them (the dtype, a sample's shape) must
 * agree with the declared tensor (ADAG_DATA_PARAM_TENSOR) and with the
 * first shard kept (NULL for the first). */
static adag_status_t check_layout(const adag_data_params_t *p, const adag_data_shard_t *sh,
                                  const adag_data_shard_t *first)
{
    char a[128], b[128];
    if (p->map || p->nsteps || !sh->nsamples)
        return ADAG_OK;
    if (p->field_mask & ADAG_DATA_PARAM_TENSOR) {
        uint64_t want[ADAG_MAX_DIMS];
        int same = sh->ndim == p->sample_ndim;
        for (unsigned d = 0; d < p->sample_ndim && d < ADAG_MAX_DIMS - 1; d++) {
            want[d] = (uint64_t)p->sample_shape[d];
            same = same && sh->shape[d] == want[d];
        }
        if (sh->dtype != ADAG_DTYPE_BYTES && sh->dtype != p->sample_dtype)
            return adag__error(ADAG_ERR_INVALID,
                              "data shard %s: its header says %s elements, but sample_dtype "
                              "is %s (the bytes are not converted; a map callback may convert)",
                              sh->path, adag_dtype_name(sh->dtype),
                              adag_dtype_name(p->sample_dtype));
        if (sh->has_shape && !same && p->sample_ndim < ADAG_MAX_DIMS)
            return adag__error(ADAG_ERR_INVALID,
                              "data shard %s: its header makes a sample %s, but sample_shape "
                              "is %s",
                              sh->path, shape_str(a, sizeof(a), sh->ndim, sh->shape),
                              shape_str(b, sizeof(b), p->sample_ndim, want));
    }
    if (first && (sh->dtype != first->dtype || sh->has_shape != first->has_shape ||
                  (sh->has_shape && (sh->ndim != first->ndim ||
                                     memcmp(sh->shape, first->shape,
                                            sh->ndim * sizeof(sh->shape[0]))))))
        return adag__error(ADAG_ERR_INVALID,
                          "data shard %s: samples of %s %s, but those of %s are %s %s (the "
                          "shards of a source without a map share one layout)",
                          sh->path, adag_dtype_name(sh->dtype),
                          shape_str(a, sizeof(a), sh->has_shape ? sh->ndim : 0, sh->shape),
                          first->path, adag_dtype_name(first->dtype),
                          shape_str(b, sizeof(b), first->has_shape ? first->ndim : 0,
                                    first->shape));
    return ADAG_OK;
}

/* Opens every shard; a bad one fails the source or, with
 * ADAG_DATA_BAD_SKIP, is left out and counted. */
adag_status_t adag__data_open_shards(adag_data_source_t *src)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < src->nshards; i++) {
        adag_data_shard_t sh = src->shards[i];
        adag_status_t st = src->fmt->open(&sh, &src->p);
        if (st == ADAG_OK && sh.nsamples && !src->p.map && src->p.sample_size &&
            sh.sample_size != src->p.sample_size)
            st = adag__error(ADAG_ERR_INVALID,
                            "data shard %s: samples of %zu bytes, but the batch takes %zu "
                            "(sample_size; a map callback may convert)",
                            sh.path, sh.sample_size, src->p.sample_size);
        if (st == ADAG_OK)
            st = check_layout(&src->p, &sh, kept ? &src->shards[0] : NULL);
        if (st != ADAG_OK) {
            src->fmt->close(&sh);
            if (src->p.bad_policy != ADAG_DATA_BAD_SKIP) {
                free(sh.path);
                for (uint32_t k = i + 1; k < src->nshards; k++)
                    free(src->shards[k].path);
                src->nshards = kept;
                return st;
            }
            src->skipped++;
            free(sh.path);
            continue;
        }
        src->skipped += sh.skipped;
        if (!src->p.sample_size)
            src->p.sample_size = sh.sample_size; /* the first shard's, checked on the rest */
        src->nsamples += sh.nsamples;
        src->shards[kept++] = sh;
    }
    src->nshards = kept;
    return ADAG_OK;
}

adag_status_t adag__data_choose_cpus(adag_data_source_t *src, const adag_data_params_t *p)
{
    cpu_set_t allowed, outside;
    adag__cpus_allowed(&allowed);
    if (p->field_mask & ADAG_DATA_PARAM_CPUS) {
        const char *bad = "";
        char list[ADAG_CPULIST_MAX], ok[ADAG_CPULIST_MAX];
        if (!p->cpus || adag__cpulist_parse(p->cpus, &src->cpus, &bad) != 0)
            return adag__error(ADAG_ERR_INVALID, "adag_data_open: cpus \"%.64s\" is not a CPU "
                              "list like \"0-3,8\" (at \"%.32s\")", p->cpus ? p->cpus : "(null)",
                              bad);
        CPU_XOR(&outside, &src->cpus, &allowed);
        CPU_AND(&outside, &outside, &src->cpus);
        if (CPU_COUNT(&outside)) {
            adag__cpulist_format(&outside, list, sizeof(list));
            adag__cpulist_format(&allowed, ok, sizeof(ok));
            return adag__error(ADAG_ERR_INVALID, "adag_data_open: cpus \"%s\" names CPUs %s, "
                              "outside those this process may use (%s)", p->cpus, list, ok);
        }
        src->bound_cpus = !CPU_EQUAL(&src->cpus, &allowed);
        return ADAG_OK;
    }
    adag_actor_placement_t first = ADAG_ACTOR_PLACEMENT_INIT;
    if (!p->dag)
        return ADAG_OK;
    adag_config_h cfg;
    int64_t placement = 0;
    adag_status_t st = adag_dag_config(p->dag, &cfg);
    if (st != ADAG_OK)
        return st;
    st = adag__data_config_int(cfg, "ADAG_PLACEMENT", &placement);
    adag_config_release(cfg);
    if (st != ADAG_OK)
        return st;
    if (!placement)
        return ADAG_OK;
    st = adag_dag_input_placement(p->dag, &first);
    if (st != ADAG_OK)
        return st;
    /* the first stage's CPUs, when bound on this machine */
    if (first.bound && first.this_machine &&
        adag__cpulist_parse(first.cpus, &src->cpus, NULL) == 0) {
        CPU_AND(&src->cpus, &src->cpus, &allowed);
        src->bound_cpus = CPU_COUNT(&src->cpus) > 0 && !CPU_EQUAL(&src->cpus, &allowed);
    }
    return ADAG_OK;
}

/* The fields with a bit (shards, nshards, format, batch_size and
 * sample_size are required, without one). */
#define DATA_FIELD(m, bit) ADAG_PARAM_FIELD(adag_data_params_t, m, bit)
static const adag_param_field_t data_fields[] = {
    DATA_FIELD(record_size, ADAG_DATA_PARAM_RECORD_SIZE),
    DATA_FIELD(seq_len, ADAG_DATA_PARAM_SEQ_LEN),
    DATA_FIELD(fields, ADAG_DATA_PARAM_FIELDS),
    DATA_FIELD(nfields, ADAG_DATA_PARAM_FIELDS),
    DATA_FIELD(map, ADAG_DATA_PARAM_MAP),
    DATA_FIELD(map_arg, ADAG_DATA_PARAM_MAP),
    DATA_FIELD(cache_dir, ADAG_DATA_PARAM_CACHE),
    DATA_FIELD(cache_bytes, ADAG_DATA_PARAM_CACHE),
    DATA_FIELD(steps, ADAG_DATA_PARAM_STEPS),
    DATA_FIELD(nsteps, ADAG_DATA_PARAM_STEPS),
    DATA_FIELD(scratch_size, ADAG_DATA_PARAM_SCRATCH),
    DATA_FIELD(threads, ADAG_DATA_PARAM_THREADS),
    DATA_FIELD(seed, ADAG_DATA_PARAM_SEED),
    DATA_FIELD(shuffle_shards, ADAG_DATA_PARAM_SHUFFLE),
    DATA_FIELD(shuffle_window, ADAG_DATA_PARAM_SHUFFLE),
    DATA_FIELD(rank, ADAG_DATA_PARAM_RANKS),
    DATA_FIELD(world, ADAG_DATA_PARAM_RANKS),
    DATA_FIELD(ranks_policy, ADAG_DATA_PARAM_RANKS),
    DATA_FIELD(budget, ADAG_DATA_PARAM_BUDGET),
    DATA_FIELD(prefetch, ADAG_DATA_PARAM_PREFETCH),
    DATA_FIELD(bad_policy, ADAG_DATA_PARAM_BAD_POLICY),
    DATA_FIELD(start_epoch, ADAG_DATA_PARAM_START),
    DATA_FIELD(start_batch, ADAG_DATA_PARAM_START),
    DATA_FIELD(dag, ADAG_DATA_PARAM_DAG),
    DATA_FIELD(sample_dtype, ADAG_DATA_PARAM_TENSOR),
    DATA_FIELD(sample_ndim, ADAG_DATA_PARAM_TENSOR),
    DATA_FIELD(sample_shape, ADAG_DATA_PARAM_TENSOR),
    DATA_FIELD(cpus, ADAG_DATA_PARAM_CPUS),
};

adag_status_t adag__data_check_params(const adag_data_params_t *p)
{
    adag_status_t st = adag__params_check("adag_data_open", "adag_data_params_t", p,
                                         p->field_mask, data_fields,
                                         ADAG_PARAM_COUNT(data_fields));
    if (st != ADAG_OK)
        return st;
    if (!p->shards || p->nshards == 0)
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: no shards");
    if (!adag__data_format(p->format))
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: unknown format %d", (int)p->format);
    if (p->batch_size == 0)
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: batch_size is 0");
    if (p->format == ADAG_DATA_FORMAT_RECORDS &&
        (!(p->field_mask & ADAG_DATA_PARAM_RECORD_SIZE) || p->record_size == 0))
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: the records format needs record_size > 0");
    if (p->format == ADAG_DATA_FORMAT_TOKENS &&
        (!(p->field_mask & ADAG_DATA_PARAM_SEQ_LEN) || p->seq_len == 0))
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: the tokens format needs seq_len > 0");
    if (p->format == ADAG_DATA_FORMAT_WEBDATASET) {
        if (!(p->field_mask & ADAG_DATA_PARAM_FIELDS) || !p->fields || p->nfields == 0 ||
            p->nfields > ADAG_DATA_MAX_FIELDS)
            return adag__error(ADAG_ERR_INVALID,
                              "adag_data_open: WebDataset shards need 1..%d fields (the "
                              "extensions a sample must have)",
                              ADAG_DATA_MAX_FIELDS);
        for (unsigned i = 0; i < p->nfields; i++)
            if (!p->fields[i] || !p->fields[i][0] || strlen(p->fields[i]) > 31)
                return adag__error(ADAG_ERR_INVALID, "adag_data_open: field %u is not an extension",
                                  i);
        if (!(p->field_mask & ADAG_DATA_PARAM_MAP))
            return adag__error(ADAG_ERR_INVALID,
                              "adag_data_open: WebDataset samples differ in size: a map "
                              "callback writes them into the batch");
    }
    if (p->format == ADAG_DATA_FORMAT_FILES && !(p->field_mask & ADAG_DATA_PARAM_MAP))
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: files differ in size: a map callback writes them "
                          "into the batch");
    if (p->field_mask & ADAG_DATA_PARAM_STEPS) {
        if (!p->steps || p->nsteps == 0 || p->nsteps > ADAG_DATA_MAX_STEPS)
            return adag__error(ADAG_ERR_INVALID, "adag_data_open: 1..%d steps, %u given",
                              ADAG_DATA_MAX_STEPS, p->nsteps);
        for (unsigned k = 0; k < p->nsteps; k++)
            if (!p->steps[k].fn)
                return adag__error(ADAG_ERR_INVALID, "adag_data_open: step %u has no function",
                                  k + 1);
        if (p->sample_size == 0)
            return adag__error(ADAG_ERR_INVALID, "adag_data_open: steps need sample_size");
    }
    if ((p->field_mask & ADAG_DATA_PARAM_SCRATCH) &&
        (!(p->field_mask & (ADAG_DATA_PARAM_MAP | ADAG_DATA_PARAM_STEPS)) ||
         p->scratch_size == 0))
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: scratch is for a map callback or steps: one of them "
                          "and scratch_size > 0");
    if ((p->field_mask & ADAG_DATA_PARAM_MAP) && (!p->map || p->sample_size == 0))
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: a map callback needs the callback and sample_size");
    if ((p->field_mask & ADAG_DATA_PARAM_MAP) && p->map == adag_data_image_map) {
        /* the built-in image map: its transform and output size, once */
        if (adag_data_image_check(p->map_arg) != ADAG_OK) {
            adag__error_prefix("adag_data_open");
            return ADAG_ERR_INVALID;
        }
        size_t need = adag_data_image_size(p->map_arg);
        if (p->sample_size < need)
            return adag__error(ADAG_ERR_INVALID,
                              "adag_data_open: sample_size %zu does not hold the image map's "
                              "output of %zu bytes (adag_data_image_size)",
                              p->sample_size, need);
    }
    if ((p->field_mask & ADAG_DATA_PARAM_THREADS) && (p->threads == 0 || p->threads > MAX_THREADS))
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: threads %u is not in 1..%d",
                          p->threads, MAX_THREADS);
    if ((p->field_mask & ADAG_DATA_PARAM_RANKS) &&
        (p->world == 0 || p->rank >= p->world ||
         (p->ranks_policy != ADAG_DATA_RANKS_DROP && p->ranks_policy != ADAG_DATA_RANKS_PAD)))
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: rank %u of world %u (policy %d) is not a rank",
                          p->rank, p->world, (int)p->ranks_policy);
    if ((p->field_mask & ADAG_DATA_PARAM_DAG) && !p->dag)
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: ADAG_DATA_PARAM_DAG with no DAG");
    if ((p->field_mask & ADAG_DATA_PARAM_PREFETCH) && p->prefetch == 0)
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: prefetch is 0");
    if ((p->field_mask & ADAG_DATA_PARAM_BAD_POLICY) && p->bad_policy != ADAG_DATA_BAD_FAIL &&
        p->bad_policy != ADAG_DATA_BAD_SKIP)
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: unknown bad_policy %d",
                          (int)p->bad_policy);
    return ADAG_OK;
}

/* The caller's params with every default filled in. */
void adag__data_defaults(adag_data_params_t *p)
{
    uint64_t m = p->field_mask;
    if (!(m & ADAG_DATA_PARAM_MAP)) {
        p->map = NULL;
        p->map_arg = NULL;
    }
    if (!(m & ADAG_DATA_PARAM_THREADS)) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        p->threads = (unsigned)(1 + (cpus > 0 ? cpus : 1) / 2);
        if (p->threads > 16)
            p->threads = 16;
    }
    if (!(m & ADAG_DATA_PARAM_SEED))
        p->seed = 0;
    if (!(m & ADAG_DATA_PARAM_SHUFFLE)) {
        p->shuffle_shards = 0;
        p->shuffle_window = 0;
    }
    if (!(m & ADAG_DATA_PARAM_RANKS)) {
        p->rank = 0;
        p->world = 1;
        p->ranks_policy = ADAG_DATA_RANKS_DROP;
    }
    if (!(m & ADAG_DATA_PARAM_PREFETCH))
        p->prefetch = DEFAULT_PREFETCH;
    if (!(m & ADAG_DATA_PARAM_BAD_POLICY))
        p->bad_policy = ADAG_DATA_BAD_FAIL;
    if (!(m & ADAG_DATA_PARAM_START)) {
        p->start_epoch = 0;
        p->start_batch = 0;
    }
    if (!(m & ADAG_DATA_PARAM_RECORD_SIZE))
        p->record_size = 0;
    if (!(m & ADAG_DATA_PARAM_SEQ_LEN))
        p->seq_len = 0;
    if (!(m & ADAG_DATA_PARAM_DAG))
        p->dag = NULL;
    if (!(m & ADAG_DATA_PARAM_SCRATCH))
        p->scratch_size = 0;
    if (!(m & ADAG_DATA_PARAM_STEPS)) {
        p->steps = NULL;
        p->nsteps = 0;
    }
    p->steps = NULL; /* copied into the source at open */
    if (!(m & ADAG_DATA_PARAM_TENSOR)) {
        p->sample_dtype = ADAG_DTYPE_BYTES;
        p->sample_ndim = 0;
    }
    if (!(m & ADAG_DATA_PARAM_CACHE)) {
        p->cache_dir = NULL; /* the caller's string is used only during open */
        p->cache_bytes = 0;
    }
    if (!(m & ADAG_DATA_PARAM_FIELDS)) {
        p->fields = NULL; /* the caller's array is used only during open */
        p->nfields = 0;
    }
}

/* Batches per epoch, every rank's and this one's. */
adag_status_t adag__data_count_batches(adag_data_source_t *src)
{
    const adag_data_params_t *p = &src->p;
    if (src->nsamples == 0)
        return adag__error(ADAG_ERR_INVALID, "adag_data_open: no samples in %u shard(s)%s",
                          src->nshards, src->skipped ? " (some were skipped as bad)" : "");
    int pad = p->ranks_policy == ADAG_DATA_RANKS_PAD;
    src->batches_global = pad ? (src->nsamples + p->batch_size - 1) / p->batch_size
                              : src->nsamples / p->batch_size;
    src->batches_rank = pad ? (src->batches_global + p->world - 1) / p->world
                            : src->batches_global / p->world;
    if (src->batches_rank == 0)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: %llu samples make %llu batches of %u, fewer than "
                          "the %u ranks (ADAG_DATA_RANKS_PAD would repeat some)",
                          (unsigned long long)src->nsamples,
                          (unsigned long long)src->batches_global, p->batch_size, p->world);
    if (p->start_batch >= src->batches_rank)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: start_batch %llu is past the %llu batches of an "
                          "epoch of this rank",
                          (unsigned long long)p->start_batch,
                          (unsigned long long)src->batches_rank);
    return ADAG_OK;
}

/* A DAG to feed: one input field whose slots hold a batch; the source's
 * ring then has a slot per execution the DAG may have in flight, and holds
 * no buffer of its own. */
adag_status_t adag__data_check_dag(adag_data_source_t *src)
{
    adag_dag_h dag = src->p.dag;
    unsigned ninputs = 0;
    adag_dag_stats_t stats = ADAG_DAG_STATS_INIT;
    adag_status_t st = adag_dag_inputs(dag, &src->dag_input, 1, &ninputs);
    if (st == ADAG_OK)
        st = adag_dag_stats(dag, &stats);
    if (st != ADAG_OK) {
        adag__error_prefix("adag_data_open");
        return st;
    }
    if (ninputs != 1)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: DAG %s has %u input fields; a source feeds a DAG "
                          "with one",
                          adag_dag_name(dag), ninputs);
    if (src->dag_input.capacity < src->batch_bytes)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_data_open: a batch of %zu bytes does not fit DAG %s's slots of "
                          "%zu bytes (slot_capacity)",
                          src->batch_bytes, adag_dag_name(dag), src->dag_input.capacity);
    src->nslots = stats.max_inflight;
    return ADAG_OK;
}

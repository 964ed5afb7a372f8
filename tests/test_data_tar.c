/*
 * Suite "data_tar": WebDataset shards (ADAG_DATA_FORMAT_WEBDATASET) written
 * by Python's tarfile (a real tar writer: ustar, and pax headers for long
 * names): every sample's fields reach the map callback in place and whole,
 * keys group members, a sample without a required field and a truncated
 * shard fail naming the shard (or are skipped and counted).
 */
#include <adag/data.h>

#include "data_rig.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(data_tar, .init = data_dir_make, .fini = data_dir_remove, .timeout = 60);

/* Shard `name` with samples first..first+n-1: "<prefix>%06d.bin" holds
 * (i % 37) * 13 + 1 bytes of a pattern of i, "<prefix>%06d.cls" the text
 * of i; skip_cls: one sample (first + 3) lacks its .cls. */
static void write_shard(const char *name, const char *prefix, int first, int n, int skip_cls)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "python3 - <<'EOF'\n"
             "import io, tarfile\n"
             "t = tarfile.open('%s/%s', 'w', format=tarfile.PAX_FORMAT)\n"
             "def add(n, b):\n"
             "    ti = tarfile.TarInfo(n); ti.size = len(b); t.addfile(ti, io.BytesIO(b))\n"
             "for i in range(%d, %d):\n"
             "    k = '%s%%06d' %% i\n"
             "    add(k + '.bin', bytes((i * 7 + j) %% 256 for j in range((i %% 37) * 13 + 1)))\n"
             "    if not (%d and i == %d + 3):\n"
             "        add(k + '.cls', str(i).encode())\n"
             "t.close()\n"
             "EOF",
             data_dir, name, first, first + n, prefix, skip_cls, first);
    cr_assert_eq(system(cmd), 0, "python3 could not write %s", name);
}

typedef struct {
    int32_t cls, bin_size;
    unsigned char head[24];
    char key[64];
} out_t;

/* out = the sample's class (parsed from .cls), its .bin size and first
 * bytes, and its key; checks the .bin against the pattern of the class */
static adag_status_t map_sample(void *arg, const adag_data_sample_t *s, uint64_t *rng, void *out,
                                size_t out_size)
{
    (void)arg;
    (void)rng;
    cr_assert_eq(out_size, sizeof(out_t));
    cr_assert_eq(s->nfields, 2);
    cr_assert_str_eq(s->fields[0].ext, "bin");
    cr_assert_str_eq(s->fields[1].ext, "cls");
    char text[16] = {0};
    if (s->fields[1].size >= sizeof(text))
        return adag_data_fail(s, "a .cls of %zu bytes", s->fields[1].size);
    memcpy(text, s->fields[1].data, s->fields[1].size);
    out_t o = {.cls = atoi(text), .bin_size = (int32_t)s->fields[0].size};
    const unsigned char *b = s->fields[0].data;
    for (size_t j = 0; j < s->fields[0].size; j++)
        if (b[j] != (unsigned char)((o.cls * 7 + (int)j) % 256))
            return adag_data_fail(s, "byte %zu of .bin is %u", j, b[j]);
    memcpy(o.head, b, s->fields[0].size < 24 ? s->fields[0].size : 24);
    snprintf(o.key, sizeof(o.key), "%s", s->key);
    memcpy(out, &o, sizeof(o));
    return ADAG_OK;
}

static adag_data_params_t tar_params(const char **shards, unsigned n, unsigned batch)
{
    static const char *fields[2] = {"bin", "cls"};
    return (adag_data_params_t){
        .field_mask = ADAG_DATA_PARAM_FIELDS | ADAG_DATA_PARAM_MAP,
        .shards = shards,
        .nshards = n,
        .format = ADAG_DATA_FORMAT_WEBDATASET,
        .batch_size = batch,
        .sample_size = sizeof(out_t),
        .fields = fields,
        .nfields = 2,
        .map = map_sample,
    };
}


/* Two shards, one with names long enough to need pax headers: every
 * sample comes through whole, in order, its key matching its class. */
Test(data_tar, samples_come_whole_and_in_order)
{
    char longp[160]; /* a file name of 126 characters: ustar cannot hold it, pax does */
    memset(longp, 'd', 120);
    longp[120] = '\0';
    write_shard("a.tar", "s", 0, 60, 0);
    write_shard("b.tar", longp, 60, 40, 0);
    const char *shards[1] = {data_path("*.tar")};
    adag_data_params_t p = tar_params(shards, 1, 10);
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    uint64_t nb, ns;
    adag_data_size(src, &nb, &ns);
    cr_assert_eq(ns, 100);
    cr_assert_eq(nb, 10);
    for (unsigned b = 0; b < nb; b++) {
        adag_data_batch_t bt;
        cr_assert_eq(adag_data_next(src, &bt, 10000), ADAG_OK, "%s", adag_last_error());
        const out_t *o = bt.data;
        for (unsigned j = 0; j < 10; j++) {
            int i = (int)(b * 10 + j);
            cr_assert_eq(o[j].cls, i);
            cr_assert_eq(o[j].bin_size, (i % 37) * 13 + 1);
            char want[200];
            snprintf(want, sizeof(want), "%s%06d", i < 60 ? "s" : longp, i);
            cr_assert(strstr(want, o[j].key) || !strcmp(want, o[j].key), "key %s for %s",
                      o[j].key, want);
        }
        adag_data_release(src, &bt);
    }
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    cr_assert_gt(st.bytes_read, 0);
    adag_data_close(src);
}

/* A sample without a required field fails the shard naming it, or with
 * ADAG_DATA_BAD_SKIP is dropped and counted; a truncated shard fails. */
Test(data_tar, bad_samples_and_truncated_shards)
{
    write_shard("c.tar", "c", 0, 20, 1);
    const char *shards[1] = {data_path("c.tar")};
    adag_data_params_t p = tar_params(shards, 1, 4);
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "c.tar") &&
                  strstr(adag_last_error(), "sample c000003 has no field 'cls'"),
              "%s", adag_last_error());
    p.field_mask |= ADAG_DATA_PARAM_BAD_POLICY;
    p.bad_policy = ADAG_DATA_BAD_SKIP;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_OK, "%s", adag_last_error());
    uint64_t ns;
    adag_data_size(src, NULL, &ns);
    cr_assert_eq(ns, 19);
    adag_data_stats_t st;
    adag_data_stats(src, &st);
    cr_assert_eq(st.bad_skipped, 1);
    adag_data_batch_t bt;
    cr_assert_eq(adag_data_next(src, &bt, 10000), ADAG_OK, "%s", adag_last_error());
    const out_t *o = bt.data;
    cr_assert_eq(o[3].cls, 4, "sample 3 was dropped, 4 follows");
    adag_data_release(src, &bt);
    adag_data_close(src);

    /* cut the shard in the middle of a member's data */
    write_shard("d.tar", "d", 0, 30, 0);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "truncate -s 9000 %s", data_path("d.tar"));
    cr_assert_eq(system(cmd), 0);
    shards[0] = data_path("d.tar");
    p = tar_params(shards, 1, 4);
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "d.tar"), "%s", adag_last_error());

    /* not a tar at all */
    FILE *f = fopen(data_path("e.tar"), "w");
    fputs("this is not a tar archive, just text\n", f);
    fclose(f);
    shards[0] = data_path("e.tar");
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "e.tar"), "%s", adag_last_error());
}

/* WebDataset needs its fields and a map callback. */
Test(data_tar, params_refused)
{
    write_shard("f.tar", "f", 0, 4, 0);
    const char *shards[1] = {data_path("f.tar")};
    adag_data_params_t p = tar_params(shards, 1, 2);
    p.field_mask &= ~(uint64_t)ADAG_DATA_PARAM_FIELDS; /* and the fields left zero */
    p.fields = NULL;
    p.nfields = 0;
    adag_data_source_h src;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "fields"), "%s", adag_last_error());
    p = tar_params(shards, 1, 2);
    p.field_mask &= ~(uint64_t)ADAG_DATA_PARAM_MAP; /* and no callback */
    p.map = NULL;
    p.map_arg = NULL;
    cr_assert_eq(adag_data_open(&p, &src), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "map callback"), "%s", adag_last_error());
}

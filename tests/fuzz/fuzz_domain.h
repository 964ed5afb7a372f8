/*
 * The real shm domain the fuzzers open channels on and import, and that
 * make_seeds.c takes its seeds' descriptors and domain lists from: the
 * same geometries give the same layout (offsets) and segment size, so the
 * seeds' descriptors open in the fuzzers.
 */
#ifndef ADAG_FUZZ_DOMAIN_H
#define ADAG_FUZZ_DOMAIN_H

#include "tests/chan_index.h"
#include "dag/exec/context.h"
#include "transport/channel.h"
#include "transport/control.h"

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_NCHANS 2
/* channel 0: the sample program's input; channel 1: the chain program's */
static const adag_chan_geom_t fuzz_geoms[FUZZ_NCHANS] = {{4, 1, 1024, 0, 0}, {2, 2, 4096, 0, 0}};

/* Lays the channels out in ctx (a driver's context) and returns each
 * channel's descriptor in descs; aborts on failure. */
static inline void fuzz_domain_create(adag_dag_ctx_t *ctx, adag_wbuf_t *descs)
{
    uint32_t kinds[FUZZ_NCHANS] = {CHAN_SHM, CHAN_SHM};
    adag__ctx_init(ctx);
    for (unsigned i = 0; i < FUZZ_NCHANS; i++)
        descs[i] = (adag_wbuf_t){0};
    if (adag__ctx_create_domains(ctx, "fuzz", kinds, fuzz_geoms, NULL, FUZZ_NCHANS, descs) !=
        ADAG_OK) {
        fprintf(stderr, "fuzz: cannot create the shm domain: %s\n", adag_last_error());
        abort();
    }
}

/* ctx's export: the domain list into blob, its fds (still ctx's) into fds. */
static inline unsigned fuzz_domain_export(adag_dag_ctx_t *ctx, adag_wbuf_t *blob, int *fds)
{
    unsigned nfds = 0;
    if (adag__ctx_export_domains(ctx, blob, fds, &nfds, ADAG_CTL_MAX_FDS) != ADAG_OK) {
        fprintf(stderr, "fuzz: cannot export the shm domain: %s\n", adag_last_error());
        abort();
    }
    return nfds;
}

#endif

/*
 * What both loops of a data source's threads use (data/source_fill.c):
 * filling batch seq, and, under the source's lock, failing the source,
 * timing a wait and adding what a thread counted to the stats. The ring's
 * loop (data/source.c) and the DAG feed's (data/source_feed.c) call these;
 * these call neither.
 */
#ifndef ADAG_DATA_SOURCE_FILL_H
#define ADAG_DATA_SOURCE_FILL_H

#include "data/source.h"

/* Where batch seq lies: its epoch, its batch number in this rank's
 * epoch, and in every rank's (past the end, under PAD: the first again). */
void adag__data_seq_place(const adag_data_source_t *src, uint64_t seq, uint64_t *epoch,
                          uint64_t *batch, uint64_t *global);
/* Fills seq's batch into buf (no lock held). */
adag_status_t adag__data_fill(adag_data_source_t *src, filler_t *f, uint64_t seq,
                             unsigned char *buf);
/* A failure that belongs to no batch (a thread's start, the DAG's
 * reservation): it comes after the batches already taken. */
#define ADAG_DATA_NO_SEQ UINT64_MAX
/* Under the lock: the source fails at batch seq (ADAG_DATA_NO_SEQ: after
 * those taken so far); the failure of the earliest batch is the one kept. */
void adag__data_fail_locked(adag_data_source_t *src, adag_status_t st, const char *msg,
                           uint64_t seq);
/* Under the lock: a thread starts / ends waiting for room (blocked_s
 * counts waits still going too). */
int64_t adag__data_wait_begin(adag_data_source_t *src);
void adag__data_wait_end(adag_data_source_t *src, int64_t t0);
/* Under the lock: what a thread counted while filling goes to the stats. */
void adag__data_counted(adag_data_source_t *src, filler_t *f);

#endif

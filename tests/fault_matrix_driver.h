/*
 * The fault matrix's driver (a forked child): what fault_matrix_driver.c
 * and fault_matrix_eval.c share. The driver records every call it makes
 * (rec_t) and notes when each worker exits (the watcher); after teardown it
 * checks the records (evaluate) and the surviving actors.
 */
#ifndef ADAG_TESTS_FAULT_MATRIX_DRIVER_H
#define ADAG_TESTS_FAULT_MATRIX_DRIVER_H

#include <pthread.h>
#include <stdatomic.h>

#include "fault_matrix.h"

extern const config_t *D_cfg;
extern shared_t *D_sh;
extern int D_code;     /* the first failure's code */
extern int64_t D_t_go; /* when the checker's go arrived */

/* A line of the report to the checker ("E ...", "N ...", "D ...", "V ..."). */
void drv_line(const char *fmt, ...) ADAG_PRINTF(1, 2);
/* A failure: "E <code> <text>"; the first code is the driver's exit code. */
void drv_fail(int code, const char *fmt, ...) ADAG_PRINTF(2, 3);
/* What the driver is doing now (for a HANG report). */
void drv_activity(const char *fmt, ...) ADAG_PRINTF(1, 2);

/* ---- the watcher: a thread that notes when each worker exits (pidfd) ---- */

typedef struct {
    _Atomic int pidfd[MAXP];
    _Atomic int64_t death_ns[MAXP];
    atomic_int stop;
    pthread_t th;
    int started;
} watcher_t;

extern watcher_t W;

/* ---- call records ---- */

typedef enum { K_CREATE, K_GRAPH, K_COMPILE, K_EXECUTE, K_GET, K_DAG_DESTROY, K_RT_DESTROY } kind_t;

typedef struct {
    kind_t kind;
    adag_status_t st;
    int64_t t0, t1;
    int64_t exec_t0;  /* get: when its execute started */
    int poison;       /* get/execute of the poison input */
    int fault_call;   /* the create of the victim / crashy actor (may fail) */
    int pre;          /* on the compile-phase poison DAG */
    int bad;          /* get OK but values wrong */
    uint64_t ref;
    char what[48];
    char msg[200];
    char bad_txt[160];
} rec_t;

#define MAXREC 12000
extern rec_t *R;
extern unsigned NR;
extern int R_full;

rec_t *rec_add(kind_t k, const char *what, adag_status_t st, int64_t t0, int64_t t1);

/* ---- the driver's run ---- */

typedef struct {
    adag_runtime_h rt;
    adag_actor_h actor[MAXP + 1]; /* 0..nproc-1 process, nproc thread; NULL: not created */
    char name[MAXP + 1][16];
    pid_t pid[MAXP];
    adag_graph_h g, pre_g;
    adag_dag_h dag, pre_dag;
    unsigned nouts;
    int has_sleep;
    int has_zero; /* the "base" output (config_t.zero_arg, its actor created) */
    unsigned sleeper;
    int victim_in_dag;
    int64_t prefix; /* value at die_if = input + prefix */
    int die_bound;
    char victim_name[16];
    int death_seen;      /* some call reported ADAG_ERR_ACTOR_DIED */
    int64_t fault_t0;    /* in-method: when the poison (or crashy create) started */
    int long_in_flight;  /* teardown with long methods in flight */
    int stuck;           /* a get timed out */
    uint64_t rng;
} drv_t;

static inline int64_t offset_of(const config_t *c, unsigned a)
{
    return c->offset[a];
}

/* Checks every call record once the death time is known (fault_matrix_eval.c). */
void evaluate(const config_t *c, const drv_t *d, double *detect_ms);
/* After adag_dag_destroy: the surviving actors live and run a new DAG. */
void check_survivors(const config_t *c, drv_t *d);

#endif

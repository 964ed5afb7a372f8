/*
 * The reference of the collective tests (tests/unit_comm_coll.c), in
 * tests/unit_comm_coll_ref.c: the elements each rank sends for a call and
 * the check of what it received, reduced in rank order in plain C (f16
 * through the compiler's _Float16, bf16 by a conversion of its own).
 */
#ifndef ADAG_TESTS_COMM_COLL_REF_H
#define ADAG_TESTS_COMM_COLL_REF_H

#include <adag.h>
#include <stddef.h>

enum { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, NKINDS };

/* One collective call: what every rank enqueues (root: broadcast's). */
typedef struct {
    int kind;
    adag_dtype_t dtype;
    adag_reduce_op_t op;
    size_t count;
    unsigned root;
    int in_place;
    unsigned seed;
} call_t;

/* Relative tolerance of floats where exactness is not asked (NCCL). */
#define FLOAT_TOLERANCE 1e-2

extern const char *const kind_names[NKINDS];

/* Element i of rank r's send buffer for call c. */
void element(const call_t *c, unsigned r, size_t i, void *out);
/* Elements in a rank's send and recv buffers for call c of n ranks. */
size_t send_count(const call_t *c, unsigned n);
size_t recv_count(const call_t *c, unsigned n);
/* Nonzero (err says where) if got is not what rank `rank` of n must
 * receive. exact: bit for bit; else floats within FLOAT_TOLERANCE. */
int check_recv(const call_t *c, unsigned n, unsigned rank, const unsigned char *got, int exact,
               char *err, size_t len);

#endif

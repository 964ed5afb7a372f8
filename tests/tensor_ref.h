/*
 * Shared by the tensor suites (tests/test_tensor.c, tests/test_tensor_checks.c):
 * a runtime with the "tensor" class, tensor values, input patterns and the C
 * reference of the "tensor" class's interleave, written here independently
 * of the module's code.
 */
#ifndef ADAG_TESTS_TENSOR_REF_H
#define ADAG_TESTS_TENSOR_REF_H

#include "helpers.h"
#include "tensor_actors.h"

#include <adag.h>

/* Every tensor dtype, and how many. */
extern const adag_dtype_t t_dtypes[];
#define T_NDTYPES 10

/* h_runtime() with the "tensor" class registered too. */
adag_runtime_h t_runtime(void);
/* A "tensor" actor (name NULL: the default). */
adag_actor_h t_actor(adag_runtime_h rt, adag_placement_t pl, const char *name);

/* Bytes per element, from the test's own table. */
size_t t_elem(adag_dtype_t dt);
/* Elements of a shape (1 for ndim 0). */
size_t t_count(unsigned ndim, const int64_t *shape);
/* count elements of a pattern that depends on seed (valid values of dt). */
void t_fill(adag_dtype_t dt, size_t count, unsigned seed, void *buf);
/* The reference of interleave: in (dt, *ndim, shape) -> out; *ndim and
 * shape become the result's. out has room for 2 x the input's bytes. */
void t_interleave(adag_dtype_t dt, unsigned *ndim, int64_t *shape, const void *in, void *out);

/* A host tensor value viewing data (size from the shape). */
adag_value_t t_tensor(adag_dtype_t dt, unsigned ndim, const int64_t *shape, const void *data);
/* Asserts v is a host tensor of dt / ndim / shape (every other field set as
 * get sets it) whose elements are expect's, element by element. */
void t_assert_tensor(const adag_value_t *v, adag_dtype_t dt, unsigned ndim, const int64_t *shape,
                     const void *expect, const char *what);

/* A spec for the emit method. */
tensor_spec_t t_spec(adag_dtype_t dt, unsigned ndim, const int64_t *shape);

/* Node params: static dtype (dt != 0) and shape (ndim >= 0; -1: none). */
adag_tensor_params_t t_params(adag_dtype_t dt, int ndim, const int64_t *shape);

#endif

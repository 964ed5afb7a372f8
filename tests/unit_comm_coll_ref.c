/* The reference of the collective tests (tests/comm_coll_ref.h). */
#include "comm_coll_ref.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *const kind_names[NKINDS] = {"allreduce", "allgather", "reducescatter", "broadcast"};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

/* ---- the reference ---- */

/* 2^e for -126 <= e <= 127 (0 below: no such value occurs here). */
static float pow2f(int e)
{
    uint32_t bits = e < -126 ? 0 : (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

static float bf16_to_float(uint16_t h)
{
    /* finite only: (128 + man) * 2^(exp - 134), or man * 2^-133 if exp is 0 */
    int exp = h >> 7 & 0xff, man = h & 0x7f;
    float mag = exp ? (float)(128 + man) * pow2f(exp - 134) : (float)man * pow2f(-126) / 128;
    return (h & 0x8000) ? -mag : mag;
}

/* Nearest bf16 (ties to even) of a finite f: the two candidates around it
 * compared as doubles. */
static uint16_t float_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    uint16_t lo = (uint16_t)(bits >> 16), hi = (uint16_t)(lo + 1);
    double dlo = __builtin_fabs((double)f - bf16_to_float(lo)), dhi = __builtin_fabs((double)f - bf16_to_float(hi));
    if (dlo < dhi || (dlo == dhi && (lo & 1) == 0))
        return lo;
    return hi;
}

/* Element i of rank r's send buffer for call c (finite values; floats
 * with fractions, so rounding matters; bools are 0, 1 and sometimes 2). */
void element(const call_t *c, unsigned r, size_t i, void *out)
{
    uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(r + 1) * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)c->seed * 0x165667b19e3779f9ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    double v = ((double)(int)(h % 2001) - 1000.0) / 37.0;
    switch (c->dtype) {
    case ADAG_DTYPE_F16: {
        _Float16 x = (_Float16)(float)v;
        memcpy(out, &x, 2);
        return;
    }
    case ADAG_DTYPE_BF16: {
        uint16_t x = float_to_bf16((float)v);
        memcpy(out, &x, 2);
        return;
    }
    case ADAG_DTYPE_F32: {
        float x = (float)v;
        memcpy(out, &x, 4);
        return;
    }
    case ADAG_DTYPE_F64:
        memcpy(out, &v, 8);
        return;
    case ADAG_DTYPE_BOOL:
        *(uint8_t *)out = (uint8_t)(h % 7 == 0 ? 2 : h % 3 != 0);
        return;
    default:
        memcpy(out, &h, adag_dtype_size(c->dtype));
        return;
    }
}

#define PICK(a, b, op) ((op) == ADAG_REDUCE_MIN ? ((b) < (a) ? (b) : (a)) : ((b) > (a) ? (b) : (a)))

/* acc = acc op x, for one element of the call's dtype. */
static void ref_step(const call_t *c, void *acc, const void *x)
{
    adag_reduce_op_t op = c->op;
    int sum = op == ADAG_REDUCE_SUM || op == ADAG_REDUCE_AVG, prod = op == ADAG_REDUCE_PROD;
#define INT_STEP(S, U)                                                                         \
    {                                                                                          \
        S a, b;                                                                                \
        memcpy(&a, acc, sizeof(a));                                                            \
        memcpy(&b, x, sizeof(b));                                                              \
        U ua = (U)a, ub = (U)b;                                                                \
        S res = sum ? (S)(U)(ua + ub) : prod ? (S)(U)((uint64_t)ua * (uint64_t)ub) : PICK(a, b, op); \
        memcpy(acc, &res, sizeof(res));                                                        \
        return;                                                                                \
    }
    switch (c->dtype) {
    case ADAG_DTYPE_U8:
        INT_STEP(uint8_t, uint8_t)
    case ADAG_DTYPE_I8:
        INT_STEP(int8_t, uint8_t)
    case ADAG_DTYPE_I16:
        INT_STEP(int16_t, uint16_t)
    case ADAG_DTYPE_I32:
        INT_STEP(int32_t, uint32_t)
    case ADAG_DTYPE_I64:
        INT_STEP(int64_t, uint64_t)
    case ADAG_DTYPE_F16: {
        _Float16 a, b;
        memcpy(&a, acc, 2);
        memcpy(&b, x, 2);
        float fa = a, fb = b;
        _Float16 res = (_Float16)(sum ? fa + fb : prod ? fa * fb : PICK(fa, fb, op));
        memcpy(acc, &res, 2);
        return;
    }
    case ADAG_DTYPE_BF16: {
        uint16_t a, b;
        memcpy(&a, acc, 2);
        memcpy(&b, x, 2);
        float fa = bf16_to_float(a), fb = bf16_to_float(b);
        uint16_t res = float_to_bf16(sum ? fa + fb : prod ? fa * fb : PICK(fa, fb, op));
        memcpy(acc, &res, 2);
        return;
    }
    case ADAG_DTYPE_F32: {
        float a, b, res;
        memcpy(&a, acc, 4);
        memcpy(&b, x, 4);
        res = sum ? a + b : prod ? a * b : PICK(a, b, op);
        memcpy(acc, &res, 4);
        return;
    }
    case ADAG_DTYPE_F64: {
        double a, b, res;
        memcpy(&a, acc, 8);
        memcpy(&b, x, 8);
        res = sum ? a + b : prod ? a * b : PICK(a, b, op);
        memcpy(acc, &res, 8);
        return;
    }
    case ADAG_DTYPE_BOOL: {
        uint8_t a = *(uint8_t *)acc != 0, b = *(const uint8_t *)x != 0;
        *(uint8_t *)acc = (op == ADAG_REDUCE_SUM || op == ADAG_REDUCE_MAX) ? (a || b) : (a && b);
        return;
    }
    default:
        return;
    }
#undef INT_STEP
}

static void ref_average(const call_t *c, void *acc, unsigned n)
{
    switch (c->dtype) {
#define DIV(T)                                                                                 \
    {                                                                                          \
        T a;                                                                                   \
        memcpy(&a, acc, sizeof(a));                                                            \
        a = (T)(a / (T)n);                                                                     \
        memcpy(acc, &a, sizeof(a));                                                            \
        return;                                                                                \
    }
    case ADAG_DTYPE_U8:
        DIV(uint8_t)
    case ADAG_DTYPE_I8:
        DIV(int8_t)
    case ADAG_DTYPE_I16:
        DIV(int16_t)
    case ADAG_DTYPE_I32:
        DIV(int32_t)
    case ADAG_DTYPE_I64:
        DIV(int64_t)
    case ADAG_DTYPE_F32:
        DIV(float)
    case ADAG_DTYPE_F64:
        DIV(double)
#undef DIV
    case ADAG_DTYPE_F16: {
        _Float16 a;
        memcpy(&a, acc, 2);
        a = (_Float16)((float)a / (float)n);
        memcpy(acc, &a, 2);
        return;
    }
    case ADAG_DTYPE_BF16: {
        uint16_t a;
        memcpy(&a, acc, 2);
        a = float_to_bf16(bf16_to_float(a) / (float)n);
        memcpy(acc, &a, 2);
        return;
    }
    default:
        return;
    }
}

/* The reduction over ranks 0..n-1 (in that order) of element i. */
static void ref_reduce(const call_t *c, unsigned n, size_t i, void *out)
{
    unsigned char x[8];
    element(c, 0, i, out);
    for (unsigned r = 1; r < n; r++) {
        element(c, r, i, x);
        ref_step(c, out, x);
    }
    if (c->op == ADAG_REDUCE_AVG)
        ref_average(c, out, n);
}

/* Elements in rank `rank`'s send and recv buffers for call c. */
size_t send_count(const call_t *c, unsigned n)
{
    return c->kind == REDUCESCATTER ? c->count * n : c->count;
}

size_t recv_count(const call_t *c, unsigned n)
{
    return c->kind == ALLGATHER ? c->count * n : c->count;
}

/* What rank `rank`'s recv[j] must hold. */
static void expected(const call_t *c, unsigned n, unsigned rank, size_t j, void *out)
{
    switch (c->kind) {
    case ALLREDUCE:
        ref_reduce(c, n, j, out);
        return;
    case REDUCESCATTER:
        ref_reduce(c, n, rank * c->count + j, out);
        return;
    case ALLGATHER:
        element(c, (unsigned)(j / c->count), j % c->count, out);
        return;
    case BROADCAST:
        element(c, c->root, j, out);
        return;
    }
}

static int float_dtype(adag_dtype_t d)
{
    return d == ADAG_DTYPE_F16 || d == ADAG_DTYPE_BF16 || d == ADAG_DTYPE_F32 ||
           d == ADAG_DTYPE_F64;
}

static double as_double(adag_dtype_t d, const void *p)
{
    uint16_t h;
    float f;
    double v;
    switch (d) {
    case ADAG_DTYPE_F16: {
        _Float16 x;
        memcpy(&x, p, 2);
        return (double)x;
    }
    case ADAG_DTYPE_BF16:
        memcpy(&h, p, 2);
        return bf16_to_float(h);
    case ADAG_DTYPE_F32:
        memcpy(&f, p, 4);
        return f;
    default:
        memcpy(&v, p, 8);
        return v;
    }
}

/* Nonzero (err says where) if got is not what rank `rank` must receive.
 * exact: bit for bit; else floats within FLOAT_TOLERANCE. */
int check_recv(const call_t *c, unsigned n, unsigned rank, const unsigned char *got,
                      int exact, char *err, size_t len)
{
    size_t es = adag_dtype_size(c->dtype);
    unsigned char want[8];
    for (size_t j = 0; j < recv_count(c, n); j++) {
        expected(c, n, rank, j, want);
        const unsigned char *g = got + j * es;
        if (memcmp(g, want, es) == 0)
            continue;
        if (!exact && float_dtype(c->dtype)) {
            double a = as_double(c->dtype, g), b = as_double(c->dtype, want);
            double scale = __builtin_fabs(b) > 1.0 ? __builtin_fabs(b) : 1.0;
            if (__builtin_fabs(a - b) <= FLOAT_TOLERANCE * scale)
                continue;
        }
        uint64_t gv = 0, wv = 0;
        memcpy(&gv, g, es);
        memcpy(&wv, want, es);
        snprintf(err, len, "rank %u: %s(count %zu, %s, %s, root %u%s) of %u ranks: element %zu "
                 "is 0x%llx, not 0x%llx", rank, kind_names[c->kind], c->count,
                 adag_dtype_name(c->dtype), op_names[c->op], c->root,
                 c->in_place ? ", in place" : "", n, j, (unsigned long long)gv,
                 (unsigned long long)wv);
        return 1;
    }
    return 0;
}


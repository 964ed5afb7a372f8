/*
 * Tensor metadata inside the library (suite "tensor_meta"): the helpers of
 * common/value.h (sizes without overflow, type strings, declarations, the
 * value a reader builds from a slot and the check of a slot's metadata),
 * the metadata through every channel backend, and a writer that publishes
 * metadata its bytes do not match: every reader (a method's loop, the
 * driver's get) refuses it with ADAG_ERR_PROTOCOL naming the channel.
 */
#include "chan_rig.h"

#include "common/error.h"
#include "common/value.h"
#include "transport/slot_value.h"
#include "dag/exec/loop.h"

#include <stdio.h>
#include <string.h>

/* ---- helpers ---- */

Test(tensor_meta, tensor_bytes, .timeout = 10)
{
    char why[200];
    size_t n = 99;
    const int64_t s[3] = {2, 3, 4}, zero[3] = {1ll << 62, 0, 1ll << 62},
                  big[2] = {1ll << 31, 1ll << 31}, neg[2] = {1, -1};
    cr_assert_eq(adag__tensor_bytes(ADAG_DTYPE_F32, 3, s, &n, why, sizeof(why)), ADAG_TENSOR_OK);
    cr_assert_eq(n, 96);
    cr_assert_eq(adag__tensor_bytes(ADAG_DTYPE_BOOL, 0, NULL, &n, NULL, 0), ADAG_TENSOR_OK);
    cr_assert_eq(n, 1, "a scalar is one element");
    cr_assert_eq(adag__tensor_bytes(ADAG_DTYPE_F64, 3, zero, &n, why, sizeof(why)), ADAG_TENSOR_OK,
                 "a 0 dimension is 0 bytes, whatever the others: %s", why);
    cr_assert_eq(n, 0);
    cr_assert_eq(adag__tensor_bytes(ADAG_DTYPE_I16, 2, big, &n, why, sizeof(why)), ADAG_TENSOR_OK);
    cr_assert_eq(n, (size_t)1 << 63);
    cr_assert_eq(adag__tensor_bytes(ADAG_DTYPE_I32, 2, big, &n, why, sizeof(why)),
                 ADAG_TENSOR_OVERFLOW);
    cr_assert(strstr(why, "i32[2147483648,2147483648] has more bytes than a size_t holds"), "%s",
              why);
    cr_assert_eq(adag__tensor_bytes(ADAG_DTYPE_I32, 2, neg, &n, why, sizeof(why)), ADAG_TENSOR_BAD);
    cr_assert(strstr(why, "shape[1] is -1"), "%s", why);
    cr_assert_eq(adag__tensor_bytes(ADAG_DTYPE_I32, 9, s, &n, why, sizeof(why)), ADAG_TENSOR_BAD);
    cr_assert(strstr(why, "ndim 9"), "%s", why);
    cr_assert_eq(adag__tensor_bytes(ADAG_DTYPE_BYTES, 1, s, &n, why, sizeof(why)), ADAG_TENSOR_BAD);
    cr_assert_eq(adag__tensor_bytes(11, 1, s, &n, why, sizeof(why)), ADAG_TENSOR_BAD);
    cr_assert(strstr(why, "dtype 11 (?)"), "%s", why);
}

Test(tensor_meta, formats, .timeout = 10)
{
    char b[160];
    const int64_t s[8] = {4, 8, 1, 2, 3, 4, 5, 6};
    adag__tensor_format(b, sizeof(b), ADAG_DTYPE_F32, 2, s);
    cr_assert_str_eq(b, "f32[4,8]");
    adag__tensor_format(b, sizeof(b), ADAG_DTYPE_BF16, 0, s);
    cr_assert_str_eq(b, "bf16[]");
    adag__tensor_format(b, sizeof(b), ADAG_DTYPE_BYTES, 3, s);
    cr_assert_str_eq(b, "bytes");
    adag__tensor_format(b, 6, ADAG_DTYPE_I64, 8, s); /* truncated, terminated */
    cr_assert_str_eq(b, "i64[4");
    adag_tensor_decl_t d = {.flags = ADAG_TENSOR_DECLARED};
    adag__tensor_decl_format(b, sizeof(b), &d);
    cr_assert_str_eq(b, "");
    d.flags |= ADAG_TENSOR_STATIC_DTYPE;
    d.dtype = ADAG_DTYPE_U8;
    adag__tensor_decl_format(b, sizeof(b), &d);
    cr_assert_str_eq(b, "u8[?]");
    d.flags |= ADAG_TENSOR_STATIC_SHAPE;
    d.ndim = 2;
    memcpy(d.shape, s, 2 * sizeof(s[0]));
    adag__tensor_decl_format(b, sizeof(b), &d);
    cr_assert_str_eq(b, "u8[4,8]");
    d.flags &= ~(uint32_t)ADAG_TENSOR_STATIC_DTYPE;
    d.dtype = 0;
    adag__tensor_decl_format(b, sizeof(b), &d);
    cr_assert_str_eq(b, "?[4,8]");
}

/* What a peer may send as a declaration: only what adag_node_tensor makes. */
Test(tensor_meta, declarations_from_a_peer, .timeout = 10)
{
    adag_tensor_decl_t ok = {.flags = ADAG_TENSOR_DECL_KNOWN, .dtype = ADAG_DTYPE_F16,
                             .ndim = 2, .transport = ADAG_TRANSPORT_IPC, .shape = {3, 0}};
    adag_tensor_decl_t none = {0};
    cr_assert(adag__tensor_decl_valid(&ok));
    cr_assert(adag__tensor_decl_valid(&none));
    adag_tensor_decl_t bad[8];
    for (int i = 0; i < 8; i++)
        bad[i] = ok;
    bad[0].flags |= 1u << 3;                             /* unknown flag */
    bad[1].flags &= ~(uint32_t)ADAG_TENSOR_DECLARED;     /* static but not declared */
    bad[2].dtype = ADAG_DTYPE_BYTES;                     /* static dtype: bytes */
    bad[3].dtype = 11;                                   /* unknown dtype */
    bad[4].ndim = 9;
    bad[5].shape[1] = -1;
    bad[6].transport = ADAG_TRANSPORT_COMM + 1;
    bad[7].shape[5] = 4;                                 /* a dimension past ndim */
    for (int i = 0; i < 8; i++)
        cr_assert(!adag__tensor_decl_valid(&bad[i]), "bad declaration %d accepted", i);
    adag_tensor_decl_t dyn = {.flags = ADAG_TENSOR_DECLARED, .dtype = ADAG_DTYPE_F32};
    cr_assert(!adag__tensor_decl_valid(&dyn), "a dtype without STATIC_DTYPE accepted");
    dyn = (adag_tensor_decl_t){.flags = ADAG_TENSOR_DECLARED, .ndim = 1};
    cr_assert(!adag__tensor_decl_valid(&dyn), "an ndim without STATIC_SHAPE accepted");
}

static adag_slot_view_t view_of(const void *data, size_t size, uint32_t dtype, uint32_t ndim,
                                const int64_t *shape)
{
    adag_slot_view_t v = {.data = data, .size = size, .err = ""};
    v.meta.dtype = dtype;
    v.meta.ndim = ndim;
    for (uint32_t d = 0; d < ndim && d < ADAG_MAX_DIMS; d++)
        v.meta.shape[d] = shape[d];
    return v;
}

Test(tensor_meta, slot_views, .timeout = 10)
{
    char data[64] = {0};
    const int64_t s[ADAG_MAX_DIMS] = {2, 3}, neg[ADAG_MAX_DIMS] = {2, -3};
    adag_slot_view_t v = view_of(data, 24, ADAG_DTYPE_I32, 2, s);
    v.meta.shape[5] = 77; /* past ndim: not copied */
    v.device = ADAG_DEVICE(ADAG_DEV_EMULATED, 1);
    cr_assert_eq(adag__value_check_slot(&v, "c"), ADAG_OK, "%s", adag_last_error());
    adag_value_t x = adag__value_from_view(&v);
    cr_assert(x.kind == ADAG_VALUE_TENSOR && x.dtype == ADAG_DTYPE_I32 && x.ndim == 2 &&
              x.shape[0] == 2 && x.shape[1] == 3 && x.shape[5] == 0 && x.size == 24 &&
              x.data == data && x.device == ADAG_DEVICE(ADAG_DEV_EMULATED, 1));
    v = view_of(data, 5, ADAG_DTYPE_BYTES, 0, NULL);
    cr_assert_eq(adag__value_check_slot(&v, "c"), ADAG_OK);
    x = adag__value_from_view(&v);
    cr_assert(x.kind == ADAG_VALUE_BYTES && x.dtype == 0 && x.ndim == 0 && x.size == 5);

    /* metadata that no writer of this library publishes */
    const struct {
        adag_slot_view_t v;
        const char *needle;
    } bad[] = {
        {view_of(data, 20, ADAG_DTYPE_I32, 2, s), "i32[2,3] is 24 bytes but the slot holds 20"},
        {view_of(data, 24, ADAG_DTYPE_I32, 2, neg), "shape[1] is -3"},
        {view_of(data, 24, 12, 2, s), "dtype 12 (?)"},
        {view_of(data, 24, ADAG_DTYPE_I32, 9, s), "ndim 9"},
        {view_of(data, 24, ADAG_DTYPE_BYTES, 2, s), "bytes with ndim 2"},
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(adag__value_check_slot(&bad[i].v, "a.m[0]"), ADAG_ERR_PROTOCOL, "case %u", i);
        cr_assert(strstr(adag_last_error(), "channel a.m[0]: malformed tensor metadata"), "%s",
                  adag_last_error());
        cr_assert(strstr(adag_last_error(), bad[i].needle), "%s lacks %s", adag_last_error(),
                  bad[i].needle);
    }
}

/* ---- through every backend ---- */

/* Each backend gives every reader the metadata published with a value:
 * a tensor, then bytes in the same slot, then a failure (no metadata). */
Test(tensor_meta, every_backend_carries_metadata, .timeout = 60)
{
    for (unsigned b = 0; b < chan_nbackends; b++) {
        const chan_backend_t *be = &chan_backends[b];
        const char *name = adag__chan_backend_name(be->kind);
        rig_t r;
        rig_open(&r, be, 2, (be->caps & CAP_RING) ? 2 : 0, 256, 0);
        for (uint64_t seq = 0; seq < 6; seq++) {
            void *buf;
            adag_tensor_meta_t m = {.dtype = ADAG_DTYPE_F16, .ndim = 8,
                                    .shape = {1, 2, 1, 2, 1, 2, 1, (int64_t)seq + 1}};
            size_t size = 16 * (seq + 1);
            cr_assert_eq(adag__chan_acquire(r.w, seq, adag__deadline_ms(10000), &buf), ADAG_OK);
            memset(buf, (int)seq, size);
            adag_status_t st = seq % 3 == 2 ? ADAG_ERR_METHOD : ADAG_OK;
            cr_assert_eq(adag__chan_publish(r.w, seq, size, seq % 3 == 1 ? NULL : &m, st,
                                           "it failed"),
                         ADAG_OK);
            for (unsigned i = 0; i < r.nrd; i++) {
                adag_slot_view_t v;
                cr_assert_eq(adag__chan_wait(r.rd[i], seq, adag__deadline_ms(10000), &v), ADAG_OK);
                cr_assert_eq(adag__value_check_slot(&v, "c"), ADAG_OK, "%s: %s", name,
                             adag_last_error());
                adag_value_t x = adag__value_from_view(&v);
                if (seq % 3 == 0) {
                    cr_assert(x.kind == ADAG_VALUE_TENSOR && x.dtype == ADAG_DTYPE_F16 &&
                                  x.ndim == 8 && x.size == size,
                              "%s: seq %llu", name, (unsigned long long)seq);
                    for (unsigned d = 0; d < 8; d++)
                        cr_assert_eq(x.shape[d], m.shape[d], "%s: shape[%u]", name, d);
                    cr_assert_eq(((const unsigned char *)x.data)[size - 1], (unsigned char)seq);
                } else {
                    cr_assert(x.kind == ADAG_VALUE_BYTES && v.meta.dtype == 0 && v.meta.ndim == 0,
                              "%s: seq %llu kept the metadata of an earlier value", name,
                              (unsigned long long)seq);
                    cr_assert_eq(v.status, st);
                }
                adag__chan_release(r.rd[i], seq);
            }
        }
        rig_close(&r);
    }
}

/* ---- a writer that lies ---- */

/* lie(x) -> f32[2] (8 bytes) whose published shape says f32[3]: what a
 * corrupted writer or overwritten shared memory would show a reader. */
static adag_status_t liar_lie(void *state, adag_call_h call)
{
    (void)state;
    void *buf;
    const int64_t two[1] = {2};
    adag_status_t st = adag_call_output_tensor(call, 0, ADAG_DTYPE_F32, 1, two, &buf);
    if (st != ADAG_OK)
        return st;
    memset(buf, 0, 8);
    call->metas[0].shape[0] = 3;
    return ADAG_OK;
}

static adag_status_t liar_echo(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t v;
    adag_status_t st = adag_call_arg(call, 0, &v);
    return st != ADAG_OK ? st : adag_call_set_output(call, 0, v.data, v.size);
}

static const adag_method_def_t liar_methods[] = {
    {"lie", liar_lie, 1, 1},
    {"echo", liar_echo, 1, 1},
};

static const adag_class_def_t liar_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "liar",
    .state_size = 8,
    .methods = liar_methods,
    .nmethods = 2,
};

static adag_actor_h liar(adag_runtime_h rt, const char *name)
{
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME,
                             .class_name = "liar", .name = name};
    adag_actor_h a = NULL;
    cr_assert_eq(adag_actor_create(rt, &p, &a), ADAG_OK, "%s", adag_last_error());
    return a;
}

/* input -> a.lie [-> b.echo] -> output; returns the status of the first
 * execution's get (its message in adag_last_error()). */
static adag_status_t run_liar(adag_runtime_h rt, adag_actor_h a, adag_actor_h b)
{
    adag_graph_h g;
    adag_node_h in, x;
    adag_dag_h dag;
    cr_assert_eq(adag_graph_create(rt, &g), ADAG_OK);
    cr_assert_eq(adag_graph_input(g, 0, &in), ADAG_OK);
    cr_assert_eq(adag_graph_bind(g, a, "lie", &in, 1, &x), ADAG_OK);
    if (b)
        cr_assert_eq(adag_graph_bind(g, b, "echo", &x, 1, &x), ADAG_OK);
    cr_assert_eq(adag_graph_output(g, &x, 1), ADAG_OK);
    cr_assert_eq(adag_graph_compile(g, NULL, &dag), ADAG_OK, "%s", adag_last_error());
    int64_t one = 1;
    adag_value_t v = {.data = &one, .size = sizeof(one)}, out;
    adag_ref_t ref;
    cr_assert_eq(adag_dag_execute(dag, &v, 1, 0, &ref), ADAG_OK);
    adag_status_t st = adag_dag_get(dag, ref, &out, 1, 10000);
    char msg[ADAG_ERROR_MAX];
    snprintf(msg, sizeof(msg), "%s", adag_last_error());
    adag_dag_destroy(dag);
    adag__error(st, "%s", msg);
    return st;
}

Test(tensor_meta, lying_writer_refused_where_read, .timeout = 60)
{
    adag_runtime_h rt;
    cr_assert_eq(adag_runtime_create(NULL, &rt), ADAG_OK);
    cr_assert_eq(adag_class_register(rt, &liar_class), ADAG_OK);
    adag_actor_h a = liar(rt, "a"), b = liar(rt, "b");
    /* the driver's get */
    cr_assert_eq(run_liar(rt, a, NULL), ADAG_ERR_PROTOCOL, "%s", adag_last_error());
    cr_assert(strstr(adag_last_error(), "channel a.lie[0]: malformed tensor metadata in a slot: "
                                        "f32[3] is 12 bytes but the slot holds 8"),
              "%s", adag_last_error());
    /* another actor's loop (shm), and the writer's own next method (self):
     * the DAG fails with the reader's report */
    cr_assert_eq(run_liar(rt, a, b), ADAG_ERR_PROTOCOL, "%s", adag_last_error());
    cr_assert(strstr(adag_last_error(), "channel a.lie[0]: malformed tensor metadata"), "%s",
              adag_last_error());
    cr_assert_eq(run_liar(rt, a, a), ADAG_ERR_PROTOCOL, "%s", adag_last_error());
    cr_assert(strstr(adag_last_error(), "channel a.lie[0]: malformed tensor metadata"), "%s",
              adag_last_error());
    cr_assert_eq(adag_runtime_destroy(rt), ADAG_OK);
}

/* examples/llm/serve_graph.c: the step DAG of the sharded model
 * (serve_graph.h). Per pipeline stage s (layers [l0, l1) by llm_shard_range)
 * and rank r, actor <name>_s<s>r<r>; per layer L of the stage:
 *
 *   p_r   = attn<L>(x_r, rows)    on every rank
 *   sum   = allreduce(SUM, p_0..p_{tp-1})   (p_0 itself when tp = 1)
 *   x_r   = resid(x_r, sum_r)
 *   p_r   = mlp<L>(x_r)
 *   sum   = allreduce(SUM, ...)
 *   x_r   = resid(x_r, sum_r)
 *
 * Stage 0 starts from x_r = embed(rows) on every rank; stage s+1's rank r
 * reads stage s's rank r's last x. The last stage ends with picks_r =
 * logits(x_r) and next = pick<tp>(picks_0..) on its rank 0. */
#include "serve_graph.h"

#include <stdio.h>
#include <string.h>

#define STEP_TIMEOUT_MS 60000

static int afail(const char *what, const char *where) {
    return llm_fail("llm serve: %s (%s): %s", what, where, adag_last_error());
}

/* Static shapes of a DAG for `rows` rows (0: per execution). */
typedef struct {
    int rows, d_model;
} shape_t;

static int declare_x(adag_node_h node, const shape_t *sh, const char *method) {
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE, .dtype = ADAG_DTYPE_F32};
    if (sh->rows) {
        tp.field_mask |= ADAG_TENSOR_PARAM_SHAPE;
        tp.ndim = 2;
        tp.shape[0] = sh->rows;
        tp.shape[1] = sh->d_model;
    }
    return adag_node_tensor(node, &tp) != ADAG_OK ? afail("adag_node_tensor", method) : 0;
}

static int size_channel(adag_node_h node, size_t bytes, const char *what) {
    adag_channel_params_t cp = {.field_mask = ADAG_CHANNEL_PARAM_MAX_BYTES, .max_bytes = bytes};
    return adag_node_channel(node, &cp) != ADAG_OK ? afail("adag_node_channel", what) : 0;
}

/* One call node per rank of the stage: method(args of rank r). */
static int bind_ranks(adag_graph_h g, adag_actor_h *actors, int tp, const char *method, adag_node_h *a0,
                      adag_node_h *a1, int nargs, const shape_t *sh, adag_node_h *out) {
    for (int r = 0; r < tp; r++) {
        adag_node_h args[2] = {a0[r], a1 ? a1[r] : NULL};
        if (adag_graph_bind(g, actors[r], method, args, (unsigned)nargs, &out[r]) != ADAG_OK)
            return afail("adag_graph_bind", method);
        if (strcmp(method, "logits") == 0) {
            if (sh->rows && size_channel(out[r], (size_t)sh->rows * sizeof(llm_pick_t), "logits"))
                return -1;
        } else if (declare_x(out[r], sh, method)) {
            return -1;
        }
    }
    return 0;
}

/* sum[r] = the partials summed over the ranks (the partial itself for tp 1). */
static int reduce(adag_graph_h g, int tp, adag_node_h *part, adag_node_h *sum) {
    if (tp == 1) {
        sum[0] = part[0];
        return 0;
    }
    if (adag_graph_allreduce(g, part, (unsigned)tp, ADAG_REDUCE_SUM, sum) != ADAG_OK)
        return afail("adag_graph_allreduce", "partials");
    return 0;
}

int llm_serve_create(adag_runtime_h rt, const llm_serve_params_t *p, llm_serve_t *s) {
    memset(s, 0, sizeof *s);
    if (p->tp < 1 || p->tp > LLM_SHARD_MAX_TP || p->pp < 1 || p->pp > LLM_SHARD_MAX_STAGES ||
        p->pp > p->cfg.n_layers)
        return llm_fail("llm serve: tp %d (1..%d), pp %d (1..%d, at most the %d layers)", p->tp,
                        LLM_SHARD_MAX_TP, p->pp, LLM_SHARD_MAX_STAGES, p->cfg.n_layers);
    int cuda = p->device && strcmp(p->device, "cuda") == 0;
    if (p->device && !cuda && strcmp(p->device, "emu") != 0)
        return llm_fail("llm serve: device \"%s\": \"emu\", \"cuda\" or none (host actors)", p->device);
    if (cuda) {
        unsigned count = 0;
        if (adag_device_count("cuda", &count) != ADAG_OK || count < (unsigned)p->tp)
            return llm_fail("llm serve: tp %d on cuda needs %d GPUs, this host has %u (%s)", p->tp, p->tp, count,
                            count ? "NCCL refuses two ranks on one GPU" : adag_last_error());
    }
    for (int st = 0; st < p->pp; st++) {
        int l0, l1;
        llm_shard_range(p->cfg.n_layers, p->pp, st, &l0, &l1);
        for (int r = 0; r < p->tp; r++) {
            llm_shard_init_t in = {.cfg = p->cfg, .seed = p->seed, .l0 = l0, .l1 = l1, .is_first = st == 0,
                                   .is_last = st == p->pp - 1, .tp = p->tp, .rank = r, .n_blocks = p->n_blocks,
                                   .device_kind = !p->device ? 0 : cuda ? ADAG_DEV_CUDA : ADAG_DEV_EMULATED};
            if (p->path)
                snprintf(in.path, sizeof in.path, "%s", p->path);
            char name[64];
            snprintf(name, sizeof name, "%s_s%dr%d", p->name ? p->name : "llm", st, r);
            adag_actor_params_t ap = {
                .field_mask = ADAG_ACTOR_PARAM_CLASS | ADAG_ACTOR_PARAM_NAME | ADAG_ACTOR_PARAM_PLACEMENT |
                              ADAG_ACTOR_PARAM_INIT,
                .class_name = "llm_shard", .name = name, .placement = p->placement, .init_data = &in,
                .init_size = sizeof in};
            if (p->module) {
                ap.field_mask |= ADAG_ACTOR_PARAM_MODULE;
                ap.module_path = p->module;
            }
            char device[32];
            if (p->device) {
                snprintf(device, sizeof device, "%s:%d", p->device, cuda ? r : st * p->tp + r);
                ap.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
                ap.device = device;
            }
            if (adag_actor_create(rt, &ap, &s->actors[st * p->tp + r]) != ADAG_OK)
                return afail("adag_actor_create", name);
        }
    }
    s->rt = rt;
    s->cfg = p->cfg;
    s->tp = p->tp;
    s->pp = p->pp;
    return 0;
}

/* The step graph over s's actors; rows 0: per-execution shapes. */
static int compile_step(llm_serve_t *s, int rows, unsigned max_inflight, const char *name, adag_dag_h *dag) {
    int tp = s->tp;
    shape_t sh = {.rows = rows, .d_model = s->cfg.d_model};
    adag_graph_h g = NULL;
    adag_node_h in, x[LLM_SHARD_MAX_TP], part[LLM_SHARD_MAX_TP], sum[LLM_SHARD_MAX_TP], next = NULL;
    adag_node_h rr[LLM_SHARD_MAX_TP];
    int rc = -1;
    *dag = NULL;
    if (adag_graph_create(s->rt, &g) != ADAG_OK)
        return afail("adag_graph_create", name);
    if (adag_graph_input(g, 0, &in) != ADAG_OK) {
        afail("adag_graph_input", "rows");
        goto out;
    }
    if (rows && size_channel(in, (size_t)rows * sizeof(llm_shard_row_t), "rows"))
        goto out;
    for (int r = 0; r < tp; r++)
        rr[r] = in;
    for (int st = 0; st < s->pp; st++) {
        adag_actor_h *actors = &s->actors[st * tp];
        int l0, l1;
        llm_shard_range(s->cfg.n_layers, s->pp, st, &l0, &l1);
        if (st == 0 && bind_ranks(g, actors, tp, "embed", rr, NULL, 1, &sh, x))
            goto out;
        for (int l = l0; l < l1; l++) {
            char method[16];
            snprintf(method, sizeof method, "attn%d", l);
            if (bind_ranks(g, actors, tp, method, x, rr, 2, &sh, part) || reduce(g, tp, part, sum) ||
                bind_ranks(g, actors, tp, "resid", x, sum, 2, &sh, x))
                goto out;
            snprintf(method, sizeof method, "mlp%d", l);
            if (bind_ranks(g, actors, tp, method, x, NULL, 1, &sh, part) || reduce(g, tp, part, sum) ||
                bind_ranks(g, actors, tp, "resid", x, sum, 2, &sh, x))
                goto out;
        }
        if (st == s->pp - 1) {
            char method[16];
            snprintf(method, sizeof method, "pick%d", tp);
            if (bind_ranks(g, actors, tp, "logits", x, NULL, 1, &sh, part))
                goto out;
            if (adag_graph_bind(g, actors[0], method, part, (unsigned)tp, &next) != ADAG_OK) {
                afail("adag_graph_bind", method);
                goto out;
            }
            adag_tensor_params_t i32 = {.field_mask = ADAG_TENSOR_PARAM_DTYPE, .dtype = ADAG_DTYPE_I32};
            if (rows) {
                i32.field_mask |= ADAG_TENSOR_PARAM_SHAPE;
                i32.ndim = 1;
                i32.shape[0] = rows;
            }
            if (adag_node_tensor(next, &i32) != ADAG_OK) {
                afail("adag_node_tensor", method);
                goto out;
            }
        }
    }
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT | ADAG_COMPILE_PARAM_NAME,
                                .max_inflight = max_inflight, .name = name};
    if (adag_graph_output(g, &next, 1) != ADAG_OK || adag_graph_compile(g, &cp, dag) != ADAG_OK) {
        afail("adag_graph_compile", name);
        goto out;
    }
    rc = 0;
out:
    adag_graph_destroy(g);
    return rc;
}

int llm_serve_compile(llm_serve_t *s, int rows, unsigned max_inflight, const char *name, adag_dag_h *dag) {
    if (rows < 1 || rows > LLM_SHARD_MAX_ROWS || max_inflight < 1)
        return llm_fail("llm serve: a DAG of %d rows (1..%d), %u in flight (at least 1)", rows,
                        LLM_SHARD_MAX_ROWS, max_inflight);
    return compile_step(s, rows, max_inflight, name, dag);
}

int llm_serve_build(adag_runtime_h rt, const llm_serve_params_t *p, llm_serve_t *s) {
    if (llm_serve_create(rt, p, s))
        return -1;
    return compile_step(s, 0, 1, "llm_step", &s->dag);
}

int llm_serve_start(adag_dag_h dag, const llm_shard_row_t *rows, int n, adag_ref_t *ref) {
    if (n < 1 || n > LLM_SHARD_MAX_ROWS)
        return llm_fail("llm serve step: %d rows (1..%d)", n, LLM_SHARD_MAX_ROWS);
    adag_value_t in = {.data = rows, .size = (size_t)n * sizeof *rows};
    if (adag_dag_execute(dag, &in, 1, 0, ref) != ADAG_OK)
        return afail("adag_dag_execute", adag_dag_name(dag));
    return 0;
}

int llm_serve_finish(adag_dag_h dag, adag_ref_t ref, int n, int *next, int timeout_ms) {
    adag_value_t outv;
    int rc = -1;
    if (adag_dag_get(dag, ref, &outv, 1, timeout_ms) != ADAG_OK) {
        afail("adag_dag_get", adag_dag_name(dag));
    } else if (outv.kind != ADAG_VALUE_TENSOR || outv.dtype != ADAG_DTYPE_I32 || outv.ndim != 1 ||
               outv.shape[0] != n) {
        llm_fail("llm serve step: the next tokens are not i32 [%d] (%zu bytes)", n, outv.size);
    } else {
        const int32_t *t = outv.data;
        for (int i = 0; i < n; i++)
            next[i] = t[i];
        rc = 0;
    }
    adag_dag_release(dag, ref);
    return rc;
}

int llm_serve_step(llm_serve_t *s, const llm_shard_row_t *rows, int n, int *next) {
    adag_ref_t ref;
    if (llm_serve_start(s->dag, rows, n, &ref))
        return -1;
    return llm_serve_finish(s->dag, ref, n, next, STEP_TIMEOUT_MS);
}

void llm_serve_free(llm_serve_t *s) {
    if (s->dag)
        adag_dag_destroy(s->dag);
    s->dag = NULL;
}

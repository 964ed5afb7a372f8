/* The fault matrix driver's checks (fault_matrix_driver.h): every call
 * record against the fault and its time, then the surviving actors. */
#include "fault_matrix_driver.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "builders.h"

static int64_t victim_death_ns(const config_t *c, const drv_t *d, int *from_watcher)
{
    int64_t dw = 0, dk = atomic_load(&D_sh->kill_ns);
    if (c->phase != PH_CREATE || !fault_in_method(c->fault))
        dw = atomic_load(&W.death_ns[c->victim]);
    if (from_watcher)
        *from_watcher = dw != 0;
    int64_t best = 0;
    if (dw)
        best = dw;
    if (dk && (!best || dk < best))
        best = dk;
    if (!best && d->fault_t0 && fault_in_method(c->fault))
        best = d->fault_t0;
    return best;
}

void evaluate(const config_t *c, const drv_t *d, double *detect_ms)
{
    int allowed = fault_kills_worker(c->fault);
    int dw_known = 0;
    int64_t D = victim_death_ns(c, d, &dw_known);
    int64_t Dw = atomic_load(&W.death_ns[c->victim]);
    if (c->phase == PH_CREATE && fault_in_method(c->fault))
        Dw = 0;
    /* the earliest moment a death may be reported */
    int64_t floor_ns = 0;
    if (fault_external_worker(c->fault))
        floor_ns = atomic_load(&D_sh->kill_ns);
    else if (fault_in_method(c->fault))
        floor_ns = d->fault_t0;
    int reported = 0;
    *detect_ms = -1;
    for (unsigned i = 0; i < NR; i++) {
        const rec_t *r = &R[i];
        const char *what = r->what;
        double took = ms_of(r->t1 - r->t0);
        int is_td = r->kind == K_DAG_DESTROY || r->kind == K_RT_DESTROY;
        if (r->st == ADAG_ERR_ACTOR_DIED) {
            if (!allowed)
                drv_fail(XC_HEALTHY, "%s returned ADAG_ERR_ACTOR_DIED but no worker was faulted "
                                    "(fault %s): \"%s\"",
                         what, fault_names[c->fault], r->msg);
            else if (!floor_ns || r->t1 < floor_ns)
                drv_fail(XC_HEALTHY, "%s returned ADAG_ERR_ACTOR_DIED %s the fault was injected: \"%s\"",
                         what, floor_ns ? "before" : "but never", r->msg);
            else if (!strstr(r->msg, d->victim_name))
                drv_fail(XC_NAME, "%s returned ADAG_ERR_ACTOR_DIED with \"%s\", which does not name "
                                 "the dead actor %s",
                         what, r->msg, d->victim_name);
            if (allowed && D && *detect_ms < 0 && r->t1 >= D)
                *detect_ms = ms_of(r->t1 - D);
            if (allowed && D && *detect_ms < 0 && r->t1 < D)
                *detect_ms = 0;
            if (!r->pre)
                reported = 1;
        } else if (r->st != ADAG_OK && !r->pre && strstr(r->msg, d->victim_name)) {
            reported = 1;
        }
        /* promptness after the death (teardown has its own bounds) */
        if (allowed && D && !is_td && r->t1 > D) {
            int64_t from = r->t0 > D ? r->t0 : D;
            double late = ms_of(r->t1 - from);
            if (late > PROMPT_MS)
                drv_fail(XC_LATE, "%s returned %s %.0f ms after the death of %s (call took %.0f ms)",
                         what, adag_status_str(r->st), late, d->victim_name, took);
        }
        if (took > 500)
            drv_line("N %s took %.0f ms (%s)", what, took, adag_status_str(r->st));
        switch (r->kind) {
        case K_GET:
            if (took > GET_TIMEOUT_MS + 1000)
                drv_fail(XC_GET_SLOW, "%s took %.0f ms with timeout %d ms (%s)", what, took,
                         GET_TIMEOUT_MS, adag_status_str(r->st));
            if (r->st == ADAG_OK) {
                if (r->bad)
                    drv_fail(XC_BAD_DATA, "%s ref %" PRIu64 " returned ADAG_OK but %s", what,
                             r->ref, r->bad_txt);
                if (r->poison)
                    drv_fail(XC_BAD_DATA, "%s ref %" PRIu64 " returned ADAG_OK although its "
                                         "worker died running it",
                             what, r->ref);
                else if (allowed && Dw && r->exec_t0 > Dw && d->victim_in_dag && !r->pre)
                    drv_fail(XC_BAD_DATA, "%s ref %" PRIu64 " returned ADAG_OK for an execution "
                                         "started %.1f ms after %s died",
                             what, r->ref, ms_of(r->exec_t0 - Dw), d->victim_name);
            } else if (r->st != ADAG_ERR_ACTOR_DIED) {
                drv_fail(XC_STATUS, "%s ref %" PRIu64 " returned %s after %.0f ms: \"%s\"", what,
                         r->ref, adag_status_str(r->st), took, r->msg);
            }
            break;
        case K_EXECUTE:
            if (r->st != ADAG_OK && r->st != ADAG_ERR_ACTOR_DIED)
                drv_fail(XC_STATUS, "%s returned %s after %.0f ms: \"%s\"", what,
                         adag_status_str(r->st), took, r->msg);
            break;
        case K_CREATE:
        case K_GRAPH:
        case K_COMPILE:
            if (r->kind == K_CREATE && r->fault_call && fault_in_method(c->fault)) {
                if (r->st == ADAG_OK)
                    drv_fail(XC_STATUS, "%s of the crashy actor (init %s) returned ADAG_OK", what,
                             c->fault == F_WEXIT ? "exit" : "segv");
                else if (!strstr(r->msg, d->victim_name))
                    drv_fail(XC_NAME, "%s failed with \"%s\", which does not name %s", what, r->msg,
                             d->victim_name);
                if (took > PROMPT_MS)
                    drv_fail(XC_LATE, "%s of the crashy actor took %.0f ms", what, took);
            } else if (r->st != ADAG_OK && r->st != ADAG_ERR_ACTOR_DIED) {
                /* an error other than ACTOR_DIED is fine only for the faulted actor */
                if (!allowed || !strstr(r->msg, d->victim_name))
                    drv_fail(XC_STATUS, "%s returned %s: \"%s\"", what, adag_status_str(r->st),
                             r->msg);
                else
                    drv_line("N %s failed with %s (not ADAG_ERR_ACTOR_DIED): \"%s\"", what,
                             adag_status_str(r->st), r->msg);
            }
            break;
        case K_DAG_DESTROY:
        case K_RT_DESTROY: {
            int budget = r->kind == K_DAG_DESTROY ? c->dag_teardown_ms : RT_TEARDOWN_MS;
            if (r->st != ADAG_OK)
                drv_fail(XC_TEARDOWN_ERR, "%s returned %s: \"%s\"", what, adag_status_str(r->st),
                         r->msg);
            if (took > budget + TEARDOWN_SLACK_MS)
                drv_fail(XC_TEARDOWN_SLOW, "%s took %.0f ms (teardown timeout %d ms)", what, took,
                         budget);
            /* with no method running, teardown has no reason to wait for the
             * timeout: it did only if it could not stop a healthy worker */
            int stopped_victim = c->phase == PH_TEARDOWN &&
                                 (c->fault == F_WSTOP || c->fault == F_WSTOP_DKILL);
            if (!d->long_in_flight && !stopped_victim && took >= budget &&
                took <= budget + TEARDOWN_SLACK_MS)
                drv_fail(XC_TEARDOWN_SLOW, "%s took %.0f ms, the teardown timeout (%d ms), with "
                                          "no method running: a worker was not stopped cleanly",
                         what, took, budget);
            break;
        }
        }
    }
    /* a worker that died while the DAG ran must have been reported */
    if (allowed && d->victim_in_dag && c->phase <= PH_EXECUTE && !reported) {
        if (Dw)
            drv_fail(XC_UNREPORTED, "%s died (pid gone at +%.0f ms after go) but no call "
                                   "reported ADAG_ERR_ACTOR_DIED",
                     d->victim_name, ms_of(Dw - D_t_go));
        else
            drv_fail(XC_NOT_DELIVERED, "%s never died (fault %s at %s)", d->victim_name,
                     fault_names[c->fault], phase_name(c->phase));
    }
}

/* After adag_dag_destroy: the actors whose handles are held stay alive (but
 * the faulted one and a worker whose method overran the teardown timeout),
 * and a new DAG over them works. */
void check_survivors(const config_t *c, drv_t *d)
{
    sleep_us(10000); /* the watcher polls every 2 ms */
    h_stage_t alive[MAXP + 1];
    unsigned n = 0;
    int64_t sum = 0;
    for (unsigned a = 0; a <= c->nproc; a++) {
        if (!d->actor[a])
            continue;
        if (a < c->nproc) {
            int faulted = (fault_kills_worker(c->fault) || c->fault == F_WSTOP_DKILL) &&
                          a == c->victim && !(c->phase == PH_CREATE && fault_in_method(c->fault));
            int overran = d->long_in_flight && a == d->sleeper;
            int64_t dead = atomic_load(&W.death_ns[a]);
            if (faulted || overran)
                continue;
            if (dead) {
                drv_fail(XC_HEALTHY_KILLED, "worker %s (pid %d) is dead after adag_dag_destroy; it "
                                            "was not faulted and had no method running",
                         d->name[a], (int)d->pid[a]);
                continue;
            }
        }
        alive[n++] = (h_stage_t){d->actor[a], "add"};
        sum += offset_of(c, a);
    }
    if (!n)
        return;
    drv_activity("a new DAG over the surviving actors");
    adag_graph_h g = NULL;
    adag_dag_h dag = NULL;
    adag_status_t st;
    const char *step;
    adag_compile_params_t cp = h_compile_params(2, 64, 0, 1000);
    int64_t t0 = now_ns();
    /* input -> alive[0].add -> ... -> alive[n-1].add */
    if ((st = h_try_chain(d->rt, alive, n, &cp, &g, &dag, &step)) != ADAG_OK)
        goto fail;
    for (int64_t i = 0; i < 3; i++) {
        int64_t v = 5000 + i;
        adag_value_t in = {.data = &v, .size = sizeof(v)}, out;
        adag_ref_t ref;
        step = "adag_dag_execute";
        if ((st = adag_dag_execute(dag, &in, 1, 0, &ref)) != ADAG_OK)
            goto fail;
        step = "adag_dag_get";
        if ((st = adag_dag_get(dag, ref, &out, 1, GET_TIMEOUT_MS)) != ADAG_OK)
            goto fail;
        int64_t x = 0;
        if (out.size == sizeof(x))
            memcpy(&x, out.data, sizeof(x));
        if (out.size != sizeof(x) || x != v + sum) {
            drv_fail(XC_AFTER, "new DAG over %u surviving actors: got %" PRId64 " (%zu bytes), "
                               "expected %" PRId64,
                     n, x, out.size, v + sum);
            break;
        }
        (void)adag_dag_release(dag, ref);
    }
    step = "adag_dag_destroy";
    if ((st = adag_dag_destroy(dag)) != ADAG_OK)
        goto fail;
    dag = NULL;
    if (ms_of(now_ns() - t0) > PROMPT_MS)
        drv_fail(XC_AFTER, "a new DAG over %u surviving actors took %.0f ms", n,
                 ms_of(now_ns() - t0));
    return;
fail:
    drv_fail(XC_AFTER, "new DAG over %u surviving actors: %s returned %s: \"%s\"", n, step,
             adag_status_str(st), adag_last_error());
}

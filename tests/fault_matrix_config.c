/* The fault matrix's faults, phases, seeded configurations and exit codes
 * (fault_matrix.h). */
#include "fault_matrix.h"

#include <string.h>

const char *const fault_names[NFAULTS] = {
    "driver-kill", "driver-stop-kill", "worker-kill", "worker-stop-kill",
    "worker-exit", "worker-segv",      "worker-stop+driver-kill",
};

const char *const phase_names[PH_DONE + 1] = {"create", "compile", "execute", "teardown",
                                               "done"};

const char *phase_name(int ph)
{
    return ph >= 0 && ph <= PH_DONE ? phase_names[ph] : "start";
}

int fault_kills_driver(fault_t f)
{
    return f == F_DKILL || f == F_DSTOP || f == F_WSTOP_DKILL;
}

int fault_kills_worker(fault_t f)
{
    return f == F_WKILL || f == F_WSTOP || f == F_WEXIT || f == F_WSEGV;
}

int fault_in_method(fault_t f)
{
    return f == F_WEXIT || f == F_WSEGV;
}

int fault_external_worker(fault_t f)
{
    return f == F_WKILL || f == F_WSTOP || f == F_WSTOP_DKILL;
}

const char *const chld_names[NCHLD] = {"default", "ignore", "reap", "eintr"};

void make_config(config_t *c, uint64_t seed, unsigned round, fault_t f, phase_t ph,
                 const int *chld_mask)
{
    uint64_t s = seed;
    memset(c, 0, sizeof(*c));
    c->seed = seed;
    c->round = round;
    c->fault = f;
    c->phase = ph;
    c->nproc = 1 + rnd(&s, MAXP);
    c->thread_actor = rnd(&s, 3) == 0;
    c->thread_pos = rnd(&s, c->nproc + 1);
    c->fanout = rnd(&s, 3) == 0;
    c->norder = 0;
    for (unsigned i = 0; i < c->nproc; i++)
        c->order[c->norder++] = i;
    if (c->thread_actor)
        c->order[c->norder++] = c->nproc;
    for (unsigned i = c->norder; i > 1; i--) {
        unsigned j = rnd(&s, i), t = c->order[i - 1];
        c->order[i - 1] = c->order[j];
        c->order[j] = t;
    }
    for (unsigned i = 0; i <= MAXP; i++)
        c->offset[i] = rnd(&s, 4);
    c->victim = rnd(&s, c->nproc);
    c->sleeper = rnd(&s, c->nproc);
    c->spin = ph == PH_TEARDOWN && rnd(&s, 5) == 0;
    c->max_inflight = 1 + rnd(&s, 8);
    c->dag_teardown_ms = 300 + (int)rnd(&s, 1201);
    c->stop_ms = 50 + (int)rnd(&s, 551);
    switch (ph) {
    case PH_CREATE:
        /* a worker: from the moment it appears; the driver: while the
         * actors left (from victim on, ~1 ms each) are created */
        c->delay_us = fault_external_worker(f) ? rnd(&s, 600)
                                               : rnd(&s, 1000 * (c->nproc - c->victim));
        break;
    case PH_COMPILE:
        c->delay_us = rnd(&s, 400); /* compiling takes 0.2-0.7 ms here */
        break;
    case PH_EXECUTE:
        c->delay_us = rnd(&s, 100000);
        break;
    default: {
        int cap = c->dag_teardown_ms - 100 < 400 ? c->dag_teardown_ms - 100 : 400;
        c->delay_us = rnd(&s, (unsigned)cap * 1000u);
    }
    }
    c->poison_after = rnd(&s, 20);
    c->long_ms = 2500 + (int)rnd(&s, 1501);
    c->nlong = 1 + rnd(&s, c->max_inflight);
    c->exec_ms = (int)(c->delay_us / 1000) + (f == F_DSTOP || f == F_WSTOP_DKILL ? c->stop_ms : 0) +
                 150 + (int)rnd(&s, 200);
    /* SIGCHLD: the default half of the time, else one of the others */
    int w[NCHLD] = {3, 1, 1, 1}, total = 0;
    for (int i = 0; i < NCHLD; i++)
        total += chld_mask[i] ? w[i] : 0;
    int pick = (int)rnd(&s, (unsigned)total);
    for (int i = 0; i < NCHLD; i++) {
        if (!chld_mask[i])
            continue;
        if (pick < w[i]) {
            c->chld = i;
            break;
        }
        pick -= w[i];
    }
    c->zero_arg = rnd(&s, 2) == 0;
    c->zero_actor = c->order[rnd(&s, c->norder)];
}

const char *code_meaning(int code)
{
    switch (code) {
    case XC_OK: return "ok";
    case XC_SETUP: return "setup failed before any fault";
    case XC_BAD_DATA: return "adag_dag_get returned ADAG_OK with wrong or missing data";
    case XC_LATE: return "a call returned more than 2 s after the worker died (or hung until it died)";
    case XC_GET_SLOW: return "adag_dag_get took longer than its timeout + 1 s";
    case XC_STATUS: return "a call returned an unexpected status";
    case XC_NAME: return "the error message does not name the dead actor";
    case XC_TEARDOWN_SLOW: return "teardown too slow";
    case XC_TEARDOWN_ERR: return "teardown returned an error";
    case XC_CHILDREN: return "a child process is left after adag_runtime_destroy";
    case XC_FDS: return "fds leaked in the driver";
    case XC_MEMFD: return "memfd mapping left in the driver";
    case XC_UNREPORTED: return "the worker died but no call reported ADAG_ERR_ACTOR_DIED";
    case XC_HEALTHY: return "ADAG_ERR_ACTOR_DIED for a healthy actor or before the fault";
    case XC_HEALTHY_KILLED: return "a healthy worker died in adag_dag_destroy (its actor handle is held)";
    case XC_AFTER: return "the runtime could not run a new DAG over the surviving actors";
    case XC_NOT_DELIVERED: return "the fault was not delivered (checker could not inject it)";
    default: return "unknown exit code";
    }
}

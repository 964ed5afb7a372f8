/*
 * Observation of a running DAG (statistics, the trace, the live view):
 * every actor is asked at once (its placement's ask_begin), the answers are
 * taken as they come (ask_end), and at one deadline the actors that have
 * not answered are left (ask_cancel): a stopped or stuck actor costs the
 * observer that timeout once, never the control timeout, and the others'
 * answers are kept. An actor whose earlier answer is still owed is not
 * waited for again (dag/proc/placement_process.c): it costs nothing until it
 * answers.
 */
#include "common/clock.h"
#include "dag/proc/proc.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void adag__answer_free(adag_answer_t *ans)
{
    adag__loop_figures_free(&ans->figures);
    free(ans->recs);
    memset(ans, 0, sizeof(*ans));
}

/* The state of local process pid from /proc ("stopped", "zombie"), or ""
 * when it runs, sleeps or cannot be read. */
static const char *proc_state(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return "";
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    if (!p || p[1] != ' ')
        return "";
    switch (p[2]) {
    case 'T':
    case 't':
        return ", stopped";
    case 'Z':
        return ", a zombie";
    case 'D':
        return ", in an uninterruptible wait";
    default:
        return "";
    }
}

/* why: "actor s1 (pid 4242, stopped) did not answer within 1000 ms" and
 * the reason, if any. */
static void no_answer(adag_actor_h a, int64_t timeout_ms, const char *reason, char *why)
{
    int pid = a->ops->pid ? a->ops->pid(a) : 0;
    char who[ADAG_MAX_NAME + ADAG_HOSTPORT_MAX + 64];
    if (a->node[0])
        snprintf(who, sizeof(who), "actor %s (remote, node %s)", a->name, a->node);
    else if (pid > 0)
        snprintf(who, sizeof(who), "actor %s (pid %d%s)", a->name, pid, proc_state(pid));
    else
        snprintf(who, sizeof(who), "actor %s", a->name);
    snprintf(why, ADAG_ERROR_MAX, "%s did not answer within %lld ms%s%s", who,
             (long long)timeout_ms, reason && reason[0] ? ": " : "", reason ? reason : "");
}

static void answered(adag_actor_h a, adag_status_t s, int64_t timeout_ms, adag_status_t *st,
                     char *why)
{
    *st = s;
    if (s == ADAG_ERR_TIMEOUT)
        no_answer(a, timeout_ms, adag_last_error(), why);
    else
        snprintf(why, ADAG_ERROR_MAX, "%s", s == ADAG_OK ? "" : adag_last_error());
}

void adag__answers_free(adag_answers_t *as)
{
    for (unsigned ai = 0; as->ans && ai < as->n; ai++)
        adag__answer_free(&as->ans[ai]);
    free(as->ans);
    free(as->st);
    free(as->why);
    memset(as, 0, sizeof(*as));
}

adag_status_t adag__actors_ask(adag_dag_run_t *run, adag_ask_t what, int64_t timeout_ms,
                              adag_answers_t *out)
{
    unsigned n = run->nactors, pending = 0;
    int64_t deadline = adag__deadline_ms(timeout_ms);
    struct pollfd *pfds = calloc(n + 1, sizeof(*pfds));
    unsigned *who = calloc(n + 1, sizeof(*who));
    unsigned char *waiting = calloc(n + 1, 1); /* asked, answer not yet taken */
    adag_answer_t *answers = calloc(n + 1, sizeof(*answers));
    adag_status_t *st = calloc(n + 1, sizeof(*st));
    char (*why)[ADAG_ERROR_MAX] = calloc(n + 1, sizeof(*why));
    adag_status_t result = ADAG_OK;
    *out = (adag_answers_t){answers, st, why, n};
    if (!pfds || !who || !waiting || !answers || !st || !why) {
        adag__answers_free(out);
        result = adag__error(ADAG_ERR_NO_MEMORY, "DAG %s: out of memory", run->name);
        goto out;
    }
    for (unsigned ai = 0; ai < n; ai++) {
        adag_actor_h a = run->actors[ai].actor;
        int wait = 0;
        adag_status_t s = a->ops->ask_begin(a, run, ai, what, deadline, &wait, &answers[ai]);
        if (s == ADAG_OK && wait) {
            waiting[ai] = 1;
            pending++;
        } else {
            answered(a, s, timeout_ms, &st[ai], why[ai]);
        }
    }
    while (pending) {
        unsigned np = 0;
        for (unsigned ai = 0; ai < n; ai++) {
            if (!waiting[ai])
                continue;
            adag_actor_h a = run->actors[ai].actor;
            pfds[np] = (struct pollfd){a->ops->step_fd(a), POLLIN, 0};
            who[np++] = ai;
        }
        /* past the deadline: one look without waiting at what came */
        int r = poll(pfds, np, adag__ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            for (unsigned k = 0; k < np; k++) {
                adag_actor_h a = run->actors[who[k]].actor;
                a->ops->ask_cancel(a);
                st[who[k]] = ADAG_ERR_TIMEOUT;
                no_answer(a, timeout_ms, r < 0 ? "poll failed" : NULL, why[who[k]]);
            }
            break;
        }
        for (unsigned k = 0; k < np; k++) {
            if (!pfds[k].revents)
                continue;
            unsigned ai = who[k];
            adag_actor_h a = run->actors[ai].actor;
            adag_status_t s = a->ops->ask_end(a, run, ai, what, deadline, &answers[ai]);
            answered(a, s, timeout_ms, &st[ai], why[ai]);
            waiting[ai] = 0;
            pending--;
        }
    }
out:
    free(pfds);
    free(who);
    free(waiting);
    return result;
}

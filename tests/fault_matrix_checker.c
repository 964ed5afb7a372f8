/* The fault matrix's checker (fault_matrix.h: run_round): forks the driver,
 * injects the round's fault when the driver reaches the phase, reads the
 * driver's report and checks that nothing of the round is left. */
#include "fault_matrix.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct {
    pid_t pid;
    int pidfd;
    int gone;
    char name[32];
} wk_t;

#define MAXW 32

static void reason(result_t *res, const char *fmt, ...) ADAG_PRINTF(2, 3);
static void reason(result_t *res, const char *fmt, ...)
{
    res->v = R_FAIL;
    if (res->nreasons >= MAXREASONS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->reasons[res->nreasons++], sizeof(res->reasons[0]), fmt, ap);
    va_end(ap);
}

static void note(result_t *res, const char *fmt, ...) ADAG_PRINTF(2, 3);
static void note(result_t *res, const char *fmt, ...)
{
    if (res->nnotes >= 16)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->notes[res->nnotes++], sizeof(res->notes[0]), fmt, ap);
    va_end(ap);
}

typedef struct {
    char names[64][128];
    int n;
} shm_list_t;

static void shm_snapshot(shm_list_t *l)
{
    l->n = 0;
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && l->n < 64) {
        /* bxfi_*: Criterion's files, of test binaries that may run on this
         * machine at the same time (never of a round's processes) */
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strncmp(e->d_name, "bxfi_", 5) == 0)
            continue;
        snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", e->d_name);
    }
    closedir(d);
}

typedef struct {
    shared_t *sh;
    pid_t child;
    int goff;
    wk_t w[MAXW];
    int nw;
    int victim_pidfd;
    pid_t victim_pid;
    int delivered;     /* 1: fault injected; -1: could not be */
    char undelivered[200];
    int64_t t_dkill;   /* when the driver got its SIGKILL */
    const char *landed;
    char errbuf[16384];
    size_t errlen;
    char lines[8192];
    size_t linelen;
    result_t *res;
    int driver_code_lines;
    int verbose;
} chk_t;

static wk_t *track(chk_t *k, pid_t pid, const char *name, pid_t expect_ppid)
{
    for (int i = 0; i < k->nw; i++)
        if (k->w[i].pid == pid)
            return &k->w[i];
    if (k->nw >= MAXW)
        return NULL;
    wk_t *w = &k->w[k->nw];
    memset(w, 0, sizeof(*w));
    w->pid = pid;
    snprintf(w->name, sizeof(w->name), "%s", name);
    w->pidfd = pidfd_open_(pid);
    if (w->pidfd < 0) {
        w->gone = 1;
    } else {
        fcntl(w->pidfd, F_SETFD, FD_CLOEXEC);
        pid_t ppid;
        char st;
        /* guard against a recycled pid: it must still be the driver's child
         * (or ours, once orphaned) */
        if (probe_stat(pid, &ppid, &st) != 0 || (ppid != expect_ppid && ppid != getpid())) {
            if (pidfd_exited(w->pidfd) || probe_stat(pid, &ppid, &st) != 0) {
                w->gone = 1;
            } else {
                close(w->pidfd);
                w->pidfd = -1;
                w->gone = 1;
            }
        }
    }
    k->nw++;
    return w;
}

/* The worker the fault targets: a known one, or at the create phase the
 * first new child of the driver (the actor being created). */
static int find_victim(chk_t *k, const config_t *c)
{
    if (c->phase != PH_CREATE) {
        char name[16];
        snprintf(name, sizeof(name), "fmP%u", c->victim);
        for (int i = 0; i < k->nw; i++)
            if (strcmp(k->w[i].name, name) == 0 && k->w[i].pidfd >= 0) {
                k->victim_pid = k->w[i].pid;
                k->victim_pidfd = k->w[i].pidfd;
                return 0;
            }
        snprintf(k->undelivered, sizeof(k->undelivered), "worker %s was not reported", name);
        return -1;
    }
    int64_t end = now_ns() + 3000000000LL;
    while (now_ns() < end) {
        pid_t kids[16];
        int n = children_of(k->child, kids, 16);
        for (int i = 0; i < n && i < 16; i++) {
            int known = 0;
            for (int j = 0; j < k->nw; j++)
                known |= k->w[j].pid == kids[i];
            /* only a worker that runs adag-worker: one stopped between its
             * clone and its exec has not run an instruction of its own, so
             * it cannot have armed its parent-death signal yet, and nothing
             * the kernel offers arms it at clone time; such a worker would
             * outlive a SIGKILLed driver until continued (README) */
            char comm[32];
            if (known || probe_comm(kids[i], comm, sizeof(comm)) != 0 ||
                strcmp(comm, "adag-worker") != 0)
                continue;
            char name[16];
            snprintf(name, sizeof(name), "fmP%u", c->victim);
            wk_t *w = track(k, kids[i], name, k->child);
            if (!w || w->pidfd < 0)
                continue;
            k->victim_pid = w->pid;
            k->victim_pidfd = w->pidfd;
            return 0;
        }
        sleep_us(200);
    }
    snprintf(k->undelivered, sizeof(k->undelivered),
             "no new worker of the driver appeared within 3 s of the create phase");
    return -1;
}

/* SIGSTOPs the victim worker and lets it stay stopped for c->stop_ms;
 * -1 (and the fault undelivered) if the signal could not be sent. */
static int stop_victim(chk_t *k, const config_t *c)
{
    if (pidfd_signal(k->victim_pidfd, SIGSTOP) != 0) {
        k->delivered = -1;
        snprintf(k->undelivered, sizeof(k->undelivered), "SIGSTOP of worker %d: %s",
                 (int)k->victim_pid, strerror(errno));
        return -1;
    }
    sleep_us((int64_t)c->stop_ms * 1000);
    return 0;
}

static void inject(chk_t *k, const config_t *c)
{
    char g = 'G';
    if (write_all(k->goff, &g, 1) != 0) {
        k->delivered = -1;
        snprintf(k->undelivered, sizeof(k->undelivered), "the driver is gone before the go");
        return;
    }
    if (fault_in_method(c->fault)) {
        k->delivered = 1; /* the driver sends the poison itself, at once */
        return;
    }
    if (fault_external_worker(c->fault) && find_victim(k, c) != 0) {
        k->delivered = -1;
        return;
    }
    sleep_us(c->delay_us);
    k->landed = phase_name(atomic_load(&k->sh->phase));
    switch (c->fault) {
    case F_DKILL:
        k->t_dkill = now_ns();
        kill(k->child, SIGKILL);
        k->delivered = 1;
        break;
    case F_DSTOP:
        kill(k->child, SIGSTOP);
        sleep_us((int64_t)c->stop_ms * 1000);
        k->t_dkill = now_ns();
        kill(k->child, SIGKILL);
        k->delivered = 1;
        break;
    case F_WKILL:
        atomic_store(&k->sh->killed_pid, k->victim_pid);
        atomic_store(&k->sh->kill_ns, now_ns());
        if (pidfd_signal(k->victim_pidfd, SIGKILL) == 0) {
            k->delivered = 1;
        } else {
            k->delivered = -1;
            snprintf(k->undelivered, sizeof(k->undelivered), "SIGKILL of worker %d: %s",
                     (int)k->victim_pid, strerror(errno));
        }
        break;
    case F_WSTOP:
        if (stop_victim(k, c) != 0)
            break;
        atomic_store(&k->sh->killed_pid, k->victim_pid);
        atomic_store(&k->sh->kill_ns, now_ns());
        if (pidfd_signal(k->victim_pidfd, SIGKILL) == 0) {
            k->delivered = 1;
        } else {
            /* the runtime killed the stopped worker first (teardown timeout):
             * the fault was still delivered */
            k->delivered = 1;
            note(k->res, "the stopped worker %d was gone before the checker's SIGKILL",
                 (int)k->victim_pid);
        }
        break;
    case F_WSTOP_DKILL:
        if (stop_victim(k, c) != 0)
            break;
        k->t_dkill = now_ns();
        kill(k->child, SIGKILL);
        k->delivered = 1;
        break;
    case F_WEXIT:
    case F_WSEGV:
        k->delivered = 1; /* the driver sends the poison itself */
        break;
    default:
        break;
    }
}

static void handle_line(chk_t *k, const config_t *c, char *line)
{
    if (line[0] == 'W') {
        unsigned idx;
        int pid;
        char name[32] = "";
        if (sscanf(line, "W %u %d %31s", &idx, &pid, name) >= 2 && pid > 0)
            track(k, pid, name, k->child);
    } else if (line[0] == 'P') {
        int ph = atoi(line + 2);
        if (ph == (int)c->phase && !k->delivered)
            inject(k, c);
    } else if (line[0] == 'E') {
        int code = atoi(line + 2);
        const char *text = strchr(line + 2, ' ');
        reason(k->res, "[driver code %d: %s] %s", code, code_meaning(code), text ? text + 1 : "");
        k->driver_code_lines++;
    } else if (line[0] == 'D') {
        k->res->detect_ms = atof(line + 2);
    } else if (line[0] == 'N') {
        note(k->res, "%s", line + 2);
    } else if (line[0] == 'V' && k->verbose) {
        note(k->res, "%s", line + 2);
    }
}

static void drain_lines(chk_t *k, const config_t *c, int fd, int *open_)
{
    for (;;) {
        if (k->linelen >= sizeof(k->lines) - 1)
            k->linelen = 0; /* a line this long is garbage */
        ssize_t n = read(fd, k->lines + k->linelen, sizeof(k->lines) - 1 - k->linelen);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                *open_ = 0;
            return;
        }
        k->linelen += (size_t)n;
        char *start = k->lines, *nl;
        while ((nl = memchr(start, '\n', k->linelen - (size_t)(start - k->lines))) != NULL) {
            *nl = '\0';
            handle_line(k, c, start);
            start = nl + 1;
        }
        size_t rest = k->linelen - (size_t)(start - k->lines);
        memmove(k->lines, start, rest);
        k->linelen = rest;
    }
}

static void drain_err(chk_t *k, int fd, int *open_)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                *open_ = 0;
            return;
        }
        size_t room = sizeof(k->errbuf) - 1 - k->errlen;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(k->errbuf + k->errlen, buf, take);
        k->errlen += take;
        k->errbuf[k->errlen] = '\0';
    }
}

/* Reaps every exited child of ours except `keep`; returns how many it reaped. */
static int reap_children(pid_t keep)
{
    int n = 0;
    pid_t kids[64];
    int nk = children_of(getpid(), kids, 64);
    for (int i = 0; i < nk && i < 64; i++) {
        if (kids[i] == keep)
            continue;
        if (waitpid(kids[i], NULL, WNOHANG) == kids[i])
            n++;
    }
    return n;
}

/* After the driver is gone: every worker must be gone within `wait_ms` of
 * `since`. Orphans are our children now (subreaper): track them too. Returns
 * the time the last one went (ns) or 0. Survivors are reported and killed. */
static int64_t check_workers_gone(chk_t *k, int64_t since, int wait_ms, const char *why)
{
    pid_t kids[64];
    int nk = children_of(getpid(), kids, 64);
    for (int i = 0; i < nk && i < 64; i++)
        track(k, kids[i], "(unreported worker)", getpid());
    int64_t deadline = since + (int64_t)wait_ms * 1000000, last = 0;
    for (;;) {
        int alive = 0;
        reap_children(0);
        for (int i = 0; i < k->nw; i++) {
            wk_t *w = &k->w[i];
            if (w->gone)
                continue;
            if (w->pidfd < 0 || pidfd_exited(w->pidfd)) {
                w->gone = 1;
                last = now_ns();
            } else {
                alive++;
            }
        }
        if (!alive || now_ns() > deadline)
            break;
        sleep_us(2000);
    }
    for (int i = 0; i < k->nw; i++) {
        wk_t *w = &k->w[i];
        if (w->gone)
            continue;
        char desc[600];
        probe_describe(w->pid, desc, sizeof(desc));
        reason(k->res, "worker %s pid %d still alive %.1f s after %s: %s", w->name, (int)w->pid,
               ms_of(now_ns() - since) / 1000.0, why, desc);
        pidfd_signal(w->pidfd, SIGKILL);
    }
    /* the ones we killed: wait for them (they are ours, or the driver's if it lives) */
    int64_t end = now_ns() + 5000000000LL;
    for (int i = 0; i < k->nw; i++) {
        wk_t *w = &k->w[i];
        while (!w->gone && now_ns() < end) {
            reap_children(0);
            if (pidfd_exited(w->pidfd))
                w->gone = 1;
            else
                sleep_us(2000);
        }
        if (!w->gone)
            reason(k->res, "worker %d survived SIGKILL for 5 s", (int)w->pid);
    }
    reap_children(0);
    return last;
}

void run_round(const config_t *c, int round_limit_ms, int verbose, shared_t *sh,
               result_t *res)
{
    memset(res, 0, sizeof(*res));
    res->v = R_PASS;
    res->detect_ms = -1;
    res->landed = phase_name(c->phase);
    int64_t t_start = now_ns();
    int fds0 = probe_count_fds();
    static shm_list_t shm0, shm1;
    shm_snapshot(&shm0);

    memset(sh, 0, sizeof(*sh));
    atomic_store(&sh->phase, -1);
    int prog[2], gop[2], errp[2];
    if (pipe2(prog, O_CLOEXEC) || pipe2(gop, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
        reason(res, "checker: pipe2: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        reason(res, "checker: fork: %s", strerror(errno));
        return;
    }
    if (child == 0) {
        signal(SIGPIPE, SIG_DFL);
        close(prog[0]);
        close(gop[1]);
        close(errp[0]);
        dup2(errp[1], 2); /* the driver's (and its workers') stderr comes to the checker */
        close(errp[1]);
        _exit(driver_main(c, sh, prog[1], gop[0]));
    }
    close(prog[1]);
    close(gop[0]);
    close(errp[1]);
    fcntl(prog[0], F_SETFL, O_NONBLOCK);
    fcntl(errp[0], F_SETFL, O_NONBLOCK);

    static chk_t kk;
    chk_t *k = &kk;
    memset(k, 0, sizeof(*k));
    k->sh = sh;
    k->child = child;
    k->goff = gop[1];
    k->victim_pidfd = -1;
    k->res = res;
    k->landed = NULL;
    k->verbose = verbose;
    int dpfd = pidfd_open_(child);
    int prog_open = 1, err_open = 1, hang = 0, exited = 0;
    int64_t deadline = t_start + (int64_t)round_limit_ms * 1000000;
    while (!exited) {
        struct pollfd p[3];
        nfds_t n = 0;
        int ip = -1, ie = -1, id = -1;
        if (prog_open) {
            p[n].fd = prog[0];
            p[n].events = POLLIN;
            ip = (int)n++;
        }
        if (err_open) {
            p[n].fd = errp[0];
            p[n].events = POLLIN;
            ie = (int)n++;
        }
        if (dpfd >= 0) {
            p[n].fd = dpfd;
            p[n].events = POLLIN;
            id = (int)n++;
        }
        int r = poll(p, n, 50);
        if (r < 0 && errno != EINTR)
            break;
        if (ip >= 0 && p[ip].revents)
            drain_lines(k, c, prog[0], &prog_open);
        if (ie >= 0 && p[ie].revents)
            drain_err(k, errp[0], &err_open);
        if ((id >= 0 && p[id].revents) || (dpfd < 0 && !prog_open))
            exited = 1;
        if (!exited && now_ns() > deadline && !hang) {
            hang = 1;
            char act[sizeof(sh->activity)];
            memcpy(act, sh->activity, sizeof(act));
            act[sizeof(act) - 1] = '\0';
            reason(res, "HANG: the driver did not finish within %d s (phase %s, doing: %s)",
                   round_limit_ms / 1000, phase_name(atomic_load(&sh->phase)), act);
            k->t_dkill = now_ns();
            kill(child, SIGKILL);
        }
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (dpfd >= 0)
        close(dpfd);
    /* what the driver wrote before it ended (not "until EOF": a worker
     * stopped between fork and exec still holds the pipe) */
    if (prog_open)
        drain_lines(k, c, prog[0], &prog_open);
    drain_err(k, errp[0], &err_open);

    if (k->landed)
        res->landed = k->landed;
    int killed_by_us = k->t_dkill != 0;
    if (killed_by_us) {
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
            reason(res, "the driver ended with status 0x%x before the checker's SIGKILL", status);
        unsigned before = res->nreasons;
        int64_t last = check_workers_gone(k, k->t_dkill, PROMPT_MS,
                                          hang ? "the hung driver was killed"
                                               : "their driver was killed");
        if (!hang && res->nreasons == before)
            res->detect_ms = last ? ms_of(last - k->t_dkill) : 0;
    } else {
        if (WIFSIGNALED(status)) {
            reason(res, "the driver died of signal %d (%s)", WTERMSIG(status),
                   strsignal(WTERMSIG(status)));
        } else if (WIFEXITED(status)) {
            res->driver_code = WEXITSTATUS(status);
            if (res->driver_code == XC_NOT_DELIVERED && res->nreasons <= 1) {
                res->v = R_SKIP;
                res->nreasons = 0;
                snprintf(res->skip_why, sizeof(res->skip_why), "%s", code_meaning(XC_NOT_DELIVERED));
            } else if (res->driver_code != 0) {
                if (!k->driver_code_lines)
                    reason(res, "the driver exited with code %d (%s)", res->driver_code,
                           code_meaning(res->driver_code));
            } else if (k->driver_code_lines) {
                reason(res, "the driver reported failures but exited 0");
            }
        }
        /* the driver is gone: nothing of the round may remain */
        int before = res->nreasons;
        check_workers_gone(k, now_ns(), 0, "their driver exited");
        for (unsigned i = (unsigned)before; i < res->nreasons; i++) {
            char tmp[600];
            snprintf(tmp, sizeof(tmp), "process left after the round: %s", res->reasons[i]);
            snprintf(res->reasons[i], sizeof(res->reasons[i]), "%s", tmp);
        }
    }
    if (k->delivered <= 0 && res->v == R_PASS) {
        res->v = R_SKIP;
        snprintf(res->skip_why, sizeof(res->skip_why), "fault not delivered: %s",
                 k->delivered < 0 ? k->undelivered : "the driver never reached the phase");
    }
    /* hygiene of the round */
    int nk = children_of(getpid(), NULL, 0);
    if (nk) {
        reason(res, "%d child process(es) of the checker left after the round", nk);
        pid_t kids[64];
        nk = children_of(getpid(), kids, 64);
        for (int i = 0; i < nk && i < 64; i++) {
            kill(kids[i], SIGKILL);
            waitpid(kids[i], NULL, 0);
        }
    }
    for (int i = 0; i < k->nw; i++)
        if (k->w[i].pidfd >= 0)
            close(k->w[i].pidfd);
    close(prog[0]);
    close(gop[1]);
    close(errp[0]);
    int fds1 = probe_count_fds();
    if (fds1 != fds0)
        reason(res, "the checker has %d fds after the round, %d before", fds1, fds0);
    shm_snapshot(&shm1);
    for (int i = 0; i < shm1.n; i++) {
        int old = 0;
        for (int j = 0; j < shm0.n; j++)
            old |= strcmp(shm1.names[i], shm0.names[j]) == 0;
        if (!old)
            reason(res, "new file left in /dev/shm: %s", shm1.names[i]);
    }
    if (res->v == R_FAIL && k->errlen) {
        /* the library's log (ADAG_LOG_LEVEL=2) helps to read a failure: its
         * last lines */
        char *lines[6];
        int nl = 0;
        for (char *q = k->errbuf + k->errlen; q > k->errbuf && nl < 6;) {
            while (q > k->errbuf && (q[-1] == '\n' || q[-1] == '\0'))
                *--q = '\0';
            char *b = q;
            while (b > k->errbuf && b[-1] != '\n')
                b--;
            if (b == q)
                break;
            lines[nl++] = b;
            q = b;
        }
        for (int i = nl - 1; i >= 0; i--)
            note(res, "driver stderr: %.300s", lines[i]);
    }
    res->secs = ms_of(now_ns() - t_start) / 1000.0;
}

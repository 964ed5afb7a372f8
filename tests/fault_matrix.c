/*
 * Fault matrix: a plain program (not Criterion: it forks drivers and kills
 * them; its files are listed in fault_matrix.h) that runs many seeded
 * rounds. Each round forks a child "driver" that creates a runtime, 1-4
 * process actors of class "counter" (and maybe a thread actor), builds a
 * random chain or fan-out graph (half of them with one more output from a
 * method of no argument, "+0" in the shape), compiles it and executes it;
 * the parent,
 * the "checker", injects one fault at one phase:
 *
 *   faults: driver-kill        SIGKILL the driver
 *           driver-stop-kill   SIGSTOP the driver, then SIGKILL it
 *           worker-kill        SIGKILL a worker
 *           worker-stop-kill   SIGSTOP a worker, then SIGKILL it
 *           worker-exit        a worker calls exit(7) inside a method (die_if 7)
 *           worker-segv        a worker segfaults inside a method (die_if 11)
 *           worker-stop+driver-kill  SIGSTOP a worker, then SIGKILL the driver
 *   phases: create   (adag_actor_create in progress; worker-exit/-segv: a
 *                     "crashy" actor whose init calls exit / segfaults)
 *           compile  (adag_graph_compile in progress; worker-exit/-segv: the
 *                     poison runs on a small DAG over the same actor while
 *                     the main graph compiles)
 *           execute  (executions and gets in flight)
 *           teardown (adag_dag_destroy / adag_runtime_destroy with long
 *                     methods in flight)
 *
 * What is checked (see the failure codes below, printed with their meaning):
 *   - a worker died: the driver keeps running; every call it makes after the
 *     death returns within 2 s of it; gets return ADAG_ERR_ACTOR_DIED naming
 *     the actor, or ADAG_OK with the exact expected values (never for an
 *     execution started after the death, never for the poison); no get takes
 *     more than its timeout + 1 s; then adag_runtime_destroy finishes in a
 *     few seconds and leaves no child, no fd, no memfd mapping in the driver;
 *   - the driver died: every worker is gone within 2 s (the checker is a
 *     child subreaper, so orphaned workers become its children);
 *   - after every round: no process of the round left, no new file in
 *     /dev/shm, the checker's fd count unchanged; a driver that does not
 *     finish within the round limit is killed and reported as a HANG.
 *
 * Usage: fault-matrix [SEED] [--seed N] [--rounds N] [--seconds S] [--start I]
 *                     [--fault a,b] [--phase a,b] [--round-limit S] [-v]
 * Round i of seed S is reproduced by: fault-matrix --seed S --start i --rounds 1
 * (with the same --fault/--phase filters). The last line is
 * "fault-matrix: N passed, M failed[, K skipped]"; the exit status is 1 if
 * any round failed.
 */
#include "fault_matrix.h"

#include <ctype.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

static int parse_list(const char *arg, const char *const *names, int n, int *mask)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(tok, names[i]) == 0) {
                mask[i] = 1;
                found = 1;
            }
        if (!found) {
            fprintf(stderr, "fault-matrix: unknown name '%s'; one of:", tok);
            for (int i = 0; i < n; i++)
                fprintf(stderr, " %s", names[i]);
            fprintf(stderr, "\n");
            return -1;
        }
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: fault-matrix [SEED] [--seed N] [--rounds N] [--seconds S] [--start I]\n"
            "                    [--fault a,b] [--phase a,b] [--sigchld a,b] [--round-limit S] [-v]\n"
            "  --seconds S: start no new round after S seconds (default 50; 0: no limit)\n"
            "  --rounds N: at most N rounds (default: as many as the time allows)\n"
            "  --start I: first round index (reproduce round I: --start I --rounds 1)\n");
}

int main(int argc, char **argv)
{
    uint64_t seed = 20261122;
    long rounds = -1, start = 0;
    double seconds = 50;
    int round_limit_s = 15, verbose = 0;
    int fmask[NFAULTS] = {0}, pmask[NPHASES] = {0}, fset = 0, pset = 0;
    int cmask[NCHLD] = {1, 1, 1, 1};
    char filters[300] = "";

    /* one line per round as it ends, also into a file or a pipe (CI) */
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--seed") == 0 && v) {
            seed = strtoull(v, NULL, 0);
            i++;
        } else if (strcmp(a, "--rounds") == 0 && v) {
            rounds = atol(v);
            i++;
        } else if (strcmp(a, "--seconds") == 0 && v) {
            seconds = atof(v);
            i++;
        } else if (strcmp(a, "--start") == 0 && v) {
            start = atol(v);
            i++;
        } else if (strcmp(a, "--round-limit") == 0 && v) {
            round_limit_s = atoi(v);
            i++;
        } else if (strcmp(a, "--fault") == 0 && v) {
            if (parse_list(v, fault_names, NFAULTS, fmask))
                return 2;
            fset = 1;
            snprintf(filters + strlen(filters), sizeof(filters) - strlen(filters), " --fault %s", v);
            i++;
        } else if (strcmp(a, "--phase") == 0 && v) {
            if (parse_list(v, phase_names, NPHASES, pmask))
                return 2;
            pset = 1;
            snprintf(filters + strlen(filters), sizeof(filters) - strlen(filters), " --phase %s", v);
            i++;
        } else if (strcmp(a, "--sigchld") == 0 && v) {
            memset(cmask, 0, sizeof(cmask));
            if (parse_list(v, chld_names, NCHLD, cmask))
                return 2;
            snprintf(filters + strlen(filters), sizeof(filters) - strlen(filters), " --sigchld %s",
                     v);
            i++;
        } else if (strcmp(a, "-v") == 0) {
            verbose = 1;
        } else if (isdigit((unsigned char)a[0])) {
            seed = strtoull(a, NULL, 0);
        } else {
            usage();
            return 2;
        }
    }
    if (round_limit_s < 5)
        round_limit_s = 5;

    /* combos */
    int combos[NFAULTS * NPHASES][2], ncombos = 0;
    for (int f = 0; f < NFAULTS; f++)
        for (int p = 0; p < NPHASES; p++)
            if ((!fset || fmask[f]) && (!pset || pmask[p])) {
                combos[ncombos][0] = f;
                combos[ncombos][1] = p;
                ncombos++;
            }
    if (!ncombos) {
        fprintf(stderr, "fault-matrix: no fault/phase combination selected\n");
        return 2;
    }

    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        fprintf(stderr, "fault-matrix: prctl(PR_SET_CHILD_SUBREAPER): %s\n", strerror(errno));
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    /* the drivers log the runtime's warnings (collected with their stderr)
     * and wait ADAG_TEARDOWN_TIMEOUT_MS for a worker in adag_runtime_destroy */
    setenv("ADAG_LOG_LEVEL", "2", 0);
    char td[16];
    snprintf(td, sizeof(td), "%d", RT_TEARDOWN_MS);
    setenv("ADAG_TEARDOWN_TIMEOUT_MS", td, 1);

    shared_t *sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    if (sh == MAP_FAILED) {
        fprintf(stderr, "fault-matrix: mmap: %s\n", strerror(errno));
        return 2;
    }

    printf("fault-matrix: seed %" PRIu64 ", %d fault/phase combinations, budget %.0f s%s%s\n", seed,
           ncombos, seconds, filters[0] ? ", filters:" : "", filters);
    fflush(stdout);

    int passed = 0, failed = 0, skipped = 0, ran = 0;
    int tally[NFAULTS][NPHASES][3];
    memset(tally, 0, sizeof(tally));
    int64_t t0 = now_ns();
    double worst = 0;
    static result_t res;
    for (long i = start; rounds < 0 || i < start + rounds; i++) {
        if (seconds > 0 && ms_of(now_ns() - t0) / 1000.0 >= seconds)
            break;
        /* every cycle of ncombos rounds runs each combination once, in a
         * seeded order */
        long cycle = i / ncombos, pos = i % ncombos;
        int perm[NFAULTS * NPHASES];
        for (int j = 0; j < ncombos; j++)
            perm[j] = j;
        uint64_t ps = seed * 0x2545f4914f6cdd1dull + (uint64_t)cycle;
        for (int j = ncombos; j > 1; j--) {
            int r = (int)rnd(&ps, (unsigned)j), t = perm[j - 1];
            perm[j - 1] = perm[r];
            perm[r] = t;
        }
        int f = combos[perm[pos]][0], p = combos[perm[pos]][1];
        uint64_t rs = seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
        uint64_t rs2 = rs;
        rs = splitmix64(&rs2);
        config_t c;
        make_config(&c, rs, (unsigned)i, (fault_t)f, (phase_t)p, cmask);
        run_round(&c, round_limit_s * 1000, verbose, sh, &res);
        ran++;
        if (res.secs > worst)
            worst = res.secs;
        char shape[64];
        snprintf(shape, sizeof(shape), "%u%s %s%s k=%u%s%s", c.nproc, c.thread_actor ? "+T" : "",
                 c.fanout ? "fanout" : "chain", c.zero_arg ? "+0" : "", c.max_inflight,
                 c.chld != CHLD_DEFAULT ? " chld=" : "", c.chld != CHLD_DEFAULT ? chld_names[c.chld] : "");
        char det[32] = "-";
        if (res.detect_ms >= 0)
            snprintf(det, sizeof(det), "%.1fms", res.detect_ms);
        char landed[40] = "";
        if (strcmp(res.landed, phase_name(c.phase)) != 0)
            snprintf(landed, sizeof(landed), " (landed: %s)", res.landed);
        const char *verdict = res.v == R_PASS ? "PASS" : res.v == R_FAIL ? "FAIL" : "SKIP";
        printf("[%4ld] seed=%016" PRIx64 " %-23s %-8s%s  %-30s %s  detect=%s  %.2fs\n", i, c.seed,
               fault_names[f], phase_name(p), landed, shape, verdict, det, res.secs);
        if (res.v == R_SKIP)
            printf("       skipped: %s\n", res.skip_why);
        if (res.v == R_FAIL) {
            for (unsigned j = 0; j < res.nreasons; j++)
                printf("       - %s\n", res.reasons[j]);
            if (res.nreasons >= MAXREASONS)
                printf("       - (more not shown)\n");
        }
        if (res.v == R_FAIL || verbose)
            for (unsigned j = 0; j < res.nnotes; j++)
                printf("       note: %s\n", res.notes[j]);
        if (res.v == R_FAIL)
            printf("       reproduce: %s --seed %" PRIu64 " --start %ld --rounds 1%s\n", argv[0],
                   seed, i, filters);
        fflush(stdout);
        tally[f][p][res.v]++;
        if (res.v == R_PASS)
            passed++;
        else if (res.v == R_FAIL)
            failed++;
        else
            skipped++;
    }
    double total = ms_of(now_ns() - t0) / 1000.0;
    printf("\nper combination (passed/failed/skipped):\n%-24s", "");
    for (int p = 0; p < NPHASES; p++)
        printf(" %-12s", phase_name(p));
    printf("\n");
    for (int f = 0; f < NFAULTS; f++) {
        printf("%-24s", fault_names[f]);
        for (int p = 0; p < NPHASES; p++) {
            char cell[24];
            snprintf(cell, sizeof(cell), "%d/%d/%d", tally[f][p][R_PASS], tally[f][p][R_FAIL],
                     tally[f][p][R_SKIP]);
            printf(" %-12s", cell);
        }
        printf("\n");
    }
    printf("ran %d rounds in %.1f s (%.2f s per round, slowest %.2f s), seed %" PRIu64 "\n", ran,
           total, ran ? total / ran : 0.0, worst, seed);
    if (skipped)
        printf("fault-matrix: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("fault-matrix: %d passed, %d failed\n", passed, failed);
    munmap(sh, sizeof(shared_t));
    return failed ? 1 : 0;
}

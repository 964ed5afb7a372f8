/*
 * adag-worker --pmix [-- PROGRAM ARGS...]: one rank of a job that a PMIx
 * launcher started (`mpirun -np N adag-worker --pmix -- ./driver`, or
 * `srun --mpi=pmix ...`).
 *
 *   rank 0     makes the job's token (32 random bytes, hex), publishes it
 *              with PMIx_Put, fences, reads every other rank's agent
 *              address, and runs PROGRAM (the driver) with ADAG_HOSTS
 *              naming each rank's agent by its rank ("1=ip:port,...") and
 *              ADAG_TOKEN set; when PROGRAM exits it fences once more, which
 *              ends the other ranks, and exits with PROGRAM's status.
 *   rank >= 1  listens (first up non-loopback IPv4 address, any port),
 *              publishes "ip:port", fences, reads rank 0's token and serves
 *              as an agent (dag/proc/agent.c) until rank 0's last fence.
 *
 * PMIx keeps what is put within the job: the token never reaches a command
 * line or a file. Without libpmix-dev at build time this says so.
 */
#include "dag/proc/worker.h"

#ifdef ADAG_HAVE_PMIX

#include "common/error.h"
#include "transport/tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pmix.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEY_TOKEN "adag.token"
#define KEY_AGENT "adag.agent"

static pmix_proc_t me;

/* The address other hosts reach this one at: the first up, non-loopback
 * IPv4 interface's; loopback when there is none. */
static void host_address(char *out, size_t len)
{
    struct ifaddrs *ifs = NULL, *i;
    snprintf(out, len, "127.0.0.1");
    if (getifaddrs(&ifs) != 0)
        return;
    for (i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK)) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out,
                      (socklen_t)len);
            break;
        }
    freeifaddrs(ifs);
}

static int put_string(const char *key, const char *value)
{
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, value, PMIX_STRING);
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    PMIX_VALUE_DESTRUCT(&v);
    if (rc == PMIX_SUCCESS)
        rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
        fprintf(stderr, "adag-worker --pmix rank %u: publishing %s: %s\n", me.rank, key,
                PMIx_Error_string(rc));
    return rc == PMIX_SUCCESS ? 0 : -1;
}

static int get_string(pmix_rank_t rank, const char *key, char *out, size_t len)
{
    pmix_proc_t p;
    pmix_value_t *v = NULL;
    PMIX_LOAD_PROCID(&p, me.nspace, rank);
    pmix_status_t rc = PMIx_Get(&p, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || !v || v->type != PMIX_STRING || !v->data.string ||
        strlen(v->data.string) >= len) {
        fprintf(stderr, "adag-worker --pmix rank %u: reading %s of rank %u: %s\n", me.rank, key,
                rank, rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "not a string that fits");
        if (v)
            PMIX_VALUE_RELEASE(v);
        return -1;
    }
    snprintf(out, len, "%s", v->data.string);
    PMIX_VALUE_RELEASE(v);
    return 0;
}

static int fence(int collect)
{
    pmix_proc_t all;
    pmix_info_t info;
    bool yes = true;
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    pmix_status_t rc = PMIx_Fence(&all, 1, collect ? &info : NULL, collect ? 1 : 0);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS)
        fprintf(stderr, "adag-worker --pmix rank %u: fence: %s\n", me.rank,
                PMIx_Error_string(rc));
    return rc == PMIX_SUCCESS ? 0 : -1;
}

static uint32_t job_size(void)
{
    pmix_proc_t job;
    pmix_value_t *v = NULL;
    uint32_t n = 0;
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    if (PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v) == PMIX_SUCCESS && v) {
        if (v->type == PMIX_UINT32)
            n = v->data.uint32;
        PMIX_VALUE_RELEASE(v);
    }
    return n;
}

static pid_t child = -1;

static void forward_signal(int sig)
{
    if (child > 0)
        kill(child, sig);
}

/* Rank 0: the token, the others' addresses, the driver. */
static int run_driver(char **prog)
{
    unsigned char raw[32];
    char token[2 * sizeof(raw) + 1];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        fprintf(stderr, "adag-worker --pmix: getrandom: %s\n", strerror(errno));
        return 2;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(token + 2 * i, 3, "%02x", raw[i]);
    if (put_string(KEY_TOKEN, token) != 0 || fence(1) != 0)
        return 2;
    uint32_t n = job_size();
    size_t cap = 64 + (size_t)n * (ADAG_HOSTPORT_MAX + 16);
    char *hosts = calloc(1, cap);
    if (!hosts)
        return 2;
    size_t used = 0;
    for (uint32_t r = 1; r < n; r++) {
        char addr[ADAG_HOSTPORT_MAX];
        if (get_string(r, KEY_AGENT, addr, sizeof(addr)) != 0) {
            free(hosts);
            return 2;
        }
        used += (size_t)snprintf(hosts + used, cap - used, "%s%u=%s", r > 1 ? "," : "", r, addr);
    }
    setenv("ADAG_HOSTS", hosts, 1);
    setenv("ADAG_TOKEN", token, 1);
    unsetenv("ADAG_TOKEN_FILE");
    free(hosts);
    int status = 0;
    child = fork();
    if (child < 0) {
        fprintf(stderr, "adag-worker --pmix: fork: %s\n", strerror(errno));
        status = 2;
    } else if (child == 0) {
        execvp(prog[0], prog);
        fprintf(stderr, "adag-worker --pmix: cannot run %s: %s\n", prog[0], strerror(errno));
        _exit(127);
    } else {
        signal(SIGINT, forward_signal);
        signal(SIGTERM, forward_signal);
        int ws;
        while (waitpid(child, &ws, 0) < 0 && errno == EINTR) {
        }
        status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    }
    /* the driver is done: the agents' last fence */
    fence(0);
    return status;
}

static void job_over(pmix_status_t status, void *arg)
{
    (void)status;
    int fd = *(int *)arg;
    char b = 1;
    ssize_t w = write(fd, &b, 1);
    (void)w;
}

/* Ranks >= 1: an agent for rank 0's driver, until rank 0's last fence. */
static int run_agent(void)
{
    char ip[64], listen_at[96], bound[ADAG_HOSTPORT_MAX], token[ADAG_TOKEN_MAX];
    int lfd;
    host_address(ip, sizeof(ip));
    snprintf(listen_at, sizeof(listen_at), "%s:0", ip);
    if (adag__tcp_listen(listen_at, &lfd, bound, sizeof(bound)) != ADAG_OK) {
        fprintf(stderr, "adag-worker --pmix rank %u: %s\n", me.rank, adag_last_error());
        return 2;
    }
    if (put_string(KEY_AGENT, bound) != 0 || fence(1) != 0 ||
        get_string(0, KEY_TOKEN, token, sizeof(token)) != 0)
        return 2;
    static int stop[2];
    if (pipe(stop) != 0)
        return 2;
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    pmix_status_t rc = PMIx_Fence_nb(&all, 1, NULL, 0, job_over, &stop[1]);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "adag-worker --pmix rank %u: fence: %s\n", me.rank,
                PMIx_Error_string(rc));
        return 2;
    }
    adag__agent_serve(lfd, bound, token, strlen(token), stop[0]);
    memset(token, 0, sizeof(token));
    return 0;
}

int adag__pmix_main(int argc, char **argv)
{
    char **prog = NULL;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            prog = i + 1 < argc ? &argv[i + 1] : NULL;
            break;
        }
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr,
                "adag-worker --pmix: PMIx_Init: %s (run it under mpirun or srun --mpi=pmix)\n",
                PMIx_Error_string(rc));
        return 2;
    }
    int status;
    if (me.rank == 0 && !prog) {
        fprintf(stderr, "adag-worker --pmix: rank 0 runs the driver: "
                        "adag-worker --pmix -- PROGRAM [ARGS...]\n");
        status = 2;
    } else {
        status = me.rank == 0 ? run_driver(prog) : run_agent();
    }
    PMIx_Finalize(NULL, 0);
    return status;
}

#else

#include <stdio.h>

int adag__pmix_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "adag-worker --pmix: this adag was built without PMIx (libpmix-dev)\n");
    return 2;
}

#endif

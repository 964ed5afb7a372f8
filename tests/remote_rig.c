/* Agents on loopback for the remote-actor tests (tests/remote_rig.h). */
#include "remote_rig.h"

#include "helpers.h"
#include "netns_rig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define AGENT_PATH ADAG_TEST_BUILD_DIR "/adag-worker"

void h_token_file(char *path, size_t len, const char *token)
{
    snprintf(path, len, "/tmp/adag-token-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(fchmod(fd, 0600), 0);
    cr_assert_eq(write(fd, token, strlen(token)), (ssize_t)strlen(token));
    cr_assert_eq(write(fd, "\n", 1), 1);
    close(fd);
}

void h_agent_start(h_agent_t *ag, const char *token, unsigned port)
{
    h_agent_start_in(ag, token, "127.0.0.1", port, NULL);
}

void h_agent_start_in(h_agent_t *ag, const char *token, const char *ip, unsigned port,
                      const char *netns)
{
    char portfile[128];
    memset(ag, 0, sizeof(*ag));
    h_token_file(ag->token, sizeof(ag->token), token);
    snprintf(ag->log, sizeof(ag->log), "%s.log", ag->token);
    snprintf(portfile, sizeof(portfile), "%s.port", ag->token);
    unlink(portfile);
    char listen[64];
    snprintf(listen, sizeof(listen), "%s:%u", ip, port);
    ag->pid = fork();
    cr_assert_geq(ag->pid, 0);
    if (ag->pid == 0) {
        /* the agent dies with the test (a test killed by its timeout
         * leaves none behind); its output goes to its log */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (netns && h_netns_join(netns) != 0)
            _exit(125);
        int log = open(ag->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (log < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0)
            _exit(126);
        setenv("ADAG_TOKEN_FILE", ag->token, 1);
        unsetenv("ADAG_TOKEN");
        execl(AGENT_PATH, AGENT_PATH, "--agent", listen, "--port-file", portfile, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) { /* 5 s */
        FILE *f = fopen(portfile, "r");
        if (f) {
            int ok = fscanf(f, "%63s", ag->addr) == 1;
            fclose(f);
            if (ok) {
                unlink(portfile);
                return;
            }
        }
        int status;
        cr_assert_eq(waitpid(ag->pid, &status, WNOHANG), 0, "the agent exited (log %s)",
                     ag->log);
        usleep(10000);
    }
    cr_assert_fail("the agent did not listen within 5 s (log %s)", ag->log);
}

void h_agent_stop(h_agent_t *ag)
{
    if (ag->pid > 0) {
        kill(ag->pid, SIGKILL);
        waitpid(ag->pid, NULL, 0);
        ag->pid = 0;
    }
}

void h_agent_cleanup(h_agent_t *ag)
{
    h_agent_stop(ag);
    unlink(ag->token);
    unlink(ag->log);
}

int h_agent_log_count(const h_agent_t *ag, const char *needle)
{
    FILE *f = fopen(ag->log, "r");
    if (!f)
        return 0;
    char *text = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (cap - n < 4096) {
            cap = cap ? 2 * cap : 65536;
            char *grown = realloc(text, cap);
            cr_assert_not_null(grown);
            text = grown;
        }
        size_t k = fread(text + n, 1, cap - n - 1, f);
        if (k == 0)
            break;
        n += k;
    }
    fclose(f);
    text[n] = '\0';
    int count = 0;
    for (const char *at = text; (at = strstr(at, needle)) != NULL; at += strlen(needle))
        count++;
    free(text);
    return count;
}

int h_agent_logged(const h_agent_t *ag, const char *needle)
{
    return h_agent_log_count(ag, needle) > 0;
}

int h_agent_connect(const h_agent_t *ag)
{
    char host[64];
    snprintf(host, sizeof(host), "%s", ag->addr);
    char *colon = strrchr(host, ':');
    cr_assert_not_null(colon);
    *colon = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    cr_assert_eq(inet_pton(AF_INET, host, &sa.sin_addr), 1);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0,
                 "connecting to the agent at %s: %s", ag->addr, strerror(errno));
    return fd;
}

int h_agent_children(const h_agent_t *ag)
{
    return probe_children(ag->pid, NULL, 0, NULL);
}

adag_actor_params_t h_remote_params(const h_agent_t *ag, const char *name, const int64_t *offset)
{
    adag_actor_params_t p = h_actor_params_init("counter", ADAG_PLACEMENT_REMOTE, name, offset,
                                                sizeof(*offset));
    p.field_mask |= ADAG_ACTOR_PARAM_MODULE | ADAG_ACTOR_PARAM_NODE;
    p.module_path = ADAG_TEST_MODULE;
    p.node = ag->addr;
    return p;
}

void h_agents_in_hosts(const h_netns_t *hosts, h_agent_t *ag, unsigned nagents,
                       const char *token)
{
    h_netns_ucx_env();
    cr_assert_eq(h_netns_join(hosts->ns[0]), 0, "joining %s: %s", hosts->ns[0],
                 strerror(errno));
    for (unsigned i = 1; i <= nagents; i++)
        h_agent_start_in(&ag[i], token, hosts->ip[i], 0, hosts->ns[i]);
}

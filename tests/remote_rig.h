/*
 * Agents for the tests of remote actors (tests/test_remote.c): a real
 * `adag-worker --agent` process on loopback, with a token file of its own.
 */
#ifndef ADAG_TESTS_REMOTE_RIG_H
#define ADAG_TESTS_REMOTE_RIG_H

#include <adag.h>
#include <sys/types.h>

struct h_netns;

typedef struct {
    pid_t pid;
    char addr[64];      /* "ip:port" */
    char log[128];      /* its stderr */
    char token[128];    /* its token file */
} h_agent_t;

/* Writes a 0600 token file holding `token` into path (a mkstemp name). */
void h_token_file(char *path, size_t len, const char *token);
/* Starts an agent on 127.0.0.1 (port 0: any; else that one) checking the
 * token `token`; waits until it listens. */
void h_agent_start(h_agent_t *ag, const char *token, unsigned port);
/* The same listening on `ip` (port 0: any; else that one) inside the
 * network namespace named netns (NULL: this one's). */
void h_agent_start_in(h_agent_t *ag, const char *token, const char *ip, unsigned port,
                      const char *netns);
/* In hosts made by h_netns_up (tests/netns_rig.h): UCX over TCP for this
 * process, this thread (the driver) moved into host 0, and an agent
 * checking `token` started in each of hosts 1 .. nagents (ag[i]). */
void h_agents_in_hosts(const struct h_netns *hosts, h_agent_t *ag, unsigned nagents,
                       const char *token);
/* SIGKILLs and reaps the agent (its workers are not its children's
 * concern: they end with their drivers' connections). */
void h_agent_stop(h_agent_t *ag);
/* Removes its files. */
void h_agent_cleanup(h_agent_t *ag);
/* Whether the agent's log has `needle`. */
int h_agent_logged(const h_agent_t *ag, const char *needle);
/* How many times the agent's log has `needle`. */
int h_agent_log_count(const h_agent_t *ag, const char *needle);
/* A TCP connection to the agent's address, saying nothing (asserts success). */
int h_agent_connect(const h_agent_t *ag);
/* Children of the agent: connections being authenticated, and workers. */
int h_agent_children(const h_agent_t *ag);
/* Params of a remote "counter" (tests/modules/test_actors.c) with its offset. */
adag_actor_params_t h_remote_params(const h_agent_t *ag, const char *name, const int64_t *offset);

#endif

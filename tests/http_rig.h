/*
 * A real HTTP server on loopback for the data suites (tests/http_rig.c):
 * Python's http.server (ThreadingHTTPServer, HTTP/1.1 with Content-Length)
 * serving the files of a directory, every request logged. Paths:
 *   /files/NAME       the file
 *   /flaky/K/NAME     HTTP 503 for the first K requests of this path, then the file
 *   /die/NAME         the first time (per marker file): the headers and half the body,
 *                     then the server kills itself with SIGKILL; later: the file
 *   /stall/NAME       the headers and half the body, then nothing (the connection
 *                     stays open for two minutes)
 *   /slow/MS/NAME     the file in 8 pieces, MS milliseconds apart
 */
#ifndef ADAG_TESTS_HTTP_RIG_H
#define ADAG_TESTS_HTTP_RIG_H

#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
    char root[256], log[256], portfile[256], script[256];
} http_server_t;

/* Starts a server for the files of root (port 0: any free one), waits
 * until it listens (asserts, at most 10 s). */
void http_start(http_server_t *s, const char *root, int port);
/* Kills it (if alive) and reaps it. */
void http_stop(http_server_t *s);
/* Whether it is still running (reaps it if it died). */
int http_alive(http_server_t *s);
/* Requests it received whose path is exactly path. */
int http_count(const http_server_t *s, const char *path);
/* "http://127.0.0.1:<port><path>" in one of 8 rotating buffers. */
const char *http_url(const http_server_t *s, const char *path);

#endif
